package miopen

/*
#include "helpers.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/bind"
)

// Handle is a MIOpen handle (a cuDNN handle on the NVIDIA platform) bound
// to a stream and its device. Every operation of the handle is queued on
// that stream, and every call makes the device current in the same C call.
//
// A Handle serializes its calls with a mutex: MIOpen and cuDNN handles must
// not be used by two threads at once, and the handle also owns a workspace
// and a cache of Find results. Goroutines may share one Handle; for
// parallel work give each its own Handle and stream.
//
// Close the handle before its stream.
type Handle struct {
	mu     sync.Mutex
	h      C.miopenHandle_t
	stream *hip.Stream
	dev    *hip.Device
	life   bind.Lifetime
	ws     *hip.Buffer // the workspace of calls that are given none
	cache  *findCache

	diskOnce sync.Once
	disk     *findDisk // the Find cache on disk, nil when off
}

// NewHandle creates a handle that queues its work on s
// (miopenCreateWithStream; cudnnCreate and cudnnSetStream on NVIDIA).
func NewHandle(s *hip.Stream) (*Handle, error) {
	if s == nil {
		return nil, invalid("NewHandle", "nil stream: a handle is bound to a stream of its device")
	}
	if err := ensure(); err != nil {
		return nil, err
	}
	dev := s.Device()
	var h C.miopenHandle_t
	err := check("miopenCreateWithStream", C.rg_miopenCreateWithStream_on(C.int(dev.Ordinal()), &h, C.miopenAcceleratorQueue_t(s.Raw())))
	runtime.KeepAlive(s)
	if err != nil {
		return nil, withDetail(err, fmt.Sprintf("on device %d", dev.Ordinal()))
	}
	hd := &Handle{h: h, stream: s, dev: dev, cache: newFindCache(defaultCacheSize)}
	bind.Backstop(&hd.life, hd, func(l leakedHandle) { C.rg_miopenDestroy_on(C.int(l.dev), l.h) }, leakedHandle{dev: dev.Ordinal(), h: h})
	return hd, nil
}

type leakedHandle struct {
	dev int
	h   C.miopenHandle_t
}

// Stream is the stream the handle queues its work on.
func (h *Handle) Stream() *hip.Stream { return h.stream }

// Device is the device of the handle's stream.
func (h *Handle) Device() *hip.Device { return h.dev }

// Raw runs fn with the handle's C miopenHandle_t (on NVIDIA, rocm-go's
// handle over a cudnnHandle_t) and device ordinal, under the handle's lock,
// for code that calls the library itself (through cgo and Symbol). fn must
// make the device current in the same C call as each library call, must
// not keep the handle, and returns its own error.
func (h *Handle) Raw(fn func(handle unsafe.Pointer, device int) error) error {
	const op = "Handle.Raw"
	if fn == nil {
		return invalid(op, "nil function")
	}
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	return fn(unsafe.Pointer(h.h), h.dev.Ordinal())
}

func (h *Handle) c() C.int { return C.int(h.dev.Ordinal()) }

// lock takes the handle's lock for a call; it fails on a nil or closed
// handle. The caller unlocks.
func (h *Handle) lock(op string) error {
	if h == nil {
		return invalid(op, "nil handle")
	}
	h.mu.Lock()
	if h.life.Closed() {
		h.mu.Unlock()
		return closedError(op)
	}
	return nil
}

// call runs one library call under the handle's lock and turns its status
// into an error that, on NVIDIA, names the cuDNN function and status.
func (h *Handle) call(op string, f func() C.miopenStatus_t) error {
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	return h.callLocked(op, f)
}

func (h *Handle) callLocked(op string, f func() C.miopenStatus_t) error {
	st := f()
	runtime.KeepAlive(h)
	if st == C.miopenStatusSuccess {
		return nil
	}
	err := check(op, st)
	if LoadedPlatform() == hip.PlatformNVIDIA {
		var fn *C.char
		if cst := C.rg_miopen_nvidia_last(h.h, &fn); cst != 0 {
			err = withDetail(err, fmt.Sprintf("cuDNN: %s returned %s (%d)", C.GoString(fn), C.GoString(C.rg_miopen_nvidia_status_name(cst)), int(cst)))
		}
	}
	return err
}

// workspaceLocked returns the handle's workspace, grown to at least n
// bytes; nil for n == 0. hipFree waits for the device, so the old buffer
// is not freed under queued work.
func (h *Handle) workspaceLocked(n int) (*hip.Buffer, error) {
	if n <= 0 {
		return nil, nil
	}
	if h.ws != nil && h.ws.Size() >= n {
		return h.ws, nil
	}
	if h.ws != nil {
		if err := h.ws.Close(); err != nil {
			return nil, err
		}
		h.ws = nil
	}
	b, err := h.dev.Malloc(n)
	if err != nil {
		return nil, fmt.Errorf("miopen: a workspace of %s: %w", humanize.IBytes(uint64(n)), err)
	}
	h.ws = b
	return b, nil
}

// WorkspaceSize is the size of the workspace the handle keeps for calls
// that are given none (it grows to the largest such call's need).
func (h *Handle) WorkspaceSize() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ws == nil {
		return 0
	}
	return h.ws.Size()
}

// Close frees the handle's workspace and destroys the handle.
// Closing twice does nothing.
func (h *Handle) Close() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.life.End() {
		return nil
	}
	var errs []error
	if h.ws != nil {
		errs = append(errs, h.ws.Close())
		h.ws = nil
	}
	errs = append(errs, check("miopenDestroy", C.rg_miopenDestroy_on(h.c(), h.h)))
	return errors.Join(errs...)
}

func (h *Handle) String() string {
	return fmt.Sprintf("miopen.Handle(%s platform, device %d)", LoadedPlatform(), h.dev.Ordinal())
}

// Version reports the loaded library's version: MIOpen's (3.4.0 in ROCm
// 6.4) on AMD, cuDNN's (9.14.0, say) on NVIDIA.
func Version() (hip.Version, error) {
	if err := ensure(); err != nil {
		return hip.Version{}, err
	}
	var ma, mi, pa C.size_t
	if err := check("miopenGetVersion", C.rg_miopenGetVersion(&ma, &mi, &pa)); err != nil {
		return hip.Version{}, err
	}
	return hip.Version{Major: int(ma), Minor: int(mi), Patch: int(pa)}, nil
}
