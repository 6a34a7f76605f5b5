package hip_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
)

// TestGPURegisterHostFileMapping registers a read-only mapping of a file
// (what a model loader does) and copies from it to the device at odd
// offsets and sizes; then a writable anonymous mapping both ways.
func TestGPURegisterHostFileMapping(t *testing.T) {
	d := gpu(t)
	p, err := d.Properties()
	require.NoError(t, err)
	t.Logf("%s: hostRegisterSupported=%v hostRegisterReadOnlySupported=%v", p.Name, p.HostRegisterSupported, p.HostRegisterReadOnlySupported)

	const size = 64<<20 + 12345
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	path := filepath.Join(t.TempDir(), "weights.bin")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	require.NoError(t, err)
	defer syscall.Munmap(m)

	start := time.Now()
	r, err := d.RegisterHost(m, hip.HostRegisterReadOnly)
	if err != nil && hip.LoadedPlatform() == hip.PlatformAMD {
		t.Skipf("tier 2: this AMD runtime refuses to register a read-only file mapping (loaders stage instead): %v", err)
	}
	require.NoError(t, err, "CUDA registers a read-only file mapping with the read-only flag")
	t.Logf("registered %d MiB of a read-only file mapping in %v", size>>20, time.Since(start))
	_, err = d.RegisterHost(m[1<<20:2<<20], hip.HostRegisterReadOnly)
	assert.Error(t, err, "a range inside a registration cannot be registered again")
	t.Logf("registering it again: %v", err)

	s, err := d.NewStream(hip.WithStreamFlags(hip.StreamNonBlocking))
	require.NoError(t, err)
	defer s.Close()
	buf, err := d.Malloc(size)
	require.NoError(t, err)
	defer buf.Close()
	require.NoError(t, buf.Memset(0xA5), "poison")
	start = time.Now()
	for _, cut := range [][2]int{{0, 1}, {1, 4095}, {4096, 3<<20 + 17}, {3<<20 + 4113, size - (3<<20 + 4113)}} {
		src, err := r.Slice(cut[0], cut[1])
		require.NoError(t, err)
		dst, err := buf.Slice(cut[0], cut[1])
		require.NoError(t, err)
		require.NoError(t, dst.CopyFromHostAsync(src, s))
	}
	e, err := d.NewEvent(hip.EventDisableTiming)
	require.NoError(t, err)
	defer e.Close()
	require.NoError(t, e.Record(s))
	require.NoError(t, r.CloseAfter(e), "waits for the copies, then unregisters")
	t.Logf("copied and unregistered in %v (%.1f GB/s)", time.Since(start), float64(size)/time.Since(start).Seconds()/1e9)
	got := make([]byte, size)
	require.NoError(t, buf.CopyToHost(got))
	assert.True(t, bytes.Equal(data, got), "the device holds the file")

	again, err := d.RegisterHost(m[4096:], hip.HostRegisterReadOnly)
	require.NoError(t, err, "CloseAfter unregistered the mapping")
	require.NoError(t, again.Close())

	// A writable anonymous mapping, registered with the default flags,
	// is written by the device too.
	anon, err := syscall.Mmap(-1, 0, 1<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	require.NoError(t, err)
	defer syscall.Munmap(anon)
	w, err := d.RegisterHost(anon, hip.HostRegisterDefault)
	require.NoError(t, err)
	small, err := buf.Slice(777, 1<<20)
	require.NoError(t, err)
	require.NoError(t, small.CopyToHostAsync(w, s))
	require.NoError(t, s.Synchronize())
	assert.True(t, bytes.Equal(data[777:777+1<<20], anon), "the device wrote the registered mapping")
	for i := range anon {
		anon[i] = byte(i * 7)
	}
	require.NoError(t, small.CopyFromHostAsync(w, s))
	require.NoError(t, w.Close(), "Close waits for the device first")
	require.NoError(t, small.CopyToHost(got[:1<<20]))
	assert.True(t, bytes.Equal(anon, got[:1<<20]))
}
