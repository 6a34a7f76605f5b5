package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/internal/worker"
	"github.com/rocm-go/rocm/internal/worker/workertest"
)

// observed is a small worker: Observe over Recoverer over Auth over a
// mux with a few routes, on loopback, logging JSON.
type observed struct {
	*httptest.Server
	log     *workertest.LogBuffer
	waiting chan struct{} // a request reached /v1/wait
}

func newObserved(t *testing.T, verbose bool) *observed {
	t.Helper()
	lb := &workertest.LogBuffer{}
	h, err := worker.NewLogHandler(lb, "json", verbose)
	require.NoError(t, err)
	log := slog.New(h)
	reg := worker.NewRegistry()
	mux := http.NewServeMux()
	mux.Handle("/metrics", reg)
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		worker.WriteJSON(w, 200, map[string]string{"status": "ready"})
	})
	mux.HandleFunc("/v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		log.InfoContext(r.Context(), "job looked up", "job", r.PathValue("id"))
		worker.WriteJSON(w, 200, map[string]string{"id": r.PathValue("id")})
	})
	mux.HandleFunc("/v1/bad", func(w http.ResponseWriter, r *http.Request) {
		worker.WriteError(w, worker.BadRequest("x", "x is wrong"))
	})
	mux.HandleFunc("/v1/panic", func(w http.ResponseWriter, r *http.Request) { panic("a bug") })
	waiting := make(chan struct{}, 1)
	mux.HandleFunc("/v1/wait", func(w http.ResponseWriter, r *http.Request) {
		waiting <- struct{}{}
		<-r.Context().Done()
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	o := &observed{Server: httptest.NewServer(worker.Observe(log, reg, mux, worker.Recoverer(log, worker.Auth("tok", "test", mux)))), log: lb,
		waiting: waiting}
	t.Cleanup(o.Close)
	return o
}

func (o *observed) get(t *testing.T, path string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", o.URL+path, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	return resp, string(body)
}

// records is the log as JSON objects: every line must be one.
func records(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(log) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "a JSON line: %q", line)
		out = append(out, m)
	}
	return out
}

var generatedID = regexp.MustCompile(`^req-[0-9a-f]{24}$`)

func TestRequestID(t *testing.T) {
	o := newObserved(t, false)
	resp, _ := o.get(t, "/health", "X-Request-Id", "client-7f3a:trace/1+=")
	assert.Equal(t, "client-7f3a:trace/1+=", resp.Header.Get("X-Request-Id"), "a client's sane id is kept")
	seen := map[string]bool{}
	for _, bad := range []string{"", "has space", `quote"`, "new\tline", "ünïcode", strings.Repeat("a", 129)} {
		resp, _ = o.get(t, "/health", "X-Request-Id", bad)
		id := resp.Header.Get("X-Request-Id")
		assert.Regexp(t, generatedID, id, "%q is replaced", bad)
		assert.False(t, seen[id], "ids are unique")
		seen[id] = true
	}
	resp, _ = o.get(t, "/health", "X-Request-Id", strings.Repeat("a", 128))
	assert.Equal(t, strings.Repeat("a", 128), resp.Header.Get("X-Request-Id"), "128 characters are fine")
	resp, _ = o.get(t, "/v1/jobs/j1")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Regexp(t, generatedID, resp.Header.Get("X-Request-Id"), "a rejected request has its id too")
}

// TestObserveLogs: one JSON line per request, rejected ones included,
// with its id, which the handler's own lines carry too; probes log at
// debug level only.
func TestObserveLogs(t *testing.T) {
	o := newObserved(t, false)
	resp, _ := o.get(t, "/v1/jobs/j1", "Authorization", "Bearer tok", "X-Request-Id", "r-1")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	o.get(t, "/v1/jobs/j2", "X-Request-Id", "r-2") // no token: 401
	o.get(t, "/v1/bad", "Authorization", "Bearer tok", "X-Request-Id", "r-3")
	o.get(t, "/v1/panic", "Authorization", "Bearer tok", "X-Request-Id", "r-4")
	o.get(t, "/health", "X-Request-Id", "r-5")
	recs := records(t, o.log.String())
	byID := map[string][]map[string]any{}
	for _, r := range recs {
		id, _ := r["request_id"].(string)
		require.NotEmpty(t, id, "every line here belongs to a request: %v", r)
		byID[id] = append(byID[id], r)
	}
	for id, want := range map[string]float64{"r-1": 200, "r-2": 401, "r-3": 400, "r-4": 500} {
		var req map[string]any
		for _, r := range byID[id] {
			if r["msg"] == "request" {
				require.Nil(t, req, "one request line for %s", id)
				req = r
			}
		}
		require.NotNil(t, req, "a request line for %s", id)
		assert.Equal(t, want, req["status"], id)
		assert.Equal(t, "GET", req["method"])
		assert.Equal(t, "INFO", req["level"])
		assert.Contains(t, req["remote"], "127.0.0.1:")
		assert.Greater(t, req["bytes"], 0.0)
		assert.GreaterOrEqual(t, req["duration_ms"], 0.0)
	}
	require.Len(t, byID["r-1"], 2)
	assert.Equal(t, "job looked up", byID["r-1"][0]["msg"], "the handler's line carries the request id")
	assert.Equal(t, "/v1/jobs/j1", byID["r-1"][1]["path"])
	assert.Equal(t, "handler panicked: this is a bug", byID["r-4"][0]["msg"])
	assert.Empty(t, byID["r-5"], "a probe that answers logs at debug level")

	o = newObserved(t, true)
	o.get(t, "/health", "X-Request-Id", "r-6")
	recs = records(t, o.log.String())
	require.Len(t, recs, 1)
	assert.Equal(t, "DEBUG", recs[0]["level"])
	assert.Equal(t, "r-6", recs[0]["request_id"])
}

// TestObserveMetrics: rocm_go:http_requests_total counts every request by
// route and status: refused ones, 404s under "other", a panic's 500, and
// a client that left before any answer (499); /metrics needs no token.
func TestObserveMetrics(t *testing.T) {
	o := newObserved(t, false)
	o.get(t, "/v1/jobs/a", "Authorization", "Bearer tok")
	o.get(t, "/v1/jobs/b", "Authorization", "Bearer tok")
	o.get(t, "/v1/jobs/c")
	o.get(t, "/v1/bad", "Authorization", "Bearer tok")
	o.get(t, "/v1/panic", "Authorization", "Bearer tok")
	o.get(t, "/nowhere/1", "Authorization", "Bearer tok")
	o.get(t, "/nowhere/2", "Authorization", "Bearer tok")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", o.URL+"/v1/wait", nil)
	req.Header.Set("Authorization", "Bearer tok")
	go func() { <-o.waiting; cancel() }() // the client leaves once its request is in
	_, err := http.DefaultClient.Do(req)
	require.Error(t, err)
	var m workertest.Metrics
	require.Eventually(t, func() bool {
		resp, body := o.get(t, "/metrics")
		require.Equal(t, http.StatusOK, resp.StatusCode, "no token needed")
		m = workertest.ParseMetrics(t, body)
		_, ok := m[`rocm_go:http_requests_total{endpoint="/v1/wait",status="499"}`]
		return ok
	}, 5*time.Second, 10*time.Millisecond, "the client that left is counted")
	for series, want := range map[string]float64{
		`rocm_go:http_requests_total{endpoint="/v1/jobs/{id}",status="200"}`: 2,
		`rocm_go:http_requests_total{endpoint="/v1/jobs/{id}",status="401"}`: 1,
		`rocm_go:http_requests_total{endpoint="/v1/bad",status="400"}`:       1,
		`rocm_go:http_requests_total{endpoint="/v1/panic",status="500"}`:     1,
		`rocm_go:http_requests_total{endpoint="other",status="404"}`:         2,
		`rocm_go:http_requests_total{endpoint="/v1/wait",status="499"}`:      1,
	} {
		assert.Equal(t, want, m[series], series)
	}
}

func TestNewLogHandler(t *testing.T) {
	var buf strings.Builder
	h, err := worker.NewLogHandler(&buf, "text", false)
	require.NoError(t, err)
	assert.Equal(t, h, worker.RequestIDs(h), "wrapping twice adds the id once")
	log := slog.New(h).With("k", "v")
	log.InfoContext(worker.WithRequestID(context.Background(), "id-1"), "hello")
	log.Info("no request")
	log.DebugContext(context.Background(), "hidden")
	assert.Equal(t, "level=INFO msg=hello k=v request_id=id-1\nlevel=INFO msg=\"no request\" k=v\n",
		regexp.MustCompile(`time=\S+ `).ReplaceAllString(buf.String(), ""))
	_, err = worker.NewLogHandler(&buf, "xml", false)
	assert.ErrorContains(t, err, `-log-format "xml": want text or json`)
	assert.Equal(t, "", worker.RequestID(context.Background()))
}
