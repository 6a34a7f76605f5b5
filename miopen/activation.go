package miopen

/*
#include "helpers.h"
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/bind"
)

// ActivationMode is an activation function (miopenActivationMode_t). The
// parameters alpha, beta and gamma of an ActivationDescriptor enter as
// each mode says.
type ActivationMode int

// Activation modes.
const (
	ActivationPassThrough ActivationMode = C.miopenActivationPASTHRU     // x
	ActivationLogistic    ActivationMode = C.miopenActivationLOGISTIC    // 1 / (1 + e^-x)
	ActivationTanh        ActivationMode = C.miopenActivationTANH        // beta * tanh(alpha * x)
	ActivationReLU        ActivationMode = C.miopenActivationRELU        // max(0, x)
	ActivationSoftReLU    ActivationMode = C.miopenActivationSOFTRELU    // log(1 + e^x)
	ActivationAbs         ActivationMode = C.miopenActivationABS         // |x|
	ActivationPower       ActivationMode = C.miopenActivationPOWER       // (alpha + beta * x)^gamma, 0 where the base is not positive
	ActivationClippedReLU ActivationMode = C.miopenActivationCLIPPEDRELU // min(alpha, max(0, x))
	ActivationLeakyReLU   ActivationMode = C.miopenActivationLEAKYRELU   // x > 0 ? x : alpha * x
	ActivationELU         ActivationMode = C.miopenActivationELU         // x > 0 ? x : alpha * (e^x - 1)
)

var activationNames = [...]string{"pass-through", "logistic", "tanh", "ReLU", "soft ReLU", "abs", "power", "clipped ReLU", "leaky ReLU", "ELU"}

func (m ActivationMode) String() string {
	if m >= 0 && int(m) < len(activationNames) {
		return activationNames[m]
	}
	return fmt.Sprintf("ActivationMode(%d)", int(m))
}

// ActivationDescriptor is an activation function with its parameters.
type ActivationDescriptor struct {
	d                  C.miopenActivationDescriptor_t
	mode               ActivationMode
	alpha, beta, gamma float64
	life               bind.Lifetime
}

// NewActivationDescriptor makes an activation descriptor
// (miopenSetActivationDescriptor). Unused parameters are ignored; tanh
// wants alpha = beta = 1 for the plain function.
func NewActivationDescriptor(mode ActivationMode, alpha, beta, gamma float64) (*ActivationDescriptor, error) {
	const op = "NewActivationDescriptor"
	if mode < ActivationPassThrough || mode > ActivationELU {
		return nil, invalid(op, "unknown activation mode %d", int(mode))
	}
	for _, v := range []float64{alpha, beta, gamma} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, invalid(op, "%v: parameters alpha %v, beta %v, gamma %v must be finite", mode, alpha, beta, gamma)
		}
	}
	switch {
	case mode == ActivationClippedReLU && alpha <= 0:
		return nil, invalid(op, "clipped ReLU: the ceiling alpha %v must be positive", alpha)
	case mode == ActivationTanh && beta == 0:
		return nil, invalid(op, "tanh: beta (the scale of the output) must not be 0")
	}
	if err := ensure(); err != nil {
		return nil, err
	}
	var d C.miopenActivationDescriptor_t
	if err := check("miopenCreateActivationDescriptor", C.rg_miopenCreateActivationDescriptor(&d)); err != nil {
		return nil, err
	}
	if err := check("miopenSetActivationDescriptor", C.rg_miopenSetActivationDescriptor(d, C.miopenActivationMode_t(mode), C.double(alpha), C.double(beta), C.double(gamma))); err != nil {
		C.rg_miopenDestroyActivationDescriptor(d)
		return nil, withDetail(err, fmt.Sprintf("%v alpha %v beta %v gamma %v", mode, alpha, beta, gamma))
	}
	a := &ActivationDescriptor{d: d, mode: mode, alpha: alpha, beta: beta, gamma: gamma}
	bind.Backstop(&a.life, a, func(p unsafe.Pointer) { C.rg_miopenDestroyActivationDescriptor(C.miopenActivationDescriptor_t(p)) }, unsafe.Pointer(d))
	return a, nil
}

func (a *ActivationDescriptor) alive(op string) error {
	if a == nil {
		return invalid(op, "nil activation descriptor")
	}
	if a.life.Closed() {
		return closedError(op)
	}
	return nil
}

// Mode is the activation function.
func (a *ActivationDescriptor) Mode() ActivationMode { return a.mode }

// Params returns alpha, beta and gamma.
func (a *ActivationDescriptor) Params() (alpha, beta, gamma float64) { return a.alpha, a.beta, a.gamma }

// Query asks the library for the mode and parameters
// (miopenGetActivationDescriptor).
func (a *ActivationDescriptor) Query() (mode ActivationMode, alpha, beta, gamma float64, err error) {
	if err := a.alive("ActivationDescriptor.Query"); err != nil {
		return 0, 0, 0, 0, err
	}
	var m C.miopenActivationMode_t
	var ca, cb, cg C.double
	err = check("miopenGetActivationDescriptor", C.rg_miopenGetActivationDescriptor(a.d, &m, &ca, &cb, &cg))
	runtime.KeepAlive(a)
	return ActivationMode(m), float64(ca), float64(cb), float64(cg), err
}

// Close destroys the descriptor. Closing twice does nothing.
func (a *ActivationDescriptor) Close() error {
	if a == nil {
		return nil
	}
	return a.life.Close(func() error {
		return check("miopenDestroyActivationDescriptor", C.rg_miopenDestroyActivationDescriptor(a.d))
	})
}

// cudnnHasActivation reports whether legacy cuDNN computes the mode with
// these parameters: sigmoid, ReLU, clipped ReLU, ELU, and plain tanh.
func cudnnHasActivation(mode ActivationMode, alpha, beta float64) bool {
	switch mode {
	case ActivationLogistic, ActivationReLU, ActivationClippedReLU, ActivationELU:
		return true
	case ActivationTanh:
		return alpha == 1 && beta == 1
	}
	return false
}

// activationKernel reports whether a pass runs on rocm-go's kernel: on
// NVIDIA for what cuDNN lacks, and everywhere for the power gradient
// (MIOpen 6.4's leaves out dy).
func activationKernel(a *ActivationDescriptor, backward bool) bool {
	if backward && a.mode == ActivationPower {
		return true
	}
	return LoadedPlatform() == hip.PlatformNVIDIA && !cudnnHasActivation(a.mode, a.alpha, a.beta)
}

// checkSame validates tensors that must share a type and dimensions.
func checkSame(op string, names []string, ts ...Tensor) error {
	for i := 1; i < len(ts); i++ {
		if !sameShape(ts[0].Desc, ts[i].Desc) {
			return invalid(op, "%s is %s but %s is %s: they must have the same type and dimensions", names[0], ts[0].Desc, names[i], ts[i].Desc)
		}
	}
	return nil
}

// checkTensors validates every tensor of a call on the handle.
func (h *Handle) checkTensors(op string, names []string, ts ...Tensor) error {
	for i, t := range ts {
		if err := t.check(op, names[i], h.dev); err != nil {
			return err
		}
	}
	return nil
}

// ActivationForward computes y = f(x) (miopenActivationForward;
// cudnnActivationForward or rocm-go's kernel on NVIDIA). x and y have the
// same type and dimensions; their strides may differ.
func (h *Handle) ActivationForward(a *ActivationDescriptor, x, y Tensor) error {
	const op = "Handle.ActivationForward"
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	names := []string{"x", "y"}
	if err := a.alive(op); err != nil {
		return err
	}
	if err := h.checkTensors(op, names, x, y); err != nil {
		return err
	}
	if err := checkSame(op, names, x, y); err != nil {
		return err
	}
	defer keepAlive(x, y)
	defer runtime.KeepAlive(a)
	if activationKernel(a, false) {
		return h.launchLocked(activationFwd, x.Desc.dtype, newKernelShape(x.Desc, y.Desc), func(args *hip.Args) {
			args.Int32(int32(a.mode)).Float64(a.alpha).Float64(a.beta).Float64(a.gamma).Ptr(x.Data.Ptr()).Ptr(y.Data.Ptr())
		})
	}
	one, zero := C.float(1), C.float(0)
	return h.callLocked("miopenActivationForward", func() C.miopenStatus_t {
		return C.rg_miopenActivationForward_on(h.c(), h.h, a.d, unsafe.Pointer(&one), x.Desc.d, x.ptr(), unsafe.Pointer(&zero), y.Desc.d, y.ptr())
	})
}

// ActivationBackward computes dx, the gradient of the activation, from dy,
// x and y = f(x) (miopenActivationBackward). The power mode runs on
// rocm-go's kernel on every platform: MIOpen 6.4's kernel leaves dy out of
// that gradient.
func (h *Handle) ActivationBackward(a *ActivationDescriptor, y, dy, x, dx Tensor) error {
	const op = "Handle.ActivationBackward"
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	names := []string{"y", "dy", "x", "dx"}
	if err := a.alive(op); err != nil {
		return err
	}
	if err := h.checkTensors(op, names, y, dy, x, dx); err != nil {
		return err
	}
	if err := checkSame(op, names, y, dy, x, dx); err != nil {
		return err
	}
	defer keepAlive(y, dy, x, dx)
	defer runtime.KeepAlive(a)
	if activationKernel(a, true) {
		return h.launchLocked(activationBwd, x.Desc.dtype, newKernelShape(x.Desc, y.Desc, dy.Desc, dx.Desc), func(args *hip.Args) {
			args.Int32(int32(a.mode)).Float64(a.alpha).Float64(a.beta).Float64(a.gamma).
				Ptr(x.Data.Ptr()).Ptr(y.Data.Ptr()).Ptr(dy.Data.Ptr()).Ptr(dx.Data.Ptr())
		})
	}
	one, zero := C.float(1), C.float(0)
	return h.callLocked("miopenActivationBackward", func() C.miopenStatus_t {
		return C.rg_miopenActivationBackward_on(h.c(), h.h, a.d, unsafe.Pointer(&one), y.Desc.d, y.ptr(), dy.Desc.d, dy.ptr(),
			x.Desc.d, x.ptr(), unsafe.Pointer(&zero), dx.Desc.d, dx.ptr())
	})
}

// SoftmaxForward computes y = softmax(x) (miopenSoftmaxForward_V2;
// cudnnSoftmaxForward on NVIDIA): SoftmaxAlgorithmFast, Accurate (shifted by
// the maximum) or Log (log-softmax), over C, H and W of each image
// (SoftmaxModeInstance) or over C at each position (SoftmaxModeChannel).
func (h *Handle) SoftmaxForward(algo SoftmaxAlgorithm, mode SoftmaxMode, x, y Tensor) error {
	const op = "Handle.SoftmaxForward"
	if err := checkSoftmax(op, algo, mode); err != nil {
		return err
	}
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	names := []string{"x", "y"}
	if err := h.checkTensors(op, names, x, y); err != nil {
		return err
	}
	if err := checkSame(op, names, x, y); err != nil {
		return err
	}
	defer keepAlive(x, y)
	one, zero := C.float(1), C.float(0)
	return h.callLocked("miopenSoftmaxForward_V2", func() C.miopenStatus_t {
		return C.rg_miopenSoftmaxForward_V2_on(h.c(), h.h, unsafe.Pointer(&one), x.Desc.d, x.ptr(), unsafe.Pointer(&zero), y.Desc.d, y.ptr(),
			C.miopenSoftmaxAlgorithm_t(algo), C.miopenSoftmaxMode_t(mode))
	})
}

// SoftmaxBackward computes dx from y = softmax(x) and dy
// (miopenSoftmaxBackward_V2).
func (h *Handle) SoftmaxBackward(algo SoftmaxAlgorithm, mode SoftmaxMode, y, dy, dx Tensor) error {
	const op = "Handle.SoftmaxBackward"
	if err := checkSoftmax(op, algo, mode); err != nil {
		return err
	}
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	names := []string{"y", "dy", "dx"}
	if err := h.checkTensors(op, names, y, dy, dx); err != nil {
		return err
	}
	if err := checkSame(op, names, y, dy, dx); err != nil {
		return err
	}
	defer keepAlive(y, dy, dx)
	one, zero := C.float(1), C.float(0)
	return h.callLocked("miopenSoftmaxBackward_V2", func() C.miopenStatus_t {
		return C.rg_miopenSoftmaxBackward_V2_on(h.c(), h.h, unsafe.Pointer(&one), y.Desc.d, y.ptr(), dy.Desc.d, dy.ptr(),
			unsafe.Pointer(&zero), dx.Desc.d, dx.ptr(), C.miopenSoftmaxAlgorithm_t(algo), C.miopenSoftmaxMode_t(mode))
	})
}

func checkSoftmax(op string, algo SoftmaxAlgorithm, mode SoftmaxMode) error {
	if algo > SoftmaxAlgorithmLog {
		return invalid(op, "unknown softmax algorithm %d", uint32(algo))
	}
	if mode > SoftmaxModeChannel {
		return invalid(op, "unknown softmax mode %d", uint32(mode))
	}
	return nil
}
