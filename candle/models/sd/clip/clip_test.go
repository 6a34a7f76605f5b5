package clip

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/nn"
	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/testenv"
)

// testdata holds a tiny random encoder and its outputs from OpenAI's CLIP
// text transformer (testdata/make.py).
type goldenOut struct {
	Last        [][][]float64 `json:"last_hidden"`
	Penultimate [][][]float64 `json:"penultimate"`
	Pooled      [][]float64   `json:"pooled"`
	Projected   [][]float64   `json:"projected"`
}

type goldenFile struct {
	IDs       [][]int32 `json:"ids"`
	QuickGELU goldenOut `json:"quick_gelu"`
	GELU      goldenOut `json:"gelu"`
}

func readGolden(t *testing.T) goldenFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden.json"))
	require.NoError(t, err)
	var g goldenFile
	require.NoError(t, json.Unmarshal(b, &g))
	return g
}

func open(t *testing.T, dev candle.Device, dt candle.DType, act string) *Model {
	t.Helper()
	cfg, err := LoadConfig(filepath.Join("testdata", "config.json"))
	require.NoError(t, err)
	cfg.HiddenAct = act
	w, err := safetensors.Open(filepath.Join("testdata", "model.safetensors"))
	require.NoError(t, err)
	defer w.Close()
	m, err := New(w, cfg, dev, dt)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

// flat is a tensor's values in float64.
func flat(t *testing.T, x *candle.Tensor) []float64 {
	t.Helper()
	f, err := x.ToDType(candle.F32)
	require.NoError(t, err)
	defer f.Close()
	v, err := candle.ToSlice[float32](f)
	require.NoError(t, err)
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// maxRelErr is the largest |got − want| over the largest |want|.
func maxRelErr(t *testing.T, want any, got []float64) float64 {
	t.Helper()
	var w []float64
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case [][][]float64:
			for _, y := range x {
				walk(y)
			}
		case [][]float64:
			for _, y := range x {
				walk(y)
			}
		case []float64:
			w = append(w, x...)
		}
	}
	walk(want)
	require.Len(t, got, len(w))
	scale, worst := 0.0, 0.0
	for _, x := range w {
		scale = max(scale, math.Abs(x))
	}
	for i := range w {
		worst = max(worst, math.Abs(got[i]-w[i])/scale)
	}
	return worst
}

func checkAgainstOpenAI(t *testing.T, dev candle.Device, dt candle.DType, tol float64) {
	g := readGolden(t)
	for act, want := range map[string]goldenOut{"quick_gelu": g.QuickGELU, "gelu": g.GELU} {
		m := open(t, dev, dt, act)
		require.True(t, m.HasProjection())
		out, err := m.Forward(g.IDs)
		require.NoError(t, err)
		assert.Equal(t, candle.Shape{2, 16, 32}, out.Last.Shape())
		assert.Equal(t, candle.Shape{2, 16, 32}, out.Penultimate.Shape())
		assert.Equal(t, candle.Shape{2, 32}, out.Pooled.Shape())
		assert.Equal(t, candle.Shape{2, 24}, out.Projected.Shape())
		for name, c := range map[string]struct {
			want any
			got  *candle.Tensor
		}{"last": {want.Last, out.Last}, "penultimate": {want.Penultimate, out.Penultimate}, "pooled": {want.Pooled, out.Pooled}, "projected": {want.Projected, out.Projected}} {
			e := maxRelErr(t, c.want, flat(t, c.got))
			t.Logf("%s %s %s: max relative error %.2g", act, dt, name, e)
			assert.LessOrEqual(t, e, tol, "%s %s %s", act, dt, name)
		}
		out.Close()
	}
}

// TestAgainstOpenAI compares the encoder on the CPU with OpenAI's text
// transformer (float64) in both activations.
func TestAgainstOpenAI(t *testing.T) { checkAgainstOpenAI(t, candle.CPU(), candle.F32, 1e-5) }

func TestGPUAgainstOpenAI(t *testing.T) {
	dev, err := candle.HIP(0)
	testenv.Need(t, 2, "a GPU", err)
	checkAgainstOpenAI(t, dev, candle.F32, 1e-4)
	checkAgainstOpenAI(t, dev, candle.F16, 1e-2)
	checkAgainstOpenAI(t, dev, candle.BF16, 4e-2)
}

func TestPooledPosition(t *testing.T) {
	m := &Model{cfg: Config{EOSTokenID: 2}}
	assert.Equal(t, 3, m.pooledAt([]int32{298, 5, 7, 299, 299, 299}), "the first of the largest ids")
	assert.Equal(t, 2, m.pooledAt([]int32{298, 5, 299, 0, 0}))
	m.cfg.EOSTokenID = 7
	assert.Equal(t, 2, m.pooledAt([]int32{298, 5, 7, 7, 0}), "the first EOS")
	assert.Equal(t, 4, m.pooledAt([]int32{298, 5, 6, 6, 0}), "no EOS: the last position")
}

func TestErrors(t *testing.T) {
	m := open(t, candle.CPU(), candle.F32, "quick_gelu")
	for _, c := range []struct {
		ids  [][]int32
		text string
	}{
		{nil, "no windows"},
		{[][]int32{make([]int32, 17)}, "windows of 17 tokens: want 1 to 16"},
		{[][]int32{{1, 2}, {1}}, "window 1 has 1 tokens and window 0 2"},
		{[][]int32{{1, 300}}, "token 300 at 1 is not in the vocabulary of 300"},
	} {
		_, err := m.Forward(c.ids)
		require.ErrorIs(t, err, errs.ErrArgument, "%v", c.ids)
		assert.ErrorContains(t, err, c.text)
	}
	require.NoError(t, m.Close())
	require.NoError(t, m.Close())
	_, err := m.Forward([][]int32{{1}})
	assert.ErrorIs(t, err, errs.ErrClosed)

	for _, c := range []struct {
		json  string
		kind  error
		field string
	}{
		{`{`, errs.ErrFormat, ""},
		{`{"vocab_size": 0}`, errs.ErrArgument, "vocab_size"},
		{`{"vocab_size": 10, "hidden_size": 30, "num_attention_heads": 4}`, errs.ErrArgument, "num_attention_heads"},
		{`{"vocab_size": 10, "hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 1, "num_hidden_layers": 1, "max_position_embeddings": 4, "hidden_act": "relu"}`, errs.ErrUnsupported, "hidden_act"},
	} {
		_, err := ParseConfig([]byte(c.json))
		require.ErrorIs(t, err, c.kind, c.json)
		if c.field != "" {
			var e *errs.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, c.field, e.Field)
		}
	}
	_, err = LoadConfig(filepath.Join(t.TempDir(), "config.json"))
	assert.ErrorIs(t, err, errs.ErrNotFound)

	// A weight of the wrong shape names itself.
	cfg, err := LoadConfig(filepath.Join("testdata", "config.json"))
	require.NoError(t, err)
	cfg.IntermediateSize = 64
	w, err := safetensors.Open(filepath.Join("testdata", "model.safetensors"))
	require.NoError(t, err)
	defer w.Close()
	_, err = New(w, cfg, candle.CPU(), candle.F32)
	require.Error(t, err)
	assert.ErrorContains(t, err, "text_model.encoder.layers.0.mlp.fc1.weight")
	_, err = New(w, cfg, candle.CPU(), candle.U8)
	assert.ErrorIs(t, err, errs.ErrDType)
}

// TestWithoutTextModelPrefix: transformers 5 saves a CLIPTextModel's
// weights without text_model.; they load and encode the same.
func TestWithoutTextModelPrefix(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("testdata", "config.json"))
	require.NoError(t, err)
	w, err := safetensors.Open(filepath.Join("testdata", "model.safetensors"))
	require.NoError(t, err)
	defer w.Close()
	bare := nn.TensorWeights{Tensors: map[string]*candle.Tensor{}}
	for _, n := range w.Names() {
		x, err := w.Load(n, candle.CPU())
		require.NoError(t, err)
		defer x.Close()
		bare.Tensors[strings.TrimPrefix(n, "text_model.")] = x
	}
	require.NotContains(t, bare.Tensors, "text_model.embeddings.token_embedding.weight")
	m, err := New(bare, cfg, candle.CPU(), candle.F32)
	require.NoError(t, err)
	defer m.Close()
	ref := open(t, candle.CPU(), candle.F32, cfg.HiddenAct)
	ids := [][]int32{{1, 2, 3, 4, 0}}
	got, err := m.Forward(ids)
	require.NoError(t, err)
	defer got.Close()
	want, err := ref.Forward(ids)
	require.NoError(t, err)
	defer want.Close()
	assert.Equal(t, flat(t, want.Last), flat(t, got.Last))
	assert.Equal(t, flat(t, want.Penultimate), flat(t, got.Penultimate))
}

// TestForwardFreesWhatItMakes checks that a forward pass leaves no tensor
// behind for the garbage collector.
func TestForwardFreesWhatItMakes(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	dev := candle.CPU()
	m := open(t, dev, candle.F32, "quick_gelu")
	before := dev.MemoryStats().InUse
	out, err := m.Forward([][]int32{{0, 20, 125, 39, 20, 268, 2}})
	require.NoError(t, err)
	out.Close()
	assert.LessOrEqual(t, dev.MemoryStats().InUse, before)
}
