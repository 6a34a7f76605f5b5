package generate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/errs"
)

func TestLookupDraft(t *testing.T) {
	for _, c := range []struct {
		ctx       []int32
		k, lo, hi int
		want      []int32
		why       string
	}{
		{[]int32{1, 2, 3, 4, 1, 2}, 3, 1, 3, []int32{3, 4, 1}, "the bigram 1 2 went on 3 4 1"},
		{[]int32{1, 2, 3, 4, 1, 2}, 1, 1, 3, []int32{3}, "k bounds the draft"},
		{[]int32{5, 1, 2, 9, 7, 1, 2, 8, 1, 2}, 2, 1, 3, []int32{8, 1}, "the latest occurrence"},
		{[]int32{4, 2, 3, 9, 1, 2, 3}, 2, 1, 3, []int32{9, 1}, "the longest n-gram first: 2 3, not 3 alone elsewhere"},
		{[]int32{3, 7, 1, 2, 3}, 4, 1, 3, []int32{7, 1, 2, 3}, "a unigram when nothing longer occurred"},
		{[]int32{3, 7, 1, 2, 3}, 4, 2, 3, nil, "no bigram occurred"},
		{[]int32{1, 2, 3}, 2, 1, 3, nil, "nothing repeats"},
		{[]int32{1, 1}, 5, 1, 3, []int32{1}, "the draft ends where the context does"},
		{[]int32{1}, 2, 1, 3, nil, "one token"},
	} {
		assert.Equal(t, c.want, lookupDraft(c.ctx, c.k, c.lo, c.hi), c.why)
	}
}

func TestSpeculativeConfig(t *testing.T) {
	_, err := NewEngine(newFake(), Config{SpeculativeTokens: -1})
	require.ErrorIs(t, err, errs.ErrArgument)
	assert.ErrorContains(t, err, "SpeculativeTokens -1")
	// A model that cannot check drafts decodes as before.
	e := engine(t, newFake(), Config{SpeculativeTokens: 4})
	assert.Nil(t, e.spec)
	ch, err := e.Submit(t.Context(), Request{Prompt: []int32{1, 2, 1, 2, 1}, MaxTokens: 6})
	require.NoError(t, err)
	_, toks, _ := collect(t, ch)
	assert.Equal(t, greedy(40, []int32{1, 2, 1, 2, 1}, 6), toks)
	d, a := e.SpeculativeStats()
	assert.Zero(t, d+a)
}

// A sequence whose drafts are all rejected drafts less and less often (a
// pause of 1, 2, 4, ... steps, up to maxDraftPause); a kept draft ends it.
func TestDraftBackoff(t *testing.T) {
	s := &sequence{spec: true, req: Request{Prompt: []int32{5, 6, 7, 5, 6}}, maxTokens: 100}
	b := &batch{seqs: []*sequence{s}}
	drafts := func() bool {
		b.tokens = [][]int32{{7}}
		b.drafted = false
		s.fed = len(s.req.Prompt)
		b.draft(4)
		return b.drafted
	}
	require.True(t, drafts(), "5 6 … 7: the prompt says what followed before")
	var pauses []int
	for range 6 {
		s.checked(0)
		n := 0
		for !drafts() {
			n++
		}
		pauses = append(pauses, n)
	}
	assert.Equal(t, []int{1, 2, 4, 8, 16, 16}, pauses)
	s.checked(2)
	s.checked(0)
	n := 0
	for !drafts() {
		n++
	}
	assert.Equal(t, 1, n, "a kept draft starts the backoff again")
}
