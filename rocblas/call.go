package rocblas

/*
#include "helpers.h"
*/
import "C"

import (
	"runtime"

	"github.com/rocm-go/rocm/hip"
)

// form is the shape of a call: one operation, a batch of pointer arrays,
// or a strided batch.
type form int

const (
	plain form = iota
	batched
	stridedBatched
)

var formSuffix = [...]string{"", "_batched", "_strided_batched"}

// cnames are the rocBLAS names of one operation by type code (s, d, c, z,
// h); fn names the function a call made, built only for an error.
type cnames [5]string

func typed(base string) *cnames {
	return &cnames{"rocblas_s" + base, "rocblas_d" + base, "rocblas_c" + base, "rocblas_z" + base, "rocblas_h" + base}
}

type fn struct {
	names *cnames
	kind  int
	form  form
}

func (f fn) String() string { return f.names[f.kind] + formSuffix[f.form] }

// exec runs call under the handle's lock with the library in pointer mode
// m. For a batched call, ptrs are the pointer arrays to copy to the device
// first: call receives their device addresses.
func (h *Handle) exec(op string, m PointerMode, f fn, ptrs [][]uintptr, call func(arrays [3]uintptr) C.rocblas_status) error {
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if err := h.mode(m); err != nil {
		return err
	}
	var arrays [3]uintptr
	slot := -1
	if len(ptrs) > 0 {
		var err error
		if arrays, slot, err = h.upload(ptrs...); err != nil {
			return err
		}
	}
	st := call(arrays)
	if slot >= 0 {
		if err := h.done(slot); err != nil && st == 0 {
			return err
		}
	}
	if st != 0 {
		return statusError(f.String(), Status(st))
	}
	return nil
}

// vec is a checked vector operand in any form: its place (for a batch
// given as a slice, the common increment), the stride of a strided batch,
// or the device addresses of a batch given as a slice.
type vec struct {
	place
	stride int64
	ptrs   []uintptr
	n      int // a vector's length
	// A matrix's stored rows and columns.
	rows, cols int
}

// mat is a checked matrix operand in any form.
type mat = vec

// keep keeps the buffers of a call's operands alive until the C call has
// returned; the garbage collector could otherwise run their cleanups.
func keep(a, b, c *hip.Buffer) {
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	runtime.KeepAlive(c)
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

// arrays lists the pointer arrays of a batched call's operands, nil for
// the other forms.
func arrays(f form, ops ...vec) [][]uintptr {
	if f != batched {
		return nil
	}
	out := make([][]uintptr, len(ops))
	for i, o := range ops {
		out[i] = o.ptrs
	}
	return out
}

// at is an operand's device address for the C call: its place, or for a
// batch given as a slice the device copy of its pointer array.
func (v vec) at(f form, arrays [3]uintptr, i int) C.uintptr_t {
	if f == batched {
		return C.uintptr_t(arrays[i])
	}
	return C.uintptr_t(v.addr)
}

// ci converts a checked size to the C int the calls take.
func ci(n int) C.int { return C.int(n) }
