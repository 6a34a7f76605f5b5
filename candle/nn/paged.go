package nn

import (
	"errors"
	"math"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/flashattn"
)

// ErrCacheFull is the error of a step that needs more pages than a
// PagedKVCache has free: release finished sequences, or make the cache
// larger.
var ErrCacheFull = errors.New("KV cache full")

// PagedKVConfig is the shape of a PagedKVCache.
type PagedKVConfig struct {
	Layers   int // the model's layers, each with its own K and V pools
	Pages    int // pages per pool
	PageSize int // token rows per page
	KVHeads  int
	HeadDim  int
	// PrefixCaching keeps full pages after their sequences end, keyed by
	// their tokens and all those before them, for new sequences that
	// begin the same way to share (AttachPrefix).
	PrefixCaching bool
}

// PagedKVCache is the keys and values of many sequences of a decoder in
// pools of fixed-size pages (PagedAttention's layout, as vLLM keeps it):
// per layer, a K and a V pool of (pages, page size, KV heads, head dim) in
// the model's dtype, allocated once; a page allocator; and each sequence's
// list of pages (its block table). A sequence takes pages as it grows and
// gives them all back when released, so that sequences of any lengths
// share one pool without copies or fragmentation.
//
// A model runs each forward pass as a PagedStep: Begin reserves the pages
// of the new tokens (all or nothing), Attention writes each layer's new
// keys and values into their pages and attends over every sequence's
// cache, and Commit makes the new tokens part of their sequences (Close
// without Commit gives the reserved pages back: a failed pass appends
// nothing).
//
// A cache is not safe for concurrent use: the model that owns it
// serialises its steps and releases.
type PagedKVCache struct {
	cfg    PagedKVConfig
	dev    candle.Device
	dtype  candle.DType
	k, v   []*candle.Tensor // per layer, (pages, page size, KV heads, head dim)
	kr, vr []*candle.Tensor // the same pools as rows, (pages × page size, KV heads, head dim)
	free   []int32          // a stack of free pages: no sequence holds them, none is keyed
	prefix prefixState      // the pages' holders and keys (prefix.go)
	seqs   map[uint64]*pagedSeq
	step   *PagedStep // the step in flight, if any
	closed bool
}

type pagedSeq struct {
	pages []int32
	n     int // tokens held
	// With prefix caching: the tokens held, and the key of each full page.
	toks []int32
	keys []pageKey
}

// NewPagedKVCache allocates the pools of a cache on dev, zeroed: 2 ×
// Layers × Pages × PageSize × KVHeads × HeadDim elements of dt (F32, F16
// or BF16). The head dim is a multiple of 8 up to flashattn.MaxHeadDim, as
// attention takes it.
func NewPagedKVCache(dev candle.Device, dt candle.DType, cfg PagedKVConfig) (*PagedKVCache, error) {
	const op = "NewPagedKVCache"
	if dev == nil {
		return nil, pkg.Errorf(op, candle.ErrDevice, "nil device")
	}
	if _, ok := faDTypes[dt]; !ok {
		return nil, pkg.Errorf(op, candle.ErrDType, "%s: a KV cache holds f32, f16 or bf16", dt)
	}
	if cfg.Layers < 1 || cfg.Pages < 1 || cfg.PageSize < 1 || cfg.KVHeads < 1 {
		return nil, pkg.Errorf(op, candle.ErrArgument, "%+v: want at least one layer, page, row per page and KV head", cfg)
	}
	if cfg.HeadDim < 8 || cfg.HeadDim%8 != 0 || cfg.HeadDim > flashattn.MaxHeadDim {
		return nil, pkg.Errorf(op, candle.ErrArgument, "head dim %d: want a multiple of 8 from 8 to %d", cfg.HeadDim, flashattn.MaxHeadDim)
	}
	if int64(cfg.Pages)*int64(cfg.PageSize) > math.MaxInt32 {
		return nil, pkg.Errorf(op, candle.ErrArgument, "%d pages of %d rows: at most 2³¹ rows (the kernels count rows in int32)", cfg.Pages, cfg.PageSize)
	}
	c := &PagedKVCache{cfg: cfg, dev: dev, dtype: dt, seqs: map[uint64]*pagedSeq{}}
	for range cfg.Layers {
		for _, pool := range []*[]*candle.Tensor{&c.k, &c.v} {
			t, err := candle.Zeros(dev, dt, cfg.Pages, cfg.PageSize, cfg.KVHeads, cfg.HeadDim)
			if err != nil {
				c.Close()
				return nil, pkg.Wrapf(op, err, "the pools of %d layers", cfg.Layers)
			}
			*pool = append(*pool, t)
		}
	}
	for i := range cfg.Layers {
		kr, err := c.k[i].Reshape(cfg.Pages*cfg.PageSize, cfg.KVHeads, cfg.HeadDim)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.kr = append(c.kr, kr)
		vr, err := c.v[i].Reshape(cfg.Pages*cfg.PageSize, cfg.KVHeads, cfg.HeadDim)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.vr = append(c.vr, vr)
	}
	c.free = make([]int32, cfg.Pages)
	for i := range c.free {
		c.free[i] = int32(cfg.Pages - 1 - i) // page 0 first
	}
	c.prefix.init(cfg.Pages, cfg.PrefixCaching)
	return c, nil
}

// PagedKVBytesPerToken is the device memory a cache of this shape takes
// per token (keys and values of every layer), for sizing one.
func PagedKVBytesPerToken(dt candle.DType, layers, kvHeads, headDim int) int {
	return 2 * layers * kvHeads * headDim * dt.Size()
}

// Config is the cache's shape.
func (c *PagedKVCache) Config() PagedKVConfig { return c.cfg }

// DType is the pools' dtype.
func (c *PagedKVCache) DType() candle.DType { return c.dtype }

// Pools are layer's K and V pools, (pages, page size, KV heads, head dim):
// the cache's own tensors (do not close them).
func (c *PagedKVCache) Pools(layer int) (k, v *candle.Tensor) { return c.k[layer], c.v[layer] }

// FreePages is the number of pages no sequence holds: free, or kept for
// their prefix until a step needs them (CachedPages).
func (c *PagedKVCache) FreePages() int { return c.available() }

// FreeTokens is how many tokens the free pages hold (FreePages × PageSize;
// the unused rows of sequences' last pages are not counted).
func (c *PagedKVCache) FreeTokens() int { return c.available() * c.cfg.PageSize }

// Len is the number of tokens the cache holds for seq, and whether it
// holds the sequence at all.
func (c *PagedKVCache) Len(seq uint64) (int, bool) {
	s, ok := c.seqs[seq]
	if !ok {
		return 0, false
	}
	return s.n, true
}

// Sequences is the number of sequences held.
func (c *PagedKVCache) Sequences() int { return len(c.seqs) }

// Release forgets seq and gives its pages back; an unknown sequence is a
// no-op. With prefix caching, its keyed pages that no other sequence
// holds stay cached until a step needs them.
func (c *PagedKVCache) Release(seq uint64) {
	s, ok := c.seqs[seq]
	if !ok || c.closed {
		return
	}
	c.giveBack(s.pages)
	delete(c.seqs, seq)
}

// Close frees the pools (after the queued work that uses them). Closing
// twice does nothing.
func (c *PagedKVCache) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	closeAll(c.kr...)
	closeAll(c.vr...)
	closeAll(c.k...)
	closeAll(c.v...)
	c.seqs, c.free, c.prefix = nil, nil, prefixState{}
	return nil
}

// PagedStep is one forward pass over a paged cache: the new tokens of a
// batch of sequences, packed into rows in an order that lets attention run
// as few calls as possible (sequences with nothing cached first, then
// those that add one token, then the rest), with their pages reserved and
// the indices a pass needs on the device.
type PagedStep struct {
	c      *PagedKVCache
	seqs   []uint64
	start  []int // by input index: tokens cached before the step
	count  []int // by input index: new tokens
	row    []int // by input index: first packed row
	order  []int // input indices in packed order
	total  int
	newSeq []bool    // by input index: created by this step
	added  [][]int32 // by input index: the pages this step reserved
	toks   [][]int32 // by input index: the new tokens (the caller's), for Commit's keys

	nFresh, freshRows int // the first sequences packed have nothing cached: rows [0, freshRows)
	nDecode           int // then sequences adding one token each

	meta                                                 *candle.Tensor // U32, every index below
	tokens, positions, slots, last, cu, seqLens, btTable *candle.Tensor
	cuHost, seqLensHost                                  []int32 // seqLensHost: the cached sequences in packed order
	btStride                                             int
	gather                                               []*candle.Tensor // CPU: by input index, every cache row of the sequence
	fixed                                                *DecodeInputs    // BeginDecode's: the indices above are its views
	committed, closed                                    bool
}

// Begin starts a step that appends tokens[i] to sequence seqs[i] (created
// when the cache does not hold it). It reserves the pages the new tokens
// need, all or none: ErrCacheFull when the free pages are too few. The ids
// must be distinct and each sequence's tokens non-empty; the token ids are
// not checked here (the model knows its vocabulary). One step at a time:
// Close the last one first.
func (c *PagedKVCache) Begin(seqs []uint64, tokens [][]int32) (*PagedStep, error) {
	const op = "PagedKVCache.Begin"
	if c.closed {
		return nil, pkg.Errorf(op, candle.ErrClosed, "the cache is closed")
	}
	if c.step != nil {
		return nil, pkg.Errorf(op, candle.ErrArgument, "a step is in flight: Close it first")
	}
	if len(seqs) == 0 || len(seqs) != len(tokens) {
		return nil, pkg.Errorf(op, candle.ErrArgument, "%d sequences and %d token lists: want one non-empty list per sequence, at least one", len(seqs), len(tokens))
	}
	s := &PagedStep{c: c, seqs: append([]uint64(nil), seqs...), start: make([]int, len(seqs)), count: make([]int, len(seqs)),
		row: make([]int, len(seqs)), newSeq: make([]bool, len(seqs)), added: make([][]int32, len(seqs)), toks: tokens}
	seen := make(map[uint64]int, len(seqs))
	need := 0
	P := c.cfg.PageSize
	for i, id := range seqs {
		if j, dup := seen[id]; dup {
			return nil, pkg.Errorf(op, candle.ErrArgument, "sequence %d is both entry %d and entry %d of the batch: give each sequence's tokens once", id, j, i)
		}
		seen[id] = i
		n := len(tokens[i])
		if n == 0 {
			return nil, pkg.Errorf(op, candle.ErrArgument, "sequence %d (entry %d) has no new tokens", id, i)
		}
		held := 0
		if q, ok := c.seqs[id]; ok {
			if err := c.writable(op, id, q); err != nil {
				return nil, err
			}
			s.start[i], held = q.n, len(q.pages)
		} else {
			s.newSeq[i] = true
		}
		s.count[i] = n
		if int64(s.start[i])+int64(n) > int64(c.cfg.Pages)*int64(P) {
			return nil, pkg.Errorf(op, ErrCacheFull, "sequence %d would hold %d tokens; the whole cache holds %d", id, s.start[i]+n, c.cfg.Pages*P)
		}
		need += (s.start[i]+n+P-1)/P - held
	}
	if need > c.available() {
		return nil, pkg.Errorf(op, ErrCacheFull, "the step needs %d pages of %d tokens and %d are free (%d sequences hold the rest): release finished sequences or make the cache larger", need, P, c.available(), len(c.seqs))
	}
	// The packed order: nothing cached, one new token, the rest.
	for pass := range 3 {
		for i := range seqs {
			fresh, one := s.start[i] == 0, s.count[i] == 1
			if (pass == 0 && fresh) || (pass == 1 && !fresh && one) || (pass == 2 && !fresh && !one) {
				s.order = append(s.order, i)
				s.row[i] = s.total
				s.total += s.count[i]
				switch pass {
				case 0:
					s.nFresh++
					s.freshRows += s.count[i]
				case 1:
					s.nDecode++
				}
			}
		}
	}
	// Reserve the pages.
	for i, id := range seqs {
		held := 0
		if q, ok := c.seqs[id]; ok {
			held = len(q.pages)
		}
		s.added[i] = c.take((s.start[i]+s.count[i]+P-1)/P - held)
	}
	c.step = s
	if err := s.upload(tokens); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// pages is seqs[i]'s page list after the step, in two parts: the pages it
// held, then those the step reserved (no copy: upload runs every forward
// pass).
func (s *PagedStep) pages(i int) (held, added []int32) {
	if q, ok := s.c.seqs[s.seqs[i]]; ok {
		held = q.pages
	}
	return held, s.added[i]
}

// pageAt is page k of a list that pages returned.
func pageAt(held, added []int32, k int) int32 {
	if k < len(held) {
		return held[k]
	}
	return added[k-len(held)]
}

// upload builds the step's indices and copies them to the device at once:
// tokens, positions, slots (T each), last rows (batch), cumulative lengths
// of the fresh sequences, the cache lengths and the block table of the
// others.
func (s *PagedStep) upload(tokens [][]int32) error {
	P := s.c.cfg.PageSize
	T, B := s.total, len(s.seqs)
	cached := s.order[s.nFresh:]
	for _, i := range cached {
		s.btStride = max(s.btStride, (s.start[i]+s.count[i]+P-1)/P)
	}
	s.cuHost = make([]int32, s.nFresh+1)
	nMeta := 3*T + B + len(s.cuHost) + len(cached) + len(cached)*s.btStride
	meta := make([]uint32, nMeta)
	tok, pos, slot := meta[:T], meta[T:2*T], meta[2*T:3*T]
	last := meta[3*T : 3*T+B]
	off := 3*T + B
	cu := meta[off : off+len(s.cuHost)]
	off += len(s.cuHost)
	sl := meta[off : off+len(cached)]
	off += len(cached)
	bt := meta[off:]
	s.seqLensHost = make([]int32, 0, len(cached))
	for r, i := range s.order {
		held, added := s.pages(i)
		for j, id := range tokens[i] {
			p := s.start[i] + j
			row := s.row[i] + j
			tok[row] = uint32(id)
			pos[row] = uint32(p)
			slot[row] = uint32(int(pageAt(held, added, p/P))*P + p%P)
		}
		last[i] = uint32(s.row[i] + s.count[i] - 1)
		if r < s.nFresh {
			s.cuHost[r+1] = s.cuHost[r] + int32(s.count[i])
			cu[r+1] = uint32(s.cuHost[r+1])
		} else {
			c := r - s.nFresh
			n := s.start[i] + s.count[i]
			s.seqLensHost = append(s.seqLensHost, int32(n))
			sl[c] = uint32(n)
			for k := range len(held) + len(added) {
				bt[c*s.btStride+k] = uint32(pageAt(held, added, k))
			}
		}
	}
	dev := s.c.dev
	var err error
	if s.meta, err = candle.FromSlice(dev, meta); err != nil {
		return err
	}
	views := []struct {
		t         **candle.Tensor
		start, ln int
	}{{&s.tokens, 0, T}, {&s.positions, T, T}, {&s.slots, 2 * T, T}, {&s.last, 3 * T, B},
		{&s.cu, 3*T + B, len(s.cuHost)}, {&s.seqLens, 3*T + B + len(s.cuHost), len(cached)},
		{&s.btTable, 3*T + B + len(s.cuHost) + len(cached), len(cached) * s.btStride}}
	for _, v := range views {
		if *v.t, err = s.meta.Narrow(0, v.start, v.ln); err != nil {
			return err
		}
	}
	if _, ok := dev.(*candle.HIPDevice); ok {
		return nil
	}
	return s.gatherRows()
}

// gatherRows lists each sequence's cache rows after the step, for the
// CPU, which gathers them to attend over them.
func (s *PagedStep) gatherRows() error {
	P := s.c.cfg.PageSize
	dev := s.c.dev
	var err error
	s.gather = make([]*candle.Tensor, len(s.seqs))
	for i := range s.seqs {
		held, added := s.pages(i)
		n := s.start[i] + s.count[i]
		rows := make([]uint32, n)
		for p := range rows {
			rows[p] = uint32(int(pageAt(held, added, p/P))*P + p%P)
		}
		if s.gather[i], err = candle.FromSlice(dev, rows); err != nil {
			return err
		}
	}
	return nil
}

// Len is the number of new tokens, the packed rows.
func (s *PagedStep) Len() int { return s.total }

// Sequences is the number of sequences of the step (Begin's seqs).
func (s *PagedStep) Sequences() int { return len(s.seqs) }

// Rows are the packed rows of seqs[i]'s new tokens: count rows from start.
func (s *PagedStep) Rows(i int) (start, count int) { return s.row[i], s.count[i] }

// Start is how many tokens seqs[i] had cached before the step: the
// position of its first new token.
func (s *PagedStep) Start(i int) int { return s.start[i] }

// Tokens are the new tokens in packed order, U32 (Len()) on the cache's
// device; the step owns it (valid until Close).
func (s *PagedStep) Tokens() *candle.Tensor { return s.tokens }

// Positions are each packed token's position in its sequence, U32
// (Len()), for rotary embeddings; the step owns it.
func (s *PagedStep) Positions() *candle.Tensor { return s.positions }

// LastRows are the packed rows of each sequence's last new token, U32
// (len(seqs)) in the order of Begin's seqs (for the logits of the next
// token); the step owns it.
func (s *PagedStep) LastRows() *candle.Tensor { return s.last }

// EveryRowLast reports whether LastRows is 0, 1, …, Len()−1: each sequence
// adds one token, packed in Begin's order (a decode step), so that the
// rows of the next tokens' logits need no gather.
func (s *PagedStep) EveryRowLast() bool {
	if len(s.seqs) != s.total {
		return false
	}
	for i := range s.seqs {
		if s.row[i] != i || s.count[i] != 1 {
			return false
		}
	}
	return true
}

// Attention writes layer's new keys and values into their pages and
// returns each new token's attention over its sequence's cache, the new
// tokens included: q (Len(), h_q, d), k and v (Len(), h_kv, d) in packed
// order, views whose head dim is contiguous read in place (as narrowed out
// of a fused QKV projection); the result is (Len(), h_q, d), contiguous.
// It is causal (p.Causal is implied); p's Window, Scale, SoftCap and
// AlibiSlopes apply with each sequence's positions; p.LSE must be zero.
//
// On a HIP device it is package flashattn: ForwardVarlen over the new
// keys of the sequences with nothing cached, one Decode over the pages of
// all those that add one token, and one Decode for each other sequence.
// On the CPU it gathers each sequence's pages and runs flashattn's float64
// reference.
func (s *PagedStep) Attention(layer int, q, k, v *candle.Tensor, p flashattn.Params) (*candle.Tensor, error) {
	const op = "PagedStep.Attention"
	c := s.c
	if err := s.checkCall(op, layer, p); err != nil {
		return nil, err
	}
	if q == nil || k == nil || v == nil {
		return nil, pkg.Errorf(op, candle.ErrArgument, "nil q, k or v")
	}
	hkv, hd := c.cfg.KVHeads, c.cfg.HeadDim
	qs := q.Shape()
	if len(qs) != 3 || qs[0] != s.total || qs[2] != hd || qs[1]%hkv != 0 {
		return nil, pkg.Errorf(op, candle.ErrShape, "q is %v: want (%d, h_q, %d), h_q a multiple of %d", qs, s.total, hd, hkv)
	}
	for _, x := range []struct {
		name string
		t    *candle.Tensor
	}{{"k", k}, {"v", v}} {
		if !x.t.Shape().Equal(candle.Shape{s.total, hkv, hd}) {
			return nil, pkg.Errorf(op, candle.ErrShape, "%s is %v: want (%d, %d, %d)", x.name, x.t.Shape(), s.total, hkv, hd)
		}
	}
	for _, t := range []*candle.Tensor{q, k, v} {
		if t.DType() != c.dtype {
			return nil, pkg.Errorf(op, candle.ErrDType, "%s operands for a %s cache: convert them with ToDType", t.DType(), c.dtype)
		}
		if t.Device() != c.dev {
			return nil, pkg.Errorf(op, candle.ErrDevice, "operands on %s for a cache on %s", t.Device(), c.dev)
		}
	}
	if err := c.kr[layer].IndexAssign(s.slots, k, 0); err != nil {
		return nil, err
	}
	if err := c.vr[layer].IndexAssign(s.slots, v, 0); err != nil {
		return nil, err
	}
	p.Causal = true
	if d, ok := c.dev.(*candle.HIPDevice); ok {
		return s.attentionHIP(op, d, layer, q, k, v, p, nil)
	}
	return s.attentionCPU(layer, q, p)
}

// checkCall checks what Attention and AttentionQKV share: an open step,
// the layer, no LSE.
func (s *PagedStep) checkCall(op string, layer int, p flashattn.Params) error {
	if s.closed {
		return pkg.Errorf(op, candle.ErrClosed, "the step is closed")
	}
	if layer < 0 || layer >= s.c.cfg.Layers {
		return pkg.Errorf(op, candle.ErrArgument, "layer %d of a cache of %d", layer, s.c.cfg.Layers)
	}
	if p.LSE != 0 {
		return pkg.Errorf(op, candle.ErrArgument, "Params.LSE is set: paged attention returns no log-sum-exp")
	}
	return nil
}

// AttentionQKV is Attention from a fused projection's heads with their
// rotary embeddings: qkv (Len(), h_q + 2·h_kv, d) holds each new token's
// query, key and value heads; the query and key heads are rotated by cos
// and sin (Len(), d/2: each token's angles, half-split pairs as
// candle.Tensor.RoPETHD). When every sequence of the step has a cache on
// a HIP device, the rotation and the cache writes are one op
// (candle.Tensor.RoPECache); with one new token a sequence (a decode
// step) where flashattn runs its LLM step's kernel, they are part of the
// attention's kernel (flashattn.Params.Rotary); otherwise it is RoPETHD
// and Attention.
func (s *PagedStep) AttentionQKV(layer int, qkv, cos, sin *candle.Tensor, p flashattn.Params) (*candle.Tensor, error) {
	const op = "PagedStep.AttentionQKV"
	c := s.c
	if err := s.checkCall(op, layer, p); err != nil {
		return nil, err
	}
	if qkv == nil || cos == nil || sin == nil {
		return nil, pkg.Errorf(op, candle.ErrArgument, "nil qkv, cos or sin")
	}
	hkv, hd := c.cfg.KVHeads, c.cfg.HeadDim
	qs := qkv.Shape()
	if len(qs) != 3 || qs[0] != s.total || qs[2] != hd || qs[1] <= 2*hkv || (qs[1]-2*hkv)%hkv != 0 {
		return nil, pkg.Errorf(op, candle.ErrShape, "qkv is %v: want (%d, h_q + %d, %d), h_q a multiple of %d", qs, s.total, 2*hkv, hd, hkv)
	}
	if qkv.DType() != c.dtype {
		return nil, pkg.Errorf(op, candle.ErrDType, "%s operands for a %s cache: convert them with ToDType", qkv.DType(), c.dtype)
	}
	if qkv.Device() != c.dev {
		return nil, pkg.Errorf(op, candle.ErrDevice, "operands on %s for a cache on %s", qkv.Device(), c.dev)
	}
	hq := qs[1] - 2*hkv
	if d, ok := c.dev.(*candle.HIPDevice); ok && s.nFresh == 0 {
		p.Causal = true
		if s.EveryRowLast() {
			// One new token a sequence: flashattn's decode kernel turns q
			// and the new keys and writes the new rows itself
			// (flashattn.Params.Rotary), where it runs the LLM step's kernel.
			out, err := s.attentionRotary(op, d, layer, qkv, cos, sin, hq, p)
			if !errors.Is(err, candle.ErrUnsupported) {
				return out, err
			}
		}
		q, err := qkv.RoPECache(cos, sin, hq, s.slots, c.kr[layer], c.vr[layer])
		if err != nil {
			return nil, err
		}
		defer q.Close() // after the attention's launches are queued
		return s.attentionHIP(op, d, layer, q, nil, nil, p, nil)
	}
	q, k, v, err := qkv.RoPEQKV(cos, sin, hq)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	defer k.Close()
	defer v.Close()
	return s.Attention(layer, q, k, v, p)
}

func (s *PagedStep) attentionCPU(layer int, q *candle.Tensor, p flashattn.Params) (*candle.Tensor, error) {
	c := s.c
	out, err := candle.Zeros(c.dev, c.dtype, q.Shape()...)
	if err != nil {
		return nil, err
	}
	for i := range s.seqs {
		if err := s.attendOne(i, layer, q, out, p); err != nil {
			out.Close()
			return nil, err
		}
	}
	return out, nil
}

// attendOne is sequence i's attention on the CPU, written into out.
func (s *PagedStep) attendOne(i, layer int, q, out *candle.Tensor, p flashattn.Params) error {
	c := s.c
	var tmp []*candle.Tensor
	defer func() { closeAll(tmp...) }()
	keep := func(t *candle.Tensor, err error) (*candle.Tensor, error) {
		if err == nil {
			tmp = append(tmp, t)
		}
		return t, err
	}
	qi, err := keep(q.Narrow(0, s.row[i], s.count[i]))
	if err != nil {
		return err
	}
	if qi, err = keep(qi.Unsqueeze(0)); err != nil {
		return err
	}
	var kv [2]*candle.Tensor
	for j, pool := range []*candle.Tensor{c.kr[layer], c.vr[layer]} {
		rows, err := keep(pool.IndexSelect(s.gather[i], 0))
		if err != nil {
			return err
		}
		if kv[j], err = keep(rows.Unsqueeze(0)); err != nil {
			return err
		}
	}
	o, err := keep(ScaledDotProductAttention(qi, kv[0], kv[1], p))
	if err != nil {
		return err
	}
	o3, err := keep(o.Squeeze(0))
	if err != nil {
		return err
	}
	return out.SliceAssign(o3, 0, s.row[i])
}

// attentionRotary is a decode step's AttentionQKV through
// flashattn.Params.Rotary: q, the new keys and the values read in place
// from qkv; candle.ErrUnsupported when the decode kernel does not take
// it (nothing launched then).
func (s *PagedStep) attentionRotary(op string, d *candle.HIPDevice, layer int, qkv, cos, sin *candle.Tensor, hq int, p flashattn.Params) (*candle.Tensor, error) {
	hkv := s.c.cfg.KVHeads
	angles := candle.Shape{s.total, s.c.cfg.HeadDim / 2}
	// Anything else goes to RoPECache, which says what is wrong with it.
	if !cos.Shape().Equal(angles) || !sin.Shape().Equal(angles) || !cos.IsContiguous() || !sin.IsContiguous() ||
		cos.DType() != qkv.DType() || sin.DType() != qkv.DType() || cos.Device() != qkv.Device() || sin.Device() != qkv.Device() {
		return nil, candle.ErrUnsupported
	}
	var rot rotaryAngles
	for i, x := range []*candle.Tensor{cos, sin} {
		ptr, err := x.DevicePtr()
		if err != nil || ptr%16 != 0 {
			return nil, candle.ErrUnsupported // the kernel reads 16-byte rows
		}
		rot[i] = ptr
	}
	var parts [3]*candle.Tensor // q, k, v
	for i, h := range [][2]int{{0, hq}, {hq, hkv}, {hq + hkv, hkv}} {
		x, err := qkv.Narrow(1, h[0], h[1])
		if err != nil {
			closeAll(parts[:i]...)
			return nil, err
		}
		parts[i] = x
	}
	defer closeAll(parts[:]...)
	return s.attentionHIP(op, d, layer, parts[0], parts[1], parts[2], p, &rot)
}

// rotaryAngles are a decode step's cos and sin (Len(), d/2), contiguous
// and 16-byte aligned, by device pointer: with them attentionHIP's k and
// v are the step's new keys (before rotation) and values, which its
// Decode turns and writes (flashattn.Params.Rotary).
type rotaryAngles [2]candle.DevicePtr

func (s *PagedStep) attentionHIP(op string, d *candle.HIPDevice, layer int, q, k, v *candle.Tensor, p flashattn.Params, rot *rotaryAngles) (*candle.Tensor, error) {
	c := s.c
	dt := faDTypes[c.dtype]
	h, err := handle(d)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	out, err := candle.Empty(d, c.dtype, q.Shape()...)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*candle.Tensor, error) {
		out.Close()
		return nil, err
	}
	type operand struct {
		ptr         candle.DevicePtr
		row, head   int
		heads, size int
	}
	var ops [4]operand
	for j, t := range []*candle.Tensor{q, k, v, out} {
		if t == nil { // k and v of a step with no fresh sequence: read from the cache
			continue
		}
		p, l, tmp, err := headContiguous(t)
		if err != nil {
			return fail(err)
		}
		if tmp != nil {
			defer tmp.Close() // after the calls are queued
		}
		ops[j] = operand{ptr: p, row: l.Stride[0], head: l.Stride[1], heads: t.Dim(1), size: c.dtype.Size()}
	}
	hd := c.cfg.HeadDim
	// tensor is rows [r0, r0+b·n) of an operand as (b, n, heads, d).
	tensor := func(o operand, r0, b, n int) flashattn.Tensor {
		return flashattn.Tensor{Ptr: o.ptr.Add(r0 * o.row * o.size), DType: dt, Shape: [4]int{b, n, o.heads, hd},
			Stride: [4]int{n * o.row, o.row, o.head, 1}}
	}
	if s.nFresh > 0 {
		cu, err := s.cu.DevicePtr()
		if err != nil {
			return fail(err)
		}
		n := s.freshRows
		vl := flashattn.Varlen{CuSeqlensQ: s.cuHost, CuSeqlensK: s.cuHost, DevCuSeqlensQ: cu, DevCuSeqlensK: cu}
		if _, err := h.ForwardVarlen(tensor(ops[0], 0, 1, n), tensor(ops[1], 0, 1, n), tensor(ops[2], 0, 1, n), tensor(ops[3], 0, 1, n), vl, p); err != nil {
			return fail(pkg.Wrap(op, err))
		}
	}
	if s.nFresh == len(s.seqs) {
		return out, nil
	}
	bt, err := s.btTable.DevicePtr()
	if err != nil {
		return fail(err)
	}
	sl, err := s.seqLens.DevicePtr()
	if err != nil {
		return fail(err)
	}
	pool := func(t *candle.Tensor) (flashattn.Tensor, error) {
		ptr, err := t.DevicePtr()
		cf := c.cfg
		return flashattn.Contiguous(ptr, dt, cf.Pages, cf.PageSize, cf.KVHeads, hd), err
	}
	kp, err := pool(c.k[layer])
	if err != nil {
		return fail(err)
	}
	vp, err := pool(c.v[layer])
	if err != nil {
		return fail(err)
	}
	if rot != nil {
		// A decode step (one row a sequence, in order): rows 0 to Len().
		p.Rotary = &flashattn.Rotary{NewK: tensor(ops[1], 0, s.total, 1), NewV: tensor(ops[2], 0, s.total, 1), Cos: rot[0], Sin: rot[1], CosStride: hd / 2}
	}
	if s.fixed != nil {
		// The inputs' table and lengths (s.btTable and s.seqLens are their
		// views), a launch sized for MaxLen.
		kv := flashattn.PagedKV{K: kp, V: vp, BlockTable: bt, BlockTableStride: s.btStride, DevSeqLens: sl, MaxSeqLen: s.fixed.maxLen}
		if err := decodeFixed(h, d, tensor(ops[0], 0, s.total, 1), kv, tensor(ops[3], 0, s.total, 1), p); err != nil {
			return fail(pkg.Wrap(op, err))
		}
		return out, nil
	}
	// decode attends rows of b sequences of n new tokens each, cached
	// sequences c0 to c0+b in packed order.
	decode := func(c0, b, n int) error {
		r0 := s.row[s.order[s.nFresh+c0]]
		kv := flashattn.PagedKV{K: kp, V: vp, BlockTable: bt.Add(c0 * s.btStride * 4), BlockTableStride: s.btStride,
			SeqLens: s.seqLensHost[c0 : c0+b], DevSeqLens: sl.Add(c0 * 4)}
		_, err := h.Decode(tensor(ops[0], r0, b, n), kv, tensor(ops[3], r0, b, n), p)
		return err
	}
	if s.nDecode > 0 {
		if err := decode(0, s.nDecode, 1); err != nil {
			return fail(pkg.Wrap(op, err))
		}
	}
	for c0 := s.nDecode; s.nFresh+c0 < len(s.order); c0++ {
		if err := decode(c0, 1, s.count[s.order[s.nFresh+c0]]); err != nil {
			return fail(pkg.Wrap(op, err))
		}
	}
	return out, nil
}

// Commit makes the step's tokens part of their sequences (the caller has
// run Attention on every layer).
func (s *PagedStep) Commit() {
	if s.closed || s.committed {
		return
	}
	s.committed = true
	for i, id := range s.seqs {
		q, ok := s.c.seqs[id]
		if !ok {
			q = &pagedSeq{}
			s.c.seqs[id] = q
		}
		q.pages = append(q.pages, s.added[i]...)
		q.n += s.count[i]
		s.added[i] = nil
		if s.c.prefix.on {
			s.c.keyFull(q, s.toks[i])
		}
	}
	s.toks = nil
}

// Close ends the step: without Commit, its pages go back to the cache and
// the sequences stay as they were (what the step wrote into its pages is
// never read). Closing twice does nothing.
func (s *PagedStep) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if !s.committed && !s.c.closed {
		for _, pages := range s.added {
			s.c.giveBack(pages)
		}
	}
	s.toks = nil
	if s.c.step == s {
		s.c.step = nil
	}
	if s.fixed == nil { // else the inputs' own
		closeAll(s.tokens, s.positions, s.slots, s.last, s.cu, s.seqLens, s.btTable, s.meta)
	}
	closeAll(s.gather...)
	return nil
}
