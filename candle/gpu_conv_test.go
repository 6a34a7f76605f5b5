package candle

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/miopen"
)

// Tier 2: the image ops on the HIP device against the CPU device, on
// random inputs, both formats, every float dtype, contiguous and strided
// inputs, poisoned outputs.

// convTolerance is a dtype's tolerance for a GPU convolution against the
// CPU's, relative to the larger of the element and the output's RMS (see
// sameConv): the libraries accumulate in float32 (f64 in double) and may
// pick Winograd or FFT algorithms, whose errors scale with the whole
// output rather than with each element; 16-bit outputs round once (and
// once more after the bias), 2⁻¹¹ for f16 and 2⁻⁸ for bf16.
func convTolerance(dt DType) float64 {
	switch dt {
	case F32:
		return 1e-4
	case F16:
		return 2e-3
	case BF16:
		return 1.6e-2
	}
	return 1e-10
}

// sameConv compares a GPU convolution with the CPU's: each element within
// tol of the larger of its own size and the output's RMS (at least 1).
func sameConv(t *testing.T, cpu, gpu *Tensor, tol float64, what string) {
	t.Helper()
	require.Equal(t, cpu.Shape(), gpu.Shape(), what)
	want, got := values(t, cpu), values(t, gpu)
	ss := 0.0
	for _, v := range want {
		ss += v * v
	}
	scale := max(1, math.Sqrt(ss/float64(max(len(want), 1))))
	for i := range want {
		if d := math.Abs(got[i] - want[i]); !(d <= tol*max(math.Abs(want[i]), scale)) {
			require.Failf(t, "values differ", "%s: element %d: want %v, got %v (tolerance %g of %g)", what, i, want[i], got[i], tol, max(math.Abs(want[i]), scale))
		}
	}
}

// gpuConvCases add sizes at which the libraries pick their fast
// algorithms (implicit GEMM, Winograd, tensor cores) to the small odd
// cases of the CPU's tests.
var gpuConvCases = append([]convCase{
	{name: "3x3 32→48 channels, odd image", x: []int{2, 32, 17, 19}, w: []int{48, 32, 3, 3}, p: convRef{pad: [2]int{1, 1}}},
	{name: "3x3 64→64, 16x16", x: []int{2, 64, 16, 16}, w: []int{64, 64, 3, 3}, p: convRef{pad: [2]int{1, 1}}},
	{name: "1x1 64→32", x: []int{2, 64, 9, 9}, w: []int{32, 64, 1, 1}},
	{name: "3x3 stride 2 (a downsampler)", x: []int{2, 32, 16, 16}, w: []int{32, 32, 3, 3}, p: convRef{pad: [2]int{1, 1}, stride: [2]int{2, 2}}},
	{name: "4 groups", x: []int{2, 32, 12, 12}, w: []int{32, 8, 3, 3}, p: convRef{pad: [2]int{1, 1}, groups: 4}},
	{name: "depthwise 32", x: []int{2, 32, 10, 10}, w: []int{32, 1, 3, 3}, p: convRef{pad: [2]int{1, 1}, groups: 32}},
	{name: "transposed 4x4 stride 2 (an upsampler)", x: []int{2, 32, 8, 8}, w: []int{32, 16, 4, 4}, transposed: true,
		p: convRef{stride: [2]int{2, 2}, pad: [2]int{1, 1}}},
	{name: "1-D 80→64 channels, kernel 3", x: []int{2, 80, 50}, w: []int{64, 80, 3}, p: convRef{pad: [2]int{0, 1}}},
}, convCases...)

// nhwcDims reorders NCHW (or NCL) dims channels last.
func nhwcDims(s []int) []int {
	if len(s) == 3 {
		return []int{s[0], s[2], s[1]}
	}
	return []int{s[0], s[2], s[3], s[1]}
}

// libraryRefuses reports a problem the GPU's library may refuse: f64
// (MIOpen has few f64 algorithms; it is ErrDType), or any case MIOpen does
// not implement on AMD. On NVIDIA (cuDNN) every other case must run.
func libraryRefuses(dt DType, err error) bool {
	if err == nil {
		return false
	}
	if dt == F64 && errors.Is(err, ErrDType) {
		return true
	}
	return hip.LoadedPlatform() == hip.PlatformAMD && errors.Is(err, miopen.ErrNotImplemented)
}

func TestGPUConv(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(21, 22))
	refused, compared := 0, 0
	// Every case in every float dtype and format; the strided inputs (a
	// copy before the library call) and f64 on a few cases. Each new
	// problem costs a Find, so the matrix stays small.
	for i, c := range gpuConvCases {
		for _, dt := range []DType{F32, F16, BF16, F64} {
			if dt == F64 && i >= 3 {
				continue
			}
			for _, f := range []Format{NCHW, NHWC} {
				ls := []string{"contiguous"}
				if i < 3 && dt == F32 {
					ls = []string{"contiguous", "transposed", "broadcast"}
				}
				for _, l := range ls {
					name := fmt.Sprintf("%s/%s/%s/%s x", c.name, dt, f, l)
					xs, ws := c.x, c.w
					if f == NHWC {
						xs, ws = nhwcDims(c.x), nhwcDims(c.w)
					}
					x := makeOperand(t, d, dt, xs, l, values01(r))
					w := makeOperand(t, d, dt, ws, "contiguous", values01(r))
					k := c.w[0]
					if c.transposed {
						k = c.w[1] * c.norm().groups
					}
					b := makeOperand(t, d, dt, Shape{k}, "contiguous", values01(r))
					want, err := c.run(x.cpu, w.cpu, b.cpu, f)
					require.NoError(t, err, name)
					got, err := c.run(x.gpu, w.gpu, b.gpu, f)
					if c.transposed && (c.p.outPad[0] >= max(c.p.stride[0], 1) || c.p.outPad[1] >= max(c.p.stride[1], 1)) {
						require.ErrorIs(t, err, ErrArgument, name)
						require.ErrorContains(t, err, "MIOpen and cuDNN cannot express it", name)
						want.Close()
						continue
					}
					if libraryRefuses(dt, err) {
						t.Logf("%s: the library refuses it: %v", name, err)
						refused++
						want.Close()
						continue
					}
					require.NoError(t, err, name)
					sameConv(t, want, got, convTolerance(dt), name)
					compared++
					want.Close()
					got.Close()
				}
			}
		}
	}
	t.Logf("%d cases refused by the library (f64, or MIOpen's gaps on AMD), %d compared", refused, compared)
	require.Greater(t, compared, refused, "the library ran most cases")
}

// TestGPUConvFindOnce: the Find of a problem runs once; later calls of
// the same problem reuse its algorithm and give the same values.
func TestGPUConvFindOnce(t *testing.T) {
	d := gpu(t)
	ok := keep(t)
	r := rand.New(rand.NewPCG(23, 24))
	h, err := d.MIOpen()
	require.NoError(t, err)
	x := makeOperand(t, d, F16, Shape{2, 13, 11, 32}, "contiguous", values01(r))
	w := makeOperand(t, d, F16, Shape{24, 3, 3, 32}, "contiguous", values01(r))
	p := Conv2dParams{Padding: [2]int{1, 1}, Format: NHWC}
	first := ok(x.gpu.Conv2d(w.gpu, nil, p))
	before := h.FindCacheStats()
	for range 3 {
		again := ok(x.gpu.Conv2d(w.gpu, nil, p))
		near(t, values(t, first), values(t, again), 0, "the same algorithm")
	}
	assert.Equal(t, before, h.FindCacheStats(), "no Find at all: the device keeps the algorithm")
	sameConv(t, ok(x.cpu.Conv2d(w.cpu, nil, p)), first, convTolerance(F16), "against the CPU")

	// Operands on two devices.
	_, err = x.gpu.Conv2d(w.cpu, nil, p)
	assert.ErrorIs(t, err, ErrDevice)
	_, err = x.cpu.Conv2d(w.gpu, nil, p)
	assert.ErrorIs(t, err, ErrDevice)
}

func TestGPUPool(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(25, 26))
	cases := append([]poolCase{
		{x: []int{2, 32, 17, 15}, kernel: [2]int{3, 3}, stride: [2]int{2, 2}, padding: [2]int{1, 1}},
		{x: []int{2, 64, 16, 16}, kernel: [2]int{2, 2}},
	}, poolCases...)
	refused, compared := 0, 0
	for _, c := range cases {
		for _, dt := range []DType{F32, F16, BF16, F64} {
			for _, f := range []Format{NCHW, NHWC} {
				for _, l := range []string{"contiguous", "transposed"} {
					xs := c.x
					if f == NHWC {
						xs = nhwcDims(c.x)
					}
					x := makeOperand(t, d, dt, xs, l, values01(r))
					for _, mode := range []string{"max", "avg", "avg excluding padding"} {
						name := fmt.Sprintf("%v %v/%s/%s/%s/%s x", c.x, c.kernel, mode, dt, f, l)
						p := c.params(mode == "avg excluding padding", f)
						run := func(x *Tensor) (*Tensor, error) {
							if mode == "max" {
								return x.MaxPool2d(p)
							}
							return x.AvgPool2d(p)
						}
						want, err := run(x.cpu)
						require.NoError(t, err, name)
						got, err := run(x.gpu)
						if libraryRefuses(dt, err) {
							t.Logf("%s: the library refuses it: %v", name, err)
							refused++
							want.Close()
							continue
						}
						require.NoError(t, err, name)
						tol := tolerance(dt)
						if mode == "max" {
							tol = 0 // a max is one of the inputs
						}
						same(t, want, got, tol, name)
						compared++
						want.Close()
						got.Close()
					}
				}
			}
		}
	}
	t.Logf("%d cases refused by the library (f64, or MIOpen's gaps on AMD), %d compared", refused, compared)
	require.Greater(t, compared, refused, "the library ran most cases")
}

func TestGPUUpsample(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(27, 28))
	shapes := [][4]int{{2, 3, 5, 7}, {1, 2, 8, 3}, {1, 1, 1, 1}, {2, 64, 32, 32}, {3, 5, 6, 6}}
	outs := [][2]int{{11, 13}, {2, 3}, {1, 1}, {64, 64}, {16, 9}}
	for _, s := range shapes {
		for _, out := range outs {
			for _, dt := range []DType{F32, F16, BF16, F64} {
				for _, f := range []Format{NCHW, NHWC} {
					for _, l := range []string{"contiguous", "transposed", "narrowed"} {
						xs := s[:]
						if f == NHWC {
							xs = nhwcDims(s[:])
						}
						x := makeOperand(t, d, dt, xs, l, values01(r))
						for _, mode := range []string{"nearest", "bilinear", "bilinear aligned"} {
							name := fmt.Sprintf("%v→%v/%s/%s/%s/%s x", s, out, mode, dt, f, l)
							run := func(x *Tensor) (*Tensor, error) {
								if mode == "nearest" {
									return x.UpsampleNearest2d(out[0], out[1], f)
								}
								return x.UpsampleBilinear2d(out[0], out[1], mode == "bilinear aligned", f)
							}
							want, err := run(x.cpu)
							require.NoError(t, err, name)
							got, err := run(x.gpu)
							require.NoError(t, err, name)
							tol := tolerance(dt)
							if mode == "nearest" {
								tol = 0 // the same element, chosen by the same float32 arithmetic
							}
							same(t, want, got, tol, name)
							want.Close()
							got.Close()
						}
					}
				}
			}
		}
	}
	// Values no float32 rounding hides: a ramp through 7 → 3 rows and
	// 5 → 8 columns.
	ramp := make([]float64, 7*5)
	for i := range ramp {
		ramp[i] = float64(i)
	}
	for _, mode := range []string{"nearest", "bilinear"} {
		c, g := tensorOf(t, CPU(), F32, ramp, 1, 1, 7, 5), tensorOf(t, d, F32, ramp, 1, 1, 7, 5)
		up := func(x *Tensor) []float64 {
			if mode == "nearest" {
				return values(t, keep(t)(x.UpsampleNearest2d(3, 8, NCHW)))
			}
			return values(t, keep(t)(x.UpsampleBilinear2d(3, 8, false, NCHW)))
		}
		want := up(c)
		near(t, want, up(g), 1e-6, mode)
		assert.False(t, math.IsNaN(want[0]))
	}
}
