package llama

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/gguf"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/mkmodel"
	"github.com/rocm-go/rocm/tokenizer"
)

// ggufSpec has rows of 256 so that the K types apply (Tiny's 128 falls
// back to Q8_0), GQA, llama3 RoPE scaling (a rope_freqs tensor) and the
// tokenizer.
func ggufSpec() mkmodel.Spec {
	return mkmodel.Spec{Family: "llama", Hidden: 256, Intermediate: 512, Layers: 2, Heads: 4, KVHeads: 2, MaxPositions: 512,
		RopeTheta: 500000, TieEmbeddings: true, Seed: 11, DType: candle.F32,
		RopeScaling: &mkmodel.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 64}}
}

func writeGGUF(t *testing.T, s mkmodel.Spec, typ candle.GGMLType) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model-"+typ.String()+".gguf")
	require.NoError(t, mkmodel.WriteGGUF(path, s, typ, nil))
	return path
}

func loadGGUF(t *testing.T, path string, dev candle.Device, dt candle.DType, opts Options) *Model {
	t.Helper()
	m, err := Load(path, dev, dt, opts)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

// TestGGUFMatchesSafetensors loads the same weights from the folder Write
// makes and from the GGUF file WriteGGUF makes: llama.cpp's names, q and k
// rows in its order and RoPE factors as a tensor must give the same model.
func TestGGUFMatchesSafetensors(t *testing.T) {
	specs := map[string]mkmodel.Spec{"gguf": ggufSpec(), "tiny llama3": tinySpecs["llama gqa llama3 tied"]}
	lin := mkmodel.Spec{Family: "llama", Hidden: 64, Intermediate: 96, Layers: 2, Heads: 2, KVHeads: 1, Vocab: 61, HeadDim: 48,
		MaxPositions: 256, Seed: 4, NoTokenizer: true, RopeScaling: &mkmodel.RopeScaling{Type: "linear", Factor: 4}}
	specs["linear untied head dim 48"] = lin
	for name, s := range specs {
		t.Run(name, func(t *testing.T) {
			dir := writeModel(t, s)
			path := writeGGUF(t, s, candle.GGMLF32)
			cfg := configOf(t, path)
			ref := configOf(t, dir)
			for _, p := range [][2]int{{cfg.HiddenSize, ref.HiddenSize}, {cfg.Layers, ref.Layers}, {cfg.Heads, ref.Heads},
				{cfg.KVHeads, ref.KVHeads}, {cfg.HeadDim, ref.HeadDim}, {cfg.IntermediateSize, ref.IntermediateSize},
				{cfg.VocabSize, ref.VocabSize}, {cfg.MaxPositions, ref.MaxPositions}} {
				assert.Equal(t, p[1], p[0])
			}
			assert.Equal(t, ref.TieEmbeddings, cfg.TieEmbeddings)
			for i, x := range ref.InvFreq() {
				assert.InEpsilon(t, x, cfg.InvFreq()[i], 1e-6, "frequency %d", i)
			}
			opts := Options{CacheTokens: 64, PageSize: 4}
			a := load(t, dir, candle.CPU(), candle.F32, opts)
			b := loadGGUF(t, path, candle.CPU(), candle.F32, opts)
			tokens := randomTokens(rand.New(rand.NewPCG(1, 2)), 17, cfg.VocabSize)
			e := logitsErr(t, a, b, tokens)
			t.Logf("max relative error %.2g", e)
			assert.LessOrEqual(t, e, 1e-5)
		})
	}
}

// ggufTolerance is each type's largest relative error of the logits
// against the F32 model's: about four times each type's RMS weight error
// (TestQuantizeRoundTrip), measured 2.2e-2 for Q8_0 to 0.33 for Q4_K on
// this random model, with room.
var ggufTolerance = map[candle.GGMLType]float64{candle.GGMLF16: 2e-3, candle.GGMLQ8_0: 0.035, candle.GGMLQ6_K: 0.11,
	candle.GGMLQ5_K: 0.25, candle.GGMLQ4_K: 0.5, candle.GGMLQ4_0: 0.45, candle.GGMLQ5_1: 0.25}

func TestGGUFQuantized(t *testing.T) {
	s := ggufSpec()
	ref := loadGGUF(t, writeGGUF(t, s, candle.GGMLF32), candle.CPU(), candle.F32, Options{CacheTokens: 64, PageSize: 4})
	tokens := randomTokens(rand.New(rand.NewPCG(3, 4)), 11, ref.VocabSize())
	lr, err := ref.Logits(tokens)
	require.NoError(t, err)
	want := rows(t, lr)
	lr.Close()
	for typ, tol := range ggufTolerance {
		t.Run(typ.String(), func(t *testing.T) {
			m := loadGGUF(t, writeGGUF(t, s, typ), candle.CPU(), candle.F32, Options{CacheTokens: 64, PageSize: 4})
			if typ.Quantized() {
				require.NotNil(t, m.embedQ)
				require.Len(t, m.layers[0].qkv.q, 1)
			}
			l, err := m.Logits(tokens)
			require.NoError(t, err)
			defer l.Close()
			e := maxRelErr(want, rows(t, l))
			t.Logf("%s: max relative error %.3g", typ, e)
			assert.LessOrEqual(t, e, tol)
			incremental(t, m, ref.VocabSize(), 1e-4)
		})
	}
}

// TestGGUFLoadProgress: a GGUF model's load reports its bytes in the
// file as they reach the device, up to the total.
func TestGGUFLoadProgress(t *testing.T) {
	path := writeGGUF(t, ggufSpec(), candle.GGMLQ4_K)
	c, err := models.Open(path)
	require.NoError(t, err)
	defer c.Close()
	var want int64
	for _, info := range c.GGUF.Tensors() {
		if info.Name != "rope_freqs.weight" {
			want += int64(info.Bytes)
		}
	}
	var calls int
	var last, total int64
	m, err := New(c, candle.CPU(), candle.F32, Options{CacheTokens: 64, Progress: func(d, tot int64) {
		require.GreaterOrEqual(t, d, last)
		calls++
		last, total = d, tot
	}})
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, want, total, "the weights' bytes in the file")
	assert.Equal(t, total, last, "the progress reaches the total")
	assert.Greater(t, calls, 3)
}

func TestGGUFTokenizer(t *testing.T) {
	s := ggufSpec()
	dir := writeModel(t, s)
	c, err := models.Open(writeGGUF(t, s, candle.GGMLQ8_0))
	require.NoError(t, err)
	defer c.Close()
	got, err := c.Tokenizer()
	require.NoError(t, err)
	want, err := tokenizer.LoadDir(dir)
	require.NoError(t, err)
	for _, text := range []string{"Hello! How are you today?", "The quick brown fox, 2026 times.", " spaces  and\nlines", "<|begin_of_text|>hi<|eot_id|>"} {
		for _, special := range []bool{false, true} {
			a, err := want.Encode(text, special)
			require.NoError(t, err)
			b, err := got.Encode(text, special)
			require.NoError(t, err)
			assert.Equal(t, a, b, "%q", text)
		}
	}
	assert.Subset(t, got.EOS(), want.EOS())
	msgs := []tokenizer.Message{{Role: "user", Content: "hi"}}
	a, err := want.ApplyChatTemplate(msgs, true)
	require.NoError(t, err)
	b, err := got.ApplyChatTemplate(msgs, true)
	require.NoError(t, err)
	assert.Equal(t, a, b)
}

func TestGGUFErrors(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "none.gguf"), candle.CPU(), candle.F32, Options{})
	assert.ErrorIs(t, err, errs.ErrNotFound)
	path := writeGGUF(t, ggufSpec(), candle.GGMLQ8_0)
	_, err = Load(path, candle.CPU(), candle.U8, Options{})
	assert.ErrorIs(t, err, errs.ErrDType)
	_, err = Load(path, nil, candle.F32, Options{})
	assert.ErrorIs(t, err, errs.ErrDevice)
	f, err := models.Detect(path)
	require.NoError(t, err)
	assert.Equal(t, models.GGUF, f, "the file's magic says GGUF")
	// mkmodel writes llama without biases only, and refuses a vocabulary
	// smaller than its tokenizer's as Write does.
	err = mkmodel.WriteGGUF(filepath.Join(t.TempDir(), "q.gguf"), tinySpecs["qwen2 biases mqa tied"], candle.GGMLF32, nil)
	assert.ErrorContains(t, err, "not written")
	small := ggufSpec()
	small.Vocab = 300
	err = mkmodel.WriteGGUF(filepath.Join(t.TempDir(), "v.gguf"), small, candle.GGMLF32, nil)
	assert.ErrorContains(t, err, "smaller than the tokenizer's")
	// An architecture the package does not load is refused by name.
	other := filepath.Join(t.TempDir(), "gpt2.gguf")
	out, err := os.Create(other)
	require.NoError(t, err)
	w, err := gguf.NewWriter(out, []gguf.KV{{Key: "general.architecture", Value: "gpt2"}}, nil)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, out.Close())
	_, err = Load(other, candle.CPU(), candle.F32, Options{})
	assert.ErrorIs(t, err, errs.ErrUnsupported)
	assert.ErrorContains(t, err, `"gpt2"`)
}

// TestGPUGGUF runs a quantized model on the GPU against the CPU: the
// logits, and greedy generation token for token.
func TestGPUGGUF(t *testing.T) {
	dev := hipDevice(t)
	s := ggufSpec()
	for _, typ := range []candle.GGMLType{candle.GGMLQ4_K, candle.GGMLQ8_0, candle.GGMLQ4_0, candle.GGMLQ6_K} {
		path := writeGGUF(t, s, typ)
		for _, dt := range []candle.DType{candle.F32, candle.BF16} {
			t.Run(fmt.Sprintf("%s %s", typ, dt), func(t *testing.T) {
				opts := Options{CacheTokens: 512, PageSize: 8}
				g := loadGGUF(t, path, dev, dt, opts)
				c := loadGGUF(t, path, candle.CPU(), candle.F32, opts)
				tokens := randomTokens(rand.New(rand.NewPCG(5, 6)), 29, g.VocabSize())
				e := logitsErr(t, c, g, tokens)
				t.Logf("logits: max relative error %.2g", e)
				assert.LessOrEqual(t, e, gpuTolerance[dt])
				if dt == candle.F32 {
					assert.Equal(t, greedy(t, c, tokens[:7], 24), greedy(t, g, tokens[:7], 24), "greedy generation")
				}
			})
		}
	}
}
