package rocblas

/*
#include "helpers.h"
*/
import "C"

import (
	"runtime"
)

var (
	gemvNames = typed("gemv")
	geruNames = &cnames{"rocblas_sger", "rocblas_dger", "rocblas_cgeru", "rocblas_zgeru"}
	gercNames = &cnames{"rocblas_sger", "rocblas_dger", "rocblas_cgerc", "rocblas_zgerc"}
	symvNames = typed("symv")
	trmvNames = typed("trmv")
	trsvNames = typed("trsv")
)

// gemv runs y = alpha*op(A)*x + beta*y in any form.
func gemv[T Elem](h *Handle, op string, trans Operation, alpha T, am, x any, beta T, y any, batch int) error {
	a := begin(h, op)
	if a.ok() {
		a.check(checkOp(op, "trans", trans))
	}
	av, f, n := matIn[T](a, "A", am, batch, false)
	xv, _, nx := vecIn[T](a, "x", x, batch, false)
	yv, _, ny := vecIn[T](a, "y", y, batch, true)
	a.sameBatch("x", nx, "A", n)
	a.sameBatch("y", ny, "A", n)
	rows, cols := opDims(trans, av.rows, av.cols)
	a.length("x", xv.n, cols, "the columns of "+opName(trans, "A"))
	a.length("y", yv.n, rows, "the rows of "+opName(trans, "A"))
	if !a.ok() {
		return a.err
	}
	k, _, _ := kind[T]()
	err := h.exec(op, PointerModeHost, fn{gemvNames, k, f}, arrays(f, av, xv, yv), func(p [3]uintptr) C.rocblas_status {
		al, be := scalar(h.mem, 0, alpha), scalar(h.mem, 1, beta)
		A, x, y := av.at(f, p, 0), xv.at(f, p, 1), yv.at(f, p, 2)
		m, n, t := ci(av.rows), ci(av.cols), C.int(trans)
		switch f {
		case plain:
			return C.rg_gemv(h.ord, h.handle(), C.int(k), t, m, n, al, A, ci(av.ld), x, ci(xv.ld), be, y, ci(yv.ld))
		case batched:
			return C.rg_gemv_batched(h.ord, h.handle(), C.int(k), t, m, n, al, A, ci(av.ld), x, ci(xv.ld), be, y, ci(yv.ld), ci(batch))
		}
		return C.rg_gemv_strided(h.ord, h.handle(), C.int(k), t, m, n, al, A, ci(av.ld), C.int64_t(av.stride),
			x, ci(xv.ld), C.int64_t(xv.stride), be, y, ci(yv.ld), C.int64_t(yv.stride), ci(batch))
	})
	runtime.KeepAlive(am)
	runtime.KeepAlive(x)
	runtime.KeepAlive(y)
	return err
}

// Gemv computes y = alpha*op(A)*x + beta*y, where op(A) is A, Aᵀ or Aᴴ
// (trans). When beta is 0, y is not read.
func Gemv[T Elem](h *Handle, trans Operation, alpha T, a Matrix[T], x Vector[T], beta T, y Vector[T]) error {
	return gemv(h, "Gemv", trans, alpha, a, x, beta, y, 1)
}

// GemvBatched computes y[i] = alpha*op(A[i])*x[i] + beta*y[i] for each
// entry.
func GemvBatched[T Elem](h *Handle, trans Operation, alpha T, a []Matrix[T], x []Vector[T], beta T, y []Vector[T]) error {
	return gemv(h, "GemvBatched", trans, alpha, a, x, beta, y, len(a))
}

// GemvStridedBatched computes y_i = alpha*op(A_i)*x_i + beta*y_i for each of
// batch entries.
func GemvStridedBatched[T Elem](h *Handle, trans Operation, alpha T, a StridedMatrix[T], x StridedVector[T], beta T, y StridedVector[T], batch int) error {
	return gemv(h, "GemvStridedBatched", trans, alpha, a, x, beta, y, batch)
}

// ger runs A = alpha*x*op(y) + A, with op conjugation for gerc.
func ger[T Elem](h *Handle, op string, conj bool, alpha T, x, y Vector[T], am Matrix[T]) error {
	a := begin(h, op)
	xv, yv, av := vecOf(a, "x", x), vecOf(a, "y", y), matOf(a, "A", am)
	a.length("x", xv.n, av.rows, "the rows of A")
	a.length("y", yv.n, av.cols, "the columns of A")
	if !a.ok() {
		return a.err
	}
	k, _, _ := kind[T]()
	names, cj := geruNames, C.int(0)
	if conj {
		names, cj = gercNames, 1
	}
	err := h.exec(op, PointerModeHost, fn{names, k, plain}, nil, func([3]uintptr) C.rocblas_status {
		return C.rg_ger(h.ord, h.handle(), C.int(k), cj, ci(av.rows), ci(av.cols), scalar(h.mem, 0, alpha),
			C.uintptr_t(xv.addr), ci(xv.ld), C.uintptr_t(yv.addr), ci(yv.ld), C.uintptr_t(av.addr), ci(av.ld))
	})
	keep(x.Buf, y.Buf, am.Buf)
	return err
}

// Ger computes the rank-1 update A = alpha*x*yᵀ + A (geru for complex
// vectors).
func Ger[T Elem](h *Handle, alpha T, x, y Vector[T], a Matrix[T]) error {
	return ger(h, "Ger", false, alpha, x, y, a)
}

// Gerc computes A = alpha*x*yᴴ + A; for real vectors it is Ger.
func Gerc[T Elem](h *Handle, alpha T, x, y Vector[T], a Matrix[T]) error {
	return ger(h, "Gerc", true, alpha, x, y, a)
}

// Symv computes y = alpha*A*x + beta*y for a symmetric n×n A, of which
// only the uplo triangle is read.
func Symv[T Elem](h *Handle, uplo Fill, alpha T, a Matrix[T], x Vector[T], beta T, y Vector[T]) error {
	const op = "Symv"
	ar := begin(h, op)
	if ar.ok() {
		ar.check(checkFill(op, uplo))
	}
	av, xv, yv := matOf(ar, "A", a), vecOf(ar, "x", x), vecOf(ar, "y", y)
	if ar.ok() {
		ar.check(square(op, "A", a, a.Rows, "symmetry"))
	}
	ar.length("x", xv.n, av.rows, "the order of A")
	ar.length("y", yv.n, av.rows, "the order of A")
	if !ar.ok() {
		return ar.err
	}
	k, _, _ := kind[T]()
	err := h.exec(op, PointerModeHost, fn{symvNames, k, plain}, nil, func([3]uintptr) C.rocblas_status {
		return C.rg_symv(h.ord, h.handle(), C.int(k), C.int(uplo), ci(av.rows), scalar(h.mem, 0, alpha), C.uintptr_t(av.addr), ci(av.ld),
			C.uintptr_t(xv.addr), ci(xv.ld), scalar(h.mem, 1, beta), C.uintptr_t(yv.addr), ci(yv.ld))
	})
	keep(a.Buf, x.Buf, y.Buf)
	return err
}

// triangular runs trmv (x = op(A)*x) or trsv (solve op(A)*x = b, x holding
// b on entry).
func triangular[T Elem](h *Handle, op string, solve bool, uplo Fill, trans Operation, diag Diagonal, a Matrix[T], x Vector[T]) error {
	ar := begin(h, op)
	if ar.ok() {
		ar.check(checkFill(op, uplo))
	}
	if ar.ok() {
		ar.check(checkOp(op, "trans", trans))
	}
	if ar.ok() {
		ar.check(checkDiag(op, diag))
	}
	av, xv := matOf(ar, "A", a), vecOf(ar, "x", x)
	if ar.ok() {
		ar.check(square(op, "A", a, a.Rows, "a triangular matrix"))
	}
	ar.length("x", xv.n, av.rows, "the order of A")
	if !ar.ok() {
		return ar.err
	}
	k, _, _ := kind[T]()
	names, sv := trmvNames, C.int(0)
	if solve {
		names, sv = trsvNames, 1
	}
	err := h.exec(op, PointerModeHost, fn{names, k, plain}, nil, func([3]uintptr) C.rocblas_status {
		return C.rg_trmv(h.ord, h.handle(), C.int(k), sv, C.int(uplo), C.int(trans), C.int(diag), ci(av.rows),
			C.uintptr_t(av.addr), ci(av.ld), C.uintptr_t(xv.addr), ci(xv.ld))
	})
	keep(a.Buf, x.Buf, nil)
	return err
}

// Trmv computes x = op(A)*x for a triangular n×n A: only its uplo
// triangle is read, and with DiagonalUnit its diagonal is taken as ones.
func Trmv[T Elem](h *Handle, uplo Fill, trans Operation, diag Diagonal, a Matrix[T], x Vector[T]) error {
	return triangular(h, "Trmv", false, uplo, trans, diag, a, x)
}

// Trsv solves op(A)*x = b for a triangular n×n A; x holds b on entry and
// the solution on return. It does not check for singularity.
func Trsv[T Elem](h *Handle, uplo Fill, trans Operation, diag Diagonal, a Matrix[T], x Vector[T]) error {
	return triangular(h, "Trsv", true, uplo, trans, diag, a, x)
}
