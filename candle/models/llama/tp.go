package llama

import (
	"errors"
	"sync"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/errs"
)

// TPModel is a model split over the devices of a group (Megatron-style
// tensor parallelism, one goroutine per device in one process): each rank
// holds its query and KV heads (KV heads replicated when fewer than the
// ranks), its rows of gate and up and columns of o and down (one
// all-reduce after each of those), its part of the vocabulary's
// embedding (a masked lookup and an all-reduce) and of the output (the
// logits gathered whole), and a KV cache of its heads. It embeds the
// models.TPRunner that runs the ranks: Forward returns rank 0's logits,
// for sampling there, and it satisfies generate.PagedModel as Model does.
type TPModel struct {
	*models.TPRunner
	cfg   *Config
	ranks []*Model
}

// LoadTP opens a model path once (models.Open) and splits it over g's
// devices (NewTP).
func LoadTP(path string, g *candle.Group, dtype candle.DType, opts Options) (*TPModel, error) {
	c, err := models.Open(path)
	if err != nil {
		return nil, pkg.Wrap("LoadTP", err)
	}
	defer c.Close()
	m, err := NewTP(c, g, dtype, opts)
	return m, pkg.Wrap("LoadTP", err)
}

// NewTP builds the model of a checkpoint split over the ranks of g, rank
// r on g.Devices()[r], as New builds it on one device: every rank loads
// only its part of each weight from the files (candle.SlicedWeights) in a
// goroutine of its own. A model the ranks do not split
// (CheckTensorParallel) is refused before any weight loads. opts.Progress
// hears the bytes of every rank together. The group stays the caller's:
// close it after the model.
func NewTP(c *models.Checkpoint, g *candle.Group, dtype candle.DType, opts Options) (*TPModel, error) {
	const op = "NewTP"
	if c == nil {
		return nil, pkg.Errorf(op, errs.ErrArgument, "no checkpoint")
	}
	if g == nil {
		return nil, pkg.Errorf(op, errs.ErrArgument, "no device group")
	}
	if err := opts.Check(); err != nil {
		return nil, pkg.Wrap(op, err)
	}
	cfg, err := ConfigOf(c)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	n := g.Size()
	if err := CheckTensorParallel(cfg, n); err != nil {
		return nil, pkg.Wrap(op, err)
	}
	devs := g.Devices()
	t := &TPModel{cfg: cfg, ranks: make([]*Model, n)}
	progress := sumProgress(n, opts.Progress)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		member, err := g.Member(r)
		if err != nil {
			return nil, pkg.Wrap(op, err)
		}
		t.ranks[r] = &Model{cfg: cfg, dev: devs[r], dtype: dtype, mlpRows: mlpRows, sh: shardOf(cfg, r, n, member)}
	}
	for r, m := range t.ranks {
		wg.Go(func() {
			vb, err := models.VarBuilder(c.Weights, devs[r], dtype)
			if err != nil {
				errs[r] = err
				return
			}
			if c.Format == models.GGUF {
				errs[r] = m.loadGGUF(vb, progress(r))
			} else {
				errs[r] = m.loadWeights(vb, progress(r))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Close()
		return nil, pkg.Wrap(op, err)
	}
	shape := models.Shape{Layers: cfg.Layers, KVHeads: t.ranks[0].sh.kvHeads, HeadDim: cfg.HeadDim, VocabSize: cfg.VocabSize, MaxPositions: cfg.MaxPositions}
	passes := make([]models.PassFunc, n)
	for r, m := range t.ranks {
		passes[r] = m.run
	}
	if t.TPRunner, err = models.NewTPRunner(g, dtype, shape, opts, passes); err != nil {
		t.Close()
		return nil, pkg.Wrap(op, err)
	}
	for r, m := range t.ranks {
		m.Runner = t.Ranks()[r]
		if err := m.ropeTables(); err != nil {
			t.Close()
			return nil, pkg.Wrap(op, err)
		}
	}
	return t, nil
}

// sumProgress is each rank's progress callback, reporting to report the
// bytes of every rank together; nil when report is.
func sumProgress(n int, report func(done, total int64)) func(r int) func(done, total int64) {
	if report == nil {
		return func(int) func(done, total int64) { return nil }
	}
	var mu sync.Mutex
	done, total := make([]int64, n), make([]int64, n)
	return func(r int) func(d, t int64) {
		return func(d, t int64) {
			mu.Lock()
			defer mu.Unlock()
			done[r], total[r] = d, t
			var sd, st int64
			for i := range n {
				sd, st = sd+done[i], st+total[i]
			}
			report(sd, st)
		}
	}
}

// Config is the model's config.
func (t *TPModel) Config() *Config { return t.cfg }

// Close frees every rank's weights, cache and decode graphs. The group
// stays open. Closing twice does nothing.
func (t *TPModel) Close() error {
	var errs []error
	if t.TPRunner != nil {
		errs = append(errs, t.TPRunner.Close())
	}
	for _, m := range t.ranks {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return pkg.Wrap("Close", errors.Join(errs...))
}
