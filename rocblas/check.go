package rocblas

// Every check of the arguments of a call, before any C call: the errors,
// the checks of each operand, and args, which runs them for one call and
// keeps the first failure.

import (
	"fmt"

	"github.com/rocm-go/rocm/hip"
)

// Errors for arguments refused before any C call, beside the generated
// invalid (StatusInvalidValue).
func invalidSize(op, format string, args ...any) error {
	return &Error{Op: op, Status: StatusInvalidSize, Detail: fmt.Sprintf(format, args...)}
}

func invalidPointer(op, format string, args ...any) error {
	return &Error{Op: op, Status: StatusInvalidPointer, Detail: fmt.Sprintf(format, args...)}
}

// args checks the arguments of one call, keeping the first error.
type args struct {
	op  string
	dev *hip.Device
	err error
}

// begin starts checking the arguments of op on h.
func begin(h *Handle, op string) *args {
	a := &args{op: op}
	a.dev, a.err = h.device(op)
	return a
}

// check records err if it is the first.
func (a *args) check(err error) {
	if a.err == nil {
		a.err = err
	}
}

func (a *args) ok() bool { return a.err == nil }

// length checks that a vector has the length an operation needs.
func (a *args) length(name string, n, want int, why string) {
	if a.ok() {
		a.check(checkLen(a.op, name, n, want, why))
	}
}

// sameBatch checks that two batches given as slices have one size.
func (a *args) sameBatch(name string, n int, first string, want int) {
	if a.ok() && n != want {
		a.check(invalidSize(a.op, "%s has %d entries and %s %d: the batches differ", name, n, first, want))
	}
}

// batch checks a strided batch's size.
func (a *args) batch(n int) {
	if a.ok() {
		a.check(checkBatch(a.op, n))
	}
}

// vecOf checks a plain vector.
func vecOf[T Numeric](a *args, name string, v Vector[T]) vec {
	if !a.ok() {
		return vec{}
	}
	p, err := checkVector(a.op, name, a.dev, v)
	a.check(err)
	return vec{place: p, n: v.N}
}

// vecsOf checks a batch of vectors given as a slice.
func vecsOf[T Numeric](a *args, name string, vs []Vector[T]) vec {
	if !a.ok() {
		return vec{}
	}
	p, err := checkVectors(a.op, name, a.dev, vs)
	if a.check(err); err != nil {
		return vec{}
	}
	return vec{place: place{ld: p.ld}, ptrs: p.addrs, n: vs[0].N}
}

// stridedVecOf checks a strided batch of vectors; an output's entries may
// not overlap.
func stridedVecOf[T Numeric](a *args, name string, v StridedVector[T], batch int, output bool) vec {
	if !a.ok() {
		return vec{}
	}
	s, err := checkStridedVector(a.op, name, a.dev, v, batch, output)
	a.check(err)
	return vec{place: s.place, stride: s.stride, n: v.N}
}

// matOf checks a plain matrix.
func matOf[T Numeric](a *args, name string, m Matrix[T]) mat {
	if !a.ok() {
		return mat{}
	}
	p, err := checkMatrix(a.op, name, a.dev, m)
	a.check(err)
	return mat{place: p, rows: m.Rows, cols: m.Cols}
}

// matsOf checks a batch of matrices given as a slice.
func matsOf[T Numeric](a *args, name string, ms []Matrix[T]) mat {
	if !a.ok() {
		return mat{}
	}
	p, err := checkMatrices(a.op, name, a.dev, ms)
	if a.check(err); err != nil {
		return mat{}
	}
	return mat{place: place{ld: p.ld}, ptrs: p.addrs, rows: ms[0].Rows, cols: ms[0].Cols}
}

// stridedMatOf checks a strided batch of matrices.
func stridedMatOf[T Numeric](a *args, name string, m StridedMatrix[T], batch int, output bool) mat {
	if !a.ok() {
		return mat{}
	}
	s, err := checkStridedMatrix(a.op, name, a.dev, m, batch, output)
	a.check(err)
	return mat{place: s.place, stride: s.stride, rows: m.Rows, cols: m.Cols}
}

// matIn checks a matrix operand in whichever form it comes: a Matrix, a
// slice of them, or a StridedMatrix of batch entries (output: its entries
// may not overlap). It returns the operand, the form and the batch size.
func matIn[T Numeric](a *args, name string, m any, batch int, output bool) (mat, form, int) {
	switch v := m.(type) {
	case Matrix[T]:
		return matOf(a, name, v), plain, 1
	case []Matrix[T]:
		return matsOf(a, name, v), batched, len(v)
	case StridedMatrix[T]:
		a.batch(batch)
		return stridedMatOf(a, name, v, batch, output), stridedBatched, batch
	}
	a.check(invalid(a.op, "%s: not a matrix operand", name))
	return mat{}, plain, 0
}

// vecIn checks a vector operand in whichever form it comes: a Vector, a
// slice of them, or a StridedVector of batch entries (output: its entries
// may not overlap). It returns the operand, the form and the batch size.
func vecIn[T Numeric](a *args, name string, x any, batch int, output bool) (vec, form, int) {
	switch v := x.(type) {
	case Vector[T]:
		return vecOf(a, name, v), plain, 1
	case []Vector[T]:
		return vecsOf(a, name, v), batched, len(v)
	case StridedVector[T]:
		a.batch(batch)
		return stridedVecOf(a, name, v, batch, output), stridedBatched, batch
	}
	a.check(invalid(a.op, "%s: not a vector operand", name))
	return vec{}, plain, 0
}

// positive checks that a one-vector operation's x walks forwards: BLAS's
// scal, nrm2, asum, iamax and iamin do nothing for a negative increment.
func positive(a *args, x vec) {
	if a.ok() && x.ld < 0 {
		a.check(invalidSize(a.op, "x.Inc %d: this operation takes a positive increment (BLAS ignores a vector with a negative one)", x.ld))
	}
}

// pair checks the two vector operands of a level-1 operation: same form,
// same batch, same length. xOut and yOut say which are written.
func pair[T Numeric](a *args, x, y any, batch int, xOut, yOut bool) (xv, yv vec, f form, n int) {
	xv, f, n = vecIn[T](a, "x", x, batch, xOut)
	yv, _, ny := vecIn[T](a, "y", y, batch, yOut)
	a.sameBatch("y", ny, "x", n)
	a.length("y", yv.n, xv.n, "the length of x")
	return xv, yv, f, n
}

// buffer checks that buf can be used on the handle's device and returns
// its size in elements of size bytes.
func buffer(op, name string, buf *hip.Buffer, dev *hip.Device, size int) (int, error) {
	switch {
	case buf == nil:
		return 0, invalidPointer(op, "%s.Buf is nil", name)
	case buf.Closed():
		return 0, &Error{Op: op, Status: StatusInvalidPointer, Detail: name + ".Buf is closed", Err: hip.ErrClosed}
	case buf.Device().Ordinal() != dev.Ordinal():
		return 0, invalid(op, "%s.Buf is on device %d, the handle on device %d", name, buf.Device().Ordinal(), dev.Ordinal())
	}
	return buf.Size() / size, nil
}

// shape checks a matrix's own numbers.
func (m Matrix[T]) shape(op, name string) error {
	rows, cols, ld := m.dims()
	switch {
	case rows < 1 || cols < 1:
		return invalidSize(op, "%s is %d×%d: a matrix has at least one row and one column", name, rows, cols)
	case rows > maxInt || cols > maxInt || ld > maxInt:
		return invalidSize(op, "%s is %d×%d with ld %d: rocBLAS's sizes are 32-bit", name, rows, cols, ld)
	case m.Ld < 0 || ld < rows:
		return invalidSize(op, "%s.Ld %d < %s.Rows %d", name, m.Ld, name, rows)
	case m.Offset < 0:
		return invalidSize(op, "%s.Offset %d is negative", name, m.Offset)
	}
	return nil
}

func (v Vector[T]) shape(op, name string) error {
	switch inc := v.inc(); {
	case v.N < 1:
		return invalidSize(op, "%s.N is %d: a vector has at least one element", name, v.N)
	case v.N > maxInt || inc > maxInt || inc < -maxInt:
		return invalidSize(op, "%s has N %d and Inc %d: rocBLAS's sizes are 32-bit", name, v.N, inc)
	case v.Offset < 0:
		return invalidSize(op, "%s.Offset %d is negative", name, v.Offset)
	}
	return nil
}

// checkMatrix checks a matrix against the handle's device and its buffer,
// and returns its place. The first part is the fast path of a good matrix;
// checkMatrixSlow finds what is wrong with a bad one.
func checkMatrix[T Numeric](op, name string, dev *hip.Device, m Matrix[T]) (place, error) {
	rows, cols, ld := m.dims()
	if b := m.Buf; b != nil && rows >= 1 && cols >= 1 && rows <= maxInt && cols <= maxInt && ld <= maxInt &&
		m.Ld >= 0 && ld >= rows && m.Offset >= 0 && !b.Closed() && b.Device().Ordinal() == dev.Ordinal() {
		size := sizeOf[T]()
		elems := b.Size() / size
		addr := uintptr(b.Ptr()) + uintptr(m.Offset*size)
		if m.Offset <= elems && (cols-1)*ld+rows <= elems-m.Offset && addr%uintptr(alignOf[T]()) == 0 {
			return place{addr: addr, ld: ld}, nil
		}
	}
	return checkMatrixSlow(op, name, dev, m)
}

func checkMatrixSlow[T Numeric](op, name string, dev *hip.Device, m Matrix[T]) (place, error) {
	if err := m.shape(op, name); err != nil {
		return place{}, err
	}
	return checkExtent[T](op, name, dev, m.Buf, m.Offset, m.span(), m.Ld, m.Rows)
}

// checkExtent checks that n elements of T from element off fit in buf and
// returns the place of the first; ld (0: def) is the leading dimension or
// increment.
func checkExtent[T Numeric](op, name string, dev *hip.Device, buf *hip.Buffer, off, n, ld, def int) (place, error) {
	size := sizeOf[T]()
	elems, err := buffer(op, name, buf, dev, size)
	if err != nil {
		return place{}, err
	}
	if off > elems || n > elems-off {
		_, _, tname := kind[T]()
		return place{}, invalidSize(op, "%s needs elements [%d, %d) of its buffer, which holds %d %s (%d bytes)",
			name, off, off+n, elems, tname, buf.Size())
	}
	addr := uintptr(buf.Ptr()) + uintptr(off*size)
	if a := alignOf[T](); addr%uintptr(a) != 0 {
		return place{}, invalidPointer(op, "%s starts at %#x, which is not aligned to %d bytes", name, addr, a)
	}
	if ld == 0 {
		ld = def
	}
	return place{addr: addr, ld: ld}, nil
}

// checkVector checks a vector against the handle's device and its buffer,
// and returns its place.
func checkVector[T Numeric](op, name string, dev *hip.Device, v Vector[T]) (place, error) {
	if err := v.shape(op, name); err != nil {
		return place{}, err
	}
	return checkExtent[T](op, name, dev, v.Buf, v.Offset, v.vspan(), v.inc(), 1)
}

// checkLen checks that a vector has the length an operation needs.
func checkLen(op, name string, n, want int, why string) error {
	if n != want {
		return invalidSize(op, "%s.N %d ≠ %d, %s", name, n, want, why)
	}
	return nil
}

// checkBatch checks a batch size.
func checkBatch(op string, batch int) error {
	if batch < 1 || batch > maxInt {
		return invalidSize(op, "batch %d: want 1 to %d", batch, maxInt)
	}
	return nil
}

// checkStride checks a batch's stride: an output's matrices may not
// overlap, so its stride is at least the span of one.
func checkStride(op, name string, stride, span, batch int, output bool) error {
	switch {
	case stride < 0:
		return invalidSize(op, "%s.Stride %d is negative", name, stride)
	case output && batch > 1 && stride < span:
		return invalidSize(op, "%s.Stride %d < %d, the elements one of its entries spans: the outputs of a batch would overlap", name, stride, span)
	}
	return nil
}

// checkStridedMatrix checks a batch of matrices in one buffer.
func checkStridedMatrix[T Numeric](op, name string, dev *hip.Device, s StridedMatrix[T], batch int, output bool) (strided, error) {
	if err := s.shape(op, name); err != nil {
		return strided{}, err
	}
	span := s.span()
	if err := checkStride(op, name, s.Stride, span, batch, output); err != nil {
		return strided{}, err
	}
	p, err := checkExtent[T](op, name, dev, s.Buf, s.Offset, (batch-1)*s.Stride+span, s.Ld, s.Rows)
	return strided{place: p, stride: int64(s.Stride)}, err
}

// checkStridedVector checks a batch of vectors in one buffer.
func checkStridedVector[T Numeric](op, name string, dev *hip.Device, s StridedVector[T], batch int, output bool) (strided, error) {
	if err := s.shape(op, name); err != nil {
		return strided{}, err
	}
	span := s.vspan()
	if err := checkStride(op, name, s.Stride, span, batch, output); err != nil {
		return strided{}, err
	}
	p, err := checkExtent[T](op, name, dev, s.Buf, s.Offset, (batch-1)*s.Stride+span, s.inc(), 1)
	return strided{place: p, stride: int64(s.Stride)}, err
}

// checkMatrices checks a batch of matrices of one shape; the first entry
// gives the shape every other must have.
func checkMatrices[T Numeric](op, name string, dev *hip.Device, ms []Matrix[T]) (pointers, error) {
	if len(ms) == 0 {
		return pointers{}, invalidSize(op, "%s is empty: a batch has at least one entry", name)
	}
	if err := checkBatch(op, len(ms)); err != nil {
		return pointers{}, err
	}
	out := pointers{addrs: make([]uintptr, len(ms))}
	r0, c0, ld0 := ms[0].dims()
	for i, m := range ms {
		if r, c, ld := m.dims(); r != r0 || c != c0 || ld != ld0 {
			return pointers{}, invalidSize(op, "%s[%d] is %d×%d with ld %d, but %s[0] is %d×%d with ld %d: a batch has one shape", name, i, r, c, ld, name, r0, c0, ld0)
		}
		p, err := checkMatrix(op, name, dev, m)
		if err != nil {
			// Checked again to name the entry; formatting its name on
			// every success would cost a batch of thousands dearly.
			_, err = checkMatrix(op, fmt.Sprintf("%s[%d]", name, i), dev, m)
			return pointers{}, err
		}
		out.addrs[i], out.ld = p.addr, p.ld
	}
	return out, nil
}

// checkVectors checks a batch of vectors of one length and increment.
func checkVectors[T Numeric](op, name string, dev *hip.Device, vs []Vector[T]) (pointers, error) {
	if len(vs) == 0 {
		return pointers{}, invalidSize(op, "%s is empty: a batch has at least one entry", name)
	}
	if err := checkBatch(op, len(vs)); err != nil {
		return pointers{}, err
	}
	out := pointers{addrs: make([]uintptr, len(vs))}
	for i, v := range vs {
		if v.N != vs[0].N || v.inc() != vs[0].inc() {
			return pointers{}, invalidSize(op, "%s[%d] has N %d and Inc %d, but %s[0] has N %d and Inc %d: a batch has one shape", name, i, v.N, v.inc(), name, vs[0].N, vs[0].inc())
		}
		p, err := checkVector(op, name, dev, v)
		if err != nil {
			_, err = checkVector(op, fmt.Sprintf("%s[%d]", name, i), dev, v)
			return pointers{}, err
		}
		out.addrs[i], out.ld = p.addr, p.ld
	}
	return out, nil
}

// checkOp checks a transpose argument.
func checkOp(op, name string, t Operation) error {
	switch t {
	case OperationNone, OperationTranspose, OperationConjugateTranspose:
		return nil
	}
	return invalid(op, "%s is %s: want None, Transpose or ConjugateTranspose", name, t)
}

func checkFill(op string, f Fill) error {
	if f != FillUpper && f != FillLower {
		return invalid(op, "uplo is %s: want FillUpper or FillLower", f)
	}
	return nil
}

func checkSide(op string, s Side) error {
	if s != SideLeft && s != SideRight {
		return invalid(op, "side is %s: want SideLeft or SideRight", s)
	}
	return nil
}

func checkDiag(op string, d Diagonal) error {
	if d != DiagonalNonUnit && d != DiagonalUnit {
		return invalid(op, "diag is %s: want DiagonalNonUnit or DiagonalUnit", d)
	}
	return nil
}

// square checks that a matrix is n×n.
func square[T Numeric](op, name string, m Matrix[T], n int, why string) error {
	if m.Rows != n || m.Cols != n {
		return invalidSize(op, "%s is %d×%d, but %s makes it %d×%d", name, m.Rows, m.Cols, why, n, n)
	}
	return nil
}

func checkStream(op string, s *hip.Stream) error {
	switch {
	case s == nil:
		return invalid(op, "nil stream: bind the handle to a stream of the device (hip.Device.NewStream)")
	case s.Closed():
		return &Error{Op: op, Status: StatusInvalidValue, Detail: "the stream is closed", Err: hip.ErrClosed}
	case s.Device() == nil:
		return invalid(op, "the stream was not made by hip.Device.NewStream")
	}
	return nil
}
