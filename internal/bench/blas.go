package bench

/*
typedef int (*rg_blas_setdev)(int);
typedef int (*rg_blas_sgemm)(void*, int, int, int, int, int, const float*, const void*, int, const void*, int,
                             const float*, void*, int);

// rg_blas_sgemm_loop calls rocblas_sgemm n times from C exactly as package
// rocblas does from Go: make the device current, then call the table's
// entry (rocBLAS's function on AMD, the cuBLAS translation on NVIDIA).
static int rg_blas_sgemm_loop(void* setdev, void* sgemm, int dev, void* handle, int m, int k, void* a, void* b,
                              void* c, int n) {
	float alpha = 1, beta = 0;
	for (int i = 0; i < n; i++) {
		if (((rg_blas_setdev)setdev)(dev) != 0) return -1;
		int e = ((rg_blas_sgemm)sgemm)(handle, 111, 111, m, m, k, &alpha, a, m, b, k, &beta, c, m);
		if (e != 0) return e;
	}
	return 0;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/rocblas"
)

// BLAS is a device, a stream and a rocBLAS handle bound to it, for the
// BLAS benchmarks.
type BLAS struct {
	Dev    *hip.Device
	Props  *hip.DeviceProperties
	Stream *hip.Stream
	Handle *rocblas.Handle
}

// OpenBLAS creates the handle on a non-blocking stream of device 0.
func OpenBLAS() (*BLAS, error) {
	dev, props, s, err := device0()
	if err != nil {
		return nil, err
	}
	h, err := rocblas.NewHandle(s)
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return &BLAS{Dev: dev, Props: props, Stream: s, Handle: h}, nil
}

// Close frees the handle and the stream.
func (b *BLAS) Close() error { return errors.Join(b.Handle.Close(), b.Stream.Close()) }

// GemmShape is one matrix-product benchmark: C (m×n) = A (m×k) · B (k×n),
// column-major and untransposed, Batch times (a strided batch when more
// than 1), in DType: "bf16" and "f16" through GemmEx with float32
// accumulation and output in the same type, "f32" through Gemm (sgemm, no
// TF32), as PyTorch's matmul and bmm compute them by default.
type GemmShape struct {
	Name           string
	DType          string
	M, N, K, Batch int
}

// Flop is the floating-point operations of one call.
func (s GemmShape) Flop() float64 {
	return 2 * float64(s.M) * float64(s.N) * float64(s.K) * float64(s.Batch)
}

func (s GemmShape) elemSize() int {
	if s.DType == "f32" {
		return 4
	}
	return 2
}

// Gemm holds a shape's operands: several sets of random inputs when one set
// fits in the L2 cache (so that the timing is not of the cache), and C.
type Gemm struct {
	b     *BLAS
	shape GemmShape
	sets  []gemmSet
	c     *hip.Buffer
	next  int
}

type gemmSet struct{ a, b *hip.Buffer }

// NewGemm allocates the operands of a shape and fills them with random
// values in [-1, 1) (never zeros: they can run faster than real data).
func (b *BLAS) NewGemm(s GemmShape) (*Gemm, error) {
	switch s.DType {
	case "bf16", "f16", "f32":
	default:
		return nil, fmt.Errorf("bench: dtype %q: want bf16, f16 or f32", s.DType)
	}
	if s.Batch < 1 {
		s.Batch = 1
	}
	es := s.elemSize()
	aBytes, bBytes := s.M*s.K*s.Batch*es, s.K*s.N*s.Batch*es
	nsets := 1
	if l2 := int(b.Props.L2CacheSize); aBytes+bBytes < 2*l2 {
		// Enough sets that the ones a call reads were evicted since.
		nsets = min(64, 1+(4*l2)/(aBytes+bBytes))
	}
	g := &Gemm{b: b, shape: s}
	var err error
	if g.c, err = b.Dev.Malloc(s.M * s.N * s.Batch * es); err != nil {
		return nil, err
	}
	for i := range nsets {
		set := gemmSet{}
		if set.a, err = randomBuffer(b.Dev, s.DType, aBytes/es, uint64(2*i)); err == nil {
			set.b, err = randomBuffer(b.Dev, s.DType, bBytes/es, uint64(2*i+1))
		}
		g.sets = append(g.sets, set)
		if err != nil {
			return nil, errors.Join(err, g.Close())
		}
	}
	return g, nil
}

// Sets is the number of input sets the timing rotates through.
func (g *Gemm) Sets() int { return len(g.sets) }

// Close frees the operands.
func (g *Gemm) Close() error {
	errs := []error{g.c.Close()}
	for _, s := range g.sets {
		errs = append(errs, s.a.Close(), s.b.Close())
	}
	return errors.Join(errs...)
}

// torchUniform turns r, uniform in [0, 1), into a value in [-1, 1) of a
// dtype ("bf16", "f16", "f32") the way PyTorch's torch.rand(dtype)*2 - 1
// does: r rounded to the type, doubled, less one, rounded again. The
// rounding matters to a benchmark: a GPU held back by its power limit runs
// faster on values with fewer mantissa bits set, and 2r - 1 rounded once
// sets more of them in bf16 than PyTorch's values do (3% on an H200). As
// PyTorch does, an r that rounds up to 1 becomes 0.
func torchUniform(r float32, dtype string) float32 {
	round := func(v float32) float32 { return v }
	switch dtype {
	case "bf16":
		round = func(v float32) float32 { return hip.BFloat16FromFloat32(v).Float32() }
	case "f16":
		round = func(v float32) float32 { return hip.HalfFromFloat32(v).Float32() }
	}
	if r = round(r); r == 1 {
		r = 0
	}
	return round(2*r - 1)
}

// randomBuffer uploads n random values of a dtype, distributed as
// PyTorch's (torchUniform).
func randomBuffer(dev *hip.Device, dtype string, n int, seed uint64) (*hip.Buffer, error) {
	f := make([]float32, n)
	var wg sync.WaitGroup
	chunk := (n + runtime.NumCPU() - 1) / runtime.NumCPU()
	for lo := 0; lo < n; lo += chunk {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(lo)))
			for i := lo; i < hi; i++ {
				f[i] = torchUniform(rng.Float32(), dtype)
			}
		}(lo, min(n, lo+chunk))
	}
	wg.Wait()
	var raw []byte
	switch dtype {
	case "bf16":
		h := make([]hip.BFloat16, n)
		for i, v := range f {
			h[i] = hip.BFloat16FromFloat32(v)
		}
		raw = hip.AsBytes(h)
	case "f16":
		h := make([]hip.Half, n)
		for i, v := range f {
			h[i] = hip.HalfFromFloat32(v)
		}
		raw = hip.AsBytes(h)
	default:
		raw = hip.AsBytes(f)
	}
	buf, err := dev.Malloc(len(raw))
	if err != nil {
		return nil, err
	}
	if err := buf.CopyFromHost(raw); err != nil {
		return nil, errors.Join(err, buf.Close())
	}
	return buf, nil
}

// call queues one product on the next input set.
func (g *Gemm) call() error {
	s, set := g.shape, g.sets[g.next]
	g.next = (g.next + 1) % len(g.sets)
	switch s.DType {
	case "bf16":
		return gemmEx[hip.BFloat16](g.b.Handle, s, set, g.c)
	case "f16":
		return gemmEx[hip.Half](g.b.Handle, s, set, g.c)
	}
	none := rocblas.OperationNone
	if s.Batch == 1 {
		return rocblas.Gemm(g.b.Handle, none, none, 1, rocblas.Mat[float32](set.a, s.M, s.K), rocblas.Mat[float32](set.b, s.K, s.N), 0, rocblas.Mat[float32](g.c, s.M, s.N))
	}
	a, b, c := strided[float32](set.a, s.M, s.K), strided[float32](set.b, s.K, s.N), strided[float32](g.c, s.M, s.N)
	return rocblas.GemmStridedBatched(g.b.Handle, none, none, 1, a, b, 0, c, s.Batch)
}

func strided[T rocblas.Numeric](buf *hip.Buffer, rows, cols int) rocblas.StridedMatrix[T] {
	return rocblas.Strided(rocblas.Mat[T](buf, rows, cols))
}

// half16 are the 16-bit types, GemmEx's inputs and outputs both.
type half16 interface{ hip.Half | hip.BFloat16 }

// gemmEx queues D = A·B in a 16-bit type with float32 accumulation.
func gemmEx[T half16](h *rocblas.Handle, s GemmShape, set gemmSet, c *hip.Buffer) error {
	none := rocblas.OperationNone
	if s.Batch == 1 {
		cm := rocblas.Mat[T](c, s.M, s.N)
		return rocblas.GemmEx[T, T](h, none, none, 1, rocblas.Mat[T](set.a, s.M, s.K), rocblas.Mat[T](set.b, s.K, s.N), 0, cm, cm)
	}
	a, b, cm := strided[T](set.a, s.M, s.K), strided[T](set.b, s.K, s.N), strided[T](c, s.M, s.N)
	return rocblas.GemmStridedBatchedEx[T, T](h, none, none, 1, a, b, 0, cm, cm, s.Batch)
}

// Time is the device time per call over iters calls between two events
// on the handle's stream, after one untimed call.
func (g *Gemm) Time(iters int) (time.Duration, error) {
	if err := g.call(); err != nil {
		return 0, err
	}
	start, err := g.b.Dev.NewEvent(hip.EventDefault)
	if err != nil {
		return 0, err
	}
	defer start.Close()
	end, err := g.b.Dev.NewEvent(hip.EventDefault)
	if err != nil {
		return 0, err
	}
	defer end.Close()
	if err := start.Record(g.b.Stream); err != nil {
		return 0, err
	}
	for range iters {
		if err := g.call(); err != nil {
			return 0, err
		}
	}
	if err := end.Record(g.b.Stream); err != nil {
		return 0, err
	}
	if err := end.Synchronize(); err != nil {
		return 0, err
	}
	d, err := hip.ElapsedTime(start, end)
	return d / time.Duration(iters), err
}

// TFLOPs is a rate in TFLOP/s.
func TFLOPs(flop float64, d time.Duration) float64 { return flop / d.Seconds() / 1e12 }

// Tiny is a tiny sgemm (m×m by m×k), for the cost per call of the Go side.
type Tiny struct {
	b       *BLAS
	m, k    int
	a, x, c *hip.Buffer
}

// NewTiny allocates the operands of a tiny sgemm.
func (b *BLAS) NewTiny(m, k int) (*Tiny, error) {
	t := &Tiny{b: b, m: m, k: k}
	var err error
	if t.a, err = randomBuffer(b.Dev, "f32", m*k, 1); err != nil {
		return nil, err
	}
	if t.x, err = randomBuffer(b.Dev, "f32", k*m, 2); err != nil {
		return nil, errors.Join(err, t.a.Close())
	}
	if t.c, err = b.Dev.Malloc(4 * m * m); err != nil {
		return nil, errors.Join(err, t.a.Close(), t.x.Close())
	}
	return t, nil
}

// Close frees the operands.
func (t *Tiny) Close() error { return errors.Join(t.a.Close(), t.x.Close(), t.c.Close()) }

// Go is the host time per rocblas.Gemm call from Go, over n calls queued on
// the stream (the wait for them comes after the timing).
func (t *Tiny) Go(n int) (time.Duration, error) {
	h, none := t.b.Handle, rocblas.OperationNone
	a, x, c := rocblas.Mat[float32](t.a, t.m, t.k), rocblas.Mat[float32](t.x, t.k, t.m), rocblas.Mat[float32](t.c, t.m, t.m)
	start := time.Now()
	for range n {
		if err := rocblas.Gemm(h, none, none, 1, a, x, 0, c); err != nil {
			return 0, err
		}
	}
	d := time.Since(start) / time.Duration(n)
	return d, t.b.Stream.Synchronize()
}

// C is Go's loop written in C, in the same binary, calling the same
// rocblas_sgemm entry of package rocblas's table with the same set-device
// function: the baseline of the Go side's cost.
func (t *Tiny) C(n int) (time.Duration, error) {
	sgemm, err := rocblas.Symbol("rocblas_sgemm")
	if err != nil {
		return 0, err
	}
	setDevice, err := hip.Symbol("hipSetDevice")
	if err != nil {
		return 0, err
	}
	var d time.Duration
	err = t.b.Handle.Raw(func(handle unsafe.Pointer, dev int) error {
		start := time.Now()
		st := C.rg_blas_sgemm_loop(setDevice, sgemm, C.int(dev), handle, C.int(t.m), C.int(t.k),
			devPtr(t.a), devPtr(t.x), devPtr(t.c), C.int(n))
		d = time.Since(start) / time.Duration(n)
		if st != 0 {
			return fmt.Errorf("bench: rocblas_sgemm from C failed with status %d", st)
		}
		return nil
	})
	runtime.KeepAlive(t)
	if err != nil {
		return 0, err
	}
	return d, t.b.Stream.Synchronize()
}

// devPtr is a buffer's device address as C takes it (not Go memory).
func devPtr(b *hip.Buffer) unsafe.Pointer {
	p := b.Ptr()
	return *(*unsafe.Pointer)(unsafe.Pointer(&p))
}

// Shapes are the benchmark's products: square 8192³ in bf16, f16 and f32,
// and the strided batch of an LLM decode step (32 × 128³ in f16).
var Shapes = []GemmShape{
	{Name: "gemm 8192³ bf16", DType: "bf16", M: 8192, N: 8192, K: 8192, Batch: 1},
	{Name: "gemm 8192³ f16", DType: "f16", M: 8192, N: 8192, K: 8192, Batch: 1},
	{Name: "gemm 8192³ f32", DType: "f32", M: 8192, N: 8192, K: 8192, Batch: 1},
	{Name: "strided batch 32 × 128³ f16", DType: "f16", M: 128, N: 128, K: 128, Batch: 32},
}
