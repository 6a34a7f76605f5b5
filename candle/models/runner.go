package models

import (
	"fmt"
	"sync"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/nn"
)

// Options size what a model allocates beside its weights; zero values
// choose.
type Options struct {
	// CacheTokens is how many tokens the KV cache holds over all
	// sequences. Zero: CacheBytes' worth when it is set; else on a HIP
	// device the context length × MaxBatch, bounded by MemoryFraction of
	// the device's memory less what is in use once the weights are loaded
	// (by default 80% of the memory then free); on the CPU the context
	// length × 4 sequences, bounded by 1 GiB of cache.
	CacheTokens int
	// CacheBytes is the KV cache's size in bytes, when CacheTokens is not
	// set (vLLM's kv_cache_memory).
	CacheBytes int64
	// MemoryFraction, in (0, 1], is how much of a HIP device's memory the
	// process may hold once the cache is made, weights and everything
	// else in use included (vLLM's gpu_memory_utilization): the default
	// cache takes what is left of it. Zero: 80% of the memory free after
	// the weights.
	MemoryFraction float64
	// MaxModelLen caps a sequence's tokens below the architecture's
	// context (Shape.MaxPositions), which also sizes the default cache.
	// Zero: the architecture's.
	MaxModelLen int
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
	// MaxGraphs is the most decode graphs the runner keeps, one per batch
	// size (default 16); a new batch size beyond it replaces the least
	// recently used.
	MaxGraphs int
	// NoPrefixCaching turns off automatic prefix caching: by default the
	// KV cache keeps its full pages after their sequences end, keyed by
	// their tokens and all those before them, and a new sequence whose
	// prompt begins with cached pages shares them instead of computing
	// them again (Runner.AttachPrefix).
	NoPrefixCaching bool
}

// Defaults of Options.
const (
	DefaultPageSize  = 16
	DefaultMaxBatch  = 64
	DefaultMaxGraphs = 16
	// cpuCacheBytes bounds the default cache on the CPU device, and
	// cpuSequences is how many full contexts it holds at most.
	cpuCacheBytes = 1 << 30
	cpuSequences  = 4
	// gpuCacheFraction of the free device memory is the default cache's
	// bound on a HIP device; the rest is for activations.
	gpuCacheFraction = 0.8
)

// Check reports options that no model takes (a negative size), so that a
// model's constructor can refuse them before it loads any weight.
func (o Options) Check() error {
	const op = "Options.Check"
	if o.CacheTokens < 0 || o.PageSize < 0 || o.MaxBatch < 0 {
		return pkg.Errorf(op, candle.ErrArgument, "CacheTokens %d, PageSize %d, MaxBatch %d: none may be negative", o.CacheTokens, o.PageSize, o.MaxBatch)
	}
	if o.CacheBytes < 0 || o.MaxModelLen < 0 {
		return pkg.Errorf(op, candle.ErrArgument, "CacheBytes %d, MaxModelLen %d: neither may be negative", o.CacheBytes, o.MaxModelLen)
	}
	if o.MemoryFraction < 0 || o.MemoryFraction > 1 {
		return pkg.Errorf(op, candle.ErrArgument, "MemoryFraction %g: want a fraction in (0, 1], or 0 for the default", o.MemoryFraction)
	}
	if o.MaxGraphs < 0 {
		return pkg.Errorf(op, candle.ErrArgument, "Options.MaxGraphs %d: want 0 (default %d) or more", o.MaxGraphs, DefaultMaxGraphs)
	}
	return nil
}

// Shape is what a runner needs of an architecture: the geometry of its KV
// cache, its vocabulary and its longest context.
type Shape struct {
	Layers, KVHeads, HeadDim int
	VocabSize                int
	MaxPositions             int
}

// PassFunc is an architecture's forward pass over a step of the paged KV
// cache: the F32 logits of every new token of the step (all), or of each
// sequence's last, as a tensor of the caller's own. It writes the step's
// keys and values through the step (nn.PagedStep.AttentionQKV) and leaves
// the step uncommitted. On a HIP device a decode step's pass is captured
// into a graph and replayed: for one batch size it must launch the same
// kernels on the same buffers every time, and read the step's inputs only
// through the step's tensors.
type PassFunc func(step *nn.PagedStep, all bool) (*candle.Tensor, error)

// Runner runs a decoder's forward passes over a paged KV cache shared by
// every sequence (nn.PagedKVCache): it sizes and owns the cache, checks
// each batch before any work, stages a step's inputs, commits the step's
// tokens to the cache once the pass succeeds, and on a HIP device replays
// each decode step (every sequence of the batch cached, one new token
// each) as a captured graph. An architecture supplies only its pass
// (PassFunc); a model type embeds the Runner for Forward, Logits, Release
// and the rest. Its methods are safe for concurrent use; passes run one
// at a time.
//
// A decode step's graph (candle.Graph) holds the whole pass: its inputs
// (tokens, positions, cache rows, lengths, block table) go to one fixed
// device buffer with one copy (nn.DecodeInputs), and one launch runs every
// kernel, with no host work between them. The graph of a batch size is
// captured at its first decode step, which runs the step three times (a
// rehearsal, the capture, a replay); no other work may use the device
// during that step (it would be captured). Each graph keeps private device
// memory for its activations and logits (candle.MemoryStats.Graphs) until
// the runner closes or a newer batch size replaces it (Options.MaxGraphs).
// Prefills and mixed batches run op by op; so does everything on the CPU
// device.
//
// With prefix caching (on unless Options.NoPrefixCaching) the cache keeps
// each full page keyed by its tokens and all before them, shares it
// read-only with the sequences whose prompts begin the same way
// (AttachPrefix), and keeps it after its sequences end until a step needs
// the room, least recently used first (nn.PagedKVCache). A decode graph
// reads the block table from its inputs, so shared pages are only entries
// of the table there.
type Runner struct {
	mu       sync.Mutex
	dev      candle.Device
	dtype    candle.DType
	vocab    int
	pass     PassFunc
	cache    *nn.PagedKVCache
	ctx      int
	maxBatch int
	closed   bool

	graphsOn  bool                 // decode steps replay graphs
	maxGraphs int                  // Options.MaxGraphs
	graphs    map[int]*decodeGraph // by batch size (graph.go)
	tick      uint64               // decode steps, for the graphs' last use
}

// NewRunner allocates the KV cache of a decoder of the given shape on dev
// as opts say (call it once the weights are loaded: the default cache
// takes a share of the memory left) and runs pass over it. dtype is the
// cache's, and the pass's activations'.
func NewRunner(dev candle.Device, dtype candle.DType, shape Shape, opts Options, pass PassFunc) (*Runner, error) {
	const op = "NewRunner"
	if dev == nil {
		return nil, pkg.Errorf(op, candle.ErrDevice, "nil device")
	}
	if pass == nil {
		return nil, pkg.Errorf(op, candle.ErrArgument, "no forward pass")
	}
	if shape.Layers < 1 || shape.KVHeads < 1 || shape.HeadDim < 1 || shape.VocabSize < 1 || shape.MaxPositions < 1 {
		return nil, pkg.Errorf(op, candle.ErrArgument, "shape %+v: every size must be positive", shape)
	}
	if err := opts.Check(); err != nil {
		return nil, pkg.Wrap(op, err)
	}
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.MaxBatch == 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.MaxGraphs == 0 {
		opts.MaxGraphs = DefaultMaxGraphs
	}
	context := shape.MaxPositions
	if opts.MaxModelLen > 0 {
		context = min(context, opts.MaxModelLen)
	}
	tokens, err := cacheTokens(dev, dtype, shape, opts, context)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	pages := (tokens + opts.PageSize - 1) / opts.PageSize
	cache, err := nn.NewPagedKVCache(dev, dtype, nn.PagedKVConfig{Layers: shape.Layers, Pages: pages, PageSize: opts.PageSize, KVHeads: shape.KVHeads, HeadDim: shape.HeadDim,
		PrefixCaching: !opts.NoPrefixCaching})
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	return &Runner{
		dev: dev, dtype: dtype, vocab: shape.VocabSize, pass: pass, cache: cache,
		ctx: min(context, pages*opts.PageSize), maxBatch: opts.MaxBatch,
		graphsOn: !opts.NoGraphs, maxGraphs: opts.MaxGraphs, graphs: map[int]*decodeGraph{},
	}, nil
}

// cacheTokens sizes the KV cache as Options says.
func cacheTokens(dev candle.Device, dtype candle.DType, shape Shape, opts Options, context int) (int, error) {
	const op = "NewRunner"
	if opts.CacheTokens > 0 {
		return opts.CacheTokens, nil
	}
	perToken := int64(nn.PagedKVBytesPerToken(dtype, shape.Layers, shape.KVHeads, shape.HeadDim))
	tooSmall := func(tokens int64, what string) error {
		return pkg.Errorf(op, candle.ErrOutOfMemory, "%s holds %d tokens of KV cache (%d bytes each), less than a page of %d: give the cache more memory, or set Options.CacheTokens", what, tokens, perToken, opts.PageSize)
	}
	page := int64(opts.PageSize)
	if opts.CacheBytes > 0 { // whole pages, within the bytes
		tokens := opts.CacheBytes / perToken / page * page
		if tokens < page {
			return 0, tooSmall(opts.CacheBytes/perToken, fmt.Sprintf("Options.CacheBytes %d", opts.CacheBytes))
		}
		return int(tokens), nil
	}
	want := int64(context) * int64(opts.MaxBatch)
	budget := int64(cpuCacheBytes)
	what := "the CPU's 1 GiB of default cache"
	d, ok := dev.(*candle.HIPDevice)
	if !ok {
		want = int64(context) * int64(min(opts.MaxBatch, cpuSequences))
	} else {
		free, total, err := d.HIP().MemInfo()
		if err != nil {
			return 0, pkg.Wrapf(op, err, "sizing the KV cache")
		}
		// Memory the device's pool keeps is free for the cache too.
		free += d.MemoryStats().Cached
		budget = int64(gpuCacheFraction * float64(free))
		what = "80% of the device's free memory"
		if opts.MemoryFraction > 0 {
			budget = int64(opts.MemoryFraction*float64(total)) - (total - free)
			what = fmt.Sprintf("%.0f%% of the device's memory, less the %d bytes in use", 100*opts.MemoryFraction, total-free)
		}
	}
	tokens := min(want, budget/perToken)
	if tokens < int64(opts.PageSize) {
		return 0, tooSmall(max(tokens, 0), what)
	}
	return int(tokens), nil
}

// Device is where the runner's passes run.
func (r *Runner) Device() candle.Device { return r.dev }

// DType is the dtype of the KV cache and the activations.
func (r *Runner) DType() candle.DType { return r.dtype }

// VocabSize is the number of logits per token.
func (r *Runner) VocabSize() int { return r.vocab }

// ContextLength is the most tokens one sequence holds: the architecture's
// longest context (Shape.MaxPositions), or the whole KV cache when that is
// smaller.
func (r *Runner) ContextLength() int { return r.ctx }

// CachePageSize is the tokens of one KV-cache page: a sequence takes cache
// room a page at a time (generate.PagedModel).
func (r *Runner) CachePageSize() int { return r.cache.Config().PageSize }

// CacheTokensFree is how many more tokens the KV cache's free pages hold
// (the unused rows of sequences' last pages not counted). Pages kept for
// prefix caching that no sequence holds count as free: a step takes them
// back when it needs them.
func (r *Runner) CacheTokensFree() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0
	}
	return r.cache.FreeTokens()
}

// SequenceLen is how many tokens of sequence seq the cache holds, and
// whether it holds the sequence at all.
func (r *Runner) SequenceLen(seq uint64) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, false
	}
	return r.cache.Len(seq)
}

// AttachPrefix starts sequence seq with the KV pages cached for the
// longest run of whole pages that prompt begins with (Options'
// NoPrefixCaching), and returns how many of prompt's tokens the sequence
// holds: a multiple of CachePageSize, always less than len(prompt). The
// caller then forwards prompt from there, and the positions continue from
// it. With nothing cached it returns 0 and the sequence is not created.
// The pages are shared read-only: a sequence writes only past its length,
// in pages of its own. seq must be a sequence the cache does not hold.
func (r *Runner) AttachPrefix(seq uint64, prompt []int32) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, pkg.Errorf("AttachPrefix", candle.ErrClosed, "the model is closed")
	}
	n, err := r.cache.AttachPrefix(seq, prompt)
	return n, pkg.Wrap("AttachPrefix", err)
}

// PrefixCacheStats are AttachPrefix's counts since the runner was made:
// the prompt tokens looked up and those found cached (their ratio is the
// prefix cache's hit rate). Every call counts: generate.Engine looks a
// waiting request's prompt up again at each step until the request fits
// the cache, so its Event.CachedTokens are the per-request figure.
func (r *Runner) PrefixCacheStats() (queried, hit int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, 0
	}
	return r.cache.PrefixStats()
}

// Release forgets a sequence and frees its KV pages (those kept for
// prefix caching stay cached until a step needs them); an unknown id is a
// no-op.
func (r *Runner) Release(seq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.cache.Release(seq)
	}
}

// Close frees the cache and the decode graphs, once the pass running has
// ended. Closing twice does nothing; a closed runner's Forward is an
// error (candle.ErrClosed).
func (r *Runner) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	for b, g := range r.graphs {
		g.close()
		delete(r.graphs, b)
	}
	return pkg.Wrap("Runner.Close", r.cache.Close())
}

// Forward appends tokens[i] to sequence seqs[i]'s KV cache (created on
// first use) and returns the logits of each sequence's last new token: F32
// (len(seqs), VocabSize()) on Device(), a tensor of the caller's own to
// close (a replayed decode graph's output is copied into it, so the next
// step never overwrites logits still in use). A batch mixes prefills (new
// sequences, or several new tokens) and decode steps (one new token);
// positions continue from each sequence's cached length. A batch of decode
// steps only replays a graph on a HIP device (see Runner).
//
// Every argument is checked before any work: the batch (one non-empty
// token list per sequence, distinct ids, at most Options.MaxBatch), the
// token ids (below VocabSize()), the context (no sequence beyond
// ContextLength()) and the cache (nn.ErrCacheFull when the new tokens need
// more pages than are free). On any error no sequence changes.
func (r *Runner) Forward(seqs []uint64, tokens [][]int32) (*candle.Tensor, error) {
	const op = "Forward"
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.check(op, seqs, tokens); err != nil {
		return nil, err
	}
	if d, ok := r.dev.(*candle.HIPDevice); ok && r.decodeOnly(seqs, tokens) {
		return r.decode(d, seqs, tokens)
	}
	return r.forward(op, seqs, tokens, false, true)
}

// ForwardAll is Forward returning the logits of every new token: F32
// (Σ len(tokens[i]), VocabSize()), the rows of seqs[0]'s tokens first,
// then seqs[1]'s, and so on (to check several drafted tokens at once). It
// runs op by op, never as a decode graph.
func (r *Runner) ForwardAll(seqs []uint64, tokens [][]int32) (*candle.Tensor, error) {
	const op = "ForwardAll"
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.check(op, seqs, tokens); err != nil {
		return nil, err
	}
	return r.forward(op, seqs, tokens, true, true)
}

// Truncate keeps the first n of sequence seq's tokens, 1 ≤ n ≤ its
// length, and frees the cache past them (the drafted tokens a check
// rejected): the next Forward continues from position n.
func (r *Runner) Truncate(seq uint64, n int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return pkg.Errorf("Truncate", candle.ErrClosed, "the model is closed")
	}
	return pkg.Wrap("Truncate", r.cache.Truncate(seq, n))
}

// Logits returns the logits of every position of one fresh sequence of
// tokens, F32 (len(tokens), VocabSize()): the whole forward pass at once,
// for comparisons with other implementations. It leaves nothing in the
// cache.
func (r *Runner) Logits(tokens []int32) (*candle.Tensor, error) {
	const op = "Logits"
	r.mu.Lock()
	defer r.mu.Unlock()
	// An id no sequence has: the step is never committed.
	id := ^uint64(0)
	for !r.closed {
		if _, ok := r.cache.Len(id); !ok {
			break
		}
		id--
	}
	seqs, toks := []uint64{id}, [][]int32{tokens}
	if err := r.check(op, seqs, toks); err != nil {
		return nil, err
	}
	return r.forward(op, seqs, toks, true, false)
}

// check checks a batch before any work.
func (r *Runner) check(op string, seqs []uint64, tokens [][]int32) error {
	if r.closed {
		return pkg.Errorf(op, candle.ErrClosed, "the model is closed")
	}
	argErr := func(format string, args ...any) error {
		return pkg.Errorf(op, candle.ErrArgument, format, args...)
	}
	if len(seqs) == 0 || len(seqs) != len(tokens) {
		return argErr("%d sequences and %d token lists: want one token list per sequence, at least one", len(seqs), len(tokens))
	}
	if len(seqs) > r.maxBatch {
		return argErr("a batch of %d sequences: at most %d (Options.MaxBatch)", len(seqs), r.maxBatch)
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
			if t < 0 || int(t) >= r.vocab {
				return argErr("sequence %d (entry %d): token %d at %d is not in the vocabulary of %d", id, i, t, j, r.vocab)
			}
		}
		held, _ := r.cache.Len(id)
		if held+len(tokens[i]) > r.ctx {
			return argErr("sequence %d (entry %d) would hold %d tokens (%d cached and %d new); the context length is %d", id, i, held+len(tokens[i]), held, len(tokens[i]), r.ctx)
		}
	}
	return nil
}

// forward runs one pass op by op; all: the logits of every new token, in
// the order of seqs, else of each sequence's last; commit: keep the
// tokens in the cache.
func (r *Runner) forward(op string, seqs []uint64, tokens [][]int32, all, commit bool) (*candle.Tensor, error) {
	step, err := r.cache.Begin(seqs, tokens)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	defer step.Close()
	logits, err := r.pass(step, all)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	if all {
		if logits, err = inputOrder(step, logits); err != nil {
			return nil, pkg.Wrap(op, err)
		}
	}
	if commit {
		step.Commit()
	}
	return logits, nil
}

// inputOrder puts a step's rows of logits (the step's packed order) in
// the order of its sequences, each one's tokens in turn; it takes x.
func inputOrder(step *nn.PagedStep, x *candle.Tensor) (*candle.Tensor, error) {
	rows := make([]uint32, 0, step.Len())
	packed := true
	for i := range step.Sequences() {
		start, n := step.Rows(i)
		for j := range n {
			packed = packed && start+j == len(rows)
			rows = append(rows, uint32(start+j))
		}
	}
	if packed {
		return x, nil
	}
	defer x.Close()
	idx, err := candle.FromSlice(x.Device(), rows)
	if err != nil {
		return nil, err
	}
	defer idx.Close()
	return x.IndexSelect(idx, 0)
}
