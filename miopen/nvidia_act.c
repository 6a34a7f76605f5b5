// The NVIDIA platform of package miopen, translated to cuDNN (see
// nvidia.c): batch normalization, activations, softmax, and multi-head
// attention, which legacy cuDNN lacks.
#include <stdlib.h>
#include <string.h>

#include "nvidia.h"

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

void nv_install_act(void) {
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
}
