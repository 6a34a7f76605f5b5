// A fake cuDNN 9 for the tier-0 tests of package miopen's NVIDIA layer
// (nvidia.c). Every descriptor carries its kind, and each call checks that
// it was given the kinds cuDNN's prototype wants (a filter descriptor for
// weights, say), so that a wrong argument order fails. Calls append what
// they were given to the file named by $ROCM_GO_FAKE_LOG: types, formats,
// dimensions, modes, algorithms and the scaling factors (read as doubles
// for double data, as cuDNN does).
//
// Triggers: a tensor with a batch of 13 makes Find fail with
// CUDNN_STATUS_NOT_SUPPORTED_SHAPE, 14 with
// CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakefill.h"
#include "fakelog.h"

enum { HANDLE = 1, TENSOR, FILTER, CONV, ACTIV, POOL, LRN, OPT };

struct desc {
	int kind;
	int type, format, nb;
	int dims[8], strides[8];
};


static const char* ints(const int* v, int n) {
	static __thread char buf[8][128];
	static __thread int next;
	char* b = buf[next++ % 8];
	b[0] = 0;
	for (int i = 0; i < n; i++) sprintf(b + strlen(b), i ? ",%d" : "%d", v[i]);
	return b;
}

static const char* dims(const void* d) { return ints(((const struct desc*)d)->dims, ((const struct desc*)d)->nb); }

static int is(const void* d, int kind) { return d != NULL && ((const struct desc*)d)->kind == kind; }
#define BAD_KIND 2012 /* CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE */

static double scalar(const void* p, const void* d) {
	return ((const struct desc*)d)->type == 1 /* double */ ? *(const double*)p : *(const float*)p;
}

static int create(void** out, int kind) {
	struct desc* d = calloc(1, sizeof *d);
	d->kind = kind;
	*out = d;
	logf_("create %d", kind);
	return 0;
}
static int destroy(void* d, int kind) {
	if (!is(d, kind)) return BAD_KIND;
	free(d);
	logf_("destroy %d", kind);
	return 0;
}

size_t cudnnGetVersion(void) { return 91400; }
int cudnnCreate(void** h) { return create(h, HANDLE); }
int cudnnDestroy(void* h) { return destroy(h, HANDLE); }
int cudnnSetStream(void* h, void* s) { return is(h, HANDLE) ? 0 : BAD_KIND; }

int cudnnCreateTensorDescriptor(void** d) { return create(d, TENSOR); }
int cudnnDestroyTensorDescriptor(void* d) { return destroy(d, TENSOR); }
int cudnnSetTensorNdDescriptor(void* p, int type, int nb, const int* dimA, const int* strideA) {
	struct desc* d = p;
	if (!is(d, TENSOR)) return BAD_KIND;
	if (nb < 3 || nb > 8) return 2000;
	if (type == 10) return 3003; // int64: not a legacy tensor type
	d->type = type, d->nb = nb;
	memcpy(d->dims, dimA, sizeof(int) * (size_t)nb);
	memcpy(d->strides, strideA, sizeof(int) * (size_t)nb);
	logf_("cudnnSetTensorNdDescriptor type=%d dims=%s strides=%s", type, ints(dimA, nb), ints(strideA, nb));
	return 0;
}
int cudnnCreateFilterDescriptor(void** d) { return create(d, FILTER); }
int cudnnDestroyFilterDescriptor(void* d) { return destroy(d, FILTER); }
int cudnnSetFilterNdDescriptor(void* p, int type, int format, int nb, const int* dimA) {
	struct desc* d = p;
	if (!is(d, FILTER)) return BAD_KIND;
	d->type = type, d->format = format, d->nb = nb;
	memcpy(d->dims, dimA, sizeof(int) * (size_t)nb);
	logf_("cudnnSetFilterNdDescriptor type=%d format=%d dims=%s", type, format, ints(dimA, nb));
	return 0;
}

int cudnnCreateConvolutionDescriptor(void** d) { return create(d, CONV); }
int cudnnDestroyConvolutionDescriptor(void* d) { return destroy(d, CONV); }
int cudnnSetConvolutionNdDescriptor(void* d, int n, const int* pad, const int* stride, const int* dil, int mode, int compute) {
	if (!is(d, CONV)) return BAD_KIND;
	logf_("cudnnSetConvolutionNdDescriptor n=%d pad=%s stride=%s dil=%s mode=%d compute=%d", n, ints(pad, n), ints(stride, n),
	      ints(dil, n), mode, compute);
	return 0;
}
int cudnnSetConvolutionGroupCount(void* d, int g) {
	logf_("cudnnSetConvolutionGroupCount %d", g);
	return is(d, CONV) ? 0 : BAD_KIND;
}
int cudnnSetConvolutionMathType(void* d, int m) {
	logf_("cudnnSetConvolutionMathType %d", m);
	return is(d, CONV) ? 0 : BAD_KIND;
}

// Workspaces: 1000 * (algo + 1) bytes, FFT (algo 4 of every kind) not
// supported: the largest of a forward is 8000, of a backward data 6000.
static int ws(int algo, size_t* n) {
	if (algo == 4) return 3000;
	*n = 1000 * (size_t)(algo + 1);
	return 0;
}
int cudnnGetConvolutionForwardWorkspaceSize(void* h, void* x, void* w, void* c, void* y, int algo, size_t* n) {
	if (!is(h, HANDLE) || !is(x, TENSOR) || !is(w, FILTER) || !is(c, CONV) || !is(y, TENSOR)) return BAD_KIND;
	return ws(algo, n);
}
int cudnnGetConvolutionBackwardDataWorkspaceSize(void* h, void* w, void* dy, void* c, void* dx, int algo, size_t* n) {
	if (!is(h, HANDLE) || !is(w, FILTER) || !is(dy, TENSOR) || !is(c, CONV) || !is(dx, TENSOR)) return BAD_KIND;
	return ws(algo, n);
}
int cudnnGetConvolutionBackwardFilterWorkspaceSize(void* h, void* x, void* dy, void* c, void* dw, int algo, size_t* n) {
	if (!is(h, HANDLE) || !is(x, TENSOR) || !is(dy, TENSOR) || !is(c, CONV) || !is(dw, FILTER)) return BAD_KIND;
	return ws(algo, n);
}

typedef struct {
	int algo, status;
	float time;
	size_t memory;
	int determinism, mathType, reserved[3];
} perf;

static int trigger(const void* t) {
	int n = ((const struct desc*)t)->dims[0];
	return n == 13 ? 3002 : n == 14 ? 4004 : 0;
}

// Find returns two algorithms that ran and one that did not.
static int found(perf* p, int* n, int a0, int m0, int a1, int m1) {
	p[0] = (perf){.algo = a0, .status = 0, .time = 0.5f, .memory = 2048, .mathType = m0};
	p[1] = (perf){.algo = a1, .status = 0, .time = 0.75f, .memory = 4096, .mathType = m1};
	p[2] = (perf){.algo = 3, .status = 3000, .time = -1, .memory = 0};
	*n = 3;
	return 0;
}
int cudnnFindConvolutionForwardAlgorithmEx(void* h, void* x, const void* xp, void* w, const void* wp, void* c, void* y, void* yp, int req,
                                           int* n, perf* p, void* wsp, size_t wsSize) {
	if (!is(h, HANDLE) || !is(x, TENSOR) || !is(w, FILTER) || !is(c, CONV) || !is(y, TENSOR)) return BAD_KIND;
	if (trigger(x)) return trigger(x);
	logf_("cudnnFindConvolutionForwardAlgorithmEx x=%s w=%s y=%s ws=%zu", dims(x), dims(w), dims(y), wsSize);
	return found(p, n, 1, 1, 6, 0);
}
int cudnnFindConvolutionBackwardDataAlgorithmEx(void* h, void* w, const void* wp, void* dy, const void* dyp, void* c, void* dx, void* dxp,
                                                int req, int* n, perf* p, void* wsp, size_t wsSize) {
	if (!is(h, HANDLE) || !is(w, FILTER) || !is(dy, TENSOR) || !is(c, CONV) || !is(dx, TENSOR)) return BAD_KIND;
	if (trigger(dy)) return trigger(dy);
	logf_("cudnnFindConvolutionBackwardDataAlgorithmEx w=%s dy=%s dx=%s ws=%zu", dims(w), dims(dy), dims(dx), wsSize);
	return found(p, n, 1, 1, 5, 0);
}
int cudnnFindConvolutionBackwardFilterAlgorithmEx(void* h, void* x, const void* xp, void* dy, const void* dyp, void* c, void* dw, void* dwp,
                                                  int req, int* n, perf* p, void* wsp, size_t wsSize) {
	if (!is(h, HANDLE) || !is(x, TENSOR) || !is(dy, TENSOR) || !is(c, CONV) || !is(dw, FILTER)) return BAD_KIND;
	if (trigger(x)) return trigger(x);
	logf_("cudnnFindConvolutionBackwardFilterAlgorithmEx x=%s dy=%s dw=%s ws=%zu", dims(x), dims(dy), dims(dw), wsSize);
	return found(p, n, 1, 1, 6, 3);
}

// The elements an output spans: a filter is packed.
static size_t span(const struct desc* d) {
	size_t n = 1;
	for (int i = 0; i < d->nb; i++) n += d->kind == FILTER ? 0 : (size_t)(d->dims[i] - 1) * (size_t)d->strides[i];
	if (d->kind == FILTER) {
		for (int i = 0; i < d->nb; i++) n *= (size_t)d->dims[i];
	}
	return n;
}

// The legacy convolutions write 1 into every element of their output.
int cudnnConvolutionForward(void* h, const void* alpha, void* x, const void* xp, void* w, const void* wp, void* c, int algo, void* wsp,
                            size_t wsSize, const void* beta, void* y, void* yp) {
	if (!is(h, HANDLE) || !is(x, TENSOR) || !is(w, FILTER) || !is(c, CONV) || !is(y, TENSOR)) return BAD_KIND;
	fake_fill(yp, ((struct desc*)y)->type, span(y), 1);
	logf_("cudnnConvolutionForward x=%s w=%s y=%s algo=%d ws=%zu alpha=%g beta=%g", dims(x), dims(w), dims(y), algo, wsSize, scalar(alpha, y),
	      scalar(beta, y));
	return 0;
}
int cudnnConvolutionBackwardData(void* h, const void* alpha, void* w, const void* wp, void* dy, const void* dyp, void* c, int algo, void* wsp,
                                 size_t wsSize, const void* beta, void* dx, void* dxp) {
	if (!is(h, HANDLE) || !is(w, FILTER) || !is(dy, TENSOR) || !is(c, CONV) || !is(dx, TENSOR)) return BAD_KIND;
	fake_fill(dxp, ((struct desc*)dx)->type, span(dx), 1);
	logf_("cudnnConvolutionBackwardData w=%s dy=%s dx=%s algo=%d ws=%zu alpha=%g beta=%g", dims(w), dims(dy), dims(dx), algo, wsSize,
	      scalar(alpha, dx), scalar(beta, dx));
	return 0;
}
int cudnnConvolutionBackwardFilter(void* h, const void* alpha, void* x, const void* xp, void* dy, const void* dyp, void* c, int algo, void* wsp,
                                   size_t wsSize, const void* beta, void* dw, void* dwp) {
	if (!is(h, HANDLE) || !is(x, TENSOR) || !is(dy, TENSOR) || !is(c, CONV) || !is(dw, FILTER)) return BAD_KIND;
	fake_fill(dwp, ((struct desc*)dw)->type, span(dw), 1);
	logf_("cudnnConvolutionBackwardFilter x=%s dy=%s dw=%s algo=%d ws=%zu alpha=%g beta=%g", dims(x), dims(dy), dims(dw), algo, wsSize,
	      scalar(alpha, dw), scalar(beta, dw));
	return 0;
}
int cudnnConvolutionBackwardBias(void* h, const void* alpha, void* dy, const void* dyp, const void* beta, void* db, void* dbp) {
	if (!is(h, HANDLE) || !is(dy, TENSOR) || !is(db, TENSOR)) return BAD_KIND;
	logf_("cudnnConvolutionBackwardBias dy=%s db=%s alpha=%g beta=%g", dims(dy), dims(db), scalar(alpha, db), scalar(beta, db));
	return 0;
}
int cudnnAddTensor(void* h, const void* alpha, void* a, const void* ap, const void* beta, void* c, void* cp) {
	if (!is(h, HANDLE) || !is(a, TENSOR) || !is(c, TENSOR)) return BAD_KIND;
	logf_("cudnnAddTensor a=%s c=%s alpha=%g beta=%g", dims(a), dims(c), scalar(alpha, c), scalar(beta, c));
	return 0;
}

int cudnnCreateOpTensorDescriptor(void** d) { return create(d, OPT); }
int cudnnDestroyOpTensorDescriptor(void* d) { return destroy(d, OPT); }
int cudnnSetOpTensorDescriptor(void* d, int op, int comp, int nan) {
	logf_("cudnnSetOpTensorDescriptor op=%d comp=%d nan=%d", op, comp, nan);
	return is(d, OPT) ? 0 : BAD_KIND;
}
int cudnnOpTensor(void* h, void* d, const void* a1, void* a, const void* ap, const void* a2, void* b, const void* bp, const void* beta, void* c,
                  void* cp) {
	if (!is(h, HANDLE) || !is(d, OPT) || !is(a, TENSOR) || !is(b, TENSOR) || !is(c, TENSOR)) return BAD_KIND;
	logf_("cudnnOpTensor a=%s b=%s c=%s alpha1=%g alpha2=%g beta=%g", dims(a), dims(b), dims(c), scalar(a1, c), scalar(a2, c), scalar(beta, c));
	return 0;
}

int cudnnCreateActivationDescriptor(void** d) { return create(d, ACTIV); }
int cudnnDestroyActivationDescriptor(void* d) { return destroy(d, ACTIV); }
int cudnnSetActivationDescriptor(void* d, int mode, int nan, double coef) {
	logf_("cudnnSetActivationDescriptor mode=%d nan=%d coef=%g", mode, nan, coef);
	return is(d, ACTIV) ? 0 : BAD_KIND;
}
int cudnnActivationForward(void* h, void* d, const void* alpha, void* x, const void* xp, const void* beta, void* y, void* yp) {
	if (!is(h, HANDLE) || !is(d, ACTIV) || !is(x, TENSOR) || !is(y, TENSOR)) return BAD_KIND;
	logf_("cudnnActivationForward alpha=%g beta=%g", scalar(alpha, y), scalar(beta, y));
	return 0;
}
int cudnnActivationBackward(void* h, void* d, const void* alpha, void* y, const void* yp, void* dy, const void* dyp, void* x, const void* xp,
                            const void* beta, void* dx, void* dxp) {
	if (!is(h, HANDLE) || !is(d, ACTIV) || !is(y, TENSOR) || !is(dy, TENSOR) || !is(x, TENSOR) || !is(dx, TENSOR)) return BAD_KIND;
	logf_("cudnnActivationBackward");
	return 0;
}

int cudnnSoftmaxForward(void* h, int algo, int mode, const void* alpha, void* x, const void* xp, const void* beta, void* y, void* yp) {
	if (!is(h, HANDLE) || !is(x, TENSOR) || !is(y, TENSOR)) return BAD_KIND;
	logf_("cudnnSoftmaxForward algo=%d mode=%d x=%s", algo, mode, dims(x));
	return 0;
}
int cudnnSoftmaxBackward(void* h, int algo, int mode, const void* alpha, void* y, const void* yp, void* dy, const void* dyp, const void* beta,
                         void* dx, void* dxp) {
	if (!is(h, HANDLE) || !is(y, TENSOR) || !is(dy, TENSOR) || !is(dx, TENSOR)) return BAD_KIND;
	logf_("cudnnSoftmaxBackward algo=%d mode=%d", algo, mode);
	return 0;
}

int cudnnCreatePoolingDescriptor(void** d) { return create(d, POOL); }
int cudnnDestroyPoolingDescriptor(void* d) { return destroy(d, POOL); }
int cudnnSetPoolingNdDescriptor(void* d, int mode, int nan, int n, const int* win, const int* pad, const int* stride) {
	logf_("cudnnSetPoolingNdDescriptor mode=%d nan=%d win=%s pad=%s stride=%s", mode, nan, ints(win, n), ints(pad, n), ints(stride, n));
	return is(d, POOL) ? 0 : BAD_KIND;
}
int cudnnPoolingForward(void* h, void* d, const void* alpha, void* x, const void* xp, const void* beta, void* y, void* yp) {
	if (!is(h, HANDLE) || !is(d, POOL) || !is(x, TENSOR) || !is(y, TENSOR)) return BAD_KIND;
	logf_("cudnnPoolingForward x=%s y=%s", dims(x), dims(y));
	return 0;
}
int cudnnPoolingBackward(void* h, void* d, const void* alpha, void* y, const void* yp, void* dy, const void* dyp, void* x, const void* xp,
                         const void* beta, void* dx, void* dxp) {
	if (!is(h, HANDLE) || !is(d, POOL) || !is(y, TENSOR) || !is(dy, TENSOR) || !is(x, TENSOR) || !is(dx, TENSOR)) return BAD_KIND;
	logf_("cudnnPoolingBackward y=%s x=%s", dims(y), dims(x));
	return 0;
}

int cudnnCreateLRNDescriptor(void** d) { return create(d, LRN); }
int cudnnDestroyLRNDescriptor(void* d) { return destroy(d, LRN); }
int cudnnSetLRNDescriptor(void* d, unsigned n, double alpha, double beta, double k) {
	logf_("cudnnSetLRNDescriptor n=%u alpha=%g beta=%g k=%g", n, alpha, beta, k);
	return is(d, LRN) ? 0 : BAD_KIND;
}
int cudnnLRNCrossChannelForward(void* h, void* d, int mode, const void* alpha, void* x, const void* xp, const void* beta, void* y, void* yp) {
	if (!is(h, HANDLE) || !is(d, LRN) || !is(x, TENSOR) || !is(y, TENSOR)) return BAD_KIND;
	logf_("cudnnLRNCrossChannelForward mode=%d alpha=%g beta=%g", mode, scalar(alpha, y), scalar(beta, y));
	return 0;
}

int cudnnBatchNormalizationForwardInference(void* h, int mode, const void* alpha, const void* beta, void* x, const void* xp, void* y, void* yp,
                                            void* bn, const void* s, const void* b, const void* m, const void* v, double eps) {
	if (!is(h, HANDLE) || !is(x, TENSOR) || !is(y, TENSOR) || !is(bn, TENSOR)) return BAD_KIND;
	logf_("cudnnBatchNormalizationForwardInference mode=%d bn=%s type=%d eps=%g", mode, dims(bn), ((struct desc*)bn)->type, eps);
	return 0;
}
