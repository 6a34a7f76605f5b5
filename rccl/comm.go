package rccl

/*
#include <stdlib.h>
#include "helpers.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/bind"
)

// Comm is one rank of a communicator: a group of ranks, one per GPU, that
// run collectives together. Its collectives are queued on HIP streams of
// its device.
//
// A Comm's calls must come from one goroutine at a time, and every rank
// must issue the same collectives in the same order: NCCL matches them by
// order. AsyncError and Abort are the exceptions: any goroutine may call
// them, to watch a communicator and to stop one that hangs.
//
// Close it when done (CloseAll for the ranks of one communicator that one
// goroutine drives). There is no garbage-collector backstop: destroying a
// communicator involves its peers, which a cleanup cannot wait for.
type Comm struct {
	c    C.ncclComm_t
	dev  *hip.Device
	ord  C.int
	life bind.Lifetime
	// count and rank are read from the library on first use (a
	// communicator split inside a group has them only once the group
	// ends); -1 until then.
	count, rank atomic.Int64
	// pending: made in a group that has not ended (see group.go); c is
	// NULL until it does.
	pending bool
}

func newComm(c C.ncclComm_t, dev *hip.Device) *Comm {
	m := &Comm{c: c, dev: dev, ord: C.int(dev.Ordinal())}
	m.count.Store(-1)
	m.rank.Store(-1)
	return m
}

// checkDevice checks a device argument.
func checkDevice(op string, dev *hip.Device) error {
	if dev == nil {
		return invalid(op, "nil device")
	}
	return nil
}

// CommInitRank makes rank's end of the communicator of nranks ranks that id
// names, on dev (ncclCommInitRank). It returns once every rank has joined:
// call it for each rank from its own goroutine (or process), or for
// several ranks from one goroutine inside a group (Group), where the
// communicators are ready once the group ends.
func CommInitRank(dev *hip.Device, nranks int, id UniqueID, rank int) (*Comm, error) {
	const op = "CommInitRank"
	if err := ensure(); err != nil {
		return nil, err
	}
	if err := checkDevice(op, dev); err != nil {
		return nil, err
	}
	if nranks < 1 || nranks > math.MaxInt32 {
		return nil, invalid(op, "%d ranks: a communicator has 1 to %d", nranks, math.MaxInt32)
	}
	if rank < 0 || rank >= nranks {
		return nil, invalid(op, "rank %d of %d: ranks are 0 to %d", rank, nranks, nranks-1)
	}
	slot, err := initRank(dev.Ordinal(), nranks, id, rank)
	if err != nil {
		return nil, err
	}
	m := takeSlot(slot, newComm(nil, dev))
	if m == nil {
		return nil, invalid(op, "the library gave no communicator for rank %d of %d on device %d", rank, nranks, dev.Ordinal())
	}
	m.count.Store(int64(nranks))
	m.rank.Store(int64(rank))
	return m, nil
}

// CommInitAll makes a communicator of one process over devs, rank i on
// devs[i] (ncclCommInitAll), and returns its ranks in order. Each device
// may appear once: NCCL takes one rank per GPU.
func CommInitAll(devs ...*hip.Device) ([]*Comm, error) {
	const op = "CommInitAll"
	if err := ensure(); err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, invalid(op, "no devices: a communicator has at least one rank")
	}
	seen := map[int]int{}
	ords := make([]int, len(devs))
	for i, d := range devs {
		if d == nil {
			return nil, invalid(op, "devs[%d] is nil", i)
		}
		if j, ok := seen[d.Ordinal()]; ok {
			return nil, invalid(op, "device %d is devs[%d] and devs[%d]: NCCL takes one rank per GPU", d.Ordinal(), j, i)
		}
		seen[d.Ordinal()] = i
		ords[i] = d.Ordinal()
	}
	cs, err := initAll(ords)
	if err != nil {
		return nil, err
	}
	out := make([]*Comm, len(devs))
	for i, c := range cs {
		out[i] = newComm(c, devs[i])
		out[i].count.Store(int64(len(devs)))
		out[i].rank.Store(int64(i))
	}
	return out, nil
}

// initRank calls ncclCommInitRank on device ord, made current in the same
// C call.
// initRank calls ncclCommInitRank on device ord; the handle comes in the
// returned slot (C memory: see group.go).
func initRank(ord, nranks int, id UniqueID, rank int) (*C.ncclComm_t, error) {
	slot := newSlot()
	if err := check("ncclCommInitRank", C.rg_ncclCommInitRank_on(C.int(ord), slot, C.int(nranks), id.c(), C.int(rank))); err != nil {
		C.free(unsafe.Pointer(slot))
		return nil, withDetail(err, fmt.Sprintf("rank %d of %d on device %d", rank, nranks, ord))
	}
	return slot, nil
}

// initAll calls ncclCommInitAll over the device ordinals.
func initAll(ords []int) ([]C.ncclComm_t, error) {
	list := make([]C.int, len(ords))
	for i, o := range ords {
		list[i] = C.int(o)
	}
	cs := make([]C.ncclComm_t, len(ords))
	if err := check("ncclCommInitAll", C.rg_ncclCommInitAll(&cs[0], C.int(len(ords)), &list[0])); err != nil {
		return nil, withDetail(err, fmt.Sprintf("on devices %v", ords))
	}
	return cs, nil
}

// alive checks that the communicator can be used.
func (m *Comm) alive(op string) error {
	switch {
	case m == nil || m.dev == nil:
		return invalid(op, "nil communicator, or one not made by this package")
	case m.life.Closed():
		return closedError(op)
	case m.pending:
		return errPending(op)
	}
	return nil
}

// Device is the device the communicator's rank runs on.
func (m *Comm) Device() *hip.Device {
	if m == nil {
		return nil
	}
	return m.dev
}

// Count is the number of ranks of the communicator (ncclCommCount).
func (m *Comm) Count() (int, error) {
	if err := m.alive("Comm.Count"); err != nil {
		return 0, err
	}
	return m.query(&m.count, "ncclCommCount", func(v *C.int) C.ncclResult_t { return C.rg_ncclCommCount(m.c, v) })
}

// Rank is this rank's place in the communicator, 0 to Count()-1
// (ncclCommUserRank).
func (m *Comm) Rank() (int, error) {
	if err := m.alive("Comm.Rank"); err != nil {
		return 0, err
	}
	return m.query(&m.rank, "ncclCommUserRank", func(v *C.int) C.ncclResult_t { return C.rg_ncclCommUserRank(m.c, v) })
}

// DeviceOrdinal is the device of the communicator's rank as the library
// has it (ncclCommCuDevice): Device's ordinal.
func (m *Comm) DeviceOrdinal() (int, error) {
	if err := m.alive("Comm.DeviceOrdinal"); err != nil {
		return 0, err
	}
	var d C.int
	err := check("ncclCommCuDevice", C.rg_ncclCommCuDevice(m.c, &d))
	runtime.KeepAlive(m)
	return int(d), err
}

// query reads a number the library knows of the communicator, once.
func (m *Comm) query(cache *atomic.Int64, name string, call func(*C.int) C.ncclResult_t) (int, error) {
	if v := cache.Load(); v >= 0 {
		return int(v), nil
	}
	var v C.int
	st := call(&v)
	runtime.KeepAlive(m)
	if err := check(name, st); err != nil {
		return 0, err
	}
	cache.Store(int64(v))
	return int(v), nil
}

// AsyncError reports an error the communicator met while its work ran
// (ncclCommGetAsyncError): nil while all is well. A failed communicator
// must be aborted (Abort). Any goroutine may call it.
func (m *Comm) AsyncError() error {
	if err := m.alive("Comm.AsyncError"); err != nil {
		return err
	}
	var st C.ncclResult_t
	err := check("ncclCommGetAsyncError", C.rg_ncclCommGetAsyncError(m.c, &st))
	runtime.KeepAlive(m)
	if err != nil {
		return err
	}
	if Status(st) != StatusSuccess {
		return &Error{Op: "ncclCommGetAsyncError", Status: Status(st), Detail: "the communicator failed while its work ran"}
	}
	return nil
}

// LastError is the library's text of its last error (ncclGetLastError),
// which may belong to another call than the last one that failed; "" when
// it has none.
func (m *Comm) LastError() string {
	if ensure() != nil {
		return ""
	}
	var c C.ncclComm_t
	if m != nil && !m.life.Closed() {
		c = m.c
	}
	p := C.rg_ncclGetLastError(c)
	runtime.KeepAlive(m)
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// NoColor is the color of a rank that joins none of Split's communicators.
const NoColor = -1

// Split makes new communicators from this one's ranks (ncclCommSplit):
// the ranks that pass one color form one, ordered by key (then by their
// rank here). A rank that passes NoColor gets nil and no error. Every rank
// of the communicator must call it; one goroutine that drives several
// ranks calls it inside a group (Group). The new communicator inherits
// this one's configuration and runs on the same device.
func (m *Comm) Split(color, key int) (*Comm, error) {
	const op = "Comm.Split"
	if err := m.alive(op); err != nil {
		return nil, err
	}
	if color < NoColor || color > math.MaxInt32 {
		return nil, invalid(op, "color %d: want 0 to %d, or NoColor", color, math.MaxInt32)
	}
	if key < math.MinInt32 || key > math.MaxInt32 {
		return nil, invalid(op, "key %d does not fit in 32 bits", key)
	}
	slot := newSlot()
	err := check("ncclCommSplit", C.rg_ncclCommSplit_on(m.ord, m.c, C.int(color), C.int(key), slot, nil))
	runtime.KeepAlive(m)
	if err != nil {
		C.free(unsafe.Pointer(slot))
		return nil, err
	}
	var nm *Comm
	if color != NoColor {
		nm = newComm(nil, m.dev)
	}
	return takeSlot(slot, nm), nil
}

// Finalize flushes the communicator's queued work and frees what it
// shares with its peers (ncclCommFinalize); Close then frees the rest.
// Every rank must finalize; one goroutine that drives several ranks
// finalizes them inside a group, as CloseAll does.
func (m *Comm) Finalize() error {
	if err := m.alive("Comm.Finalize"); err != nil {
		return err
	}
	err := check("ncclCommFinalize", C.rg_ncclCommFinalize_on(m.ord, m.c))
	runtime.KeepAlive(m)
	return err
}

// Close destroys the communicator (ncclCommDestroy), after the work
// queued on it, finalizing it first if Finalize was not called. Closing
// twice, or after Abort, does nothing.
func (m *Comm) Close() error {
	if m == nil || m.dev == nil || !m.life.End() || m.c == nil {
		return nil
	}
	return check("ncclCommDestroy", C.rg_ncclCommDestroy_on(m.ord, m.c))
}

// Abort stops the communicator's work, including work that hangs, and
// frees it (ncclCommAbort): the way out of a failed communicator, from any
// goroutine. Every rank of the communicator should be aborted. Abort after
// Close does nothing.
func (m *Comm) Abort() error {
	if m == nil || m.dev == nil || !m.life.End() {
		return nil
	}
	return check("ncclCommAbort", C.rg_ncclCommAbort_on(m.ord, m.c))
}

// CloseAll closes the ranks of a communicator that one goroutine drives
// (those CommInitAll made, say): it finalizes them in one group, then
// destroys each, as NCCL's examples do. Closed and nil communicators are
// skipped.
func CloseAll(comms ...*Comm) error {
	var open []*Comm
	for _, m := range comms {
		if m != nil && m.dev != nil && !m.life.Closed() {
			open = append(open, m)
		}
	}
	if len(open) == 0 {
		return nil
	}
	err := Group(func() error {
		var errs []error
		for _, m := range open {
			// An RCCL or NCCL before 2.14 has no ncclCommFinalize: its
			// ncclCommDestroy does all.
			if err := m.Finalize(); !errors.Is(err, ErrSymbolNotFound) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
	for _, m := range open {
		err = errors.Join(err, m.Close())
	}
	return err
}
