package nn

import (
	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/flashattn"
)

// DecodeInputs are the inputs of decode steps of a fixed batch size over a
// PagedKVCache, in one U32 buffer on the cache's device allocated once:
// the new tokens, their positions and cache rows, the rows of the logits,
// the sequences' lengths and their block table, as wide as MaxLen tokens
// need. BeginDecode writes a step's values into it with one copy, and
// every kernel of the step reads them from there, at the same addresses
// each step, with a launch sized for MaxLen rather than for the step's
// lengths (flashattn.PagedKV.MaxSeqLen): nothing a step queues depends on
// its values, so a graph captured from one step (candle.Capture) replays
// any later one.
//
// Inputs belong to their cache and are not safe for concurrent use, as
// the cache is not.
type DecodeInputs struct {
	c      *PagedKVCache
	batch  int
	maxLen int
	width  int      // block-table entries of a sequence
	host   []uint32 // the buffer's values, written each step
	st     *candle.Storage
	all    *candle.Tensor
	// Views of all.
	tokens, positions, slots, last, seqLens, table *candle.Tensor
	closed                                         bool
}

// NewDecodeInputs allocates the inputs of decode steps of batch sequences
// that hold up to maxLen tokens each after the step (the model's context
// length, say): 5·batch + batch·⌈maxLen / page size⌉ U32 elements.
func (c *PagedKVCache) NewDecodeInputs(batch, maxLen int) (*DecodeInputs, error) {
	const op = "PagedKVCache.NewDecodeInputs"
	if c.closed {
		return nil, pkg.Errorf(op, candle.ErrClosed, "the cache is closed")
	}
	P := c.cfg.PageSize
	if batch < 1 || maxLen < 1 || maxLen > c.cfg.Pages*P {
		return nil, pkg.Errorf(op, candle.ErrArgument, "batch %d of up to %d tokens: want at least one sequence of at least one token, at most the %d tokens the cache holds", batch, maxLen, c.cfg.Pages*P)
	}
	in := &DecodeInputs{c: c, batch: batch, maxLen: maxLen, width: (maxLen + P - 1) / P}
	in.host = make([]uint32, 5*batch+batch*in.width)
	var err error
	if in.st, err = candle.NewStorage(c.dev, in.host); err != nil {
		return nil, pkg.Wrap(op, err)
	}
	if in.all, err = candle.FromStorage(in.st, candle.Shape{len(in.host)}); err != nil {
		in.Close()
		return nil, err
	}
	views := []struct {
		t         **candle.Tensor
		start, ln int
	}{{&in.tokens, 0, batch}, {&in.positions, batch, batch}, {&in.slots, 2 * batch, batch}, {&in.last, 3 * batch, batch},
		{&in.seqLens, 4 * batch, batch}, {&in.table, 5 * batch, batch * in.width}}
	for _, v := range views {
		if *v.t, err = in.all.Narrow(0, v.start, v.ln); err != nil {
			in.Close()
			return nil, err
		}
	}
	return in, nil
}

// Batch is the sequences of a step.
func (in *DecodeInputs) Batch() int { return in.batch }

// MaxLen is the most tokens a sequence may hold after a step.
func (in *DecodeInputs) MaxLen() int { return in.maxLen }

// Close frees the buffer (after the queued work that reads it). Closing
// twice does nothing.
func (in *DecodeInputs) Close() error {
	if in == nil || in.closed {
		return nil
	}
	in.closed = true
	closeAll(in.tokens, in.positions, in.slots, in.last, in.seqLens, in.table, in.all)
	if in.st != nil {
		in.st.Close()
	}
	return nil
}

// BeginDecode starts a decode step that appends tokens[i] to sequence
// seqs[i], each a sequence the cache holds, through in: it reserves the
// pages of the new tokens (all or none: ErrCacheFull), writes the step's
// inputs into in's buffer, and returns the step, whose Tokens, Positions
// and LastRows are in's (valid until in closes) and whose Attention reads
// the lengths and the block table there. LastRows is 0 to batch-1: the
// packed rows are in the order of seqs. The ids must be distinct, as many
// as in's batch, and no sequence may exceed in.MaxLen() tokens. One step
// at a time, as Begin.
func (c *PagedKVCache) BeginDecode(seqs []uint64, tokens []int32, in *DecodeInputs) (*PagedStep, error) {
	const op = "PagedKVCache.BeginDecode"
	if c.closed {
		return nil, pkg.Errorf(op, candle.ErrClosed, "the cache is closed")
	}
	if in == nil || in.c != c {
		return nil, pkg.Errorf(op, candle.ErrArgument, "inputs of another cache (or nil): make them with this cache's NewDecodeInputs")
	}
	if in.closed {
		return nil, pkg.Errorf(op, candle.ErrClosed, "the inputs are closed")
	}
	if c.step != nil {
		return nil, pkg.Errorf(op, candle.ErrArgument, "a step is in flight: Close it first")
	}
	B := in.batch
	if len(seqs) != B || len(tokens) != B {
		return nil, pkg.Errorf(op, candle.ErrArgument, "%d sequences and %d tokens for inputs of batch %d: want one token per sequence, %d sequences", len(seqs), len(tokens), B, B)
	}
	P := c.cfg.PageSize
	need := 0
	seen := make(map[uint64]int, B)
	for i, id := range seqs {
		if j, dup := seen[id]; dup {
			return nil, pkg.Errorf(op, candle.ErrArgument, "sequence %d is both entry %d and entry %d of the batch: give each sequence's token once", id, j, i)
		}
		seen[id] = i
		q, ok := c.seqs[id]
		if !ok {
			return nil, pkg.Errorf(op, candle.ErrArgument, "sequence %d (entry %d) is not in the cache: a decode step continues a sequence; run its prompt through Begin", id, i)
		}
		if err := c.writable(op, id, q); err != nil {
			return nil, err
		}
		if q.n+1 > in.maxLen {
			return nil, pkg.Errorf(op, candle.ErrArgument, "sequence %d (entry %d) would hold %d tokens; the inputs take up to %d", id, i, q.n+1, in.maxLen)
		}
		need += (q.n+P)/P - len(q.pages)
	}
	if need > c.available() {
		return nil, pkg.Errorf(op, ErrCacheFull, "the step needs %d pages of %d tokens and %d are free (%d sequences hold the rest): release finished sequences or make the cache larger", need, P, c.available(), len(c.seqs))
	}
	s := &PagedStep{c: c, seqs: append([]uint64(nil), seqs...), start: make([]int, B), count: make([]int, B),
		row: make([]int, B), order: make([]int, B), total: B, newSeq: make([]bool, B), added: make([][]int32, B),
		nDecode: B, fixed: in, btStride: in.width, toks: make([][]int32, B),
		tokens: in.tokens, positions: in.positions, slots: in.slots, last: in.last, seqLens: in.seqLens, btTable: in.table}
	h := in.host
	tok, pos, slot, last, sl, bt := h[:B], h[B:2*B], h[2*B:3*B], h[3*B:4*B], h[4*B:5*B], h[5*B:]
	for i, id := range seqs {
		q := c.seqs[id]
		n := q.n
		s.start[i], s.count[i], s.row[i], s.order[i] = n, 1, i, i
		s.added[i] = c.take((n+P)/P - len(q.pages))
		s.toks[i] = tokens[i : i+1]
		held, added := s.pages(i)
		tok[i], pos[i], last[i], sl[i] = uint32(tokens[i]), uint32(n), uint32(i), uint32(n+1)
		slot[i] = uint32(int(pageAt(held, added, n/P))*P + n%P)
		for k := range len(held) + len(added) {
			bt[i*in.width+k] = uint32(pageAt(held, added, k))
		}
	}
	c.step = s
	if err := in.st.Write(h); err != nil {
		s.Close()
		return nil, pkg.Wrap(op, err)
	}
	if _, ok := c.dev.(*candle.HIPDevice); !ok {
		if err := s.gatherRows(); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// decodeFixed is the attention of a BeginDecode step on a HIP device: one
// flashattn Decode of q (batch, 1, h_q, d) into out over kv, the layer's
// pages with the lengths and the block table in the inputs' buffer, and
// its split-KV partials in a workspace from the device's pool (a
// capture's private memory under capture).
func decodeFixed(h *flashattn.Handle, d *candle.HIPDevice, q flashattn.Tensor, kv flashattn.PagedKV, out flashattn.Tensor, p flashattn.Params) error {
	n, err := h.DecodeWorkspace(q, kv, out, p)
	if err != nil {
		return err
	}
	if n > 0 {
		ws, err := candle.Empty(d, candle.U8, n)
		if err != nil {
			return err
		}
		defer ws.Close() // after the call is queued: the pool orders its reuse
		if p.Workspace, err = ws.DevicePtr(); err != nil {
			return err
		}
		p.WorkspaceBytes = n
	}
	_, err = h.Decode(q, kv, out, p)
	return err
}
