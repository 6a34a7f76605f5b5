// The NVIDIA platform of package miopen: every function of the generated
// table translated to cuDNN 9's legacy API, opened with dlopen. No cuDNN
// header is needed: the prototypes and enum values used are declared here
// with cuDNN 9's numbers (cudnn_graph.h, cudnn_ops.h, cudnn_cnn.h).
//
// MIOpen's descriptors become structs of this file that hold the cuDNN
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
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

// cuDNN 9 statuses (cudnn_graph.h), translated to MIOpen's by name below.
#define CUDNN_STATUS_SUCCESS 0
#define CUDNN_STATUS_NOT_INITIALIZED 1001
#define CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH 1002
#define CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH 1003
#define CUDNN_STATUS_DEPRECATED 1004
#define CUDNN_STATUS_LICENSE_ERROR 1005
#define CUDNN_STATUS_RUNTIME_IN_PROGRESS 1006
#define CUDNN_STATUS_RUNTIME_FP_OVERFLOW 1007
#define CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED 1008
#define CUDNN_STATUS_BAD_PARAM 2000
#define CUDNN_STATUS_INVALID_VALUE 2001
#define CUDNN_STATUS_BAD_PARAM_NULL_POINTER 2002
#define CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER 2003
#define CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED 2004
#define CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND 2005
#define CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT 2006
#define CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH 2007
#define CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH 2008
#define CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES 2009
#define CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE 2010
#define CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH 2011
#define CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE 2012
#define CUDNN_STATUS_NOT_SUPPORTED 3000
#define CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN 3001
#define CUDNN_STATUS_NOT_SUPPORTED_SHAPE 3002
#define CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE 3003
#define CUDNN_STATUS_NOT_SUPPORTED_LAYOUT 3004
#define CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER 3005
#define CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART 3006
#define CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH 3007
#define CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING 3008
#define CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE 3009
#define CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT 3010
#define CUDNN_STATUS_NOT_SUPPORTED_PADDING 3011
#define CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM 3012
#define CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API 3013
#define CUDNN_STATUS_INTERNAL_ERROR 4000
#define CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED 4001
#define CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE 4002
#define CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED 4003
#define CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED 4004
#define CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM 4005
#define CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED 4006
#define CUDNN_STATUS_EXECUTION_FAILED 5000
#define CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER 5001
#define CUDNN_STATUS_EXECUTION_FAILED_CUBLAS 5002
#define CUDNN_STATUS_EXECUTION_FAILED_CUDART 5003
#define CUDNN_STATUS_EXECUTION_FAILED_CURAND 5004

// cudnnDataType_t
#define CUDNN_DATA_FLOAT 0
#define CUDNN_DATA_DOUBLE 1
#define CUDNN_DATA_HALF 2
#define CUDNN_DATA_INT8 3
#define CUDNN_DATA_INT32 4
#define CUDNN_DATA_BFLOAT16 9
#define CUDNN_DATA_INT64 10
// cudnnTensorFormat_t
#define CUDNN_TENSOR_NCHW 0
#define CUDNN_TENSOR_NHWC 1
// cudnnConvolutionMode_t: MIOpen's convolution is a cross-correlation.
#define CUDNN_CROSS_CORRELATION 1
// cudnnMathType_t
#define CUDNN_DEFAULT_MATH 0
#define CUDNN_TENSOR_OP_MATH 1
#define CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION 2
#define CUDNN_FMA_MATH 3
// cudnnNanPropagation_t
#define CUDNN_PROPAGATE_NAN 1
// cudnnActivationMode_t
#define CUDNN_ACTIVATION_SIGMOID 0
#define CUDNN_ACTIVATION_RELU 1
#define CUDNN_ACTIVATION_TANH 2
#define CUDNN_ACTIVATION_CLIPPED_RELU 3
#define CUDNN_ACTIVATION_ELU 4
// cudnnPoolingMode_t
#define CUDNN_POOLING_MAX 0
#define CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING 1
#define CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING 2
// cudnnLRNMode_t
#define CUDNN_LRN_CROSS_CHANNEL_DIM1 0
// The algorithm counts of cudnnConvolutionFwdAlgo_t, ...BwdDataAlgo_t and
// ...BwdFilterAlgo_t.
#define NV_FWD_ALGOS 8
#define NV_BWD_DATA_ALGOS 6
#define NV_BWD_FILTER_ALGOS 7

// cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t share this layout.
typedef struct {
	int algo;
	int status;
	float time;
	size_t memory;
	int determinism;
	int mathType;
	int reserved[3];
} nv_perf;

// NV(name, args...) calls a cuDNN function of the generated table
// (cgen.spec) and yields its raw status: RG_CUDA_MISSING when cuDNN lacks
// it.
#define NV(name, ...) RG_MIOPEN_CUDA(name, __VA_ARGS__)

// nv_status translates a cuDNN status to MIOpen's, by name: the numbers of
// the two libraries have nothing in common.
static miopenStatus_t nv_status(int s) {
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

// The structs behind MIOpen's handle and descriptors.
#define NV_MAXDIM 8

struct rgnv_handle {
	void* cudnn;
	void* stream;    // the stream the handle is bound to
	void* cublas;    // for 1x1 convolutions, made on first use
	void* conv;      // scratch convolution descriptor
	void* filter[2]; // scratch filter descriptors
	void* op;        // scratch op-tensor descriptor
	int last;        // the last failed cuDNN status, for error messages
	const char* last_fn;
};

struct rgnv_tensor {
	void* desc; // NULL until set; an int64 tensor has none (legacy cuDNN has no such type)
	int set;
	miopenDataType_t dtype;
	int nb;
	int dims[NV_MAXDIM];
	int strides[NV_MAXDIM];
};

struct rgnv_conv {
	int spatial; // 0 until initialized
	miopenConvolutionMode_t mode;
	int pad[3], stride[3], dil[3], adj[3];
	int groups;
};

struct rgnv_pool {
	void* desc;
	miopenPoolingMode_t mode;
	int nb; // spatial dimensions, 0 until set
	int win[3], pad[3], stride[3];
};

struct rgnv_lrn {
	void* desc;
	int set;
	miopenLRNMode_t mode;
	unsigned n;
	double alpha, beta, k;
};

struct rgnv_activ {
	void* desc;
	int set;
	int native; // cuDNN has the mode, with these parameters
	miopenActivationMode_t mode;
	double alpha, beta, gamma;
};

#define H(handle) ((struct rgnv_handle*)(handle))
#define T(desc) ((struct rgnv_tensor*)(desc))
#define CONV(desc) ((struct rgnv_conv*)(desc))
#define POOL(desc) ((struct rgnv_pool*)(desc))
#define LRN(desc) ((struct rgnv_lrn*)(desc))
#define ACT(desc) ((struct rgnv_activ*)(desc))

// nvh records a failed cuDNN call of a handle for the error message and
// returns the status translated.
static miopenStatus_t nvh(struct rgnv_handle* h, const char* fn, int st) {
	if (st != CUDNN_STATUS_SUCCESS && h != NULL) {
		h->last = st;
		h->last_fn = fn;
	}
	return nv_status(st);
}
#define NVH(h, name, ...) nvh((h), #name, NV(name, __VA_ARGS__))

int rg_miopen_nvidia_last(miopenHandle_t handle, const char** fn) {
	struct rgnv_handle* h = H(handle);
	if (h == NULL) return 0;
	int st = h->last;
	if (fn != NULL) *fn = h->last_fn;
	h->last = 0;
	h->last_fn = NULL;
	return st;
}

// ---- cuBLAS for 1x1 convolutions ----
//
// Legacy cuDNN's algorithms are slow for 1x1 convolutions of packed
// tensors, which are plain matrix products: Find also times cuBLAS on them
// (when libcublas loaded), and a forward run with that algorithm calls it.
// cudart supplies the events that time it.
// NVB calls a cuBLAS or cudart function of the generated table, as NV.
#define NVB(name, ...) RG_MIOPEN_CUDA(name, __VA_ARGS__)

// nv_cublas_ok says whether cuBLAS and cudart loaded (Find then times
// cuBLAS for 1x1 convolutions).
static int nv_cublas_ok;

// The algorithm number a Find returns for cuBLAS (cuDNN's are 0 to 7).
#define NV_ALGO_CUBLAS 100
// cuBLAS constants: cublasOperation_t, cudaDataType_t, cublasComputeType_t,
// cublasGemmAlgo_t.
#define NVB_OP_N 0
#define NVB_OP_T 1
#define NVB_R_32F 0
#define NVB_R_16F 2
#define NVB_R_16BF 14
#define NVB_COMPUTE_32F 68
#define NVB_GEMM_DEFAULT (-1)

// MIOpen reads alpha and beta as floats for every data type; cuDNN reads
// doubles for double data.
typedef union {
	float f;
	double d;
} nv_scalar;

static const void* nv_scale(const void* miopen_value, float dflt, const struct rgnv_tensor* t, nv_scalar* out) {
	float v = miopen_value != NULL ? *(const float*)miopen_value : dflt;
	if (t != NULL && t->dtype == miopenDouble) {
		out->d = v;
	} else {
		out->f = v;
	}
	return out;
}

static const void* nv_value(float v, const struct rgnv_tensor* t, nv_scalar* out) { return nv_scale(&v, v, t, out); }

static int nv_dtype(miopenDataType_t t) {
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

static size_t nv_dsize(miopenDataType_t t) {
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
	if (h->op != NULL) NV(cudnnDestroyOpTensorDescriptor, h->op);
	for (int i = 0; i < 2; i++) {
		if (h->filter[i] != NULL) NV(cudnnDestroyFilterDescriptor, h->filter[i]);
	}
	if (h->conv != NULL) NV(cudnnDestroyConvolutionDescriptor, h->conv);
	if (h->cublas != NULL) NVB(cublasDestroy_v2, h->cublas);
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

// ---- Tensor descriptors ----

static miopenStatus_t rgnv_miopenCreateTensorDescriptor(miopenTensorDescriptor_t* out) {
	if (out == NULL) return miopenStatusBadParm;
	struct rgnv_tensor* t = calloc(1, sizeof *t);
	if (t == NULL) return miopenStatusAllocFailed;
	int st = NV(cudnnCreateTensorDescriptor, &t->desc);
	if (st != CUDNN_STATUS_SUCCESS) {
		free(t);
		return nv_status(st);
	}
	*out = (miopenTensorDescriptor_t)t;
	return miopenStatusSuccess;
}

static miopenStatus_t nv_tensor_set(struct rgnv_tensor* t, miopenDataType_t dt, int nb, const int* dims, const int* strides) {
	int cdt = nv_dtype(dt);
	if (t == NULL || cdt < 0 || nb < 1 || nb > NV_MAXDIM || dims == NULL) return miopenStatusBadParm;
	int d[NV_MAXDIM], s[NV_MAXDIM];
	for (int i = 0; i < nb; i++) {
		if (dims[i] <= 0 || (strides != NULL && strides[i] <= 0)) return miopenStatusBadParm;
		d[i] = dims[i];
	}
	for (int i = nb - 1; i >= 0; i--) s[i] = strides != NULL ? strides[i] : (i == nb - 1 ? 1 : s[i + 1] * d[i + 1]);
	// cuDNN wants at least four dimensions: trailing ones of stride 1 view
	// the same memory.
	int cn = nb < 4 ? 4 : nb, cd[NV_MAXDIM], cs[NV_MAXDIM];
	for (int i = 0; i < cn; i++) {
		cd[i] = i < nb ? d[i] : 1;
		cs[i] = i < nb ? s[i] : 1;
	}
	int st = NV(cudnnSetTensorNdDescriptor, t->desc, cdt, cn, cd, cs);
	if (st != CUDNN_STATUS_SUCCESS && dt != miopenInt64) return nv_status(st);
	t->set = 1;
	t->dtype = dt;
	t->nb = nb;
	memcpy(t->dims, d, sizeof(int) * (size_t)nb);
	memcpy(t->strides, s, sizeof(int) * (size_t)nb);
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenSet4dTensorDescriptor(miopenTensorDescriptor_t d, miopenDataType_t dt, int n, int c, int h, int w) {
	int dims[4] = {n, c, h, w};
	return nv_tensor_set(T(d), dt, 4, dims, NULL);
}

static miopenStatus_t rgnv_miopenSetTensorDescriptor(miopenTensorDescriptor_t d, miopenDataType_t dt, int nb, const int* dims, const int* strides) {
	return nv_tensor_set(T(d), dt, nb, dims, strides);
}

// Lengths are in N, C, (D,) H, W order whatever the layout; a channels-last
// layout only changes the strides.
static miopenStatus_t rgnv_miopenSetNdTensorDescriptorWithLayout(miopenTensorDescriptor_t d, miopenDataType_t dt, miopenTensorLayout_t layout,
                                                                  const int* lens, int n) {
	if (lens == NULL) return miopenStatusBadParm;
	switch (layout) {
	case miopenTensorNCHW: case miopenTensorNCDHW:
		if (n != (layout == miopenTensorNCHW ? 4 : 5)) return miopenStatusBadParm;
		return nv_tensor_set(T(d), dt, n, lens, NULL);
	case miopenTensorNHWC: case miopenTensorNDHWC: {
		if (n != (layout == miopenTensorNHWC ? 4 : 5)) return miopenStatusBadParm;
		int s[5];
		s[1] = 1;
		int acc = lens[1];
		for (int i = n - 1; i >= 2; i--) {
			s[i] = acc;
			acc *= lens[i];
		}
		s[0] = acc;
		return nv_tensor_set(T(d), dt, n, lens, s);
	}
	default:
		return miopenStatusNotImplemented;
	}
}

static miopenStatus_t rgnv_miopenGetTensorDescriptorSize(miopenTensorDescriptor_t d, int* size) {
	if (d == NULL || size == NULL) return miopenStatusBadParm;
	*size = T(d)->nb;
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenGetTensorDescriptor(miopenTensorDescriptor_t d, miopenDataType_t* dt, int* dims, int* strides) {
	struct rgnv_tensor* t = T(d);
	if (t == NULL || !t->set) return miopenStatusBadParm;
	if (dt != NULL) *dt = t->dtype;
	for (int i = 0; i < t->nb; i++) {
		if (dims != NULL) dims[i] = t->dims[i];
		if (strides != NULL) strides[i] = t->strides[i];
	}
	return miopenStatusSuccess;
}

// The bytes a tensor spans: its last element's offset plus one, as MIOpen
// counts them.
static size_t nv_tensor_bytes(const struct rgnv_tensor* t) {
	size_t last = 0;
	for (int i = 0; i < t->nb; i++) last += (size_t)(t->dims[i] - 1) * (size_t)t->strides[i];
	return (last + 1) * nv_dsize(t->dtype);
}

static miopenStatus_t rgnv_miopenGetTensorNumBytes(miopenTensorDescriptor_t d, size_t* n) {
	if (d == NULL || n == NULL || !T(d)->set) return miopenStatusBadParm;
	*n = nv_tensor_bytes(T(d));
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenDestroyTensorDescriptor(miopenTensorDescriptor_t d) {
	if (d == NULL) return miopenStatusBadParm;
	int st = NV(cudnnDestroyTensorDescriptor, T(d)->desc);
	free(d);
	return nv_status(st);
}

// nv_ready checks the tensors of a call: set, and with a cuDNN descriptor.
static int nv_ready(int n, ...) {
	__builtin_va_list ap;
	__builtin_va_start(ap, n);
	int ok = 1;
	for (int i = 0; i < n; i++) {
		const struct rgnv_tensor* t = __builtin_va_arg(ap, const struct rgnv_tensor*);
		if (t == NULL || !t->set || nv_dtype(t->dtype) == CUDNN_DATA_INT64) ok = 0;
	}
	__builtin_va_end(ap);
	return ok;
}

static miopenStatus_t rgnv_miopenOpTensor(miopenHandle_t hh, miopenTensorOp_t op, const void* alpha1, const miopenTensorDescriptor_t a,
                                          const void* A, const void* alpha2, const miopenTensorDescriptor_t b, const void* B,
                                          const void* beta, const miopenTensorDescriptor_t c, void* C) {
	struct rgnv_handle* h = H(hh);
	if (h == NULL || !nv_ready(3, T(a), T(b), T(c)) || op < miopenTensorOpAdd || op > miopenTensorOpMax) return miopenStatusBadParm;
	// cudnnOpTensorOp_t numbers ADD, MUL, MIN, MAX as MIOpen does.
	int comp = T(c)->dtype == miopenDouble ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
	miopenStatus_t s = NVH(h, cudnnSetOpTensorDescriptor, h->op, (int)op, comp, CUDNN_PROPAGATE_NAN);
	if (s != miopenStatusSuccess) return s;
	nv_scalar s1, s2, sb;
	return NVH(h, cudnnOpTensor, h->cudnn, h->op, nv_scale(alpha1, 1, T(c), &s1), T(a)->desc, A, nv_scale(alpha2, 1, T(c), &s2),
	           T(b)->desc, B, nv_scale(beta, 0, T(c), &sb), T(c)->desc, C);
}

// ---- Convolutions ----

static miopenStatus_t rgnv_miopenCreateConvolutionDescriptor(miopenConvolutionDescriptor_t* out) {
	if (out == NULL) return miopenStatusBadParm;
	struct rgnv_conv* c = calloc(1, sizeof *c);
	if (c == NULL) return miopenStatusAllocFailed;
	c->groups = 1;
	*out = (miopenConvolutionDescriptor_t)c;
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenInitConvolutionNdDescriptor(miopenConvolutionDescriptor_t d, int n, const int* pad, const int* stride,
                                                             const int* dil, miopenConvolutionMode_t mode) {
	struct rgnv_conv* c = CONV(d);
	if (c == NULL || n < 1 || n > 3 || pad == NULL || stride == NULL || dil == NULL) return miopenStatusBadParm;
	if (mode != miopenConvolution && mode != miopenTranspose) return miopenStatusNotImplemented;
	for (int i = 0; i < n; i++) {
		if (pad[i] < 0 || stride[i] < 1 || dil[i] < 1) return miopenStatusBadParm;
	}
	c->spatial = n;
	c->mode = mode;
	for (int i = 0; i < n; i++) {
		c->pad[i] = pad[i];
		c->stride[i] = stride[i];
		c->dil[i] = dil[i];
		c->adj[i] = 0;
	}
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenGetConvolutionNdDescriptor(miopenConvolutionDescriptor_t d, int requested, int* n, int* pad, int* stride,
                                                            int* dil, miopenConvolutionMode_t* mode) {
	struct rgnv_conv* c = CONV(d);
	// As MIOpen: as many values as requested, no more than there are.
	if (c == NULL || c->spatial == 0 || requested > c->spatial || requested < 0) return miopenStatusBadParm;
	if (n != NULL) *n = c->spatial;
	if (mode != NULL) *mode = c->mode;
	for (int i = 0; i < requested; i++) {
		if (pad != NULL) pad[i] = c->pad[i];
		if (stride != NULL) stride[i] = c->stride[i];
		if (dil != NULL) dil[i] = c->dil[i];
	}
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenSetConvolutionGroupCount(miopenConvolutionDescriptor_t d, int g) {
	if (d == NULL || g < 1) return miopenStatusBadParm;
	CONV(d)->groups = g;
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenGetConvolutionGroupCount(miopenConvolutionDescriptor_t d, int* g) {
	if (d == NULL || g == NULL) return miopenStatusBadParm;
	*g = CONV(d)->groups;
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenSetTransposeConvNdOutputPadding(miopenConvolutionDescriptor_t d, int n, const int* adj) {
	struct rgnv_conv* c = CONV(d);
	if (c == NULL || adj == NULL || n != c->spatial) return miopenStatusBadParm;
	for (int i = 0; i < n; i++) {
		if (adj[i] < 0) return miopenStatusBadParm;
		c->adj[i] = adj[i];
	}
	return miopenStatusSuccess;
}

// The output dimensions, by MIOpen's formulas: a cross-correlation, or for
// a transposed convolution the data gradient of one (plus output padding).
static miopenStatus_t rgnv_miopenGetConvolutionNdForwardOutputDim(miopenConvolutionDescriptor_t d, const miopenTensorDescriptor_t xd,
                                                                  const miopenTensorDescriptor_t wd, int* nd, int* out) {
	struct rgnv_conv* c = CONV(d);
	struct rgnv_tensor *x = T(xd), *w = T(wd);
	if (c == NULL || c->spatial == 0 || !nv_ready(2, x, w) || nd == NULL || out == NULL) return miopenStatusBadParm;
	if (x->nb != c->spatial + 2 || w->nb != x->nb || w->dims[0] % c->groups != 0) return miopenStatusBadParm;
	int transposed = c->mode == miopenTranspose;
	if (transposed ? x->dims[1] != w->dims[0] : x->dims[1] != w->dims[1] * c->groups) return miopenStatusBadParm;
	out[0] = x->dims[0];
	out[1] = transposed ? w->dims[1] * c->groups : w->dims[0];
	for (int i = 0; i < c->spatial; i++) {
		int in = x->dims[i + 2], k = w->dims[i + 2];
		int v = transposed ? c->stride[i] * (in - 1) + c->dil[i] * (k - 1) + 1 - 2 * c->pad[i] + c->adj[i]
		                   : (in + 2 * c->pad[i] - c->dil[i] * (k - 1) - 1) / c->stride[i] + 1;
		if (v <= 0) return miopenStatusBadParm;
		out[i + 2] = v;
	}
	*nd = x->nb;
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenDestroyConvolutionDescriptor(miopenConvolutionDescriptor_t d) {
	if (d == NULL) return miopenStatusBadParm;
	free(d);
	return miopenStatusSuccess;
}

// The math a convolution of a data type runs with unless a Find chose
// otherwise: tensor cores for 16-bit data (accumulating in float, as
// MIOpen does), plain FMA for float (no TF32: MIOpen's float convolutions
// are float), the default for the rest.
static int nv_default_math(miopenDataType_t dt) {
	switch (dt) {
	case miopenHalf: case miopenBFloat16: return CUDNN_TENSOR_OP_MATH;
	case miopenFloat: return CUDNN_FMA_MATH;
	default: return CUDNN_DEFAULT_MATH;
	}
}

// nv_conv sets the handle's scratch convolution descriptor for data of
// type dt and the given math type.
static int nv_conv(struct rgnv_handle* h, const struct rgnv_conv* c, miopenDataType_t dt, int math) {
	int compute = dt == miopenDouble ? CUDNN_DATA_DOUBLE : dt == miopenInt8 ? CUDNN_DATA_INT32 : CUDNN_DATA_FLOAT;
	int st = NV(cudnnSetConvolutionNdDescriptor, h->conv, c->spatial, c->pad, c->stride, c->dil, CUDNN_CROSS_CORRELATION, compute);
	if (st == CUDNN_STATUS_SUCCESS) st = NV(cudnnSetConvolutionGroupCount, h->conv, c->groups);
	if (st == CUDNN_STATUS_SUCCESS) st = NV(cudnnSetConvolutionMathType, h->conv, math);
	if (st != CUDNN_STATUS_SUCCESS) {
		h->last = st;
		h->last_fn = "cudnnSetConvolutionNdDescriptor";
	}
	return st;
}

static int nv_packed(const struct rgnv_tensor* t, const int* order) {
	long expect = 1;
	for (int i = t->nb - 1; i >= 0; i--) {
		int d = order[i];
		if (t->dims[d] != 1 && t->strides[d] != expect) return 0;
		expect *= t->dims[d];
	}
	return 1;
}

// nv_filter sets scratch filter descriptor slot from a weights tensor.
// cuDNN filters are packed, KCRS (NCHW) or KRSC (NHWC); their dimensions
// are given in K, C, R, S order either way.
static int nv_filter(struct rgnv_handle* h, int slot, const struct rgnv_tensor* w) {
	static const int nchw[5] = {0, 1, 2, 3, 4}, nhwc4[4] = {0, 2, 3, 1}, nhwc5[5] = {0, 2, 3, 4, 1};
	int fmt;
	if (nv_packed(w, nchw)) {
		fmt = CUDNN_TENSOR_NCHW;
	} else if (nv_packed(w, w->nb == 4 ? nhwc4 : nhwc5)) {
		fmt = CUDNN_TENSOR_NHWC;
	} else {
		h->last = CUDNN_STATUS_NOT_SUPPORTED_LAYOUT;
		h->last_fn = "cudnnSetFilterNdDescriptor (weights must be packed NCHW or NHWC)";
		return CUDNN_STATUS_NOT_SUPPORTED_LAYOUT;
	}
	int st = NV(cudnnSetFilterNdDescriptor, h->filter[slot], nv_dtype(w->dtype), fmt, w->nb, w->dims);
	if (st != CUDNN_STATUS_SUCCESS) {
		h->last = st;
		h->last_fn = "cudnnSetFilterNdDescriptor";
	}
	return st;
}

// An algorithm that a Find on this platform returns carries the cuDNN
// algorithm and math type beside MIOpen's class of it:
// class | (cuDNN algorithm + 1) << 8 | (math type + 1) << 16.
#define NV_ENCODE(cls, algo, math) ((unsigned)(cls) | (unsigned)((algo) + 1) << 8 | (unsigned)((math) + 1) << 16)
#define NV_CLASS(raw) ((int)((raw) & 0xff))
#define NV_ALGO(raw) ((int)(((raw) >> 8) & 0xff) - 1)
#define NV_MATH(raw) ((int)(((raw) >> 16) & 0xff) - 1)

// nv_class is MIOpen's name for a cuDNN algorithm (miopenConvAlgorithm_t).
static int nv_class(int kind, int algo) {
	static const int fwd[NV_FWD_ALGOS] = {5, 5, 0, 1, 2, 2, 3, 3};    // implicit GEMM x2, GEMM, direct, FFT x2, Winograd x2
	static const int data[NV_BWD_DATA_ALGOS] = {5, 5, 2, 2, 3, 3};      // ALGO_0, ALGO_1, FFT x2, Winograd x2
	static const int filter[NV_BWD_FILTER_ALGOS] = {5, 0, 2, 5, 3, 3, 2}; // ALGO_0, ALGO_1, FFT, ALGO_3, Winograd x2, FFT tiling
	switch (kind) {
	case RG_NV_ALGO_FWD: return algo >= 0 && algo < NV_FWD_ALGOS ? fwd[algo] : 5;
	case RG_NV_ALGO_BWD_DATA: return algo >= 0 && algo < NV_BWD_DATA_ALGOS ? data[algo] : 5;
	}
	return algo >= 0 && algo < NV_BWD_FILTER_ALGOS ? filter[algo] : 5;
}

// nv_default_algo is the cuDNN algorithm run for a plain MIOpen algorithm
// that no Find on this platform returned.
static int nv_default_algo(int kind, int cls) {
	switch (kind) {
	case RG_NV_ALGO_FWD:
		switch (cls) {
		case 0: return 2;  // GEMM
		case 1: return 0;  // direct: cuDNN's DIRECT is not implemented; implicit GEMM
		case 2: return 5;  // FFT tiling
		case 3: return 7;  // Winograd (non-fused: any filter size)
		}
		return 1; // implicit precomputed GEMM
	case RG_NV_ALGO_BWD_DATA:
		switch (cls) {
		case 2: return 3;
		case 3: return 5;
		}
		return 1;
	}
	switch (cls) {
	case 2: return 6;
	case 3: return 5;
	}
	return 1;
}

static void nv_decode(int kind, unsigned raw, miopenDataType_t dt, int* algo, int* math) {
	*algo = NV_ALGO(raw);
	*math = NV_MATH(raw);
	if (*algo < 0) *algo = nv_default_algo(kind, NV_CLASS(raw));
	if (*math < 0) *math = nv_default_math(dt);
}

static const char* const nv_algo_names[3][8] = {
	{"CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM", "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM",
	 "CUDNN_CONVOLUTION_FWD_ALGO_GEMM", "CUDNN_CONVOLUTION_FWD_ALGO_DIRECT", "CUDNN_CONVOLUTION_FWD_ALGO_FFT",
	 "CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING", "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD",
	 "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED"},
	{"CUDNN_CONVOLUTION_BWD_DATA_ALGO_0", "CUDNN_CONVOLUTION_BWD_DATA_ALGO_1", "CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT",
	 "CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING", "CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD",
	 "CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED"},
	{"CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT",
	 "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD",
	 "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING"},
};
static const char* const nv_math_names[4] = {"CUDNN_DEFAULT_MATH", "CUDNN_TENSOR_OP_MATH",
                                             "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION", "CUDNN_FMA_MATH"};

// rg_miopen_nvidia_algo_name names the cuDNN algorithm and math type of an
// encoded algorithm: "CUDNN_..._ALGO_... with CUDNN_TENSOR_OP_MATH".
const char* rg_miopen_nvidia_algo_name(int kind, unsigned raw) {
	static __thread char buf[128];
	int algo = NV_ALGO(raw), math = NV_MATH(raw);
	if (kind == RG_NV_ALGO_FWD && algo == NV_ALGO_CUBLAS) return "cuBLAS GEMM (a 1x1 convolution as a matrix product)";
	int n = kind == RG_NV_ALGO_FWD ? NV_FWD_ALGOS : kind == RG_NV_ALGO_BWD_DATA ? NV_BWD_DATA_ALGOS : NV_BWD_FILTER_ALGOS;
	if (kind < 0 || kind > 2 || algo < 0 || algo >= n) return NULL;
	strcpy(buf, nv_algo_names[kind][algo]);
	if (math >= 0 && math < 4) {
		strcat(buf, " with ");
		strcat(buf, nv_math_names[math]);
	}
	return buf;
}

// The cuDNN call a MIOpen direction becomes: a transposed convolution's
// forward is cuDNN's backward data and its backward data cuDNN's forward.
static int nv_kind_fwd(const struct rgnv_conv* c) { return c->mode == miopenTranspose ? RG_NV_ALGO_BWD_DATA : RG_NV_ALGO_FWD; }
static int nv_kind_bwd_data(const struct rgnv_conv* c) { return c->mode == miopenTranspose ? RG_NV_ALGO_FWD : RG_NV_ALGO_BWD_DATA; }

// nv_ws is the largest workspace any cuDNN algorithm of a kind needs, with
// the default math of the data type or the default math, as MIOpen reports
// one size for all of its algorithms. For RG_NV_ALGO_FWD in is x and out y,
// for RG_NV_ALGO_BWD_DATA in is dy and out dx, for RG_NV_ALGO_BWD_FILTER in
// is x, out dy and w dw.
static miopenStatus_t nv_ws(struct rgnv_handle* h, int kind, const struct rgnv_tensor* in, const struct rgnv_tensor* w,
                            const struct rgnv_conv* c, const struct rgnv_tensor* out, size_t* size) {
	if (h == NULL || c == NULL || c->spatial == 0 || !nv_ready(3, in, w, out) || size == NULL) return miopenStatusBadParm;
	int st = nv_filter(h, 0, w);
	if (st != CUDNN_STATUS_SUCCESS) return nv_status(st);
	int maths[2] = {nv_default_math(in->dtype), CUDNN_DEFAULT_MATH};
	int n = kind == RG_NV_ALGO_FWD ? NV_FWD_ALGOS : kind == RG_NV_ALGO_BWD_DATA ? NV_BWD_DATA_ALGOS : NV_BWD_FILTER_ALGOS;
	size_t best = 0;
	int any = 0, last = CUDNN_STATUS_NOT_SUPPORTED;
	for (int m = 0; m < 2; m++) {
		if ((st = nv_conv(h, c, in->dtype, maths[m])) != CUDNN_STATUS_SUCCESS) return nv_status(st);
		for (int a = 0; a < n; a++) {
			size_t s = 0;
			switch (kind) {
			case RG_NV_ALGO_FWD:
				st = NV(cudnnGetConvolutionForwardWorkspaceSize, h->cudnn, in->desc, h->filter[0], h->conv, out->desc, a, &s);
				break;
			case RG_NV_ALGO_BWD_DATA:
				st = NV(cudnnGetConvolutionBackwardDataWorkspaceSize, h->cudnn, h->filter[0], in->desc, h->conv, out->desc, a, &s);
				break;
			default:
				st = NV(cudnnGetConvolutionBackwardFilterWorkspaceSize, h->cudnn, in->desc, out->desc, h->conv, h->filter[0], a, &s);
			}
			if (st == RG_CUDA_MISSING) return RG_MIOPEN_CUDA_MISSING;
			if (st == CUDNN_STATUS_SUCCESS) {
				any = 1;
				if (s > best) best = s;
			} else {
				last = st;
			}
		}
	}
	if (!any) return nvh(h, "cudnnGetConvolutionWorkspaceSize (every algorithm)", last);
	*size = best;
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenConvolutionForwardGetWorkSpaceSize(miopenHandle_t h, const miopenTensorDescriptor_t w,
                                                                    const miopenTensorDescriptor_t x, const miopenConvolutionDescriptor_t c,
                                                                    const miopenTensorDescriptor_t y, size_t* size) {
	if (c == NULL) return miopenStatusBadParm;
	return nv_ws(H(h), nv_kind_fwd(CONV(c)), T(x), T(w), CONV(c), T(y), size);
}

static miopenStatus_t rgnv_miopenConvolutionBackwardDataGetWorkSpaceSize(miopenHandle_t h, const miopenTensorDescriptor_t dy,
                                                                         const miopenTensorDescriptor_t w, const miopenConvolutionDescriptor_t c,
                                                                         const miopenTensorDescriptor_t dx, size_t* size) {
	if (c == NULL) return miopenStatusBadParm;
	return nv_ws(H(h), nv_kind_bwd_data(CONV(c)), T(dy), T(w), CONV(c), T(dx), size);
}

static miopenStatus_t rgnv_miopenConvolutionBackwardWeightsGetWorkSpaceSize(miopenHandle_t h, const miopenTensorDescriptor_t dy,
                                                                            const miopenTensorDescriptor_t x, const miopenConvolutionDescriptor_t c,
                                                                            const miopenTensorDescriptor_t dw, size_t* size) {
	if (c == NULL) return miopenStatusBadParm;
	int transposed = CONV(c)->mode == miopenTranspose;
	return nv_ws(H(h), RG_NV_ALGO_BWD_FILTER, transposed ? T(dy) : T(x), T(dw), CONV(c), transposed ? T(x) : T(dy), size);
}

// nv_gemm is a 1x1 convolution as a matrix product. NHWC: y[NHW x K] =
// x[NHW x C] w[K x C]^T, one GEMM. NCHW: per image y[K x HW] = w[K x C]
// x[C x HW], a strided batch. In cuBLAS's column-major terms both are
// C(m x n) = op(A) op(B) below.
struct nv_gemm {
	int transa, transb, m, n, k, lda, ldb, ldc, batch, dtype;
	long long strideA, strideB, strideC;
	int aIsX; // A is x (NCHW) or w (NHWC)
};

// nv_gemm_plan says whether a forward convolution is a plain matrix product
// cuBLAS can compute: 1x1 filters, no padding, stride and dilation 1, one
// group, packed tensors of one 16- or 32-bit float type in one layout.
static int nv_gemm_plan(const struct rgnv_conv* c, const struct rgnv_tensor* x, const struct rgnv_tensor* w,
                        const struct rgnv_tensor* y, struct nv_gemm* g) {
	if (!nv_cublas_ok || c->mode == miopenTranspose || c->groups != 1 || x->nb != c->spatial + 2) return 0;
	if (x->dtype != w->dtype || x->dtype != y->dtype) return 0;
	switch (x->dtype) {
	case miopenHalf: g->dtype = NVB_R_16F; break;
	case miopenBFloat16: g->dtype = NVB_R_16BF; break;
	case miopenFloat: g->dtype = NVB_R_32F; break;
	default: return 0;
	}
	long long hw = 1;
	for (int i = 0; i < c->spatial; i++) {
		if (w->dims[2 + i] != 1 || c->pad[i] != 0 || c->stride[i] != 1 || c->dil[i] != 1) return 0;
		hw *= x->dims[2 + i];
	}
	static const int nchw[5] = {0, 1, 2, 3, 4}, nhwc4[4] = {0, 2, 3, 1}, nhwc5[5] = {0, 2, 3, 4, 1};
	const int* cl = x->nb == 4 ? nhwc4 : nhwc5;
	long long n = x->dims[0], ch = x->dims[1], k = w->dims[0];
	if (w->dims[1] != ch || y->dims[0] != n || y->dims[1] != k || n * hw > 0x7fffffff) return 0;
	if (!nv_packed(w, nchw) && !nv_packed(w, cl)) return 0;
	if (nv_packed(x, cl) && nv_packed(y, cl)) {
		*g = (struct nv_gemm){NVB_OP_T, NVB_OP_N, (int)k, (int)(n * hw), (int)ch, (int)ch, (int)ch, (int)k, 1, g->dtype, 0, 0, 0, 0};
		return 1;
	}
	if (nv_packed(x, nchw) && nv_packed(y, nchw)) {
		*g = (struct nv_gemm){NVB_OP_N, NVB_OP_N, (int)hw, (int)k, (int)ch, (int)hw, (int)ch, (int)hw, (int)n, g->dtype,
		                      ch * hw, 0, k * hw, 1};
		return 1;
	}
	return 0;
}

// nv_gemm_run computes y = alpha conv(x, w) + beta y with cuBLAS, on the
// handle's stream, in float arithmetic.
static miopenStatus_t nv_gemm_run(struct rgnv_handle* h, const struct nv_gemm* g, const void* alpha, const void* x,
                                  const void* w, const void* beta, void* y) {
	if (h->cublas == NULL) {
		void* b = NULL;
		if (NVB(cublasCreate_v2, &b) != 0) return miopenStatusInternalError;
		if (NVB(cublasSetStream_v2, b, h->stream) != 0) {
			NVB(cublasDestroy_v2, b);
			return miopenStatusInternalError;
		}
		h->cublas = b;
	}
	float one = 1, zero = 0;
	const void* a = alpha != NULL ? alpha : &one;
	const void* bt = beta != NULL ? beta : &zero;
	const void* A = g->aIsX ? x : w;
	const void* B = g->aIsX ? w : x;
	int st = g->batch == 1
	             ? NVB(cublasGemmEx, h->cublas, g->transa, g->transb, g->m, g->n, g->k, a, A, g->dtype, g->lda, B, g->dtype,
	                   g->ldb, bt, y, g->dtype, g->ldc, NVB_COMPUTE_32F, NVB_GEMM_DEFAULT)
	             : NVB(cublasGemmStridedBatchedEx, h->cublas, g->transa, g->transb, g->m, g->n, g->k, a, A, g->dtype, g->lda,
	                   g->strideA, B, g->dtype, g->ldb, g->strideB, bt, y, g->dtype, g->ldc, g->strideC, g->batch,
	                   NVB_COMPUTE_32F, NVB_GEMM_DEFAULT);
	if (st != 0) {
		h->last = CUDNN_STATUS_EXECUTION_FAILED;
		h->last_fn = g->batch == 1 ? "cublasGemmEx (1x1 convolution)" : "cublasGemmStridedBatchedEx (1x1 convolution)";
		return miopenStatusInternalError;
	}
	return miopenStatusSuccess;
}

// nv_gemm_time times the cuBLAS 1x1 convolution (the median of three runs
// after a warm-up, between events on the handle's stream), in ms; < 0 when
// it cannot run.
static float nv_gemm_time(struct rgnv_handle* h, const struct nv_gemm* g, const void* x, const void* w, void* y) {
	void *start = NULL, *end = NULL;
	float t[3] = {-1, -1, -1}, ms = -1;
	if (nv_gemm_run(h, g, NULL, x, w, NULL, y) != miopenStatusSuccess) return -1;
	if (NVB(cudaEventCreate, &start) != 0 || NVB(cudaEventCreate, &end) != 0) goto out;
	for (int i = 0; i < 3; i++) {
		if (NVB(cudaEventRecord, start, h->stream) != 0 || nv_gemm_run(h, g, NULL, x, w, NULL, y) != miopenStatusSuccess ||
		    NVB(cudaEventRecord, end, h->stream) != 0 || NVB(cudaEventSynchronize, end) != 0 ||
		    NVB(cudaEventElapsedTime, &t[i], start, end) != 0)
			goto out;
	}
	// The median of three.
	ms = t[0] > t[1] ? (t[1] > t[2] ? t[1] : (t[0] > t[2] ? t[2] : t[0])) : (t[0] > t[2] ? t[0] : (t[1] > t[2] ? t[2] : t[1]));
out:
	if (start != NULL) NVB(cudaEventDestroy, start);
	if (end != NULL) NVB(cudaEventDestroy, end);
	return ms;
}

// nv_find runs cuDNN's Find for a kind (arguments as in nv_ws, with their
// data) and returns the algorithms that ran, fastest first, encoded.
static miopenStatus_t nv_find(struct rgnv_handle* h, int kind, const struct rgnv_tensor* in, const void* inp, const struct rgnv_tensor* w,
                              const void* wp, const struct rgnv_conv* c, const struct rgnv_tensor* out, void* outp, int request,
                              int* returned, miopenConvAlgoPerf_t* perfs, void* ws, size_t wsSize) {
	if (h == NULL || c == NULL || c->spatial == 0 || !nv_ready(3, in, w, out) || returned == NULL || perfs == NULL || request < 1)
		return miopenStatusBadParm;
	int st = nv_filter(h, 0, w);
	if (st == CUDNN_STATUS_SUCCESS) st = nv_conv(h, c, in->dtype, nv_default_math(in->dtype));
	if (st != CUDNN_STATUS_SUCCESS) return nv_status(st);
	nv_perf found[NV_FWD_ALGOS];
	int n = 0;
	miopenStatus_t s;
	switch (kind) {
	case RG_NV_ALGO_FWD:
		s = NVH(h, cudnnFindConvolutionForwardAlgorithmEx, h->cudnn, in->desc, inp, h->filter[0], wp, h->conv, out->desc, outp,
		        NV_FWD_ALGOS, &n, found, ws, wsSize);
		break;
	case RG_NV_ALGO_BWD_DATA:
		s = NVH(h, cudnnFindConvolutionBackwardDataAlgorithmEx, h->cudnn, h->filter[0], wp, in->desc, inp, h->conv, out->desc, outp,
		        NV_BWD_DATA_ALGOS, &n, found, ws, wsSize);
		break;
	default:
		s = NVH(h, cudnnFindConvolutionBackwardFilterAlgorithmEx, h->cudnn, in->desc, inp, out->desc, outp, h->conv, h->filter[0],
		        (void*)wp, NV_BWD_FILTER_ALGOS, &n, found, ws, wsSize);
	}
	if (s != miopenStatusSuccess) return s;
	// A 1x1 forward convolution may also run as a cuBLAS matrix product:
	// time it and place it among cuDNN's, which come fastest first.
	struct nv_gemm g;
	float gemm = -1;
	if (kind == RG_NV_ALGO_FWD && nv_gemm_plan(c, in, w, out, &g)) gemm = nv_gemm_time(h, &g, inp, wp, outp);
	int k = 0;
	for (int i = 0; i <= n && k < request; i++) {
		if (gemm >= 0 && (i == n || found[i].status != CUDNN_STATUS_SUCCESS || gemm < found[i].time)) {
			perfs[k].fwd_algo = (miopenConvFwdAlgorithm_t)NV_ENCODE(0, NV_ALGO_CUBLAS, -1);
			perfs[k].time = gemm;
			perfs[k].memory = 0;
			k++;
			gemm = -1;
			i--;
			continue;
		}
		if (i == n || found[i].status != CUDNN_STATUS_SUCCESS) continue;
		perfs[k].fwd_algo = (miopenConvFwdAlgorithm_t)NV_ENCODE(nv_class(kind, found[i].algo), found[i].algo, found[i].mathType);
		perfs[k].time = found[i].time;
		perfs[k].memory = found[i].memory;
		k++;
	}
	*returned = k;
	if (k == 0) return nvh(h, "cudnnFindConvolution*AlgorithmEx (no algorithm ran)", CUDNN_STATUS_NOT_SUPPORTED);
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenFindConvolutionForwardAlgorithm(miopenHandle_t h, const miopenTensorDescriptor_t xd, const void* x,
                                                                 const miopenTensorDescriptor_t wd, const void* w,
                                                                 const miopenConvolutionDescriptor_t c, const miopenTensorDescriptor_t yd,
                                                                 void* y, const int request, int* returned, miopenConvAlgoPerf_t* perfs,
                                                                 void* ws, size_t wsSize, _Bool exhaustive) {
	(void)exhaustive; // cuDNN's Find runs every algorithm
	if (c == NULL) return miopenStatusBadParm;
	return nv_find(H(h), nv_kind_fwd(CONV(c)), T(xd), x, T(wd), w, CONV(c), T(yd), y, request, returned, perfs, ws, wsSize);
}

static miopenStatus_t rgnv_miopenFindConvolutionBackwardDataAlgorithm(miopenHandle_t h, const miopenTensorDescriptor_t dyd, const void* dy,
                                                                      const miopenTensorDescriptor_t wd, const void* w,
                                                                      const miopenConvolutionDescriptor_t c, const miopenTensorDescriptor_t dxd,
                                                                      void* dx, const int request, int* returned,
                                                                      miopenConvAlgoPerf_t* perfs, void* ws, size_t wsSize, _Bool exhaustive) {
	(void)exhaustive;
	if (c == NULL) return miopenStatusBadParm;
	return nv_find(H(h), nv_kind_bwd_data(CONV(c)), T(dyd), dy, T(wd), w, CONV(c), T(dxd), dx, request, returned, perfs, ws, wsSize);
}

static miopenStatus_t rgnv_miopenFindConvolutionBackwardWeightsAlgorithm(miopenHandle_t h, const miopenTensorDescriptor_t dyd,
                                                                         const void* dy, const miopenTensorDescriptor_t xd, const void* x,
                                                                         const miopenConvolutionDescriptor_t c,
                                                                         const miopenTensorDescriptor_t dwd, void* dw, const int request,
                                                                         int* returned, miopenConvAlgoPerf_t* perfs, void* ws,
                                                                         size_t wsSize, _Bool exhaustive) {
	(void)exhaustive;
	if (c == NULL) return miopenStatusBadParm;
	if (CONV(c)->mode == miopenTranspose) {
		return nv_find(H(h), RG_NV_ALGO_BWD_FILTER, T(dyd), dy, T(dwd), dw, CONV(c), T(xd), (void*)x, request, returned, perfs, ws, wsSize);
	}
	return nv_find(H(h), RG_NV_ALGO_BWD_FILTER, T(xd), x, T(dwd), dw, CONV(c), T(dyd), (void*)dy, request, returned, perfs, ws, wsSize);
}

// nv_run runs one convolution: RG_NV_ALGO_FWD computes out (y) from in (x),
// RG_NV_ALGO_BWD_DATA out (dx) from in (dy); both with the weights w.
static miopenStatus_t nv_run(struct rgnv_handle* h, int kind, unsigned raw, const void* alpha, const struct rgnv_tensor* in, const void* inp,
                             const struct rgnv_tensor* w, const void* wp, const struct rgnv_conv* c, const void* beta,
                             const struct rgnv_tensor* out, void* outp, void* ws, size_t wsSize) {
	if (h == NULL || c == NULL || c->spatial == 0 || !nv_ready(3, in, w, out)) return miopenStatusBadParm;
	int algo, math;
	nv_decode(kind, raw, in->dtype, &algo, &math);
	if (algo == NV_ALGO_CUBLAS) {
		struct nv_gemm g;
		if (kind != RG_NV_ALGO_FWD || !nv_gemm_plan(c, in, w, out, &g)) return miopenStatusBadParm;
		return nv_gemm_run(h, &g, alpha, inp, wp, beta, outp);
	}
	int st = nv_filter(h, 0, w);
	if (st == CUDNN_STATUS_SUCCESS) st = nv_conv(h, c, in->dtype, math);
	if (st != CUDNN_STATUS_SUCCESS) return nv_status(st);
	nv_scalar a, b;
	if (kind == RG_NV_ALGO_FWD) {
		return NVH(h, cudnnConvolutionForward, h->cudnn, nv_scale(alpha, 1, out, &a), in->desc, inp, h->filter[0], wp, h->conv, algo, ws,
		           wsSize, nv_scale(beta, 0, out, &b), out->desc, outp);
	}
	return NVH(h, cudnnConvolutionBackwardData, h->cudnn, nv_scale(alpha, 1, out, &a), h->filter[0], wp, in->desc, inp, h->conv, algo, ws,
	           wsSize, nv_scale(beta, 0, out, &b), out->desc, outp);
}

static miopenStatus_t rgnv_miopenConvolutionForward(miopenHandle_t h, const void* alpha, const miopenTensorDescriptor_t xd, const void* x,
                                                    const miopenTensorDescriptor_t wd, const void* w, const miopenConvolutionDescriptor_t c,
                                                    miopenConvFwdAlgorithm_t algo, const void* beta, const miopenTensorDescriptor_t yd,
                                                    void* y, void* ws, size_t wsSize) {
	if (c == NULL) return miopenStatusBadParm;
	return nv_run(H(h), nv_kind_fwd(CONV(c)), (unsigned)algo, alpha, T(xd), x, T(wd), w, CONV(c), beta, T(yd), y, ws, wsSize);
}

static miopenStatus_t rgnv_miopenConvolutionBackwardData(miopenHandle_t h, const void* alpha, const miopenTensorDescriptor_t dyd,
                                                         const void* dy, const miopenTensorDescriptor_t wd, const void* w,
                                                         const miopenConvolutionDescriptor_t c, miopenConvBwdDataAlgorithm_t algo,
                                                         const void* beta, const miopenTensorDescriptor_t dxd, void* dx, void* ws,
                                                         size_t wsSize) {
	if (c == NULL) return miopenStatusBadParm;
	return nv_run(H(h), nv_kind_bwd_data(CONV(c)), (unsigned)algo, alpha, T(dyd), dy, T(wd), w, CONV(c), beta, T(dxd), dx, ws, wsSize);
}

static miopenStatus_t rgnv_miopenConvolutionBackwardWeights(miopenHandle_t hh, const void* alpha, const miopenTensorDescriptor_t dyd,
                                                            const void* dy, const miopenTensorDescriptor_t xd, const void* x,
                                                            const miopenConvolutionDescriptor_t cd, miopenConvBwdWeightsAlgorithm_t raw,
                                                            const void* beta, const miopenTensorDescriptor_t dwd, void* dw, void* ws,
                                                            size_t wsSize) {
	struct rgnv_handle* h = H(hh);
	struct rgnv_conv* c = CONV(cd);
	if (h == NULL || c == NULL || c->spatial == 0 || !nv_ready(3, T(dyd), T(xd), T(dwd))) return miopenStatusBadParm;
	// The weights gradient correlates the forward input with the output
	// gradient; a transposed convolution swaps which is which.
	const struct rgnv_tensor *in = T(xd), *grad = T(dyd);
	const void *inp = x, *gradp = dy;
	if (c->mode == miopenTranspose) {
		in = T(dyd), grad = T(xd);
		inp = dy, gradp = x;
	}
	int algo, math;
	nv_decode(RG_NV_ALGO_BWD_FILTER, (unsigned)raw, in->dtype, &algo, &math);
	int st = nv_filter(h, 0, T(dwd));
	if (st == CUDNN_STATUS_SUCCESS) st = nv_conv(h, c, in->dtype, math);
	if (st != CUDNN_STATUS_SUCCESS) return nv_status(st);
	nv_scalar a, b;
	return NVH(h, cudnnConvolutionBackwardFilter, h->cudnn, nv_scale(alpha, 1, T(dwd), &a), in->desc, inp, grad->desc, gradp, h->conv, algo,
	           ws, wsSize, nv_scale(beta, 0, T(dwd), &b), h->filter[0], dw);
}

// MIOpen adds the bias as y = alpha*y + alpha*b + beta*y; cuDNN's AddTensor
// computes y = alpha*b + beta*y.
static miopenStatus_t rgnv_miopenConvolutionForwardBias(miopenHandle_t hh, const void* alpha, const miopenTensorDescriptor_t bd, const void* b,
                                                        const void* beta, const miopenTensorDescriptor_t yd, void* y) {
	struct rgnv_handle* h = H(hh);
	if (h == NULL || !nv_ready(2, T(bd), T(yd))) return miopenStatusBadParm;
	float a = alpha != NULL ? *(const float*)alpha : 1.0f, bt = beta != NULL ? *(const float*)beta : 0.0f;
	nv_scalar sa, sb;
	return NVH(h, cudnnAddTensor, h->cudnn, nv_value(a, T(yd), &sa), T(bd)->desc, b, nv_value(a + bt, T(yd), &sb), T(yd)->desc, y);
}

static miopenStatus_t rgnv_miopenConvolutionBackwardBias(miopenHandle_t hh, const void* alpha, const miopenTensorDescriptor_t dyd,
                                                         const void* dy, const void* beta, const miopenTensorDescriptor_t dbd, void* db) {
	struct rgnv_handle* h = H(hh);
	if (h == NULL || !nv_ready(2, T(dyd), T(dbd))) return miopenStatusBadParm;
	nv_scalar a, b;
	return NVH(h, cudnnConvolutionBackwardBias, h->cudnn, nv_scale(alpha, 1, T(dbd), &a), T(dyd)->desc, dy, nv_scale(beta, 0, T(dbd), &b),
	           T(dbd)->desc, db);
}

// ---- Pooling ----

static miopenStatus_t rgnv_miopenCreatePoolingDescriptor(miopenPoolingDescriptor_t* out) {
	if (out == NULL) return miopenStatusBadParm;
	struct rgnv_pool* p = calloc(1, sizeof *p);
	if (p == NULL) return miopenStatusAllocFailed;
	int st = NV(cudnnCreatePoolingDescriptor, &p->desc);
	if (st != CUDNN_STATUS_SUCCESS) {
		free(p);
		return nv_status(st);
	}
	*out = (miopenPoolingDescriptor_t)p;
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenSetNdPoolingDescriptor(miopenPoolingDescriptor_t d, const miopenPoolingMode_t mode, int n, const int* win,
                                                        const int* pad, const int* stride) {
	struct rgnv_pool* p = POOL(d);
	if (p == NULL || n < 1 || n > 3 || win == NULL || pad == NULL || stride == NULL) return miopenStatusBadParm;
	int cm;
	switch (mode) {
	case miopenPoolingMax: cm = CUDNN_POOLING_MAX; break;
	case miopenPoolingAverage: cm = CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING; break; // MIOpen's average excludes the padding
	case miopenPoolingAverageInclusive: cm = CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING; break;
	default: return miopenStatusBadParm;
	}
	int st = NV(cudnnSetPoolingNdDescriptor, p->desc, cm, CUDNN_PROPAGATE_NAN, n, win, pad, stride);
	if (st != CUDNN_STATUS_SUCCESS) return nv_status(st);
	p->mode = mode;
	p->nb = n;
	for (int i = 0; i < n; i++) {
		p->win[i] = win[i];
		p->pad[i] = pad[i];
		p->stride[i] = stride[i];
	}
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenGetNdPoolingDescriptor(const miopenPoolingDescriptor_t d, int requested, miopenPoolingMode_t* mode, int* n,
                                                        int* win, int* pad, int* stride) {
	struct rgnv_pool* p = POOL(d);
	if (p == NULL || p->nb == 0 || requested < p->nb) return miopenStatusBadParm;
	if (mode != NULL) *mode = p->mode;
	if (n != NULL) *n = p->nb;
	for (int i = 0; i < p->nb; i++) {
		if (win != NULL) win[i] = p->win[i];
		if (pad != NULL) pad[i] = p->pad[i];
		if (stride != NULL) stride[i] = p->stride[i];
	}
	return miopenStatusSuccess;
}

// cuDNN's pooling backward recomputes what MIOpen keeps in its workspace:
// index types and modes have nothing to set, and the workspace is empty.
static miopenStatus_t rgnv_miopenSetPoolingIndexType(miopenPoolingDescriptor_t d, miopenIndexType_t t) {
	return d != NULL && t >= miopenIndexUint8 && t <= miopenIndexUint64 ? miopenStatusSuccess : miopenStatusBadParm;
}

static miopenStatus_t rgnv_miopenSetPoolingWorkSpaceIndexMode(miopenPoolingDescriptor_t d, miopenPoolingWorkspaceIndexMode_t m) {
	return d != NULL && (m == miopenPoolingWorkspaceIndexMask || m == miopenPoolingWorkspaceIndexImage) ? miopenStatusSuccess
	                                                                                                   : miopenStatusBadParm;
}

static miopenStatus_t rgnv_miopenPoolingGetWorkSpaceSizeV2(const miopenPoolingDescriptor_t d, const miopenTensorDescriptor_t y, size_t* size) {
	if (d == NULL || y == NULL || size == NULL) return miopenStatusBadParm;
	*size = 0;
	return miopenStatusSuccess;
}

// MIOpen's output size: max(1, (in + 2*pad - window) / stride + 1).
static miopenStatus_t rgnv_miopenGetPoolingNdForwardOutputDim(const miopenPoolingDescriptor_t d, const miopenTensorDescriptor_t xd, int dims,
                                                              int* out) {
	struct rgnv_pool* p = POOL(d);
	struct rgnv_tensor* x = T(xd);
	if (p == NULL || p->nb == 0 || !nv_ready(1, x) || out == NULL || dims != x->nb || x->nb != p->nb + 2) return miopenStatusBadParm;
	out[0] = x->dims[0];
	out[1] = x->dims[1];
	for (int i = 0; i < p->nb; i++) {
		int v = (x->dims[i + 2] + 2 * p->pad[i] - p->win[i]) / p->stride[i] + 1;
		out[i + 2] = v > 1 ? v : 1;
	}
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenPoolingForward(miopenHandle_t hh, const miopenPoolingDescriptor_t d, const void* alpha,
                                                const miopenTensorDescriptor_t xd, const void* x, const void* beta,
                                                const miopenTensorDescriptor_t yd, void* y, _Bool do_backward, void* ws, size_t wsSize) {
	(void)do_backward, (void)ws, (void)wsSize;
	struct rgnv_handle* h = H(hh);
	if (h == NULL || d == NULL || !nv_ready(2, T(xd), T(yd))) return miopenStatusBadParm;
	nv_scalar a, b;
	return NVH(h, cudnnPoolingForward, h->cudnn, POOL(d)->desc, nv_scale(alpha, 1, T(yd), &a), T(xd)->desc, x, nv_scale(beta, 0, T(yd), &b),
	           T(yd)->desc, y);
}

static miopenStatus_t rgnv_miopenPoolingBackward(miopenHandle_t hh, const miopenPoolingDescriptor_t d, const void* alpha,
                                                 const miopenTensorDescriptor_t yd, const void* y, const miopenTensorDescriptor_t dyd,
                                                 const void* dy, const miopenTensorDescriptor_t xd, const void* x, const void* beta,
                                                 const miopenTensorDescriptor_t dxd, void* dx, void* ws) {
	(void)ws;
	struct rgnv_handle* h = H(hh);
	if (h == NULL || d == NULL || !nv_ready(4, T(yd), T(dyd), T(xd), T(dxd))) return miopenStatusBadParm;
	nv_scalar a, b;
	return NVH(h, cudnnPoolingBackward, h->cudnn, POOL(d)->desc, nv_scale(alpha, 1, T(dxd), &a), T(yd)->desc, y, T(dyd)->desc, dy,
	           T(xd)->desc, x, nv_scale(beta, 0, T(dxd), &b), T(dxd)->desc, dx);
}

static miopenStatus_t rgnv_miopenDestroyPoolingDescriptor(miopenPoolingDescriptor_t d) {
	if (d == NULL) return miopenStatusBadParm;
	int st = NV(cudnnDestroyPoolingDescriptor, POOL(d)->desc);
	free(d);
	return nv_status(st);
}

// ---- Local response normalization ----

static miopenStatus_t rgnv_miopenCreateLRNDescriptor(miopenLRNDescriptor_t* out) {
	if (out == NULL) return miopenStatusBadParm;
	struct rgnv_lrn* l = calloc(1, sizeof *l);
	if (l == NULL) return miopenStatusAllocFailed;
	int st = NV(cudnnCreateLRNDescriptor, &l->desc);
	if (st != CUDNN_STATUS_SUCCESS) {
		free(l);
		return nv_status(st);
	}
	*out = (miopenLRNDescriptor_t)l;
	return miopenStatusSuccess;
}

// cuDNN has the cross-channel LRN only, with MIOpen's formula (alpha over
// the window width); the within-channel one is left to package miopen.
static miopenStatus_t rgnv_miopenSetLRNDescriptor(const miopenLRNDescriptor_t d, miopenLRNMode_t mode, unsigned n, double alpha, double beta,
                                                  double k) {
	struct rgnv_lrn* l = LRN(d);
	if (l == NULL || (mode != miopenLRNWithinChannel && mode != miopenLRNCrossChannel)) return miopenStatusBadParm;
	if (mode == miopenLRNCrossChannel) {
		int st = NV(cudnnSetLRNDescriptor, l->desc, n, alpha, beta, k);
		if (st != CUDNN_STATUS_SUCCESS) return nv_status(st);
	}
	l->set = 1;
	l->mode = mode;
	l->n = n;
	l->alpha = alpha;
	l->beta = beta;
	l->k = k;
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenGetLRNDescriptor(const miopenLRNDescriptor_t d, miopenLRNMode_t* mode, unsigned* n, double* alpha,
                                                  double* beta, double* k) {
	struct rgnv_lrn* l = LRN(d);
	if (l == NULL || !l->set) return miopenStatusBadParm;
	if (mode != NULL) *mode = l->mode;
	if (n != NULL) *n = l->n;
	if (alpha != NULL) *alpha = l->alpha;
	if (beta != NULL) *beta = l->beta;
	if (k != NULL) *k = l->k;
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenLRNGetWorkSpaceSize(const miopenTensorDescriptor_t y, size_t* size) {
	if (y == NULL || size == NULL) return miopenStatusBadParm;
	*size = 0; // cuDNN's backward recomputes the scale
	return miopenStatusSuccess;
}

// MIOpen's LRN ignores its alpha and beta arguments (they are 1 and 0).
static miopenStatus_t rgnv_miopenLRNForward(miopenHandle_t hh, const miopenLRNDescriptor_t d, const void* alpha,
                                            const miopenTensorDescriptor_t xd, const void* x, const void* beta,
                                            const miopenTensorDescriptor_t yd, void* y, _Bool do_backward, void* ws) {
	(void)alpha, (void)beta, (void)do_backward, (void)ws;
	struct rgnv_handle* h = H(hh);
	struct rgnv_lrn* l = LRN(d);
	if (h == NULL || l == NULL || !l->set || !nv_ready(2, T(xd), T(yd))) return miopenStatusBadParm;
	if (l->mode != miopenLRNCrossChannel) return miopenStatusNotImplemented;
	nv_scalar a, b;
	return NVH(h, cudnnLRNCrossChannelForward, h->cudnn, l->desc, CUDNN_LRN_CROSS_CHANNEL_DIM1, nv_value(1, T(yd), &a), T(xd)->desc, x,
	           nv_value(0, T(yd), &b), T(yd)->desc, y);
}

static miopenStatus_t rgnv_miopenLRNBackward(miopenHandle_t hh, const miopenLRNDescriptor_t d, const void* alpha,
                                             const miopenTensorDescriptor_t yd, const void* y, const miopenTensorDescriptor_t dyd,
                                             const void* dy, const miopenTensorDescriptor_t xd, const void* x, const void* beta,
                                             const miopenTensorDescriptor_t dxd, void* dx, const void* ws) {
	(void)alpha, (void)beta, (void)ws;
	struct rgnv_handle* h = H(hh);
	struct rgnv_lrn* l = LRN(d);
	if (h == NULL || l == NULL || !l->set || !nv_ready(4, T(yd), T(dyd), T(xd), T(dxd))) return miopenStatusBadParm;
	if (l->mode != miopenLRNCrossChannel) return miopenStatusNotImplemented;
	nv_scalar a, b;
	return NVH(h, cudnnLRNCrossChannelBackward, h->cudnn, l->desc, CUDNN_LRN_CROSS_CHANNEL_DIM1, nv_value(1, T(dxd), &a), T(yd)->desc, y,
	           T(dyd)->desc, dy, T(xd)->desc, x, nv_value(0, T(dxd), &b), T(dxd)->desc, dx);
}

static miopenStatus_t rgnv_miopenDestroyLRNDescriptor(miopenLRNDescriptor_t d) {
	if (d == NULL) return miopenStatusBadParm;
	int st = NV(cudnnDestroyLRNDescriptor, LRN(d)->desc);
	free(d);
	return nv_status(st);
}

// ---- Batch normalization ----

// The derived descriptor as MIOpen makes it: 1xCx1x1(x1) for spatial,
// 1xCxHxW(xD) per activation; float whatever the data.
static miopenStatus_t rgnv_miopenDeriveBNTensorDescriptor(miopenTensorDescriptor_t dd, const miopenTensorDescriptor_t xd,
                                                          miopenBatchNormMode_t mode) {
	struct rgnv_tensor* x = T(xd);
	if (dd == NULL || !nv_ready(1, x) || x->nb < 4 || x->nb > 5) return miopenStatusBadParm;
	if (mode != miopenBNPerActivation && mode != miopenBNSpatial) return miopenStatusBadParm;
	int dims[5];
	dims[0] = 1;
	for (int i = 1; i < x->nb; i++) dims[i] = mode == miopenBNSpatial && i > 1 ? 1 : x->dims[i];
	return nv_tensor_set(T(dd), miopenFloat, x->nb, dims, NULL);
}

static miopenStatus_t rgnv_miopenBatchNormalizationForwardInference(miopenHandle_t hh, miopenBatchNormMode_t mode, void* alpha, void* beta,
                                                                    const miopenTensorDescriptor_t xd, const void* x,
                                                                    const miopenTensorDescriptor_t yd, void* y,
                                                                    const miopenTensorDescriptor_t bnd, void* scale, void* bias, void* mean,
                                                                    void* var, double eps) {
	struct rgnv_handle* h = H(hh);
	if (h == NULL || !nv_ready(3, T(xd), T(yd), T(bnd))) return miopenStatusBadParm;
	nv_scalar a, b;
	return NVH(h, cudnnBatchNormalizationForwardInference, h->cudnn, (int)mode, nv_scale(alpha, 1, T(yd), &a), nv_scale(beta, 0, T(yd), &b),
	           T(xd)->desc, x, T(yd)->desc, y, T(bnd)->desc, scale, bias, mean, var, eps);
}

static miopenStatus_t rgnv_miopenBatchNormalizationForwardTraining(miopenHandle_t hh, miopenBatchNormMode_t mode, void* alpha, void* beta,
                                                                   const miopenTensorDescriptor_t xd, const void* x,
                                                                   const miopenTensorDescriptor_t yd, void* y,
                                                                   const miopenTensorDescriptor_t bnd, void* scale, void* bias, double factor,
                                                                   void* runMean, void* runVar, double eps, void* saveMean, void* saveInvVar) {
	struct rgnv_handle* h = H(hh);
	if (h == NULL || !nv_ready(3, T(xd), T(yd), T(bnd))) return miopenStatusBadParm;
	nv_scalar a, b;
	return NVH(h, cudnnBatchNormalizationForwardTraining, h->cudnn, (int)mode, nv_scale(alpha, 1, T(yd), &a), nv_scale(beta, 0, T(yd), &b),
	           T(xd)->desc, x, T(yd)->desc, y, T(bnd)->desc, scale, bias, factor, runMean, runVar, eps, saveMean, saveInvVar);
}

static miopenStatus_t rgnv_miopenBatchNormalizationBackward(miopenHandle_t hh, miopenBatchNormMode_t mode, const void* aData, const void* bData,
                                                            const void* aParam, const void* bParam, const miopenTensorDescriptor_t xd,
                                                            const void* x, const miopenTensorDescriptor_t dyd, const void* dy,
                                                            const miopenTensorDescriptor_t dxd, void* dx, const miopenTensorDescriptor_t bnd,
                                                            const void* scale, void* dScale, void* dBias, double eps, const void* savedMean,
                                                            const void* savedInvVar) {
	struct rgnv_handle* h = H(hh);
	if (h == NULL || !nv_ready(4, T(xd), T(dyd), T(dxd), T(bnd))) return miopenStatusBadParm;
	nv_scalar ad, bd, ap, bp;
	return NVH(h, cudnnBatchNormalizationBackward, h->cudnn, (int)mode, nv_scale(aData, 1, T(dxd), &ad), nv_scale(bData, 0, T(dxd), &bd),
	           nv_scale(aParam, 1, T(dxd), &ap), nv_scale(bParam, 0, T(dxd), &bp), T(xd)->desc, x, T(dyd)->desc, dy, T(dxd)->desc, dx,
	           T(bnd)->desc, scale, dScale, dBias, eps, savedMean, savedInvVar);
}

// ---- Activations and softmax ----

static miopenStatus_t rgnv_miopenCreateActivationDescriptor(miopenActivationDescriptor_t* out) {
	if (out == NULL) return miopenStatusBadParm;
	struct rgnv_activ* a = calloc(1, sizeof *a);
	if (a == NULL) return miopenStatusAllocFailed;
	int st = NV(cudnnCreateActivationDescriptor, &a->desc);
	if (st != CUDNN_STATUS_SUCCESS) {
		free(a);
		return nv_status(st);
	}
	*out = (miopenActivationDescriptor_t)a;
	return miopenStatusSuccess;
}

// The modes cuDNN has: sigmoid, ReLU, clipped ReLU (ceiling alpha), ELU
// (alpha), and tanh when MIOpen's beta*tanh(alpha*x) is the plain one.
static int nv_activation(miopenActivationMode_t mode, double alpha, double beta, int* cm, double* coef) {
	*coef = 0;
	switch (mode) {
	case miopenActivationLOGISTIC: *cm = CUDNN_ACTIVATION_SIGMOID; return 1;
	case miopenActivationRELU: *cm = CUDNN_ACTIVATION_RELU; return 1;
	case miopenActivationCLIPPEDRELU: *cm = CUDNN_ACTIVATION_CLIPPED_RELU, *coef = alpha; return 1;
	case miopenActivationELU: *cm = CUDNN_ACTIVATION_ELU, *coef = alpha; return 1;
	case miopenActivationTANH: *cm = CUDNN_ACTIVATION_TANH; return alpha == 1 && beta == 1;
	default: return 0;
	}
}

static miopenStatus_t rgnv_miopenSetActivationDescriptor(const miopenActivationDescriptor_t d, miopenActivationMode_t mode, double alpha,
                                                         double beta, double gamma) {
	struct rgnv_activ* a = ACT(d);
	if (a == NULL || mode < miopenActivationPASTHRU || mode > miopenActivationELU) return miopenStatusBadParm;
	int cm;
	double coef;
	int native = nv_activation(mode, alpha, beta, &cm, &coef);
	if (native) {
		int st = NV(cudnnSetActivationDescriptor, a->desc, cm, CUDNN_PROPAGATE_NAN, coef);
		if (st != CUDNN_STATUS_SUCCESS) return nv_status(st);
	}
	a->set = 1;
	a->native = native;
	a->mode = mode;
	a->alpha = alpha;
	a->beta = beta;
	a->gamma = gamma;
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenGetActivationDescriptor(const miopenActivationDescriptor_t d, miopenActivationMode_t* mode, double* alpha,
                                                         double* beta, double* gamma) {
	struct rgnv_activ* a = ACT(d);
	if (a == NULL || !a->set) return miopenStatusBadParm;
	if (mode != NULL) *mode = a->mode;
	if (alpha != NULL) *alpha = a->alpha;
	if (beta != NULL) *beta = a->beta;
	if (gamma != NULL) *gamma = a->gamma;
	return miopenStatusSuccess;
}

static miopenStatus_t rgnv_miopenActivationForward(miopenHandle_t hh, const miopenActivationDescriptor_t d, const void* alpha,
                                                   const miopenTensorDescriptor_t xd, const void* x, const void* beta,
                                                   const miopenTensorDescriptor_t yd, void* y) {
	struct rgnv_handle* h = H(hh);
	struct rgnv_activ* a = ACT(d);
	if (h == NULL || a == NULL || !a->set || !nv_ready(2, T(xd), T(yd))) return miopenStatusBadParm;
	if (!a->native) return miopenStatusNotImplemented;
	nv_scalar sa, sb;
	return NVH(h, cudnnActivationForward, h->cudnn, a->desc, nv_scale(alpha, 1, T(yd), &sa), T(xd)->desc, x, nv_scale(beta, 0, T(yd), &sb),
	           T(yd)->desc, y);
}

static miopenStatus_t rgnv_miopenActivationBackward(miopenHandle_t hh, const miopenActivationDescriptor_t d, const void* alpha,
                                                    const miopenTensorDescriptor_t yd, const void* y, const miopenTensorDescriptor_t dyd,
                                                    const void* dy, const miopenTensorDescriptor_t xd, const void* x, const void* beta,
                                                    const miopenTensorDescriptor_t dxd, void* dx) {
	struct rgnv_handle* h = H(hh);
	struct rgnv_activ* a = ACT(d);
	if (h == NULL || a == NULL || !a->set || !nv_ready(4, T(yd), T(dyd), T(xd), T(dxd))) return miopenStatusBadParm;
	if (!a->native) return miopenStatusNotImplemented;
	nv_scalar sa, sb;
	return NVH(h, cudnnActivationBackward, h->cudnn, a->desc, nv_scale(alpha, 1, T(dxd), &sa), T(yd)->desc, y, T(dyd)->desc, dy, T(xd)->desc,
	           x, nv_scale(beta, 0, T(dxd), &sb), T(dxd)->desc, dx);
}

static miopenStatus_t rgnv_miopenDestroyActivationDescriptor(miopenActivationDescriptor_t d) {
	if (d == NULL) return miopenStatusBadParm;
	int st = NV(cudnnDestroyActivationDescriptor, ACT(d)->desc);
	free(d);
	return nv_status(st);
}

// MIOpen puts algorithm and mode last, cuDNN first; the values agree.
static miopenStatus_t rgnv_miopenSoftmaxForward_V2(miopenHandle_t hh, const void* alpha, const miopenTensorDescriptor_t xd, const void* x,
                                                   const void* beta, const miopenTensorDescriptor_t yd, void* y, miopenSoftmaxAlgorithm_t algo,
                                                   miopenSoftmaxMode_t mode) {
	struct rgnv_handle* h = H(hh);
	if (h == NULL || !nv_ready(2, T(xd), T(yd))) return miopenStatusBadParm;
	nv_scalar a, b;
	return NVH(h, cudnnSoftmaxForward, h->cudnn, (int)algo, (int)mode, nv_scale(alpha, 1, T(yd), &a), T(xd)->desc, x,
	           nv_scale(beta, 0, T(yd), &b), T(yd)->desc, y);
}

static miopenStatus_t rgnv_miopenSoftmaxBackward_V2(miopenHandle_t hh, const void* alpha, const miopenTensorDescriptor_t yd, const void* y,
                                                    const miopenTensorDescriptor_t dyd, const void* dy, const void* beta,
                                                    const miopenTensorDescriptor_t dxd, void* dx, miopenSoftmaxAlgorithm_t algo,
                                                    miopenSoftmaxMode_t mode) {
	struct rgnv_handle* h = H(hh);
	if (h == NULL || !nv_ready(3, T(yd), T(dyd), T(dxd))) return miopenStatusBadParm;
	nv_scalar a, b;
	return NVH(h, cudnnSoftmaxBackward, h->cudnn, (int)algo, (int)mode, nv_scale(alpha, 1, T(dxd), &a), T(yd)->desc, y, T(dyd)->desc, dy,
	           nv_scale(beta, 0, T(dxd), &b), T(dxd)->desc, dx);
}

// ---- Multi-head attention (Find 2.0): no legacy-cuDNN equivalent ----

static miopenStatus_t rgnv_miopenCreateMhaDescriptor(miopenMhaDescriptor_t* d) {
	(void)d;
	return miopenStatusNotImplemented;
}
static miopenStatus_t rgnv_miopenSetMhaDescriptor(miopenMhaDescriptor_t d, float scale) {
	(void)d, (void)scale;
	return miopenStatusNotImplemented;
}
static miopenStatus_t rgnv_miopenGetMhaDescriptor(miopenMhaDescriptor_t d, float* scale) {
	(void)d, (void)scale;
	return miopenStatusNotImplemented;
}
static miopenStatus_t rgnv_miopenCreateMhaProblem(miopenProblem_t* p, miopenMhaDescriptor_t d, miopenProblemDirection_t dir) {
	(void)p, (void)d, (void)dir;
	return miopenStatusNotImplemented;
}
static miopenStatus_t rgnv_miopenSetProblemTensorDescriptor(miopenProblem_t p, miopenTensorArgumentId_t id, const miopenTensorDescriptor_t d) {
	(void)p, (void)id, (void)d;
	return miopenStatusNotImplemented;
}
static miopenStatus_t rgnv_miopenDestroyProblem(miopenProblem_t p) {
	(void)p;
	return miopenStatusNotImplemented;
}
static miopenStatus_t rgnv_miopenFindSolutions(miopenHandle_t h, miopenProblem_t p, miopenFindOptions_t o, miopenSolution_t* s, size_t* n,
                                               size_t max) {
	(void)h, (void)p, (void)o, (void)s, (void)n, (void)max;
	return miopenStatusNotImplemented;
}
static miopenStatus_t rgnv_miopenGetSolutionWorkspaceSize(miopenSolution_t s, size_t* n) {
	(void)s, (void)n;
	return miopenStatusNotImplemented;
}
static miopenStatus_t rgnv_miopenGetSolutionTime(miopenSolution_t s, float* t) {
	(void)s, (void)t;
	return miopenStatusNotImplemented;
}
static miopenStatus_t rgnv_miopenGetSolutionSolverId(miopenSolution_t s, uint64_t* id) {
	(void)s, (void)id;
	return miopenStatusNotImplemented;
}
static miopenStatus_t rgnv_miopenRunSolution(miopenHandle_t h, miopenSolution_t s, size_t n, const miopenTensorArgument_t* t, void* ws,
                                             size_t wsSize) {
	(void)h, (void)s, (void)n, (void)t, (void)ws, (void)wsSize;
	return miopenStatusNotImplemented;
}
static miopenStatus_t rgnv_miopenDestroySolution(miopenSolution_t s) {
	(void)s;
	return miopenStatusNotImplemented;
}

// rg_miopen_install_nvidia points the table at the translations above.
void rg_miopen_install_nvidia(void* cudnn, void* cublas, void* cudart) {
	rg_miopen_unbind();
	rg_miopen_cu_bind(rg_miopen_cu_lib_cudnn, cudnn);
	// cuBLAS serves 1x1 convolutions only with cudart's events to time it.
	nv_cublas_ok = cublas != NULL && cudart != NULL;
	rg_miopen_cu_bind(rg_miopen_cu_lib_cublas, nv_cublas_ok ? cublas : NULL);
	rg_miopen_cu_bind(rg_miopen_cu_lib_cudart, cudart);
#define SET(name) rg_miopen_set(rg_miopen_idx_##name, (void*)rgnv_##name)
	SET(miopenGetErrorString);
	SET(miopenGetVersion);
	SET(miopenCreateWithStream);
	SET(miopenDestroy);
	SET(miopenCreateTensorDescriptor);
	SET(miopenSet4dTensorDescriptor);
	SET(miopenSetTensorDescriptor);
	SET(miopenSetNdTensorDescriptorWithLayout);
	SET(miopenGetTensorDescriptorSize);
	SET(miopenGetTensorDescriptor);
	SET(miopenGetTensorNumBytes);
	SET(miopenDestroyTensorDescriptor);
	SET(miopenOpTensor);
	SET(miopenCreateConvolutionDescriptor);
	SET(miopenInitConvolutionNdDescriptor);
	SET(miopenGetConvolutionNdDescriptor);
	SET(miopenSetConvolutionGroupCount);
	SET(miopenGetConvolutionGroupCount);
	SET(miopenSetTransposeConvNdOutputPadding);
	SET(miopenGetConvolutionNdForwardOutputDim);
	SET(miopenDestroyConvolutionDescriptor);
	SET(miopenConvolutionForwardGetWorkSpaceSize);
	SET(miopenFindConvolutionForwardAlgorithm);
	SET(miopenConvolutionForward);
	SET(miopenConvolutionForwardBias);
	SET(miopenConvolutionBackwardDataGetWorkSpaceSize);
	SET(miopenFindConvolutionBackwardDataAlgorithm);
	SET(miopenConvolutionBackwardData);
	SET(miopenConvolutionBackwardWeightsGetWorkSpaceSize);
	SET(miopenFindConvolutionBackwardWeightsAlgorithm);
	SET(miopenConvolutionBackwardWeights);
	SET(miopenConvolutionBackwardBias);
	SET(miopenCreatePoolingDescriptor);
	SET(miopenSetNdPoolingDescriptor);
	SET(miopenGetNdPoolingDescriptor);
	SET(miopenSetPoolingIndexType);
	SET(miopenSetPoolingWorkSpaceIndexMode);
	SET(miopenGetPoolingNdForwardOutputDim);
	SET(miopenPoolingGetWorkSpaceSizeV2);
	SET(miopenPoolingForward);
	SET(miopenPoolingBackward);
	SET(miopenDestroyPoolingDescriptor);
	SET(miopenCreateLRNDescriptor);
	SET(miopenSetLRNDescriptor);
	SET(miopenGetLRNDescriptor);
	SET(miopenLRNGetWorkSpaceSize);
	SET(miopenLRNForward);
	SET(miopenLRNBackward);
	SET(miopenDestroyLRNDescriptor);
	SET(miopenDeriveBNTensorDescriptor);
	SET(miopenBatchNormalizationForwardInference);
	SET(miopenBatchNormalizationForwardTraining);
	SET(miopenBatchNormalizationBackward);
	SET(miopenCreateActivationDescriptor);
	SET(miopenSetActivationDescriptor);
	SET(miopenGetActivationDescriptor);
	SET(miopenActivationForward);
	SET(miopenActivationBackward);
	SET(miopenDestroyActivationDescriptor);
	SET(miopenSoftmaxForward_V2);
	SET(miopenSoftmaxBackward_V2);
	SET(miopenCreateMhaDescriptor);
	SET(miopenSetMhaDescriptor);
	SET(miopenGetMhaDescriptor);
	SET(miopenCreateMhaProblem);
	SET(miopenSetProblemTensorDescriptor);
	SET(miopenDestroyProblem);
	SET(miopenFindSolutions);
	SET(miopenGetSolutionWorkspaceSize);
	SET(miopenGetSolutionTime);
	SET(miopenGetSolutionSolverId);
	SET(miopenRunSolution);
	SET(miopenDestroySolution);
#undef SET
}
