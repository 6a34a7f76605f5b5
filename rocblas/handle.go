package rocblas

/*
#include <stdlib.h>
#include "helpers.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/bind"
)

// Handle is a rocBLAS handle bound to a HIP stream and its device: every
// operation on it is queued on that stream, in order.
//
// A Handle is safe for use by many goroutines: every call takes its mutex
// for the time of the C call (queuing the work, not running it), so calls
// from several goroutines are serialized and their work is queued in the
// order they took the lock. For work that runs in parallel on one device,
// use one Handle per stream.
//
// Scalar arguments (alpha, beta, the c and s of a rotation) are host
// values, and reductions return host values; the ...To forms of the
// reductions write their results to device memory instead, without waiting.
// The Handle sets rocBLAS's pointer mode that each call needs itself.
type Handle struct {
	mu       sync.Mutex
	c        C.rocblas_handle
	dev      *hip.Device
	ord      C.int
	stream   *hip.Stream
	life     bind.Lifetime
	libMode  PointerMode // the mode the library has now; modeUnknown after Raw
	userMode PointerMode // the mode SetPointerMode chose, for Raw
	mem      *hostMemory // C memory for host scalars and host results
	scratch  scratch     // device copies of the pointer arrays of batched calls
	ws       *hip.Buffer // the workspace given to rocBLAS, if any
	ownsWS   bool        // ws was allocated by SetWorkspaceSize
}

const modeUnknown PointerMode = 0xffff

// hostMemory is C memory a Handle passes to rocBLAS: 64 bytes of scalars
// (four complex128 slots) and a growable area for host results.
type hostMemory struct {
	dev     C.int
	handle  C.rocblas_handle
	scalars unsafe.Pointer
	results unsafe.Pointer
	size    int // bytes at results
}

const scalarSlot = 16

// scalar stores v in slot i of the scalars and returns its address.
func scalar[T any](m *hostMemory, i int, v T) C.uintptr_t {
	p := unsafe.Add(m.scalars, i*scalarSlot)
	*(*T)(p) = v
	return C.uintptr_t(uintptr(p))
}

// resultSpace makes room for n host results of size bytes.
func (m *hostMemory) resultSpace(n, size int) C.uintptr_t {
	if need := n * size; need > m.size {
		C.free(m.results)
		m.size = max(need, 2*m.size)
		m.results = C.calloc(C.size_t(m.size), 1)
	}
	return C.uintptr_t(uintptr(m.results))
}

// hostResults reads n results of type T from the result area.
func hostResults[T any](m *hostMemory, n int) []T {
	return append([]T(nil), unsafe.Slice((*T)(m.results), n)...)
}

// free releases the C memory.
func (m *hostMemory) free() {
	C.free(m.scalars)
	C.free(m.results)
	m.scalars, m.results = nil, nil
}

// destroyLeaked is the leak backstop of a Handle that was never closed:
// nothing can queue work on it any more; queued work may still use its
// memory, which the library frees with hipFree or cudaFree, after the
// device's work.
func destroyLeaked(m *hostMemory) {
	C.rg_rocblas_destroy_handle_on(m.dev, m.handle)
	m.free()
}

// NewHandle creates a rocBLAS handle bound to s and to s's device. The stream
// must stay open while the handle uses it (see SetStream).
func NewHandle(s *hip.Stream) (*Handle, error) {
	const op = "NewHandle"
	if err := ensure(); err != nil {
		return nil, err
	}
	if err := checkStream(op, s); err != nil {
		return nil, err
	}
	dev := s.Device()
	ord := C.int(dev.Ordinal())
	ch, err := create(dev.Ordinal())
	if err != nil {
		return nil, err
	}
	h := &Handle{c: ch, dev: dev, ord: ord, stream: s, libMode: PointerModeHost, userMode: PointerModeHost}
	if err := check("rocblas_set_stream", C.rg_rocblas_set_stream_on(ord, ch, C.hipStream_t(s.Raw()))); err != nil {
		C.rg_rocblas_destroy_handle_on(ord, ch)
		return nil, err
	}
	runtime.KeepAlive(s)
	h.mem = &hostMemory{dev: ord, handle: ch, scalars: C.calloc(4, scalarSlot), results: C.calloc(256, 1), size: 256}
	bind.Backstop(&h.life, h, destroyLeaked, h.mem)
	return h, nil
}

// create makes a rocBLAS handle on device ord.
func create(ord int) (C.rocblas_handle, error) {
	var ch C.rocblas_handle
	if err := check("rocblas_create_handle", C.rg_rocblas_create_handle_on(C.int(ord), &ch)); err != nil {
		return nil, withDetail(err, fmt.Sprintf("on device %d", ord))
	}
	return ch, nil
}

// createHere calls rocblas_create_handle on the calling thread's current
// device, without making one current: for tests of the library itself.
func createHere() error {
	var ch C.rocblas_handle
	err := check("rocblas_create_handle", C.rg_rocblas_create_handle(&ch))
	if err == nil {
		C.rg_rocblas_destroy_handle(ch)
	}
	return err
}

// device returns the handle's device for argument checks, which run before
// the lock (the device never changes).
func (h *Handle) device(op string) (*hip.Device, error) {
	if h == nil || h.dev == nil {
		return nil, &Error{Op: op, Status: StatusInvalidHandle, Detail: "nil handle, or one not made by rocblas.NewHandle"}
	}
	return h.dev, nil
}

// lock takes the handle's mutex for a call, after checking that the handle
// and its stream are open; the caller unlocks.
func (h *Handle) lock(op string) error {
	if _, err := h.device(op); err != nil {
		return err
	}
	h.mu.Lock()
	switch {
	case h.life.Closed():
		h.mu.Unlock()
		return closedError(op)
	case h.stream.Closed():
		h.mu.Unlock()
		return &Error{Op: op, Status: StatusInvalidHandle, Detail: "the handle's stream was closed: bind it to an open one with SetStream", Err: hip.ErrClosed}
	}
	return nil
}

// handle is the C handle as helpers.h takes it.
func (h *Handle) handle() C.uintptr_t { return C.uintptr_t(uintptr(unsafe.Pointer(h.c))) }

// mode gives the library the pointer mode a call needs; the lock is held.
func (h *Handle) mode(m PointerMode) error {
	if h.libMode == m {
		return nil
	}
	if err := check("rocblas_set_pointer_mode", C.rg_rocblas_set_pointer_mode_on(h.ord, h.c, C.rocblas_pointer_mode(m))); err != nil {
		h.libMode = modeUnknown
		return err
	}
	h.libMode = m
	return nil
}

// Close destroys the handle after the work queued on its stream: it waits
// for the stream, then frees the handle, its scratch memory and the
// workspace it allocated. Closing twice does nothing.
func (h *Handle) Close() error {
	if h == nil || h.dev == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.life.End() {
		return nil
	}
	var errs []error
	if !h.stream.Closed() {
		errs = append(errs, h.stream.Synchronize())
	}
	errs = append(errs, check("rocblas_destroy_handle", C.rg_rocblas_destroy_handle_on(h.ord, h.c)))
	errs = append(errs, h.scratch.close())
	if h.ownsWS {
		errs = append(errs, h.ws.Close())
	}
	h.ws, h.ownsWS = nil, false
	h.mem.free()
	return errors.Join(errs...)
}

// Device is the device the handle works on.
func (h *Handle) Device() *hip.Device {
	if h == nil {
		return nil
	}
	return h.dev
}

// Stream is the stream the handle queues its work on.
func (h *Handle) Stream() *hip.Stream {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stream
}
func (h *Handle) String() string {
	if h == nil || h.dev == nil {
		return "rocblas.Handle(nil)"
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprintf("rocblas.Handle(device %d, stream %p)", h.dev.Ordinal(), h.stream.Raw())
}

// SetStream binds the handle to another stream of its device. Work queued
// before stays on the old stream, which SetStream waits for, so that
// nothing the handle owns is used by two streams at once.
func (h *Handle) SetStream(s *hip.Stream) error {
	const op = "Handle.SetStream"
	if err := checkStream(op, s); err != nil {
		return err
	}
	if _, err := h.device(op); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.life.Closed():
		return closedError(op)
	case s.Device().Ordinal() != h.dev.Ordinal():
		return invalid(op, "the stream is on device %d, the handle on device %d", s.Device().Ordinal(), h.dev.Ordinal())
	}
	if !h.stream.Closed() && h.stream != s {
		if err := h.stream.Synchronize(); err != nil {
			return err
		}
	}
	err := check("rocblas_set_stream", C.rg_rocblas_set_stream_on(h.ord, h.c, C.hipStream_t(s.Raw())))
	runtime.KeepAlive(s)
	if err != nil {
		return err
	}
	h.stream = s
	return nil
}

// PointerMode reports the mode SetPointerMode chose (PointerModeHost at
// first).
func (h *Handle) PointerMode() (PointerMode, error) {
	if err := h.lock("Handle.PointerMode"); err != nil {
		return 0, err
	}
	defer h.mu.Unlock()
	return h.userMode, nil
}

// SetPointerMode chooses the pointer mode of the raw calls made through
// Raw: whether their scalar arguments and results are in host or device
// memory. The typed functions of this package set the mode they need for
// each call themselves (host scalars; host results, or device results for
// the ...To reductions), so it does not change what they do.
func (h *Handle) SetPointerMode(m PointerMode) error {
	const op = "Handle.SetPointerMode"
	if m != PointerModeHost && m != PointerModeDevice {
		return invalid(op, "mode %s: want PointerModeHost or PointerModeDevice", m)
	}
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	h.userMode = m
	return nil
}

// AtomicsMode reports whether rocBLAS may use atomics, which can make
// results differ between runs in the last bits.
func (h *Handle) AtomicsMode() (AtomicsMode, error) {
	if err := h.lock("Handle.AtomicsMode"); err != nil {
		return 0, err
	}
	defer h.mu.Unlock()
	var m C.rocblas_atomics_mode
	err := check("rocblas_get_atomics_mode", C.rg_rocblas_get_atomics_mode_on(h.ord, h.c, &m))
	return AtomicsMode(m), err
}

// SetAtomicsMode allows or forbids atomics: AtomicsNotAllowed makes
// results reproducible run to run, sometimes at a cost in speed.
func (h *Handle) SetAtomicsMode(m AtomicsMode) error {
	const op = "Handle.SetAtomicsMode"
	if m != AtomicsAllowed && m != AtomicsNotAllowed {
		return invalid(op, "mode %s: want AtomicsAllowed or AtomicsNotAllowed", m)
	}
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	return check("rocblas_set_atomics_mode", C.rg_rocblas_set_atomics_mode_on(h.ord, h.c, C.rocblas_atomics_mode(m)))
}

// MathMode reports the math mode.
func (h *Handle) MathMode() (MathMode, error) {
	if err := h.lock("Handle.MathMode"); err != nil {
		return 0, err
	}
	defer h.mu.Unlock()
	var m C.rocblas_math_mode
	err := check("rocblas_get_math_mode", C.rg_rocblas_get_math_mode_on(h.ord, h.c, &m))
	return MathMode(m), err
}

// SetMathMode sets the math mode: Xf32XdlMathOp lets float32 routines use
// reduced-precision matrix units (XF32 on CDNA3; TF32 on NVIDIA), about
// 1e-3 relative error instead of 1e-6; DefaultMath computes in float32.
func (h *Handle) SetMathMode(m MathMode) error {
	const op = "Handle.SetMathMode"
	if m != DefaultMath && m != Xf32XdlMathOp {
		return invalid(op, "mode %s: want DefaultMath or Xf32XdlMathOp", m)
	}
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	return check("rocblas_set_math_mode", C.rg_rocblas_set_math_mode_on(h.ord, h.c, C.rocblas_math_mode(m)))
}

// WorkspaceSize reports the bytes of device memory the handle's workspace
// has: the user's (SetWorkspace, SetWorkspaceSize) or what rocBLAS has
// allocated for itself so far. On NVIDIA, a workspace cuBLAS manages itself
// reports 0.
func (h *Handle) WorkspaceSize() (int, error) {
	if err := h.lock("Handle.WorkspaceSize"); err != nil {
		return 0, err
	}
	defer h.mu.Unlock()
	var n C.size_t
	err := check("rocblas_get_device_memory_size", C.rg_rocblas_get_device_memory_size_on(h.ord, h.c, &n))
	return int(n), err
}

// ManagesWorkspace reports whether the library manages the workspace
// itself (no SetWorkspace or SetWorkspaceSize in effect).
func (h *Handle) ManagesWorkspace() (bool, error) {
	const op = "Handle.ManagesWorkspace"
	if err := h.lock(op); err != nil {
		return false, err
	}
	defer h.mu.Unlock()
	if C.rg_rocblas_has(C.rg_rocblas_idx_rocblas_is_managing_device_memory) == 0 {
		return false, statusError("rocblas_is_managing_device_memory", statusMissing)
	}
	return bool(C.rg_rocblas_is_managing_device_memory(h.c)), nil
}

// SetWorkspace gives the library buf as its workspace. buf must be on the
// handle's device and stay open until the handle is closed or given another
// workspace; nil hands the workspace back to the library. SetWorkspace
// waits for the handle's stream first, so that no queued work still uses
// the workspace it replaces.
func (h *Handle) SetWorkspace(buf *hip.Buffer) error {
	const op = "Handle.SetWorkspace"
	dev, err := h.device(op)
	if err != nil {
		return err
	}
	if buf != nil {
		if _, err := buffer(op, "workspace", buf, dev, 1); err != nil {
			return err
		}
	}
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	return h.setWorkspace(buf, false)
}

// SetWorkspaceSize gives the library a workspace of n bytes that the
// handle allocates and frees; 0 hands the workspace back to the library.
func (h *Handle) SetWorkspaceSize(n int) error {
	const op = "Handle.SetWorkspaceSize"
	dev, err := h.device(op)
	if err != nil {
		return err
	}
	if n < 0 {
		return invalidSize(op, "size %d is negative", n)
	}
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if n == 0 {
		return h.setWorkspace(nil, false)
	}
	buf, err := dev.Malloc(n)
	if err != nil {
		return err
	}
	if err := h.setWorkspace(buf, true); err != nil {
		return errors.Join(err, buf.Close())
	}
	return nil
}

// setWorkspace installs buf (nil: the library's own) after the stream's
// queued work; the lock is held.
func (h *Handle) setWorkspace(buf *hip.Buffer, owned bool) error {
	if err := h.stream.Synchronize(); err != nil {
		return err
	}
	var addr unsafe.Pointer
	var size C.size_t
	if buf != nil {
		addr, size = devicePointer(buf.Ptr()), C.size_t(buf.Size())
	}
	err := check("rocblas_set_workspace", C.rg_rocblas_set_workspace_on(h.ord, h.c, addr, size))
	runtime.KeepAlive(buf)
	if err != nil {
		return err
	}
	if h.ownsWS {
		if err := h.ws.Close(); err != nil {
			return err
		}
	}
	h.ws, h.ownsWS = buf, owned
	return nil
}

// devicePointer turns a device address into the pointer C takes. It is not
// Go memory: the garbage collector never follows it.
func devicePointer(p hip.DevicePtr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&p))
}

// Raw runs fn with the handle's C rocblas_handle and device ordinal, under
// the handle's lock and in the pointer mode SetPointerMode chose, for code
// that calls rocBLAS itself (through cgo and Symbol). fn must make the
// device current in the same C call as each rocBLAS call, must not keep the
// handle or change its stream or workspace (use SetStream and
// SetWorkspace), and returns its own error. The next typed call sets the
// pointer mode it needs again, whatever fn left.
func (h *Handle) Raw(fn func(handle unsafe.Pointer, device int) error) error {
	const op = "Handle.Raw"
	if fn == nil {
		return invalid(op, "nil function")
	}
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if err := h.mode(h.userMode); err != nil {
		return err
	}
	// fn may change the pointer mode: ask the library what it left.
	defer func() {
		var m C.rocblas_pointer_mode
		h.libMode = modeUnknown
		if C.rg_rocblas_get_pointer_mode_on(h.ord, h.c, &m) == 0 {
			h.libMode = PointerMode(m)
		}
	}()
	return fn(unsafe.Pointer(h.c), h.dev.Ordinal())
}
