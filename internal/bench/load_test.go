package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenCheckpoint: a checkpoint written elsewhere is known by its scale,
// and a file too short for it, a missing one or a bad scale is an error.
func TestOpenCheckpoint(t *testing.T) {
	// One layer and a 16th of the vocabulary, in BF16 (as
	// TestTensorBenchmarksRun writes it).
	embed, norms, attn, mlp := 8016*2048, 3*2048, 2*2048*2048+2*512*2048, 3*8192*2048
	want := int64(2 * (embed + norms + attn + mlp))
	path := filepath.Join(t.TempDir(), "ckpt.safetensors")
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	require.NoError(t, os.Truncate(path, want))
	c, err := OpenCheckpoint(path, 16)
	require.NoError(t, err)
	assert.Equal(t, want, c.Bytes)
	assert.Len(t, c.shapes, 2+9)
	// The full checkpoint: 2.47 GB of tensors, 16 layers (a file of that
	// size passes: its header is not counted here).
	require.NoError(t, os.Truncate(path, 2471628800))
	c, err = OpenCheckpoint(path, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(2471628800), c.Bytes)
	assert.Len(t, c.shapes, 2+16*9)

	_, err = OpenCheckpoint(path, 0)
	assert.ErrorContains(t, err, "scale 0")
	require.NoError(t, os.Truncate(path, want-1))
	_, err = OpenCheckpoint(path, 16)
	assert.ErrorContains(t, err, "fewer than")
	_, err = OpenCheckpoint(filepath.Join(t.TempDir(), "missing"), 16)
	assert.ErrorIs(t, err, os.ErrNotExist)
}
