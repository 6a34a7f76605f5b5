package candle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fused ops of Stable Diffusion's UNet and VAE: GroupNormSiLU and
// GEGLU.

func siluRef(v float64) float64 { return v / (1 + math.Exp(-v)) }

func gegluRef(x []float64, rows, n int) []float64 {
	out := make([]float64, rows*n)
	for r := range rows {
		for i := range n {
			g := x[r*2*n+n+i]
			out[r*n+i] = x[r*2*n+i] * 0.5 * g * (1 + math.Erf(g/math.Sqrt2))
		}
	}
	return out
}

// TestGroupNormSiLUOnCPU checks GroupNormSiLU without beta and on
// strided input (TestGroupNormOnCPU checks it against the reference).
func TestGroupNormSiLUOnCPU(t *testing.T) {
	cpu := CPU()
	ok := keep(t)
	r := rand.New(rand.NewPCG(21, 22))
	gen := values01(r)
	data := make([]float64, 2*6*15)
	for i := range data {
		data[i] = gen()
	}
	a := []float64{0.5, -1, 2, 1.5, -0.25, 1}
	for _, dt := range []DType{F32, F16, BF16} {
		xt := tensorOf(t, cpu, dt, data, 2, 6, 3, 5)
		want := groupNormRef(values(t, xt), 2, 6, 15, 3, values(t, tensorOf(t, cpu, dt, a)), make([]float64, 6), float64(float32(1e-5)))
		for i := range want {
			want[i] = siluRef(want[i])
		}
		near(t, want, values(t, ok(xt.GroupNormSiLU(3, tensorOf(t, cpu, dt, a), nil, 1e-5))), tolerance(dt), "without beta %s", dt)
	}
	// The same as GroupNorm then Silu (F32, where neither rounds much).
	x := tensorOf(t, cpu, F32, []float64{1, 2, 3, 4, 10, 10, 10, 14}, 1, 4, 2)
	alpha := tensorOf(t, cpu, F32, []float64{1, 2, 3, 4})
	beta := tensorOf(t, cpu, F32, []float64{0, 1, 0, 1})
	near(t, values(t, ok(ok(x.GroupNorm(2, alpha, beta, 1e-5)).Silu())), values(t, ok(x.GroupNormSiLU(2, alpha, beta, 1e-5))), 1e-6)
	// Strided input.
	xs := ok(tensorOf(t, cpu, F32, []float64{1, 3, 10, 10, 2, 4, 10, 14}, 1, 2, 4).T()) // (1, 4, 2)
	near(t, values(t, ok(ok(x.GroupNorm(2, alpha, beta, 1e-5)).Silu())), values(t, ok(xs.GroupNormSiLU(2, alpha, beta, 1e-5))), 1e-6, "strided")
}

func TestGEGLUOnCPU(t *testing.T) {
	cpu := CPU()
	ok := keep(t)
	// Hand-checked: gelu_erf(1) = 0.8413447460685429, gelu_erf(-2) = -0.04550026389635842.
	x := tensorOf(t, cpu, F32, []float64{3, -1, 1, -2}, 1, 4)
	near(t, []float64{3 * 0.8413447460685429, -1 * -0.04550026389635842}, values(t, ok(x.GEGLU())), 1e-6)
	r := rand.New(rand.NewPCG(23, 24))
	gen := values01(r)
	for _, shape := range []Shape{{2}, {3, 14}, {2, 3, 16}, {5, 2}, {1, 4, 2050}} {
		data := make([]float64, shape.Elems())
		for i := range data {
			data[i] = gen()
		}
		n := shape[len(shape)-1] / 2
		rows := shape.Elems() / (2 * n)
		for _, dt := range []DType{F32, F16, BF16} {
			xt := tensorOf(t, cpu, dt, data, shape...)
			got := ok(xt.GEGLU())
			want := shape.Clone()
			want[len(want)-1] = n
			assert.Equal(t, want, got.Shape())
			near(t, gegluRef(values(t, xt), rows, n), values(t, got), tolerance(dt), "%v %s", shape, dt)
			// The composite it replaces: narrow, narrow, GeluErf, Mul.
			last := len(shape) - 1
			g := ok(ok(ok(xt.Narrow(last, n, n)).Contiguous()).GeluErf())
			near(t, values(t, ok(ok(xt.Narrow(last, 0, n)).Mul(g))), values(t, got), tolerance(dt), "%v %s against the composite", shape, dt)
		}
	}
	// Strided input: the transpose of (4, 2) is (2, 4).
	xs := ok(tensorOf(t, cpu, F32, []float64{3, 1, -1, -2, 1, 5, -2, 7}, 4, 2).T())
	near(t, gegluRef([]float64{3, -1, 1, -2, 1, -2, 5, 7}, 2, 2), values(t, ok(xs.GEGLU())), 1e-6, "strided")
	// An empty last dim.
	assert.Equal(t, Shape{3, 0}, ok(ok(Zeros(cpu, F32, 3, 0)).GEGLU()).Shape())
}

func TestGEGLUErrors(t *testing.T) {
	cpu := CPU()
	ok := keep(t)
	_, err := ok(Zeros(cpu, F32, 2, 5)).GEGLU()
	assert.ErrorIs(t, err, ErrShape)
	assert.ErrorContains(t, err, "Tensor.GEGLU: x is [2 5]: want a last dim of even size")
	_, err = ok(Zeros(cpu, F32)).GEGLU()
	assert.ErrorIs(t, err, ErrShape)
	for _, dt := range []DType{F64, U32, I64, U8} {
		_, err = ok(Zeros(cpu, dt, 2, 4)).GEGLU()
		assert.ErrorIs(t, err, ErrDType, "%s", dt)
	}
	y := ok(Zeros(cpu, F32, 2, 4))
	require.NoError(t, y.Close())
	_, err = y.GEGLU()
	assert.ErrorIs(t, err, ErrClosed)
}

// TestGPUGroupNormSiLU checks group_norm with and without its SiLU against
// the CPU at Stable Diffusion's shapes: the UNet's (batch 2, 32 groups) at
// 512×512, whose groups of 2560 to 40960 elements take group_norm_<dt>
// (a block a group, up to 8192) or group_stats_<dt> and group_apply_<dt>
// (a block a chunk of 4096); the VAE's groups of 16 channels of 512×512
// (4M elements, 1024 chunks a group) at its real shape in F16 and, for every
// dtype, at 32 channels in 2 groups; and odd sizes: spatial sizes that are
// not whole vectors, a last chunk of a few elements, unaligned (narrowed)
// and strided (transposed) inputs, no beta.
func TestGPUGroupNormSiLU(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(25, 26))
	gen := values01(r)
	type gcase struct {
		shape  Shape
		groups int
		dts    []DType
	}
	all := []DType{F32, F16, BF16}
	cases := []gcase{
		// The UNet at 512×512 (latents 64×64), and the VAE decoder's 64×64 level.
		{Shape{2, 320, 64, 64}, 32, all}, {Shape{2, 640, 32, 32}, 32, all}, {Shape{2, 960, 32, 32}, 32, all},
		{Shape{2, 1280, 16, 16}, 32, all}, {Shape{2, 1280, 8, 8}, 32, all}, {Shape{1, 512, 64, 64}, 32, all},
		// A VAE-size group of 4M elements, and the VAE's full shape.
		{Shape{1, 32, 512, 512}, 2, all}, {Shape{1, 512, 512, 512}, 32, []DType{F16}},
		// Odd sizes: no vectors; channels not whole vectors; a last chunk of 808 elements.
		{Shape{2, 6, 5, 7}, 3, all}, {Shape{1, 4, 3001, 7}, 2, all}, {Shape{1, 8, 4100}, 2, all},
		{Shape{3, 32, 9000}, 32, all}, {Shape{2, 64, 129}, 32, all}, {Shape{3, 12}, 4, all},
	}
	for _, tc := range cases {
		for _, dt := range tc.dts {
			layouts := []string{"contiguous", "narrowed", "transposed"}
			if tc.shape.Elems() > 1<<22 {
				layouts = layouts[:1]
			}
			for _, layout := range layouts {
				name := fmt.Sprintf("%s %v %d groups %s", dt, tc.shape, tc.groups, layout)
				t.Run(name, func(t *testing.T) {
					ok := keep(t)
					tol := tolerance(dt) * 4
					c := tc.shape[1]
					alpha, beta := makeOperand(t, d, dt, Shape{c}, "contiguous", gen), makeOperand(t, d, dt, Shape{c}, "contiguous", gen)
					x := makeOperand(t, d, dt, tc.shape, layout, gen)
					same(t, ok(x.cpu.GroupNormSiLU(tc.groups, alpha.cpu, beta.cpu, 1e-5)), ok(x.gpu.GroupNormSiLU(tc.groups, alpha.gpu, beta.gpu, 1e-5)), tol, "group_norm + silu "+name)
					same(t, ok(x.cpu.GroupNorm(tc.groups, alpha.cpu, beta.cpu, 1e-5)), ok(x.gpu.GroupNorm(tc.groups, alpha.gpu, beta.gpu, 1e-5)), tol, "group_norm "+name)
					if tc.shape.Elems() <= 1<<22 {
						same(t, ok(x.cpu.GroupNormSiLU(tc.groups, alpha.cpu, nil, 1e-6)), ok(x.gpu.GroupNormSiLU(tc.groups, alpha.gpu, nil, 1e-6)), tol, "group_norm + silu without beta "+name)
					}
				})
			}
		}
	}
	// Statistics of shifted data: a mean of 100 and a spread of 1, where
	// sums of squares in float lose the variance; the chunks' exact
	// moments keep it.
	for _, dt := range []DType{F32, F16} {
		ok := keep(t)
		shift := func() float64 { return 100 + gen()/2 }
		x := makeOperand(t, d, dt, Shape{2, 64, 96, 96}, "contiguous", shift)
		alpha, beta := makeOperand(t, d, dt, Shape{64}, "contiguous", gen), makeOperand(t, d, dt, Shape{64}, "contiguous", gen)
		same(t, ok(x.cpu.GroupNormSiLU(32, alpha.cpu, beta.cpu, 1e-5)), ok(x.gpu.GroupNormSiLU(32, alpha.gpu, beta.gpu, 1e-5)), tolerance(dt)*8, "group_norm + silu of shifted data "+dt.String())
	}
}

// TestGPUGEGLU checks geglu_<dt> against the CPU at the UNet's
// feed-forward shapes at 512×512 (batch 2, tokens 4096 to 64, rows of
// 2·4·C for C of 320 to 1280), odd sizes (halves that are not whole
// vectors, a half of one element), unaligned (narrowed) and strided
// (transposed) inputs, and against the composite it replaces on the GPU.
func TestGPUGEGLU(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(27, 28))
	gen := values01(r)
	shapes := []Shape{{2, 4096, 2560}, {2, 1024, 5120}, {2, 256, 10240}, {2, 64, 10240},
		{3, 14}, {5, 2}, {2, 3, 1026}, {7, 4098}, {1, 16}}
	for _, dt := range []DType{F32, F16, BF16} {
		tol := tolerance(dt) * 2
		for _, shape := range shapes {
			layouts := []string{"contiguous", "narrowed", "transposed"}
			if shape.Elems() > 1<<22 {
				layouts = layouts[:1]
			}
			for _, layout := range layouts {
				name := fmt.Sprintf("geglu %s %v %s", dt, shape, layout)
				t.Run(name, func(t *testing.T) {
					ok := keep(t)
					x := makeOperand(t, d, dt, shape, layout, gen)
					got := ok(x.gpu.GEGLU())
					same(t, ok(x.cpu.GEGLU()), got, tol, name)
					last, n := len(shape)-1, shape[len(shape)-1]/2
					g := ok(ok(ok(x.gpu.Narrow(last, n, n)).Contiguous()).GeluErf())
					same(t, ok(ok(x.gpu.Narrow(last, 0, n)).Mul(g)), got, tol, name+" against narrow, GeluErf, Mul")
				})
			}
		}
	}
}
