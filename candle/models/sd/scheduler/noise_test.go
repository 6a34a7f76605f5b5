package scheduler

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNoiseIsTheSeeds(t *testing.T) {
	// Pinned: a change here changes every seed's image.
	assert.Equal(t, []float64{1.063433866283498, -1.025367606232752, 1.9636520655737326, 1.018424045360596}, NewNoise(42).Float64s(4))
	a, b := NewNoise(7), NewNoise(7)
	f := make([]float32, 5)
	a.Fill(f)
	for i, v := range b.Float64s(5) {
		assert.Equal(t, float32(v), f[i])
	}
	assert.NotEqual(t, NewNoise(8).Float64s(3), NewNoise(7).Float64s(3))
}

func TestNoiseIsStandardNormal(t *testing.T) {
	const n = 200000
	v := NewNoise(1).Float64s(n)
	var sum, sq, within float64
	for _, x := range v {
		sum += x
		sq += x * x
		if math.Abs(x) < 1 {
			within++
		}
	}
	mean := sum / n
	assert.InDelta(t, 0, mean, 0.01)
	assert.InDelta(t, 1, sq/n-mean*mean, 0.01)
	assert.InDelta(t, 0.6827, within/n, 0.005, "within one standard deviation")
}
