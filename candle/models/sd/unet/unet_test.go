package unet

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/testenv"
)

// testdata/sd and testdata/xl are tiny random UNets (SD 1.x's and SDXL's
// layouts) with diffusers' predictions in float64 (testdata/make.py).
type golden struct {
	X          [][][][]float64
	Text       [][][]float64
	T          float64
	TextEmbeds [][]float64  `json:"text_embeds"`
	TimeIDs    [][6]float64 `json:"time_ids"`
	Out        [][][][]float64
}

func load(t *testing.T, dir string, dev candle.Device, dt candle.DType) (*Model, golden) {
	t.Helper()
	cfg, err := LoadConfig(filepath.Join("testdata", dir, "config.json"))
	require.NoError(t, err)
	w, err := safetensors.Open(filepath.Join("testdata", dir, "diffusion_pytorch_model.safetensors"))
	require.NoError(t, err)
	defer w.Close()
	m, err := New(w, cfg, dev, dt)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	b, err := os.ReadFile(filepath.Join("testdata", dir, "golden.json"))
	require.NoError(t, err)
	var g golden
	require.NoError(t, json.Unmarshal(b, &g))
	return m, g
}

func tensorOf(t *testing.T, dev candle.Device, dt candle.DType, v []float64, shape ...int) *candle.Tensor {
	t.Helper()
	f, err := candle.FromSlice(dev, v, shape...)
	require.NoError(t, err)
	defer f.Close()
	x, err := f.ToDType(dt)
	require.NoError(t, err)
	t.Cleanup(func() { x.Close() })
	return x
}

func flat4(x [][][][]float64) ([]float64, []int) {
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

func flat3(x [][][]float64) ([]float64, []int) {
	var v []float64
	for _, a := range x {
		for _, b := range a {
			v = append(v, b...)
		}
	}
	return v, []int{len(x), len(x[0]), len(x[0][0])}
}

// inputs are a golden's latents and conditioning on dev in dt.
func inputs(t *testing.T, m *Model, g golden, dev candle.Device, dt candle.DType) (*candle.Tensor, Cond) {
	t.Helper()
	xv, xs := flat4(g.X)
	tv, ts := flat3(g.Text)
	c := Cond{Text: tensorOf(t, dev, dt, tv, ts...)}
	if m.Config().TextTime() {
		var ev []float64
		for _, r := range g.TextEmbeds {
			ev = append(ev, r...)
		}
		c.TextEmbeds = tensorOf(t, dev, dt, ev, len(g.TextEmbeds), len(g.TextEmbeds[0]))
		c.TimeIDs = g.TimeIDs
	}
	return tensorOf(t, dev, dt, xv, xs...), c
}

func checkAgainstDiffusers(t *testing.T, dev candle.Device, dt candle.DType, tol float64) {
	for _, dir := range []string{"sd", "xl"} {
		m, g := load(t, dir, dev, dt)
		x, c := inputs(t, m, g, dev, dt)
		y, err := m.Forward(x, g.T, c)
		require.NoError(t, err)
		want, ws := flat4(g.Out)
		require.Equal(t, candle.Shape(ws), y.Shape())
		f, err := y.ToDType(candle.F64)
		require.NoError(t, err)
		got, err := candle.ToSlice[float64](f)
		require.NoError(t, err)
		f.Close()
		y.Close()
		scale, worst := 0.0, 0.0
		for _, v := range want {
			scale = max(scale, math.Abs(v))
		}
		for i := range want {
			worst = max(worst, math.Abs(got[i]-want[i])/scale)
		}
		t.Logf("%s %s: max relative error %.2g", dir, dt, worst)
		assert.LessOrEqual(t, worst, tol, "%s %s", dir, dt)
	}
}

// TestAgainstDiffusers compares one noise prediction of each tiny UNet on
// the CPU with diffusers' UNet2DConditionModel in float64.
func TestAgainstDiffusers(t *testing.T) { checkAgainstDiffusers(t, candle.CPU(), candle.F32, 1e-5) }

func TestGPUAgainstDiffusers(t *testing.T) {
	dev, err := candle.HIP(0)
	testenv.Need(t, 2, "a GPU", err)
	checkAgainstDiffusers(t, dev, candle.F32, 1e-4)
	checkAgainstDiffusers(t, dev, candle.F16, 1e-2)
	checkAgainstDiffusers(t, dev, candle.BF16, 5e-2)
}

func TestErrors(t *testing.T) {
	m, g := load(t, "xl", candle.CPU(), candle.F32)
	xv, xs := flat4(g.X)
	tv, ts := flat3(g.Text)
	x := tensorOf(t, candle.CPU(), candle.F32, xv, xs...)
	text := tensorOf(t, candle.CPU(), candle.F32, tv, ts...)
	_, err := m.Forward(x, 1, Cond{Text: text})
	assert.ErrorIs(t, err, errs.ErrArgument, "SDXL without its added conditioning")
	assert.ErrorContains(t, err, "TextEmbeds")
	odd := tensorOf(t, candle.CPU(), candle.F32, make([]float64, 2*4*3*6), 2, 4, 3, 6)
	_, err = m.Forward(odd, 1, Cond{Text: text})
	assert.ErrorIs(t, err, errs.ErrShape)
	assert.ErrorContains(t, err, "multiples of 2")
	_, err = m.Forward(x, 1, Cond{Text: x})
	assert.ErrorIs(t, err, errs.ErrShape)
	_, err = m.Forward(x, 1, Cond{})
	assert.ErrorIs(t, err, errs.ErrArgument)
	require.NoError(t, m.Close())
	require.NoError(t, m.Close())
	_, err = m.Forward(x, 1, Cond{Text: text})
	assert.ErrorIs(t, err, errs.ErrClosed)

	for _, c := range []struct {
		json  string
		kind  error
		field string
	}{
		{`{`, errs.ErrFormat, ""},
		{`{"in_channels": 4, "out_channels": 4, "cross_attention_dim": 8, "block_out_channels": [8], "down_block_types": ["DownBlock2D"], "up_block_types": ["UpBlock2D"], "layers_per_block": 1, "norm_num_groups": 4, "attention_head_dim": 2}`, errs.ErrUnsupported, "attention_head_dim"},
		{`{"in_channels": 4, "out_channels": 4, "cross_attention_dim": 8, "block_out_channels": [8], "down_block_types": ["SimpleCrossAttnDownBlock2D"], "up_block_types": ["UpBlock2D"], "layers_per_block": 1, "norm_num_groups": 4, "attention_head_dim": 1}`, errs.ErrUnsupported, "down_block_types"},
		{`{"in_channels": 4, "out_channels": 4, "cross_attention_dim": 8, "block_out_channels": [8], "down_block_types": ["DownBlock2D"], "up_block_types": ["UpBlock2D"], "layers_per_block": 1, "norm_num_groups": 4, "attention_head_dim": 1, "time_cond_proj_dim": 256}`, errs.ErrUnsupported, "class_embed_type"},
		{`{"in_channels": 4, "out_channels": 4, "cross_attention_dim": 8, "block_out_channels": [8, 16], "down_block_types": ["DownBlock2D"], "up_block_types": ["UpBlock2D"], "layers_per_block": 1}`, errs.ErrArgument, "block_out_channels"},
	} {
		_, err := ParseConfig([]byte(c.json))
		require.ErrorIs(t, err, c.kind, c.json)
		if c.field != "" {
			var e *errs.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, c.field, e.Field, c.json)
		}
	}
}
