// The NVIDIA platform of package miopen, translated to cuDNN (see
// nvidia.c): tensor descriptors and tensor ops.
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "nvidia.h"

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

miopenStatus_t nv_tensor_set(struct rgnv_tensor* t, miopenDataType_t dt, int nb, const int* dims, const int* strides) {
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
size_t nv_tensor_bytes(const struct rgnv_tensor* t) {
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
int nv_ready(int n, ...) {
	va_list ap;
	va_start(ap, n);
	int ok = 1;
	for (int i = 0; i < n; i++) {
		const struct rgnv_tensor* t = va_arg(ap, const struct rgnv_tensor*);
		if (t == NULL || !t->set || nv_dtype(t->dtype) == CUDNN_DATA_INT64) ok = 0;
	}
	va_end(ap);
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

void nv_install_tensor(void) {
	SET(miopenCreateTensorDescriptor);
	SET(miopenSet4dTensorDescriptor);
	SET(miopenSetTensorDescriptor);
	SET(miopenSetNdTensorDescriptorWithLayout);
	SET(miopenGetTensorDescriptorSize);
	SET(miopenGetTensorDescriptor);
	SET(miopenGetTensorNumBytes);
	SET(miopenDestroyTensorDescriptor);
	SET(miopenOpTensor);
}
