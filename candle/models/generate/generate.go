// Package generate runs text generation on a language model: a scheduler
// with continuous batching in front of a Model (candle/models/llama's
// satisfies it), sampling on the model's device (candle's Tensor.Sample,
// the repetition penalty's tokens kept there in a candle.TokenHistory), and
// streaming of each request's tokens and text.
//
// One goroutine runs the scheduler. Each step it admits waiting requests
// into the running batch (up to Config.MaxBatch sequences, while the
// model's KV cache has room for their prompts and their MaxTokens), feeds
// every sequence its next tokens in one Model.Forward — a decoding
// sequence its last token, a new one a chunk of its prompt, so that a
// long prompt holds the decoders up for at most Config.PrefillChunk tokens
// a step — draws the next token of every sequence that has read its whole
// prompt in one batched Sample, and streams what it drew. Requests join
// and leave the batch between steps. The rows of the step that ask for
// log-probabilities (Request.LogProbs) get them from the same logits on
// the device, batched: candle's ProcessLogits and TokenLogProbs, k+1
// values a row read back. Several completions of one prompt are several
// requests of the same prompt tokens, whose KV blocks a model that caches
// prefixes can share.
// On a PrefixModel a request starts
// with the KV pages the model has cached for the start of its prompt (a
// shared system prompt, the earlier turns of a chat), and only the rest
// of the prompt is fed. With Config.SpeculativeTokens, greedy requests on
// a SpeculativeModel draft tokens from their own context and check them
// in the step (prompt-lookup decoding, speculative.go).
//
// A request with a Constraint (structured output: package grammar) draws
// only the tokens it allows: each step the scheduler starts the
// constrained rows' masks on the CPU, a goroutine each, before the model's
// Forward, uploads them once it returns, and sets the logits of the
// tokens left out to -inf on the device (candle's MaskTokens) before the
// one batched Sample, unconstrained rows unchanged.
//
// Events reach a request's channel without ever blocking the scheduler:
// the channel is buffered, and when a consumer falls behind, the events
// it has not taken yet are merged into one (their text concatenated,
// their tokens appended) that waits in the request until the channel has
// room again. A slot is always kept free for the final event, so a
// request's stream always ends with a Done event and a closed channel,
// whether or not anyone reads it.
//
// Errors are *errs.Error (candle.Error) with errs' kinds (errs.ErrArgument
// for a request the engine cannot run, errs.ErrClosed for an engine used
// after Close, errs.ErrCanceled for a request whose context ended), and
// ErrQueueFull, this package's own.
package generate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/errs"
)

// Model is a language model with a KV cache per sequence.
type Model interface {
	// Device is where the model's logits are.
	Device() candle.Device
	// VocabSize is the number of token ids.
	VocabSize() int
	// ContextLength is the most tokens a sequence holds.
	ContextLength() int
	// Forward appends tokens[i] to sequence seqs[i]'s KV cache (creating
	// it on first use) and returns the logits of each sequence's last new
	// token: F32, (len(seqs), VocabSize()). A Forward that fails leaves the
	// caches as they were.
	Forward(seqs []uint64, tokens [][]int32) (*candle.Tensor, error)
	// Release frees a sequence's KV cache; an unknown id is a no-op.
	Release(seq uint64)
	// CacheTokensFree is how many more tokens the KV cache holds.
	CacheTokensFree() int
}

// PagedModel is a Model whose KV cache hands out whole pages of
// CachePageSize tokens (*llama.Model): the engine then reserves cache room
// for each sequence in pages, so that the rows a sequence leaves unused in
// its last page never make an admitted request run out of cache.
type PagedModel interface {
	Model
	CachePageSize() int
}

// PrefixModel is a PagedModel with automatic prefix caching (*llama.Model,
// through its models.Runner): the engine starts each request with the KV
// pages the model has cached for the start of its prompt, and feeds only
// the rest.
type PrefixModel interface {
	PagedModel
	// AttachPrefix starts sequence seq with the cached pages that prompt
	// begins with and returns how many of its tokens the sequence holds
	// (whole pages, fewer than len(prompt)); 0, and no sequence, when none
	// is cached.
	AttachPrefix(seq uint64, prompt []int32) (int, error)
}

// StreamDecoder turns token ids into text as they come: Add returns the
// text that became complete, valid UTF-8 only (*tokenizer.StreamDecoder
// satisfies it).
type StreamDecoder interface{ Add(id int32) string }

// flusher is a StreamDecoder that can hand over what it still holds when
// the stream ends (*tokenizer.StreamDecoder's Flush): the engine appends it
// to the last event of a request that ends by length or by a stop token.
type flusher interface{ Flush() string }

// Sampling are a request's sampling settings; the zero value is greedy
// decoding. They apply in candle's Tensor.Sample's order: the additive
// terms (LogitBias, PresencePenalty, FrequencyPenalty), then as Hugging
// Face transformers applies them: repetition penalty, temperature, top-k,
// top-p, min-p.
type Sampling struct {
	// Temperature divides the logits; 0 is greedy.
	Temperature float32
	// TopK keeps the k most likely tokens; 0 is off.
	TopK int
	// TopP keeps the most likely tokens that make up this probability, in
	// (0, 1]; 0 and 1 are off.
	TopP float32
	// MinP drops the tokens less likely than MinP times the most likely,
	// in [0, 1]; 0 is off.
	MinP float32
	// RepetitionPenalty (> 1 discourages) applies to every token of the
	// prompt and of the completion so far; 0 and 1 are off.
	RepetitionPenalty float32
	// PresencePenalty and FrequencyPenalty are OpenAI's, in [-2, 2]: each
	// token the completion holds so far has PresencePenalty plus
	// FrequencyPenalty times its count subtracted from its logit (the
	// prompt's tokens are not counted). 0 is off.
	PresencePenalty, FrequencyPenalty float32
	// LogitBias adds to the logits of its tokens (OpenAI's logit_bias),
	// each in [-100, 100]: -100 bans a token in effect, 100 all but forces
	// it.
	LogitBias map[int32]float32
	// Seed makes the draws reproducible: the same request with the same
	// seed generates the same text, alone or batched with others. 0 is a
	// random seed.
	Seed uint64
}

// The bounds of Sampling's OpenAI fields and of Request.TopLogProbs.
const (
	MaxPenalty     = 2
	MaxLogitBias   = 100
	MaxTopLogProbs = 20
)

// TokenLogProb is a token and its log-probability under the distribution
// it was drawn from: the model's, after the request's bias, penalties and
// temperature (a greedy request's taken as 1), before top-k, top-p and
// min-p cut it (candle's Tensor.ProcessLogits; vLLM's processed logprobs
// less the truncation).
type TokenLogProb struct {
	ID      int32
	LogProb float32
	// Top are the Request.TopLogProbs most likely tokens of the step, most
	// likely first (nil in Top's own entries).
	Top []TokenLogProb
}

// Request is a prompt to complete.
type Request struct {
	// Prompt is the token ids to continue; at least one, fewer than the
	// model's context length.
	Prompt []int32
	// MaxTokens bounds the completion (finish "length"); 0 is as many as
	// the context leaves after the prompt, and more than that is refused
	// (ErrContextLength), never cut short. The scheduler reserves KV-cache
	// room for the prompt and MaxTokens before it starts a request.
	MaxTokens int
	// Sampling are the sampling settings.
	Sampling Sampling
	// LogProbs asks for the log-probability of each token drawn
	// (Event.LogProbs), and TopLogProbs (0 to MaxTopLogProbs) for that
	// many of the most likely tokens of each step with theirs.
	LogProbs    bool
	TopLogProbs int
	// StopTokens end the completion (finish "stop") without being part of
	// it (the model's end-of-sequence ids belong here).
	StopTokens []int32
	// StopStrings end the completion (finish "stop") when its text
	// contains one; the text stops before it. Text that may be the start
	// of a stop string is held back until it can no longer be. They need a
	// Config.Decoder.
	StopStrings []string
	// Constraint, when set, restricts the tokens drawn to those it allows
	// (structured output: package grammar's Matcher, made with the same
	// stop tokens so that it allows them only where the output may end).
	// Its mask is computed on the CPU while the model runs the step, and
	// applied to the logits on the device before the draw; the request
	// finishes "stop" when the constraint is Done. A Constraint serves
	// one request.
	Constraint Constraint
}

// Constraint restricts a request's tokens, step by step.
type Constraint interface {
	// Mask writes the tokens allowed next into words (⌈vocab/32⌉ of
	// them): bit t%32 of words[t/32] set when token t may come. It
	// returns how many are allowed; none fails the request.
	Mask(words []uint32) (int, error)
	// Accept advances the constraint by the token drawn.
	Accept(id int32) error
	// Done reports whether the output is complete and nothing may follow.
	Done() bool
}

// Event is a step of a request's stream. Every stream ends with one Done
// event, after which the channel is closed.
type Event struct {
	// Text and Tokens are what the completion gained since the last
	// event: the text (valid UTF-8) and the token ids drawn (all but a stop
	// token). Text may lag behind Tokens (an incomplete character, a
	// possible stop string).
	Text   string
	Tokens []int32
	// LogProbs are the log-probabilities of Tokens, one each, when the
	// request asked for them (Request.LogProbs).
	LogProbs []TokenLogProb
	// Done marks the last event, with the reason: "stop", "length",
	// "cancelled" or "error".
	Done         bool
	FinishReason string
	// PromptTokens and CompletionTokens are the usage, in the final event:
	// the prompt's length and the tokens drawn (a stop token included).
	PromptTokens, CompletionTokens int
	// CachedTokens, in the final event, are the prompt's tokens whose keys
	// and values came from the model's prefix cache (PrefixModel) instead
	// of a forward pass.
	CachedTokens int
	// Err is why a request failed ("error"), or was cancelled (the
	// context's error, of kind errs.ErrCanceled, or errs.ErrClosed).
	Err error
}

// Config are an engine's settings; zero values choose.
type Config struct {
	// MaxBatch is the most sequences in one step (default 32).
	MaxBatch int
	// MaxQueue is the most requests waiting to start (default 256); Submit
	// returns ErrQueueFull beyond it.
	MaxQueue int
	// PrefillChunk is the most prompt tokens fed in one step (default
	// 512), so that new prompts delay the running sequences little.
	PrefillChunk int
	// Decoder makes a request's text decoder; nil gives events without
	// text (and requests cannot have stop strings).
	Decoder func() StreamDecoder
	// SpeculativeTokens turns on prompt-lookup speculative decoding on a
	// SpeculativeModel: each step, a greedy request whose last tokens
	// occurred before in its prompt or completion gets up to this many
	// drafted tokens, those that followed them there, and one forward
	// pass checks them all (see SpeculativeModel). The outputs are those
	// of plain greedy decoding. 0 is off.
	SpeculativeTokens int
}

// pkg makes this package's errors.
const pkg errs.Package = "generate"

// The kinds of error that are this package's own.
var (
	// ErrQueueFull: Config.MaxQueue requests are waiting; try again later.
	ErrQueueFull = errors.New("the queue is full")
	// ErrContextLength: a request that does not fit the model's context
	// (Check): shorten the prompt or ask for fewer tokens.
	ErrContextLength = errors.New("longer than the context")
)

// Engine schedules requests on a model. Its methods are safe for
// concurrent use.
type Engine struct {
	m   Model
	cfg Config

	mu      sync.Mutex
	waiting []*sequence
	closed  bool
	wake    chan struct{} // a request arrived, or Close
	done    chan struct{} // the scheduler has stopped
	nextID  uint64

	// The tokens of the running sequences with a repetition penalty, on
	// the model's device, a slot each (owners[i] has slot i), made on
	// first use: a step uploads no token lists, the draws join their
	// slots on the device. Only the scheduler touches them.
	hist   *candle.TokenHistory
	owners []*sequence

	spec              SpeculativeModel // the model, when drafting is on
	drafted, accepted atomic.Int64     // drafted tokens, and those the checks kept
	// The step's token masks, a row each, reused (only the scheduler
	// touches it).
	masks []uint32
}

// NewEngine starts an engine on m.
func NewEngine(m Model, cfg Config) (*Engine, error) {
	if m == nil {
		return nil, pkg.Errorf("NewEngine", errs.ErrArgument, "nil model")
	}
	if cfg.MaxBatch < 0 || cfg.MaxQueue < 0 || cfg.PrefillChunk < 0 || cfg.SpeculativeTokens < 0 {
		return nil, pkg.Errorf("NewEngine", errs.ErrArgument, "MaxBatch %d, MaxQueue %d, PrefillChunk %d, SpeculativeTokens %d: want ≥ 0 (0 chooses, or is off)",
			cfg.MaxBatch, cfg.MaxQueue, cfg.PrefillChunk, cfg.SpeculativeTokens)
	}
	if m.VocabSize() < 1 || m.ContextLength() < 2 {
		return nil, pkg.Errorf("NewEngine", errs.ErrArgument, "a model of %d tokens and a context of %d: want ≥ 1 and ≥ 2", m.VocabSize(), m.ContextLength())
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = 32
	}
	if cfg.MaxQueue == 0 {
		cfg.MaxQueue = 256
	}
	if cfg.PrefillChunk == 0 {
		cfg.PrefillChunk = 512
	}
	e := &Engine{m: m, cfg: cfg, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if sm, ok := m.(SpeculativeModel); ok && cfg.SpeculativeTokens > 0 {
		e.spec = sm
	}
	go e.run()
	return e, nil
}

// sequence is a request in the engine.
type sequence struct {
	id        uint64
	ctx       context.Context
	req       Request
	opts      candle.SampleOptions // the step and the history slot change
	need      int                  // KV-cache tokens reserved: prompt + completion bound
	maxTokens int
	fed       int     // prompt tokens fed to the model (or found in its prefix cache)
	cached    int     // prompt tokens found in the prefix cache
	last      int32   // the token to feed next, once the prompt is fed
	drawn     int     // completion tokens drawn
	penalty   bool    // the draws are penalised: the sequence has a history slot
	slot      int     // its slot in Engine.hist, once it draws (-1 before)
	stop      []int32 // sorted copy of StopTokens
	dec       StreamDecoder
	held      string  // text held back: it may start a stop string
	maskErr   error   // the constraint's mask failed this step: the draw is void
	spec      bool    // drafts tokens (speculative.go)
	gen       []int32 // the tokens drawn, when it drafts
	pause     int     // steps to go without drafting, after checks that kept nothing
	backoff   int     // the pause the next check that keeps nothing sets

	// The terms added to its logits each step (sampleOptions).
	bias   []candle.TokenBias // LogitBias, by token id
	counts map[int32]int      // the completion's tokens, when presence or frequency penalties apply

	out      chan Event
	pending  Event // merged events the consumer has not had room for
	has      bool  // pending holds something
	finished bool  // the final event is sent
}

// Submit queues a request and returns its stream of events. It fails
// with Check's errors (errs.ErrArgument, ErrContextLength), ErrQueueFull
// or errs.ErrClosed. Cancelling ctx ends
// the request (finish "cancelled") and frees its KV cache.
func (e *Engine) Submit(ctx context.Context, r Request) (<-chan Event, error) {
	if ctx == nil {
		return nil, pkg.Errorf("Engine.Submit", errs.ErrArgument, "nil context")
	}
	if err := e.check(&r); err != nil {
		return nil, err
	}
	ctxLen := e.m.ContextLength()
	s := &sequence{ctx: ctx, req: r, out: make(chan Event, 16)}
	s.maxTokens = r.MaxTokens
	if s.maxTokens == 0 {
		s.maxTokens = ctxLen - len(r.Prompt)
	}
	s.need = len(r.Prompt) + s.maxTokens
	sp := r.Sampling
	s.opts = candle.SampleOptions{Temperature: sp.Temperature, TopK: sp.TopK, TopP: sp.TopP, MinP: sp.MinP,
		RepetitionPenalty: sp.RepetitionPenalty, Seed: sp.Seed}
	if s.opts.Seed == 0 {
		s.opts.Seed = rand.Uint64()
	}
	s.penalty, s.slot = sp.RepetitionPenalty != 0 && sp.RepetitionPenalty != 1, -1
	for id, v := range sp.LogitBias {
		s.bias = append(s.bias, candle.TokenBias{ID: id, Add: v})
	}
	slices.SortFunc(s.bias, func(a, b candle.TokenBias) int { return cmp.Compare(a.ID, b.ID) })
	if sp.PresencePenalty != 0 || sp.FrequencyPenalty != 0 {
		s.counts = map[int32]int{}
	}
	s.spec = e.spec != nil && s.greedy() && r.Constraint == nil // a constrained draw needs its mask, a row at a time
	s.stop = append([]int32(nil), r.StopTokens...)
	if e.cfg.Decoder != nil {
		s.dec = e.cfg.Decoder()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, pkg.Errorf("Engine.Submit", errs.ErrClosed, "the engine is closed")
	}
	if len(e.waiting) >= e.cfg.MaxQueue {
		return nil, pkg.Errorf("Engine.Submit", ErrQueueFull, "%d requests are waiting (Config.MaxQueue): try again later", len(e.waiting))
	}
	e.nextID++
	s.id = e.nextID
	e.waiting = append(e.waiting, s)
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return s.out, nil
}

// Check reports what is wrong with a request for a model of vocab token
// ids and a context of contextLength tokens, as Submit does before it
// queues one: nil, or an *errs.Error whose Field names the request's
// field ("Prompt", "MaxTokens", "Sampling.TopP", ...) and whose Detail says
// what to change. Its kind is ErrContextLength when the request does not
// fit the context (a prompt of contextLength tokens or more, or a prompt
// and MaxTokens beyond it: MaxTokens is never cut short), errs.ErrArgument
// otherwise. MaxTokens 0 asks for as many tokens as the context leaves.
func Check(r Request, vocab, contextLength int) error {
	bad := func(field string, kind error, format string, args ...any) error {
		return &errs.Error{Pkg: string(pkg), Op: "Check", Kind: kind, Field: field, Detail: fmt.Sprintf(format, args...)}
	}
	if len(r.Prompt) == 0 {
		return bad("Prompt", errs.ErrArgument, "an empty prompt: want at least one token")
	}
	if len(r.Prompt) >= contextLength {
		return bad("Prompt", ErrContextLength, "the prompt is %d tokens and this model's context is %d: shorten it", len(r.Prompt), contextLength)
	}
	for _, f := range []struct {
		name string
		ids  []int32
	}{{"Prompt", r.Prompt}, {"StopTokens", r.StopTokens}} {
		for i, t := range f.ids {
			if t < 0 || int(t) >= vocab {
				return bad(f.name, errs.ErrArgument, "token id %d at %d: want 0 to %d, below the vocabulary size %d", t, i, vocab-1, vocab)
			}
		}
	}
	room := contextLength - len(r.Prompt)
	switch {
	case r.MaxTokens < 0:
		return bad("MaxTokens", errs.ErrArgument, "%d tokens to generate: want at least 1, or 0 for as many as the context leaves (%d)", r.MaxTokens, room)
	case r.MaxTokens > room:
		return bad("MaxTokens", ErrContextLength, "%d tokens to generate is more than the context leaves: the model's context is %d tokens and the prompt is %d, so at most %d",
			r.MaxTokens, contextLength, len(r.Prompt), room)
	}
	sp := r.Sampling
	finite := func(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }
	switch {
	case !finite(sp.Temperature) || sp.Temperature < 0:
		return bad("Sampling.Temperature", errs.ErrArgument, "temperature %v: want a finite value ≥ 0", sp.Temperature)
	case sp.TopK < 0:
		return bad("Sampling.TopK", errs.ErrArgument, "top-k %d: want ≥ 0", sp.TopK)
	case !(sp.TopP >= 0 && sp.TopP <= 1):
		return bad("Sampling.TopP", errs.ErrArgument, "top-p %v: want 0 to 1", sp.TopP)
	case !(sp.MinP >= 0 && sp.MinP <= 1):
		return bad("Sampling.MinP", errs.ErrArgument, "min-p %v: want 0 to 1", sp.MinP)
	case !finite(sp.RepetitionPenalty) || sp.RepetitionPenalty < 0:
		return bad("Sampling.RepetitionPenalty", errs.ErrArgument, "repetition penalty %v: want a finite value > 0", sp.RepetitionPenalty)
	case !(sp.PresencePenalty >= -MaxPenalty && sp.PresencePenalty <= MaxPenalty):
		return bad("Sampling.PresencePenalty", errs.ErrArgument, "presence penalty %v: want -%d to %d", sp.PresencePenalty, MaxPenalty, MaxPenalty)
	case !(sp.FrequencyPenalty >= -MaxPenalty && sp.FrequencyPenalty <= MaxPenalty):
		return bad("Sampling.FrequencyPenalty", errs.ErrArgument, "frequency penalty %v: want -%d to %d", sp.FrequencyPenalty, MaxPenalty, MaxPenalty)
	case r.TopLogProbs < 0 || r.TopLogProbs > MaxTopLogProbs:
		return bad("TopLogProbs", errs.ErrArgument, "%d top log-probabilities: want 0 to %d", r.TopLogProbs, MaxTopLogProbs)
	case r.TopLogProbs > 0 && !r.LogProbs:
		return bad("TopLogProbs", errs.ErrArgument, "top log-probabilities need LogProbs")
	}
	for id, v := range sp.LogitBias {
		if id < 0 || int(id) >= vocab {
			return bad("Sampling.LogitBias", errs.ErrArgument, "a bias for token id %d: want 0 to %d, below the vocabulary size %d", id, vocab-1, vocab)
		}
		if !(v >= -MaxLogitBias && v <= MaxLogitBias) {
			return bad("Sampling.LogitBias", errs.ErrArgument, "a bias of %v for token id %d: want -%d to %d", v, id, MaxLogitBias, MaxLogitBias)
		}
	}
	for _, s := range r.StopStrings {
		if s == "" || !utf8.ValidString(s) {
			return bad("StopStrings", errs.ErrArgument, "stop string %q: want non-empty valid UTF-8", s)
		}
	}
	return nil
}

// check validates a request against the model and the engine.
func (e *Engine) check(r *Request) error {
	if err := Check(*r, e.m.VocabSize(), e.m.ContextLength()); err != nil {
		return pkg.Wrap("Engine.Submit", err)
	}
	if len(r.StopStrings) > 0 && e.cfg.Decoder == nil {
		return &errs.Error{Pkg: string(pkg), Op: "Engine.Submit", Kind: errs.ErrArgument, Field: "StopStrings",
			Detail: "stop strings need a decoder (Config.Decoder)"}
	}
	return nil
}

// Close stops the engine: every request still open gets a final event
// (finish "cancelled", Err of kind errs.ErrClosed) and its KV cache is released. It
// returns once the scheduler has stopped; the model stays open.
func (e *Engine) Close() error {
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
	e.mu.Unlock()
	<-e.done
	return nil
}

// send queues an event, merging it with those the consumer has not taken;
// a final event always fits (one slot stays free for it), after which
// the channel is closed.
func (s *sequence) send(ev Event) {
	if s.has {
		ev.Text = s.pending.Text + ev.Text
		ev.Tokens = append(s.pending.Tokens, ev.Tokens...)
		if s.pending.LogProbs != nil {
			ev.LogProbs = append(s.pending.LogProbs, ev.LogProbs...)
		}
		s.pending, s.has = Event{}, false
	}
	if ev.Done {
		s.out <- ev
		close(s.out)
		s.finished = true
		return
	}
	if ev.Text == "" && len(ev.Tokens) == 0 {
		return
	}
	if len(s.out) < cap(s.out)-1 {
		s.out <- ev
		return
	}
	s.pending, s.has = ev, true
}

// flush tries to deliver what is pending.
func (s *sequence) flush() {
	if s.has && len(s.out) < cap(s.out)-1 {
		ev := s.pending
		s.pending, s.has = Event{}, false
		s.out <- ev
	}
}

// finish ends a request with its final event; the caller releases its
// cache.
func (s *sequence) finish(reason string, err error, tokens []int32, lps []TokenLogProb) {
	if _, ok := err.(*errs.Error); err != nil && !ok {
		err = pkg.Wrap("request", err) // a context's error: ErrCanceled
	}
	text := s.held
	s.held = ""
	s.send(Event{Text: text, Tokens: tokens, LogProbs: lps, Done: true, FinishReason: reason, Err: err,
		PromptTokens: len(s.req.Prompt), CompletionTokens: s.drawn, CachedTokens: s.cached})
}

// run is the scheduler.
func (e *Engine) run() {
	defer close(e.done)
	defer func() { e.hist.Close() }() // made while running, if at all
	var active []*sequence
	var b batch
	for {
		e.mu.Lock()
		closed := e.closed
		if closed {
			waiting := e.waiting
			e.waiting = nil
			e.mu.Unlock()
			for _, s := range append(active, waiting...) {
				e.m.Release(s.id)
				s.finish("cancelled", pkg.Errorf("Engine.Close", errs.ErrClosed, "the engine closed before the request ended"), nil, nil)
			}
			return
		}
		active = e.admit(active)
		idle := len(active) == 0
		e.mu.Unlock()
		if idle {
			<-e.wake
			continue
		}
		active = e.dropCancelled(active)
		if len(active) == 0 {
			continue
		}
		b.plan(active, e.cfg.PrefillChunk)
		if e.spec != nil {
			b.draft(e.cfg.SpeculativeTokens)
		}
		e.step(&b)
		kept := active[:0]
		for _, s := range active {
			if !s.finished {
				s.flush()
				kept = append(kept, s)
			}
		}
		clear(active[len(kept):])
		active = kept
	}
}

// admit moves waiting requests into the batch, in order, while there is
// room in it and in the KV cache (what the running sequences have
// reserved and not yet used counts as taken). A request starts with the
// pages a PrefixModel has cached for its prompt: they are the model's
// already (shared, or taken from the free count when no sequence held
// them), so it reserves only the rest. A request that cannot fit even in
// an empty cache fails. The caller holds e.mu.
func (e *Engine) admit(active []*sequence) []*sequence {
	kept := e.waiting[:0]
	for _, s := range e.waiting {
		if err := s.ctx.Err(); err != nil {
			s.finish("cancelled", err, nil, nil)
			continue
		}
		kept = append(kept, s)
	}
	clear(e.waiting[len(kept):])
	e.waiting = kept
	page := 1
	if pm, ok := e.m.(PagedModel); ok {
		page = max(pm.CachePageSize(), 1)
	}
	prefix, _ := e.m.(PrefixModel)
	pages := func(tokens int) int { return (max(tokens, 0) + page - 1) / page }
	for len(e.waiting) > 0 && len(active) < e.cfg.MaxBatch {
		s := e.waiting[0]
		cached := 0
		if prefix != nil {
			var err error
			if cached, err = prefix.AttachPrefix(s.id, s.req.Prompt); err != nil {
				e.waiting = e.waiting[1:]
				s.finish("error", pkg.Wrapf("Engine", err, "looking up the prompt's cached prefix"), nil, nil)
				continue
			}
		}
		// What each running sequence may still take: the pages of its bound
		// beyond those of what it has fed (its last draw not fed yet).
		reserved := 0
		for _, a := range active {
			reserved += pages(a.need) - pages(a.fed+max(a.drawn-1, 0))
		}
		free := (e.m.CacheTokensFree()/page - reserved) * page
		if (pages(s.need)-pages(cached))*page > free {
			if cached > 0 { // tried again at the next step
				e.m.Release(s.id)
			}
			if len(active) > 0 {
				break
			}
			e.waiting = e.waiting[1:]
			s.finish("error", pkg.Errorf("Engine.Submit", errs.ErrArgument, "the request needs %d KV-cache tokens (prompt and max tokens); the model has %d free", s.need, free), nil, nil)
			continue
		}
		e.waiting = e.waiting[1:]
		s.fed, s.cached = cached, cached
		active = append(active, s)
	}
	return active
}

// dropCancelled ends the sequences whose context is done.
func (e *Engine) dropCancelled(active []*sequence) []*sequence {
	kept := active[:0]
	for _, s := range active {
		if err := s.ctx.Err(); err != nil {
			e.m.Release(s.id)
			s.finish("cancelled", err, nil, nil)
			continue
		}
		kept = append(kept, s)
	}
	clear(active[len(kept):])
	return kept
}

// batch is a step's work, its slices reused from step to step.
type batch struct {
	seqs    []*sequence
	ids     []uint64
	tokens  [][]int32
	drafted bool // some sequence has drafted tokens after its last (draft)
}

// plan chooses a step's sequences: every decoding one, and prompt chunks
// up to the step's prefill budget.
func (b *batch) plan(active []*sequence, budget int) {
	b.seqs, b.ids, b.tokens, b.drafted = b.seqs[:0], b.ids[:0], b.tokens[:0], false
	for _, s := range active {
		var toks []int32
		if rest := len(s.req.Prompt) - s.fed; rest > 0 {
			if budget == 0 {
				continue
			}
			n := min(rest, budget)
			budget -= n
			toks = s.req.Prompt[s.fed : s.fed+n]
		} else {
			toks = []int32{s.last}
		}
		b.seqs = append(b.seqs, s)
		b.ids = append(b.ids, s.id)
		b.tokens = append(b.tokens, toks)
	}
}

// step runs a batch: one Forward, one Sample. When the Forward fails for a
// batch of several sequences, each runs alone, so that only those the
// model fails on fail.
func (e *Engine) step(b *batch) {
	if len(b.seqs) == 0 {
		return
	}
	d, fed, err := e.forward(b.ids, b.tokens, b.seqs, b.drafted)
	if err != nil && !fed && b.drafted {
		b.undraft() // and again without the drafts, which the model did not take
		e.step(b)
		return
	}
	if err != nil && !fed && len(b.seqs) > 1 {
		for i, s := range b.seqs {
			one, _, err := e.forward(b.ids[i:i+1], b.tokens[i:i+1], b.seqs[i:i+1], false)
			if err != nil {
				e.fail(s, err)
				continue
			}
			e.advance(s, len(b.tokens[i]), one.ids[0], one.logProb(0, s.req.TopLogProbs))
		}
		return
	}
	if err != nil {
		// The model failed on the one sequence, or the draw failed after
		// the caches took the tokens: every sequence of the step fails.
		for _, s := range b.seqs {
			e.fail(s, err)
		}
		return
	}
	if b.drafted {
		e.accept(b, d)
		return
	}
	for i, s := range b.seqs {
		e.advance(s, len(b.tokens[i]), d.ids[i], d.logProb(i, s.req.TopLogProbs))
	}
}

// draws are a step's tokens, and their log-probabilities when a sequence
// of the step asked for them: chosen[i], and top k a row in top and
// topIDs.
type draws struct {
	ids         []uint32
	want        []bool // the rows whose sequence asked
	chosen, top []float32
	topIDs      []uint32
	k           int
}

// logProb is row i's log-probabilities with the top n of its step (the
// step computed the most any of its rows asked for), nil when its
// sequence asked for none.
func (d *draws) logProb(i, n int) *TokenLogProb {
	if d.want == nil || !d.want[i] {
		return nil
	}
	lp := &TokenLogProb{ID: int32(d.ids[i]), LogProb: d.chosen[i]}
	for j := range min(n, d.k) {
		lp.Top = append(lp.Top, TokenLogProb{ID: int32(d.topIDs[i*d.k+j]), LogProb: d.top[i*d.k+j]})
	}
	return lp
}

// forward runs the model on sequences and draws their next tokens, with
// the log-probabilities of the rows that ask, all on the model's device:
// the logits' processors once more on a copy, a log-softmax and a top-k
// selection, batched over the step's rows. fed reports whether the model
// took the tokens (the draw may fail after). With all (drafted tokens to
// check), it draws a token after each of their new tokens, sequence by
// sequence (SpeculativeModel.ForwardAll): the draws' rows are then the
// tokens', not the sequences'.
func (e *Engine) forward(ids []uint64, tokens [][]int32, seqs []*sequence, all bool) (_ *draws, fed bool, _ error) {
	// The constrained rows' masks are computed while the model runs.
	masked := e.startMasks(tokens, seqs, all)
	var logits *candle.Tensor
	var err error
	if all {
		logits, err = e.spec.ForwardAll(ids, tokens)
	} else {
		logits, err = e.m.Forward(ids, tokens)
	}
	if masked != nil {
		masked.Wait()
	}
	if err != nil {
		return nil, false, err
	}
	defer logits.Close()
	if masked != nil {
		words := (e.m.VocabSize() + 31) / 32
		mask, err := candle.FromSlice(e.m.Device(), e.masks, len(e.masks)/words, words)
		if err != nil {
			return nil, true, pkg.Wrapf("Engine", err, "the token masks")
		}
		defer mask.Close()
		if logits, err = logits.MaskTokens(mask); err != nil {
			return nil, true, pkg.Wrapf("Engine", err, "the token masks")
		}
		defer logits.Close()
	}
	opts := make([]candle.SampleOptions, 0, logits.Dim(0))
	d := &draws{}
	for i, s := range seqs {
		var o candle.SampleOptions // mid-prompt: a greedy row, its token unused
		if s.fed+len(tokens[i]) == len(s.req.Prompt) || s.fed == len(s.req.Prompt) {
			if err := e.sampleOptions(s, &o); err != nil {
				return nil, true, pkg.Wrapf("Engine", err, "sampling")
			}
			if s.req.LogProbs { // never a drafting sequence (greedy): one row
				if d.want == nil {
					d.want = make([]bool, logits.Dim(0))
				}
				d.want[len(opts)], d.k = true, max(d.k, s.req.TopLogProbs)
			}
		}
		opts = append(opts, o)
		if all { // a drafting sequence's other rows: greedy, as it is
			for range tokens[i][1:] {
				opts = append(opts, o)
			}
		}
	}
	var processed *candle.Tensor
	if d.want != nil {
		// Before the draw, which extends the rows' histories.
		if processed, err = logits.ProcessLogits(opts); err != nil {
			return nil, true, pkg.Wrapf("Engine", err, "log-probabilities")
		}
		defer processed.Close()
	}
	out, err := logits.Sample(opts)
	if err != nil {
		return nil, true, pkg.Wrapf("Engine", err, "sampling")
	}
	defer out.Close()
	if d.ids, err = candle.ToSlice[uint32](out); err != nil {
		return nil, true, pkg.Wrapf("Engine", err, "sampling")
	}
	if processed != nil {
		if err := d.readLogProbs(processed, out); err != nil {
			return nil, true, pkg.Wrapf("Engine", err, "log-probabilities")
		}
	}
	return d, true, nil
}

// readLogProbs computes the log-probabilities of the drawn ids from the
// processed logits and reads them back: k+1 values a row.
func (d *draws) readLogProbs(processed, ids *candle.Tensor) error {
	chosen, top, topIDs, err := processed.TokenLogProbs(ids, d.k)
	if err != nil {
		return err
	}
	defer chosen.Close()
	if d.chosen, err = candle.ToSlice[float32](chosen); err != nil || top == nil {
		return err
	}
	defer top.Close()
	defer topIDs.Close()
	if d.top, err = candle.ToSlice[float32](top); err != nil {
		return err
	}
	d.topIDs, err = candle.ToSlice[uint32](topIDs)
	return err
}

// sampleOptions sets a drawing sequence's options for this step: its
// settings, its draw count, its history slot, and the terms that change
// from step to step (the bias of its logit_bias and of its presence and
// frequency penalties, from the completion's counts so far). A per-step
// constraint on the draw (a token mask) belongs here too.
func (e *Engine) sampleOptions(s *sequence, o *candle.SampleOptions) error {
	*o = s.opts
	o.Step = uint64(s.drawn)
	if s.penalty {
		if err := e.historySlot(s); err != nil {
			return err
		}
		o.History, o.HistorySlot = e.hist, s.slot
	}
	if len(s.counts) == 0 {
		o.Bias = s.bias
		return nil
	}
	sp := &s.req.Sampling
	o.Bias = make([]candle.TokenBias, 0, len(s.bias)+len(s.counts))
	o.Bias = append(o.Bias, s.bias...)
	for id, n := range s.counts {
		o.Bias = append(o.Bias, candle.TokenBias{ID: id, Add: -(sp.PresencePenalty + sp.FrequencyPenalty*float32(n))})
	}
	return nil
}

// sampling reports whether a sequence fed n tokens this step draws its
// next token from the step (its prompt is fed by then).
func sampling(s *sequence, n int) bool {
	return s.fed+n == len(s.req.Prompt) || s.fed == len(s.req.Prompt)
}

// startMasks starts computing the token masks of the step's constrained
// sequences, a goroutine each, into e.masks (a row a row of the step's
// logits: a sequence's, or with all a token's, a constrained sequence
// having one as it never drafts; the other rows allow every token), and
// returns what to wait on: nil when no sequence is constrained. A
// sequence whose mask fails, or allows nothing, gets a row that allows
// every token and fails after the step (maskErr).
func (e *Engine) startMasks(tokens [][]int32, seqs []*sequence, all bool) *sync.WaitGroup {
	var wg *sync.WaitGroup
	words := (e.m.VocabSize() + 31) / 32
	rows := len(seqs)
	if all {
		rows = 0
		for _, t := range tokens {
			rows += len(t)
		}
	}
	row := 0
	for i, s := range seqs {
		r := row
		if all {
			row += len(tokens[i])
		} else {
			r = i
		}
		if s.req.Constraint == nil || !sampling(s, len(tokens[i])) {
			continue
		}
		if wg == nil {
			wg = &sync.WaitGroup{}
			e.masks = slices.Grow(e.masks[:0], rows*words)[:rows*words]
			for j := range e.masks {
				e.masks[j] = ^uint32(0)
			}
		}
		mask := e.masks[r*words : (r+1)*words]
		wg.Go(func() {
			n, err := s.req.Constraint.Mask(mask)
			if err == nil && n == 0 {
				err = pkg.Errorf("Engine", errs.ErrArgument, "the constraint allows no token here: the vocabulary cannot continue it")
			}
			if err != nil {
				s.maskErr = pkg.Wrapf("Engine", err, "the token mask")
				for j := range mask {
					mask[j] = ^uint32(0)
				}
			}
		})
	}
	return wg
}

// historySlot gives a penalised sequence its history slot before its
// first draw, holding its prompt: a slot of a finished sequence, or a new
// one (the running sequences never outnumber MaxBatch, the slots).
func (e *Engine) historySlot(s *sequence) error {
	if s.slot >= 0 {
		return nil
	}
	if e.hist == nil {
		h, err := candle.NewTokenHistory(e.m.Device(), e.cfg.MaxBatch, e.m.VocabSize())
		if err != nil {
			return err
		}
		e.hist, e.owners = h, make([]*sequence, e.cfg.MaxBatch)
	}
	for i, o := range e.owners {
		if o == nil || o.finished {
			if err := e.hist.Set(i, s.req.Prompt); err != nil {
				return err
			}
			e.owners[i], s.slot = s, i
			return nil
		}
	}
	return pkg.Errorf("Engine", errs.ErrArgument, "no free history slot among %d", len(e.owners))
}

// fail ends a sequence with an error.
func (e *Engine) fail(s *sequence, err error) {
	e.m.Release(s.id)
	s.finish("error", err, nil, nil)
}

// advance accounts for n tokens fed to a sequence and, once its prompt is
// fed, for the token drawn.
func (e *Engine) advance(s *sequence, n int, id uint32, lp *TokenLogProb) {
	if s.fed < len(s.req.Prompt) {
		s.fed += n
		if s.fed < len(s.req.Prompt) {
			return
		}
	}
	if err := s.maskErr; err != nil {
		e.fail(s, err)
		return
	}
	t := int32(id)
	s.drawn++
	if s.spec {
		s.gen = append(s.gen, t)
	}
	for _, st := range s.stop {
		if st == t {
			s.flushDecoder()
			e.end(s, "stop", nil, nil)
			return
		}
	}
	s.last = t
	if s.counts != nil {
		s.counts[t]++
	}
	tokens := []int32{t}
	var lps []TokenLogProb
	if lp != nil {
		lps = []TokenLogProb{*lp}
	}
	reason := "length"
	if c := s.req.Constraint; c != nil {
		if err := c.Accept(t); err != nil {
			e.fail(s, pkg.Wrapf("Engine", err, "the constraint"))
			return
		}
		if c.Done() {
			reason = "stop"
		}
	}
	more := s.drawn < s.maxTokens && reason != "stop"
	if s.dec != nil {
		s.held += s.dec.Add(t)
		if cut, hit := s.stopAt(); hit {
			s.held = s.held[:cut]
			e.end(s, "stop", tokens, lps)
			return
		}
		text := s.releasable()
		if more {
			s.send(Event{Text: text, Tokens: tokens, LogProbs: lps})
			return
		}
		s.held = text + s.held
		s.flushDecoder()
	} else if more {
		s.send(Event{Tokens: tokens, LogProbs: lps})
		return
	}
	e.end(s, reason, tokens, lps)
}

// flushDecoder adds to the held text what the decoder still holds (the
// bytes of a character the completion ends inside of), if it can say.
func (s *sequence) flushDecoder() {
	if f, ok := s.dec.(flusher); ok {
		s.held += f.Flush()
	}
}

// end finishes a sequence normally.
func (e *Engine) end(s *sequence, reason string, tokens []int32, lps []TokenLogProb) {
	e.m.Release(s.id)
	s.finish(reason, nil, tokens, lps)
}

// stopAt finds the first stop string in the held text: the text before it.
func (s *sequence) stopAt() (int, bool) {
	cut, hit := len(s.held), false
	for _, stop := range s.req.StopStrings {
		if i := strings.Index(s.held, stop); i >= 0 && i < cut {
			cut, hit = i, true
		}
	}
	return cut, hit
}

// releasable takes from the held text what can no longer start a stop
// string: all but its longest suffix that is a proper prefix of one.
func (s *sequence) releasable() string {
	keep := 0
	for _, stop := range s.req.StopStrings {
		for n := min(len(stop)-1, len(s.held)); n > keep; n-- {
			if strings.HasSuffix(s.held, stop[:n]) {
				keep = n
				break
			}
		}
	}
	text := s.held[:len(s.held)-keep]
	s.held = s.held[len(s.held)-keep:]
	return text
}
