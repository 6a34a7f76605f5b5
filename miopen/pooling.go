package miopen

/*
#include "helpers.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/bind"
)

// PoolingParams describe a pooling window: one value per spatial dimension
// (two for 2-D pooling, three for 3-D) in Window, Pad and Stride; nil Pad
// means 0 and nil Stride means the window.
type PoolingParams struct {
	// Mode is PoolingModeMax, PoolingModeAverage (the padding excluded from
	// the count, cuDNN's AVERAGE_COUNT_EXCLUDE_PADDING) or
	// PoolingModeAverageInclusive (included).
	Mode                PoolingMode
	Window, Pad, Stride []int
}

func (p PoolingParams) normalized(op string) (PoolingParams, error) {
	n := len(p.Window)
	if n < 2 || n > 3 {
		return p, invalid(op, "a window of %d dimensions: MIOpen pools in 2-D or 3-D", n)
	}
	if p.Mode > PoolingModeAverageInclusive {
		return p, invalid(op, "unknown pooling mode %d", uint32(p.Mode))
	}
	q := PoolingParams{Mode: p.Mode, Window: slices.Clone(p.Window), Pad: slices.Clone(p.Pad), Stride: slices.Clone(p.Stride)}
	if q.Pad == nil {
		q.Pad = make([]int, n)
	}
	if q.Stride == nil {
		q.Stride = slices.Clone(p.Window)
	}
	if len(q.Pad) != n || len(q.Stride) != n {
		return p, invalid(op, "window %v, pad %v, stride %v: one value per spatial dimension each", p.Window, p.Pad, p.Stride)
	}
	for i := range n {
		if q.Window[i] < 1 || q.Stride[i] < 1 || q.Pad[i] < 0 || q.Pad[i] >= q.Window[i] || q.Window[i] > 1<<16 || q.Stride[i] > 1<<16 {
			return p, invalid(op, "window %v, pad %v, stride %v: windows and strides are positive, each pad less than its window", q.Window, q.Pad, q.Stride)
		}
	}
	return q, nil
}

// OutputDims computes the output dimensions of pooling an input of
// dimensions x (N, C, (D,) H, W): (in + 2*pad - window)/stride + 1 in each
// spatial dimension, as MIOpen does.
func (p PoolingParams) OutputDims(x []int) ([]int, error) {
	const op = "PoolingParams.OutputDims"
	q, err := p.normalized(op)
	if err != nil {
		return nil, err
	}
	n := len(q.Window)
	if len(x) != n+2 || !positive(x) {
		return nil, invalid(op, "input %v: %d-D pooling takes %d-D tensors of positive dimensions", x, n, n+2)
	}
	out := []int{x[0], x[1]}
	for i := range n {
		span := x[i+2] + 2*q.Pad[i] - q.Window[i]
		if span < 0 {
			return nil, invalid(op, "input %v: window %v is larger than the padded input in spatial dimension %d", x, q.Window, i)
		}
		out = append(out, span/q.Stride[i]+1)
	}
	return out, nil
}

// PoolingDescriptor is a pooling window, read-only once made.
type PoolingDescriptor struct {
	d    C.miopenPoolingDescriptor_t
	p    PoolingParams
	life bind.Lifetime
}

// NewPoolingDescriptor makes a pooling descriptor
// (miopenSetNdPoolingDescriptor). Max pooling saves the position of each
// maximum for the backward pass: in the window for 2-D pooling, in the
// image (32-bit indices) for 3-D, as MIOpen needs.
func NewPoolingDescriptor(p PoolingParams) (*PoolingDescriptor, error) {
	const op = "NewPoolingDescriptor"
	q, err := p.normalized(op)
	if err != nil {
		return nil, err
	}
	if err := ensure(); err != nil {
		return nil, err
	}
	var d C.miopenPoolingDescriptor_t
	if err := check("miopenCreatePoolingDescriptor", C.rg_miopenCreatePoolingDescriptor(&d)); err != nil {
		return nil, err
	}
	n := len(q.Window)
	win, pad, stride := cInts(q.Window), cInts(q.Pad), cInts(q.Stride)
	err = check("miopenSetNdPoolingDescriptor", C.rg_miopenSetNdPoolingDescriptor(d, C.miopenPoolingMode_t(q.Mode), C.int(n), &win[0], &pad[0], &stride[0]))
	if err == nil {
		// Mask indices count within the window and fit a small type; 3-D
		// pooling has image indices only.
		idx, mode := C.miopenIndexType_t(C.miopenIndexUint8), C.miopenPoolingWorkspaceIndexMode_t(C.miopenPoolingWorkspaceIndexMask)
		switch elems := prod(q.Window); {
		case n == 3:
			idx, mode = C.miopenIndexUint32, C.miopenPoolingWorkspaceIndexImage
		case elems > 1<<16:
			idx = C.miopenIndexUint32
		case elems > 1<<8:
			idx = C.miopenIndexUint16
		}
		err = check("miopenSetPoolingIndexType", C.rg_miopenSetPoolingIndexType(d, idx))
		if err == nil {
			err = check("miopenSetPoolingWorkSpaceIndexMode", C.rg_miopenSetPoolingWorkSpaceIndexMode(d, mode))
		}
	}
	if err != nil {
		C.rg_miopenDestroyPoolingDescriptor(d)
		return nil, withDetail(err, fmt.Sprintf("%+v", q))
	}
	pd := &PoolingDescriptor{d: d, p: q}
	bind.Backstop(&pd.life, pd, func(p unsafe.Pointer) { C.rg_miopenDestroyPoolingDescriptor(C.miopenPoolingDescriptor_t(p)) }, unsafe.Pointer(d))
	return pd, nil
}

func prod(v []int) int {
	n := 1
	for _, x := range v {
		n *= x
	}
	return n
}

func (p *PoolingDescriptor) alive(op string) error {
	if p == nil {
		return invalid(op, "nil pooling descriptor")
	}
	if p.life.Closed() {
		return closedError(op)
	}
	return nil
}

// Params returns the parameters, with the defaults filled in.
func (p *PoolingDescriptor) Params() PoolingParams {
	q := p.p
	q.Window, q.Pad, q.Stride = slices.Clone(q.Window), slices.Clone(q.Pad), slices.Clone(q.Stride)
	return q
}

// Query asks the library for the parameters (miopenGetNdPoolingDescriptor).
func (p *PoolingDescriptor) Query() (PoolingParams, error) {
	if err := p.alive("PoolingDescriptor.Query"); err != nil {
		return PoolingParams{}, err
	}
	var mode C.miopenPoolingMode_t
	var n C.int
	win, pad, stride := make([]C.int, 3), make([]C.int, 3), make([]C.int, 3)
	err := check("miopenGetNdPoolingDescriptor", C.rg_miopenGetNdPoolingDescriptor(p.d, 3, &mode, &n, &win[0], &pad[0], &stride[0]))
	runtime.KeepAlive(p)
	if err != nil {
		return PoolingParams{}, err
	}
	if n < 1 || n > 3 {
		return PoolingParams{}, &Error{Op: "miopenGetNdPoolingDescriptor", Status: StatusInternalError, Detail: fmt.Sprintf("%d dimensions", n)}
	}
	return PoolingParams{Mode: PoolingMode(mode), Window: goInts(win[:n]), Pad: goInts(pad[:n]), Stride: goInts(stride[:n])}, nil
}

// OutputShape asks the library for the output dimensions of pooling x
// (miopenGetPoolingNdForwardOutputDim), after checking them as
// PoolingParams.OutputDims does.
func (p *PoolingDescriptor) OutputShape(x *TensorDescriptor) ([]int, error) {
	const op = "PoolingDescriptor.OutputShape"
	if err := p.alive(op); err != nil {
		return nil, err
	}
	if err := x.alive(op); err != nil {
		return nil, err
	}
	if _, err := p.p.OutputDims(x.dims); err != nil {
		return nil, err
	}
	out := make([]C.int, len(x.dims))
	err := check("miopenGetPoolingNdForwardOutputDim", C.rg_miopenGetPoolingNdForwardOutputDim(p.d, x.d, C.int(len(x.dims)), &out[0]))
	runtime.KeepAlive(p)
	runtime.KeepAlive(x)
	if err != nil {
		return nil, err
	}
	return goInts(out), nil
}

// WorkspaceSize is the workspace, in bytes, that a forward pass into y
// fills for the backward pass (miopenPoolingGetWorkSpaceSizeV2): the
// positions of the maxima; 0 where none is needed (average pooling, and
// every mode on NVIDIA, where cuDNN recomputes them).
func (p *PoolingDescriptor) WorkspaceSize(y *TensorDescriptor) (int, error) {
	const op = "PoolingDescriptor.WorkspaceSize"
	if err := p.alive(op); err != nil {
		return 0, err
	}
	if err := y.alive(op); err != nil {
		return 0, err
	}
	var n C.size_t
	err := check("miopenPoolingGetWorkSpaceSizeV2", C.rg_miopenPoolingGetWorkSpaceSizeV2(p.d, y.d, &n))
	runtime.KeepAlive(p)
	runtime.KeepAlive(y)
	return int(n), err
}

// Close destroys the descriptor. Closing twice does nothing.
func (p *PoolingDescriptor) Close() error {
	if p == nil {
		return nil
	}
	return p.life.Close(func() error { return check("miopenDestroyPoolingDescriptor", C.rg_miopenDestroyPoolingDescriptor(p.d)) })
}

// checkWorkspace validates an optional workspace of at least need bytes.
func checkWorkspace(op string, ws *hip.Buffer, need int, dev *hip.Device) error {
	if ws == nil {
		return nil
	}
	if _, err := ws.Slice(0, 1); err != nil {
		return fmt.Errorf("miopen: %s: workspace: %w", op, err)
	}
	if ws.Size() < need {
		return invalid(op, "the workspace has %d bytes; %d are needed", ws.Size(), need)
	}
	if ws.Device().Ordinal() != dev.Ordinal() {
		return invalid(op, "the workspace is on device %d, the handle's device is %d", ws.Device().Ordinal(), dev.Ordinal())
	}
	return nil
}

func wsSize(ws *hip.Buffer) C.size_t {
	if ws == nil {
		return 0
	}
	return C.size_t(ws.Size())
}

// PoolingForward pools x into y (miopenPoolingForward; cudnnPoolingForward
// on NVIDIA). y has the dimensions OutputShape gives. A workspace of
// WorkspaceSize(y) bytes keeps what PoolingBackward needs (nil for
// inference).
func (h *Handle) PoolingForward(p *PoolingDescriptor, x, y Tensor, workspace *hip.Buffer) error {
	const op = "Handle.PoolingForward"
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	need, err := h.checkPooling(op, p, x, y, workspace)
	if err != nil {
		return err
	}
	if workspace != nil && workspace.Size() < need {
		return invalid(op, "the workspace has %d bytes; %d are needed", workspace.Size(), need)
	}
	one, zero := C.float(1), C.float(0)
	err = h.callLocked("miopenPoolingForward", func() C.miopenStatus_t {
		return C.rg_miopenPoolingForward_on(h.c(), h.h, p.d, unsafe.Pointer(&one), x.Desc.d, x.ptr(), unsafe.Pointer(&zero), y.Desc.d, y.ptr(),
			C._Bool(workspace != nil), devPtr(workspace), wsSize(workspace))
	})
	keepAlive(x, y)
	runtime.KeepAlive(p)
	runtime.KeepAlive(workspace)
	return err
}

// checkPooling validates a pooling call and returns the workspace size.
func (h *Handle) checkPooling(op string, p *PoolingDescriptor, x, y Tensor, ws *hip.Buffer) (int, error) {
	if err := p.alive(op); err != nil {
		return 0, err
	}
	if err := h.checkTensors(op, []string{"x", "y"}, x, y); err != nil {
		return 0, err
	}
	want, err := p.p.OutputDims(x.Desc.dims)
	if err != nil {
		return 0, err
	}
	if !slices.Equal(want, y.Desc.dims) || x.Desc.dtype != y.Desc.dtype {
		return 0, invalid(op, "y is %s; pooling x %s gives %v of the same type", y.Desc, x.Desc, want)
	}
	if err := checkWorkspace(op, ws, 0, h.dev); err != nil {
		return 0, err
	}
	var n C.size_t
	if err := check("miopenPoolingGetWorkSpaceSizeV2", C.rg_miopenPoolingGetWorkSpaceSizeV2(p.d, y.Desc.d, &n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// PoolingBackward computes dx from y, dy and x (miopenPoolingBackward). On
// AMD, max pooling needs the workspace its forward pass filled; on NVIDIA
// none is needed.
func (h *Handle) PoolingBackward(p *PoolingDescriptor, y, dy, x, dx Tensor, workspace *hip.Buffer) error {
	const op = "Handle.PoolingBackward"
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	need, err := h.checkPooling(op, p, x, y, workspace)
	if err != nil {
		return err
	}
	if err := h.checkTensors(op, []string{"dy", "dx"}, dy, dx); err != nil {
		return err
	}
	if err := checkSame(op, []string{"y", "dy"}, y, dy); err != nil {
		return err
	}
	if err := checkSame(op, []string{"x", "dx"}, x, dx); err != nil {
		return err
	}
	if need > 0 && (workspace == nil || workspace.Size() < need) {
		return invalid(op, "the backward pass needs the workspace of %d bytes that the forward pass filled", need)
	}
	one, zero := C.float(1), C.float(0)
	err = h.callLocked("miopenPoolingBackward", func() C.miopenStatus_t {
		return C.rg_miopenPoolingBackward_on(h.c(), h.h, p.d, unsafe.Pointer(&one), y.Desc.d, y.ptr(), dy.Desc.d, dy.ptr(), x.Desc.d, x.ptr(),
			unsafe.Pointer(&zero), dx.Desc.d, dx.ptr(), devPtr(workspace))
	})
	keepAlive(y, dy, x, dx)
	runtime.KeepAlive(p)
	runtime.KeepAlive(workspace)
	return err
}
