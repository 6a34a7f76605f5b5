package rccl

/*
#include <stdlib.h>
#include "helpers.h"
*/
import "C"

import (
	"sync"
	"syscall"
	"unsafe"
)

// A communicator that CommInitRank or Split makes inside a group gets its
// handle when the group ends: NCCL writes it then, through the pointer the
// call was given (NCCL 2.28 leaves it NULL until ncclGroupEnd for a split).
// So that pointer is C memory, never a Go variable, and the outermost
// GroupEnd of the thread reads it into the Comm.

// groupState is one thread's open groups (NCCL's groups are per thread, and
// GroupStart locks the goroutine to its thread).
type groupState struct {
	depth   int
	pending []pendingComm
}

// pendingComm is a handle NCCL will write at the group's end, and the Comm
// that gets it (nil for a rank that split with NoColor).
type pendingComm struct {
	slot *C.ncclComm_t
	comm *Comm
}

var (
	groupsMu sync.Mutex
	groups   = map[int]*groupState{}
)

// openGroup counts a group opened on this thread.
func openGroup() {
	groupsMu.Lock()
	defer groupsMu.Unlock()
	tid := syscall.Gettid()
	g := groups[tid]
	if g == nil {
		g = &groupState{}
		groups[tid] = g
	}
	g.depth++
}

// closeGroup counts a group closed on this thread; at the outermost, it
// gives the communicators made in the groups their handles. A handle NCCL
// did not write (the group failed) leaves its Comm unusable, and the error
// says so when the group's own call did not fail.
func closeGroup(groupErr error) error {
	groupsMu.Lock()
	tid := syscall.Gettid()
	g := groups[tid]
	if g == nil {
		groupsMu.Unlock()
		return groupErr
	}
	g.depth--
	if g.depth > 0 {
		groupsMu.Unlock()
		return groupErr
	}
	delete(groups, tid)
	groupsMu.Unlock()
	missing := 0
	for _, p := range g.pending {
		c := *p.slot
		C.free(unsafe.Pointer(p.slot))
		if p.comm == nil {
			continue
		}
		if c == nil {
			p.comm.life.End()
			missing++
			continue
		}
		p.comm.c = c
		p.comm.pending = false
	}
	if missing > 0 && groupErr == nil {
		return invalid("GroupEnd", "%d communicator(s) made in the group got no handle from the library: they cannot be used", missing)
	}
	return groupErr
}

// newSlot is C memory for a handle NCCL writes, NULL to start with.
func newSlot() *C.ncclComm_t {
	return (*C.ncclComm_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.ncclComm_t(nil)))))
}

// takeSlot is the handle a call wrote into slot: at once outside a group
// (the slot freed), or, inside one, a pending Comm that the outermost
// GroupEnd completes (nil for NoColor, whose slot is freed then too).
func takeSlot(slot *C.ncclComm_t, m *Comm) *Comm {
	groupsMu.Lock()
	g := groups[syscall.Gettid()]
	if g != nil {
		if m != nil {
			m.pending = true
		}
		g.pending = append(g.pending, pendingComm{slot: slot, comm: m})
		groupsMu.Unlock()
		return m
	}
	groupsMu.Unlock()
	c := *slot
	C.free(unsafe.Pointer(slot))
	if c == nil || m == nil {
		return nil
	}
	m.c = c
	return m
}

// errPending is the error of a call on a communicator whose group has not
// ended.
func errPending(op string) error {
	return invalid(op, "the communicator was made in a group that has not ended: it gets its handle at GroupEnd")
}
