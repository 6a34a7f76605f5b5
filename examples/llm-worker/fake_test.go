package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/candle/models/generate/grammar"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/tokenizer"
)

// fakeBackend is a Backend that tokenizes by words and generates a fixed
// script, with the contract's behaviour: events until one Done, the
// channel closed after it, cancellation through ctx, a bounded queue.
type fakeBackend struct {
	ctxLen, vocab int
	pieces        []string                // the generated text, one token each, cycled
	delay         time.Duration           // before each token
	slots         chan struct{}           // requests at once; nil: no limit
	running       chan struct{}           // generations running at once, the others wait as in the engine's queue; nil: no limit
	failAt        int                     // > 0: the token at which the generation fails
	script        bool                    // the pieces once, then the end of the sequence (finish "stop"), rather than cycled
	tmpl          *tokenizer.ChatTemplate // a real chat template to render chats with; nil: the fake's own
	cached        int                     // the prompt tokens each generation says the prefix cache held
	closed        atomic.Bool

	mu         sync.Mutex
	reqs       []generate.Request
	active     atomic.Int32
	cancelled  atomic.Int32
	closeCalls atomic.Int32
	started    chan struct{} // one value per generation started
}

func newFake() *fakeBackend {
	return &fakeBackend{ctxLen: 64, vocab: 1000, pieces: []string{"Hello", ",", " world", "!"}, started: make(chan struct{}, 1024)}
}

func (f *fakeBackend) ContextLength() int { return f.ctxLen }
func (f *fakeBackend) VocabSize() int     { return f.vocab }
func (f *fakeBackend) EOS() []int32       { return []int32{2, 3} }

func (f *fakeBackend) word(w string) int32 {
	h := fnv.New32a()
	h.Write([]byte(w))
	return int32(10 + h.Sum32()%uint32(f.vocab-10))
}

// Encode makes one token per space-separated word, after BOS (1).
func (f *fakeBackend) Encode(text string, addSpecial bool) ([]int32, error) {
	switch text {
	case "panic":
		panic("the fake's tokenizer panics on request")
	case "encode-error":
		return nil, errors.New("the fake cannot encode this")
	case "no-tokens": // a tokenizer with no BOS, on text it drops
		return nil, nil
	}
	var ids []int32
	if addSpecial {
		ids = append(ids, 1)
	}
	for _, w := range strings.Fields(text) {
		ids = append(ids, f.word(w))
	}
	return ids, nil
}

func (f *fakeBackend) ChatTemplate() (*tokenizer.ChatTemplate, error) {
	if f.tmpl == nil {
		return nil, errors.New("the fake has no chat template")
	}
	return f.tmpl, nil
}

// TokenBytes is a generated piece's text, "<s>" for BOS, "<id>" for the
// other ids.
func (f *fakeBackend) TokenBytes(id int32) []byte {
	for _, p := range f.pieces {
		if f.word(p) == id {
			return []byte(p)
		}
	}
	if id == 1 {
		return []byte("<s>")
	}
	return fmt.Appendf(nil, "<%d>", id)
}

// Decode joins the tokens' bytes; the ids below 10 are special.
func (f *fakeBackend) Decode(ids []int32, skipSpecial bool) string {
	var b strings.Builder
	for _, id := range ids {
		if !skipSpecial || id >= 10 {
			b.Write(f.TokenBytes(id))
		}
	}
	return b.String()
}

func (f *fakeBackend) ApplyChatTemplate(msgs []tokenizer.Message, addGenerationPrompt bool) (string, error) {
	if f.tmpl != nil {
		return f.tmpl.Render(msgs, tokenizer.ChatOptions{AddGenerationPrompt: addGenerationPrompt})
	}
	var b strings.Builder
	b.WriteString("<s> ")
	for _, m := range msgs {
		if m.Content == "bad-template" {
			return "", errors.New("roles must alternate user/assistant")
		}
		fmt.Fprintf(&b, "<|%s|> %s ", m.Role, m.Content)
	}
	if addGenerationPrompt {
		b.WriteString("<|assistant|>")
	}
	return b.String(), nil
}

func (f *fakeBackend) Info() BackendInfo {
	return BackendInfo{Device: "hip:0", DType: "bf16", Weights: "BF16", CacheTokens: 4096, DeviceMemory: 3 << 30}
}

// Stats says a quarter of the cache per generation under way.
func (f *fakeBackend) Stats() BackendStats {
	return BackendStats{KVCacheUsage: min(float64(f.active.Load())/4, 1), DeviceMemoryInUse: 3 << 30, DeviceMemoryCached: 1 << 28}
}

func (f *fakeBackend) Close() error {
	f.closeCalls.Add(1)
	f.closed.Store(true)
	return nil
}

func (f *fakeBackend) requests() []generate.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

func (f *fakeBackend) Generate(ctx context.Context, r generate.Request) (<-chan generate.Event, error) {
	if f.closed.Load() {
		return nil, fmt.Errorf("fake engine: %w", errs.ErrClosed)
	}
	if err := generate.Check(r, f.vocab, f.ctxLen); err != nil {
		return nil, err // the engine's policy, as Submit applies it
	}
	if f.slots != nil {
		select {
		case f.slots <- struct{}{}:
		default:
			return nil, fmt.Errorf("fake engine: %w", generate.ErrQueueFull)
		}
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.mu.Unlock()
	f.active.Add(1)
	ch := make(chan generate.Event)
	go func() {
		defer close(ch)
		defer f.active.Add(-1)
		if f.slots != nil {
			defer func() { <-f.slots }()
		}
		n := 0
		end := func(reason string, err error) {
			ch <- generate.Event{Done: true, FinishReason: reason, Err: err, PromptTokens: len(r.Prompt), CompletionTokens: n,
				CachedTokens: min(f.cached, len(r.Prompt)-1)}
		}
		if f.running != nil {
			select {
			case f.running <- struct{}{}:
				defer func() { <-f.running }()
			case <-ctx.Done():
				f.cancelled.Add(1)
				end("cancelled", nil)
				return
			}
		}
		f.started <- struct{}{}
		for n < r.MaxTokens {
			select {
			case <-ctx.Done():
				f.cancelled.Add(1)
				end("cancelled", nil)
				return
			case <-time.After(f.delay):
			}
			if f.failAt > 0 && n == f.failAt {
				end("error", errors.New("device lost"))
				return
			}
			if f.script && n == len(f.pieces) {
				end("stop", nil)
				return
			}
			piece := f.pieces[n%len(f.pieces)]
			if slices.Contains(r.StopStrings, piece) {
				end("stop", nil)
				return
			}
			n++
			ev := generate.Event{Text: piece, Tokens: []int32{f.word(piece)}}
			if r.LogProbs {
				ev.LogProbs = []generate.TokenLogProb{fakeLogProb(ev.Tokens[0], n, r.TopLogProbs)}
			}
			select {
			case ch <- ev:
			case <-ctx.Done():
				f.cancelled.Add(1)
				end("cancelled", nil)
				return
			}
		}
		end("length", nil)
	}()
	return ch, nil
}

// Constrain matches g over a vocabulary whose token i is the byte i for
// the printable ASCII bytes (the fake's generation ignores the
// constraint: the tests read it back from the requests).
func (f *fakeBackend) Constrain(g *grammar.Grammar, stop []int32) (generate.Constraint, error) {
	pieces := make([][]byte, f.vocab)
	for c := ' '; c <= '~'; c++ {
		pieces[c] = []byte{byte(c)}
	}
	v, err := grammar.NewVocab(pieces)
	if err != nil {
		return nil, err
	}
	return grammar.NewMatcher(g, v, stop)
}

// fakeLogProb is the fake's log-probability of its nth token id: -n/10,
// and top ids 100, 101, ... at -0.01, -1.01, ...
func fakeLogProb(id int32, n, top int) generate.TokenLogProb {
	lp := generate.TokenLogProb{ID: id, LogProb: -float32(n) / 10}
	for k := range top {
		lp.Top = append(lp.Top, generate.TokenLogProb{ID: int32(100 + k), LogProb: -float32(k) - 0.01})
	}
	return lp
}
