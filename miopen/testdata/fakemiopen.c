// A fake libMIOpen for package miopen's tier-0 tests: descriptors keep what
// they are set to, the handle keeps its stream, Find returns two canned
// algorithms, and every call that runs something appends a line to the
// file named by $ROCM_GO_FAKE_LOG, so that the tests can see what reached
// the library. miopenConvolutionBackwardBias is left out on purpose.
//
// Triggers for error paths: a convolution with 7 groups is not implemented,
// a batch of 13 fails to allocate.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakelog.h"

#include "../zmiopen.h"


const char* miopenGetErrorString(miopenStatus_t s) { return s == miopenStatusBadParm ? "miopenStatusBadParm" : "fake status"; }
miopenStatus_t miopenGetVersion(size_t* a, size_t* b, size_t* c) {
	*a = 3, *b = 4, *c = 0;
	return miopenStatusSuccess;
}

struct miopenHandle {
	void* stream;
};
miopenStatus_t miopenCreateWithStream(miopenHandle_t* h, miopenAcceleratorQueue_t s) {
	*h = malloc(sizeof **h);
	(*h)->stream = s;
	logf_("miopenCreateWithStream");
	return miopenStatusSuccess;
}
miopenStatus_t miopenDestroy(miopenHandle_t h) {
	free(h);
	logf_("miopenDestroy");
	return miopenStatusSuccess;
}

struct miopenTensorDescriptor {
	miopenDataType_t t;
	int n;
	int dims[8], strides[8];
};
miopenStatus_t miopenCreateTensorDescriptor(miopenTensorDescriptor_t* d) {
	*d = calloc(1, sizeof **d);
	return miopenStatusSuccess;
}
miopenStatus_t miopenSetTensorDescriptor(miopenTensorDescriptor_t d, miopenDataType_t t, int n, const int* dims, const int* strides) {
	if (n < 1 || n > 8) return miopenStatusBadParm;
	d->t = t, d->n = n;
	for (int i = n - 1; i >= 0; i--) {
		d->dims[i] = dims[i];
		d->strides[i] = strides != NULL ? strides[i] : (i == n - 1 ? 1 : d->strides[i + 1] * dims[i + 1]);
	}
	return miopenStatusSuccess;
}
miopenStatus_t miopenSet4dTensorDescriptor(miopenTensorDescriptor_t d, miopenDataType_t t, int n, int c, int h, int w) {
	int dims[4] = {n, c, h, w};
	return miopenSetTensorDescriptor(d, t, 4, dims, NULL);
}
miopenStatus_t miopenSetNdTensorDescriptorWithLayout(miopenTensorDescriptor_t d, miopenDataType_t t, miopenTensorLayout_t l, const int* lens, int n) {
	if (l != miopenTensorNHWC && l != miopenTensorNDHWC) return miopenSetTensorDescriptor(d, t, n, lens, NULL);
	int s[5], acc = lens[1];
	s[1] = 1;
	for (int i = n - 1; i >= 2; i--) s[i] = acc, acc *= lens[i];
	s[0] = acc;
	return miopenSetTensorDescriptor(d, t, n, lens, s);
}
miopenStatus_t miopenGetTensorDescriptorSize(miopenTensorDescriptor_t d, int* n) {
	*n = d->n;
	return miopenStatusSuccess;
}
miopenStatus_t miopenGetTensorDescriptor(miopenTensorDescriptor_t d, miopenDataType_t* t, int* dims, int* strides) {
	*t = d->t;
	memcpy(dims, d->dims, sizeof(int) * (size_t)d->n);
	memcpy(strides, d->strides, sizeof(int) * (size_t)d->n);
	return miopenStatusSuccess;
}
miopenStatus_t miopenGetTensorNumBytes(miopenTensorDescriptor_t d, size_t* n) {
	size_t last = 0;
	for (int i = 0; i < d->n; i++) last += (size_t)(d->dims[i] - 1) * (size_t)d->strides[i];
	*n = (last + 1) * (d->t == miopenHalf || d->t == miopenBFloat16 ? 2 : d->t == miopenDouble || d->t == miopenInt64 ? 8 : d->t == miopenInt8 ? 1 : 4);
	return miopenStatusSuccess;
}
miopenStatus_t miopenDestroyTensorDescriptor(miopenTensorDescriptor_t d) {
	free(d);
	return miopenStatusSuccess;
}

static float f(const void* p) { return *(const float*)p; }

miopenStatus_t miopenOpTensor(miopenHandle_t h, miopenTensorOp_t op, const void* a1, const miopenTensorDescriptor_t a, const void* A, const void* a2,
                              const miopenTensorDescriptor_t b, const void* B, const void* beta, const miopenTensorDescriptor_t c, void* C) {
	logf_("miopenOpTensor op=%d alpha1=%g alpha2=%g beta=%g", op, f(a1), f(a2), f(beta));
	return miopenStatusSuccess;
}

struct miopenConvolutionDescriptor {
	int n, pad[3], stride[3], dil[3], adj[3], groups;
	miopenConvolutionMode_t mode;
};
miopenStatus_t miopenCreateConvolutionDescriptor(miopenConvolutionDescriptor_t* d) {
	*d = calloc(1, sizeof **d);
	(*d)->groups = 1;
	return miopenStatusSuccess;
}
miopenStatus_t miopenInitConvolutionNdDescriptor(miopenConvolutionDescriptor_t d, int n, const int* pad, const int* stride, const int* dil,
                                                 miopenConvolutionMode_t mode) {
	d->n = n, d->mode = mode;
	for (int i = 0; i < n; i++) d->pad[i] = pad[i], d->stride[i] = stride[i], d->dil[i] = dil[i];
	return miopenStatusSuccess;
}
miopenStatus_t miopenGetConvolutionNdDescriptor(miopenConvolutionDescriptor_t d, int req, int* n, int* pad, int* stride, int* dil,
                                                miopenConvolutionMode_t* mode) {
	if (req > d->n) return miopenStatusUnknownError;
	*n = d->n, *mode = d->mode;
	for (int i = 0; i < req; i++) pad[i] = d->pad[i], stride[i] = d->stride[i], dil[i] = d->dil[i];
	return miopenStatusSuccess;
}
miopenStatus_t miopenSetConvolutionGroupCount(miopenConvolutionDescriptor_t d, int g) {
	d->groups = g;
	return miopenStatusSuccess;
}
miopenStatus_t miopenGetConvolutionGroupCount(miopenConvolutionDescriptor_t d, int* g) {
	*g = d->groups;
	return miopenStatusSuccess;
}
miopenStatus_t miopenSetTransposeConvNdOutputPadding(miopenConvolutionDescriptor_t d, int n, const int* adj) {
	for (int i = 0; i < n; i++) d->adj[i] = adj[i];
	return miopenStatusSuccess;
}
miopenStatus_t miopenGetConvolutionNdForwardOutputDim(miopenConvolutionDescriptor_t c, const miopenTensorDescriptor_t x,
                                                      const miopenTensorDescriptor_t w, int* n, int* out) {
	*n = x->n;
	out[0] = x->dims[0];
	out[1] = c->mode == miopenTranspose ? w->dims[1] * c->groups : w->dims[0];
	for (int i = 0; i < c->n; i++) {
		int in = x->dims[i + 2], k = w->dims[i + 2];
		out[i + 2] = c->mode == miopenTranspose ? c->stride[i] * (in - 1) + c->dil[i] * (k - 1) + 1 - 2 * c->pad[i] + c->adj[i]
		                                        : (in + 2 * c->pad[i] - c->dil[i] * (k - 1) - 1) / c->stride[i] + 1;
	}
	return miopenStatusSuccess;
}
miopenStatus_t miopenDestroyConvolutionDescriptor(miopenConvolutionDescriptor_t d) {
	free(d);
	return miopenStatusSuccess;
}

static miopenStatus_t trigger(const miopenConvolutionDescriptor_t c, const miopenTensorDescriptor_t x) {
	if (c->groups == 7) return miopenStatusNotImplemented;
	if (x->dims[0] == 13) return miopenStatusAllocFailed;
	return miopenStatusSuccess;
}

#define WS(name)                                                                                                                   \
	miopenStatus_t name(miopenHandle_t h, const miopenTensorDescriptor_t a, const miopenTensorDescriptor_t b,                     \
	                    const miopenConvolutionDescriptor_t c, const miopenTensorDescriptor_t o, size_t* n) {                     \
		*n = 4096;                                                                                                                 \
		return miopenStatusSuccess;                                                                                                \
	}
WS(miopenConvolutionForwardGetWorkSpaceSize)
WS(miopenConvolutionBackwardDataGetWorkSpaceSize)
WS(miopenConvolutionBackwardWeightsGetWorkSpaceSize)

// Find returns implicit GEMM (0.25 ms, 1 KiB) then GEMM (0.5 ms, none).
// Algorithm 3 (Winograd) fails to run.
#define FIND(name, field)                                                                                                          \
	miopenStatus_t name(miopenHandle_t h, const miopenTensorDescriptor_t a, const void* ap, const miopenTensorDescriptor_t b,       \
	                    const void* bp, const miopenConvolutionDescriptor_t c, const miopenTensorDescriptor_t o, void* op, const int req, \
	                    int* n, miopenConvAlgoPerf_t* perf, void* ws, size_t wsSize, _Bool exhaustive) {                           \
		miopenStatus_t s = trigger(c, a);                                                                                          \
		if (s != miopenStatusSuccess) return s;                                                                                    \
		logf_(#name " a=%d,%d b=%d,%d out=%d,%d ws=%zu exhaustive=%d", a->dims[0], a->dims[1], b->dims[0], b->dims[1], o->dims[0], \
		      o->dims[1], ws != NULL ? wsSize : 0, exhaustive);                                                                    \
		perf[0].field = 5, perf[0].time = 0.25f, perf[0].memory = 1024;                                                            \
		perf[1].field = 0, perf[1].time = 0.5f, perf[1].memory = 0;                                                                \
		*n = req < 2 ? req : 2;                                                                                                    \
		return miopenStatusSuccess;                                                                                                \
	}
FIND(miopenFindConvolutionForwardAlgorithm, fwd_algo)
FIND(miopenFindConvolutionBackwardDataAlgorithm, bwd_data_algo)
FIND(miopenFindConvolutionBackwardWeightsAlgorithm, bwd_weights_algo)

#define RUN(name, algo_t)                                                                                                          \
	miopenStatus_t name(miopenHandle_t h, const void* alpha, const miopenTensorDescriptor_t a, const void* ap,                      \
	                    const miopenTensorDescriptor_t b, const void* bp, const miopenConvolutionDescriptor_t c, algo_t algo,       \
	                    const void* beta, const miopenTensorDescriptor_t o, void* op, void* ws, size_t wsSize) {                   \
		miopenStatus_t s = trigger(c, a);                                                                                          \
		if (s != miopenStatusSuccess) return s;                                                                                    \
		if ((int)algo == 3) return miopenStatusNotImplemented; /* Winograd, which the Find never returns */                      \
		logf_(#name " algo=%d alpha=%g beta=%g ws=%zu", (int)algo, f(alpha), f(beta), ws != NULL ? wsSize : 0);                   \
		return miopenStatusSuccess;                                                                                                \
	}
RUN(miopenConvolutionForward, miopenConvFwdAlgorithm_t)
RUN(miopenConvolutionBackwardData, miopenConvBwdDataAlgorithm_t)
RUN(miopenConvolutionBackwardWeights, miopenConvBwdWeightsAlgorithm_t)

miopenStatus_t miopenConvolutionForwardBias(miopenHandle_t h, const void* alpha, const miopenTensorDescriptor_t b, const void* bp,
                                            const void* beta, const miopenTensorDescriptor_t y, void* yp) {
	logf_("miopenConvolutionForwardBias alpha=%g beta=%g", f(alpha), f(beta));
	return miopenStatusSuccess;
}

struct miopenPoolingDescriptor {
	miopenPoolingMode_t mode;
	int n, win[3], pad[3], stride[3], index, wsmode;
};
miopenStatus_t miopenCreatePoolingDescriptor(miopenPoolingDescriptor_t* d) {
	*d = calloc(1, sizeof **d);
	return miopenStatusSuccess;
}
miopenStatus_t miopenSetNdPoolingDescriptor(miopenPoolingDescriptor_t d, const miopenPoolingMode_t mode, int n, const int* win, const int* pad,
                                            const int* stride) {
	d->mode = mode, d->n = n;
	for (int i = 0; i < n; i++) d->win[i] = win[i], d->pad[i] = pad[i], d->stride[i] = stride[i];
	return miopenStatusSuccess;
}
miopenStatus_t miopenGetNdPoolingDescriptor(const miopenPoolingDescriptor_t d, int req, miopenPoolingMode_t* mode, int* n, int* win, int* pad,
                                            int* stride) {
	*mode = d->mode, *n = d->n;
	for (int i = 0; i < d->n; i++) win[i] = d->win[i], pad[i] = d->pad[i], stride[i] = d->stride[i];
	return miopenStatusSuccess;
}
miopenStatus_t miopenSetPoolingIndexType(miopenPoolingDescriptor_t d, miopenIndexType_t t) {
	d->index = t;
	return miopenStatusSuccess;
}
miopenStatus_t miopenSetPoolingWorkSpaceIndexMode(miopenPoolingDescriptor_t d, miopenPoolingWorkspaceIndexMode_t m) {
	d->wsmode = m;
	logf_("miopenSetPoolingWorkSpaceIndexMode index=%d mode=%d", d->index, m);
	return miopenStatusSuccess;
}
miopenStatus_t miopenGetPoolingNdForwardOutputDim(const miopenPoolingDescriptor_t d, const miopenTensorDescriptor_t x, int n, int* out) {
	out[0] = x->dims[0], out[1] = x->dims[1];
	for (int i = 0; i < d->n; i++) out[i + 2] = (x->dims[i + 2] + 2 * d->pad[i] - d->win[i]) / d->stride[i] + 1;
	return miopenStatusSuccess;
}
miopenStatus_t miopenPoolingGetWorkSpaceSizeV2(const miopenPoolingDescriptor_t d, const miopenTensorDescriptor_t y, size_t* n) {
	*n = d->mode == miopenPoolingMax ? 64 : 0;
	return miopenStatusSuccess;
}
miopenStatus_t miopenPoolingForward(miopenHandle_t h, const miopenPoolingDescriptor_t d, const void* alpha, const miopenTensorDescriptor_t x,
                                    const void* xp, const void* beta, const miopenTensorDescriptor_t y, void* yp, _Bool bwd, void* ws, size_t n) {
	logf_("miopenPoolingForward do_backward=%d ws=%zu", bwd, n);
	return miopenStatusSuccess;
}
miopenStatus_t miopenPoolingBackward(miopenHandle_t h, const miopenPoolingDescriptor_t d, const void* alpha, const miopenTensorDescriptor_t y,
                                     const void* yp, const miopenTensorDescriptor_t dy, const void* dyp, const miopenTensorDescriptor_t x,
                                     const void* xp, const void* beta, const miopenTensorDescriptor_t dx, void* dxp, void* ws) {
	logf_("miopenPoolingBackward ws=%d", ws != NULL);
	return miopenStatusSuccess;
}
miopenStatus_t miopenDestroyPoolingDescriptor(miopenPoolingDescriptor_t d) {
	free(d);
	return miopenStatusSuccess;
}

struct miopenActivationDescriptor {
	miopenActivationMode_t mode;
	double a, b, g;
};
miopenStatus_t miopenCreateActivationDescriptor(miopenActivationDescriptor_t* d) {
	*d = calloc(1, sizeof **d);
	return miopenStatusSuccess;
}
miopenStatus_t miopenSetActivationDescriptor(const miopenActivationDescriptor_t d, miopenActivationMode_t m, double a, double b, double g) {
	d->mode = m, d->a = a, d->b = b, d->g = g;
	return miopenStatusSuccess;
}
miopenStatus_t miopenGetActivationDescriptor(const miopenActivationDescriptor_t d, miopenActivationMode_t* m, double* a, double* b, double* g) {
	*m = d->mode, *a = d->a, *b = d->b, *g = d->g;
	return miopenStatusSuccess;
}
miopenStatus_t miopenActivationForward(miopenHandle_t h, const miopenActivationDescriptor_t d, const void* alpha, const miopenTensorDescriptor_t x,
                                       const void* xp, const void* beta, const miopenTensorDescriptor_t y, void* yp) {
	logf_("miopenActivationForward mode=%d alpha=%g beta=%g", d->mode, f(alpha), f(beta));
	return miopenStatusSuccess;
}
miopenStatus_t miopenActivationBackward(miopenHandle_t h, const miopenActivationDescriptor_t d, const void* alpha, const miopenTensorDescriptor_t y,
                                        const void* yp, const miopenTensorDescriptor_t dy, const void* dyp, const miopenTensorDescriptor_t x,
                                        const void* xp, const void* beta, const miopenTensorDescriptor_t dx, void* dxp) {
	logf_("miopenActivationBackward mode=%d", d->mode);
	return miopenStatusSuccess;
}
miopenStatus_t miopenDestroyActivationDescriptor(miopenActivationDescriptor_t d) {
	free(d);
	return miopenStatusSuccess;
}

miopenStatus_t miopenSoftmaxForward_V2(miopenHandle_t h, const void* alpha, const miopenTensorDescriptor_t x, const void* xp, const void* beta,
                                       const miopenTensorDescriptor_t y, void* yp, miopenSoftmaxAlgorithm_t a, miopenSoftmaxMode_t m) {
	logf_("miopenSoftmaxForward_V2 algo=%d mode=%d", a, m);
	return miopenStatusSuccess;
}

struct miopenLRNDescriptor {
	miopenLRNMode_t mode;
	unsigned n;
	double a, b, k;
};
miopenStatus_t miopenCreateLRNDescriptor(miopenLRNDescriptor_t* d) {
	*d = calloc(1, sizeof **d);
	return miopenStatusSuccess;
}
miopenStatus_t miopenSetLRNDescriptor(const miopenLRNDescriptor_t d, miopenLRNMode_t m, unsigned n, double a, double b, double k) {
	d->mode = m, d->n = n, d->a = a, d->b = b, d->k = k;
	return miopenStatusSuccess;
}
miopenStatus_t miopenGetLRNDescriptor(const miopenLRNDescriptor_t d, miopenLRNMode_t* m, unsigned* n, double* a, double* b, double* k) {
	*m = d->mode, *n = d->n, *a = d->a, *b = d->b, *k = d->k;
	return miopenStatusSuccess;
}
miopenStatus_t miopenLRNGetWorkSpaceSize(const miopenTensorDescriptor_t y, size_t* n) {
	*n = 128;
	return miopenStatusSuccess;
}
miopenStatus_t miopenDestroyLRNDescriptor(miopenLRNDescriptor_t d) {
	free(d);
	return miopenStatusSuccess;
}

miopenStatus_t miopenDeriveBNTensorDescriptor(miopenTensorDescriptor_t d, const miopenTensorDescriptor_t x, miopenBatchNormMode_t m) {
	int dims[5];
	dims[0] = 1;
	for (int i = 1; i < x->n; i++) dims[i] = m == miopenBNSpatial && i > 1 ? 1 : x->dims[i];
	return miopenSetTensorDescriptor(d, miopenFloat, x->n, dims, NULL);
}
miopenStatus_t miopenBatchNormalizationForwardInference(miopenHandle_t h, miopenBatchNormMode_t m, void* alpha, void* beta,
                                                        const miopenTensorDescriptor_t x, const void* xp, const miopenTensorDescriptor_t y, void* yp,
                                                        const miopenTensorDescriptor_t bn, void* scale, void* bias, void* mean, void* var,
                                                        double eps) {
	logf_("miopenBatchNormalizationForwardInference mode=%d eps=%g", m, eps);
	return miopenStatusSuccess;
}

// MHA: descriptors and problems exist; Find finds nothing, as without a
// CDNA GPU, unless $ROCM_GO_FAKE_MHA_SOLUTIONS is set (to a number of
// solutions): then Run logs the operands it was given.
struct miopenMhaDescriptor {
	float scale;
};
miopenStatus_t miopenCreateMhaDescriptor(miopenMhaDescriptor_t* d) {
	*d = calloc(1, sizeof **d);
	return miopenStatusSuccess;
}
miopenStatus_t miopenSetMhaDescriptor(miopenMhaDescriptor_t d, float s) {
	d->scale = s;
	return miopenStatusSuccess;
}
miopenStatus_t miopenGetMhaDescriptor(miopenMhaDescriptor_t d, float* s) {
	*s = d->scale;
	return miopenStatusSuccess;
}
struct miopenProblem {
	int tensors;
	float scale;
};
miopenStatus_t miopenCreateMhaProblem(miopenProblem_t* p, miopenMhaDescriptor_t d, miopenProblemDirection_t dir) {
	*p = calloc(1, sizeof **p);
	(*p)->scale = d->scale;
	return miopenStatusSuccess;
}
static const char* mhaName(miopenTensorArgumentId_t id) {
	switch (id) {
	case miopenTensorMhaQ: return "Q";
	case miopenTensorMhaK: return "K";
	case miopenTensorMhaV: return "V";
	case miopenTensorMhaO: return "O";
	default: return NULL;
	}
}
miopenStatus_t miopenSetProblemTensorDescriptor(miopenProblem_t p, miopenTensorArgumentId_t id, const miopenTensorDescriptor_t d) {
	p->tensors++;
	const char* name = mhaName(id);
	if (name != NULL && d->n == 4) {
		logf_("miopenSetProblemTensorDescriptor %s type=%d dims=%dx%dx%dx%d strides=%d,%d,%d,%d", name, d->t, d->dims[0], d->dims[1], d->dims[2],
		      d->dims[3], d->strides[0], d->strides[1], d->strides[2], d->strides[3]);
	}
	return miopenStatusSuccess;
}
struct miopenSolution {
	float scale;
};
miopenStatus_t miopenFindSolutions(miopenHandle_t h, miopenProblem_t p, miopenFindOptions_t o, miopenSolution_t* s, size_t* n, size_t max) {
	logf_("miopenFindSolutions tensors=%d", p->tensors);
	const char* want = getenv("ROCM_GO_FAKE_MHA_SOLUTIONS");
	*n = 0;
	for (size_t i = 0; want != NULL && i < (size_t)atoi(want) && i < max; i++) {
		s[i] = calloc(1, sizeof *s[i]);
		s[i]->scale = p->scale;
		*n = i + 1;
	}
	return miopenStatusSuccess;
}
miopenStatus_t miopenGetSolutionWorkspaceSize(miopenSolution_t s, size_t* ws) {
	*ws = 0;
	return miopenStatusSuccess;
}
miopenStatus_t miopenGetSolutionTime(miopenSolution_t s, float* t) {
	*t = 0.25f;
	return miopenStatusSuccess;
}
miopenStatus_t miopenGetSolutionSolverId(miopenSolution_t s, uint64_t* id) {
	*id = 7;
	return miopenStatusSuccess;
}
miopenStatus_t miopenRunSolution(miopenHandle_t h, miopenSolution_t s, size_t n, const miopenTensorArgument_t* t, void* ws, size_t wsSize) {
	void *q = NULL, *k = NULL, *v = NULL, *o = NULL;
	int mask = 0;
	for (size_t i = 0; i < n; i++) {
		switch (t[i].id) {
		case miopenTensorMhaQ: q = t[i].buffer; break;
		case miopenTensorMhaK: k = t[i].buffer; break;
		case miopenTensorMhaV: v = t[i].buffer; break;
		case miopenTensorMhaO: o = t[i].buffer; break;
		case miopenTensorMhaMask: mask = *(const int*)t[i].buffer; break;
		default: break;
		}
	}
	logf_("miopenRunSolution inputs=%zu scale=%g q=%p k=%p v=%p o=%p mask=%d", n, s->scale, q, k, v, o, mask);
	return miopenStatusSuccess;
}
miopenStatus_t miopenDestroySolution(miopenSolution_t s) {
	free(s);
	return miopenStatusSuccess;
}
miopenStatus_t miopenDestroyProblem(miopenProblem_t p) {
	free(p);
	return miopenStatusSuccess;
}
