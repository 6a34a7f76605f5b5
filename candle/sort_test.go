package candle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSortOnCPU(t *testing.T) {
	cpu := CPU()
	ok := keep(t)
	nan, inf := math.NaN(), math.Inf(1)
	negZero := math.Copysign(0, -1)
	// NaN largest, -0 equal to +0, ties by index in both directions.
	for _, dt := range []DType{F32, F16, BF16, F64} {
		x := tensorOf(t, cpu, dt, []float64{3, 1, nan, negZero, 0, 2, 1, -inf, inf})
		assert.Equal(t, []float64{7, 3, 4, 1, 6, 5, 0, 8, 2}, values(t, ok(x.ArgsortLastDim(true))), dt)
		assert.Equal(t, []float64{2, 8, 0, 5, 1, 6, 3, 4, 7}, values(t, ok(x.ArgsortLastDim(false))), dt)
		v, i, err := x.SortLastDim(true)
		require.NoError(t, err)
		ok(v, nil)
		ok(i, nil)
		got := values(t, v)
		assert.Equal(t, []float64{-inf, 0, 0, 1, 1, 2, 3, inf}, got[:8], dt)
		assert.True(t, math.IsNaN(got[8]), dt)
		assert.True(t, math.Signbit(got[1]) && !math.Signbit(got[2]), "the values are the elements: -0 then +0 (%s)", dt)
		assert.Equal(t, U32, i.DType())
	}
	// Every dtype, with ties.
	for _, dt := range DTypes() {
		x := tensorOf(t, cpu, dt, []float64{5, 2, 7, 2, 0, 9, 2, 8}, 2, 4)
		assert.Equal(t, []float64{1, 3, 0, 2, 0, 2, 3, 1}, values(t, ok(x.ArgsortLastDim(true))), dt)
		assert.Equal(t, []float64{2, 0, 1, 3, 1, 3, 2, 0}, values(t, ok(x.ArgsortLastDim(false))), dt)
		v, i, err := x.TopK(2)
		require.NoError(t, err)
		ok(v, nil)
		ok(i, nil)
		assert.Equal(t, Shape{2, 2}, v.Shape())
		assert.Equal(t, []float64{7, 5, 9, 8}, values(t, v), dt)
		assert.Equal(t, []float64{2, 0, 1, 3}, values(t, i), dt)
		v, i, err = x.TopK(4)
		require.NoError(t, err)
		ok(v, nil)
		ok(i, nil)
		assert.Equal(t, []float64{7, 5, 2, 2, 9, 8, 2, 0}, values(t, v), dt)
		assert.Equal(t, []float64{2, 0, 1, 3, 1, 3, 2, 0}, values(t, i), "ties by lower index first (%s)", dt)
		v, i, err = x.SortLastDim(false)
		require.NoError(t, err)
		ok(v, nil)
		ok(i, nil)
		assert.Equal(t, []float64{7, 5, 2, 2, 9, 8, 2, 0}, values(t, v), dt)
	}
	// Integers compare exactly, beyond float64's 53 bits.
	big, err := FromSlice(cpu, []int64{1<<60 + 1, 1 << 60, -1 << 62, -1, 0, 1<<63 - 1, -1 << 63})
	require.NoError(t, err)
	ok(big, nil)
	assert.Equal(t, []float64{6, 2, 3, 4, 1, 0, 5}, values(t, ok(big.ArgsortLastDim(true))))
	u, err := FromSlice(cpu, []uint32{math.MaxUint32, 0, 1 << 31, 7})
	require.NoError(t, err)
	ok(u, nil)
	assert.Equal(t, []float64{0, 2, 3, 1}, values(t, ok(u.ArgsortLastDim(false))))
	// A strided input reads as its values; rows of every rank.
	m := tensorOf(t, cpu, F32, []float64{4, 1, 3, 9, 2, 5}, 3, 2) // columns (4 3 2) and (1 9 5)
	col := ok(m.T())
	assert.Equal(t, []float64{2, 1, 0, 0, 2, 1}, values(t, ok(col.ArgsortLastDim(true))))
	v, i, err := col.TopK(1)
	require.NoError(t, err)
	ok(v, nil)
	ok(i, nil)
	assert.Equal(t, []float64{4, 9}, values(t, v))
	assert.Equal(t, []float64{0, 1}, values(t, i))
	r3 := tensorOf(t, cpu, F32, []float64{2, 1, 1, 2, 3, 0, 0, 3}, 2, 2, 2)
	assert.Equal(t, []float64{1, 0, 0, 1, 1, 0, 0, 1}, values(t, ok(r3.ArgsortLastDim(true))))
	// k beyond the selection's bound sorts the rows.
	r := rand.New(rand.NewPCG(1, 2))
	long := make([]float64, 300)
	for j := range long {
		long[j] = float64(r.IntN(50))
	}
	lx := tensorOf(t, cpu, F32, long)
	all := values(t, ok(lx.ArgsortLastDim(false)))
	v, i, err = lx.TopK(topkMax + 4)
	require.NoError(t, err)
	ok(v, nil)
	ok(i, nil)
	assert.Equal(t, all[:topkMax+4], values(t, i))
	for j, ix := range values(t, i) {
		assert.Equal(t, long[int(ix)], values(t, v)[j])
	}
	// Empty rows and no rows.
	e := ok(ok(Zeros(cpu, F32, 0, 3)).ArgsortLastDim(true))
	assert.Equal(t, Shape{0, 3}, e.Shape())
	e = ok(ok(Zeros(cpu, F32, 2, 0)).ArgsortLastDim(true))
	assert.Equal(t, Shape{2, 0}, e.Shape())
	v, i, err = ok(Zeros(cpu, F32, 0, 3)).TopK(2)
	require.NoError(t, err)
	assert.Equal(t, Shape{0, 2}, v.Shape())
	assert.Equal(t, Shape{0, 2}, i.Shape())
}

func TestSortErrors(t *testing.T) {
	cpu := CPU()
	ok := keep(t)
	s := ok(Zeros(cpu, F32))
	_, err := s.ArgsortLastDim(true)
	assert.ErrorIs(t, err, ErrShape)
	assert.ErrorContains(t, err, "a scalar has no last dim")
	_, _, err = s.TopK(1)
	assert.ErrorIs(t, err, ErrShape)
	x := ok(Zeros(cpu, F32, 2, 5))
	for _, k := range []int{0, -1, 6} {
		_, _, err = x.TopK(k)
		assert.ErrorIs(t, err, ErrArgument)
		assert.ErrorContains(t, err, fmt.Sprintf("Tensor.TopK: k = %d: want 1 to 5, the last dim of [2 5]", k))
	}
	_, _, err = ok(Zeros(cpu, F32, 2, 0)).TopK(1)
	assert.ErrorContains(t, err, "want 1 to 0")
	y := ok(Zeros(cpu, F32, 3))
	require.NoError(t, y.Close())
	_, _, err = y.SortLastDim(true)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = y.ArgsortLastDim(false)
	assert.ErrorIs(t, err, ErrClosed)
}

// groupNormRef is group_norm in float64 on (n, c, spatial) values.
func groupNormRef(x []float64, n, c, spatial, groups int, alpha, beta []float64, eps float64) []float64 {
	out := make([]float64, len(x))
	cpg := c / groups
	for b := range n {
		for g := range groups {
			lo := (b*c + g*cpg) * spatial
			hi := lo + cpg*spatial
			mean, ss := 0.0, 0.0
			for _, v := range x[lo:hi] {
				mean += v
			}
			mean /= float64(hi - lo)
			for _, v := range x[lo:hi] {
				ss += (v - mean) * (v - mean)
			}
			rs := 1 / math.Sqrt(ss/float64(hi-lo)+eps)
			for k := lo; k < hi; k++ {
				ch := (k / spatial) % c
				out[k] = (x[k]-mean)*rs*alpha[ch] + beta[ch]
			}
		}
	}
	return out
}

func TestGroupNormOnCPU(t *testing.T) {
	cpu := CPU()
	ok := keep(t)
	// (1, 4, 2), two groups of two channels: hand-checked.
	x := tensorOf(t, cpu, F32, []float64{1, 2, 3, 4, 10, 10, 10, 14}, 1, 4, 2)
	alpha := tensorOf(t, cpu, F32, []float64{1, 2, 3, 4})
	beta := tensorOf(t, cpu, F32, []float64{0, 1, 0, 1})
	sd0 := math.Sqrt(1.25 + 1e-5) // group 0: 1 2 3 4, mean 2.5, variance 1.25
	sd1 := math.Sqrt(3 + 1e-5)    // group 1: 10 10 10 14, mean 11, variance 3
	want := []float64{-1.5 / sd0, -0.5 / sd0, 2*0.5/sd0 + 1, 2*1.5/sd0 + 1, 3 * -1 / sd1, 3 * -1 / sd1, 4*-1/sd1 + 1, 4*3/sd1 + 1}
	near(t, want, values(t, ok(x.GroupNorm(2, alpha, beta, 1e-5))), 1e-6)
	near(t, groupNormRef([]float64{1, 2, 3, 4, 10, 10, 10, 14}, 1, 4, 2, 2, []float64{1, 2, 3, 4}, []float64{0, 0, 0, 0}, 1e-5),
		values(t, ok(x.GroupNorm(2, alpha, nil, 1e-5))), 1e-6, "without beta")
	// One group is layer_norm over (C, spatial); C groups is instance norm.
	// GroupNormSiLU is the same followed by silu.
	r := rand.New(rand.NewPCG(3, 4))
	gen := values01(r)
	for _, tc := range []struct {
		shape  Shape
		groups int
	}{{Shape{2, 6, 3, 5}, 3}, {Shape{2, 6, 3, 5}, 1}, {Shape{2, 6, 3, 5}, 6}, {Shape{3, 8}, 4}, {Shape{2, 4, 2, 2, 3}, 2}, {Shape{1, 64, 9, 9}, 32}} {
		n, c := tc.shape[0], tc.shape[1]
		sp := tc.shape[2:].Elems()
		data := make([]float64, tc.shape.Elems())
		for i := range data {
			data[i] = gen()
		}
		a, b := make([]float64, c), make([]float64, c)
		for i := range a {
			a[i], b[i] = gen(), gen()
		}
		for _, dt := range []DType{F32, F16, BF16} {
			xt := tensorOf(t, cpu, dt, data, tc.shape...)
			rd := values(t, xt) // the values as the dtype holds them
			at, bt := tensorOf(t, cpu, dt, a), tensorOf(t, cpu, dt, b)
			want := groupNormRef(rd, n, c, sp, tc.groups, values(t, at), values(t, bt), float64(float32(1e-5)))
			near(t, want, values(t, ok(xt.GroupNorm(tc.groups, at, bt, 1e-5))), tolerance(dt), "%v %d groups %s", tc.shape, tc.groups, dt)
			for i := range want {
				want[i] = siluRef(want[i])
			}
			near(t, want, values(t, ok(xt.GroupNormSiLU(tc.groups, at, bt, 1e-5))), tolerance(dt), "silu: %v %d groups %s", tc.shape, tc.groups, dt)
		}
	}
	// Strided input.
	xs := ok(tensorOf(t, cpu, F32, []float64{1, 3, 10, 10, 2, 4, 10, 14}, 1, 2, 4).T()) // (1, 4, 2)
	near(t, groupNormRef([]float64{1, 2, 3, 4, 10, 10, 10, 14}, 1, 4, 2, 2, []float64{1, 2, 3, 4}, []float64{0, 1, 0, 1}, float64(float32(1e-5))),
		values(t, ok(xs.GroupNorm(2, alpha, beta, 1e-5))), 1e-6, "strided")
}

// GroupNorm and GroupNormSiLU check their arguments alike, each under its
// own name.
func TestGroupNormErrors(t *testing.T) {
	cpu := CPU()
	ok := keep(t)
	for _, c := range []struct {
		op   string
		norm func(x *Tensor, groups int, alpha, beta *Tensor, eps float64) (*Tensor, error)
	}{{"Tensor.GroupNorm", (*Tensor).GroupNorm}, {"Tensor.GroupNormSiLU", (*Tensor).GroupNormSiLU}} {
		x := ok(Zeros(cpu, F32, 2, 6, 4))
		a6 := ok(Zeros(cpu, F32, 6))
		for _, g := range []int{0, -2, 4, 7} {
			_, err := c.norm(x, g, a6, nil, 1e-5)
			assert.ErrorIs(t, err, ErrArgument, "%d groups", g)
			assert.ErrorContains(t, err, fmt.Sprintf("%s: %d groups of 6 channels", c.op, g))
		}
		_, err := c.norm(ok(Zeros(cpu, F32, 6)), 2, a6, nil, 1e-5)
		assert.ErrorIs(t, err, ErrShape)
		assert.ErrorContains(t, err, "want rank 2 or more")
		_, err = c.norm(x, 2, ok(Zeros(cpu, F32, 4)), nil, 1e-5)
		assert.ErrorContains(t, err, "alpha is [4]; want [6], the channels of [2 6 4]")
		_, err = c.norm(x, 2, a6, ok(Zeros(cpu, F32, 6, 1)), 1e-5)
		assert.ErrorContains(t, err, "beta is [6 1]")
		_, err = c.norm(x, 2, nil, nil, 1e-5)
		assert.ErrorIs(t, err, ErrArgument)
		for _, eps := range []float64{-1, math.NaN()} {
			_, err = c.norm(x, 2, a6, nil, eps)
			assert.ErrorIs(t, err, ErrArgument, "eps %v", eps)
		}
		for _, dt := range []DType{F16, BF16} {
			_, err = c.norm(x, 2, ok(Zeros(cpu, dt, 6)), nil, 1e-5)
			assert.ErrorIs(t, err, ErrDType, "alpha %s", dt)
		}
		_, err = c.norm(ok(Zeros(cpu, F64, 2, 6, 4)), 2, ok(Zeros(cpu, F64, 6)), nil, 1e-5)
		assert.ErrorIs(t, err, ErrDType)
		e := ok(c.norm(ok(Zeros(cpu, F32, 2, 6, 0)), 3, a6, nil, 1e-5))
		assert.Equal(t, Shape{2, 6, 0}, e.Shape())
		y := ok(Zeros(cpu, F32, 2, 6, 4))
		require.NoError(t, y.Close())
		_, err = c.norm(y, 2, a6, nil, 1e-5)
		assert.ErrorIs(t, err, ErrClosed)
	}
}

// sortValues draws values with many ties, and for floats the edges of the
// order (NaN, ±Inf, -0 and +0), so that the order of equal keys shows.
func sortValues(r *rand.Rand, dt DType) func() float64 {
	base := genFor(r, dt)
	edges := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, -1, 1, 2}
	return func() float64 {
		switch k := r.IntN(8); {
		case k == 0 && dt.IsFloat():
			return edges[r.IntN(len(edges))]
		case k <= 2:
			return float64(1 + r.IntN(4)) // ties, in every dtype
		}
		return base()
	}
}

// TestGPUSort checks the GPU's sorts against the CPU's, index for index:
// rows that fit a tile and longer ones (scratch passes), every dtype, both
// directions, ties and NaN, strided inputs, and top-k by selection (k up
// to 256, several stages for long rows) and by sorting (k beyond).
func TestGPUSort(t *testing.T) {
	d := gpu(t)
	ok := keep(t)
	r := rand.New(rand.NewPCG(9, 10))
	for _, dt := range DTypes() {
		gen := sortValues(r, dt)
		for _, cols := range []int{1, 2, 7, 31, 32, 33, 1000, 2048, 2049, 4096, 4097, 32000, 128256} {
			rows := max(2, min(64, 20000/cols)) // the CPU side runs under -race
			layouts := []string{"contiguous"}
			if cols <= 4097 {
				layouts = append(layouts, "transposed", "narrowed")
			}
			for _, layout := range layouts {
				x := makeOperand(t, d, dt, Shape{rows, cols}, layout, gen)
				name := fmt.Sprintf("%s [%d %d] %s", dt, rows, cols, layout)
				for _, asc := range []bool{true, false} {
					c, g := ok(x.cpu.ArgsortLastDim(asc)), ok(x.gpu.ArgsortLastDim(asc))
					same(t, c, g, 0, fmt.Sprintf("argsort ascending=%v %s", asc, name))
					c.Close()
					g.Close()
				}
				cv, ci, err := x.cpu.SortLastDim(false)
				require.NoError(t, err)
				gv, gi, err := x.gpu.SortLastDim(false)
				require.NoError(t, err, name)
				same(t, cv, gv, 0, "sort values "+name)
				same(t, ci, gi, 0, "sort indices "+name)
				for _, tt := range []*Tensor{cv, ci, gv, gi} {
					tt.Close()
				}
				for _, k := range []int{1, 5, 64, 256, 300} {
					if k > cols {
						continue
					}
					cv, ci, err := x.cpu.TopK(k)
					require.NoError(t, err)
					gv, gi, err := x.gpu.TopK(k)
					require.NoError(t, err, name)
					same(t, cv, gv, 0, fmt.Sprintf("top-%d values %s", k, name))
					same(t, ci, gi, 0, fmt.Sprintf("top-%d indices %s", k, name))
					for _, tt := range []*Tensor{cv, ci, gv, gi} {
						tt.Close()
					}
				}
			}
		}
	}
	// Many rows of a long row, rows of one value (every pass skipped), and
	// rows whose values differ in one byte (one pass).
	for _, tc := range []struct {
		name string
		gen  func() float64
	}{
		{"random", values01(r)},
		{"constant", func() float64 { return 1.5 }},
		{"one byte", func() float64 { return 1 + float64(r.IntN(100))/(1<<22) }},
	} {
		x := makeOperand(t, d, F32, Shape{700, 5000}, "contiguous", tc.gen)
		for _, asc := range []bool{true, false} {
			same(t, ok(x.cpu.ArgsortLastDim(asc)), ok(x.gpu.ArgsortLastDim(asc)), 0, "argsort [700 5000] "+tc.name)
		}
		cv, ci, err := x.cpu.TopK(50)
		require.NoError(t, err)
		gv, gi, err := x.gpu.TopK(50)
		require.NoError(t, err)
		same(t, ok(cv, nil), ok(gv, nil), 0, "top-50 values "+tc.name)
		same(t, ok(ci, nil), ok(gi, nil), 0, "top-50 indices "+tc.name)
	}
	// Empty.
	e := ok(ok(Zeros(d, F32, 0, 7)).ArgsortLastDim(true))
	assert.Equal(t, Shape{0, 7}, e.Shape())
}

// TestGPUGroupNorm checks group_norm against the CPU: Stable Diffusion's
// sizes (rows of 40960, past the registers), short rows in registers,
// no spatial dims, strided inputs, with and without beta.
func TestGPUGroupNorm(t *testing.T) {
	d := gpu(t)
	ok := keep(t)
	r := rand.New(rand.NewPCG(11, 12))
	gen := values01(r)
	for _, dt := range []DType{F32, F16, BF16} {
		tol := tolerance(dt) * 4
		for _, tc := range []struct {
			shape  Shape
			groups int
		}{
			{Shape{2, 320, 64, 64}, 32}, {Shape{1, 640, 32, 32}, 32}, {Shape{2, 64, 8, 8}, 32}, {Shape{2, 6, 5, 7}, 3},
			{Shape{3, 12}, 4}, {Shape{1, 32, 3}, 32}, {Shape{2, 8, 1000}, 1}, {Shape{2, 4, 3, 3, 3}, 2},
		} {
			c := tc.shape[1]
			alpha, beta := makeOperand(t, d, dt, Shape{c}, "contiguous", gen), makeOperand(t, d, dt, Shape{c}, "contiguous", gen)
			layouts := []string{"contiguous", "narrowed", "transposed"}
			if tc.shape.Elems() > 1<<20 {
				layouts = layouts[:1]
			}
			for _, layout := range layouts {
				x := makeOperand(t, d, dt, tc.shape, layout, gen)
				name := fmt.Sprintf("group_norm %s %v %d groups %s", dt, tc.shape, tc.groups, layout)
				same(t, ok(x.cpu.GroupNorm(tc.groups, alpha.cpu, beta.cpu, 1e-5)), ok(x.gpu.GroupNorm(tc.groups, alpha.gpu, beta.gpu, 1e-5)), tol, name)
				same(t, ok(x.cpu.GroupNorm(tc.groups, alpha.cpu, nil, 1e-6)), ok(x.gpu.GroupNorm(tc.groups, alpha.gpu, nil, 1e-6)), tol, name+" without beta")
			}
		}
	}
}
