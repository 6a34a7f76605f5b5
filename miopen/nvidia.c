// The NVIDIA platform of package miopen: every function of the generated
// table translated to cuDNN 9's legacy API, opened with dlopen. No cuDNN
// header is needed: cgen.spec declares the functions called and nvidia.h
// the enum values used, with cuDNN 9's numbers (cudnn_graph.h, cudnn_ops.h,
// cudnn_cnn.h). This file holds statuses, handles and what the sections
// share; nvidia_tensor.c, nvidia_conv.c, nvidia_pool.c and nvidia_act.c
// translate one family each.
//
// MIOpen's descriptors become structs (nvidia.h) that hold the cuDNN
// descriptor and what a translation needs at call time (a tensor's type,
// dimensions and strides, to make the filter descriptor that cuDNN wants
// for weights). The handle holds scratch cuDNN convolution, filter and
// op-tensor descriptors that each call sets, so that descriptors stay
// read-only after they are set and may be shared between handles.
//
// What legacy cuDNN lacks is refused with miopenStatusNotImplemented:
// activation modes without a cuDNN twin (pass-through, soft ReLU, abs,
// power, leaky ReLU, tanh with alpha or beta other than 1), within-channel
// LRN, and multi-head attention (Find 2.0). Package miopen computes the
// first two with its own kernels and reports the third.
#include <stdlib.h>
#include <string.h>

#include "nvidia.h"

int nv_cublas_ok;

// nv_status translates a cuDNN status to MIOpen's, by name: the numbers of
// the two libraries have nothing in common.
miopenStatus_t nv_status(int s) {
	switch (s) {
	case RG_CUDA_MISSING:
		return RG_MIOPEN_CUDA_MISSING;
	case CUDNN_STATUS_SUCCESS:
		return miopenStatusSuccess;
	case CUDNN_STATUS_NOT_INITIALIZED:
	case CUDNN_STATUS_LICENSE_ERROR:
	case CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED:
		return miopenStatusNotInitialized;
	case CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH:
	case CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH:
		return miopenStatusVersionMismatch;
	case CUDNN_STATUS_INVALID_VALUE:
		return miopenStatusInvalidValue;
	case CUDNN_STATUS_BAD_PARAM:
	case CUDNN_STATUS_BAD_PARAM_NULL_POINTER:
	case CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER:
	case CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED:
	case CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND:
	case CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT:
	case CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH:
	case CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH:
	case CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES:
	case CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE:
	case CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH:
	case CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE:
		return miopenStatusBadParm;
	case CUDNN_STATUS_DEPRECATED:
	case CUDNN_STATUS_NOT_SUPPORTED:
	case CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN:
	case CUDNN_STATUS_NOT_SUPPORTED_SHAPE:
	case CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE:
	case CUDNN_STATUS_NOT_SUPPORTED_LAYOUT:
	case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER:
	case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART:
	case CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH:
	case CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING:
	case CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE:
	case CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT:
	case CUDNN_STATUS_NOT_SUPPORTED_PADDING:
	case CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM:
	case CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API:
		return miopenStatusNotImplemented;
	case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED:
	case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED:
		return miopenStatusAllocFailed;
	case CUDNN_STATUS_RUNTIME_FP_OVERFLOW:
	case CUDNN_STATUS_INTERNAL_ERROR:
	case CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED:
	case CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE:
	case CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM:
	case CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED:
	case CUDNN_STATUS_EXECUTION_FAILED:
	case CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER:
	case CUDNN_STATUS_EXECUTION_FAILED_CUBLAS:
	case CUDNN_STATUS_EXECUTION_FAILED_CUDART:
	case CUDNN_STATUS_EXECUTION_FAILED_CURAND:
		return miopenStatusInternalError;
	}
	return miopenStatusUnknownError; // CUDNN_STATUS_RUNTIME_IN_PROGRESS and codes newer than cuDNN 9.14
}

const char* rg_miopen_nvidia_status_name(int s) {
#define NAME(x) \
	case x: \
		return #x;
	switch (s) {
	NAME(CUDNN_STATUS_SUCCESS)
	NAME(CUDNN_STATUS_NOT_INITIALIZED)
	NAME(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)
	NAME(CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH)
	NAME(CUDNN_STATUS_DEPRECATED)
	NAME(CUDNN_STATUS_LICENSE_ERROR)
	NAME(CUDNN_STATUS_RUNTIME_IN_PROGRESS)
	NAME(CUDNN_STATUS_RUNTIME_FP_OVERFLOW)
	NAME(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED)
	NAME(CUDNN_STATUS_BAD_PARAM)
	NAME(CUDNN_STATUS_INVALID_VALUE)
	NAME(CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
	NAME(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
	NAME(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED)
	NAME(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND)
	NAME(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
	NAME(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)
	NAME(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH)
	NAME(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES)
	NAME(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE)
	NAME(CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH)
	NAME(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE)
	NAME(CUDNN_STATUS_NOT_SUPPORTED)
	NAME(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN)
	NAME(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)
	NAME(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)
	NAME(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)
	NAME(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER)
	NAME(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART)
	NAME(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH)
	NAME(CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING)
	NAME(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE)
	NAME(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT)
	NAME(CUDNN_STATUS_NOT_SUPPORTED_PADDING)
	NAME(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM)
	NAME(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API)
	NAME(CUDNN_STATUS_INTERNAL_ERROR)
	NAME(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED)
	NAME(CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE)
	NAME(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
	NAME(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
	NAME(CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM)
	NAME(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED)
	NAME(CUDNN_STATUS_EXECUTION_FAILED)
	NAME(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER)
	NAME(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS)
	NAME(CUDNN_STATUS_EXECUTION_FAILED_CUDART)
	NAME(CUDNN_STATUS_EXECUTION_FAILED_CURAND)
	}
#undef NAME
	return s == RG_CUDA_MISSING ? "(function missing from cuDNN)" : "CUDNN_STATUS_UNKNOWN";
}

int rg_miopen_nvidia_status(int cudnn_status) { return (int)nv_status(cudnn_status); }

// nvh records a failed cuDNN call of a handle for the error message and
// returns the status translated.
miopenStatus_t nvh(struct rgnv_handle* h, const char* fn, int st) {
	if (st != CUDNN_STATUS_SUCCESS && h != NULL) {
		h->last = st;
		h->last_fn = fn;
	}
	return nv_status(st);
}

int rg_miopen_nvidia_last(miopenHandle_t handle, const char** fn) {
	struct rgnv_handle* h = H(handle);
	if (h == NULL) return 0;
	int st = h->last;
	if (fn != NULL) *fn = h->last_fn;
	h->last = 0;
	h->last_fn = NULL;
	return st;
}

const void* nv_scale(const void* miopen_value, float dflt, const struct rgnv_tensor* t, nv_scalar* out) {
	float v = miopen_value != NULL ? *(const float*)miopen_value : dflt;
	if (t != NULL && t->dtype == miopenDouble) {
		out->d = v;
	} else {
		out->f = v;
	}
	return out;
}

const void* nv_value(float v, const struct rgnv_tensor* t, nv_scalar* out) { return nv_scale(&v, v, t, out); }

int nv_dtype(miopenDataType_t t) {
	switch (t) {
	case miopenHalf: return CUDNN_DATA_HALF;
	case miopenFloat: return CUDNN_DATA_FLOAT;
	case miopenInt32: return CUDNN_DATA_INT32;
	case miopenInt8: return CUDNN_DATA_INT8;
	case miopenBFloat16: return CUDNN_DATA_BFLOAT16;
	case miopenDouble: return CUDNN_DATA_DOUBLE;
	case miopenInt64: return CUDNN_DATA_INT64;
	}
	return -1;
}

int nv_compute(miopenDataType_t t) {
	switch (t) {
	case miopenDouble: return CUDNN_DATA_DOUBLE;
	case miopenInt8: return CUDNN_DATA_INT32;
	default: return CUDNN_DATA_FLOAT;
	}
}

size_t nv_dsize(miopenDataType_t t) {
	switch (t) {
	case miopenHalf: case miopenBFloat16: return 2;
	case miopenFloat: case miopenInt32: return 4;
	case miopenInt8: return 1;
	case miopenDouble: case miopenInt64: return 8;
	}
	return 0;
}

// ---- Errors, versions, handles ----

static const char* rgnv_miopenGetErrorString(miopenStatus_t s) {
	switch (s) {
	case miopenStatusSuccess: return "miopenStatusSuccess";
	case miopenStatusNotInitialized: return "miopenStatusNotInitialized";
	case miopenStatusInvalidValue: return "miopenStatusInvalidValue";
	case miopenStatusBadParm: return "miopenStatusBadParm";
	case miopenStatusAllocFailed: return "miopenStatusAllocFailed";
	case miopenStatusInternalError: return "miopenStatusInternalError";
	case miopenStatusNotImplemented: return "miopenStatusNotImplemented";
	case miopenStatusUnknownError: return "miopenStatusUnknownError";
	case miopenStatusUnsupportedOp: return "miopenStatusUnsupportedOp";
	case miopenStatusGpuOperationsSkipped: return "miopenStatusGpuOperationsSkipped";
	case miopenStatusVersionMismatch: return "miopenStatusVersionMismatch";
	}
	return "Unknown miopenStatus_t";
}

// cuDNN 9 reports major*10000 + minor*100 + patch.
static miopenStatus_t rgnv_miopenGetVersion(size_t* major, size_t* minor, size_t* patch) {
	rg_miopen_cu_fn_cudnnGetVersion f = RG_MIOPEN_CU(cudnnGetVersion);
	if (f == NULL) return RG_MIOPEN_CUDA_MISSING;
	size_t v = f();
	if (major != NULL) *major = v / 10000;
	if (minor != NULL) *minor = v % 10000 / 100;
	if (patch != NULL) *patch = v % 100;
	return miopenStatusSuccess;
}

static void nv_handle_free(struct rgnv_handle* h) {
	nv_graph_free(h);
	if (h->op != NULL) NV(cudnnDestroyOpTensorDescriptor, h->op);
	for (int i = 0; i < 2; i++) {
		if (h->filter[i] != NULL) NV(cudnnDestroyFilterDescriptor, h->filter[i]);
	}
	if (h->conv != NULL) NV(cudnnDestroyConvolutionDescriptor, h->conv);
	if (h->cublas != NULL) NV(cublasDestroy_v2, h->cublas);
	if (h->cudnn != NULL) NV(cudnnDestroy, h->cudnn);
	free(h);
}

static miopenStatus_t rgnv_miopenCreateWithStream(miopenHandle_t* out, miopenAcceleratorQueue_t stream) {
	if (out == NULL) return miopenStatusBadParm;
	struct rgnv_handle* h = calloc(1, sizeof *h);
	if (h == NULL) return miopenStatusAllocFailed;
	h->stream = stream;
	int st = NV(cudnnCreate, &h->cudnn);
	if (st == CUDNN_STATUS_SUCCESS) st = NV(cudnnSetStream, h->cudnn, stream);
	if (st == CUDNN_STATUS_SUCCESS) st = NV(cudnnCreateConvolutionDescriptor, &h->conv);
	if (st == CUDNN_STATUS_SUCCESS) st = NV(cudnnCreateFilterDescriptor, &h->filter[0]);
	if (st == CUDNN_STATUS_SUCCESS) st = NV(cudnnCreateFilterDescriptor, &h->filter[1]);
	if (st == CUDNN_STATUS_SUCCESS) st = NV(cudnnCreateOpTensorDescriptor, &h->op);
	if (st != CUDNN_STATUS_SUCCESS) {
		nv_handle_free(h);
		return nv_status(st);
	}
	*out = (miopenHandle_t)h;
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenDestroy(miopenHandle_t handle) {
	if (handle == NULL) return miopenStatusBadParm;
	nv_handle_free(H(handle));
	return miopenStatusSuccess;
}

// rg_miopen_install_nvidia points the table at the translations: each
// family's file installs its own.
void rg_miopen_install_nvidia(void* cudnn, void* cublas, void* cudart, int graph) {
	rg_miopen_unbind();
	rg_miopen_cu_bind(rg_miopen_cu_lib_cudnn, cudnn);
	// cuBLAS serves 1x1 convolutions only with cudart's events to time it.
	nv_cublas_ok = cublas != NULL && cudart != NULL;
	rg_miopen_cu_bind(rg_miopen_cu_lib_cublas, nv_cublas_ok ? cublas : NULL);
	rg_miopen_cu_bind(rg_miopen_cu_lib_cudart, cudart);
	// The graph API's plans are timed with cudart's events.
	nv_graph_ok = graph && cudart != NULL;
	SET(miopenGetErrorString);
	SET(miopenGetVersion);
	SET(miopenCreateWithStream);
	SET(miopenDestroy);
	nv_install_tensor();
	nv_install_conv();
	nv_install_pool();
	nv_install_act();
}
