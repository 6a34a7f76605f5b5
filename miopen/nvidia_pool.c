// The NVIDIA platform of package miopen, translated to cuDNN (see
// nvidia.c): pooling and local response normalization.
#include <stdlib.h>
#include <string.h>

#include "nvidia.h"

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

void nv_install_pool(void) {
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
}
