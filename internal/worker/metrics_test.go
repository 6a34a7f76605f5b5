package worker

import (
	"bytes"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetricsExposition checks the text of a few series exactly: HELP
// escaping, label escaping and order, counters, gauges set and read at
// scrape time, and a histogram's cumulative buckets, sum and count.
func TestMetricsExposition(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("rocm_go:tokens_total", "Tokens made.\nA second line, with a \\ backslash.")
	c.Add(3)
	c.Inc()
	c.Add(-5)         // ignored: a counter never goes down
	c.Add(math.NaN()) // ignored
	v := r.CounterVec("rocm_go:http_requests_total", "Requests.", "endpoint", "status")
	v.With("/v1/b", "200").Inc()
	v.With("/v1/a", "400").Add(2)
	v.With(`we"ird\`+"\n", "500").Inc()
	v.With("/v1/a", "400").Inc()
	g := r.Gauge("rocm_go:temperature", "A gauge.")
	g.Set(1.5)
	g.Add(-3)
	r.GaugeFunc("rocm_go:device_memory_bytes", "Device memory.", []string{"kind"}, func(emit func(float64, ...string)) {
		emit(3<<30, "in_use")
		emit(512, "cached")
		emit(1, "too", "many") // a caller's bug: left out, the scrape goes on
	})
	r.GaugeFunc("rocm_go:kv_cache_usage_perc", "Absent until known.", nil, func(emit func(float64, ...string)) {})
	h := r.Histogram("rocm_go:latency_seconds", "A histogram.", []float64{0.1, 0.5, 2})
	for _, x := range []float64{0.05, 0.1, 0.3, 1, 7, math.NaN()} {
		h.Observe(x)
	}
	want := `# HELP rocm_go:device_memory_bytes Device memory.
# TYPE rocm_go:device_memory_bytes gauge
rocm_go:device_memory_bytes{kind="cached"} 512
rocm_go:device_memory_bytes{kind="in_use"} 3221225472
# HELP rocm_go:http_requests_total Requests.
# TYPE rocm_go:http_requests_total counter
rocm_go:http_requests_total{endpoint="/v1/a",status="400"} 3
rocm_go:http_requests_total{endpoint="/v1/b",status="200"} 1
rocm_go:http_requests_total{endpoint="we\"ird\\\n",status="500"} 1
# HELP rocm_go:kv_cache_usage_perc Absent until known.
# TYPE rocm_go:kv_cache_usage_perc gauge
# HELP rocm_go:latency_seconds A histogram.
# TYPE rocm_go:latency_seconds histogram
rocm_go:latency_seconds_bucket{le="0.1"} 2
rocm_go:latency_seconds_bucket{le="0.5"} 3
rocm_go:latency_seconds_bucket{le="2"} 4
rocm_go:latency_seconds_bucket{le="+Inf"} 5
rocm_go:latency_seconds_sum 8.45
rocm_go:latency_seconds_count 5
# HELP rocm_go:temperature A gauge.
# TYPE rocm_go:temperature gauge
rocm_go:temperature -1.5
# HELP rocm_go:tokens_total Tokens made.\nA second line, with a \\ backslash.
# TYPE rocm_go:tokens_total counter
rocm_go:tokens_total 4
`
	var b bytes.Buffer
	_, err := r.WriteTo(&b)
	require.NoError(t, err)
	assert.Equal(t, want, b.String())
	assert.Equal(t, 4.0, c.Value())
	n, sum := h.Count()
	assert.Equal(t, uint64(5), n)
	assert.InDelta(t, 8.45, sum, 1e-12)

	srv := httptest.NewServer(r)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/plain; version=0.0.4; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Equal(t, want, string(body))
	resp, err = http.Post(srv.URL, "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

func TestMetricsFormatFloat(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 12: "12", -7: "-7", 0.25: "0.25", 1e-9: "1e-09", 1e20: "1e+20",
		math.Inf(1): "+Inf", math.Inf(-1): "-Inf", math.NaN(): "NaN"} {
		assert.Equal(t, want, formatFloat(v))
	}
}

// TestMetricsMisuse: the caller's bugs panic at registration, where a
// test finds them.
func TestMetricsMisuse(t *testing.T) {
	r := NewRegistry()
	r.Counter("a_total", "")
	assert.Panics(t, func() { r.Counter("a_total", "") }, "twice")
	assert.Panics(t, func() { r.Gauge("1bad", "") }, "a name")
	assert.Panics(t, func() { r.CounterVec("b_total", "", "bad-label") }, "a label name")
	assert.Panics(t, func() { r.CounterVec("c_total", "", "__reserved") }, "a reserved label")
	assert.Panics(t, func() { r.Histogram("h", "", []float64{1, 1}) }, "buckets that do not increase")
	assert.Panics(t, func() { r.Histogram("h2", "", []float64{1, math.Inf(1)}) }, "+Inf is implied")
	v := r.CounterVec("d_total", "", "x")
	assert.Panics(t, func() { v.With("1", "2") }, "the wrong number of values")
}

// TestMetricsConcurrent updates and scrapes at once (run it with -race):
// nothing is lost, and every scrape is consistent.
func TestMetricsConcurrent(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("n_total", "")
	v := r.CounterVec("by_total", "", "k")
	g := r.Gauge("g", "")
	h := r.Histogram("h", "", []float64{1, 2, 3})
	var mu sync.Mutex
	live := 0
	r.GaugeFunc("live", "", nil, func(emit func(float64, ...string)) {
		mu.Lock()
		defer mu.Unlock()
		emit(float64(live))
	})
	const workers, each = 8, 1000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			live++
			mu.Unlock()
			for i := range each {
				c.Inc()
				v.With(strconv.Itoa(i % 3)).Add(0.5)
				g.Add(1)
				h.Observe(float64((w + i) % 4))
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for scraping := true; scraping; {
		select {
		case <-done:
			scraping = false
		default:
		}
		var b bytes.Buffer
		r.WriteTo(&b)
		var inf, count string
		for line := range strings.Lines(b.String()) {
			if s, ok := strings.CutPrefix(line, `h_bucket{le="+Inf"} `); ok {
				inf = s
			}
			if s, ok := strings.CutPrefix(line, "h_count "); ok {
				count = s
			}
		}
		require.NotEmpty(t, count)
		require.Equal(t, inf, count, "a histogram read whole")
	}
	assert.Equal(t, float64(workers*each), c.Value())
	assert.Equal(t, float64(workers*each), g.Value())
	total := 0.0
	for k := range 3 {
		total += v.With(strconv.Itoa(k)).Value()
	}
	assert.Equal(t, float64(workers*each)/2, total)
	n, _ := h.Count()
	assert.Equal(t, uint64(workers*each), n)
}
