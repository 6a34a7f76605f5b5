package generate_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/candle/models/llama"
	"github.com/rocm-go/rocm/internal/mkmodel"
	"github.com/rocm-go/rocm/internal/testenv"
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

// tinyLlama is a small random llama model in F32 on dev with a KV cache
// of the given tokens in pages of 4.
func tinyLlama(t *testing.T, dev candle.Device, dir string, cacheTokens int, noPrefix bool) *llama.Model {
	t.Helper()
	m, err := llama.Load(dir, dev, candle.F32, llama.Options{CacheTokens: cacheTokens, PageSize: 4, NoPrefixCaching: noPrefix})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

func tinyLlamaDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, mkmodel.Write(dir, mkmodel.Spec{Family: "llama", Hidden: 64, Intermediate: 96, Layers: 2, Heads: 4, KVHeads: 2,
		Vocab: 97, MaxPositions: 512, TieEmbeddings: true, Seed: 3, NoTokenizer: true}, nil))
	return dir
}

// complete runs a greedy request to its end: its tokens and final event.
func complete(t *testing.T, e *generate.Engine, prompt []int32, maxTokens int) ([]int32, generate.Event) {
	t.Helper()
	ch, err := e.Submit(context.Background(), generate.Request{Prompt: prompt, MaxTokens: maxTokens})
	require.NoError(t, err)
	return drain(t, ch)
}

func drain(t *testing.T, ch <-chan generate.Event) ([]int32, generate.Event) {
	t.Helper()
	var toks []int32
	var last generate.Event
	for ev := range ch {
		toks = append(toks, ev.Tokens...)
		last = ev
	}
	require.NoError(t, last.Err)
	require.True(t, last.Done)
	return toks, last
}

// submitN submits n requests of one prompt at once.
func submitN(t *testing.T, e *generate.Engine, prompt []int32, maxTokens, n int) []<-chan generate.Event {
	t.Helper()
	var chans []<-chan generate.Event
	for range n {
		ch, err := e.Submit(context.Background(), generate.Request{Prompt: prompt, MaxTokens: maxTokens})
		require.NoError(t, err)
		chans = append(chans, ch)
	}
	return chans
}

func tokenRun(seed, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32((seed*31 + i*17 + i*i) % 97)
	}
	return out
}

func cat(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// prefixPair is one model with prefix caching and one without, each with
// an engine.
type prefixPair struct {
	cached, plain   *llama.Model
	eCached, ePlain *generate.Engine
	cacheTokens     int
}

func newPrefixPair(t *testing.T, cacheTokens int) *prefixPair {
	return newPrefixPairOn(t, candle.CPU(), cacheTokens)
}

func newPrefixPairOn(t *testing.T, dev candle.Device, cacheTokens int) *prefixPair {
	t.Helper()
	dir := tinyLlamaDir(t)
	p := &prefixPair{cached: tinyLlama(t, dev, dir, cacheTokens, false), plain: tinyLlama(t, dev, dir, cacheTokens, true), cacheTokens: cacheTokens}
	var err error
	p.eCached, err = generate.NewEngine(p.cached, generate.Config{MaxBatch: 8})
	require.NoError(t, err)
	t.Cleanup(func() { p.eCached.Close() })
	p.ePlain, err = generate.NewEngine(p.plain, generate.Config{MaxBatch: 8})
	require.NoError(t, err)
	t.Cleanup(func() { p.ePlain.Close() })
	return p
}

// same runs a request on both models: the same greedy tokens; it returns
// them and the cached run's count of cached prompt tokens.
func (p *prefixPair) same(t *testing.T, prompt []int32, maxTokens int) ([]int32, int) {
	t.Helper()
	want, plainEnd := complete(t, p.ePlain, prompt, maxTokens)
	got, end := complete(t, p.eCached, prompt, maxTokens)
	require.Equal(t, want, got, "a prompt of %d tokens", len(prompt))
	assert.Zero(t, plainEnd.CachedTokens)
	assert.Equal(t, len(prompt), end.PromptTokens)
	return got, end.CachedTokens
}

// idle asserts that no sequence holds a page: every page is free or
// cached.
func (p *prefixPair) idle(t *testing.T) {
	t.Helper()
	assert.Equal(t, p.cacheTokens, p.cached.CacheTokensFree())
	assert.Equal(t, p.cacheTokens, p.plain.CacheTokensFree())
}

func TestPrefixCachingSharedSystemPrompt(t *testing.T) {
	p := newPrefixPair(t, 256)
	system := tokenRun(1, 23) // 5 whole pages
	for i := range 3 {
		_, cached := p.same(t, cat(system, tokenRun(10+i, 5+i)), 12)
		if i == 0 {
			assert.Zero(t, cached)
		} else {
			assert.Equal(t, 20, cached, "request %d: the system prompt's whole pages", i)
		}
	}
	// The same prompt again: all its whole pages but the one its last
	// token is in.
	_, cached := p.same(t, cat(system, tokenRun(10, 5)), 12)
	assert.Equal(t, 24, cached)
	p.idle(t)
	q, h := p.cached.PrefixCacheStats()
	assert.Equal(t, int64(28+29+30+28), q)
	assert.Equal(t, int64(20+20+24), h)
}

func TestPrefixCachingMultiTurn(t *testing.T) {
	p := newPrefixPair(t, 256)
	chat := tokenRun(2, 9)
	for turn := range 4 {
		answer, cached := p.same(t, chat, 10)
		if turn > 0 {
			// The last turn's prompt and its answer but the last token
			// (drawn, never fed), in whole pages.
			assert.Equal(t, (len(chat)-len(tokenRun(0, 3+turn))-1)/4*4, cached, "turn %d", turn)
		}
		chat = cat(chat, answer, tokenRun(20+turn, 3+turn+1))
	}
	p.idle(t)
}

func TestPrefixCachingConcurrentSamePrompt(t *testing.T) {
	// Requests with one prompt at once (as n > 1 submits them), then one
	// more while they run: the same tokens, every page back at the end.
	p := newPrefixPair(t, 512)
	prompt := tokenRun(3, 30)
	want, _ := complete(t, p.ePlain, prompt, 16)
	chans := submitN(t, p.eCached, prompt, 16, 4)
	first := <-chans[0] // its prompt is in the cache now
	late, err := p.eCached.Submit(context.Background(), generate.Request{Prompt: prompt, MaxTokens: 16})
	require.NoError(t, err)
	got, _ := drain(t, chans[0])
	assert.Equal(t, want, cat(first.Tokens, got))
	for _, ch := range chans[1:] {
		got, _ := drain(t, ch)
		assert.Equal(t, want, got)
	}
	got, end := drain(t, late)
	assert.Equal(t, want, got)
	assert.Equal(t, 28, end.CachedTokens)
	p.idle(t)
}

func TestPrefixCachingReleasedWhileShared(t *testing.T) {
	// B starts on A's pages while A runs; A ends first, and B goes on
	// reading the pages A no longer holds.
	p := newPrefixPair(t, 256)
	prompt := tokenRun(4, 26)
	a, err := p.eCached.Submit(context.Background(), generate.Request{Prompt: prompt, MaxTokens: 3})
	require.NoError(t, err)
	first := <-a
	require.Len(t, first.Tokens, 1)
	bPrompt := cat(prompt[:24], tokenRun(5, 7))
	b, err := p.eCached.Submit(context.Background(), generate.Request{Prompt: bPrompt, MaxTokens: 30})
	require.NoError(t, err)
	aRest, _ := drain(t, a)
	bGot, bEnd := drain(t, b)
	assert.Equal(t, 24, bEnd.CachedTokens)
	aWant, _ := complete(t, p.ePlain, prompt, 3)
	assert.Equal(t, aWant, cat(first.Tokens, aRest))
	bWant, _ := complete(t, p.ePlain, bPrompt, 30)
	assert.Equal(t, bWant, bGot)
	p.idle(t)
}

func TestPrefixCachingEviction(t *testing.T) {
	// A cache of 24 pages and prompts of 8 pages: the cached pages are
	// evicted, least recently used first, as new prompts need them; the
	// outputs never change, and the engine never admits more than fits.
	p := newPrefixPair(t, 96)
	prompts := [][]int32{tokenRun(6, 30), tokenRun(7, 30), tokenRun(8, 30), tokenRun(6, 30), tokenRun(9, 30), tokenRun(10, 30), tokenRun(6, 30)}
	var hits []int
	for _, pr := range prompts {
		_, cached := p.same(t, pr, 8)
		hits = append(hits, cached)
	}
	// Each request holds 10 pages (30 + 7 tokens fed) and leaves 9 keyed.
	// The third takes the 6 free pages and evicts 4 cached, the last 4 of
	// the first request's (a sequence's last pages go first): its repeat
	// finds its first 5 pages, and so does the next repeat after the
	// same again.
	assert.Equal(t, []int{0, 0, 0, 20, 0, 0, 20}, hits)
	// At once: more than the cache holds runs in turns, none fails.
	var chans []<-chan generate.Event
	for i := range 6 {
		ch, err := p.eCached.Submit(context.Background(), generate.Request{Prompt: tokenRun(20+i%3, 30), MaxTokens: 8})
		require.NoError(t, err)
		chans = append(chans, ch)
	}
	for i, ch := range chans {
		got, _ := drain(t, ch)
		want, _ := complete(t, p.ePlain, tokenRun(20+i%3, 30), 8)
		assert.Equal(t, want, got, "request %d", i)
	}
	p.idle(t)
}

// TestGPUPrefixCaching is the CPU tests' identity on a HIP device, where
// decode steps replay captured graphs whose block tables list shared
// pages, and a cached prefix's rest runs through the paged decode kernel
// instead of the varlen prefill: a shared system prompt, a multi-turn
// chat, and requests with one prompt at once.
func TestGPUPrefixCaching(t *testing.T) {
	dev, err := candle.HIP(0)
	testenv.Need(t, 2, "a GPU", err)
	p := newPrefixPairOn(t, dev, 512)
	system := tokenRun(1, 23)
	for i := range 3 {
		_, cached := p.same(t, cat(system, tokenRun(10+i, 5+i)), 24)
		if i > 0 {
			assert.Equal(t, 20, cached)
		}
	}
	chat := tokenRun(2, 9)
	for turn := range 3 {
		answer, cached := p.same(t, chat, 16)
		if turn > 0 {
			assert.Positive(t, cached, "turn %d", turn)
		}
		chat = cat(chat, answer, tokenRun(20+turn, 4))
	}
	prompt := tokenRun(3, 30)
	want, _ := complete(t, p.ePlain, prompt, 16)
	chans := submitN(t, p.eCached, prompt, 16, 4)
	for _, ch := range chans {
		got, _ := drain(t, ch)
		assert.Equal(t, want, got)
	}
	assert.NotEmpty(t, p.cached.DecodeGraphs(), "decode steps replayed graphs")
	p.idle(t)
}

// repetitive is a prompt that says the same thing three times, with a
// token of its own after each.
func repetitive(seed int) []int32 {
	block := tokenRun(seed, 12)
	return cat(block, []int32{1}, block, []int32{2}, block, []int32{3}, block[:4])
}

func TestSpeculativeGreedyIdentical(t *testing.T) {
	dir := tinyLlamaDir(t)
	for _, noPrefix := range []bool{false, true} {
		plain := tinyLlama(t, candle.CPU(), dir, 512, noPrefix)
		spec := tinyLlama(t, candle.CPU(), dir, 512, noPrefix)
		ePlain, err := generate.NewEngine(plain, generate.Config{MaxBatch: 8})
		require.NoError(t, err)
		defer ePlain.Close()
		eSpec, err := generate.NewEngine(spec, generate.Config{MaxBatch: 8, SpeculativeTokens: 4})
		require.NoError(t, err)
		defer eSpec.Close()
		// One at a time, then four at once (a batched check), with a stop
		// token in one and a sampled request among them.
		for i := range 3 {
			want, _ := complete(t, ePlain, repetitive(i), 40)
			got, end := complete(t, eSpec, repetitive(i), 40)
			assert.Equal(t, want, got, "prompt %d", i)
			assert.Equal(t, 40, end.CompletionTokens)
		}
		reqs := []generate.Request{{Prompt: repetitive(3), MaxTokens: 33}, {Prompt: repetitive(4), MaxTokens: 7},
			{Prompt: repetitive(5), MaxTokens: 30, Sampling: generate.Sampling{Temperature: 0.8, Seed: 5}}, {Prompt: repetitive(6), MaxTokens: 40}}
		want := make([][]int32, len(reqs))
		for i, r := range reqs {
			ch, err := ePlain.Submit(context.Background(), r)
			require.NoError(t, err)
			want[i], _ = drain(t, ch)
		}
		// A stop token that greedy decoding draws partway.
		reqs[3].StopTokens = []int32{want[3][20]}
		cut := slices.Index(want[3], want[3][20])
		var chans []<-chan generate.Event
		for _, r := range reqs {
			ch, err := eSpec.Submit(context.Background(), r)
			require.NoError(t, err)
			chans = append(chans, ch)
		}
		for i, ch := range chans {
			got, end := drain(t, ch)
			if i == 3 {
				assert.Equal(t, want[3][:cut], got)
				assert.Equal(t, "stop", end.FinishReason)
				continue
			}
			assert.Equal(t, want[i], got, "request %d", i)
		}
		// A greedy request that asks for log-probabilities does not draft,
		// and gets them beside drafting ones: the same as without drafts.
		lpReq := generate.Request{Prompt: repetitive(7), MaxTokens: 24, LogProbs: true, TopLogProbs: 2}
		collect := func(e *generate.Engine, others bool) ([]int32, []generate.TokenLogProb) {
			var toks []int32
			var lps []generate.TokenLogProb
			var side []<-chan generate.Event
			if others {
				for i := range 2 {
					ch, err := e.Submit(context.Background(), generate.Request{Prompt: repetitive(8 + i), MaxTokens: 24})
					require.NoError(t, err)
					side = append(side, ch)
				}
			}
			ch, err := e.Submit(context.Background(), lpReq)
			require.NoError(t, err)
			for ev := range ch {
				require.NoError(t, ev.Err)
				toks = append(toks, ev.Tokens...)
				lps = append(lps, ev.LogProbs...)
			}
			for _, c := range side {
				drain(t, c)
			}
			return toks, lps
		}
		wantToks, wantLPs := collect(ePlain, false)
		gotToks, gotLPs := collect(eSpec, true)
		assert.Equal(t, wantToks, gotToks)
		require.Len(t, gotLPs, len(wantLPs))
		for i := range wantLPs {
			assert.Equal(t, wantLPs[i].ID, gotLPs[i].ID, "token %d", i)
			assert.InDelta(t, wantLPs[i].LogProb, gotLPs[i].LogProb, 1e-4, "token %d", i)
			assert.Len(t, gotLPs[i].Top, 2)
		}
		drafted, accepted := eSpec.SpeculativeStats()
		t.Logf("prefix caching off %v: %d drafted, %d accepted", noPrefix, drafted, accepted)
		assert.Positive(t, accepted, "the repetitive prompts' drafts are taken")
		assert.Less(t, accepted, drafted, "and some are not")
		d, a := ePlain.SpeculativeStats()
		assert.Zero(t, d+a, "off by default")
		assert.Equal(t, 512, spec.CacheTokensFree(), "every page back")
	}
}

// TestGPUSpeculative checks drafted tokens on a HIP device, where the
// checks run op by op between decode steps replayed as graphs: the
// tokens of plain greedy decoding, one request and four at once.
func TestGPUSpeculative(t *testing.T) {
	dev, err := candle.HIP(0)
	testenv.Need(t, 2, "a GPU", err)
	dir := tinyLlamaDir(t)
	ePlain, err := generate.NewEngine(tinyLlama(t, dev, dir, 1024, false), generate.Config{MaxBatch: 8})
	require.NoError(t, err)
	defer ePlain.Close()
	spec := tinyLlama(t, dev, dir, 1024, false)
	eSpec, err := generate.NewEngine(spec, generate.Config{MaxBatch: 8, SpeculativeTokens: 5})
	require.NoError(t, err)
	defer eSpec.Close()
	want := make([][]int32, 4)
	for i := range want {
		want[i], _ = complete(t, ePlain, repetitive(i), 48)
		got, _ := complete(t, eSpec, repetitive(i), 48)
		assert.Equal(t, want[i], got, "prompt %d", i)
	}
	var chans []<-chan generate.Event
	for i := range want {
		ch, err := eSpec.Submit(context.Background(), generate.Request{Prompt: repetitive(i), MaxTokens: 48})
		require.NoError(t, err)
		chans = append(chans, ch)
	}
	for i, ch := range chans {
		got, _ := drain(t, ch)
		assert.Equal(t, want[i], got, "prompt %d at once", i)
	}
	drafted, accepted := eSpec.SpeculativeStats()
	t.Logf("%d drafted, %d accepted", drafted, accepted)
	assert.Positive(t, accepted)
	assert.Equal(t, 1024, spec.CacheTokensFree())
}

// fixedTokens is a Constraint that allows one given token a step and is
// done after the last.
type fixedTokens struct {
	want []int32
	at   int
}

func (c *fixedTokens) Mask(words []uint32) (int, error) {
	clear(words)
	t := c.want[c.at]
	words[t/32] |= 1 << (t % 32)
	return 1, nil
}

func (c *fixedTokens) Accept(id int32) error {
	if id != c.want[c.at] {
		return fmt.Errorf("token %d, want %d", id, c.want[c.at])
	}
	c.at++
	return nil
}

func (c *fixedTokens) Done() bool { return c.at == len(c.want) }

// TestConstraintBesideDrafts: a constrained request never drafts, and its
// mask reaches its own row of the steps that check other sequences'
// drafts (a row a token there): it draws exactly what it allows while
// the drafting requests draw what plain greedy decoding does.
func TestConstraintBesideDrafts(t *testing.T) {
	dir := tinyLlamaDir(t)
	plain := tinyLlama(t, candle.CPU(), dir, 512, false)
	spec := tinyLlama(t, candle.CPU(), dir, 512, false)
	ePlain, err := generate.NewEngine(plain, generate.Config{MaxBatch: 8})
	require.NoError(t, err)
	defer ePlain.Close()
	eSpec, err := generate.NewEngine(spec, generate.Config{MaxBatch: 8, SpeculativeTokens: 4})
	require.NoError(t, err)
	defer eSpec.Close()
	want := [][]int32{}
	for i := range 2 {
		w, _ := complete(t, ePlain, repetitive(i), 30)
		want = append(want, w)
	}
	fixed := []int32{5, 9, 5, 9, 7, 7, 11, 5, 9, 5, 9, 7, 3, 3, 3, 8}
	var chans []<-chan generate.Event
	for i := range 2 {
		ch, err := eSpec.Submit(context.Background(), generate.Request{Prompt: repetitive(i), MaxTokens: 30})
		require.NoError(t, err)
		chans = append(chans, ch)
	}
	cch, err := eSpec.Submit(context.Background(), generate.Request{Prompt: repetitive(2), MaxTokens: 30, Constraint: &fixedTokens{want: fixed}})
	require.NoError(t, err)
	for i, ch := range chans {
		got, _ := drain(t, ch)
		assert.Equal(t, want[i], got, "request %d", i)
	}
	got, end := drain(t, cch)
	assert.Equal(t, fixed, got)
	assert.Equal(t, "stop", end.FinishReason)
	drafted, _ := eSpec.SpeculativeStats()
	assert.Positive(t, drafted, "the other requests drafted")
}
