package hip

/*
#include "helpers.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/internal/bind"
)

// RegisterHost page-locks memory the caller owns and registers it with the
// device (hipHostRegister; cudaHostRegister on NVIDIA), so that async
// copies move it by DMA with no staging copy: a file mapped with
// syscall.Mmap loads from the page cache straight to the device. The
// PinnedBuffer it returns views b and goes wherever MallocHost's does
// (CopyFromHostAsync, Slice). Close waits for the device and unregisters;
// the memory itself stays the caller's, and must stay mapped until then.
//
// b must not be Go memory: the runtime keeps its address, which Go's
// rules forbid C to do. Map it, or allocate it outside Go.
//
// flags are HostRegister* values. HostRegisterReadOnly is for memory the
// process may only read (a file mapped PROT_READ): CUDA pins such memory
// only with it, when the device's HostRegisterReadOnlySupported property
// is set. On AMD, ROCm 6.4 gives the bit to hipExtHostRegisterCoarseGrained
// (also 8), harmless for copies, and its runtime may refuse a read-only
// mapping: a caller falls back to MallocHost's memory then.
func (d *Device) RegisterHost(b []byte, flags HostRegisterFlags) (*PinnedBuffer, error) {
	const op = "Device.RegisterHost"
	if err := ensure(); err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, invalid(op, "no memory: register at least one byte")
	}
	if known := HostRegisterPortable | HostRegisterMapped | HostRegisterIoMemory | HostRegisterReadOnly; flags&^known != 0 {
		return nil, invalid(op, "flags %#x: only HostRegister* values combine", uint32(flags))
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if err := check("hipHostRegister", C.rg_hipHostRegister_on(d.c(), p, C.size_t(len(b)), C.uint(flags))); err != nil {
		return nil, withDetail(err, fmt.Sprintf("%s at %p with %s", humanize.IBytes(uint64(len(b))), p, flagNames(flags)))
	}
	r := &PinnedBuffer{dev: d, ptr: p, size: len(b), mem: &bind.Lifetime{}, owner: true, registered: true}
	bind.Backstop(r.mem, r, func(l leaked) { C.rg_hipHostUnregister_on(C.int(l.dev), l.ptr) }, leaked{dev: d.ordinal, ptr: p})
	return r, nil
}

// flagNames spells a combination of HostRegister flags for errors.
func flagNames(f HostRegisterFlags) string {
	if f == HostRegisterDefault {
		return f.String()
	}
	s := ""
	for bit := HostRegisterPortable; bit <= HostRegisterReadOnly; bit <<= 1 {
		if f&bit != 0 {
			if s != "" {
				s += "|"
			}
			s += bit.String()
		}
	}
	return s
}
