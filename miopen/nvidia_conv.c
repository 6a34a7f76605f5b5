// The NVIDIA platform of package miopen, translated to cuDNN (see
// nvidia.c): convolutions, with cuDNN's legacy algorithms, the engines of
// its graph API (nvidia_graph.c) and cuBLAS for 1x1 convolutions, whichever
// Find finds fastest.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvidia.h"

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
	int st = NV(cudnnSetConvolutionNdDescriptor, h->conv, c->spatial, c->pad, c->stride, c->dil, CUDNN_CROSS_CORRELATION, nv_compute(dt));
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

// nv_decode reads an algorithm: the cuDNN algorithm (NV_ALGO_CUBLAS,
// NV_ALGO_GRAPH, or a legacy one, the class's default for a plain MIOpen
// algorithm) and the math type for a legacy one.
static void nv_decode(int kind, unsigned raw, miopenDataType_t dt, int* algo, int* math) {
	*algo = NV_ALGO(raw);
	*math = *algo == NV_ALGO_GRAPH ? -1 : NV_MATH(raw);
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
	if (algo == NV_ALGO_GRAPH) {
		const char* tc = NV_GRAPH_TC(raw) ? ", tensor cores" : "";
		if (NV_GRAPH_NTH(raw) == 0) {
			snprintf(buf, sizeof buf, "cuDNN engine %d (graph API%s)", NV_GRAPH_ENGINE(raw), tc);
		} else {
			snprintf(buf, sizeof buf, "cuDNN engine %d, configuration %d (graph API%s)", NV_GRAPH_ENGINE(raw), NV_GRAPH_NTH(raw) + 1, tc);
		}
		return buf;
	}
	int n = kind == RG_NV_ALGO_FWD ? NV_FWD_ALGOS : kind == RG_NV_ALGO_BWD_DATA ? NV_BWD_DATA_ALGOS : NV_BWD_FILTER_ALGOS;
	if (kind < 0 || kind > 2 || algo < 0 || algo >= n) return NULL;
	strcpy(buf, nv_algo_names[kind][algo]);
	if (math >= 0 && math < 4) {
		strcat(buf, " with ");
		strcat(buf, nv_math_names[math]);
	}
	return buf;
}

// rg_miopen_nvidia_graph_fallbacks counts the convolutions of a handle
// whose graph-API algorithm ran as a legacy algorithm (its plan could not
// be built, or did not run).
unsigned long long rg_miopen_nvidia_graph_fallbacks(miopenHandle_t handle) {
	struct rgnv_handle* h = H(handle);
	return h != NULL ? h->graph_fallbacks : 0;
}

// The cuDNN call a MIOpen direction becomes: a transposed convolution's
// forward is cuDNN's backward data and its backward data cuDNN's forward.
static int nv_kind_fwd(const struct rgnv_conv* c) { return c->mode == miopenTranspose ? RG_NV_ALGO_BWD_DATA : RG_NV_ALGO_FWD; }
static int nv_kind_bwd_data(const struct rgnv_conv* c) { return c->mode == miopenTranspose ? RG_NV_ALGO_FWD : RG_NV_ALGO_BWD_DATA; }

// nv_algo_ws is the workspace legacy algorithm algo of a kind needs with
// the handle's filter and convolution descriptors (set; tensors as in
// nv_ws); a cuDNN status.
static int nv_algo_ws(struct rgnv_handle* h, int kind, int algo, const struct rgnv_tensor* in, const struct rgnv_tensor* out, size_t* size) {
	switch (kind) {
	case RG_NV_ALGO_FWD:
		return NV(cudnnGetConvolutionForwardWorkspaceSize, h->cudnn, in->desc, h->filter[0], h->conv, out->desc, algo, size);
	case RG_NV_ALGO_BWD_DATA:
		return NV(cudnnGetConvolutionBackwardDataWorkspaceSize, h->cudnn, h->filter[0], in->desc, h->conv, out->desc, algo, size);
	}
	return NV(cudnnGetConvolutionBackwardFilterWorkspaceSize, h->cudnn, in->desc, out->desc, h->conv, h->filter[0], algo, size);
}

// The legacy call of each kind, for error messages.
static const char* const nv_legacy_names[3] = {"cudnnConvolutionForward", "cudnnConvolutionBackwardData", "cudnnConvolutionBackwardFilter"};

// nv_legacy runs legacy algorithm algo of a kind with the handle's filter
// and convolution descriptors (set; tensors and data as in nv_ws: it
// writes out's data, or w's for RG_NV_ALGO_BWD_FILTER) and MIOpen's alpha
// and beta (NULL: 1 and 0); a cuDNN status.
static int nv_legacy(struct rgnv_handle* h, int kind, int algo, const void* alpha, const struct rgnv_tensor* in, const void* inp,
                     const struct rgnv_tensor* w, void* wp, const struct rgnv_tensor* out, void* outp, void* ws, size_t wsSize,
                     const void* beta) {
	const struct rgnv_tensor* written = kind == RG_NV_ALGO_BWD_FILTER ? w : out;
	nv_scalar a, b;
	nv_scale(alpha, 1, written, &a);
	nv_scale(beta, 0, written, &b);
	switch (kind) {
	case RG_NV_ALGO_FWD:
		return NV(cudnnConvolutionForward, h->cudnn, &a, in->desc, inp, h->filter[0], wp, h->conv, algo, ws, wsSize, &b, out->desc, outp);
	case RG_NV_ALGO_BWD_DATA:
		return NV(cudnnConvolutionBackwardData, h->cudnn, &a, h->filter[0], wp, in->desc, inp, h->conv, algo, ws, wsSize, &b, out->desc, outp);
	}
	return NV(cudnnConvolutionBackwardFilter, h->cudnn, &a, in->desc, inp, out->desc, outp, h->conv, algo, ws, wsSize, &b, h->filter[0], wp);
}

// nv_ws is the largest workspace any cuDNN algorithm of a kind needs, with
// the default math of the data type or the default math, or any plan of
// the graph API that a Find would time, as MIOpen reports one size for all
// of its algorithms. For RG_NV_ALGO_FWD in is x and out y, for
// RG_NV_ALGO_BWD_DATA in is dy and out dx, for RG_NV_ALGO_BWD_FILTER in is
// x, out dy and w dw.
static miopenStatus_t nv_ws(struct rgnv_handle* h, int kind, const struct rgnv_tensor* in, const struct rgnv_tensor* w,
                            const struct rgnv_conv* c, const struct rgnv_tensor* out, size_t* size) {
	if (h == NULL || c == NULL || c->spatial == 0 || !nv_ready(3, in, w, out) || size == NULL) return miopenStatusBadParm;
	int st = nv_filter(h, 0, w);
	if (st != CUDNN_STATUS_SUCCESS) return nv_status(st);
	int maths[2] = {nv_default_math(in->dtype), CUDNN_DEFAULT_MATH};
	int n = kind == RG_NV_ALGO_FWD ? NV_FWD_ALGOS : kind == RG_NV_ALGO_BWD_DATA ? NV_BWD_DATA_ALGOS : NV_BWD_FILTER_ALGOS;
	size_t best = 0;
	int any = 0, last = CUDNN_STATUS_NOT_SUPPORTED;
	// The graph API's plans, made here once for the Find that follows (with
	// data at 16-byte alignment, as allocations are).
	const struct nvg_entry* e = nv_graph_plans(h, kind, in, NULL, w, NULL, c, out, NULL, 1, 0, -1, NULL);
	for (int i = 0; e != NULL && i < e->n; i++) {
		any = 1;
		if (e->plans[i].ws > best) best = e->plans[i].ws;
	}
	for (int m = 0; m < 2; m++) {
		if ((st = nv_conv(h, c, in->dtype, maths[m])) != CUDNN_STATUS_SUCCESS) return nv_status(st);
		for (int a = 0; a < n; a++) {
			size_t s = 0;
			st = nv_algo_ws(h, kind, a, in, out, &s);
			if (st == RG_CUDA_MISSING && !any) return RG_MIOPEN_CUDA_MISSING;
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
		if (NV(cublasCreate_v2, &b) != 0) return miopenStatusInternalError;
		if (NV(cublasSetStream_v2, b, h->stream) != 0) {
			NV(cublasDestroy_v2, b);
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
	             ? NV(cublasGemmEx, h->cublas, g->transa, g->transb, g->m, g->n, g->k, a, A, g->dtype, g->lda, B, g->dtype,
	                   g->ldb, bt, y, g->dtype, g->ldc, NVB_COMPUTE_32F, NVB_GEMM_DEFAULT)
	             : NV(cublasGemmStridedBatchedEx, h->cublas, g->transa, g->transb, g->m, g->n, g->k, a, A, g->dtype, g->lda,
	                   g->strideA, B, g->dtype, g->ldb, g->strideB, bt, y, g->dtype, g->ldc, g->strideC, g->batch,
	                   NVB_COMPUTE_32F, NVB_GEMM_DEFAULT);
	if (st != 0) {
		h->last = CUDNN_STATUS_EXECUTION_FAILED;
		h->last_fn = g->batch == 1 ? "cublasGemmEx (1x1 convolution)" : "cublasGemmStridedBatchedEx (1x1 convolution)";
		return miopenStatusInternalError;
	}
	return miopenStatusSuccess;
}

// nv_runner runs a candidate of a Find once: 0 on success.
typedef int (*nv_runner)(struct rgnv_handle* h, const void* arg);

// nv_time times a candidate in ms (< 0 when it cannot run): after a
// warm-up, the median of three timings of NV_TIME_RUNS runs in a row
// between events on the handle's stream, each behind one more run that
// keeps the device busy while the host queues the timed ones. (One run
// alone between two events also counted the host's time to queue it, up
// to 40 us for a graph-API plan, whose execution builds its variant pack
// on every call: equal plans of a 140 us convolution timed 20% apart on an
// H200, and the Find's pick varied.) A candidate whose first timing is
// over twice best (> 0) is not timed further: it cannot win.
#define NV_TIME_RUNS 4
static float nv_time(struct rgnv_handle* h, nv_runner run, const void* arg, float best) {
	void *start = NULL, *end = NULL;
	float t[3] = {-1, -1, -1}, ms = -1;
	if (run(h, arg) != 0) return -1;
	if (NV(cudaEventCreate, &start) != 0 || NV(cudaEventCreate, &end) != 0) goto out;
	for (int i = 0; i < 3; i++) {
		int st = run(h, arg) != 0 || NV(cudaEventRecord, start, h->stream) != 0;
		for (int j = 0; j < NV_TIME_RUNS && !st; j++) st = run(h, arg) != 0;
		if (st || NV(cudaEventRecord, end, h->stream) != 0 || NV(cudaEventSynchronize, end) != 0 ||
		    NV(cudaEventElapsedTime, &t[i], start, end) != 0)
			goto out;
		t[i] /= NV_TIME_RUNS;
		if (i == 0 && best > 0 && t[0] > 2 * best) {
			ms = t[0];
			goto out;
		}
	}
	// The median of three.
	ms = t[0] > t[1] ? (t[1] > t[2] ? t[1] : (t[0] > t[2] ? t[2] : t[0])) : (t[0] > t[2] ? t[0] : (t[1] > t[2] ? t[2] : t[1]));
out:
	if (start != NULL) NV(cudaEventDestroy, start);
	if (end != NULL) NV(cudaEventDestroy, end);
	return ms;
}

// A cuBLAS 1x1 convolution to time.
struct nv_gemm_args {
	const struct nv_gemm* g;
	const void *x, *w;
	void* y;
};

static int nv_gemm_runner(struct rgnv_handle* h, const void* arg) {
	const struct nv_gemm_args* a = arg;
	return nv_gemm_run(h, a->g, NULL, a->x, a->w, NULL, a->y) != miopenStatusSuccess;
}

// A plan of the graph API to time.
struct nv_graph_args {
	struct nvg_entry* e;
	int i;
	const void *in, *w, *out;
	void* ws;
};

static int nv_graph_runner(struct rgnv_handle* h, const void* arg) {
	const struct nv_graph_args* a = arg;
	return nv_graph_exec(h, a->e, a->i, a->in, a->w, a->out, a->ws);
}

// The class of MIOpen algorithm a graph-API engine's numerical notes call
// for: FFT, Winograd, or else implicit GEMM.
static int nv_graph_class(unsigned notes) {
	if (notes & 1u << CUDNN_NUMERICAL_NOTE_FFT) return 2;
	if (notes & 1u << CUDNN_NUMERICAL_NOTE_WINOGRAD) return 3;
	return 5;
}

// A candidate of a Find, encoded.
struct nv_cand {
	unsigned raw;
	float time;
	size_t memory;
};

// ---- Checking the graph API's plans ----
//
// Some engines of the graph API compute wrong results for some problems:
// measured with cuDNN 9.19 on an H100, engine 70 for the weights gradient
// and engine 78 for the data gradient of small NCHW 16-bit problems, with
// whatever the workspace held. Find therefore runs each plan it timed once
// more and compares what it wrote with the result of a legacy algorithm;
// a plan that disagrees is left out.

// The bytes of the written tensor compared: all of them up to
// NV_CHECK_BYTES, else a quarter of that at its start, middle and end.
#define NV_CHECK_BYTES ((size_t)4 << 20)

struct nv_check {
	const void* dev; // the written tensor's data
	miopenDataType_t dt;
	int n;
	size_t off[3], len[3], total;
	unsigned char *ref, *got;
	double* refv; // ref's values
};

static int nv_check_init(struct nv_check* k, const struct rgnv_tensor* t, const void* dev) {
	size_t bytes = nv_tensor_bytes(t), es = nv_dsize(t->dtype);
	memset(k, 0, sizeof *k);
	k->dev = dev;
	k->dt = t->dtype;
	if (es == 0) return 0;
	if (bytes <= NV_CHECK_BYTES) {
		k->n = 1, k->len[0] = bytes;
	} else {
		size_t w = NV_CHECK_BYTES / 4 / es * es, mid = bytes / 2 / es * es;
		k->n = 3;
		k->off[0] = 0, k->off[1] = mid - w / 2 / es * es, k->off[2] = bytes - w;
		k->len[0] = k->len[1] = k->len[2] = w;
	}
	for (int i = 0; i < k->n; i++) k->total += k->len[i];
	k->ref = malloc(k->total);
	k->got = malloc(k->total);
	k->refv = malloc(k->total / es * sizeof(double));
	return k->ref != NULL && k->got != NULL && k->refv != NULL;
}

static void nv_check_free(struct nv_check* k) {
	free(k->ref);
	free(k->got);
	free(k->refv);
}

// nv_fetch copies the compared bytes to host memory after the stream's
// work; 0 on success.
static int nv_fetch(struct rgnv_handle* h, const struct nv_check* k, unsigned char* host) {
	size_t at = 0;
	for (int i = 0; i < k->n; i++) {
		if (NV(cudaMemcpyAsync, host + at, (const char*)k->dev + k->off[i], k->len[i], 2 /* device to host */, h->stream) != 0) return -1;
		at += k->len[i];
	}
	return NV(cudaStreamSynchronize, h->stream);
}

// nv_value_at reads element i of host data of a type, as a double.
static double nv_value_at(miopenDataType_t dt, const unsigned char* p, size_t i) {
	uint32_t bits;
	uint16_t u;
	float f;
	double d;
	switch (dt) {
	case miopenHalf: {
		memcpy(&u, p + 2 * i, 2);
		uint32_t sign = (uint32_t)(u >> 15) << 31, exp = (u >> 10) & 0x1f, man = u & 0x3ff;
		if (exp == 0x1f) return man ? NAN : (sign ? -INFINITY : INFINITY);
		if (exp == 0) return (sign ? -1.0 : 1.0) * man * (1.0 / 16777216.0); // subnormal: man * 2^-24
		bits = sign | (exp + 112) << 23 | man << 13;
		memcpy(&f, &bits, 4);
		return f;
	}
	case miopenBFloat16:
		memcpy(&u, p + 2 * i, 2);
		bits = (uint32_t)u << 16;
		memcpy(&f, &bits, 4);
		return f;
	case miopenFloat:
		memcpy(&f, p + 4 * i, 4);
		return f;
	case miopenDouble:
		memcpy(&d, p + 8 * i, 8);
		return d;
	default:
		return 0;
	}
}

// nv_agrees says whether a result agrees with the reference: where the
// reference is finite, so is the result, and their relative distance (the
// norm of the difference over the reference's) is under 0.1. Two right
// algorithms differ by far less (rounding, about 1e-2 for bfloat16 at
// most); the wrong plans seen differ by more than 1.
static int nv_agrees(const struct nv_check* k) {
	size_t n = k->total / nv_dsize(k->dt);
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		double r = k->refv[i], g = nv_value_at(k->dt, k->got, i);
		if (!isfinite(r)) continue;
		if (!isfinite(g)) return 0;
		num += (g - r) * (g - r);
		den += r * r;
	}
	return num <= 0.01 * den;
}

// nv_check_plans drops the graph-API candidates (cand[first:*k], plans
// e->plans[slot[i - first]]; both compacted) whose results disagree with
// the fastest legacy candidate's, or those of legacy implicit GEMM when
// none ran. Without a reference it keeps them all.
static void nv_check_plans(struct rgnv_handle* h, int kind, const struct rgnv_tensor* in, const void* inp, const struct rgnv_tensor* w,
                           const void* wp, const struct rgnv_conv* c, const struct rgnv_tensor* out, void* outp, void* ws, size_t wsSize,
                           struct nvg_entry* e, int* slot, struct nv_cand* cand, int first, int* k) {
	if (*k == first) return;
	int algo = 0, math = nv_default_math(in->dtype);
	float best = -1;
	for (int i = 0; i < first; i++) {
		int a = NV_ALGO(cand[i].raw);
		if (a >= 0 && a < NV_FWD_ALGOS && (best < 0 || cand[i].time < best)) {
			best = cand[i].time;
			algo = a;
			math = NV_MATH(cand[i].raw);
		}
	}
	struct nv_check chk;
	void* written = kind == RG_NV_ALGO_BWD_FILTER ? (void*)wp : outp;
	if (!nv_check_init(&chk, kind == RG_NV_ALGO_BWD_FILTER ? w : out, written) ||
	    nv_conv(h, c, in->dtype, math) != CUDNN_STATUS_SUCCESS ||
	    nv_legacy(h, kind, algo, NULL, in, inp, w, (void*)wp, out, outp, ws, wsSize, NULL) != CUDNN_STATUS_SUCCESS ||
	    nv_fetch(h, &chk, chk.ref) != 0) {
		nv_check_free(&chk);
		return;
	}
	for (size_t i = 0; i < chk.total / nv_dsize(chk.dt); i++) chk.refv[i] = nv_value_at(chk.dt, chk.ref, i);
	int kept = first;
	for (int i = first; i < *k; i++) {
		int ok = nv_graph_exec(h, e, slot[i - first], inp, wp, outp, ws) == CUDNN_STATUS_SUCCESS && nv_fetch(h, &chk, chk.got) == 0 &&
		         nv_agrees(&chk);
		if (ok) slot[kept - first] = slot[i - first], cand[kept++] = cand[i];
	}
	*k = kept;
	nv_check_free(&chk);
}

// Some plans' speed depends on where their workspace lies: measured with
// cuDNN 9.19 on an H200, engine 62's configurations 6 and 8 for the 3x3
// NCHW convolution of 8x640x32x32 ran in 140-145 us with the workspace at
// some offsets of one buffer (0, 256, 64 KiB) and in 158-166 us at others
// (4 KiB, 1 MiB, 2 MiB + 512), where configurations 3, 4 and 5 ran in
// 142-146 us at all six. Timed once, such a plan wins a Find by the luck of
// the Find's buffer and runs slower at the workspace a caller gives it
// (Tensor.Conv2d's row of that convolution read 0.83-0.85 of PyTorch in
// four sessions with configuration 6 or 8). The plans near the fastest
// that take a workspace are therefore timed again with it at these
// offsets, and their time is the mean over the placements: the time to
// expect where a workspace lands anywhere.
static const size_t nv_ws_offsets[] = {4096, (size_t)1 << 20};

// NV_RETIME_WITHIN is how far from the fastest a plan is timed again:
// the placements measured moved a plan's time by 18% at most.
#define NV_RETIME_WITHIN 1.25f

// nv_retime_placed times the graph-API candidates (cand[first:k], plans
// e->plans[slot[i - first]]) near the fastest candidate again with the
// workspace at nv_ws_offsets, where it fits, and keeps the mean.
static void nv_retime_placed(struct rgnv_handle* h, struct nvg_entry* e, const int* slot, struct nv_cand* cand, int first, int k,
                             const void* inp, const void* wp, const void* outp, void* ws, size_t wsSize) {
	float best = -1;
	for (int i = 0; i < k; i++)
		if (best < 0 || cand[i].time < best) best = cand[i].time;
	for (int i = first; i < k; i++) {
		const struct nvg_plan* p = &e->plans[slot[i - first]];
		if (p->ws == 0 || ws == NULL || cand[i].time > NV_RETIME_WITHIN * best) continue;
		float sum = cand[i].time;
		int n = 1;
		for (size_t j = 0; j < sizeof nv_ws_offsets / sizeof nv_ws_offsets[0]; j++) {
			if (p->ws + nv_ws_offsets[j] > wsSize) continue;
			struct nv_graph_args a = {e, slot[i - first], inp, wp, outp, (char*)ws + nv_ws_offsets[j]};
			float t = nv_time(h, nv_graph_runner, &a, -1);
			if (t < 0) continue;
			sum += t;
			n++;
		}
		cand[i].time = sum / n;
	}
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
	struct nv_cand cand[NV_FWD_ALGOS + 1 + NVG_SLOTS];
	int k = 0;
	for (int i = 0; s == miopenStatusSuccess && i < n && i < NV_FWD_ALGOS; i++) {
		if (found[i].status != CUDNN_STATUS_SUCCESS) continue;
		cand[k++] = (struct nv_cand){NV_ENCODE(nv_class(kind, found[i].algo), found[i].algo, found[i].mathType), found[i].time,
		                             found[i].memory};
	}
	// A 1x1 forward convolution may also run as a cuBLAS matrix product.
	// (best: the fastest candidate timed here so far.)
	float best = -1;
	struct nv_gemm g;
	if (s == miopenStatusSuccess && kind == RG_NV_ALGO_FWD && nv_gemm_plan(c, in, w, out, &g)) {
		struct nv_gemm_args a = {&g, inp, wp, outp};
		float t = nv_time(h, nv_gemm_runner, &a, best);
		if (t >= 0) {
			cand[k++] = (struct nv_cand){NV_ENCODE(0, NV_ALGO_CUBLAS, -1), t, 0};
			best = t;
		}
	}
	// And the graph API's plans that fit the workspace, timed alike, whose
	// results agree with a legacy algorithm's.
	struct nvg_entry* e = nv_graph_plans(h, kind, in, inp, w, wp, c, out, outp, 1, 0, -1, NULL);
	int first = k, slot[NVG_SLOTS];
	for (int i = 0; e != NULL && i < e->n; i++) {
		const struct nvg_plan* p = &e->plans[i];
		if (p->ws > wsSize || (p->ws > 0 && ws == NULL)) continue;
		struct nv_graph_args a = {e, i, inp, wp, outp, ws};
		float t = nv_time(h, nv_graph_runner, &a, best);
		if (t < 0) continue;
		if (best < 0 || t < best) best = t;
		slot[k - first] = i;
		cand[k++] = (struct nv_cand){NV_ENCODE_GRAPH(nv_graph_class(p->notes), p->id, p->notes & 1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE),
		                             t, p->ws};
	}
	if (e != NULL) nv_check_plans(h, kind, in, inp, w, wp, c, out, outp, ws, wsSize, e, slot, cand, first, &k);
	if (e != NULL) nv_retime_placed(h, e, slot, cand, first, k, inp, wp, outp, ws, wsSize);
	if (k == 0) return s != miopenStatusSuccess ? s : nvh(h, "cudnnFindConvolution*AlgorithmEx (no algorithm ran)", CUDNN_STATUS_NOT_SUPPORTED);
	if (s != miopenStatusSuccess) {
		// The legacy Find failed where the graph API ran: no error.
		h->last = 0;
		h->last_fn = NULL;
	}
	// Fastest first; a tie keeps the order above.
	for (int i = 1; i < k; i++) {
		struct nv_cand x = cand[i];
		int j = i;
		for (; j > 0 && cand[j - 1].time > x.time; j--) cand[j] = cand[j - 1];
		cand[j] = x;
	}
	if (k > request) k = request;
	for (int i = 0; i < k; i++) {
		perfs[i].fwd_algo = (miopenConvFwdAlgorithm_t)cand[i].raw;
		perfs[i].time = cand[i].time;
		perfs[i].memory = cand[i].memory;
	}
	*returned = k;
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

// nv_graph_run runs a graph-API algorithm (arguments as in nv_ws, with
// their data) with the handle's plan of its engine and configuration for
// the problem, made if the handle has none; 1 when it ran. Otherwise the
// caller falls back to a legacy algorithm.
static int nv_graph_run(struct rgnv_handle* h, int kind, unsigned raw, const void* alpha, const struct rgnv_tensor* in, const void* inp,
                        const struct rgnv_tensor* w, const void* wp, const struct rgnv_conv* c, const void* beta,
                        const struct rgnv_tensor* out, const void* outp, void* ws, size_t wsSize) {
	float a = alpha != NULL ? *(const float*)alpha : 1, b = beta != NULL ? *(const float*)beta : 0;
	int slot = -1;
	struct nvg_entry* e = nv_graph_plans(h, kind, in, inp, w, wp, c, out, outp, a, b, NV_GRAPH_ID(raw), &slot);
	if (e == NULL || e->plans[slot].ws > wsSize || (e->plans[slot].ws > 0 && ws == NULL)) return 0;
	return nv_graph_exec(h, e, slot, inp, wp, outp, ws) == CUDNN_STATUS_SUCCESS;
}

// nv_fallback is the legacy algorithm that runs a graph-API algorithm the
// graph API could not: the default of its class if its workspace fits,
// else algorithm 0 (implicit GEMM), which needs none. The handle's filter
// and convolution descriptors are set.
static int nv_fallback(struct rgnv_handle* h, int kind, unsigned raw, const struct rgnv_tensor* in, const struct rgnv_tensor* out,
                       size_t wsSize) {
	int algo = nv_default_algo(kind, NV_CLASS(raw));
	size_t s = 0;
	return nv_algo_ws(h, kind, algo, in, out, &s) == CUDNN_STATUS_SUCCESS && s <= wsSize ? algo : 0;
}

// nv_run runs one convolution: RG_NV_ALGO_FWD computes out (y) from in (x),
// RG_NV_ALGO_BWD_DATA out (dx) from in (dy), both with the weights w;
// RG_NV_ALGO_BWD_FILTER w (dw) from in (x) and out (dy).
static miopenStatus_t nv_run(struct rgnv_handle* h, int kind, unsigned raw, const void* alpha, const struct rgnv_tensor* in, const void* inp,
                             const struct rgnv_tensor* w, const void* wp, const struct rgnv_conv* c, const void* beta,
                             const struct rgnv_tensor* out, void* outp, void* ws, size_t wsSize) {
	if (h == NULL || c == NULL || c->spatial == 0 || !nv_ready(3, in, w, out)) return miopenStatusBadParm;
	int algo, math;
	nv_decode(kind, raw, in->dtype, &algo, &math);
	if (algo == NV_ALGO_GRAPH && nv_graph_run(h, kind, raw, alpha, in, inp, w, wp, c, beta, out, outp, ws, wsSize))
		return miopenStatusSuccess;
	if (algo == NV_ALGO_CUBLAS) {
		struct nv_gemm g;
		if (kind != RG_NV_ALGO_FWD || !nv_gemm_plan(c, in, w, out, &g)) return miopenStatusBadParm;
		return nv_gemm_run(h, &g, alpha, inp, wp, beta, outp);
	}
	int st = nv_filter(h, 0, w);
	if (st == CUDNN_STATUS_SUCCESS) st = nv_conv(h, c, in->dtype, math);
	if (st != CUDNN_STATUS_SUCCESS) return nv_status(st);
	if (algo == NV_ALGO_GRAPH) {
		algo = nv_fallback(h, kind, raw, in, out, wsSize);
		h->graph_fallbacks++;
	}
	return nvh(h, nv_legacy_names[kind], nv_legacy(h, kind, algo, alpha, in, inp, w, (void*)wp, out, outp, ws, wsSize, beta));
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
	if (cd == NULL) return miopenStatusBadParm;
	// The weights gradient correlates the forward input with the output
	// gradient; a transposed convolution swaps which is which.
	if (CONV(cd)->mode == miopenTranspose) {
		return nv_run(H(hh), RG_NV_ALGO_BWD_FILTER, (unsigned)raw, alpha, T(dyd), dy, T(dwd), dw, CONV(cd), beta, T(xd), (void*)x, ws, wsSize);
	}
	return nv_run(H(hh), RG_NV_ALGO_BWD_FILTER, (unsigned)raw, alpha, T(xd), x, T(dwd), dw, CONV(cd), beta, T(dyd), (void*)dy, ws, wsSize);
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

void nv_install_conv(void) {
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
}
