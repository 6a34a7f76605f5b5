package models

import (
	"errors"
	"sync"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/nn"
)

// TPRunner runs a model split over the ranks of a device group
// (Megatron-style tensor parallelism, one goroutine per device in one
// process): one Runner per rank, each with its own KV cache holding its
// rank's KV heads, whose passes meet in the group's collectives. Forward
// fans a step out to every rank and returns rank 0's logits, which every
// rank's pass gathers whole, so that sampling runs on rank 0's device; it
// satisfies generate.PagedModel as a Runner does. Every rank's cache gets
// the same pages and sees the same steps, so the ranks stay in step.
//
// When a rank's pass fails, the runner aborts the group (candle.Group's
// Abort), so that the ranks waiting for it in a collective return, and
// reports the error; the runner is then broken: every later Forward fails
// with Err() (errors.Is candle.ErrClosed). A batch refused before any
// pass (a bad token, a full cache) breaks nothing.
type TPRunner struct {
	g     *candle.Group
	ranks []*Runner

	mu     sync.Mutex // one step at a time
	broken error
	// The step under way's rendezvous of the ranks' passes: at the start
	// of each, and at its end, so that no rank runs its pass eagerly
	// while another captures its own into a decode graph (a capture in
	// HIP's global mode forbids other threads' unsafe calls).
	start, end *passGate
}

// NewTPRunner makes one Runner per rank of g, running passes[r] on rank
// r's device (g.Devices()[r]); shape.KVHeads is each rank's. The KV
// caches are sized as opts says for the device with the least room, so
// that every rank holds the same pages. The runner does not own g.
func NewTPRunner(g *candle.Group, dtype candle.DType, shape Shape, opts Options, passes []PassFunc) (*TPRunner, error) {
	const op = "NewTPRunner"
	if g == nil {
		return nil, pkg.Errorf(op, candle.ErrArgument, "nil group")
	}
	devs := g.Devices()
	if len(passes) != len(devs) {
		return nil, pkg.Errorf(op, candle.ErrArgument, "%d passes for a group of %d ranks: want one per rank", len(passes), len(devs))
	}
	if err := opts.Check(); err != nil {
		return nil, pkg.Wrap(op, err)
	}
	if opts.CacheTokens == 0 && shape.Layers > 0 && shape.KVHeads > 0 && shape.HeadDim > 0 {
		o := opts
		o.PageSize, o.MaxBatch = cmpOr(o.PageSize, DefaultPageSize), cmpOr(o.MaxBatch, DefaultMaxBatch)
		context := shape.MaxPositions
		if o.MaxModelLen > 0 {
			context = min(context, o.MaxModelLen)
		}
		least := -1
		for _, d := range devs {
			n, err := cacheTokens(d, dtype, shape, o, context)
			if err != nil {
				return nil, pkg.Wrapf(op, err, "on %s", d)
			}
			if least < 0 || n < least {
				least = n
			}
		}
		opts.CacheTokens = least
	}
	t := &TPRunner{g: g}
	for r, d := range devs {
		if passes[r] == nil {
			t.Close()
			return nil, pkg.Errorf(op, candle.ErrArgument, "rank %d has no forward pass", r)
		}
		run, err := NewRunner(d, dtype, shape, opts, t.gated(r, passes[r]))
		if err != nil {
			t.Close()
			return nil, pkg.Wrapf(op, err, "rank %d", r)
		}
		t.ranks = append(t.ranks, run)
	}
	return t, nil
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// gated is rank r's pass between the step's gates: a rank's pass starts
// once every rank has reached its own, or returns at once when a rank
// failed before it (its peers would wait in the first collective for
// it), and returns once every rank's has; a pass that fails aborts the
// group.
func (t *TPRunner) gated(r int, pass PassFunc) PassFunc {
	return func(step *nn.PagedStep, all bool) (*candle.Tensor, error) {
		if err := t.start.enter(); err != nil {
			return nil, err
		}
		logits, err := pass(step, all)
		if err != nil {
			t.start.passFailed()
			t.end.passFailed()
			if aerr := t.g.Abort(); aerr != nil {
				err = errors.Join(err, aerr)
			}
			return nil, pkg.Wrapf("Forward", err, "rank %d", r)
		}
		if err := t.end.enter(); err != nil {
			logits.Close()
			return nil, err
		}
		return logits, nil
	}
}

// Ranks are the runners of the ranks, in rank order: their caches,
// graphs and devices (each rank's model is built on one).
func (t *TPRunner) Ranks() []*Runner { return t.ranks }

// Group is the device group the ranks run on.
func (t *TPRunner) Group() *candle.Group { return t.g }

// Device is rank 0's device, where Forward's logits are.
func (t *TPRunner) Device() candle.Device { return t.ranks[0].Device() }

// DType is the dtype of the KV caches and the activations.
func (t *TPRunner) DType() candle.DType { return t.ranks[0].DType() }

// VocabSize is the number of logits per token.
func (t *TPRunner) VocabSize() int { return t.ranks[0].VocabSize() }

// ContextLength is the most tokens one sequence holds.
func (t *TPRunner) ContextLength() int { return t.ranks[0].ContextLength() }

// CachePageSize is the tokens of one KV-cache page.
func (t *TPRunner) CachePageSize() int { return t.ranks[0].CachePageSize() }

// CacheTokensFree is how many more tokens the KV caches' free pages hold
// (every rank's hold the same).
func (t *TPRunner) CacheTokensFree() int { return t.ranks[0].CacheTokensFree() }

// SequenceLen is how many tokens of sequence seq the caches hold.
func (t *TPRunner) SequenceLen(seq uint64) (int, bool) { return t.ranks[0].SequenceLen(seq) }

// SetGraphs turns the replay of decode graphs on or off on every rank.
func (t *TPRunner) SetGraphs(on bool) {
	for _, r := range t.ranks {
		r.SetGraphs(on)
	}
}

// Err is the failure that broke the runner, nil while it works.
func (t *TPRunner) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.broken
}

// Release forgets a sequence on every rank.
func (t *TPRunner) Release(seq uint64) {
	for _, r := range t.ranks {
		r.Release(seq)
	}
}

// Close frees every rank's cache and graphs; the group stays the
// caller's. Closing twice does nothing.
func (t *TPRunner) Close() error {
	var errs []error
	for _, r := range t.ranks {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}

// Forward runs a step on every rank, one goroutine each, and returns rank
// 0's logits: F32 (len(seqs), VocabSize()) on Device(), the caller's to
// close. Its checks and errors are Runner.Forward's; a rank's failure
// aborts the group and breaks the runner (see TPRunner).
func (t *TPRunner) Forward(seqs []uint64, tokens [][]int32) (*candle.Tensor, error) {
	return t.fan("Forward", func(r *Runner) (*candle.Tensor, error) { return r.Forward(seqs, tokens) })
}

// Logits returns the logits of every position of one fresh sequence of
// tokens (Runner.Logits), computed over every rank.
func (t *TPRunner) Logits(tokens []int32) (*candle.Tensor, error) {
	return t.fan("Logits", func(r *Runner) (*candle.Tensor, error) { return r.Logits(tokens) })
}

// ForwardAll is Forward returning the logits of every new token
// (Runner.ForwardAll: drafted tokens to check), computed over every rank.
func (t *TPRunner) ForwardAll(seqs []uint64, tokens [][]int32) (*candle.Tensor, error) {
	return t.fan("ForwardAll", func(r *Runner) (*candle.Tensor, error) { return r.ForwardAll(seqs, tokens) })
}

// AttachPrefix starts sequence seq with the cached pages prompt begins
// with on every rank (Runner.AttachPrefix). The ranks' caches see the same
// sequences and tokens, so they hold the same pages; a rank that found
// another count (which would be a fault) releases seq everywhere and
// reports it.
func (t *TPRunner) AttachPrefix(seq uint64, prompt []int32) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.broken != nil {
		return 0, t.broken
	}
	n, err := t.ranks[0].AttachPrefix(seq, prompt)
	if err != nil {
		return 0, err
	}
	for i, r := range t.ranks[1:] {
		m, err := r.AttachPrefix(seq, prompt)
		if err == nil && m != n {
			err = pkg.Errorf("AttachPrefix", candle.ErrArgument, "rank %d holds %d cached tokens of the prompt, rank 0 %d", i+1, m, n)
		}
		if err != nil {
			for _, r := range t.ranks {
				r.Release(seq)
			}
			return 0, err
		}
	}
	return n, nil
}

// PrefixCacheStats are rank 0's AttachPrefix counts (every rank looks up
// the same prompts).
func (t *TPRunner) PrefixCacheStats() (queried, hit int64) { return t.ranks[0].PrefixCacheStats() }

// Truncate keeps the first n tokens of sequence seq on every rank
// (Runner.Truncate).
func (t *TPRunner) Truncate(seq uint64, n int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for _, r := range t.ranks {
		errs = append(errs, r.Truncate(seq, n))
	}
	return errors.Join(errs...)
}

// fan runs call on every rank's runner, one goroutine each.
func (t *TPRunner) fan(op string, call func(*Runner) (*candle.Tensor, error)) (*candle.Tensor, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.broken != nil {
		return nil, t.broken
	}
	t.start, t.end = newPassGate(len(t.ranks)), newPassGate(len(t.ranks))
	outs := make([]*candle.Tensor, len(t.ranks))
	errs := make([]error, len(t.ranks))
	var wg sync.WaitGroup
	for i, r := range t.ranks {
		wg.Go(func() {
			outs[i], errs[i] = call(r)
			if errs[i] != nil { // before its pass, or in it: the others go no further
				t.start.failed()
				t.end.failed()
			}
		})
	}
	wg.Wait()
	for _, o := range outs[1:] {
		o.Close()
	}
	if t.start.passFail {
		for _, o := range outs[:1] {
			o.Close()
		}
		err := errors.Join(errs...)
		t.broken = pkg.Errorf(op, candle.ErrClosed, "a rank failed, and the group was aborted: %v", err)
		return nil, pkg.Wrap(op, err)
	}
	if err := errors.Join(errs...); err != nil {
		outs[0].Close()
		return nil, pkg.Wrap(op, errs[firstErr(errs)])
	}
	return outs[0], nil
}

func firstErr(errs []error) int {
	for i, e := range errs {
		if e != nil {
			return i
		}
	}
	return 0
}

// passGate is the rendezvous of a step's passes: each pass of the ranks
// starts when every rank has reached it (a decode capture runs the pass
// twice, each time a rendezvous), or fails at once when a rank failed
// before its own.
type passGate struct {
	mu       sync.Mutex
	cond     *sync.Cond
	n, in    int
	gen      int
	fail     bool // a rank failed: no pass starts any more
	passFail bool // a pass failed (the group is aborted)
}

func newPassGate(n int) *passGate {
	g := &passGate{n: n}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *passGate) enter() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	gen := g.gen
	if g.in++; g.in == g.n {
		g.in, g.gen = 0, g.gen+1
		g.cond.Broadcast()
	}
	for g.gen == gen && !g.fail {
		g.cond.Wait()
	}
	if g.gen == gen {
		return pkg.Errorf("Forward", candle.ErrArgument, "another rank failed")
	}
	return nil
}

// failed marks a rank's failure: the passes not yet started return.
func (g *passGate) failed() {
	g.mu.Lock()
	g.fail = true
	g.cond.Broadcast()
	g.mu.Unlock()
}

// passFailed marks a failure inside a pass.
func (g *passGate) passFailed() {
	g.mu.Lock()
	g.passFail = true
	g.fail = true
	g.cond.Broadcast()
	g.mu.Unlock()
}
