package sd

import (
	"image"
	"image/color"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/sd/scheduler"
	"github.com/rocm-go/rocm/errs"
)

// A stand-in for the UNet, affine in its input so that it runs as one
// candle op: out = a(t)·in + b(t).
func coef(t float64) (a, b float64) { return 0.2 + 0.1*math.Cos(t/100), 0.05 * math.Sin(t/50) }

// TestStepIsTheSchedule runs every sampler's loop on the device through
// Step and compares it with the schedule's own loop in float64.
func TestStepIsTheSchedule(t *testing.T) {
	const n = 24
	for _, c := range []struct {
		kind   scheduler.Kind
		steps  int
		karras bool
	}{{scheduler.DDIM, 10, false}, {scheduler.Euler, 20, false}, {scheduler.EulerAncestral, 12, false},
		{scheduler.DPMPP2M, 20, true}, {scheduler.DPMPP2M, 8, false}, {scheduler.LCM, 4, false}} {
		cfg := scheduler.SD()
		cfg.KarrasSigmas = c.karras
		s, err := scheduler.New(c.kind, cfg, c.steps)
		require.NoError(t, err)

		init := scheduler.NewNoise(5).Float64s(n)
		x0 := make([]float64, n)
		for i, v := range init {
			x0[i] = v * s.InitNoiseSigma
		}
		ref := scheduler.NewNoise(6)
		want := s.Sample(x0, func(_ int, t float64, in []float64) []float64 {
			a, b := coef(t)
			out := make([]float64, len(in))
			for j, v := range in {
				out[j] = a*v + b
			}
			return out
		}, func(int) []float64 { return ref.Float64s(n) })

		dev := candle.CPU()
		x, err := candle.FromSlice(dev, x0, n)
		require.NoError(t, err)
		x32, err := x.ToDType(candle.F32)
		require.NoError(t, err)
		x.Close()
		x = x32
		noise := scheduler.NewNoise(6)
		var prev *candle.Tensor
		for _, st := range s.Steps {
			in, err := x.Affine(st.InputScale, 0)
			require.NoError(t, err)
			a, b := coef(st.Timestep)
			out, err := in.Affine(a, b)
			require.NoError(t, err)
			in.Close()
			var z *candle.Tensor
			if st.Noise != 0 {
				z, err = NoiseTensor(noise, dev, candle.F32, n)
				require.NoError(t, err)
			}
			next, den, err := Step(st, x, out, prev, z)
			require.NoError(t, err)
			for _, t := range []*candle.Tensor{x, out, prev, z} {
				if t != nil {
					t.Close()
				}
			}
			x, prev = next, den
		}
		got, err := candle.ToSlice[float32](x)
		require.NoError(t, err)
		x.Close()
		prev.Close()
		scale := 0.0
		for _, v := range want {
			scale = max(scale, math.Abs(v))
		}
		for j := range got {
			assert.InDelta(t, want[j], float64(got[j]), 2e-6*scale, "%s %d steps: latent %d", c.kind, c.steps, j)
		}
	}
}

func TestStepErrors(t *testing.T) {
	x, err := candle.Zeros(candle.CPU(), candle.F32, 4)
	require.NoError(t, err)
	defer x.Close()
	_, _, err = Step(scheduler.Step{DPrev: 0.5}, x, x, nil, nil)
	assert.ErrorIs(t, err, errs.ErrArgument)
	_, _, err = Step(scheduler.Step{Noise: 0.5}, x, x, x, nil)
	assert.ErrorIs(t, err, errs.ErrArgument)
	_, _, err = Step(scheduler.Step{}, nil, x, nil, nil)
	assert.ErrorIs(t, err, errs.ErrArgument)
	y, err := candle.Zeros(candle.CPU(), candle.F32, 5)
	require.NoError(t, err)
	defer y.Close()
	_, _, err = Step(scheduler.Step{X: 1, D: 1, DX: 1, DOut: 1}, x, y, nil, nil)
	assert.ErrorIs(t, err, errs.ErrShape)
}

func TestNoiseTensorIsTheSeeds(t *testing.T) {
	x, err := NoiseTensor(scheduler.NewNoise(42), candle.CPU(), candle.F16, 2, 2)
	require.NoError(t, err)
	defer x.Close()
	assert.Equal(t, candle.Shape{2, 2}, x.Shape())
	f, err := x.ToDType(candle.F32)
	require.NoError(t, err)
	defer f.Close()
	v, err := candle.ToSlice[float32](f)
	require.NoError(t, err)
	for i, w := range scheduler.NewNoise(42).Float64s(4) {
		assert.InDelta(t, w, float64(v[i]), 2e-3*math.Abs(w)+1e-3)
	}
}

func TestImagesRoundTrip(t *testing.T) {
	src := image.NewRGBA(image.Rect(0, 0, 5, 3))
	for y := range 3 {
		for x := range 5 {
			src.SetRGBA(x, y, color.RGBA{uint8(50 * x), uint8(100 * y), uint8(17*x + 29*y), 255})
		}
	}
	for _, dt := range []candle.DType{candle.F32, candle.F16} {
		x, err := FromImages([]image.Image{src, src}, candle.CPU(), dt)
		require.NoError(t, err)
		assert.Equal(t, candle.Shape{2, 3, 3, 5}, x.Shape())
		imgs, err := Images(x)
		x.Close()
		require.NoError(t, err)
		require.Len(t, imgs, 2)
		if dt == candle.F32 {
			assert.Equal(t, src.Pix, imgs[1].Pix, "8 bits survive float32 exactly")
		}
		for i := range src.Pix {
			assert.InDelta(t, src.Pix[i], imgs[0].Pix[i], 1, "%s byte %d", dt, i)
		}
	}
	// Values beyond [-1, 1] clamp.
	x, err := candle.FromSlice(candle.CPU(), []float32{-3, 3, 0}, 1, 3, 1, 1)
	require.NoError(t, err)
	defer x.Close()
	imgs, err := Images(x)
	require.NoError(t, err)
	assert.Equal(t, []uint8{0, 255, 128, 255}, imgs[0].Pix)

	_, err = Images(nil)
	assert.ErrorIs(t, err, errs.ErrArgument)
	y, err := candle.Zeros(candle.CPU(), candle.F32, 1, 4, 2, 2)
	require.NoError(t, err)
	defer y.Close()
	_, err = Images(y)
	assert.ErrorIs(t, err, errs.ErrShape)
	_, err = FromImages(nil, candle.CPU(), candle.F32)
	assert.ErrorIs(t, err, errs.ErrArgument)
	_, err = FromImages([]image.Image{src, image.NewRGBA(image.Rect(0, 0, 2, 2))}, candle.CPU(), candle.F32)
	assert.ErrorIs(t, err, errs.ErrShape)
}
