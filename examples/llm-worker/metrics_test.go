package main

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/internal/worker"
	"github.com/rocm-go/rocm/internal/worker/workertest"
)

// scrape reads GET /metrics, without a token, and parses it.
func (ts *testServer) scrape(t *testing.T) workertest.Metrics { return workertest.Scrape(t, ts.URL) }

// TestMetrics: /metrics answers without the token, in vLLM's names; a
// 401, a 400 and two answers (whole and streamed) move the counters and
// histograms by what they were.
func TestMetrics(t *testing.T) {
	fake := newFake()
	ts := startServer(t, fake, func(c *ServerConfig) { c.APIToken = "tok" })
	m := ts.scrape(t)
	for series, want := range map[string]float64{
		"rocm_go:num_requests_running": 0, "rocm_go:num_requests_waiting": 0, "rocm_go:prompt_tokens_total": 0,
		"rocm_go:generation_tokens_total": 0, `rocm_go:request_success_total{finished_reason="stop"}`: 0,
		`rocm_go:request_success_total{finished_reason="abort"}`: 0, "rocm_go:time_to_first_token_seconds_count": 0,
		"rocm_go:kv_cache_usage_perc": 0, `rocm_go:device_memory_bytes{kind="in_use"}`: 3 << 30,
		`rocm_go:device_memory_bytes{kind="cached"}`: 1 << 28,
	} {
		v, ok := m[series]
		assert.True(t, ok, "%s is there from the start", series)
		assert.Equal(t, want, v, series)
	}

	code, _, _ := ts.do(t, "POST", "/v1/completions", `{"prompt": "a b c", "max_tokens": 4}`)
	require.Equal(t, http.StatusUnauthorized, code)
	code, _, _ = ts.do(t, "POST", "/v1/completions", `{"prompt": "a b c", "max_tokens": 0}`, "Authorization", "Bearer tok")
	require.Equal(t, http.StatusBadRequest, code)
	code, _, body := ts.do(t, "POST", "/v1/completions", `{"prompt": "a b c", "max_tokens": 4}`, "Authorization", "Bearer tok")
	require.Equal(t, http.StatusOK, code, "%s", body)
	code, _, body = ts.do(t, "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": true}`,
		"Authorization", "Bearer tok")
	require.Equal(t, http.StatusOK, code, "%s", body)
	prompts := 0
	for _, r := range fake.requests() {
		prompts += len(r.Prompt)
	}

	m = ts.scrape(t)
	for series, want := range map[string]float64{
		`rocm_go:http_requests_total{endpoint="/v1/completions",status="401"}`:      1,
		`rocm_go:http_requests_total{endpoint="/v1/completions",status="400"}`:      1,
		`rocm_go:http_requests_total{endpoint="/v1/completions",status="200"}`:      1,
		`rocm_go:http_requests_total{endpoint="/v1/chat/completions",status="200"}`: 1,
		`rocm_go:http_requests_total{endpoint="/metrics",status="200"}`:             1, // the first scrape
		"rocm_go:prompt_tokens_total":                                               float64(prompts),
		"rocm_go:generation_tokens_total":                                           4 + 3,
		`rocm_go:request_success_total{finished_reason="length"}`:                   2,
		`rocm_go:request_success_total{finished_reason="stop"}`:                     0,
		"rocm_go:time_to_first_token_seconds_count":                                 2,
		"rocm_go:time_per_output_token_seconds_count":                               3 + 2, // the gaps after each first token
		"rocm_go:e2e_request_latency_seconds_count":                                 2,
		`rocm_go:e2e_request_latency_seconds_bucket{le="7680"}`:                     2,
		"rocm_go:num_requests_running":                                              0,
	} {
		assert.Equal(t, want, m[series], series)
	}
	assert.Equal(t, 4+4, prompts, "BOS and three words; the template's four")
	assert.Greater(t, m["rocm_go:e2e_request_latency_seconds_sum"], 0.0)
	assert.Equal(t, float64(7), ts.api.metrics.genTokens.Value(), "the heartbeats' rate counts the same tokens")
}

// TestMetricsWhileRunning: the gauges read at scrape time see a
// generation under way, and a client that leaves mid-stream is counted
// as vLLM's abort.
func TestMetricsWhileRunning(t *testing.T) {
	fake := newFake()
	fake.delay = 5 * time.Millisecond
	fake.ctxLen = 1 << 20
	ts := startServer(t, fake, nil)
	req, _ := http.NewRequest("POST", ts.URL+"/v1/completions", strings.NewReader(`{"prompt": "x", "max_tokens": 100000, "stream": true}`))
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	rd := bufio.NewReader(resp.Body)
	_, err = rd.ReadString('\n')
	require.NoError(t, err)
	m := ts.scrape(t)
	assert.Equal(t, 1.0, m["rocm_go:num_requests_running"])
	assert.Equal(t, 0.25, m["rocm_go:kv_cache_usage_perc"], "the fake's quarter a generation")
	resp.Body.Close()
	require.Eventually(t, func() bool {
		return ts.scrape(t)[`rocm_go:request_success_total{finished_reason="abort"}`] == 1
	}, 5*time.Second, 5*time.Millisecond)
	m = ts.scrape(t)
	assert.Equal(t, 0.0, m["rocm_go:num_requests_running"])
	assert.Equal(t, 1.0, m["rocm_go:e2e_request_latency_seconds_count"])
}

// TestRequestLogs: with JSON logs every line is a JSON object; each
// request has one "request" line with its id, which X-Request-Id echoes
// (the client's, or one made up), and the generation's own lines carry it.
func TestRequestLogs(t *testing.T) {
	lb := &workertest.LogBuffer{}
	h, err := worker.NewLogHandler(lb, "json", true)
	require.NoError(t, err)
	ts := startServer(t, newFake(), func(c *ServerConfig) { c.Logger = slog.New(h) })
	code, hdr, _ := ts.do(t, "POST", "/v1/completions", `{"prompt": "a b", "max_tokens": 2}`, "X-Request-Id", "client-id-1")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "client-id-1", hdr.Get("X-Request-Id"))
	code, hdr, _ = ts.do(t, "POST", "/v1/completions", `{"prompt": 7}`, "X-Request-Id", "not a sane id")
	require.Equal(t, http.StatusBadRequest, code)
	badID := hdr.Get("X-Request-Id")
	assert.Regexp(t, `^req-[0-9a-f]{24}$`, badID)

	byID := map[string][]map[string]any{}
	for line := range strings.Lines(lb.String()) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "a JSON line: %q", line)
		id, _ := rec["request_id"].(string)
		byID[id] = append(byID[id], rec)
	}
	var msgs []string
	for _, rec := range byID["client-id-1"] {
		msgs = append(msgs, rec["msg"].(string))
	}
	assert.Equal(t, []string{"generation done", "request"}, msgs)
	done, req := byID["client-id-1"][0], byID["client-id-1"][1]
	assert.Equal(t, 2.0, done["completion_tokens"])
	assert.Equal(t, "POST", req["method"])
	assert.Equal(t, "/v1/completions", req["path"])
	assert.Equal(t, 200.0, req["status"])
	require.Len(t, byID[badID], 1, "a refused request has its line")
	assert.Equal(t, 400.0, byID[badID][0]["status"])
}
