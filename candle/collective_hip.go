package candle

import (
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/rccl"
)

// NewHIPGroup makes a group over GPUs with one RCCL communicator (NCCL on
// NVIDIA) per device, in one process (rccl.CommInitAll): rank r on
// devs[r]. Its collectives are queued on each device's stream, ordered
// with the device's ops, and one goroutine drives every rank inside one
// RCCL group; a Member's calls, for one goroutine per GPU, go outside any.
// Each GPU may appear once (NCCL takes one rank per GPU).
func NewHIPGroup(devs ...*HIPDevice) (*Group, error) {
	const op = "NewHIPGroup"
	if len(devs) == 0 {
		return nil, pkg.Errorf(op, ErrArgument, "no devices: a group has at least one rank")
	}
	seen := map[int]int{}
	hd := make([]*hip.Device, len(devs))
	for r, d := range devs {
		if d == nil {
			return nil, pkg.Errorf(op, ErrDevice, "device %d is nil", r)
		}
		if q, ok := seen[d.ordinal]; ok {
			return nil, pkg.Errorf(op, ErrDevice, "%s holds ranks %d and %d: NCCL takes one rank per GPU", d, q, r)
		}
		seen[d.ordinal] = r
		hd[r] = d.dev
	}
	cs, err := rccl.CommInitAll(hd...)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	comms := make([]Communicator, len(cs))
	for r, c := range cs {
		comms[r] = &rcclComm{c: c, dev: devs[r], rank: r, size: len(cs)}
	}
	g, err := NewGroup(comms...)
	if err != nil {
		rccl.CloseAll(cs...)
		return nil, err
	}
	g.closeAll = func() error { return rccl.CloseAll(cs...) }
	return g, nil
}

// rcclComm is a rank of an RCCL communicator on a HIP device, queuing on
// the device's stream.
type rcclComm struct {
	c          *rccl.Comm
	dev        *HIPDevice
	rank, size int
}

func (c *rcclComm) Rank() int      { return c.rank }
func (c *rcclComm) Size() int      { return c.size }
func (c *rcclComm) Device() Device { return c.dev }
func (c *rcclComm) Close() error   { return c.c.Close() }

// Abort stops the communicator's work, a collective that waits for its
// peers included (ncclCommAbort).
func (c *rcclComm) Abort() error { return c.c.Abort() }

// Grouped runs the calls of several ranks inside one RCCL group.
func (c *rcclComm) Grouped(calls func() error) error { return rccl.Group(calls) }

func (c *rcclComm) AllReduce(src, dst *Tensor, op ReduceOp) error {
	return c.c.AllReduce(buffer(src), buffer(dst), src.Elems(), rcclType(src.DType()), rcclOps[op], c.dev.stream)
}

func (c *rcclComm) AllGather(src, dst *Tensor) error {
	return c.c.AllGather(buffer(src), buffer(dst), src.Elems(), rcclType(src.DType()), c.dev.stream)
}

func (c *rcclComm) ReduceScatter(src, dst *Tensor, op ReduceOp) error {
	return c.c.ReduceScatter(buffer(src), buffer(dst), dst.Elems(), rcclType(src.DType()), rcclOps[op], c.dev.stream)
}

func (c *rcclComm) Broadcast(src, dst *Tensor, root int) error {
	return c.c.Broadcast(buffer(src), buffer(dst), dst.Elems(), rcclType(dst.DType()), root, c.dev.stream)
}

var rcclOps = [...]rccl.Op{ReduceSum: rccl.OpSum, ReduceProd: rccl.OpProd, ReduceMax: rccl.OpMax, ReduceMin: rccl.OpMin, ReduceAvg: rccl.OpAvg}

// rcclType is a dtype's RCCL data type: candle has no dtype RCCL lacks.
func rcclType(dt DType) rccl.DataType {
	switch dt {
	case F16:
		return rccl.DataTypeFloat16
	case BF16:
		return rccl.DataTypeBfloat16
	case F64:
		return rccl.DataTypeFloat64
	case U8:
		return rccl.DataTypeUint8
	case U32:
		return rccl.DataTypeUint32
	case I64:
		return rccl.DataTypeInt64
	}
	return rccl.DataTypeFloat32
}

// buffer is a contiguous tensor's elements as a view of its storage's
// device buffer; nil for nil.
func buffer(t *Tensor) *hip.Buffer {
	if t == nil {
		return nil
	}
	size := t.DType().Size()
	b, _ := t.st.mem.(*block).buf.Slice(t.layout.Offset*size, t.Elems()*size)
	return b
}
