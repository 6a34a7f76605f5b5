package main

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
)

func TestTourOnCPU(t *testing.T) {
	var out strings.Builder
	base := candle.CPU().MemoryStats().InUse
	require.NoError(t, run(&out, "cpu", 33, 7))
	assert.Equal(t, base, candle.CPU().MemoryStats().InUse, "the tour closes what it makes")
	for _, s := range steps {
		assert.Contains(t, out.String(), s.name)
	}
	assert.Contains(t, out.String(), "sum over rows              33 f32")
	assert.Contains(t, out.String(), "cat(x, y) along columns    33×2048 f32")
	assert.Contains(t, out.String(), "memory: ")
	assert.ErrorContains(t, run(&out, "cpu", 0, 7), "want at least 1 row")
	assert.ErrorContains(t, run(&out, "tpu", 1, 7), "not a device")
	assert.NotContains(t, out.String(), "NaN")
}

func TestRelDiff(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	assert.Equal(t, 0.0, relDiff(nan, nan))
	assert.Equal(t, inf, relDiff(1, nan))
	assert.Equal(t, inf, relDiff(nan, 1))
	assert.Equal(t, 0.0, relDiff(inf, inf))
	assert.Equal(t, 0.25, relDiff(0.5, 0.25))
	assert.Equal(t, 0.5, relDiff(4, 6))
}

// TestTourOnGPU checks every step on the GPU against the CPU.
func TestTourOnGPU(t *testing.T) {
	n, err := hip.DeviceCount()
	if err == nil && n == 0 {
		err = candle.ErrDevice
	}
	testenv.Need(t, 2, "a GPU", err)
	var out strings.Builder
	require.NoError(t, run(&out, "hip:0", 1000, 7))
	t.Log(out.String())
	assert.Equal(t, len(steps), strings.Count(out.String(), "exact")+strings.Count(out.String(), "max rel. diff"))
}
