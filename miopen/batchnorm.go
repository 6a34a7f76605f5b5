package miopen

/*
#include "helpers.h"
*/
import "C"

import (
	"math"
	"runtime"
	"slices"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
)

// DeriveBatchNormDescriptor makes the descriptor of the scale, bias, mean
// and variance of a batch normalization of x (miopenDeriveBNTensorDescriptor):
// 1 x C x 1 x 1 (x 1) for BatchNormModeSpatial, 1 x C x H x W (x D) for
// BatchNormModePerActivation; always float (x is half, bfloat16 or float).
func DeriveBatchNormDescriptor(x *TensorDescriptor, mode BatchNormMode) (*TensorDescriptor, error) {
	const op = "DeriveBatchNormDescriptor"
	if err := x.alive(op); err != nil {
		return nil, err
	}
	dims, dt, err := batchNormShape(op, x, mode)
	if err != nil {
		return nil, err
	}
	return newTensor(op, dt, dims, packedStrides(dims), func(d C.miopenTensorDescriptor_t) error {
		err := check("miopenDeriveBNTensorDescriptor", C.rg_miopenDeriveBNTensorDescriptor(d, x.d, C.miopenBatchNormMode_t(mode)))
		runtime.KeepAlive(x)
		return err
	})
}

// batchNormShape is the derived descriptor's dimensions and type.
func batchNormShape(op string, x *TensorDescriptor, mode BatchNormMode) ([]int, DataType, error) {
	if mode > BatchNormModeSpatial {
		return nil, 0, invalid(op, "unknown batch-norm mode %d", uint32(mode))
	}
	if len(x.dims) != 4 && len(x.dims) != 5 {
		return nil, 0, invalid(op, "x is %s: batch normalization takes 4-D or 5-D tensors", x)
	}
	if x.dtype != DataTypeHalf && x.dtype != DataTypeBFloat16 && x.dtype != DataTypeFloat {
		return nil, 0, notImplemented(op, "x is %s: MIOpen's batch normalization takes half, bfloat16 or float data, with float statistics", x)
	}
	dims := slices.Clone(x.dims)
	dims[0] = 1
	if mode == BatchNormModeSpatial {
		for i := 2; i < len(dims); i++ {
			dims[i] = 1
		}
	}
	return dims, DataTypeFloat, nil
}

// BatchNormParams are the per-channel (or per-activation) tensors of a
// batch normalization: Desc from DeriveBatchNormDescriptor and a buffer of
// Desc's size for each tensor a pass reads or writes.
type BatchNormParams struct {
	Mode        BatchNormMode
	Desc        *TensorDescriptor
	Scale, Bias *hip.Buffer // gamma and beta
	Epsilon     float64     // added to the variance, positive
}

func (h *Handle) checkBatchNorm(op string, p *BatchNormParams, x, y Tensor, bufs map[string]*hip.Buffer) error {
	if err := h.checkTensors(op, []string{"x", "y"}, x, y); err != nil {
		return err
	}
	if err := checkSame(op, []string{"x", "y"}, x, y); err != nil {
		return err
	}
	dims, dt, err := batchNormShape(op, x.Desc, p.Mode)
	if err != nil {
		return err
	}
	if err := p.Desc.alive(op); err != nil {
		return err
	}
	if !slices.Equal(dims, p.Desc.dims) || dt != p.Desc.dtype {
		return invalid(op, "the parameters' descriptor is %s; for x %s it is %v %v (DeriveBatchNormDescriptor)", p.Desc, x.Desc, dt, dims)
	}
	if !(p.Epsilon > 0) || math.IsInf(p.Epsilon, 0) {
		return invalid(op, "epsilon %v must be positive", p.Epsilon)
	}
	for name, b := range bufs {
		if b == nil {
			continue
		}
		if err := (Tensor{Desc: p.Desc, Data: b}).check(op, name, h.dev); err != nil {
			return err
		}
	}
	return nil
}

// BatchNormForwardInference normalizes x into y with the estimated mean and
// variance (miopenBatchNormalizationForwardInference):
// y = scale * (x - mean) / sqrt(variance + epsilon) + bias.
func (h *Handle) BatchNormForwardInference(p BatchNormParams, x, y Tensor, mean, variance *hip.Buffer) error {
	const op = "Handle.BatchNormForwardInference"
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	bufs := map[string]*hip.Buffer{"scale": p.Scale, "bias": p.Bias, "mean": mean, "variance": variance}
	for name, b := range bufs {
		if b == nil {
			return invalid(op, "nil %s", name)
		}
	}
	if err := h.checkBatchNorm(op, &p, x, y, bufs); err != nil {
		return err
	}
	one, zero := C.float(1), C.float(0)
	err := h.callLocked("miopenBatchNormalizationForwardInference", func() C.miopenStatus_t {
		return C.rg_miopenBatchNormalizationForwardInference_on(h.c(), h.h, C.miopenBatchNormMode_t(p.Mode), unsafe.Pointer(&one), unsafe.Pointer(&zero),
			x.Desc.d, x.ptr(), y.Desc.d, y.ptr(), p.Desc.d, devPtr(p.Scale), devPtr(p.Bias), devPtr(mean), devPtr(variance), C.double(p.Epsilon))
	})
	keepAlive(x, y)
	runtime.KeepAlive(p.Desc)
	runtime.KeepAlive(bufs)
	return err
}

// BatchNormTraining are the statistics a training pass updates and saves;
// each buffer is optional and has the size of BatchNormParams.Desc.
type BatchNormTraining struct {
	// Factor weighs the batch in the running averages:
	// running = (1-Factor)*running + Factor*batch (the variance unbiased).
	Factor                       float64
	RunningMean, RunningVariance *hip.Buffer
	// SavedMean and SavedInvVariance (1/sqrt(variance+epsilon)) are for
	// BatchNormBackward.
	SavedMean, SavedInvVariance *hip.Buffer
}

// BatchNormForwardTraining normalizes x into y with the batch's own mean
// and variance (miopenBatchNormalizationForwardTraining), and updates and
// saves the statistics t names.
func (h *Handle) BatchNormForwardTraining(p BatchNormParams, x, y Tensor, t BatchNormTraining) error {
	const op = "Handle.BatchNormForwardTraining"
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if p.Scale == nil || p.Bias == nil {
		return invalid(op, "nil scale or bias")
	}
	if (t.RunningMean == nil) != (t.RunningVariance == nil) || (t.SavedMean == nil) != (t.SavedInvVariance == nil) {
		return invalid(op, "running mean and variance go together, as do the saved mean and inverse variance")
	}
	if !(t.Factor >= 0 && t.Factor <= 1) {
		return invalid(op, "the averaging factor %v is in [0, 1]", t.Factor)
	}
	bufs := map[string]*hip.Buffer{"scale": p.Scale, "bias": p.Bias, "running mean": t.RunningMean, "running variance": t.RunningVariance,
		"saved mean": t.SavedMean, "saved inverse variance": t.SavedInvVariance}
	if err := h.checkBatchNorm(op, &p, x, y, bufs); err != nil {
		return err
	}
	one, zero := C.float(1), C.float(0)
	err := h.callLocked("miopenBatchNormalizationForwardTraining", func() C.miopenStatus_t {
		return C.rg_miopenBatchNormalizationForwardTraining_on(h.c(), h.h, C.miopenBatchNormMode_t(p.Mode), unsafe.Pointer(&one), unsafe.Pointer(&zero),
			x.Desc.d, x.ptr(), y.Desc.d, y.ptr(), p.Desc.d, devPtr(p.Scale), devPtr(p.Bias), C.double(t.Factor),
			devPtr(t.RunningMean), devPtr(t.RunningVariance), C.double(p.Epsilon), devPtr(t.SavedMean), devPtr(t.SavedInvVariance))
	})
	keepAlive(x, y)
	runtime.KeepAlive(p.Desc)
	runtime.KeepAlive(bufs)
	return err
}

// BatchNormGradients are the outputs of BatchNormBackward beside dx: the
// gradients of the scale and the bias (the size of BatchNormParams.Desc).
type BatchNormGradients struct {
	Scale, Bias *hip.Buffer
}

// BatchNormBackward computes dx and the gradients of the scale and bias
// from x and dy (miopenBatchNormalizationBackward). savedMean and
// savedInvVariance come from the training pass; both nil makes the library
// recompute them.
func (h *Handle) BatchNormBackward(p BatchNormParams, x, dy, dx Tensor, grads BatchNormGradients, savedMean, savedInvVariance *hip.Buffer) error {
	const op = "Handle.BatchNormBackward"
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if p.Scale == nil || grads.Scale == nil || grads.Bias == nil {
		return invalid(op, "nil scale or gradient buffer")
	}
	if (savedMean == nil) != (savedInvVariance == nil) {
		return invalid(op, "the saved mean and inverse variance go together")
	}
	if err := h.checkTensors(op, []string{"dy", "dx"}, dy, dx); err != nil {
		return err
	}
	if err := checkSame(op, []string{"x", "dy", "dx"}, x, dy, dx); err != nil {
		return err
	}
	bufs := map[string]*hip.Buffer{"scale": p.Scale, "scale gradient": grads.Scale, "bias gradient": grads.Bias,
		"saved mean": savedMean, "saved inverse variance": savedInvVariance}
	if err := h.checkBatchNorm(op, &p, x, dx, bufs); err != nil {
		return err
	}
	one, zero := C.float(1), C.float(0)
	err := h.callLocked("miopenBatchNormalizationBackward", func() C.miopenStatus_t {
		return C.rg_miopenBatchNormalizationBackward_on(h.c(), h.h, C.miopenBatchNormMode_t(p.Mode), unsafe.Pointer(&one), unsafe.Pointer(&zero),
			unsafe.Pointer(&one), unsafe.Pointer(&zero), x.Desc.d, x.ptr(), dy.Desc.d, dy.ptr(), dx.Desc.d, dx.ptr(), p.Desc.d, devPtr(p.Scale),
			devPtr(grads.Scale), devPtr(grads.Bias), C.double(p.Epsilon), devPtr(savedMean), devPtr(savedInvVariance))
	})
	keepAlive(x, dy, dx)
	runtime.KeepAlive(p.Desc)
	runtime.KeepAlive(bufs)
	return err
}

// OpTensor computes c = op(alpha1*a, alpha2*b) + beta*c element-wise
// (miopenOpTensor; cudnnOpTensor on NVIDIA) for op TensorOpAdd, Mul, Min or
// Max. a and c have the same dimensions; each dimension of b equals c's or
// is 1 (broadcast). All three have one type.
func (h *Handle) OpTensor(op TensorOp, alpha1 float32, a Tensor, alpha2 float32, b Tensor, beta float32, c Tensor) error {
	const name = "Handle.OpTensor"
	if op > TensorOpMax {
		return invalid(name, "unknown tensor op %d", uint32(op))
	}
	if err := h.lock(name); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if err := h.checkTensors(name, []string{"a", "b", "c"}, a, b, c); err != nil {
		return err
	}
	if err := checkSame(name, []string{"c", "a"}, c, a); err != nil {
		return err
	}
	if b.Desc.dtype != c.Desc.dtype || len(b.Desc.dims) != len(c.Desc.dims) {
		return invalid(name, "b is %s, c %s: b has c's type and rank", b.Desc, c.Desc)
	}
	for i, d := range b.Desc.dims {
		if d != 1 && d != c.Desc.dims[i] {
			return invalid(name, "b is %s, c %s: each dimension of b is c's or 1", b.Desc, c.Desc)
		}
	}
	a1, a2, bt := C.float(alpha1), C.float(alpha2), C.float(beta)
	err := h.callLocked("miopenOpTensor", func() C.miopenStatus_t {
		return C.rg_miopenOpTensor_on(h.c(), h.h, C.miopenTensorOp_t(op), unsafe.Pointer(&a1), a.Desc.d, a.ptr(), unsafe.Pointer(&a2), b.Desc.d, b.ptr(),
			unsafe.Pointer(&bt), c.Desc.d, c.ptr())
	})
	keepAlive(a, b, c)
	return err
}
