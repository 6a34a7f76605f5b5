package unet

import (
	"errors"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/errs"
)

// Captured is the UNet's forward pass for one shape of latents and text
// conditioning, captured as a graph on a HIP device (candle.Graph): each
// Forward replays its hundreds of kernels with one launch, so that the GPU
// no longer waits for the host between them. The time embedding (a few
// small ops) runs op by op, and the latents, the text and the embedding
// are copied into the graph's inputs on the device.
//
// The graph keeps the forward pass's activations in memory of its own
// until Close. A Captured is for one goroutine at a time, and nothing else
// may use the device while Capture runs (work queued meanwhile would join
// the graph).
type Captured struct {
	m            *Model
	shape        candle.Shape // the latents'
	tshape       candle.Shape // the text's
	graph        *candle.Graph
	x, text, emb *candle.Tensor // the graph's inputs, written before each replay
	out          *candle.Tensor // what the graph writes
}

// Capture runs the forward pass of x at timestep t under c, as Forward,
// and captures it as a graph for later Forwards of the same shapes of
// latents and text: it returns the graph and the prediction, a tensor of
// the caller's. The pass runs eagerly first (it runs the convolutions'
// Finds and loads every kernel; its result is the prediction), then again
// under capture, which records its work without running it. It is an
// error on a device that is not a HIP device.
func (m *Model) Capture(x *candle.Tensor, t float64, c Cond) (*Captured, *candle.Tensor, error) {
	const op = "Capture"
	if m.convIn == nil {
		return nil, nil, pkg.Errorf(op, errs.ErrClosed, "the UNet is closed")
	}
	d, ok := m.dev.(*candle.HIPDevice)
	if !ok {
		return nil, nil, pkg.Errorf(op, errs.ErrDevice, "%s runs ops as they are called: graphs capture the work of a HIP device; call Forward", m.dev)
	}
	if err := m.check(op, x, c); err != nil {
		return nil, nil, err
	}
	g := &Captured{m: m, shape: x.Shape(), tshape: c.Text.Shape()}
	var y *candle.Tensor
	fail := func(err error) (*Captured, *candle.Tensor, error) {
		if y != nil {
			y.Close()
		}
		g.Close()
		return nil, nil, pkg.Wrap(op, err)
	}
	var err error
	if g.x, err = x.Copy(); err != nil {
		return fail(err)
	}
	if g.text, err = c.Text.Copy(); err != nil {
		return fail(err)
	}
	if g.emb, err = m.embeddingOf(t, c, g.shape[0]); err != nil {
		return fail(err)
	}
	// The prediction's memory is taken before the capture begins: a block
	// the rehearsal took from the graph's memory and kept would be missing
	// when the capture asks for what the rehearsal did.
	s := g.shape
	if y, err = candle.Empty(m.dev, m.dtype, s[0], m.cfg.OutChannels, s[2], s[3]); err != nil {
		return fail(err)
	}
	rehearsal := true
	g.graph, err = d.Capture(func() error {
		if g.out != nil { // the rehearsal's
			g.out.Close()
			g.out = nil
		}
		p := models.NewPass()
		defer p.Close()
		out := m.body(p, p.In(g.x), p.In(g.emb), p.In(g.text))
		if p.Err != nil {
			return p.Err
		}
		g.out = p.Keep(out)
		if rehearsal { // it ran the pass: its result is the prediction
			rehearsal = false
			return y.CopyFrom(g.out)
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	return g, y, nil
}

// embeddingOf is Forward's embedding at t as a tensor of the caller's.
func (m *Model) embeddingOf(t float64, c Cond, b int) (*candle.Tensor, error) {
	p := models.NewPass()
	defer p.Close()
	e := m.embedding(p, t, b, c)
	return p.Keep(e), p.Err
}

// Fits reports whether the graph was captured for latents of x's shape
// and text of c's.
func (g *Captured) Fits(x *candle.Tensor, c Cond) bool {
	return g.graph != nil && x != nil && c.Text != nil && x.Shape().Equal(g.shape) && c.Text.Shape().Equal(g.tshape)
}

// Forward is Model.Forward, replayed: x and c of the shapes it was
// captured for (Fits).
func (g *Captured) Forward(x *candle.Tensor, t float64, c Cond) (*candle.Tensor, error) {
	const op = "Captured.Forward"
	if g.graph == nil {
		return nil, pkg.Errorf(op, errs.ErrClosed, "the captured forward pass is closed")
	}
	if err := g.m.check(op, x, c); err != nil {
		return nil, err
	}
	if !g.Fits(x, c) {
		return nil, pkg.Errorf(op, errs.ErrShape, "latents %v and text %v: the graph was captured for %v and %v (capture another)", x.Shape(), c.Text.Shape(), g.shape, g.tshape)
	}
	emb, err := g.m.embeddingOf(t, c, g.shape[0])
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	err = g.emb.CopyFrom(emb)
	emb.Close()
	if err == nil {
		err = g.x.CopyFrom(x)
	}
	if err == nil {
		err = g.text.CopyFrom(c.Text)
	}
	if err == nil {
		err = g.graph.Replay()
	}
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	// A copy of the caller's own: the next replay writes the graph's.
	y, err := g.out.Copy()
	return y, pkg.Wrap(op, err)
}

// Close frees the graph and its memory, after the work queued with it.
func (g *Captured) Close() error {
	var all []error
	for _, t := range []*candle.Tensor{g.x, g.text, g.emb, g.out} {
		if t != nil {
			all = append(all, t.Close())
		}
	}
	if g.graph != nil {
		all = append(all, g.graph.Close())
	}
	g.x, g.text, g.emb, g.out, g.graph = nil, nil, nil, nil, nil
	return errors.Join(all...)
}
