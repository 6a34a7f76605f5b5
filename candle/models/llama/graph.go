package llama

import (
	"slices"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/nn"
)

// decodeGraph is the decode step of one batch size on a HIP device: its
// inputs buffer, and once captured, the graph of its forward pass and the
// logits the graph writes. What the graph reads besides the inputs (the
// weights, the cache's pools, the rotary tables) never changes while the
// model is open, so a graph stays valid until it is closed.
type decodeGraph struct {
	in     *nn.DecodeInputs
	toks   []int32        // the step's tokens, reused
	graph  *candle.Graph  // nil until captured
	logits *candle.Tensor // the graph's output: F32 (batch, vocab)
	used   uint64         // the model's tick at its last step
}

func (g *decodeGraph) close() {
	closeAll(g.logits)
	if g.graph != nil {
		g.graph.Close()
	}
	g.in.Close()
}

// SetGraphs turns the replay of decode graphs on or off (Options.NoGraphs)
// for the next decode steps; graphs already captured stay for when it is
// on again.
func (m *Model) SetGraphs(on bool) {
	m.mu.Lock()
	m.graphsOn = on
	m.mu.Unlock()
}

// DecodeGraphs lists the batch sizes whose decode step the model holds a
// captured graph for, in increasing order.
func (m *Model) DecodeGraphs() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for b, g := range m.graphs {
		if g.graph != nil {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// decodeOnly reports whether every sequence of a checked batch is cached
// and adds one token: a decode step.
func (m *Model) decodeOnly(seqs []uint64, tokens [][]int32) bool {
	for i, id := range seqs {
		if len(tokens[i]) != 1 {
			return false
		}
		if n, ok := m.cache.Len(id); !ok || n == 0 {
			return false
		}
	}
	return true
}

// decodeFor is the decode state of a batch size, made on first use; the
// least recently used one goes when MaxGraphs are kept already.
func (m *Model) decodeFor(batch int) (*decodeGraph, error) {
	m.tick++
	if g := m.graphs[batch]; g != nil {
		g.used = m.tick
		return g, nil
	}
	if len(m.graphs) >= m.maxGraphs {
		if old, ok := leastRecent(m.graphs); ok {
			m.graphs[old].close()
			delete(m.graphs, old)
		}
	}
	in, err := m.cache.NewDecodeInputs(batch, m.ctx)
	if err != nil {
		return nil, err
	}
	g := &decodeGraph{in: in, toks: make([]int32, batch), used: m.tick}
	m.graphs[batch] = g
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
func (m *Model) decode(d *candle.HIPDevice, seqs []uint64, tokens [][]int32) (*candle.Tensor, error) {
	g, err := m.decodeFor(len(seqs))
	if err != nil {
		return nil, pkg.Wrap("Forward", err)
	}
	for i, t := range tokens {
		g.toks[i] = t[0]
	}
	step, err := m.cache.BeginDecode(seqs, g.toks, g.in)
	if err != nil {
		return nil, pkg.Wrap("Forward", err)
	}
	defer step.Close()
	if !m.graphsOn {
		logits, err := m.run(step, false)
		if err != nil {
			return nil, pkg.Wrap("Forward", err)
		}
		step.Commit()
		return logits, nil
	}
	if g.graph == nil {
		if err := m.capture(d, g, step); err != nil {
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
func (m *Model) capture(d *candle.HIPDevice, g *decodeGraph, step *nn.PagedStep) error {
	var out *candle.Tensor
	graph, err := d.Capture(func() error {
		if out != nil { // the rehearsal's logits
			out.Close()
			out = nil
		}
		var err error
		out, err = m.run(step, false)
		return err
	})
	if err != nil {
		closeAll(out)
		return err
	}
	g.graph, g.logits = graph, out
	return nil
}
