package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/candle/models/llama"
)

// LLMPrefixGoal is the target for prefix caching: the time to
// first token of a prompt whose long prefix is cached, at most this share
// of the same prompt's uncached time.
const LLMPrefixGoal = 0.2

// LLMPrefixSettings size the prefix-caching measurement: a shared prefix
// of Prefix tokens followed by Suffix tokens of each request's own.
type LLMPrefixSettings struct {
	Prefix int    `json:"prefix"`
	Suffix int    `json:"suffix"`
	Reps   int    `json:"reps"` // pairs of requests, the medians reported (after one pair that warms up)
	Seed   uint64 `json:"seed"`
}

// LLMPrefixFigures are the time to first token of a prompt through
// generate.Engine with its prefix uncached (a prefix no request has sent)
// and cached (the same prefix again, another suffix), medians in seconds,
// and the prompt tokens the cached requests found cached.
type LLMPrefixFigures struct {
	Settings     LLMPrefixSettings `json:"settings"`
	Uncached     float64           `json:"uncached_ttft_s"`
	Cached       float64           `json:"cached_ttft_s"`
	CachedTokens int               `json:"cached_tokens"`
}

// RunLLMPrefix loads the model folder on dev in dt with prefix caching and
// a KV cache for two of the prompts, and measures the time from Submit to
// the first token of a request whose prompt is a fresh prefix and a
// suffix, then of one with the same prefix and another suffix. The engine
// prefills a whole prompt in one pass (Config.PrefillChunk), the uncached
// time's best case. It prints each pair to w.
func RunLLMPrefix(dev candle.Device, dt candle.DType, dir string, s LLMPrefixSettings, w io.Writer) (*LLMPrefixFigures, error) {
	if s.Prefix < 1 || s.Suffix < 1 || s.Reps < 1 {
		return nil, fmt.Errorf("llm bench: a prefix of %d tokens, suffixes of %d, %d repeats: want at least 1 of each", s.Prefix, s.Suffix, s.Reps)
	}
	page := models.DefaultPageSize
	prompt := s.Prefix + s.Suffix
	// The uncached request's pages stay cached while the cached one adds
	// its suffix and first token.
	cacheTokens := (prompt/page+2)*page + (s.Suffix/page+2)*page
	m, err := llama.Load(dir, dev, dt, llama.Options{CacheTokens: cacheTokens, PageSize: page, MaxBatch: 1})
	if err != nil {
		return nil, fmt.Errorf("llm bench: loading %s: %w", dir, err)
	}
	defer m.Close()
	if prompt >= m.ContextLength() {
		return nil, fmt.Errorf("llm bench: a prompt of %d tokens for a context of %d", prompt, m.ContextLength())
	}
	e, err := generate.NewEngine(m, generate.Config{MaxBatch: 1, PrefillChunk: prompt})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	rng := rand.New(rand.NewPCG(s.Seed, 11))
	tokens := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(rng.IntN(m.VocabSize()))
		}
		return out
	}
	f := &LLMPrefixFigures{Settings: s}
	var uncached, cached []float64
	for rep := range s.Reps + 1 {
		prefix := tokens(s.Prefix)
		var ttft [2]time.Duration
		for i := range ttft {
			var hit int
			if ttft[i], hit, err = firstToken(e, append(append([]int32(nil), prefix...), tokens(s.Suffix)...)); err != nil {
				return nil, err
			}
			if i == 0 && hit != 0 {
				return nil, fmt.Errorf("llm bench: a fresh prefix found %d tokens cached", hit)
			}
			if i == 1 {
				if hit < s.Prefix/page*page {
					return nil, fmt.Errorf("llm bench: the prefix of %d tokens sent again found %d cached", s.Prefix, hit)
				}
				f.CachedTokens = hit
			}
		}
		fmt.Fprintf(w, "ours: time to first token, a %d-token prefix and %d more: %s uncached, %s cached (%d tokens)\n",
			s.Prefix, s.Suffix, msf(ttft[0]), msf(ttft[1]), f.CachedTokens)
		if rep > 0 { // the first warms up
			uncached = append(uncached, ttft[0].Seconds())
			cached = append(cached, ttft[1].Seconds())
		}
	}
	f.Uncached, f.Cached = medianOf(uncached), medianOf(cached)
	return f, nil
}

// firstToken submits a greedy request for one token and returns the time
// to its first token and the prompt tokens the prefix cache held.
func firstToken(e *generate.Engine, prompt []int32) (time.Duration, int, error) {
	start := time.Now()
	ch, err := e.Submit(context.Background(), generate.Request{Prompt: prompt, MaxTokens: 1})
	if err != nil {
		return 0, 0, err
	}
	var took time.Duration
	for ev := range ch {
		if took == 0 && len(ev.Tokens) > 0 {
			took = time.Since(start)
		}
		if ev.Done {
			if ev.Err != nil || took == 0 {
				return 0, 0, fmt.Errorf("llm bench: a request ended with %q and no token: %v", ev.FinishReason, ev.Err)
			}
			return took, ev.CachedTokens, nil
		}
	}
	return 0, 0, fmt.Errorf("llm bench: a stream ended without its final event")
}

// Row is the measurement's line of the table: the cached time against
// the uncached one.
func (f *LLMPrefixFigures) Row() Row {
	r := Row{Name: fmt.Sprintf("time to first token, a %d-token cached prefix + %d tokens (ratio: cached / uncached)", f.Settings.Prefix, f.Settings.Suffix),
		Ours:   fmt.Sprintf("%.1f ms cached, %.1f ms uncached", f.Cached*1e3, f.Uncached*1e3),
		Theirs: "—", Target: fmt.Sprintf("≤ %.1f×", LLMPrefixGoal)}
	if f.Uncached > 0 {
		r.Ratio = f.Cached / f.Uncached
		r.Met = Met(r.Ratio <= LLMPrefixGoal)
	}
	return r
}
