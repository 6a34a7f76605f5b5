// Package bench measures rocm-go on a GPU, for side-by-side comparison with
// PyTorch (torch_ref.py) by cmd/hipbench, and as Go benchmarks
// (bench_test.go). Every measurement warms up first and reports the median
// of several repeats.
package bench

/*
typedef int (*rg_bench_setdev)(int);
typedef int (*rg_bench_launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                               void**, void**);

// rg_bench_launch_loop launches f n times from C exactly as package hip
// does from Go: make the device current, then launch through the table.
static int rg_bench_launch_loop(void* setdev, void* launch, int dev, void* f, void* stream, int n) {
	for (int i = 0; i < n; i++) {
		int e = ((rg_bench_setdev)setdev)(dev);
		if (e != 0) return e;
		e = ((rg_bench_launch)launch)(f, 1, 1, 1, 1, 1, 1, 0, stream, 0, 0);
		if (e != 0) return e;
	}
	return 0;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
)

// Kernels are the kernels the benchmarks launch.
const Kernels = `
#include <hip/hip_runtime.h>
extern "C" __global__ void empty() {}
extern "C" __global__ void add_f32(const float* a, const float* b, float* c, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) c[i] = a[i] + b[i];
}
`

// Env is a device with the benchmark kernels loaded and a stream.
type Env struct {
	Dev    *hip.Device
	Props  *hip.DeviceProperties
	Stream *hip.Stream
	Module *hip.Module
	Code   *hiprtc.Code

	CompileTime, LoadTime time.Duration
}

// device0 returns device 0, its properties and a new non-blocking stream
// on it.
func device0() (*hip.Device, *hip.DeviceProperties, *hip.Stream, error) {
	dev, err := hip.GetDevice(0)
	if err != nil {
		return nil, nil, nil, err
	}
	props, err := dev.Properties()
	if err != nil {
		return nil, nil, nil, err
	}
	s, err := dev.NewStream(hip.WithStreamFlags(hip.StreamNonBlocking))
	return dev, props, s, err
}

// Open compiles and loads the kernels on device 0.
func Open() (*Env, error) {
	// The stream's creation sets up the device (the CUDA context): keep it
	// out of the load time. The first compile loads the compiler, the first
	// module load warms the loader: time the second ones.
	dev, props, s, err := device0()
	if err != nil {
		return nil, err
	}
	if _, err := hiprtc.Compile(Kernels, hiprtc.Options{}); err != nil {
		return nil, err
	}
	start := time.Now()
	code, err := hiprtc.Compile(Kernels, hiprtc.Options{})
	if err != nil {
		return nil, err
	}
	compile := time.Since(start)
	warm, err := dev.LoadModule(code.Image)
	if err != nil {
		return nil, err
	}
	if err := warm.Close(); err != nil {
		return nil, err
	}
	start = time.Now()
	mod, err := dev.LoadModule(code.Image)
	if err != nil {
		return nil, err
	}
	load := time.Since(start)
	return &Env{Dev: dev, Props: props, Stream: s, Module: mod, Code: code, CompileTime: compile, LoadTime: load}, nil
}

// Close frees the stream and the module.
func (e *Env) Close() error {
	return errors.Join(e.Stream.Close(), e.Module.Close())
}

// WarmUp is how long Median warms up at least: one run of a few
// milliseconds may leave a GPU that was idle (a model loading) short of
// its clocks.
const WarmUp = 200 * time.Millisecond

// Median runs f reps times after warming up (one run, and more until
// WarmUp has passed, 50 at most) and returns the median.
func Median(reps int, f func() (time.Duration, error)) (time.Duration, error) {
	start := time.Now()
	for i := 0; i == 0 || (i < 50 && time.Since(start) < WarmUp); i++ {
		if _, err := f(); err != nil {
			return 0, err
		}
	}
	ds := make([]time.Duration, reps)
	for i := range ds {
		d, err := f()
		if err != nil {
			return 0, err
		}
		ds[i] = d
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[reps/2], nil
}

// medianOf is the median of v (the upper one of an even count).
func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	sort.Float64s(s)
	return s[len(s)/2]
}

// Paired runs a and b alternately reps times after one warm-up of each and
// returns their medians and the median of the ratios a/b of each pair, which
// drift on a shared machine does not bias. Which of the two runs first
// alternates from pair to pair, so that neither always follows the other.
func Paired(reps int, a, b func() (time.Duration, error)) (ma, mb time.Duration, ratio float64, err error) {
	if _, err = a(); err != nil {
		return
	}
	if _, err = b(); err != nil {
		return
	}
	as, bs, rs := make([]time.Duration, reps), make([]time.Duration, reps), make([]float64, reps)
	for i := range reps {
		first, second, fd, sd := a, b, &as[i], &bs[i]
		if i%2 == 1 {
			first, second, fd, sd = b, a, &bs[i], &as[i]
		}
		if *fd, err = first(); err != nil {
			return
		}
		if *sd, err = second(); err != nil {
			return
		}
		rs[i] = float64(as[i]) / float64(bs[i])
	}
	sort.Slice(as, func(i, j int) bool { return as[i] < as[j] })
	sort.Slice(bs, func(i, j int) bool { return bs[i] < bs[j] })
	sort.Float64s(rs)
	return as[reps/2], bs[reps/2], rs[reps/2], nil
}

// LaunchGo is the time per launch of the empty kernel from Go, over n
// launches on the stream and the wait for them.
func (e *Env) LaunchGo(n int) (time.Duration, error) {
	f, err := e.Module.Function("empty")
	if err != nil {
		return 0, err
	}
	cfg := hip.LaunchConfig{Grid: hip.Dim3{X: 1}, Block: hip.Dim3{X: 1}, Stream: e.Stream}
	start := time.Now()
	for range n {
		if err := f.Launch(cfg, nil); err != nil {
			return 0, err
		}
	}
	if err := e.Stream.Synchronize(); err != nil {
		return 0, err
	}
	return time.Since(start) / time.Duration(n), nil
}

// LaunchC is LaunchGo's loop written in C, in the same binary, through the
// same table: the baseline of the Go overhead.
func (e *Env) LaunchC(n int) (time.Duration, error) {
	f, err := e.Module.Function("empty")
	if err != nil {
		return 0, err
	}
	launch, err := hip.Symbol("hipModuleLaunchKernel")
	if err != nil {
		return 0, err
	}
	setDevice, err := hip.Symbol("hipSetDevice")
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if st := C.rg_bench_launch_loop(setDevice, launch, C.int(e.Dev.Ordinal()), f.Raw(), e.Stream.Raw(), C.int(n)); st != 0 {
		return 0, fmt.Errorf("bench: launch from C failed with status %d", st)
	}
	if err := e.Stream.Synchronize(); err != nil {
		return 0, err
	}
	return time.Since(start) / time.Duration(n), nil
}

// SmallOps allocates the operands of a small elementwise add of n floats.
type SmallOps struct {
	A, B, C *hip.Buffer
	N       int
}

// NewSmallOps allocates and fills the operands.
func (e *Env) NewSmallOps(n int) (*SmallOps, error) {
	s := &SmallOps{N: n}
	var err error
	for _, b := range []**hip.Buffer{&s.A, &s.B, &s.C} {
		if *b, err = e.Dev.Malloc(n * 4); err != nil {
			return nil, err
		}
		if err := (*b).MemsetD32(0x3f800000); err != nil { // 1.0f
			return nil, err
		}
	}
	return s, nil
}

// Close frees the operands.
func (s *SmallOps) Close() error { return errors.Join(s.A.Close(), s.B.Close(), s.C.Close()) }

// SmallAdd is the time per elementwise add of n floats, end to end from Go
// (packing the arguments and launching), over ops adds and the wait.
func (e *Env) SmallAdd(s *SmallOps, ops int) (time.Duration, error) {
	f, err := e.Module.Function("add_f32")
	if err != nil {
		return 0, err
	}
	cfg := hip.LaunchConfig{Grid: hip.Dim3{X: uint32((s.N + 255) / 256)}, Block: hip.Dim3{X: 256}, Stream: e.Stream}
	var args hip.Args
	start := time.Now()
	for range ops {
		args.Reset().Ptr(s.A.Ptr()).Ptr(s.B.Ptr()).Ptr(s.C.Ptr()).Int32(int32(s.N))
		if err := f.Launch(cfg, &args); err != nil {
			return 0, err
		}
	}
	if err := e.Stream.Synchronize(); err != nil {
		return 0, err
	}
	return time.Since(start) / time.Duration(ops), nil
}

// Timed runs f between two events on the stream and returns the device
// time.
func (e *Env) Timed(f func() error) (time.Duration, error) {
	start, err := e.Dev.NewEvent(hip.EventDefault)
	if err != nil {
		return 0, err
	}
	defer start.Close()
	end, err := e.Dev.NewEvent(hip.EventDefault)
	if err != nil {
		return 0, err
	}
	defer end.Close()
	if err := start.Record(e.Stream); err != nil {
		return 0, err
	}
	if err := f(); err != nil {
		return 0, err
	}
	if err := end.Record(e.Stream); err != nil {
		return 0, err
	}
	if err := end.Synchronize(); err != nil {
		return 0, err
	}
	return hip.ElapsedTime(start, end)
}

// Copies holds the buffers of the bandwidth measurements.
type Copies struct {
	Pinned    *hip.PinnedBuffer
	Dev, Dev2 *hip.Buffer
	Size      int
}

// NewCopies allocates size bytes of pinned memory and two device buffers.
func (e *Env) NewCopies(size int) (*Copies, error) {
	c := &Copies{Size: size}
	var err error
	if c.Pinned, err = e.Dev.MallocHost(size, hip.HostMallocDefault); err != nil {
		return nil, err
	}
	if c.Dev, err = e.Dev.Malloc(size); err != nil {
		return nil, err
	}
	if c.Dev2, err = e.Dev.Malloc(size); err != nil {
		return nil, err
	}
	b := c.Pinned.Bytes()
	for i := range b {
		b[i] = byte(i*131 + i>>9)
	}
	return c, c.Dev.CopyFromHost(b)
}

// Close frees the buffers.
func (c *Copies) Close() error { return errors.Join(c.Pinned.Close(), c.Dev.Close(), c.Dev2.Close()) }

// GBps is bytes per second in GB/s.
func GBps(bytes int, d time.Duration) float64 { return float64(bytes) / d.Seconds() / 1e9 }

// HostToDevice is the device time of one pinned host-to-device copy.
func (e *Env) HostToDevice(c *Copies) (time.Duration, error) {
	return e.Timed(func() error { return c.Dev.CopyFromHostAsync(c.Pinned, e.Stream) })
}

// DeviceToHost is the device time of one device-to-pinned-host copy.
func (e *Env) DeviceToHost(c *Copies) (time.Duration, error) {
	return e.Timed(func() error { return c.Dev.CopyToHostAsync(c.Pinned, e.Stream) })
}

// DeviceToDevice is the device time of one device-to-device copy.
func (e *Env) DeviceToDevice(c *Copies) (time.Duration, error) {
	return e.Timed(func() error { return c.Dev2.CopyFromAsync(c.Dev, e.Stream) })
}
