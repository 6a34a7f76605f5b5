// The NVIDIA platform of package rocblas: every function of the generated
// table, translated to cuBLAS (and the CUDA runtime for copies), both opened
// with dlopen. No CUDA header is needed: cgen.spec declares the functions
// called, with the exported symbol names of CUDA 12 and 13
// (cublasCreate_v2, not cublasCreate, which libcublas.so.13 does not
// export), and the generated table resolves them.
//
// What differs, and how it is translated:
//   - The handle is rocm-go's own struct around the cuBLAS handle, which
//     also remembers the user's workspace.
//   - Enums by name: operation 111/112/113 → CUBLAS_OP_N/T/C (0/1/2); fill
//     upper 121 → 1, lower 122 → 0; diagonal non-unit 131 → 0, unit 132 → 1;
//     side left 141 → 0, right 142 → 1; math mode xf32 → TF32 tensor op.
//   - Statuses by name (cuBLAS's 3, 7, 8, 11, 13, 14, 15 mean other things).
//   - Data and compute types of gemm_ex; gemm_ex with D other than C copies C
//     to D first (cuBLAS updates C in place).
//   - The batched and strided-batched forms of level 1, which cuBLAS lacks,
//     loop over the batch; a batch of pointer arrays is first copied to the
//     host on the handle's stream.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

// nv_status translates a cuBLAS status to rocBLAS's, by name.
static rocblas_status nv_status(int s) {
	switch (s) {
	case RG_CUDA_MISSING: return RG_ROCBLAS_CUDA_MISSING;
	case 0: return rocblas_status_success;          // SUCCESS
	case 1: return rocblas_status_invalid_handle;   // NOT_INITIALIZED
	case 3: return rocblas_status_memory_error;     // ALLOC_FAILED
	case 7: return rocblas_status_invalid_value;    // INVALID_VALUE
	case 8: return rocblas_status_arch_mismatch;    // ARCH_MISMATCH
	case 11: return rocblas_status_memory_error;    // MAPPING_ERROR
	case 13: return rocblas_status_internal_error;  // EXECUTION_FAILED
	case 14: return rocblas_status_internal_error;  // INTERNAL_ERROR
	case 15: return rocblas_status_not_implemented; // NOT_SUPPORTED
	case 16: return rocblas_status_internal_error;  // LICENSE_ERROR
	}
	return rocblas_status_internal_error;
}

// nv_cuda_status translates a CUDA runtime status (of the copies).
static rocblas_status nv_cuda_status(int e) {
	switch (e) {
	case RG_CUDA_MISSING: return RG_ROCBLAS_CUDA_MISSING;
	case 0: return rocblas_status_success;
	case 1: return rocblas_status_invalid_value;  // cudaErrorInvalidValue
	case 2: return rocblas_status_memory_error;   // cudaErrorMemoryAllocation
	case 17: return rocblas_status_invalid_pointer; // cudaErrorInvalidDevicePointer
	}
	return rocblas_status_internal_error;
}

// NV(name, args...) calls a cuBLAS function of the generated table
// (cgen.spec) and yields its status as rocBLAS's; NVRT a CUDA runtime
// function.
#define NV(name, ...) nv_status(RG_ROCBLAS_CUDA(name, __VA_ARGS__))
#define NVRT(name, ...) nv_cuda_status(RG_ROCBLAS_CUDA(name, __VA_ARGS__))

// The handle: cuBLAS's, and the user's workspace, which cuBLAS forgets when
// its stream is set.
struct nv_handle {
	void* cublas;
	void* ws;
	size_t ws_size;
};

// NV_H declares cu, the cuBLAS handle of rocBLAS handle h.
#define NV_H(h)                                                                           \
	if ((h) == NULL) return rocblas_status_invalid_handle;                                \
	void* cu = ((struct nv_handle*)(h))->cublas

// Enums, by name; -1 for a value cuBLAS has no name for.
static int nv_op(rocblas_operation o) {
	switch (o) {
	case rocblas_operation_none: return 0;
	case rocblas_operation_transpose: return 1;
	case rocblas_operation_conjugate_transpose: return 2;
	}
	return -1;
}
static int nv_fill(rocblas_fill f) {
	switch (f) {
	case rocblas_fill_lower: return 0;
	case rocblas_fill_upper: return 1;
	case rocblas_fill_full: return 2;
	}
	return -1;
}
static int nv_diag(rocblas_diagonal d) {
	switch (d) {
	case rocblas_diagonal_non_unit: return 0;
	case rocblas_diagonal_unit: return 1;
	}
	return -1;
}
static int nv_side(rocblas_side s) {
	switch (s) {
	case rocblas_side_left: return 0;
	case rocblas_side_right: return 1;
	default: return -1;
	}
}

// nv_dtype translates a data type to cudaDataType. rocBLAS's f8 and bf8
// are FNUZ encodings, not CUDA's OCP E4M3/E5M2: they have none.
static int nv_dtype(rocblas_datatype t) {
	switch (t) {
	case rocblas_datatype_f16_r: return 2;
	case rocblas_datatype_f32_r: return 0;
	case rocblas_datatype_f64_r: return 1;
	case rocblas_datatype_f16_c: return 6;
	case rocblas_datatype_f32_c: return 4;
	case rocblas_datatype_f64_c: return 5;
	case rocblas_datatype_i8_r: return 3;
	case rocblas_datatype_u8_r: return 8;
	case rocblas_datatype_i32_r: return 10;
	case rocblas_datatype_u32_r: return 12;
	case rocblas_datatype_i8_c: return 7;
	case rocblas_datatype_u8_c: return 9;
	case rocblas_datatype_i32_c: return 11;
	case rocblas_datatype_u32_c: return 13;
	case rocblas_datatype_bf16_r: return 14;
	case rocblas_datatype_bf16_c: return 15;
	default: return -1;
	}
}

static size_t nv_dsize(rocblas_datatype t) {
	switch (t) {
	case rocblas_datatype_i8_r: case rocblas_datatype_u8_r: return 1;
	case rocblas_datatype_f16_r: case rocblas_datatype_bf16_r: case rocblas_datatype_i8_c: case rocblas_datatype_u8_c: return 2;
	case rocblas_datatype_f32_r: case rocblas_datatype_i32_r: case rocblas_datatype_u32_r: case rocblas_datatype_f16_c:
	case rocblas_datatype_bf16_c: return 4;
	case rocblas_datatype_f64_r: case rocblas_datatype_f32_c: case rocblas_datatype_i32_c: case rocblas_datatype_u32_c: return 8;
	case rocblas_datatype_f64_c: return 16;
	default: return 0;
	}
}

// nv_compute translates gemm_ex's compute type (a data type in rocBLAS)
// to cublasComputeType_t, for inputs of type a. The alpha and beta of each
// are of the compute type on both sides: half for 16F, float for 32F,
// double for 64F, int for 32I.
enum { NV_COMPUTE_16F = 64, NV_COMPUTE_32F = 68, NV_COMPUTE_64F = 70, NV_COMPUTE_32I = 72 };
static int nv_compute(rocblas_datatype a, rocblas_datatype compute) {
	switch (compute) {
	case rocblas_datatype_f16_r:
		return a == rocblas_datatype_f16_r ? NV_COMPUTE_16F : -1;
	case rocblas_datatype_f32_r:
		return a == rocblas_datatype_f16_r || a == rocblas_datatype_bf16_r || a == rocblas_datatype_f32_r ? NV_COMPUTE_32F : -1;
	case rocblas_datatype_f64_r:
		return a == rocblas_datatype_f64_r ? NV_COMPUTE_64F : -1;
	case rocblas_datatype_i32_r:
		return a == rocblas_datatype_i8_r ? NV_COMPUTE_32I : -1;
	case rocblas_datatype_f32_c:
		return a == rocblas_datatype_f32_c ? NV_COMPUTE_32F : -1;
	case rocblas_datatype_f64_c:
		return a == rocblas_datatype_f64_c ? NV_COMPUTE_64F : -1;
	default:
		return -1;
	}
}

// nv_beta_zero reports whether a host beta of the compute type is zero
// (then C is not read); a device beta counts as non-zero.
static int nv_beta_zero(void* cu, const void* beta, int compute, rocblas_datatype ctype) {
	int mode = 0;
	if (beta == NULL || RG_ROCBLAS_CUDA(cublasGetPointerMode_v2, cu, &mode) != 0 || mode != 0) return 0;
	int cplx = ctype == rocblas_datatype_f32_c || ctype == rocblas_datatype_f64_c;
	switch (compute) {
	case NV_COMPUTE_16F: return (*(const uint16_t*)beta & 0x7fff) == 0;
	case NV_COMPUTE_32F: return ((const float*)beta)[0] == 0 && (!cplx || ((const float*)beta)[1] == 0);
	case NV_COMPUTE_64F: return ((const double*)beta)[0] == 0 && (!cplx || ((const double*)beta)[1] == 0);
	case NV_COMPUTE_32I: return *(const int*)beta == 0;
	}
	return 0;
}

static rocblas_status nv_stream(void* cu, void** stream) {
	*stream = NULL;
	return NV(cublasGetStream_v2, cu, stream);
}

// nv_copy_matrix copies an m×n matrix of es-byte elements from src (ld
// lds) to dst (ld ldd), on the handle's stream.
static rocblas_status nv_copy_matrix(void* cu, void* dst, int ldd, const void* src, int lds, int m, int n, size_t es) {
	void* s;
	rocblas_status st = nv_stream(cu, &s);
	if (st != rocblas_status_success || m <= 0 || n <= 0) return st;
	return NVRT(cudaMemcpy2DAsync, dst, (size_t)ldd * es, src, (size_t)lds * es, (size_t)m * es, (size_t)n, 3, s);
}

// nv_fetch copies a batch of device pointers to the host, in order on the
// handle's stream; the caller frees *out.
static rocblas_status nv_fetch(void* cu, const void* arr, int batch, void*** out) {
	*out = NULL;
	if (batch <= 0) return rocblas_status_success;
	if (arr == NULL) return rocblas_status_invalid_pointer;
	void* s;
	rocblas_status st = nv_stream(cu, &s);
	if (st != rocblas_status_success) return st;
	void** host = malloc(sizeof(void*) * (size_t)batch);
	if (host == NULL) return rocblas_status_memory_error;
	st = NVRT(cudaMemcpyAsync, host, arr, sizeof(void*) * (size_t)batch, 2, s);
	if (st == rocblas_status_success) st = NVRT(cudaStreamSynchronize, s);
	if (st != rocblas_status_success) {
		free(host);
		return st;
	}
	*out = host;
	return st;
}

// ---- Library, handle and modes ----

static const char* rgnv_rocblas_status_to_string(rocblas_status s) {
	switch (s) {
#define NV_STATUS_NAME(x) \
	case x: return #x;
	NV_STATUS_NAME(rocblas_status_success)
	NV_STATUS_NAME(rocblas_status_invalid_handle)
	NV_STATUS_NAME(rocblas_status_not_implemented)
	NV_STATUS_NAME(rocblas_status_invalid_pointer)
	NV_STATUS_NAME(rocblas_status_invalid_size)
	NV_STATUS_NAME(rocblas_status_memory_error)
	NV_STATUS_NAME(rocblas_status_internal_error)
	NV_STATUS_NAME(rocblas_status_perf_degraded)
	NV_STATUS_NAME(rocblas_status_size_query_mismatch)
	NV_STATUS_NAME(rocblas_status_size_increased)
	NV_STATUS_NAME(rocblas_status_size_unchanged)
	NV_STATUS_NAME(rocblas_status_invalid_value)
	NV_STATUS_NAME(rocblas_status_continue)
	NV_STATUS_NAME(rocblas_status_check_numerics_fail)
	NV_STATUS_NAME(rocblas_status_excluded_from_build)
	NV_STATUS_NAME(rocblas_status_arch_mismatch)
#undef NV_STATUS_NAME
	}
	return "<undefined rocblas_status>";
}

static rocblas_status nv_version(char* buf, size_t len) {
	int v[3] = {0, 0, 0};
	for (int i = 0; i < 3; i++) {
		rocblas_status st = NV(cublasGetProperty, i, &v[i]);
		if (st != rocblas_status_success) return st;
	}
	int n = snprintf(buf, len, "%d.%d.%d", v[0], v[1], v[2]);
	return n < 0 ? rocblas_status_internal_error : rocblas_status_success;
}
static rocblas_status rgnv_rocblas_get_version_string_size(size_t* len) {
	if (len == NULL) return rocblas_status_invalid_pointer;
	char buf[64] = {0};
	rocblas_status st = nv_version(buf, sizeof buf);
	*len = strlen(buf) + 1;
	return st;
}
static rocblas_status rgnv_rocblas_get_version_string(char* buf, size_t len) {
	if (buf == NULL) return rocblas_status_invalid_pointer;
	char v[64];
	rocblas_status st = nv_version(v, sizeof v);
	if (st != rocblas_status_success) return st;
	if (strlen(v) + 1 > len) return rocblas_status_invalid_size;
	strcpy(buf, v);
	return st;
}

static rocblas_status rgnv_rocblas_create_handle(rocblas_handle* out) {
	if (out == NULL) return rocblas_status_invalid_pointer;
	struct nv_handle* h = calloc(1, sizeof *h);
	if (h == NULL) return rocblas_status_memory_error;
	rocblas_status st = NV(cublasCreate_v2, &h->cublas);
	if (st != rocblas_status_success) {
		free(h);
		return st;
	}
	*out = (rocblas_handle)h;
	return st;
}
static rocblas_status rgnv_rocblas_destroy_handle(rocblas_handle h) {
	NV_H(h);
	rocblas_status st = NV(cublasDestroy_v2, cu);
	free(h);
	return st;
}
// cublasSetStream resets the workspace to cuBLAS's own: give the user's
// back, as rocBLAS keeps it.
static rocblas_status rgnv_rocblas_set_stream(rocblas_handle h, hipStream_t s) {
	NV_H(h);
	struct nv_handle* nh = (struct nv_handle*)h;
	rocblas_status st = NV(cublasSetStream_v2, cu, s);
	if (st == rocblas_status_success && nh->ws != NULL) st = NV(cublasSetWorkspace_v2, cu, nh->ws, nh->ws_size);
	return st;
}
static rocblas_status rgnv_rocblas_set_pointer_mode(rocblas_handle h, rocblas_pointer_mode m) {
	NV_H(h);
	if (m != rocblas_pointer_mode_host && m != rocblas_pointer_mode_device) return rocblas_status_invalid_value;
	return NV(cublasSetPointerMode_v2, cu, (int)m);
}
static rocblas_status rgnv_rocblas_get_pointer_mode(rocblas_handle h, rocblas_pointer_mode* m) {
	NV_H(h);
	if (m == NULL) return rocblas_status_invalid_pointer;
	int v = 0;
	rocblas_status st = NV(cublasGetPointerMode_v2, cu, &v);
	*m = (rocblas_pointer_mode)v;
	return st;
}
static rocblas_status rgnv_rocblas_set_atomics_mode(rocblas_handle h, rocblas_atomics_mode m) {
	NV_H(h);
	return NV(cublasSetAtomicsMode, cu, m == rocblas_atomics_allowed ? 1 : 0);
}
static rocblas_status rgnv_rocblas_get_atomics_mode(rocblas_handle h, rocblas_atomics_mode* m) {
	NV_H(h);
	if (m == NULL) return rocblas_status_invalid_pointer;
	int v = 0;
	rocblas_status st = NV(cublasGetAtomicsMode, cu, &v);
	*m = v == 1 ? rocblas_atomics_allowed : rocblas_atomics_not_allowed;
	return st;
}
// rocBLAS's xf32 math is CUBLAS_TF32_TENSOR_OP_MATH (3).
static rocblas_status rgnv_rocblas_set_math_mode(rocblas_handle h, rocblas_math_mode m) {
	NV_H(h);
	switch (m) {
	case rocblas_default_math: return NV(cublasSetMathMode, cu, 0);
	case rocblas_xf32_xdl_math_op: return NV(cublasSetMathMode, cu, 3);
	}
	return rocblas_status_invalid_value;
}
static rocblas_status rgnv_rocblas_get_math_mode(rocblas_handle h, rocblas_math_mode* m) {
	NV_H(h);
	if (m == NULL) return rocblas_status_invalid_pointer;
	int v = 0;
	rocblas_status st = NV(cublasGetMathMode, cu, &v);
	*m = (v & 0xf) == 3 ? rocblas_xf32_xdl_math_op : rocblas_default_math;
	return st;
}
// A NULL workspace gives cuBLAS its own back: setting the stream again
// does that.
static rocblas_status rgnv_rocblas_set_workspace(rocblas_handle h, void* addr, size_t size) {
	NV_H(h);
	struct nv_handle* nh = (struct nv_handle*)h;
	rocblas_status st;
	if (addr == NULL || size == 0) {
		void* s;
		st = nv_stream(cu, &s);
		if (st == rocblas_status_success) st = NV(cublasSetStream_v2, cu, s);
		addr = NULL, size = 0;
	} else {
		st = NV(cublasSetWorkspace_v2, cu, addr, size);
	}
	if (st == rocblas_status_success) nh->ws = addr, nh->ws_size = size;
	return st;
}
// cuBLAS does not report the size of its own workspace: 0 then.
static rocblas_status rgnv_rocblas_get_device_memory_size(rocblas_handle h, size_t* size) {
	NV_H(h);
	(void)cu;
	if (size == NULL) return rocblas_status_invalid_pointer;
	*size = ((struct nv_handle*)h)->ws_size;
	return rocblas_status_success;
}
static _Bool rgnv_rocblas_is_managing_device_memory(rocblas_handle h) {
	return h != NULL && ((struct nv_handle*)h)->ws == NULL;
}

// ---- Level 1 ----
// P is rocBLAS's prefix, C cuBLAS's; T the element type, R a reduction's
// result type.

#define NV_AXPY(p, c, T)                                                                                              \
	static rocblas_status rgnv_rocblas_##p##axpy(rocblas_handle h, rocblas_int n, const T* alpha, const T* x,          \
	                                             rocblas_int incx, T* y, rocblas_int incy) {                          \
		NV_H(h);                                                                                                      \
		return NV(cublas##c##axpy_v2, cu, n, alpha, x, incx, y, incy);                                                \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##axpy_batched(rocblas_handle h, rocblas_int n, const T* alpha,              \
	                                                     const T* const x[], rocblas_int incx, T* const y[],          \
	                                                     rocblas_int incy, rocblas_int batch) {                       \
		NV_H(h);                                                                                                      \
		void **xs, **ys = NULL;                                                                                       \
		rocblas_status st = nv_fetch(cu, x, batch, &xs);                                                              \
		if (st == rocblas_status_success) st = nv_fetch(cu, y, batch, &ys);                                           \
		for (int i = 0; st == rocblas_status_success && i < batch; i++)                                               \
			st = NV(cublas##c##axpy_v2, cu, n, alpha, xs[i], incx, ys[i], incy);                                      \
		free(xs), free(ys);                                                                                           \
		return st;                                                                                                    \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##axpy_strided_batched(rocblas_handle h, rocblas_int n, const T* alpha,      \
	                                                             const T* x, rocblas_int incx, rocblas_stride sx,     \
	                                                             T* y, rocblas_int incy, rocblas_stride sy,           \
	                                                             rocblas_int batch) {                                 \
		NV_H(h);                                                                                                      \
		rocblas_status st = rocblas_status_success;                                                                   \
		for (int i = 0; st == rocblas_status_success && i < batch; i++)                                               \
			st = NV(cublas##c##axpy_v2, cu, n, alpha, x + i * sx, incx, y + i * sy, incy);                            \
		return st;                                                                                                    \
	}
NV_AXPY(s, S, float)
NV_AXPY(d, D, double)
NV_AXPY(c, C, rocblas_float_complex)
NV_AXPY(z, Z, rocblas_double_complex)

#define NV_DOT(p, cname, T)                                                                                           \
	static rocblas_status rgnv_rocblas_##p(rocblas_handle h, rocblas_int n, const T* x, rocblas_int incx, const T* y,  \
	                                       rocblas_int incy, T* r) {                                                  \
		NV_H(h);                                                                                                      \
		return NV(cname, cu, n, x, incx, y, incy, r);                                                                 \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##_batched(rocblas_handle h, rocblas_int n, const T* const x[],              \
	                                                 rocblas_int incx, const T* const y[], rocblas_int incy,          \
	                                                 rocblas_int batch, T* r) {                                       \
		NV_H(h);                                                                                                      \
		void **xs, **ys = NULL;                                                                                       \
		rocblas_status st = nv_fetch(cu, x, batch, &xs);                                                              \
		if (st == rocblas_status_success) st = nv_fetch(cu, y, batch, &ys);                                           \
		for (int i = 0; st == rocblas_status_success && i < batch; i++)                                               \
			st = NV(cname, cu, n, xs[i], incx, ys[i], incy, r + i);                                                   \
		free(xs), free(ys);                                                                                           \
		return st;                                                                                                    \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##_strided_batched(rocblas_handle h, rocblas_int n, const T* x,              \
	                                                         rocblas_int incx, rocblas_stride sx, const T* y,         \
	                                                         rocblas_int incy, rocblas_stride sy, rocblas_int batch,  \
	                                                         T* r) {                                                  \
		NV_H(h);                                                                                                      \
		rocblas_status st = rocblas_status_success;                                                                   \
		for (int i = 0; st == rocblas_status_success && i < batch; i++)                                               \
			st = NV(cname, cu, n, x + i * sx, incx, y + i * sy, incy, r + i);                                         \
		return st;                                                                                                    \
	}
NV_DOT(sdot, cublasSdot_v2, float)
NV_DOT(ddot, cublasDdot_v2, double)
NV_DOT(cdotu, cublasCdotu_v2, rocblas_float_complex)
NV_DOT(cdotc, cublasCdotc_v2, rocblas_float_complex)
NV_DOT(zdotu, cublasZdotu_v2, rocblas_double_complex)
NV_DOT(zdotc, cublasZdotc_v2, rocblas_double_complex)

// The reductions over one vector: nrm2, asum, iamax, iamin.
#define NV_REDUCE(p, cname, T, R)                                                                                     \
	static rocblas_status rgnv_rocblas_##p(rocblas_handle h, rocblas_int n, const T* x, rocblas_int incx, R* r) {      \
		NV_H(h);                                                                                                      \
		return NV(cname, cu, n, x, incx, r);                                                                          \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##_batched(rocblas_handle h, rocblas_int n, const T* const x[],              \
	                                                 rocblas_int incx, rocblas_int batch, R* r) {                     \
		NV_H(h);                                                                                                      \
		void** xs;                                                                                                    \
		rocblas_status st = nv_fetch(cu, x, batch, &xs);                                                              \
		for (int i = 0; st == rocblas_status_success && i < batch; i++) st = NV(cname, cu, n, xs[i], incx, r + i);    \
		free(xs);                                                                                                     \
		return st;                                                                                                    \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##_strided_batched(rocblas_handle h, rocblas_int n, const T* x,              \
	                                                         rocblas_int incx, rocblas_stride sx, rocblas_int batch,  \
	                                                         R* r) {                                                  \
		NV_H(h);                                                                                                      \
		rocblas_status st = rocblas_status_success;                                                                   \
		for (int i = 0; st == rocblas_status_success && i < batch; i++)                                               \
			st = NV(cname, cu, n, x + i * sx, incx, r + i);                                                           \
		return st;                                                                                                    \
	}
NV_REDUCE(snrm2, cublasSnrm2_v2, float, float)
NV_REDUCE(dnrm2, cublasDnrm2_v2, double, double)
NV_REDUCE(scnrm2, cublasScnrm2_v2, rocblas_float_complex, float)
NV_REDUCE(dznrm2, cublasDznrm2_v2, rocblas_double_complex, double)
NV_REDUCE(sasum, cublasSasum_v2, float, float)
NV_REDUCE(dasum, cublasDasum_v2, double, double)
NV_REDUCE(scasum, cublasScasum_v2, rocblas_float_complex, float)
NV_REDUCE(dzasum, cublasDzasum_v2, rocblas_double_complex, double)
NV_REDUCE(isamax, cublasIsamax_v2, float, rocblas_int)
NV_REDUCE(idamax, cublasIdamax_v2, double, rocblas_int)
NV_REDUCE(icamax, cublasIcamax_v2, rocblas_float_complex, rocblas_int)
NV_REDUCE(izamax, cublasIzamax_v2, rocblas_double_complex, rocblas_int)
NV_REDUCE(isamin, cublasIsamin_v2, float, rocblas_int)
NV_REDUCE(idamin, cublasIdamin_v2, double, rocblas_int)
NV_REDUCE(icamin, cublasIcamin_v2, rocblas_float_complex, rocblas_int)
NV_REDUCE(izamin, cublasIzamin_v2, rocblas_double_complex, rocblas_int)

#define NV_SCAL(p, c, T)                                                                                              \
	static rocblas_status rgnv_rocblas_##p##scal(rocblas_handle h, rocblas_int n, const T* alpha, T* x,                \
	                                             rocblas_int incx) {                                                  \
		NV_H(h);                                                                                                      \
		return NV(cublas##c##scal_v2, cu, n, alpha, x, incx);                                                         \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##scal_batched(rocblas_handle h, rocblas_int n, const T* alpha,              \
	                                                     T* const x[], rocblas_int incx, rocblas_int batch) {         \
		NV_H(h);                                                                                                      \
		void** xs;                                                                                                    \
		rocblas_status st = nv_fetch(cu, x, batch, &xs);                                                              \
		for (int i = 0; st == rocblas_status_success && i < batch; i++)                                               \
			st = NV(cublas##c##scal_v2, cu, n, alpha, xs[i], incx);                                                   \
		free(xs);                                                                                                     \
		return st;                                                                                                    \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##scal_strided_batched(rocblas_handle h, rocblas_int n, const T* alpha,      \
	                                                             T* x, rocblas_int incx, rocblas_stride sx,           \
	                                                             rocblas_int batch) {                                 \
		NV_H(h);                                                                                                      \
		rocblas_status st = rocblas_status_success;                                                                   \
		for (int i = 0; st == rocblas_status_success && i < batch; i++)                                               \
			st = NV(cublas##c##scal_v2, cu, n, alpha, x + i * sx, incx);                                              \
		return st;                                                                                                    \
	}
NV_SCAL(s, S, float)
NV_SCAL(d, D, double)
NV_SCAL(c, C, rocblas_float_complex)
NV_SCAL(z, Z, rocblas_double_complex)

// copy (const x) and swap take the same arguments.
#define NV_COPY(p, op, cname, T, XT)                                                                                  \
	static rocblas_status rgnv_rocblas_##p##op(rocblas_handle h, rocblas_int n, XT* x, rocblas_int incx, T* y,         \
	                                           rocblas_int incy) {                                                    \
		NV_H(h);                                                                                                      \
		return NV(cname, cu, n, (void*)x, incx, y, incy);                                                             \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##op##_batched(rocblas_handle h, rocblas_int n, XT* const x[],               \
	                                                     rocblas_int incx, T* const y[], rocblas_int incy,            \
	                                                     rocblas_int batch) {                                         \
		NV_H(h);                                                                                                      \
		void **xs, **ys = NULL;                                                                                       \
		rocblas_status st = nv_fetch(cu, x, batch, &xs);                                                              \
		if (st == rocblas_status_success) st = nv_fetch(cu, y, batch, &ys);                                           \
		for (int i = 0; st == rocblas_status_success && i < batch; i++)                                               \
			st = NV(cname, cu, n, xs[i], incx, ys[i], incy);                                                          \
		free(xs), free(ys);                                                                                           \
		return st;                                                                                                    \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##op##_strided_batched(rocblas_handle h, rocblas_int n, XT* x,               \
	                                                             rocblas_int incx, rocblas_stride sx, T* y,           \
	                                                             rocblas_int incy, rocblas_stride sy,                 \
	                                                             rocblas_int batch) {                                 \
		NV_H(h);                                                                                                      \
		rocblas_status st = rocblas_status_success;                                                                   \
		for (int i = 0; st == rocblas_status_success && i < batch; i++)                                               \
			st = NV(cname, cu, n, (void*)(x + i * sx), incx, y + i * sy, incy);                                       \
		return st;                                                                                                    \
	}
NV_COPY(s, copy, cublasScopy_v2, float, const float)
NV_COPY(d, copy, cublasDcopy_v2, double, const double)
NV_COPY(c, copy, cublasCcopy_v2, rocblas_float_complex, const rocblas_float_complex)
NV_COPY(z, copy, cublasZcopy_v2, rocblas_double_complex, const rocblas_double_complex)
NV_COPY(s, swap, cublasSswap_v2, float, float)
NV_COPY(d, swap, cublasDswap_v2, double, double)
NV_COPY(c, swap, cublasCswap_v2, rocblas_float_complex, rocblas_float_complex)
NV_COPY(z, swap, cublasZswap_v2, rocblas_double_complex, rocblas_double_complex)

// rot: c is real; s is real for s and d, complex for c and z.
#define NV_ROT(p, c, T, R, S)                                                                                         \
	static rocblas_status rgnv_rocblas_##p##rot(rocblas_handle h, rocblas_int n, T* x, rocblas_int incx, T* y,         \
	                                            rocblas_int incy, const R* cs, const S* sn) {                         \
		NV_H(h);                                                                                                      \
		return NV(cublas##c##rot_v2, cu, n, x, incx, y, incy, cs, sn);                                                \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##rot_batched(rocblas_handle h, rocblas_int n, T* const x[],                 \
	                                                    rocblas_int incx, T* const y[], rocblas_int incy,             \
	                                                    const R* cs, const S* sn, rocblas_int batch) {                \
		NV_H(h);                                                                                                      \
		void **xs, **ys = NULL;                                                                                       \
		rocblas_status st = nv_fetch(cu, x, batch, &xs);                                                              \
		if (st == rocblas_status_success) st = nv_fetch(cu, y, batch, &ys);                                           \
		for (int i = 0; st == rocblas_status_success && i < batch; i++)                                               \
			st = NV(cublas##c##rot_v2, cu, n, xs[i], incx, ys[i], incy, cs, sn);                                      \
		free(xs), free(ys);                                                                                           \
		return st;                                                                                                    \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##rot_strided_batched(rocblas_handle h, rocblas_int n, T* x,                 \
	                                                            rocblas_int incx, rocblas_stride sx, T* y,            \
	                                                            rocblas_int incy, rocblas_stride sy, const R* cs,     \
	                                                            const S* sn, rocblas_int batch) {                     \
		NV_H(h);                                                                                                      \
		rocblas_status st = rocblas_status_success;                                                                   \
		for (int i = 0; st == rocblas_status_success && i < batch; i++)                                               \
			st = NV(cublas##c##rot_v2, cu, n, x + i * sx, incx, y + i * sy, incy, cs, sn);                            \
		return st;                                                                                                    \
	}
NV_ROT(s, S, float, float, float)
NV_ROT(d, D, double, double, double)
NV_ROT(c, C, rocblas_float_complex, float, rocblas_float_complex)
NV_ROT(z, Z, rocblas_double_complex, double, rocblas_double_complex)

// ---- Level 2 ----

// NV_ENUM declares the cuBLAS value of a rocBLAS enum argument, returning
// invalid_value when it has none.
#define NV_ENUM(var, fn, arg)                                                                                         \
	int var = fn(arg);                                                                                                \
	if (var < 0) return rocblas_status_invalid_value

#define NV_GEMV(p, c, T)                                                                                              \
	static rocblas_status rgnv_rocblas_##p##gemv(rocblas_handle h, rocblas_operation trans, rocblas_int m,             \
	                                             rocblas_int n, const T* alpha, const T* a, rocblas_int lda,          \
	                                             const T* x, rocblas_int incx, const T* beta, T* y,                   \
	                                             rocblas_int incy) {                                                  \
		NV_H(h);                                                                                                      \
		NV_ENUM(t, nv_op, trans);                                                                                     \
		return NV(cublas##c##gemv_v2, cu, t, m, n, alpha, a, lda, x, incx, beta, y, incy);                            \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##gemv_batched(rocblas_handle h, rocblas_operation trans, rocblas_int m,     \
	                                                     rocblas_int n, const T* alpha, const T* const a[],           \
	                                                     rocblas_int lda, const T* const x[], rocblas_int incx,       \
	                                                     const T* beta, T* const y[], rocblas_int incy,               \
	                                                     rocblas_int batch) {                                         \
		NV_H(h);                                                                                                      \
		NV_ENUM(t, nv_op, trans);                                                                                     \
		return NV(cublas##c##gemvBatched, cu, t, m, n, alpha, (const void* const*)a, lda, (const void* const*)x,      \
		          incx, beta, (void* const*)y, incy, batch);                                                          \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##gemv_strided_batched(                                                     \
		rocblas_handle h, rocblas_operation trans, rocblas_int m, rocblas_int n, const T* alpha, const T* a,          \
		rocblas_int lda, rocblas_stride sa, const T* x, rocblas_int incx, rocblas_stride sx, const T* beta, T* y,     \
		rocblas_int incy, rocblas_stride sy, rocblas_int batch) {                                                     \
		NV_H(h);                                                                                                      \
		NV_ENUM(t, nv_op, trans);                                                                                     \
		return NV(cublas##c##gemvStridedBatched, cu, t, m, n, alpha, a, lda, sa, x, incx, sx, beta, y, incy, sy,     \
		          batch);                                                                                             \
	}
NV_GEMV(s, S, float)
NV_GEMV(d, D, double)
NV_GEMV(c, C, rocblas_float_complex)
NV_GEMV(z, Z, rocblas_double_complex)

#define NV_GER(p, cname, T)                                                                                           \
	static rocblas_status rgnv_rocblas_##p(rocblas_handle h, rocblas_int m, rocblas_int n, const T* alpha, const T* x, \
	                                       rocblas_int incx, const T* y, rocblas_int incy, T* a, rocblas_int lda) {   \
		NV_H(h);                                                                                                      \
		return NV(cname, cu, m, n, alpha, x, incx, y, incy, a, lda);                                                  \
	}
NV_GER(sger, cublasSger_v2, float)
NV_GER(dger, cublasDger_v2, double)
NV_GER(cgeru, cublasCgeru_v2, rocblas_float_complex)
NV_GER(cgerc, cublasCgerc_v2, rocblas_float_complex)
NV_GER(zgeru, cublasZgeru_v2, rocblas_double_complex)
NV_GER(zgerc, cublasZgerc_v2, rocblas_double_complex)

#define NV_SYMV(p, c, T)                                                                                              \
	static rocblas_status rgnv_rocblas_##p##symv(rocblas_handle h, rocblas_fill uplo, rocblas_int n, const T* alpha,   \
	                                             const T* a, rocblas_int lda, const T* x, rocblas_int incx,           \
	                                             const T* beta, T* y, rocblas_int incy) {                             \
		NV_H(h);                                                                                                      \
		NV_ENUM(u, nv_fill, uplo);                                                                                    \
		return NV(cublas##c##symv_v2, cu, u, n, alpha, a, lda, x, incx, beta, y, incy);                               \
	}
NV_SYMV(s, S, float)
NV_SYMV(d, D, double)
NV_SYMV(c, C, rocblas_float_complex)
NV_SYMV(z, Z, rocblas_double_complex)

// trmv and trsv take the same arguments.
#define NV_TRMV(p, op, cname, T)                                                                                      \
	static rocblas_status rgnv_rocblas_##p##op(rocblas_handle h, rocblas_fill uplo, rocblas_operation trans,           \
	                                           rocblas_diagonal diag, rocblas_int n, const T* a, rocblas_int lda,     \
	                                           T* x, rocblas_int incx) {                                              \
		NV_H(h);                                                                                                      \
		NV_ENUM(u, nv_fill, uplo);                                                                                    \
		NV_ENUM(t, nv_op, trans);                                                                                     \
		NV_ENUM(d, nv_diag, diag);                                                                                    \
		return NV(cname, cu, u, t, d, n, a, lda, x, incx);                                                            \
	}
NV_TRMV(s, trmv, cublasStrmv_v2, float)
NV_TRMV(d, trmv, cublasDtrmv_v2, double)
NV_TRMV(c, trmv, cublasCtrmv_v2, rocblas_float_complex)
NV_TRMV(z, trmv, cublasZtrmv_v2, rocblas_double_complex)
NV_TRMV(s, trsv, cublasStrsv_v2, float)
NV_TRMV(d, trsv, cublasDtrsv_v2, double)
NV_TRMV(c, trsv, cublasCtrsv_v2, rocblas_float_complex)
NV_TRMV(z, trsv, cublasZtrsv_v2, rocblas_double_complex)

// ---- Level 3 ----

#define NV_GEMM(p, plain, batched, strided, T)                                                                        \
	static rocblas_status rgnv_rocblas_##p##gemm(rocblas_handle h, rocblas_operation ta, rocblas_operation tb,         \
	                                             rocblas_int m, rocblas_int n, rocblas_int k, const T* alpha,         \
	                                             const T* a, rocblas_int lda, const T* b, rocblas_int ldb,            \
	                                             const T* beta, T* c, rocblas_int ldc) {                              \
		NV_H(h);                                                                                                      \
		NV_ENUM(oa, nv_op, ta);                                                                                       \
		NV_ENUM(ob, nv_op, tb);                                                                                       \
		return NV(plain, cu, oa, ob, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);                                   \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##gemm_batched(                                                             \
		rocblas_handle h, rocblas_operation ta, rocblas_operation tb, rocblas_int m, rocblas_int n, rocblas_int k,    \
		const T* alpha, const T* const a[], rocblas_int lda, const T* const b[], rocblas_int ldb, const T* beta,      \
		T* const c[], rocblas_int ldc, rocblas_int batch) {                                                           \
		NV_H(h);                                                                                                      \
		NV_ENUM(oa, nv_op, ta);                                                                                       \
		NV_ENUM(ob, nv_op, tb);                                                                                       \
		return NV(batched, cu, oa, ob, m, n, k, alpha, (const void* const*)a, lda, (const void* const*)b, ldb, beta,  \
		          (void* const*)c, ldc, batch);                                                                       \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##gemm_strided_batched(                                                     \
		rocblas_handle h, rocblas_operation ta, rocblas_operation tb, rocblas_int m, rocblas_int n, rocblas_int k,    \
		const T* alpha, const T* a, rocblas_int lda, rocblas_stride sa, const T* b, rocblas_int ldb,                  \
		rocblas_stride sb, const T* beta, T* c, rocblas_int ldc, rocblas_stride sc, rocblas_int batch) {              \
		NV_H(h);                                                                                                      \
		NV_ENUM(oa, nv_op, ta);                                                                                       \
		NV_ENUM(ob, nv_op, tb);                                                                                       \
		return NV(strided, cu, oa, ob, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);              \
	}
NV_GEMM(s, cublasSgemm_v2, cublasSgemmBatched, cublasSgemmStridedBatched, float)
NV_GEMM(d, cublasDgemm_v2, cublasDgemmBatched, cublasDgemmStridedBatched, double)
NV_GEMM(c, cublasCgemm_v2, cublasCgemmBatched, cublasCgemmStridedBatched, rocblas_float_complex)
NV_GEMM(z, cublasZgemm_v2, cublasZgemmBatched, cublasZgemmStridedBatched, rocblas_double_complex)
NV_GEMM(h, cublasHgemm, cublasHgemmBatched, cublasHgemmStridedBatched, rocblas_half)

// gemm_ex: the types of A and B, C and D, and the compute type; D other
// than C gets a copy of C first (unless beta is a host zero, when C is not
// read), then cuBLAS updates D in place.
static rocblas_status nv_ex_types(rocblas_datatype at, rocblas_datatype bt, rocblas_datatype ct, rocblas_datatype dt,
                                  rocblas_datatype compute, int* cat, int* cct, int* ccomp) {
	if (at != bt || ct != dt) return rocblas_status_not_implemented;
	*cat = nv_dtype(at), *cct = nv_dtype(ct), *ccomp = nv_compute(at, compute);
	if (*cat < 0 || *cct < 0 || *ccomp < 0) return rocblas_status_not_implemented;
	return rocblas_status_success;
}

static rocblas_status rgnv_rocblas_gemm_ex(rocblas_handle h, rocblas_operation ta, rocblas_operation tb, rocblas_int m,
                                           rocblas_int n, rocblas_int k, const void* alpha, const void* a,
                                           rocblas_datatype at, rocblas_int lda, const void* b, rocblas_datatype bt,
                                           rocblas_int ldb, const void* beta, const void* c, rocblas_datatype ct,
                                           rocblas_int ldc, void* d, rocblas_datatype dt, rocblas_int ldd,
                                           rocblas_datatype compute, rocblas_gemm_algo algo, int32_t solution,
                                           uint32_t flags) {
	NV_H(h);
	(void)algo, (void)solution, (void)flags;
	NV_ENUM(oa, nv_op, ta);
	NV_ENUM(ob, nv_op, tb);
	int cat, cct, ccomp;
	rocblas_status st = nv_ex_types(at, bt, ct, dt, compute, &cat, &cct, &ccomp);
	if (st != rocblas_status_success) return st;
	if (c == d && ldc != ldd) return rocblas_status_invalid_size;
	if (c != d && !nv_beta_zero(cu, beta, ccomp, ct)) {
		st = nv_copy_matrix(cu, d, ldd, c, ldc, m, n, nv_dsize(ct));
		if (st != rocblas_status_success) return st;
	}
	return NV(cublasGemmEx, cu, oa, ob, m, n, k, alpha, a, cat, lda, b, cat, ldb, beta, d, cct, ldd, ccomp, -1);
}

static rocblas_status rgnv_rocblas_gemm_strided_batched_ex(
	rocblas_handle h, rocblas_operation ta, rocblas_operation tb, rocblas_int m, rocblas_int n, rocblas_int k,
	const void* alpha, const void* a, rocblas_datatype at, rocblas_int lda, rocblas_stride sa, const void* b,
	rocblas_datatype bt, rocblas_int ldb, rocblas_stride sb, const void* beta, const void* c, rocblas_datatype ct,
	rocblas_int ldc, rocblas_stride sc, void* d, rocblas_datatype dt, rocblas_int ldd, rocblas_stride sd,
	rocblas_int batch, rocblas_datatype compute, rocblas_gemm_algo algo, int32_t solution, uint32_t flags) {
	NV_H(h);
	(void)algo, (void)solution, (void)flags;
	NV_ENUM(oa, nv_op, ta);
	NV_ENUM(ob, nv_op, tb);
	int cat, cct, ccomp;
	rocblas_status st = nv_ex_types(at, bt, ct, dt, compute, &cat, &cct, &ccomp);
	if (st != rocblas_status_success) return st;
	if (c == d && (ldc != ldd || sc != sd)) return rocblas_status_invalid_size;
	if (c != d && batch > 0 && !nv_beta_zero(cu, beta, ccomp, ct)) {
		size_t es = nv_dsize(ct);
		if (sc == (rocblas_stride)ldc * n && sd == (rocblas_stride)ldd * n) {
			// Packed batches: the columns of all of them, one after another.
			st = nv_copy_matrix(cu, d, ldd, c, ldc, m, n * batch, es);
		} else {
			for (int i = 0; st == rocblas_status_success && i < batch; i++)
				st = nv_copy_matrix(cu, (char*)d + (size_t)(i * sd) * es, ldd, (const char*)c + (size_t)(i * sc) * es, ldc, m, n, es);
		}
		if (st != rocblas_status_success) return st;
	}
	return NV(cublasGemmStridedBatchedEx, cu, oa, ob, m, n, k, alpha, a, cat, lda, (long long)sa, b, cat, ldb,
	          (long long)sb, beta, d, cct, ldd, (long long)sd, batch, ccomp, -1);
}

#define NV_TRSM(p, P, T)                                                                                              \
	static rocblas_status rgnv_rocblas_##p##trsm(rocblas_handle h, rocblas_side side, rocblas_fill uplo,               \
	                                             rocblas_operation trans, rocblas_diagonal diag, rocblas_int m,       \
	                                             rocblas_int n, const T* alpha, const T* a, rocblas_int lda, T* b,    \
	                                             rocblas_int ldb) {                                                   \
		NV_H(h);                                                                                                      \
		NV_ENUM(s, nv_side, side);                                                                                    \
		NV_ENUM(u, nv_fill, uplo);                                                                                    \
		NV_ENUM(t, nv_op, trans);                                                                                     \
		NV_ENUM(d, nv_diag, diag);                                                                                    \
		return NV(cublas##P##trsm_v2, cu, s, u, t, d, m, n, alpha, a, lda, b, ldb);                                   \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##trmm(rocblas_handle h, rocblas_side side, rocblas_fill uplo,               \
	                                             rocblas_operation trans, rocblas_diagonal diag, rocblas_int m,       \
	                                             rocblas_int n, const T* alpha, const T* a, rocblas_int lda,          \
	                                             const T* b, rocblas_int ldb, T* c, rocblas_int ldc) {                \
		NV_H(h);                                                                                                      \
		NV_ENUM(s, nv_side, side);                                                                                    \
		NV_ENUM(u, nv_fill, uplo);                                                                                    \
		NV_ENUM(t, nv_op, trans);                                                                                     \
		NV_ENUM(d, nv_diag, diag);                                                                                    \
		return NV(cublas##P##trmm_v2, cu, s, u, t, d, m, n, alpha, a, lda, b, ldb, c, ldc);                           \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##syrk(rocblas_handle h, rocblas_fill uplo, rocblas_operation trans,         \
	                                             rocblas_int n, rocblas_int k, const T* alpha, const T* a,            \
	                                             rocblas_int lda, const T* beta, T* c, rocblas_int ldc) {             \
		NV_H(h);                                                                                                      \
		NV_ENUM(u, nv_fill, uplo);                                                                                    \
		NV_ENUM(t, nv_op, trans);                                                                                     \
		return NV(cublas##P##syrk_v2, cu, u, t, n, k, alpha, a, lda, beta, c, ldc);                                   \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##symm(rocblas_handle h, rocblas_side side, rocblas_fill uplo,               \
	                                             rocblas_int m, rocblas_int n, const T* alpha, const T* a,            \
	                                             rocblas_int lda, const T* b, rocblas_int ldb, const T* beta, T* c,   \
	                                             rocblas_int ldc) {                                                   \
		NV_H(h);                                                                                                      \
		NV_ENUM(s, nv_side, side);                                                                                    \
		NV_ENUM(u, nv_fill, uplo);                                                                                    \
		return NV(cublas##P##symm_v2, cu, s, u, m, n, alpha, a, lda, b, ldb, beta, c, ldc);                           \
	}                                                                                                                 \
	static rocblas_status rgnv_rocblas_##p##geam(rocblas_handle h, rocblas_operation ta, rocblas_operation tb,         \
	                                             rocblas_int m, rocblas_int n, const T* alpha, const T* a,            \
	                                             rocblas_int lda, const T* beta, const T* b, rocblas_int ldb, T* c,   \
	                                             rocblas_int ldc) {                                                   \
		NV_H(h);                                                                                                      \
		NV_ENUM(oa, nv_op, ta);                                                                                       \
		NV_ENUM(ob, nv_op, tb);                                                                                       \
		return NV(cublas##P##geam, cu, oa, ob, m, n, alpha, a, lda, beta, b, ldb, c, ldc);                            \
	}
NV_TRSM(s, S, float)
NV_TRSM(d, D, double)
NV_TRSM(c, C, rocblas_float_complex)
NV_TRSM(z, Z, rocblas_double_complex)

// rg_rocblas_install_nvidia points the table at the translations above.
void rg_rocblas_install_nvidia(void* cublas, void* cudart) {
	rg_rocblas_unbind();
	rg_rocblas_cu_bind(rg_rocblas_cu_lib_cublas, cublas);
	rg_rocblas_cu_bind(rg_rocblas_cu_lib_cudart, cudart);
#define SET(name) rg_rocblas_set(rg_rocblas_idx_rocblas_##name, (void*)rgnv_rocblas_##name);
#define SET3(name) SET(name) SET(name##_batched) SET(name##_strided_batched)
#define SET_SDCZ(op) SET(s##op) SET(d##op) SET(c##op) SET(z##op)
	SET(status_to_string)
	SET(get_version_string_size)
	SET(get_version_string)
	SET(create_handle)
	SET(destroy_handle)
	SET(set_stream)
	SET(set_pointer_mode)
	SET(get_pointer_mode)
	SET(set_atomics_mode)
	SET(get_atomics_mode)
	SET(set_math_mode)
	SET(get_math_mode)
	SET(set_workspace)
	SET(get_device_memory_size)
	SET(is_managing_device_memory)
	SET3(saxpy) SET3(daxpy) SET3(caxpy) SET3(zaxpy)
	SET3(sdot) SET3(ddot) SET3(cdotu) SET3(cdotc) SET3(zdotu) SET3(zdotc)
	SET3(snrm2) SET3(dnrm2) SET3(scnrm2) SET3(dznrm2)
	SET3(sscal) SET3(dscal) SET3(cscal) SET3(zscal)
	SET3(sasum) SET3(dasum) SET3(scasum) SET3(dzasum)
	SET3(isamax) SET3(idamax) SET3(icamax) SET3(izamax)
	SET3(isamin) SET3(idamin) SET3(icamin) SET3(izamin)
	SET3(scopy) SET3(dcopy) SET3(ccopy) SET3(zcopy)
	SET3(sswap) SET3(dswap) SET3(cswap) SET3(zswap)
	SET3(srot) SET3(drot) SET3(crot) SET3(zrot)
	SET3(sgemv) SET3(dgemv) SET3(cgemv) SET3(zgemv)
	SET(sger) SET(dger) SET(cgeru) SET(cgerc) SET(zgeru) SET(zgerc)
	SET_SDCZ(symv) SET_SDCZ(trmv) SET_SDCZ(trsv)
	SET3(sgemm) SET3(dgemm) SET3(cgemm) SET3(zgemm) SET3(hgemm)
	SET(gemm_ex)
	SET(gemm_strided_batched_ex)
	SET_SDCZ(trsm) SET_SDCZ(syrk) SET_SDCZ(symm) SET_SDCZ(trmm) SET_SDCZ(geam)
#undef SET
#undef SET3
#undef SET_SDCZ
}

// rg_rocblas_nvidia_status translates a cuBLAS status as the NVIDIA
// platform does (for tests).
int rg_rocblas_nvidia_status(int cublas_status) { return (int)nv_status(cublas_status); }
