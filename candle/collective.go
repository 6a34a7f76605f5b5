package candle

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Collectives: a Group is a set of devices, one rank each, whose tensors
// the collectives combine: AllReduce, AllGather, ReduceScatter and
// Broadcast. NewHIPGroup makes one over GPUs (RCCL, NCCL on NVIDIA);
// NewCPUGroup makes one of CPU ranks in this process, which runs
// tensor-parallel code without GPUs; NewGroup takes any Communicator.

// ReduceOp is how a collective combines the ranks' elements.
type ReduceOp int

// The reductions. ReduceAvg of an integer dtype is the sum divided by the
// ranks and truncated, as NCCL computes it; of a float dtype NCCL scales
// each operand by 1/ranks before summing, which may round differently
// from the sum divided.
const (
	ReduceSum ReduceOp = iota
	ReduceProd
	ReduceMax
	ReduceMin
	ReduceAvg
)

var reduceOpNames = [...]string{"sum", "prod", "max", "min", "avg"}

func (o ReduceOp) String() string {
	if o >= 0 && int(o) < len(reduceOpNames) {
		return reduceOpNames[o]
	}
	return fmt.Sprintf("ReduceOp(%d)", int(o))
}

func (o ReduceOp) valid() bool { return o >= 0 && int(o) < len(reduceOpNames) }

// Communicator is one rank's end of a group of devices: what moves the
// data of a Group's collectives. Each method is called with contiguous
// tensors of one dtype on Device(), checked by the Group; it queues or
// does the work and returns, and the results are read through dst as any
// op's. Every rank makes the same calls in the same order (the Group sees
// to it); a rank's calls may block until its peers make theirs, so the
// Group calls them from one goroutine per rank, or from one goroutine for
// all inside Grouped when the communicator implements it.
type Communicator interface {
	// Rank is this end's place in the group, 0 to Size()-1.
	Rank() int
	// Size is the number of ranks.
	Size() int
	// Device is where this rank's tensors are.
	Device() Device
	// AllReduce writes to dst, on every rank, the reduction by op of every
	// rank's src (src and dst of one shape).
	AllReduce(src, dst *Tensor, op ReduceOp) error
	// AllGather writes to dst, on every rank, every rank's src, rank r's
	// at elements [r·n, (r+1)·n) of dst, n being src's elements.
	AllGather(src, dst *Tensor) error
	// ReduceScatter writes to rank r's dst the elements [r·n, (r+1)·n)
	// of the reduction by op of every rank's src, n being dst's elements.
	ReduceScatter(src, dst *Tensor, op ReduceOp) error
	// Broadcast writes root's src to every rank's dst; src is nil on the
	// other ranks.
	Broadcast(src, dst *Tensor, root int) error
	// Close frees the rank's end.
	Close() error
}

// Aborter is a Communicator that can stop its rank's work, a call waiting
// for its peers included (RCCL's ncclCommAbort, the CPU group's barrier):
// the way out when one rank fails while the others wait for it. After
// Abort the communicator's calls fail; Close still frees it.
type Aborter interface {
	Abort() error
}

// Grouped is a Communicator whose ranks one goroutine may drive: when
// every rank's communicator is one, Group runs the calls of every rank
// inside one call of the first's Grouped, one rank after another (NCCL's
// group, which queues them together at its end).
type Grouped interface {
	Communicator
	Grouped(calls func() error) error
}

// Group is a set of devices with one rank each, and the collectives on
// their tensors: each takes one tensor per rank, in rank order, of one
// shape and dtype, each on its rank's device, and returns a fresh tensor
// per rank. From one goroutine a Group drives every rank; for one
// goroutine per device, each takes its Member. A Group owns its
// communicators: Close closes them.
type Group struct {
	comms    []Communicator
	grouped  func(func() error) error // set when one goroutine may drive every rank
	closeAll func() error
	closed   atomic.Bool
	aborted  atomic.Bool
}

// NewGroup makes a group of communicators, one per rank, in rank order:
// comms[r].Rank() is r and every Size() is len(comms), and no two are on
// one device.
func NewGroup(comms ...Communicator) (*Group, error) {
	const op = "NewGroup"
	if len(comms) == 0 {
		return nil, pkg.Errorf(op, ErrArgument, "no communicators: a group has at least one rank")
	}
	devs := map[Device]int{}
	for r, c := range comms {
		if c == nil {
			return nil, pkg.Errorf(op, ErrArgument, "communicator %d is nil", r)
		}
		if c.Rank() != r || c.Size() != len(comms) {
			return nil, pkg.Errorf(op, ErrArgument, "communicator %d is rank %d of %d: want rank %d of %d, in rank order", r, c.Rank(), c.Size(), r, len(comms))
		}
		if c.Device() == nil {
			return nil, pkg.Errorf(op, ErrDevice, "communicator %d has no device", r)
		}
		if q, ok := devs[c.Device()]; ok {
			return nil, pkg.Errorf(op, ErrDevice, "%s holds ranks %d and %d: each rank needs its own device", c.Device(), q, r)
		}
		devs[c.Device()] = r
	}
	g := &Group{comms: comms}
	if gc, ok := comms[0].(Grouped); ok && allGrouped(comms) {
		g.grouped = gc.Grouped
	}
	return g, nil
}

func allGrouped(comms []Communicator) bool {
	for _, c := range comms {
		if _, ok := c.(Grouped); !ok {
			return false
		}
	}
	return true
}

// Size is the number of ranks.
func (g *Group) Size() int { return len(g.comms) }

// Devices are the ranks' devices, in rank order.
func (g *Group) Devices() []Device {
	out := make([]Device, len(g.comms))
	for r, c := range g.comms {
		out[r] = c.Device()
	}
	return out
}

// Close closes the group's communicators. Closing twice does nothing; the
// members fail with ErrClosed afterwards.
func (g *Group) Close() error {
	if g == nil || !g.closed.CompareAndSwap(false, true) {
		return nil
	}
	if g.closeAll != nil {
		return pkg.Wrap("Group.Close", g.closeAll())
	}
	var errs []error
	for _, c := range g.comms {
		errs = append(errs, c.Close())
	}
	return pkg.Wrap("Group.Close", errors.Join(errs...))
}

func (g *Group) alive(op string) error {
	if g == nil || len(g.comms) == 0 {
		return pkg.Errorf(op, ErrArgument, "nil group")
	}
	if g.closed.Load() {
		return &Error{Pkg: string(pkg), Op: op, Kind: ErrClosed, Detail: "use of a closed group", Err: ErrClosed}
	}
	if g.aborted.Load() {
		return &Error{Pkg: string(pkg), Op: op, Kind: ErrClosed, Detail: "use of an aborted group", Err: ErrClosed}
	}
	return nil
}

// Abort stops the group's work from any goroutine: every rank's
// collective under way returns an error, so that no goroutine waits for a
// rank that has failed, and every later one fails with ErrClosed. It is
// the way out of a failed step; the group cannot be used again, and Close
// still frees it. A group whose communicators cannot abort (not an
// Aborter) is an error of kind ErrUnsupported, and nothing is stopped.
func (g *Group) Abort() error {
	const op = "Group.Abort"
	if g == nil || len(g.comms) == 0 {
		return pkg.Errorf(op, ErrArgument, "nil group")
	}
	for r, c := range g.comms {
		if _, ok := c.(Aborter); !ok {
			return pkg.Errorf(op, ErrUnsupported, "rank %d's communicator (%T) cannot abort its work", r, c)
		}
	}
	if !g.aborted.CompareAndSwap(false, true) || g.closed.Load() {
		return nil
	}
	var errs []error
	for _, c := range g.comms {
		errs = append(errs, c.(Aborter).Abort())
	}
	return pkg.Wrap(op, errors.Join(errs...))
}

// Member is one rank of a group: its collectives on one tensor, for one
// goroutine per device. Every member must make the same calls in the same
// order, with tensors of one shape and dtype: unlike the Group's
// collectives, a member cannot check its peers' tensors, and a mismatch
// hangs or corrupts the result.
type Member struct {
	g    *Group
	rank int
}

// Member is rank r of the group.
func (g *Group) Member(r int) (*Member, error) {
	const op = "Group.Member"
	if err := g.alive(op); err != nil {
		return nil, err
	}
	if r < 0 || r >= len(g.comms) {
		return nil, pkg.Errorf(op, ErrIndex, "rank %d of a group of %d", r, len(g.comms))
	}
	return &Member{g: g, rank: r}, nil
}

// Rank is the member's rank.
func (m *Member) Rank() int { return m.rank }

// Device is the member's device.
func (m *Member) Device() Device { return m.g.comms[m.rank].Device() }

// AllReduce is the reduction by op of every member's t, on this member's
// device.
func (m *Member) AllReduce(t *Tensor, op ReduceOp) (*Tensor, error) {
	return m.one("Member.AllReduce", t, func(s *step) error { return s.allReduce(op) })
}

// AllGather is every member's t, concatenated in rank order along dim d.
func (m *Member) AllGather(t *Tensor, d int) (*Tensor, error) {
	return m.one("Member.AllGather", t, func(s *step) error { return s.allGather(d) })
}

// ReduceScatter is this member's slice along dim d of the reduction by op
// of every member's t: the r-th of Size() equal parts, for rank r.
func (m *Member) ReduceScatter(t *Tensor, d int, op ReduceOp) (*Tensor, error) {
	return m.one("Member.ReduceScatter", t, func(s *step) error { return s.reduceScatter(d, op) })
}

// Broadcast is root's t on every member: on the others t gives the shape
// and dtype (its values are not read).
func (m *Member) Broadcast(t *Tensor, root int) (*Tensor, error) {
	return m.one("Member.Broadcast", t, func(s *step) error { return s.broadcast(root) })
}

// one runs a collective of one member.
func (m *Member) one(op string, t *Tensor, prepare func(*step) error) (*Tensor, error) {
	if err := m.g.alive(op); err != nil {
		return nil, err
	}
	s := &step{op: op, c: m.g.comms[m.rank], in: t}
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := prepare(s); err != nil {
		s.discard()
		return nil, err
	}
	if s.run != nil {
		if err := s.run(); err != nil {
			s.discard()
			return nil, pkg.Wrap(op, err)
		}
	}
	return s.finish()
}

// AllReduce is the reduction by op of the ranks' tensors, on every rank.
func (g *Group) AllReduce(ts []*Tensor, op ReduceOp) ([]*Tensor, error) {
	return g.all("Group.AllReduce", ts, -1, func(s *step) error { return s.allReduce(op) })
}

// AllGather is the ranks' tensors concatenated in rank order along dim d,
// on every rank.
func (g *Group) AllGather(ts []*Tensor, d int) ([]*Tensor, error) {
	return g.all("Group.AllGather", ts, -1, func(s *step) error { return s.allGather(d) })
}

// ReduceScatter reduces the ranks' tensors by op and gives rank r the
// r-th of Size() equal parts of the result along dim d, which the ranks
// divide.
func (g *Group) ReduceScatter(ts []*Tensor, d int, op ReduceOp) ([]*Tensor, error) {
	return g.all("Group.ReduceScatter", ts, -1, func(s *step) error { return s.reduceScatter(d, op) })
}

// Broadcast is root's tensor on every rank. The other ranks' entries of ts
// may be nil; those that are not must match root's shape and dtype, and
// their values are not read.
func (g *Group) Broadcast(ts []*Tensor, root int) ([]*Tensor, error) {
	const op = "Group.Broadcast"
	if err := g.alive(op); err != nil {
		return nil, err
	}
	if root < 0 || root >= len(g.comms) {
		return nil, pkg.Errorf(op, ErrIndex, "root %d of a group of %d", root, len(g.comms))
	}
	return g.all(op, ts, root, func(s *step) error { return s.broadcast(root) })
}

// all runs one collective over every rank: the checks of every rank's
// tensor first, then each rank's preparation (copies, outputs), then the
// communicators' calls (inside one group, or one goroutine per rank),
// then each rank's result.
func (g *Group) all(op string, ts []*Tensor, root int, prepare func(*step) error) ([]*Tensor, error) {
	if err := g.alive(op); err != nil {
		return nil, err
	}
	if len(ts) != len(g.comms) {
		return nil, pkg.Errorf(op, ErrArgument, "%d tensors for a group of %d ranks: want one per rank", len(ts), len(g.comms))
	}
	ref := root
	if ref < 0 {
		ref = 0
	}
	steps := make([]*step, len(ts))
	for r, t := range ts {
		s := &step{op: op, c: g.comms[r], in: t}
		if root >= 0 && r != root && t == nil {
			s.in, s.shapeOnly = nil, true
		}
		if !s.shapeOnly {
			if err := s.check(); err != nil {
				return nil, err
			}
		}
		steps[r] = s
	}
	want := ts[ref]
	if want == nil {
		return nil, pkg.Errorf(op, ErrArgument, "tensor %d is nil", ref)
	}
	for r, t := range ts {
		switch {
		case t == nil || r == ref:
		case t.DType() != want.DType():
			return nil, pkg.Errorf(op, ErrDType, "rank %d's tensor is %s, rank %d's %s: the ranks' tensors share a dtype", r, t.DType(), ref, want.DType())
		case !t.layout.Shape.Equal(want.layout.Shape):
			return nil, pkg.Errorf(op, ErrShape, "rank %d's tensor is %v, rank %d's %v: the ranks' tensors share a shape", r, t.layout.Shape, ref, want.layout.Shape)
		}
	}
	for _, s := range steps {
		if s.shapeOnly {
			s.shape, s.dtype = want.layout.Shape, want.DType()
		}
	}
	discard := func() {
		for _, s := range steps {
			s.discard()
		}
	}
	for _, s := range steps {
		if err := prepare(s); err != nil {
			discard()
			return nil, err
		}
	}
	if err := g.run(steps); err != nil {
		discard()
		return nil, pkg.Wrap(op, err)
	}
	out := make([]*Tensor, len(steps))
	for r, s := range steps {
		var err error
		if out[r], err = s.finish(); err != nil {
			for _, t := range out[:r] {
				t.Close()
			}
			for _, s := range steps[r+1:] {
				s.discard()
			}
			return nil, err
		}
	}
	return out, nil
}

// run makes every rank's call: inside the communicators' group when one
// goroutine may drive them all, else from one goroutine per rank.
func (g *Group) run(steps []*step) error {
	if steps[0].run == nil {
		return nil // empty tensors: nothing to move
	}
	if g.grouped != nil {
		return g.grouped(func() error {
			for _, s := range steps {
				if err := s.run(); err != nil {
					return err
				}
			}
			return nil
		})
	}
	errs := make([]error, len(steps))
	var wg sync.WaitGroup
	for r, s := range steps {
		wg.Go(func() { errs[r] = s.run() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// step is one rank's part of a collective: its checked input, the
// contiguous tensors the communicator reads and writes, and how the
// result is made from what it wrote.
type step struct {
	op        string
	c         Communicator
	in        *Tensor // the rank's tensor; nil on a broadcast's other ranks given none
	shapeOnly bool    // in is nil: shape and dtype are root's
	shape     Shape
	dtype     DType
	src, dst  *Tensor      // what the communicator reads and writes
	temps     []*Tensor    // intermediates to close
	run       func() error // the communicator's call; nil for empty tensors
	result    func() (*Tensor, error)
}

// check checks the rank's tensor: open, on the rank's device.
func (s *step) check() error {
	if err := s.in.alive(s.op); err != nil {
		return err
	}
	if s.in.Device() != s.c.Device() {
		return pkg.Errorf(s.op, ErrDevice, "rank %d's tensor is on %s, the rank on %s: move it first (ToDevice)", s.c.Rank(), s.in.Device(), s.c.Device())
	}
	s.shape, s.dtype = s.in.layout.Shape, s.in.DType()
	return nil
}

// temp keeps an intermediate for discard.
func (s *step) temp(t *Tensor) *Tensor {
	s.temps = append(s.temps, t)
	return t
}

// contiguous is the rank's tensor, contiguous.
func (s *step) contiguous() (*Tensor, error) {
	c, err := s.in.Contiguous()
	if err != nil {
		return nil, err
	}
	return s.temp(c), nil
}

// output is a fresh contiguous tensor on the rank's device.
func (s *step) output(shape Shape) (*Tensor, error) {
	t, err := newOutput(s.op, s.c.Device(), s.dtype, shape, s.in)
	if err != nil {
		return nil, err
	}
	return s.temp(t), nil
}

// discard closes what the step made.
func (s *step) discard() {
	for _, t := range s.temps {
		t.Close()
	}
	s.temps = nil
}

// finish makes the result and closes the intermediates (the result
// itself is kept).
func (s *step) finish() (*Tensor, error) {
	out, err := s.result()
	for _, t := range s.temps {
		if t != out {
			t.Close()
		}
	}
	s.temps = nil
	return out, err
}

// direct sets the result to the output the communicator writes.
func (s *step) direct() { s.result = func() (*Tensor, error) { return s.dst, nil } }

func (s *step) allReduce(op ReduceOp) error {
	if !op.valid() {
		return pkg.Errorf(s.op, ErrArgument, "%v is not a reduction: want ReduceSum, ReduceProd, ReduceMax, ReduceMin or ReduceAvg", op)
	}
	var err error
	if s.dst, err = s.output(s.shape); err != nil {
		return err
	}
	s.direct()
	if s.shape.Elems() == 0 {
		return nil
	}
	if s.src, err = s.contiguous(); err != nil {
		return err
	}
	s.run = func() error { return s.c.AllReduce(s.src, s.dst, op) }
	return nil
}

// allGather gathers into [ranks, shape...] and, for a dim past the first
// non-unit one, moves the ranks' axis next to dim d.
func (s *step) allGather(d int) error {
	d, err := dim(s.op, d, len(s.shape))
	if err != nil {
		return err
	}
	n := s.c.Size()
	out := s.shape.Clone()
	out[d] *= n
	if s.shape.Elems() == 0 {
		if s.dst, err = s.output(out); err != nil {
			return err
		}
		s.direct()
		return nil
	}
	if s.src, err = s.contiguous(); err != nil {
		return err
	}
	if leading(s.shape, d) == 1 {
		if s.dst, err = s.output(out); err != nil {
			return err
		}
		s.direct()
	} else {
		if s.dst, err = s.output(append(Shape{n}, s.shape...)); err != nil {
			return err
		}
		s.result = func() (*Tensor, error) {
			order := make([]int, 0, len(s.shape)+1)
			for i := 1; i <= d; i++ {
				order = append(order, i)
			}
			order = append(order, 0)
			for i := d + 1; i <= len(s.shape); i++ {
				order = append(order, i)
			}
			p, err := s.dst.Permute(order...)
			if err != nil {
				return nil, err
			}
			defer p.Close()
			return p.Reshape(out...)
		}
	}
	s.run = func() error { return s.c.AllGather(s.src, s.dst) }
	return nil
}

// reduceScatter, for a dim past the first non-unit one, first moves the
// ranks' parts of dim d to the front, so that each is contiguous.
func (s *step) reduceScatter(d int, op ReduceOp) error {
	if !op.valid() {
		return pkg.Errorf(s.op, ErrArgument, "%v is not a reduction: want ReduceSum, ReduceProd, ReduceMax, ReduceMin or ReduceAvg", op)
	}
	d, err := dim(s.op, d, len(s.shape))
	if err != nil {
		return err
	}
	n := s.c.Size()
	if s.shape[d]%n != 0 {
		return pkg.Errorf(s.op, ErrShape, "dim %d of %v has %d elements, which %d ranks do not divide", d, s.shape, s.shape[d], n)
	}
	part := s.shape.Clone()
	part[d] /= n
	if s.dst, err = s.output(part); err != nil {
		return err
	}
	s.direct()
	if s.shape.Elems() == 0 {
		return nil
	}
	if leading(s.shape, d) == 1 {
		if s.src, err = s.contiguous(); err != nil {
			return err
		}
	} else {
		// [..., n, D/n, ...] with the n axis first, contiguous.
		split := append(append(s.shape[:d:d].Clone(), n, part[d]), s.shape[d+1:]...)
		v, err := s.in.Reshape(split...)
		if err != nil {
			return err
		}
		s.temp(v)
		order := append([]int{d}, make([]int, 0, len(split)-1)...)
		for i := range split {
			if i != d {
				order = append(order, i)
			}
		}
		p, err := v.Permute(order...)
		if err != nil {
			return err
		}
		s.temp(p)
		if s.src, err = p.Copy(); err != nil {
			return err
		}
		s.temp(s.src)
	}
	s.run = func() error { return s.c.ReduceScatter(s.src, s.dst, op) }
	return nil
}

func (s *step) broadcast(root int) error {
	if root < 0 || root >= s.c.Size() {
		return pkg.Errorf(s.op, ErrIndex, "root %d of a group of %d", root, s.c.Size())
	}
	var err error
	if s.dst, err = s.output(s.shape); err != nil {
		return err
	}
	s.direct()
	if s.shape.Elems() == 0 {
		return nil
	}
	if s.c.Rank() == root {
		if s.src, err = s.contiguous(); err != nil {
			return err
		}
	}
	s.run = func() error { return s.c.Broadcast(s.src, s.dst, root) }
	return nil
}

// leading is the product of the dims before d: 1 when dim d's parts are
// each contiguous in a row-major tensor.
func leading(s Shape, d int) int {
	p := 1
	for _, x := range s[:d] {
		p *= x
	}
	return p
}
