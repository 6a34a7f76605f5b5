package candle

import (
	"runtime"
	"sync"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/rocblas"
)

// Matmul is the matrix product over the last two dims: (…, m, k) × (…, k, n)
// gives (…, m, n), the batch dims (…) broadcast as in Add. F32, F16 and
// BF16 accumulate in F32, F64 in F64.
//
// On a HIP device it is one rocBLAS (cuBLAS) strided-batched GEMM on the
// device's stream, reading the operands in place: a transposed operand
// (T, Transpose, Permute of the last two dims) is the BLAS transpose flag
// and its leading dimension, a broadcast batch is a batch stride of 0, and a
// right operand broadcast over a contiguous batch folds into one larger
// GEMM. An operand whose last two dims have no unit stride (a Narrow of the
// last dim of a transposed view, or a broadcast within a matrix) is copied
// to a contiguous tensor first; batch dims that no single stride walks are
// run as one batched GEMM per outer index.
func (t *Tensor) Matmul(o *Tensor) (*Tensor, error) {
	const op = "Tensor.Matmul"
	if err := alive(op, t, o); err != nil {
		return nil, err
	}
	if err := sameDevice(op, t.st.dev, o); err != nil {
		return nil, err
	}
	dt := t.DType()
	if dt != o.DType() {
		return nil, pkg.Errorf(op, ErrDType, "%s and %s operands: convert one with ToDType", dt, o.DType())
	}
	if !dt.IsFloat() {
		return nil, pkg.Errorf(op, ErrDType, "%s operands: matmul takes f32, f16, bf16 or f64 (convert with ToDType)", dt)
	}
	ls, rs := t.layout.Shape, o.layout.Shape
	if len(ls) < 2 || len(rs) < 2 {
		return nil, pkg.Errorf(op, ErrShape, "%v × %v: matmul takes tensors of rank 2 or more, (…, m, k) × (…, k, n); add a dim with Unsqueeze", ls, rs)
	}
	m, k, k2, n := ls[len(ls)-2], ls[len(ls)-1], rs[len(rs)-2], rs[len(rs)-1]
	if k != k2 {
		return nil, pkg.Errorf(op, ErrShape, "%v × %v: the inner dims differ (%d and %d)", ls, rs, k, k2)
	}
	batch, err := BroadcastShapes(ls[:len(ls)-2], rs[:len(rs)-2])
	if err != nil {
		return nil, pkg.Errorf(op, ErrShape, "%v × %v: the batch dims do not broadcast: %v", ls, rs, err)
	}
	shape := append(batch.Clone(), m, n)
	out, err := newOutput(op, t.st.dev, dt, shape, t, o)
	if err != nil || out.Elems() == 0 {
		return out, err
	}
	if k == 0 {
		if err := t.st.dev.backend().fill(out.v(), scalar{}); err != nil {
			out.Close()
			return nil, pkg.Wrap(op, err)
		}
		return out, nil
	}
	// Operands that BLAS cannot read in place become contiguous.
	a, b := t, o
	for _, x := range []**Tensor{&a, &b} {
		if _, ok := blasForm((*x).layout); ok {
			continue
		}
		c, err := (*x).Copy()
		if err != nil {
			out.Close()
			return nil, pkg.Wrap(op, err)
		}
		defer c.Close()
		*x = c
	}
	al, err := a.layout.BroadcastAs(append(batch.Clone(), m, k))
	if err == nil {
		var bl Layout
		if bl, err = b.layout.BroadcastAs(append(batch.Clone(), k, n)); err == nil {
			err = t.st.dev.backend().matmul(view{a.st, al}, view{b.st, bl}, out.st)
		}
	}
	if err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return out, nil
}

// matForm is how BLAS reads the last two dims of a layout (rows × cols,
// row-major) as a column-major matrix: transposed or not, and its leading
// dimension.
type matForm struct {
	rows, cols int
	trans      bool // the column-major matrix is the row-major one transposed back
	ld         int
}

// blasForm finds the form of the layout's last two dims: row-major rows
// (column stride 1) are a column-major cols×rows matrix, read transposed
// by the row-major trick below; columns of stride 1 are a column-major
// rows×cols matrix. Dims of size 1 take whatever stride fits.
func blasForm(l Layout) (matForm, bool) {
	r := len(l.Shape)
	rows, cols := l.Shape[r-2], l.Shape[r-1]
	rs, cs := l.Stride[r-2], l.Stride[r-1]
	if (cols == 1 || cs == 1) && (rows == 1 || rs >= cols) {
		ld := max(cols, 1)
		if rows > 1 {
			ld = rs
		}
		return matForm{rows: rows, cols: cols, ld: ld}, true
	}
	if (rows == 1 || rs == 1) && (cols == 1 || cs >= rows) {
		ld := max(rows, 1)
		if cols > 1 {
			ld = cs
		}
		return matForm{rows: rows, cols: cols, trans: true, ld: ld}, true
	}
	return matForm{}, false
}

// batchDim is one dim of a matmul's batch after merging: its size and the
// strides of a, b and the output.
type batchDim struct {
	n  int
	st [3]int
}

// batchDims merges the batch dims of a (…, m, k), b (…, k, n) and the
// contiguous output (…, m, n): dims of size 1 go, and neighbours that
// every operand walks with one stride merge. Innermost first.
func batchDims(a, b Layout, m, n int) []batchDim {
	r := len(a.Shape) - 2
	var dims []batchDim
	cs := m * n
	for i := r - 1; i >= 0; i-- {
		d := batchDim{n: a.Shape[i], st: [3]int{a.Stride[i], b.Stride[i], cs}}
		cs *= d.n
		if d.n == 1 {
			continue
		}
		if len(dims) > 0 {
			last := &dims[len(dims)-1]
			if d.st[0] == last.st[0]*last.n && d.st[1] == last.st[1]*last.n && d.st[2] == last.st[2]*last.n {
				last.n *= d.n
				continue
			}
		}
		dims = append(dims, d)
	}
	return dims
}

// gemmCall is one strided-batched GEMM of a matmul, in row-major terms:
// out[i] (m×n, contiguous) = a[i] (m×k) · b[i] (k×n) for i < batch, the
// operands at element offsets with batch strides.
type gemmCall struct {
	m, n, k, batch    int
	a, b              matForm
	aOff, bOff, cOff  int
	aStep, bStep, cSt int
}

// gemmCalls plans a matmul as GEMMs: a b broadcast over a batch that a
// walks row after row folds into m; then one strided-batched call for the
// innermost merged batch dim left, one per index of the outer ones.
func gemmCalls(a, b Layout) []gemmCall {
	r := len(a.Shape)
	m, k, n := a.Shape[r-2], a.Shape[r-1], b.Shape[r-1]
	af, _ := blasForm(a)
	bf, _ := blasForm(b)
	dims := batchDims(a, b, m, n)
	base := gemmCall{m: m, n: n, k: k, batch: 1, a: af, b: bf, aOff: a.Offset, bOff: b.Offset}
	if len(dims) > 0 && dims[0].st[1] == 0 && !af.trans && dims[0].st[0] == m*af.ld {
		base.m *= dims[0].n
		base.a.rows = base.m
		dims = dims[1:]
	}
	if len(dims) > 0 {
		in := dims[0]
		base.batch = in.n
		base.aStep, base.bStep, base.cSt = in.st[0], in.st[1], in.st[2]
		dims = dims[1:]
	}
	calls := []gemmCall{base}
	for _, d := range dims {
		next := make([]gemmCall, 0, len(calls)*d.n)
		for j := range d.n {
			for _, c := range calls {
				c.aOff += j * d.st[0]
				c.bOff += j * d.st[1]
				c.cOff += j * d.st[2]
				next = append(next, c)
			}
		}
		calls = next
	}
	return calls
}

// matmul runs the planned GEMMs of x·y with rocBLAS on the device's
// handle. Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: y is rocBLAS's A,
// x its B, and the dims swap (M = n, N = m).
func (b *hipBackend) matmul(x, y view, dst *Storage) error {
	h, err := (*HIPDevice)(b).BLAS()
	if err != nil {
		return err
	}
	buf := func(st *Storage) *hip.Buffer { return st.mem.(*block).buf }
	ab, bb, cb := buf(x.st), buf(y.st), buf(dst)
	for _, c := range gemmCalls(x.l, y.l) {
		var err error
		switch dst.dtype {
		case F32:
			err = gemmAs[float32](h, c, ab, bb, cb)
		case F16:
			err = gemmAs[hip.Half](h, c, ab, bb, cb)
		case BF16:
			err = gemmAs[hip.BFloat16](h, c, ab, bb, cb)
		case F64:
			err = gemmAs[float64](h, c, ab, bb, cb)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// blasOperand is a row-major rows×cols operand in rocBLAS's column-major terms.
func blasOperand[T rocblas.ExIn](buf *hip.Buffer, f matForm, off, step int) (rocblas.StridedMatrix[T], rocblas.Operation) {
	m := rocblas.Matrix[T]{Buf: buf, Offset: off, Rows: f.cols, Cols: f.rows, Ld: f.ld}
	op := rocblas.OperationNone
	if f.trans {
		m.Rows, m.Cols = f.rows, f.cols
		op = rocblas.OperationTranspose
	}
	return rocblas.StridedMatrix[T]{Matrix: m, Stride: step}, op
}

func gemmAs[T interface {
	rocblas.ExIn
	rocblas.ExOut
}](h *rocblas.Handle, c gemmCall, a, b, out *hip.Buffer) error {
	bm, opB := blasOperand[T](b, c.b, c.bOff, c.bStep)
	am, opA := blasOperand[T](a, c.a, c.aOff, c.aStep)
	cm := rocblas.StridedMatrix[T]{Matrix: rocblas.Matrix[T]{Buf: out, Offset: c.cOff, Rows: c.n, Cols: c.m, Ld: c.n}, Stride: c.cSt}
	return rocblas.GemmStridedBatchedEx(h, opB, opA, 1, bm, am, 0, cm, cm, c.batch)
}

// matmul on the CPU: the reference, in float64, rounded once.
func (c *cpuBackend) matmul(a, b view, dst *Storage) error {
	r := len(a.l.Shape)
	m, k, n := a.l.Shape[r-2], a.l.Shape[r-1], b.l.Shape[r-1]
	batch := a.l.Shape[:r-2].Elems()
	av, bv := gatherF(a), gatherF(b)
	d := dataOf(dst)
	var wg sync.WaitGroup
	rows := batch * m
	workers := min(runtime.GOMAXPROCS(0), rows)
	for w := range workers {
		wg.Go(func() {
			acc := make([]float64, n)
			for row := w; row < rows; row += workers {
				i, bi := row%m, row/m
				clear(acc)
				for p := range k {
					x := av[(bi*m+i)*k+p]
					brow := bv[(bi*k+p)*n : (bi*k+p+1)*n]
					for j, y := range brow {
						acc[j] += x * y
					}
				}
				for j, v := range acc {
					d.setF(row*n+j, v)
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// gatherF reads a view's elements, row-major, as float64. F32 views (the
// CPU's weights and activations) are read a row at a time in a plain loop:
// an element at a time through walk's callback, a model's every matrix at
// every step, was most of a CPU forward pass.
func gatherF(v view) []float64 {
	s := dataOf(v.st)
	out := make([]float64, v.l.Shape.Elems())
	r := len(v.l.Shape)
	if s.dt != F32 || r == 0 || len(out) == 0 {
		walk(v.l.Shape, []Layout{v.l}, func(i int, o []int) { out[i] = s.f(o[0]) })
		return out
	}
	inner, step := v.l.Shape[r-1], v.l.Stride[r-1]
	rows := Layout{Shape: v.l.Shape[:r-1], Stride: v.l.Stride[:r-1], Offset: v.l.Offset}
	walk(rows.Shape, []Layout{rows}, func(row int, o []int) {
		dst := out[row*inner : (row+1)*inner]
		p := unsafe.Add(s.p, 4*o[0])
		for j := range dst {
			dst[j] = float64(*(*float32)(unsafe.Add(p, 4*j*step)))
		}
	})
	return out
}
