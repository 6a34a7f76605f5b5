package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/candle/models/llama"
)

// LLMSpecSettings size the speculative-decoding measurement: greedy
// requests of Steps new tokens after a repetitive prompt of Prompt tokens
// (a text, then its first half again: as when a model is asked to edit or
// quote a given text), Batch at once, through generate.Engine without and
// with Config.SpeculativeTokens = Tokens.
type LLMSpecSettings struct {
	Tokens int    `json:"tokens"`
	Prompt int    `json:"prompt"`
	Steps  int    `json:"steps"`
	Batch  int    `json:"batch"`
	Reps   int    `json:"reps"` // runs of each engine, the median rate reported (after one that warms up)
	Seed   uint64 `json:"seed"`
}

// LLMSpecFigures are the decode rates (new tokens a second after each
// request's first) without and with drafting, the drafts' counts over the
// speculative runs, and how many of the requests' completions were the
// same both ways.
type LLMSpecFigures struct {
	Settings          LLMSpecSettings `json:"settings"`
	Plain             float64         `json:"plain_tok_s"`
	Speculative       float64         `json:"speculative_tok_s"`
	Drafted, Accepted int64
	Identical         int `json:"identical"`
}

// repetitivePrompt is n tokens: a random text of n·2/3 tokens, then its
// first half again.
func repetitivePrompt(rng *rand.Rand, n, vocab int) []int32 {
	text := make([]int32, n-n/3)
	for i := range text {
		text[i] = int32(rng.IntN(vocab))
	}
	return append(text, text[:n-len(text)]...)
}

// RunLLMSpeculative loads the model folder on dev in dt and measures
// greedy decoding of repetitive prompts through generate.Engine, plain,
// then with prompt-lookup drafting. It prints each run to w.
func RunLLMSpeculative(dev candle.Device, dt candle.DType, dir string, s LLMSpecSettings, w io.Writer) (*LLMSpecFigures, error) {
	if s.Tokens < 1 || s.Prompt < 3 || s.Steps < 2 || s.Batch < 1 || s.Reps < 1 {
		return nil, fmt.Errorf("llm bench: %d drafted tokens, a prompt of %d, %d steps, batch %d, %d repeats: want at least 1 (a prompt of 3, 2 steps)",
			s.Tokens, s.Prompt, s.Steps, s.Batch, s.Reps)
	}
	page := models.DefaultPageSize
	cacheTokens := s.Batch * ((s.Prompt+s.Steps)/page + 2) * page
	m, err := llama.Load(dir, dev, dt, llama.Options{CacheTokens: cacheTokens, PageSize: page, MaxBatch: s.Batch})
	if err != nil {
		return nil, fmt.Errorf("llm bench: loading %s: %w", dir, err)
	}
	defer m.Close()
	rng := rand.New(rand.NewPCG(s.Seed, 13))
	prompts := make([][]int32, s.Batch)
	for i := range prompts {
		prompts[i] = repetitivePrompt(rng, s.Prompt, m.VocabSize())
	}
	f := &LLMSpecFigures{Settings: s}
	var outs [2][][]int32
	for mode, k := range []int{0, s.Tokens} {
		e, err := generate.NewEngine(m, generate.Config{MaxBatch: s.Batch, PrefillChunk: s.Batch * s.Prompt, SpeculativeTokens: k})
		if err != nil {
			return nil, err
		}
		var rates []float64
		for rep := range s.Reps + 1 {
			n, d, o, err := engineRun(e, prompts, s.Steps, nil)
			if err != nil {
				e.Close()
				return nil, fmt.Errorf("llm bench: speculative decoding (%d drafted tokens): %w", k, err)
			}
			outs[mode] = o
			if rep > 0 { // the first warms up
				rates = append(rates, float64(n)/d.Seconds())
			}
		}
		if k > 0 {
			f.Drafted, f.Accepted = e.SpeculativeStats()
		}
		e.Close()
		rate := medianOf(rates)
		if k == 0 {
			f.Plain = rate
		} else {
			f.Speculative = rate
		}
		fmt.Fprintf(w, "ours: greedy decode of a repetitive %d-token prompt, batch %d, %d drafted tokens: %.1f tok/s\n", s.Prompt, s.Batch, k, rate)
	}
	for i := range outs[0] {
		if slices.Equal(outs[0][i], outs[1][i]) {
			f.Identical++
		}
	}
	fmt.Fprintf(w, "ours: %d of %d drafted tokens kept; %d of %d completions the same as plain decoding\n", f.Accepted, f.Drafted, f.Identical, s.Batch)
	return f, nil
}

// Row is the measurement's line of the table: the speculative rate
// against the plain one.
func (f *LLMSpecFigures) Row() Row {
	s := f.Settings
	r := Row{Name: fmt.Sprintf("prompt-lookup speculative decoding, %d drafted tokens, batch %d, a repetitive prompt (ratio: with / without)", s.Tokens, s.Batch),
		Ours: fmt.Sprintf("%.1f tok/s against %.1f; %d of %d drafts kept; %d of %d completions identical", f.Speculative, f.Plain, f.Accepted, f.Drafted,
			f.Identical, s.Batch),
		Theirs: "—", Target: "reported"}
	if f.Plain > 0 {
		r.Ratio = f.Speculative / f.Plain
	}
	return r
}
