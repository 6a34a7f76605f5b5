package rocblas

import (
	"bytes"
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
)

// The suite in this file runs every bound function against a reference
// computed here in complex128, on random inputs (never zeros), with every
// output poisoned before the call and the memory around each operand
// checked to be untouched. It runs on a GPU in tier 2 (gpu_test.go) and
// in tier 0 against the fake rocBLAS and the fake cuBLAS, whose "device"
// memory is host memory (fake_test.go).

// env is a handle on a device, real or fake, and the sizes to test.
type env struct {
	dev    *hip.Device
	stream *hip.Stream
	h      *Handle
	// small, mid and large are the sizes of the tests: 1 is always tested
	// too. On a GPU they are 7, 129 and 1000.
	small, mid, large int
	rng               *rand.Rand
	// align, when set, makes the offsets, leading dimensions and strides
	// of new matrices multiples of it (cuBLAS's int8 products want 4).
	align int
}

func (e *env) sizes() []int { return []int{1, e.small, e.mid, e.large} }

// reduced reports whether a case has the large size in it: such cases run
// every transpose but fewer of the other combinations, to keep the
// references on the CPU (and tier 2's race-detector binaries) fast.
func (e *env) reduced(dims ...int) bool {
	for _, d := range dims {
		if d == e.large && e.large > e.mid {
			return true
		}
	}
	return false
}

// tabulate evaluates f on a rows×cols grid once and returns a lookup.
func tabulate(rows, cols int, f func(i, j int) complex128) func(i, j int) complex128 {
	v := make([]complex128, rows*cols)
	for j := 0; j < cols; j++ {
		for i := 0; i < rows; i++ {
			v[i+j*rows] = f(i, j)
		}
	}
	return func(i, j int) complex128 { return v[i+j*rows] }
}

// toCs and fromCs convert elements to and from complex128, a slice at a
// time (an interface conversion per element would allocate).
func toCs[T Numeric](s []T) []complex128 {
	out := make([]complex128, len(s))
	switch x := any(s).(type) {
	case []float32:
		for i, v := range x {
			out[i] = complex(float64(v), 0)
		}
	case []float64:
		for i, v := range x {
			out[i] = complex(v, 0)
		}
	case []complex64:
		for i, v := range x {
			out[i] = complex128(v)
		}
	case []complex128:
		copy(out, x)
	case []hip.Half:
		for i, v := range x {
			out[i] = complex(float64(v.Float32()), 0)
		}
	case []hip.BFloat16:
		for i, v := range x {
			out[i] = complex(float64(v.Float32()), 0)
		}
	case []int8:
		for i, v := range x {
			out[i] = complex(float64(v), 0)
		}
	case []int32:
		for i, v := range x {
			out[i] = complex(float64(v), 0)
		}
	}
	return out
}

func fromCs[T Numeric](c []complex128) []T {
	out := make([]T, len(c))
	switch x := any(out).(type) {
	case []float32:
		for i, v := range c {
			x[i] = float32(real(v))
		}
	case []float64:
		for i, v := range c {
			x[i] = real(v)
		}
	case []complex64:
		for i, v := range c {
			x[i] = complex64(v)
		}
	case []complex128:
		copy(x, c)
	case []hip.Half:
		for i, v := range c {
			x[i] = hip.HalfFromFloat32(float32(real(v)))
		}
	case []hip.BFloat16:
		for i, v := range c {
			x[i] = hip.BFloat16FromFloat32(float32(real(v)))
		}
	case []int8:
		for i, v := range c {
			x[i] = int8(real(v))
		}
	case []int32:
		for i, v := range c {
			x[i] = int32(real(v))
		}
	}
	return out
}

func toC[T Numeric](v T) complex128   { return toCs([]T{v})[0] }
func fromC[T Numeric](c complex128) T { return fromCs[T]([]complex128{c})[0] }

func isComplex[T Numeric]() bool {
	k, _, _ := kind[T]()
	return k == kindC || k == kindZ
}

// randomC returns a random value for T: parts in ±[0.1, 1), never zero;
// whole numbers in ±[1, 8] for the integer types.
func randomC[T Numeric](rng *rand.Rand) complex128 {
	part := func() float64 {
		v := 0.1 + 0.9*rng.Float64()
		if rng.IntN(2) == 0 {
			v = -v
		}
		return v
	}
	var zero T
	switch any(zero).(type) {
	case int8, int32:
		v := float64(1 + rng.IntN(8))
		if rng.IntN(2) == 0 {
			v = -v
		}
		return complex(v, 0)
	}
	if isComplex[T]() {
		return complex(part(), part())
	}
	return complex(part(), 0)
}

func random[T Numeric](rng *rand.Rand) T { return fromC[T](randomC[T](rng)) }

func randoms[T Numeric](rng *rand.Rand, n int) []T {
	c := make([]complex128, n)
	for i := range c {
		c[i] = randomC[T](rng)
	}
	return fromCs[T](c)
}

// poisonValue is what outputs are filled with before a call: NaN for the
// float types, an unlikely integer for the others.
func poisonValue[T Numeric]() T {
	var zero T
	switch any(zero).(type) {
	case int8:
		return fromC[T](complex(-128, 0))
	case int32:
		return fromC[T](complex(-2071690107, 0))
	case hip.Half:
		return any(hip.Half(0x7e00)).(T)
	case hip.BFloat16:
		return any(hip.BFloat16(0x7fc0)).(T)
	}
	return fromC[T](complex(math.NaN(), math.NaN()))
}

// same compares element i of two slices bit for bit (NaN equals NaN).
func same[T Numeric](a, b []T, i int) bool {
	return bytes.Equal(hip.AsBytes(a[i:i+1]), hip.AsBytes(b[i:i+1]))
}

// buf is device memory with its host copy. The handle's stream may not be
// ordered with the synchronous copies (a non-blocking stream is not): read
// and sync wait for it first.
type buf[T Numeric] struct {
	b    *hip.Buffer
	s    *hip.Stream
	host []T
	cx   []complex128 // host as complex128, for the references
}

func newBuf[T Numeric](t *testing.T, e *env, host []T) buf[T] {
	t.Helper()
	b, err := e.dev.Malloc(len(host) * sizeOf[T]())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	require.NoError(t, b.CopyFromHost(hip.AsBytes(host)))
	return buf[T]{b: b, s: e.stream, host: host, cx: toCs(host)}
}

// unchanged checks that the device copy still equals the host copy.
func (b buf[T]) unchanged(t *testing.T, what string) {
	t.Helper()
	assert.True(t, bytes.Equal(hip.AsBytes(b.host), hip.AsBytes(b.read(t))), what)
}

// sync uploads the host copy again after it was changed in place.
func (b *buf[T]) sync(t *testing.T) {
	t.Helper()
	require.NoError(t, b.s.Synchronize())
	require.NoError(t, b.b.CopyFromHost(hip.AsBytes(b.host)))
	copy(b.cx, toCs(b.host))
}

func (b buf[T]) read(t *testing.T) []T {
	t.Helper()
	require.NoError(t, b.s.Synchronize())
	out := make([]T, len(b.host))
	require.NoError(t, b.b.CopyToHost(hip.AsBytes(out)))
	return out
}

// dmat is a matrix in a buffer of its own, with an offset, padding rows
// (ld > rows unless pad is 0) and elements after it, all random.
type dmat[T Numeric] struct {
	buf[T]
	m Matrix[T]
}

// acc reads element (i, j) of a stored matrix or vector.
type acc func(i, j int) complex128

func newMat[T Numeric](t *testing.T, e *env, rows, cols, pad int) dmat[T] {
	off, ld := layout(e, rows, pad)
	host := randoms[T](e.rng, off+ld*cols+2)
	return dmat[T]{buf: newBuf(t, e, host), m: Matrix[T]{Offset: off, Rows: rows, Cols: cols, Ld: ld}}
}

// layout picks a matrix's offset (1 to 3 elements) and leading dimension
// (rows + pad); when e.align is set, both are multiples of it.
func layout(e *env, rows, pad int) (off, ld int) {
	off, ld = 1+e.rng.IntN(3), rows+pad
	if a := e.align; a > 1 {
		off, ld = a, (ld+a-1)/a*a
	}
	return off, ld
}

func (d *dmat[T]) fix() { d.m.Buf = d.b }

func (d dmat[T]) at(i, j int) complex128 { return d.cx[d.m.Offset+i+j*d.m.Ld] }

// poisonMat rewrites the matrix's elements with poison, on the device too.
func (d *dmat[T]) poison(t *testing.T) {
	for j := 0; j < d.m.Cols; j++ {
		for i := 0; i < d.m.Rows; i++ {
			d.host[d.m.Offset+i+j*d.m.Ld] = poisonValue[T]()
		}
	}
	d.sync(t)
}

// dvec is a vector in a buffer of its own, with an offset and gaps for
// |inc| > 1.
type dvec[T Numeric] struct {
	buf[T]
	v Vector[T]
}

func newVec[T Numeric](t *testing.T, e *env, n, inc int) dvec[T] {
	off := 1 + e.rng.IntN(3)
	a := inc
	if a < 0 {
		a = -a
	}
	host := randoms[T](e.rng, off+(n-1)*a+1+2)
	return dvec[T]{buf: newBuf(t, e, host), v: Vector[T]{Offset: off, N: n, Inc: inc}}
}

// pos is the buffer index of element i (BLAS order for negative inc).
func (d dvec[T]) pos(i int) int {
	inc := d.v.Inc
	if inc == 0 {
		inc = 1
	}
	if inc > 0 {
		return d.v.Offset + i*inc
	}
	return d.v.Offset + (d.v.N-1-i)*(-inc)
}

func (d dvec[T]) at(i int) complex128 { return d.cx[d.pos(i)] }

func (d *dvec[T]) poison(t *testing.T) {
	for i := 0; i < d.v.N; i++ {
		d.host[d.pos(i)] = poisonValue[T]()
	}
	d.sync(t)
}

// tolerance is the relative Frobenius error allowed for T's arithmetic.
func tolerance[T Numeric]() float64 {
	var zero T
	switch any(zero).(type) {
	case float32, complex64:
		return 1e-4
	case float64, complex128:
		return 1e-11
	case hip.Half:
		return 2e-2 // rocblas_hgemm and cublasHgemm accumulate in half precision
	case hip.BFloat16:
		return 1e-2
	}
	return 0
}

// expect is what an operation must write: values at buffer indexes.
type expect struct {
	idx []int
	val []complex128
}

func (w *expect) add(i int, v complex128) {
	w.idx = append(w.idx, i)
	w.val = append(w.val, v)
}

// checker compares an operation's outputs with the reference: every
// written element within the tolerance (relative Frobenius error), every
// other element as uploaded.
type checker[T Numeric] struct {
	t    *testing.T
	what string
	tol  float64
}

// check compares got (the buffer after the call) with before (the host
// copy before it).
func (c checker[T]) check(before, got []T, w expect) {
	c.t.Helper()
	written := make([]bool, len(got))
	for _, i := range w.idx {
		written[i] = true
	}
	for i := range got {
		if !written[i] && !same(got, before, i) {
			c.t.Fatalf("%s: element %d outside the output changed: %v, was %v", c.what, i, got[i], before[i])
		}
	}
	gotC := toCs(got)
	var num, den float64
	for k, i := range w.idx {
		g, v := gotC[i], w.val[k]
		if cmplx.IsNaN(g) || cmplx.IsInf(g) {
			c.t.Fatalf("%s: element %d is %v (not written?), want %v", c.what, i, got[i], v)
		}
		d := g - v
		num += real(d)*real(d) + imag(d)*imag(d)
		den += real(v)*real(v) + imag(v)*imag(v)
	}
	if den == 0 {
		den = 1
	}
	if rel := math.Sqrt(num / den); !(rel <= c.tol) {
		c.t.Fatalf("%s: relative error %.3g > %.3g", c.what, rel, c.tol)
	}
}

// checkScalar compares one result with a reference, relative to scale.
func checkScalar(t *testing.T, what string, got, want complex128, scale, tol float64) {
	t.Helper()
	if scale == 0 {
		scale = 1
	}
	if e := cmplx.Abs(got-want) / scale; !(e <= tol) {
		t.Fatalf("%s: %v, want %v (error %.3g relative to %.3g)", what, got, want, e, scale)
	}
}

// matWant is the expected content of a matrix output: value(i, j) at each
// element of the rows×cols matrix (only where keep(i, j), if keep is set).
func matWant[T Numeric](m Matrix[T], value func(i, j int) complex128, keep func(i, j int) bool) expect {
	var w expect
	addMat(&w, m, value, keep)
	return w
}

func addMat[T Numeric](w *expect, m Matrix[T], value func(i, j int) complex128, keep func(i, j int) bool) {
	for j := 0; j < m.Cols; j++ {
		for i := 0; i < m.Rows; i++ {
			if keep == nil || keep(i, j) {
				w.add(m.Offset+i+j*m.Ld, value(i, j))
			}
		}
	}
}

func vecWant[T Numeric](d dvec[T], value func(i int) complex128) expect {
	var w expect
	for i := 0; i < d.v.N; i++ {
		w.add(d.pos(i), value(i))
	}
	return w
}

// opAt is element (i, j) of op(A).
func opAt(t Operation, a acc, i, j int) complex128 {
	switch t {
	case OperationTranspose:
		return a(j, i)
	case OperationConjugateTranspose:
		return cmplx.Conj(a(j, i))
	}
	return a(i, j)
}

// ops are the transposes to test for T: conjugation only for complex.
func ops[T Elem]() []Operation {
	if isComplex[T]() {
		return []Operation{OperationNone, OperationTranspose, OperationConjugateTranspose}
	}
	return []Operation{OperationNone, OperationTranspose}
}

// forTypes runs a test body for each of the four BLAS element types.
func forTypes(t *testing.T, s, d, c, z func(*testing.T)) {
	t.Run("float32", s)
	t.Run("float64", d)
	t.Run("complex64", c)
	t.Run("complex128", z)
}

// runSuite runs every bound function.
func runSuite(t *testing.T, e *env) {
	t.Run("Axpy", func(t *testing.T) {
		forTypes(t, of(testAxpy[float32], e), of(testAxpy[float64], e), of(testAxpy[complex64], e), of(testAxpy[complex128], e))
	})
	t.Run("Scal", func(t *testing.T) {
		forTypes(t, of(testScal[float32], e), of(testScal[float64], e), of(testScal[complex64], e), of(testScal[complex128], e))
	})
	t.Run("CopySwap", func(t *testing.T) {
		forTypes(t, of(testCopySwap[float32], e), of(testCopySwap[float64], e), of(testCopySwap[complex64], e), of(testCopySwap[complex128], e))
	})
	t.Run("Rot", func(t *testing.T) {
		forTypes(t, of(testRot[float32], e), of(testRot[float64], e), of(testRot[complex64], e), of(testRot[complex128], e))
	})
	t.Run("Dot", func(t *testing.T) {
		forTypes(t, of(testDot[float32], e), of(testDot[float64], e), of(testDot[complex64], e), of(testDot[complex128], e))
	})
	t.Run("Reductions", func(t *testing.T) {
		forTypes(t, of(testReductions[float32], e), of(testReductions[float64], e), of(testReductions[complex64], e), of(testReductions[complex128], e))
	})
	t.Run("Gemv", func(t *testing.T) {
		forTypes(t, of(testGemv[float32], e), of(testGemv[float64], e), of(testGemv[complex64], e), of(testGemv[complex128], e))
	})
	t.Run("Ger", func(t *testing.T) {
		forTypes(t, of(testGer[float32], e), of(testGer[float64], e), of(testGer[complex64], e), of(testGer[complex128], e))
	})
	t.Run("Symv", func(t *testing.T) {
		forTypes(t, of(testSymv[float32], e), of(testSymv[float64], e), of(testSymv[complex64], e), of(testSymv[complex128], e))
	})
	t.Run("TrmvTrsv", func(t *testing.T) {
		forTypes(t, of(testTrmv[float32], e), of(testTrmv[float64], e), of(testTrmv[complex64], e), of(testTrmv[complex128], e))
	})
	t.Run("Gemm", func(t *testing.T) {
		forTypes(t, of(testGemm[float32], e), of(testGemm[float64], e), of(testGemm[complex64], e), of(testGemm[complex128], e))
		t.Run("hip.Half", of(testGemm[hip.Half], e))
	})
	t.Run("GemmEx", func(t *testing.T) { testGemmEx(t, e) })
	t.Run("Trsm", func(t *testing.T) {
		forTypes(t, of(testTrsm[float32], e), of(testTrsm[float64], e), of(testTrsm[complex64], e), of(testTrsm[complex128], e))
	})
	t.Run("Trmm", func(t *testing.T) {
		forTypes(t, of(testTrmm[float32], e), of(testTrmm[float64], e), of(testTrmm[complex64], e), of(testTrmm[complex128], e))
	})
	t.Run("Syrk", func(t *testing.T) {
		forTypes(t, of(testSyrk[float32], e), of(testSyrk[float64], e), of(testSyrk[complex64], e), of(testSyrk[complex128], e))
	})
	t.Run("Symm", func(t *testing.T) {
		forTypes(t, of(testSymm[float32], e), of(testSymm[float64], e), of(testSymm[complex64], e), of(testSymm[complex128], e))
	})
	t.Run("Geam", func(t *testing.T) {
		forTypes(t, of(testGeam[float32], e), of(testGeam[float64], e), of(testGeam[complex64], e), of(testGeam[complex128], e))
	})
}

func of(f func(*testing.T, *env), e *env) func(*testing.T) { return func(t *testing.T) { f(t, e) } }

// batch is the batch size of the batched tests.
const batch = 3

// ---- Level 1 ----

// l1Shapes are the (n, incx, incy) cases of the two-vector operations:
// every size, gaps, and negative increments.
func l1Shapes(e *env) [][3]int {
	var out [][3]int
	for _, n := range e.sizes() {
		out = append(out, [3]int{n, 1, 1}, [3]int{n, 2, 3}, [3]int{n, -2, 1}, [3]int{n, 1, -1})
	}
	return out
}

func testAxpy[T Elem](t *testing.T, e *env) {
	for _, s := range l1Shapes(e) {
		n, incx, incy := s[0], s[1], s[2]
		t.Run(fmt.Sprintf("n%d_inc%d_%d", n, incx, incy), func(t *testing.T) {
			alpha := random[T](e.rng)
			x, y := newVec[T](t, e, n, incx), newVec[T](t, e, n, incy)
			x.v.Buf, y.v.Buf = x.b, y.b
			require.NoError(t, Axpy(e.h, alpha, x.v, y.v))
			checker[T]{t, "Axpy y", tolerance[T]()}.check(y.host, y.read(t), vecWant(y, func(i int) complex128 { return toC(alpha)*x.at(i) + y.at(i) }))
			x.unchanged(t, "x is not written")

			xs, ys := vecBatch[T](t, e, n, incx), vecBatch[T](t, e, n, incy)
			require.NoError(t, AxpyBatched(e.h, alpha, vecsOfBatch(xs), vecsOfBatch(ys)))
			for b := range ys {
				checker[T]{t, fmt.Sprintf("AxpyBatched y[%d]", b), tolerance[T]()}.check(ys[b].host, ys[b].read(t),
					vecWant(ys[b], func(i int) complex128 { return toC(alpha)*xs[b].at(i) + ys[b].at(i) }))
			}

			sx, sy := newStridedVec[T](t, e, n, incx), newStridedVec[T](t, e, n, incy)
			require.NoError(t, AxpyStridedBatched(e.h, alpha, sx.sv, sy.sv, batch))
			sy.check(t, "AxpyStridedBatched y", func(b, i int) complex128 { return toC(alpha)*sx.at(b, i) + sy.at(b, i) }, sy.read(t))
		})
	}
}

// vecBatch makes batch vectors, each in its own buffer.
func vecBatch[T Numeric](t *testing.T, e *env, n, inc int) []dvec[T] {
	out := make([]dvec[T], batch)
	for i := range out {
		out[i] = newVec[T](t, e, n, inc)
		out[i].v.Buf = out[i].b
	}
	return out
}

func vecsOfBatch[T Numeric](ds []dvec[T]) []Vector[T] {
	out := make([]Vector[T], len(ds))
	for i, d := range ds {
		out[i] = d.v
	}
	return out
}

// svec is a strided batch of vectors in one buffer, with gaps between the
// entries.
type svec[T Numeric] struct {
	buf[T]
	sv StridedVector[T]
}

func newStridedVec[T Numeric](t *testing.T, e *env, n, inc int) svec[T] {
	off := 1 + e.rng.IntN(3)
	a := inc
	if a < 0 {
		a = -a
	}
	span := (n-1)*a + 1
	stride := span + 1 + e.rng.IntN(3)
	host := randoms[T](e.rng, off+(batch-1)*stride+span+2)
	s := svec[T]{buf: newBuf(t, e, host)}
	s.sv = StridedVector[T]{Vector: Vector[T]{Buf: s.b, Offset: off, N: n, Inc: inc}, Stride: stride}
	return s
}

func (s svec[T]) entry(b int) dvec[T] {
	v := s.sv.Vector
	v.Offset += b * s.sv.Stride
	return dvec[T]{buf: s.buf, v: v}
}

func (s svec[T]) at(b, i int) complex128 { return s.entry(b).at(i) }

func (s *svec[T]) poison(t *testing.T) {
	for b := 0; b < batch; b++ {
		d := s.entry(b)
		for i := 0; i < d.v.N; i++ {
			s.host[d.pos(i)] = poisonValue[T]()
		}
	}
	s.sync(t)
}

// check compares every entry of a strided output with want(b, i).
func (s svec[T]) check(t *testing.T, what string, want func(b, i int) complex128, got []T) {
	t.Helper()
	var w expect
	for b := 0; b < batch; b++ {
		d := s.entry(b)
		for i := 0; i < d.v.N; i++ {
			w.add(d.pos(i), want(b, i))
		}
	}
	checker[T]{t, what, tolerance[T]()}.check(s.host, got, w)
}

func testScal[T Elem](t *testing.T, e *env) {
	for _, n := range e.sizes() {
		for _, inc := range []int{1, 3} {
			t.Run(fmt.Sprintf("n%d_inc%d", n, inc), func(t *testing.T) {
				alpha := random[T](e.rng)
				x := newVec[T](t, e, n, inc)
				x.v.Buf = x.b
				require.NoError(t, Scal(e.h, alpha, x.v))
				checker[T]{t, "Scal", tolerance[T]()}.check(x.host, x.read(t), vecWant(x, func(i int) complex128 { return toC(alpha) * x.at(i) }))

				xs := vecBatch[T](t, e, n, inc)
				require.NoError(t, ScalBatched(e.h, alpha, vecsOfBatch(xs)))
				for b := range xs {
					checker[T]{t, "ScalBatched", tolerance[T]()}.check(xs[b].host, xs[b].read(t), vecWant(xs[b], func(i int) complex128 { return toC(alpha) * xs[b].at(i) }))
				}
				sx := newStridedVec[T](t, e, n, inc)
				require.NoError(t, ScalStridedBatched(e.h, alpha, sx.sv, batch))
				sx.check(t, "ScalStridedBatched", func(b, i int) complex128 { return toC(alpha) * sx.at(b, i) }, sx.read(t))
			})
		}
	}
}

func testCopySwap[T Elem](t *testing.T, e *env) {
	for _, s := range l1Shapes(e) {
		n, incx, incy := s[0], s[1], s[2]
		t.Run(fmt.Sprintf("n%d_inc%d_%d", n, incx, incy), func(t *testing.T) {
			x, y := newVec[T](t, e, n, incx), newVec[T](t, e, n, incy)
			x.v.Buf, y.v.Buf = x.b, y.b
			y.poison(t)
			require.NoError(t, Copy(e.h, x.v, y.v))
			checker[T]{t, "Copy", 0}.check(y.host, y.read(t), vecWant(y, x.at))

			x, y = newVec[T](t, e, n, incx), newVec[T](t, e, n, incy)
			x.v.Buf, y.v.Buf = x.b, y.b
			require.NoError(t, Swap(e.h, x.v, y.v))
			checker[T]{t, "Swap y", 0}.check(y.host, y.read(t), vecWant(y, x.at))
			checker[T]{t, "Swap x", 0}.check(x.host, x.read(t), vecWant(x, y.at))

			xs, ys := vecBatch[T](t, e, n, incx), vecBatch[T](t, e, n, incy)
			for b := range ys {
				ys[b].poison(t)
			}
			require.NoError(t, CopyBatched(e.h, vecsOfBatch(xs), vecsOfBatch(ys)))
			for b := range ys {
				checker[T]{t, "CopyBatched", 0}.check(ys[b].host, ys[b].read(t), vecWant(ys[b], xs[b].at))
			}
			xs, ys = vecBatch[T](t, e, n, incx), vecBatch[T](t, e, n, incy)
			require.NoError(t, SwapBatched(e.h, vecsOfBatch(xs), vecsOfBatch(ys)))
			for b := range ys {
				checker[T]{t, "SwapBatched y", 0}.check(ys[b].host, ys[b].read(t), vecWant(ys[b], xs[b].at))
				checker[T]{t, "SwapBatched x", 0}.check(xs[b].host, xs[b].read(t), vecWant(xs[b], ys[b].at))
			}

			sx, sy := newStridedVec[T](t, e, n, incx), newStridedVec[T](t, e, n, incy)
			sy.poison(t)
			require.NoError(t, CopyStridedBatched(e.h, sx.sv, sy.sv, batch))
			sy.check(t, "CopyStridedBatched", sx.at, sy.read(t))
			sx, sy = newStridedVec[T](t, e, n, incx), newStridedVec[T](t, e, n, incy)
			require.NoError(t, SwapStridedBatched(e.h, sx.sv, sy.sv, batch))
			sy.check(t, "SwapStridedBatched y", sx.at, sy.read(t))
			sx.check(t, "SwapStridedBatched x", sy.at, sx.read(t))
		})
	}
}

func testRot[T Elem](t *testing.T, e *env) {
	for _, s := range l1Shapes(e) {
		n, incx, incy := s[0], s[1], s[2]
		t.Run(fmt.Sprintf("n%d_inc%d_%d", n, incx, incy), func(t *testing.T) {
			// A rotation: c² + |s|² = 1.
			theta := e.rng.Float64() * math.Pi
			c := math.Cos(theta)
			var sn T
			if isComplex[T]() {
				sn = fromC[T](cmplx.Rect(math.Sin(theta), e.rng.Float64()))
			} else {
				sn = fromC[T](complex(math.Sin(theta), 0))
			}
			cr := toC(fromC[T](complex(c, 0))) // c in T's precision
			sv := toC(sn)
			newX := func(x, y complex128) complex128 { return cr*x + sv*y }
			newY := func(x, y complex128) complex128 { return cr*y - cmplx.Conj(sv)*x }

			x, y := newVec[T](t, e, n, incx), newVec[T](t, e, n, incy)
			x.v.Buf, y.v.Buf = x.b, y.b
			require.NoError(t, Rot(e.h, x.v, y.v, c, sn))
			tol := tolerance[T]()
			checker[T]{t, "Rot x", tol}.check(x.host, x.read(t), vecWant(x, func(i int) complex128 { return newX(x.at(i), y.at(i)) }))
			checker[T]{t, "Rot y", tol}.check(y.host, y.read(t), vecWant(y, func(i int) complex128 { return newY(x.at(i), y.at(i)) }))

			xs, ys := vecBatch[T](t, e, n, incx), vecBatch[T](t, e, n, incy)
			require.NoError(t, RotBatched(e.h, vecsOfBatch(xs), vecsOfBatch(ys), c, sn))
			for b := range xs {
				checker[T]{t, "RotBatched x", tol}.check(xs[b].host, xs[b].read(t), vecWant(xs[b], func(i int) complex128 { return newX(xs[b].at(i), ys[b].at(i)) }))
				checker[T]{t, "RotBatched y", tol}.check(ys[b].host, ys[b].read(t), vecWant(ys[b], func(i int) complex128 { return newY(xs[b].at(i), ys[b].at(i)) }))
			}

			sx, sy := newStridedVec[T](t, e, n, incx), newStridedVec[T](t, e, n, incy)
			require.NoError(t, RotStridedBatched(e.h, sx.sv, sy.sv, c, sn, batch))
			sx.check(t, "RotStridedBatched x", func(b, i int) complex128 { return newX(sx.at(b, i), sy.at(b, i)) }, sx.read(t))
			sy.check(t, "RotStridedBatched y", func(b, i int) complex128 { return newY(sx.at(b, i), sy.at(b, i)) }, sy.read(t))
		})
	}
}

// dotRef is Σ op(x[i])*y[i] and the scale of its rounding error.
func dotRef(n int, x, y func(int) complex128, conj bool) (complex128, float64) {
	var s complex128
	var scale float64
	for i := 0; i < n; i++ {
		xv := x(i)
		if conj {
			xv = cmplx.Conj(xv)
		}
		s += xv * y(i)
		scale += cmplx.Abs(xv * y(i))
	}
	return s, scale
}

func testDot[T Elem](t *testing.T, e *env) {
	tol := tolerance[T]()
	for _, s := range l1Shapes(e) {
		n, incx, incy := s[0], s[1], s[2]
		t.Run(fmt.Sprintf("n%d_inc%d_%d", n, incx, incy), func(t *testing.T) {
			x, y := newVec[T](t, e, n, incx), newVec[T](t, e, n, incy)
			x.v.Buf, y.v.Buf = x.b, y.b
			res := newVec[T](t, e, batch+2, 1)
			res.v.Buf = res.b
			for _, conj := range []bool{false, true} {
				name, dot, dotTo := "Dot", Dot[T], DotTo[T]
				batchedFn, batchedTo, stridedFn, stridedTo := DotBatched[T], DotBatchedTo[T], DotStridedBatched[T], DotStridedBatchedTo[T]
				if conj {
					name, dot, dotTo = "Dotc", Dotc[T], DotcTo[T]
					batchedFn, batchedTo, stridedFn, stridedTo = DotcBatched[T], DotcBatchedTo[T], DotcStridedBatched[T], DotcStridedBatchedTo[T]
				}
				want, scale := dotRef(n, x.at, y.at, conj)
				got, err := dot(e.h, x.v, y.v)
				require.NoError(t, err)
				checkScalar(t, name, toC(got), want, scale, tol)

				res.poison(t)
				require.NoError(t, dotTo(e.h, x.v, y.v, res.v))
				checkScalar(t, name+"To", toC(res.read(t)[res.pos(0)]), want, scale, tol)

				xs, ys := vecBatch[T](t, e, n, incx), vecBatch[T](t, e, n, incy)
				gots, err := batchedFn(e.h, vecsOfBatch(xs), vecsOfBatch(ys))
				require.NoError(t, err)
				require.Len(t, gots, batch)
				res.poison(t)
				require.NoError(t, batchedTo(e.h, vecsOfBatch(xs), vecsOfBatch(ys), res.v))
				dev := res.read(t)
				for b := range xs {
					want, scale := dotRef(n, xs[b].at, ys[b].at, conj)
					checkScalar(t, name+"Batched", toC(gots[b]), want, scale, tol)
					checkScalar(t, name+"BatchedTo", toC(dev[res.pos(b)]), want, scale, tol)
				}

				sx, sy := newStridedVec[T](t, e, n, incx), newStridedVec[T](t, e, n, incy)
				gots, err = stridedFn(e.h, sx.sv, sy.sv, batch)
				require.NoError(t, err)
				res.poison(t)
				require.NoError(t, stridedTo(e.h, sx.sv, sy.sv, batch, res.v))
				dev = res.read(t)
				for b := 0; b < batch; b++ {
					want, scale := dotRef(n, func(i int) complex128 { return sx.at(b, i) }, func(i int) complex128 { return sy.at(b, i) }, conj)
					checkScalar(t, name+"StridedBatched", toC(gots[b]), want, scale, tol)
					checkScalar(t, name+"StridedBatchedTo", toC(dev[res.pos(b)]), want, scale, tol)
				}
				assert.True(t, same(res.read(t)[res.pos(batch):], []T{poisonValue[T]()}, 0), "nothing past the batch's results is written")
			}
		})
	}
}

// reduceRef returns nrm2, asum, and the 0-based indexes of the largest and
// smallest |re|+|im|.
func reduceRef(n int, x func(int) complex128) (nrm2, asum float64, imax, imin int) {
	var ss float64
	best, worst := -1.0, math.Inf(1)
	for i := 0; i < n; i++ {
		v := x(i)
		ss += real(v)*real(v) + imag(v)*imag(v)
		m := math.Abs(real(v)) + math.Abs(imag(v))
		asum += m
		if m > best {
			best, imax = m, i
		}
		if m < worst {
			worst, imin = m, i
		}
	}
	return math.Sqrt(ss), asum, imax, imin
}

func testReductions[T Elem](t *testing.T, e *env) {
	tol := tolerance[T]()
	for _, n := range e.sizes() {
		for _, inc := range []int{1, 2} {
			t.Run(fmt.Sprintf("n%d_inc%d", n, inc), func(t *testing.T) {
				x := newVec[T](t, e, n, inc)
				x.v.Buf = x.b
				nrm, asum, imax, imin := reduceRef(n, x.at)
				got, err := Nrm2(e.h, x.v)
				require.NoError(t, err)
				checkScalar(t, "Nrm2", complex(got, 0), complex(nrm, 0), nrm, tol)
				got, err = Asum(e.h, x.v)
				require.NoError(t, err)
				checkScalar(t, "Asum", complex(got, 0), complex(asum, 0), asum, tol)
				i, err := Iamax(e.h, x.v)
				require.NoError(t, err)
				assert.Equal(t, imax, i, "Iamax")
				i, err = Iamin(e.h, x.v)
				require.NoError(t, err)
				assert.Equal(t, imin, i, "Iamin")

				// Device results: the real type of T, and 1-based indexes.
				idx := newVec[int32](t, e, batch+1, 1)
				idx.v.Buf = idx.b
				idx.poison(t)
				require.NoError(t, IamaxTo(e.h, x.v, idx.v))
				assert.Equal(t, int32(imax+1), idx.read(t)[idx.pos(0)], "IamaxTo")
				require.NoError(t, IaminTo(e.h, x.v, idx.v))
				assert.Equal(t, int32(imin+1), idx.read(t)[idx.pos(0)], "IaminTo")
				if isDouble[T]() {
					testRealTo[T, float64](t, e, x, nrm, asum)
				} else {
					testRealTo[T, float32](t, e, x, nrm, asum)
				}

				xs := vecBatch[T](t, e, n, inc)
				sx := newStridedVec[T](t, e, n, inc)
				nrms, err := Nrm2Batched(e.h, vecsOfBatch(xs))
				require.NoError(t, err)
				asums, err := AsumBatched(e.h, vecsOfBatch(xs))
				require.NoError(t, err)
				imaxs, err := IamaxBatched(e.h, vecsOfBatch(xs))
				require.NoError(t, err)
				imins, err := IaminBatched(e.h, vecsOfBatch(xs))
				require.NoError(t, err)
				snrms, err := Nrm2StridedBatched(e.h, sx.sv, batch)
				require.NoError(t, err)
				sasums, err := AsumStridedBatched(e.h, sx.sv, batch)
				require.NoError(t, err)
				simaxs, err := IamaxStridedBatched(e.h, sx.sv, batch)
				require.NoError(t, err)
				simins, err := IaminStridedBatched(e.h, sx.sv, batch)
				require.NoError(t, err)
				idx.poison(t)
				require.NoError(t, IamaxBatchedTo(e.h, vecsOfBatch(xs), idx.v))
				bIdx := idx.read(t)
				idx.poison(t)
				require.NoError(t, IaminStridedBatchedTo(e.h, sx.sv, batch, idx.v))
				sIdx := idx.read(t)
				for b := 0; b < batch; b++ {
					nrm, asum, imax, imin := reduceRef(n, xs[b].at)
					checkScalar(t, "Nrm2Batched", complex(nrms[b], 0), complex(nrm, 0), nrm, tol)
					checkScalar(t, "AsumBatched", complex(asums[b], 0), complex(asum, 0), asum, tol)
					assert.Equal(t, imax, imaxs[b], "IamaxBatched")
					assert.Equal(t, imin, imins[b], "IaminBatched")
					assert.Equal(t, int32(imax+1), bIdx[idx.pos(b)], "IamaxBatchedTo")
					nrm, asum, imax, imin = reduceRef(n, func(i int) complex128 { return sx.at(b, i) })
					checkScalar(t, "Nrm2StridedBatched", complex(snrms[b], 0), complex(nrm, 0), nrm, tol)
					checkScalar(t, "AsumStridedBatched", complex(sasums[b], 0), complex(asum, 0), asum, tol)
					assert.Equal(t, imax, simaxs[b], "IamaxStridedBatched")
					assert.Equal(t, imin, simins[b], "IaminStridedBatched")
					assert.Equal(t, int32(imin+1), sIdx[idx.pos(b)], "IaminStridedBatchedTo")
				}
			})
		}
	}
}

// testRealTo checks the ...To forms of Nrm2 and Asum, whose results are R.
func testRealTo[T Elem, R Real](t *testing.T, e *env, x dvec[T], nrm, asum float64) {
	tol := tolerance[T]()
	res := newVec[R](t, e, batch+1, 1)
	res.v.Buf = res.b
	res.poison(t)
	require.NoError(t, Nrm2To(e.h, x.v, res.v))
	checkScalar(t, "Nrm2To", toC(res.read(t)[res.pos(0)]), complex(nrm, 0), nrm, tol)
	require.NoError(t, AsumTo(e.h, x.v, res.v))
	checkScalar(t, "AsumTo", toC(res.read(t)[res.pos(0)]), complex(asum, 0), asum, tol)

	xs := vecBatch[T](t, e, x.v.N, x.v.Inc)
	sx := newStridedVec[T](t, e, x.v.N, x.v.Inc)
	res.poison(t)
	require.NoError(t, Nrm2BatchedTo(e.h, vecsOfBatch(xs), res.v))
	nb := res.read(t)
	res.poison(t)
	require.NoError(t, AsumBatchedTo(e.h, vecsOfBatch(xs), res.v))
	ab := res.read(t)
	res.poison(t)
	require.NoError(t, Nrm2StridedBatchedTo(e.h, sx.sv, batch, res.v))
	ns := res.read(t)
	res.poison(t)
	require.NoError(t, AsumStridedBatchedTo(e.h, sx.sv, batch, res.v))
	as := res.read(t)
	for b := 0; b < batch; b++ {
		nrm, asum, _, _ := reduceRef(x.v.N, xs[b].at)
		checkScalar(t, "Nrm2BatchedTo", toC(nb[res.pos(b)]), complex(nrm, 0), nrm, tol)
		checkScalar(t, "AsumBatchedTo", toC(ab[res.pos(b)]), complex(asum, 0), asum, tol)
		nrm, asum, _, _ = reduceRef(x.v.N, func(i int) complex128 { return sx.at(b, i) })
		checkScalar(t, "Nrm2StridedBatchedTo", toC(ns[res.pos(b)]), complex(nrm, 0), nrm, tol)
		checkScalar(t, "AsumStridedBatchedTo", toC(as[res.pos(b)]), complex(asum, 0), asum, tol)
	}
}

// ---- Level 2 ----

// mn are the non-square and square shapes of the level-2 tests.
func mn(e *env) [][2]int {
	return [][2]int{{1, 1}, {e.small, 1}, {1, e.small}, {e.small, e.mid}, {e.mid, e.small}, {e.large, e.small}, {e.small, e.large}, {e.mid, e.mid}}
}

// smat is a strided batch of matrices in one buffer.
type smat[T Numeric] struct {
	buf[T]
	sm StridedMatrix[T]
}

func newStridedMat[T Numeric](t *testing.T, e *env, rows, cols, pad int) smat[T] {
	off, ld := layout(e, rows, pad)
	span := ld*(cols-1) + rows
	stride := span + e.rng.IntN(3) + 1
	if e.align > 1 {
		stride = (stride + e.align - 1) / e.align * e.align
	}
	host := randoms[T](e.rng, off+(batch-1)*stride+span+2)
	s := smat[T]{buf: newBuf(t, e, host)}
	s.sm = StridedMatrix[T]{Matrix: Matrix[T]{Buf: s.b, Offset: off, Rows: rows, Cols: cols, Ld: ld}, Stride: stride}
	return s
}

func (s smat[T]) entry(b int) dmat[T] {
	m := s.sm.Matrix
	m.Offset += b * s.sm.Stride
	return dmat[T]{buf: s.buf, m: m}
}

func (s *smat[T]) poison(t *testing.T) {
	for b := 0; b < batch; b++ {
		m := s.entry(b).m
		for j := 0; j < m.Cols; j++ {
			for i := 0; i < m.Rows; i++ {
				s.host[m.Offset+i+j*m.Ld] = poisonValue[T]()
			}
		}
	}
	s.sync(t)
}

func matBatch[T Numeric](t *testing.T, e *env, rows, cols, pad int) []dmat[T] {
	out := make([]dmat[T], batch)
	for i := range out {
		out[i] = newMat[T](t, e, rows, cols, pad)
		out[i].fix()
	}
	return out
}

func matsOfBatch[T Numeric](ds []dmat[T]) []Matrix[T] {
	out := make([]Matrix[T], len(ds))
	for i, d := range ds {
		out[i] = d.m
	}
	return out
}

func gemvRef(trans Operation, m, n int, alpha complex128, a acc, x func(int) complex128, beta complex128, y func(int) complex128) func(int) complex128 {
	_, cols := opDims(trans, m, n)
	return func(i int) complex128 {
		var s complex128
		for j := 0; j < cols; j++ {
			s += opAt(trans, a, i, j) * x(j)
		}
		if beta == 0 {
			return alpha * s
		}
		return alpha*s + beta*y(i)
	}
}

func testGemv[T Elem](t *testing.T, e *env) {
	tol := tolerance[T]()
	for _, s := range mn(e) {
		m, n := s[0], s[1]
		for _, trans := range ops[T]() {
			for _, zeroBeta := range []bool{false, true} {
				t.Run(fmt.Sprintf("%dx%d_%s_beta0=%v", m, n, trans, zeroBeta), func(t *testing.T) {
					alpha, beta := random[T](e.rng), random[T](e.rng)
					if zeroBeta {
						beta = 0
					}
					rows, cols := opDims(trans, m, n)
					a := newMat[T](t, e, m, n, 2)
					a.fix()
					x, y := newVec[T](t, e, cols, 2), newVec[T](t, e, rows, -1)
					x.v.Buf, y.v.Buf = x.b, y.b
					if zeroBeta {
						y.poison(t)
					}
					want := gemvRef(trans, m, n, toC(alpha), a.at, x.at, toC(beta), y.at)
					require.NoError(t, Gemv(e.h, trans, alpha, a.m, x.v, beta, y.v))
					checker[T]{t, "Gemv", tol}.check(y.host, y.read(t), vecWant(y, want))

					as, xs, ys := matBatch[T](t, e, m, n, 1), vecBatch[T](t, e, cols, 1), vecBatch[T](t, e, rows, 1)
					if zeroBeta {
						for b := range ys {
							ys[b].poison(t)
						}
					}
					require.NoError(t, GemvBatched(e.h, trans, alpha, matsOfBatch(as), vecsOfBatch(xs), beta, vecsOfBatch(ys)))
					for b := range ys {
						want := gemvRef(trans, m, n, toC(alpha), as[b].at, xs[b].at, toC(beta), ys[b].at)
						checker[T]{t, "GemvBatched", tol}.check(ys[b].host, ys[b].read(t), vecWant(ys[b], want))
					}

					sa, sx, sy := newStridedMat[T](t, e, m, n, 3), newStridedVec[T](t, e, cols, 1), newStridedVec[T](t, e, rows, 2)
					if zeroBeta {
						sy.poison(t)
					}
					require.NoError(t, GemvStridedBatched(e.h, trans, alpha, sa.sm, sx.sv, beta, sy.sv, batch))
					sy.check(t, "GemvStridedBatched", func(b, i int) complex128 {
						return gemvRef(trans, m, n, toC(alpha), sa.entry(b).at, func(j int) complex128 { return sx.at(b, j) }, toC(beta),
							func(j int) complex128 { return sy.at(b, j) })(i)
					}, sy.read(t))
				})
			}
		}
	}
}

func testGer[T Elem](t *testing.T, e *env) {
	tol := tolerance[T]()
	for _, s := range mn(e) {
		m, n := s[0], s[1]
		for _, conj := range []bool{false, true} {
			t.Run(fmt.Sprintf("%dx%d_conj=%v", m, n, conj), func(t *testing.T) {
				alpha := random[T](e.rng)
				x, y := newVec[T](t, e, m, 2), newVec[T](t, e, n, -1)
				x.v.Buf, y.v.Buf = x.b, y.b
				a := newMat[T](t, e, m, n, 1)
				a.fix()
				f := Ger[T]
				if conj {
					f = Gerc[T]
				}
				require.NoError(t, f(e.h, alpha, x.v, y.v, a.m))
				checker[T]{t, "Ger", tol}.check(a.host, a.read(t), matWant(a.m, func(i, j int) complex128 {
					yv := y.at(j)
					if conj {
						yv = cmplx.Conj(yv)
					}
					return a.at(i, j) + toC(alpha)*x.at(i)*yv
				}, nil))
			})
		}
	}
}

// symAt is element (i, j) of a symmetric matrix stored in its uplo triangle.
func symAt(uplo Fill, a acc, i, j int) complex128 {
	if (uplo == FillUpper) == (i <= j) {
		return a(i, j)
	}
	return a(j, i)
}

func testSymv[T Elem](t *testing.T, e *env) {
	tol := tolerance[T]()
	for _, n := range e.sizes() {
		for _, uplo := range []Fill{FillUpper, FillLower} {
			t.Run(fmt.Sprintf("n%d_%s", n, uplo), func(t *testing.T) {
				alpha, beta := random[T](e.rng), random[T](e.rng)
				a := newMat[T](t, e, n, n, 3)
				a.fix()
				x, y := newVec[T](t, e, n, 1), newVec[T](t, e, n, 2)
				x.v.Buf, y.v.Buf = x.b, y.b
				require.NoError(t, Symv(e.h, uplo, alpha, a.m, x.v, beta, y.v))
				checker[T]{t, "Symv", tol}.check(y.host, y.read(t), vecWant(y, func(i int) complex128 {
					var s complex128
					for j := 0; j < n; j++ {
						s += symAt(uplo, a.at, i, j) * x.at(j)
					}
					return toC(alpha)*s + toC(beta)*y.at(i)
				}))
			})
		}
	}
}

// newTri makes an n×n matrix whose uplo triangle is well conditioned: a
// diagonal of magnitude 2 to 3 and off-diagonal elements of at most 1/n,
// so that solves in float32 stay accurate at n = 1000. The other triangle
// holds random values that must not be read.
func newTri[T Elem](t *testing.T, e *env, n int, uplo Fill) dmat[T] {
	a := newMat[T](t, e, n, n, 1)
	for j := 0; j < n; j++ {
		for i := 0; i < n; i++ {
			if i == j {
				a.cx[a.m.Offset+i+j*a.m.Ld] = randomC[T](e.rng)*0.5 + complex(2.5, 0)
			} else if (uplo == FillUpper) == (i < j) {
				a.cx[a.m.Offset+i+j*a.m.Ld] = randomC[T](e.rng) / complex(float64(n), 0)
			}
		}
	}
	a.host = fromCs[T](a.cx)
	a.sync(t)
	a.fix()
	return a
}

// triAt is element (i, j) of op(A) for a triangular A.
func triAt(uplo Fill, trans Operation, diag Diagonal, a acc, i, j int) complex128 {
	r, c := i, j
	if trans != OperationNone {
		r, c = j, i
	}
	if in := r <= c; uplo == FillLower && r < c || uplo == FillUpper && !in {
		return 0
	}
	v := a(r, c)
	if r == c && diag == DiagonalUnit {
		v = 1
	}
	if trans == OperationConjugateTranspose {
		v = cmplx.Conj(v)
	}
	return v
}

func testTrmv[T Elem](t *testing.T, e *env) {
	tol := tolerance[T]()
	for _, n := range e.sizes() {
		for _, uplo := range []Fill{FillUpper, FillLower} {
			for _, trans := range ops[T]() {
				for _, diag := range []Diagonal{DiagonalNonUnit, DiagonalUnit} {
					if e.reduced(n) && (uplo == FillUpper) != (diag == DiagonalNonUnit) {
						continue
					}
					t.Run(fmt.Sprintf("n%d_%s_%s_%s", n, uplo, trans, diag), func(t *testing.T) {
						a := newTri[T](t, e, n, uplo)
						op := tabulate(n, n, func(i, j int) complex128 { return triAt(uplo, trans, diag, a.at, i, j) })
						x := newVec[T](t, e, n, 2)
						x.v.Buf = x.b
						require.NoError(t, Trmv(e.h, uplo, trans, diag, a.m, x.v))
						checker[T]{t, "Trmv", tol}.check(x.host, x.read(t), vecWant(x, func(i int) complex128 {
							var s complex128
							for j := 0; j < n; j++ {
								s += op(i, j) * x.at(j)
							}
							return s
						}))
						a.unchanged(t, "A is not written")

						// Trsv: b = op(A)*x0 for a known x0, solved back.
						x0 := randoms[T](e.rng, n)
						b := newVec[T](t, e, n, -2)
						b.v.Buf = b.b
						for i := 0; i < n; i++ {
							var s complex128
							for j := 0; j < n; j++ {
								s += op(i, j) * toC(x0[j])
							}
							b.host[b.pos(i)] = fromC[T](s)
						}
						b.sync(t)
						before := slices.Clone(b.host)
						require.NoError(t, Trsv(e.h, uplo, trans, diag, a.m, b.v))
						checker[T]{t, "Trsv", tol}.check(before, b.read(t), vecWant(b, func(i int) complex128 { return toC(x0[i]) }))
					})
				}
			}
		}
	}
}
