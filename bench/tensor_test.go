package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/internal/testenv"
)

// TestTensorBenchmarksRun runs each tensor measurement once at a 64th of
// the sizes, so that tier 2 checks the benchmark code itself.
func TestTensorBenchmarksRun(t *testing.T) {
	b, err := OpenTensors()
	testenv.Need(t, 2, "a GPU", err)
	defer b.Close()
	ops, err := b.Ops(64)
	require.NoError(t, err)
	require.NotEmpty(t, ops)
	for _, op := range ops {
		d, err := b.DeviceTime(op)
		require.NoError(t, err, op.Name)
		assert.Positive(t, d, op.Name)
		assert.Positive(t, op.Bytes, op.Name)
		t.Logf("%s: %v, %d bytes", op.Name, d, op.Bytes)
		op.Close()
	}
	tiny, err := b.TinyAdd(1024)
	require.NoError(t, err)
	defer tiny.Close()
	wall, err := b.WallPerOp(tiny, 10)
	require.NoError(t, err)
	assert.Positive(t, wall)
	cold, warm, err := b.FirstUse()
	require.NoError(t, err)
	assert.Positive(t, cold)
	assert.Positive(t, warm)
	rate, err := b.CopyRate(1 << 24)
	require.NoError(t, err)
	assert.Positive(t, rate)
	t.Logf("first use %v cold, %v warm; copies at %.0f GB/s", cold, warm, rate)
}
