package main

import (
	"math"
	"sync"
	"time"
)

// queueLoad follows the generations under way, so that a client turned
// away (a full queue, a queue wait too long) learns how long to wait
// rather than a constant. A generation waits from its submission until
// its first event, and runs from then until its end: the engine reports
// no admission, and its first event is its first drawn token.
type queueLoad struct {
	mu               sync.Mutex
	waiting, running int
	recent           [32]time.Duration // the durations of the last generations that finished
	n, next          int
}

// unknownDuration stands for a generation's duration before any has
// finished.
const unknownDuration = 10 * time.Second

// maxRetryAfter bounds the estimate: beyond it a client is better off
// with another worker than with this one's figure.
const maxRetryAfter = 600

func (q *queueLoad) submitted() {
	q.mu.Lock()
	q.waiting++
	q.mu.Unlock()
}

func (q *queueLoad) started() {
	q.mu.Lock()
	q.waiting--
	q.running++
	q.mu.Unlock()
}

// ended takes a generation off the counts; took > 0 records the duration
// of one that finished normally.
func (q *queueLoad) ended(started bool, took time.Duration) {
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

// retryAfter is the seconds a new request would wait for a slot now.
func (q *queueLoad) retryAfter() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	mean := unknownDuration
	if q.n > 0 {
		var sum time.Duration
		for _, d := range q.recent[:q.n] {
			sum += d
		}
		mean = sum / time.Duration(q.n)
	}
	return estimateWait(q.waiting, q.running, mean)
}

// estimateWait is the wait, in whole seconds, of a request behind waiting
// others while running generations of mean duration hold the slots: a
// slot frees every mean/running, and it needs waiting+1 of them.
func estimateWait(waiting, running int, mean time.Duration) int {
	d := float64(waiting+1) * mean.Seconds() / float64(max(running, 1))
	return int(min(max(math.Ceil(d), 1), maxRetryAfter))
}
