package bench

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/internal/mkmodel"
	"github.com/rocm-go/rocm/internal/testenv"
)

// writeTiny writes a small model of spec into a temporary folder.
func writeTiny(t *testing.T, spec mkmodel.Spec) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	require.NoError(t, mkmodel.Write(dir, spec, nil))
	return dir
}

// TestLLMPrefixOnCPU runs the prefix-caching measurement on the tiny
// model on the CPU: the cached requests find the prefix's whole pages,
// and the row reports the ratio of the medians.
func TestLLMPrefixOnCPU(t *testing.T) {
	dir := writeTiny(t, mkmodel.Tiny())
	var out strings.Builder
	f, err := RunLLMPrefix(candle.CPU(), candle.F32, dir, LLMPrefixSettings{Prefix: 70, Suffix: 8, Reps: 2, Seed: 1}, &out)
	require.NoError(t, err)
	assert.Equal(t, 64, f.CachedTokens, "the prefix's whole pages of 16")
	assert.Positive(t, f.Uncached)
	assert.Positive(t, f.Cached)
	assert.Equal(t, 3, strings.Count(out.String(), "uncached"), "a pair that warms up, then two")
	r := f.Row()
	assert.Equal(t, "time to first token, a 70-token cached prefix + 8 tokens (ratio: cached / uncached)", r.Name)
	assert.InDelta(t, f.Cached/f.Uncached, r.Ratio, 1e-12)
	require.NotNil(t, r.Met)
	assert.Equal(t, r.Ratio <= LLMPrefixGoal, *r.Met)

	_, err = RunLLMPrefix(candle.CPU(), candle.F32, dir, LLMPrefixSettings{Prefix: 70, Reps: 1}, &out)
	assert.ErrorContains(t, err, "want at least 1 of each")
	_, err = RunLLMPrefix(candle.CPU(), candle.F32, dir, LLMPrefixSettings{Prefix: 4000, Suffix: 8, Reps: 1}, &out)
	assert.ErrorContains(t, err, "for a context of 2048")
	assert.Nil(t, (&LLMPrefixFigures{}).Row().Met, "no uncached time: no verdict")
}

// TestGPULLMPrefix measures prefix caching on the tiny BF16 model on the
// GPU: a cached prefix of 1024 tokens answers sooner than the prompt
// prefilled whole.
func TestGPULLMPrefix(t *testing.T) {
	dev, err := candle.HIP(0)
	testenv.Need(t, 2, "a GPU", err)
	dir := writeTiny(t, tinyBF16())
	var out strings.Builder
	f, err := RunLLMPrefix(dev, candle.BF16, dir, LLMPrefixSettings{Prefix: 1024, Suffix: 32, Reps: 3, Seed: 1}, &out)
	t.Log(out.String())
	require.NoError(t, err)
	assert.Equal(t, 1024, f.CachedTokens)
	assert.Less(t, f.Cached, f.Uncached)
}

func TestRepetitivePrompt(t *testing.T) {
	p := repetitivePrompt(rand.New(rand.NewPCG(1, 2)), 30, 100)
	require.Len(t, p, 30)
	assert.Equal(t, p[:10], p[20:], "the text of 20, then its first 10 again")
}

// TestLLMSpeculativeOnCPU runs the speculative-decoding measurement on
// the tiny model on the CPU: drafts are made and kept, the completions
// are those of plain decoding, and the row has the ratio of the rates.
func TestLLMSpeculativeOnCPU(t *testing.T) {
	dir := writeTiny(t, mkmodel.Tiny())
	var out strings.Builder
	s := LLMSpecSettings{Tokens: 4, Prompt: 48, Steps: 24, Batch: 2, Reps: 1, Seed: 1}
	f, err := RunLLMSpeculative(candle.CPU(), candle.F32, dir, s, &out)
	require.NoError(t, err)
	t.Log(out.String())
	assert.Positive(t, f.Plain)
	assert.Positive(t, f.Speculative)
	assert.Positive(t, f.Drafted)
	assert.LessOrEqual(t, f.Accepted, f.Drafted)
	assert.Equal(t, 2, f.Identical, "F32 on the CPU: the same completions")
	r := f.Row()
	assert.Contains(t, r.Name, "4 drafted tokens, batch 2")
	assert.InDelta(t, f.Speculative/f.Plain, r.Ratio, 1e-12)
	_, err = RunLLMSpeculative(candle.CPU(), candle.F32, dir, LLMSpecSettings{Tokens: 4, Prompt: 48, Steps: 24, Batch: 0, Reps: 1}, &out)
	assert.ErrorContains(t, err, "batch 0")
}

// TestGPULLMSpeculative measures prompt-lookup decoding on the tiny BF16
// model on the GPU at batch 1.
func TestGPULLMSpeculative(t *testing.T) {
	dev, err := candle.HIP(0)
	testenv.Need(t, 2, "a GPU", err)
	dir := writeTiny(t, tinyBF16())
	var out strings.Builder
	f, err := RunLLMSpeculative(dev, candle.BF16, dir, LLMSpecSettings{Tokens: 5, Prompt: 256, Steps: 128, Batch: 1, Reps: 3, Seed: 1}, &out)
	t.Log(out.String())
	require.NoError(t, err)
	assert.Positive(t, f.Plain)
	assert.Positive(t, f.Speculative)
	assert.Positive(t, f.Drafted)
}
