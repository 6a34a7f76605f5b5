package rocblas

/*
#cgo nocallback rg_gemm
#cgo nocallback rg_gemm_strided
#cgo nocallback rg_gemm_ex
#cgo nocallback rg_gemm_strided_ex
#include "helpers.h"
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
)

var (
	gemmNames = typed("gemm")
	trsmNames = typed("trsm")
	trmmNames = typed("trmm")
	syrkNames = typed("syrk")
	symmNames = typed("symm")
	geamNames = typed("geam")
	exNames   = &cnames{"rocblas_gemm_ex", "rocblas_gemm_strided_batched_ex"}
)

// gemmShape checks op(A) (m×k), op(B) (k×n) and C (m×n) against each other
// and returns m, n and k.
func gemmShape(a *args, ta, tb Operation, av, bv, cv mat) (m, n, k int) {
	if a.ok() {
		a.check(checkOp(a.op, "transA", ta))
	}
	if a.ok() {
		a.check(checkOp(a.op, "transB", tb))
	}
	if !a.ok() {
		return
	}
	m, n = cv.rows, cv.cols
	ar, ac := opDims(ta, av.rows, av.cols)
	br, bc := opDims(tb, bv.rows, bv.cols)
	switch {
	case ar != m:
		a.check(invalidSize(a.op, "%s is %d×%d, but C has %d rows", opName(ta, "A"), ar, ac, m))
	case bc != n:
		a.check(invalidSize(a.op, "%s is %d×%d, but C has %d columns", opName(tb, "B"), br, bc, n))
	case ac != br:
		a.check(invalidSize(a.op, "%s is %d×%d and %s is %d×%d: the inner dimensions differ", opName(ta, "A"), ar, ac, opName(tb, "B"), br, bc))
	}
	return m, n, ac
}

// gemm runs C = alpha*op(A)*op(B) + beta*C on checked operands.
func gemm[T GemmElem](h *Handle, op string, f form, ta, tb Operation, alpha T, av, bv mat, beta T, cv mat, m, n, k, batch int) error {
	kd, _, _ := kind[T]()
	return h.exec(op, PointerModeHost, fn{gemmNames, kd, f}, arrays(f, av, bv, cv), func(p [3]uintptr) C.rocblas_status {
		al, be := scalar(h.mem, 0, alpha), scalar(h.mem, 1, beta)
		A, B, Cm := av.at(f, p, 0), bv.at(f, p, 1), cv.at(f, p, 2)
		switch f {
		case plain:
			return C.rg_gemm(h.ord, h.handle(), C.int(kd), C.int(ta), C.int(tb), ci(m), ci(n), ci(k), al, A, ci(av.ld), B, ci(bv.ld), be, Cm, ci(cv.ld))
		case batched:
			return C.rg_gemm_batched(h.ord, h.handle(), C.int(kd), C.int(ta), C.int(tb), ci(m), ci(n), ci(k), al, A, ci(av.ld), B, ci(bv.ld), be, Cm, ci(cv.ld), ci(batch))
		}
		return C.rg_gemm_strided(h.ord, h.handle(), C.int(kd), C.int(ta), C.int(tb), ci(m), ci(n), ci(k), al,
			A, ci(av.ld), C.int64_t(av.stride), B, ci(bv.ld), C.int64_t(bv.stride), be, Cm, ci(cv.ld), C.int64_t(cv.stride), ci(batch))
	})
}

// Gemm computes C = alpha*op(A)*op(B) + beta*C, where op(X) is X, Xᵀ or Xᴴ
// (transA, transB): op(A) is m×k, op(B) k×n and C m×n. When beta is 0, C is
// not read. T may be hip.Half (rocblas_hgemm, which computes in half
// precision: see GemmEx for float32 accumulation).
//
// Gemm is the hottest call: it checks its arguments and calls rocBLAS
// without the general machinery of the other functions (and allocates
// nothing).
func Gemm[T GemmElem](h *Handle, transA, transB Operation, alpha T, a, b Matrix[T], beta T, c Matrix[T]) error {
	const op = "Gemm"
	dev, err := h.device(op)
	if err != nil {
		return err
	}
	pa, err := checkMatrix(op, "A", dev, a)
	if err != nil {
		return err
	}
	pb, err := checkMatrix(op, "B", dev, b)
	if err != nil {
		return err
	}
	pc, err := checkMatrix(op, "C", dev, c)
	if err != nil {
		return err
	}
	ar := args{op: op, dev: dev}
	m, n, k := gemmShape(&ar, transA, transB, mat{rows: a.Rows, cols: a.Cols}, mat{rows: b.Rows, cols: b.Cols}, mat{rows: c.Rows, cols: c.Cols})
	if ar.err != nil {
		return ar.err
	}
	if err := h.lock(op); err != nil {
		return err
	}
	st := C.rocblas_status(StatusSuccess)
	if h.libMode != PointerModeHost {
		err = h.mode(PointerModeHost)
	}
	if err == nil {
		kd, _, _ := kind[T]()
		st = C.rg_gemm(h.ord, h.handle(), C.int(kd), C.int(transA), C.int(transB), ci(m), ci(n), ci(k),
			scalar(h.mem, 0, alpha), C.uintptr_t(pa.addr), ci(pa.ld), C.uintptr_t(pb.addr), ci(pb.ld),
			scalar(h.mem, 1, beta), C.uintptr_t(pc.addr), ci(pc.ld))
	}
	h.mu.Unlock()
	keep(a.Buf, b.Buf, c.Buf)
	if err != nil {
		return err
	}
	if st != 0 {
		kd, _, _ := kind[T]()
		return statusError(gemmNames[kd], Status(st))
	}
	return nil
}

// GemmBatched computes C[i] = alpha*op(A[i])*op(B[i]) + beta*C[i] for each
// entry; the entries of each slice have one shape.
func GemmBatched[T GemmElem](h *Handle, transA, transB Operation, alpha T, a, b []Matrix[T], beta T, c []Matrix[T]) error {
	ar := begin(h, "GemmBatched")
	av, bv, cv := matsOf(ar, "A", a), matsOf(ar, "B", b), matsOf(ar, "C", c)
	ar.sameBatch("B", len(b), "A", len(a))
	ar.sameBatch("C", len(c), "A", len(a))
	m, n, k := gemmShape(ar, transA, transB, av, bv, cv)
	if !ar.ok() {
		return ar.err
	}
	err := gemm(h, ar.op, batched, transA, transB, alpha, av, bv, beta, cv, m, n, k, len(a))
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	runtime.KeepAlive(c)
	return err
}

// GemmStridedBatched computes C_i = alpha*op(A_i)*op(B_i) + beta*C_i for each
// of batch entries.
func GemmStridedBatched[T GemmElem](h *Handle, transA, transB Operation, alpha T, a, b StridedMatrix[T], beta T, c StridedMatrix[T], batch int) error {
	ar := begin(h, "GemmStridedBatched")
	ar.batch(batch)
	av, bv, cv := stridedMatOf(ar, "A", a, batch, false), stridedMatOf(ar, "B", b, batch, false), stridedMatOf(ar, "C", c, batch, true)
	m, n, k := gemmShape(ar, transA, transB, av, bv, cv)
	if !ar.ok() {
		return ar.err
	}
	err := gemm(h, ar.op, stridedBatched, transA, transB, alpha, av, bv, beta, cv, m, n, k, batch)
	keep(a.Buf, b.Buf, c.Buf)
	return err
}

// GemmExOption configures GemmEx and GemmStridedBatchedEx.
type GemmExOption func(*gemmExOptions)

type gemmExOptions struct {
	algo     GemmAlgo
	solution int32
	flags    GemmFlags
}

// WithGemmAlgo picks rocBLAS's algorithm: GemmAlgoSolutionIndex with a
// solution index from rocBLAS's tuning tools. cuBLAS ignores it.
func WithGemmAlgo(algo GemmAlgo, solutionIndex int32) GemmExOption {
	return func(o *gemmExOptions) { o.algo, o.solution = algo, solutionIndex }
}

// WithGemmFlags passes rocblas_gemm_flags (GemmFlagsFp16AltImpl, ...).
// cuBLAS ignores them.
func WithGemmFlags(f GemmFlags) GemmExOption { return func(o *gemmExOptions) { o.flags = f } }

// exTypes checks GemmEx's element types and returns the compute type:
// float32 accumulation for the 16- and 32-bit float types, float64 for
// float64, int32 for int8.
func exTypes[A ExIn, Cx ExOut](ar *args) (ta, tc, compute Datatype) {
	_, ta, na := kind[A]()
	_, tc, nc := kind[Cx]()
	ok := false
	switch ta {
	case DatatypeF16R:
		ok, compute = tc == DatatypeF16R || tc == DatatypeF32R, DatatypeF32R
	case DatatypeBf16R:
		ok, compute = tc == DatatypeBf16R || tc == DatatypeF32R, DatatypeF32R
	case DatatypeF32R:
		ok, compute = tc == DatatypeF32R, DatatypeF32R
	case DatatypeF64R:
		ok, compute = tc == DatatypeF64R, DatatypeF64R
	case DatatypeI8R:
		ok, compute = tc == DatatypeI32R, DatatypeI32R
	}
	if !ok && ar.ok() {
		ar.check(invalid(ar.op, "A and B of %s with C and D of %s: GemmEx takes hip.Half → hip.Half or float32, "+
			"hip.BFloat16 → hip.BFloat16 or float32, float32 → float32, float64 → float64, int8 → int32", na, nc))
	}
	return ta, tc, compute
}

// checkExScalar checks that alpha or beta fits the compute type: int32
// scalars are whole numbers.
func checkExScalar(ar *args, name string, v float64, compute Datatype) {
	if ar.ok() && compute == DatatypeI32R && (v != math.Trunc(v) || v < math.MinInt32 || v > math.MaxInt32) {
		ar.check(invalid(ar.op, "%s %v: int8 products take a whole int32 scalar", name, v))
	}
}

// exScalar stores alpha or beta as the compute type.
func exScalar(m *hostMemory, slot int, v float64, compute Datatype) C.uintptr_t {
	switch compute {
	case DatatypeI32R:
		return scalar(m, slot, int32(v))
	case DatatypeF64R:
		return scalar(m, slot, v)
	}
	return scalar(m, slot, float32(v))
}

// checkD checks GemmEx's D against C: one shape, and the same leading
// dimension when they are the same matrix (rocBLAS's in-place form).
func checkD(ar *args, cv, dv mat) {
	switch {
	case !ar.ok():
	case dv.rows != cv.rows || dv.cols != cv.cols:
		ar.check(invalidSize(ar.op, "D is %d×%d and C %d×%d: they have one shape", dv.rows, dv.cols, cv.rows, cv.cols))
	case cv.addr == dv.addr && cv.ld != dv.ld:
		ar.check(invalidSize(ar.op, "D is C (in place) with ld %d ≠ C's %d", dv.ld, cv.ld))
	}
}

// gemmEx runs D = alpha*op(A)*op(B) + beta*C through rocblas_gemm_ex or its
// strided-batched form on checked operands.
func gemmEx[A ExIn, Cx ExOut](h *Handle, ar *args, f form, ta, tb Operation, alpha float64, av, bv mat, beta float64, cv, dv mat, m, n, k, batch int, opts []GemmExOption) error {
	var o gemmExOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	at, ct, compute := exTypes[A, Cx](ar)
	checkExScalar(ar, "alpha", alpha, compute)
	checkExScalar(ar, "beta", beta, compute)
	if !ar.ok() {
		return ar.err
	}
	kd := 0
	if f == stridedBatched {
		kd = 1
	}
	return h.exec(ar.op, PointerModeHost, fn{exNames, kd, plain}, nil, func([3]uintptr) C.rocblas_status {
		al, be := exScalar(h.mem, 0, alpha, compute), exScalar(h.mem, 1, beta, compute)
		if f == plain {
			return C.rg_gemm_ex(h.ord, h.handle(), C.int(ta), C.int(tb), ci(m), ci(n), ci(k), al,
				C.uintptr_t(av.addr), C.int(at), ci(av.ld), C.uintptr_t(bv.addr), C.int(at), ci(bv.ld), be,
				C.uintptr_t(cv.addr), C.int(ct), ci(cv.ld), C.uintptr_t(dv.addr), C.int(ct), ci(dv.ld),
				C.int(compute), C.int(o.algo), C.int32_t(o.solution), C.uint32_t(o.flags))
		}
		return C.rg_gemm_strided_ex(h.ord, h.handle(), C.int(ta), C.int(tb), ci(m), ci(n), ci(k), al,
			C.uintptr_t(av.addr), C.int(at), ci(av.ld), C.int64_t(av.stride), C.uintptr_t(bv.addr), C.int(at), ci(bv.ld), C.int64_t(bv.stride), be,
			C.uintptr_t(cv.addr), C.int(ct), ci(cv.ld), C.int64_t(cv.stride), C.uintptr_t(dv.addr), C.int(ct), ci(dv.ld), C.int64_t(dv.stride),
			ci(batch), C.int(compute), C.int(o.algo), C.int32_t(o.solution), C.uint32_t(o.flags))
	})
}

// GemmEx computes D = alpha*op(A)*op(B) + beta*C with mixed precision
// (rocblas_gemm_ex): A and B of one input type, C and D of one output type,
// accumulated in float32 (float64 for float64, int32 for int8 inputs):
//
//	A, B          C, D
//	hip.Half      hip.Half or float32
//	hip.BFloat16  hip.BFloat16 or float32
//	float32       float32
//	float64       float64
//	int8          int32 (alpha and beta must be whole numbers)
//
// alpha and beta are converted to the compute type. D may be C itself
// (same buffer, offset and leading dimension) for an in-place update.
// On NVIDIA, a D other than C is filled with a copy of C first (cuBLAS
// updates C in place), on the handle's stream.
func GemmEx[A ExIn, Cx ExOut](h *Handle, transA, transB Operation, alpha float64, a, b Matrix[A], beta float64, c, d Matrix[Cx], opts ...GemmExOption) error {
	ar := begin(h, "GemmEx")
	av, bv, cv, dv := matOf(ar, "A", a), matOf(ar, "B", b), matOf(ar, "C", c), matOf(ar, "D", d)
	m, n, k := gemmShape(ar, transA, transB, av, bv, cv)
	checkD(ar, cv, dv)
	if !ar.ok() {
		return ar.err
	}
	err := gemmEx[A, Cx](h, ar, plain, transA, transB, alpha, av, bv, beta, cv, dv, m, n, k, 1, opts)
	keep(a.Buf, b.Buf, c.Buf)
	runtime.KeepAlive(d.Buf)
	return err
}

// GemmStridedBatchedEx is GemmEx for each of batch entries:
// D_i = alpha*op(A_i)*op(B_i) + beta*C_i.
func GemmStridedBatchedEx[A ExIn, Cx ExOut](h *Handle, transA, transB Operation, alpha float64, a, b StridedMatrix[A], beta float64, c, d StridedMatrix[Cx], batch int, opts ...GemmExOption) error {
	ar := begin(h, "GemmStridedBatchedEx")
	ar.batch(batch)
	av, bv := stridedMatOf(ar, "A", a, batch, false), stridedMatOf(ar, "B", b, batch, false)
	cv, dv := stridedMatOf(ar, "C", c, batch, false), stridedMatOf(ar, "D", d, batch, true)
	m, n, k := gemmShape(ar, transA, transB, av, bv, cv)
	checkD(ar, cv, dv)
	if ar.ok() && cv.addr == dv.addr && cv.stride != dv.stride {
		ar.check(invalidSize(ar.op, "D is C (in place) with stride %d ≠ C's %d", dv.stride, cv.stride))
	}
	if !ar.ok() {
		return ar.err
	}
	err := gemmEx[A, Cx](h, ar, stridedBatched, transA, transB, alpha, av, bv, beta, cv, dv, m, n, k, batch, opts)
	keep(a.Buf, b.Buf, c.Buf)
	runtime.KeepAlive(d.Buf)
	return err
}

// sideOrder is the order of a side's triangular or symmetric matrix for an
// m×n B: m on the left, n on the right.
func sideOrder(side Side, m, n int) int {
	if side == SideLeft {
		return m
	}
	return n
}

// sided checks the side, the fill and the square matrix A of trsm, trmm and
// symm against the m×n B.
func sided[T Elem](ar *args, side Side, uplo Fill, a Matrix[T], bv mat) {
	if ar.ok() {
		ar.check(checkSide(ar.op, side))
	}
	if ar.ok() {
		ar.check(checkFill(ar.op, uplo))
	}
	if ar.ok() {
		ar.check(square(ar.op, "A", a, sideOrder(side, bv.rows, bv.cols), "side "+side.String()+" with B "+dimString(bv)))
	}
}

func dimString(v mat) string { return fmt.Sprintf("%d×%d", v.rows, v.cols) }

// Trsm solves op(A)*X = alpha*B (SideLeft) or X*op(A) = alpha*B (SideRight)
// for a triangular A (m×m or n×n for an m×n B); X overwrites B. With
// DiagonalUnit the diagonal of A is taken as ones.
func Trsm[T Elem](h *Handle, side Side, uplo Fill, transA Operation, diag Diagonal, alpha T, a, b Matrix[T]) error {
	const op = "Trsm"
	ar := begin(h, op)
	av, bv := matOf(ar, "A", a), matOf(ar, "B", b)
	sided(ar, side, uplo, a, bv)
	if ar.ok() {
		ar.check(checkOp(op, "transA", transA))
	}
	if ar.ok() {
		ar.check(checkDiag(op, diag))
	}
	if !ar.ok() {
		return ar.err
	}
	kd, _, _ := kind[T]()
	err := h.exec(op, PointerModeHost, fn{trsmNames, kd, plain}, nil, func([3]uintptr) C.rocblas_status {
		return C.rg_trsm(h.ord, h.handle(), C.int(kd), C.int(side), C.int(uplo), C.int(transA), C.int(diag), ci(bv.rows), ci(bv.cols),
			scalar(h.mem, 0, alpha), C.uintptr_t(av.addr), ci(av.ld), C.uintptr_t(bv.addr), ci(bv.ld))
	})
	keep(a.Buf, b.Buf, nil)
	return err
}

// Trmm computes C = alpha*op(A)*B (SideLeft) or C = alpha*B*op(A)
// (SideRight) for a triangular A. C may be B itself (same buffer, offset
// and leading dimension) for an in-place product.
func Trmm[T Elem](h *Handle, side Side, uplo Fill, transA Operation, diag Diagonal, alpha T, a, b, c Matrix[T]) error {
	const op = "Trmm"
	ar := begin(h, op)
	av, bv, cv := matOf(ar, "A", a), matOf(ar, "B", b), matOf(ar, "C", c)
	sided(ar, side, uplo, a, bv)
	if ar.ok() {
		ar.check(checkOp(op, "transA", transA))
	}
	if ar.ok() {
		ar.check(checkDiag(op, diag))
	}
	switch {
	case !ar.ok():
	case cv.rows != bv.rows || cv.cols != bv.cols:
		ar.check(invalidSize(op, "C is %s and B %s: they have one shape", dimString(cv), dimString(bv)))
	case cv.addr == bv.addr && cv.ld != bv.ld:
		ar.check(invalidSize(op, "C is B (in place) with ld %d ≠ B's %d", cv.ld, bv.ld))
	}
	if !ar.ok() {
		return ar.err
	}
	kd, _, _ := kind[T]()
	err := h.exec(op, PointerModeHost, fn{trmmNames, kd, plain}, nil, func([3]uintptr) C.rocblas_status {
		return C.rg_trmm(h.ord, h.handle(), C.int(kd), C.int(side), C.int(uplo), C.int(transA), C.int(diag), ci(bv.rows), ci(bv.cols),
			scalar(h.mem, 0, alpha), C.uintptr_t(av.addr), ci(av.ld), C.uintptr_t(bv.addr), ci(bv.ld), C.uintptr_t(cv.addr), ci(cv.ld))
	})
	keep(a.Buf, b.Buf, c.Buf)
	return err
}

// Syrk computes the symmetric rank-k update C = alpha*op(A)*op(A)ᵀ + beta*C
// of the uplo triangle of the n×n C, where op(A) is A (n×k, trans None) or
// Aᵀ (A k×n, trans Transpose). For complex matrices trans is None or
// Transpose (ConjugateTranspose would be herk).
func Syrk[T Elem](h *Handle, uplo Fill, trans Operation, alpha T, a Matrix[T], beta T, c Matrix[T]) error {
	const op = "Syrk"
	ar := begin(h, op)
	av, cv := matOf(ar, "A", a), matOf(ar, "C", c)
	if ar.ok() {
		ar.check(checkFill(op, uplo))
	}
	if ar.ok() {
		ar.check(checkOp(op, "trans", trans))
	}
	if kd, _, _ := kind[T](); ar.ok() && trans == OperationConjugateTranspose && (kd == kindC || kd == kindZ) {
		ar.check(invalid(op, "trans ConjugateTranspose with complex matrices: syrk takes None or Transpose"))
	}
	if ar.ok() {
		ar.check(square(op, "C", c, c.Rows, "a symmetric result"))
	}
	n, k := opDims(trans, av.rows, av.cols)
	if ar.ok() && n != cv.rows {
		ar.check(invalidSize(op, "%s is %d×%d, but C is %s", opName(trans, "A"), n, k, dimString(cv)))
	}
	if !ar.ok() {
		return ar.err
	}
	kd, _, _ := kind[T]()
	err := h.exec(op, PointerModeHost, fn{syrkNames, kd, plain}, nil, func([3]uintptr) C.rocblas_status {
		return C.rg_syrk(h.ord, h.handle(), C.int(kd), C.int(uplo), C.int(trans), ci(n), ci(k), scalar(h.mem, 0, alpha),
			C.uintptr_t(av.addr), ci(av.ld), scalar(h.mem, 1, beta), C.uintptr_t(cv.addr), ci(cv.ld))
	})
	keep(a.Buf, c.Buf, nil)
	return err
}

// Symm computes C = alpha*A*B + beta*C (SideLeft) or C = alpha*B*A + beta*C
// (SideRight) for a symmetric A of which only the uplo triangle is read;
// B and C are m×n.
func Symm[T Elem](h *Handle, side Side, uplo Fill, alpha T, a, b Matrix[T], beta T, c Matrix[T]) error {
	const op = "Symm"
	ar := begin(h, op)
	av, bv, cv := matOf(ar, "A", a), matOf(ar, "B", b), matOf(ar, "C", c)
	sided(ar, side, uplo, a, bv)
	if ar.ok() && (cv.rows != bv.rows || cv.cols != bv.cols) {
		ar.check(invalidSize(op, "C is %s and B %s: they have one shape", dimString(cv), dimString(bv)))
	}
	if !ar.ok() {
		return ar.err
	}
	kd, _, _ := kind[T]()
	err := h.exec(op, PointerModeHost, fn{symmNames, kd, plain}, nil, func([3]uintptr) C.rocblas_status {
		return C.rg_symm(h.ord, h.handle(), C.int(kd), C.int(side), C.int(uplo), ci(cv.rows), ci(cv.cols), scalar(h.mem, 0, alpha),
			C.uintptr_t(av.addr), ci(av.ld), C.uintptr_t(bv.addr), ci(bv.ld), scalar(h.mem, 1, beta), C.uintptr_t(cv.addr), ci(cv.ld))
	})
	keep(a.Buf, b.Buf, c.Buf)
	return err
}

// Geam computes C = alpha*op(A) + beta*op(B), all m×n after op. C may be A
// (with transA None and the same leading dimension) or B (likewise) for an
// in-place sum; it may not otherwise overlap them.
func Geam[T Elem](h *Handle, transA, transB Operation, alpha T, a Matrix[T], beta T, b Matrix[T], c Matrix[T]) error {
	const op = "Geam"
	ar := begin(h, op)
	av, bv, cv := matOf(ar, "A", a), matOf(ar, "B", b), matOf(ar, "C", c)
	if ar.ok() {
		ar.check(checkOp(op, "transA", transA))
	}
	if ar.ok() {
		ar.check(checkOp(op, "transB", transB))
	}
	ar1, ac1 := opDims(transA, av.rows, av.cols)
	br1, bc1 := opDims(transB, bv.rows, bv.cols)
	switch {
	case !ar.ok():
	case ar1 != cv.rows || ac1 != cv.cols:
		ar.check(invalidSize(op, "%s is %d×%d, but C is %s", opName(transA, "A"), ar1, ac1, dimString(cv)))
	case br1 != cv.rows || bc1 != cv.cols:
		ar.check(invalidSize(op, "%s is %d×%d, but C is %s", opName(transB, "B"), br1, bc1, dimString(cv)))
	case cv.addr == av.addr && (transA != OperationNone || cv.ld != av.ld):
		ar.check(invalid(op, "C is A: in place, A takes trans None and C's leading dimension"))
	case cv.addr == bv.addr && (transB != OperationNone || cv.ld != bv.ld):
		ar.check(invalid(op, "C is B: in place, B takes trans None and C's leading dimension"))
	}
	if !ar.ok() {
		return ar.err
	}
	kd, _, _ := kind[T]()
	err := h.exec(op, PointerModeHost, fn{geamNames, kd, plain}, nil, func([3]uintptr) C.rocblas_status {
		return C.rg_geam(h.ord, h.handle(), C.int(kd), C.int(transA), C.int(transB), ci(cv.rows), ci(cv.cols),
			scalar(h.mem, 0, alpha), C.uintptr_t(av.addr), ci(av.ld), scalar(h.mem, 1, beta), C.uintptr_t(bv.addr), ci(bv.ld),
			C.uintptr_t(cv.addr), ci(cv.ld))
	})
	keep(a.Buf, b.Buf, c.Buf)
	return err
}
