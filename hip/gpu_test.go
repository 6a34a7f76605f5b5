package hip_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/dustin/go-humanize"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
	"github.com/rocm-go/rocm/internal/testenv"
)

// The tests in this file run in tier 2: on a GPU, AMD or NVIDIA.

func gpu(t *testing.T) *hip.Device {
	t.Helper()
	d, err := hip.GetDevice(0)
	testenv.Need(t, 2, "a GPU", err)
	return d
}

// testKernels are compiled once per test binary.
const testKernels = `
#include <hip/hip_runtime.h>

template <typename T>
__global__ void fill(T* out, T v, size_t n) {
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) out[i] = v;
}

template <typename T>
__global__ void add(T* x, T v, size_t n) {
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) x[i] += v;
}

struct S16 { float x; int y; double z; };

// Every argument type the launch packs, checked element by element.
extern "C" __global__ void mixed(signed char a, int b, long long c, float d, double e, const double* in,
                                 S16 s, double* out, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) out[i] = (double)a + (double)b + (double)c * 1e-12 + (double)d + e * in[i] + (double)s.x * s.z + (double)s.y;
}

// Spins for about cycles clock ticks, then doubles x: slow enough that a
// missing dependency between streams shows.
extern "C" __global__ void slow_double(float* x, int n, long long cycles) {
	long long start = clock64();
	while (clock64() - start < cycles) {}
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] *= 2.0f;
}

extern "C" __global__ void empty() {}

// For early launches (LaunchConfig.EarlyLaunch), on sm_90 and later:
// slow_double_early lets the next kernel launch first thing, then spins
// and doubles x; add_after waits for the previous kernel, then adds v;
// peek copies x to y without waiting.
__device__ void grid_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
extern "C" __global__ void slow_double_early(float* x, int n, long long cycles) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.launch_dependents;");
#endif
	long long start = clock64();
	while (clock64() - start < cycles) {}
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] *= 2.0f;
}
extern "C" __global__ void add_after(float* x, int n, float v) {
	grid_wait();
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] += v;
}
extern "C" __global__ void peek(const float* x, float* y, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = x[i];
}
`

var kernels struct {
	once sync.Once
	code *hiprtc.Code
	err  error
}

func loadKernels(t *testing.T, d *hip.Device) (*hip.Module, *hiprtc.Code) {
	t.Helper()
	kernels.once.Do(func() {
		kernels.code, kernels.err = hiprtc.Compile(testKernels, hiprtc.Options{Name: "gpu_test.hip", Std: "c++17",
			NameExpressions: []string{"fill<float>", "fill<unsigned int>", "add<float>", "add<int>"}})
	})
	require.NoError(t, kernels.err)
	m, err := d.LoadModule(kernels.code.Image)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, m.Close()) })
	return m, kernels.code
}

func function(t *testing.T, m *hip.Module, code *hiprtc.Code, name string) *hip.Function {
	t.Helper()
	f, err := m.Function(code.Symbol(name))
	require.NoError(t, err, name)
	return f
}

// buffer allocates n bytes of device memory, freed when the test ends.
func buffer(t *testing.T, d *hip.Device, n int) *hip.Buffer {
	t.Helper()
	b, err := d.Malloc(n)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

func grid(n int) hip.LaunchConfig {
	blocks := min((n+255)/256, 65535)
	return hip.LaunchConfig{Grid: hip.Dim3{X: uint32(max(blocks, 1))}, Block: hip.Dim3{X: 256}}
}

func TestGPUDeviceProperties(t *testing.T) {
	d := gpu(t)
	p, err := d.Properties()
	require.NoError(t, err)
	t.Logf("%s on the %s platform", p, hip.LoadedPlatform())
	assert.NotEmpty(t, p.Name)
	assert.Greater(t, p.TotalMemory, int64(1<<30))
	assert.Contains(t, []int{32, 64}, p.WarpSize)
	assert.Greater(t, p.MultiProcessorCount, 0)
	assert.GreaterOrEqual(t, p.MaxThreadsPerBlock, 256)
	assert.Greater(t, p.L2CacheSize, int64(0))
	assert.Greater(t, p.SharedMemPerBlock, int64(0))
	assert.Greater(t, p.MaxGridSize[0], 65535)
	assert.Greater(t, p.ClockRateKHz, 0)
	assert.Greater(t, p.MemoryBusWidth, 0)
	switch hip.LoadedPlatform() {
	case hip.PlatformNVIDIA:
		assert.Equal(t, fmt.Sprintf("sm_%d%d", p.Major, p.Minor), p.ArchName)
	case hip.PlatformAMD:
		assert.True(t, strings.HasPrefix(p.ArchName, "gfx"), p.ArchName)
	}
	for attr, want := range map[hip.DeviceAttribute]int{
		hip.DeviceAttributeWarpSize:               p.WarpSize,
		hip.DeviceAttributeMultiprocessorCount:    p.MultiProcessorCount,
		hip.DeviceAttributeMaxThreadsPerBlock:     p.MaxThreadsPerBlock,
		hip.DeviceAttributeComputeCapabilityMajor: p.Major,
		hip.DeviceAttributeL2CacheSize:            int(p.L2CacheSize),
	} {
		v, err := d.Attribute(attr)
		require.NoError(t, err, attr)
		assert.Equal(t, want, v, attr)
	}
	free, total, err := d.MemInfo()
	require.NoError(t, err)
	assert.Greater(t, free, int64(0))
	assert.LessOrEqual(t, free, total)
	bus, err := d.PCIBusID()
	require.NoError(t, err)
	assert.Regexp(t, `^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9]$`, bus)
	v, err := hip.RuntimeVersion()
	require.NoError(t, err)
	assert.Greater(t, v.Major, 0)
}

// randomBytes returns n random bytes. ChaCha8 fills whole blocks, which
// keeps 1 GiB fast even under the race detector.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	fillRandom(b)
	return b
}

func fillRandom(b []byte) {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], rand.Uint64())
	rand.NewChaCha8(seed).Read(b)
}

// repeat fills b with a byte pattern by doubling copies.
func repeat(b, pattern []byte) []byte {
	if len(b) == 0 {
		return b
	}
	n := copy(b, pattern)
	for n < len(b) {
		n += copy(b[n:], b[:n])
	}
	return b
}

func poison(b []byte) { repeat(b, []byte{0xA5}) }

// sameBytes compares two buffers and reports the first difference.
func sameBytes(t *testing.T, want, got []byte, what string) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("%s: byte %d of %d is %#x, want %#x", what, i, len(want), got[i], want[i])
		}
	}
}

func TestGPURoundTrips(t *testing.T) {
	d := gpu(t)
	s, err := d.NewStream(hip.WithStreamFlags(hip.StreamNonBlocking))
	require.NoError(t, err)
	defer s.Close()
	for _, n := range []int{1, 7, 4096 + 3, 1<<20 + 5, 64 << 20, 1 << 30} {
		t.Run(humanize.IBytes(uint64(n)), func(t *testing.T) {
			src := randomBytes(n)
			got := make([]byte, n)
			a, err := d.Malloc(n)
			require.NoError(t, err)
			defer a.Close()
			b, err := s.MallocAsync(n)
			require.NoError(t, err)
			defer b.Close()

			// Synchronous host ↔ device.
			require.NoError(t, a.CopyFromHost(src))
			poison(got)
			require.NoError(t, a.CopyToHost(got))
			sameBytes(t, src, got, "sync round trip")

			// Device to device, synchronous and on a stream.
			require.NoError(t, b.MemsetAsync(0x5A, s))
			require.NoError(t, b.CopyFromAsync(a, s))
			require.NoError(t, s.Synchronize())
			poison(got)
			require.NoError(t, b.CopyToHost(got))
			sameBytes(t, src, got, "device-to-device on a stream")
			require.NoError(t, a.Memset(0))
			require.NoError(t, a.CopyFrom(b))
			poison(got)
			require.NoError(t, a.CopyToHost(got))
			sameBytes(t, src, got, "device-to-device")

			// Asynchronous through pinned memory.
			pin, err := d.MallocHost(n, hip.HostMallocDefault)
			require.NoError(t, err)
			defer pin.Close()
			src2 := pin.Bytes()
			fillRandom(src2)
			want := append([]byte(nil), src2...)
			require.NoError(t, b.CopyFromHostAsync(pin, s))
			require.NoError(t, s.Synchronize())
			poison(src2)
			require.NoError(t, b.CopyToHostAsync(pin, s))
			require.NoError(t, s.Synchronize())
			sameBytes(t, want, src2, "pinned async round trip")

			// Memsets: bytes and 32-bit words.
			require.NoError(t, a.Memset(0x3C))
			poison(got)
			require.NoError(t, a.CopyToHost(got))
			sameBytes(t, repeat(make([]byte, n), []byte{0x3C}), got, "memset")
			if n%4 == 0 {
				require.NoError(t, b.MemsetD32Async(0xDEADBEEF, s))
				require.NoError(t, s.Synchronize())
				poison(got)
				require.NoError(t, b.CopyToHost(got))
				sameBytes(t, repeat(make([]byte, n), []byte{0xEF, 0xBE, 0xAD, 0xDE}), got, "MemsetD32")
			}
		})
	}
}

func TestGPUTemplatedKernels(t *testing.T) {
	d := gpu(t)
	m, code := loadKernels(t, d)
	const n = 1<<20 + 17
	buf, err := d.Malloc(n * 4)
	require.NoError(t, err)
	defer buf.Close()

	fill := function(t, m, code, "fill<float>")
	add := function(t, m, code, "add<float>")
	v := rand.Float32() + 1
	var a hip.Args
	require.NoError(t, fill.Launch(grid(n), a.Reset().Ptr(buf.Ptr()).Float32(v).Uint64(n)))
	require.NoError(t, add.Launch(grid(n), a.Reset().Ptr(buf.Ptr()).Float32(0.25).Uint64(n)))
	require.NoError(t, d.Synchronize())
	got := make([]float32, n)
	require.NoError(t, buf.CopyToHost(hip.AsBytes(got)))
	for i, g := range got {
		if g != v+0.25 {
			t.Fatalf("element %d: %v, want %v", i, g, v+0.25)
		}
	}

	fillU := function(t, m, code, "fill<unsigned int>")
	require.NoError(t, fillU.Launch(grid(n), a.Reset().Ptr(buf.Ptr()).Uint32(0xC0FFEE).Uint64(n)))
	require.NoError(t, d.Synchronize())
	words := make([]uint32, n)
	require.NoError(t, buf.CopyToHost(hip.AsBytes(words)))
	for i, w := range words {
		if w != 0xC0FFEE {
			t.Fatalf("fill<unsigned int>: element %d is %#x", i, w)
		}
	}
	regs, err := fill.Attribute(hip.FuncAttributeNumRegs)
	require.NoError(t, err)
	assert.Greater(t, regs, 0)
	g, b, err := fill.MaxPotentialBlockSize(0, 0)
	require.NoError(t, err)
	assert.Greater(t, g, 0)
	assert.Greater(t, b, 0)
}

func TestGPUMixedArguments(t *testing.T) {
	d := gpu(t)
	m, code := loadKernels(t, d)
	const n = 3001
	in := make([]float64, n)
	for i := range in {
		in[i] = rand.NormFloat64()
	}
	inBuf, err := d.Malloc(n * 8)
	require.NoError(t, err)
	defer inBuf.Close()
	outBuf, err := d.Malloc(n * 8)
	require.NoError(t, err)
	defer outBuf.Close()
	require.NoError(t, inBuf.CopyFromHost(hip.AsBytes(in)))
	require.NoError(t, outBuf.Memset(0xFF)) // NaN everywhere: every element must be written

	type s16 struct {
		X float32
		Y int32
		Z float64
	}
	require.Equal(t, uintptr(16), unsafe.Sizeof(s16{}))
	a8, b32, c64 := int8(-rand.IntN(100)), int32(rand.IntN(1<<30)), int64(rand.Int64N(1<<50))
	f32, f64 := rand.Float32(), rand.NormFloat64()
	st := s16{X: rand.Float32(), Y: int32(rand.IntN(1000)), Z: rand.NormFloat64()}
	var args hip.Args
	args.Int8(a8).Int32(b32).Int64(c64).Float32(f32).Float64(f64).Ptr(inBuf.Ptr())
	hip.ArgValue(&args, st)
	args.Ptr(outBuf.Ptr()).Int32(n)
	mixed := function(t, m, code, "mixed")
	require.NoError(t, mixed.Launch(grid(n), &args))
	require.NoError(t, d.Synchronize())
	out := make([]float64, n)
	require.NoError(t, outBuf.CopyToHost(hip.AsBytes(out)))
	for i := range out {
		want := float64(a8) + float64(b32) + float64(c64)*1e-12 + float64(f32) + f64*in[i] + float64(st.X)*st.Z + float64(st.Y)
		if math.IsNaN(out[i]) || math.Abs(out[i]-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Fatalf("element %d: %v, want %v", i, out[i], want)
		}
	}
}

func TestGPUStreamOrderingAndEvents(t *testing.T) {
	d := gpu(t)
	m, code := loadKernels(t, d)
	p, err := d.Properties()
	require.NoError(t, err)
	const n = 1 << 16
	x, y := buffer(t, d, n*4), buffer(t, d, n*4)
	sa, err := d.NewStream(hip.WithStreamFlags(hip.StreamNonBlocking))
	require.NoError(t, err)
	defer sa.Close()
	sb, err := d.NewStream(hip.WithStreamFlags(hip.StreamNonBlocking))
	require.NoError(t, err)
	defer sb.Close()
	start, err := d.NewEvent(hip.EventDefault)
	require.NoError(t, err)
	defer start.Close()
	done, err := d.NewEvent(hip.EventDefault)
	require.NoError(t, err)
	defer done.Close()

	// In order on one stream: 100 additions of 1.
	fill := function(t, m, code, "fill<float>")
	add := function(t, m, code, "add<float>")
	cfg := grid(n)
	cfg.Stream = sa
	var a hip.Args
	require.NoError(t, start.Record(sa))
	require.NoError(t, fill.Launch(cfg, a.Reset().Ptr(x.Ptr()).Float32(0).Uint64(n)))
	for range 100 {
		require.NoError(t, add.Launch(cfg, a.Reset().Ptr(x.Ptr()).Float32(1).Uint64(n)))
	}
	// Then a slow kernel (about 50 ms of spinning) doubles x, and the other
	// stream copies x only after the event: it must see 200, not 100.
	cycles := int64(p.ClockRateKHz) * 50
	require.NoError(t, function(t, m, code, "slow_double").Launch(hip.LaunchConfig{Grid: hip.Dim3{X: n / 256}, Block: hip.Dim3{X: 256}, Stream: sa},
		a.Reset().Ptr(x.Ptr()).Int32(n).Int64(cycles)))
	require.NoError(t, done.Record(sa))
	ready, err := done.Query()
	require.NoError(t, err)
	assert.False(t, ready, "the slow kernel is still running")
	require.NoError(t, sb.WaitEvent(done))
	require.NoError(t, y.CopyFromAsync(x, sb))
	require.NoError(t, sb.Synchronize())
	got := make([]float32, n)
	require.NoError(t, y.CopyToHost(hip.AsBytes(got)))
	for i, g := range got {
		if g != 200 {
			t.Fatalf("element %d is %v: the copy did not wait for the event", i, g)
		}
	}
	ready, err = done.Query()
	require.NoError(t, err)
	assert.True(t, ready)
	finished, err := sa.Query()
	require.NoError(t, err)
	assert.True(t, finished)
	el, err := hip.ElapsedTime(start, done)
	require.NoError(t, err)
	assert.Greater(t, el, 20*time.Millisecond, "the slow kernel spun for about 50 ms")
	assert.Less(t, el, 5*time.Second)
	t.Logf("101 kernels and a 50 ms spin took %v", el)
}

// A kernel launched early may start while the previous one runs (NVIDIA
// sm_90 and later): one that waits sees that kernel's writes, one that
// does not wait reads before them. Elsewhere both run after it. Through a
// captured graph as well.
func TestGPUEarlyLaunch(t *testing.T) {
	d := gpu(t)
	m, code := loadKernels(t, d)
	p, err := d.Properties()
	require.NoError(t, err)
	early := hip.LoadedPlatform() == hip.PlatformNVIDIA && p.Major >= 9
	const n = 1 << 12
	x, y := buffer(t, d, n*4), buffer(t, d, n*4)
	s, err := d.NewStream(hip.WithStreamFlags(hip.StreamNonBlocking))
	require.NoError(t, err)
	defer s.Close()
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	cfg := hip.LaunchConfig{Grid: hip.Dim3{X: n / 256}, Block: hip.Dim3{X: 256}, Stream: s}
	later := cfg
	later.EarlyLaunch = true
	cycles := int64(p.ClockRateKHz) * 20 // about 20 ms
	slow, add, peek := function(t, m, code, "slow_double_early"), function(t, m, code, "add_after"), function(t, m, code, "peek")
	var a hip.Args
	run := func(second func() error) []float32 {
		require.NoError(t, x.CopyFromHost(hip.AsBytes(ones)))
		require.NoError(t, y.MemsetAsync(0, s))
		require.NoError(t, slow.Launch(cfg, a.Reset().Ptr(x.Ptr()).Int32(n).Int64(cycles)))
		require.NoError(t, second())
		require.NoError(t, s.Synchronize())
		got := make([]float32, n)
		require.NoError(t, x.CopyToHost(hip.AsBytes(got)))
		return got
	}
	for i, v := range run(func() error { return add.Launch(later, a.Reset().Ptr(x.Ptr()).Int32(n).Float32(0.5)) }) {
		require.Equal(t, float32(2.5), v, "element %d: the early kernel waited for the doubling", i)
	}
	run(func() error { return peek.Launch(later, a.Reset().Ptr(x.Ptr()).Ptr(y.Ptr()).Int32(n)) })
	seen := make([]float32, n)
	require.NoError(t, y.CopyToHost(hip.AsBytes(seen)))
	want := float32(2)
	if early {
		want = 1 // read while the first kernel spun
	}
	assert.Equal(t, want, seen[0], "an early kernel that does not wait (early launches on this device: %v)", early)
	t.Logf("early launches on this device: %v; a kernel that does not wait read %v", early, seen[0])

	// Captured and replayed.
	require.NoError(t, x.CopyFromHost(hip.AsBytes(ones)))
	require.NoError(t, s.BeginCapture(hip.StreamCaptureModeGlobal))
	require.NoError(t, slow.Launch(cfg, a.Reset().Ptr(x.Ptr()).Int32(n).Int64(cycles/10)))
	require.NoError(t, add.Launch(later, a.Reset().Ptr(x.Ptr()).Int32(n).Float32(0.5)))
	require.NoError(t, add.Launch(later, a.Reset().Ptr(x.Ptr()).Int32(n).Float32(0.25)))
	g, err := s.EndCapture()
	require.NoError(t, err)
	defer g.Close()
	exec, err := g.Instantiate()
	require.NoError(t, err)
	defer exec.Close()
	for range 2 {
		require.NoError(t, exec.Launch(s))
	}
	require.NoError(t, s.Synchronize())
	got := make([]float32, n)
	require.NoError(t, x.CopyToHost(hip.AsBytes(got)))
	for i, v := range got {
		require.Equal(t, float32(6.25), v, "element %d: (1·2 + 0.75)·2 + 0.75 after two replays", i)
	}
}

func TestGPUGraphCaptureAndReplay(t *testing.T) {
	d := gpu(t)
	m, code := loadKernels(t, d)
	const n = 1 << 18
	x, err := d.Malloc(n * 4)
	require.NoError(t, err)
	defer x.Close()
	s, err := d.NewStream(hip.WithStreamFlags(hip.StreamNonBlocking))
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, x.MemsetAsync(0, s))
	require.NoError(t, s.Synchronize())

	add := function(t, m, code, "add<int>")
	cfg := grid(n)
	cfg.Stream = s
	var a hip.Args
	require.NoError(t, s.BeginCapture(hip.StreamCaptureModeGlobal))
	st, err := s.CaptureStatus()
	require.NoError(t, err)
	assert.Equal(t, hip.StreamCaptureStatusActive, st)
	for _, v := range []int32{1, 2, 3} {
		require.NoError(t, add.Launch(cfg, a.Reset().Ptr(x.Ptr()).Int32(v).Uint64(n)))
	}
	g, err := s.EndCapture()
	require.NoError(t, err)
	nodes, err := g.NodeCount()
	require.NoError(t, err)
	assert.Equal(t, 3, nodes)
	exec, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close(), "the executable graph outlives its graph")
	got := make([]int32, n)
	require.NoError(t, x.CopyToHost(hip.AsBytes(got)))
	assert.Equal(t, int32(0), got[0], "capturing ran nothing")
	for range 5 {
		require.NoError(t, exec.Launch(s))
	}
	require.NoError(t, s.Synchronize())
	require.NoError(t, x.CopyToHost(hip.AsBytes(got)))
	for i, v := range got {
		if v != 30 {
			t.Fatalf("element %d is %d after 5 replays of +1+2+3", i, v)
		}
	}
	require.NoError(t, exec.Close())
	require.NoError(t, exec.Close())
	assert.ErrorIs(t, exec.Launch(s), hip.ErrClosed)
}

func TestGPUErrorPathsLeaveTheProcessWorking(t *testing.T) {
	d := gpu(t)
	m, code := loadKernels(t, d)
	_, err := m.Function("no_such_kernel")
	assert.ErrorIs(t, err, hip.ErrNotFound)
	assert.ErrorContains(t, err, `kernel "no_such_kernel"`)

	empty := function(t, m, code, "empty")
	err = empty.Launch(hip.LaunchConfig{Grid: hip.Dim3{X: 1}, Block: hip.Dim3{X: 4096}}, nil)
	require.Error(t, err, "4096 threads per block")
	assert.True(t, errors.Is(err, hip.ErrInvalidConfiguration) || errors.Is(err, hip.ErrInvalidValue), "%v", err)
	assert.ErrorContains(t, err, "block {4096 0 0}")

	_, err = d.Malloc(1 << 50)
	assert.ErrorIs(t, err, hip.ErrOutOfMemory)
	assert.ErrorContains(t, err, "1.0 PiB")

	_, err = d.LoadModule([]byte("this is not a code object, not at all"))
	assert.Error(t, err)

	// The device still works.
	require.NoError(t, empty.Launch(hip.LaunchConfig{Grid: hip.Dim3{X: 1}, Block: hip.Dim3{X: 64}}, nil))
	require.NoError(t, d.Synchronize())
	b, err := d.Malloc(1 << 20)
	require.NoError(t, err)
	require.NoError(t, b.Close())
}

func TestGPUEightGoroutinesOnEightStreams(t *testing.T) {
	d := gpu(t)
	m, code := loadKernels(t, d)
	add := function(t, m, code, "add<int>")
	const n, launches = 1 << 16, 200
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				s, err := d.NewStream(hip.WithStreamFlags(hip.StreamNonBlocking))
				if err != nil {
					return err
				}
				defer s.Close()
				x, err := s.MallocAsync(n * 4)
				if err != nil {
					return err
				}
				defer x.Close()
				if err := x.MemsetAsync(0, s); err != nil {
					return err
				}
				cfg := grid(n)
				cfg.Stream = s
				var a hip.Args
				for range launches {
					if err := add.Launch(cfg, a.Reset().Ptr(x.Ptr()).Int32(int32(g+1)).Uint64(n)); err != nil {
						return err
					}
				}
				pin, err := d.MallocHost(n*4, hip.HostMallocDefault)
				if err != nil {
					return err
				}
				defer pin.Close()
				if err := x.CopyToHostAsync(pin, s); err != nil {
					return err
				}
				if err := s.Synchronize(); err != nil {
					return err
				}
				for i, v := range hip.AsSlice[int32](pin.Bytes()) {
					if v != int32(launches*(g+1)) {
						return fmt.Errorf("goroutine %d: element %d is %d, want %d", g, i, v, launches*(g+1))
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func TestGPUModuleOutlivesQueuedWork(t *testing.T) {
	d := gpu(t)
	_, code := loadKernels(t, d)
	m, err := d.LoadModule(code.Image)
	require.NoError(t, err)
	add, err := m.Function(code.Symbol("add<int>"))
	require.NoError(t, err)
	const n = 1 << 20
	x, err := d.Malloc(n * 4)
	require.NoError(t, err)
	defer x.Close()
	require.NoError(t, x.Memset(0))
	var a hip.Args
	for range 50 {
		require.NoError(t, add.Launch(grid(n), a.Reset().Ptr(x.Ptr()).Int32(1).Uint64(n)))
	}
	require.NoError(t, m.Close(), "Close waits for the 50 queued launches")
	got := make([]int32, n)
	require.NoError(t, x.CopyToHost(hip.AsBytes(got)))
	assert.Equal(t, int32(50), got[n-1])
	assert.ErrorIs(t, add.Launch(grid(n), a.Reset().Ptr(x.Ptr()).Int32(1).Uint64(n)), hip.ErrClosed)
}
