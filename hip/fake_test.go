package hip

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/testenv"

	"github.com/rocm-go/rocm/internal/bind"
	"github.com/rocm-go/rocm/internal/dl"
)

// The tests in this file run in tier 0 against testdata/fakehip.c, a fake
// HIP runtime built with the C compiler, so that package hip's own logic
// (validation, lifetime, launch packing, errors) is tested on any machine.

var fake struct {
	once sync.Once
	path string
	err  error
}

func fakeLibrary(t *testing.T) string {
	t.Helper()
	fake.once.Do(func() {
		dir, err := os.MkdirTemp("", "rocm-go-fakehip")
		if err != nil {
			fake.err = err
			return
		}
		fake.path = filepath.Join(dir, "libfakehip.so")
		out, err := exec.Command("cc", "-shared", "-fPIC", "-O1", "-o", fake.path, "testdata/fakehip.c").CombinedOutput()
		if err != nil {
			fake.err = errors.New(string(out))
		}
	})
	if fake.err != nil {
		testenv.FakeBuildFailed(t, "the fake HIP runtime", fake.err)
	}
	return fake.path
}

// resetForTest forgets the loaded runtime, whatever loaded it.
func resetForTest() { library.Reset() }

// useFake loads the fake runtime for the test and forgets it afterwards.
func useFake(t *testing.T) *Device {
	t.Helper()
	path := fakeLibrary(t)
	resetForTest()
	t.Cleanup(resetForTest)
	require.NoError(t, Load(WithPlatform(PlatformAMD), WithLibraryPaths(path)))
	d, err := GetDevice(0)
	require.NoError(t, err)
	return d
}

func liveObjects(t *testing.T, d *Device) int64 {
	free, total, err := d.MemInfo()
	require.NoError(t, err)
	return total - free
}

func TestFakeRuntimeDevices(t *testing.T) {
	d := useFake(t)
	assert.Equal(t, PlatformAMD, LoadedPlatform())
	assert.Equal(t, bind.PlatformAMD, bind.Platform())
	assert.NotNil(t, bind.SetDeviceFunc())
	v, err := RuntimeVersion()
	require.NoError(t, err)
	assert.Equal(t, Version{Major: 6, Minor: 4, Patch: 43484, Raw: 60443484}, v)
	assert.Equal(t, "6.4.43484", v.String())

	n, err := DeviceCount()
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	_, err = GetDevice(2)
	assert.ErrorIs(t, err, ErrInvalidDevice)
	assert.Contains(t, err.Error(), "ordinal 2, but 2 device(s) are visible")
	_, err = GetDevice(-1)
	assert.ErrorIs(t, err, ErrInvalidDevice)
	again, err := GetDevice(0)
	require.NoError(t, err)
	assert.Same(t, d, again)

	p, err := d.Properties()
	require.NoError(t, err)
	assert.Equal(t, "Fake GPU", p.Name)
	assert.Equal(t, "gfx942:sramecc+:xnack-", p.ArchName)
	assert.Equal(t, "gfx942", p.Arch())
	assert.Equal(t, int64(192<<30), p.TotalMemory)
	assert.Equal(t, 64, p.WarpSize)
	assert.Equal(t, [3]int{2147483647, 65536, 65536}, p.MaxGridSize)
	assert.Equal(t, byte(0x42), p.UUID[0])
	assert.True(t, p.IsLargeBar)
	assert.Contains(t, p.String(), "192 GiB memory")
	assert.Contains(t, p.String(), "4.0 MiB L2")

	d1, err := GetDevice(1)
	require.NoError(t, err)
	p1, err := d1.Properties()
	require.NoError(t, err)
	assert.Equal(t, "gfx1100", p1.Arch())
	ws, err := d1.Attribute(DeviceAttributeWarpSize)
	require.NoError(t, err)
	assert.Equal(t, 32, ws)
	_, err = d.Attribute(DeviceAttributeClockRate)
	assert.ErrorIs(t, err, ErrInvalidValue)
	assert.Contains(t, err.Error(), "hipDeviceAttributeClockRate")

	least, greatest, err := d.StreamPriorityRange()
	require.NoError(t, err)
	assert.Equal(t, []int{0, -1}, []int{least, greatest})
	require.NoError(t, d.Synchronize())
}

func TestFakeRuntimeBuffers(t *testing.T) {
	d := useFake(t)
	base := liveObjects(t, d)

	for _, size := range []int{0, -1} {
		_, err := d.Malloc(size)
		assert.ErrorIs(t, err, ErrInvalidValue, "size %d", size)
	}
	_, err := d.Malloc(2 << 40)
	assert.ErrorIs(t, err, ErrOutOfMemory)
	assert.ErrorIs(t, err, errs.ErrOutOfMemory, "the kind the packages above give it")
	assert.Contains(t, err.Error(), "2.0 TiB on device 0")

	const n = 1000
	b, err := d.Malloc(n)
	require.NoError(t, err)
	assert.Equal(t, base+1, liveObjects(t, d))
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(rand.IntN(256))
	}
	require.NoError(t, b.CopyFromHost(src))
	got := bytes.Repeat([]byte{0xAA}, n)
	require.NoError(t, b.CopyToHost(got))
	assert.Equal(t, src, got)

	assert.ErrorIs(t, b.CopyFromHost(make([]byte, n+1)), ErrInvalidValue)
	assert.ErrorIs(t, b.CopyToHost(make([]byte, n+1)), ErrInvalidValue)
	assert.NoError(t, b.CopyFromHost(nil), "an empty copy does nothing")

	view, err := b.Slice(100, 8)
	require.NoError(t, err)
	assert.Equal(t, b.Ptr().Add(100), view.Ptr())
	require.NoError(t, view.Memset(7))
	require.NoError(t, b.CopyToHost(got))
	assert.Equal(t, bytes.Repeat([]byte{7}, 8), got[100:108])
	assert.Equal(t, src[:100], got[:100])
	for _, c := range [][2]int{{-1, 4}, {0, 0}, {997, 4}, {0, n + 1}} {
		_, err := b.Slice(c[0], c[1])
		assert.ErrorIs(t, err, ErrInvalidValue, "slice %v", c)
	}

	require.NoError(t, view.MemsetD32(0xDEADBEEF))
	require.NoError(t, b.CopyToHost(got))
	assert.Equal(t, uint32(0xDEADBEEF), binary.LittleEndian.Uint32(got[104:]))
	odd, err := b.Slice(1, 8)
	require.NoError(t, err)
	assert.ErrorIs(t, odd.MemsetD32(1), ErrInvalidValue)

	c, err := d.Malloc(n)
	require.NoError(t, err)
	require.NoError(t, c.CopyFrom(b))
	out := make([]byte, n)
	require.NoError(t, c.CopyToHost(out))
	assert.Equal(t, got, out)
	small, err := d.Malloc(10)
	require.NoError(t, err)
	assert.ErrorIs(t, small.CopyFrom(b), ErrInvalidValue)

	// Lifetime: double Close, use after Close, views of a closed buffer.
	assert.False(t, b.Closed())
	assert.False(t, view.Closed())
	require.NoError(t, b.Close())
	assert.True(t, b.Closed())
	assert.True(t, view.Closed(), "a view is closed with its allocation")
	assert.True(t, (*Buffer)(nil).Closed())
	assert.True(t, (&Buffer{}).Closed(), "a buffer no allocation made")
	require.NoError(t, b.Close())
	assert.NoError(t, view.Close(), "closing a view does nothing")
	assert.ErrorIs(t, b.CopyToHost(got), ErrClosed)
	assert.ErrorIs(t, view.Memset(0), ErrClosed)
	assert.ErrorIs(t, c.CopyFrom(b), ErrClosed)
	_, err = b.Slice(0, 1)
	assert.ErrorIs(t, err, ErrClosed)
	var nilBuf *Buffer
	assert.ErrorIs(t, nilBuf.Memset(0), ErrInvalidValue)
	assert.NoError(t, nilBuf.Close())
	require.NoError(t, small.Close())
	assert.Equal(t, base+1, liveObjects(t, d))

	// A buffer at an address another allocation made: the same memory,
	// and Close leaves it to its owner.
	at, err := d.BufferAt(c.Ptr().Add(16), 32)
	require.NoError(t, err)
	assert.Equal(t, c.Ptr().Add(16), at.Ptr())
	assert.Equal(t, 32, at.Size())
	assert.Same(t, d, at.Device())
	require.NoError(t, at.Memset(9))
	require.NoError(t, c.CopyToHost(out))
	assert.Equal(t, bytes.Repeat([]byte{9}, 32), out[16:48])
	require.NoError(t, at.Close())
	assert.Equal(t, base+1, liveObjects(t, d), "closing it freed nothing")
	require.NoError(t, c.CopyToHost(out), "the memory is still its owner's")
	for _, bad := range []struct {
		p    DevicePtr
		size int
	}{{0, 8}, {c.Ptr(), 0}, {c.Ptr(), -1}} {
		_, err := d.BufferAt(bad.p, bad.size)
		assert.ErrorIs(t, err, ErrInvalidValue, "%#x, %d bytes", uintptr(bad.p), bad.size)
	}
	_, err = (*Device)(nil).BufferAt(c.Ptr(), 8)
	assert.ErrorIs(t, err, ErrInvalidValue)
	require.NoError(t, c.Close())
	assert.Equal(t, base, liveObjects(t, d), "every allocation was freed")
}

func TestFakeRuntimeAsync(t *testing.T) {
	d := useFake(t)
	base := liveObjects(t, d)
	s, err := d.NewStream(WithStreamFlags(StreamNonBlocking), WithPriority(-1))
	require.NoError(t, err)
	f, err := s.Flags()
	require.NoError(t, err)
	assert.Equal(t, StreamNonBlocking, f)
	p, err := s.Priority()
	require.NoError(t, err)
	assert.Equal(t, -1, p)
	_, err = d.NewStream(WithStreamFlags(0x80))
	assert.ErrorIs(t, err, ErrInvalidValue)

	pin, err := d.MallocHost(256, HostMallocDefault)
	require.NoError(t, err)
	floats := AsSlice[float32](pin.Bytes())
	require.Len(t, floats, 64)
	for i := range floats {
		floats[i] = rand.Float32()
	}
	want := append([]float32(nil), floats...)
	buf, err := s.MallocAsync(256)
	require.NoError(t, err)
	require.NoError(t, buf.CopyFromHostAsync(pin, s))
	require.NoError(t, buf.MemsetAsync(0, nil), "nil is the null stream")
	require.NoError(t, buf.CopyFromHostAsync(pin, s))
	clear(floats)
	require.NoError(t, buf.CopyToHostAsync(pin, s))
	require.NoError(t, s.Synchronize())
	assert.Equal(t, want, floats)
	done, err := s.Query()
	require.NoError(t, err)
	assert.True(t, done)

	half, err := pin.Slice(128, 128)
	require.NoError(t, err)
	assert.ErrorIs(t, buf.CopyToHostAsync(half, s), nil)
	big, err := d.MallocHost(512, HostMallocDefault)
	require.NoError(t, err)
	assert.ErrorIs(t, buf.CopyFromHostAsync(big, s), ErrInvalidValue)

	start, err := d.NewEvent(EventDefault)
	require.NoError(t, err)
	end, err := d.NewEvent(EventDefault)
	require.NoError(t, err)
	ok, err := end.Query()
	require.NoError(t, err)
	assert.False(t, ok, "not recorded yet")
	require.NoError(t, start.Record(s))
	require.NoError(t, end.Record(s))
	require.NoError(t, s.WaitEvent(end))
	require.NoError(t, end.Synchronize())
	el, err := ElapsedTime(start, end)
	require.NoError(t, err)
	assert.Equal(t, 1500*time.Microsecond, el)

	require.NoError(t, buf.Close())
	assert.False(t, s.Closed())
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	assert.True(t, s.Closed())
	assert.False(t, (*Stream)(nil).Closed(), "the null stream is never closed")
	assert.ErrorIs(t, s.Synchronize(), ErrClosed)
	assert.ErrorIs(t, end.Record(s), ErrClosed)
	_, err = s.MallocAsync(8)
	assert.ErrorIs(t, err, ErrClosed)
	require.NoError(t, start.Close())
	require.NoError(t, end.Close())
	_, err = ElapsedTime(start, end)
	assert.ErrorIs(t, err, ErrClosed)
	require.NoError(t, pin.Close())
	require.NoError(t, big.Close())
	assert.Nil(t, pin.Bytes(), "no view of freed pinned memory")
	assert.Equal(t, base, liveObjects(t, d), "every allocation was freed")
}

// echoed launches the fake "echo" kernel and returns the argument buffer
// it saw (the first argument is where it writes).
func TestFakeRuntimeLaunch(t *testing.T) {
	d := useFake(t)
	base := liveObjects(t, d)
	_, err := d.LoadModule(nil)
	assert.ErrorIs(t, err, ErrInvalidValue)
	_, err = d.LoadModule([]byte("JUNK"))
	assert.ErrorIs(t, err, ErrInvalidImage)
	m, err := d.LoadModule([]byte("FAKE code object"))
	require.NoError(t, err)
	_, err = m.Function("nope")
	assert.ErrorIs(t, err, ErrNotFound)
	assert.Contains(t, err.Error(), `kernel "nope"`)
	f, err := m.Function("echo")
	require.NoError(t, err)
	f2, err := m.Function("echo")
	require.NoError(t, err)
	assert.Same(t, f, f2, "functions are cached")

	out, err := d.Malloc(256)
	require.NoError(t, err)
	type s16 struct {
		A float32
		B int32
		C float64
	}
	var a Args
	a.Ptr(out.Ptr()).Int8(-3).Int32(-70000).Int64(1 << 40).Float32(1.5).Float64(math.Pi).Uint16(0xBEEF)
	ArgValue(&a, s16{A: 2.5, B: 7, C: -1})
	a.Uint8(9)
	// EarlyLaunch is an ordinary launch on AMD.
	require.NoError(t, f.Launch(LaunchConfig{Grid: Dim3{X: 4}, Block: Dim3{X: 64}, EarlyLaunch: true}, &a))

	got := make([]byte, 8+a.Len())
	require.NoError(t, out.CopyToHost(got))
	assert.Equal(t, uint64(a.Len()), binary.LittleEndian.Uint64(got), "the size the kernel saw")
	args := got[8:]
	assert.Equal(t, a.Bytes(), args, "the kernel saw the packed buffer")
	// The layout C gives `(void*, char, int, long, float, double, short, struct{float; int; double}, unsigned char)`.
	le := binary.LittleEndian
	assert.Equal(t, uint64(out.Ptr()), le.Uint64(args[0:]))
	assert.Equal(t, int8(-3), int8(args[8]))
	assert.Equal(t, int32(-70000), int32(le.Uint32(args[12:])))
	assert.Equal(t, int64(1<<40), int64(le.Uint64(args[16:])))
	assert.Equal(t, float32(1.5), math.Float32frombits(le.Uint32(args[24:])))
	assert.Equal(t, math.Pi, math.Float64frombits(le.Uint64(args[32:])))
	assert.Equal(t, uint16(0xBEEF), le.Uint16(args[40:]))
	assert.Equal(t, float32(2.5), math.Float32frombits(le.Uint32(args[48:])))
	assert.Equal(t, int32(7), int32(le.Uint32(args[52:])))
	assert.Equal(t, -1.0, math.Float64frombits(le.Uint64(args[56:])))
	assert.Equal(t, byte(9), args[64])
	assert.Equal(t, 65, a.Len())

	// Bad configurations: caught in Go, or reported by the runtime.
	err = f.Launch(LaunchConfig{Grid: Dim3{}, Block: Dim3{X: 1}}, &a)
	assert.ErrorIs(t, err, ErrInvalidValue)
	err = f.Launch(LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 2048}}, &a)
	assert.ErrorIs(t, err, ErrInvalidConfiguration)
	assert.Contains(t, err.Error(), "kernel echo, grid {1 0 0}, block {2048 0 0}")
	require.NoError(t, f.Launch(LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 1}}, nil), "no arguments")

	d1, err := GetDevice(1)
	require.NoError(t, err)
	s1, err := d1.NewStream()
	require.NoError(t, err)
	err = f.Launch(LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 1}, Stream: s1}, &a)
	assert.ErrorIs(t, err, ErrInvalidValue, "a stream of another device")
	require.NoError(t, s1.Close())

	// A launch with reused arguments allocates nothing.
	allocs := testing.AllocsPerRun(100, func() {
		a.Reset().Ptr(out.Ptr()).Int32(1).Float64(2)
		if err := f.Launch(LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 32}}, &a); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "allocations per launch")

	// The fake lacks these: errors, no crash.
	_, _, err = m.Global("x")
	assert.ErrorIs(t, err, ErrSymbolNotFound)
	assert.Contains(t, err.Error(), "hipModuleGetGlobal")
	_, err = f.Attribute(FuncAttributeNumRegs)
	assert.ErrorIs(t, err, ErrSymbolNotFound)
	// AMD has no opt-in to check; a negative size is an error everywhere.
	assert.NoError(t, f.SetMaxDynamicSharedMemory(96<<10))
	assert.ErrorIs(t, f.SetMaxDynamicSharedMemory(-1), ErrInvalidValue)
	var se *dl.SymbolError
	require.True(t, errors.As(err, &se))
	assert.Contains(t, se.Path, "libfakehip.so")

	require.NoError(t, m.Close())
	require.NoError(t, m.Close())
	assert.ErrorIs(t, f.Launch(LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 1}}, &a), ErrClosed)
	_, err = m.Function("echo")
	assert.ErrorIs(t, err, ErrClosed)
	require.NoError(t, out.Close())
	assert.Equal(t, base, liveObjects(t, d))
}

func TestFakeRuntimeMissingSymbols(t *testing.T) {
	d := useFake(t)
	s, err := d.NewStream()
	require.NoError(t, err)
	defer s.Close()
	err = s.BeginCapture(StreamCaptureModeGlobal)
	assert.ErrorIs(t, err, ErrSymbolNotFound)
	assert.Contains(t, err.Error(), "hipStreamBeginCapture")
	_, err = d.CanAccessPeer(d)
	assert.ErrorIs(t, err, ErrSymbolNotFound)
	p, err := Symbol("hipMalloc")
	require.NoError(t, err)
	assert.NotNil(t, p)
	_, err = Symbol("hipNoSuchFunction")
	assert.ErrorIs(t, err, ErrSymbolNotFound)
}

func TestLoadRefCounting(t *testing.T) {
	t.Setenv("HIP_PLATFORM", "") // a plain Load follows it
	path := fakeLibrary(t)
	resetForTest()
	t.Cleanup(resetForTest)
	require.NoError(t, Load(WithLibraryPaths(path), WithPlatform(PlatformAMD)))
	require.NoError(t, Load(), "a second Load shares the runtime")
	err := Load(WithPlatform(PlatformNVIDIA))
	assert.ErrorContains(t, err, "the amd platform is loaded already")
	paths := LibraryPaths()
	require.Len(t, paths, 1)
	assert.Contains(t, paths[0], "libfakehip.so")

	require.NoError(t, Unload())
	assert.Equal(t, PlatformAMD, LoadedPlatform(), "one Load is left")
	require.NoError(t, Unload())
	assert.Equal(t, PlatformNone, LoadedPlatform())
	assert.ErrorContains(t, Unload(), "without a matching Load")
}

func TestLoadErrors(t *testing.T) {
	resetForTest()
	t.Cleanup(resetForTest)
	explicit := t.TempDir()
	root := t.TempDir()
	t.Setenv("ROCM_PATH", root)
	err := Load(WithPlatform(PlatformAMD), WithLibraryPaths(explicit))
	if err == nil {
		t.Skip("tier 0: a real HIP runtime is on the system loader path; its absence cannot be tested here")
	}
	assert.ErrorIs(t, err, ErrLibraryNotFound)
	msg := err.Error()
	for _, p := range []string{
		filepath.Join(explicit, "libamdhip64.so.7"), filepath.Join(explicit, "libamdhip64.so.6"),
		filepath.Join(root, "lib", "libamdhip64.so.7"), "/opt/rocm/lib/libamdhip64.so.6", "libamdhip64.so.6",
	} {
		assert.Contains(t, msg, p)
	}
	assert.Contains(t, msg, "set ROCM_PATH")
	assert.Equal(t, PlatformNone, LoadedPlatform())

	err = Load(WithPlatform(PlatformAMD), WithLibraryPaths("libm.so.6"))
	assert.ErrorContains(t, err, "(libm.so.6) has no symbol hipRuntimeGetVersion: it is another library, not HIP runtime (libamdhip64)")
	assert.ErrorIs(t, err, ErrSymbolNotFound)

	t.Setenv("HIP_PLATFORM", "rocm")
	assert.ErrorContains(t, Load(), `HIP_PLATFORM="rocm": want amd or nvidia`)
}

func TestParsePlatform(t *testing.T) {
	for in, want := range map[string]Platform{"": PlatformNone, "amd": PlatformAMD, "HCC": PlatformAMD, " nvidia ": PlatformNVIDIA, "nvcc": PlatformNVIDIA} {
		got, err := ParsePlatform(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err := ParsePlatform("intel")
	assert.Error(t, err)
	assert.Equal(t, "amd", PlatformAMD.String())
	assert.Equal(t, "none", Platform(9).String())
}

func TestNoPlatformError(t *testing.T) {
	e := &NoPlatformError{
		AMD:    &dl.LoadError{Library: "HIP runtime", Tried: []dl.Attempt{{Path: "a.so", Err: "nope"}}},
		NVIDIA: &dl.LoadError{Library: "CUDA runtime", Tried: []dl.Attempt{{Path: "b.so", Err: "nope"}}},
	}
	assert.ErrorIs(t, e, ErrLibraryNotFound)
	assert.Contains(t, e.Error(), "set HIP_PLATFORM=amd or nvidia")
	assert.Contains(t, e.Error(), "a.so")
	assert.Contains(t, e.Error(), "b.so")
}

func TestArgsAlignment(t *testing.T) {
	var a Args
	a.Int8(1)
	assert.Equal(t, 1, a.Len())
	a.Float64(1)
	assert.Equal(t, 16, a.Len(), "a double goes to offset 8")
	assert.Equal(t, make([]byte, 7), a.Bytes()[1:8], "padding is zero")
	a.Int16(-2)
	a.Int32(3)
	assert.Equal(t, 24, a.Len(), "int16 at 16, int32 at 20")
	a.Raw([]byte{1, 2, 3}, 16)
	assert.Equal(t, 35, a.Len(), "16-byte aligned raw bytes at 32")
	a.Raw([]byte{4}, 3) // not a power of two: no alignment
	assert.Equal(t, 36, a.Len())
	assert.Equal(t, 0, a.Reset().Len())
	// Reuse keeps no stale padding.
	a.Int8(1).Int32(2)
	assert.Equal(t, []byte{1, 0, 0, 0, 2, 0, 0, 0}, a.Bytes())
	var big Args
	for i := range 1000 {
		big.Int64(int64(i))
	}
	assert.Equal(t, 8000, big.Len())
	assert.Equal(t, uint64(999), binary.LittleEndian.Uint64(big.Bytes()[7992:]))
	assert.Equal(t, uintptr(8), unsafe.Alignof(struct{ A float64 }{}))
}

func TestStatusAndErrors(t *testing.T) {
	assert.Equal(t, "hipErrorOutOfMemory", StatusOutOfMemory.String())
	assert.Equal(t, "hipSuccess", StatusSuccess.String())
	assert.Equal(t, "hipErrorNoDevice", Status(100).String())
	assert.Equal(t, "Status(12345)", Status(12345).String())
	assert.NotEmpty(t, StatusNoDevice.Description())
	assert.Equal(t, "hipDeviceAttributeWarpSize", DeviceAttributeWarpSize.String())
	assert.Equal(t, "hipMemcpyHostToDevice", MemcpyHostToDevice.String())

	err := check("hipMalloc", uint32(StatusOutOfMemory))
	assert.ErrorIs(t, err, ErrOutOfMemory)
	assert.NotErrorIs(t, err, ErrNoDevice)
	assert.Equal(t, "hip: hipMalloc: hipErrorOutOfMemory (out of memory range.)", err.Error())
	assert.NoError(t, check("hipMalloc", uint32(0)))
	var e *Error
	require.True(t, errors.As(err, &e))
	assert.Equal(t, StatusOutOfMemory, e.Status)
	assert.ErrorIs(t, invalid("X", "size %d", -1), ErrInvalidValue)
	assert.ErrorContains(t, invalid("X", "size %d", -1), "size -1")
	assert.ErrorIs(t, closedError("Buffer.Close"), ErrClosed)
	assert.ErrorIs(t, statusError("hipSetDevice", statusNoDevice), ErrInvalidDevice)
}

func TestVersionDecoding(t *testing.T) {
	assert.Equal(t, Version{Major: 13, Minor: 0, Raw: 13000}, decodeVersion(PlatformNVIDIA, 13000))
	assert.Equal(t, "12.8", decodeVersion(PlatformNVIDIA, 12080).String())
	assert.Equal(t, "7.0.51831", decodeVersion(PlatformAMD, 70051831).String())
}
