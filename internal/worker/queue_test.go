package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestEstimateWait(t *testing.T) {
	for _, c := range []struct {
		waiting, running int
		mean             time.Duration
		want             int
	}{
		{0, 1, 4 * time.Second, 4},
		{3, 2, 10 * time.Second, 20},
		{1, 4, 3 * time.Second, 2}, // 1.5 s, rounded up
		{0, 0, 100 * time.Millisecond, 1},
		{1000, 1, 10 * time.Second, MaxRetryAfter},
	} {
		assert.Equal(t, c.want, EstimateWait(c.waiting, c.running, c.mean), "%+v", c)
	}
	var q QueueLoad
	assert.Equal(t, 10, q.RetryAfter(), "nothing known: UnknownDuration")
	for _, d := range []time.Duration{2 * time.Second, 6 * time.Second} {
		q.Submitted()
		q.Started()
		q.Ended(true, d)
	}
	q.Submitted()
	q.Submitted()
	q.Started()
	assert.Equal(t, 8, q.RetryAfter(), "one waiting, one running, 4 s each")
	q.Ended(false, 0)
	q.Ended(true, 0)
	w, r := q.Counts()
	assert.Equal(t, [2]int{0, 0}, [2]int{w, r})
}

func TestRateMeter(t *testing.T) {
	now := time.Unix(1e9, 0)
	m := RateMeter{Now: func() time.Time { return now }}
	assert.Zero(t, m.Rate(100), "nothing to compare with yet")
	now = now.Add(2 * time.Second)
	assert.Equal(t, 50.0, m.Rate(200))
	assert.Zero(t, m.Rate(200), "no time passed")
}
