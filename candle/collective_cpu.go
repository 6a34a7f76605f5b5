package candle

import (
	"fmt"
	"math"
	"slices"
	"sync"
)

// NewCPUGroup makes a group of n ranks on the CPU, in this process: each
// rank a CPU device of its own ("cpu/rank0", "cpu/rank1", ...; Devices
// lists them), its collectives done by the goroutines of the ranks
// meeting at one barrier per call. It runs any tensor-parallel code on a
// machine without GPUs: one goroutine per rank, as on GPUs, with the
// Group's or the Members' collectives. A rank's call blocks until every
// rank has made its own, so one goroutine cannot drive two ranks through
// Members; the Group's collectives run one goroutine per rank themselves.
// Values are combined in float64, in rank order, and rounded once to the
// dtype: a float sum is as close to exact as its dtype holds, and the same
// on every run.
func NewCPUGroup(n int) (*Group, error) {
	const op = "NewCPUGroup"
	if n < 1 {
		return nil, pkg.Errorf(op, ErrArgument, "%d ranks: a group has at least one", n)
	}
	q := newCPUClique(n)
	comms := make([]Communicator, n)
	for r := range n {
		comms[r] = &cpuComm{q: q, rank: r, dev: &cpuRank{CPUDevice: CPU(), name: fmt.Sprintf("cpu/rank%d", r)}}
	}
	return NewGroup(comms...)
}

// cpuRank is the CPU under another name: a device of its own for one rank
// of a CPU group.
type cpuRank struct {
	*CPUDevice
	name string
}

func (d *cpuRank) String() string { return d.name }

// cpuClique is what the ranks of a CPU group share: each call waits until
// every rank has brought its operand, then one combined result serves
// them all.
type cpuClique struct {
	n       int
	mu      sync.Mutex
	cond    *sync.Cond
	gen     int
	in      [][]float64
	count   int
	out     []float64
	fail    error // every call's error, when set (a broken link, in tests)
	aborted error // set by Abort: every call, waiting or to come, fails
}

func newCPUClique(n int) *cpuClique {
	q := &cpuClique{n: n, in: make([][]float64, n)}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// exchange brings rank's operand and returns the combination of every
// rank's, or the abort's error.
func (q *cpuClique) exchange(rank int, vals []float64, combine func([][]float64) []float64) ([]float64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.aborted != nil {
		return nil, q.aborted
	}
	gen := q.gen
	q.in[rank] = vals
	if q.count++; q.count == q.n {
		q.out = combine(q.in)
		q.in, q.count = make([][]float64, q.n), 0
		q.gen++
		q.cond.Broadcast()
	}
	for q.gen == gen && q.aborted == nil {
		q.cond.Wait()
	}
	if q.gen == gen {
		return nil, q.aborted
	}
	return q.out, nil
}

// abort fails every call, those waiting included.
func (q *cpuClique) abort() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.aborted == nil {
		q.aborted = pkg.Errorf("Group.Abort", ErrClosed, "the group was aborted")
		q.cond.Broadcast()
	}
}

// cpuComm is one rank of a cpuClique.
type cpuComm struct {
	q      *cpuClique
	rank   int
	dev    Device
	closed bool
}

func (c *cpuComm) Rank() int      { return c.rank }
func (c *cpuComm) Size() int      { return c.q.n }
func (c *cpuComm) Device() Device { return c.dev }
func (c *cpuComm) Close() error   { c.closed = true; return nil }

// Abort fails the calls of every rank of the clique, waiting or to come.
func (c *cpuComm) Abort() error { c.q.abort(); return nil }

// read is a tensor's elements as float64.
func (c *cpuComm) read(t *Tensor) ([]float64, error) {
	f, err := t.ToDType(F64)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ToSlice[float64](f)
}

// write converts vals to dst's dtype into dst, as a GPU's result lands in
// place.
func (c *cpuComm) write(dst *Tensor, vals []float64) error {
	f, err := FromSlice(dst.Device(), vals, dst.layout.Shape...)
	if err != nil {
		return err
	}
	defer f.Close()
	v, err := f.ToDType(dst.DType())
	if err != nil {
		return err
	}
	defer v.Close()
	return dst.st.dev.backend().copy(v.v(), dst.v())
}

func (c *cpuComm) call(src, dst *Tensor, combine func([][]float64) []float64, part func([]float64) []float64) error {
	if c.q.fail != nil {
		return c.q.fail
	}
	if dst.Device() != c.dev || src != nil && (src.Device() != c.dev || !src.IsContiguous()) || !dst.IsContiguous() {
		return pkg.Errorf("cpuComm", ErrDevice, "rank %d was given tensors off its device or strided", c.rank)
	}
	var vals []float64
	if src != nil {
		var err error
		if vals, err = c.read(src); err != nil {
			return err
		}
	}
	all, err := c.q.exchange(c.rank, vals, combine)
	if err != nil {
		return err
	}
	return c.write(dst, part(all))
}

func whole(v []float64) []float64 { return v }

func (c *cpuComm) AllReduce(src, dst *Tensor, op ReduceOp) error {
	return c.call(src, dst, func(in [][]float64) []float64 { return reduceValues(src.DType(), op, in) }, whole)
}

func (c *cpuComm) AllGather(src, dst *Tensor) error {
	return c.call(src, dst, func(in [][]float64) []float64 { return slices.Concat(in...) }, whole)
}

func (c *cpuComm) ReduceScatter(src, dst *Tensor, op ReduceOp) error {
	n := dst.Elems()
	return c.call(src, dst, func(in [][]float64) []float64 { return reduceValues(src.DType(), op, in) },
		func(all []float64) []float64 { return all[c.rank*n : (c.rank+1)*n] })
}

func (c *cpuComm) Broadcast(src, dst *Tensor, root int) error {
	return c.call(src, dst, func(in [][]float64) []float64 { return in[root] }, whole)
}

// reduceValues is the reduction by op of each element over the ranks'
// operands, in float64 and rank order; an integer average is truncated,
// as NCCL divides.
func reduceValues(dt DType, op ReduceOp, ops [][]float64) []float64 {
	out := slices.Clone(ops[0])
	for _, v := range ops[1:] {
		for i := range out {
			switch op {
			case ReduceSum, ReduceAvg:
				out[i] += v[i]
			case ReduceProd:
				out[i] *= v[i]
			case ReduceMax:
				out[i] = max(out[i], v[i])
			case ReduceMin:
				out[i] = min(out[i], v[i])
			}
		}
	}
	if op == ReduceAvg {
		for i := range out {
			if out[i] /= float64(len(ops)); dt.IsInt() {
				out[i] = math.Trunc(out[i])
			}
		}
	}
	return out
}
