// A fake cuBLAS, CUDA runtime and CUDA driver in one library, for the tier-0
// tests of package rocblas's NVIDIA translation (nvidia.c). It stands in for
// libcublas.so.13, libcudart.so.13 and libcuda.so.1. Every cuBLAS function
// computes its real result with refblas.h on host memory (the fake device
// memory), checks that its handle's device is current, and, when
// ROCM_GO_FAKE_BLAS_LOG names a file, logs the arguments it received as
// cuBLAS numbers: what the translation made of rocBLAS's.
#include "refblas.h"

static __thread int cur = 0;
static long live;

// ---- CUDA runtime and driver: what package hip's NVIDIA platform and the
// rocBLAS translation call ----

int cudaRuntimeGetVersion(int* v) { *v = 13000; return 0; }
int cudaDriverGetVersion(int* v) { *v = 13000; return 0; }
int cudaGetDeviceCount(int* n) { *n = 1; return 0; }
int cudaSetDevice(int d) {
	if (d != 0) return 101;
	cur = d;
	return 0;
}
int cudaGetDevice(int* d) { *d = cur; return 0; }
const char* cudaGetErrorName(int e) { return e == 0 ? "cudaSuccess" : "cudaErrorFake"; }
const char* cudaGetErrorString(int e) { return e == 0 ? "no error" : "fake error"; }
int cudaDeviceSynchronize(void) { return 0; }
int cudaMemGetInfo(size_t* f, size_t* t) { *t = (size_t)1 << 30; *f = *t - (size_t)live; return 0; }
int cudaMalloc(void** p, size_t n) {
	*p = calloc(1, n);
	live++;
	return *p == NULL ? 2 : 0;
}
int cudaFree(void* p) { free(p); live--; return 0; }
int cudaMallocAsync(void** p, size_t n, void* s) { (void)s; return cudaMalloc(p, n); }
int cudaFreeAsync(void* p, void* s) { (void)s; return cudaFree(p); }
int cudaHostAlloc(void** p, size_t n, unsigned flags) { (void)flags; return cudaMalloc(p, n); }
int cudaFreeHost(void* p) { return cudaFree(p); }
int cudaMemcpy(void* d, const void* s, size_t n, int k) { (void)k; memmove(d, s, n); return 0; }
int cudaMemcpyAsync(void* d, const void* s, size_t n, int k, void* st) {
	(void)st;
	if (k < 0 || k > 4) return 1;
	memmove(d, s, n);
	return 0;
}
int cudaMemcpy2DAsync(void* d, size_t dpitch, const void* s, size_t spitch, size_t w, size_t h, int k, void* st) {
	(void)st;
	if (k != 3 || dpitch < w || spitch < w) return 1;
	note("cudaMemcpy2DAsync dpitch=%zu spitch=%zu width=%zu height=%zu", dpitch, spitch, w, h);
	for (size_t i = 0; i < h; i++) memmove((char*)d + i * dpitch, (const char*)s + i * spitch, w);
	return 0;
}
int cudaMemset(void* d, int v, size_t n) { memset(d, v, n); return 0; }
int cudaMemsetAsync(void* d, int v, size_t n, void* s) { (void)s; memset(d, v, n); return 0; }
struct cstream { int device; };
int cudaStreamCreateWithPriority(struct cstream** s, unsigned flags, int prio) {
	(void)flags, (void)prio;
	*s = calloc(1, sizeof **s);
	live++;
	return 0;
}
int cudaStreamDestroy(void* s) { free(s); live--; return 0; }
int cudaStreamSynchronize(void* s) { (void)s; return 0; }
int cudaStreamQuery(void* s) { (void)s; return 0; }
int cudaEventCreateWithFlags(void** e, unsigned flags) {
	(void)flags;
	*e = calloc(1, 8);
	live++;
	return 0;
}
int cudaEventDestroy(void* e) { free(e); live--; return 0; }
int cudaEventRecord(void* e, void* s) { (void)e, (void)s; return 0; }
int cudaEventSynchronize(void* e) { (void)e; return 0; }
int cudaEventQuery(void* e) { (void)e; return 0; }
int cuInit(unsigned flags) { (void)flags; return 0; }
int cuLaunchKernel(void) { return 1; }
int cuMemsetD32_v2(unsigned long long d, unsigned v, size_t n) {
	for (size_t i = 0; i < n; i++) ((unsigned*)(size_t)d)[i] = v;
	return 0;
}

// ---- cuBLAS ----

enum { OK = 0, NOT_INITIALIZED = 1, INVALID_VALUE = 7, INTERNAL = 14, NOT_SUPPORTED = 15 };

struct handle {
	int device;
	void* stream;
	int pmode, atomics, math;
	void* ws;
	size_t ws_size;
};
typedef struct handle* H;

// ENTER checks the handle and that its device is current. (The fake
// rocBLAS also clobbers the current device after each call, to catch a
// caller that relied on an earlier call's; one translated rocBLAS call
// makes several cuBLAS calls, so this fake cannot.)
#define ENTER(h, name)                                                                                      \
	if ((h) == NULL) return NOT_INITIALIZED;                                                                \
	if (cur != (h)->device) {                                                                               \
		note("%s: device %d is current, the handle's is %d", name, cur, (h)->device);                       \
		return INTERNAL;                                                                                    \
	}

static int bad_op(int o) { return o < 0 || o > 2; }
static int bad01(int v) { return v != 0 && v != 1; }

int cublasCreate_v2(H* out) {
	if (cur < 0) return NOT_INITIALIZED;
	H h = calloc(1, sizeof *h);
	h->device = cur;
	*out = h;
	live++;
	note("cublasCreate_v2");
	return OK;
}
int cublasDestroy_v2(H h) {
	ENTER(h, "cublasDestroy_v2");
	note("cublasDestroy_v2");
	free(h);
	live--;
	return OK;
}
// cublasSetStream resets the workspace to cuBLAS's own, as the real one.
int cublasSetStream_v2(H h, void* s) {
	ENTER(h, "cublasSetStream_v2");
	note("cublasSetStream_v2");
	h->stream = s;
	h->ws = NULL, h->ws_size = 0;
	return OK;
}
int cublasGetStream_v2(H h, void** s) {
	ENTER(h, "cublasGetStream_v2");
	*s = h->stream;
	return OK;
}
int cublasSetPointerMode_v2(H h, int m) {
	ENTER(h, "cublasSetPointerMode_v2");
	if (bad01(m)) return INVALID_VALUE;
	note("cublasSetPointerMode_v2 mode=%d", m);
	h->pmode = m;
	return OK;
}
int cublasGetPointerMode_v2(H h, int* m) {
	ENTER(h, "cublasGetPointerMode_v2");
	*m = h->pmode;
	return OK;
}
int cublasSetAtomicsMode(H h, int m) {
	ENTER(h, "cublasSetAtomicsMode");
	note("cublasSetAtomicsMode mode=%d", m);
	h->atomics = m;
	return OK;
}
int cublasGetAtomicsMode(H h, int* m) {
	ENTER(h, "cublasGetAtomicsMode");
	*m = h->atomics;
	return OK;
}
int cublasSetMathMode(H h, int m) {
	ENTER(h, "cublasSetMathMode");
	note("cublasSetMathMode mode=%d", m);
	h->math = m;
	return OK;
}
int cublasGetMathMode(H h, int* m) {
	ENTER(h, "cublasGetMathMode");
	*m = h->math;
	return OK;
}
int cublasSetWorkspace_v2(H h, void* ws, size_t n) {
	ENTER(h, "cublasSetWorkspace_v2");
	note("cublasSetWorkspace_v2 size=%zu", n);
	h->ws = ws, h->ws_size = n;
	return OK;
}
int cublasGetProperty(int type, int* v) {
	static const int version[] = {13, 1, 0};
	if (type < 0 || type > 2) return INVALID_VALUE;
	*v = version[type];
	return OK;
}

// ---- Level 1 ----

#define AXPY(name, t)                                                                                       \
	int name(H h, int n, const void* alpha, const void* x, int incx, void* y, int incy) {                  \
		ENTER(h, #name);                                                                                    \
		note(#name " n=%d incx=%d incy=%d mode=%d", n, incx, incy, h->pmode);                               \
		ref_axpy(t, n, alpha, x, incx, y, incy);                                                            \
		return OK;                                                                                          \
	}
AXPY(cublasSaxpy_v2, REF_S)
AXPY(cublasDaxpy_v2, REF_D)
AXPY(cublasCaxpy_v2, REF_CPLX)
AXPY(cublasZaxpy_v2, REF_Z)

#define DOT(name, t, cj)                                                                                    \
	int name(H h, int n, const void* x, int incx, const void* y, int incy, void* r) {                      \
		ENTER(h, #name);                                                                                    \
		note(#name " n=%d incx=%d incy=%d mode=%d", n, incx, incy, h->pmode);                               \
		ref_dot(t, cj, n, x, incx, y, incy, r);                                                             \
		return OK;                                                                                          \
	}
DOT(cublasSdot_v2, REF_S, 0)
DOT(cublasDdot_v2, REF_D, 0)
DOT(cublasCdotu_v2, REF_CPLX, 0)
DOT(cublasCdotc_v2, REF_CPLX, 1)
DOT(cublasZdotu_v2, REF_Z, 0)
DOT(cublasZdotc_v2, REF_Z, 1)

#define REDUCE(name, call)                                                                                  \
	int name(H h, int n, const void* x, int incx, void* r) {                                               \
		ENTER(h, #name);                                                                                    \
		note(#name " n=%d incx=%d mode=%d", n, incx, h->pmode);                                             \
		call;                                                                                               \
		return OK;                                                                                          \
	}
REDUCE(cublasSnrm2_v2, ref_nrm2(REF_S, n, x, incx, r))
REDUCE(cublasDnrm2_v2, ref_nrm2(REF_D, n, x, incx, r))
REDUCE(cublasScnrm2_v2, ref_nrm2(REF_CPLX, n, x, incx, r))
REDUCE(cublasDznrm2_v2, ref_nrm2(REF_Z, n, x, incx, r))
REDUCE(cublasSasum_v2, ref_asum(REF_S, n, x, incx, r))
REDUCE(cublasDasum_v2, ref_asum(REF_D, n, x, incx, r))
REDUCE(cublasScasum_v2, ref_asum(REF_CPLX, n, x, incx, r))
REDUCE(cublasDzasum_v2, ref_asum(REF_Z, n, x, incx, r))
REDUCE(cublasIsamax_v2, ref_iamax(REF_S, 0, n, x, incx, r))
REDUCE(cublasIdamax_v2, ref_iamax(REF_D, 0, n, x, incx, r))
REDUCE(cublasIcamax_v2, ref_iamax(REF_CPLX, 0, n, x, incx, r))
REDUCE(cublasIzamax_v2, ref_iamax(REF_Z, 0, n, x, incx, r))
REDUCE(cublasIsamin_v2, ref_iamax(REF_S, 1, n, x, incx, r))
REDUCE(cublasIdamin_v2, ref_iamax(REF_D, 1, n, x, incx, r))
REDUCE(cublasIcamin_v2, ref_iamax(REF_CPLX, 1, n, x, incx, r))
REDUCE(cublasIzamin_v2, ref_iamax(REF_Z, 1, n, x, incx, r))

#define SCAL(name, t)                                                                                       \
	int name(H h, int n, const void* alpha, void* x, int incx) {                                           \
		ENTER(h, #name);                                                                                    \
		note(#name " n=%d incx=%d mode=%d", n, incx, h->pmode);                                             \
		ref_scal(t, n, alpha, x, incx);                                                                     \
		return OK;                                                                                          \
	}
SCAL(cublasSscal_v2, REF_S)
SCAL(cublasDscal_v2, REF_D)
SCAL(cublasCscal_v2, REF_CPLX)
SCAL(cublasZscal_v2, REF_Z)

#define COPY(name, t, swap)                                                                                 \
	int name(H h, int n, void* x, int incx, void* y, int incy) {                                           \
		ENTER(h, #name);                                                                                    \
		note(#name " n=%d incx=%d incy=%d", n, incx, incy);                                                 \
		ref_copy(t, swap, n, x, incx, y, incy);                                                             \
		return OK;                                                                                          \
	}
COPY(cublasScopy_v2, REF_S, 0)
COPY(cublasDcopy_v2, REF_D, 0)
COPY(cublasCcopy_v2, REF_CPLX, 0)
COPY(cublasZcopy_v2, REF_Z, 0)
COPY(cublasSswap_v2, REF_S, 1)
COPY(cublasDswap_v2, REF_D, 1)
COPY(cublasCswap_v2, REF_CPLX, 1)
COPY(cublasZswap_v2, REF_Z, 1)

#define ROT(name, t)                                                                                        \
	int name(H h, int n, void* x, int incx, void* y, int incy, const void* c, const void* s) {             \
		ENTER(h, #name);                                                                                    \
		note(#name " n=%d incx=%d incy=%d", n, incx, incy);                                                 \
		ref_rot(t, n, x, incx, y, incy, c, s, t);                                                           \
		return OK;                                                                                          \
	}
ROT(cublasSrot_v2, REF_S)
ROT(cublasDrot_v2, REF_D)
ROT(cublasCrot_v2, REF_CPLX)
ROT(cublasZrot_v2, REF_Z)

// ---- Level 2 ----

#define GEMV(p, t)                                                                                          \
	int cublas##p##gemv_v2(H h, int trans, int m, int n, const void* alpha, const void* a, int lda,         \
	                       const void* x, int incx, const void* beta, void* y, int incy) {                  \
		ENTER(h, "cublas" #p "gemv_v2");                                                                    \
		if (bad_op(trans)) return INVALID_VALUE;                                                            \
		note("cublas" #p "gemv_v2 trans=%d m=%d n=%d lda=%d", trans, m, n, lda);                            \
		ref_gemv(t, trans, m, n, alpha, a, lda, x, incx, beta, y, incy);                                    \
		return OK;                                                                                          \
	}                                                                                                       \
	int cublas##p##gemvBatched(H h, int trans, int m, int n, const void* alpha, void* const* a, int lda,    \
	                           void* const* x, int incx, const void* beta, void* const* y, int incy,        \
	                           int batch) {                                                                 \
		ENTER(h, "cublas" #p "gemvBatched");                                                                \
		if (bad_op(trans)) return INVALID_VALUE;                                                            \
		note("cublas" #p "gemvBatched trans=%d m=%d n=%d batch=%d", trans, m, n, batch);                    \
		for (int i = 0; i < batch; i++) ref_gemv(t, trans, m, n, alpha, a[i], lda, x[i], incx, beta, y[i], incy); \
		return OK;                                                                                          \
	}                                                                                                       \
	int cublas##p##gemvStridedBatched(H h, int trans, int m, int n, const void* alpha, void* a, int lda,    \
	                                  long long sa, void* x, int incx, long long sx, const void* beta,      \
	                                  void* y, int incy, long long sy, int batch) {                         \
		ENTER(h, "cublas" #p "gemvStridedBatched");                                                         \
		if (bad_op(trans)) return INVALID_VALUE;                                                            \
		note("cublas" #p "gemvStridedBatched trans=%d m=%d n=%d batch=%d", trans, m, n, batch);             \
		for (int i = 0; i < batch; i++)                                                                     \
			ref_gemv(t, trans, m, n, alpha, (char*)a + i * sa * ref_size(t), lda,                           \
			         (char*)x + i * sx * ref_size(t), incx, beta, (char*)y + i * sy * ref_size(t), incy);    \
		return OK;                                                                                          \
	}
GEMV(S, REF_S)
GEMV(D, REF_D)
GEMV(C, REF_CPLX)
GEMV(Z, REF_Z)

#define GER(name, t, cj)                                                                                    \
	int name(H h, int m, int n, const void* alpha, const void* x, int incx, const void* y, int incy,        \
	         void* a, int lda) {                                                                            \
		ENTER(h, #name);                                                                                    \
		note(#name " m=%d n=%d lda=%d", m, n, lda);                                                         \
		ref_ger(t, cj, m, n, alpha, x, incx, y, incy, a, lda);                                              \
		return OK;                                                                                          \
	}
GER(cublasSger_v2, REF_S, 0)
GER(cublasDger_v2, REF_D, 0)
GER(cublasCgeru_v2, REF_CPLX, 0)
GER(cublasCgerc_v2, REF_CPLX, 1)
GER(cublasZgeru_v2, REF_Z, 0)
GER(cublasZgerc_v2, REF_Z, 1)

#define SYMV(name, t)                                                                                       \
	int name(H h, int uplo, int n, const void* alpha, const void* a, int lda, const void* x, int incx,      \
	         const void* beta, void* y, int incy) {                                                         \
		ENTER(h, #name);                                                                                    \
		if (bad01(uplo)) return INVALID_VALUE;                                                              \
		note(#name " uplo=%d n=%d", uplo, n);                                                               \
		ref_symv(t, uplo, n, alpha, a, lda, x, incx, beta, y, incy);                                        \
		return OK;                                                                                          \
	}
SYMV(cublasSsymv_v2, REF_S)
SYMV(cublasDsymv_v2, REF_D)
SYMV(cublasCsymv_v2, REF_CPLX)
SYMV(cublasZsymv_v2, REF_Z)

#define TRMV(name, t, fn)                                                                                   \
	int name(H h, int uplo, int trans, int diag, int n, const void* a, int lda, void* x, int incx) {        \
		ENTER(h, #name);                                                                                    \
		if (bad01(uplo) || bad_op(trans) || bad01(diag)) return INVALID_VALUE;                              \
		note(#name " uplo=%d trans=%d diag=%d n=%d", uplo, trans, diag, n);                                 \
		fn(t, uplo, trans, diag, n, a, lda, x, incx);                                                       \
		return OK;                                                                                          \
	}
TRMV(cublasStrmv_v2, REF_S, ref_trmv)
TRMV(cublasDtrmv_v2, REF_D, ref_trmv)
TRMV(cublasCtrmv_v2, REF_CPLX, ref_trmv)
TRMV(cublasZtrmv_v2, REF_Z, ref_trmv)
TRMV(cublasStrsv_v2, REF_S, ref_trsv)
TRMV(cublasDtrsv_v2, REF_D, ref_trsv)
TRMV(cublasCtrsv_v2, REF_CPLX, ref_trsv)
TRMV(cublasZtrsv_v2, REF_Z, ref_trsv)

// ---- Level 3 ----

#define GEMM(plain, batched, strided, t)                                                                    \
	int plain(H h, int ta, int tb, int m, int n, int k, const void* alpha, const void* a, int lda,          \
	          const void* b, int ldb, const void* beta, void* c, int ldc) {                                 \
		ENTER(h, #plain);                                                                                   \
		if (bad_op(ta) || bad_op(tb)) return INVALID_VALUE;                                                 \
		note(#plain " ta=%d tb=%d m=%d n=%d k=%d lda=%d ldb=%d ldc=%d mode=%d", ta, tb, m, n, k, lda, ldb,  \
		     ldc, h->pmode);                                                                                \
		ref_gemm(t, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);                                  \
		return OK;                                                                                          \
	}                                                                                                       \
	int batched(H h, int ta, int tb, int m, int n, int k, const void* alpha, void* const* a, int lda,       \
	            void* const* b, int ldb, const void* beta, void* const* c, int ldc, int batch) {            \
		ENTER(h, #batched);                                                                                 \
		if (bad_op(ta) || bad_op(tb)) return INVALID_VALUE;                                                 \
		note(#batched " ta=%d tb=%d m=%d n=%d k=%d batch=%d", ta, tb, m, n, k, batch);                      \
		for (int i = 0; i < batch; i++) ref_gemm(t, ta, tb, m, n, k, alpha, a[i], lda, b[i], ldb, beta, c[i], ldc); \
		return OK;                                                                                          \
	}                                                                                                       \
	int strided(H h, int ta, int tb, int m, int n, int k, const void* alpha, void* a, int lda, long long sa,  \
	            void* b, int ldb, long long sb, const void* beta, void* c, int ldc, long long sc, int batch) { \
		ENTER(h, #strided);                                                                                 \
		if (bad_op(ta) || bad_op(tb)) return INVALID_VALUE;                                                 \
		note(#strided " ta=%d tb=%d m=%d n=%d k=%d batch=%d", ta, tb, m, n, k, batch);                      \
		for (int i = 0; i < batch; i++)                                                                     \
			ref_gemm(t, ta, tb, m, n, k, alpha, (char*)a + i * sa * ref_size(t), lda,                       \
			         (char*)b + i * sb * ref_size(t), ldb, beta, (char*)c + i * sc * ref_size(t), ldc);      \
		return OK;                                                                                          \
	}
GEMM(cublasSgemm_v2, cublasSgemmBatched, cublasSgemmStridedBatched, REF_S)
GEMM(cublasDgemm_v2, cublasDgemmBatched, cublasDgemmStridedBatched, REF_D)
GEMM(cublasCgemm_v2, cublasCgemmBatched, cublasCgemmStridedBatched, REF_CPLX)
GEMM(cublasZgemm_v2, cublasZgemmBatched, cublasZgemmStridedBatched, REF_Z)
GEMM(cublasHgemm, cublasHgemmBatched, cublasHgemmStridedBatched, REF_H)

// cudaDataType in refblas.h's codes; -1 for the others.
static int cdt(int t) {
	switch (t) {
	case 2: return REF_H;
	case 0: return REF_S;
	case 1: return REF_D;
	case 4: return REF_CPLX;
	case 5: return REF_Z;
	case 3: return REF_I8;
	case 10: return REF_I32;
	case 14: return REF_BF;
	}
	return -1;
}

// ex_scalar is the type of gemm_ex's alpha and beta for a compute type.
static int ex_scalar(int compute, int ctype) {
	switch (compute) {
	case 64: return REF_H;
	case 68: return cdt(ctype) == REF_CPLX ? REF_CPLX : REF_S;
	case 70: return cdt(ctype) == REF_Z ? REF_Z : REF_D;
	case 72: return REF_I32;
	}
	return -1;
}

// ex_note logs gemm_ex's arguments, alpha and beta read as the compute
// type's: a wrong scalar type shows as a wrong value.
static void ex_note(const char* name, int ta, int tb, int m, int n, int k, int at, int bt, int ct, int ldc, int compute,
                    int algo, int ts, const void* alpha, const void* beta, int batch) {
	note("%s ta=%d tb=%d m=%d n=%d k=%d Atype=%d Btype=%d Ctype=%d ldc=%d compute=%d algo=%d alpha=%g beta=%g batch=%d",
	     name, ta, tb, m, n, k, at, bt, ct, ldc, compute, algo, creal(ref_load(ts, alpha, 0)), creal(ref_load(ts, beta, 0)),
	     batch);
}

int cublasGemmEx(H h, int ta, int tb, int m, int n, int k, const void* alpha, const void* a, int at, int lda,
                 const void* b, int bt, int ldb, const void* beta, void* c, int ct, int ldc, int compute, int algo) {
	ENTER(h, "cublasGemmEx");
	int ts = ex_scalar(compute, ct);
	if (bad_op(ta) || bad_op(tb) || cdt(at) < 0 || cdt(ct) < 0 || at != bt || ts < 0) return INVALID_VALUE;
	ex_note("cublasGemmEx", ta, tb, m, n, k, at, bt, ct, ldc, compute, algo, ts, alpha, beta, 1);
	ref_gemm_typed(cdt(at), cdt(ct), ts, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, c, ldc);
	return OK;
}

int cublasGemmStridedBatchedEx(H h, int ta, int tb, int m, int n, int k, const void* alpha, const void* a, int at, int lda,
                               long long sa, const void* b, int bt, int ldb, long long sb, const void* beta, void* c, int ct,
                               int ldc, long long sc, int batch, int compute, int algo) {
	ENTER(h, "cublasGemmStridedBatchedEx");
	int ts = ex_scalar(compute, ct);
	if (bad_op(ta) || bad_op(tb) || cdt(at) < 0 || cdt(ct) < 0 || at != bt || ts < 0) return INVALID_VALUE;
	ex_note("cublasGemmStridedBatchedEx", ta, tb, m, n, k, at, bt, ct, ldc, compute, algo, ts, alpha, beta, batch);
	int ea = cdt(at), ec = cdt(ct);
	for (int i = 0; i < batch; i++) {
		char* ci = (char*)c + i * sc * ref_size(ec);
		ref_gemm_typed(ea, ec, ts, ta, tb, m, n, k, alpha, (const char*)a + i * sa * ref_size(ea), lda,
		               (const char*)b + i * sb * ref_size(ea), ldb, beta, ci, ldc, ci, ldc);
	}
	return OK;
}

#define LEVEL3(p, t)                                                                                        \
	int cublas##p##trsm_v2(H h, int side, int uplo, int trans, int diag, int m, int n, const void* alpha,    \
	                       const void* a, int lda, void* b, int ldb) {                                      \
		ENTER(h, "cublas" #p "trsm_v2");                                                                    \
		if (bad01(side) || bad01(uplo) || bad_op(trans) || bad01(diag)) return INVALID_VALUE;               \
		note("cublas" #p "trsm_v2 side=%d uplo=%d trans=%d diag=%d m=%d n=%d", side, uplo, trans, diag, m, n); \
		ref_trsm(t, side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb);                                  \
		return OK;                                                                                          \
	}                                                                                                       \
	int cublas##p##trmm_v2(H h, int side, int uplo, int trans, int diag, int m, int n, const void* alpha,    \
	                       const void* a, int lda, const void* b, int ldb, void* c, int ldc) {              \
		ENTER(h, "cublas" #p "trmm_v2");                                                                    \
		if (bad01(side) || bad01(uplo) || bad_op(trans) || bad01(diag)) return INVALID_VALUE;               \
		note("cublas" #p "trmm_v2 side=%d uplo=%d trans=%d diag=%d m=%d n=%d", side, uplo, trans, diag, m, n); \
		ref_trmm(t, side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb, c, ldc);                          \
		return OK;                                                                                          \
	}                                                                                                       \
	int cublas##p##syrk_v2(H h, int uplo, int trans, int n, int k, const void* alpha, const void* a, int lda, \
	                       const void* beta, void* c, int ldc) {                                            \
		ENTER(h, "cublas" #p "syrk_v2");                                                                    \
		if (bad01(uplo) || bad_op(trans)) return INVALID_VALUE;                                             \
		note("cublas" #p "syrk_v2 uplo=%d trans=%d n=%d k=%d", uplo, trans, n, k);                          \
		ref_syrk(t, uplo, trans, n, k, alpha, a, lda, beta, c, ldc);                                        \
		return OK;                                                                                          \
	}                                                                                                       \
	int cublas##p##symm_v2(H h, int side, int uplo, int m, int n, const void* alpha, const void* a, int lda, \
	                       const void* b, int ldb, const void* beta, void* c, int ldc) {                    \
		ENTER(h, "cublas" #p "symm_v2");                                                                    \
		if (bad01(side) || bad01(uplo)) return INVALID_VALUE;                                               \
		note("cublas" #p "symm_v2 side=%d uplo=%d m=%d n=%d", side, uplo, m, n);                            \
		ref_symm(t, side, uplo, m, n, alpha, a, lda, b, ldb, beta, c, ldc);                                 \
		return OK;                                                                                          \
	}                                                                                                       \
	int cublas##p##geam(H h, int ta, int tb, int m, int n, const void* alpha, const void* a, int lda,        \
	                    const void* beta, const void* b, int ldb, void* c, int ldc) {                       \
		ENTER(h, "cublas" #p "geam");                                                                       \
		if (bad_op(ta) || bad_op(tb)) return INVALID_VALUE;                                                 \
		note("cublas" #p "geam ta=%d tb=%d m=%d n=%d", ta, tb, m, n);                                       \
		ref_geam(t, ta, tb, m, n, alpha, a, lda, beta, b, ldb, c, ldc);                                     \
		return OK;                                                                                          \
	}
LEVEL3(S, REF_S)
LEVEL3(D, REF_D)
LEVEL3(C, REF_CPLX)
LEVEL3(Z, REF_Z)
