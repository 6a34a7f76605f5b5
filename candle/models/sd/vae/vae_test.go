package vae

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/testenv"
)

// testdata holds a tiny random AutoencoderKL and what diffusers' computes
// of it in float64 (testdata/make.py).
type golden struct {
	Latents [][][][]float64
	Decoded [][][][]float64
	Images  [][][][]float64
	Encoded [][][][]float64
}

func readGolden(t *testing.T) golden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden.json"))
	require.NoError(t, err)
	var g golden
	require.NoError(t, json.Unmarshal(b, &g))
	return g
}

// flatten is a nested (n, c, h, w) array's values and shape.
func flatten(x [][][][]float64) ([]float64, []int) {
	var v []float64
	for _, a := range x {
		for _, b := range a {
			for _, c := range b {
				v = append(v, c...)
			}
		}
	}
	return v, []int{len(x), len(x[0]), len(x[0][0]), len(x[0][0][0])}
}

func tensor(t *testing.T, dev candle.Device, dt candle.DType, x [][][][]float64) *candle.Tensor {
	t.Helper()
	v, shape := flatten(x)
	f, err := candle.FromSlice(dev, v, shape...)
	require.NoError(t, err)
	defer f.Close()
	y, err := f.ToDType(dt)
	require.NoError(t, err)
	t.Cleanup(func() { y.Close() })
	return y
}

func relErr(t *testing.T, want [][][][]float64, got *candle.Tensor) float64 {
	t.Helper()
	w, shape := flatten(want)
	require.Equal(t, candle.Shape(shape), got.Shape())
	f, err := got.ToDType(candle.F64)
	require.NoError(t, err)
	defer f.Close()
	g, err := candle.ToSlice[float64](f)
	require.NoError(t, err)
	scale, worst := 0.0, 0.0
	for _, x := range w {
		scale = max(scale, math.Abs(x))
	}
	for i := range w {
		worst = max(worst, math.Abs(g[i]-w[i])/scale)
	}
	return worst
}

func open(t *testing.T, dev candle.Device, dt candle.DType) *Model {
	t.Helper()
	cfg, err := LoadConfig(filepath.Join("testdata", "config.json"))
	require.NoError(t, err)
	w, err := safetensors.Open(filepath.Join("testdata", "diffusion_pytorch_model.safetensors"))
	require.NoError(t, err)
	defer w.Close()
	m, err := New(w, cfg, dev, dt)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

func checkAgainstDiffusers(t *testing.T, dev candle.Device, dt candle.DType, tol float64) {
	g := readGolden(t)
	m := open(t, dev, dt)
	assert.Equal(t, 2, m.Config().Factor())
	img, err := m.Decode(tensor(t, dev, dt, g.Latents))
	require.NoError(t, err)
	defer img.Close()
	e := relErr(t, g.Decoded, img)
	t.Logf("%s decode: max relative error %.2g", dt, e)
	assert.LessOrEqual(t, e, tol)
	z, err := m.Encode(tensor(t, dev, dt, g.Images))
	require.NoError(t, err)
	defer z.Close()
	e = relErr(t, g.Encoded, z)
	t.Logf("%s encode: max relative error %.2g", dt, e)
	assert.LessOrEqual(t, e, tol)
}

// TestAgainstDiffusers compares decode and encode on the CPU with
// diffusers' AutoencoderKL in float64.
func TestAgainstDiffusers(t *testing.T) { checkAgainstDiffusers(t, candle.CPU(), candle.F32, 1e-5) }

func TestGPUAgainstDiffusers(t *testing.T) {
	dev, err := candle.HIP(0)
	testenv.Need(t, 2, "a GPU", err)
	checkAgainstDiffusers(t, dev, candle.F32, 1e-4)
	checkAgainstDiffusers(t, dev, candle.F16, 1e-2)
	checkAgainstDiffusers(t, dev, candle.BF16, 5e-2)
}

func TestErrors(t *testing.T) {
	m := open(t, candle.CPU(), candle.F32)
	bad := func(shape ...int) *candle.Tensor {
		x, err := candle.Zeros(candle.CPU(), candle.F32, shape...)
		require.NoError(t, err)
		t.Cleanup(func() { x.Close() })
		return x
	}
	_, err := m.Decode(bad(1, 3, 4, 4))
	assert.ErrorIs(t, err, errs.ErrShape)
	assert.ErrorContains(t, err, "want (batch, 4, height, width)")
	_, err = m.Encode(bad(1, 3, 5, 4))
	assert.ErrorIs(t, err, errs.ErrShape, "height not a multiple of the factor")
	x, err := candle.Zeros(candle.CPU(), candle.F16, 1, 4, 2, 2)
	require.NoError(t, err)
	defer x.Close()
	_, err = m.Decode(x)
	assert.ErrorIs(t, err, errs.ErrDType)
	_, err = m.Decode(nil)
	assert.ErrorIs(t, err, errs.ErrArgument)
	require.NoError(t, m.Close())
	require.NoError(t, m.Close())
	_, err = m.Decode(bad(1, 4, 2, 2))
	assert.ErrorIs(t, err, errs.ErrClosed)

	for _, c := range []struct {
		json  string
		kind  error
		field string
	}{
		{`{`, errs.ErrFormat, ""},
		{`{"in_channels": 3, "out_channels": 3, "latent_channels": 4, "block_out_channels": [8, 10], "layers_per_block": 1, "norm_num_groups": 4}`, errs.ErrArgument, "block_out_channels"},
		{`{"in_channels": 3, "out_channels": 3, "latent_channels": 4, "block_out_channels": [8], "layers_per_block": 1, "norm_num_groups": 4, "shift_factor": 0.0609}`, errs.ErrUnsupported, "shift_factor"},
		{`{"in_channels": 3, "out_channels": 3, "latent_channels": 4, "block_out_channels": [8], "layers_per_block": 1, "norm_num_groups": 4, "up_block_types": ["UpDecoderBlock3D"]}`, errs.ErrUnsupported, "up_block_types"},
	} {
		_, err := ParseConfig([]byte(c.json))
		require.ErrorIs(t, err, c.kind, c.json)
		if c.field != "" {
			var e *errs.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, c.field, e.Field)
		}
	}
	cfg, err := LoadConfig(filepath.Join("testdata", "config.json"))
	require.NoError(t, err)
	cfg.LatentChannels = 8
	w, err := safetensors.Open(filepath.Join("testdata", "diffusion_pytorch_model.safetensors"))
	require.NoError(t, err)
	defer w.Close()
	_, err = New(w, cfg, candle.CPU(), candle.F32)
	assert.ErrorContains(t, err, "decoder.conv_in.weight")
}

// TestDecodeTiled checks the tiling's bookkeeping (diffusers' tiling is
// the reference of ../testdata/golden-inpaint.json): latents within a
// tile decode as Decode does; larger ones to the whole image, whose top
// left corner, before the first blend, is the first tile's own decode;
// and EncodeTiled likewise.
func TestDecodeTiled(t *testing.T) {
	m := open(t, candle.CPU(), candle.F32)
	require.Equal(t, sampleSize(16), m.Config().SampleSize) // tiles of 8 latents, 6 apart
	noise := func(shape ...int) *candle.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Sin(float64(i) * 0.37))
		}
		z, err := candle.FromSlice(candle.CPU(), v, shape...)
		require.NoError(t, err)
		t.Cleanup(func() { z.Close() })
		return z
	}
	values := func(x *candle.Tensor) []float32 {
		v, err := candle.ToSlice[float32](x)
		require.NoError(t, err)
		return v
	}
	small := noise(1, 4, 8, 6)
	a, err := m.Decode(small)
	require.NoError(t, err)
	defer a.Close()
	b, err := m.DecodeTiled(small)
	require.NoError(t, err)
	defer b.Close()
	assert.Equal(t, values(a), values(b))

	z := noise(2, 4, 14, 20)
	y, err := m.DecodeTiled(z)
	require.NoError(t, err)
	defer y.Close()
	require.Equal(t, candle.Shape{2, 3, 28, 40}, y.Shape())
	first, err := z.Narrow(2, 0, 8)
	require.NoError(t, err)
	defer first.Close()
	first2, err := first.Narrow(3, 0, 8)
	require.NoError(t, err)
	defer first2.Close()
	tile, err := m.Decode(first2)
	require.NoError(t, err)
	defer tile.Close()
	got, want := values(y), values(tile)
	for n := range 2 {
		for c := range 3 {
			for i := range 12 {
				for j := range 12 {
					assert.InDelta(t, want[((n*3+c)*16+i)*16+j], got[((n*3+c)*28+i)*40+j], 1e-6)
				}
			}
		}
	}

	// Images within a tile encode as Encode does.
	img := noise(1, 3, 16, 12)
	e1, err := m.Encode(img)
	require.NoError(t, err)
	defer e1.Close()
	e2, err := m.EncodeTiled(img)
	require.NoError(t, err)
	defer e2.Close()
	assert.Equal(t, values(e1), values(e2))
	big, err := m.EncodeTiled(noise(2, 3, 28, 40))
	require.NoError(t, err)
	defer big.Close()
	assert.Equal(t, candle.Shape{2, 4, 14, 20}, big.Shape())

	c, err := ParseConfig([]byte(`{"in_channels": 3, "out_channels": 3, "latent_channels": 4, "block_out_channels": [8], "layers_per_block": 1, "norm_num_groups": 4, "sample_size": [64, 48]}`))
	require.NoError(t, err)
	assert.Equal(t, sampleSize(64), c.SampleSize)
	_, err = ParseConfig([]byte(`{"in_channels": 3, "out_channels": 3, "latent_channels": 4, "block_out_channels": [8], "layers_per_block": 1, "norm_num_groups": 4, "sample_size": "big"}`))
	assert.ErrorIs(t, err, errs.ErrFormat)
	require.NoError(t, m.Close())
	_, err = m.DecodeTiled(z)
	assert.ErrorIs(t, err, errs.ErrClosed)
	_, err = m.EncodeTiled(img)
	assert.ErrorIs(t, err, errs.ErrClosed)
}

// TestDecodeFreesWhatItMakes checks that a decode and an encode leave no
// tensor behind for the garbage collector.
func TestDecodeFreesWhatItMakes(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	dev := candle.CPU()
	g := readGolden(t)
	m := open(t, dev, candle.F32)
	z, x := tensor(t, dev, candle.F32, g.Latents), tensor(t, dev, candle.F32, g.Images)
	before := dev.MemoryStats().InUse
	img, err := m.Decode(z)
	require.NoError(t, err)
	require.NoError(t, img.Close())
	enc, err := m.Encode(x)
	require.NoError(t, err)
	require.NoError(t, enc.Close())
	assert.LessOrEqual(t, dev.MemoryStats().InUse, before)
}
