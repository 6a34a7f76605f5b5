package rocblas

/*
#include "helpers.h"
*/
import "C"

import (
	"runtime"
)

// Level 1: each operation has three forms. The plain one takes Vectors;
// ...Batched takes slices of vectors of one length and increment, anywhere
// in device memory (the handle copies their addresses to the device); and
// ...StridedBatched takes StridedVectors and a batch size.
var (
	axpyNames  = typed("axpy")
	scalNames  = typed("scal")
	copyNames  = typed("copy")
	swapNames  = typed("swap")
	rotNames   = typed("rot")
	dotNames   = &cnames{"rocblas_sdot", "rocblas_ddot", "rocblas_cdotu", "rocblas_zdotu"}
	dotcNames  = &cnames{"rocblas_sdot", "rocblas_ddot", "rocblas_cdotc", "rocblas_zdotc"}
	nrm2Names  = &cnames{"rocblas_snrm2", "rocblas_dnrm2", "rocblas_scnrm2", "rocblas_dznrm2"}
	asumNames  = &cnames{"rocblas_sasum", "rocblas_dasum", "rocblas_scasum", "rocblas_dzasum"}
	iamaxNames = &cnames{"rocblas_isamax", "rocblas_idamax", "rocblas_icamax", "rocblas_izamax"}
	iaminNames = &cnames{"rocblas_isamin", "rocblas_idamin", "rocblas_icamin", "rocblas_izamin"}
)

// strides are a strided call's C strides of x and y.
func strides(x, y vec) (C.int64_t, C.int64_t) { return C.int64_t(x.stride), C.int64_t(y.stride) }

// axpy runs y = alpha*x + y in any form.
func axpy[T Elem](h *Handle, op string, alpha T, x, y any, batch int) error {
	a := begin(h, op)
	xv, yv, f, n := pair[T](a, x, y, batch, false, true)
	if !a.ok() {
		return a.err
	}
	k, _, _ := kind[T]()
	err := h.exec(op, PointerModeHost, fn{axpyNames, k, f}, arrays(f, xv, yv), func(p [3]uintptr) C.rocblas_status {
		al := scalar(h.mem, 0, alpha)
		x, y := xv.at(f, p, 0), yv.at(f, p, 1)
		switch f {
		case plain:
			return C.rg_axpy(h.ord, h.handle(), C.int(k), ci(xv.n), al, x, ci(xv.ld), y, ci(yv.ld))
		case batched:
			return C.rg_axpy_batched(h.ord, h.handle(), C.int(k), ci(xv.n), al, x, ci(xv.ld), y, ci(yv.ld), ci(n))
		}
		sx, sy := strides(xv, yv)
		return C.rg_axpy_strided(h.ord, h.handle(), C.int(k), ci(xv.n), al, x, ci(xv.ld), sx, y, ci(yv.ld), sy, ci(n))
	})
	runtime.KeepAlive(x)
	runtime.KeepAlive(y)
	return err
}

// Axpy computes y = alpha*x + y.
func Axpy[T Elem](h *Handle, alpha T, x, y Vector[T]) error { return axpy(h, "Axpy", alpha, x, y, 1) }

// AxpyBatched computes y[i] = alpha*x[i] + y[i] for each entry.
func AxpyBatched[T Elem](h *Handle, alpha T, x, y []Vector[T]) error {
	return axpy(h, "AxpyBatched", alpha, x, y, len(x))
}

// AxpyStridedBatched computes y_i = alpha*x_i + y_i for each of batch
// entries.
func AxpyStridedBatched[T Elem](h *Handle, alpha T, x, y StridedVector[T], batch int) error {
	return axpy(h, "AxpyStridedBatched", alpha, x, y, batch)
}

// scal runs x = alpha*x in any form.
func scal[T Elem](h *Handle, op string, alpha T, x any, batch int) error {
	a := begin(h, op)
	xv, f, n := vecIn[T](a, "x", x, batch, true)
	positive(a, xv)
	if !a.ok() {
		return a.err
	}
	k, _, _ := kind[T]()
	err := h.exec(op, PointerModeHost, fn{scalNames, k, f}, arrays(f, xv), func(p [3]uintptr) C.rocblas_status {
		al := scalar(h.mem, 0, alpha)
		switch f {
		case plain:
			return C.rg_scal(h.ord, h.handle(), C.int(k), ci(xv.n), al, xv.at(f, p, 0), ci(xv.ld))
		case batched:
			return C.rg_scal_batched(h.ord, h.handle(), C.int(k), ci(xv.n), al, xv.at(f, p, 0), ci(xv.ld), ci(n))
		}
		return C.rg_scal_strided(h.ord, h.handle(), C.int(k), ci(xv.n), al, xv.at(f, p, 0), ci(xv.ld), C.int64_t(xv.stride), ci(n))
	})
	runtime.KeepAlive(x)
	return err
}

// Scal computes x = alpha*x.
func Scal[T Elem](h *Handle, alpha T, x Vector[T]) error { return scal(h, "Scal", alpha, x, 1) }

// ScalBatched computes x[i] = alpha*x[i] for each entry.
func ScalBatched[T Elem](h *Handle, alpha T, x []Vector[T]) error {
	return scal(h, "ScalBatched", alpha, x, len(x))
}

// ScalStridedBatched computes x_i = alpha*x_i for each of batch entries.
func ScalStridedBatched[T Elem](h *Handle, alpha T, x StridedVector[T], batch int) error {
	return scal(h, "ScalStridedBatched", alpha, x, batch)
}

// copySwap runs y = x (or swaps x and y) in any form.
func copySwap[T Elem](h *Handle, op string, swap bool, x, y any, batch int) error {
	a := begin(h, op)
	xv, yv, f, n := pair[T](a, x, y, batch, swap, true)
	if !a.ok() {
		return a.err
	}
	k, _, _ := kind[T]()
	names, sw := copyNames, C.int(0)
	if swap {
		names, sw = swapNames, 1
	}
	err := h.exec(op, PointerModeHost, fn{names, k, f}, arrays(f, xv, yv), func(p [3]uintptr) C.rocblas_status {
		x, y := xv.at(f, p, 0), yv.at(f, p, 1)
		switch f {
		case plain:
			return C.rg_copy(h.ord, h.handle(), C.int(k), sw, ci(xv.n), x, ci(xv.ld), y, ci(yv.ld))
		case batched:
			return C.rg_copy_batched(h.ord, h.handle(), C.int(k), sw, ci(xv.n), x, ci(xv.ld), y, ci(yv.ld), ci(n))
		}
		sx, sy := strides(xv, yv)
		return C.rg_copy_strided(h.ord, h.handle(), C.int(k), sw, ci(xv.n), x, ci(xv.ld), sx, y, ci(yv.ld), sy, ci(n))
	})
	runtime.KeepAlive(x)
	runtime.KeepAlive(y)
	return err
}

// Copy copies x into y.
func Copy[T Elem](h *Handle, x, y Vector[T]) error { return copySwap[T](h, "Copy", false, x, y, 1) }

// CopyBatched copies x[i] into y[i] for each entry.
func CopyBatched[T Elem](h *Handle, x, y []Vector[T]) error {
	return copySwap[T](h, "CopyBatched", false, x, y, len(x))
}

// CopyStridedBatched copies x_i into y_i for each of batch entries.
func CopyStridedBatched[T Elem](h *Handle, x, y StridedVector[T], batch int) error {
	return copySwap[T](h, "CopyStridedBatched", false, x, y, batch)
}

// Swap exchanges x and y.
func Swap[T Elem](h *Handle, x, y Vector[T]) error { return copySwap[T](h, "Swap", true, x, y, 1) }

// SwapBatched exchanges x[i] and y[i] for each entry.
func SwapBatched[T Elem](h *Handle, x, y []Vector[T]) error {
	return copySwap[T](h, "SwapBatched", true, x, y, len(x))
}

// SwapStridedBatched exchanges x_i and y_i for each of batch entries.
func SwapStridedBatched[T Elem](h *Handle, x, y StridedVector[T], batch int) error {
	return copySwap[T](h, "SwapStridedBatched", true, x, y, batch)
}

// realScalar stores a real scalar as the real type of T.
func realScalar[T Elem](m *hostMemory, i int, v float64) C.uintptr_t {
	if isDouble[T]() {
		return scalar(m, i, v)
	}
	return scalar(m, i, float32(v))
}

// isDouble reports whether T is float64 or complex128.
func isDouble[T Elem]() bool {
	k, _, _ := kind[T]()
	return k == kindD || k == kindZ
}

// rot applies a plane rotation in any form.
func rot[T Elem](h *Handle, op string, x, y any, c float64, s T, batch int) error {
	a := begin(h, op)
	xv, yv, f, n := pair[T](a, x, y, batch, true, true)
	if !a.ok() {
		return a.err
	}
	k, _, _ := kind[T]()
	err := h.exec(op, PointerModeHost, fn{rotNames, k, f}, arrays(f, xv, yv), func(p [3]uintptr) C.rocblas_status {
		cp, sp := realScalar[T](h.mem, 0, c), scalar(h.mem, 1, s)
		x, y := xv.at(f, p, 0), yv.at(f, p, 1)
		switch f {
		case plain:
			return C.rg_rot(h.ord, h.handle(), C.int(k), ci(xv.n), x, ci(xv.ld), y, ci(yv.ld), cp, sp)
		case batched:
			return C.rg_rot_batched(h.ord, h.handle(), C.int(k), ci(xv.n), x, ci(xv.ld), y, ci(yv.ld), cp, sp, ci(n))
		}
		sx, sy := strides(xv, yv)
		return C.rg_rot_strided(h.ord, h.handle(), C.int(k), ci(xv.n), x, ci(xv.ld), sx, y, ci(yv.ld), sy, cp, sp, ci(n))
	})
	runtime.KeepAlive(x)
	runtime.KeepAlive(y)
	return err
}

// Rot applies the plane rotation (c, s) to the pairs of x and y:
// x = c*x + s*y and y = c*y - conj(s)*x. c is real (converted to the
// precision of T); s is complex for complex T.
func Rot[T Elem](h *Handle, x, y Vector[T], c float64, s T) error {
	return rot(h, "Rot", x, y, c, s, 1)
}

// RotBatched applies the rotation (c, s) to x[i] and y[i] for each entry.
func RotBatched[T Elem](h *Handle, x, y []Vector[T], c float64, s T) error {
	return rot(h, "RotBatched", x, y, c, s, len(x))
}

// RotStridedBatched applies the rotation (c, s) to x_i and y_i for each of
// batch entries.
func RotStridedBatched[T Elem](h *Handle, x, y StridedVector[T], c float64, s T, batch int) error {
	return rot(h, "RotStridedBatched", x, y, c, s, batch)
}

// Reductions: which reduction of helpers.h.
const (
	reduceNrm2  = 0
	reduceAsum  = 1
	reduceIamax = 2
	reduceIamin = 3
	reduceDot   = 4
	reduceDotc  = 5
)

var reduceNames = [...]*cnames{nrm2Names, asumNames, iamaxNames, iaminNames, dotNames, dotcNames}

// resultOf checks where a ...To reduction writes its batch results of type
// R, which must be want (the result type of the reduction on T).
func resultOf[R Numeric](a *args, dst Vector[R], batch int, want string) vec {
	if !a.ok() {
		return vec{}
	}
	if _, _, got := kind[R](); got != want {
		a.check(invalid(a.op, "result is a Vector[%s]; this reduction writes %s", got, want))
		return vec{}
	}
	v := vecOf(a, "result", dst)
	switch {
	case !a.ok():
	case v.ld != 1:
		a.check(invalidSize(a.op, "result.Inc is %d: results are written contiguously (Inc 1)", v.ld))
	case dst.N < batch:
		a.check(invalidSize(a.op, "result.N %d < %d, the batch's results", dst.N, batch))
	}
	return v
}

// reduce runs a reduction in any form: dot or dotc on x and y, or one of
// nrm2, asum, iamax and iamin on x. The batch's results, of type R, go to
// dst in device memory, or, when dst is nil, to host memory and are
// returned.
func reduce[T Elem, R Numeric](h *Handle, op string, which int, x, y any, batch int, dst *Vector[R], want string) ([]R, error) {
	a := begin(h, op)
	var xv, yv vec
	var f form
	var n int
	if which >= reduceDot {
		xv, yv, f, n = pair[T](a, x, y, batch, false, false)
	} else {
		xv, f, n = vecIn[T](a, "x", x, batch, false)
		positive(a, xv)
	}
	mode, res := PointerModeHost, vec{}
	if dst != nil {
		mode, res = PointerModeDevice, resultOf(a, *dst, n, want)
	}
	if !a.ok() {
		return nil, a.err
	}
	k, _, _ := kind[T]()
	var out []R
	ptrs := arrays(f, xv)
	if which >= reduceDot {
		ptrs = arrays(f, xv, yv)
	}
	err := h.exec(op, mode, fn{reduceNames[which], k, f}, ptrs, func(p [3]uintptr) C.rocblas_status {
		r := C.uintptr_t(res.addr)
		if dst == nil {
			r = h.mem.resultSpace(n, sizeOf[R]())
		}
		x := xv.at(f, p, 0)
		var st C.rocblas_status
		if which >= reduceDot {
			cj, y := C.int(which-reduceDot), yv.at(f, p, 1)
			switch f {
			case plain:
				st = C.rg_dot(h.ord, h.handle(), C.int(k), cj, ci(xv.n), x, ci(xv.ld), y, ci(yv.ld), r)
			case batched:
				st = C.rg_dot_batched(h.ord, h.handle(), C.int(k), cj, ci(xv.n), x, ci(xv.ld), y, ci(yv.ld), ci(n), r)
			default:
				sx, sy := strides(xv, yv)
				st = C.rg_dot_strided(h.ord, h.handle(), C.int(k), cj, ci(xv.n), x, ci(xv.ld), sx, y, ci(yv.ld), sy, ci(n), r)
			}
		} else {
			w := C.int(which)
			switch f {
			case plain:
				st = C.rg_reduce(h.ord, h.handle(), C.int(k), w, ci(xv.n), x, ci(xv.ld), r)
			case batched:
				st = C.rg_reduce_batched(h.ord, h.handle(), C.int(k), w, ci(xv.n), x, ci(xv.ld), ci(n), r)
			default:
				st = C.rg_reduce_strided(h.ord, h.handle(), C.int(k), w, ci(xv.n), x, ci(xv.ld), C.int64_t(xv.stride), ci(n), r)
			}
		}
		if st == 0 && dst == nil {
			out = hostResults[R](h.mem, n)
		}
		return st
	})
	runtime.KeepAlive(x)
	runtime.KeepAlive(y)
	if dst != nil {
		runtime.KeepAlive(dst.Buf)
	}
	return out, err
}

// first returns the only result of a plain reduction.
func first[R any](out []R, err error) (R, error) {
	var zero R
	if err != nil || len(out) == 0 {
		return zero, err
	}
	return out[0], nil
}

// dot runs Dot (conj false) or Dotc in any form.
func dot[T Elem](h *Handle, op string, conj bool, x, y any, batch int, dst *Vector[T]) ([]T, error) {
	which := reduceDot
	if conj {
		which = reduceDotc
	}
	_, _, want := kind[T]()
	return reduce[T](h, op, which, x, y, batch, dst, want)
}

// Dot returns the dot product of x and y, Σ x[i]*y[i] (dotu: without
// conjugation for complex vectors; see Dotc).
func Dot[T Elem](h *Handle, x, y Vector[T]) (T, error) {
	return first(dot[T](h, "Dot", false, x, y, 1, nil))
}

// DotBatched returns the dot product of x[i] and y[i] for each entry.
func DotBatched[T Elem](h *Handle, x, y []Vector[T]) ([]T, error) {
	return dot[T](h, "DotBatched", false, x, y, len(x), nil)
}

// DotStridedBatched returns the dot product of x_i and y_i for each of
// batch entries.
func DotStridedBatched[T Elem](h *Handle, x, y StridedVector[T], batch int) ([]T, error) {
	return dot[T](h, "DotStridedBatched", false, x, y, batch, nil)
}

// DotTo writes the dot product of x and y to result's first element, in
// device memory, without waiting for it.
func DotTo[T Elem](h *Handle, x, y Vector[T], result Vector[T]) error {
	_, err := dot(h, "DotTo", false, x, y, 1, &result)
	return err
}

// DotBatchedTo writes the dot product of x[i] and y[i] to result element i
// for each entry, without waiting.
func DotBatchedTo[T Elem](h *Handle, x, y []Vector[T], result Vector[T]) error {
	_, err := dot(h, "DotBatchedTo", false, x, y, len(x), &result)
	return err
}

// DotStridedBatchedTo writes the dot product of x_i and y_i to result
// element i for each of batch entries, without waiting.
func DotStridedBatchedTo[T Elem](h *Handle, x, y StridedVector[T], batch int, result Vector[T]) error {
	_, err := dot(h, "DotStridedBatchedTo", false, x, y, batch, &result)
	return err
}

// Dotc returns Σ conj(x[i])*y[i]; for real vectors it is Dot.
func Dotc[T Elem](h *Handle, x, y Vector[T]) (T, error) {
	return first(dot[T](h, "Dotc", true, x, y, 1, nil))
}

// DotcBatched returns Dotc of x[i] and y[i] for each entry.
func DotcBatched[T Elem](h *Handle, x, y []Vector[T]) ([]T, error) {
	return dot[T](h, "DotcBatched", true, x, y, len(x), nil)
}

// DotcStridedBatched returns Dotc of x_i and y_i for each of batch entries.
func DotcStridedBatched[T Elem](h *Handle, x, y StridedVector[T], batch int) ([]T, error) {
	return dot[T](h, "DotcStridedBatched", true, x, y, batch, nil)
}

// DotcTo writes Dotc of x and y to result's first element, without waiting.
func DotcTo[T Elem](h *Handle, x, y Vector[T], result Vector[T]) error {
	_, err := dot(h, "DotcTo", true, x, y, 1, &result)
	return err
}

// DotcBatchedTo writes Dotc of x[i] and y[i] to result element i for each
// entry, without waiting.
func DotcBatchedTo[T Elem](h *Handle, x, y []Vector[T], result Vector[T]) error {
	_, err := dot(h, "DotcBatchedTo", true, x, y, len(x), &result)
	return err
}

// DotcStridedBatchedTo writes Dotc of x_i and y_i to result element i for
// each of batch entries, without waiting.
func DotcStridedBatchedTo[T Elem](h *Handle, x, y StridedVector[T], batch int, result Vector[T]) error {
	_, err := dot(h, "DotcStridedBatchedTo", true, x, y, batch, &result)
	return err
}

// realName is the name of the real type of T: the result type of Nrm2 and
// Asum.
func realName[T Elem]() string {
	if isDouble[T]() {
		return "float64"
	}
	return "float32"
}

// realReduce runs nrm2 or asum with host results, widened to float64.
func realReduce[T Elem](h *Handle, op string, which int, x any, batch int) ([]float64, error) {
	if isDouble[T]() {
		return reduce[T, float64](h, op, which, x, nil, batch, nil, "float64")
	}
	r, err := reduce[T, float32](h, op, which, x, nil, batch, nil, "float32")
	out := make([]float64, len(r))
	for i, v := range r {
		out[i] = float64(v)
	}
	return out, err
}

// realReduceTo runs nrm2 or asum with device results.
func realReduceTo[T Elem, R Real](h *Handle, op string, which int, x any, batch int, result Vector[R]) error {
	_, err := reduce[T](h, op, which, x, nil, batch, &result, realName[T]())
	return err
}

// Nrm2 returns the Euclidean norm of x.
func Nrm2[T Elem](h *Handle, x Vector[T]) (float64, error) {
	return first(realReduce[T](h, "Nrm2", reduceNrm2, x, 1))
}

// Nrm2Batched returns the Euclidean norm of each entry.
func Nrm2Batched[T Elem](h *Handle, x []Vector[T]) ([]float64, error) {
	return realReduce[T](h, "Nrm2Batched", reduceNrm2, x, len(x))
}

// Nrm2StridedBatched returns the Euclidean norm of each of batch entries.
func Nrm2StridedBatched[T Elem](h *Handle, x StridedVector[T], batch int) ([]float64, error) {
	return realReduce[T](h, "Nrm2StridedBatched", reduceNrm2, x, batch)
}

// Nrm2To writes the Euclidean norm of x to result's first element, in
// device memory, without waiting; R is the real type of T.
func Nrm2To[T Elem, R Real](h *Handle, x Vector[T], result Vector[R]) error {
	return realReduceTo[T](h, "Nrm2To", reduceNrm2, x, 1, result)
}

// Nrm2BatchedTo writes the norm of x[i] to result element i, without
// waiting.
func Nrm2BatchedTo[T Elem, R Real](h *Handle, x []Vector[T], result Vector[R]) error {
	return realReduceTo[T](h, "Nrm2BatchedTo", reduceNrm2, x, len(x), result)
}

// Nrm2StridedBatchedTo writes the norm of x_i to result element i for
// each of batch entries, without waiting.
func Nrm2StridedBatchedTo[T Elem, R Real](h *Handle, x StridedVector[T], batch int, result Vector[R]) error {
	return realReduceTo[T](h, "Nrm2StridedBatchedTo", reduceNrm2, x, batch, result)
}

// Asum returns Σ |x[i]|, where for complex numbers |z| is
// |real(z)| + |imag(z)| as in BLAS.
func Asum[T Elem](h *Handle, x Vector[T]) (float64, error) {
	return first(realReduce[T](h, "Asum", reduceAsum, x, 1))
}

// AsumBatched returns Asum of each entry.
func AsumBatched[T Elem](h *Handle, x []Vector[T]) ([]float64, error) {
	return realReduce[T](h, "AsumBatched", reduceAsum, x, len(x))
}

// AsumStridedBatched returns Asum of each of batch entries.
func AsumStridedBatched[T Elem](h *Handle, x StridedVector[T], batch int) ([]float64, error) {
	return realReduce[T](h, "AsumStridedBatched", reduceAsum, x, batch)
}

// AsumTo writes Asum of x to result's first element, without waiting; R is
// the real type of T.
func AsumTo[T Elem, R Real](h *Handle, x Vector[T], result Vector[R]) error {
	return realReduceTo[T](h, "AsumTo", reduceAsum, x, 1, result)
}

// AsumBatchedTo writes Asum of x[i] to result element i, without waiting.
func AsumBatchedTo[T Elem, R Real](h *Handle, x []Vector[T], result Vector[R]) error {
	return realReduceTo[T](h, "AsumBatchedTo", reduceAsum, x, len(x), result)
}

// AsumStridedBatchedTo writes Asum of x_i to result element i for each of
// batch entries, without waiting.
func AsumStridedBatchedTo[T Elem, R Real](h *Handle, x StridedVector[T], batch int, result Vector[R]) error {
	return realReduceTo[T](h, "AsumStridedBatchedTo", reduceAsum, x, batch, result)
}

// index runs iamax or iamin with host results, made 0-based.
func index[T Elem](h *Handle, op string, which int, x any, batch int) ([]int, error) {
	r, err := reduce[T, int32](h, op, which, x, nil, batch, nil, "int32")
	out := make([]int, len(r))
	for i, v := range r {
		out[i] = int(v) - 1
	}
	return out, err
}
func indexTo[T Elem](h *Handle, op string, which int, x any, batch int, result Vector[int32]) error {
	_, err := reduce[T](h, op, which, x, nil, batch, &result, "int32")
	return err
}

// Iamax returns the 0-based index of the first element of largest
// magnitude (|real| + |imag| for complex numbers).
func Iamax[T Elem](h *Handle, x Vector[T]) (int, error) {
	return first(index[T](h, "Iamax", reduceIamax, x, 1))
}

// IamaxBatched returns Iamax of each entry.
func IamaxBatched[T Elem](h *Handle, x []Vector[T]) ([]int, error) {
	return index[T](h, "IamaxBatched", reduceIamax, x, len(x))
}

// IamaxStridedBatched returns Iamax of each of batch entries.
func IamaxStridedBatched[T Elem](h *Handle, x StridedVector[T], batch int) ([]int, error) {
	return index[T](h, "IamaxStridedBatched", reduceIamax, x, batch)
}

// IamaxTo writes the index of x's largest element to result's first
// element, without waiting. Device results are BLAS's: 1-based.
func IamaxTo[T Elem](h *Handle, x Vector[T], result Vector[int32]) error {
	return indexTo[T](h, "IamaxTo", reduceIamax, x, 1, result)
}

// IamaxBatchedTo writes the 1-based index for x[i] to result element i,
// without waiting.
func IamaxBatchedTo[T Elem](h *Handle, x []Vector[T], result Vector[int32]) error {
	return indexTo[T](h, "IamaxBatchedTo", reduceIamax, x, len(x), result)
}

// IamaxStridedBatchedTo writes the 1-based index for x_i to result element
// i for each of batch entries, without waiting.
func IamaxStridedBatchedTo[T Elem](h *Handle, x StridedVector[T], batch int, result Vector[int32]) error {
	return indexTo[T](h, "IamaxStridedBatchedTo", reduceIamax, x, batch, result)
}

// Iamin returns the 0-based index of the first element of smallest
// magnitude.
func Iamin[T Elem](h *Handle, x Vector[T]) (int, error) {
	return first(index[T](h, "Iamin", reduceIamin, x, 1))
}

// IaminBatched returns Iamin of each entry.
func IaminBatched[T Elem](h *Handle, x []Vector[T]) ([]int, error) {
	return index[T](h, "IaminBatched", reduceIamin, x, len(x))
}

// IaminStridedBatched returns Iamin of each of batch entries.
func IaminStridedBatched[T Elem](h *Handle, x StridedVector[T], batch int) ([]int, error) {
	return index[T](h, "IaminStridedBatched", reduceIamin, x, batch)
}

// IaminTo writes the 1-based index of x's smallest element to result's
// first element, without waiting.
func IaminTo[T Elem](h *Handle, x Vector[T], result Vector[int32]) error {
	return indexTo[T](h, "IaminTo", reduceIamin, x, 1, result)
}

// IaminBatchedTo writes the 1-based index for x[i] to result element i,
// without waiting.
func IaminBatchedTo[T Elem](h *Handle, x []Vector[T], result Vector[int32]) error {
	return indexTo[T](h, "IaminBatchedTo", reduceIamin, x, len(x), result)
}

// IaminStridedBatchedTo writes the 1-based index for x_i to result element
// i for each of batch entries, without waiting.
func IaminStridedBatchedTo[T Elem](h *Handle, x StridedVector[T], batch int, result Vector[int32]) error {
	return indexTo[T](h, "IaminStridedBatchedTo", reduceIamin, x, batch, result)
}
