package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sseWorker is an httptest worker that streams fake chat chunks: a first
// token after ttft, then one every itl, then usage and [DONE].
type sseWorker struct {
	*httptest.Server
	ttft, itl time.Duration
	token     string
	every429  int64 // > 0: every n-th request gets 429
	errorAt   int   // > 0: an error event after that many tokens
	served    atomic.Int64
	active    atomic.Int64
	maxActive atomic.Int64
	mu        sync.Mutex
	bodies    []map[string]any
}

func newSSEWorker(t *testing.T, ttft, itl time.Duration) *sseWorker {
	s := &sseWorker{ttft: ttft, itl: itl}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *sseWorker) serve(w http.ResponseWriter, r *http.Request) {
	n := s.served.Add(1)
	a := s.active.Add(1)
	// The stream counts as over before its last line: the client may send
	// its next request as soon as it reads it.
	over := sync.OnceFunc(func() { s.active.Add(-1) })
	defer over()
	for m := s.maxActive.Load(); a > m && !s.maxActive.CompareAndSwap(m, a); m = s.maxActive.Load() {
	}
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	if s.token != "" && r.Header.Get("Authorization") != "Bearer "+s.token {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error": {"message": "missing or wrong API key", "type": "invalid_request_error"}}`)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, body)
	s.mu.Unlock()
	if s.every429 > 0 && n%s.every429 == 0 {
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error": {"message": "the worker's queue is full", "type": "server_error"}}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(format string, args ...any) {
		fmt.Fprintf(w, "data: "+format+"\n\n", args...)
		w.(http.Flusher).Flush()
	}
	sleep := func(d time.Duration) bool {
		select {
		case <-r.Context().Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	send(`{"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]}`)
	maxTokens := int(body["max_tokens"].(float64))
	for i := range maxTokens {
		d := s.itl
		if i == 0 {
			d = s.ttft
		}
		if !sleep(d) {
			return
		}
		if s.errorAt > 0 && i == s.errorAt {
			send(`{"error": {"message": "device lost", "type": "server_error"}}`)
			send("[DONE]")
			return
		}
		send(`{"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "tok%d "}, "finish_reason": null}]}`, i)
	}
	send(`{"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}], "usage": {"prompt_tokens": 5, "completion_tokens": %d, "total_tokens": %d}}`, maxTokens, maxTokens+5)
	send(`{"object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": %d, "total_tokens": %d}}`, maxTokens, maxTokens+5)
	over()
	send("[DONE]")
}

func TestLLMLoad(t *testing.T) {
	srv := newSSEWorker(t, 20*time.Millisecond, 2*time.Millisecond)
	srv.token = "tok"
	rep, err := RunLLMLoad(context.Background(), LLMLoad{URL: srv.URL + "/", Model: "m", Token: "tok", Prompt: "Hello", MaxTokens: 10,
		Clients: 4, Requests: 10, Duration: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, 10, rep.Requests, "the count bounds the run")
	assert.Equal(t, 10, rep.Completed)
	assert.Zero(t, rep.Errors)
	assert.Zero(t, rep.Cut)
	assert.Equal(t, 100, rep.Tokens, "from the usage")
	assert.Equal(t, int64(4), srv.maxActive.Load(), "four clients at once")
	assert.GreaterOrEqual(t, rep.TTFTP50, 20*time.Millisecond)
	assert.Less(t, rep.TTFTP50, 2*time.Second)
	assert.GreaterOrEqual(t, rep.TTFTP90, rep.TTFTP50)
	assert.GreaterOrEqual(t, rep.ITLP50, 2*time.Millisecond)
	assert.GreaterOrEqual(t, rep.ITLP90, rep.ITLP50)
	assert.Greater(t, rep.StreamRate, 0.0)
	assert.Less(t, rep.StreamRate, 500.0, "at most one token per 2 ms")
	assert.InDelta(t, float64(rep.Tokens)/rep.Elapsed.Seconds(), rep.TokensPerSec, 1e-9)
	require.Len(t, rep.PerClient, 4)
	total := 0
	for _, c := range rep.PerClient {
		total += c.Requests
		assert.Equal(t, c.Requests*10, c.Tokens)
		if c.Requests > 0 {
			assert.Greater(t, c.TokensPerSec, 0.0)
			assert.GreaterOrEqual(t, c.TTFTP50, 20*time.Millisecond)
		}
	}
	assert.Equal(t, 10, total)
	require.Len(t, rep.Samples, 10)
	for i, s := range rep.Samples {
		assert.Equal(t, 10, s.Chunks)
		assert.Len(t, s.ITL, 9)
		assert.Equal(t, "length", s.Finish)
		if i > 0 {
			assert.GreaterOrEqual(t, s.Start, rep.Samples[i-1].Start, "in order of start")
		}
	}
	srv.mu.Lock()
	body := srv.bodies[0]
	srv.mu.Unlock()
	assert.Equal(t, map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "Hello"}}, "max_tokens": 10.0,
		"temperature": 0.0, "stream": true, "stream_options": map[string]any{"include_usage": true}}, body)

	var out strings.Builder
	rep.Print(&out)
	assert.Contains(t, out.String(), "4 clients, max_tokens 10: 10 requests (10 completed, 0 errors, 0 cut)")
	assert.Contains(t, out.String(), "time to first token p50 ")
	assert.Contains(t, out.String(), "client   3:")
	out.Reset()
	PrintLLMLoadTable(&out, []*LLMLoadReport{rep, rep})
	assert.Equal(t, 3, strings.Count(out.String(), "\n| "), "header and two runs")
	_, err = json.Marshal(rep)
	assert.NoError(t, err)
}

func TestLLMLoadErrors(t *testing.T) {
	srv := newSSEWorker(t, time.Millisecond, time.Millisecond)
	srv.every429 = 3
	rep, err := RunLLMLoad(context.Background(), LLMLoad{URL: srv.URL, Prompt: "x", MaxTokens: 3, Clients: 2, Requests: 9, Duration: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, 9, rep.Requests)
	assert.Equal(t, 3, rep.Errors)
	assert.Equal(t, 6, rep.Completed)
	assert.Equal(t, map[string]int{"HTTP 429: the worker's queue is full": 3}, rep.ErrorKinds)

	srv.every429 = 0
	srv.errorAt = 2
	rep, err = RunLLMLoad(context.Background(), LLMLoad{URL: srv.URL, Prompt: "x", MaxTokens: 5, Clients: 1, Requests: 2, Duration: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"an error event: device lost": 2}, rep.ErrorKinds)
	assert.Equal(t, 0, rep.Tokens, "failed requests count no usage")

	srv.errorAt = 0
	srv.token = "right"
	rep, err = RunLLMLoad(context.Background(), LLMLoad{URL: srv.URL, Token: "wrong", Prompt: "x", MaxTokens: 5, Clients: 1, Requests: 1, Duration: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"HTTP 401: missing or wrong API key": 1}, rep.ErrorKinds)

	// A server that is not a worker.
	rep, err = RunLLMLoad(context.Background(), LLMLoad{URL: srv.URL + "/nothing", Prompt: "x", MaxTokens: 5, Clients: 1, Requests: 1, Duration: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Errors)
	for k := range rep.ErrorKinds {
		assert.Contains(t, k, "HTTP 404")
	}
	// A stream without [DONE].
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "data: {\"choices\": [{\"delta\": {\"content\": \"a\"}}]}\n\n")
	}))
	defer cut.Close()
	rep, err = RunLLMLoad(context.Background(), LLMLoad{URL: cut.URL, Prompt: "x", MaxTokens: 5, Clients: 1, Requests: 1, Duration: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"the stream ended without [DONE]": 1}, rep.ErrorKinds)
}

func TestLLMLoadDurationBound(t *testing.T) {
	srv := newSSEWorker(t, time.Millisecond, 50*time.Millisecond)
	start := time.Now()
	rep, err := RunLLMLoad(context.Background(), LLMLoad{URL: srv.URL, Prompt: "x", MaxTokens: 1000, Clients: 3, Requests: 1000, Duration: 300 * time.Millisecond})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second, "the time bounds the run")
	assert.Equal(t, 3, rep.Requests, "each client's first request was cut")
	assert.Equal(t, 3, rep.Cut)
	assert.Zero(t, rep.Errors)
	assert.Greater(t, rep.Tokens, 0, "the tokens of cut requests count")
	assert.Eventually(t, func() bool { return srv.active.Load() == 0 }, 5*time.Second, time.Millisecond, "the cut requests ended on the server")
}

func TestLLMLoadChecks(t *testing.T) {
	ok := LLMLoad{URL: "http://127.0.0.1:8080", Prompt: "x", MaxTokens: 8, Clients: 1, Requests: 1, Duration: time.Second}
	for _, c := range []struct {
		mod func(*LLMLoad)
		msg string
	}{
		{func(l *LLMLoad) { l.Clients = 0 }, "0 clients"},
		{func(l *LLMLoad) { l.Clients = MaxLLMClients + 1 }, "1025 clients"},
		{func(l *LLMLoad) { l.Requests = 0 }, "0 requests"},
		{func(l *LLMLoad) { l.Requests = MaxLLMRequests + 1 }, "requests: want 1 to"},
		{func(l *LLMLoad) { l.Duration = 0 }, "a duration of 0s"},
		{func(l *LLMLoad) { l.Duration = 25 * time.Hour }, "at most 24h"},
		{func(l *LLMLoad) { l.MaxTokens = 0 }, "max tokens 0"},
		{func(l *LLMLoad) { l.Temperature = -1 }, "temperature -1"},
		{func(l *LLMLoad) { l.Prompt = "" }, "prompt is empty"},
		{func(l *LLMLoad) { l.URL = "http://10.0.0.8:8080" }, "not on this machine's loopback"},
		{func(l *LLMLoad) { l.URL = "http://example.com" }, "-allow-remote"},
		{func(l *LLMLoad) { l.URL = "127.0.0.1:8080" }, `the worker URL "127.0.0.1:8080"`},
		{func(l *LLMLoad) { l.URL = "ftp://localhost" }, "want http://host:port"},
	} {
		l := ok
		c.mod(&l)
		_, err := RunLLMLoad(context.Background(), l)
		assert.ErrorContains(t, err, c.msg)
	}
	for _, u := range []string{"http://127.0.0.1:1", "http://localhost:8080", "http://[::1]:8080", "https://127.8.9.10", "http://LOCALHOST"} {
		assert.NoError(t, CheckLoopback(u), u)
	}
	for _, u := range []string{"http://192.168.1.2", "http://[::2]:80", "http://localhost.example.com", "http://0.0.0.0:8080"} {
		assert.Error(t, CheckLoopback(u), u)
	}
	// Allowed, a remote URL is only checked for its form (this one is
	// never dialled: the context is already done).
	l := ok
	l.URL, l.AllowRemote = "http://10.0.0.8:8080", true
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := RunLLMLoad(ctx, l)
	require.NoError(t, err)
	assert.Zero(t, rep.Requests)
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	assert.Zero(t, percentile(d, 50))
	for i := 1; i <= 10; i++ {
		d = append(d, time.Duration(i))
	}
	assert.Equal(t, time.Duration(5), percentile(d, 50))
	assert.Equal(t, time.Duration(9), percentile(d, 90))
	assert.Equal(t, time.Duration(10), percentile(d, 100))
	assert.Equal(t, time.Duration(1), percentile(d, 0))
	assert.Equal(t, time.Duration(7), percentile([]time.Duration{7}, 90))
}
