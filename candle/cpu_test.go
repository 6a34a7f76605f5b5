package candle

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
)

// The CPU device against values computed by hand in float64: every op
// family, strided operands, dtypes, and the errors.

func TestCPUUnary(t *testing.T) {
	ok := keep(t)
	cpu := CPU()
	xs := []float64{-2, -0.5, 0, 0.5, 2.25}
	x := tensorOf(t, cpu, F64, xs)
	for _, c := range []struct {
		name string
		run  func() (*Tensor, error)
		f    func(float64) float64
	}{
		{"neg", x.Neg, func(v float64) float64 { return -v }},
		{"exp", x.Exp, math.Exp},
		{"tanh", x.Tanh, math.Tanh},
		{"erf", x.Erf, math.Erf},
		{"ceil", x.Ceil, math.Ceil},
		{"floor", x.Floor, math.Floor},
		{"round", x.Round, math.Round},
		{"abs", x.Abs, math.Abs},
		{"sqr", x.Sqr, func(v float64) float64 { return v * v }},
		{"relu", x.Relu, func(v float64) float64 { return math.Max(v, 0) }},
		{"sigmoid", x.Sigmoid, func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }},
		{"silu", x.Silu, func(v float64) float64 { return v / (1 + math.Exp(-v)) }},
		{"sign", x.Sign, func(v float64) float64 { return map[bool]float64{true: 1}[v > 0] - map[bool]float64{true: 1}[v < 0] }},
		{"gelu", x.Gelu, func(v float64) float64 {
			return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
		}},
		{"gelu_erf", x.GeluErf, func(v float64) float64 { return v * 0.5 * math.Erfc(-v/math.Sqrt2) }},
		{"normcdf", x.NormCDF, func(v float64) float64 { return 0.5 * math.Erfc(-v/math.Sqrt2) }},
		{"elu", func() (*Tensor, error) { return x.Elu(0.5) }, func(v float64) float64 {
			if v >= 0 {
				return v
			}
			return 0.5 * (math.Exp(v) - 1)
		}},
		{"clamp", func() (*Tensor, error) { return x.Clamp(-1, 1) }, func(v float64) float64 { return math.Max(-1, math.Min(1, v)) }},
		{"affine", func() (*Tensor, error) { return x.Affine(3, -1) }, func(v float64) float64 { return 3*v - 1 }},
		{"powf", func() (*Tensor, error) { return x.Powf(2) }, func(v float64) float64 { return v * v }},
	} {
		want := make([]float64, len(xs))
		for i, v := range xs {
			want[i] = c.f(v)
		}
		near(t, want, values(t, ok(c.run())), 1e-14, c.name)
	}
	pos := tensorOf(t, cpu, F32, []float64{0.25, 1, 4})
	near(t, []float64{-1.3862943611198906, 0, 1.3862943611198906}, values(t, ok(pos.Log())), 1e-7, "log")
	near(t, []float64{0.5, 1, 2}, values(t, ok(pos.Sqrt())), 0, "sqrt")
	near(t, []float64{4, 1, 0.25}, values(t, ok(pos.Recip())), 0, "recip")
	near(t, []float64{math.Sin(0.25), math.Sin(1), math.Sin(4)}, values(t, ok(pos.Sin())), 1e-7, "sin")
	near(t, []float64{math.Cos(0.25), math.Cos(1), math.Cos(4)}, values(t, ok(pos.Cos())), 1e-7, "cos")

	// Rounded once to the dtype: bf16 keeps 8 bits of mantissa.
	b := tensorOf(t, cpu, BF16, []float64{1})
	assert.Equal(t, []float64{2.71875}, values(t, ok(b.Exp())), "e rounded to bf16")

	// Integers: the ops that make sense keep the dtype.
	i := tensorOf(t, cpu, I64, []float64{-3, 0, 5})
	assert.Equal(t, []float64{3, 0, 5}, values(t, ok(i.Abs())))
	assert.Equal(t, []float64{9, 0, 25}, values(t, ok(i.Sqr())))
	assert.Equal(t, []float64{-1, 0, 1}, values(t, ok(i.Sign())))
	assert.Equal(t, []float64{-7, -1, 9}, values(t, ok(i.Affine(2, -1))))
	u := tensorOf(t, cpu, U8, []float64{3, 200, 255})
	assert.Equal(t, []float64{9, 64, 1}, values(t, ok(u.Sqr())), "u8 wraps")
	assert.Equal(t, []float64{0, 255, 255}, values(t, ok(u.Affine(2, -6))), "affine saturates")
	assert.Equal(t, []float64{3, 100, 100}, values(t, ok(u.Clamp(0, 100))))
	_, err := u.Exp()
	assert.ErrorIs(t, err, ErrDType)
	assert.ErrorContains(t, err, "Tensor.Exp: takes a float tensor, not u8")
	_, err = u.Neg()
	assert.ErrorIs(t, err, ErrDType)
	_, err = x.Clamp(1, -1)
	assert.ErrorIs(t, err, ErrArgument)

	// A strided input: the transpose of a 2×3 matrix.
	m := tensorOf(t, cpu, F32, []float64{1, 2, 3, 4, 5, 6}, 2, 3)
	mt := ok(m.T())
	assert.Equal(t, []float64{-1, -4, -2, -5, -3, -6}, values(t, ok(mt.Neg())))
}

func TestCPUBinary(t *testing.T) {
	ok := keep(t)
	cpu := CPU()
	a := tensorOf(t, cpu, F32, []float64{1, 2, 3, 4, 5, 6}, 2, 3)
	row := tensorOf(t, cpu, F32, []float64{10, 20, 30}, 3)
	col := tensorOf(t, cpu, F32, []float64{100, 200}, 2, 1)
	assert.Equal(t, []float64{11, 22, 33, 14, 25, 36}, values(t, ok(a.Add(row))))
	assert.Equal(t, []float64{99, 98, 97, 196, 195, 194}, values(t, ok(col.Sub(a))))
	sum := ok(row.Add(col))
	assert.Equal(t, Shape{2, 3}, sum.Shape(), "both operands broadcast")
	assert.Equal(t, []float64{110, 120, 130, 210, 220, 230}, values(t, sum))
	assert.Equal(t, []float64{10, 40, 90, 40, 100, 180}, values(t, ok(a.Mul(row))))
	near(t, []float64{0.1, 0.1, 0.1, 0.4, 0.25, 0.2}, values(t, ok(a.Div(row))), 1e-7)
	assert.Equal(t, []float64{10, 20, 30, 10, 20, 30}, values(t, ok(a.Maximum(row))))
	assert.Equal(t, []float64{1, 2, 3, 4, 5, 6}, values(t, ok(a.Minimum(row))))

	three := tensorOf(t, cpu, F32, []float64{3})
	for _, c := range []struct {
		f    func(*Tensor) (*Tensor, error)
		want []float64
	}{
		{a.Eq, []float64{0, 0, 1, 0, 0, 0}}, {a.Ne, []float64{1, 1, 0, 1, 1, 1}},
		{a.Lt, []float64{1, 1, 0, 0, 0, 0}}, {a.Le, []float64{1, 1, 1, 0, 0, 0}},
		{a.Gt, []float64{0, 0, 0, 1, 1, 1}}, {a.Ge, []float64{0, 0, 1, 1, 1, 1}},
	} {
		r := ok(c.f(three))
		assert.Equal(t, U8, r.DType())
		assert.Equal(t, c.want, values(t, r))
	}

	// NaN: comparisons are false (ne true), maximum and minimum propagate.
	n := tensorOf(t, cpu, F64, []float64{math.NaN(), 1})
	o := tensorOf(t, cpu, F64, []float64{1, math.NaN()})
	assert.Equal(t, []float64{0, 0}, values(t, ok(n.Eq(o))))
	assert.Equal(t, []float64{1, 1}, values(t, ok(n.Ne(o))))
	for _, v := range values(t, ok(n.Maximum(o))) {
		assert.True(t, math.IsNaN(v))
	}

	// Integers wrap; division truncates and gives 0 for 0.
	i := tensorOf(t, cpu, I64, []float64{7, -7, 5, math.MinInt64})
	j := tensorOf(t, cpu, I64, []float64{2, 2, 0, -1})
	assert.Equal(t, []float64{3, -3, 0, math.MinInt64}, values(t, ok(i.Div(j))))
	u := tensorOf(t, cpu, U8, []float64{250, 3})
	v := tensorOf(t, cpu, U8, []float64{10, 5})
	assert.Equal(t, []float64{4, 8}, values(t, ok(u.Add(v))), "u8 wraps")
	assert.Equal(t, []float64{240, 254}, values(t, ok(u.Sub(v))))
	u32 := tensorOf(t, cpu, U32, []float64{7, 0})
	assert.Equal(t, []float64{3, 0}, values(t, ok(u32.Div(tensorOf(t, cpu, U32, []float64{2, 0})))))

	_, err := a.Add(tensorOf(t, cpu, F64, []float64{1}))
	assert.ErrorIs(t, err, ErrDType)
	assert.ErrorContains(t, err, "f32 and f64 operands")
	_, err = a.Add(tensorOf(t, cpu, F32, []float64{1, 2}))
	assert.ErrorIs(t, err, ErrShape)
	assert.ErrorContains(t, err, "candle: Tensor.Add: shapes [2 3] and [2] do not broadcast")
}

func TestCPUCast(t *testing.T) {
	ok := keep(t)
	cpu := CPU()
	x := tensorOf(t, cpu, F64, []float64{-1.9, -0.5, 0.5, 1.5, 300, math.NaN(), math.Inf(1), 1e20})
	assert.Equal(t, []float64{0, 0, 0, 1, 255, 0, 255, 255}, values(t, ok(x.ToDType(U8))), "truncate, saturate, NaN to 0")
	assert.Equal(t, []float64{-1, 0, 0, 1, 300, 0, math.MaxInt64, math.MaxInt64}, values(t, ok(x.ToDType(I64))))
	assert.Equal(t, []float64{0, 0, 0, 1, 300, 0, math.MaxUint32, math.MaxUint32}, values(t, ok(x.ToDType(U32))))
	i := tensorOf(t, cpu, I64, []float64{-1, 256, 300, 1 << 40})
	assert.Equal(t, []float64{255, 0, 44, 0}, values(t, ok(i.ToDType(U8))), "integers keep their low bits")
	assert.Equal(t, []float64{math.MaxUint32, 256, 300, 0}, values(t, ok(i.ToDType(U32))))
	f := tensorOf(t, cpu, F32, []float64{1.0009765625, 65520, 1e-8})
	assert.Equal(t, []float64{1.0009765625, math.Inf(1), 0}, values(t, ok(f.ToDType(F16))), "f16: the nearest, overflow to inf, underflow to 0")
	assert.Equal(t, []float64{1, 65536, 1.0011717677116394e-08}, values(t, ok(f.ToDType(BF16))))
	same := ok(f.ToDType(F32))
	assert.Same(t, f.st, same.st, "the same dtype is a view")
	_, err := f.ToDType(DType(42))
	assert.ErrorIs(t, err, ErrDType)
	// From a strided view.
	m := tensorOf(t, cpu, F32, []float64{1, 2, 3, 4}, 2, 2)
	assert.Equal(t, []float64{1, 3, 2, 4}, values(t, ok(ok(m.T()).ToDType(I64))))
}

func TestCPUFill(t *testing.T) {
	ok := keep(t)
	cpu := CPU()
	z := ok(Zeros(cpu, BF16, 2, 2))
	assert.Equal(t, []float64{0, 0, 0, 0}, values(t, z))
	o := ok(Ones(cpu, U32, 3))
	assert.Equal(t, []float64{1, 1, 1}, values(t, o))
	f := ok(Full(cpu, I64, -2.7, 2))
	assert.Equal(t, []float64{-2, -2}, values(t, f))
	assert.Equal(t, []float64{0.5, 0.75, 1, 1.25}, values(t, ok(Arange(cpu, F32, 0.5, 1.4, 0.25))))
	assert.Equal(t, []float64{5, 3, 1}, values(t, ok(Arange(cpu, I64, 5, 0, -2))))
	e := ok(Arange(cpu, F32, 1, 1, 1))
	assert.Equal(t, Shape{0}, e.Shape())
	_, err := Arange(cpu, F32, 0, 1, 0)
	assert.ErrorIs(t, err, ErrArgument)
	empty := ok(Zeros(cpu, F32, 3, 0))
	assert.Equal(t, 0, empty.Elems())
	assert.Empty(t, values(t, empty))
	_, err = Zeros(cpu, F32, 2, -1)
	assert.ErrorIs(t, err, ErrShape)
	scalar := ok(Full(cpu, F64, 7))
	assert.Equal(t, Shape{}, scalar.Shape())
	assert.Equal(t, []float64{7}, values(t, scalar))
}

func TestPhiloxKnownAnswers(t *testing.T) {
	// Random123's known-answer vectors for philox4x32-10.
	assert.Equal(t, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}, philox([4]uint32{}, [2]uint32{}))
	assert.Equal(t, [4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
		philox([4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff}))
	assert.Equal(t, [4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1},
		philox([4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}))
}

func TestCPURandom(t *testing.T) {
	ok := keep(t)
	cpu := CPU()
	cpu.SetSeed(42)
	a := values(t, ok(RandUniform(cpu, F32, -1, 1, 10000)))
	b := values(t, ok(RandUniform(cpu, F32, -1, 1, 10000)))
	cpu.SetSeed(42)
	a2 := values(t, ok(RandUniform(cpu, F32, -1, 1, 10000)))
	assert.Equal(t, a, a2, "the same seed, the same numbers")
	assert.NotEqual(t, a, b, "the stream goes on")
	mean, lo, hi := 0.0, 1.0, -1.0
	for _, v := range a {
		mean += v / float64(len(a))
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	assert.InDelta(t, 0, mean, 0.03)
	assert.GreaterOrEqual(t, lo, -1.0)
	assert.Less(t, hi, 1.0)

	n := values(t, ok(RandNormal(cpu, F64, 3, 2, 20000)))
	var m, m2 float64
	for _, v := range n {
		m += v / float64(len(n))
	}
	for _, v := range n {
		m2 += (v - m) * (v - m) / float64(len(n))
	}
	assert.InDelta(t, 3, m, 0.05)
	assert.InDelta(t, 2, math.Sqrt(m2), 0.05)
	_, err := RandUniform(cpu, I64, 0, 1, 3)
	assert.ErrorIs(t, err, ErrDType)
	_, err = RandUniform(cpu, F32, 1, 1, 3)
	assert.ErrorIs(t, err, ErrArgument)
	_, err = RandNormal(cpu, F32, 0, -1, 3)
	assert.ErrorIs(t, err, ErrArgument)
}

func TestCPUCopies(t *testing.T) {
	ok := keep(t)
	cpu := CPU()
	m := tensorOf(t, cpu, F32, []float64{1, 2, 3, 4, 5, 6}, 2, 3)
	c := ok(ok(m.T()).Contiguous())
	assert.True(t, c.IsContiguous())
	assert.Equal(t, Shape{3, 2}, c.Shape())
	assert.Equal(t, []float64{1, 4, 2, 5, 3, 6}, values(t, c))
	same := ok(m.Contiguous())
	assert.Same(t, m.st, same.st, "a contiguous tensor is not copied")

	r := ok(ok(m.T()).Reshape(6))
	assert.Equal(t, []float64{1, 4, 2, 5, 3, 6}, values(t, r), "reshaping a strided tensor copies")
	r = ok(m.Reshape(-1, 2))
	assert.Equal(t, Shape{3, 2}, r.Shape())
	_, err := m.Reshape(-1, -1)
	assert.ErrorContains(t, err, "only one dim may be -1")
	_, err = m.Reshape(4, -1)
	assert.ErrorContains(t, err, "cannot infer the -1 of [4 -1] for 6 elements")

	a := tensorOf(t, cpu, F32, []float64{1, 2}, 1, 2)
	b := tensorOf(t, cpu, F32, []float64{3, 4, 5, 6}, 2, 2)
	cat := ok(Cat([]*Tensor{a, b}, 0))
	assert.Equal(t, Shape{3, 2}, cat.Shape())
	assert.Equal(t, []float64{1, 2, 3, 4, 5, 6}, values(t, cat))
	cat1 := ok(Cat([]*Tensor{ok(b.T()), ok(a.T())}, 1))
	assert.Equal(t, Shape{2, 3}, cat1.Shape())
	assert.Equal(t, []float64{3, 5, 1, 4, 6, 2}, values(t, cat1))
	_, err = Cat([]*Tensor{a, b}, 1)
	assert.ErrorContains(t, err, "they differ in dim 0, not only in dim 1")
	_, err = Cat(nil, 0)
	assert.ErrorIs(t, err, ErrArgument)

	cache := ok(Zeros(cpu, F32, 2, 4))
	require.NoError(t, cache.SliceAssign(b, 1, 1))
	assert.Equal(t, []float64{0, 3, 4, 0, 0, 5, 6, 0}, values(t, cache), "slice assignment writes in place")
	assert.ErrorContains(t, cache.SliceAssign(b, 1, 3), "2 rows of dim 1 from 3 do not fit in 4")
	bc := ok(a.BroadcastAs(2, 2))
	assert.ErrorContains(t, bc.SliceAssign(b, 0, 0), "repeats elements")

	n := ok(m.Narrow(1, 1, 2))
	assert.Equal(t, []float64{2, 3, 5, 6}, values(t, n))
	s := ok(ok(m.Unsqueeze(0)).Squeeze(0))
	assert.Equal(t, m.Shape(), s.Shape())
	p := ok(tensorOf(t, cpu, U8, []float64{1, 2, 3, 4, 5, 6, 7, 8}, 2, 2, 2).Permute(2, 0, 1))
	assert.Equal(t, []float64{1, 3, 5, 7, 2, 4, 6, 8}, values(t, ok(p.Copy())))
}

func TestCPUCopy2D(t *testing.T) {
	cpu := CPU()
	src, err := NewStorage(cpu, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	require.NoError(t, err)
	defer src.Close()
	dst, err := NewStorage(cpu, make([]float32, 10))
	require.NoError(t, err)
	defer dst.Close()
	// Rows 1..2 of a 3×4 matrix, columns 1..3, into rows of 5 from element 1.
	require.NoError(t, src.Copy2D(dst, 2, 3, 4, 5, 5, 1))
	got := make([]float32, 10)
	require.NoError(t, dst.Read(got))
	assert.Equal(t, []float32{0, 5, 6, 7, 0, 0, 9, 10, 11, 0}, got)
	require.NoError(t, src.Copy2D(dst, 0, 3, 4, 5, 100, 100), "an empty block does nothing")

	other, err := NewStorage(cpu, make([]float64, 10))
	require.NoError(t, err)
	defer other.Close()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{src.Copy2D(other, 1, 1, 1, 1, 0, 0), "f32 source, f64 destination"},
		{src.Copy2D(dst, 2, 3, 4, 2, 0, 0), "destination stride 2 is less than a row of 3"},
		{src.Copy2D(dst, 3, 4, 4, 4, 1, 0), "reach element 13 of a source of 12"},
		{src.Copy2D(dst, 2, 3, 3, 5, 0, 3), "reach element 11 of a destination of 10"},
		{src.Copy2D(dst, 2, 3, 3, 5, math.MaxInt, 0), "reach element"},
		{src.Copy2D(dst, 2, 3, math.MaxInt/2, 5, 0, 0), "reach element"},
		{src.Copy2D(dst, -1, 3, 3, 5, 0, 0), "none may be negative"},
	} {
		assert.ErrorContains(t, tc.err, tc.want)
	}
	closed, err := NewStorage(cpu, make([]float32, 4))
	require.NoError(t, err)
	closed.Close()
	assert.ErrorIs(t, src.Copy2D(closed, 1, 1, 1, 1, 0, 0), ErrClosed)
}

func TestCPUWhere(t *testing.T) {
	ok := keep(t)
	cpu := CPU()
	cond := tensorOf(t, cpu, U8, []float64{1, 0, 1}, 3)
	x := tensorOf(t, cpu, F32, []float64{1, 2, 3, 4, 5, 6}, 2, 3)
	y := tensorOf(t, cpu, F32, []float64{-1}, 1)
	assert.Equal(t, []float64{1, -1, 3, 4, -1, 6}, values(t, ok(Where(cond, x, y))))
	_, err := Where(x, x, y)
	assert.ErrorContains(t, err, "a f32 condition")
	_, err = Where(cond, x, tensorOf(t, cpu, F64, []float64{1}))
	assert.ErrorContains(t, err, "f32 and f64 choices")
}

func TestCPUIndexing(t *testing.T) {
	ok := keep(t)
	cpu := CPU()
	x := tensorOf(t, cpu, F32, []float64{1, 2, 3, 4, 5, 6}, 3, 2)
	ids := tensorOf(t, cpu, U32, []float64{2, 0, 2})
	sel := ok(x.IndexSelect(ids, 0))
	assert.Equal(t, Shape{3, 2}, sel.Shape())
	assert.Equal(t, []float64{5, 6, 1, 2, 5, 6}, values(t, sel))
	sel1 := ok(x.IndexSelect(tensorOf(t, cpu, I64, []float64{1, 1, 0}), 1))
	assert.Equal(t, []float64{2, 2, 1, 4, 4, 3, 6, 6, 5}, values(t, sel1))
	_, err := x.IndexSelect(tensorOf(t, cpu, U8, []float64{3}), 0)
	assert.ErrorIs(t, err, ErrIndex)
	assert.ErrorContains(t, err, "candle: Tensor.IndexSelect: index 3 is out of range for a dim of size 3")
	_, err = x.IndexSelect(x, 0)
	assert.ErrorIs(t, err, ErrDType)

	g := ok(x.Gather(tensorOf(t, cpu, I64, []float64{1, 0, 0, 0}, 2, 2), 1))
	assert.Equal(t, []float64{2, 1, 3, 3}, values(t, g))
	_, err = x.Gather(tensorOf(t, cpu, I64, []float64{0, 0, 0}, 1, 3), 0)
	assert.ErrorContains(t, err, "dim 1 is larger")

	src := tensorOf(t, cpu, F32, []float64{10, 20, 30, 40}, 2, 2)
	sids := tensorOf(t, cpu, I64, []float64{2, 0, 0, 2}, 2, 2)
	sc := ok(x.Scatter(sids, src, 0))
	assert.Equal(t, []float64{30, 20, 3, 4, 10, 40}, values(t, sc))
	sa := ok(x.ScatterAdd(sids, src, 0))
	assert.Equal(t, []float64{31, 22, 3, 4, 15, 46}, values(t, sa))
	assert.Equal(t, []float64{1, 2, 3, 4, 5, 6}, values(t, x), "the input is not touched")

	ia := ok(x.IndexAdd(tensorOf(t, cpu, U32, []float64{1, 1}), src, 0))
	assert.Equal(t, []float64{1, 2, 43, 64, 5, 6}, values(t, ia), "repeated indices add up")
	_, err = x.IndexAdd(tensorOf(t, cpu, U32, []float64{1}), src, 0)
	assert.ErrorIs(t, err, ErrShape)
	_, err = x.ScatterAdd(tensorOf(t, cpu, I64, []float64{5, 0, 0, 0}, 2, 2), src, 0)
	assert.ErrorIs(t, err, ErrIndex)
}

func TestCPUReductions(t *testing.T) {
	ok := keep(t)
	cpu := CPU()
	x := tensorOf(t, cpu, F32, []float64{1, 5, 2, 8, 3, 3}, 2, 3)
	assert.Equal(t, []float64{8, 14}, values(t, ok(x.Sum(false, 1))))
	assert.Equal(t, []float64{9, 8, 5}, values(t, ok(x.Sum(false, 0))))
	all := ok(x.Sum(false))
	assert.Equal(t, Shape{}, all.Shape())
	assert.Equal(t, []float64{22}, values(t, all))
	k := ok(x.Sum(true, -1))
	assert.Equal(t, Shape{2, 1}, k.Shape())
	near(t, []float64{8.0 / 3, 14.0 / 3}, values(t, ok(x.Mean(false, 1))), 1e-7)
	assert.Equal(t, []float64{1, 3}, values(t, ok(x.Min(false, 1))))
	assert.Equal(t, []float64{5, 8}, values(t, ok(x.Max(false, 1))))
	am := ok(x.Argmax(false, 1))
	assert.Equal(t, U32, am.DType())
	assert.Equal(t, []float64{1, 0}, values(t, am))
	assert.Equal(t, []float64{0, 1}, values(t, ok(x.Argmin(false, 1))), "ties: the first")
	assert.Equal(t, []float64{3}, values(t, ok(x.Argmax(false))), "over all dims: the flat index")
	// A strided view and several dims.
	y := tensorOf(t, cpu, F64, []float64{1, 2, 3, 4, 5, 6, 7, 8}, 2, 2, 2)
	assert.Equal(t, []float64{16, 20}, values(t, ok(y.Sum(false, 0, 1))))
	assert.Equal(t, []float64{14, 22}, values(t, ok(ok(y.Permute(2, 1, 0)).Sum(false, 0, 2))))
	// NaN wins min and max; the first one.
	n := tensorOf(t, cpu, F32, []float64{1, math.NaN(), 3, math.NaN()})
	assert.True(t, math.IsNaN(values(t, ok(n.Max(false)))[0]))
	assert.Equal(t, []float64{1}, values(t, ok(n.Argmax(false))))
	// Integers.
	i := tensorOf(t, cpu, U8, []float64{200, 100, 7})
	assert.Equal(t, []float64{51}, values(t, ok(i.Sum(false))), "u8 sums wrap")
	assert.Equal(t, []float64{2}, values(t, ok(i.Argmin(false))))
	_, err := i.Mean(false)
	assert.ErrorIs(t, err, ErrDType)
	// Empty reductions.
	e := ok(Zeros(cpu, F32, 2, 0))
	assert.Equal(t, []float64{0, 0}, values(t, ok(e.Sum(false, 1))))
	m := values(t, ok(e.Mean(false, 1)))
	assert.True(t, math.IsNaN(m[0]))
	_, err = e.Max(false, 1)
	assert.ErrorContains(t, err, "max of no elements")
	_, err = x.Sum(false, 1, 1)
	assert.ErrorContains(t, err, "appears twice")
	_, err = x.Sum(false, 2)
	assert.ErrorIs(t, err, ErrShape)
}

func TestTensorsAndStorage(t *testing.T) {
	ok := keep(t)
	cpu := CPU()
	before := cpu.MemoryStats().InUse
	st, err := NewStorage(cpu, []float32{1, 2, 3, 4})
	require.NoError(t, err)
	assert.Equal(t, 4, st.Len())
	assert.Equal(t, F32, st.DType())
	assert.Equal(t, 16, st.Bytes())
	same, err := st.ToDType(F32)
	require.NoError(t, err)
	assert.NotSame(t, st, same, "a conversion to its own dtype is a copy")
	got := make([]float32, 4)
	require.NoError(t, same.Read(got))
	assert.Equal(t, []float32{1, 2, 3, 4}, got)
	require.NoError(t, same.Close())
	assert.Equal(t, before+16, cpu.MemoryStats().InUse, "and its Close gives its memory back")
	_, err = Zeros(cpu, F64, 1<<61)
	assert.ErrorIs(t, err, ErrOutOfMemory, "more bytes than an int counts")
	_, err = Arange(cpu, F32, 0, 1e19, 1)
	assert.ErrorIs(t, err, ErrArgument)
	x, err := FromStorage(st, Shape{2, 2})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, st.Close(), "closing twice does nothing")
	assert.Equal(t, []float64{1, 2, 3, 4}, values(t, x), "the tensor keeps the storage")
	var dst []float32 = make([]float32, 4)
	assert.ErrorIs(t, st.Read(dst), ErrClosed)
	v := ok(x.T())
	require.NoError(t, x.Close())
	assert.Equal(t, []float64{1, 3, 2, 4}, values(t, v), "a view keeps the storage")
	_, err = x.Exp()
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, err, hip.ErrClosed, "the same ErrClosed as package hip's")
	require.NoError(t, v.Close())
	assert.Equal(t, before, cpu.MemoryStats().InUse, "the memory went back")

	st2, err := NewStorage(cpu, []hip.Half{hip.HalfFromFloat32(1.5)})
	require.NoError(t, err)
	defer st2.Close()
	h := make([]hip.Half, 1)
	require.NoError(t, st2.Read(h))
	assert.Equal(t, float32(1.5), h[0].Float32())
	assert.ErrorContains(t, st2.Read(make([]float32, 1)), "[]float32 for f16 data: want []hip.Half")
	assert.ErrorContains(t, st2.Write(make([]hip.Half, 2)), "2 elements for 1")
	st3, err := st2.ToDType(F64)
	require.NoError(t, err)
	defer st3.Close()
	d := make([]float64, 1)
	require.NoError(t, st3.Read(d))
	assert.Equal(t, 1.5, d[0])
	st4, err := st3.Copy()
	require.NoError(t, err)
	require.NoError(t, st4.Write([]float64{2.5}))
	require.NoError(t, st3.Read(d))
	assert.Equal(t, 1.5, d[0], "a copy is its own memory")
	require.NoError(t, st4.Close())

	_, err = FromSlice(cpu, []float32{1, 2, 3}, 2, 2)
	assert.ErrorContains(t, err, "3 elements for shape [2 2] of 4")
	_, err = ToSlice[float64](ok(Zeros(cpu, F32, 1)))
	assert.ErrorContains(t, err, "[]float64 for a f32 tensor: want []float32")
	var nilT *Tensor
	_, err = nilT.Exp()
	assert.ErrorIs(t, err, ErrArgument)
	assert.Equal(t, "candle.Tensor([2 2] f32 on cpu, strided)", ok(ok(Zeros(cpu, F32, 2, 2)).T()).String())
	dev, err := NewDevice("cpu")
	require.NoError(t, err)
	assert.Same(t, cpu, dev)
	_, err = NewDevice("tpu:0")
	assert.ErrorIs(t, err, ErrDevice)
	_, err = NewDevice("hip:x")
	assert.ErrorContains(t, err, "the ordinal must be a number")
}

func TestFromBytes(t *testing.T) {
	cpu := CPU()
	ok := keep(t)
	raw := hip.AsBytes([]float32{1, 2, 3, 4, 5, 6})
	x := ok(FromBytes(cpu, F32, raw, 2, 3))
	assert.Equal(t, Shape{2, 3}, x.Shape())
	assert.Equal(t, []float64{1, 2, 3, 4, 5, 6}, values(t, x))
	h := ok(FromBytes(cpu, F16, hip.AsBytes([]hip.Half{hip.HalfFromFloat32(1.5)}), 1))
	assert.Equal(t, []float64{1.5}, values(t, h))
	_, err := FromBytes(cpu, F32, raw[:20], 2, 3)
	assert.ErrorIs(t, err, ErrShape)
	assert.ErrorContains(t, err, "20 bytes for shape [2 3] of 6 f32 elements (24 bytes)")
	_, err = FromBytes(cpu, DType(99), raw, 6)
	assert.ErrorIs(t, err, ErrDType)
	_, err = FromBytes(nil, F32, raw, 6)
	assert.ErrorIs(t, err, ErrDevice)
	e := ok(FromBytes(cpu, F32, nil, 0, 3))
	assert.Equal(t, 0, e.Elems())

	// ToBytes is the inverse, through any view.
	b, err := ToBytes(x)
	require.NoError(t, err)
	assert.Equal(t, raw, b)
	xt := ok(x.Transpose(0, 1))
	b, err = ToBytes(xt)
	require.NoError(t, err)
	assert.Equal(t, hip.AsBytes([]float32{1, 4, 2, 5, 3, 6}), b)
	b, err = ToBytes(e)
	require.NoError(t, err)
	assert.Empty(t, b)
	require.NoError(t, x.Close())
	_, err = ToBytes(x)
	assert.ErrorIs(t, err, ErrClosed)
}

func TestResetPeak(t *testing.T) {
	cpu := CPU()
	x, err := Zeros(cpu, F32, 1<<18) // 1 MiB
	require.NoError(t, err)
	before := cpu.MemoryStats().InUse
	require.NoError(t, x.Close())
	assert.GreaterOrEqual(t, cpu.MemoryStats().Peak, before, "the peak holds what was in use")
	cpu.ResetPeak()
	st := cpu.MemoryStats()
	assert.Less(t, st.Peak, before, "ResetPeak starts again from what is in use now")
	assert.GreaterOrEqual(t, st.Peak, st.InUse)
}

func TestPeakDuring(t *testing.T) {
	cpu := CPU()
	peak, err := PeakDuring(cpu, func() error {
		x, err := Zeros(cpu, F32, 1<<18) // 1 MiB, freed before f returns
		if err != nil {
			return err
		}
		return x.Close()
	})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, peak, int64(1<<20), "the tensor freed inside f counts")
	boom := errors.New("boom")
	_, err = PeakDuring(cpu, func() error { return boom })
	assert.ErrorIs(t, err, boom)
}

func TestCopyFrom(t *testing.T) {
	cpu := CPU()
	src, err := FromSlice(cpu, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	require.NoError(t, err)
	defer src.Close()
	tr, err := src.Transpose(0, 1) // (3, 2), not contiguous
	require.NoError(t, err)
	defer tr.Close()
	dst, err := Zeros(cpu, F32, 3, 2)
	require.NoError(t, err)
	defer dst.Close()
	require.NoError(t, dst.CopyFrom(tr))
	got, err := ToSlice[float32](dst)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 4, 2, 5, 3, 6}, got)

	f16, err := Zeros(cpu, F16, 3, 2)
	require.NoError(t, err)
	defer f16.Close()
	assert.ErrorIs(t, f16.CopyFrom(tr), ErrDType)
	assert.ErrorIs(t, dst.CopyFrom(src), ErrShape)
	assert.ErrorIs(t, dst.CopyFrom(nil), ErrArgument)
	assert.ErrorIs(t, tr.CopyFrom(dst), ErrArgument, "a destination that is not contiguous")
	same, err := dst.Reshape(3, 2)
	require.NoError(t, err)
	defer same.Close()
	assert.ErrorIs(t, dst.CopyFrom(same), ErrArgument, "a source that shares the destination's storage")
}
