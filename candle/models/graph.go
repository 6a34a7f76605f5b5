package models

import (
	"slices"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/nn"
)

// decodeGraph is the decode step of one batch size on a HIP device: its
// inputs buffer, and once captured, the graph of its forward pass and the
// logits the graph writes. What the graph reads besides the inputs (the
// weights, the cache's pools, the rotary tables) never changes while the
// runner is open, so a graph stays valid until it is closed.
type decodeGraph struct {
	in     *nn.DecodeInputs
	toks   []int32        // the step's tokens, reused
	graph  *candle.Graph  // nil until captured
	logits *candle.Tensor // the graph's output: F32 (batch, vocab)
	used   uint64         // the runner's tick at its last step
}

func (g *decodeGraph) close() {
	if g.logits != nil {
		g.logits.Close()
	}
	if g.graph != nil {
		g.graph.Close()
	}
	g.in.Close()
}

// SetGraphs turns the replay of decode graphs on or off (Options.NoGraphs)
// for the next decode steps; graphs already captured stay for when it is
// on again.
func (r *Runner) SetGraphs(on bool) {
	r.mu.Lock()
	r.graphsOn = on
	r.mu.Unlock()
}

// DecodeGraphs lists the batch sizes whose decode step the runner holds a
// captured graph for, in increasing order.
func (r *Runner) DecodeGraphs() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for b, g := range r.graphs {
		if g.graph != nil {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// decodeOnly reports whether every sequence of a checked batch is cached
// and adds one token: a decode step.
func (r *Runner) decodeOnly(seqs []uint64, tokens [][]int32) bool {
	for i, id := range seqs {
		if len(tokens[i]) != 1 {
			return false
		}
		if n, ok := r.cache.Len(id); !ok || n == 0 {
			return false
		}
	}
	return true
}

// decodeFor is the decode state of a batch size, made on first use; the
// least recently used one goes when MaxGraphs are kept already.
func (r *Runner) decodeFor(batch int) (*decodeGraph, error) {
	r.tick++
	if g := r.graphs[batch]; g != nil {
		g.used = r.tick
		return g, nil
	}
	if len(r.graphs) >= r.maxGraphs {
		if old, ok := leastRecent(r.graphs); ok {
			r.graphs[old].close()
			delete(r.graphs, old)
		}
	}
	in, err := r.cache.NewDecodeInputs(batch, r.ctx)
	if err != nil {
		return nil, err
	}
	g := &decodeGraph{in: in, toks: make([]int32, batch), used: r.tick}
	r.graphs[batch] = g
	return g, nil
}

// leastRecent is the batch size whose graph was used last longest ago.
func leastRecent(graphs map[int]*decodeGraph) (int, bool) {
	best, found := 0, false
	for b, g := range graphs {
		if !found || g.used < graphs[best].used {
			best, found = b, true
		}
	}
	return best, found
}

// decode runs a decode step (decodeOnly) on a HIP device through the
// batch size's fixed inputs: replaying its graph (captured on first use),
// or op by op when graphs are off.
func (r *Runner) decode(d *candle.HIPDevice, seqs []uint64, tokens [][]int32) (*candle.Tensor, error) {
	g, err := r.decodeFor(len(seqs))
	if err != nil {
		return nil, pkg.Wrap("Forward", err)
	}
	for i, t := range tokens {
		g.toks[i] = t[0]
	}
	step, err := r.cache.BeginDecode(seqs, g.toks, g.in)
	if err != nil {
		return nil, pkg.Wrap("Forward", err)
	}
	defer step.Close()
	if !r.graphsOn {
		logits, err := r.pass(step, false)
		if err != nil {
			return nil, pkg.Wrap("Forward", err)
		}
		step.Commit()
		return logits, nil
	}
	if g.graph == nil {
		if err := r.capture(d, g, step); err != nil {
			return nil, pkg.Wrapf("Forward", err, "capturing the decode step of batch %d (Options.NoGraphs runs it op by op)", len(seqs))
		}
	}
	if err := g.graph.Replay(); err != nil {
		return nil, pkg.Wrap("Forward", err)
	}
	logits, err := g.logits.Copy()
	if err != nil {
		return nil, pkg.Wrap("Forward", err)
	}
	step.Commit()
	return logits, nil
}

// capture captures the forward pass of a step of g's inputs into g's
// graph. The rehearsal and the capture write the step's keys and values
// into their cache rows; the replay that follows writes the same again.
func (r *Runner) capture(d *candle.HIPDevice, g *decodeGraph, step *nn.PagedStep) error {
	var out *candle.Tensor
	graph, err := d.Capture(func() error {
		if out != nil { // the rehearsal's logits
			out.Close()
			out = nil
		}
		var err error
		out, err = r.pass(step, false)
		return err
	})
	if err != nil {
		if out != nil {
			out.Close()
		}
		return err
	}
	g.graph, g.logits = graph, out
	return nil
}
