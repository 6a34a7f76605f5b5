package hip

/*
#include "helpers.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rocm-go/rocm/internal/bind"
)

// Stream is a queue of device work. Work on one stream runs in order;
// work on different streams may overlap. A nil *Stream, where a method
// takes one, is the device's null stream.
type Stream struct {
	dev  *Device
	h    C.hipStream_t
	life bind.Lifetime

	// Modules launched while capturing: the graph keeps them loaded.
	capturing atomic.Bool
	capMu     sync.Mutex
	captured  []*Module
}

// StreamOption configures NewStream.
type StreamOption func(*streamOptions)

type streamOptions struct {
	flags    StreamFlags
	priority int
}

// WithStreamFlags sets the stream's flags: StreamNonBlocking keeps it from
// synchronizing with the null stream.
func WithStreamFlags(f StreamFlags) StreamOption { return func(o *streamOptions) { o.flags = f } }

// WithPriority sets the stream's priority: lower numbers are more urgent;
// see Device.StreamPriorityRange.
func WithPriority(p int) StreamOption { return func(o *streamOptions) { o.priority = p } }

// NewStream creates a stream on the device.
func (d *Device) NewStream(opts ...StreamOption) (*Stream, error) {
	if err := ensure(); err != nil {
		return nil, err
	}
	var o streamOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.flags&^StreamNonBlocking != 0 {
		return nil, invalid("Device.NewStream", "unknown stream flags %#x", uint32(o.flags))
	}
	var h C.hipStream_t
	if err := check("hipStreamCreateWithPriority", C.rg_hipStreamCreateWithPriority_on(d.c(), &h, C.uint(o.flags), C.int(o.priority))); err != nil {
		return nil, err
	}
	s := &Stream{dev: d, h: h}
	bind.Backstop(&s.life, s, func(l leaked) { C.rg_hipStreamDestroy_on(C.int(l.dev), C.hipStream_t(l.ptr)) }, leaked{dev: d.ordinal, ptr: unsafe.Pointer(h)})
	return s, nil
}

func (s *Stream) alive(op string) error {
	if s == nil {
		return invalid(op, "nil stream")
	}
	if s.life.Closed() {
		return closedError(op)
	}
	return ensure()
}

// handle returns the stream's C handle for a call on the device dev:
// nil is the null stream.
func (s *Stream) handle() C.hipStream_t {
	if s == nil {
		return nil
	}
	return s.h
}

// Device is the device the stream belongs to.
func (s *Stream) Device() *Device { return s.dev }

// Closed reports whether the stream has been closed, for packages that bind
// a library handle to it. A nil stream (the null stream) is never closed.
func (s *Stream) Closed() bool { return s != nil && s.life.Closed() }

// Raw is the hipStream_t (a cudaStream_t on NVIDIA), for code that calls
// the runtime itself. It is valid until Close.
func (s *Stream) Raw() unsafe.Pointer {
	if s == nil {
		return nil
	}
	return unsafe.Pointer(s.h)
}

// Synchronize waits for all work queued on the stream.
func (s *Stream) Synchronize() error {
	if err := s.alive("Stream.Synchronize"); err != nil {
		return err
	}
	err := check("hipStreamSynchronize", C.rg_hipStreamSynchronize_on(s.dev.c(), s.h))
	runtime.KeepAlive(s)
	return err
}

// Query reports whether all work queued on the stream has finished.
func (s *Stream) Query() (bool, error) {
	if err := s.alive("Stream.Query"); err != nil {
		return false, err
	}
	st := C.rg_hipStreamQuery_on(s.dev.c(), s.h)
	runtime.KeepAlive(s)
	if Status(st) == StatusNotReady {
		return false, nil
	}
	return true, check("hipStreamQuery", st)
}

// WaitEvent makes work queued on the stream after this call wait until e
// has completed. It does not block the calling goroutine.
func (s *Stream) WaitEvent(e *Event) error {
	if err := s.alive("Stream.WaitEvent"); err != nil {
		return err
	}
	if err := e.alive("Stream.WaitEvent"); err != nil {
		return err
	}
	err := check("hipStreamWaitEvent", C.rg_hipStreamWaitEvent_on(s.dev.c(), s.h, e.h, 0))
	runtime.KeepAlive(s)
	runtime.KeepAlive(e)
	return err
}

// Flags reports the stream's flags.
func (s *Stream) Flags() (StreamFlags, error) {
	if err := s.alive("Stream.Flags"); err != nil {
		return 0, err
	}
	var f C.uint
	err := check("hipStreamGetFlags", C.rg_hipStreamGetFlags_on(s.dev.c(), s.h, &f))
	runtime.KeepAlive(s)
	return StreamFlags(f), err
}

// Priority reports the stream's priority.
func (s *Stream) Priority() (int, error) {
	if err := s.alive("Stream.Priority"); err != nil {
		return 0, err
	}
	var p C.int
	err := check("hipStreamGetPriority", C.rg_hipStreamGetPriority_on(s.dev.c(), s.h, &p))
	runtime.KeepAlive(s)
	return int(p), err
}

// Close waits for the stream's work, then destroys it. Closing twice does
// nothing.
func (s *Stream) Close() error {
	if s == nil || !s.life.End() {
		return nil
	}
	syncErr := check("hipStreamSynchronize", C.rg_hipStreamSynchronize_on(s.dev.c(), s.h))
	err := check("hipStreamDestroy", C.rg_hipStreamDestroy_on(s.dev.c(), s.h))
	if syncErr != nil {
		return syncErr
	}
	return err
}

// Event marks a point in a stream, to wait for or to time.
type Event struct {
	dev  *Device
	h    C.hipEvent_t
	life bind.Lifetime
}

// NewEvent creates an event on the device. flags are Event* values
// (EventDefault records timing; EventDisableTiming makes it cheaper).
func (d *Device) NewEvent(flags EventFlags) (*Event, error) {
	if err := ensure(); err != nil {
		return nil, err
	}
	var h C.hipEvent_t
	if err := check("hipEventCreateWithFlags", C.rg_hipEventCreateWithFlags_on(d.c(), &h, C.uint(flags))); err != nil {
		return nil, err
	}
	e := &Event{dev: d, h: h}
	bind.Backstop(&e.life, e, func(l leaked) { C.rg_hipEventDestroy_on(C.int(l.dev), C.hipEvent_t(l.ptr)) }, leaked{dev: d.ordinal, ptr: unsafe.Pointer(h)})
	return e, nil
}

func (e *Event) alive(op string) error {
	if e == nil {
		return invalid(op, "nil event")
	}
	if e.life.Closed() {
		return closedError(op)
	}
	return ensure()
}

// Raw is the hipEvent_t, valid until Close.
func (e *Event) Raw() unsafe.Pointer { return unsafe.Pointer(e.h) }

// Record marks the event at the current end of s (nil: the null stream).
func (e *Event) Record(s *Stream) error {
	if err := e.alive("Event.Record"); err != nil {
		return err
	}
	dev, h, err := streamDevice(s, e.dev)
	if err != nil {
		return err
	}
	err = check("hipEventRecord", C.rg_hipEventRecord_on(dev.c(), e.h, h))
	runtime.KeepAlive(e)
	runtime.KeepAlive(s)
	return err
}

// Synchronize waits until the work before the event's record has run.
func (e *Event) Synchronize() error {
	if err := e.alive("Event.Synchronize"); err != nil {
		return err
	}
	err := check("hipEventSynchronize", C.rg_hipEventSynchronize_on(e.dev.c(), e.h))
	runtime.KeepAlive(e)
	return err
}

// Query reports whether the event has completed.
func (e *Event) Query() (bool, error) {
	if err := e.alive("Event.Query"); err != nil {
		return false, err
	}
	st := C.rg_hipEventQuery_on(e.dev.c(), e.h)
	runtime.KeepAlive(e)
	if Status(st) == StatusNotReady {
		return false, nil
	}
	return true, check("hipEventQuery", st)
}

// ElapsedTime is the device time between two completed events recorded with
// timing enabled, at about half a microsecond's resolution.
func ElapsedTime(start, end *Event) (time.Duration, error) {
	if err := start.alive("ElapsedTime"); err != nil {
		return 0, err
	}
	if err := end.alive("ElapsedTime"); err != nil {
		return 0, err
	}
	var ms C.float
	err := check("hipEventElapsedTime", C.rg_hipEventElapsedTime_on(end.dev.c(), &ms, start.h, end.h))
	runtime.KeepAlive(start)
	runtime.KeepAlive(end)
	if err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Close destroys the event. Closing twice does nothing.
func (e *Event) Close() error {
	if e == nil || !e.life.End() {
		return nil
	}
	return check("hipEventDestroy", C.rg_hipEventDestroy_on(e.dev.c(), e.h))
}
