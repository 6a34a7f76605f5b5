package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/gguf"
)

func TestRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	var out, errs bytes.Buffer
	require.NoError(t, run([]string{"-out", dir, "-hidden", "64", "-layers", "1", "-heads", "2", "-dtype", "bf16", "-family", "mistral", "-sliding-window", "16", "-untied"}, &out, &errs))
	assert.Contains(t, out.String(), "a mistral model, hidden 64, 1 layers, 2 heads (2 KV), bf16")
	assert.Contains(t, out.String(), "KiB of weights")
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(b, &cfg))
	assert.Equal(t, "bfloat16", cfg["torch_dtype"])
	assert.Equal(t, 16.0, cfg["sliding_window"])
	assert.Equal(t, false, cfg["tie_word_embeddings"])
	for _, f := range []string{"model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		assert.FileExists(t, filepath.Join(dir, f))
	}
}

func TestRunGGUF(t *testing.T) {
	var out, errs bytes.Buffer
	path := filepath.Join(t.TempDir(), "models", "m.gguf") // its folder made if need be, as a folder's is
	require.NoError(t, run([]string{"-out", path, "-gguf", "q8_0", "-hidden", "64", "-layers", "1", "-heads", "2"}, &out, &errs))
	assert.Contains(t, out.String(), "GGUF")
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	info, ok := f.Tensor("blk.0.attn_q.weight")
	require.True(t, ok)
	assert.Equal(t, candle.GGMLQ8_0, info.Type)
	assert.Equal(t, "llama", f.Architecture())
}

func TestRunSD(t *testing.T) {
	var out, errs bytes.Buffer
	dir := filepath.Join(t.TempDir(), "sd", "tiny")
	require.NoError(t, run([]string{"-out", dir, "-sd", "tiny"}, &out, &errs))
	assert.Contains(t, out.String(), "a Stable Diffusion 1.x folder (tiny)")
	for _, f := range []string{"model_index.json", "unet/config.json", "vae/diffusion_pytorch_model.safetensors", "tokenizer/vocab.json"} {
		assert.FileExists(t, filepath.Join(dir, f))
	}
	assert.ErrorContains(t, run([]string{"-out", dir, "-sd", "sdxl"}, &out, &errs), "-sd \"sdxl\": want tiny or sd-1.5")
}

func TestParseErrors(t *testing.T) {
	var errs bytes.Buffer
	_, _, err := parse(nil, &errs)
	assert.ErrorIs(t, err, flag.ErrHelp)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-out", "x", "-preset", "gpt-5"}, `-preset "gpt-5"`},
		{[]string{"-out", "x", "-dtype", "u8"}, `-dtype "u8"`},
		{[]string{"-out", "x", "-layers", "-2"}, "-layers -2"},
		{[]string{"-out", "x", "extra"}, "unexpected arguments"},
		{[]string{"-out", "x", "-gguf", "q9_k"}, "-gguf"},
	} {
		_, _, err := parse(c.args, &errs)
		assert.ErrorContains(t, err, c.msg)
	}
	s, o, err := parse([]string{"-out", "y", "-preset", "llama-3.2-1b"}, &errs)
	require.NoError(t, err)
	assert.Equal(t, "y", o.out)
	assert.False(t, o.set)
	_, o, err = parse([]string{"-out", "y.gguf", "-gguf", "Q4_K"}, &errs)
	require.NoError(t, err)
	assert.Equal(t, candle.GGMLQ4_K, o.gguf)
	assert.Equal(t, candle.BF16, s.DType)
	assert.Equal(t, 128256, s.Vocab)
}
