// The C surface of package rocblas: the generated zrocblas.h, the NVIDIA
// platform (nvidia.c), and the dispatch helpers: one function per BLAS
// operation and form, which picks the typed rocBLAS function (s, d, c, z or
// h) by a type code, so that the generic Go function makes one cgo call.
// Handles, device addresses and host scalars come as integers: they are
// never Go memory, and integers cost cgo no pointer check.
#ifndef RG_ROCBLAS_HELPERS_H
#define RG_ROCBLAS_HELPERS_H

#include <stdint.h>

#include "zrocblas.h"

// The NVIDIA platform (nvidia.c): rg_rocblas_install_nvidia fills the table
// with the translations to cuBLAS; the status translation is exposed for
// the tests.
void rg_rocblas_install_nvidia(void* cublas, void* cudart);
int rg_rocblas_nvidia_status(int cublas_status);

// Type codes, as package rocblas's kind of an element type.
enum { RG_S = 0, RG_D = 1, RG_C = 2, RG_Z = 3, RG_H = 4 };

#define RG_H_(h) ((rocblas_handle)(h))
#define RG_P(p) ((void*)(p))

// RG_SDCZ returns the call of the function for type code t; every pointer
// argument is a void*, which C converts to the function's typed pointer.
// It expands its arguments first, so that RG_NAMES can supply the four
// function names.
#define RG_SDCZ(...) RG_SDCZ_(__VA_ARGS__)
#define RG_SDCZ_(t, s, d, c, z, ...)         \
	switch (t) {                             \
	case RG_S: return s(__VA_ARGS__);        \
	case RG_D: return d(__VA_ARGS__);        \
	case RG_C: return c(__VA_ARGS__);        \
	case RG_Z: return z(__VA_ARGS__);        \
	}                                        \
	return rocblas_status_invalid_value

#define RG_SDCZH(...) RG_SDCZH_(__VA_ARGS__)
#define RG_SDCZH_(t, s, d, c, z, hh, ...)    \
	if (t == RG_H) return hh(__VA_ARGS__);   \
	RG_SDCZ_(t, s, d, c, z, __VA_ARGS__)

// RG_NAMES names the four typed functions of one form: p is empty (plain),
// _batched (arrays of device pointers) or _strided_batched.
#define RG_NAMES(p, s, d, c, z) rg_rocblas_##s##p##_on, rg_rocblas_##d##p##_on, rg_rocblas_##c##p##_on, rg_rocblas_##z##p##_on

// ---- Level 1 ----

#define RG_L1_AXPY(p, ...) RG_SDCZ(t, RG_NAMES(p, saxpy, daxpy, caxpy, zaxpy), __VA_ARGS__)
static inline rocblas_status rg_axpy(int dev, uintptr_t h, int t, int n, uintptr_t alpha, uintptr_t x, int incx, uintptr_t y, int incy) {
	RG_L1_AXPY(, dev, RG_H_(h), n, RG_P(alpha), RG_P(x), incx, RG_P(y), incy);
}
static inline rocblas_status rg_axpy_batched(int dev, uintptr_t h, int t, int n, uintptr_t alpha, uintptr_t x, int incx, uintptr_t y, int incy, int batch) {
	RG_L1_AXPY(_batched, dev, RG_H_(h), n, RG_P(alpha), RG_P(x), incx, RG_P(y), incy, batch);
}
static inline rocblas_status rg_axpy_strided(int dev, uintptr_t h, int t, int n, uintptr_t alpha, uintptr_t x, int incx, int64_t sx, uintptr_t y, int incy, int64_t sy, int batch) {
	RG_L1_AXPY(_strided_batched, dev, RG_H_(h), n, RG_P(alpha), RG_P(x), incx, sx, RG_P(y), incy, sy, batch);
}

// dot: conj selects dotc for complex types (for real ones there is one dot).
#define RG_L1_DOT(p, ...)                                                                                   \
	if (conj) {                                                                                            \
		RG_SDCZ(t, RG_NAMES(p, sdot, ddot, cdotc, zdotc), __VA_ARGS__);                                    \
	}                                                                                                      \
	RG_SDCZ(t, RG_NAMES(p, sdot, ddot, cdotu, zdotu), __VA_ARGS__)
static inline rocblas_status rg_dot(int dev, uintptr_t h, int t, int conj, int n, uintptr_t x, int incx, uintptr_t y, int incy, uintptr_t res) {
	RG_L1_DOT(, dev, RG_H_(h), n, RG_P(x), incx, RG_P(y), incy, RG_P(res));
}
static inline rocblas_status rg_dot_batched(int dev, uintptr_t h, int t, int conj, int n, uintptr_t x, int incx, uintptr_t y, int incy, int batch, uintptr_t res) {
	RG_L1_DOT(_batched, dev, RG_H_(h), n, RG_P(x), incx, RG_P(y), incy, batch, RG_P(res));
}
static inline rocblas_status rg_dot_strided(int dev, uintptr_t h, int t, int conj, int n, uintptr_t x, int incx, int64_t sx, uintptr_t y, int incy, int64_t sy, int batch, uintptr_t res) {
	RG_L1_DOT(_strided_batched, dev, RG_H_(h), n, RG_P(x), incx, sx, RG_P(y), incy, sy, batch, RG_P(res));
}

// The reductions over one vector: nrm2, asum, iamax, iamin (which), all
// with the same arguments.
enum { RG_NRM2 = 0, RG_ASUM = 1, RG_IAMAX = 2, RG_IAMIN = 3 };
#define RG_L1_REDUCE(p, ...)                                                                                        \
	switch (which) {                                                                                               \
	case RG_NRM2: { RG_SDCZ(t, RG_NAMES(p, snrm2, dnrm2, scnrm2, dznrm2), __VA_ARGS__); }                          \
	case RG_ASUM: { RG_SDCZ(t, RG_NAMES(p, sasum, dasum, scasum, dzasum), __VA_ARGS__); }                          \
	case RG_IAMAX: { RG_SDCZ(t, RG_NAMES(p, isamax, idamax, icamax, izamax), __VA_ARGS__); }                       \
	case RG_IAMIN: { RG_SDCZ(t, RG_NAMES(p, isamin, idamin, icamin, izamin), __VA_ARGS__); }                       \
	}                                                                                                              \
	return rocblas_status_invalid_value
static inline rocblas_status rg_reduce(int dev, uintptr_t h, int t, int which, int n, uintptr_t x, int incx, uintptr_t res) {
	RG_L1_REDUCE(, dev, RG_H_(h), n, RG_P(x), incx, RG_P(res));
}
static inline rocblas_status rg_reduce_batched(int dev, uintptr_t h, int t, int which, int n, uintptr_t x, int incx, int batch, uintptr_t res) {
	RG_L1_REDUCE(_batched, dev, RG_H_(h), n, RG_P(x), incx, batch, RG_P(res));
}
static inline rocblas_status rg_reduce_strided(int dev, uintptr_t h, int t, int which, int n, uintptr_t x, int incx, int64_t sx, int batch, uintptr_t res) {
	RG_L1_REDUCE(_strided_batched, dev, RG_H_(h), n, RG_P(x), incx, sx, batch, RG_P(res));
}

#define RG_L1_SCAL(p, ...) RG_SDCZ(t, RG_NAMES(p, sscal, dscal, cscal, zscal), __VA_ARGS__)
static inline rocblas_status rg_scal(int dev, uintptr_t h, int t, int n, uintptr_t alpha, uintptr_t x, int incx) {
	RG_L1_SCAL(, dev, RG_H_(h), n, RG_P(alpha), RG_P(x), incx);
}
static inline rocblas_status rg_scal_batched(int dev, uintptr_t h, int t, int n, uintptr_t alpha, uintptr_t x, int incx, int batch) {
	RG_L1_SCAL(_batched, dev, RG_H_(h), n, RG_P(alpha), RG_P(x), incx, batch);
}
static inline rocblas_status rg_scal_strided(int dev, uintptr_t h, int t, int n, uintptr_t alpha, uintptr_t x, int incx, int64_t sx, int batch) {
	RG_L1_SCAL(_strided_batched, dev, RG_H_(h), n, RG_P(alpha), RG_P(x), incx, sx, batch);
}

// copy and swap (swap != 0) take the same arguments.
#define RG_L1_COPY(p, ...)                                                                  \
	if (swap) {                                                                            \
		RG_SDCZ(t, RG_NAMES(p, sswap, dswap, cswap, zswap), __VA_ARGS__);                  \
	}                                                                                      \
	RG_SDCZ(t, RG_NAMES(p, scopy, dcopy, ccopy, zcopy), __VA_ARGS__)
static inline rocblas_status rg_copy(int dev, uintptr_t h, int t, int swap, int n, uintptr_t x, int incx, uintptr_t y, int incy) {
	RG_L1_COPY(, dev, RG_H_(h), n, RG_P(x), incx, RG_P(y), incy);
}
static inline rocblas_status rg_copy_batched(int dev, uintptr_t h, int t, int swap, int n, uintptr_t x, int incx, uintptr_t y, int incy, int batch) {
	RG_L1_COPY(_batched, dev, RG_H_(h), n, RG_P(x), incx, RG_P(y), incy, batch);
}
static inline rocblas_status rg_copy_strided(int dev, uintptr_t h, int t, int swap, int n, uintptr_t x, int incx, int64_t sx, uintptr_t y, int incy, int64_t sy, int batch) {
	RG_L1_COPY(_strided_batched, dev, RG_H_(h), n, RG_P(x), incx, sx, RG_P(y), incy, sy, batch);
}

#define RG_L1_ROT(p, ...) RG_SDCZ(t, RG_NAMES(p, srot, drot, crot, zrot), __VA_ARGS__)
static inline rocblas_status rg_rot(int dev, uintptr_t h, int t, int n, uintptr_t x, int incx, uintptr_t y, int incy, uintptr_t c, uintptr_t s) {
	RG_L1_ROT(, dev, RG_H_(h), n, RG_P(x), incx, RG_P(y), incy, RG_P(c), RG_P(s));
}
static inline rocblas_status rg_rot_batched(int dev, uintptr_t h, int t, int n, uintptr_t x, int incx, uintptr_t y, int incy, uintptr_t c, uintptr_t s, int batch) {
	RG_L1_ROT(_batched, dev, RG_H_(h), n, RG_P(x), incx, RG_P(y), incy, RG_P(c), RG_P(s), batch);
}
static inline rocblas_status rg_rot_strided(int dev, uintptr_t h, int t, int n, uintptr_t x, int incx, int64_t sx, uintptr_t y, int incy, int64_t sy, uintptr_t c, uintptr_t s, int batch) {
	RG_L1_ROT(_strided_batched, dev, RG_H_(h), n, RG_P(x), incx, sx, RG_P(y), incy, sy, RG_P(c), RG_P(s), batch);
}

// ---- Level 2 ----

#define RG_L2_GEMV(p, ...) RG_SDCZ(t, RG_NAMES(p, sgemv, dgemv, cgemv, zgemv), __VA_ARGS__)
static inline rocblas_status rg_gemv(int dev, uintptr_t h, int t, int trans, int m, int n, uintptr_t alpha, uintptr_t a, int lda, uintptr_t x, int incx, uintptr_t beta, uintptr_t y, int incy) {
	RG_L2_GEMV(, dev, RG_H_(h), trans, m, n, RG_P(alpha), RG_P(a), lda, RG_P(x), incx, RG_P(beta), RG_P(y), incy);
}
static inline rocblas_status rg_gemv_batched(int dev, uintptr_t h, int t, int trans, int m, int n, uintptr_t alpha, uintptr_t a, int lda, uintptr_t x, int incx, uintptr_t beta, uintptr_t y, int incy, int batch) {
	RG_L2_GEMV(_batched, dev, RG_H_(h), trans, m, n, RG_P(alpha), RG_P(a), lda, RG_P(x), incx, RG_P(beta), RG_P(y), incy, batch);
}
static inline rocblas_status rg_gemv_strided(int dev, uintptr_t h, int t, int trans, int m, int n, uintptr_t alpha, uintptr_t a, int lda, int64_t sa, uintptr_t x, int incx, int64_t sx, uintptr_t beta, uintptr_t y, int incy, int64_t sy, int batch) {
	RG_L2_GEMV(_strided_batched, dev, RG_H_(h), trans, m, n, RG_P(alpha), RG_P(a), lda, sa, RG_P(x), incx, sx, RG_P(beta), RG_P(y), incy, sy, batch);
}

// ger: conj selects gerc for complex types (geru otherwise).
static inline rocblas_status rg_ger(int dev, uintptr_t h, int t, int conj, int m, int n, uintptr_t alpha, uintptr_t x, int incx, uintptr_t y, int incy, uintptr_t a, int lda) {
	if (conj) {
		RG_SDCZ(t, rg_rocblas_sger_on, rg_rocblas_dger_on, rg_rocblas_cgerc_on, rg_rocblas_zgerc_on, dev, RG_H_(h), m, n, RG_P(alpha), RG_P(x), incx, RG_P(y), incy, RG_P(a), lda);
	}
	RG_SDCZ(t, rg_rocblas_sger_on, rg_rocblas_dger_on, rg_rocblas_cgeru_on, rg_rocblas_zgeru_on, dev, RG_H_(h), m, n, RG_P(alpha), RG_P(x), incx, RG_P(y), incy, RG_P(a), lda);
}

static inline rocblas_status rg_symv(int dev, uintptr_t h, int t, int uplo, int n, uintptr_t alpha, uintptr_t a, int lda, uintptr_t x, int incx, uintptr_t beta, uintptr_t y, int incy) {
	RG_SDCZ(t, RG_NAMES(, ssymv, dsymv, csymv, zsymv), dev, RG_H_(h), uplo, n, RG_P(alpha), RG_P(a), lda, RG_P(x), incx, RG_P(beta), RG_P(y), incy);
}

// trmv and trsv (solve != 0) take the same arguments.
static inline rocblas_status rg_trmv(int dev, uintptr_t h, int t, int solve, int uplo, int trans, int diag, int n, uintptr_t a, int lda, uintptr_t x, int incx) {
	if (solve) {
		RG_SDCZ(t, RG_NAMES(, strsv, dtrsv, ctrsv, ztrsv), dev, RG_H_(h), uplo, trans, diag, n, RG_P(a), lda, RG_P(x), incx);
	}
	RG_SDCZ(t, RG_NAMES(, strmv, dtrmv, ctrmv, ztrmv), dev, RG_H_(h), uplo, trans, diag, n, RG_P(a), lda, RG_P(x), incx);
}

// ---- Level 3 ----

#define RG_L3_GEMM(p, ...) RG_SDCZH(t, RG_NAMES(p, sgemm, dgemm, cgemm, zgemm), rg_rocblas_hgemm##p##_on, __VA_ARGS__)
static inline rocblas_status rg_gemm(int dev, uintptr_t h, int t, int ta, int tb, int m, int n, int k, uintptr_t alpha, uintptr_t a, int lda, uintptr_t b, int ldb, uintptr_t beta, uintptr_t c, int ldc) {
	RG_L3_GEMM(, dev, RG_H_(h), ta, tb, m, n, k, RG_P(alpha), RG_P(a), lda, RG_P(b), ldb, RG_P(beta), RG_P(c), ldc);
}
static inline rocblas_status rg_gemm_batched(int dev, uintptr_t h, int t, int ta, int tb, int m, int n, int k, uintptr_t alpha, uintptr_t a, int lda, uintptr_t b, int ldb, uintptr_t beta, uintptr_t c, int ldc, int batch) {
	RG_L3_GEMM(_batched, dev, RG_H_(h), ta, tb, m, n, k, RG_P(alpha), RG_P(a), lda, RG_P(b), ldb, RG_P(beta), RG_P(c), ldc, batch);
}
static inline rocblas_status rg_gemm_strided(int dev, uintptr_t h, int t, int ta, int tb, int m, int n, int k, uintptr_t alpha, uintptr_t a, int lda, int64_t sa, uintptr_t b, int ldb, int64_t sb, uintptr_t beta, uintptr_t c, int ldc, int64_t sc, int batch) {
	RG_L3_GEMM(_strided_batched, dev, RG_H_(h), ta, tb, m, n, k, RG_P(alpha), RG_P(a), lda, sa, RG_P(b), ldb, sb, RG_P(beta), RG_P(c), ldc, sc, batch);
}

static inline rocblas_status rg_gemm_ex(int dev, uintptr_t h, int ta, int tb, int m, int n, int k, uintptr_t alpha, uintptr_t a, int at, int lda, uintptr_t b, int bt, int ldb, uintptr_t beta, uintptr_t c, int ct, int ldc, uintptr_t d, int dt, int ldd, int compute, int algo, int32_t solution, uint32_t flags) {
	return rg_rocblas_gemm_ex_on(dev, RG_H_(h), ta, tb, m, n, k, RG_P(alpha), RG_P(a), at, lda, RG_P(b), bt, ldb, RG_P(beta), RG_P(c), ct, ldc, RG_P(d), dt, ldd, compute, algo, solution, flags);
}
static inline rocblas_status rg_gemm_strided_ex(int dev, uintptr_t h, int ta, int tb, int m, int n, int k, uintptr_t alpha, uintptr_t a, int at, int lda, int64_t sa, uintptr_t b, int bt, int ldb, int64_t sb, uintptr_t beta, uintptr_t c, int ct, int ldc, int64_t sc, uintptr_t d, int dt, int ldd, int64_t sd, int batch, int compute, int algo, int32_t solution, uint32_t flags) {
	return rg_rocblas_gemm_strided_batched_ex_on(dev, RG_H_(h), ta, tb, m, n, k, RG_P(alpha), RG_P(a), at, lda, sa, RG_P(b), bt, ldb, sb, RG_P(beta), RG_P(c), ct, ldc, sc, RG_P(d), dt, ldd, sd, batch, compute, algo, solution, flags);
}

static inline rocblas_status rg_trsm(int dev, uintptr_t h, int t, int side, int uplo, int trans, int diag, int m, int n, uintptr_t alpha, uintptr_t a, int lda, uintptr_t b, int ldb) {
	RG_SDCZ(t, RG_NAMES(, strsm, dtrsm, ctrsm, ztrsm), dev, RG_H_(h), side, uplo, trans, diag, m, n, RG_P(alpha), RG_P(a), lda, RG_P(b), ldb);
}
static inline rocblas_status rg_trmm(int dev, uintptr_t h, int t, int side, int uplo, int trans, int diag, int m, int n, uintptr_t alpha, uintptr_t a, int lda, uintptr_t b, int ldb, uintptr_t c, int ldc) {
	RG_SDCZ(t, RG_NAMES(, strmm, dtrmm, ctrmm, ztrmm), dev, RG_H_(h), side, uplo, trans, diag, m, n, RG_P(alpha), RG_P(a), lda, RG_P(b), ldb, RG_P(c), ldc);
}
static inline rocblas_status rg_syrk(int dev, uintptr_t h, int t, int uplo, int trans, int n, int k, uintptr_t alpha, uintptr_t a, int lda, uintptr_t beta, uintptr_t c, int ldc) {
	RG_SDCZ(t, RG_NAMES(, ssyrk, dsyrk, csyrk, zsyrk), dev, RG_H_(h), uplo, trans, n, k, RG_P(alpha), RG_P(a), lda, RG_P(beta), RG_P(c), ldc);
}
static inline rocblas_status rg_symm(int dev, uintptr_t h, int t, int side, int uplo, int m, int n, uintptr_t alpha, uintptr_t a, int lda, uintptr_t b, int ldb, uintptr_t beta, uintptr_t c, int ldc) {
	RG_SDCZ(t, RG_NAMES(, ssymm, dsymm, csymm, zsymm), dev, RG_H_(h), side, uplo, m, n, RG_P(alpha), RG_P(a), lda, RG_P(b), ldb, RG_P(beta), RG_P(c), ldc);
}
static inline rocblas_status rg_geam(int dev, uintptr_t h, int t, int ta, int tb, int m, int n, uintptr_t alpha, uintptr_t a, int lda, uintptr_t beta, uintptr_t b, int ldb, uintptr_t c, int ldc) {
	RG_SDCZ(t, RG_NAMES(, sgeam, dgeam, cgeam, zgeam), dev, RG_H_(h), ta, tb, m, n, RG_P(alpha), RG_P(a), lda, RG_P(beta), RG_P(b), ldb, RG_P(c), ldc);
}

#endif
