package candle

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
)

func TestCopyFromPinnedRefusesCPU(t *testing.T) {
	x, err := FromSlice(CPU(), []float32{1, 2, 3})
	require.NoError(t, err)
	err = x.CopyFromPinned(0, nil)
	assert.ErrorIs(t, err, ErrDevice)
	assert.ErrorContains(t, err, "pinned memory is copied to a HIP device's tensors")
	require.NoError(t, x.Close())
	assert.ErrorIs(t, x.CopyFromPinned(0, nil), ErrClosed)
}

// TestGPUCopyFromPinned fills tensors from Empty piece by piece, from
// MallocHost's memory and from a registered read-only file mapping, and
// reads them back; the output starts poisoned (gpu), so a byte left
// unwritten shows.
func TestGPUCopyFromPinned(t *testing.T) {
	d := gpu(t)
	const n = 3<<20 + 77 // elements: pieces at odd offsets
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dt := range []DType{F32, F16, BF16} {
		want := make([]float64, n)
		for i := range want {
			want[i] = rng.Float64()*2 - 1
		}
		host := tensorOf(t, CPU(), dt, want, n)
		raw, err := ToBytes(host)
		require.NoError(t, err)
		host.Close()

		pin, err := d.HIP().MallocHost(len(raw), hip.HostMallocDefault)
		require.NoError(t, err)
		copy(pin.Bytes(), raw)
		x, err := Empty(d, dt, n)
		require.NoError(t, err)
		cuts := []int{0, dt.Size(), 1000 * dt.Size(), len(raw) / 2, len(raw)}
		for i := 1; i < len(cuts); i++ {
			part, err := pin.Slice(cuts[i-1], cuts[i]-cuts[i-1])
			require.NoError(t, err)
			require.NoError(t, x.CopyFromPinned(cuts[i-1], part))
		}
		got, err := ToBytes(x)
		require.NoError(t, err)
		assert.Equal(t, raw, got, "%s from MallocHost's memory", dt)

		// Bad pieces are refused before any copy.
		err = x.CopyFromPinned(len(raw)-1, pin)
		assert.ErrorIs(t, err, ErrArgument)
		assert.ErrorContains(t, err, "do not fit")
		assert.ErrorIs(t, x.CopyFromPinned(-1, pin), ErrArgument)
		assert.ErrorIs(t, x.CopyFromPinned(0, nil), ErrArgument)
		x2, err := x.Reshape(5, n/5)
		require.NoError(t, err)
		xt, err := x2.T()
		require.NoError(t, err)
		assert.ErrorIs(t, xt.CopyFromPinned(0, pin), ErrArgument, "a transposed view is not contiguous")
		xt.Close()
		x2.Close()
		v, err := x.Narrow(0, 1, 100)
		require.NoError(t, err)
		small, err := pin.Slice(0, 100*dt.Size())
		require.NoError(t, err)
		require.NoError(t, v.CopyFromPinned(0, small), "a contiguous narrowed view starts at its offset")
		gotV, err := ToBytes(v)
		require.NoError(t, err)
		assert.Equal(t, raw[:100*dt.Size()], gotV)
		v.Close()
		require.NoError(t, d.Synchronize())
		require.NoError(t, pin.Close())
		x.Close()

		// A read-only file mapping, registered: what loading does.
		path := filepath.Join(t.TempDir(), "w.bin")
		require.NoError(t, os.WriteFile(path, raw, 0o600))
		f, err := os.Open(path)
		require.NoError(t, err)
		m, err := syscall.Mmap(int(f.Fd()), 0, len(raw), syscall.PROT_READ, syscall.MAP_SHARED)
		f.Close()
		require.NoError(t, err)
		reg, err := d.HIP().RegisterHost(m, hip.HostRegisterReadOnly)
		if err != nil {
			syscall.Munmap(m)
			if hip.LoadedPlatform() == hip.PlatformAMD {
				t.Skipf("tier 2: this AMD runtime refuses to register a read-only file mapping: %v", err)
			}
			require.NoError(t, err)
		}
		y, err := Empty(d, dt, n)
		require.NoError(t, err)
		require.NoError(t, y.CopyFromPinned(0, reg))
		require.NoError(t, reg.Close(), "waits for the copy")
		require.NoError(t, syscall.Munmap(m))
		gotY, err := ToBytes(y)
		require.NoError(t, err)
		assert.Equal(t, raw, gotY, "%s from a registered file mapping", dt)
		y.Close()
	}
}
