package gguf

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
)

// TestGPULoad loads a GGUF file's tensors onto the GPU through candle's
// pinned upload, as safetensors files go: the quantized blocks and the
// float tensors byte for byte as the file holds them, every byte read into
// pinned buffers, none staged.
func TestGPULoad(t *testing.T) {
	n, err := hip.DeviceCount()
	if err == nil && n == 0 {
		err = candle.ErrDevice
	}
	var dev *candle.HIPDevice
	if err == nil {
		dev, err = candle.HIP(0)
	}
	testenv.Need(t, 2, "a GPU", err)

	b, data := sample(t)
	path := filepath.Join(t.TempDir(), "m.gguf")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	f, err := Open(path, candle.WithTransfer(candle.Transfer{Chunk: 4096, Workers: 2, Ahead: 2}))
	require.NoError(t, err)
	var bytes int64
	for _, name := range []string{"b.q8", "a.f32", "c.f16"} {
		var got []byte
		if info, _ := f.Info(name); info.Quantized {
			q, err := f.LoadQ(name, dev)
			require.NoError(t, err, name)
			bl, err := q.Blocks()
			require.NoError(t, err)
			got, err = candle.ToBytes(bl)
			require.NoError(t, err)
			bl.Close()
			q.Close()
		} else {
			x, err := f.Load(name, dev)
			require.NoError(t, err, name)
			got, err = candle.ToBytes(x)
			require.NoError(t, err)
			x.Close()
		}
		assert.Equal(t, data[name], got, name)
		bytes += int64(len(data[name]))
	}
	st := f.TransferStats()
	t.Logf("%+v", st)
	require.NoError(t, st.Fallback)
	assert.Equal(t, bytes, st.Read, "through pinned buffers")
	assert.Zero(t, st.Staged)
	require.NoError(t, f.Close())
}
