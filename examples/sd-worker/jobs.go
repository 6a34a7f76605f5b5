package main

import (
	"context"
	"errors"
	"image"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocm-go/rocm/candle/models/sd"
	"github.com/rocm-go/rocm/internal/worker"
)

// jobState is where a job is in its life.
type jobState string

const (
	jobQueued   jobState = "queued"
	jobRunning  jobState = "running"
	jobDone     jobState = "done"
	jobFailed   jobState = "failed"
	jobCanceled jobState = "canceled"
)

// job is one request's generation: queued, then run (alone or batched
// with others), then done. Its context is the request's: a client that
// goes away, a DELETE of the job, an interrupt or the shutdown cancel it.
type job struct {
	id       string
	req      sd.Request
	info     params   // the settings, for the PNGs' parameters
	warnings []string // what the worker changed in the request (a prompt truncated)
	ctx      context.Context
	cancel   context.CancelCauseFunc
	created  time.Time
	done     chan struct{}                                     // closed when the job has ended
	record   func(st jobState, images int, took time.Duration) // the metrics, before done closes

	mu       sync.Mutex
	state    jobState
	step     int
	steps    int
	started  time.Time
	finished time.Time
	preview  []*image.RGBA
	notify   chan struct{} // closed, and replaced, at each change
	images   []*image.RGBA
	err      error
	batched  int // the requests in the UNet batch it ran in
}

// errInterrupted is the cause of a job canceled by DELETE or by
// /sdapi/v1/interrupt.
var errInterrupted = errors.New("the job was interrupted")

func newJob(ctx context.Context, id string, req sd.Request, info params) *job {
	j := &job{id: id, req: req, info: info, created: time.Now(), done: make(chan struct{}), state: jobQueued,
		steps: req.Steps, notify: make(chan struct{})}
	j.ctx, j.cancel = context.WithCancelCause(ctx)
	return j
}

// jobStatus is a job as GET /v1/jobs/{id} and the progress events show it.
type jobStatus struct {
	ID       string   `json:"id"`
	State    jobState `json:"state"`
	Step     int      `json:"step"`
	Steps    int      `json:"steps"`
	Progress float64  `json:"progress"`        // 0 to 1
	ETA      float64  `json:"eta_s"`           // seconds left, estimated
	Batched  int      `json:"batched"`         // requests in the UNet batch, once running
	Error    string   `json:"error,omitempty"` // why it failed or was canceled
	Queued   float64  `json:"queued_s"`        // seconds it waited
	Elapsed  float64  `json:"elapsed_s"`       // seconds since it was submitted
}

// status is the job now, and the channel closed at its next change.
func (j *job) status() (jobStatus, <-chan struct{}) {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := jobStatus{ID: j.id, State: j.state, Step: j.step, Steps: j.steps, Batched: j.batched, Elapsed: time.Since(j.created).Seconds()}
	if j.steps > 0 {
		s.Progress = float64(j.step) / float64(j.steps)
	}
	if !j.started.IsZero() {
		s.Queued = j.started.Sub(j.created).Seconds()
		if j.step > 0 && j.state == jobRunning {
			per := time.Since(j.started).Seconds() / float64(j.step)
			s.ETA = per * float64(j.steps-j.step)
		}
	}
	if j.err != nil {
		s.Error = j.err.Error()
	}
	if j.state == jobDone {
		s.Progress = 1
	}
	return s, j.notify
}

// changed wakes the watchers; j.mu is held.
func (j *job) changed() {
	close(j.notify)
	j.notify = make(chan struct{})
}

func (j *job) begin(batched int) {
	j.mu.Lock()
	j.state, j.started, j.batched = jobRunning, time.Now(), batched
	j.changed()
	j.mu.Unlock()
}

func (j *job) progress(p sd.Progress) {
	j.mu.Lock()
	j.step, j.steps = p.Step, p.Steps
	if p.Preview != nil {
		j.preview = p.Preview
	}
	j.changed()
	j.mu.Unlock()
}

// lastPreview is the latest preview image of the job's first image, nil
// when none was asked for or made yet.
func (j *job) lastPreview() *image.RGBA {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.preview) == 0 {
		return nil
	}
	return j.preview[0]
}

// end records the outcome and wakes everyone waiting.
func (j *job) end(images []*image.RGBA, err error) {
	j.mu.Lock()
	if j.finished.IsZero() {
		j.images, j.err, j.finished = images, err, time.Now()
		switch {
		case err == nil:
			j.state, j.step = jobDone, j.steps
		case j.ctx.Err() != nil:
			j.state, j.err = jobCanceled, context.Cause(j.ctx)
		default:
			j.state = jobFailed
		}
		j.changed()
		if j.record != nil { // before the client hears: its next scrape counts it
			j.record(j.state, len(images), j.finished.Sub(j.created))
		}
		close(j.done)
	}
	j.mu.Unlock()
	j.cancel(nil)
}

// result is the images or the error, once done is closed.
func (j *job) result() ([]*image.RGBA, error, jobState) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.images, j.err, j.state
}

// runner runs the jobs one UNet batch at a time on the device: a job
// waits in the queue while a batch runs, and the next batch takes the
// oldest job with every waiting job that can share its UNet batch (the
// same size, steps, sampler; txt2img), up to maxBatch images.
type runner struct {
	b        Backend
	maxBatch int // images in one UNet batch; 1: no batching
	maxQueue int // jobs waiting, beyond which a submission gets 429
	log      *slog.Logger
	metrics  *metrics
	onEnd    func(*job) // after each job ends (the callback)

	mu      sync.Mutex
	queue   []*job
	running []*job
	jobs    map[string]*job // the queued, the running and the latest finished
	ended   []*job          // finished, oldest first, kept for GET
	wake    chan struct{}
	load    worker.QueueLoad
	rate    worker.RateMeter
}

// keepEnded is how many finished jobs GET /v1/jobs/{id} still knows.
const keepEnded = 256

func newRunner(b Backend, maxBatch, maxQueue int, log *slog.Logger, m *metrics) *runner {
	return &runner{b: b, maxBatch: max(maxBatch, 1), maxQueue: maxQueue, log: log, metrics: m, jobs: map[string]*job{}, wake: make(chan struct{}, 1)}
}

// submit queues j, or says why not (429 when the queue is full, 409 for
// an id in use).
func (r *runner) submit(j *job) *worker.Error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.jobs[j.id]; ok {
		if _, _, st := old.result(); st == jobQueued || st == jobRunning {
			return &worker.Error{Status: http.StatusConflict, Type: "invalid_request_error", Code: worker.Str("job_exists"),
				Message: "a job with id " + j.id + " is under way: use another id"}
		}
	}
	if len(r.queue) >= r.maxQueue {
		return &worker.Error{Status: http.StatusTooManyRequests, Type: "server_error", Code: worker.Str("queue_full"), RetryAfter: r.load.RetryAfter(),
			Message: "the worker's queue is full: retry after Retry-After seconds, or on another worker"}
	}
	j.record = r.recordEnd
	r.queue = append(r.queue, j)
	r.jobs[j.id] = j
	r.load.Submitted()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return nil
}

// job is the job of id, nil when none is known.
func (r *runner) job(id string) *job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobs[id]
}

// current is the running jobs.
func (r *runner) current() []*job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*job(nil), r.running...)
}

// counts is the jobs waiting and running.
func (r *runner) counts() (waiting, running int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue), len(r.running)
}

// run runs batches until ctx ends; the jobs still queued then end
// canceled.
func (r *runner) run(ctx context.Context) {
	for {
		batch := r.next()
		if batch == nil {
			select {
			case <-ctx.Done():
				r.mu.Lock()
				q := r.queue
				r.queue = nil
				r.mu.Unlock()
				for _, j := range q {
					j.cancel(worker.ErrShutdown)
					r.finish(j, nil, context.Cause(j.ctx), false)
				}
				return
			case <-r.wake:
			}
			continue
		}
		r.runBatch(batch)
	}
}

// next takes the oldest live job and the waiting ones that share its
// UNet batch; jobs canceled while they waited end here. A batch holds a
// power of two of images (1, 2, 4, ...): each new batch size is a new set
// of convolution shapes, whose algorithms the library searches for (cuDNN
// and MIOpen's Find: tens of seconds for SD's UNet and VAE on an H200), so
// the worker keeps to few, and warms them up at start (batchSizes).
func (r *runner) next() []*job {
	r.mu.Lock()
	var dead, batch []*job
	chosen := map[*job]bool{}
	var key string
	images := 0
	for _, j := range r.queue {
		switch {
		case j.ctx.Err() != nil:
			dead = append(dead, j)
			chosen[j] = true
		case batch == nil:
			batch = []*job{j}
			chosen[j] = true
			key, _ = r.b.BatchKey(j.req)
			images = j.req.Batch
		case key != "" && images+j.req.Batch <= r.maxBatch:
			if k, ok := r.b.BatchKey(j.req); ok && k == key {
				batch = append(batch, j)
				chosen[j] = true
				images += j.req.Batch
			}
		}
	}
	for len(batch) > 1 && images&(images-1) != 0 { // not a power of two: the last ones wait
		last := batch[len(batch)-1]
		batch = batch[:len(batch)-1]
		delete(chosen, last)
		images -= last.req.Batch
	}
	rest := r.queue[:0]
	for _, j := range r.queue {
		if !chosen[j] {
			rest = append(rest, j)
		}
	}
	clear(r.queue[len(rest):])
	r.queue = rest
	r.running = batch
	r.mu.Unlock()
	for _, j := range dead {
		r.finish(j, nil, context.Cause(j.ctx), false)
	}
	return batch
}

// batchSizes are the image counts of the batches a runner makes: the
// powers of two up to maxBatch.
func batchSizes(maxBatch int) []int {
	var out []int
	for n := 1; n <= maxBatch; n *= 2 {
		out = append(out, n)
	}
	return out
}

// runBatch runs jobs as one UNet batch. The batch's context ends when
// every job's has: a job whose client left mid-run is answered at once,
// and the others go on.
func (r *runner) runBatch(jobs []*job) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var live atomic.Int32
	live.Store(int32(len(jobs)))
	reqs := make([]sd.Request, len(jobs))
	steps := &stepCounter{m: r.metrics}
	r.metrics.batchSize.Observe(float64(len(jobs)))
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		r.load.Started()
		j.begin(len(jobs))
		r.metrics.queued.Observe(time.Since(j.created).Seconds())
		ids[i] = j.id
		stop := context.AfterFunc(j.ctx, func() {
			j.end(nil, context.Cause(j.ctx))
			if live.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
		reqs[i] = j.req
		reqs[i].Progress = func(p sd.Progress) {
			steps.heard(p)
			j.progress(p)
		}
	}
	start := time.Now()
	out, err := r.b.Generate(ctx, reqs)
	took := time.Since(start)
	for i, j := range jobs {
		if err != nil {
			r.finish(j, nil, err, true)
			continue
		}
		if j.req.Mask != nil {
			for _, img := range out[i] {
				overlay(img, j.req.Init, j.req.Mask)
			}
		}
		r.finish(j, out[i], nil, true)
	}
	if err == nil {
		r.log.Debug("batch done", "requests", len(jobs), "jobs", ids, "took", took.Round(time.Millisecond))
	}
	r.mu.Lock()
	r.running = nil
	r.mu.Unlock()
}

// recordEnd counts a job's end in the metrics.
func (r *runner) recordEnd(st jobState, images int, took time.Duration) {
	r.metrics.jobs.With(string(st)).Inc()
	if st == jobDone {
		r.metrics.images.Add(float64(images))
		r.metrics.latency.Observe(took.Seconds())
	}
}

// finish ends a job and files it among the ended ones.
func (r *runner) finish(j *job, images []*image.RGBA, err error, started bool) {
	j.end(images, err)
	_, jerr, st := j.result()
	var took time.Duration
	if st == jobDone {
		took = time.Since(j.created)
	}
	r.load.Ended(started, took)
	r.mu.Lock()
	r.ended = append(r.ended, j)
	if len(r.ended) > keepEnded {
		if old := r.ended[0]; r.jobs[old.id] == old {
			delete(r.jobs, old.id)
		}
		r.ended = r.ended[1:]
	}
	r.mu.Unlock()
	if jerr != nil && st == jobFailed {
		r.log.ErrorContext(j.ctx, "generation failed", "job", j.id, "err", jerr)
	}
	if r.onEnd != nil {
		r.onEnd(j)
	}
}
