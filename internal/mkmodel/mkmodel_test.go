package mkmodel

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/safetensors"
)

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

func TestWriteTiny(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	var stages []string
	require.NoError(t, Write(a, Tiny(), func(p Progress) {
		if len(stages) == 0 || stages[len(stages)-1] != p.Stage {
			stages = append(stages, p.Stage)
		}
	}))
	assert.Equal(t, []string{"weights", "save", "tokenizer", "done"}, stages)
	require.NoError(t, Write(b, Tiny(), nil))
	for _, f := range []string{"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		x, err := os.ReadFile(filepath.Join(a, f))
		require.NoError(t, err)
		y, err := os.ReadFile(filepath.Join(b, f))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(x, y), "%s: one seed, one file", f)
	}

	cfg := readJSON(t, filepath.Join(a, "config.json"))
	assert.Equal(t, "llama", cfg["model_type"])
	assert.Equal(t, 512.0, cfg["vocab_size"])
	assert.Equal(t, "llama3", cfg["rope_scaling"].(map[string]any)["rope_type"])

	// The tokenizer: 256 bytes, then one token per distinct merge result,
	// every merge made of known tokens, then Llama 3's specials.
	tok := readJSON(t, filepath.Join(a, "tokenizer.json"))
	model := tok["model"].(map[string]any)
	vocab := model["vocab"].(map[string]any)
	merges := model["merges"].([]any)
	assert.Equal(t, "BPE", model["type"])
	assert.Len(t, merges, 240)
	base := 256 + len(trainBPE(240).tokens)
	assert.Len(t, vocab, base)
	ids := map[float64]bool{}
	for _, id := range vocab {
		ids[id.(float64)] = true
	}
	for i := range base {
		assert.True(t, ids[float64(i)], "id %d", i)
	}
	assert.Equal(t, 0.0, vocab["\u0100"], "byte 0 is GPT-2's Ā")
	assert.Equal(t, 32.0, vocab["Ġ"])
	for _, m := range merges {
		var l, r string
		parts := bytes.SplitN([]byte(m.(string)), []byte(" "), 2)
		l, r = string(parts[0]), string(parts[1])
		assert.Contains(t, vocab, l)
		assert.Contains(t, vocab, r)
		assert.Contains(t, vocab, l+r)
	}
	added := tok["added_tokens"].([]any)
	assert.Len(t, added, 16)
	names := map[string]float64{}
	for _, a := range added {
		m := a.(map[string]any)
		names[m["content"].(string)] = m["id"].(float64)
	}
	b0 := float64(base)
	assert.Equal(t, map[string]float64{"<|begin_of_text|>": b0, "<|end_of_text|>": b0 + 1, "<|start_header_id|>": b0 + 6, "<|end_header_id|>": b0 + 7, "<|eot_id|>": b0 + 9},
		map[string]float64{"<|begin_of_text|>": names["<|begin_of_text|>"], "<|end_of_text|>": names["<|end_of_text|>"],
			"<|start_header_id|>": names["<|start_header_id|>"], "<|end_header_id|>": names["<|end_header_id|>"], "<|eot_id|>": names["<|eot_id|>"]})
	tc := readJSON(t, filepath.Join(a, "tokenizer_config.json"))
	assert.Contains(t, tc["chat_template"], "<|start_header_id|>")
	assert.Equal(t, "<|eot_id|>", tc["eos_token"])
	gen := readJSON(t, filepath.Join(a, "generation_config.json"))
	assert.Equal(t, []any{b0 + 1, b0 + 9}, gen["eos_token_id"])

	// The weights: every tensor named as transformers names it, in the
	// spec's dtype and shape.
	f, err := safetensors.OpenFile(filepath.Join(a, "model.safetensors"))
	require.NoError(t, err)
	defer f.Close()
	info, ok := f.Info("model.layers.3.self_attn.k_proj.weight")
	require.True(t, ok)
	assert.Equal(t, "F32", info.Type)
	assert.Equal(t, candle.Shape{64, 128}, info.Shape)
	_, ok = f.Info("lm_head.weight")
	assert.False(t, ok, "tied")
	n, err := Tiny().Bytes()
	require.NoError(t, err)
	st, err := os.Stat(filepath.Join(a, "model.safetensors"))
	require.NoError(t, err)
	assert.InDelta(t, n, st.Size(), 16384, "the weights and a header")
}

func TestSpecs(t *testing.T) {
	s := Llama32_1B()
	n, err := s.Bytes()
	require.NoError(t, err)
	assert.Equal(t, int64(2*1235814400), n, "Llama 3.2 1B: 1,235,814,400 parameters in BF16")
	assert.Equal(t, 128256, s.tokenizerSize())
	assert.Equal(t, "<|eot_id|>", specials(128000, 128256)[9])
	assert.Len(t, specials(128000, 128256), 256)
	n, err = Llama31_8B().Bytes()
	require.NoError(t, err)
	assert.Equal(t, int64(2*8030261248), n, "Llama 3.1 8B: 8,030,261,248 parameters in BF16")

	for _, bad := range []Spec{
		{Family: "gpt2", Hidden: 8, Intermediate: 8, Layers: 1, Heads: 1, KVHeads: 1},
		{Hidden: 8, Intermediate: 8, Layers: 1, Heads: 3, KVHeads: 2},
		{Hidden: 8, Intermediate: 8, Layers: 1, Heads: 3, KVHeads: 3},
		{Hidden: 8, Intermediate: 8, Layers: 1, Heads: 1, KVHeads: 1, DType: candle.U8},
	} {
		assert.Error(t, Write(t.TempDir(), bad, nil), "%+v", bad)
	}
	small := Tiny()
	small.Vocab = 100
	assert.ErrorContains(t, Write(t.TempDir(), small, nil), "smaller than the tokenizer's 512 tokens")

	// Every family with its options writes a config the shapes agree with.
	for _, fam := range []string{"mistral", "qwen2"} {
		s := Spec{Family: fam, Hidden: 32, Intermediate: 48, Layers: 1, Heads: 2, KVHeads: 1, SlidingWindow: 8, NoTokenizer: true, Vocab: 10}
		dir := t.TempDir()
		require.NoError(t, Write(dir, s, nil))
		cfg := readJSON(t, filepath.Join(dir, "config.json"))
		assert.Equal(t, 8.0, cfg["sliding_window"], fam)
		f, err := safetensors.OpenFile(filepath.Join(dir, "model.safetensors"))
		require.NoError(t, err)
		_, hasBias := f.Info("model.layers.0.self_attn.q_proj.bias")
		f.Close()
		assert.Equal(t, fam == "qwen2", hasBias, fam)
	}
}

func TestWriteSD(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteSD(dir, TinySD(), nil))
	for _, f := range []string{"model_index.json", "tokenizer/vocab.json", "tokenizer/merges.txt", "tokenizer/tokenizer_config.json",
		"text_encoder/config.json", "text_encoder/model.safetensors", "unet/config.json", "unet/diffusion_pytorch_model.safetensors",
		"vae/config.json", "vae/diffusion_pytorch_model.safetensors", "scheduler/scheduler_config.json"} {
		assert.FileExists(t, filepath.Join(dir, f))
	}
	bad := TinySD()
	bad.UNetChannels = []int{12, 24}
	assert.ErrorContains(t, WriteSD(t.TempDir(), bad, nil), "UNet channels 12")
	bad = TinySD()
	bad.DType = candle.U8
	assert.ErrorContains(t, WriteSD(t.TempDir(), bad, nil), "dtype u8")
}

// TestOnDevice: weights made where they load, whole or a rank's part,
// under the spec's names and shapes, beside the spec's config (llama's
// TestTensorParallelOnDevice runs a model of them).
func TestOnDevice(t *testing.T) {
	s := Tiny()
	_, _, err := OnDevice(s)
	assert.ErrorContains(t, err, "needs the spec's Vocab")
	s.Vocab = 300
	cfg, w, err := OnDevice(s)
	require.NoError(t, err)
	info, ok := w.Info("model.layers.1.mlp.down_proj.weight")
	require.True(t, ok)
	assert.Equal(t, candle.Shape{128, 384}, info.Shape)
	x, err := w.LoadSlice("model.layers.1.mlp.down_proj.weight", candle.CPU(), 1, 192, 192)
	require.NoError(t, err)
	assert.Equal(t, candle.Shape{128, 192}, x.Shape())
	x.Close()
	_, err = w.LoadSlice("model.layers.1.mlp.down_proj.weight", candle.CPU(), 1, 300, 192)
	assert.Error(t, err)
	assert.Contains(t, string(cfg), `"hidden_size":128`)
}
