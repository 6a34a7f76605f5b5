package candle

import (
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
)

// CPUDevice is the host, in pure Go: the reference every GPU op is tested
// against (it computes float ops in float64 and rounds once to the
// dtype), and the device that runs anywhere.
type CPUDevice struct {
	rng   rngState
	stats memStats
}

var cpuDevice = &CPUDevice{}

// CPU is the CPU device.
func CPU() *CPUDevice { return cpuDevice }

func (d *CPUDevice) String() string { return "cpu" }

// Synchronize does nothing: CPU ops run when they are called.
func (d *CPUDevice) Synchronize() error { return nil }

// SetSeed restarts the device's random numbers.
func (d *CPUDevice) SetSeed(seed uint64) { d.rng.set(seed) }

// MemoryStats reports the bytes of the device's live storages.
func (d *CPUDevice) MemoryStats() MemoryStats { return d.stats.read() }

// ResetPeak starts MemoryStats.Peak again from the bytes in use now, so
// that the next reading is the peak of what ran in between.
func (d *CPUDevice) ResetPeak() { d.stats.resetPeak() }

func (d *CPUDevice) backend() backend { return (*cpuBackend)(d) }

// memStats counts a device's memory.
type memStats struct {
	inUse, cached, peak, allocs atomic.Int64
	graphs                      atomic.Int64
}

func (m *memStats) add(n int64) {
	v := m.inUse.Add(n)
	for p := m.peak.Load(); v > p && !m.peak.CompareAndSwap(p, v); p = m.peak.Load() {
	}
}

// resetPeak sets the peak to the bytes in use now.
func (m *memStats) resetPeak() { m.peak.Store(m.inUse.Load()) }

func (m *memStats) read() MemoryStats {
	return MemoryStats{InUse: m.inUse.Load(), Cached: m.cached.Load(), Peak: m.peak.Load(), Allocs: m.allocs.Load(), Graphs: m.graphs.Load()}
}

// rngState is a device's random-number state: a seed, and the offset of
// the next element in the seed's stream.
type rngState struct {
	mu     sync.Mutex
	seed   uint64
	offset uint64
}

func (r *rngState) set(seed uint64) {
	r.mu.Lock()
	r.seed, r.offset = seed, 0
	r.mu.Unlock()
}

// take reserves n elements of the stream.
func (r *rngState) take(n int) (seed, offset uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seed, offset = r.seed, r.offset
	r.offset += uint64(n)
	return seed, offset
}

type cpuBackend CPUDevice

// cpuMemory is a CPU storage's bytes, 8-byte aligned.
type cpuMemory struct {
	b        []byte
	dev      *CPUDevice
	released atomic.Bool
}

func (m *cpuMemory) release() {
	if m.released.CompareAndSwap(false, true) {
		m.dev.stats.add(-int64(len(m.b)))
	}
}

func (c *cpuBackend) alloc(dt DType, n int) (memory, error) {
	size := n * dt.Size()
	words := make([]uint64, (size+7)/8) // 8-byte aligned, for every element type
	m := &cpuMemory{b: hip.AsBytes(words)[:size], dev: (*CPUDevice)(c)}
	c.stats.allocs.Add(1)
	c.stats.add(int64(size))
	return m, nil
}

func (c *cpuBackend) write(st *Storage, src []byte) error {
	copy(st.bytesAt(0, st.n), src)
	return nil
}

func (c *cpuBackend) read(st *Storage, off, n int, dst []byte) error {
	copy(dst, st.bytesAt(off, n))
	return nil
}

// data reads and writes a CPU storage's elements as float64 (float
// dtypes) or int64 (integer dtypes; unsigned values are non-negative).
type data struct {
	dt DType
	p  unsafe.Pointer
}

func dataOf(st *Storage) data {
	return data{dt: st.dtype, p: unsafe.Pointer(&st.mem.(*cpuMemory).b[0])}
}

func (d data) f(i int) float64 {
	switch d.dt {
	case F32:
		return float64(*(*float32)(unsafe.Add(d.p, 4*i)))
	case F16:
		return float64((*(*hip.Half)(unsafe.Add(d.p, 2*i))).Float32())
	case BF16:
		return float64((*(*hip.BFloat16)(unsafe.Add(d.p, 2*i))).Float32())
	case F64:
		return *(*float64)(unsafe.Add(d.p, 8*i))
	}
	return float64(d.i(i))
}

func (d data) setF(i int, v float64) {
	switch d.dt {
	case F32:
		*(*float32)(unsafe.Add(d.p, 4*i)) = float32(v)
	case F16:
		*(*hip.Half)(unsafe.Add(d.p, 2*i)) = hip.HalfFromFloat32(float32(v))
	case BF16:
		*(*hip.BFloat16)(unsafe.Add(d.p, 2*i)) = hip.BFloat16FromFloat32(float32(v))
	case F64:
		*(*float64)(unsafe.Add(d.p, 8*i)) = v
	default:
		d.setI(i, saturate(d.dt, v))
	}
}

func (d data) i(i int) int64 {
	switch d.dt {
	case U8:
		return int64(*(*uint8)(unsafe.Add(d.p, i)))
	case U32:
		return int64(*(*uint32)(unsafe.Add(d.p, 4*i)))
	case I64:
		return *(*int64)(unsafe.Add(d.p, 8*i))
	}
	return saturate(I64, d.f(i))
}

func (d data) setI(i int, v int64) {
	switch d.dt {
	case U8:
		*(*uint8)(unsafe.Add(d.p, i)) = uint8(v)
	case U32:
		*(*uint32)(unsafe.Add(d.p, 4*i)) = uint32(v)
	case I64:
		*(*int64)(unsafe.Add(d.p, 8*i)) = v
	default:
		d.setF(i, float64(v))
	}
}

// copyElem copies element si of s to element di of d, of the same dtype.
func copyElem(d data, di int, s data, si int) {
	sz := d.dt.Size()
	copy(unsafe.Slice((*byte)(unsafe.Add(d.p, di*sz)), sz), unsafe.Slice((*byte)(unsafe.Add(s.p, si*sz)), sz))
}

// walk calls f for each element of shape in row-major order with its index
// and its storage offset in each layout (of that shape).
func walk(shape Shape, ls []Layout, f func(i int, offs []int)) {
	n := shape.Elems()
	idx := make([]int, len(shape))
	offs := make([]int, len(ls))
	for k, l := range ls {
		offs[k] = l.Offset
	}
	for i := range n {
		f(i, offs)
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			for k := range ls {
				offs[k] += ls[k].Stride[d]
			}
			if idx[d] < shape[d] {
				break
			}
			for k := range ls {
				offs[k] -= ls[k].Stride[d] * shape[d]
			}
			idx[d] = 0
		}
	}
}

func (c *cpuBackend) unary(op unaryOp, p [2]float64, src view, dst *Storage) error {
	s, d := dataOf(src.st), dataOf(dst)
	if fi, ok := unaryInt(op); ok && src.st.dtype.IsInt() {
		walk(src.l.Shape, []Layout{src.l}, func(i int, o []int) { d.setI(i, wrapInt(d.dt, fi(s.i(o[0])))) })
		return nil
	}
	f := unaryFloat(op, p)
	walk(src.l.Shape, []Layout{src.l}, func(i int, o []int) { d.setF(i, f(s.f(o[0]))) })
	return nil
}

func (c *cpuBackend) binary(op binaryOp, a, b view, dst *Storage) error {
	x, y, d := dataOf(a.st), dataOf(b.st), dataOf(dst)
	ls := []Layout{a.l, b.l}
	if a.st.dtype.IsInt() {
		f := binaryInt(op, a.st.dtype == I64)
		walk(a.l.Shape, ls, func(i int, o []int) { d.setI(i, wrapInt(d.dt, f(x.i(o[0]), y.i(o[1])))) })
		return nil
	}
	f := binaryFloat(op)
	walk(a.l.Shape, ls, func(i int, o []int) { d.setF(i, f(x.f(o[0]), y.f(o[1]))) })
	return nil
}

func (c *cpuBackend) cast(src view, dst *Storage) error {
	s, d := dataOf(src.st), dataOf(dst)
	from, to := src.st.dtype, dst.dtype
	var f func(i int, o []int)
	switch {
	case from.IsInt() && to.IsInt():
		f = func(i int, o []int) { d.setI(i, wrapInt(to, s.i(o[0]))) }
	case to.IsInt():
		f = func(i int, o []int) { d.setI(i, saturate(to, s.f(o[0]))) }
	default:
		f = func(i int, o []int) { d.setF(i, s.f(o[0])) }
	}
	walk(src.l.Shape, []Layout{src.l}, f)
	return nil
}

func (c *cpuBackend) copy(src, dst view) error {
	if n := src.l.Shape.Elems(); src.l.IsContiguous() && dst.l.IsContiguous() {
		copy(dst.st.bytesAt(dst.l.Offset, n), src.st.bytesAt(src.l.Offset, n))
		return nil
	}
	s, d := dataOf(src.st), dataOf(dst.st)
	walk(src.l.Shape, []Layout{src.l, dst.l}, func(_ int, o []int) { copyElem(d, o[1], s, o[0]) })
	return nil
}

func (c *cpuBackend) fill(dst view, v scalar) error {
	d := dataOf(dst.st)
	if d.dt.IsFloat() {
		walk(dst.l.Shape, []Layout{dst.l}, func(_ int, o []int) { d.setF(o[0], v.f) })
	} else {
		walk(dst.l.Shape, []Layout{dst.l}, func(_ int, o []int) { d.setI(o[0], v.i) })
	}
	return nil
}

func (c *cpuBackend) arange(dst *Storage, start, step float64) error {
	d := dataOf(dst)
	for i := range dst.n {
		d.setF(i, start+float64(float64(i)*step)) // the conversion keeps Go from fusing a multiply-add
	}
	return nil
}

func (c *cpuBackend) random(dst *Storage, dist distribution, a, b float64, seed, offset uint64) error {
	d := dataOf(dst)
	for i := range dst.n {
		d.setF(i, randomValue(dist, dst.dtype == F64, a, b, seed, offset+uint64(i)))
	}
	return nil
}

// nonzero reads a condition or mask element.
func nonzero(d data, i int) bool { return d.i(i) != 0 }

func (c *cpuBackend) where(cond, t, f view, dst *Storage) error {
	cd, td, fd, d := dataOf(cond.st), dataOf(t.st), dataOf(f.st), dataOf(dst)
	walk(t.l.Shape, []Layout{cond.l, t.l, f.l}, func(i int, o []int) {
		if nonzero(cd, o[0]) {
			copyElem(d, i, td, o[1])
		} else {
			copyElem(d, i, fd, o[2])
		}
	})
	return nil
}

// index reads index element o, checked against a dim of size n.
func index(ids data, o, n int) (int, error) {
	v := ids.i(o)
	if v < 0 || v >= int64(n) {
		return 0, pkg.Errorf("index", ErrIndex, "index %d is out of range for a dim of size %d", v, n)
	}
	return int(v), nil
}

// along is l with shape and the stride of dim d set to 0 (the op adds
// index × the real stride itself).
func along(l Layout, shape Shape, d int) Layout {
	o := Layout{Shape: shape, Stride: append([]int(nil), l.Stride...), Offset: l.Offset}
	o.Stride[d] = 0
	return o
}

// onlyDim is a layout of shape that walks a 1-D view's elements along dim
// d and repeats them along the others.
func onlyDim(v Layout, shape Shape, d int) Layout {
	o := Layout{Shape: shape, Stride: make([]int, len(shape)), Offset: v.Offset}
	o.Stride[d] = v.Stride[0]
	return o
}

func (c *cpuBackend) indexSelect(src, ids view, d int, dst *Storage) error {
	shape := src.l.Shape.Clone()
	shape[d] = ids.l.Shape[0]
	return take(shape, src, onlyDim(ids.l, shape, d), ids, d, dst)
}

func (c *cpuBackend) gather(src, ids view, d int, dst *Storage) error {
	return take(ids.l.Shape, src, ids.l, ids, d, dst)
}

// take writes each element of shape from src, its index along d read
// through idsL (of shape) from ids: index_select and gather.
func take(shape Shape, src view, idsL Layout, ids view, d int, dst *Storage) error {
	s, x, out := dataOf(src.st), dataOf(ids.st), dataOf(dst)
	var err error
	walk(shape, []Layout{along(src.l, shape, d), idsL}, func(i int, o []int) {
		id, e := index(x, o[1], src.l.Shape[d])
		if e != nil {
			err = e
			return
		}
		copyElem(out, i, s, o[0]+id*src.l.Stride[d])
	})
	return err
}

// accumulate adds element si of s to element di of d, in d's dtype.
func accumulate(d data, di int, s data, si int) {
	if d.dt.IsFloat() {
		d.setF(di, d.f(di)+s.f(si))
	} else {
		d.setI(di, wrapInt(d.dt, d.i(di)+s.i(si)))
	}
}

func (c *cpuBackend) scatter(dst *Storage, dstShape Shape, ids, src view, d int, add bool) error {
	return c.put(dst, dstShape, ids.l.Shape, ids.l, ids, src, d, add)
}

func (c *cpuBackend) indexAdd(dst *Storage, dstShape Shape, ids, src view, d int) error {
	return c.put(dst, dstShape, src.l.Shape, onlyDim(ids.l, src.l.Shape, d), ids, src, d, true)
}

// put writes (or adds) src's elements over shape into dst at
// base + index × stride along dim d, the index read through idsL.
func (c *cpuBackend) put(dst *Storage, dstShape, shape Shape, idsL Layout, ids, src view, d int, add bool) error {
	out, x, s := dataOf(dst), dataOf(ids.st), dataOf(src.st)
	dl := ContiguousLayout(dstShape)
	var err error
	walk(shape, []Layout{along(dl, shape, d), idsL, src.l}, func(_ int, o []int) {
		id, e := index(x, o[1], dstShape[d])
		if e != nil {
			err = e
			return
		}
		if add {
			accumulate(out, o[0]+id*dl.Stride[d], s, o[2])
		} else {
			copyElem(out, o[0]+id*dl.Stride[d], s, o[2])
		}
	})
	return err
}

func (c *cpuBackend) reduce(op reduceOp, src view, nred int, scale float64, dst *Storage) error {
	s, d := dataOf(src.st), dataOf(dst)
	inner := src.l.Shape[len(src.l.Shape)-nred:].Elems()
	isInt := src.st.dtype.IsInt()
	var facc float64
	var iacc int64
	best := 0
	walk(src.l.Shape, []Layout{src.l}, func(i int, o []int) {
		k := i % inner
		if isInt {
			v := s.i(o[0])
			switch {
			case k == 0:
				iacc, best = v, 0
			case op == opSum:
				iacc += v
			case (op == opMax || op == opArgmax) && v > iacc, (op == opMin || op == opArgmin) && v < iacc:
				iacc, best = v, k
			}
		} else {
			v := s.f(o[0])
			switch {
			case k == 0:
				facc, best = v, 0
			case op == opSum:
				facc += v
			case facc != facc: // a NaN wins, the first one
			case v != v, (op == opMax || op == opArgmax) && v > facc, (op == opMin || op == opArgmin) && v < facc:
				facc, best = v, k
			}
		}
		if k != inner-1 {
			return
		}
		j := i / inner
		switch {
		case op.isArg():
			d.setI(j, int64(best))
		case isInt:
			d.setI(j, wrapInt(d.dt, iacc))
		case op == opSum:
			d.setF(j, facc*scale)
		default:
			d.setF(j, facc)
		}
	})
	return nil
}

// randomValue is element counter of a seed's stream, from Philox4x32-10:
// uniform in [a, b) or normal (Box-Muller) with mean a and deviation b,
// computed in float64. The GPU computes the same (rand.hip).
func randomValue(dist distribution, double bool, a, b float64, seed, counter uint64) float64 {
	r := philox([4]uint32{uint32(counter), uint32(counter >> 32), 0, 0}, [2]uint32{uint32(seed), uint32(seed >> 32)})
	var u1, u2 float64
	if double {
		u1 = float64((uint64(r[0])<<32|uint64(r[1]))>>11) * 0x1p-53
		u2 = float64((uint64(r[2])<<32|uint64(r[3]))>>11) * 0x1p-53
	} else {
		u1 = float64(r[0]>>8) * 0x1p-24
		u2 = float64(r[1]>>8) * 0x1p-24
	}
	// The conversions round each step, as the GPU's __dadd_rn and
	// __dmul_rn do: no fused multiply-adds on either side.
	if dist == uniform {
		return a + float64((b-a)*u1)
	}
	// u1 in (0, 1] for the logarithm.
	if double {
		u1 += 0x1p-53
	} else {
		u1 += 0x1p-24
	}
	r0 := math.Sqrt(float64(-2 * math.Log(u1)))
	return a + float64(float64(b*r0)*math.Cos(float64(2*math.Pi*u2)))
}

// philox is Philox4x32 with 10 rounds (Salmon et al., SC11).
func philox(c [4]uint32, k [2]uint32) [4]uint32 {
	for range 10 {
		p0 := uint64(0xD2511F53) * uint64(c[0])
		p1 := uint64(0xCD9E8D57) * uint64(c[2])
		c = [4]uint32{uint32(p1>>32) ^ c[1] ^ k[0], uint32(p1), uint32(p0>>32) ^ c[3] ^ k[1], uint32(p0)}
		k[0] += 0x9E3779B9
		k[1] += 0xBB67AE85
	}
	return c
}
