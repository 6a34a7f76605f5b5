package main

import (
	"time"

	"github.com/rocm-go/rocm/internal/worker"
)

// The worker's metrics at GET /metrics carry vLLM's names, with rocm_go:
// for vllm: and the buckets vLLM uses, so that vLLM's dashboards and
// alerts need only the prefix changed.

// Finish reasons of the request_success_total series: OpenAI's two, vLLM's
// abort (the client went away), and the cuts and failures that are this
// worker's.
var finishedReasons = []string{"stop", "length", "abort", "timeout", "shutdown", "error"}

// metrics are the generation's series.
type metrics struct {
	reg          *worker.Registry
	promptTokens *worker.Counter
	genTokens    *worker.Counter
	ttft         *worker.Histogram
	itl          *worker.Histogram
	e2e          *worker.Histogram
	finished     *worker.CounterVec
	// The prefix cache's lookups and hits, in prompt tokens.
	prefixQueries, prefixHits *worker.Counter
}

func newMetrics(s *Server) *metrics {
	reg := worker.NewRegistry()
	m := &metrics{reg: reg,
		promptTokens: reg.Counter("rocm_go:prompt_tokens_total", "Prompt tokens prefilled, counted when a generation's first token comes."),
		genTokens:    reg.Counter("rocm_go:generation_tokens_total", "Tokens generated and sent to clients."),
		ttft: reg.Histogram("rocm_go:time_to_first_token_seconds", "Seconds from a generation's submission to the engine to its first token.",
			[]float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}),
		itl: reg.Histogram("rocm_go:time_per_output_token_seconds", "Seconds between a generation's successive tokens (inter-token latency).",
			[]float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}),
		e2e: reg.Histogram("rocm_go:e2e_request_latency_seconds", "Seconds from a generation's submission to its end, whatever the end.",
			[]float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}),
		finished: reg.CounterVec("rocm_go:request_success_total",
			"Generations ended, by finished_reason: stop and length (whole answers), abort (the client went away), timeout (-request-timeout, -queue-timeout), shutdown (cut by the drain), error.",
			"finished_reason"),
	}
	m.prefixQueries = reg.Counter("rocm_go:prefix_cache_queries_total", "Prompt tokens of the generations that started, looked up in the prefix cache.")
	m.prefixHits = reg.Counter("rocm_go:prefix_cache_hits_total", "Of those prompt tokens, the ones found in the prefix cache: not prefilled again.")
	reg.GaugeFunc("rocm_go:prefix_cache_hit_rate", "prefix_cache_hits_total over prefix_cache_queries_total, 0 to 1; absent before the first generation.", nil,
		func(emit func(float64, ...string)) {
			if q := m.prefixQueries.Value(); q > 0 {
				emit(m.prefixHits.Value() / q)
			}
		})
	for _, r := range finishedReasons {
		m.finished.With(r)
	}
	reg.GaugeFunc("rocm_go:num_requests_running", "Generations that have their first token and run in the engine's batch.", nil,
		func(emit func(float64, ...string)) { _, r := s.load.Counts(); emit(float64(r)) })
	reg.GaugeFunc("rocm_go:num_requests_waiting", "Generations submitted that wait for their first token (the engine's queue and their prefill).", nil,
		func(emit func(float64, ...string)) { w, _ := s.load.Counts(); emit(float64(w)) })
	reg.GaugeFunc("rocm_go:kv_cache_usage_perc", "The fraction of the KV cache's tokens that sequences hold, 0 to 1; absent until the model has loaded.", nil,
		func(emit func(float64, ...string)) {
			if b := s.loaded(); b != nil {
				emit(b.Stats().KVCacheUsage)
			}
		})
	reg.DeviceMemoryGauge(func() (int64, int64, bool) {
		if b := s.loaded(); b != nil {
			st := b.Stats()
			return st.DeviceMemoryInUse, st.DeviceMemoryCached, true
		}
		return 0, 0, false
	})
	return m
}

// timing follows one generation's tokens for the latency histograms.
type timing struct {
	m       *metrics
	start   time.Time // the submission
	last    time.Time // the last token
	started bool
	prompt  int // its prompt tokens, once started
	cached  int // of those, the ones the prefix cache held (the final event's)
}

// event records an event's tokens: the first event is the first token
// (the engine sends its first event with its first drawn token), the
// later ones the gaps between tokens.
func (t *timing) event(tokens, prompt int) {
	now := time.Now()
	if !t.started {
		t.started, t.prompt = true, prompt
		t.m.promptTokens.Add(float64(prompt))
		t.m.ttft.Observe(now.Sub(t.start).Seconds())
		t.last = now
	} else if tokens > 0 {
		t.m.itl.Observe(now.Sub(t.last).Seconds())
		t.last = now
	}
	t.m.genTokens.Add(float64(tokens))
}

// end counts the generation's end, and the prefix cache's part in its
// prompt when it started.
func (t *timing) end(reason string) {
	if t.started {
		t.m.prefixQueries.Add(float64(t.prompt))
		t.m.prefixHits.Add(float64(t.cached))
	}
	t.m.finished.With(reason).Inc()
	t.m.e2e.Observe(time.Since(t.start).Seconds())
}
