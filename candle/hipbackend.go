package candle

import (
	"maps"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
)

// hipBackend runs the ops as the kernels of candle/kernels/*.hip on the
// device's stream. The kernels take their operands' layout by value
// (kIndex), so that no launch copies an "info" buffer to the device first
// (candle's CUDA backend does, each op).
type hipBackend HIPDevice

// kIndex is the kernels' Index (kernels/common.h): the dims and the
// strides of up to four operands of one shape, in elements; rank 0 when
// every operand is contiguous. flags bit 0: the contiguous operands are
// 16-byte aligned.
type kIndex struct {
	Rank    int32
	Flags   int32
	Dims    [MaxRank]int64
	Strides [4][MaxRank]int64
}

// kIndex is the kernels' Index byte for byte (a static_assert there).
var (
	_ [unsafe.Sizeof(kIndex{}) - (8 + 5*8*MaxRank)]struct{}
	_ [(8 + 5*8*MaxRank) - unsafe.Sizeof(kIndex{})]struct{}
)

// makeIndex coalesces the layouts of views of one shape: dims of size 1
// go, and neighbouring dims that every operand walks as one merge. When
// every operand is contiguous the rank is 0, unless strided is set (for
// kernels that always compute offsets) and there are several elements.
func makeIndex(shape Shape, strided bool, ls ...Layout) kIndex {
	type dimT struct {
		n  int
		st [4]int
	}
	// Fixed arrays, not slices: every launch makes an index.
	var merged [MaxRank]dimT // innermost first
	nm := 0
	for i := len(shape) - 1; i >= 0; i-- {
		n := shape[i]
		if n == 1 {
			continue
		}
		var d dimT
		d.n = n
		for k, l := range ls {
			d.st[k] = l.Stride[i]
		}
		if nm > 0 {
			last := &merged[nm-1]
			ok := true
			for k := range ls {
				if d.st[k] != last.st[k]*last.n {
					ok = false
				}
			}
			if ok {
				last.n *= d.n
				continue
			}
		}
		merged[nm] = d
		nm++
	}
	var ix kIndex
	contiguous := nm == 0
	if nm == 1 {
		contiguous = true
		for k := range ls {
			if merged[0].st[k] != 1 {
				contiguous = false
			}
		}
	}
	if contiguous && !(strided && shape.Elems() > 1) {
		return ix
	}
	ix.Rank = int32(nm)
	for i, d := range merged[:nm] {
		j := nm - 1 - i
		ix.Dims[j] = int64(d.n)
		for k := range ls {
			ix.Strides[k][j] = int64(d.st[k])
		}
	}
	return ix
}

// ptr is the device address of a view's first element.
func ptr(v view) hip.DevicePtr {
	return v.st.mem.(*block).buf.Ptr().Add(v.l.Offset * v.st.dtype.Size())
}

func storagePtr(st *Storage) hip.DevicePtr { return st.mem.(*block).buf.Ptr() }

// aligned sets flag bit 0 when every address is 16-byte aligned.
func (ix *kIndex) aligned(ps ...hip.DevicePtr) {
	for _, p := range ps {
		if p%16 != 0 {
			return
		}
	}
	ix.Flags |= 1
}

// rowsAligned reports whether every row start of a rows index (operands
// t) is 16-byte aligned: the bases and every stride in bytes.
func rowsAligned(ix kIndex, size int, bases ...hip.DevicePtr) bool {
	for t, b := range bases {
		if b%16 != 0 {
			return false
		}
		for d := range ix.Rank {
			if ix.Strides[t][d]*int64(size)%16 != 0 {
				return false
			}
		}
	}
	return true
}

// grid is a grid-stride loop's blocks for n elements, each thread taking
// per of them per step. Vector paths (per > 1) take two vectors per step
// and get enough blocks for one pass.
func (b *hipBackend) grid(n, per int) hip.Dim3 {
	if per > 1 {
		per *= 2
		blocks := (n + RGBlock*per - 1) / (RGBlock * per)
		return hip.Dim3{X: uint32(max(1, min(blocks, maxBlocks)))}
	}
	blocks := (n + RGBlock - 1) / RGBlock
	return hip.Dim3{X: uint32(max(1, min(blocks, int(b.maxGrid))))}
}

// RGBlock is the kernels' block size (RG_BLOCK).
const RGBlock = 256

// maxBlocks bounds a grid's X: AMD refuses grids of 2³² threads or more
// in a dimension. The kernels loop over what a grid does not cover.
const maxBlocks = 1<<32/RGBlock - 1

// function is a loaded kernel of the device. Lookups read an immutable
// map without a lock; the first use of a kernel copies it.
func (b *hipBackend) function(k kernel) (*hip.Function, error) {
	if m := b.fns.Load(); m != nil {
		if fn, ok := (*m)[k.name]; ok {
			return fn, nil
		}
	}
	fn, err := b.kc.function(b.dev, k)
	if err != nil {
		return nil, err
	}
	b.fnsMu.Lock()
	defer b.fnsMu.Unlock()
	var m map[string]*hip.Function
	if old := b.fns.Load(); old != nil {
		m = maps.Clone(*old)
	} else {
		m = map[string]*hip.Function{}
	}
	m[k.name] = fn
	b.fns.Store(&m)
	return fn, nil
}

// launch queues kernel k (of kernelNames) on the device's stream with the
// arguments args packs.
func (b *hipBackend) launch(k kernel, grid, block hip.Dim3, args func(*hip.Args)) error {
	return b.launchShared(k, grid, block, 0, args)
}

// launchShared is launch with shared bytes of dynamic shared memory a
// block.
func (b *hipBackend) launchShared(k kernel, grid, block hip.Dim3, shared int, args func(*hip.Args)) error {
	fn, err := b.function(k)
	if err != nil {
		return err
	}
	a := b.args.Get().(*hip.Args)
	a.Reset()
	args(a)
	// Every candle kernel waits for the previous one first thing
	// (RG_GRID_WAIT), so each may launch before that one ends.
	err = fn.Launch(hip.LaunchConfig{Grid: grid, Block: block, SharedMem: uint32(shared), Stream: b.stream, EarlyLaunch: true}, a)
	b.args.Put(a)
	return err
}

var block1D = hip.Dim3{X: RGBlock}

// poisonAllocs makes every new storage start as 0xFF bytes (NaN, 255,
// -1), so that tests see elements an op leaves unwritten.
var poisonAllocs atomic.Bool

func (b *hipBackend) alloc(dt DType, n int) (memory, error) {
	m, err := b.pool.get(n * dt.Size())
	if err != nil {
		return nil, err
	}
	if poisonAllocs.Load() {
		if err := m.buf.MemsetAsync(0xff, b.stream); err != nil {
			m.release()
			return nil, err
		}
	}
	return m, nil
}

func (b *hipBackend) write(st *Storage, src []byte) error {
	return b.staging.write(st.mem.(*block).buf, 0, src)
}

func (b *hipBackend) read(st *Storage, off, n int, dst []byte) error {
	sz := st.dtype.Size()
	return b.staging.read(st.mem.(*block).buf, off*sz, dst[:n*sz])
}

// perThread is how many elements a thread takes per step: a 16-byte
// vector when the index allows it.
func perThread(ix kIndex, size int) int {
	if ix.Rank == 0 && ix.Flags&1 != 0 {
		return 16 / size
	}
	return 1
}

func (b *hipBackend) unary(op unaryOp, p [2]float64, src view, dst *Storage) error {
	n := src.l.Shape.Elems()
	ix := makeIndex(src.l.Shape, false, src.l)
	in, out := ptr(src), storagePtr(dst)
	ix.aligned(in, out)
	return b.launch(kernelNames.unary[op][dst.dtype], b.grid(n, perThread(ix, dst.dtype.Size())), block1D, func(a *hip.Args) {
		hip.ArgValue(a, ix).Uint64(uint64(n)).Ptr(in).Ptr(out).Float64(p[0]).Float64(p[1])
	})
}

func (b *hipBackend) binary(op binaryOp, x, y view, dst *Storage) error {
	n := x.l.Shape.Elems()
	ix := makeIndex(x.l.Shape, false, x.l, y.l)
	px, py, out := ptr(x), ptr(y), storagePtr(dst)
	ix.aligned(px, py, out)
	per := 1
	if !op.isCmp() || x.st.dtype == U8 { // the kernel's vectors need equal input and output sizes
		per = perThread(ix, dst.dtype.Size())
	}
	return b.launch(kernelNames.binary[op][x.st.dtype], b.grid(n, per), block1D, func(a *hip.Args) {
		hip.ArgValue(a, ix).Uint64(uint64(n)).Ptr(px).Ptr(py).Ptr(out)
	})
}

func (b *hipBackend) cast(src view, dst *Storage) error {
	n := src.l.Shape.Elems()
	ix := makeIndex(src.l.Shape, false, src.l)
	in, out := ptr(src), storagePtr(dst)
	// The kernel's chunk: 16 bytes of the wider type.
	wide := max(src.st.dtype.Size(), dst.dtype.Size())
	per := 16 / wide
	if ix.Rank == 0 && int(in)%(per*src.st.dtype.Size()) == 0 && int(out)%(per*dst.dtype.Size()) == 0 {
		ix.Flags |= 1
	}
	return b.launch(kernelNames.cast[src.st.dtype][dst.dtype], b.grid(n, perThread(ix, wide)), block1D, func(a *hip.Args) {
		hip.ArgValue(a, ix).Uint64(uint64(n)).Ptr(in).Ptr(out)
	})
}

var sizeNames = [9]string{1: "b1", 2: "b2", 4: "b4", 8: "b8"}

func (b *hipBackend) copy(src, dst view) error {
	size := src.st.dtype.Size()
	ix := makeIndex(src.l.Shape, false, src.l, dst.l)
	if ok, err := b.transpose(ix, src, dst); ok {
		return err
	}
	n := src.l.Shape.Elems()
	in, out := ptr(src), ptr(dst)
	if rows, nrows, rowlen, ok := rowsOf(ix, 2); ok {
		if rowsAligned(rows, size, in, out) {
			rows.Flags |= 1
		}
		return b.launch(kernelNames.copyRows[size], b.rowGrid(nrows), block1D, func(a *hip.Args) {
			hip.ArgValue(a, rows).Uint64(uint64(nrows)).Uint64(uint64(rowlen)).Ptr(in).Ptr(out)
		})
	}
	ix.aligned(in, out)
	return b.launch(kernelNames.copy[size], b.grid(n, perThread(ix, size)), block1D, func(a *hip.Args) {
		hip.ArgValue(a, ix).Uint64(uint64(n)).Ptr(in).Ptr(out)
	})
}

// minRow is the shortest contiguous run that a row kernel copies: shorter
// rows leave most of a block idle.
const minRow = 64

// rowsOf splits a strided index whose innermost dim is contiguous in the
// first n operands into rows: an index over the outer dims (rank ≥ 1),
// their count, and the row length.
func rowsOf(ix kIndex, n int) (rows kIndex, nrows, rowlen int, ok bool) {
	r := int(ix.Rank)
	if r < 2 || ix.Dims[r-1] < minRow {
		return rows, 0, 0, false
	}
	for t := range n {
		if ix.Strides[t][r-1] != 1 {
			return rows, 0, 0, false
		}
	}
	rows.Rank = int32(r - 1)
	nrows = 1
	for d := range r - 1 {
		rows.Dims[d] = ix.Dims[d]
		nrows *= int(ix.Dims[d])
		for t := range n {
			rows.Strides[t][d] = ix.Strides[t][d]
		}
	}
	return rows, nrows, int(ix.Dims[r-1]), true
}

// rowGrid is a block per row, up to a bound (the kernels loop).
func (b *hipBackend) rowGrid(nrows int) hip.Dim3 {
	return hip.Dim3{X: uint32(max(1, min(nrows, maxBlocks)))}
}

// rgTile is the transpose kernel's tile (RG_TILE).
const rgTile = 32

// transpose copies with the tiled kernel when the destination is a
// contiguous batch of matrices that the source holds with its two last
// dims swapped: src[b, r, c] at b*sbatch + c*scol + r.
func (b *hipBackend) transpose(ix kIndex, src, dst view) (bool, error) {
	r := int(ix.Rank)
	if r < 2 || r > 3 {
		return false, nil
	}
	st, dt := ix.Strides[0], ix.Strides[1]
	rows, cols := ix.Dims[r-2], ix.Dims[r-1]
	batch, sbatch := int64(1), int64(0)
	if r == 3 {
		batch, sbatch = ix.Dims[0], st[0]
		if dt[0] != rows*cols {
			return false, nil
		}
	}
	// dst contiguous (rows × cols), src contiguous along rows, strided
	// along cols: a transpose worth tiling.
	if dt[r-1] != 1 || dt[r-2] != cols || st[r-2] != 1 || st[r-1] < rows || rows < 8 || cols < 8 ||
		batch > 65535 || (rows+rgTile-1)/rgTile > 65535 { // CUDA's limits on grid Y and Z
		return false, nil
	}
	in, out := ptr(src), ptr(dst)
	size := src.st.dtype.Size()
	grid := hip.Dim3{X: uint32((cols + rgTile - 1) / rgTile), Y: uint32((rows + rgTile - 1) / rgTile), Z: uint32(batch)}
	return true, b.launch(kernelNames.transpose[size], grid, hip.Dim3{X: 32, Y: 8}, func(a *hip.Args) {
		a.Uint64(uint64(rows)).Uint64(uint64(cols)).Int64(sbatch).Int64(st[r-1]).Ptr(in).Ptr(out)
	})
}

// fillBits is a value's bit pattern in a dtype, for fill.
func fillBits(dt DType, v scalar) uint64 {
	switch dt {
	case F32:
		return uint64(math.Float32bits(float32(v.f)))
	case F16:
		return uint64(hip.HalfFromFloat32(float32(v.f)))
	case BF16:
		return uint64(hip.BFloat16FromFloat32(float32(v.f)))
	case F64:
		return math.Float64bits(v.f)
	}
	return uint64(v.i)
}

func (b *hipBackend) fill(dst view, v scalar) error {
	n := dst.l.Shape.Elems()
	ix := makeIndex(dst.l.Shape, false, dst.l)
	out := ptr(dst)
	val := fillBits(dst.st.dtype, v)
	return b.launch(kernelNames.fill[dst.st.dtype.Size()], b.grid(n, 1), block1D, func(a *hip.Args) {
		hip.ArgValue(a, ix).Uint64(uint64(n)).Ptr(out).Uint64(val)
	})
}

func (b *hipBackend) arange(dst *Storage, start, step float64) error {
	out := storagePtr(dst)
	return b.launch(kernelNames.arange[dst.dtype], b.grid(dst.n, 1), block1D, func(a *hip.Args) {
		a.Uint64(uint64(dst.n)).Ptr(out).Float64(start).Float64(step)
	})
}

func (b *hipBackend) random(dst *Storage, dist distribution, x, y float64, seed, offset uint64) error {
	name := kernelNames.randUniform[dst.dtype]
	if dist == normal {
		name = kernelNames.randNormal[dst.dtype]
	}
	out := storagePtr(dst)
	return b.launch(name, b.grid(dst.n, 1), block1D, func(a *hip.Args) {
		a.Uint64(uint64(dst.n)).Ptr(out).Float64(x).Float64(y).Uint64(seed).Uint64(offset)
	})
}

func (b *hipBackend) where(cond, t, f view, dst *Storage) error {
	n := t.l.Shape.Elems()
	ix := makeIndex(t.l.Shape, false, cond.l, t.l, f.l)
	pc, pt, pf, out := ptr(cond), ptr(t), ptr(f), storagePtr(dst)
	size := t.st.dtype.Size()
	if ix.aligned(pt, pf, out); ix.Flags&1 != 0 && int(pc)%(16/size*cond.st.dtype.Size()) != 0 {
		ix.Flags &^= 1
	}
	name := kernelNames.where[cond.st.dtype][size]
	return b.launch(name, b.grid(n, perThread(ix, size)), block1D, func(a *hip.Args) {
		hip.ArgValue(a, ix).Uint64(uint64(n)).Ptr(pc).Ptr(pt).Ptr(pf).Ptr(out)
	})
}

// take reads out[i] = src[base(i) + ids[idx(i)] × stride] over shape, with
// operand 0 the source along the dim and operand 1 the indices.
func (b *hipBackend) take(shape Shape, srcL, idsL Layout, src, ids view, d int, dst *Storage) error {
	n := shape.Elems()
	ix := makeIndex(shape, true, srcL, idsL)
	ps, pi, out := ptr(src), ptr(ids), storagePtr(dst)
	size, stride := int64(src.l.Shape[d]), int64(src.l.Stride[d])
	name := kernelNames.take[ids.st.dtype][src.st.dtype.Size()]
	return b.launch(name, b.grid(n, 1), block1D, func(a *hip.Args) {
		hip.ArgValue(a, ix).Uint64(uint64(n)).Ptr(pi).Ptr(ps).Ptr(out).Int64(size).Int64(stride)
	})
}

func (b *hipBackend) indexSelect(src, ids view, d int, dst *Storage) error {
	shape := src.l.Shape.Clone()
	shape[d] = ids.l.Shape[0]
	inner := Layout{Shape: shape[d+1:], Stride: src.l.Stride[d+1:]}
	if rowlen := inner.Shape.Elems(); rowlen >= minRow && inner.IsContiguous() {
		// Whole rows: a block copies each.
		outer := shape[:d+1]
		rows := makeIndex(outer, true, along(Layout{Shape: outer, Stride: src.l.Stride[:d+1]}, outer, d), onlyDim(ids.l, outer, d))
		nrows := outer.Elems()
		size := src.st.dtype.Size()
		ps, pi, out := ptr(src), ptr(ids), storagePtr(dst)
		stride := int64(src.l.Stride[d])
		if rowlen*size%16 == 0 && stride*int64(size)%16 == 0 && rowsAligned(rows, size, ps) {
			rows.Flags |= 1
		}
		name := kernelNames.takeRows[ids.st.dtype][size]
		return b.launch(name, b.rowGrid(nrows), block1D, func(a *hip.Args) {
			hip.ArgValue(a, rows).Uint64(uint64(nrows)).Uint64(uint64(rowlen)).Ptr(pi).Ptr(ps).Ptr(out).Int64(int64(src.l.Shape[d])).Int64(stride)
		})
	}
	return b.take(shape, along(src.l, shape, d), onlyDim(ids.l, shape, d), src, ids, d, dst)
}

func (b *hipBackend) gather(src, ids view, d int, dst *Storage) error {
	return b.take(ids.l.Shape, along(src.l, ids.l.Shape, d), ids.l, src, ids, d, dst)
}

// put writes dst[base(i) + ids[idx(i)] × stride] = (or +=) src[off(i)]
// over shape: operand 0 is the destination along the dim, 1 the indices,
// 2 the source.
func (b *hipBackend) put(shape, dstShape Shape, dstL, idsL Layout, dst *Storage, ids, src view, d int, add bool) error {
	n := shape.Elems()
	ix := makeIndex(shape, true, dstL, idsL, src.l)
	pd, pi, ps := storagePtr(dst), ptr(ids), ptr(src)
	size, stride := int64(dstShape[d]), int64(dstShape[d+1:].Elems())
	name := kernelNames.put[ids.st.dtype][src.st.dtype.Size()]
	if add {
		name = kernelNames.putAdd[ids.st.dtype][src.st.dtype]
	}
	return b.launch(name, b.grid(n, 1), block1D, func(a *hip.Args) {
		hip.ArgValue(a, ix).Uint64(uint64(n)).Ptr(pi).Ptr(ps).Ptr(pd).Int64(size).Int64(stride)
	})
}

func (b *hipBackend) scatter(dst *Storage, dstShape Shape, ids, src view, d int, add bool) error {
	shape := ids.l.Shape
	return b.put(shape, dstShape, along(ContiguousLayout(dstShape), shape, d), ids.l, dst, ids, src, d, add)
}

func (b *hipBackend) indexAdd(dst *Storage, dstShape Shape, ids, src view, d int) error {
	shape := src.l.Shape
	return b.put(shape, dstShape, along(ContiguousLayout(dstShape), shape, d), onlyDim(ids.l, shape, d), dst, ids, src, d, true)
}

func (b *hipBackend) reduce(op reduceOp, src view, nred int, scale float64, dst *Storage) error {
	k := len(src.l.Shape) - nred
	outShape, redShape := src.l.Shape[:k], src.l.Shape[k:]
	nout, inner := outShape.Elems(), redShape.Elems()
	outer := makeIndex(outShape, true, Layout{Shape: outShape, Stride: src.l.Stride[:k]})
	red := makeIndex(redShape, false, Layout{Shape: redShape, Stride: src.l.Stride[k:]})
	in, out := ptr(src), storagePtr(dst)
	if red.Rank == 0 && rowsAligned(outer, src.st.dtype.Size(), in) {
		red.Flags |= 1
	}
	mode, grid := int32(0), hip.Dim3{X: uint32(min(nout, maxBlocks))}
	if inner < 64 {
		mode, grid = 1, b.grid(nout, 1)
	}
	return b.launch(kernelNames.reduce[op][src.st.dtype], grid, block1D, func(a *hip.Args) {
		hip.ArgValue(a, outer)
		hip.ArgValue(a, red).Uint64(uint64(nout)).Uint64(uint64(inner)).Int32(mode).Float64(scale).Ptr(in).Ptr(out)
	})
}
