package hiprtc

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
)

// Tier 2: compile for the GPU at hand and run what was compiled.

func TestGPUCompileLoadAndRun(t *testing.T) {
	dev, err := hip.GetDevice(0)
	testenv.Need(t, 2, "a GPU", err)
	props, err := dev.Properties()
	require.NoError(t, err)
	src, err := os.ReadFile("testdata/kernels.hip")
	require.NoError(t, err)

	start := time.Now()
	code, err := Compile(string(src), Options{Name: "kernels.hip", Std: "c++17", Defines: map[string]string{"SCALE": "2.0f"},
		NameExpressions: []string{"axpy<float>", "axpy<double>"}})
	require.NoError(t, err)
	t.Logf("compiled for %s in %v (%d bytes); compiler log: %q", code.Arch, time.Since(start), len(code.Image), code.Log)
	assert.Equal(t, props.ArchName, code.Arch, "an empty Arch means the device's")
	syms, err := KernelSymbols(code.Image)
	require.NoError(t, err)
	assert.Subset(t, syms, []string{"row_sum_f32", "empty", code.Symbol("axpy<float>"), code.Symbol("axpy<double>")})

	mod, err := dev.LoadModule(code.Image)
	require.NoError(t, err)
	defer mod.Close()

	// axpy<double> over more elements than the grid covers.
	const n = 1<<20 + 3
	x, y := make([]float64, n), make([]float64, n)
	for i := range x {
		x[i], y[i] = rand.NormFloat64(), rand.NormFloat64()
	}
	a := rand.NormFloat64()
	xb, err := dev.Malloc(n * 8)
	require.NoError(t, err)
	defer xb.Close()
	yb, err := dev.Malloc(n * 8)
	require.NoError(t, err)
	defer yb.Close()
	require.NoError(t, xb.CopyFromHost(hip.AsBytes(x)))
	require.NoError(t, yb.CopyFromHost(hip.AsBytes(y)))
	axpy, err := mod.Function(code.Symbol("axpy<double>"))
	require.NoError(t, err)
	var args hip.Args
	args.Float64(a).Ptr(xb.Ptr()).Ptr(yb.Ptr()).Uint64(n)
	require.NoError(t, axpy.Launch(hip.LaunchConfig{Grid: hip.Dim3{X: 256}, Block: hip.Dim3{X: 256}}, &args))
	got := make([]float64, n)
	require.NoError(t, yb.CopyToHost(hip.AsBytes(got)))
	for i := range got {
		// The compiler may fuse the multiply-add: allow the last bit.
		want := y[i] + a*x[i]
		if math.Abs(got[i]-want) > 4e-16*(math.Abs(a*x[i])+math.Abs(y[i])) {
			t.Fatalf("axpy<double>: element %d is %v, want %v", i, got[i], want)
		}
	}

	// row_sum_f32: warp shuffles and shared memory, for the device's warp size.
	const rows, cols = 333, 1021
	in := make([]float32, rows*cols)
	for i := range in {
		in[i] = rand.Float32()*2 - 1
	}
	ib, err := dev.Malloc(len(in) * 4)
	require.NoError(t, err)
	defer ib.Close()
	ob, err := dev.Malloc(rows * 4)
	require.NoError(t, err)
	defer ob.Close()
	require.NoError(t, ib.CopyFromHost(hip.AsBytes(in)))
	require.NoError(t, ob.Memset(0xFF))
	rowSum, err := mod.Function("row_sum_f32")
	require.NoError(t, err)
	const block = 256
	args.Reset().Ptr(ib.Ptr()).Ptr(ob.Ptr()).Int32(cols)
	warps := (block + props.WarpSize - 1) / props.WarpSize
	require.NoError(t, rowSum.Launch(hip.LaunchConfig{Grid: hip.Dim3{X: rows}, Block: hip.Dim3{X: block}, SharedMem: uint32(warps * 4)}, &args))
	sums := make([]float32, rows)
	require.NoError(t, ob.CopyToHost(hip.AsBytes(sums)))
	for r := range rows {
		var want float64
		for _, v := range in[r*cols : (r+1)*cols] {
			want += float64(v)
		}
		want *= 2
		if math.Abs(float64(sums[r])-want) > 1e-3 {
			t.Fatalf("row %d: %v, want %v (warp size %d)", r, sums[r], want, props.WarpSize)
		}
	}
}

func TestGPUCompileErrorFromTheRealCompiler(t *testing.T) {
	_, err := hip.GetDevice(0)
	testenv.Need(t, 2, "a GPU", err)
	_, err = Compile("__global__ void k() { not_declared(); }\n", Options{Name: "bad.hip"})
	var ce *CompileError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Log, "not_declared")
	assert.Contains(t, ce.Log, "bad.hip", "the log names the source, line numbers intact")
}

// 16-bit floats on the device: the GPU's conversions agree with hip.Half and
// hip.BFloat16 (both round to nearest, ties to even), through the headers
// hipRTC has on AMD and the CUDA headers found for NVRTC.
func TestGPUHalfAndBFloat16(t *testing.T) {
	dev, err := hip.GetDevice(0)
	testenv.Need(t, 2, "a GPU", err)
	src, err := os.ReadFile("testdata/halves.hip")
	require.NoError(t, err)
	code, err := Compile(string(src), Options{Name: "halves.hip"})
	require.NoError(t, err, "CUDA headers from %q", CUDAIncludeDir())
	mod, err := dev.LoadModule(code.Image)
	require.NoError(t, err)
	defer mod.Close()
	k, err := mod.Function("halves")
	require.NoError(t, err)

	const n = 1 << 16
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(rand.NormFloat64() * math.Pow(2, float64(rand.IntN(30)-15)))
	}
	in[0], in[1], in[2] = 65520, -1e-8, 1.00048828125 // overflow, underflow, a tie
	bufs := make([]*hip.Buffer, 4)
	for i, size := range []int{4, 2, 2, 4} {
		bufs[i], err = dev.Malloc(n * size)
		require.NoError(t, err)
		defer bufs[i].Close()
		require.NoError(t, bufs[i].Memset(0xFF))
	}
	require.NoError(t, bufs[0].CopyFromHost(hip.AsBytes(in)))
	var args hip.Args
	args.Ptr(bufs[0].Ptr()).Ptr(bufs[1].Ptr()).Ptr(bufs[2].Ptr()).Ptr(bufs[3].Ptr()).Int32(n)
	require.NoError(t, k.Launch(hip.LaunchConfig{Grid: hip.Dim3{X: n / 256}, Block: hip.Dim3{X: 256}}, &args))
	h, b, back := make([]hip.Half, n), make([]hip.BFloat16, n), make([]float32, n)
	require.NoError(t, bufs[1].CopyToHost(hip.AsBytes(h)))
	require.NoError(t, bufs[2].CopyToHost(hip.AsBytes(b)))
	require.NoError(t, bufs[3].CopyToHost(hip.AsBytes(back)))
	for i, f := range in {
		if h[i] != hip.HalfFromFloat32(f) || b[i] != hip.BFloat16FromFloat32(f) {
			t.Fatalf("%v: the device gave half %#04x and bfloat16 %#04x, rocm-go %#04x and %#04x",
				f, h[i], b[i], hip.HalfFromFloat32(f), hip.BFloat16FromFloat32(f))
		}
		if back[i] != h[i].Float32()+b[i].Float32() {
			t.Fatalf("%v: converted back to %v, want %v", f, back[i], h[i].Float32()+b[i].Float32())
		}
	}
}
