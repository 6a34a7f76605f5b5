package rccl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
)

// The suite of collectives on real buffers with values checked, for every
// data type and op, run against the fake libraries in tier 0 (fake_test.go:
// two ranks on AMD, one through the NVIDIA translation) and on GPUs in
// tier 2 (gpu_test.go: one rank per GPU). One goroutine drives every rank,
// inside groups.

// env is a communicator over devs: comms[i] on devs[i], queuing on
// streams[i].
type env struct {
	devs    []*hip.Device
	streams []*hip.Stream
	comms   []*Comm
	rng     *rand.Rand
}

func (e *env) n() int { return len(e.comms) }

// dataTypes are the types the suite checks.
var dataTypes = []DataType{DataTypeInt8, DataTypeUint8, DataTypeInt32, DataTypeUint32, DataTypeInt64, DataTypeUint64,
	DataTypeFloat16, DataTypeBfloat16, DataTypeFloat32, DataTypeFloat64}

func signed(t DataType) bool {
	return t != DataTypeUint8 && t != DataTypeUint32 && t != DataTypeUint64
}

func integer(t DataType) bool { return t <= DataTypeUint64 }

// values are count random elements for rank's operand of op: small whole
// numbers, exact in every type, whose sums over up to 8 ranks fit in int8,
// and whose products too (rank 0 holds the large factor, the others ±1);
// never all zero.
func (e *env) values(t DataType, o Op, rank, count int) []float64 {
	out := make([]float64, count)
	for i := range out {
		switch {
		case o == OpProd && rank > 0 && signed(t):
			out[i] = float64(1 - 2*e.rng.IntN(2))
		case o == OpProd && rank > 0:
			out[i] = 1
		case signed(t):
			out[i] = float64(e.rng.IntN(9) - 4)
		default:
			out[i] = float64(e.rng.IntN(9))
		}
	}
	out[0] = float64(rank + 1)
	return out
}

// encode writes exact values as elements of t.
func encode(t DataType, vals []float64) []byte {
	b := make([]byte, len(vals)*t.Size())
	for i, v := range vals {
		p := b[i*t.Size():]
		switch t {
		case DataTypeInt8, DataTypeUint8:
			p[0] = byte(int8(v))
			if t == DataTypeUint8 {
				p[0] = uint8(v)
			}
		case DataTypeInt32:
			binary.LittleEndian.PutUint32(p, uint32(int32(v)))
		case DataTypeUint32:
			binary.LittleEndian.PutUint32(p, uint32(v))
		case DataTypeInt64:
			binary.LittleEndian.PutUint64(p, uint64(int64(v)))
		case DataTypeUint64:
			binary.LittleEndian.PutUint64(p, uint64(v))
		case DataTypeFloat16:
			binary.LittleEndian.PutUint16(p, uint16(hip.HalfFromFloat32(float32(v))))
		case DataTypeBfloat16:
			binary.LittleEndian.PutUint16(p, uint16(hip.BFloat16FromFloat32(float32(v))))
		case DataTypeFloat32:
			binary.LittleEndian.PutUint32(p, math.Float32bits(float32(v)))
		case DataTypeFloat64:
			binary.LittleEndian.PutUint64(p, math.Float64bits(v))
		}
	}
	return b
}

// decode reads elements of t.
func decode(t DataType, b []byte) []float64 {
	out := make([]float64, len(b)/t.Size())
	for i := range out {
		p := b[i*t.Size():]
		switch t {
		case DataTypeInt8:
			out[i] = float64(int8(p[0]))
		case DataTypeUint8:
			out[i] = float64(p[0])
		case DataTypeInt32:
			out[i] = float64(int32(binary.LittleEndian.Uint32(p)))
		case DataTypeUint32:
			out[i] = float64(binary.LittleEndian.Uint32(p))
		case DataTypeInt64:
			out[i] = float64(int64(binary.LittleEndian.Uint64(p)))
		case DataTypeUint64:
			out[i] = float64(binary.LittleEndian.Uint64(p))
		case DataTypeFloat16:
			out[i] = float64(hip.Half(binary.LittleEndian.Uint16(p)).Float32())
		case DataTypeBfloat16:
			out[i] = float64(hip.BFloat16(binary.LittleEndian.Uint16(p)).Float32())
		case DataTypeFloat32:
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
		case DataTypeFloat64:
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(p))
		}
	}
	return out
}

// reduce is the reduction by o of each element over the ranks' operands,
// in float64; an integer average is truncated, as NCCL divides integers.
func reduce(t DataType, o Op, ops [][]float64) []float64 {
	out := append([]float64(nil), ops[0]...)
	for _, v := range ops[1:] {
		for i := range out {
			switch o {
			case OpSum, OpAvg:
				out[i] += v[i]
			case OpProd:
				out[i] *= v[i]
			case OpMax:
				out[i] = max(out[i], v[i])
			case OpMin:
				out[i] = min(out[i], v[i])
			}
		}
	}
	if o == OpAvg {
		for i := range out {
			out[i] /= float64(len(ops))
			if integer(t) {
				out[i] = math.Trunc(out[i])
			}
		}
	}
	return out
}

// tolerance is how far a result may be from its float64 reference: exact
// but for the average of floats, which NCCL computes by scaling each
// operand, rounding in the type.
func tolerance(t DataType, o Op) float64 {
	if o != OpAvg || integer(t) {
		return 0
	}
	switch t {
	case DataTypeFloat16:
		return 4 * math.Pow(2, -10)
	case DataTypeBfloat16:
		return 4 * math.Pow(2, -7)
	case DataTypeFloat32:
		return 4 * math.Pow(2, -23)
	}
	return 4 * math.Pow(2, -52)
}

func near(t *testing.T, want, got []float64, tol float64, msg string, args ...any) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		if math.Abs(got[i]-want[i]) > tol*math.Max(1, math.Abs(want[i])) {
			t.Fatalf("%s: element %d is %v, want %v (of %v)", fmt.Sprintf(msg, args...), i, got[i], want[i], want)
		}
	}
}

// upload is a buffer on rank's device holding b; closed when the test ends.
func (e *env) upload(t *testing.T, rank int, b []byte) *hip.Buffer {
	t.Helper()
	buf, err := e.devs[rank].Malloc(len(b))
	require.NoError(t, err)
	t.Cleanup(func() { buf.Close() })
	require.NoError(t, buf.CopyFromHost(b))
	return buf
}

// poisoned is a buffer of size bytes of 0xA5 on rank's device.
func (e *env) poisoned(t *testing.T, rank, size int) *hip.Buffer {
	t.Helper()
	buf, err := e.devs[rank].Malloc(size)
	require.NoError(t, err)
	t.Cleanup(func() { buf.Close() })
	require.NoError(t, buf.Memset(0xA5))
	return buf
}

// read waits for every rank's stream and reads a buffer.
func (e *env) read(t *testing.T, buf *hip.Buffer) []byte {
	t.Helper()
	for _, s := range e.streams {
		require.NoError(t, s.Synchronize())
	}
	out := make([]byte, buf.Size())
	require.NoError(t, buf.CopyToHost(out))
	return out
}

// each runs f for every rank inside one group.
func (e *env) each(t *testing.T, f func(r int, c *Comm, s *hip.Stream) error) {
	t.Helper()
	require.NoError(t, Group(func() error {
		for r, c := range e.comms {
			if err := f(r, c, e.streams[r]); err != nil {
				return err
			}
		}
		return nil
	}))
}

func runSuite(t *testing.T, e *env) {
	n := e.n()
	const count = 37
	t.Run("Queries", func(t *testing.T) {
		for r, c := range e.comms {
			got, err := c.Count()
			require.NoError(t, err)
			assert.Equal(t, n, got)
			got, err = c.Rank()
			require.NoError(t, err)
			assert.Equal(t, r, got)
			got, err = c.DeviceOrdinal()
			require.NoError(t, err)
			assert.Equal(t, e.devs[r].Ordinal(), got)
			assert.Same(t, e.devs[r], c.Device())
			assert.NoError(t, c.AsyncError())
		}
	})
	t.Run("AllReduce", func(t *testing.T) {
		for _, dt := range dataTypes {
			for _, o := range opValues {
				ops := make([][]float64, n)
				send := make([]*hip.Buffer, n)
				recv := make([]*hip.Buffer, n)
				for r := range n {
					ops[r] = e.values(dt, o, r, count)
					send[r] = e.upload(t, r, encode(dt, ops[r]))
					recv[r] = e.poisoned(t, r, count*dt.Size())
				}
				e.each(t, func(r int, c *Comm, s *hip.Stream) error { return c.AllReduce(send[r], recv[r], count, dt, o, s) })
				want := reduce(dt, o, ops)
				for r := range n {
					near(t, want, decode(dt, e.read(t, recv[r])), tolerance(dt, o), "%s %s, rank %d", dt, o, r)
				}
			}
		}
	})
	t.Run("AllReduceInPlace", func(t *testing.T) {
		ops := make([][]float64, n)
		bufs := make([]*hip.Buffer, n)
		for r := range n {
			ops[r] = e.values(DataTypeFloat32, OpSum, r, count)
			bufs[r] = e.upload(t, r, encode(DataTypeFloat32, ops[r]))
		}
		e.each(t, func(r int, c *Comm, s *hip.Stream) error {
			return c.AllReduce(bufs[r], bufs[r], count, DataTypeFloat32, OpSum, s)
		})
		for r := range n {
			near(t, reduce(DataTypeFloat32, OpSum, ops), decode(DataTypeFloat32, e.read(t, bufs[r])), 0, "rank %d", r)
		}
	})
	t.Run("AllGather", func(t *testing.T) {
		for _, dt := range dataTypes {
			var want []float64
			send := make([]*hip.Buffer, n)
			recv := make([]*hip.Buffer, n)
			for r := range n {
				v := e.values(dt, OpSum, r, count)
				want = append(want, v...)
				send[r] = e.upload(t, r, encode(dt, v))
				recv[r] = e.poisoned(t, r, n*count*dt.Size())
			}
			e.each(t, func(r int, c *Comm, s *hip.Stream) error { return c.AllGather(send[r], recv[r], count, dt, s) })
			for r := range n {
				near(t, want, decode(dt, e.read(t, recv[r])), 0, "%s, rank %d", dt, r)
			}
		}
	})
	t.Run("ReduceScatter", func(t *testing.T) {
		for _, dt := range dataTypes {
			for _, o := range []Op{OpSum, OpMax, OpAvg} {
				ops := make([][]float64, n)
				send := make([]*hip.Buffer, n)
				recv := make([]*hip.Buffer, n)
				for r := range n {
					ops[r] = e.values(dt, o, r, n*count)
					send[r] = e.upload(t, r, encode(dt, ops[r]))
					recv[r] = e.poisoned(t, r, count*dt.Size())
				}
				e.each(t, func(r int, c *Comm, s *hip.Stream) error { return c.ReduceScatter(send[r], recv[r], count, dt, o, s) })
				want := reduce(dt, o, ops)
				for r := range n {
					near(t, want[r*count:(r+1)*count], decode(dt, e.read(t, recv[r])), tolerance(dt, o), "%s %s, rank %d", dt, o, r)
				}
			}
		}
	})
	t.Run("Broadcast", func(t *testing.T) {
		root := n - 1
		for _, dt := range dataTypes {
			v := e.values(dt, OpSum, root, count)
			recv := make([]*hip.Buffer, n)
			for r := range n {
				recv[r] = e.poisoned(t, r, count*dt.Size())
			}
			src := e.upload(t, root, encode(dt, v))
			e.each(t, func(r int, c *Comm, s *hip.Stream) error {
				if r == root {
					return c.Broadcast(src, recv[r], count, dt, root, s)
				}
				return c.Broadcast(nil, recv[r], count, dt, root, s) // only the root's send is read
			})
			for r := range n {
				near(t, v, decode(dt, e.read(t, recv[r])), 0, "%s, rank %d", dt, r)
			}
		}
	})
	t.Run("Reduce", func(t *testing.T) {
		for _, dt := range []DataType{DataTypeInt32, DataTypeFloat16, DataTypeFloat64} {
			ops := make([][]float64, n)
			send := make([]*hip.Buffer, n)
			for r := range n {
				ops[r] = e.values(dt, OpMin, r, count)
				send[r] = e.upload(t, r, encode(dt, ops[r]))
			}
			recv := e.poisoned(t, 0, count*dt.Size())
			e.each(t, func(r int, c *Comm, s *hip.Stream) error {
				if r == 0 {
					return c.Reduce(send[r], recv, count, dt, OpMin, 0, s)
				}
				return c.Reduce(send[r], nil, count, dt, OpMin, 0, s) // only the root's receive is written
			})
			near(t, reduce(dt, OpMin, ops), decode(dt, e.read(t, recv)), 0, "%s", dt)
		}
	})
	t.Run("SendRecv", func(t *testing.T) {
		// A ring: rank r sends to r+1 and receives from r-1 (itself when
		// alone), all in one group.
		for _, dt := range []DataType{DataTypeUint8, DataTypeBfloat16, DataTypeInt64} {
			vals := make([][]float64, n)
			send := make([]*hip.Buffer, n)
			recv := make([]*hip.Buffer, n)
			for r := range n {
				vals[r] = e.values(dt, OpSum, r, count)
				send[r] = e.upload(t, r, encode(dt, vals[r]))
				recv[r] = e.poisoned(t, r, count*dt.Size())
			}
			e.each(t, func(r int, c *Comm, s *hip.Stream) error {
				if err := c.Send(send[r], count, dt, (r+1)%n, s); err != nil {
					return err
				}
				return c.Recv(recv[r], count, dt, (r+n-1)%n, s)
			})
			for r := range n {
				near(t, vals[(r+n-1)%n], decode(dt, e.read(t, recv[r])), 0, "%s, rank %d", dt, r)
			}
		}
	})
	t.Run("Split", func(t *testing.T) {
		// Two colors by parity, each ordered by descending old rank.
		split := make([]*Comm, n)
		e.each(t, func(r int, c *Comm, s *hip.Stream) error {
			var err error
			if split[r], err = c.Split(r%2, -r); err != nil {
				return err
			}
			// NCCL gives the handle at the group's end: until then the
			// communicator says so instead of passing NULL on.
			_, err = split[r].Count()
			assert.ErrorContains(t, err, "made in a group that has not ended")
			return nil
		})
		defer func() { require.NoError(t, CloseAll(split...)) }()
		for r, c := range split {
			members := (n + 1 - r%2) / 2
			got, err := c.Count()
			require.NoError(t, err)
			assert.Equal(t, members, got, "rank %d's color", r)
			rank, err := c.Rank()
			require.NoError(t, err)
			assert.Equal(t, members-1-r/2, rank, "old rank %d", r)
			assert.Same(t, e.devs[r], c.Device())
		}
		ops := make([][]float64, n)
		bufs := make([]*hip.Buffer, n)
		for r := range n {
			ops[r] = e.values(DataTypeInt32, OpSum, r, count)
			bufs[r] = e.upload(t, r, encode(DataTypeInt32, ops[r]))
		}
		require.NoError(t, Group(func() error {
			for r, c := range split {
				if err := c.AllReduce(bufs[r], bufs[r], count, DataTypeInt32, OpSum, e.streams[r]); err != nil {
					return err
				}
			}
			return nil
		}))
		for r := range n {
			var mine [][]float64
			for q := r % 2; q < n; q += 2 {
				mine = append(mine, ops[q])
			}
			near(t, reduce(DataTypeInt32, OpSum, mine), decode(DataTypeInt32, e.read(t, bufs[r])), 0, "rank %d", r)
		}
		// A rank that passes NoColor gets no communicator.
		none := make([]*Comm, n)
		e.each(t, func(r int, c *Comm, s *hip.Stream) error {
			color := 0
			if r == 0 {
				color = NoColor
			}
			var err error
			none[r], err = c.Split(color, 0)
			return err
		})
		assert.Nil(t, none[0])
		require.NoError(t, CloseAll(none...))
	})
}

// runCommInitRank: one goroutine per device joins with the unique ID's
// bytes, as processes would, and runs an all-reduce outside any group.
func runCommInitRank(t *testing.T, devs []*hip.Device) {
	n := len(devs)
	id, err := GetUniqueID()
	require.NoError(t, err)
	wire := id.Bytes()
	const count = 1000
	out := make([][]float64, n)
	errs := make([]error, n)
	var wg, queued sync.WaitGroup
	queued.Add(n)
	for r, dev := range devs {
		wg.Go(func() {
			arrive := sync.OnceFunc(queued.Done)
			defer arrive() // a rank that fails early lets the others read
			errs[r] = func() error {
				id, err := UniqueIDFromBytes(wire)
				if err != nil {
					return err
				}
				c, err := CommInitRank(dev, n, id, r)
				if err != nil {
					return err
				}
				defer c.Close()
				if got, err := c.Rank(); err != nil || got != r {
					return fmt.Errorf("rank %d: Rank() = %d, %v", r, got, err)
				}
				s, err := dev.NewStream(hip.WithStreamFlags(hip.StreamNonBlocking))
				if err != nil {
					return err
				}
				defer s.Close()
				vals := make([]float64, count)
				for i := range vals {
					vals[i] = float64(i%7 + r)
				}
				buf, err := dev.Malloc(count * 8)
				if err != nil {
					return err
				}
				defer buf.Close()
				if err := buf.CopyFromHost(encode(DataTypeFloat64, vals)); err != nil {
					return err
				}
				err = c.AllReduce(buf, buf, count, DataTypeFloat64, OpSum, s)
				// Every rank's call is queued before any reads its result
				// (the fake library computes when the last one arrives).
				arrive()
				queued.Wait()
				if err != nil {
					return err
				}
				if err := s.Synchronize(); err != nil {
					return err
				}
				if err := c.AsyncError(); err != nil {
					return err
				}
				b := make([]byte, count*8)
				if err := buf.CopyToHost(b); err != nil {
					return err
				}
				out[r] = decode(DataTypeFloat64, b)
				return nil
			}()
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	for r := range n {
		for i, v := range out[r] {
			want := float64(n*(i%7) + n*(n-1)/2)
			require.Equal(t, want, v, "rank %d element %d", r, i)
		}
	}
}
