package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/mkmodel"
	"github.com/rocm-go/rocm/internal/testenv"
)

// strict decodes body into v, refusing fields v does not have: the
// response is exactly the shape of the OpenAI client's type it mirrors.
func strict(t *testing.T, body []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), "%s", body)
}

// The OpenAI Python client's types, as far as the worker fills them.
type (
	oaUsage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
		Details          *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
	oaTopLogprob struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
	}
	oaTokenLogprob struct {
		Token       string         `json:"token"`
		Logprob     float64        `json:"logprob"`
		Bytes       []int          `json:"bytes"`
		TopLogprobs []oaTopLogprob `json:"top_logprobs"`
	}
	oaChatChoice struct {
		Index   int `json:"index"`
		Message *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Logprobs *struct {
			Content []oaTokenLogprob `json:"content"`
		} `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
	}
	oaChat struct {
		ID                string         `json:"id"`
		Object            string         `json:"object"`
		Created           int64          `json:"created"`
		Model             string         `json:"model"`
		SystemFingerprint string         `json:"system_fingerprint"`
		Choices           []oaChatChoice `json:"choices"`
		Usage             *oaUsage       `json:"usage"`
	}
	oaCompletionChoice struct {
		Text     string `json:"text"`
		Index    int    `json:"index"`
		Logprobs *struct {
			Tokens        []string             `json:"tokens"`
			TokenLogprobs []float64            `json:"token_logprobs"`
			TopLogprobs   []map[string]float64 `json:"top_logprobs"`
			TextOffset    []int                `json:"text_offset"`
		} `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
	}
	oaCompletion struct {
		ID                string               `json:"id"`
		Object            string               `json:"object"`
		Created           int64                `json:"created"`
		Model             string               `json:"model"`
		SystemFingerprint string               `json:"system_fingerprint"`
		Choices           []oaCompletionChoice `json:"choices"`
		Usage             *oaUsage             `json:"usage"`
	}
)

// streamOf decodes a stream's chunks strictly into T.
func streamOf[T any](t *testing.T, body []byte) []T {
	t.Helper()
	var out []T
	for _, m := range sseEvents(t, body) {
		b, err := json.Marshal(m)
		require.NoError(t, err)
		var v T
		strict(t, b, &v)
		out = append(out, v)
	}
	return out
}

func bytesOf(s string) []int {
	out := make([]int, len(s))
	for i := range len(s) {
		out[i] = int(s[i])
	}
	return out
}

func TestSamplingFieldsReachTheEngine(t *testing.T) {
	fake := newFake()
	ts := startServer(t, fake, nil)
	for _, c := range []struct {
		path, body   string
		want         generate.Sampling
		lp           bool
		top, choices int
	}{
		{"/v1/completions", `"presence_penalty": 1.5, "frequency_penalty": -0.5`, generate.Sampling{Temperature: 1, PresencePenalty: 1.5, FrequencyPenalty: -0.5}, false, 0, 1},
		{"/v1/completions", `"logit_bias": {"5": -100, "999": 100, "17": 0.5}`, generate.Sampling{Temperature: 1, LogitBias: map[int32]float32{5: -100, 999: 100, 17: 0.5}}, false, 0, 1},
		{"/v1/completions", `"logit_bias": {}, "logprobs": 0`, generate.Sampling{Temperature: 1}, true, 0, 1},
		{"/v1/completions", `"logprobs": 5, "n": 2, "best_of": 2`, generate.Sampling{Temperature: 1}, true, 5, 2},
		{"/v1/chat/completions", `"logprobs": true, "top_logprobs": 20`, generate.Sampling{Temperature: 1}, true, 20, 1},
		{"/v1/chat/completions", `"logprobs": false, "top_logprobs": 0, "n": 3, "seed": 40`, generate.Sampling{Temperature: 1, Seed: 40}, false, 0, 3},
	} {
		body := `{"prompt": "hi", "max_tokens": 1, ` + c.body + `}`
		if strings.Contains(c.path, "chat") {
			body = `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, ` + c.body + `}`
		}
		before := len(fake.requests())
		code, _, resp := ts.do(t, "POST", c.path, body)
		require.Equal(t, http.StatusOK, code, "%s: %s", c.body, resp)
		reqs := fake.requests()[before:]
		require.Len(t, reqs, c.choices, "%s: a sequence a choice", c.body)
		for i, r := range reqs {
			want := c.want
			if want.Seed != 0 {
				want.Seed += uint64(i)
			}
			assert.Equal(t, want, r.Sampling, c.body)
			assert.Equal(t, c.lp, r.LogProbs, c.body)
			assert.Equal(t, c.top, r.TopLogProbs, c.body)
			assert.Equal(t, reqs[0].Prompt, r.Prompt, "the choices share the prompt's tokens")
		}
	}
}

// TestLogprobsShapes checks both formats, whole and streamed, against the
// fake's log-probabilities (fakeLogProb: the nth token at -n/10, the top
// ones "<100>", "<101>", ... at -0.01, -1.01, ...).
func TestLogprobsShapes(t *testing.T) {
	fake := newFake()
	ts := startServer(t, fake, nil)
	pieces := []string{"Hello", ",", " world", "!", "Hello"}

	code, _, body := ts.do(t, "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "logprobs": true, "top_logprobs": 2}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var chat oaChat
	strict(t, body, &chat)
	require.Len(t, chat.Choices, 1)
	lp := chat.Choices[0].Logprobs
	require.NotNil(t, lp)
	require.Len(t, lp.Content, 5)
	for i, c := range lp.Content {
		assert.Equal(t, pieces[i], c.Token)
		assert.InDelta(t, -float64(i+1)/10, c.Logprob, 1e-6)
		assert.Equal(t, bytesOf(pieces[i]), c.Bytes)
		assert.Equal(t, []oaTopLogprob{{"<100>", -0.01, bytesOf("<100>")}, {"<101>", -1.01, bytesOf("<101>")}}, roundTop(c.TopLogprobs))
	}
	// Without logprobs the field is null, as OpenAI sends it.
	code, _, body = ts.do(t, "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, string(body), `"logprobs":null`)

	code, _, body = ts.do(t, "POST", "/v1/completions", `{"prompt": "hi", "max_tokens": 5, "logprobs": 1}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var cmpl oaCompletion
	strict(t, body, &cmpl)
	clp := cmpl.Choices[0].Logprobs
	require.NotNil(t, clp)
	assert.Equal(t, pieces, clp.Tokens)
	assert.Equal(t, []int{0, 5, 6, 12, 13}, clp.TextOffset, "offsets into the choice's text")
	for i := range pieces {
		assert.InDelta(t, -float64(i+1)/10, clp.TokenLogprobs[i], 1e-6)
		top := clp.TopLogprobs[i]
		assert.Len(t, top, 2, "the top one and the drawn token")
		assert.InDelta(t, -0.01, top["<100>"], 1e-6)
		assert.InDelta(t, clp.TokenLogprobs[i], top[pieces[i]], 1e-6)
	}
	assert.Equal(t, "Hello, world!Hello", cmpl.Choices[0].Text)

	// Streamed: each chunk carries its tokens' log-probabilities, and the
	// completions' offsets run on across chunks.
	code, _, body = ts.do(t, "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "logprobs": true, "stream": true}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	chunks := streamOf[oaChat](t, body)
	require.Len(t, chunks, 1+4+1, "role, four tokens, finish")
	assert.Nil(t, chunks[0].Choices[0].Logprobs, "the role chunk has no tokens")
	for i, c := range chunks[1:5] {
		require.NotNil(t, c.Choices[0].Logprobs, "chunk %d", i)
		content := c.Choices[0].Logprobs.Content
		require.Len(t, content, 1)
		assert.Equal(t, pieces[i], content[0].Token)
		assert.Equal(t, pieces[i], *c.Choices[0].Delta.Content)
		assert.Empty(t, content[0].TopLogprobs)
		assert.NotNil(t, content[0].TopLogprobs, "a list, empty")
	}
	code, _, body = ts.do(t, "POST", "/v1/completions", `{"prompt": "hi", "max_tokens": 4, "logprobs": 0, "stream": true}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	cchunks := streamOf[oaCompletion](t, body)
	require.Len(t, cchunks, 4+1)
	var offsets []int
	for _, c := range cchunks[:4] {
		offsets = append(offsets, c.Choices[0].Logprobs.TextOffset...)
		assert.Len(t, c.Choices[0].Logprobs.TopLogprobs[0], 1, "logprobs 0: the drawn token alone")
	}
	assert.Equal(t, []int{0, 5, 6, 12}, offsets)
}

// roundTop rounds log-probabilities to float32's precision, as the engine
// computes them.
func roundTop(ts []oaTopLogprob) []oaTopLogprob {
	for i := range ts {
		ts[i].Logprob = float64(float32(ts[i].Logprob))
	}
	for i := range ts {
		ts[i].Logprob = math.Round(ts[i].Logprob*1e6) / 1e6
	}
	return ts
}

func TestChoices(t *testing.T) {
	fake := newFake()
	ts := startServer(t, fake, nil)
	code, _, body := ts.do(t, "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "n": 3, "seed": 9}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var chat oaChat
	strict(t, body, &chat)
	require.Len(t, chat.Choices, 3)
	for i, c := range chat.Choices {
		assert.Equal(t, i, c.Index)
		assert.Equal(t, "Hello, world", c.Message.Content)
		assert.Equal(t, "length", *c.FinishReason)
	}
	reqs := fake.requests()
	require.Len(t, reqs, 3)
	assert.Equal(t, []uint64{9, 10, 11}, []uint64{reqs[0].Sampling.Seed, reqs[1].Sampling.Seed, reqs[2].Sampling.Seed}, "seed + i")
	assert.Equal(t, oaUsage{PromptTokens: len(reqs[0].Prompt), CompletionTokens: 9, TotalTokens: len(reqs[0].Prompt) + 9}, *chat.Usage,
		"the prompt once, the completions summed")

	// Streamed: the choices' chunks interleave, each with its index; every
	// choice opens and finishes; the usage comes once, last.
	code, _, body = ts.do(t, "POST", "/v1/chat/completions",
		`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "n": 2, "stream": true, "stream_options": {"include_usage": true}}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	chunks := streamOf[oaChat](t, body)
	text := map[int]string{}
	roles, finishes, usages := map[int]int{}, map[int]string{}, 0
	for _, c := range chunks {
		if c.Usage != nil {
			usages++
			assert.Empty(t, c.Choices)
			assert.Equal(t, 8, c.Usage.CompletionTokens)
			continue
		}
		require.Len(t, c.Choices, 1, "a choice a chunk")
		ch := c.Choices[0]
		if ch.Delta.Role != "" {
			roles[ch.Index]++
		}
		if ch.Delta.Content != nil {
			text[ch.Index] += *ch.Delta.Content
		}
		if ch.FinishReason != nil {
			finishes[ch.Index] = *ch.FinishReason
		}
	}
	assert.Equal(t, 1, usages)
	assert.NotNil(t, chunks[len(chunks)-1].Usage, "the usage chunk is last")
	assert.Equal(t, map[int]int{0: 1, 1: 1}, roles)
	assert.Equal(t, map[int]string{0: "Hello, world!", 1: "Hello, world!"}, text)
	assert.Equal(t, map[int]string{0: "length", 1: "length"}, finishes)

	// Completions, streamed without usage.
	code, _, body = ts.do(t, "POST", "/v1/completions", `{"prompt": "hi", "max_tokens": 2, "n": 2, "stream": true}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	cchunks := streamOf[oaCompletion](t, body)
	require.Len(t, cchunks, 2*(2+1))
	ctext := map[int]string{}
	for _, c := range cchunks {
		assert.Nil(t, c.Usage)
		ctext[c.Choices[0].Index] += c.Choices[0].Text
	}
	assert.Equal(t, map[int]string{0: "Hello,", 1: "Hello,"}, ctext)

	// A choice that fails fails the request, and the others are cancelled.
	fake.failAt = 2
	code, _, body = ts.do(t, "POST", "/v1/completions", `{"prompt": "hi", "max_tokens": 5, "n": 4}`)
	assert.Equal(t, http.StatusInternalServerError, code, "%s", body)
	assert.Contains(t, decodeError(t, body).Error.Message, "device lost")
}

func TestSmallEndpoints(t *testing.T) {
	fake := newFake()
	ts := startServer(t, fake, func(c *ServerConfig) { c.APIToken = "sesame" })
	auth := []string{"Authorization", "Bearer sesame"}
	code, hdr, body := ts.do(t, "GET", "/v1/models/llama-test", nil, auth...)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var card modelCard
	strict(t, body, &card)
	assert.Equal(t, modelCard{ID: "llama-test", Object: "model", Created: ts.api.created, OwnedBy: "rocm-go", MaxModelLen: 64}, card)
	assert.NotEmpty(t, hdr.Get("X-Request-Id"))

	code, hdr, body = ts.do(t, "GET", "/v1/models/gpt-4", nil, auth...)
	assert.Equal(t, http.StatusNotFound, code)
	e := decodeError(t, body)
	assert.Equal(t, "model_not_found", *e.Error.Code)
	assert.Contains(t, e.Error.Message, `"gpt-4" is not served here`)
	assert.NotEmpty(t, hdr.Get("X-Request-Id"), "an error has its id")

	// A model id with a slash, as Hugging Face names them.
	slashed := startServer(t, newFake(), func(c *ServerConfig) { c.ModelID = "meta-llama/Llama-3.2-1B" })
	code, _, body = slashed.do(t, "GET", "/v1/models/meta-llama/Llama-3.2-1B", nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	strict(t, body, &card)
	assert.Equal(t, "meta-llama/Llama-3.2-1B", card.ID)
	code, _, _ = slashed.do(t, "GET", "/v1/models/meta-llama", nil)
	assert.Equal(t, http.StatusNotFound, code)

	// Every response has an id: a 404, a 405, a 400, a 401, a stream.
	for _, c := range []struct {
		method, path, body string
		header             []string
		status             int
	}{
		{"GET", "/no/such/path", "", auth, 404},
		{"POST", "/v1/models/llama-test", "", auth, 405},
		{"POST", "/v1/completions", `{"prompt": ""}`, auth, 400},
		{"POST", "/v1/completions", `{"prompt": "x"}`, nil, 401},
		{"POST", "/v1/completions", `{"prompt": "x", "max_tokens": 1, "stream": true}`, auth, 200},
		{"POST", "/tokenize", `{"prompt": "x"}`, append([]string{"X-Request-Id", "mine-1"}, auth...), 200},
	} {
		var b any
		if c.body != "" {
			b = c.body
		}
		code, hdr, body := ts.do(t, c.method, c.path, b, c.header...)
		assert.Equal(t, c.status, code, "%s %s: %s", c.method, c.path, body)
		assert.NotEmpty(t, hdr.Get("X-Request-Id"), "%s %s", c.method, c.path)
		if len(c.header) > 2 {
			assert.Equal(t, "mine-1", hdr.Get("X-Request-Id"), "the client's id comes back")
		}
	}

	// Tokenize and detokenize, in vLLM's shapes.
	tokenize := func(body string) (int, tokenizeResponse, []byte) {
		code, _, resp := ts.do(t, "POST", "/tokenize", body, auth...)
		var tr tokenizeResponse
		if code == http.StatusOK {
			strict(t, resp, &tr)
		}
		return code, tr, resp
	}
	hello, world := fake.word("hello"), fake.word("world")
	code, tr, resp := tokenize(`{"prompt": "hello world"}`)
	require.Equal(t, http.StatusOK, code, "%s", resp)
	assert.Equal(t, tokenizeResponse{Tokens: []int32{1, hello, world}, Count: 3, MaxModelLen: 64}, tr)
	_, tr, _ = tokenize(`{"prompt": "hello world", "add_special_tokens": false, "model": "llama-test"}`)
	assert.Equal(t, []int32{hello, world}, tr.Tokens)
	msgs := `"messages": [{"role": "user", "content": "hello"}]`
	_, tr, _ = tokenize(`{` + msgs + `}`)
	want, _ := fake.Encode("<s> <|user|> hello <|assistant|>", false)
	assert.Equal(t, want, tr.Tokens, "the template's text, no BOS added")
	_, tr, _ = tokenize(`{` + msgs + `, "add_generation_prompt": false, "add_special_tokens": true}`)
	want, _ = fake.Encode("<s> <|user|> hello ", true)
	assert.Equal(t, want, tr.Tokens)
	_, tr, _ = tokenize(`{"prompt": "no-tokens"}`)
	assert.Equal(t, tokenizeResponse{Tokens: []int32{}, Count: 0, MaxModelLen: 64}, tr)
	for _, c := range []struct{ body, param, msg string }{
		{`{}`, "prompt", "prompt or messages is missing"},
		{`{"prompt": "x", ` + msgs + `}`, "prompt", "send one"},
		{`{"messages": []}`, "messages", "empty"},
		{`{"messages": [{"role": "user", "content": "bad-template"}]}`, "messages", "roles must alternate"},
		{`{"prompt": "encode-error"}`, "prompt", "cannot encode"},
	} {
		code, _, resp := tokenize(c.body)
		assert.Equal(t, http.StatusBadRequest, code, c.body)
		e := decodeError(t, resp)
		assert.Contains(t, e.Error.Message, c.msg, c.body)
		assert.Equal(t, c.param, *e.Error.Param, c.body)
	}
	code, _, resp = tokenize(`{"prompt": "x", "model": "gpt-4"}`)
	assert.Equal(t, http.StatusNotFound, code, "%s", resp)

	code, _, resp = ts.do(t, "POST", "/detokenize", fmt.Sprintf(`{"tokens": [1, %d, %d]}`, fake.word("Hello"), fake.word(" world")), auth...)
	require.Equal(t, http.StatusOK, code, "%s", resp)
	var dr detokenizeResponse
	strict(t, resp, &dr)
	assert.Equal(t, "<s>Hello world", dr.Prompt, "special tokens included")
	for _, c := range []struct{ body, msg string }{
		{`{}`, "tokens is missing"},
		{`{"tokens": [1, 1000]}`, "token id 1000 at 1: want 0 to 999"},
		{`{"tokens": [-1]}`, "token id -1 at 0"},
	} {
		code, _, resp := ts.do(t, "POST", "/detokenize", c.body, auth...)
		assert.Equal(t, http.StatusBadRequest, code, c.body)
		assert.Contains(t, decodeError(t, resp).Error.Message, c.msg)
	}
	code, _, _ = ts.do(t, "GET", "/tokenize", nil, auth...)
	assert.Equal(t, http.StatusMethodNotAllowed, code)

	// While loading, they answer 503 as generation does.
	loading := startServer(t, nil, nil)
	code, _, _ = loading.do(t, "POST", "/tokenize", `{"prompt": "x"}`)
	assert.Equal(t, http.StatusServiceUnavailable, code)
}

// TestSamplingFieldsOnTinyModel drives the fields through the HTTP API on
// the real backend (a small random model on the CPU): greedy
// log-probabilities match the step's most likely token, logit_bias bans a
// token, n choices with a seed are the single requests of seed + i, and
// /tokenize and /detokenize round-trip.
func TestSamplingFieldsOnTinyModel(t *testing.T) { testSamplingFields(t, "cpu", true) }

// TestGPUSamplingFieldsOnTinyModel is the same on the GPU, where the
// log-probabilities come from its kernels. A choice batched with others
// may differ from the same seed alone there (the batch changes the
// matmuls' rounding in bf16), so the choices are checked for their count
// and usage only.
func TestGPUSamplingFieldsOnTinyModel(t *testing.T) {
	n, err := hip.DeviceCount()
	if err == nil && n == 0 {
		err = candle.ErrDevice
	}
	testenv.Need(t, 2, "a GPU", err)
	testSamplingFields(t, "hip:0", false)
}

func testSamplingFields(t *testing.T, device string, exactChoices bool) {
	dir := filepath.Join(t.TempDir(), "tiny")
	require.NoError(t, mkmodel.Write(dir, mkmodel.Tiny(), nil))
	b, err := openBackend(LoadOptions{Dir: dir, Device: device, DType: "auto", MaxBatch: 8, MaxQueue: 16})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	ts := startServer(t, nil, nil)
	ts.api.SetReady(b)
	chat := func(extra string) oaChat {
		code, _, body := ts.do(t, "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 8`+extra+`}`)
		require.Equal(t, http.StatusOK, code, "%s", body)
		var c oaChat
		strict(t, body, &c)
		return c
	}
	g := chat(`, "temperature": 0, "logprobs": true, "top_logprobs": 3`)
	content := g.Choices[0].Logprobs.Content
	require.NotEmpty(t, content)
	var joined []byte
	for i, c := range content {
		require.Len(t, c.TopLogprobs, 3, "token %d", i)
		assert.Equal(t, c.TopLogprobs[0].Token, c.Token, "greedy draws the most likely (token %d)", i)
		assert.InDelta(t, c.TopLogprobs[0].Logprob, c.Logprob, 1e-6)
		sum := 0.0
		for j, top := range c.TopLogprobs {
			assert.LessOrEqual(t, top.Logprob, 0.0)
			if j > 0 {
				assert.LessOrEqual(t, top.Logprob, c.TopLogprobs[j-1].Logprob, "most likely first")
			}
			sum += math.Exp(top.Logprob)
		}
		assert.LessOrEqual(t, sum, 1+1e-5)
		for _, v := range c.Bytes {
			joined = append(joined, byte(v))
		}
	}
	if *g.Choices[0].FinishReason == "length" {
		assert.Len(t, content, 8)
		if utf8.Valid(joined) { // a random model may end amid a character, which the text shows as U+FFFD
			assert.Equal(t, g.Choices[0].Message.Content, string(joined), "the tokens' bytes make the text")
		}
	}

	// Banning the first greedy token changes the first token.
	first := content[0]
	code, _, body := ts.do(t, "POST", "/tokenize", `{"prompt": `+mustJSON(t, first.Token)+`, "add_special_tokens": false}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var tr tokenizeResponse
	strict(t, body, &tr)
	require.NotEmpty(t, tr.Tokens)
	banned := chat(fmt.Sprintf(`, "temperature": 0, "logprobs": true, "logit_bias": {"%d": -100}`, tr.Tokens[0]))
	assert.NotEqual(t, first.Token, banned.Choices[0].Logprobs.Content[0].Token)
	pen := chat(`, "temperature": 0, "presence_penalty": 2, "frequency_penalty": 2`)
	assert.NotEmpty(t, pen.Choices[0].Message.Content)

	// n choices: choice i is the single request of seed 5 + i.
	many := chat(`, "temperature": 1, "n": 3, "seed": 5`)
	require.Len(t, many.Choices, 3)
	sum := 0
	for i, c := range many.Choices {
		assert.Equal(t, i, c.Index)
		one := chat(fmt.Sprintf(`, "temperature": 1, "seed": %d`, 5+i))
		if exactChoices {
			assert.Equal(t, one.Choices[0].Message.Content, c.Message.Content, "choice %d", i)
			sum += one.Usage.CompletionTokens
		}
	}
	if exactChoices {
		assert.Equal(t, sum, many.Usage.CompletionTokens, "the completions summed")
	} else {
		assert.Positive(t, many.Usage.CompletionTokens)
		assert.LessOrEqual(t, many.Usage.CompletionTokens, 3*8)
	}
	assert.Equal(t, g.Usage.PromptTokens, many.Usage.PromptTokens, "the prompt counted once")

	// Round trip through /tokenize and /detokenize.
	code, _, body = ts.do(t, "POST", "/tokenize", `{"prompt": "Hello world, again", "add_special_tokens": false}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	strict(t, body, &tr)
	assert.Equal(t, len(tr.Tokens), tr.Count)
	assert.Equal(t, b.ContextLength(), tr.MaxModelLen)
	code, _, body = ts.do(t, "POST", "/detokenize", map[string]any{"tokens": tr.Tokens})
	require.Equal(t, http.StatusOK, code, "%s", body)
	var dr detokenizeResponse
	strict(t, body, &dr)
	assert.Equal(t, "Hello world, again", dr.Prompt)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
