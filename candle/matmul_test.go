package candle

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// naiveMatmul multiplies contiguous row-major batches in float64:
// a (batch, m, k) × b (batch, k, n); a batch of 1 in b serves every batch.
func naiveMatmul(a, b []float64, batch, m, k, n int, bBatch bool) []float64 {
	out := make([]float64, batch*m*n)
	for bi := range batch {
		bo := 0
		if bBatch {
			bo = bi * k * n
		}
		for i := range m {
			for j := range n {
				s := 0.0
				for p := range k {
					s += a[bi*m*k+i*k+p] * b[bo+p*n+j]
				}
				out[bi*m*n+i*n+j] = s
			}
		}
	}
	return out
}

func TestMatmulOnCPU(t *testing.T) {
	cpu := CPU()
	ok := keep(t)
	a := tensorOf(t, cpu, F64, []float64{1, 2, 3, 4, 5, 6}, 2, 3)
	b := tensorOf(t, cpu, F64, []float64{7, 8, 9, 10, 11, 12}, 3, 2)
	c := ok(a.Matmul(b))
	assert.Equal(t, Shape{2, 2}, c.Shape())
	assert.Equal(t, []float64{58, 64, 139, 154}, values(t, c))

	// Transposed operands read through their strides: aᵀᵀ = a.
	at := ok(ok(tensorOf(t, cpu, F64, []float64{1, 4, 2, 5, 3, 6}, 3, 2).T()).Contiguous())
	assert.Equal(t, []float64{58, 64, 139, 154}, values(t, ok(at.Matmul(b))))
	bt := ok(tensorOf(t, cpu, F64, []float64{7, 9, 11, 8, 10, 12}, 2, 3).T())
	assert.Equal(t, []float64{58, 64, 139, 154}, values(t, ok(a.Matmul(bt))))

	// A batch against one matrix, broadcast; every float dtype.
	r := rand.New(rand.NewPCG(3, 4))
	av, bv := make([]float64, 4*3*5), make([]float64, 5*2)
	for i := range av {
		av[i] = float64(r.IntN(9) - 4)
	}
	for i := range bv {
		bv[i] = float64(r.IntN(9) - 4)
	}
	want := naiveMatmul(av, bv, 4, 3, 5, 2, false)
	for _, dt := range []DType{F32, F16, BF16, F64} {
		got := ok(tensorOf(t, cpu, dt, av, 4, 3, 5).Matmul(tensorOf(t, cpu, dt, bv, 5, 2)))
		assert.Equal(t, Shape{4, 3, 2}, got.Shape(), dt.String())
		assert.Equal(t, want, values(t, got), "small integers are exact in %s", dt)
	}
	// Batch dims broadcast both ways: (2, 1, m, k) × (3, k, n) → (2, 3, m, n).
	x := tensorOf(t, cpu, F64, av[:2*3*5], 2, 1, 3, 5)
	y := tensorOf(t, cpu, F64, append(append(append([]float64{}, bv...), bv...), bv...), 3, 5, 2)
	got := ok(x.Matmul(y))
	assert.Equal(t, Shape{2, 3, 3, 2}, got.Shape())
	g := values(t, got)
	for i := range 2 {
		w := naiveMatmul(av[i*15:(i+1)*15], bv, 1, 3, 5, 2, false)
		for j := range 3 {
			assert.Equal(t, w, g[(i*3+j)*6:(i*3+j+1)*6])
		}
	}
	// k = 0: sums of nothing.
	z := ok(ok(Zeros(cpu, F32, 2, 0)).Matmul(ok(Zeros(cpu, F32, 0, 3))))
	assert.Equal(t, []float64{0, 0, 0, 0, 0, 0}, values(t, z))
	// An empty batch: an empty output.
	e := ok(ok(Zeros(cpu, F32, 0, 2, 4)).Matmul(ok(Zeros(cpu, F32, 4, 3))))
	assert.Equal(t, Shape{0, 2, 3}, e.Shape())
}

func TestMatmulErrors(t *testing.T) {
	cpu := CPU()
	ok := keep(t)
	a := ok(Zeros(cpu, F32, 2, 3))
	_, err := a.Matmul(ok(Zeros(cpu, F32, 4, 2)))
	assert.ErrorIs(t, err, ErrShape)
	assert.ErrorContains(t, err, "Tensor.Matmul: [2 3] × [4 2]: the inner dims differ (3 and 4)")
	_, err = a.Matmul(ok(Zeros(cpu, F32, 3)))
	assert.ErrorIs(t, err, ErrShape)
	assert.ErrorContains(t, err, "add a dim with Unsqueeze")
	_, err = ok(Zeros(cpu, F32, 2, 2, 3)).Matmul(ok(Zeros(cpu, F32, 3, 3, 1)))
	assert.ErrorIs(t, err, ErrShape)
	assert.ErrorContains(t, err, "the batch dims do not broadcast")
	_, err = a.Matmul(ok(Zeros(cpu, F16, 3, 2)))
	assert.ErrorIs(t, err, ErrDType)
	_, err = ok(Zeros(cpu, I64, 2, 3)).Matmul(ok(Zeros(cpu, I64, 3, 2)))
	assert.ErrorIs(t, err, ErrDType)
	assert.ErrorContains(t, err, "matmul takes f32, f16, bf16 or f64")
	c := ok(Zeros(cpu, F32, 3, 2))
	require.NoError(t, c.Close())
	_, err = a.Matmul(c)
	assert.ErrorIs(t, err, ErrClosed)
}

// TestMatmulPlan checks how layouts become BLAS calls, without a GPU.
func TestMatmulPlan(t *testing.T) {
	lay := func(shape Shape, f func(Layout) (Layout, error)) Layout {
		l := ContiguousLayout(shape)
		if f != nil {
			var err error
			l, err = f(l)
			require.NoError(t, err)
		}
		return l
	}
	tr := func(l Layout) (Layout, error) { return l.Transpose(-2, -1) }

	// Row-major rows: not transposed, ld = the row stride.
	f, ok := blasForm(lay(Shape{3, 5}, nil))
	assert.True(t, ok)
	assert.Equal(t, matForm{rows: 3, cols: 5, ld: 5}, f)
	// A transposed view: the transpose flag, ld = its column stride.
	f, ok = blasForm(lay(Shape{5, 3}, tr))
	assert.True(t, ok)
	assert.Equal(t, matForm{rows: 3, cols: 5, trans: true, ld: 3}, f)
	// A narrowed last dim keeps the full row stride.
	f, ok = blasForm(lay(Shape{4, 8}, func(l Layout) (Layout, error) { return l.Narrow(1, 2, 3) }))
	assert.True(t, ok)
	assert.Equal(t, matForm{rows: 4, cols: 3, ld: 8}, f)
	// Neither dim of unit stride: a copy first.
	strided := Layout{Shape: Shape{4, 4}, Stride: []int{8, 2}}
	_, ok = blasForm(strided)
	assert.False(t, ok)
	bcast := Layout{Shape: Shape{4, 4}, Stride: []int{0, 1}}
	_, ok = blasForm(bcast)
	assert.False(t, ok, "rows broadcast within a matrix")
	// A single row of any stride.
	f, ok = blasForm(Layout{Shape: Shape{1, 4}, Stride: []int{99, 3}})
	assert.True(t, ok)
	assert.Equal(t, matForm{rows: 1, cols: 4, trans: true, ld: 3}, f)

	// (8, m, k) × (k, n): b broadcast over a batch a walks row by row
	// folds into one GEMM of 8m rows.
	a := lay(Shape{8, 3, 5}, nil)
	b, err := lay(Shape{5, 2}, nil).BroadcastAs(Shape{8, 5, 2})
	require.NoError(t, err)
	calls := gemmCalls(a, b)
	require.Len(t, calls, 1)
	assert.Equal(t, 24, calls[0].m)
	assert.Equal(t, 1, calls[0].batch)
	// A transposed a cannot fold: one batched call with b's stride 0.
	at := lay(Shape{8, 5, 3}, tr)
	calls = gemmCalls(at, b)
	require.Len(t, calls, 1)
	assert.Equal(t, gemmCall{m: 3, n: 2, k: 5, batch: 8, a: matForm{rows: 3, cols: 5, trans: true, ld: 3}, b: matForm{rows: 5, cols: 2, ld: 2},
		aStep: 15, bStep: 0, cSt: 6}, calls[0])
	// (2, 3, m, k) × (2, 1, k, n): the inner batch folds into m, the outer
	// one is the batch.
	a = lay(Shape{2, 3, 4, 5}, nil)
	b, err = lay(Shape{2, 1, 5, 6}, nil).BroadcastAs(Shape{2, 3, 5, 6})
	require.NoError(t, err)
	calls = gemmCalls(a, b)
	require.Len(t, calls, 1)
	assert.Equal(t, [5]int{12, 2, 60, 30, 72}, [5]int{calls[0].m, calls[0].batch, calls[0].aStep, calls[0].bStep, calls[0].cSt})
	// (2, 3, k, m)ᵀ × (2, 1, k, n): no fold, and no single stride walks b's
	// batch: one batched call of 3 per index of the outer dim.
	a = lay(Shape{2, 3, 5, 4}, tr)
	calls = gemmCalls(a, b)
	require.Len(t, calls, 2)
	for i, c := range calls {
		assert.Equal(t, 3, c.batch)
		assert.Equal(t, [3]int{20, 0, 24}, [3]int{c.aStep, c.bStep, c.cSt})
		assert.Equal(t, [3]int{i * 60, i * 30, i * 72}, [3]int{c.aOff, c.bOff, c.cOff})
	}
	// Contiguous batches merge into one.
	calls = gemmCalls(lay(Shape{2, 3, 4, 5}, nil), lay(Shape{2, 3, 5, 6}, nil))
	require.Len(t, calls, 1)
	assert.Equal(t, 6, calls[0].batch)
}

// TestGPUMatmul checks rocBLAS's products against the CPU's float64 ones:
// every float dtype, odd shapes, transposed, narrowed and broadcast
// operands, broadcast batches, and 4096² products on sampled rows.
func TestGPUMatmul(t *testing.T) {
	d := gpu(t)
	ok := keep(t)
	r := rand.New(rand.NewPCG(5, 6))
	gen := values01(r)
	// pair makes the same operand of shape on both devices, read through a
	// transposed view (trans), or a view narrowed from wider rows (narrow).
	pair := func(dt DType, shape Shape, trans, narrow bool) [2]*Tensor {
		store := shape.Clone()
		n := len(store)
		if trans {
			store[n-1], store[n-2] = store[n-2], store[n-1]
		}
		if narrow {
			store[n-1] += 3
		}
		data := make([]float64, store.Elems())
		for i := range data {
			data[i] = gen()
		}
		var out [2]*Tensor
		for i, dev := range []Device{CPU(), d} {
			x := tensorOf(t, dev, dt, data, store...)
			if narrow {
				x = ok(x.Narrow(-1, 1, store[n-1]-3))
			}
			if trans {
				x = ok(x.T())
			}
			require.Equal(t, shape, x.Shape())
			out[i] = x
		}
		return out
	}
	cases := []struct{ a, b Shape }{
		{Shape{1, 1}, Shape{1, 1}}, {Shape{7, 33}, Shape{33, 5}}, {Shape{64, 128}, Shape{128, 64}},
		{Shape{257, 129}, Shape{129, 255}}, {Shape{1, 9}, Shape{9, 1}}, {Shape{5, 1}, Shape{1, 6}},
		{Shape{3, 7, 33}, Shape{33, 5}}, {Shape{3, 7, 33}, Shape{3, 33, 5}}, {Shape{2, 1, 7, 9}, Shape{3, 9, 4}},
		{Shape{9, 4}, Shape{2, 3, 4, 6}},
	}
	for _, dt := range []DType{F32, F16, BF16, F64} {
		for _, c := range cases {
			for _, form := range []struct{ ta, tb, na, nb bool }{{}, {ta: true}, {tb: true}, {ta: true, tb: true}, {na: true, nb: true}, {ta: true, nb: true}} {
				a, b := pair(dt, c.a, form.ta, form.na), pair(dt, c.b, form.tb, form.nb)
				name := fmt.Sprintf("%s %v×%v %+v", dt, c.a, c.b, form)
				want, err := a[0].Matmul(b[0])
				require.NoError(t, err, name)
				got, err := a[1].Matmul(b[1])
				require.NoError(t, err, name)
				same(t, ok(want, nil), ok(got, nil), tolerance(dt)*2, name)
			}
		}
		// Rows broadcast within a matrix have no BLAS form: a copy first.
		row := pair(dt, Shape{1, 17}, false, false)
		b := pair(dt, Shape{17, 3}, true, false)
		same(t, ok(ok(row[0].BroadcastAs(6, 17)).Matmul(b[0])), ok(ok(row[1].BroadcastAs(6, 17)).Matmul(b[1])), tolerance(dt)*2, "broadcast rows "+dt.String())
		// k = 0 fills zeros over the poison.
		z := ok(ok(Zeros(d, dt, 3, 0)).Matmul(ok(Zeros(d, dt, 0, 2))))
		assert.Equal(t, []float64{0, 0, 0, 0, 0, 0}, values(t, z))
	}
	// 4096² × 4096²: rows sampled on the CPU.
	for _, dt := range []DType{F32, F16, BF16} {
		a, b := pair(dt, Shape{4096, 4096}, false, false), pair(dt, Shape{4096, 4096}, true, false)
		got := ok(a[1].Matmul(b[1]))
		want := ok(ok(a[0].Narrow(0, 1237, 2)).Matmul(b[0]))
		// float32 sums of 4096 products of size ~1 wander by ~eps·√k·|partial
		// sums| ≈ 6e-8·64·90 ≈ 3e-4 from the float64 ones: an absolute
		// tolerance, not a relative one, where the result is small.
		tol := max(tolerance(dt)*4, 2e-3)
		same(t, want, ok(got.Narrow(0, 1237, 2)), tol, "4096² "+dt.String())
	}
}
