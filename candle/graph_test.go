package candle

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tier 0: the errors of graphs off a GPU.

func TestCaptureNeedsAHIPDevice(t *testing.T) {
	called := false
	g, err := Capture(CPU(), func() error { called = true; return nil })
	assert.Nil(t, g)
	require.ErrorIs(t, err, ErrDevice)
	assert.Contains(t, err.Error(), "cpu runs ops as they are called")
	assert.False(t, called, "the function must not run on the CPU device")

	g, err = Capture(nil, func() error { return nil })
	assert.Nil(t, g)
	require.ErrorIs(t, err, ErrDevice)

	var ng *Graph
	require.ErrorIs(t, ng.Replay(), ErrArgument)
	require.NoError(t, ng.Close())
}

// Tier 2.

// graphStep is a small step of every kind of work a model queues: a
// product (rocBLAS), element-wise ops, a cast, a fused softmax and an
// index select by ids read from device memory.
func graphStep(x, w, ids *Tensor) (*Tensor, error) {
	s := NewScope()
	defer s.Close()
	xs, err := s.Adopt(x)
	if err != nil {
		return nil, err
	}
	y, err := xs.Matmul(w)
	if err != nil {
		return nil, err
	}
	if y, err = y.Add(xs); err != nil {
		return nil, err
	}
	if y, err = y.ToDType(BF16); err != nil {
		return nil, err
	}
	if y, err = y.ToDType(F32); err != nil {
		return nil, err
	}
	if y, err = y.SoftmaxLastDim(); err != nil {
		return nil, err
	}
	if y, err = y.IndexSelect(ids, 0); err != nil {
		return nil, err
	}
	return s.Keep(y), nil
}

// TestGPUGraphCaptureReplay captures a step whose inputs live in fixed
// storages, replays it after writing new inputs, and compares each replay
// with the same step run eagerly (within 1e-6 of probabilities: the same
// kernels on the same data, bitwise unless the BLAS library picks another
// algorithm under capture); it checks that replays allocate nothing and that Close frees the
// graph's private memory.
func TestGPUGraphCaptureReplay(t *testing.T) {
	d := gpu(t)
	const n = 48
	r := rand.New(rand.NewPCG(1, 2))
	random := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	w, err := FromSlice(d, random(n*n), n, n)
	require.NoError(t, err)
	defer w.Close()
	xst, err := NewStorage(d, random(n*n))
	require.NoError(t, err)
	defer xst.Close()
	x, err := FromStorage(xst, Shape{n, n})
	require.NoError(t, err)
	defer x.Close()
	idst, err := NewStorage(d, []uint32{3, 1, 4, 1, 5})
	require.NoError(t, err)
	defer idst.Close()
	ids, err := FromStorage(idst, Shape{5})
	require.NoError(t, err)
	defer ids.Close()
	require.NoError(t, d.Synchronize())
	base := d.MemoryStats()

	var out *Tensor
	runs := 0
	g, err := d.Capture(func() error {
		runs++
		if out != nil {
			out.Close()
		}
		var err error
		out, err = graphStep(x, w, ids)
		return err
	})
	require.NoError(t, err)
	defer g.Close()
	assert.Equal(t, 2, runs, "a rehearsal and a capture")
	assert.GreaterOrEqual(t, g.Nodes(), 7, "the step's kernels")
	assert.Positive(t, g.Bytes())
	t.Logf("graph: %d nodes, %d bytes of private memory", g.Nodes(), g.Bytes())

	// Nested captures and host transfers under capture are errors.
	_, err = d.Capture(func() error {
		_, err := d.Capture(func() error { return nil })
		require.ErrorIs(t, err, ErrArgument)
		return err
	})
	require.ErrorIs(t, err, ErrArgument)
	_, err = d.Capture(func() error {
		y, err := x.Copy()
		if err != nil {
			return err
		}
		defer y.Close()
		if d.capturing.Load() {
			_, err = ToSlice[float32](y)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "capturing a graph")
			err2 := xst.Write(random(n * n))
			require.Error(t, err2)
			assert.Contains(t, err2.Error(), "capturing a graph")
			require.Error(t, d.Synchronize())
		}
		return err
	})
	require.Error(t, err, "a download under capture fails the capture")

	allocs := d.MemoryStats().Allocs
	for step := range 4 {
		xv := random(n * n)
		ix := []uint32{uint32(step), uint32(n - 1 - step), 7, uint32(step * 3), 0}
		require.NoError(t, xst.Write(xv))
		require.NoError(t, idst.Write(ix))
		require.NoError(t, g.Replay())
		got, err := ToSlice[float32](out)
		require.NoError(t, err)
		want, err := graphStep(x, w, ids)
		require.NoError(t, err)
		wv, err := ToSlice[float32](want)
		require.NoError(t, err)
		want.Close()
		require.Len(t, got, len(wv))
		worst, bitwise := 0.0, true
		for i := range wv {
			worst = max(worst, math.Abs(float64(wv[i]-got[i])))
			bitwise = bitwise && math.Float32bits(wv[i]) == math.Float32bits(got[i])
		}
		t.Logf("replay %d: max |graph - eager| %.3g, bitwise equal: %v", step, worst, bitwise)
		require.LessOrEqual(t, worst, 1e-6, "replay %d against the same step run eagerly", step)
		if step == 0 {
			allocs = d.MemoryStats().Allocs // the eager step may have grown the pool once
		}
	}
	assert.Equal(t, allocs, d.MemoryStats().Allocs, "replays allocate no device memory")

	require.NoError(t, out.Close())
	assert.Positive(t, d.MemoryStats().Graphs)
	require.NoError(t, g.Close())
	require.NoError(t, g.Close())
	st := d.MemoryStats()
	assert.Zero(t, st.Graphs, "Close frees the graph's private memory")
	assert.Equal(t, base.InUse, st.InUse)
	err = g.Replay()
	require.ErrorIs(t, err, ErrClosed)
}

// TestGPUGraphCaptureErrors: a function that fails in its rehearsal or
// under capture gives no graph, leaves no capture under way and keeps no
// private memory.
func TestGPUGraphCaptureErrors(t *testing.T) {
	d := gpu(t)
	_, err := d.Capture(nil)
	require.ErrorIs(t, err, ErrArgument)
	boom := errors.New("boom")
	_, err = d.Capture(func() error { return boom })
	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "rehearsal")
	runs := 0
	x, err := FromSlice(d, []float32{1, 2, 3})
	require.NoError(t, err)
	defer x.Close()
	_, err = d.Capture(func() error {
		runs++
		y, err := x.Exp()
		if err != nil {
			return err
		}
		defer y.Close()
		if runs == 2 {
			// More memory under capture than in the rehearsal.
			z, err := Empty(d, F32, 1<<20)
			if err != nil {
				return err
			}
			z.Close()
		}
		return nil
	})
	require.ErrorIs(t, err, errCaptureAlloc)
	assert.Contains(t, err.Error(), "beyond what its rehearsal used")
	assert.Nil(t, d.capture.Load())
	assert.False(t, d.capturing.Load())
	require.NoError(t, d.Synchronize())
	assert.Zero(t, d.MemoryStats().Graphs)
	// The device works on.
	v, err := ToSlice[float32](x)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3}, v)
}
