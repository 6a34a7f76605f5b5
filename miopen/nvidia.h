// What the files of package miopen's NVIDIA platform (nvidia*.c) share:
// cuDNN's constants, the structs behind MIOpen's handle and descriptors,
// the call macros, and the helpers one file defines for the others. Shared
// functions carry the package's prefix in the binary (the #defines), so
// that they never clash with another package's.
#ifndef RG_MIOPEN_NVIDIA_H
#define RG_MIOPEN_NVIDIA_H

#include <stddef.h>

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

// cuDNN's graph (backend) API (cudnn_graph.h): the descriptor types,
// attribute names and types, and enum values that nvidia_graph.c uses.
// cudnnBackendDescriptorType_t
#define CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR 1
#define CUDNN_BACKEND_ENGINE_DESCRIPTOR 2
#define CUDNN_BACKEND_ENGINECFG_DESCRIPTOR 3
#define CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR 4
#define CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR 5
#define CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR 10
#define CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR 11
#define CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR 12
#define CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR 15
#define CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR 16
#define CUDNN_BACKEND_TENSOR_DESCRIPTOR 17
// cudnnBackendAttributeType_t
#define CUDNN_TYPE_HANDLE 0
#define CUDNN_TYPE_DATA_TYPE 1
#define CUDNN_TYPE_INT64 3
#define CUDNN_TYPE_FLOAT 4
#define CUDNN_TYPE_DOUBLE 5
#define CUDNN_TYPE_VOID_PTR 6
#define CUDNN_TYPE_CONVOLUTION_MODE 7
#define CUDNN_TYPE_HEUR_MODE 8
#define CUDNN_TYPE_NUMERICAL_NOTE 11
#define CUDNN_TYPE_BACKEND_DESCRIPTOR 15
// cudnnBackendAttributeName_t
#define CUDNN_ATTR_CONVOLUTION_COMP_TYPE 100
#define CUDNN_ATTR_CONVOLUTION_CONV_MODE 101
#define CUDNN_ATTR_CONVOLUTION_DILATIONS 102
#define CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES 103
#define CUDNN_ATTR_CONVOLUTION_POST_PADDINGS 104
#define CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS 105
#define CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS 106
#define CUDNN_ATTR_ENGINEHEUR_MODE 200
#define CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH 201
#define CUDNN_ATTR_ENGINEHEUR_RESULTS 202
#define CUDNN_ATTR_ENGINECFG_ENGINE 300
#define CUDNN_ATTR_EXECUTION_PLAN_HANDLE 400
#define CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG 401
#define CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE 402
// The first of the ALPHA, BETA, CONV_DESC and three tensor attributes of
// each convolution operation (forward: W, X, Y; backward data: W, DX, DY;
// backward filter: DW, X, DY), which follow in that order.
#define CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA 700
#define CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA 706
#define CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA 712
#define CUDNN_ATTR_OPERATIONGRAPH_HANDLE 800
#define CUDNN_ATTR_OPERATIONGRAPH_OPS 801
#define CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT 900
#define CUDNN_ATTR_TENSOR_DATA_TYPE 901
#define CUDNN_ATTR_TENSOR_DIMENSIONS 902
#define CUDNN_ATTR_TENSOR_STRIDES 903
#define CUDNN_ATTR_TENSOR_UNIQUE_ID 906
#define CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS 1000
#define CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS 1001
#define CUDNN_ATTR_VARIANT_PACK_WORKSPACE 1003
#define CUDNN_ATTR_ENGINE_GLOBAL_INDEX 1301
#define CUDNN_ATTR_ENGINE_NUMERICAL_NOTE 1303
// cudnnBackendNumericalNote_t
#define CUDNN_NUMERICAL_NOTE_TENSOR_CORE 0
#define CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS 1
#define CUDNN_NUMERICAL_NOTE_FFT 3
#define CUDNN_NUMERICAL_NOTE_WINOGRAD 5
// cudnnBackendHeurMode_t
#define CUDNN_HEUR_MODE_FALLBACK 2
#define CUDNN_HEUR_MODE_A 3

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

// NV(name, args...) calls a cuDNN, cuBLAS or cudart function of the generated table
// (cgen.spec) and yields its raw status: RG_CUDA_MISSING when cuDNN lacks
// it.
#define NV(name, ...) RG_MIOPEN_CUDA(name, __VA_ARGS__)

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
	struct nvg_cache* graph; // the graph API's plans by problem (nvidia_graph.c), made on first use
	unsigned long long graph_fallbacks; // graph-API algorithms that ran as a legacy one (nv_run)
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

// NVH calls a cuDNN function of handle h: a failure is recorded for the
// error message (nvh) and translated.
#define NVH(h, name, ...) nvh((h), #name, NV(name, __VA_ARGS__))

// cuBLAS for 1x1 convolutions.
//
// Legacy cuDNN's algorithms are slow for 1x1 convolutions of packed
// tensors, which are plain matrix products: Find also times cuBLAS on them
// (when libcublas loaded), and a forward run with that algorithm calls it.
// cudart supplies the events that time it.

// nv_cublas_ok says whether cuBLAS and cudart loaded (Find then times
// cuBLAS for 1x1 convolutions).
#define nv_cublas_ok rg_miopen_nv_cublas_ok
extern int nv_cublas_ok;

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

// Convolutions through cuDNN's graph API (nvidia_graph.c).
//
// Legacy cuDNN's Find offers fewer engines than the graph API, which
// PyTorch uses. Find on this platform also asks the graph API's heuristics
// for engine configurations, finalizes execution plans of the first
// NVG_MAX_PLANS (PyTorch's cudnn.benchmark_limit), times them beside the
// legacy algorithms and returns the fastest. A handle keeps the plans of
// the problems it saw (struct nvg_cache); a convolution with a graph-API
// algorithm runs its plan, rebuilt when the handle has none. Any failure
// of the graph API leaves the legacy algorithms, without an error.

// An algorithm of the graph API, as a Find returns it: MIOpen's class of
// it, NV_ALGO_GRAPH where legacy algorithms have theirs, its plan's id (the
// engine's global index and which of that engine's configurations in the
// heuristics' list it is: they differ in their knobs, tile sizes and the
// like), and whether it uses tensor cores:
// class | 0xff << 8 | engine << 16 | tensor cores << 28 | nth << 29.
#define NV_ALGO_GRAPH 254
#define NV_GRAPH_MAX_ENGINE 0xfff
#define NV_GRAPH_MAX_NTH 7
#define NV_ENCODE_GRAPH(cls, id, tc)                                                                                    \
	((unsigned)(cls) | 0xffu << 8 | ((unsigned)NVG_ENGINE(id) & NV_GRAPH_MAX_ENGINE) << 16 | (unsigned)((tc) != 0) << 28 | \
	 ((unsigned)NVG_NTH(id) & NV_GRAPH_MAX_NTH) << 29)
#define NV_GRAPH_ENGINE(raw) ((int)(((raw) >> 16) & NV_GRAPH_MAX_ENGINE))
#define NV_GRAPH_TC(raw) ((int)(((raw) >> 28) & 1))
#define NV_GRAPH_NTH(raw) ((int)(((raw) >> 29) & NV_GRAPH_MAX_NTH))
#define NV_GRAPH_ID(raw) NVG_ID(NV_GRAPH_ENGINE(raw), NV_GRAPH_NTH(raw))
// A plan's id: the engine, and which of its configurations (0: the first
// the heuristics list, counted in the list of the mode it came from).
#define NVG_ID(engine, nth) ((engine) | (nth) << 12)
#define NVG_ENGINE(id) ((id) & NV_GRAPH_MAX_ENGINE)
#define NVG_NTH(id) ((id) >> 12)
// The plans a Find finalizes and times, at most: those of the first
// NVG_MAX_PLANS configurations that heuristics mode A lists (as PyTorch's
// cudnn.benchmark_limit counts them: mostly one engine's knobs), then up to
// NVG_FALLBACK_PLANS of the fallback list. The plans and problems a handle
// keeps.
#define NVG_MAX_PLANS 10
#define NVG_FALLBACK_PLANS 4
#define NVG_SLOTS 16
#define NVG_ENTRIES 64

// One problem: the kind of cuDNN operation (RG_NV_ALGO_*), the tensors in,
// w and out of nv_ws, the convolution, the byte alignment of the data
// (which a plan may rely on) and the scaling factors (part of the graph).
struct nvg_key {
	int kind;
	miopenDataType_t dtype;
	int nb, spatial;
	int dims[3][NV_MAXDIM], strides[3][NV_MAXDIM];
	int pad[3], stride[3], dil[3];
	int align[3];
	float alpha, beta;
};

// A finalized execution plan, the engine configuration it came from, and
// the finalized variant pack it last ran with (NULL until it runs), kept
// while its data and workspace stay.
struct nvg_plan {
	void* plan;
	void* cfg;
	int id;         // NVG_ID(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, nth)
	unsigned notes; // bit n: cudnnBackendNumericalNote_t n
	size_t ws;
	void* pack;
	const void* packed[4]; // the pack's data pointers in, w and out, and its workspace
};

// A problem's operation graph (tensors in, w, out, the convolution, the
// operation, the graph) and its plans.
struct nvg_entry {
	struct nvg_key key;
	void* desc[6];
	int n;
	int searched; // the heuristics were asked for the Find's plans
	struct nvg_plan plans[NVG_SLOTS];
	// Plans (ids) asked for that the heuristics gave no configuration of,
	// so that a convolution with one falls back to a legacy algorithm
	// without asking them again on every call.
	int missing[NVG_SLOTS];
	int nmissing;
	unsigned long long used; // the cache's clock at the last use
};

struct nvg_cache {
	int n;
	unsigned long long clock;
	struct nvg_entry* e[NVG_ENTRIES];
};

// nv_graph_ok says whether the graph API is tried (rg_miopen_install_nvidia:
// asked for, and cudart loaded to time its plans).
#define nv_graph_ok rg_miopen_nv_graph_ok
extern int nv_graph_ok;
#define nv_graph_plans rg_miopen_nv_graph_plans
#define nv_graph_exec rg_miopen_nv_graph_exec
#define nv_graph_free rg_miopen_nv_graph_free
// nv_graph_plans returns the handle's entry for a problem (tensors as in
// nv_ws, their data for the alignment, NULL for 16 bytes), made on first
// use with the Find's plans (NVG_MAX_PLANS), or, with id >= 0, with the
// plan of that id (*slot is its index). NULL: the graph API cannot take
// the problem.
struct nvg_entry* nv_graph_plans(struct rgnv_handle* h, int kind, const struct rgnv_tensor* in, const void* inp, const struct rgnv_tensor* w,
                                 const void* wp, const struct rgnv_conv* c, const struct rgnv_tensor* out, const void* outp, float alpha,
                                 float beta, int id, int* slot);
// nv_graph_exec runs plan i of an entry on the handle's stream, with the
// plan's variant pack, rebuilt when the data or workspace changed; a cuDNN
// status.
int nv_graph_exec(struct rgnv_handle* h, struct nvg_entry* e, int i, const void* inp, const void* wp, const void* outp, void* ws);
// nv_graph_free destroys the handle's plans, after its stream's work.
void nv_graph_free(struct rgnv_handle* h);

// MIOpen reads alpha and beta as floats for every data type; cuDNN reads
// doubles for double data.
typedef union {
	float f;
	double d;
} nv_scalar;

// Shared helpers (nvidia.c, nvidia_tensor.c).
#define nv_status rg_miopen_nv_status
#define nvh rg_miopen_nvh
#define nv_scale rg_miopen_nv_scale
#define nv_value rg_miopen_nv_value
#define nv_dtype rg_miopen_nv_dtype
#define nv_dsize rg_miopen_nv_dsize
#define nv_compute rg_miopen_nv_compute
#define nv_tensor_set rg_miopen_nv_tensor_set
#define nv_tensor_bytes rg_miopen_nv_tensor_bytes
#define nv_ready rg_miopen_nv_ready
miopenStatus_t nv_status(int s);
miopenStatus_t nvh(struct rgnv_handle* h, const char* fn, int st);
const void* nv_scale(const void* miopen_value, float dflt, const struct rgnv_tensor* t, nv_scalar* out);
const void* nv_value(float v, const struct rgnv_tensor* t, nv_scalar* out);
int nv_dtype(miopenDataType_t t);
size_t nv_dsize(miopenDataType_t t);
// nv_compute is the cudnnDataType_t a convolution of data of a type
// accumulates in: double for double, int32 for int8, else float.
int nv_compute(miopenDataType_t t);
miopenStatus_t nv_tensor_set(struct rgnv_tensor* t, miopenDataType_t dt, int nb, const int* dims, const int* strides);
size_t nv_tensor_bytes(const struct rgnv_tensor* t);
int nv_ready(int n, ...);

// Each family's file points the table at its translations.
#define nv_install_tensor rg_miopen_nv_install_tensor
#define nv_install_conv rg_miopen_nv_install_conv
#define nv_install_pool rg_miopen_nv_install_pool
#define nv_install_act rg_miopen_nv_install_act
void nv_install_tensor(void);
void nv_install_conv(void);
void nv_install_pool(void);
void nv_install_act(void);

// SET points the table's entry of a function at its translation.
#define SET(name) rg_miopen_set(rg_miopen_idx_##name, (void*)rgnv_##name)

#endif
