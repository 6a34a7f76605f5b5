package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/internal/bench"
	"github.com/rocm-go/rocm/internal/worker/workertest"
	"github.com/rocm-go/rocm/tokenizer"
)

// workertest.LogBuffer collects a server's log for assertions.

// testServer is an API on the fake backend behind a loopback server.
type testServer struct {
	*httptest.Server
	api  *Server
	fake *fakeBackend
	log  *workertest.LogBuffer
}

func startServer(t *testing.T, fake *fakeBackend, mod func(*ServerConfig)) *testServer {
	t.Helper()
	lb := &workertest.LogBuffer{}
	cfg := ServerConfig{ModelID: "llama-test", Version: "v0.test", MaxTokensDefault: 6, MaxBodyBytes: 1 << 16,
		Logger: slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if mod != nil {
		mod(&cfg)
	}
	api := NewServer(cfg)
	if fake != nil {
		api.SetReady(fake)
	}
	ts := &testServer{Server: httptest.NewServer(api.Handler()), api: api, fake: fake, log: lb}
	t.Cleanup(ts.Close)
	return ts
}

// do sends a request with a JSON body (a string as is, anything else
// marshalled) and returns the status, headers and body.
func (ts *testServer) do(t *testing.T, method, path string, body any, header ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, data
}

// errorBody is OpenAI's error shape, decoded strictly.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func decodeError(t *testing.T, body []byte) errorBody {
	t.Helper()
	var e errorBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&e), "an error in OpenAI's shape: %s", body)
	require.NotEmpty(t, e.Error.Message, "%s", body)
	require.NotEmpty(t, e.Error.Type, "%s", body)
	return e
}

// sseEvents reads a whole stream back: the JSON objects of its data lines,
// and checks the framing (data lines each followed by a blank line, and
// [DONE] last).
func sseEvents(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	require.True(t, bytes.HasSuffix(body, []byte("data: [DONE]\n\n")), "the stream ends with [DONE]: %q", body)
	var out []map[string]any
	blocks := strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n")
	for i, blk := range blocks {
		require.True(t, strings.HasPrefix(blk, "data: "), "event %d is a data line: %q", i, blk)
		require.NotContains(t, blk, "\n", "one line per event")
		payload := strings.TrimPrefix(blk, "data: ")
		if i == len(blocks)-1 {
			require.Equal(t, "[DONE]", payload)
			break
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(payload), &m), "event %d: %q", i, payload)
		out = append(out, m)
	}
	return out
}

func TestHealthAndModels(t *testing.T) {
	ts := startServer(t, nil, nil)
	code, _, body := ts.do(t, "GET", "/health", nil)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.JSONEq(t, `{"status":"loading","model":"llama-test","implementation":"rocm-go","version":"v0.test"}`, string(body))
	probes := func(ready int, status string) {
		t.Helper()
		code, _, body := ts.do(t, "GET", "/ready", nil)
		assert.Equal(t, ready, code)
		assert.JSONEq(t, `{"status":"`+status+`"}`, string(body))
		code, _, body = ts.do(t, "GET", "/live", nil)
		assert.Equal(t, http.StatusOK, code, "live while it serves")
		assert.JSONEq(t, `{"status":"`+status+`"}`, string(body))
	}
	probes(http.StatusServiceUnavailable, "loading")
	code, _, body = ts.do(t, "POST", "/v1/completions", map[string]any{"prompt": "hi"})
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "model_loading", *decodeError(t, body).Error.Code)
	code, _, body = ts.do(t, "GET", "/v1/models", nil)
	assert.Equal(t, http.StatusOK, code)
	assert.NotContains(t, string(body), "max_model_len", "the context is not known yet")

	fake := newFake()
	ts.api.SetReady(fake)
	code, _, body = ts.do(t, "GET", "/health", nil)
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"status":"ready","model":"llama-test","implementation":"rocm-go","version":"v0.test",
		"device":"hip:0","dtype":"bf16","weights":"BF16","context_length":64,"in_flight":0}`, string(body))
	code, _, _ = ts.do(t, "HEAD", "/health", nil)
	assert.Equal(t, http.StatusOK, code)
	probes(http.StatusOK, "ready")
	code, _, _ = ts.do(t, "POST", "/ready", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, code)
	code, hdr, body := ts.do(t, "POST", "/health", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, code)
	assert.Equal(t, "GET, HEAD", hdr.Get("Allow"))
	decodeError(t, body)

	code, hdr, body = ts.do(t, "GET", "/v1/models", nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "application/json", hdr.Get("Content-Type"))
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID, Object, OwnedBy string
			Created             int64
			MaxModelLen         int `json:"max_model_len"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &list))
	assert.Equal(t, "list", list.Object)
	require.Len(t, list.Data, 1)
	assert.Equal(t, "llama-test", list.Data[0].ID)
	assert.Equal(t, "model", list.Data[0].Object)
	assert.Equal(t, 64, list.Data[0].MaxModelLen)
	assert.InDelta(t, time.Now().Unix(), list.Data[0].Created, 60)

	code, _, body = ts.do(t, "GET", "/v1/nothing", nil)
	assert.Equal(t, http.StatusNotFound, code)
	decodeError(t, body)
	code, _, _ = ts.do(t, "GET", "/v1/completions", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, code)
	code, _, _ = ts.do(t, "DELETE", "/v1/models", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, code)

	ts.api.Gate().Drain()
	code, _, body = ts.do(t, "GET", "/health", nil)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, string(body), `"status":"draining"`)
	probes(http.StatusServiceUnavailable, "draining")
	code, hdr, body = ts.do(t, "POST", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "draining", *decodeError(t, body).Error.Code)
	assert.NotEmpty(t, hdr.Get("Retry-After"))
}

func TestCompletion(t *testing.T) {
	fake := newFake()
	ts := startServer(t, fake, nil)
	code, hdr, body := ts.do(t, "POST", "/v1/completions", map[string]any{
		"model": "llama-test", "prompt": "Once upon a time", "max_tokens": 3, "temperature": 0.7, "top_p": 0.9, "top_k": 40,
		"min_p": 0.05, "repetition_penalty": 1.1, "seed": 42, "stop": []string{"END", "###"}, "n": 1, "user": "tolerated"})
	require.Equal(t, http.StatusOK, code, "%s", body)
	assert.Equal(t, "application/json", hdr.Get("Content-Type"))
	var resp struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Text         string  `json:"text"`
			Index        int     `json:"index"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	require.NoError(t, json.Unmarshal(body, &resp))
	assert.Regexp(t, `^cmpl-[0-9a-f]{24}$`, resp.ID)
	assert.Equal(t, "text_completion", resp.Object)
	assert.InDelta(t, time.Now().Unix(), resp.Created, 60)
	assert.Equal(t, "llama-test", resp.Model)
	require.Len(t, resp.Choices, 1)
	assert.Equal(t, "Hello, world", resp.Choices[0].Text)
	assert.Equal(t, "length", *resp.Choices[0].FinishReason)
	assert.Equal(t, usage{PromptTokens: 5, CompletionTokens: 3, TotalTokens: 8}, resp.Usage)

	reqs := fake.requests()
	require.Len(t, reqs, 1)
	r := reqs[0]
	want, _ := fake.Encode("Once upon a time", true)
	assert.Equal(t, want, r.Prompt, "the prompt with BOS")
	assert.Equal(t, int32(1), r.Prompt[0])
	assert.Equal(t, 3, r.MaxTokens)
	assert.Equal(t, generate.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.9, MinP: 0.05, RepetitionPenalty: 1.1, Seed: 42}, r.Sampling)
	assert.Equal(t, []int32{2, 3}, r.StopTokens, "the model's EOS ids")
	assert.Equal(t, []string{"END", "###"}, r.StopStrings)

	// A stop string ends it with "stop"; the default max_tokens applies.
	code, _, body = ts.do(t, "POST", "/v1/completions", `{"prompt": "a b", "stop": " world"}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.NoError(t, json.Unmarshal(body, &resp))
	assert.Equal(t, "Hello,", resp.Choices[0].Text)
	assert.Equal(t, "stop", *resp.Choices[0].FinishReason)
	assert.Equal(t, 6, fake.requests()[1].MaxTokens, "-max-tokens-default")
	assert.Equal(t, generate.Sampling{Temperature: 1}, fake.requests()[1].Sampling, "OpenAI's defaults")

	// Token ids as the prompt, and in a list of one.
	for _, p := range []string{`[5, 6, 7]`, `[[5, 6, 7]]`, `["x y"]`} {
		code, _, body = ts.do(t, "POST", "/v1/completions", `{"prompt": `+p+`, "max_tokens": 1}`)
		require.Equal(t, http.StatusOK, code, "%s: %s", p, body)
	}
	reqs = fake.requests()
	assert.Equal(t, []int32{5, 6, 7}, reqs[2].Prompt, "ids go as they are")
	assert.Equal(t, []int32{5, 6, 7}, reqs[3].Prompt)
	assert.Len(t, reqs[4].Prompt, 3)

	// The context's room bounds the default max_tokens.
	code, _, body = ts.do(t, "POST", "/v1/completions", map[string]any{"prompt": strings.Repeat("w ", 60)})
	require.Equal(t, http.StatusOK, code, "%s", body)
	assert.Equal(t, 3, fake.requests()[5].MaxTokens, "64 - 61 prompt tokens")
	assert.Eventually(t, func() bool { return fake.active.Load() == 0 }, 5*time.Second, time.Millisecond)
	assert.Contains(t, ts.log.String(), "generation done")
}

func TestSamplingMapping(t *testing.T) {
	fake := newFake()
	ts := startServer(t, fake, nil)
	for _, c := range []struct {
		body string
		want generate.Sampling
	}{
		{`"temperature": 0`, generate.Sampling{}},
		{`"temperature": 2, "top_p": 1, "top_k": -1, "repetition_penalty": 1, "min_p": 0`, generate.Sampling{Temperature: 2}},
		{`"top_k": 0, "temperature": null`, generate.Sampling{Temperature: 1}},
		{`"seed": 0`, generate.Sampling{Temperature: 1, Seed: seedZero}},
		{`"seed": 7`, generate.Sampling{Temperature: 1, Seed: 7}},
		{`"seed": -1`, generate.Sampling{Temperature: 1, Seed: 1<<64 - 1}},
	} {
		code, _, body := ts.do(t, "POST", "/v1/completions", `{"prompt": "hi", "max_tokens": 1, `+c.body+`}`)
		require.Equal(t, http.StatusOK, code, "%s: %s", c.body, body)
		reqs := fake.requests()
		assert.Equal(t, c.want, reqs[len(reqs)-1].Sampling, c.body)
	}
}

func TestChatCompletion(t *testing.T) {
	fake := newFake()
	ts := startServer(t, fake, nil)
	code, _, body := ts.do(t, "POST", "/v1/chat/completions", map[string]any{
		"model": "llama-test", "max_completion_tokens": 4, "max_tokens": 1, "temperature": 0,
		"messages": []any{
			map[string]any{"role": "developer", "content": "Be brief."},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Hi"}, map[string]any{"type": "text", "text": " there"}}},
			map[string]any{"role": "assistant", "content": nil},
			map[string]any{"role": "user", "content": "again", "name": "bob"},
		}})
	require.Equal(t, http.StatusOK, code, "%s", body)
	var resp struct {
		ID, Object, Model string
		Created           int64
		Choices           []struct {
			Index        int
			Message      map[string]any
			FinishReason string `json:"finish_reason"`
		}
		Usage usage
	}
	require.NoError(t, json.Unmarshal(body, &resp))
	assert.Regexp(t, `^chatcmpl-[0-9a-f]{24}$`, resp.ID)
	assert.Equal(t, "chat.completion", resp.Object)
	assert.Equal(t, "llama-test", resp.Model)
	require.Len(t, resp.Choices, 1)
	assert.Equal(t, map[string]any{"role": "assistant", "content": "Hello, world!"}, resp.Choices[0].Message)
	assert.Equal(t, "length", resp.Choices[0].FinishReason)
	tmpl, _ := fake.ApplyChatTemplate([]tokenizer.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi there"}, {Role: "assistant", Content: ""}, {Role: "user", Content: "again"}}, true)
	ids, _ := fake.Encode(tmpl, false)
	r := fake.requests()[0]
	assert.Equal(t, ids, r.Prompt, "the template's text, encoded without adding BOS again")
	assert.Equal(t, 4, r.MaxTokens, "max_completion_tokens wins over max_tokens")
	assert.Equal(t, generate.Sampling{}, r.Sampling, "greedy")
	assert.Equal(t, usage{PromptTokens: len(ids), CompletionTokens: 4, TotalTokens: len(ids) + 4}, resp.Usage)
}

func TestStreams(t *testing.T) {
	fake := newFake()
	ts := startServer(t, fake, nil)
	code, hdr, body := ts.do(t, "POST", "/v1/chat/completions",
		`{"stream": true, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	assert.Equal(t, "text/event-stream", hdr.Get("Content-Type"))
	assert.Equal(t, "no-cache", hdr.Get("Cache-Control"))
	evs := sseEvents(t, body)
	require.Len(t, evs, 1+5+1, "role, five tokens, finish")
	var text strings.Builder
	id := evs[0]["id"].(string)
	assert.Regexp(t, `^chatcmpl-`, id)
	for i, ev := range evs {
		assert.Equal(t, "chat.completion.chunk", ev["object"])
		assert.Equal(t, id, ev["id"], "one id for the stream")
		assert.Equal(t, "llama-test", ev["model"])
		assert.NotZero(t, ev["created"])
		assert.Regexp(t, `^fp_[0-9a-f]{12}$`, ev["system_fingerprint"])
		ch := ev["choices"].([]any)[0].(map[string]any)
		delta := ch["delta"].(map[string]any)
		switch i {
		case 0:
			assert.Equal(t, map[string]any{"role": "assistant", "content": ""}, delta)
			assert.Nil(t, ch["finish_reason"])
		case len(evs) - 1:
			assert.Empty(t, delta)
			assert.Equal(t, "length", ch["finish_reason"])
			assert.NotContains(t, ev, "usage", "no usage without stream_options.include_usage")
		default:
			assert.Nil(t, ch["finish_reason"])
			assert.NotContains(t, ev, "usage", "usage only at the end")
			text.WriteString(delta["content"].(string))
		}
	}
	assert.Equal(t, "Hello, world!Hello", text.String())

	// Completions: text chunks; include_usage adds OpenAI's usage chunk.
	code, _, body = ts.do(t, "POST", "/v1/completions",
		`{"stream": true, "max_tokens": 3, "prompt": "x", "stream_options": {"include_usage": true}}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	evs = sseEvents(t, body)
	require.Len(t, evs, 3+1+1)
	text.Reset()
	for _, ev := range evs[:3] {
		assert.Equal(t, "text_completion", ev["object"])
		assert.Regexp(t, `^cmpl-`, ev["id"])
		text.WriteString(ev["choices"].([]any)[0].(map[string]any)["text"].(string))
	}
	assert.Equal(t, "Hello, world", text.String())
	assert.Equal(t, "length", evs[3]["choices"].([]any)[0].(map[string]any)["finish_reason"])
	assert.NotContains(t, evs[3], "usage", "the usage comes once")
	assert.Empty(t, evs[4]["choices"])
	assert.Equal(t, map[string]any{"prompt_tokens": 2.0, "completion_tokens": 3.0, "total_tokens": 5.0}, evs[4]["usage"])
}

func TestBackendFailures(t *testing.T) {
	fake := newFake()
	fake.failAt = 2
	ts := startServer(t, fake, nil)
	code, _, body := ts.do(t, "POST", "/v1/completions", `{"prompt": "x", "max_tokens": 5}`)
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Contains(t, decodeError(t, body).Error.Message, "device lost")
	code, _, body = ts.do(t, "POST", "/v1/completions", `{"prompt": "x", "max_tokens": 5, "stream": true}`)
	require.Equal(t, http.StatusOK, code, "the stream had begun")
	evs := sseEvents(t, body)
	require.Len(t, evs, 3, "two tokens, then the error")
	assert.Contains(t, evs[2]["error"].(map[string]any)["message"], "device lost")
	assert.Contains(t, ts.log.String(), "generation failed")

	// A closed engine is 503; a panic is a logged 500 and the worker goes on.
	fake.failAt = 0
	fake.Close()
	code, hdr, body := ts.do(t, "POST", "/v1/completions", `{"prompt": "x"}`)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "unavailable", *decodeError(t, body).Error.Code)
	assert.Equal(t, "5", hdr.Get("Retry-After"))
	code, _, body = ts.do(t, "POST", "/v1/completions", `{"prompt": "panic"}`)
	assert.Equal(t, http.StatusInternalServerError, code)
	decodeError(t, body)
	assert.Contains(t, ts.log.String(), "handler panicked")
	assert.Contains(t, ts.log.String(), "the fake's tokenizer panics")
	code, _, _ = ts.do(t, "GET", "/health", nil)
	assert.Equal(t, http.StatusOK, code)
}

func TestBadRequests(t *testing.T) {
	fake := newFake()
	ts := startServer(t, fake, nil)
	chat := func(extra string) string {
		return `{"messages": [{"role": "user", "content": "hi"}]` + extra + `}`
	}
	long := strings.Repeat("w ", 64)
	for _, c := range []struct {
		name, path, body string
		status           int
		param, code      string
		msg              string
	}{
		{"malformed", "/v1/completions", `{"prompt": "x"`, 400, "", "", "malformed JSON"},
		{"syntax", "/v1/completions", `{"prompt": x}`, 400, "", "", "malformed JSON at byte"},
		{"not an object", "/v1/completions", `[1, 2]`, 400, "", "", "must be a JSON object"},
		{"two values", "/v1/completions", `{"prompt": "x"} {}`, 400, "", "", "more than one value"},
		{"empty body", "/v1/completions", ``, 400, "", "", "empty"},
		{"too large", "/v1/completions", `{"prompt": "` + strings.Repeat("a", 1<<16) + `"}`, 413, "", "", "larger than 65536 bytes"},
		{"wrong type: temperature", "/v1/completions", `{"prompt": "x", "temperature": "hot"}`, 400, "temperature", "", "want a number, not a JSON string"},
		{"wrong type: max_tokens", "/v1/completions", `{"prompt": "x", "max_tokens": 1.5}`, 400, "max_tokens", "", "want an integer"},
		{"wrong type: stream", "/v1/chat/completions", chat(`, "stream": "yes"`), 400, "stream", "", "want a boolean"},
		{"no prompt", "/v1/completions", `{"max_tokens": 3}`, 400, "prompt", "", "missing"},
		{"empty prompt", "/v1/completions", `{"prompt": ""}`, 400, "prompt", "", "empty"},
		{"blank prompt", "/v1/completions", `{"prompt": "no-tokens"}`, 400, "prompt", "", "empty once tokenized"},
		{"empty ids", "/v1/completions", `{"prompt": []}`, 400, "prompt", "", "empty"},
		{"two prompts", "/v1/completions", `{"prompt": ["a", "b"]}`, 400, "prompt", "", "one prompt per request"},
		{"negative id", "/v1/completions", `{"prompt": [1, -1]}`, 400, "prompt", "", "out of range"},
		{"id beyond vocab", "/v1/completions", `{"prompt": [1, 1000]}`, 400, "prompt", "", "vocabulary size 1000"},
		{"prompt object", "/v1/completions", `{"prompt": {"a": 1}}`, 400, "prompt", "", "want a string"},
		{"encode error", "/v1/completions", `{"prompt": "encode-error"}`, 400, "prompt", "", "cannot encode"},
		{"prompt beyond context", "/v1/completions", `{"prompt": "` + long + `"}`, 400, "prompt", "context_length_exceeded", "context is 64"},
		{"max_tokens 0", "/v1/completions", `{"prompt": "x", "max_tokens": 0}`, 400, "max_tokens", "", "at least 1"},
		{"max_tokens -1", "/v1/completions", `{"prompt": "x", "max_tokens": -1}`, 400, "max_tokens", "", "at least 1"},
		{"max_tokens beyond", "/v1/completions", `{"prompt": "x", "max_tokens": 63}`, 400, "max_tokens", "context_length_exceeded", "at most 62"},
		{"max_completion_tokens 0", "/v1/chat/completions", chat(`, "max_completion_tokens": 0`), 400, "max_completion_tokens", "", "at least 1"},
		{"unknown model", "/v1/completions", `{"prompt": "x", "model": "gpt-4"}`, 404, "model", "model_not_found", `"gpt-4" is not served here`},
		{"temperature < 0", "/v1/completions", `{"prompt": "x", "temperature": -0.5}`, 400, "temperature", "", "want 0"},
		{"temperature > 2", "/v1/completions", `{"prompt": "x", "temperature": 2.5}`, 400, "temperature", "", "want 0"},
		{"top_p 0", "/v1/completions", `{"prompt": "x", "top_p": 0}`, 400, "top_p", "", "more than 0"},
		{"top_p > 1", "/v1/completions", `{"prompt": "x", "top_p": 1.5}`, 400, "top_p", "", "at most 1"},
		{"top_k -2", "/v1/completions", `{"prompt": "x", "top_k": -2}`, 400, "top_k", "", "top_k -2"},
		{"min_p > 1", "/v1/completions", `{"prompt": "x", "min_p": 2}`, 400, "min_p", "", "min_p 2"},
		{"repetition_penalty 0", "/v1/completions", `{"prompt": "x", "repetition_penalty": 0}`, 400, "repetition_penalty", "", "more than 0"},
		{"n 0", "/v1/completions", `{"prompt": "x", "n": 0}`, 400, "n", "", "want 1 to 16"},
		{"n 17", "/v1/chat/completions", chat(`, "n": 17`), 400, "n", "", "want 1 to 16"},
		{"best_of", "/v1/completions", `{"prompt": "x", "best_of": 3}`, 400, "best_of", "", "not supported"},
		{"best_of beyond n", "/v1/completions", `{"prompt": "x", "best_of": 3, "n": 2}`, 400, "best_of", "", "ask for them with n"},
		{"stop number", "/v1/completions", `{"prompt": "x", "stop": 5}`, 400, "stop", "", "string or a list"},
		{"stop empty", "/v1/completions", `{"prompt": "x", "stop": ""}`, 400, "stop", "", "never matches"},
		{"stop too many", "/v1/completions", `{"prompt": "x", "stop": [` + strings.Repeat(`"a",`, 16) + `"a"]}`, 400, "stop", "", "at most 16"},
		{"stop too long", "/v1/completions", `{"prompt": "x", "stop": "` + strings.Repeat("s", 513) + `"}`, 400, "stop", "", "at most 512"},
		{"presence_penalty > 2", "/v1/completions", `{"prompt": "x", "presence_penalty": 2.5}`, 400, "presence_penalty", "", "want -2 to 2"},
		{"frequency_penalty < -2", "/v1/chat/completions", chat(`, "frequency_penalty": -3`), 400, "frequency_penalty", "", "want -2 to 2"},
		{"logit_bias list", "/v1/completions", `{"prompt": "x", "logit_bias": [1, 2]}`, 400, "logit_bias", "", "object of token ids"},
		{"logit_bias key", "/v1/completions", `{"prompt": "x", "logit_bias": {"hello": 1}}`, 400, "logit_bias", "", `"hello" is not a token id`},
		{"logit_bias > 100", "/v1/completions", `{"prompt": "x", "logit_bias": {"5": 101}}`, 400, "logit_bias", "", "want -100 to 100"},
		{"logit_bias beyond vocab", "/v1/chat/completions", chat(`, "logit_bias": {"1000": -100}`), 400, "logit_bias", "", "token id 1000: want 0 to 999"},
		{"chat logprobs number", "/v1/chat/completions", chat(`, "logprobs": 3`), 400, "logprobs", "", "true or false"},
		{"top_logprobs without logprobs", "/v1/chat/completions", chat(`, "top_logprobs": 2`), 400, "top_logprobs", "", "needs logprobs: true"},
		{"top_logprobs 21", "/v1/chat/completions", chat(`, "logprobs": true, "top_logprobs": 21`), 400, "top_logprobs", "", "want 0 to 20"},
		{"completion logprobs 21", "/v1/completions", `{"prompt": "x", "logprobs": 21}`, 400, "logprobs", "", "0 to 20"},
		{"completion logprobs true", "/v1/completions", `{"prompt": "x", "logprobs": true}`, 400, "logprobs", "", "0 to 20"},
		{"completion top_logprobs", "/v1/completions", `{"prompt": "x", "top_logprobs": 2}`, 400, "top_logprobs", "", "chat's"},
		{"echo", "/v1/completions", `{"prompt": "x", "echo": true}`, 400, "echo", "", "not supported"},
		{"tools", "/v1/chat/completions", chat(`, "tools": [{"type": "function", "function": {"name": "f"}}]`), 400, "tools", "", "no chat template to render tools"},
		{"response_format xml", "/v1/chat/completions", chat(`, "response_format": {"type": "xml"}`), 400, "response_format", "", "json_schema"},
		{"json_schema missing", "/v1/chat/completions", chat(`, "response_format": {"type": "json_schema"}`), 400, "response_format", "", "json_schema is missing"},
		{"json_schema pattern", "/v1/chat/completions", chat(`, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}}}`), 400, "response_format", "", "pattern"},
		{"json_schema minimum", "/v1/completions", `{"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer", "minimum": 0}}}}`, 400, "response_format", "", "minimum"},
		{"json_schema bad ref", "/v1/completions", `{"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "#/$defs/no"}}}}`, 400, "response_format", "", "not found"},
		{"no messages", "/v1/chat/completions", `{"model": "llama-test"}`, 400, "messages", "", "missing"},
		{"empty messages", "/v1/chat/completions", `{"messages": []}`, 400, "messages", "", "empty"},
		{"messages object", "/v1/chat/completions", `{"messages": {"role": "user"}}`, 400, "messages", "", "want a list"},
		{"unknown role", "/v1/chat/completions", `{"messages": [{"role": "robot", "content": "x"}]}`, 400, "messages[0].role", "", "robot"},
		{"no role", "/v1/chat/completions", `{"messages": [{"content": "x"}]}`, 400, "messages[0].role", "", "missing"},
		{"content number", "/v1/chat/completions", `{"messages": [{"role": "user", "content": 5}]}`, 400, "messages[0].content", "", "text parts"},
		{"image part", "/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}`, 400, "messages[0].content", "", "image_url"},
		{"template refuses", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "bad-template"}]}`, 400, "messages", "", "roles must alternate"},
		{"chat beyond context", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "` + long + `"}]}`, 400, "prompt", "context_length_exceeded", "shorten it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, body := ts.do(t, "POST", c.path, c.body)
			assert.Equal(t, c.status, code, "%s", body)
			e := decodeError(t, body)
			assert.Contains(t, e.Error.Message, c.msg)
			assert.Equal(t, "invalid_request_error", e.Error.Type)
			if c.param == "" {
				assert.Nil(t, e.Error.Param)
			} else if assert.NotNil(t, e.Error.Param) {
				assert.Equal(t, c.param, *e.Error.Param)
			}
			if c.code != "" && assert.NotNil(t, e.Error.Code) {
				assert.Equal(t, c.code, *e.Error.Code)
			}
		})
	}
	assert.Empty(t, fake.requests(), "no bad request reached the engine")

	// Unknown fields and zero-valued unsupported ones are tolerated.
	code, _, body := ts.do(t, "POST", "/v1/chat/completions", chat(`, "frobnicate": {"x": [1]}, "presence_penalty": 0, "logprobs": false,
		"tools": [], "response_format": {"type": "text"}, "logit_bias": {}, "n": 1, "model": ""`))
	assert.Equal(t, http.StatusOK, code, "%s", body)
}

func TestAuth(t *testing.T) {
	fake := newFake()
	ts := startServer(t, fake, func(c *ServerConfig) { c.APIToken = "s3cret-token" })
	for _, path := range []string{"/health", "/ready", "/live", "/metrics"} {
		code, _, _ := ts.do(t, "GET", path, nil)
		assert.Equal(t, http.StatusOK, code, "GET %s wants no token", path)
	}
	for _, h := range []string{"", "s3cret-token", "Bearer", "Bearer ", "Bearer s3cret-toke", "Bearer s3cret-token-", "Basic s3cret-token", "Bearer S3CRET-TOKEN"} {
		for _, path := range []string{"/v1/models", "/v1/completions", "/v1/chat/completions", "/nothing"} {
			method := "POST"
			if path == "/v1/models" {
				method = "GET"
			}
			code, hdr, body := ts.do(t, method, path, `{"prompt": "x"}`, "Authorization", h)
			assert.Equal(t, http.StatusUnauthorized, code, "%q on %s", h, path)
			assert.Equal(t, "invalid_api_key", *decodeError(t, body).Error.Code)
			assert.Contains(t, hdr.Get("WWW-Authenticate"), "Bearer")
		}
	}
	code, _, _ := ts.do(t, "POST", "/health", nil)
	assert.Equal(t, http.StatusUnauthorized, code, "only GET and HEAD of /health are open")
	for _, h := range []string{"Bearer s3cret-token", "bearer s3cret-token", "Bearer  s3cret-token "} {
		code, _, body := ts.do(t, "GET", "/v1/models", nil, "Authorization", h)
		assert.Equal(t, http.StatusOK, code, "%q: %s", h, body)
	}
	code, _, body := ts.do(t, "POST", "/v1/completions", `{"prompt": "x", "max_tokens": 1}`, "Authorization", "Bearer s3cret-token")
	assert.Equal(t, http.StatusOK, code, "%s", body)
}

func TestQueueFull(t *testing.T) {
	fake := newFake()
	fake.slots = make(chan struct{}, 1)
	fake.delay = 20 * time.Millisecond
	ts := startServer(t, fake, nil)
	done := make(chan int)
	go func() {
		resp, err := ts.Client().Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "x", "max_tokens": 20}`))
		if err != nil {
			done <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-fake.started
	require.Eventually(t, func() bool { w, r := ts.api.load.Counts(); return w == 0 && r == 1 }, 5*time.Second, time.Millisecond, "the first is running")
	code, hdr, body := ts.do(t, "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "stream": true}`)
	assert.Equal(t, http.StatusTooManyRequests, code)
	assert.Equal(t, "queue_full", *decodeError(t, body).Error.Code)
	assert.Equal(t, "10", hdr.Get("Retry-After"), "one running, none finished yet: unknownDuration")
	assert.Equal(t, http.StatusOK, <-done)
	code, _, _ = ts.do(t, "POST", "/v1/completions", `{"prompt": "x", "max_tokens": 1}`)
	assert.Equal(t, http.StatusOK, code, "the slot is free again")
}

// waitGoroutines waits until no more goroutines run than before (the
// server's and the client's connections closed).
func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

func TestClientGoneCancels(t *testing.T) {
	before := runtime.NumGoroutine()
	fake := newFake()
	fake.delay = 5 * time.Millisecond
	ts := startServer(t, fake, nil)
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			cancelledBefore := fake.cancelled.Load()
			ctx, cancel := context.WithCancel(context.Background())
			body := fmt.Sprintf(`{"messages": [{"role": "user", "content": "x"}], "max_tokens": 50, "stream": %v}`, stream)
			req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions", strings.NewReader(body))
			errc := make(chan error, 1)
			go func() {
				resp, err := ts.Client().Do(req)
				if err == nil {
					// Read the first event, then go away.
					_, err = bufio.NewReader(resp.Body).ReadString('\n')
					cancel()
					resp.Body.Close()
				}
				errc <- err
			}()
			<-fake.started
			if !stream {
				time.Sleep(20 * time.Millisecond)
				cancel()
			}
			err := <-errc
			if stream {
				require.NoError(t, err)
			}
			assert.Eventually(t, func() bool { return fake.cancelled.Load() == cancelledBefore+1 }, 5*time.Second, time.Millisecond,
				"the backend saw the cancellation")
			assert.Eventually(t, func() bool { return fake.active.Load() == 0 && ts.api.Gate().InFlight() == 0 }, 5*time.Second, time.Millisecond)
		})
	}
	assert.Contains(t, ts.log.String(), "request cancelled")
	ts.Close()
	ts.Client().CloseIdleConnections()
	waitGoroutines(t, before)
}

// TestSlowReaderCancels: a client that stops reading a stream fails it at
// the write deadline, and its generation is cancelled.
func TestSlowReaderCancels(t *testing.T) {
	fake := newFake()
	fake.pieces = []string{strings.Repeat("z", 64<<10)}
	ts := startServer(t, fake, func(c *ServerConfig) { c.WriteTimeout = 200 * time.Millisecond })
	fake.ctxLen = 1 << 20
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	body := `{"prompt": "x", "max_tokens": 100000, "stream": true}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// Never read: the socket buffers fill, a write blocks, its deadline ends it.
	assert.Eventually(t, func() bool { return fake.cancelled.Load() == 1 && fake.active.Load() == 0 }, 20*time.Second, 10*time.Millisecond)
	assert.Eventually(t, func() bool { return ts.api.Gate().InFlight() == 0 }, 5*time.Second, time.Millisecond)
	assert.Contains(t, ts.log.String(), "request cancelled")
}

// TestConcurrentRequests runs many clients at once under -race.
func TestConcurrentRequests(t *testing.T) {
	fake := newFake()
	fake.delay = time.Millisecond
	ts := startServer(t, fake, nil)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"prompt": "p %d", "max_tokens": 8, "stream": %v}`, i, i%2 == 0)
			resp, err := ts.Client().Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(body))
			if !assert.NoError(t, err) {
				return
			}
			defer resp.Body.Close()
			io.Copy(io.Discard, resp.Body)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
		}()
	}
	wg.Wait()
	assert.Len(t, fake.requests(), 16)
}

// TestUnderLoad runs bench's load generator against the worker: it parses
// the worker's streams, and the worker serves concurrent clients.
func TestUnderLoad(t *testing.T) {
	fake := newFake()
	fake.delay = time.Millisecond
	ts := startServer(t, fake, func(c *ServerConfig) { c.APIToken = "tok" })
	rep, err := bench.RunLLMLoad(context.Background(), bench.LLMLoad{URL: ts.URL, Model: "llama-test", Token: "tok", Prompt: "Hello there",
		MaxTokens: 12, Clients: 8, Requests: 32, Duration: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, 32, rep.Completed, "%v", rep.ErrorKinds)
	assert.Equal(t, 32*12, rep.Tokens)
	for _, s := range rep.Samples {
		assert.Equal(t, 12, s.Chunks)
		assert.Equal(t, "length", s.Finish)
	}
	assert.Greater(t, rep.TTFTP50, time.Duration(0))
	assert.Eventually(t, func() bool { return fake.active.Load() == 0 }, 5*time.Second, time.Millisecond)
}

// TestRequestTimeout: a generation past -request-timeout is cut, and the
// client is told so.
func TestRequestTimeout(t *testing.T) {
	fake := newFake()
	fake.ctxLen = 1 << 20
	fake.delay = 10 * time.Millisecond
	ts := startServer(t, fake, func(c *ServerConfig) { c.RequestTimeout = 200 * time.Millisecond })
	start := time.Now()
	code, _, body := ts.do(t, "POST", "/v1/completions", `{"prompt": "x", "max_tokens": 100000, "stream": true}`)
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	require.Equal(t, http.StatusOK, code)
	evs := sseEvents(t, body)
	n := len(evs)
	require.Greater(t, n, 2, "tokens, then the error and the final chunk")
	assert.Equal(t, "request_timeout", evs[n-2]["error"].(map[string]any)["code"])
	assert.Equal(t, "timeout", evs[n-1]["choices"].([]any)[0].(map[string]any)["finish_reason"])
	assert.NotContains(t, evs[n-1], "usage", "no usage without stream_options.include_usage")

	code, _, body = ts.do(t, "POST", "/v1/completions", `{"prompt": "x", "max_tokens": 100000}`)
	assert.Equal(t, http.StatusGatewayTimeout, code)
	e := decodeError(t, body)
	assert.Equal(t, "request_timeout", *e.Error.Code)
	assert.Contains(t, e.Error.Message, "-request-timeout")
	assert.Equal(t, int32(2), fake.cancelled.Load())
	assert.Zero(t, ts.api.Gate().Cut(), "a deadline is no shutdown")
	assert.Contains(t, ts.log.String(), "finish_reason=timeout")
	m := ts.scrape(t)
	assert.Equal(t, 2.0, m[`rocm_go:request_success_total{finished_reason="timeout"}`])
	assert.Equal(t, 1.0, m[`rocm_go:http_requests_total{endpoint="/v1/completions",status="504"}`])
}

// TestQueueTimeout: a request that waits past -queue-timeout for a slot
// gets a 503 whose Retry-After comes from the queue, and never starts.
func TestQueueTimeout(t *testing.T) {
	fake := newFake()
	fake.ctxLen = 1 << 20
	fake.delay = 10 * time.Millisecond
	fake.running = make(chan struct{}, 1)
	ts := startServer(t, fake, func(c *ServerConfig) { c.QueueTimeout = 200 * time.Millisecond })
	for range 3 { // recent generations took 4 s each
		ts.api.load.Submitted()
		ts.api.load.Started()
		ts.api.load.Ended(true, 4*time.Second)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/completions", strings.NewReader(`{"prompt": "x", "max_tokens": 100000, "stream": true}`))
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, err = bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err, "the first holds the one slot")

	for _, stream := range []bool{true, false} {
		start := time.Now()
		code, hdr, body := ts.do(t, "POST", "/v1/chat/completions",
			fmt.Sprintf(`{"messages": [{"role": "user", "content": "x"}], "stream": %v}`, stream))
		assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
		assert.Equal(t, http.StatusServiceUnavailable, code, "stream %v: a status, not a stream", stream)
		e := decodeError(t, body)
		assert.Equal(t, "queue_timeout", *e.Error.Code)
		assert.Contains(t, e.Error.Message, "-queue-timeout")
		assert.Equal(t, "4", hdr.Get("Retry-After"), "none waiting, one running, 4 s each")
	}
	assert.Len(t, fake.requests(), 3, "the two that waited were submitted")
	assert.Equal(t, int32(2), fake.cancelled.Load(), "and cancelled before they began")
	w, r := ts.api.load.Counts()
	assert.Equal(t, [2]int{0, 1}, [2]int{w, r})
	assert.Equal(t, 3, ts.api.load.Recorded(), "a request that never began is no duration")
	assert.Contains(t, ts.log.String(), "waited too long for a slot")
	m := ts.scrape(t)
	assert.Equal(t, 2.0, m[`rocm_go:request_success_total{finished_reason="timeout"}`])
	assert.Equal(t, 1.0, m["rocm_go:time_to_first_token_seconds_count"], "the first has its first token; the two that waited had none")
	assert.Equal(t, 1.0, m["rocm_go:num_requests_running"])
}

// TestReadTimeout: a body that stops arriving gets a 408 at -read-timeout
// and its connection closed; a stream that outlasts it is not cut.
func TestReadTimeout(t *testing.T) {
	fake := newFake()
	fake.delay = 15 * time.Millisecond
	ts := startServer(t, fake, func(c *ServerConfig) { c.ReadTimeout = 150 * time.Millisecond })
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\": ")
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	rd := bufio.NewReader(conn)
	resp, err := http.ReadResponse(rd, nil)
	require.NoError(t, err, "an answer, not a connection held")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	assert.Equal(t, "request_timeout", *decodeError(t, body).Error.Code)
	_, err = rd.ReadByte()
	assert.ErrorIs(t, err, io.EOF, "the connection is closed")

	code, _, body := ts.do(t, "POST", "/v1/completions", `{"prompt": "x", "max_tokens": 30, "stream": true}`)
	require.Equal(t, http.StatusOK, code)
	evs := sseEvents(t, body)
	require.Len(t, evs, 30+1, "every token of a stream longer than the read timeout")
	assert.Equal(t, "length", evs[30]["choices"].([]any)[0].(map[string]any)["finish_reason"])
}
