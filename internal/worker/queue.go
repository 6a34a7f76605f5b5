package worker

import (
	"math"
	"sync"
	"time"
)

// QueueLoad follows the generations under way, so that a client turned
// away (a full queue, a queue wait too long) learns how long to wait
// rather than a constant. A generation waits from its submission until
// its first event, and runs from then until its end: the engine reports
// no admission, and its first event is its first drawn token.
type QueueLoad struct {
	mu               sync.Mutex
	waiting, running int
	recent           [32]time.Duration // the durations of the last generations that finished
	n, next          int
}

// UnknownDuration stands for a generation's duration before any has
// finished.
const UnknownDuration = 10 * time.Second

// MaxRetryAfter bounds the estimate: beyond it a client is better off
// with another worker than with this one's figure.
const MaxRetryAfter = 600

// Submitted counts a generation that waits for a slot.
func (q *QueueLoad) Submitted() {
	q.mu.Lock()
	q.waiting++
	q.mu.Unlock()
}

// Started moves a generation from waiting to running.
func (q *QueueLoad) Started() {
	q.mu.Lock()
	q.waiting--
	q.running++
	q.mu.Unlock()
}

// Ended takes a generation off the counts; took > 0 records the duration
// of one that finished normally.
func (q *QueueLoad) Ended(started bool, took time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if started {
		q.running--
	} else {
		q.waiting--
	}
	if took > 0 {
		q.recent[q.next] = took
		q.next = (q.next + 1) % len(q.recent)
		q.n = min(q.n+1, len(q.recent))
	}
}

// RetryAfter is the seconds a new request would wait for a slot now.
func (q *QueueLoad) RetryAfter() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	mean := UnknownDuration
	if q.n > 0 {
		var sum time.Duration
		for _, d := range q.recent[:q.n] {
			sum += d
		}
		mean = sum / time.Duration(q.n)
	}
	return EstimateWait(q.waiting, q.running, mean)
}

// EstimateWait is the wait, in whole seconds, of a request behind waiting
// others while running generations of mean duration hold the slots: a
// slot frees every mean/running, and it needs waiting+1 of them.
func EstimateWait(waiting, running int, mean time.Duration) int {
	d := float64(waiting+1) * mean.Seconds() / float64(max(running, 1))
	return int(min(max(math.Ceil(d), 1), MaxRetryAfter))
}

// Counts is the generations waiting and running now.
func (q *QueueLoad) Counts() (waiting, running int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting, q.running
}

// Recorded is how many finished generations the estimate averages (at
// most 32, the latest).
func (q *QueueLoad) Recorded() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// RateMeter turns a growing count (tokens, images) into a rate per
// second between calls.
type RateMeter struct {
	mu   sync.Mutex
	last int64
	at   time.Time
	Now  func() time.Time // tests set it
}

// Rate is the count's growth per second since the last call (since the
// first call for the second; 0 at the first).
func (m *RateMeter) Rate(count int64) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if m.Now != nil {
		now = m.Now()
	}
	var r float64
	if !m.at.IsZero() && now.After(m.at) {
		r = float64(count-m.last) / now.Sub(m.at).Seconds()
	}
	m.last, m.at = count, now
	return r
}
