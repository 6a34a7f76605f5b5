package hip

/*
#include "helpers.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/internal/bind"
)

// DevicePtr is an address in device memory. It is a plain number to Go (the
// garbage collector does not follow it); pass it to kernels with Args.Ptr.
type DevicePtr uintptr

// Add offsets the address by n bytes.
func (p DevicePtr) Add(n int) DevicePtr { return p + DevicePtr(n) }

// Scalar is an element type that can be viewed as bytes: no Go pointers,
// fixed size.
type Scalar interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~int | ~uint | ~uintptr |
		~float32 | ~float64 | ~complex64 | ~complex128
}

// AsBytes views a slice as its bytes, without copying.
func AsBytes[T Scalar](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// AsSlice views bytes as a slice of T, without copying. Trailing bytes that
// do not fill an element are left out; b must be aligned for T (pinned
// buffers are page aligned).
func AsSlice[T Scalar](b []byte) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if len(b) < size {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/size)
}

// Buffer is device memory: an allocation from Device.Malloc or
// Stream.MallocAsync, or a view of part of one from Slice. Close frees an
// allocation; a view's Close does nothing and a view fails once its
// allocation is closed.
//
// Copies and memsets without a stream are synchronous: they run on the
// null stream and return when done, on both platforms. Work queued on a
// non-blocking stream (StreamNonBlocking) is not ordered with them:
// synchronize that stream before reading what its work wrote. The ...Async
// ones are queued on the stream given (nil means the device's null stream)
// and take pinned host buffers, never Go memory, which the garbage
// collector could move or free before the copy runs.
type Buffer struct {
	dev    *Device
	ptr    unsafe.Pointer // device memory, never Go's
	size   int
	mem    *bind.Lifetime // the allocation's, shared with its views
	owner  bool
	stream *Stream // the stream a stream-ordered allocation is freed on
}

// Malloc allocates size bytes of device memory.
func (d *Device) Malloc(size int) (*Buffer, error) {
	if err := ensure(); err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, invalid("Device.Malloc", "size %d: a buffer holds at least one byte", size)
	}
	var p unsafe.Pointer
	if err := check("hipMalloc", C.rg_hipMalloc_on(d.c(), &p, C.size_t(size))); err != nil {
		return nil, withDetail(err, fmt.Sprintf("%s on device %d", humanize.IBytes(uint64(size)), d.ordinal))
	}
	b := &Buffer{dev: d, ptr: p, size: size, mem: &bind.Lifetime{}, owner: true}
	bind.Backstop(b.mem, b, freeLeaked, leaked{dev: d.ordinal, ptr: p})
	return b, nil
}

// MallocAsync allocates size bytes in stream order: the memory may be used
// by work queued on s after this call, and Close frees it in order on s.
func (s *Stream) MallocAsync(size int) (*Buffer, error) {
	if err := s.alive("Stream.MallocAsync"); err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, invalid("Stream.MallocAsync", "size %d: a buffer holds at least one byte", size)
	}
	var p unsafe.Pointer
	err := check("hipMallocAsync", C.rg_hipMallocAsync_on(s.dev.c(), &p, C.size_t(size), s.h))
	runtime.KeepAlive(s)
	if err != nil {
		return nil, withDetail(err, humanize.IBytes(uint64(size)))
	}
	b := &Buffer{dev: s.dev, ptr: p, size: size, mem: &bind.Lifetime{}, owner: true, stream: s}
	bind.Backstop(b.mem, b, freeLeaked, leaked{dev: s.dev.ordinal, ptr: p, async: true})
	return b, nil
}

// leaked is what the cleanup of a Buffer that was never closed frees.
type leaked struct {
	dev   int
	ptr   unsafe.Pointer
	async bool
}

// freeLeaked is the leak backstop. Nothing can queue new work on an
// unreachable buffer, but queued work may still use it: the device is
// synchronized before a stream-ordered allocation is freed (hipFree waits
// for work itself).
func freeLeaked(l leaked) {
	if l.async {
		C.rg_hipDeviceSynchronize_on(C.int(l.dev))
	}
	C.rg_hipFree_on(C.int(l.dev), l.ptr)
}

// Close frees the allocation, after the work queued before it that may use
// it: hipFree waits for the device, and a stream-ordered allocation is
// freed in order on its stream (or, when that stream was closed, after
// synchronizing the device). Closing twice, or closing a view, does nothing.
func (b *Buffer) Close() error {
	if b == nil || !b.owner || !b.mem.End() {
		return nil
	}
	if b.stream != nil {
		if !b.stream.life.Closed() {
			err := check("hipFreeAsync", C.rg_hipFreeAsync_on(b.dev.c(), b.ptr, b.stream.h))
			runtime.KeepAlive(b.stream)
			return err
		}
		if err := b.dev.Synchronize(); err != nil {
			return err
		}
	}
	return check("hipFree", C.rg_hipFree_on(b.dev.c(), b.ptr))
}

// Ptr is the buffer's device address, valid until its allocation is closed.
func (b *Buffer) Ptr() DevicePtr { return DevicePtr(b.ptr) }

// Size is the buffer's length in bytes.
func (b *Buffer) Size() int { return b.size }

// Device is the device the memory is on.
func (b *Buffer) Device() *Device { return b.dev }

// Closed reports whether the buffer's allocation has been closed, for
// packages that check buffers before passing their addresses to a library.
// A nil buffer, or one that no allocation made, counts as closed.
func (b *Buffer) Closed() bool { return b == nil || b.mem == nil || b.mem.Closed() }

func (b *Buffer) String() string {
	return fmt.Sprintf("hip.Buffer(%s at %#x on device %d)", humanize.IBytes(uint64(b.size)), b.ptr, b.dev.ordinal)
}

func (b *Buffer) alive(op string) error {
	if b == nil {
		return invalid(op, "nil buffer")
	}
	if b.mem.Closed() {
		return closedError(op)
	}
	return nil
}

// Slice returns a view of n bytes starting at off. It shares the memory and
// needs no Close.
func (b *Buffer) Slice(off, n int) (*Buffer, error) {
	if err := b.alive("Buffer.Slice"); err != nil {
		return nil, err
	}
	if off < 0 || n <= 0 || off > b.size-n {
		return nil, invalid("Buffer.Slice", "[%d, %d) is not inside a buffer of %d bytes", off, off+n, b.size)
	}
	return &Buffer{dev: b.dev, ptr: unsafe.Add(b.ptr, off), size: n, mem: b.mem}, nil
}

// BufferAt returns a buffer over size bytes at p, device memory that
// something else allocated (another library, or a raw address a kernel
// was given), for calls that take buffers. It owns nothing: Close does
// nothing, and the memory must stay allocated while the buffer is used.
func (d *Device) BufferAt(p DevicePtr, size int) (*Buffer, error) {
	const op = "Device.BufferAt"
	if d == nil {
		return nil, invalid(op, "nil device")
	}
	if p == 0 || size <= 0 {
		return nil, invalid(op, "%d bytes at %#x: want a non-nil address and at least one byte", size, uintptr(p))
	}
	return &Buffer{dev: d, ptr: C.rg_hip_ptr(C.uintptr_t(p)), size: size, mem: &bind.Lifetime{}}, nil
}

// fits checks a copy of n bytes into a buffer of size bytes.
func fits(op string, n, size int, what string) error {
	if n > size {
		return invalid(op, "%s of %d bytes does not fit in %d bytes", what, n, size)
	}
	return nil
}

// streamDevice is the device a stream operation runs on.
func streamDevice(s *Stream, fallback *Device) (*Device, C.hipStream_t, error) {
	if s == nil {
		return fallback, nil, nil
	}
	if s.life.Closed() {
		return nil, nil, closedError("stream")
	}
	return s.dev, s.h, nil
}

// CopyFromHost copies src to the start of the buffer and returns when the
// copy is done.
func (b *Buffer) CopyFromHost(src []byte) error {
	const op = "Buffer.CopyFromHost"
	if err := b.alive(op); err != nil {
		return err
	}
	if err := fits(op, len(src), b.size, "host data"); err != nil || len(src) == 0 {
		return err
	}
	err := check("hipMemcpy", C.rg_hipMemcpy_on(b.dev.c(), b.ptr, unsafe.Pointer(&src[0]), C.size_t(len(src)), C.hipMemcpyHostToDevice))
	runtime.KeepAlive(b)
	return err
}

// CopyToHost copies the start of the buffer into dst and returns when the
// copy is done.
func (b *Buffer) CopyToHost(dst []byte) error {
	const op = "Buffer.CopyToHost"
	if err := b.alive(op); err != nil {
		return err
	}
	if err := fits(op, len(dst), b.size, "a host read"); err != nil || len(dst) == 0 {
		return err
	}
	err := check("hipMemcpy", C.rg_hipMemcpy_on(b.dev.c(), unsafe.Pointer(&dst[0]), b.ptr, C.size_t(len(dst)), C.hipMemcpyDeviceToHost))
	runtime.KeepAlive(b)
	return err
}

// CopyFrom copies all of src to the start of the buffer, on the same or
// another device, and returns when the copy is done.
func (b *Buffer) CopyFrom(src *Buffer) error {
	const op = "Buffer.CopyFrom"
	if err := b.alive(op); err != nil {
		return err
	}
	if err := src.alive(op); err != nil {
		return err
	}
	if err := fits(op, src.size, b.size, "the source"); err != nil {
		return err
	}
	err := check("hipMemcpy", C.rg_hipMemcpy_on(b.dev.c(), b.ptr, src.ptr, C.size_t(src.size), C.hipMemcpyDeviceToDevice))
	runtime.KeepAlive(b)
	runtime.KeepAlive(src)
	return err
}

// CopyFromAsync queues a copy of all of src to the start of the buffer on
// s. Between devices it is a peer copy.
func (b *Buffer) CopyFromAsync(src *Buffer, s *Stream) error {
	const op = "Buffer.CopyFromAsync"
	if err := b.alive(op); err != nil {
		return err
	}
	if err := src.alive(op); err != nil {
		return err
	}
	if err := fits(op, src.size, b.size, "the source"); err != nil {
		return err
	}
	dev, h, err := streamDevice(s, b.dev)
	if err != nil {
		return err
	}
	if src.dev.ordinal != b.dev.ordinal {
		err = check("hipMemcpyPeerAsync", C.rg_hipMemcpyPeerAsync_on(dev.c(), b.ptr, b.dev.c(), src.ptr, src.dev.c(), C.size_t(src.size), h))
	} else {
		err = check("hipMemcpyAsync", C.rg_hipMemcpyAsync_on(dev.c(), b.ptr, src.ptr, C.size_t(src.size), C.hipMemcpyDeviceToDevice, h))
	}
	runtime.KeepAlive(b)
	runtime.KeepAlive(src)
	runtime.KeepAlive(s)
	return err
}

// CopyFromHostAsync queues a copy of all of src to the start of the buffer
// on s. src must stay open until the copy has run.
func (b *Buffer) CopyFromHostAsync(src *PinnedBuffer, s *Stream) error {
	return b.pinnedCopy("Buffer.CopyFromHostAsync", src, s, true)
}

// CopyToHostAsync queues a copy of the start of the buffer into all of dst
// on s. Read dst after the stream has been synchronized.
func (b *Buffer) CopyToHostAsync(dst *PinnedBuffer, s *Stream) error {
	return b.pinnedCopy("Buffer.CopyToHostAsync", dst, s, false)
}

// pinnedCopy queues a copy of all of p to or from the start of the buffer.
func (b *Buffer) pinnedCopy(op string, p *PinnedBuffer, s *Stream, toDevice bool) error {
	if err := b.alive(op); err != nil {
		return err
	}
	if err := p.alive(op); err != nil {
		return err
	}
	if err := fits(op, p.size, b.size, "the pinned buffer"); err != nil {
		return err
	}
	dev, h, err := streamDevice(s, b.dev)
	if err != nil {
		return err
	}
	dst, src, kind := b.ptr, p.ptr, C.hipMemcpyKind(C.hipMemcpyHostToDevice)
	if !toDevice {
		dst, src, kind = p.ptr, b.ptr, C.hipMemcpyDeviceToHost
	}
	err = check("hipMemcpyAsync", C.rg_hipMemcpyAsync_on(dev.c(), dst, src, C.size_t(p.size), kind, h))
	runtime.KeepAlive(b)
	runtime.KeepAlive(p)
	runtime.KeepAlive(s)
	return err
}

// Memset sets every byte of the buffer to v.
func (b *Buffer) Memset(v byte) error {
	if err := b.alive("Buffer.Memset"); err != nil {
		return err
	}
	err := check("hipMemset", C.rg_hipMemset_on(b.dev.c(), b.ptr, C.int(v), C.size_t(b.size)))
	runtime.KeepAlive(b)
	return err
}

// MemsetAsync queues setting every byte of the buffer to v on s.
func (b *Buffer) MemsetAsync(v byte, s *Stream) error {
	if err := b.alive("Buffer.MemsetAsync"); err != nil {
		return err
	}
	dev, h, err := streamDevice(s, b.dev)
	if err != nil {
		return err
	}
	err = check("hipMemsetAsync", C.rg_hipMemsetAsync_on(dev.c(), b.ptr, C.int(v), C.size_t(b.size), h))
	runtime.KeepAlive(b)
	runtime.KeepAlive(s)
	return err
}

func (b *Buffer) words(op string) (C.size_t, error) {
	if err := b.alive(op); err != nil {
		return 0, err
	}
	if b.size%4 != 0 || uintptr(b.ptr)%4 != 0 {
		return 0, invalid(op, "%d bytes at %p: a 32-bit memset needs a 4-byte aligned multiple of 4 bytes", b.size, b.ptr)
	}
	return C.size_t(b.size / 4), nil
}

// MemsetD32 sets every 32-bit word of the buffer to v.
func (b *Buffer) MemsetD32(v uint32) error {
	n, err := b.words("Buffer.MemsetD32")
	if err != nil {
		return err
	}
	err = check("hipMemsetD32", C.rg_hipMemsetD32_on(b.dev.c(), C.hipDeviceptr_t(b.ptr), C.int(int32(v)), n))
	runtime.KeepAlive(b)
	return err
}

// MemsetD32Async queues setting every 32-bit word of the buffer to v on s.
func (b *Buffer) MemsetD32Async(v uint32, s *Stream) error {
	n, err := b.words("Buffer.MemsetD32Async")
	if err != nil {
		return err
	}
	dev, h, err := streamDevice(s, b.dev)
	if err != nil {
		return err
	}
	err = check("hipMemsetD32Async", C.rg_hipMemsetD32Async_on(dev.c(), C.hipDeviceptr_t(b.ptr), C.int(int32(v)), n, h))
	runtime.KeepAlive(b)
	runtime.KeepAlive(s)
	return err
}

// PinnedBuffer is page-locked host memory, the source and destination of
// asynchronous copies. Bytes views it; the view is valid until Close.
type PinnedBuffer struct {
	dev        *Device
	ptr        unsafe.Pointer
	size       int
	mem        *bind.Lifetime // the allocation's, shared with its views
	owner      bool
	registered bool // RegisterHost's: Close unregisters instead of freeing
}

// MallocHost allocates size bytes of pinned host memory. flags are
// HostMalloc* values (HostMallocDefault for plain pinned memory); the
// AMD-only ones are ignored on NVIDIA.
func (d *Device) MallocHost(size int, flags HostMallocFlags) (*PinnedBuffer, error) {
	if err := ensure(); err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, invalid("Device.MallocHost", "size %d: a buffer holds at least one byte", size)
	}
	var p unsafe.Pointer
	if err := check("hipHostMalloc", C.rg_hipHostMalloc_on(d.c(), &p, C.size_t(size), C.uint(flags))); err != nil {
		return nil, withDetail(err, humanize.IBytes(uint64(size))+" of pinned host memory")
	}
	b := &PinnedBuffer{dev: d, ptr: p, size: size, mem: &bind.Lifetime{}, owner: true}
	bind.Backstop(b.mem, b, func(l leaked) { C.rg_hipHostFree_on(C.int(l.dev), l.ptr) }, leaked{dev: d.ordinal, ptr: p})
	return b, nil
}

func (p *PinnedBuffer) alive(op string) error {
	if p == nil {
		return invalid(op, "nil pinned buffer")
	}
	if p.mem.Closed() {
		return closedError(op)
	}
	return nil
}

// Bytes views the memory. Nothing may use the view after Close.
func (p *PinnedBuffer) Bytes() []byte {
	if p.mem.Closed() {
		return nil
	}
	return unsafe.Slice((*byte)(p.ptr), p.size)
}

// Size is the buffer's length in bytes.
func (p *PinnedBuffer) Size() int { return p.size }

// Slice returns a view of n bytes starting at off; it needs no Close.
func (p *PinnedBuffer) Slice(off, n int) (*PinnedBuffer, error) {
	if err := p.alive("PinnedBuffer.Slice"); err != nil {
		return nil, err
	}
	if off < 0 || n <= 0 || off > p.size-n {
		return nil, invalid("PinnedBuffer.Slice", "[%d, %d) is not inside a buffer of %d bytes", off, off+n, p.size)
	}
	return &PinnedBuffer{dev: p.dev, ptr: unsafe.Add(p.ptr, off), size: n, mem: p.mem, registered: p.registered}, nil
}

// Registered reports whether the memory is RegisterHost's (the caller's
// memory, registered) rather than MallocHost's.
func (p *PinnedBuffer) Registered() bool { return p != nil && p.registered }

// Close frees the memory (hipHostFree waits for the device first), or, for
// RegisterHost's, waits for the device's queued work and unregisters it.
// Closing twice, or closing a view, does nothing.
func (p *PinnedBuffer) Close() error {
	if p == nil || !p.owner || !p.mem.End() {
		return nil
	}
	if p.registered {
		// hipHostUnregister does not promise to wait for the copies that
		// read the memory; a failed wait (a device fault) still unregisters.
		return errors.Join(p.dev.Synchronize(), p.release())
	}
	return p.release()
}

// CloseAfter is Close that waits only for e, an event recorded after the
// last queued work that uses the memory, instead of for the whole device:
// a loader unregisters one piece of a file while copies from the next are
// queued. The memory is released even when the wait fails.
func (p *PinnedBuffer) CloseAfter(e *Event) error {
	const op = "PinnedBuffer.CloseAfter"
	if p == nil || !p.owner || p.mem.Closed() {
		return nil
	}
	if err := e.alive(op); err != nil {
		return err
	}
	if !p.mem.End() {
		return nil
	}
	return errors.Join(e.Synchronize(), p.release())
}

// release frees or unregisters the memory, once its lifetime has ended.
func (p *PinnedBuffer) release() error {
	if p.registered {
		return check("hipHostUnregister", C.rg_hipHostUnregister_on(p.dev.c(), p.ptr))
	}
	return check("hipHostFree", C.rg_hipHostFree_on(p.dev.c(), p.ptr))
}
