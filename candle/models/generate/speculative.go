package generate

import (
	"slices"

	"github.com/rocm-go/rocm/candle"
)

// Prompt-lookup speculative decoding (Config.SpeculativeTokens): a greedy
// request whose last few tokens occurred before in its prompt or its
// completion is likely to go on as it did then (a summary quoting its
// text, code edited in place, a list that repeats its shape). Each step
// such a request feeds its last token and the tokens that followed that
// earlier occurrence, the drafts; the model's logits after each of them
// give the greedy token there, and the drafts are kept while they equal
// it. The request gains the kept drafts and the greedy token after them,
// from one forward pass; the KV cache of the rejected drafts is dropped
// (SpeculativeModel.Truncate). The tokens are those of plain greedy
// decoding, but for the rounding of a batched pass.

// SpeculativeModel is a Model that can check drafted tokens
// (*llama.Model, through its models.Runner).
type SpeculativeModel interface {
	Model
	// ForwardAll is Forward returning the logits of every new token,
	// (Σ len(tokens[i]), VocabSize()), seqs[0]'s rows first.
	ForwardAll(seqs []uint64, tokens [][]int32) (*candle.Tensor, error)
	// Truncate keeps the first n tokens of a sequence's KV cache.
	Truncate(seq uint64, n int) error
}

// The n-grams a draft is looked up by: the longest that occurred before.
const (
	draftNGramMax = 3
	draftNGramMin = 1
)

// greedy reports whether a request draws its tokens greedily with nothing
// that depends on the tokens drawn before (a penalty) and nothing more
// than the token asked of each row (log-probabilities, a bias), so that
// drafted tokens can be checked against the argmax of their logits.
func (s *sequence) greedy() bool {
	return s.opts.Temperature == 0 && !s.penalty && s.counts == nil && len(s.bias) == 0 && !s.req.LogProbs
}

// lookupDraft proposes up to k tokens: those that followed the latest
// earlier occurrence of the last n tokens of ctx, for the largest n from
// maxN down to minN that occurred before; nil when none did.
func lookupDraft(ctx []int32, k, minN, maxN int) []int32 {
	for n := min(maxN, len(ctx)-1); n >= minN; n-- {
		tail := ctx[len(ctx)-n:]
		for i := len(ctx) - n - 1; i >= 0; i-- {
			if slices.Equal(ctx[i:i+n], tail) {
				return slices.Clone(ctx[i+n : min(i+n+k, len(ctx))])
			}
		}
	}
	return nil
}

// draft gives the batch's drafting sequences their drafts after their
// last token, when every sequence of the step decodes (a prompt chunk's
// logits are not wanted row by row). A draft stops short of the request's
// MaxTokens, so that the tokens fed stay within the cache it reserved.
func (b *batch) draft(k int) {
	for _, s := range b.seqs {
		if s.fed < len(s.req.Prompt) {
			return
		}
	}
	for i, s := range b.seqs {
		room := min(k, s.maxTokens-s.drawn-1)
		if !s.spec || room < 1 {
			continue
		}
		if s.pause > 0 {
			s.pause--
			continue
		}
		d := lookupDraft(append(s.req.Prompt[:len(s.req.Prompt):len(s.req.Prompt)], s.gen...), room, draftNGramMin, draftNGramMax)
		if len(d) > 0 {
			b.tokens[i] = append(b.tokens[i], d...)
			b.drafted = true
		}
	}
}

// maxDraftPause bounds the steps a sequence goes without drafting after
// checks that kept none of its drafts.
const maxDraftPause = 16

// checked notes a check of the sequence's drafts that kept kept of them: a
// check that kept none pauses its drafting for a step, then 2, 4, ... up
// to maxDraftPause after each such check in a row, since text unlike its
// context pays for checks and gains nothing; a kept draft ends the pause.
func (s *sequence) checked(kept int) {
	if kept > 0 {
		s.backoff = 0
		return
	}
	s.backoff = min(max(1, 2*s.backoff), maxDraftPause)
	s.pause = s.backoff
}

// undraft takes the drafts out of the batch.
func (b *batch) undraft() {
	for i := range b.tokens {
		b.tokens[i] = b.tokens[i][:1]
	}
	b.drafted = false
}

// accept takes a checked step's draws (a token after each new token,
// sequence by sequence): a drafting sequence keeps its drafts up to the
// first that differs from the draw before it, and gains the draws up to
// there; its cache drops the rest of the drafts.
func (e *Engine) accept(b *batch, d *draws) {
	row := 0
	for i, s := range b.seqs {
		toks := b.tokens[i]
		draws := d.ids[row : row+len(toks)]
		lp := d.logProb(row, s.req.TopLogProbs) // a sequence that does not draft: its one row
		row += len(toks)
		kept := 0
		for kept < len(toks)-1 && toks[kept+1] == int32(draws[kept]) {
			kept++
		}
		if d := len(toks) - 1; d > 0 {
			e.drafted.Add(int64(d))
			e.accepted.Add(int64(kept))
			s.checked(kept)
			if kept < d {
				// Held before: the prompt and all draws but the last, fed now.
				if err := e.spec.Truncate(s.id, len(s.req.Prompt)+s.drawn+kept); err != nil {
					e.fail(s, err)
					continue
				}
			}
		}
		for _, t := range draws[:kept+1] {
			if s.finished {
				break
			}
			e.advance(s, 1, t, lp)
		}
	}
}

// SpeculativeStats are the tokens drafted since the engine started
// (Config.SpeculativeTokens), and those the checks kept: their ratio is
// the drafts' acceptance rate.
func (e *Engine) SpeculativeStats() (drafted, accepted int64) {
	return e.drafted.Load(), e.accepted.Load()
}
