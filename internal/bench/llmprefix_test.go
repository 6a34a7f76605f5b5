package bench

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/internal/mkmodel"
	"github.com/rocm-go/rocm/internal/testenv"
)

// TestLLMPrefixOnCPU runs the prefix-caching measurement on the tiny
// model on the CPU: the cached requests find the prefix's whole pages,
// and the row reports the ratio of the medians.
func TestLLMPrefixOnCPU(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	require.NoError(t, mkmodel.Write(dir, mkmodel.Tiny(), nil))
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
	dir := filepath.Join(t.TempDir(), "tiny")
	require.NoError(t, mkmodel.Write(dir, tinyBF16(), nil))
	var out strings.Builder
	f, err := RunLLMPrefix(dev, candle.BF16, dir, LLMPrefixSettings{Prefix: 1024, Suffix: 32, Reps: 3, Seed: 1}, &out)
	t.Log(out.String())
	require.NoError(t, err)
	assert.Equal(t, 1024, f.CachedTokens)
	assert.Less(t, f.Cached, f.Uncached)
}
