package llama

import (
	"fmt"
	"math"
	"sync"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/nn"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/flashattn"
)

// Options size what Load allocates beside the weights; zero values choose.
type Options struct {
	// CacheTokens is how many tokens the KV cache holds over all
	// sequences. Zero: the context length × MaxBatch, bounded by 80% of
	// the device memory free after the weights are loaded (on a HIP
	// device), or by 1 GiB of cache (on the CPU).
	CacheTokens int
	// PageSize is the tokens per cache page (default 16).
	PageSize int
	// MaxBatch is the most sequences one Forward takes (default 64).
	MaxBatch int
	// Progress, when not nil, hears after each weight how many bytes of
	// the weights (in the dtype loaded) are on the device, of the total.
	Progress func(done, total int64)
	// NoGraphs runs decode steps on a HIP device op by op instead of
	// replaying a captured graph (for debugging and comparisons; SetGraphs
	// switches later).
	NoGraphs bool
	// MaxGraphs is the most decode graphs the model keeps, one per batch
	// size (default 16); a new batch size beyond it replaces the least
	// recently used.
	MaxGraphs int
}

// Defaults of Options.
const (
	DefaultPageSize = 16
	DefaultMaxBatch = 64
	// DefaultMaxGraphs is Options.MaxGraphs's default.
	DefaultMaxGraphs = 16
	// cpuCacheBytes bounds the default cache on the CPU device.
	cpuCacheBytes = 1 << 30
	// gpuCacheFraction of the free device memory is the default cache's
	// bound on a HIP device; the rest is for activations.
	gpuCacheFraction = 0.8
)

// Model is a Llama-family decoder (Llama 2 and 3.x, Mistral, Qwen2/2.5)
// on a candle device, with a paged KV cache shared by every sequence
// (nn.PagedKVCache). Its methods are safe for concurrent use; forward
// passes run one at a time.
//
// The weights are those of the Hugging Face folder, in the dtype Load is
// given, with two fusions made at load time so that each layer runs fewer,
// larger products: q, k and v projections are one (q·k·v rows, hidden)
// matrix, and the MLP's gate and up projections one (2·intermediate,
// hidden) matrix, whose product is taken transposed so that the gate and
// the up halves come out as contiguous blocks for the fused SiLU gate. A
// layer is: RMSNorm, the fused QKV product (+ biases), rotary embeddings
// of q and k at each token's position (one fused op over both), the new
// keys and values scattered into their cache pages, causal attention over
// each sequence's cache (GQA, and a sliding window where the config has
// one), o_proj, the residual; RMSNorm, the gate/up product, SiLU(gate) ·
// up, down, the residual. The logits are those of the final RMSNorm and
// lm_head (the embedding table when tied) on each sequence's last token.
//
// On a HIP device, a decode step (every sequence of the batch cached, one
// new token each) replays a graph (candle.Graph) that holds the whole
// forward pass: its inputs (tokens, positions, cache rows, lengths, block
// table) go to one fixed device buffer with one copy (nn.DecodeInputs),
// and one launch runs every kernel, with no host work between them. The
// graph of a batch size is captured at its first decode step, which runs
// the step three times (a rehearsal, the capture, a replay); no other
// work may use the device during that step (it would be captured). Each
// graph keeps private device memory for its activations and logits
// (candle.MemoryStats.Graphs) until the model closes or a newer batch size
// replaces it (Options.MaxGraphs). Prefills and mixed batches run op by
// op; so does everything on the CPU device.
type Model struct {
	mu       sync.Mutex
	cfg      *Config
	dev      candle.Device
	dtype    candle.DType
	embed    *candle.Tensor  // (vocab, hidden), or nil when quantized
	embedQ   *candle.QTensor // (vocab, hidden) when quantized (GGUF)
	lmHead   linear          // (vocab, hidden): lm_head, or the embeddings when tied
	norm     *candle.Tensor
	layers   []*layer
	rope     *candle.Tensor // (2, context, head dim / 2) in the model's dtype: cos, then sin
	cache    *nn.PagedKVCache
	ctx      int
	maxBatch int
	mlpRows  int // the most tokens an MLP product takes at once (mlpRows)
	closed   bool

	graphsOn  bool                 // decode steps replay graphs
	maxGraphs int                  // Options.MaxGraphs
	graphs    map[int]*decodeGraph // by batch size (graph.go)
	tick      uint64               // decode steps, for the graphs' last use
}

type layer struct {
	inNorm, postNorm *candle.Tensor
	qkv              linear         // (q+k+v rows, hidden)
	qkvBias          *candle.Tensor // (q+k+v rows) or nil
	o                linear         // (hidden, heads·head dim)
	oBias            *candle.Tensor
	gateUp           linear         // (2·intermediate, hidden)
	gateUpBias       *candle.Tensor // (2·intermediate, 1) or nil
	down             linear         // (hidden, intermediate)
	downBias         *candle.Tensor
	attn             flashattn.Params // the layer's sliding window, if any
}

func (l *layer) close() {
	closeAll(l.inNorm, l.postNorm, l.qkvBias, l.oBias, l.gateUpBias, l.downBias)
	for _, w := range []*linear{&l.qkv, &l.o, &l.gateUp, &l.down} {
		w.close()
	}
}

// linear is a projection's weight (out, in): dense (w, and wT its
// transposed view, which the products take), or quantized blocks (GGUF),
// one QTensor or, when the fused projections' parts have different
// types, one per part, their outputs concatenated.
type linear struct {
	w, wT *candle.Tensor
	q     []*candle.QTensor
}

func (w *linear) close() {
	closeAll(w.wT, w.w)
	for _, q := range w.q {
		q.Close()
	}
}

// dense makes a linear of a dense weight (out, in); it takes w.
func dense(w *candle.Tensor) (linear, error) {
	if w == nil {
		return linear{}, nil
	}
	wT, err := w.T()
	if err != nil {
		w.Close()
		return linear{}, err
	}
	return linear{w: w, wT: wT}, nil
}

func closeAll(ts ...*candle.Tensor) {
	for _, t := range ts {
		if t != nil {
			t.Close()
		}
	}
}

// Load opens a model path once (models.Open: a Hugging Face folder with
// config.json and safetensors weights, or a GGUF file) and builds the
// model from it (New).
func Load(path string, dev candle.Device, dtype candle.DType, opts Options) (*Model, error) {
	c, err := models.Open(path)
	if err != nil {
		return nil, pkg.Wrap("Load", err)
	}
	defer c.Close()
	m, err := New(c, dev, dtype, opts)
	return m, pkg.Wrap("Load", err)
}

// New builds the model of a checkpoint (ConfigOf) on dev, computing in
// dtype (F32, F16 or BF16; Config.DType is the checkpoint's own), and
// allocates its KV cache as opts say. The weights of a Hugging Face folder
// load as dtype; a GGUF file's quantized matrices stay quantized on the
// device (candle.QTensor), its norms and float matrices become dtype.
// Every tensor reaches a HIP device through candle's pipelined upload. A
// missing or mis-shaped weight is an error that names it. The checkpoint
// stays the caller's to close once New returns.
func New(c *models.Checkpoint, dev candle.Device, dtype candle.DType, opts Options) (*Model, error) {
	const op = "New"
	if err := checkLoad(op, dev, dtype, opts); err != nil {
		return nil, err
	}
	if c == nil || c.Weights == nil {
		return nil, pkg.Errorf(op, errs.ErrArgument, "no checkpoint")
	}
	cfg, err := ConfigOf(c)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	vb, err := nn.NewVarBuilder(c.Weights, dev, dtype)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	load := func(m *Model) error { return m.loadWeights(vb, opts.Progress) }
	if c.Format == models.GGUF {
		load = func(m *Model) error { return m.loadGGUF(vb, opts.Progress) }
	}
	return newModel(op, cfg, dev, dtype, opts, load)
}

// checkLoad checks a loader's arguments.
func checkLoad(op string, dev candle.Device, dtype candle.DType, opts Options) error {
	if dev == nil {
		return pkg.Errorf(op, candle.ErrDevice, "nil device")
	}
	if dtype != candle.F32 && dtype != candle.F16 && dtype != candle.BF16 {
		return pkg.Errorf(op, candle.ErrDType, "%s: the model runs in f32, f16 or bf16", dtype)
	}
	if opts.CacheTokens < 0 || opts.PageSize < 0 || opts.MaxBatch < 0 {
		return pkg.Errorf(op, candle.ErrArgument, "options %+v: none may be negative", opts)
	}
	if opts.MaxGraphs < 0 {
		return pkg.Errorf(op, candle.ErrArgument, "Options.MaxGraphs %d: want 0 (default %d) or more", opts.MaxGraphs, DefaultMaxGraphs)
	}
	return nil
}

// newModel makes a model of cfg whose weights load does, and allocates
// its cache.
func newModel(op string, cfg *Config, dev candle.Device, dtype candle.DType, opts Options, load func(*Model) error) (*Model, error) {
	m := &Model{cfg: cfg, dev: dev, dtype: dtype, graphsOn: !opts.NoGraphs, maxGraphs: opts.MaxGraphs, graphs: map[int]*decodeGraph{}, mlpRows: mlpRows}
	if m.maxGraphs == 0 {
		m.maxGraphs = DefaultMaxGraphs
	}
	if err := load(m); err != nil {
		m.Close()
		return nil, pkg.Wrap(op, err)
	}
	if err := m.allocate(opts); err != nil {
		m.Close()
		return nil, pkg.Wrap(op, err)
	}
	return m, nil
}

// loader loads tensors and remembers the first error, so that the list of
// weights reads as a list.
type loader struct {
	vb          *nn.VarBuilder
	err         error
	done, total int64
	progress    func(done, total int64)
}

func (l *loader) get(name string, shape ...int) *candle.Tensor {
	if l.err != nil {
		return nil
	}
	t, err := l.vb.Get(name, shape...)
	l.err = err
	if err == nil && l.progress != nil {
		l.done += int64(t.Elems()) * int64(t.DType().Size())
		l.progress(min(l.done, l.total), l.total)
	}
	return t
}

// cat loads tensors and concatenates them along dim 0 (the fused
// projections).
func (l *loader) cat(parts ...*candle.Tensor) *candle.Tensor {
	defer closeAll(parts...)
	if l.err != nil {
		return nil
	}
	t, err := candle.Cat(parts, 0)
	l.err = err
	return t
}

// dense makes a linear of a loaded weight.
func (l *loader) dense(w *candle.Tensor) linear {
	if l.err != nil {
		return linear{}
	}
	d, err := dense(w)
	l.err = err
	return d
}

func (l *loader) view(t *candle.Tensor, err error) *candle.Tensor {
	if l.err != nil {
		return nil
	}
	l.err = err
	return t
}

func (m *Model) loadWeights(vb *nn.VarBuilder, progress func(done, total int64)) error {
	c := m.cfg
	h, qd, kvd, in := c.HiddenSize, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim, c.IntermediateSize
	l := &loader{vb: vb, progress: progress, total: c.Parameters() * int64(m.dtype.Size())}
	m.embed = l.get("model.embed_tokens.weight", c.VocabSize, h)
	m.norm = l.get("model.norm.weight", h)
	if c.TieEmbeddings {
		m.lmHead.wT = l.view(m.embed.T())
	} else {
		m.lmHead = l.dense(l.get("lm_head.weight", c.VocabSize, h))
	}
	for i := range c.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		ly := &layer{}
		if w := c.Window(i); w > 0 {
			ly.attn.Window = &flashattn.Window{Left: w - 1, Right: 0}
		}
		m.layers = append(m.layers, ly)
		ly.inNorm = l.get(p+"input_layernorm.weight", h)
		ly.postNorm = l.get(p+"post_attention_layernorm.weight", h)
		a := p + "self_attn."
		ly.qkv = l.dense(l.cat(l.get(a+"q_proj.weight", qd, h), l.get(a+"k_proj.weight", kvd, h), l.get(a+"v_proj.weight", kvd, h)))
		if c.QKVBias {
			ly.qkvBias = l.cat(l.get(a+"q_proj.bias", qd), l.get(a+"k_proj.bias", kvd), l.get(a+"v_proj.bias", kvd))
		}
		ly.o = l.dense(l.get(a+"o_proj.weight", h, qd))
		if c.OutputBias {
			ly.oBias = l.get(a+"o_proj.bias", h)
		}
		f := p + "mlp."
		ly.gateUp = l.dense(l.cat(l.get(f+"gate_proj.weight", in, h), l.get(f+"up_proj.weight", in, h)))
		ly.down = l.dense(l.get(f+"down_proj.weight", h, in))
		if c.MLPBias {
			gu := l.cat(l.get(f+"gate_proj.bias", in), l.get(f+"up_proj.bias", in))
			if l.err == nil {
				ly.gateUpBias = l.view(gu.Reshape(2*in, 1))
				gu.Close()
			}
			ly.downBias = l.get(f+"down_proj.bias", h)
		}
		if l.err != nil {
			return l.err
		}
	}
	return l.err
}

// allocate makes the rotary tables and the KV cache.
func (m *Model) allocate(opts Options) error {
	c := m.cfg
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.MaxBatch == 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	m.maxBatch = opts.MaxBatch
	perToken := nn.PagedKVBytesPerToken(m.dtype, c.Layers, c.KVHeads, c.HeadDim)
	tokens := opts.CacheTokens
	if tokens == 0 {
		tokens = c.MaxPositions * opts.MaxBatch
		budget := int64(cpuCacheBytes)
		if d, ok := m.dev.(*candle.HIPDevice); ok {
			free, _, err := d.HIP().MemInfo()
			if err != nil {
				return pkg.Wrapf("Load", err, "sizing the KV cache")
			}
			// Memory the device's pool keeps is free for the cache too.
			budget = int64(gpuCacheFraction * float64(free+d.MemoryStats().Cached))
		}
		tokens = int(min(int64(tokens), budget/int64(perToken)))
		if tokens < opts.PageSize {
			return pkg.Errorf("Load", candle.ErrOutOfMemory, "the device has room for %d tokens of KV cache (%d bytes each): free memory, or set Options.CacheTokens", tokens, perToken)
		}
	}
	pages := (tokens + opts.PageSize - 1) / opts.PageSize
	var err error
	m.cache, err = nn.NewPagedKVCache(m.dev, m.dtype, nn.PagedKVConfig{Layers: c.Layers, Pages: pages, PageSize: opts.PageSize, KVHeads: c.KVHeads, HeadDim: c.HeadDim})
	if err != nil {
		return err
	}
	m.ctx = min(c.MaxPositions, pages*opts.PageSize)
	return m.ropeTables()
}

// ropeTables computes cos and sin of every position's angles in float64,
// stored in the model's dtype as one table, so that a step gathers its
// tokens' rows of both in one op.
func (m *Model) ropeTables() error {
	f := m.cfg.InvFreq()
	n, half := m.ctx, len(f)
	t := make([]float64, 2*n*half)
	cos, sin := t[:n*half], t[n*half:]
	for p := range n {
		for i, x := range f {
			s, c := math.Sincos(float64(p) * x)
			cos[p*half+i], sin[p*half+i] = c, s
		}
	}
	x, err := candle.FromSlice(m.dev, t, 2, n, half)
	if err != nil {
		return err
	}
	m.rope, err = x.ToDType(m.dtype)
	x.Close()
	return err
}

// Config is the model's config.
func (m *Model) Config() *Config { return m.cfg }

// Device is where the model runs.
func (m *Model) Device() candle.Device { return m.dev }

// DType is the dtype of the weights and activations.
func (m *Model) DType() candle.DType { return m.dtype }

// VocabSize is the number of logits per token.
func (m *Model) VocabSize() int { return m.cfg.VocabSize }

// ContextLength is the most tokens one sequence holds: the config's
// max_position_embeddings, or the whole KV cache when that is smaller.
func (m *Model) ContextLength() int { return m.ctx }

// CacheTokensFree is how many more tokens the KV cache's free pages hold
// (the unused rows of sequences' last pages not counted).
func (m *Model) CacheTokensFree() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0
	}
	return m.cache.FreeTokens()
}

// CachePageSize is the tokens of one KV-cache page: a sequence takes cache
// room a page at a time (generate.PagedModel).
func (m *Model) CachePageSize() int { return m.cache.Config().PageSize }

// Release forgets a sequence and frees its KV pages; an unknown id is a
// no-op.
func (m *Model) Release(seq uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.cache.Release(seq)
	}
}

// Close frees the weights and the cache (after the queued work). Closing
// twice does nothing; a closed model's Forward is an error.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	for b, g := range m.graphs {
		g.close()
		delete(m.graphs, b)
	}
	for _, l := range m.layers {
		l.close()
	}
	m.lmHead.close()
	closeAll(m.embed, m.norm, m.rope)
	if m.embedQ != nil {
		m.embedQ.Close()
	}
	if m.cache != nil {
		m.cache.Close()
	}
	return nil
}

func argErr(format string, args ...any) error {
	return pkg.Errorf("Forward", candle.ErrArgument, format, args...)
}

// Forward appends tokens[i] to sequence seqs[i]'s KV cache (created on
// first use) and returns the logits of each sequence's last new token: F32
// (len(seqs), VocabSize()) on Device(), a tensor of the caller's own to
// close (a replayed decode graph's output is copied into it, so the next
// step never overwrites logits still in use). A batch mixes prefills (new
// sequences, or several new tokens) and decode steps (one new token);
// positions continue from each sequence's cached length. A batch of decode
// steps only replays a graph on a HIP device (see Model).
//
// Every argument is checked before any work: the batch (one non-empty
// token list per sequence, distinct ids, at most Options.MaxBatch), the
// token ids (below VocabSize()), the context (no sequence beyond
// ContextLength()) and the cache (nn.ErrCacheFull when the new tokens need
// more pages than are free). On any error no sequence changes.
func (m *Model) Forward(seqs []uint64, tokens [][]int32) (*candle.Tensor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(seqs, tokens); err != nil {
		return nil, err
	}
	if d, ok := m.dev.(*candle.HIPDevice); ok && m.decodeOnly(seqs, tokens) {
		return m.decode(d, seqs, tokens)
	}
	return m.forward(seqs, tokens, false, true)
}

// Logits returns the logits of every position of one fresh sequence of
// tokens, F32 (len(tokens), VocabSize()): the whole forward pass at once,
// for comparisons with other implementations. It leaves nothing in the
// cache.
func (m *Model) Logits(tokens []int32) (*candle.Tensor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// An id no sequence has: the step is never committed.
	id := ^uint64(0)
	for m.cache != nil {
		if _, ok := m.cache.Len(id); !ok {
			break
		}
		id--
	}
	seqs, toks := []uint64{id}, [][]int32{tokens}
	if err := m.check(seqs, toks); err != nil {
		return nil, err
	}
	return m.forward(seqs, toks, true, false)
}

func (m *Model) check(seqs []uint64, tokens [][]int32) error {
	if m.closed {
		return pkg.Errorf("Forward", candle.ErrClosed, "the model is closed")
	}
	if len(seqs) == 0 || len(seqs) != len(tokens) {
		return argErr("%d sequences and %d token lists: want one token list per sequence, at least one", len(seqs), len(tokens))
	}
	if len(seqs) > m.maxBatch {
		return argErr("a batch of %d sequences: at most %d (Options.MaxBatch)", len(seqs), m.maxBatch)
	}
	seen := make(map[uint64]int, len(seqs))
	for i, id := range seqs {
		if j, dup := seen[id]; dup {
			return argErr("sequence %d is both entry %d and entry %d of the batch", id, j, i)
		}
		seen[id] = i
		if len(tokens[i]) == 0 {
			return argErr("sequence %d (entry %d) has no new tokens", id, i)
		}
		for j, t := range tokens[i] {
			if t < 0 || int(t) >= m.cfg.VocabSize {
				return argErr("sequence %d (entry %d): token %d at %d is not in the vocabulary of %d", id, i, t, j, m.cfg.VocabSize)
			}
		}
		held, _ := m.cache.Len(id)
		if held+len(tokens[i]) > m.ctx {
			return argErr("sequence %d (entry %d) would hold %d tokens (%d cached and %d new); the context length is %d", id, i, held+len(tokens[i]), held, len(tokens[i]), m.ctx)
		}
	}
	return nil
}

// fwd threads a forward pass's first error through its ops, so that the
// pass reads as the model's equations: after an error every op gets a nil
// operand and returns at once (candle's ops check for nil).
type fwd struct {
	s   *candle.Scope
	err error
}

// t takes an op's result: tensors made by ops on scoped operands are in
// the scope already.
func (f *fwd) t(x *candle.Tensor, err error) *candle.Tensor {
	if f.err != nil {
		if x != nil {
			x.Close()
		}
		return nil
	}
	f.err = err
	return x
}

// own puts a tensor made outside the scope (by a kernel outside candle)
// in it.
func (f *fwd) own(x *candle.Tensor, err error) *candle.Tensor {
	x = f.t(x, err)
	if x == nil {
		return nil
	}
	v, err := f.s.Adopt(x)
	x.Close()
	f.err = err
	return v
}

// times is x · wᵀ: x (T, in) by the weight (out, in) into (T, out).
func (f *fwd) times(x *candle.Tensor, w *linear) *candle.Tensor {
	if f.err != nil {
		return nil
	}
	switch len(w.q) {
	case 0:
		return f.t(x.Matmul(w.wT))
	case 1:
		return f.t(x.QMatmul(w.q[0]))
	}
	parts := make([]*candle.Tensor, len(w.q))
	for i, q := range w.q {
		parts[i] = f.t(x.QMatmul(q))
	}
	if f.err != nil {
		return nil
	}
	return f.t(candle.Cat(parts, 1))
}

// timesWith is times with o's ops around the product: in its kernel where
// candle can (Tensor.QMatmulWith: a quantized weight of one part, decode's
// few rows), else as the ops.
func (f *fwd) timesWith(x *candle.Tensor, w *linear, o candle.QMatmulOptions) *candle.Tensor {
	if f.err != nil {
		return nil
	}
	if len(w.q) == 1 {
		return f.t(x.QMatmulWith(w.q[0], o))
	}
	if o.Norm != nil {
		x = f.t(x.RMSNorm(o.Norm, o.Eps))
	}
	if o.Gated {
		half := x.Shape()[1] / 2
		x = f.t(f.t(x.Narrow(1, 0, half)).SiLUMul(f.t(x.Narrow(1, half, half))))
	}
	y := f.times(x, w)
	if o.Residual != nil {
		y = f.t(o.Residual.Add(y))
	}
	return y
}

// forward runs one pass; all: the logits of every new token (one
// sequence), else of each sequence's last; commit: keep the tokens in the
// cache.
func (m *Model) forward(seqs []uint64, tokens [][]int32, all, commit bool) (*candle.Tensor, error) {
	step, err := m.cache.Begin(seqs, tokens)
	if err != nil {
		return nil, pkg.Wrap("Forward", err)
	}
	defer step.Close()
	logits, err := m.run(step, all)
	if err != nil {
		return nil, pkg.Wrap("Forward", err)
	}
	if commit {
		step.Commit()
	}
	return logits, nil
}

// run is the forward pass of a step: the logits of every new token (all)
// or of each sequence's last, F32. It leaves the step uncommitted.
func (m *Model) run(step *nn.PagedStep, all bool) (*candle.Tensor, error) {
	c := m.cfg
	sc := candle.NewScope()
	defer sc.Close()
	f := &fwd{s: sc}
	ids := f.t(sc.Adopt(step.Tokens()))
	pos := f.t(sc.Adopt(step.Positions()))
	rope := f.t(m.rope.IndexSelect(pos, 1)) // (2, T, head dim / 2)
	cos := f.t(f.t(rope.Narrow(0, 0, 1)).Squeeze(0))
	sin := f.t(f.t(rope.Narrow(0, 1, 1)).Squeeze(0))
	var x *candle.Tensor // (T, hidden)
	if m.embedQ != nil {
		x = f.t(m.embedQ.Rows(ids, m.dtype))
	} else {
		x = f.t(m.embed.IndexSelect(ids, 0))
	}
	// Each half layer (attention, MLP) frees its intermediates when it
	// ends: its scope adopts the input and keeps only the output (with one
	// scope for the whole pass, a prefill of 8×512 tokens of a 1B model
	// peaked at 3.2× the weights and cache; a scope a layer, 1.17×).
	half := func(x *candle.Tensor, body func(xl *candle.Tensor) *candle.Tensor) *candle.Tensor {
		hs := candle.NewScope()
		defer hs.Close()
		f.s = hs
		xl := f.own(x, nil) // x's storage, in hs
		y := body(xl)
		if f.err != nil {
			return nil
		}
		return hs.Keep(y)
	}
	for i, l := range m.layers {
		x = half(x, func(xl *candle.Tensor) *candle.Tensor { return m.attention(f, step, i, l, xl, cos, sin) })
		x = half(x, func(xl *candle.Tensor) *candle.Tensor { return m.mlp(f, l, xl) })
		if f.err != nil {
			break
		}
	}
	f.s = sc
	if len(m.layers) > 0 {
		x = f.own(x, nil)
	}
	if !all && !step.EveryRowLast() {
		last := f.t(sc.Adopt(step.LastRows()))
		x = f.t(x.IndexSelect(last, 0))
	}
	logits := f.timesWith(x, &m.lmHead, candle.QMatmulOptions{Norm: m.norm, Eps: c.RMSNormEps})
	if m.dtype != candle.F32 {
		logits = f.t(logits.ToDType(candle.F32))
	}
	if f.err != nil {
		return nil, f.err
	}
	return sc.Keep(logits), nil
}

// attention is a layer's first half: xl plus attention over the cache of
// RMSNorm(xl)'s projections.
func (m *Model) attention(f *fwd, step *nn.PagedStep, i int, l *layer, xl, cos, sin *candle.Tensor) *candle.Tensor {
	c := m.cfg
	T := step.Len()
	hq, hkv, hd := c.Heads, c.KVHeads, c.HeadDim
	qkv := f.timesWith(xl, &l.qkv, candle.QMatmulOptions{Norm: l.inNorm, Eps: c.RMSNormEps}) // (T, (hq+2hkv)·hd)
	if l.qkvBias != nil {
		qkv = f.t(qkv.Add(l.qkvBias))
	}
	heads := f.t(qkv.Reshape(T, hq+2*hkv, hd))
	var att *candle.Tensor
	if f.err == nil {
		// The rotary embeddings of q and k, the cache's writes and the
		// attention: a decode step's rotation and writes are one kernel.
		att = f.own(step.AttentionQKV(i, heads, cos, sin, l.attn)) // (T, hq, hd)
	}
	att = f.t(att.Reshape(T, hq*hd))
	if l.oBias == nil {
		return f.timesWith(att, &l.o, candle.QMatmulOptions{Residual: xl})
	}
	o := f.t(f.times(att, &l.o).Add(l.oBias))
	return f.t(xl.Add(o))
}

// mlpRows bounds the tokens an MLP product takes at once. A long
// prefill's gate and up halves (tokens × 2·intermediate) are its largest
// intermediates: the llmbench prefill of 8×512 tokens of a 1B model peaked
// at 1.12× the weights and KV cache with the MLP over all its tokens at
// once. Blocks of 1024 tokens still fill the GPU.
const mlpRows = 1024

// mlp is a layer's second half: xl plus the gated MLP of RMSNorm(xl), over
// blocks of at most m.mlpRows tokens, each block's intermediates freed
// before the next.
func (m *Model) mlp(f *fwd, l *layer, xl *candle.Tensor) *candle.Tensor {
	if f.err != nil {
		return nil
	}
	T := xl.Shape()[0]
	if T <= m.mlpRows {
		return m.mlpBlock(f, l, xl)
	}
	out := f.own(candle.Empty(m.dev, m.dtype, xl.Shape()...))
	outer := f.s
	for start := 0; start < T && f.err == nil; start += m.mlpRows {
		n := min(m.mlpRows, T-start)
		bs := candle.NewScope()
		f.s = bs
		rows := f.own(xl.Narrow(0, start, n)) // in bs
		y := m.mlpBlock(f, l, rows)
		if f.err == nil {
			f.err = out.SliceAssign(y, 0, start)
		}
		f.s = outer
		bs.Close()
	}
	if f.err != nil {
		return nil
	}
	return out
}

// mlpBlock is mlp over xl's tokens at once.
func (m *Model) mlpBlock(f *fwd, l *layer, xl *candle.Tensor) *candle.Tensor {
	c := m.cfg
	if l.gateUp.q != nil && l.downBias == nil {
		// The quantized products are x · wᵀ: gate and up are the halves
		// of each row (GGUF models have no MLP biases). The norm, the gate
		// and the residual run in the products' kernels where they can.
		gu := f.timesWith(xl, &l.gateUp, candle.QMatmulOptions{Norm: l.postNorm, Eps: c.RMSNormEps}) // (T, 2·intermediate)
		return f.timesWith(gu, &l.down, candle.QMatmulOptions{Gated: true, Residual: xl})
	}
	h := f.t(xl.RMSNorm(l.postNorm, c.RMSNormEps))
	var act *candle.Tensor // (T, intermediate)
	if l.gateUp.q == nil {
		ht := f.t(h.T())
		gu := f.t(l.gateUp.w.Matmul(ht)) // (2·intermediate, T): gate and up are contiguous halves
		if l.gateUpBias != nil {
			gu = f.t(gu.Add(l.gateUpBias))
		}
		gate := f.t(gu.Narrow(0, 0, c.IntermediateSize))
		up := f.t(gu.Narrow(0, c.IntermediateSize, c.IntermediateSize))
		act = f.t(gate.SiLUMul(up)) // (intermediate, T)
		act = f.t(act.T())
	} else {
		gu := f.times(h, &l.gateUp) // (T, 2·intermediate)
		gate := f.t(gu.Narrow(1, 0, c.IntermediateSize))
		up := f.t(gu.Narrow(1, c.IntermediateSize, c.IntermediateSize))
		act = f.t(gate.SiLUMul(up))
	}
	d := f.times(act, &l.down)
	if l.downBias != nil {
		d = f.t(d.Add(l.downBias))
	}
	return f.t(xl.Add(d))
}
