package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// callbackPayload is what -callback-url receives when a job ends.
type callbackPayload struct {
	JobID    string   `json:"job_id"`
	WorkerID string   `json:"worker_id"`
	Status   jobState `json:"status"`          // done, failed, canceled
	Images   []string `json:"images"`          // PNGs, base64, with their parameters
	Error    string   `json:"error,omitempty"` // why it did not finish
	Seed     uint64   `json:"seed"`
	Timings  timings  `json:"timings"`
}

// callbacks posts finished jobs to a URL from its own goroutine, retried
// with backoff; a full queue drops the oldest post (logged): generation
// never waits for the receiver.
type callbacks struct {
	url      string
	workerID string
	client   *http.Client
	log      *slog.Logger
	backoff  []time.Duration // between tries

	mu      sync.Mutex
	pending []*job // ended, their posts not yet made
	wake    chan struct{}
	done    chan struct{}
	ctx     context.Context // run's; finish cancels it
	stop    context.CancelFunc
}

// maxPendingCallbacks bounds the posts waiting: each holds its images.
const maxPendingCallbacks = 64

func checkCallbackURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("-callback-url %q: %v", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("-callback-url %q: want an http:// or https:// URL with a host", s)
	}
	return nil
}

func newCallbacks(url, workerID string, log *slog.Logger) *callbacks {
	ctx, stop := context.WithCancel(context.Background())
	return &callbacks{ctx: ctx, stop: stop, url: url, workerID: workerID, client: &http.Client{Timeout: 10 * time.Second}, log: log,
		backoff: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second},
		wake:    make(chan struct{}, 1), done: make(chan struct{})}
}

// add queues the post of a job's end; its PNGs are encoded on the
// callbacks' goroutine, off the runner's.
func (c *callbacks) add(j *job) {
	c.mu.Lock()
	if len(c.pending) >= maxPendingCallbacks {
		c.log.Warn("callback dropped: the receiver falls behind", "job", c.pending[0].id)
		c.pending = c.pending[1:]
	}
	c.pending = append(c.pending, j)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// payload is the post of an ended job.
func (c *callbacks) payload(j *job) callbackPayload {
	p := callbackPayload{JobID: j.id, WorkerID: c.workerID, Images: []string{}, Seed: j.req.Seed, Timings: jobTimings(j)}
	_, err, st := j.result()
	p.Status = st
	if err != nil {
		p.Error = err.Error()
	}
	if st == jobDone {
		imgs, err := pngs(j)
		if err != nil {
			p.Status, p.Error = jobFailed, err.Error()
		}
		for _, b := range imgs {
			p.Images = append(p.Images, b64(b))
		}
	}
	return p
}

// finish lets the pending posts go out for at most grace, then stops
// run.
func (c *callbacks) finish(grace time.Duration) {
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		idle := len(c.pending) == 0
		c.mu.Unlock()
		if idle {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.stop()
	<-c.done
}

// run posts until finish stops it.
func (c *callbacks) run() {
	ctx := c.ctx
	defer close(c.done)
	for {
		c.mu.Lock()
		var j *job
		if len(c.pending) > 0 {
			j = c.pending[0]
			c.pending = c.pending[1:]
		}
		c.mu.Unlock()
		if j == nil {
			select {
			case <-ctx.Done():
				return
			case <-c.wake:
			}
			continue
		}
		c.post(ctx, c.payload(j))
	}
}

// post sends one payload, retrying with backoff; a 4xx other than 408
// and 429 is not retried (the receiver refuses it).
func (c *callbacks) post(ctx context.Context, p callbackPayload) {
	body, _ := json.Marshal(p)
	var err error
	for try := 0; ; try++ {
		var status int
		status, err = c.once(body)
		if err == nil {
			return
		}
		if status/100 == 4 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests || try == len(c.backoff) {
			break
		}
		select {
		case <-time.After(c.backoff[try]):
		case <-ctx.Done(): // shutting down: no more waiting
			c.log.Warn("callback not delivered: the worker stopped", "job", p.JobID, "err", err)
			return
		}
	}
	c.log.Warn("callback not delivered", "job", p.JobID, "url", c.url, "err", err)
}

func (c *callbacks) once(body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}
