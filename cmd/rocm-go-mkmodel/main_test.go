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
	} {
		_, _, err := parse(c.args, &errs)
		assert.ErrorContains(t, err, c.msg)
	}
	s, out, err := parse([]string{"-out", "y", "-preset", "llama-3.2-1b"}, &errs)
	require.NoError(t, err)
	assert.Equal(t, "y", out)
	assert.Equal(t, candle.BF16, s.DType)
	assert.Equal(t, 128256, s.Vocab)
}
