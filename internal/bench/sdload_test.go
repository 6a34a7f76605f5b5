package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeImageWorker answers as sd-worker does: images after a pause, and
// its device memory in /health.
func fakeImageWorker(t *testing.T, fail int32) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			fmt.Fprint(w, `{"status": "ready", "device_memory": {"in_use": 1073741824, "cached": 536870912, "peak": 0}}`)
		case "/v1/images/generations":
			var req map[string]any
			require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
			if n.Add(1) == fail {
				w.WriteHeader(http.StatusTooManyRequests)
				fmt.Fprint(w, `{"error": {"message": "the worker's queue is full"}}`)
				return
			}
			time.Sleep(5 * time.Millisecond)
			fmt.Fprintf(w, `{"data": [{"b64_json": "eA=="}], "timings": {"batched": 2}, "size": %q}`, req["size"])
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestRunSDLoad(t *testing.T) {
	srv, n := fakeImageWorker(t, 3)
	rep, err := RunSDLoad(context.Background(), SDLoad{URL: srv.URL, Prompt: "a cat", Size: 64, Steps: 2, Clients: 2, Requests: 10,
		Duration: 10 * time.Second, Sample: time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, int32(10), n.Load())
	assert.Equal(t, 10, rep.Requests)
	assert.Equal(t, 9, rep.Completed)
	assert.Equal(t, map[string]int{"429 Too Many Requests: the worker's queue is full": 1}, rep.ErrorKinds)
	assert.Equal(t, 2.0, rep.MeanBatched)
	assert.Greater(t, rep.ImagesPerMin, 0.0)
	assert.GreaterOrEqual(t, rep.LatencyP90, rep.LatencyP50)
	first, last, most := rep.MemoryFlat()
	assert.Equal(t, [3]int64{3 << 29, 3 << 29, 3 << 29}, [3]int64{first, last, most})
	var out bytes.Buffer
	rep.Print(&out)
	PrintSDLoadTable(&out, "tiny", []*SDLoadReport{rep})
	assert.Contains(t, out.String(), "2 clients, 64², 2 steps: 10 requests (9 completed, 1 errors)")
	assert.Contains(t, out.String(), "| 64², 2 steps | 2 | 9 | 1 |")

	for _, bad := range []SDLoad{
		{URL: srv.URL, Size: 64, Steps: 2, Clients: 0, Requests: 1, Duration: time.Second},
		{URL: srv.URL, Size: 60, Steps: 2, Clients: 1, Requests: 1, Duration: time.Second},
		{URL: srv.URL, Size: 64, Steps: 2, Clients: 1, Requests: 1, Duration: time.Hour},
		{URL: "http://example.com:8081", Size: 64, Steps: 2, Clients: 1, Requests: 1, Duration: time.Second},
	} {
		_, err := RunSDLoad(context.Background(), bad)
		assert.Error(t, err, "%+v", bad)
	}
}
