package rccl

/*
#include "helpers.h"
*/
import "C"

import (
	"errors"
	"math"
	"runtime"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
)

// The collectives and point-to-point calls. Each is queued on a stream of
// the communicator's device and returns once queued (inside a group, once
// recorded: the group's end queues them). Counts are in elements of the
// data type; a buffer may be a view (hip.Buffer.Slice) and must hold the
// elements the call reads or writes. Send and receive buffers may be one
// buffer (in place): for AllGather the send part is rank's slice of the
// receive buffer, for ReduceScatter the receive buffer is rank's slice of
// the send buffer. A nil stream is the device's null stream.
//
// Every argument is checked before the call: a closed or nil
// communicator, buffer or stream, a buffer or stream on another device, a
// buffer too small, a count that overflows, a data type or op the library
// does not have, a root or peer out of range.
//
// The buffers must stay allocated until the work is done (synchronize
// the stream, or record an event after it). The calls may be captured
// into a HIP graph (hip.Stream.BeginCapture): NCCL supports it since 2.9,
// and RCCL; a replay of the graph runs them again, on the same buffers,
// with the same communicator, which must outlive the graph.

// call is one call's checked arguments.
type call struct {
	op     string
	m      *Comm
	nranks int
	stream C.hipStream_t
	err    error
}

// begin checks the communicator, data type and stream of a call.
// It returns the call by value: a collective allocates nothing (decode's
// all-reduces run one a layer).
func (m *Comm) begin(op string, t DataType, s *hip.Stream) call {
	a := call{op: op, m: m}
	if a.err = m.alive(op); a.err != nil {
		return a
	}
	if a.err = ensure(); a.err != nil {
		return a
	}
	if t.Size() == 0 {
		a.err = invalid(op, "data type %d is not one of NCCL's", uint32(t))
		return a
	}
	switch {
	case s == nil:
	case s.Closed():
		a.err = &Error{Op: op, Status: StatusInvalidArgument, Detail: "the stream is closed", Err: hip.ErrClosed}
		return a
	case s.Device() == nil:
		a.err = invalid(op, "the stream was not made by hip.Device.NewStream")
		return a
	case s.Device().Ordinal() != m.dev.Ordinal():
		a.err = invalid(op, "the stream is on device %d, the communicator on device %d", s.Device().Ordinal(), m.dev.Ordinal())
		return a
	default:
		a.stream = C.hipStream_t(s.Raw())
	}
	a.nranks, a.err = m.Count()
	return a
}

// opArg checks a reduction.
func (a *call) opArg(o Op) {
	if a.err == nil && !o.valid() {
		a.err = invalid(a.op, "op %d is not one of NCCL's reductions (sum, prod, max, min, avg)", uint32(o))
	}
}

// rankArg checks a root or peer.
func (a *call) rankArg(what string, r int) {
	if a.err == nil && (r < 0 || r >= a.nranks) {
		a.err = invalid(a.op, "%s %d: the communicator's ranks are 0 to %d", what, r, a.nranks-1)
	}
}

// rank is the calling rank, for the arguments that depend on it.
func (a *call) rank() int {
	if a.err != nil {
		return -1
	}
	r, err := a.m.Rank()
	a.err = err
	return r
}

// buffer checks that buf holds count·times elements of t on the
// communicator's device, and returns its address; a nil buffer is allowed
// (address 0) when optional, or when nothing is read or written.
func (a *call) buffer(name string, buf *hip.Buffer, count, times int, t DataType, optional bool) C.uintptr_t {
	if a.err != nil {
		return 0
	}
	if count < 0 {
		a.err = invalid(a.op, "count %d is negative", count)
		return 0
	}
	size := t.Size()
	if times < 1 || count > math.MaxInt/size/times {
		a.err = invalid(a.op, "count %d of %d-byte %s elements, times %d, overflows", count, size, t, times)
		return 0
	}
	need := count * times * size
	switch {
	case buf == nil && (optional || need == 0):
		return 0
	case buf == nil:
		a.err = invalid(a.op, "the %s buffer is nil", name)
	case buf.Closed():
		a.err = &Error{Op: a.op, Status: StatusInvalidArgument, Detail: "the " + name + " buffer is closed", Err: hip.ErrClosed}
	case buf.Device() == nil || buf.Device().Ordinal() != a.m.dev.Ordinal():
		a.err = invalid(a.op, "the %s buffer is on device %d, the communicator on device %d", name, bufDevice(buf), a.m.dev.Ordinal())
	case buf.Size() < need:
		a.err = invalid(a.op, "the %s buffer holds %d bytes; %d elements of %s need %d", name, buf.Size(), count*times, t, need)
	default:
		return C.uintptr_t(buf.Ptr())
	}
	return 0
}

func bufDevice(b *hip.Buffer) int {
	if b.Device() == nil {
		return -1
	}
	return b.Device().Ordinal()
}

// done turns the call's status into its error and keeps its operands
// alive until the C call has returned (recv nil for Send and Recv's one
// buffer).
func (a *call) done(name string, st C.ncclResult_t, send, recv *hip.Buffer, s *hip.Stream) error {
	runtime.KeepAlive(a.m)
	runtime.KeepAlive(send)
	runtime.KeepAlive(recv)
	runtime.KeepAlive(s)
	return check(name, st)
}

// ptr is a checked address as the calls take it.
func ptr(p C.uintptr_t) unsafe.Pointer { return C.rg_rccl_ptr(p) }

// AllReduce writes to recv, on every rank, the reduction by op of the
// count elements of every rank's send (ncclAllReduce).
func (m *Comm) AllReduce(send, recv *hip.Buffer, count int, t DataType, o Op, s *hip.Stream) error {
	a := m.begin("Comm.AllReduce", t, s)
	a.opArg(o)
	sp := a.buffer("send", send, count, 1, t, false)
	rp := a.buffer("receive", recv, count, 1, t, false)
	if a.err != nil {
		return a.err
	}
	return a.done("ncclAllReduce", C.rg_ncclAllReduce_on(m.ord, ptr(sp), ptr(rp), C.size_t(count), C.ncclDataType_t(t), C.ncclRedOp_t(o), m.c, a.stream), send, recv, s)
}

// AllGather writes to recv, on every rank, the count elements of every
// rank's send, rank r's at elements [r·count, (r+1)·count)
// (ncclAllGather): recv holds Count()·count elements.
func (m *Comm) AllGather(send, recv *hip.Buffer, count int, t DataType, s *hip.Stream) error {
	a := m.begin("Comm.AllGather", t, s)
	sp := a.buffer("send", send, count, 1, t, false)
	rp := a.buffer("receive", recv, count, a.nranks, t, false)
	if a.err != nil {
		return a.err
	}
	return a.done("ncclAllGather", C.rg_ncclAllGather_on(m.ord, ptr(sp), ptr(rp), C.size_t(count), C.ncclDataType_t(t), m.c, a.stream), send, recv, s)
}

// ReduceScatter reduces by op the Count()·count elements of every rank's
// send and writes to rank r's recv the count elements [r·count,
// (r+1)·count) of the result (ncclReduceScatter).
func (m *Comm) ReduceScatter(send, recv *hip.Buffer, count int, t DataType, o Op, s *hip.Stream) error {
	a := m.begin("Comm.ReduceScatter", t, s)
	a.opArg(o)
	sp := a.buffer("send", send, count, a.nranks, t, false)
	rp := a.buffer("receive", recv, count, 1, t, false)
	if a.err != nil {
		return a.err
	}
	return a.done("ncclReduceScatter", C.rg_ncclReduceScatter_on(m.ord, ptr(sp), ptr(rp), C.size_t(count), C.ncclDataType_t(t), C.ncclRedOp_t(o), m.c, a.stream), send, recv, s)
}

// Broadcast writes root's count elements of send to every rank's recv
// (ncclBroadcast). send is read on root only: other ranks may pass nil.
func (m *Comm) Broadcast(send, recv *hip.Buffer, count int, t DataType, root int, s *hip.Stream) error {
	a := m.begin("Comm.Broadcast", t, s)
	a.rankArg("root", root)
	me := a.rank()
	sp := a.buffer("send", send, count, 1, t, me != root)
	rp := a.buffer("receive", recv, count, 1, t, false)
	if a.err != nil {
		return a.err
	}
	return a.done("ncclBroadcast", C.rg_ncclBroadcast_on(m.ord, ptr(sp), ptr(rp), C.size_t(count), C.ncclDataType_t(t), C.int(root), m.c, a.stream), send, recv, s)
}

// Reduce writes the reduction by op of every rank's count elements of
// send to root's recv (ncclReduce). recv is written on root only: other
// ranks may pass nil.
func (m *Comm) Reduce(send, recv *hip.Buffer, count int, t DataType, o Op, root int, s *hip.Stream) error {
	a := m.begin("Comm.Reduce", t, s)
	a.opArg(o)
	a.rankArg("root", root)
	me := a.rank()
	sp := a.buffer("send", send, count, 1, t, false)
	rp := a.buffer("receive", recv, count, 1, t, me != root)
	if a.err != nil {
		return a.err
	}
	return a.done("ncclReduce", C.rg_ncclReduce_on(m.ord, ptr(sp), ptr(rp), C.size_t(count), C.ncclDataType_t(t), C.ncclRedOp_t(o), C.int(root), m.c, a.stream), send, recv, s)
}

// Send sends count elements of buf to rank peer, which receives them with
// Recv (ncclSend). A send and its receive block each other until both are
// queued: make them from different goroutines, or put both (and a rank's
// sends and receives to several peers) in one group.
func (m *Comm) Send(buf *hip.Buffer, count int, t DataType, peer int, s *hip.Stream) error {
	return m.p2p("Comm.Send", buf, count, t, peer, s, true)
}

// Recv receives count elements from rank peer's Send into buf (ncclRecv).
func (m *Comm) Recv(buf *hip.Buffer, count int, t DataType, peer int, s *hip.Stream) error {
	return m.p2p("Comm.Recv", buf, count, t, peer, s, false)
}

// p2p is Send or Recv.
func (m *Comm) p2p(op string, buf *hip.Buffer, count int, t DataType, peer int, s *hip.Stream, send bool) error {
	a := m.begin(op, t, s)
	a.rankArg("peer", peer)
	name := "receive"
	if send {
		name = "send"
	}
	p := a.buffer(name, buf, count, 1, t, false)
	if a.err != nil {
		return a.err
	}
	if send {
		return a.done("ncclSend", C.rg_ncclSend_on(m.ord, ptr(p), C.size_t(count), C.ncclDataType_t(t), C.int(peer), m.c, a.stream), buf, nil, s)
	}
	return a.done("ncclRecv", C.rg_ncclRecv_on(m.ord, ptr(p), C.size_t(count), C.ncclDataType_t(t), C.int(peer), m.c, a.stream), buf, nil, s)
}

// GroupStart opens a group (ncclGroupStart): the calls until the matching
// GroupEnd are recorded and queued together when it ends. A group is how
// one goroutine drives several ranks (several GPUs) of a communicator,
// and how a rank's sends and receives are fused. Groups nest.
//
// NCCL keeps the group per OS thread: GroupStart locks the calling
// goroutine to its thread until the matching GroupEnd, which the same
// goroutine must call. Group does both around a function.
func GroupStart() error {
	if err := ensure(); err != nil {
		return err
	}
	runtime.LockOSThread()
	if err := check("ncclGroupStart", C.rg_ncclGroupStart()); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	openGroup()
	return nil
}

// GroupEnd closes the group GroupStart opened (ncclGroupEnd) and queues its
// calls: the communicators it initialized are ready, and its collectives
// are on their streams (not yet done). It unlocks the goroutine from its
// thread.
func GroupEnd() error {
	defer runtime.UnlockOSThread()
	if err := ensure(); err != nil {
		return err
	}
	return closeGroup(check("ncclGroupEnd", C.rg_ncclGroupEnd()))
}

// Group runs f inside a group: GroupStart, f, then GroupEnd whatever f
// returned, and returns both errors. Check the arguments of every rank
// before the group: a call that fails inside it leaves the other ranks'
// calls without their match, and the communicators must then be aborted.
func Group(f func() error) error {
	if err := GroupStart(); err != nil {
		return err
	}
	err := f()
	return errors.Join(err, GroupEnd())
}
