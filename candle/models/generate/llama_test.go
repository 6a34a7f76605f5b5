package generate_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/candle/models/llama"
	"github.com/rocm-go/rocm/internal/mkmodel"
)

// TestEngineAdmitsByPages runs three requests on a llama model (a
// PagedModel) that fit its KV cache in tokens (3×19 ≤ 64) but not in
// pages (each takes 2 pages of 16, 4 exist): the engine must queue the
// third rather than run it out of cache.
func TestEngineAdmitsByPages(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, mkmodel.Write(dir, mkmodel.Spec{Family: "llama", Hidden: 64, Intermediate: 96, Layers: 2, Heads: 4, KVHeads: 2,
		Vocab: 97, MaxPositions: 512, TieEmbeddings: true, Seed: 3, NoTokenizer: true}, nil))
	m, err := llama.Load(dir, candle.CPU(), candle.F32, llama.Options{CacheTokens: 64, PageSize: 16})
	require.NoError(t, err)
	defer m.Close()
	require.Equal(t, 16, m.CachePageSize())
	e, err := generate.NewEngine(m, generate.Config{MaxBatch: 8})
	require.NoError(t, err)
	defer e.Close()
	var chans []<-chan generate.Event
	for i := range 3 {
		ch, err := e.Submit(context.Background(), generate.Request{Prompt: []int32{int32(i + 1), 5}, MaxTokens: 17})
		require.NoError(t, err)
		chans = append(chans, ch)
	}
	for i, ch := range chans {
		var last generate.Event
		for ev := range ch {
			last = ev
		}
		require.NoError(t, last.Err, "request %d", i)
		assert.Equal(t, "length", last.FinishReason, "request %d", i)
		assert.Equal(t, 17, last.CompletionTokens, "request %d", i)
	}
	assert.Equal(t, 64, m.CacheTokensFree(), "every page back")
}
