package safetensors

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
)

// hipDevice is HIP device 0, or the test is skipped below tier 2.
func hipDevice(t *testing.T) *candle.HIPDevice {
	t.Helper()
	n, err := hip.DeviceCount()
	if err == nil && n == 0 {
		err = candle.ErrDevice
	}
	var dev *candle.HIPDevice
	if err == nil {
		dev, err = candle.HIP(0)
	}
	testenv.Need(t, 2, "a GPU", err)
	return dev
}

// TestGPULoad loads a file's tensors of each dtype onto the GPU through
// the pinned upload, byte for byte, and a bf16 tensor converted to f32
// there as on the CPU.
func TestGPULoad(t *testing.T) {
	dev := hipDevice(t)
	rng := rand.New(rand.NewPCG(5, 6))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	es := map[string]entry{
		"a.f32":  {"F32", []int{300, 257}, random(300 * 257 * 4)},
		"b.bf16": {"BF16", []int{1000, 333}, random(1000 * 333 * 2)},
		"c.f16":  {"F16", []int{7}, random(14)},
		"e.u8":   {"U8", []int{12345}, random(12345)},
		"f.i64":  {"I64", []int{999}, random(999 * 8)},
		"h.i32":  {"I32", []int{5}, random(20)},
	}
	names := []string{"c.f16", "a.f32", "h.i32", "b.bf16", "e.u8", "f.i64"}
	path := writeFile(t, filepath.Join(t.TempDir(), "model.safetensors"), safetensorsBytes(t, names, es, nil))

	f, err := OpenFile(path, candle.WithTransfer(candle.Transfer{Chunk: 64 << 10}))
	require.NoError(t, err)
	var bytes int64
	for _, n := range []string{"a.f32", "b.bf16", "c.f16", "e.u8", "f.i64"} {
		x, err := f.Load(n, dev)
		require.NoError(t, err, n)
		got, err := candle.ToBytes(x)
		require.NoError(t, err)
		assert.Equal(t, es[n].data, got, n)
		x.Close()
		bytes += int64(len(es[n].data))
	}
	_, err = f.Load("h.i32", dev)
	assert.ErrorIs(t, err, candle.ErrDType, "I32 is not a candle dtype")
	st := f.TransferStats()
	require.NoError(t, st.Fallback)
	assert.Equal(t, bytes, st.Read, "every byte read into pinned buffers and copied from them")
	require.NoError(t, f.Close())

	// Converted on the device: the same values as on the CPU.
	var got [2][]float32
	for i, d := range []candle.Device{candle.CPU(), dev} {
		w, err := Open(path)
		require.NoError(t, err)
		x, err := w.Load("b.bf16", d)
		require.NoError(t, err)
		got[i] = values(t, x)
		x.Close()
		require.NoError(t, w.Close())
	}
	require.Len(t, got[1], len(got[0]))
	for i := range got[0] {
		// bf16 NaNs become f32 NaNs whose payloads may differ by device.
		bothNaN := math.IsNaN(float64(got[0][i])) && math.IsNaN(float64(got[1][i]))
		if !bothNaN && math.Float32bits(got[0][i]) != math.Float32bits(got[1][i]) {
			t.Fatalf("element %d: %v on the CPU, %v on the GPU", i, got[0][i], got[1][i])
		}
	}
}
