package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/internal/mkmodel"
	"github.com/rocm-go/rocm/tokenizer"
)

func TestPrefixCachingFlag(t *testing.T) {
	dir := modelDir(t)
	c, err := parseFlags([]string{"-model", dir}, io.Discard)
	require.NoError(t, err)
	assert.False(t, c.noPrefixCaching, "on by default")
	c, err = parseFlags([]string{"-model", dir, "-prefix-caching=false"}, io.Discard)
	require.NoError(t, err)
	assert.True(t, c.noPrefixCaching)
}

// TestCachedTokensUsage: the prompt tokens the prefix cache held reach
// usage.prompt_tokens_details.cached_tokens (whole and streamed answers)
// and the prefix cache's series at /metrics.
func TestCachedTokensUsage(t *testing.T) {
	fake := newFake()
	ts := startServer(t, fake, nil)
	m := ts.scrape(t)
	assert.Zero(t, m["rocm_go:prefix_cache_queries_total"])
	_, ok := m["rocm_go:prefix_cache_hit_rate"]
	assert.False(t, ok, "no rate before a generation")

	code, _, body := ts.do(t, "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var resp struct{ Usage usage }
	require.NoError(t, json.Unmarshal(body, &resp))
	assert.Equal(t, usage{PromptTokens: 4, CompletionTokens: 2, TotalTokens: 6}, resp.Usage, "nothing cached: no details")

	fake.cached = 3
	code, _, body = ts.do(t, "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.NoError(t, json.Unmarshal(body, &resp))
	assert.Equal(t, usage{PromptTokens: 4, CompletionTokens: 2, TotalTokens: 6, PromptTokensDetails: &promptTokensDetails{CachedTokens: 3}}, resp.Usage)

	code, _, body = ts.do(t, "POST", "/v1/completions",
		`{"stream": true, "max_tokens": 2, "prompt": "x y z", "stream_options": {"include_usage": true}}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	evs := sseEvents(t, body)
	assert.Equal(t, map[string]any{"prompt_tokens": 4.0, "completion_tokens": 2.0, "total_tokens": 6.0,
		"prompt_tokens_details": map[string]any{"cached_tokens": 3.0}}, evs[len(evs)-1]["usage"])

	m = ts.scrape(t)
	assert.Equal(t, 12.0, m["rocm_go:prefix_cache_queries_total"])
	assert.Equal(t, 6.0, m["rocm_go:prefix_cache_hits_total"])
	assert.Equal(t, 0.5, m["rocm_go:prefix_cache_hit_rate"])
}

// TestRealBackendPrefixCaching: on a small random model on the CPU, a
// prompt asked again finds its whole pages cached and answers the same as
// without prefix caching (LoadOptions.NoPrefixCaching), which finds none.
func TestRealBackendPrefixCaching(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, mkmodel.Write(dir, mkmodel.Tiny(), nil))
	var msgs []tokenizer.Message
	for range 6 {
		msgs = append(msgs, tokenizer.Message{Role: "user", Content: "A long shared system prompt, asked again and again."},
			tokenizer.Message{Role: "assistant", Content: "Understood."})
	}
	msgs = append(msgs, tokenizer.Message{Role: "user", Content: "Hello!"})
	run := func(b Backend, prompt []int32) ([]int32, generate.Event) {
		ch, err := b.Generate(context.Background(), generate.Request{Prompt: prompt, MaxTokens: 8})
		require.NoError(t, err)
		var toks []int32
		for ev := range ch {
			if toks = append(toks, ev.Tokens...); ev.Done {
				require.NoError(t, ev.Err)
				return toks, ev
			}
		}
		t.Fatal("no final event")
		return nil, generate.Event{}
	}
	var answers [][]int32
	for _, off := range []bool{true, false} {
		b, err := openBackend(LoadOptions{Dir: dir, Device: "cpu", DType: "f32", NoPrefixCaching: off})
		require.NoError(t, err)
		text, err := b.ApplyChatTemplate(msgs, true)
		require.NoError(t, err)
		prompt, err := b.Encode(text, false)
		require.NoError(t, err)
		require.Greater(t, len(prompt), 32)
		first, end := run(b, prompt)
		assert.Zero(t, end.CachedTokens)
		again, end := run(b, prompt)
		assert.Equal(t, first, again)
		if off {
			assert.Zero(t, end.CachedTokens)
		} else {
			assert.Equal(t, (len(prompt)-1)/16*16, end.CachedTokens, "every whole page but the last token's")
		}
		answers = append(answers, first)
		require.NoError(t, b.Close())
	}
	assert.Equal(t, answers[0], answers[1])
}

func TestSpeculativeFlag(t *testing.T) {
	dir := modelDir(t)
	c, err := parseFlags([]string{"-model", dir}, io.Discard)
	require.NoError(t, err)
	assert.Zero(t, c.speculativeTokens, "off by default")
	c, err = parseFlags([]string{"-model", dir, "-speculative-tokens", "5"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 5, c.speculativeTokens)
	_, err = parseFlags([]string{"-model", dir, "-speculative-tokens", "-1"}, io.Discard)
	assert.ErrorContains(t, err, "-speculative-tokens -1: want 0 (off) or more")
}

// TestRealBackendSpeculative: on a small random model on the CPU, greedy
// answers with drafted tokens are those without.
func TestRealBackendSpeculative(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, mkmodel.Write(dir, mkmodel.Tiny(), nil))
	var answers [][]int32
	for _, k := range []int{0, 4} {
		b, err := openBackend(LoadOptions{Dir: dir, Device: "cpu", DType: "f32", SpeculativeTokens: k})
		require.NoError(t, err)
		prompt, err := b.Encode("one two three four one two three four one two three", true)
		require.NoError(t, err)
		ch, err := b.Generate(context.Background(), generate.Request{Prompt: prompt, MaxTokens: 24})
		require.NoError(t, err)
		var toks []int32
		for ev := range ch {
			require.NoError(t, ev.Err)
			toks = append(toks, ev.Tokens...)
		}
		assert.Len(t, toks, 24)
		answers = append(answers, toks)
		require.NoError(t, b.Close())
	}
	assert.Equal(t, answers[0], answers[1])
}
