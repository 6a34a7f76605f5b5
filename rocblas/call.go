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
