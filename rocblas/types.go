package rocblas

import (
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

// strided are the checked numbers of a strided batch.
type strided struct {
	place
	stride int64
}

// pointers are the checked numbers of a batch given as a slice: the device
// address of each entry and their common leading dimension or increment.
type pointers struct {
	addrs []uintptr
	ld    int
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
