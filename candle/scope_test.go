package candle

import (
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forwardRef computes forward in float64 on the host: x·w, silu, the
// transpose's row sums, ×0.5 + 1.
func forwardRef(x, w []float64, rows, cols int) []float64 {
	out := make([]float64, cols)
	for c := range cols {
		for r := range rows {
			h := x[r*cols+c] * w[r*cols+c]
			out[c] += h / (1 + math.Exp(-h))
		}
		out[c] = out[c]*0.5 + 1
	}
	return out
}

// forward is a forward-like sequence of ops over an input and a weight:
// every intermediate derives from x.
func forward(x, w *Tensor) (*Tensor, error) {
	h, err := x.Mul(w)
	if err != nil {
		return nil, err
	}
	h, err = h.Silu()
	if err != nil {
		return nil, err
	}
	t, err := h.T()
	if err != nil {
		return nil, err
	}
	c, err := t.Contiguous()
	if err != nil {
		return nil, err
	}
	s, err := c.Sum(true, -1)
	if err != nil {
		return nil, err
	}
	return s.Affine(0.5, 1)
}

func TestScopeClosesIntermediates(t *testing.T) {
	cpu := CPU()
	w := tensorOf(t, cpu, F32, []float64{1, 2, 3, 4, 5, 6}, 2, 3)
	in := tensorOf(t, cpu, F32, []float64{1, 1, 1, 1, 1, 1}, 2, 3)
	s := NewScope()
	x, err := s.Adopt(in)
	require.NoError(t, err)
	out, err := forward(x, w)
	require.NoError(t, err)
	assert.Equal(t, 7, s.Len(), "the adopted view and six intermediates (the transpose view too)")
	s.Keep(out)
	assert.Equal(t, 6, s.Len())
	tmp, err := x.Exp()
	require.NoError(t, err)
	assert.Equal(t, 7, s.Len())
	require.NoError(t, tmp.Close())
	assert.Equal(t, 6, s.Len(), "a tensor closed early leaves the scope")
	require.NoError(t, s.Close())
	assert.Equal(t, 0, s.Len())
	assert.Equal(t, Shape{3, 1}, out.Shape())
	near(t, forwardRef([]float64{1, 1, 1, 1, 1, 1}, []float64{1, 2, 3, 4, 5, 6}, 2, 3), values(t, out), 1e-6)
	assert.Equal(t, []float64{1, 2, 3, 4, 5, 6}, values(t, w), "tensors made outside stay")
	assert.Equal(t, []float64{1, 1, 1, 1, 1, 1}, values(t, in))
	_, err = x.Exp()
	assert.ErrorIs(t, err, ErrClosed, "the adopted view is closed")
	y, err := out.Exp()
	require.NoError(t, err)
	assert.Equal(t, 0, s.Len(), "a kept tensor's results join no scope")
	require.NoError(t, y.Close())
	require.NoError(t, out.Close())
}

func TestScopeAcrossGoroutines(t *testing.T) {
	cpu := CPU()
	w := tensorOf(t, cpu, F32, []float64{1, 2, 3}, 3)
	s := NewScope()
	x, err := s.Adopt(tensorOf(t, cpu, F32, []float64{1, 2, 3}, 3))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				_, err := x.Mul(w)
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 81, s.Len())
	require.NoError(t, s.Close())
}

// TestMemoryStaysFlat runs 10 000 forward-like sequences, each in a
// scope: the device's memory in use comes back to where it started.
func TestMemoryStaysFlat(t *testing.T) { memoryStaysFlat(t, CPU(), 10000) }

func memoryStaysFlat(t *testing.T, dev Device, n int) {
	wv, xv := []float64{1, 2, 3, 4, 5, 6}, []float64{0.5, -1, 2, 0, 1, 3}
	w := tensorOf(t, dev, F32, wv, 2, 3)
	in := tensorOf(t, dev, F32, xv, 2, 3)
	require.NoError(t, dev.Synchronize())
	// The cleanups of other tests' garbage, if any, run before we count:
	// they run after a GC, on a goroutine of their own, so wait until the
	// count holds still.
	base := dev.MemoryStats()
	for range 20 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
		now := dev.MemoryStats()
		if now.InUse == base.InUse {
			break
		}
		base = now
	}
	var last []float64
	for i := range n {
		s := NewScope()
		x, err := s.Adopt(in)
		require.NoError(t, err)
		out, err := forward(x, w)
		require.NoError(t, err)
		if i == 0 || i == n-1 {
			last = values(t, out)
		}
		require.NoError(t, s.Close())
		if i == 0 {
			assert.Equal(t, base.InUse, dev.MemoryStats().InUse, "after the first pass")
		}
	}
	require.NoError(t, dev.Synchronize())
	after := dev.MemoryStats()
	assert.Equal(t, base.InUse, after.InUse, "memory in use after %d passes", n)
	assert.LessOrEqual(t, after.Peak, max(base.Peak, base.InUse+64<<10), "the peak is one pass's intermediates at most")
	near(t, forwardRef(xv, wv, 2, 3), last, 1e-5)
	t.Logf("%d passes on %s: in use %d bytes before and after, peak %d, %d allocations from the device", n, dev, after.InUse, after.Peak, after.Allocs-base.Allocs)
}

// TestUnclosedMemoryComesBack: a tensor dropped without Close gives its
// memory back once the garbage collector finds it (the backstop); a
// closed one gives it back at once, and a later collection gives nothing
// back twice.
func TestUnclosedMemoryComesBack(t *testing.T) {
	dev := CPU()
	base := settled(dev)
	func() {
		x, err := Zeros(dev, F32, 1<<16)
		require.NoError(t, err)
		require.Greater(t, dev.MemoryStats().InUse, base)
		_ = x // dropped unclosed
	}()
	require.Eventually(t, func() bool {
		runtime.GC()
		return dev.MemoryStats().InUse == base
	}, 5*time.Second, 10*time.Millisecond, "the backstop gives unclosed memory back")

	x, err := Zeros(dev, F32, 1<<16)
	require.NoError(t, err)
	require.NoError(t, x.Close())
	assert.Equal(t, base, dev.MemoryStats().InUse, "Close gives the memory back at once")
	assert.Equal(t, base, settled(dev), "and a collection after Close changes nothing (a second release is a no-op)")
}

// settled is the memory in use once the garbage of earlier tests is
// collected and its cleanups have run.
func settled(dev Device) int64 {
	last := int64(-1)
	for {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
		n := dev.MemoryStats().InUse
		if n == last {
			return n
		}
		last = n
	}
}
