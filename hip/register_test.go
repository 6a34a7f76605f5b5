package hip

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mapFile writes data to a temporary file and maps it read-only, as a
// model loader maps its weights.
func mapFile(t *testing.T, data []byte) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "weights.bin")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, len(data), syscall.PROT_READ, syscall.MAP_SHARED)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Munmap(m) })
	return m
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return b
}

func TestFakeRuntimeRegisterHost(t *testing.T) {
	d := useFake(t)
	base := liveObjects(t, d)
	data := randomBytes(3*4096 + 123)
	m := mapFile(t, data)

	_, err := d.RegisterHost(nil, HostRegisterReadOnly)
	assert.ErrorIs(t, err, ErrInvalidValue)
	assert.ErrorContains(t, err, "register at least one byte")
	_, err = d.RegisterHost(m, 0x10)
	assert.ErrorIs(t, err, ErrInvalidValue)
	assert.ErrorContains(t, err, "flags 0x10")
	_, err = d.RegisterHost(m, HostRegisterIoMemory|HostRegisterReadOnly)
	assert.ErrorIs(t, err, ErrNotSupported)
	assert.ErrorContains(t, err, "hipHostRegisterIoMemory|hipHostRegisterReadOnly", "the error names the flags")
	assert.Equal(t, base, liveObjects(t, d), "a refused registration holds nothing")

	r, err := d.RegisterHost(m, HostRegisterReadOnly)
	require.NoError(t, err)
	assert.True(t, r.Registered())
	assert.Equal(t, len(data), r.Size())
	assert.Equal(t, data, r.Bytes(), "the registration views the mapping")
	assert.Equal(t, base+1, liveObjects(t, d))
	_, err = d.RegisterHost(m[4096:8192], HostRegisterDefault)
	assert.ErrorIs(t, err, &Error{Status: StatusHostMemoryAlreadyRegistered}, "an overlapping range")
	assert.ErrorContains(t, err, "4.0 KiB at")

	// Async copies take the registration and its views like pinned memory.
	s, err := d.NewStream()
	require.NoError(t, err)
	defer s.Close()
	buf, err := d.Malloc(len(data))
	require.NoError(t, err)
	defer buf.Close()
	for _, cut := range [][2]int{{0, 5000}, {5000, 4096}, {9096, len(data) - 9096}} {
		src, err := r.Slice(cut[0], cut[1])
		require.NoError(t, err)
		assert.True(t, src.Registered(), "a view of a registration is registered")
		dst, err := buf.Slice(cut[0], cut[1])
		require.NoError(t, err)
		require.NoError(t, dst.CopyFromHostAsync(src, s))
		require.NoError(t, src.Close(), "a view's Close does nothing")
	}
	require.NoError(t, s.Synchronize())
	got := make([]byte, len(data))
	require.NoError(t, buf.CopyToHost(got))
	assert.Equal(t, data, got)

	// CloseAfter waits for an event and unregisters; the range can be
	// registered again.
	e, err := d.NewEvent(EventDisableTiming)
	require.NoError(t, err)
	defer e.Close()
	assert.ErrorIs(t, r.CloseAfter(nil), ErrInvalidValue)
	assert.Equal(t, base+4, liveObjects(t, d), "still registered, beside the stream, buffer and event")
	require.NoError(t, e.Record(s))
	require.NoError(t, r.CloseAfter(e))
	assert.Equal(t, base+3, liveObjects(t, d), "unregistered")
	require.NoError(t, r.CloseAfter(e), "closing twice does nothing")
	require.NoError(t, r.Close())
	assert.ErrorIs(t, buf.CopyFromHostAsync(r, s), ErrClosed)

	again, err := d.RegisterHost(m[4096:], HostRegisterDefault)
	require.NoError(t, err, "the first registration is gone")
	require.NoError(t, again.Close())
	require.NoError(t, again.Close())
	assert.Equal(t, base+3, liveObjects(t, d), "only the stream, buffer and event are left")

	pin, err := d.MallocHost(64, HostMallocDefault)
	require.NoError(t, err)
	assert.False(t, pin.Registered())
	require.NoError(t, e.Record(nil))
	require.NoError(t, pin.CloseAfter(e), "CloseAfter frees allocated pinned memory too")
	assert.False(t, (*PinnedBuffer)(nil).Registered())
	assert.NoError(t, (*PinnedBuffer)(nil).CloseAfter(e))
}

func TestNVIDIARegisterHost(t *testing.T) {
	d := useFakeCUDA(t)
	data := randomBytes(2*4096 + 7)
	m := mapFile(t, data)
	r, err := d.RegisterHost(m, HostRegisterReadOnly|HostRegisterPortable)
	require.NoError(t, err, "the device was made current, and the flags are CUDA's")
	_, err = d.RegisterHost(m, HostRegisterReadOnly)
	assert.ErrorIs(t, err, &Error{Status: StatusHostMemoryAlreadyRegistered}, "CUDA's 712 is HIP's")
	buf, err := d.Malloc(len(data))
	require.NoError(t, err)
	defer buf.Close()
	require.NoError(t, buf.CopyFromHostAsync(r, nil))
	got := make([]byte, len(data))
	require.NoError(t, buf.CopyToHost(got))
	assert.Equal(t, data, got)
	require.NoError(t, r.Close(), "cudaHostUnregister of the same pointer")
	r, err = d.RegisterHost(m, HostRegisterDefault)
	require.NoError(t, err)
	require.NoError(t, r.Close())

	p, err := d.Properties()
	require.NoError(t, err)
	assert.True(t, p.HostRegisterSupported)
	assert.True(t, p.HostRegisterReadOnlySupported)
}
