package candle

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tier 0: the collectives on the CPU, over an in-process communicator:
// one goroutine per rank, meeting at a barrier per call, each rank on a
// CPU device of its own (cpuRank). The suite, runGroupSuite, runs on GPUs
// in tier 2 too (gpu_collective_test.go), against the same float64
// references.

// cpuGroup is a group of n ranks on CPU devices of their own.
func cpuGroup(t *testing.T, n int) (*Group, *cpuClique) {
	t.Helper()
	g, err := NewCPUGroup(n)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, g.Close()) })
	return g, g.comms[0].(*cpuComm).q
}

// groupedComm is a cpuComm that one goroutine may drive inside Grouped,
// as NCCL's ranks in a group: the calls made inside are recorded, and run
// together (one goroutine per rank) when it ends.
type groupedComm struct {
	*cpuComm
	g *fakeGrouping
}

// fakeGrouping is what a grouped clique's ranks share.
type fakeGrouping struct {
	open    bool
	pending []func() error
	groups  int // Grouped calls that ran calls
}

func (c *groupedComm) Grouped(calls func() error) error {
	c.g.open, c.g.pending = true, nil
	err := calls()
	c.g.open = false
	if err != nil {
		return err
	}
	c.g.groups++
	errs := make([]error, len(c.g.pending))
	var wg sync.WaitGroup
	for i, f := range c.g.pending {
		wg.Go(func() { errs[i] = f() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// later runs f now outside a group, at the group's end inside one.
func (c *groupedComm) later(f func() error) error {
	if !c.g.open {
		return f()
	}
	c.g.pending = append(c.g.pending, f)
	return nil
}

func (c *groupedComm) AllReduce(src, dst *Tensor, op ReduceOp) error {
	return c.later(func() error { return c.cpuComm.AllReduce(src, dst, op) })
}

func (c *groupedComm) AllGather(src, dst *Tensor) error {
	return c.later(func() error { return c.cpuComm.AllGather(src, dst) })
}

func (c *groupedComm) ReduceScatter(src, dst *Tensor, op ReduceOp) error {
	return c.later(func() error { return c.cpuComm.ReduceScatter(src, dst, op) })
}

func (c *groupedComm) Broadcast(src, dst *Tensor, root int) error {
	return c.later(func() error { return c.cpuComm.Broadcast(src, dst, root) })
}

// TestCollectivesGrouped: a group whose communicators are Grouped drives
// every rank from one goroutine, inside one group per collective (an
// in-process communicator that blocks each call until all ranks are in
// would hang otherwise).
func TestCollectivesGrouped(t *testing.T) {
	g, _ := cpuGroup(t, 3)
	grouping := &fakeGrouping{}
	comms := make([]Communicator, len(g.comms))
	for r, c := range g.comms {
		comms[r] = &groupedComm{cpuComm: c.(*cpuComm), g: grouping}
	}
	gg, err := NewGroup(comms...)
	require.NoError(t, err)
	require.NotNil(t, gg.grouped)
	runGroupSuite(t, gg, rand.New(rand.NewPCG(7, 7)))
	assert.Positive(t, grouping.groups)
}

func TestCollectivesCPU(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("%d ranks", n), func(t *testing.T) {
			g, _ := cpuGroup(t, n)
			runGroupSuite(t, g, rand.New(rand.NewPCG(uint64(n), 9)))
		})
	}
}

// collectiveValues are count random small whole numbers for rank's
// operand of op, exact in every dtype, whose sums and products over up to
// 8 ranks stay exact too (for a product, rank 0 holds the large factor
// and the others ±1); never all zero.
func collectiveValues(rng *rand.Rand, dt DType, op ReduceOp, rank, count int) []float64 {
	signed := dt != U8 && dt != U32
	out := make([]float64, count)
	for i := range out {
		switch {
		case op == ReduceProd && rank > 0 && signed:
			out[i] = float64(1 - 2*rng.IntN(2))
		case op == ReduceProd && rank > 0:
			out[i] = 1
		case signed:
			out[i] = float64(rng.IntN(9) - 4)
		default:
			out[i] = float64(rng.IntN(9))
		}
	}
	if count > 0 {
		out[0] = float64(rank + 1)
	}
	return out
}

// collectiveTolerance is how far a result may be from its float64
// reference, relative: exact but for a float average, which NCCL makes by
// scaling each operand, rounding in the dtype.
func collectiveTolerance(dt DType, op ReduceOp) float64 {
	if op != ReduceAvg || dt.IsInt() {
		return 0
	}
	switch dt {
	case F16:
		return 4 * math.Pow(2, -10)
	case BF16:
		return 4 * math.Pow(2, -7)
	case F32:
		return 4 * math.Pow(2, -23)
	}
	return 4 * math.Pow(2, -52)
}

func requireNear(t *testing.T, want, got []float64, tol float64, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		if math.Abs(got[i]-want[i]) > tol*math.Max(1, math.Abs(want[i])) {
			t.Fatalf("%s: element %d is %v, want %v (of %v)", msg, i, got[i], want[i], want)
		}
	}
}

// reference is the host tensor of float64 values of a shape, for the
// references' shape ops.
func reference(t *testing.T, vals []float64, shape Shape) *Tensor {
	return tensorOf(t, CPU(), F64, vals, shape...)
}

// runGroupSuite runs every collective of a group on every dtype, with
// values checked on every rank against float64 references: each op, dims
// first, inner and last, strided and empty inputs, in-group and member
// calls.
func runGroupSuite(t *testing.T, g *Group, rng *rand.Rand) {
	n := g.Size()
	devs := g.Devices()
	shape := Shape{2, 3, 5}
	inputs := func(dt DType, op ReduceOp, shape Shape) ([]*Tensor, [][]float64) {
		ts := make([]*Tensor, n)
		vals := make([][]float64, n)
		for r := range n {
			vals[r] = collectiveValues(rng, dt, op, r, shape.Elems())
			ts[r] = tensorOf(t, devs[r], dt, vals[r], shape...)
		}
		return ts, vals
	}
	check := func(outs []*Tensor, want func(r int) []float64, shape Shape, tol float64, msg string) {
		t.Helper()
		require.Len(t, outs, n)
		for r, o := range outs {
			t.Cleanup(func() { o.Close() })
			assert.Equal(t, devs[r], o.Device(), msg)
			require.Equal(t, shape, o.Shape(), msg)
			requireNear(t, want(r), values(t, o), tol, fmt.Sprintf("%s, rank %d", msg, r))
		}
	}
	t.Run("AllReduce", func(t *testing.T) {
		for _, dt := range DTypes() {
			for op := ReduceSum; op <= ReduceAvg; op++ {
				ts, vals := inputs(dt, op, shape)
				outs, err := g.AllReduce(ts, op)
				require.NoError(t, err, "%s %s", dt, op)
				want := reduceValues(dt, op, vals)
				check(outs, func(int) []float64 { return want }, shape, collectiveTolerance(dt, op), fmt.Sprintf("%s %s", dt, op))
			}
		}
	})
	t.Run("AllReduceStrided", func(t *testing.T) {
		// Each rank's input is a transposed view.
		ts := make([]*Tensor, n)
		var vals [][]float64
		for r := range n {
			x := tensorOf(t, devs[r], F32, collectiveValues(rng, F32, ReduceSum, r, 15), 5, 3)
			tr, err := x.T()
			require.NoError(t, err)
			t.Cleanup(func() { tr.Close() })
			require.False(t, tr.IsContiguous())
			ts[r] = tr
			vals = append(vals, values(t, tr))
		}
		outs, err := g.AllReduce(ts, ReduceMax)
		require.NoError(t, err)
		want := reduceValues(F32, ReduceMax, vals)
		check(outs, func(int) []float64 { return want }, Shape{3, 5}, 0, "transposed")
	})
	t.Run("AllGather", func(t *testing.T) {
		for _, dt := range DTypes() {
			for _, d := range []int{0, 1, -1} {
				ts, vals := inputs(dt, ReduceSum, shape)
				outs, err := g.AllGather(ts, d)
				require.NoError(t, err, "%s dim %d", dt, d)
				refs := make([]*Tensor, n)
				for r := range n {
					refs[r] = reference(t, vals[r], shape)
				}
				cat, err := Cat(refs, d)
				require.NoError(t, err)
				t.Cleanup(func() { cat.Close() })
				want := values(t, cat)
				check(outs, func(int) []float64 { return want }, cat.Shape(), 0, fmt.Sprintf("%s dim %d", dt, d))
			}
		}
	})
	t.Run("ReduceScatter", func(t *testing.T) {
		sshape := Shape{2 * n, 3, 2 * n}
		for _, dt := range DTypes() {
			for _, c := range []struct {
				d  int
				op ReduceOp
			}{{0, ReduceSum}, {2, ReduceSum}, {-1, ReduceMax}, {0, ReduceAvg}, {2, ReduceMin}} {
				ts, vals := inputs(dt, c.op, sshape)
				outs, err := g.ReduceScatter(ts, c.d, c.op)
				require.NoError(t, err, "%s dim %d %s", dt, c.d, c.op)
				full := reference(t, reduceValues(dt, c.op, vals), sshape)
				d, _ := dim("", c.d, 3)
				part := sshape.Clone()
				part[d] /= n
				check(outs, func(r int) []float64 {
					p, err := full.Narrow(d, r*part[d], part[d])
					require.NoError(t, err)
					defer p.Close()
					return values(t, p)
				}, part, collectiveTolerance(dt, c.op), fmt.Sprintf("%s dim %d %s", dt, c.d, c.op))
			}
		}
	})
	t.Run("Broadcast", func(t *testing.T) {
		for _, dt := range DTypes() {
			root := n - 1
			ts, vals := inputs(dt, ReduceSum, shape)
			outs, err := g.Broadcast(ts, root)
			require.NoError(t, err, "%s", dt)
			check(outs, func(int) []float64 { return vals[root] }, shape, 0, dt.String())
			// The other ranks may give nothing.
			only := make([]*Tensor, n)
			only[0] = ts[0]
			outs, err = g.Broadcast(only, 0)
			require.NoError(t, err, "%s", dt)
			check(outs, func(int) []float64 { return vals[0] }, shape, 0, dt.String()+" from rank 0 alone")
		}
	})
	t.Run("Empty", func(t *testing.T) {
		empty := Shape{0, 2 * n}
		ts, _ := inputs(F32, ReduceSum, empty)
		outs, err := g.AllReduce(ts, ReduceSum)
		require.NoError(t, err)
		check(outs, func(int) []float64 { return []float64{} }, empty, 0, "all-reduce")
		outs, err = g.AllGather(ts, 1)
		require.NoError(t, err)
		check(outs, func(int) []float64 { return []float64{} }, Shape{0, 2 * n * n}, 0, "all-gather")
		outs, err = g.ReduceScatter(ts, 1, ReduceSum)
		require.NoError(t, err)
		check(outs, func(int) []float64 { return []float64{} }, Shape{0, 2}, 0, "reduce-scatter")
		outs, err = g.Broadcast(ts, 0)
		require.NoError(t, err)
		check(outs, func(int) []float64 { return []float64{} }, empty, 0, "broadcast")
	})
	t.Run("Members", func(t *testing.T) {
		// One goroutine per rank, each with its member.
		ts, vals := inputs(BF16, ReduceSum, shape)
		outs := make([][]*Tensor, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			wg.Go(func() {
				errs[r] = func() error {
					m, err := g.Member(r)
					if err != nil {
						return err
					}
					if m.Rank() != r || m.Device() != devs[r] {
						return fmt.Errorf("member %d is rank %d on %s", r, m.Rank(), m.Device())
					}
					sum, err := m.AllReduce(ts[r], ReduceSum)
					if err != nil {
						return err
					}
					gathered, err := m.AllGather(ts[r], 1)
					if err != nil {
						return err
					}
					bc, err := m.Broadcast(ts[r], 0)
					if err != nil {
						return err
					}
					outs[r] = []*Tensor{sum, gathered, bc}
					return nil
				}()
			})
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		refs := make([]*Tensor, n)
		for r := range n {
			refs[r] = reference(t, vals[r], shape)
		}
		cat, err := Cat(refs, 1)
		require.NoError(t, err)
		t.Cleanup(func() { cat.Close() })
		sum := reduceValues(BF16, ReduceSum, vals)
		gathered := values(t, cat)
		for r := range n {
			for _, o := range outs[r] {
				t.Cleanup(func() { o.Close() })
			}
			requireNear(t, sum, values(t, outs[r][0]), 0, fmt.Sprintf("member %d's all-reduce", r))
			requireNear(t, gathered, values(t, outs[r][1]), 0, fmt.Sprintf("member %d's all-gather", r))
			requireNear(t, vals[0], values(t, outs[r][2]), 0, fmt.Sprintf("member %d's broadcast", r))
		}
	})
}

func TestGroupErrors(t *testing.T) {
	g, q := cpuGroup(t, 2)
	devs := g.Devices()
	a := tensorOf(t, devs[0], F32, []float64{1, 2, 3, 4}, 2, 2)
	b := tensorOf(t, devs[1], F32, []float64{1, 2, 3, 4}, 2, 2)
	for _, c := range []struct {
		name string
		err  error
		kind error
		want string
	}{
		{"count", second(g.AllReduce([]*Tensor{a}, ReduceSum)), ErrArgument, "1 tensors for a group of 2 ranks"},
		{"nil", second(g.AllReduce([]*Tensor{a, nil}, ReduceSum)), ErrArgument, "nil tensor"},
		{"device", second(g.AllReduce([]*Tensor{a, a}, ReduceSum)), ErrDevice, "rank 1's tensor is on cpu/rank0, the rank on cpu/rank1"},
		{"dtype", second(g.AllReduce([]*Tensor{a, tensorOf(t, devs[1], F16, []float64{1, 2, 3, 4}, 2, 2)}, ReduceSum)), ErrDType, "rank 1's tensor is f16, rank 0's f32"},
		{"shape", second(g.AllGather([]*Tensor{a, tensorOf(t, devs[1], F32, []float64{1, 2, 3, 4}, 4)}, 0)), ErrShape, "rank 1's tensor is [4], rank 0's [2 2]"},
		{"op", second(g.AllReduce([]*Tensor{a, b}, ReduceOp(7))), ErrArgument, "ReduceOp(7) is not a reduction"},
		{"dim", second(g.AllGather([]*Tensor{a, b}, 2)), ErrShape, "dim 2 is out of range for 2 dims"},
		{"divide", second(g.ReduceScatter([]*Tensor{tensorOf(t, devs[0], F32, []float64{1, 2, 3}, 3), tensorOf(t, devs[1], F32, []float64{1, 2, 3}, 3)}, 0, ReduceSum)), ErrShape, "which 2 ranks do not divide"},
		{"root", second(g.Broadcast([]*Tensor{a, b}, 2)), ErrIndex, "root 2 of a group of 2"},
		{"root's tensor", second(g.Broadcast([]*Tensor{nil, b}, 0)), ErrArgument, "nil tensor"},
		{"other's shape", second(g.Broadcast([]*Tensor{a, tensorOf(t, devs[1], F32, []float64{1, 2}, 2)}, 0)), ErrShape, "rank 1's tensor is [2]"},
		{"member", second(g.Member(2)), ErrIndex, "rank 2 of a group of 2"},
	} {
		require.Error(t, c.err, c.name)
		assert.ErrorIs(t, c.err, c.kind, c.name)
		assert.ErrorContains(t, c.err, c.want, c.name)
	}
	closed := tensorOf(t, devs[1], F32, []float64{1, 2, 3, 4}, 2, 2)
	require.NoError(t, closed.Close())
	_, err := g.AllReduce([]*Tensor{a, closed}, ReduceSum)
	assert.ErrorIs(t, err, ErrClosed)

	// A communicator's failure is the device's, with its cause.
	broken := errors.New("the network is down")
	q.fail = broken
	_, err = g.AllReduce([]*Tensor{a, b}, ReduceSum)
	assert.ErrorIs(t, err, broken)
	assert.ErrorIs(t, err, ErrDevice)
	assert.ErrorContains(t, err, "candle: Group.AllReduce: ")
	q.fail = nil

	m, err := g.Member(0)
	require.NoError(t, err)
	require.NoError(t, g.Close())
	require.NoError(t, g.Close(), "closing twice does nothing")
	_, err = g.AllReduce([]*Tensor{a, b}, ReduceSum)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = m.AllReduce(a, ReduceSum)
	assert.ErrorIs(t, err, ErrClosed)
	for _, c := range g.comms {
		assert.True(t, c.(*cpuComm).closed, "the group closes its communicators")
	}
}

func TestNewGroupErrors(t *testing.T) {
	q := newCPUClique(2)
	d0 := &cpuRank{CPUDevice: CPU(), name: "cpu/rank0"}
	d1 := &cpuRank{CPUDevice: CPU(), name: "cpu/rank1"}
	for _, c := range []struct {
		name  string
		comms []Communicator
		kind  error
		want  string
	}{
		{"empty", nil, ErrArgument, "no communicators"},
		{"nil", []Communicator{&cpuComm{q: q, rank: 0, dev: d0}, nil}, ErrArgument, "communicator 1 is nil"},
		{"order", []Communicator{&cpuComm{q: q, rank: 1, dev: d1}, &cpuComm{q: q, rank: 0, dev: d0}}, ErrArgument, "communicator 0 is rank 1 of 2: want rank 0 of 2"},
		{"size", []Communicator{&cpuComm{q: q, rank: 0, dev: d0}}, ErrArgument, "rank 0 of 2: want rank 0 of 1"},
		{"same device", []Communicator{&cpuComm{q: q, rank: 0, dev: d0}, &cpuComm{q: q, rank: 1, dev: d0}}, ErrDevice, "cpu/rank0 holds ranks 0 and 1: each rank needs its own device"},
	} {
		_, err := NewGroup(c.comms...)
		assert.ErrorIs(t, err, c.kind, c.name)
		assert.ErrorContains(t, err, c.want, c.name)
	}
	// NewHIPGroup checks its devices before any library call.
	_, err := NewHIPGroup()
	assert.ErrorIs(t, err, ErrArgument)
	_, err = NewHIPGroup(&HIPDevice{ordinal: 0}, nil)
	assert.ErrorContains(t, err, "device 1 is nil")
	_, err = NewHIPGroup(&HIPDevice{ordinal: 0}, &HIPDevice{ordinal: 1}, &HIPDevice{ordinal: 0})
	assert.ErrorIs(t, err, ErrDevice)
	assert.ErrorContains(t, err, "hip:0 holds ranks 0 and 2: NCCL takes one rank per GPU")
	var g *Group
	_, err = g.AllReduce(nil, ReduceSum)
	assert.ErrorIs(t, err, ErrArgument)
	assert.NoError(t, g.Close())
}

func TestReduceOpNames(t *testing.T) {
	assert.Equal(t, []string{"sum", "prod", "max", "min", "avg"},
		[]string{ReduceSum.String(), ReduceProd.String(), ReduceMax.String(), ReduceMin.String(), ReduceAvg.String()})
	assert.Equal(t, "ReduceOp(-1)", ReduceOp(-1).String())
	for op := ReduceSum; op <= ReduceAvg; op++ {
		assert.Equal(t, op.String(), strings.ToLower(rcclOps[op].String()[len("nccl"):]), "the RCCL op of %s", op)
	}
	for _, dt := range DTypes() {
		assert.Equal(t, dt.Size(), rcclType(dt).Size(), "the RCCL type of %s", dt)
	}
}

func second[T any](_ T, err error) error { return err }

// TestGroupAbort: a member waiting in a collective for a peer that never
// comes returns once the group is aborted, and every later call fails.
func TestGroupAbort(t *testing.T) {
	g, _ := cpuGroup(t, 3)
	devs := g.Devices()
	assert.Equal(t, "cpu/rank2", devs[2].String())
	done := make(chan error, 2)
	for r := range 2 { // rank 2 never calls
		m, err := g.Member(r)
		require.NoError(t, err)
		x := tensorOf(t, devs[r], F32, []float64{1, 2}, 2)
		go func() {
			_, err := m.AllReduce(x, ReduceSum)
			done <- err
		}()
	}
	require.NoError(t, g.Abort())
	for range 2 {
		err := <-done
		assert.ErrorIs(t, err, ErrClosed)
		assert.ErrorContains(t, err, "aborted")
	}
	require.NoError(t, g.Abort(), "aborting twice does nothing")
	_, err := g.AllReduce([]*Tensor{tensorOf(t, devs[0], F32, []float64{1}, 1), tensorOf(t, devs[1], F32, []float64{1}, 1), tensorOf(t, devs[2], F32, []float64{1}, 1)}, ReduceSum)
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorContains(t, err, "use of an aborted group")

	_, err = NewCPUGroup(0)
	assert.ErrorIs(t, err, ErrArgument)
	// A group of communicators that cannot abort says so.
	one, _ := cpuGroup(t, 1)
	g2, err := NewGroup(&plainComm{one.comms[0]})
	require.NoError(t, err)
	err = g2.Abort()
	assert.ErrorIs(t, err, ErrUnsupported)
	assert.ErrorContains(t, err, "rank 0's communicator (*candle.plainComm) cannot abort its work")
	var nilGroup *Group
	assert.ErrorIs(t, nilGroup.Abort(), ErrArgument)
}

// plainComm hides a communicator's Abort.
type plainComm struct{ Communicator }

// TestCPUGroupDevices: a CPU group's ranks are devices of their own that
// every op takes, random numbers included, and tensors move between them.
func TestCPUGroupDevices(t *testing.T) {
	g, _ := cpuGroup(t, 2)
	devs := g.Devices()
	assert.Equal(t, []string{"cpu/rank0", "cpu/rank1"}, []string{devs[0].String(), devs[1].String()})
	x, err := RandNormal(devs[0], F32, 0, 1, 3, 4)
	require.NoError(t, err)
	defer x.Close()
	y, err := x.ToDevice(devs[1])
	require.NoError(t, err)
	defer y.Close()
	assert.Equal(t, devs[1], y.Device())
	assert.Equal(t, values(t, x), values(t, y))
}
