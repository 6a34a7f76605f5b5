package unet

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/testenv"
)

func TestCaptureNeedsAHIPDevice(t *testing.T) {
	m, g := load(t, "sd", candle.CPU(), candle.F32)
	x, c := inputs(t, m, g, candle.CPU(), candle.F32)
	_, _, err := m.Capture(x, g.T, c)
	assert.ErrorIs(t, err, errs.ErrDevice)
}

// maxDiff is the largest difference of a from b over b's largest
// magnitude.
func maxDiff(t *testing.T, a, b *candle.Tensor) float64 {
	t.Helper()
	var v [2][]float64
	for i, x := range []*candle.Tensor{a, b} {
		f, err := x.ToDType(candle.F64)
		require.NoError(t, err)
		v[i], err = candle.ToSlice[float64](f)
		require.NoError(t, err)
		f.Close()
	}
	require.Len(t, v[0], len(v[1]))
	scale, worst := 0.0, 0.0
	for i := range v[1] {
		scale = max(scale, math.Abs(v[1][i]))
		worst = max(worst, math.Abs(v[0][i]-v[1][i]))
	}
	return worst / scale
}

// TestGPUCaptured captures each tiny UNet's forward pass and replays it at
// other latents, timesteps and texts: the captured prediction is
// diffusers' (the golden) and every replay is the op-by-op Forward's.
func TestGPUCaptured(t *testing.T) {
	dev, err := candle.HIP(0)
	testenv.Need(t, 2, "a GPU", err)
	for _, dt := range []candle.DType{candle.F32, candle.F16} {
		for _, dir := range []string{"sd", "xl"} {
			m, g := load(t, dir, dev, dt)
			x, c := inputs(t, m, g, dev, dt)
			cg, y, err := m.Capture(x, g.T, c)
			require.NoError(t, err, "%s %s", dir, dt)
			want, err := m.Forward(x, g.T, c)
			require.NoError(t, err)
			assert.LessOrEqual(t, maxDiff(t, y, want), 1e-6, "%s %s: the capture's prediction", dir, dt)
			y.Close()
			want.Close()
			for i, step := range []float64{999, 500, 1} {
				x2, err := x.Affine(0.5+float64(i), 0.1*float64(i))
				require.NoError(t, err)
				text2, err := c.Text.Affine(-1, float64(i))
				require.NoError(t, err)
				c2 := c
				c2.Text = text2
				got, err := cg.Forward(x2, step, c2)
				require.NoError(t, err)
				want, err := m.Forward(x2, step, c2)
				require.NoError(t, err)
				d := maxDiff(t, got, want)
				t.Logf("%s %s, t=%g: replayed against op by op, %.2g", dir, dt, step, d)
				assert.LessOrEqual(t, d, 1e-6, "%s %s, t=%g", dir, dt, step)
				for _, x := range []*candle.Tensor{x2, text2, got, want} {
					x.Close()
				}
			}
			// Another batch is another graph.
			both, err := candle.Cat([]*candle.Tensor{x, x}, 0)
			require.NoError(t, err)
			assert.False(t, cg.Fits(both, c))
			_, err = cg.Forward(both, 1, c)
			assert.ErrorIs(t, err, errs.ErrShape)
			both.Close()
			require.NoError(t, cg.Close())
			_, err = cg.Forward(x, 1, c)
			assert.ErrorIs(t, err, errs.ErrClosed)
		}
	}
}

// TestForwardFreesWhatItMakes checks that a forward pass leaves no tensor
// behind for the garbage collector: a captured pass must allocate the same
// each time it runs.
func TestForwardFreesWhatItMakes(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	dev := candle.CPU()
	for _, dir := range []string{"sd", "xl"} {
		m, g := load(t, dir, dev, candle.F32)
		x, c := inputs(t, m, g, dev, candle.F32)
		before := dev.MemoryStats().InUse
		y, err := m.Forward(x, g.T, c)
		require.NoError(t, err)
		require.NoError(t, y.Close())
		assert.LessOrEqual(t, dev.MemoryStats().InUse, before, dir)
	}
}
