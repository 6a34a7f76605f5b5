package rocblas

import (
	"encoding/binary"
	"errors"

	"github.com/rocm-go/rocm/hip"
)

// scratchSlots is how many batched calls may have pointer arrays in flight
// on a handle's stream before a new one waits for the oldest.
const scratchSlots = 4

// scratch holds the device copies of the pointer arrays of batched calls:
// each call fills a slot of pinned host memory, copies it to the device
// slot in order on the handle's stream, and records an event after the
// call; a slot is reused only once its event has completed. Nothing is
// allocated per call, and nothing is freed while queued work uses it.
type scratch struct {
	pinned *hip.PinnedBuffer
	dev    *hip.Buffer
	slot   int // bytes per slot
	events [scratchSlots]*hip.Event
	next   int
}

// upload copies up to three pointer arrays to device memory on the
// handle's stream and returns their device addresses and the slot, which
// done must mark once the call that reads them is queued. The lock is held.
func (h *Handle) upload(arrays ...[]uintptr) (addrs [3]uintptr, slot int, err error) {
	s := &h.scratch
	need := 0
	for _, a := range arrays {
		need += 8 * len(a)
	}
	if need > s.slot {
		if err := h.growScratch(need); err != nil {
			return addrs, 0, err
		}
	}
	slot = s.next
	if e := s.events[slot]; e != nil {
		if err := e.Synchronize(); err != nil {
			return addrs, 0, err
		}
	}
	base := slot * s.slot
	host := s.pinned.Bytes()[base : base+need]
	off := 0
	for i, a := range arrays {
		addrs[i] = uintptr(s.dev.Ptr()) + uintptr(base+off)
		for _, p := range a {
			binary.LittleEndian.PutUint64(host[off:], uint64(p))
			off += 8
		}
	}
	src, err := s.pinned.Slice(base, need)
	if err != nil {
		return addrs, 0, err
	}
	dst, err := s.dev.Slice(base, need)
	if err != nil {
		return addrs, 0, err
	}
	return addrs, slot, dst.CopyFromHostAsync(src, h.stream)
}

// done records that the call reading slot is queued. The lock is held.
func (h *Handle) done(slot int) error {
	s := &h.scratch
	s.next = (slot + 1) % scratchSlots
	if s.events[slot] == nil {
		e, err := h.dev.NewEvent(hip.EventDisableTiming)
		if err != nil {
			return err
		}
		s.events[slot] = e
	}
	return s.events[slot].Record(h.stream)
}

// growScratch makes every slot hold at least need bytes, after the work
// that may still read the old slots.
func (h *Handle) growScratch(need int) error {
	s := &h.scratch
	size := max(4096, 2*s.slot)
	for size < need {
		size *= 2
	}
	if s.pinned != nil {
		if err := h.stream.Synchronize(); err != nil {
			return err
		}
		if err := errors.Join(s.pinned.Close(), s.dev.Close()); err != nil {
			return err
		}
		s.pinned, s.dev, s.slot = nil, nil, 0
	}
	pinned, err := h.dev.MallocHost(scratchSlots*size, hip.HostMallocDefault)
	if err != nil {
		return err
	}
	dev, err := h.dev.Malloc(scratchSlots * size)
	if err != nil {
		return errors.Join(err, pinned.Close())
	}
	s.pinned, s.dev, s.slot = pinned, dev, size
	return nil
}

// close frees the scratch memory; the handle's stream has been waited for.
func (s *scratch) close() error {
	var errs []error
	if s.pinned != nil {
		errs = append(errs, s.pinned.Close(), s.dev.Close())
	}
	for i, e := range s.events {
		if e != nil {
			errs = append(errs, e.Close())
			s.events[i] = nil
		}
	}
	s.pinned, s.dev, s.slot = nil, nil, 0
	return errors.Join(errs...)
}
