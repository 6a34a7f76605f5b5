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

// LRNParams describe a local response normalization of 4-D N, C, H, W
// tensors: y = x * (K + Alpha/area * sum of x^2 over the window)^-Beta,
// the window being N channels around each element (LRNModeCrossChannel,
// area N) or N x N positions around it in its channel (LRNModeWithinChannel,
// area N*N), cut at the borders.
type LRNParams struct {
	Mode           LRNMode
	N              int // the window's width, odd
	Alpha, Beta, K float64
}

// LRNDescriptor is an LRN's parameters, read-only once made.
type LRNDescriptor struct {
	d    C.miopenLRNDescriptor_t
	p    LRNParams
	life bind.Lifetime
}

// NewLRNDescriptor makes an LRN descriptor (miopenSetLRNDescriptor). On
// NVIDIA the cross-channel LRN is cuDNN's, which takes N from 1 to 16, K at
// least 1e-5 and Beta at least 0.01; the within-channel one runs on
// rocm-go's kernels.
func NewLRNDescriptor(p LRNParams) (*LRNDescriptor, error) {
	const op = "NewLRNDescriptor"
	if p.Mode > LRNModeCrossChannel {
		return nil, invalid(op, "unknown LRN mode %d", uint32(p.Mode))
	}
	if p.N < 1 || p.N%2 == 0 || p.N > 255 {
		return nil, invalid(op, "N %d: the window's width is odd, from 1 to 255", p.N)
	}
	for _, v := range []float64{p.Alpha, p.Beta, p.K} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, invalid(op, "alpha %v, beta %v, K %v must be finite", p.Alpha, p.Beta, p.K)
		}
	}
	if p.K <= 0 {
		return nil, invalid(op, "K %v must be positive", p.K)
	}
	if err := ensure(); err != nil {
		return nil, err
	}
	var d C.miopenLRNDescriptor_t
	if err := check("miopenCreateLRNDescriptor", C.rg_miopenCreateLRNDescriptor(&d)); err != nil {
		return nil, err
	}
	if err := check("miopenSetLRNDescriptor", C.rg_miopenSetLRNDescriptor(d, C.miopenLRNMode_t(p.Mode), C.uint(p.N), C.double(p.Alpha), C.double(p.Beta), C.double(p.K))); err != nil {
		C.rg_miopenDestroyLRNDescriptor(d)
		return nil, withDetail(err, fmt.Sprintf("%+v", p))
	}
	l := &LRNDescriptor{d: d, p: p}
	bind.Backstop(&l.life, l, func(p unsafe.Pointer) { C.rg_miopenDestroyLRNDescriptor(C.miopenLRNDescriptor_t(p)) }, unsafe.Pointer(d))
	return l, nil
}

func (l *LRNDescriptor) alive(op string) error {
	if l == nil {
		return invalid(op, "nil LRN descriptor")
	}
	if l.life.Closed() {
		return closedError(op)
	}
	return nil
}

// Params returns the parameters.
func (l *LRNDescriptor) Params() LRNParams { return l.p }

// Query asks the library for the parameters (miopenGetLRNDescriptor).
func (l *LRNDescriptor) Query() (LRNParams, error) {
	if err := l.alive("LRNDescriptor.Query"); err != nil {
		return LRNParams{}, err
	}
	var mode C.miopenLRNMode_t
	var n C.uint
	var a, b, k C.double
	err := check("miopenGetLRNDescriptor", C.rg_miopenGetLRNDescriptor(l.d, &mode, &n, &a, &b, &k))
	runtime.KeepAlive(l)
	return LRNParams{Mode: LRNMode(mode), N: int(n), Alpha: float64(a), Beta: float64(b), K: float64(k)}, err
}

// WorkspaceSize is the workspace, in bytes, that a forward pass into y
// fills for the backward pass (miopenLRNGetWorkSpaceSize); 0 on NVIDIA,
// where the backward pass recomputes it.
func (l *LRNDescriptor) WorkspaceSize(y *TensorDescriptor) (int, error) {
	const op = "LRNDescriptor.WorkspaceSize"
	if err := l.alive(op); err != nil {
		return 0, err
	}
	if err := y.alive(op); err != nil {
		return 0, err
	}
	var n C.size_t
	err := check("miopenLRNGetWorkSpaceSize", C.rg_miopenLRNGetWorkSpaceSize(y.d, &n))
	runtime.KeepAlive(y)
	return int(n), err
}

// Close destroys the descriptor. Closing twice does nothing.
func (l *LRNDescriptor) Close() error {
	if l == nil {
		return nil
	}
	return l.life.Close(func() error { return check("miopenDestroyLRNDescriptor", C.rg_miopenDestroyLRNDescriptor(l.d)) })
}

// lrnKernel reports whether the LRN runs on rocm-go's kernels: the
// within-channel one on NVIDIA.
func lrnKernel(l *LRNDescriptor) bool {
	return LoadedPlatform() == hip.PlatformNVIDIA && l.p.Mode == LRNModeWithinChannel
}

func (h *Handle) checkLRN(op string, l *LRNDescriptor, names []string, ts ...Tensor) error {
	if err := l.alive(op); err != nil {
		return err
	}
	if err := h.checkTensors(op, names, ts...); err != nil {
		return err
	}
	if len(ts[0].Desc.dims) != 4 {
		return invalid(op, "%s is %s: LRN takes 4-D N, C, H, W tensors", names[0], ts[0].Desc)
	}
	return checkSame(op, names, ts...)
}

// LRNForward normalizes x into y (miopenLRNForward;
// cudnnLRNCrossChannelForward or rocm-go's kernel on NVIDIA). A workspace
// of WorkspaceSize(y) bytes keeps what LRNBackward needs on AMD (nil for
// inference).
func (h *Handle) LRNForward(l *LRNDescriptor, x, y Tensor, workspace *hip.Buffer) error {
	const op = "Handle.LRNForward"
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if err := h.checkLRN(op, l, []string{"x", "y"}, x, y); err != nil {
		return err
	}
	need, err := l.WorkspaceSize(y.Desc)
	if err != nil {
		return err
	}
	if err := checkWorkspace(op, workspace, need, h.dev); err != nil {
		return err
	}
	defer keepAlive(x, y)
	defer runtime.KeepAlive(l)
	defer runtime.KeepAlive(workspace)
	if lrnKernel(l) {
		return h.launchLocked(lrnWithinFwd, x.Desc.dtype, newKernelShape(x.Desc, y.Desc), func(a *hip.Args) {
			a.Int32(int32(l.p.N)).Float64(l.p.Alpha).Float64(l.p.Beta).Float64(l.p.K).Ptr(x.Data.Ptr()).Ptr(y.Data.Ptr())
		})
	}
	one, zero := C.float(1), C.float(0)
	return h.callLocked("miopenLRNForward", func() C.miopenStatus_t {
		return C.rg_miopenLRNForward_on(h.c(), h.h, l.d, unsafe.Pointer(&one), x.Desc.d, x.ptr(), unsafe.Pointer(&zero), y.Desc.d, y.ptr(),
			C._Bool(workspace != nil), devPtr(workspace))
	})
}

// LRNBackward computes dx from y, dy and x (miopenLRNBackward). On AMD it
// needs the workspace its forward pass filled; on NVIDIA none.
func (h *Handle) LRNBackward(l *LRNDescriptor, y, dy, x, dx Tensor, workspace *hip.Buffer) error {
	const op = "Handle.LRNBackward"
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if err := h.checkLRN(op, l, []string{"y", "dy", "x", "dx"}, y, dy, x, dx); err != nil {
		return err
	}
	need, err := l.WorkspaceSize(y.Desc)
	if err != nil {
		return err
	}
	if need > 0 && workspace == nil {
		return invalid(op, "the backward pass needs the workspace of %d bytes that the forward pass filled", need)
	}
	if err := checkWorkspace(op, workspace, need, h.dev); err != nil {
		return err
	}
	defer keepAlive(y, dy, x, dx)
	defer runtime.KeepAlive(l)
	defer runtime.KeepAlive(workspace)
	if lrnKernel(l) {
		return h.launchLocked(lrnWithinBwd, x.Desc.dtype, newKernelShape(x.Desc, y.Desc, dy.Desc, dx.Desc), func(a *hip.Args) {
			a.Int32(int32(l.p.N)).Float64(l.p.Alpha).Float64(l.p.Beta).Float64(l.p.K).
				Ptr(x.Data.Ptr()).Ptr(y.Data.Ptr()).Ptr(dy.Data.Ptr()).Ptr(dx.Data.Ptr())
		})
	}
	one, zero := C.float(1), C.float(0)
	return h.callLocked("miopenLRNBackward", func() C.miopenStatus_t {
		return C.rg_miopenLRNBackward_on(h.c(), h.h, l.d, unsafe.Pointer(&one), y.Desc.d, y.ptr(), dy.Desc.d, dy.ptr(), x.Desc.d, x.ptr(),
			unsafe.Pointer(&zero), dx.Desc.d, dx.ptr(), devPtr(workspace))
	})
}
