package main

import (
	"strings"

	"github.com/rocm-go/rocm/candle/models/generate"
)

// OpenAI's two shapes of log-probabilities. Both report, for each token of
// a choice, its log-probability under the distribution it was drawn from
// (the model's after logit_bias, the penalties and the temperature, before
// top-k, top-p and min-p: generate.TokenLogProb) and the step's most
// likely tokens.

// completionLogprobs is a /v1/completions choice's logprobs.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// chatLogprobs is a /v1/chat/completions choice's logprobs.
type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
}

type chatTokenLogprob struct {
	Token       string           `json:"token"`
	Logprob     float64          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

type chatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// minLogprob stands for a log-probability of -Inf, which JSON cannot
// carry (vLLM's choice).
const minLogprob = -9999.0

func logprob(v float32) float64 { return max(float64(v), minLogprob) }

// logprobs makes a request's log-probability objects: the tokens' texts
// from the backend, and each choice's text offset so far (completions
// count it from the start of the choice's text, across stream chunks).
type logprobs struct {
	top     int
	bytes   func(int32) []byte
	offsets []int // by choice
}

// newLogprobs is the maker for n choices with top most likely tokens a
// step; nil when the request asked for none.
func newLogprobs(on bool, top, n int, bytes func(int32) []byte) *logprobs {
	if !on {
		return nil
	}
	return &logprobs{top: top, bytes: bytes, offsets: make([]int, n)}
}

// token is a token's text and its bytes as OpenAI lists them: a token
// that holds part of a character only has U+FFFD in its text, and its
// bytes as they are.
func (l *logprobs) token(id int32) (string, []int) {
	b := l.bytes(id)
	ints := make([]int, len(b))
	for i, c := range b {
		ints[i] = int(c)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), ints
}

// completion is the legacy object of choice i's tokens lps: the drawn
// token is always among its step's top entries, so that there are up to
// top+1 of them, as OpenAI gives.
func (l *logprobs) completion(i int, lps []generate.TokenLogProb) *completionLogprobs {
	if l == nil {
		return nil
	}
	out := &completionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	for _, lp := range lps {
		text, _ := l.token(lp.ID)
		out.Tokens = append(out.Tokens, text)
		out.TokenLogprobs = append(out.TokenLogprobs, logprob(lp.LogProb))
		out.TextOffset = append(out.TextOffset, l.offsets[i])
		l.offsets[i] += len(text)
		top := make(map[string]float64, len(lp.Top)+1)
		for _, t := range lp.Top {
			s, _ := l.token(t.ID)
			if _, dup := top[s]; !dup { // two tokens of one text: the likelier
				top[s] = logprob(t.LogProb)
			}
		}
		top[text] = logprob(lp.LogProb)
		out.TopLogprobs = append(out.TopLogprobs, top)
	}
	return out
}

// chat is the chat object of the tokens lps.
func (l *logprobs) chat(lps []generate.TokenLogProb) *chatLogprobs {
	if l == nil {
		return nil
	}
	out := &chatLogprobs{Content: make([]chatTokenLogprob, 0, len(lps))}
	for _, lp := range lps {
		text, b := l.token(lp.ID)
		c := chatTokenLogprob{Token: text, Logprob: logprob(lp.LogProb), Bytes: b, TopLogprobs: make([]chatTopLogprob, 0, len(lp.Top))}
		for _, t := range lp.Top {
			s, tb := l.token(t.ID)
			c.TopLogprobs = append(c.TopLogprobs, chatTopLogprob{Token: s, Logprob: logprob(t.LogProb), Bytes: tb})
		}
		out.Content = append(out.Content, c)
	}
	return out
}
