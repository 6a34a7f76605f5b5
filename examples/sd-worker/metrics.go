package main

import (
	"sync/atomic"

	"github.com/rocm-go/rocm/candle/models/sd"
	"github.com/rocm-go/rocm/internal/worker"
)

// metrics are the image worker's series at GET /metrics.
type metrics struct {
	reg       *worker.Registry
	images    *worker.Counter
	steps     *worker.Counter
	jobs      *worker.CounterVec
	latency   *worker.Histogram
	queued    *worker.Histogram
	batchSize *worker.Histogram
}

// jobSeconds are the buckets of a job's times: from a turbo model's
// fraction of a second to an XL batch's minutes.
var jobSeconds = []float64{0.1, 0.25, 0.5, 1, 2, 4, 6, 8, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200}

func newMetrics(s *Server) *metrics {
	reg := worker.NewRegistry()
	m := &metrics{reg: reg,
		images: reg.Counter("rocm_go:images_generated_total", "Images made by jobs that finished."),
		steps:  reg.Counter("rocm_go:steps_total", "Denoising steps the UNet ran, a batch's step counted once (its rate is the worker's it/s)."),
		jobs:   reg.CounterVec("rocm_go:jobs_total", "Jobs ended, by state: done, failed, canceled (the client left, DELETE, interrupt, the drain).", "state"),
		latency: reg.Histogram("rocm_go:job_latency_seconds", "Seconds from a job's submission to its images, for the jobs that finished.",
			jobSeconds),
		queued: reg.Histogram("rocm_go:job_queue_time_seconds", "Seconds a job waited in the queue before its UNet batch began.",
			jobSeconds),
		batchSize: reg.Histogram("rocm_go:batch_size", "Requests (jobs) that shared each UNet batch.",
			[]float64{1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32}),
	}
	for _, st := range []jobState{jobDone, jobFailed, jobCanceled} {
		m.jobs.With(string(st))
	}
	reg.GaugeFunc("rocm_go:num_jobs_running", "Jobs in the UNet batch that runs.", nil,
		func(emit func(float64, ...string)) { _, r := s.counts(); emit(float64(r)) })
	reg.GaugeFunc("rocm_go:num_jobs_waiting", "Jobs queued for a UNet batch.", nil,
		func(emit func(float64, ...string)) { w, _ := s.counts(); emit(float64(w)) })
	reg.DeviceMemoryGauge(func() (int64, int64, bool) {
		if b, _ := s.loaded(); b != nil {
			mem := b.Memory()
			return mem.InUse, mem.Cached, true
		}
		return 0, 0, false
	})
	return m
}

// stepCounter counts a batch's steps once, however many of its
// requests hear each step.
type stepCounter struct {
	m    *metrics
	done atomic.Int64
}

// heard takes a step a request heard of.
func (c *stepCounter) heard(p sd.Progress) {
	for {
		old := c.done.Load()
		if int64(p.Step) <= old {
			return
		}
		if c.done.CompareAndSwap(old, int64(p.Step)) {
			c.m.steps.Add(float64(int64(p.Step) - old))
			return
		}
	}
}
