package main

import (
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

// TestMetrics: /metrics answers without the token; a 401, a 400 and a
// batch of two jobs (three images, four steps) move the counters and
// histograms by what they were, and the gauges read at scrape time see
// the jobs while they wait and run.
func TestMetrics(t *testing.T) {
	fake := newFake()
	fake.hold.Store(true)
	ts := newTestServer(t, fake, ServerConfig{APIToken: "tok", MaxBatch: 4})
	m := ts.scrape(t)
	for series, want := range map[string]float64{
		"rocm_go:num_jobs_running": 0, "rocm_go:num_jobs_waiting": 0, "rocm_go:images_generated_total": 0, "rocm_go:steps_total": 0,
		`rocm_go:jobs_total{state="done"}`: 0, `rocm_go:jobs_total{state="canceled"}`: 0, "rocm_go:batch_size_count": 0,
		`rocm_go:device_memory_bytes{kind="in_use"}`: 1 << 20, `rocm_go:device_memory_bytes{kind="cached"}`: 2 << 20,
	} {
		v, ok := m[series]
		assert.True(t, ok, "%s is there from the start", series)
		assert.Equal(t, want, v, series)
	}

	code, _, _ := ts.do(t, "POST", "/v1/images/generations", `{"prompt": "x"}`)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Equal(t, http.StatusBadRequest, <-post(ts, "/v1/images/generations", `{"prompt": "x", "size": "9x9"}`, "Authorization", "Bearer tok"))

	first := post(ts, "/v1/images/generations", `{"prompt": "first", "steps": 3}`, "Authorization", "Bearer tok")
	<-fake.started
	a := post(ts, "/v1/images/generations", `{"prompt": "a", "steps": 4, "n": 2}`, "Authorization", "Bearer tok")
	b := post(ts, "/sdapi/v1/txt2img", `{"prompt": "b", "steps": 4, "batch_size": 2}`, "Authorization", "Bearer tok")
	require.Eventually(t, func() bool { return ts.scrape(t)["rocm_go:num_jobs_waiting"] == 2 }, 5*time.Second, time.Millisecond)
	m = ts.scrape(t)
	assert.Equal(t, 1.0, m["rocm_go:num_jobs_running"])
	fake.hold.Store(false)
	close(fake.release)
	for _, ch := range []chan int{first, a, b} {
		require.Equal(t, http.StatusOK, <-ch)
	}

	m = ts.scrape(t)
	for series, want := range map[string]float64{
		`rocm_go:http_requests_total{endpoint="/v1/images/generations",status="401"}`: 1,
		`rocm_go:http_requests_total{endpoint="/v1/images/generations",status="400"}`: 1,
		`rocm_go:http_requests_total{endpoint="/v1/images/generations",status="200"}`: 2,
		`rocm_go:http_requests_total{endpoint="/sdapi/v1/txt2img",status="200"}`:      1,
		"rocm_go:images_generated_total":                                              1 + 2 + 2,
		"rocm_go:steps_total":                                                         3 + 4, // a batch's steps once
		`rocm_go:jobs_total{state="done"}`:                                            3,
		`rocm_go:jobs_total{state="failed"}`:                                          0,
		"rocm_go:batch_size_count":                                                    2,
		"rocm_go:batch_size_sum":                                                      1 + 2,
		`rocm_go:batch_size_bucket{le="1"}`:                                           1,
		`rocm_go:batch_size_bucket{le="2"}`:                                           2,
		"rocm_go:job_latency_seconds_count":                                           3,
		"rocm_go:job_queue_time_seconds_count":                                        3,
		"rocm_go:num_jobs_running":                                                    0,
		"rocm_go:num_jobs_waiting":                                                    0,
	} {
		assert.Equal(t, want, m[series], series)
	}
	assert.Greater(t, m["rocm_go:job_queue_time_seconds_sum"], 0.0, "two jobs waited for the first")
}

// TestMetricsCanceled: a job whose client leaves is counted canceled,
// with no images and no latency.
func TestMetricsCanceled(t *testing.T) {
	fake := newFake()
	fake.hold.Store(true)
	ts := newTestServer(t, fake, ServerConfig{})
	ctx, cancel := contextWithCancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/images/generations", strings.NewReader(`{"prompt": "x", "steps": 2}`))
	errc := make(chan error, 1)
	go func() { _, err := http.DefaultClient.Do(req); errc <- err }()
	<-fake.started
	cancel()
	require.Error(t, <-errc)
	require.Eventually(t, func() bool { return ts.scrape(t)[`rocm_go:jobs_total{state="canceled"}`] == 1 }, 5*time.Second, time.Millisecond)
	m := ts.scrape(t)
	assert.Equal(t, 0.0, m["rocm_go:images_generated_total"])
	assert.Equal(t, 0.0, m["rocm_go:job_latency_seconds_count"])
	require.Eventually(t, func() bool {
		return ts.scrape(t)[`rocm_go:http_requests_total{endpoint="/v1/images/generations",status="499"}`] == 1
	}, 5*time.Second, time.Millisecond, "the client that left is logged and counted as 499")
}

// TestRequestLogs: with JSON logs every line is a JSON object; a job's
// lines carry the request's id, which X-Request-Id echoes.
func TestRequestLogs(t *testing.T) {
	lb := &workertest.LogBuffer{}
	h, err := worker.NewLogHandler(lb, "json", true)
	require.NoError(t, err)
	ts := newTestServer(t, newFake(), ServerConfig{Logger: slog.New(h)})
	req, _ := http.NewRequest("POST", ts.URL+"/v1/images/generations", strings.NewReader(`{"prompt": "x", "steps": 2, "job_id": "j1"}`))
	req.Header.Set("X-Request-Id", "client-9")
	code, hdr, _ := send(t, req)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "client-9", hdr.Get("X-Request-Id"))
	assert.Equal(t, "j1", hdr.Get("X-Job-Id"))
	code, hdr, _ = ts.do(t, "POST", "/v1/images/generations", `{"prompt": ""}`)
	require.Equal(t, http.StatusBadRequest, code)
	refused := hdr.Get("X-Request-Id")
	assert.Regexp(t, `^req-[0-9a-f]{24}$`, refused)

	byID := map[string][]string{}
	var reqLine map[string]any
	for line := range strings.Lines(lb.String()) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "a JSON line: %q", line)
		id, _ := rec["request_id"].(string)
		byID[id] = append(byID[id], rec["msg"].(string))
		if id == "client-9" && rec["msg"] == "request" {
			reqLine = rec
		}
	}
	assert.Equal(t, []string{"job done", "request"}, byID["client-9"])
	assert.Equal(t, []string{"request refused", "request"}, byID[refused])
	require.NotNil(t, reqLine)
	assert.Equal(t, 200.0, reqLine["status"])
	assert.Equal(t, "/v1/images/generations", reqLine["path"])
	assert.Greater(t, reqLine["bytes"], 100.0)
}
