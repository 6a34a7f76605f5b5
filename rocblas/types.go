package rocblas

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
)

// Elem is an element type of the typed BLAS functions: rocBLAS's s, d, c
// and z types.
type Elem interface {
	float32 | float64 | complex64 | complex128
}

// GemmElem is an element type of Gemm and its batched forms: Elem and
// half precision (rocblas_hgemm).
type GemmElem interface {
	Elem | hip.Half
}

// ExIn is an input element type of GemmEx: A and B.
type ExIn interface {
	hip.Half | hip.BFloat16 | float32 | float64 | int8
}

// ExOut is an output element type of GemmEx: C and D.
type ExOut interface {
	hip.Half | hip.BFloat16 | float32 | float64 | int32
}

// Real is the real type of a reduction's result: float32 for float32 and
// complex64 vectors, float64 for float64 and complex128 ones.
type Real interface {
	float32 | float64
}

// Numeric is every element type a Matrix or Vector can hold.
type Numeric interface {
	GemmElem | hip.BFloat16 | int8 | int32
}

// Matrix is a column-major matrix in device memory: element (i, j) is at
// element Offset + i + j*Ld of Buf. Rows and Cols are the stored matrix's;
// an operation's transpose argument says whether it uses the matrix or its
// transpose. Ld is the leading dimension (the distance between columns, in
// elements); 0 means Rows.
type Matrix[T Numeric] struct {
	Buf        *hip.Buffer
	Offset     int // elements from the start of Buf
	Rows, Cols int
	Ld         int
}

// Vector is a strided vector in device memory: element i is at element
// Offset + i*Inc of Buf. Inc 0 means 1. A negative Inc walks the same
// elements backwards, as in reference BLAS: element i is then at
// Offset + (N-1-i)*|Inc|.
type Vector[T Numeric] struct {
	Buf    *hip.Buffer
	Offset int // elements from the start of Buf
	N      int
	Inc    int
}

// StridedMatrix is a batch of matrices of one shape in one buffer, for the
// strided-batched functions: matrix b starts at element Offset + b*Stride.
// The batch size is the function's batch argument. A Stride of 0 uses the
// same matrix for every batch entry, which only inputs may do.
type StridedMatrix[T Numeric] struct {
	Matrix[T]
	Stride int
}

// StridedVector is a batch of vectors of one length in one buffer: vector
// b starts at element Offset + b*Stride.
type StridedVector[T Numeric] struct {
	Vector[T]
	Stride int
}

// Mat is a Matrix over all of buf from its start, with Ld = rows.
func Mat[T Numeric](buf *hip.Buffer, rows, cols int) Matrix[T] {
	return Matrix[T]{Buf: buf, Rows: rows, Cols: cols}
}

// Vec is a contiguous Vector of n elements from the start of buf.
func Vec[T Numeric](buf *hip.Buffer, n int) Vector[T] {
	return Vector[T]{Buf: buf, N: n}
}

// Strided is a StridedMatrix of tightly packed matrices: Stride is
// Ld*Cols.
func Strided[T Numeric](m Matrix[T]) StridedMatrix[T] {
	ld := m.Ld
	if ld == 0 {
		ld = m.Rows
	}
	return StridedMatrix[T]{Matrix: m, Stride: ld * m.Cols}
}

// Kinds: the type codes of helpers.h.
const (
	kindS = 0
	kindD = 1
	kindC = 2
	kindZ = 3
	kindH = 4
)

// kind returns the type code of T, its rocBLAS data type and its name.
func kind[T Numeric]() (int, Datatype, string) {
	switch any((*T)(nil)).(type) {
	case *float32:
		return kindS, DatatypeF32R, "float32"
	case *float64:
		return kindD, DatatypeF64R, "float64"
	case *complex64:
		return kindC, DatatypeF32C, "complex64"
	case *complex128:
		return kindZ, DatatypeF64C, "complex128"
	case *hip.Half:
		return kindH, DatatypeF16R, "hip.Half"
	case *hip.BFloat16:
		return -1, DatatypeBf16R, "hip.BFloat16"
	case *int8:
		return -1, DatatypeI8R, "int8"
	case *int32:
		return -1, DatatypeI32R, "int32"
	}
	return -1, DatatypeInvalid, "?"
}

// sizeOf is the size of one element of T in bytes.
func sizeOf[T any]() int {
	var zero T
	return int(unsafe.Sizeof(zero))
}

// alignOf is the alignment a device pointer to T needs: a complex number
// is aligned as its parts.
func alignOf[T any]() int {
	var zero T
	switch any(zero).(type) {
	case complex64, complex128:
		return sizeOf[T]() / 2
	}
	return sizeOf[T]()
}

// maxInt is the largest rocblas_int.
const maxInt = math.MaxInt32

// place is a checked operand: its device address and leading dimension or
// increment, as the C call takes them.
type place struct {
	addr uintptr
	ld   int // leading dimension (matrices) or increment (vectors)
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

// dims returns a matrix's rows, columns and effective leading dimension.
func (m Matrix[T]) dims() (rows, cols, ld int) {
	ld = m.Ld
	if ld == 0 {
		ld = m.Rows
	}
	return m.Rows, m.Cols, ld
}

// span is the number of elements from the first to the last one a matrix
// touches.
func (m Matrix[T]) span() int {
	rows, cols, ld := m.dims()
	return (cols-1)*ld + rows
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

// inc returns a vector's effective increment.
func (v Vector[T]) inc() int {
	if v.Inc == 0 {
		return 1
	}
	return v.Inc
}

// vspan is the number of elements from the first to the last one a vector
// touches.
func (v Vector[T]) vspan() int {
	inc := v.inc()
	if inc < 0 {
		inc = -inc
	}
	return (v.N-1)*inc + 1
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

// strided are the checked numbers of a strided batch.
type strided struct {
	place
	stride int64
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

// pointers are the checked numbers of a batch given as a slice: the device
// address of each entry and their common leading dimension or increment.
type pointers struct {
	addrs []uintptr
	ld    int
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
		entry := fmt.Sprintf("%s[%d]", name, i)
		if r, c, ld := m.dims(); r != r0 || c != c0 || ld != ld0 {
			return pointers{}, invalidSize(op, "%s is %d×%d with ld %d, but %s[0] is %d×%d with ld %d: a batch has one shape", entry, r, c, ld, name, r0, c0, ld0)
		}
		p, err := checkMatrix(op, entry, dev, m)
		if err != nil {
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
		entry := fmt.Sprintf("%s[%d]", name, i)
		if v.N != vs[0].N || v.inc() != vs[0].inc() {
			return pointers{}, invalidSize(op, "%s has N %d and Inc %d, but %s[0] has N %d and Inc %d: a batch has one shape", entry, v.N, v.inc(), name, vs[0].N, vs[0].inc())
		}
		p, err := checkVector(op, entry, dev, v)
		if err != nil {
			return pointers{}, err
		}
		out.addrs[i], out.ld = p.addr, p.ld
	}
	return out, nil
}

// opDims are the rows and columns of op(M) for a stored rows×cols matrix.
func opDims(t Operation, rows, cols int) (int, int) {
	if t == OperationNone {
		return rows, cols
	}
	return cols, rows
}

// opName spells op(M) for messages: "A", "Aᵀ" or "Aᴴ".
func opName(t Operation, name string) string {
	switch t {
	case OperationTranspose:
		return name + "ᵀ"
	case OperationConjugateTranspose:
		return name + "ᴴ"
	}
	return name
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
