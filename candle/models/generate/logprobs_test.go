package generate

import (
	"context"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/errs"
)

// fakeRow is fakeLM's logits after last at the sequence length length.
func fakeRow(vocab int, last int32, length int) []float32 {
	tgt := target(vocab, last, length)
	row := make([]float32, vocab)
	for j := range row {
		d := (j - int(tgt) + vocab) % vocab
		row[j] = 31 - float32(min(d, vocab-d))*1.5
	}
	return row
}

// submitAll submits requests in order and returns their streams.
func submitAll(t *testing.T, e *Engine, reqs []Request) []<-chan Event {
	t.Helper()
	chans := make([]<-chan Event, len(reqs))
	for i, r := range reqs {
		var err error
		chans[i], err = e.Submit(context.Background(), r)
		require.NoError(t, err)
	}
	return chans
}

// collectLogProbs reads a stream to its end, with its log-probabilities.
func collectLogProbs(t *testing.T, ch <-chan Event) ([]int32, []TokenLogProb, Event) {
	t.Helper()
	var toks []int32
	var lps []TokenLogProb
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev := <-ch:
			if ev.LogProbs != nil {
				require.Len(t, ev.LogProbs, len(ev.Tokens), "a log-probability per token")
			}
			toks, lps = append(toks, ev.Tokens...), append(lps, ev.LogProbs...)
			if ev.Done {
				return toks, lps, ev
			}
		case <-deadline:
			t.Fatal("no final event")
		}
	}
}

// TestOpenAIPenaltiesThroughEngine checks logit_bias and the presence and
// frequency penalties against a loop that applies them to the fake's
// logits in plain Go and draws with Sample from the result: the same
// tokens, alone and batched.
func TestOpenAIPenaltiesThroughEngine(t *testing.T) {
	const vocab = 40
	reference := func(r Request) []int32 {
		sp := r.Sampling
		last, length := r.Prompt[len(r.Prompt)-1], len(r.Prompt)
		counts := map[int32]int{}
		var out []int32
		for step := range r.MaxTokens {
			row := fakeRow(vocab, last, length)
			for id, b := range sp.LogitBias {
				row[id] += b
			}
			for id, n := range counts {
				row[id] -= sp.PresencePenalty + sp.FrequencyPenalty*float32(n)
			}
			x, err := candle.FromSlice(candle.CPU(), row, 1, vocab)
			require.NoError(t, err)
			ids, err := x.Sample([]candle.SampleOptions{{Temperature: sp.Temperature, TopP: sp.TopP, Seed: sp.Seed, Step: uint64(step)}})
			require.NoError(t, err)
			got, err := candle.ToSlice[uint32](ids)
			require.NoError(t, err)
			tok := int32(got[0])
			out = append(out, tok)
			counts[tok]++
			last, length = tok, length+1
		}
		return out
	}
	reqs := []Request{
		{Prompt: []int32{5, 6, 7}, MaxTokens: 25, Sampling: Sampling{Temperature: 0.5, PresencePenalty: 2, Seed: 21}},
		{Prompt: []int32{1}, MaxTokens: 30, Sampling: Sampling{Temperature: 1, FrequencyPenalty: 1.5, Seed: 23}},
		{Prompt: []int32{9, 2}, MaxTokens: 20, Sampling: Sampling{Temperature: 1, TopP: 0.9, PresencePenalty: -1, FrequencyPenalty: 0.8, Seed: 22,
			LogitBias: map[int32]float32{3: 100, 4: -100}}},
		{Prompt: []int32{8}, MaxTokens: 20, Sampling: Sampling{LogitBias: map[int32]float32{12: 5, 30: -100}}},
	}
	for i, r := range reqs {
		plain := r
		plain.Sampling.PresencePenalty, plain.Sampling.FrequencyPenalty, plain.Sampling.LogitBias = 0, 0, nil
		assert.NotEqual(t, reference(plain), reference(r), "request %d: its fields change the draws", i)
	}
	for _, maxBatch := range []int{1, 2, 8} {
		e := engine(t, newFake(), Config{MaxBatch: maxBatch})
		chans := submitAll(t, e, reqs)
		for i, r := range reqs {
			_, toks, last := collect(t, chans[i])
			require.NoError(t, last.Err)
			assert.Equal(t, reference(r), toks, "batch %d, request %d", maxBatch, i)
		}
	}
}

// logSoftmax is a row's log-softmax in float64.
func logSoftmax(row []float32, temperature float32) []float64 {
	m := math.Inf(-1)
	z := make([]float64, len(row))
	for i, v := range row {
		z[i] = float64(v / temperature)
		m = max(m, z[i])
	}
	var sum float64
	for _, v := range z {
		sum += math.Exp(v - m)
	}
	for i := range z {
		z[i] -= m + math.Log(sum)
	}
	return z
}

// TestLogProbsThroughEngine checks each token's log-probability and the
// step's most likely tokens against a plain log-softmax of the fake's
// logits after the bias and the temperature, batched with a request that
// asks for none.
func TestLogProbsThroughEngine(t *testing.T) {
	const vocab = 40
	e := engine(t, newFake(), Config{})
	reqs := []Request{
		{Prompt: []int32{3, 1, 4}, MaxTokens: 12, LogProbs: true, TopLogProbs: 3},
		{Prompt: []int32{7}, MaxTokens: 15, LogProbs: true, TopLogProbs: 5, Sampling: Sampling{Temperature: 1.7, Seed: 5, LogitBias: map[int32]float32{0: 2}}},
		{Prompt: []int32{2, 2}, MaxTokens: 10, LogProbs: true},
		{Prompt: []int32{9}, MaxTokens: 10},
	}
	chans := submitAll(t, e, reqs)
	for i, r := range reqs {
		toks, lps, end := collectLogProbs(t, chans[i])
		require.NoError(t, end.Err)
		require.Len(t, toks, r.MaxTokens)
		if !r.LogProbs {
			assert.Empty(t, lps, "request %d asked for none", i)
			continue
		}
		require.Len(t, lps, len(toks))
		if r.Sampling.Temperature == 0 {
			assert.Equal(t, greedy(vocab, r.Prompt, r.MaxTokens), toks)
		}
		last, length := r.Prompt[len(r.Prompt)-1], len(r.Prompt)
		for j, tok := range toks {
			row := fakeRow(vocab, last, length)
			for id, b := range r.Sampling.LogitBias {
				row[id] += b
			}
			temp := r.Sampling.Temperature
			if temp == 0 {
				temp = 1
			}
			want := logSoftmax(row, temp)
			lp := lps[j]
			assert.Equal(t, tok, lp.ID, "request %d, token %d", i, j)
			assert.InDelta(t, want[tok], float64(lp.LogProb), 1e-5, "request %d, token %d", i, j)
			require.Len(t, lp.Top, r.TopLogProbs)
			order := make([]int, vocab)
			for k := range order {
				order[k] = k
			}
			sort.SliceStable(order, func(a, b int) bool { return want[order[a]] > want[order[b]] })
			for k, top := range lp.Top {
				assert.Equal(t, int32(order[k]), top.ID, "request %d, token %d, rank %d", i, j, k)
				assert.InDelta(t, want[order[k]], float64(top.LogProb), 1e-5)
				assert.Nil(t, top.Top)
			}
			if r.Sampling.Temperature == 0 && r.TopLogProbs > 0 {
				assert.Equal(t, lp.ID, lp.Top[0].ID, "greedy draws the most likely")
			}
			last, length = tok, length+1
		}
	}
}

func TestSamplingFieldErrors(t *testing.T) {
	f := newFake()
	e := engine(t, f, Config{})
	for _, c := range []struct {
		r           Request
		field, want string
	}{
		{Request{Prompt: []int32{1}, Sampling: Sampling{PresencePenalty: 2.5}}, "Sampling.PresencePenalty", "presence penalty 2.5: want -2 to 2"},
		{Request{Prompt: []int32{1}, Sampling: Sampling{FrequencyPenalty: float32(math.NaN())}}, "Sampling.FrequencyPenalty", "frequency penalty NaN"},
		{Request{Prompt: []int32{1}, Sampling: Sampling{LogitBias: map[int32]float32{40: 1}}}, "Sampling.LogitBias", "token id 40: want 0 to 39"},
		{Request{Prompt: []int32{1}, Sampling: Sampling{LogitBias: map[int32]float32{3: -101}}}, "Sampling.LogitBias", "a bias of -101 for token id 3"},
		{Request{Prompt: []int32{1}, LogProbs: true, TopLogProbs: 21}, "TopLogProbs", "21 top log-probabilities: want 0 to 20"},
		{Request{Prompt: []int32{1}, TopLogProbs: 2}, "TopLogProbs", "need LogProbs"},
	} {
		_, err := e.Submit(context.Background(), c.r)
		assert.ErrorIs(t, err, errs.ErrArgument, c.want)
		assert.ErrorContains(t, err, c.want)
		var ge *errs.Error
		if assert.ErrorAs(t, err, &ge, c.want) {
			assert.Equal(t, c.field, ge.Field, c.want)
		}
	}
}
