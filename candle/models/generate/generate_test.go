package generate

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"

	"github.com/rocm-go/rocm/errs"
)

// fakeLM is a toy language model on the CPU: the logits of a sequence
// peak at target(last token, length), falling with the distance from it,
// so that greedy outputs are computable and draws spread over a few
// tokens.
type fakeLM struct {
	vocab, ctxLen, capacity int
	failOn                  int32         // a prompt token that makes Forward fail (-1: none)
	f64                     bool          // Forward returns F64 logits, which Sample refuses
	gate                    chan struct{} // when set, each Forward takes a value first

	mu       sync.Mutex
	lens     map[uint64]int
	released map[uint64]bool
	batches  []int
	calls    int
}

func newFake() *fakeLM {
	return &fakeLM{vocab: 40, ctxLen: 256, capacity: 1 << 20, failOn: -1, lens: map[uint64]int{}, released: map[uint64]bool{}}
}

func target(vocab int, last int32, length int) int32 {
	return int32((int(last)*7 + length*3 + 1) % vocab)
}

func (f *fakeLM) Device() candle.Device { return candle.CPU() }
func (f *fakeLM) VocabSize() int        { return f.vocab }
func (f *fakeLM) ContextLength() int    { return f.ctxLen }

func (f *fakeLM) Forward(seqs []uint64, tokens [][]int32) (*candle.Tensor, error) {
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	for _, ts := range tokens {
		for _, t := range ts {
			if t == f.failOn {
				return nil, fmt.Errorf("fake: token %d", t)
			}
		}
	}
	f.batches = append(f.batches, len(seqs))
	data := make([]float32, len(seqs)*f.vocab)
	for i, id := range seqs {
		f.lens[id] += len(tokens[i])
		tgt := target(f.vocab, tokens[i][len(tokens[i])-1], f.lens[id])
		for j := range f.vocab {
			d := (j - int(tgt) + f.vocab) % f.vocab
			d = min(d, f.vocab-d)
			data[i*f.vocab+j] = 31 - float32(d)*1.5 // positive, for the repetition penalty
		}
	}
	if f.f64 {
		d64 := make([]float64, len(data))
		for i, v := range data {
			d64[i] = float64(v)
		}
		return candle.FromSlice(candle.CPU(), d64, len(seqs), f.vocab)
	}
	return candle.FromSlice(candle.CPU(), data, len(seqs), f.vocab)
}

func (f *fakeLM) Release(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released[seq] = true
	delete(f.lens, seq)
}

func (f *fakeLM) CacheTokensFree() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	used := 0
	for _, n := range f.lens {
		used += n
	}
	return f.capacity - used
}

func (f *fakeLM) maxBatch() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := 0
	for _, b := range f.batches {
		m = max(m, b)
	}
	return m
}

// greedy is the fake's greedy completion of a prompt.
func greedy(vocab int, prompt []int32, n int) []int32 {
	last, length := prompt[len(prompt)-1], len(prompt)
	var out []int32
	for range n {
		t := target(vocab, last, length)
		out = append(out, t)
		last, length = t, length+1
	}
	return out
}

// letters decodes token t as one letter.
type letters struct{}

func (letters) Add(id int32) string { return piece(id) }

func piece(id int32) string {
	if id < 26 {
		return string(rune('a' + id))
	}
	return string(rune('A' + id - 26))
}

func text(ids []int32) string {
	var b strings.Builder
	for _, t := range ids {
		b.WriteString(piece(t))
	}
	return b.String()
}

// collect reads a stream to its end.
func collect(t testing.TB, ch <-chan Event) (string, []int32, Event) {
	t.Helper()
	var b strings.Builder
	var toks []int32
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("the stream closed without a final event")
			}
			require.True(t, utf8.ValidString(ev.Text), "event text %q", ev.Text)
			b.WriteString(ev.Text)
			toks = append(toks, ev.Tokens...)
			if ev.Done {
				_, open := <-ch
				assert.False(t, open, "the channel is closed after the final event")
				return b.String(), toks, ev
			}
		case <-deadline:
			t.Fatal("no final event")
		}
	}
}

func engine(t testing.TB, m Model, cfg Config) *Engine {
	t.Helper()
	if cfg.Decoder == nil {
		cfg.Decoder = func() StreamDecoder { return letters{} }
	}
	e, err := NewEngine(m, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	return e
}

func TestGreedyExact(t *testing.T) {
	f := newFake()
	e := engine(t, f, Config{})
	prompt := []int32{3, 1, 4, 1, 5}
	ch, err := e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 20})
	require.NoError(t, err)
	txt, toks, last := collect(t, ch)
	want := greedy(f.vocab, prompt, 20)
	assert.Equal(t, want, toks)
	assert.Equal(t, text(want), txt)
	assert.Equal(t, "length", last.FinishReason)
	assert.NoError(t, last.Err)
	assert.Equal(t, 5, last.PromptTokens)
	assert.Equal(t, 20, last.CompletionTokens)
	time.Sleep(10 * time.Millisecond)
	f.mu.Lock()
	assert.True(t, f.released[1], "the finished sequence is released")
	f.mu.Unlock()
}

func TestStops(t *testing.T) {
	f := newFake()
	e := engine(t, f, Config{})
	prompt := []int32{7, 2}
	full := greedy(f.vocab, prompt, 30)
	fullText := text(full)

	// A stop token: the completion ends before it.
	ch, err := e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 30, StopTokens: []int32{full[5]}})
	require.NoError(t, err)
	first := 0
	for full[first] != full[5] {
		first++
	}
	txt, toks, last := collect(t, ch)
	assert.Equal(t, full[:first], toks)
	assert.Equal(t, text(full[:first]), txt)
	assert.Equal(t, "stop", last.FinishReason)
	assert.Equal(t, first+1, last.CompletionTokens)

	// A stop string across two tokens: the text stops before it.
	stop := fullText[6:8]
	at := strings.Index(fullText, stop)
	ch, err = e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 30, StopStrings: []string{"zzzzz", stop}})
	require.NoError(t, err)
	txt, toks, last = collect(t, ch)
	assert.Equal(t, fullText[:at], txt)
	assert.Equal(t, full[:at+2], toks, "the tokens up to the stop string's end")
	assert.Equal(t, "stop", last.FinishReason)

	// A stop string that starts and then diverges: everything is emitted.
	ch, err = e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 30, StopStrings: []string{fullText[3:6] + "#"}})
	require.NoError(t, err)
	var b strings.Builder
	for ev := range ch {
		b.WriteString(ev.Text)
		require.True(t, strings.HasPrefix(fullText, b.String()), "text %q is not a prefix of %q", b.String(), fullText)
		if ev.Done {
			assert.Equal(t, "length", ev.FinishReason)
		}
	}
	assert.Equal(t, fullText, b.String())
}

func TestHeldBackText(t *testing.T) {
	// The held text is released exactly when it can no longer start the
	// stop string: the events are read one by one.
	s := &sequence{req: Request{StopStrings: []string{"abc"}}}
	s.held = "xxab"
	assert.Equal(t, "xx", s.releasable())
	assert.Equal(t, "ab", s.held)
	s.held += "d"
	assert.Equal(t, "abd", s.releasable())
	s.held = "xa"
	assert.Equal(t, "x", s.releasable())
	s.held = "abcab"
	cut, hit := s.stopAt()
	assert.True(t, hit)
	assert.Equal(t, 0, cut)
}

func TestMaxTokensAndContext(t *testing.T) {
	f := newFake()
	f.ctxLen = 12
	e := engine(t, f, Config{})
	ch, err := e.Submit(context.Background(), Request{Prompt: []int32{1, 2}, MaxTokens: 3})
	require.NoError(t, err)
	_, toks, last := collect(t, ch)
	assert.Len(t, toks, 3)
	assert.Equal(t, "length", last.FinishReason)
	// MaxTokens 0: up to the context.
	ch, err = e.Submit(context.Background(), Request{Prompt: []int32{1, 2}})
	require.NoError(t, err)
	_, toks, last = collect(t, ch)
	assert.Len(t, toks, 10)
	assert.Equal(t, "length", last.FinishReason)
}

func TestConcurrentRequestsBatch(t *testing.T) {
	f := newFake()
	f.gate = make(chan struct{})
	e := engine(t, f, Config{MaxBatch: 8})
	reqs := make([]Request, 12)
	for i := range reqs {
		reqs[i] = Request{Prompt: []int32{int32(i), int32(i * 3 % 40), 5}, MaxTokens: 10 + i}
		if i%2 == 1 {
			reqs[i].Sampling = Sampling{Temperature: 1, TopK: 5, TopP: 0.9, RepetitionPenalty: 1.2, Seed: uint64(100 + i)}
		}
	}
	chans := make([]<-chan Event, len(reqs))
	for i, r := range reqs {
		var err error
		chans[i], err = e.Submit(context.Background(), r)
		require.NoError(t, err)
	}
	go func() {
		for {
			select {
			case f.gate <- struct{}{}:
			case <-time.After(2 * time.Second):
				return
			}
		}
	}()
	results := make([][]int32, len(reqs))
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Go(func() {
			_, results[i], _ = collect(t, chans[i])
		})
	}
	wg.Wait()
	assert.Greater(t, f.maxBatch(), 1, "requests were batched")
	assert.LessOrEqual(t, f.maxBatch(), 8)
	// Each equals the request run alone.
	alone := engine(t, newFake(), Config{MaxBatch: 1})
	for i, r := range reqs {
		ch, err := alone.Submit(context.Background(), r)
		require.NoError(t, err)
		_, toks, _ := collect(t, ch)
		assert.Equal(t, toks, results[i], "request %d", i)
		if r.Sampling.Temperature == 0 {
			assert.Equal(t, greedy(40, r.Prompt, r.MaxTokens), toks)
		}
	}
}

func TestPrefillChunks(t *testing.T) {
	f := newFake()
	e := engine(t, f, Config{PrefillChunk: 4})
	prompt := make([]int32, 30)
	for i := range prompt {
		prompt[i] = int32(i % 40)
	}
	ch, err := e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 5})
	require.NoError(t, err)
	_, toks, _ := collect(t, ch)
	assert.Equal(t, greedy(40, prompt, 5), toks)
	f.mu.Lock()
	assert.GreaterOrEqual(t, f.calls, 8+4, "30 prompt tokens 4 at a time, then 4 more steps")
	f.mu.Unlock()
}

func TestCancelReleases(t *testing.T) {
	f := newFake()
	// The model waits for the test before each step until the cancel, so
	// that the whole completion cannot finish first.
	f.gate = make(chan struct{})
	e := engine(t, f, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := e.Submit(ctx, Request{Prompt: []int32{1}, MaxTokens: 200})
	require.NoError(t, err)
	f.gate <- struct{}{} // the prompt's step
	ev := <-ch
	require.False(t, ev.Done)
	cancel()
	close(f.gate)
	_, _, last := collect(t, ch)
	assert.Equal(t, "cancelled", last.FinishReason)
	assert.ErrorIs(t, last.Err, context.Canceled)
	assert.Less(t, last.CompletionTokens, 200)
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.True(t, f.released[1])
	assert.Empty(t, f.lens, "no cache is left")
}

func TestQueueFull(t *testing.T) {
	f := newFake()
	f.gate = make(chan struct{})
	e := engine(t, f, Config{MaxBatch: 1, MaxQueue: 1})
	a, err := e.Submit(context.Background(), Request{Prompt: []int32{1}, MaxTokens: 2})
	require.NoError(t, err)
	// The first is admitted and blocks in Forward; then one waits.
	require.Eventually(t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.waiting) == 0
	}, 5*time.Second, time.Millisecond)
	b, err := e.Submit(context.Background(), Request{Prompt: []int32{2}, MaxTokens: 2})
	require.NoError(t, err)
	_, err = e.Submit(context.Background(), Request{Prompt: []int32{3}, MaxTokens: 2})
	assert.ErrorIs(t, err, ErrQueueFull)
	close(f.gate)
	collect(t, a)
	collect(t, b)
}

func TestCacheAdmission(t *testing.T) {
	f := newFake()
	f.capacity = 20
	e := engine(t, f, Config{})
	// Each needs 4 + 6 tokens: two run at once, never three.
	var chans []<-chan Event
	for i := range 5 {
		ch, err := e.Submit(context.Background(), Request{Prompt: []int32{int32(i), 1, 2, 3}, MaxTokens: 6})
		require.NoError(t, err)
		chans = append(chans, ch)
	}
	for _, ch := range chans {
		_, toks, last := collect(t, ch)
		assert.Len(t, toks, 6)
		assert.NoError(t, last.Err)
	}
	assert.LessOrEqual(t, f.maxBatch(), 2)
	// One that can never fit fails.
	ch, err := e.Submit(context.Background(), Request{Prompt: []int32{1, 2}, MaxTokens: 100})
	require.NoError(t, err)
	_, _, last := collect(t, ch)
	assert.Equal(t, "error", last.FinishReason)
	assert.ErrorContains(t, last.Err, "KV-cache tokens")
}

func TestModelErrorFailsOnlyItsRequest(t *testing.T) {
	f := newFake()
	f.failOn = 39
	f.gate = make(chan struct{})
	e := engine(t, f, Config{})
	good1, err := e.Submit(context.Background(), Request{Prompt: []int32{1, 2}, MaxTokens: 8})
	require.NoError(t, err)
	bad, err := e.Submit(context.Background(), Request{Prompt: []int32{39}, MaxTokens: 8})
	require.NoError(t, err)
	good2, err := e.Submit(context.Background(), Request{Prompt: []int32{4}, MaxTokens: 8})
	require.NoError(t, err)
	close(f.gate)
	_, _, last := collect(t, bad)
	assert.Equal(t, "error", last.FinishReason)
	assert.ErrorContains(t, last.Err, "fake: token 39")
	for _, c := range []struct {
		ch     <-chan Event
		prompt []int32
	}{{good1, []int32{1, 2}}, {good2, []int32{4}}} {
		_, toks, last := collect(t, c.ch)
		assert.Equal(t, greedy(40, c.prompt, 8), toks)
		assert.NoError(t, last.Err)
	}
}

func TestSamplingErrorFailsTheStep(t *testing.T) {
	f := newFake()
	f.f64 = true
	e := engine(t, f, Config{})
	ch, err := e.Submit(context.Background(), Request{Prompt: []int32{1, 2}, MaxTokens: 8})
	require.NoError(t, err)
	_, _, last := collect(t, ch)
	assert.Equal(t, "error", last.FinishReason)
	assert.ErrorIs(t, last.Err, candle.ErrDType)
	assert.ErrorContains(t, last.Err, "generate: Engine: sampling: candle: Tensor.Sample")
	f.mu.Lock()
	assert.Empty(t, f.lens, "released")
	assert.Equal(t, 1, f.calls, "no retry once the model took the tokens")
	f.mu.Unlock()
}

func TestCloseWithRequestsInFlight(t *testing.T) {
	before := runtime.NumGoroutine()
	f := newFake()
	e, err := NewEngine(f, Config{MaxBatch: 2, Decoder: func() StreamDecoder { return letters{} }})
	require.NoError(t, err)
	var chans []<-chan Event
	for i := range 6 {
		ch, err := e.Submit(context.Background(), Request{Prompt: []int32{int32(i)}, MaxTokens: 200})
		require.NoError(t, err)
		chans = append(chans, ch)
	}
	require.NoError(t, e.Close())
	for _, ch := range chans {
		_, _, last := collect(t, ch)
		assert.True(t, last.Done)
		if last.FinishReason == "cancelled" {
			assert.ErrorIs(t, last.Err, errs.ErrClosed)
		}
	}
	_, err = e.Submit(context.Background(), Request{Prompt: []int32{1}})
	assert.ErrorIs(t, err, errs.ErrClosed)
	require.NoError(t, e.Close(), "Close twice")
	f.mu.Lock()
	assert.Empty(t, f.lens, "every sequence is released")
	f.mu.Unlock()
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before }, 5*time.Second, 10*time.Millisecond, "no goroutine is left")
}

func TestSlowConsumer(t *testing.T) {
	f := newFake()
	e := engine(t, f, Config{})
	slow, err := e.Submit(context.Background(), Request{Prompt: []int32{9}, MaxTokens: 100})
	require.NoError(t, err)
	fast, err := e.Submit(context.Background(), Request{Prompt: []int32{8}, MaxTokens: 100})
	require.NoError(t, err)
	// The fast one finishes though nobody reads the slow one.
	_, toks, _ := collect(t, fast)
	assert.Len(t, toks, 100)
	txt, toks, last := collect(t, slow)
	assert.Equal(t, greedy(40, []int32{9}, 100), toks)
	assert.Equal(t, text(toks), txt)
	assert.Equal(t, "length", last.FinishReason)
}

// bytesDecoder decodes tokens to bytes and returns only whole UTF-8
// characters, as a byte-level tokenizer's stream decoder does.
type bytesDecoder struct {
	pieces [][]byte
	buf    []byte
}

func (d *bytesDecoder) Add(id int32) string {
	d.buf = append(d.buf, d.pieces[id]...)
	var out strings.Builder
	n := 0
	for n < len(d.buf) && utf8.FullRune(d.buf[n:]) {
		r, size := utf8.DecodeRune(d.buf[n:])
		if r == utf8.RuneError && size == 1 {
			out.WriteRune(utf8.RuneError) // an invalid byte
		} else {
			out.Write(d.buf[n : n+size])
		}
		n += size
	}
	d.buf = d.buf[n:]
	return out.String()
}

func TestUTF8Streaming(t *testing.T) {
	f := newFake()
	// Most tokens are single bytes of "é" (C3 A9), "€" (E2 82 AC) and "😀"
	// (F0 9F 98 80): characters split across tokens, and invalid runs.
	bytesOf := []byte{0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80}
	pieces := make([][]byte, f.vocab)
	for i := range pieces {
		if i < 36 {
			pieces[i] = []byte{bytesOf[i%len(bytesOf)]}
		} else {
			pieces[i] = []byte(piece(int32(i)))
		}
	}
	e := engine(t, f, Config{Decoder: func() StreamDecoder { return &bytesDecoder{pieces: pieces} }})
	for _, prompt := range [][]int32{{0}, {2}, {5, 1}, {11}} {
		ch, err := e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 80})
		require.NoError(t, err)
		txt, toks, _ := collect(t, ch) // every event's text is valid UTF-8
		d := &bytesDecoder{pieces: pieces}
		var want strings.Builder
		for _, id := range toks {
			want.WriteString(d.Add(id))
		}
		assert.Equal(t, want.String(), txt)
		assert.Equal(t, greedy(f.vocab, prompt, 80), toks)
	}
	// The decoder itself: characters split across tokens come whole.
	d := &bytesDecoder{pieces: pieces}
	var out strings.Builder
	for _, id := range []int32{2, 3, 4, 0, 1, 5, 6, 7, 8, 36} {
		out.WriteString(d.Add(id))
	}
	assert.Equal(t, "€é😀"+piece(36), out.String())
}

// holdingDecoder gives no text until Flush, which gives it all.
type holdingDecoder struct {
	pieces [][]byte
	buf    []byte
}

func (d *holdingDecoder) Add(id int32) string { d.buf = append(d.buf, d.pieces[id]...); return "" }
func (d *holdingDecoder) Flush() string {
	s := string(d.buf)
	d.buf = nil
	return s
}

// TestFlushAtTheEnd checks that what the decoder still holds when a
// completion ends reaches its last event.
func TestFlushAtTheEnd(t *testing.T) {
	f := newFake()
	pieces := make([][]byte, f.vocab)
	for i := range pieces {
		pieces[i] = []byte(piece(int32(i)))
	}
	e := engine(t, f, Config{Decoder: func() StreamDecoder { return &holdingDecoder{pieces: pieces} }})
	ch, err := e.Submit(context.Background(), Request{Prompt: []int32{3}, MaxTokens: 7})
	require.NoError(t, err)
	txt, toks, last := collect(t, ch)
	require.Len(t, toks, 7)
	assert.Equal(t, "length", last.FinishReason)
	assert.Equal(t, text(toks), txt)
}

func TestSubmitErrors(t *testing.T) {
	f := newFake()
	e := engine(t, f, Config{})
	noDec, err := NewEngine(f, Config{})
	require.NoError(t, err)
	defer noDec.Close()
	long := make([]int32, 256)
	for _, c := range []struct {
		e           *Engine
		r           Request
		kind        error
		field, want string
	}{
		{e, Request{}, errs.ErrArgument, "Prompt", "empty prompt"},
		{e, Request{Prompt: long}, ErrContextLength, "Prompt", "the prompt is 256 tokens and this model's context is 256"},
		{e, Request{Prompt: []int32{40}}, errs.ErrArgument, "Prompt", "token id 40 at 0: want 0 to 39"},
		{e, Request{Prompt: []int32{1}, StopTokens: []int32{-1}}, errs.ErrArgument, "StopTokens", "token id -1 at 0"},
		{e, Request{Prompt: []int32{1}, MaxTokens: -1}, errs.ErrArgument, "MaxTokens", "-1 tokens to generate"},
		{e, Request{Prompt: []int32{1}, MaxTokens: 256}, ErrContextLength, "MaxTokens", "so at most 255"},
		{e, Request{Prompt: []int32{1}, Sampling: Sampling{Temperature: -1}}, errs.ErrArgument, "Sampling.Temperature", "temperature -1"},
		{e, Request{Prompt: []int32{1}, Sampling: Sampling{TopP: 2}}, errs.ErrArgument, "Sampling.TopP", "top-p 2"},
		{e, Request{Prompt: []int32{1}, StopStrings: []string{""}}, errs.ErrArgument, "StopStrings", "stop string"},
		{noDec, Request{Prompt: []int32{1}, StopStrings: []string{"a"}}, errs.ErrArgument, "StopStrings", "need a decoder"},
	} {
		_, err := c.e.Submit(context.Background(), c.r)
		assert.ErrorIs(t, err, c.kind, c.want)
		assert.ErrorContains(t, err, c.want)
		var ge *errs.Error
		if assert.ErrorAs(t, err, &ge, c.want) {
			assert.Equal(t, c.field, ge.Field, c.want)
		}
		if c.e == e {
			assert.Error(t, Check(c.r, f.VocabSize(), f.ContextLength()), "Check refuses it as Submit does: %s", c.want)
		}
	}
	assert.NoError(t, Check(Request{Prompt: []int32{1}, MaxTokens: 255}, 40, 256), "the whole context")
	assert.NoError(t, Check(Request{Prompt: []int32{1}}, 40, 256), "0 is what the context leaves")
	_, err = NewEngine(nil, Config{})
	assert.Error(t, err)
	_, err = NewEngine(f, Config{MaxBatch: -1})
	assert.Error(t, err)
}

// TestSampledThroughEngine draws with candle's CPU sampling: a seed
// reproduces a completion, other seeds give others, and top-k 1 is
// greedy.
func TestSampledThroughEngine(t *testing.T) {
	f := newFake()
	e := engine(t, f, Config{})
	run := func(sp Sampling) []int32 {
		ch, err := e.Submit(context.Background(), Request{Prompt: []int32{5, 6}, MaxTokens: 40, Sampling: sp})
		require.NoError(t, err)
		_, toks, last := collect(t, ch)
		require.NoError(t, last.Err)
		return toks
	}
	sp := Sampling{Temperature: 1.2, TopP: 0.95, MinP: 0.01, Seed: 77}
	a := run(sp)
	assert.Equal(t, a, run(sp), "the same seed, the same completion")
	assert.NotEqual(t, greedy(40, []int32{5, 6}, 40), a, "sampling is not greedy here")
	distinct := map[string]bool{}
	for s := range 5 {
		sp.Seed = uint64(1000 + s)
		distinct[fmt.Sprint(run(sp))] = true
	}
	assert.Greater(t, len(distinct), 1)
	assert.Equal(t, greedy(40, []int32{5, 6}, 40), run(Sampling{Temperature: 3, TopK: 1}))
	// A random seed (0) still completes.
	assert.Len(t, run(Sampling{Temperature: 1}), 40)
	// A strong repetition penalty avoids the prompt's tokens and its own.
	pen := run(Sampling{Temperature: 0.01, RepetitionPenalty: 1e6, Seed: 3})
	seen := map[int32]bool{5: true, 6: true}
	for _, tk := range pen[:30] {
		assert.False(t, seen[tk], "token %d repeated in %v", tk, pen)
		seen[tk] = true
	}
}

// TestPenaltyThroughHistory checks the engine's repetition penalty, whose
// tokens it keeps in a candle.TokenHistory, against a loop that gives
// Sample the prompt and the draws as a list each step: the same tokens,
// alone and batched with other penalised requests (each its own slot,
// slots reused once requests end).
func TestPenaltyThroughHistory(t *testing.T) {
	const vocab = 40
	reference := func(prompt []int32, sp Sampling, n int) []int32 {
		prev := append([]int32(nil), prompt...)
		last, length := prompt[len(prompt)-1], len(prompt)
		var out []int32
		for step := range n {
			tgt := target(vocab, last, length)
			row := make([]float32, vocab)
			for j := range row {
				d := (j - int(tgt) + vocab) % vocab
				row[j] = 31 - float32(min(d, vocab-d))*1.5
			}
			x, err := candle.FromSlice(candle.CPU(), row, 1, vocab)
			require.NoError(t, err)
			ids, err := x.Sample([]candle.SampleOptions{{Temperature: sp.Temperature, TopK: sp.TopK, TopP: sp.TopP, MinP: sp.MinP,
				RepetitionPenalty: sp.RepetitionPenalty, Previous: prev, Seed: sp.Seed, Step: uint64(step)}})
			require.NoError(t, err)
			got, err := candle.ToSlice[uint32](ids)
			require.NoError(t, err)
			tok := int32(got[0])
			out = append(out, tok)
			prev = append(prev, tok)
			last, length = tok, length+1
		}
		return out
	}
	reqs := []Request{
		{Prompt: []int32{5, 6, 7}, MaxTokens: 25, Sampling: Sampling{Temperature: 0.5, RepetitionPenalty: 1.8, Seed: 11}},
		{Prompt: []int32{1}, MaxTokens: 30, Sampling: Sampling{RepetitionPenalty: 3}},
		{Prompt: []int32{9, 9, 2}, MaxTokens: 12, Sampling: Sampling{Temperature: 1, TopK: 6, TopP: 0.9, RepetitionPenalty: 0.7, Seed: 12}},
		{Prompt: []int32{3, 4}, MaxTokens: 20, Sampling: Sampling{Temperature: 0.8, MinP: 0.05, RepetitionPenalty: 1.2, Seed: 13}},
		{Prompt: []int32{8}, MaxTokens: 20, Sampling: Sampling{Temperature: 0.9, Seed: 14}},
	}
	// The penalty changes the draws, so that an engine ignoring it fails.
	for i, r := range reqs[:4] {
		off := r.Sampling
		off.RepetitionPenalty = 1
		assert.NotEqual(t, reference(r.Prompt, off, r.MaxTokens), reference(r.Prompt, r.Sampling, r.MaxTokens), "request %d", i)
	}
	for _, maxBatch := range []int{1, 2, 8} {
		e := engine(t, newFake(), Config{MaxBatch: maxBatch})
		chans := submitAll(t, e, reqs)
		for i, r := range reqs {
			_, toks, last := collect(t, chans[i])
			require.NoError(t, last.Err)
			assert.Equal(t, reference(r.Prompt, r.Sampling, r.MaxTokens), toks, "batch %d, request %d", maxBatch, i)
		}
	}
}

// script is a Constraint that allows one token a step, from a list, and
// is done after the list; an empty step allows nothing.
type script struct {
	steps [][]int32
	at    int
}

func (c *script) Mask(words []uint32) (int, error) {
	clear(words)
	for _, t := range c.steps[c.at] {
		words[t/32] |= 1 << (t % 32)
	}
	return len(c.steps[c.at]), nil
}

func (c *script) Accept(id int32) error {
	if !slices.Contains(c.steps[c.at], id) {
		return fmt.Errorf("token %d not allowed", id)
	}
	c.at++
	return nil
}

func (c *script) Done() bool { return c.at == len(c.steps) }

// TestConstraint: a constrained request draws only what its constraint
// allows (whatever the model prefers), beside an unconstrained one in the
// same steps, and ends "stop" when the constraint is done; a constraint
// that allows nothing fails its request only.
func TestConstraint(t *testing.T) {
	f := newFake()
	e := engine(t, f, Config{})
	prompt := []int32{3, 1, 4}
	want := []int32{11, 12, 13, 39}
	steps := make([][]int32, len(want))
	for i, id := range want {
		steps[i] = []int32{id}
	}
	ch, err := e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 20, Constraint: &script{steps: steps},
		Sampling: Sampling{Temperature: 1, Seed: 3}})
	require.NoError(t, err)
	free, err := e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 6})
	require.NoError(t, err)
	stuck, err := e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 6, Constraint: &script{steps: [][]int32{{5}, {}}}})
	require.NoError(t, err)
	_, toks, last := collect(t, ch)
	assert.Equal(t, want, toks)
	assert.Equal(t, "stop", last.FinishReason)
	assert.NoError(t, last.Err)
	assert.Equal(t, 4, last.CompletionTokens)
	_, toks, last = collect(t, free)
	assert.Equal(t, greedy(f.vocab, prompt, 6), toks, "the unconstrained row is untouched")
	assert.Equal(t, "length", last.FinishReason)
	_, toks, last = collect(t, stuck)
	assert.Equal(t, []int32{5}, toks)
	assert.Equal(t, "error", last.FinishReason)
	assert.ErrorIs(t, last.Err, errs.ErrArgument)
	assert.ErrorContains(t, last.Err, "allows no token")
}
