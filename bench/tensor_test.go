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

	ckpt, err := b.WriteCheckpoint(t.TempDir(), 16)
	require.NoError(t, err)
	// One layer and a 16th of the vocabulary, in BF16.
	embed, norms, attn, mlp := 8016*2048, 3*2048, 2*2048*2048+2*512*2048, 3*8192*2048
	assert.Equal(t, int64(2*(embed+norms+attn+mlp)), ckpt.Bytes)
	load, err := b.LoadTime(ckpt)
	require.NoError(t, err)
	pinned, err := b.PinnedRate(1 << 24)
	require.NoError(t, err)
	assert.Positive(t, pinned)
	t.Logf("a %d-byte checkpoint loaded in %v; pinned host→device at %.1f GB/s", ckpt.Bytes, load, pinned)
}
