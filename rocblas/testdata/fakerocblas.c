// A fake rocBLAS (and HIP runtime, fakehip.h) for package rocblas's tier-0
// tests. Every bound function computes its real result with refblas.h on
// host memory, which is the fake's device memory, checks that its handle's
// device is current, and, when ROCM_GO_FAKE_BLAS_LOG names a file, appends
// a line saying what it was called with. Built with -DFAKE_OLD it lacks a
// few functions, as an older rocBLAS would.
#include "fakehip.h"
#include "refblas.h"

typedef int rocblas_status;
enum {
	ST_OK = 0,
	ST_INVALID_HANDLE = 1,
	ST_NOT_IMPLEMENTED = 2,
	ST_INVALID_POINTER = 3,
	ST_INVALID_SIZE = 4,
	ST_INTERNAL = 6,
	ST_INVALID_VALUE = 11,
};

struct handle {
	int device;
	void* stream;
	int pmode, atomics, math;
	void* ws;
	size_t ws_size;
};
typedef struct handle* H;

// ENTER checks the handle and that its device is current, logs the call,
// then clobbers the current device: a caller that relied on a device made
// current by an earlier call would be caught by the next one.
#define ENTER(h, name)                                                                                      \
	if ((h) == NULL) return ST_INVALID_HANDLE;                                                              \
	if (fake_current != (h)->device) {                                                                      \
		note("%s: device %d is current, the handle's is %d", name, fake_current, (h)->device);              \
		return ST_INTERNAL;                                                                                 \
	}                                                                                                       \
	note("%s mode=%d", name, (h)->pmode);                                                                   \
	fake_current = -1

// rocBLAS's enums in refblas.h's terms; -1 for none.
static int tr(int o) { return o == 111 ? REF_N : o == 112 ? REF_T : o == 113 ? REF_C : -1; }
static int fl(int f) { return f == 121 ? REF_UPPER : f == 122 ? REF_LOWER : -1; }
static int dg(int d) { return d == 131 ? REF_NONUNIT : d == 132 ? REF_UNIT : -1; }
static int sd(int s) { return s == 141 ? REF_LEFT : s == 142 ? REF_RIGHT : -1; }

// AT is element i*stride of a typed array.
#define AT(p, i, stride, t) ((char*)(p) + (long)(i) * (long)(stride) * (long)ref_size(t))

// ---- Library, handle and modes ----

const char* rocblas_status_to_string(rocblas_status s) {
	static const char* names[] = {"rocblas_status_success", "rocblas_status_invalid_handle",
	                              "rocblas_status_not_implemented", "rocblas_status_invalid_pointer",
	                              "rocblas_status_invalid_size", "rocblas_status_memory_error",
	                              "rocblas_status_internal_error", "rocblas_status_perf_degraded",
	                              "rocblas_status_size_query_mismatch", "rocblas_status_size_increased",
	                              "rocblas_status_size_unchanged", "rocblas_status_invalid_value",
	                              "rocblas_status_continue", "rocblas_status_check_numerics_fail",
	                              "rocblas_status_excluded_from_build", "rocblas_status_arch_mismatch"};
	return s >= 0 && s < 16 ? names[s] : "<undefined rocblas_status>";
}

static const char fake_version[] = "4.4.1.fake";
rocblas_status rocblas_get_version_string_size(size_t* n) {
	*n = sizeof fake_version;
	return ST_OK;
}
rocblas_status rocblas_get_version_string(char* buf, size_t n) {
	if (n < sizeof fake_version) return ST_INVALID_SIZE;
	memcpy(buf, fake_version, sizeof fake_version);
	return ST_OK;
}

rocblas_status rocblas_create_handle(H* out) {
	if (fake_current < 0) return ST_INTERNAL;
	H h = calloc(1, sizeof *h);
	h->device = fake_current;
	h->atomics = 1;
	*out = h;
	fake_live++;
	note("rocblas_create_handle dev=%d", h->device);
	return ST_OK;
}
rocblas_status rocblas_destroy_handle(H h) {
	ENTER(h, "rocblas_destroy_handle");
	free(h);
	fake_live--;
	return ST_OK;
}
rocblas_status rocblas_set_stream(H h, struct ihipStream_t* s) {
	ENTER(h, "rocblas_set_stream");
	if (s != NULL && s->device != h->device) return ST_INVALID_VALUE;
	h->stream = s;
	return ST_OK;
}
rocblas_status rocblas_set_pointer_mode(H h, int m) {
	ENTER(h, "rocblas_set_pointer_mode");
	if (m != 0 && m != 1) return ST_INVALID_VALUE;
	h->pmode = m;
	return ST_OK;
}
rocblas_status rocblas_get_pointer_mode(H h, int* m) {
	ENTER(h, "rocblas_get_pointer_mode");
	*m = h->pmode;
	return ST_OK;
}
rocblas_status rocblas_set_atomics_mode(H h, int m) {
	ENTER(h, "rocblas_set_atomics_mode");
	h->atomics = m;
	return ST_OK;
}
rocblas_status rocblas_get_atomics_mode(H h, int* m) {
	ENTER(h, "rocblas_get_atomics_mode");
	*m = h->atomics;
	return ST_OK;
}
rocblas_status rocblas_set_math_mode(H h, int m) {
	ENTER(h, "rocblas_set_math_mode");
	h->math = m;
	return ST_OK;
}
#ifndef FAKE_OLD
rocblas_status rocblas_get_math_mode(H h, int* m) {
	ENTER(h, "rocblas_get_math_mode");
	*m = h->math;
	return ST_OK;
}
_Bool rocblas_is_managing_device_memory(H h) { return h != NULL && h->ws == NULL; }
#endif
rocblas_status rocblas_set_workspace(H h, void* addr, size_t size) {
	ENTER(h, "rocblas_set_workspace");
	h->ws = size > 0 ? addr : NULL;
	h->ws_size = h->ws != NULL ? size : 0;
	return ST_OK;
}
// The library's own workspace is 1 MiB here.
rocblas_status rocblas_get_device_memory_size(H h, size_t* n) {
	ENTER(h, "rocblas_get_device_memory_size");
	*n = h->ws != NULL ? h->ws_size : (size_t)1 << 20;
	return ST_OK;
}

// ---- Level 1 ----
// Each macro defines the plain, batched and strided-batched forms; t is
// refblas.h's type code.

#define AXPY(name, t)                                                                                       \
	rocblas_status rocblas_##name(H h, int n, const void* alpha, const void* x, int incx, void* y, int incy) { \
		ENTER(h, "rocblas_" #name);                                                                         \
		ref_axpy(t, n, alpha, x, incx, y, incy);                                                            \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##name##_batched(H h, int n, const void* alpha, void* const* x, int incx,        \
	                                        void* const* y, int incy, int batch) {                          \
		ENTER(h, "rocblas_" #name "_batched");                                                              \
		for (int i = 0; i < batch; i++) ref_axpy(t, n, alpha, x[i], incx, y[i], incy);                     \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##name##_strided_batched(H h, int n, const void* alpha, void* x, int incx, long sx, \
	                                                void* y, int incy, long sy, int batch) {                \
		ENTER(h, "rocblas_" #name "_strided_batched");                                                      \
		for (int i = 0; i < batch; i++) ref_axpy(t, n, alpha, AT(x, i, sx, t), incx, AT(y, i, sy, t), incy); \
		return ST_OK;                                                                                       \
	}
AXPY(saxpy, REF_S)
AXPY(daxpy, REF_D)
AXPY(caxpy, REF_CPLX)
AXPY(zaxpy, REF_Z)

#define DOT(name, t, cj)                                                                                    \
	rocblas_status rocblas_##name(H h, int n, const void* x, int incx, const void* y, int incy, void* r) {  \
		ENTER(h, "rocblas_" #name);                                                                         \
		ref_dot(t, cj, n, x, incx, y, incy, r);                                                             \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##name##_batched(H h, int n, void* const* x, int incx, void* const* y, int incy, \
	                                        int batch, void* r) {                                           \
		ENTER(h, "rocblas_" #name "_batched");                                                              \
		for (int i = 0; i < batch; i++) ref_dot(t, cj, n, x[i], incx, y[i], incy, AT(r, i, 1, t));         \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##name##_strided_batched(H h, int n, void* x, int incx, long sx, void* y,         \
	                                                int incy, long sy, int batch, void* r) {                \
		ENTER(h, "rocblas_" #name "_strided_batched");                                                      \
		for (int i = 0; i < batch; i++)                                                                     \
			ref_dot(t, cj, n, AT(x, i, sx, t), incx, AT(y, i, sy, t), incy, AT(r, i, 1, t));                \
		return ST_OK;                                                                                       \
	}
DOT(sdot, REF_S, 0)
DOT(ddot, REF_D, 0)
DOT(cdotu, REF_CPLX, 0)
DOT(cdotc, REF_CPLX, 1)
DOT(zdotu, REF_Z, 0)
DOT(zdotc, REF_Z, 1)

// The one-vector reductions: kind 0 nrm2, 1 asum, 2 iamax, 3 iamin; rt is
// the result's type code.
static void reduce1(int kind, int t, int n, const void* x, int incx, void* r) {
	switch (kind) {
	case 0: ref_nrm2(t, n, x, incx, r); break;
	case 1: ref_asum(t, n, x, incx, r); break;
	default: ref_iamax(t, kind == 3, n, x, incx, r); break;
	}
}
#define REDUCE(name, t, kind, rt)                                                                           \
	rocblas_status rocblas_##name(H h, int n, const void* x, int incx, void* r) {                           \
		ENTER(h, "rocblas_" #name);                                                                         \
		reduce1(kind, t, n, x, incx, r);                                                                    \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##name##_batched(H h, int n, void* const* x, int incx, int batch, void* r) {     \
		ENTER(h, "rocblas_" #name "_batched");                                                              \
		for (int i = 0; i < batch; i++) reduce1(kind, t, n, x[i], incx, AT(r, i, 1, rt));                   \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##name##_strided_batched(H h, int n, void* x, int incx, long sx, int batch,      \
	                                                void* r) {                                              \
		ENTER(h, "rocblas_" #name "_strided_batched");                                                      \
		for (int i = 0; i < batch; i++) reduce1(kind, t, n, AT(x, i, sx, t), incx, AT(r, i, 1, rt));        \
		return ST_OK;                                                                                       \
	}
REDUCE(snrm2, REF_S, 0, REF_S)
REDUCE(dnrm2, REF_D, 0, REF_D)
REDUCE(scnrm2, REF_CPLX, 0, REF_S)
REDUCE(dznrm2, REF_Z, 0, REF_D)
REDUCE(sasum, REF_S, 1, REF_S)
REDUCE(dasum, REF_D, 1, REF_D)
REDUCE(scasum, REF_CPLX, 1, REF_S)
REDUCE(dzasum, REF_Z, 1, REF_D)
REDUCE(isamax, REF_S, 2, REF_I32)
REDUCE(idamax, REF_D, 2, REF_I32)
REDUCE(icamax, REF_CPLX, 2, REF_I32)
REDUCE(izamax, REF_Z, 2, REF_I32)
REDUCE(isamin, REF_S, 3, REF_I32)
REDUCE(idamin, REF_D, 3, REF_I32)
REDUCE(icamin, REF_CPLX, 3, REF_I32)
REDUCE(izamin, REF_Z, 3, REF_I32)

#define SCAL(name, t)                                                                                       \
	rocblas_status rocblas_##name(H h, int n, const void* alpha, void* x, int incx) {                      \
		ENTER(h, "rocblas_" #name);                                                                         \
		ref_scal(t, n, alpha, x, incx);                                                                     \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##name##_batched(H h, int n, const void* alpha, void* const* x, int incx,        \
	                                        int batch) {                                                    \
		ENTER(h, "rocblas_" #name "_batched");                                                              \
		for (int i = 0; i < batch; i++) ref_scal(t, n, alpha, x[i], incx);                                  \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##name##_strided_batched(H h, int n, const void* alpha, void* x, int incx,       \
	                                                long sx, int batch) {                                   \
		ENTER(h, "rocblas_" #name "_strided_batched");                                                      \
		for (int i = 0; i < batch; i++) ref_scal(t, n, alpha, AT(x, i, sx, t), incx);                       \
		return ST_OK;                                                                                       \
	}
SCAL(sscal, REF_S)
SCAL(dscal, REF_D)
SCAL(cscal, REF_CPLX)
SCAL(zscal, REF_Z)

#define COPY(name, t, swap)                                                                                 \
	rocblas_status rocblas_##name(H h, int n, void* x, int incx, void* y, int incy) {                      \
		ENTER(h, "rocblas_" #name);                                                                         \
		ref_copy(t, swap, n, x, incx, y, incy);                                                             \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##name##_batched(H h, int n, void* const* x, int incx, void* const* y, int incy, \
	                                        int batch) {                                                    \
		ENTER(h, "rocblas_" #name "_batched");                                                              \
		for (int i = 0; i < batch; i++) ref_copy(t, swap, n, x[i], incx, y[i], incy);                       \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##name##_strided_batched(H h, int n, void* x, int incx, long sx, void* y,         \
	                                                int incy, long sy, int batch) {                         \
		ENTER(h, "rocblas_" #name "_strided_batched");                                                      \
		for (int i = 0; i < batch; i++) ref_copy(t, swap, n, AT(x, i, sx, t), incx, AT(y, i, sy, t), incy); \
		return ST_OK;                                                                                       \
	}
COPY(scopy, REF_S, 0)
COPY(dcopy, REF_D, 0)
COPY(ccopy, REF_CPLX, 0)
COPY(zcopy, REF_Z, 0)
COPY(sswap, REF_S, 1)
COPY(dswap, REF_D, 1)
COPY(cswap, REF_CPLX, 1)
COPY(zswap, REF_Z, 1)

#define ROT(name, t)                                                                                        \
	rocblas_status rocblas_##name(H h, int n, void* x, int incx, void* y, int incy, const void* c,          \
	                              const void* s) {                                                          \
		ENTER(h, "rocblas_" #name);                                                                         \
		ref_rot(t, n, x, incx, y, incy, c, s, t);                                                           \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##name##_batched(H h, int n, void* const* x, int incx, void* const* y, int incy, \
	                                        const void* c, const void* s, int batch) {                      \
		ENTER(h, "rocblas_" #name "_batched");                                                              \
		for (int i = 0; i < batch; i++) ref_rot(t, n, x[i], incx, y[i], incy, c, s, t);                     \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##name##_strided_batched(H h, int n, void* x, int incx, long sx, void* y,         \
	                                                int incy, long sy, const void* c, const void* s,        \
	                                                int batch) {                                            \
		ENTER(h, "rocblas_" #name "_strided_batched");                                                      \
		for (int i = 0; i < batch; i++) ref_rot(t, n, AT(x, i, sx, t), incx, AT(y, i, sy, t), incy, c, s, t); \
		return ST_OK;                                                                                       \
	}
ROT(srot, REF_S)
ROT(drot, REF_D)
ROT(crot, REF_CPLX)
ROT(zrot, REF_Z)

// ---- Level 2 ----

#define GEMV(name, t)                                                                                       \
	rocblas_status rocblas_##name(H h, int trans, int m, int n, const void* alpha, const void* a, int lda,  \
	                              const void* x, int incx, const void* beta, void* y, int incy) {           \
		ENTER(h, "rocblas_" #name);                                                                         \
		if (tr(trans) < 0) return ST_INVALID_VALUE;                                                         \
		ref_gemv(t, tr(trans), m, n, alpha, a, lda, x, incx, beta, y, incy);                                \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##name##_batched(H h, int trans, int m, int n, const void* alpha, void* const* a, \
	                                        int lda, void* const* x, int incx, const void* beta,            \
	                                        void* const* y, int incy, int batch) {                          \
		ENTER(h, "rocblas_" #name "_batched");                                                              \
		if (tr(trans) < 0) return ST_INVALID_VALUE;                                                         \
		for (int i = 0; i < batch; i++)                                                                     \
			ref_gemv(t, tr(trans), m, n, alpha, a[i], lda, x[i], incx, beta, y[i], incy);                   \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##name##_strided_batched(H h, int trans, int m, int n, const void* alpha,         \
	                                                void* a, int lda, long sa, void* x, int incx, long sx,  \
	                                                const void* beta, void* y, int incy, long sy,           \
	                                                int batch) {                                            \
		ENTER(h, "rocblas_" #name "_strided_batched");                                                      \
		if (tr(trans) < 0) return ST_INVALID_VALUE;                                                         \
		for (int i = 0; i < batch; i++)                                                                     \
			ref_gemv(t, tr(trans), m, n, alpha, AT(a, i, sa, t), lda, AT(x, i, sx, t), incx, beta,          \
			         AT(y, i, sy, t), incy);                                                                \
		return ST_OK;                                                                                       \
	}
GEMV(sgemv, REF_S)
GEMV(dgemv, REF_D)
GEMV(cgemv, REF_CPLX)
GEMV(zgemv, REF_Z)

#define GER(name, t, cj)                                                                                    \
	rocblas_status rocblas_##name(H h, int m, int n, const void* alpha, const void* x, int incx,           \
	                              const void* y, int incy, void* a, int lda) {                              \
		ENTER(h, "rocblas_" #name);                                                                         \
		ref_ger(t, cj, m, n, alpha, x, incx, y, incy, a, lda);                                              \
		return ST_OK;                                                                                       \
	}
GER(sger, REF_S, 0)
GER(dger, REF_D, 0)
GER(cgeru, REF_CPLX, 0)
GER(cgerc, REF_CPLX, 1)
GER(zgeru, REF_Z, 0)
GER(zgerc, REF_Z, 1)

#define SYMV(name, t)                                                                                       \
	rocblas_status rocblas_##name(H h, int uplo, int n, const void* alpha, const void* a, int lda,          \
	                              const void* x, int incx, const void* beta, void* y, int incy) {           \
		ENTER(h, "rocblas_" #name);                                                                         \
		if (fl(uplo) < 0) return ST_INVALID_VALUE;                                                          \
		ref_symv(t, fl(uplo), n, alpha, a, lda, x, incx, beta, y, incy);                                    \
		return ST_OK;                                                                                       \
	}
SYMV(ssymv, REF_S)
SYMV(dsymv, REF_D)
SYMV(csymv, REF_CPLX)
SYMV(zsymv, REF_Z)

#define TRMV(name, t, fn)                                                                                   \
	rocblas_status rocblas_##name(H h, int uplo, int trans, int diag, int n, const void* a, int lda,        \
	                              void* x, int incx) {                                                      \
		ENTER(h, "rocblas_" #name);                                                                         \
		if (fl(uplo) < 0 || tr(trans) < 0 || dg(diag) < 0) return ST_INVALID_VALUE;                         \
		fn(t, fl(uplo), tr(trans), dg(diag), n, a, lda, x, incx);                                           \
		return ST_OK;                                                                                       \
	}
TRMV(strmv, REF_S, ref_trmv)
TRMV(dtrmv, REF_D, ref_trmv)
TRMV(ctrmv, REF_CPLX, ref_trmv)
TRMV(ztrmv, REF_Z, ref_trmv)
TRMV(strsv, REF_S, ref_trsv)
TRMV(dtrsv, REF_D, ref_trsv)
TRMV(ctrsv, REF_CPLX, ref_trsv)
TRMV(ztrsv, REF_Z, ref_trsv)

// ---- Level 3 ----

#define GEMM(name, t)                                                                                       \
	rocblas_status rocblas_##name(H h, int ta, int tb, int m, int n, int k, const void* alpha, const void* a, \
	                              int lda, const void* b, int ldb, const void* beta, void* c, int ldc) {    \
		ENTER(h, "rocblas_" #name);                                                                         \
		if (tr(ta) < 0 || tr(tb) < 0) return ST_INVALID_VALUE;                                              \
		ref_gemm(t, tr(ta), tr(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);                          \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##name##_batched(H h, int ta, int tb, int m, int n, int k, const void* alpha,     \
	                                        void* const* a, int lda, void* const* b, int ldb,               \
	                                        const void* beta, void* const* c, int ldc, int batch) {         \
		ENTER(h, "rocblas_" #name "_batched");                                                              \
		if (tr(ta) < 0 || tr(tb) < 0) return ST_INVALID_VALUE;                                              \
		for (int i = 0; i < batch; i++)                                                                     \
			ref_gemm(t, tr(ta), tr(tb), m, n, k, alpha, a[i], lda, b[i], ldb, beta, c[i], ldc);             \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##name##_strided_batched(H h, int ta, int tb, int m, int n, int k,                \
	                                                const void* alpha, void* a, int lda, long sa, void* b,  \
	                                                int ldb, long sb, const void* beta, void* c, int ldc,   \
	                                                long sc, int batch) {                                   \
		ENTER(h, "rocblas_" #name "_strided_batched");                                                      \
		if (tr(ta) < 0 || tr(tb) < 0) return ST_INVALID_VALUE;                                              \
		for (int i = 0; i < batch; i++)                                                                     \
			ref_gemm(t, tr(ta), tr(tb), m, n, k, alpha, AT(a, i, sa, t), lda, AT(b, i, sb, t), ldb, beta,   \
			         AT(c, i, sc, t), ldc);                                                                 \
		return ST_OK;                                                                                       \
	}
GEMM(sgemm, REF_S)
GEMM(dgemm, REF_D)
GEMM(cgemm, REF_CPLX)
GEMM(zgemm, REF_Z)
GEMM(hgemm, REF_H)

// gemm_ex: rocBLAS's data types in refblas.h's codes; -1 for the others.
static int dt(int t) {
	switch (t) {
	case 150: return REF_H;
	case 151: return REF_S;
	case 152: return REF_D;
	case 154: return REF_CPLX;
	case 155: return REF_Z;
	case 160: return REF_I8;
	case 162: return REF_I32;
	case 168: return REF_BF;
	}
	return -1;
}

// ex_check checks gemm_ex's types as rocBLAS does and returns the scalars'
// type (the compute type's).
static int ex_check(int at, int bt, int ct, int dtp, int compute, int* ts) {
	if (at != bt || ct != dtp || dt(at) < 0 || dt(ct) < 0 || dt(compute) < 0) return ST_NOT_IMPLEMENTED;
	int ok = (at == 150 && (ct == 150 || ct == 151) && compute == 151) || (at == 168 && (ct == 168 || ct == 151) && compute == 151) ||
	         (at == 151 && ct == 151 && compute == 151) || (at == 160 && ct == 162 && compute == 162) ||
	         (at == 150 && ct == 150 && compute == 150) || (at == 152 && ct == 152 && compute == 152);
	if (!ok) return ST_NOT_IMPLEMENTED;
	*ts = dt(compute);
	return ST_OK;
}

rocblas_status rocblas_gemm_ex(H h, int ta, int tb, int m, int n, int k, const void* alpha, const void* a, int at, int lda,
                               const void* b, int bt, int ldb, const void* beta, const void* c, int ct, int ldc, void* d,
                               int dtp, int ldd, int compute, int algo, int solution, unsigned flags) {
	ENTER(h, "rocblas_gemm_ex");
	note("gemm_ex a=%d c=%d compute=%d algo=%d solution=%d flags=%u inplace=%d", at, ct, compute, algo, solution, flags,
	     c == d);
	int ts;
	rocblas_status st = ex_check(at, bt, ct, dtp, compute, &ts);
	if (st != ST_OK) return st;
	if ((flags & 8) && solution < 0) return ST_INVALID_VALUE;
	if (tr(ta) < 0 || tr(tb) < 0) return ST_INVALID_VALUE;
	if (c == d && ldc != ldd) return ST_INVALID_SIZE;
	ref_gemm_typed(dt(at), dt(ct), ts, tr(ta), tr(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, d, ldd);
	return ST_OK;
}

#ifndef FAKE_OLD
rocblas_status rocblas_gemm_strided_batched_ex(H h, int ta, int tb, int m, int n, int k, const void* alpha, const void* a,
                                               int at, int lda, long sa, const void* b, int bt, int ldb, long sb,
                                               const void* beta, const void* c, int ct, int ldc, long sc, void* d, int dtp,
                                               int ldd, long sdd, int batch, int compute, int algo, int solution,
                                               unsigned flags) {
	ENTER(h, "rocblas_gemm_strided_batched_ex");
	note("gemm_strided_batched_ex a=%d c=%d compute=%d algo=%d solution=%d flags=%u inplace=%d", at, ct, compute, algo,
	     solution, flags, c == d);
	int ts;
	rocblas_status st = ex_check(at, bt, ct, dtp, compute, &ts);
	if (st != ST_OK) return st;
	if ((flags & 8) && solution < 0) return ST_INVALID_VALUE;
	if (tr(ta) < 0 || tr(tb) < 0) return ST_INVALID_VALUE;
	for (int i = 0; i < batch; i++)
		ref_gemm_typed(dt(at), dt(ct), ts, tr(ta), tr(tb), m, n, k, alpha, AT(a, i, sa, dt(at)), lda,
		               AT(b, i, sb, dt(at)), ldb, beta, AT(c, i, sc, dt(ct)), ldc, AT(d, i, sdd, dt(ct)), ldd);
	return ST_OK;
}
#endif

#define LEVEL3(p, t)                                                                                        \
	rocblas_status rocblas_##p##trsm(H h, int side, int uplo, int trans, int diag, int m, int n,            \
	                                 const void* alpha, const void* a, int lda, void* b, int ldb) {         \
		ENTER(h, "rocblas_" #p "trsm");                                                                     \
		if (sd(side) < 0 || fl(uplo) < 0 || tr(trans) < 0 || dg(diag) < 0) return ST_INVALID_VALUE;         \
		ref_trsm(t, sd(side), fl(uplo), tr(trans), dg(diag), m, n, alpha, a, lda, b, ldb);                  \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##p##trmm(H h, int side, int uplo, int trans, int diag, int m, int n,            \
	                                 const void* alpha, const void* a, int lda, const void* b, int ldb,     \
	                                 void* c, int ldc) {                                                    \
		ENTER(h, "rocblas_" #p "trmm");                                                                     \
		if (sd(side) < 0 || fl(uplo) < 0 || tr(trans) < 0 || dg(diag) < 0) return ST_INVALID_VALUE;         \
		ref_trmm(t, sd(side), fl(uplo), tr(trans), dg(diag), m, n, alpha, a, lda, b, ldb, c, ldc);          \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##p##syrk(H h, int uplo, int trans, int n, int k, const void* alpha, const void* a, \
	                                 int lda, const void* beta, void* c, int ldc) {                         \
		ENTER(h, "rocblas_" #p "syrk");                                                                     \
		if (fl(uplo) < 0 || tr(trans) < 0) return ST_INVALID_VALUE;                                         \
		if (ref_cplx(t) && tr(trans) == REF_C) return ST_INVALID_VALUE;                                     \
		ref_syrk(t, fl(uplo), tr(trans), n, k, alpha, a, lda, beta, c, ldc);                                \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##p##symm(H h, int side, int uplo, int m, int n, const void* alpha, const void* a, \
	                                 int lda, const void* b, int ldb, const void* beta, void* c, int ldc) { \
		ENTER(h, "rocblas_" #p "symm");                                                                     \
		if (sd(side) < 0 || fl(uplo) < 0) return ST_INVALID_VALUE;                                          \
		ref_symm(t, sd(side), fl(uplo), m, n, alpha, a, lda, b, ldb, beta, c, ldc);                         \
		return ST_OK;                                                                                       \
	}                                                                                                       \
	rocblas_status rocblas_##p##geam(H h, int ta, int tb, int m, int n, const void* alpha, const void* a,   \
	                                 int lda, const void* beta, const void* b, int ldb, void* c, int ldc) { \
		ENTER(h, "rocblas_" #p "geam");                                                                     \
		if (tr(ta) < 0 || tr(tb) < 0) return ST_INVALID_VALUE;                                              \
		ref_geam(t, tr(ta), tr(tb), m, n, alpha, a, lda, beta, b, ldb, c, ldc);                             \
		return ST_OK;                                                                                       \
	}
LEVEL3(s, REF_S)
LEVEL3(d, REF_D)
LEVEL3(c, REF_CPLX)
LEVEL3(z, REF_Z)
