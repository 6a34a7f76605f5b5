package candle

import (
	"cmp"
	"math"
	"slices"

	"github.com/rocm-go/rocm/hip"
)

// Sorting along the last dim, for every dtype. The order is total and the
// same on every device: NaN is larger than any other value (last when
// ascending, first when descending, as PyTorch sorts), -0 equals +0, and
// equal values keep the order of their indices in both directions
// (stable), so that results compare exactly between devices. Indices are
// U32, as Argmax's. Strided inputs are made contiguous first. On the GPU
// (kernels/sort.hip) a radix sort with 8-bit digits: a row of up to 4096
// elements (2048 of 64-bit dtypes) is sorted in shared memory, longer
// rows pass through scratch memory, one pass per byte of the dtype that
// varies in the row; TopK selects without sorting the row.

// ArgsortLastDim returns the indices that sort each row of the last dim,
// ascending or descending (candle's arg_sort_last_dim): out[..., j] is the
// index of the row's j-th value in that order.
func (t *Tensor) ArgsortLastDim(ascending bool) (*Tensor, error) {
	return t.argsort("Tensor.ArgsortLastDim", !ascending)
}

// SortLastDim sorts each row of the last dim: the sorted values and their
// indices (U32), as ArgsortLastDim orders them.
func (t *Tensor) SortLastDim(ascending bool) (values, indices *Tensor, err error) {
	const op = "Tensor.SortLastDim"
	indices, err = t.argsort(op, !ascending)
	if err != nil {
		return nil, nil, err
	}
	return t.gatherSorted(op, indices)
}

// topkMax is sort.hip's TOPK_MAX: the largest k its selection takes; a
// larger k sorts the rows.
const topkMax = 256

// TopK returns the k largest values of each row of the last dim and their
// indices (U32), largest first, equal values by lower index first (NaN is
// the largest value); k is from 1 to the last dim's size. The result has
// t's shape with k as its last dim.
func (t *Tensor) TopK(k int) (values, indices *Tensor, err error) {
	const op = "Tensor.TopK"
	if err := t.alive(op); err != nil {
		return nil, nil, err
	}
	if len(t.layout.Shape) == 0 {
		return nil, nil, pkg.Errorf(op, ErrShape, "a scalar has no last dim to take the top k of")
	}
	cols := t.layout.Shape[len(t.layout.Shape)-1]
	if k < 1 || k > cols {
		return nil, nil, pkg.Errorf(op, ErrArgument, "k = %d: want 1 to %d, the last dim of %v", k, cols, t.layout.Shape)
	}
	if k > topkMax {
		all, err := t.argsort(op, true)
		if err != nil {
			return nil, nil, err
		}
		defer all.Close()
		first, err := all.Narrow(-1, 0, k)
		if err != nil {
			return nil, nil, pkg.Wrap(op, err)
		}
		defer first.Close()
		if indices, err = first.Copy(); err != nil {
			return nil, nil, pkg.Wrap(op, err)
		}
		return t.gatherSorted(op, indices)
	}
	x, tmp, rows, cols, err := sortRows(op, t)
	if err != nil {
		return nil, nil, err
	}
	if tmp != nil {
		defer tmp.Close()
	}
	shape := t.layout.Shape.Clone()
	shape[len(shape)-1] = k
	if indices, err = newOutput(op, t.st.dev, U32, shape, t); err != nil {
		return nil, nil, err
	}
	if rows > 0 {
		if err := t.st.dev.backend().topk(x.v(), indices.st, rows, cols, k); err != nil {
			indices.Close()
			return nil, nil, pkg.Wrap(op, err)
		}
	}
	return t.gatherSorted(op, indices)
}

// gatherSorted returns t's values at indices along the last dim, and the
// indices; it closes the indices on error.
func (t *Tensor) gatherSorted(op string, indices *Tensor) (values, _ *Tensor, err error) {
	if values, err = t.Gather(indices, -1); err != nil {
		indices.Close()
		return nil, nil, pkg.Wrap(op, err)
	}
	return values, indices, nil
}

func (t *Tensor) argsort(op string, desc bool) (*Tensor, error) {
	if err := t.alive(op); err != nil {
		return nil, err
	}
	x, tmp, rows, cols, err := sortRows(op, t)
	if err != nil {
		return nil, err
	}
	if tmp != nil {
		defer tmp.Close()
	}
	out, err := newOutput(op, t.st.dev, U32, t.layout.Shape, t)
	if err != nil || out.Elems() == 0 {
		return out, err
	}
	if err := t.st.dev.backend().argsort(x.v(), out.st, rows, cols, desc); err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return out, nil
}

// sortRows checks a tensor to sort along its last dim and returns it
// contiguous (tmp: the copy made, to close), with its rows and columns.
func sortRows(op string, t *Tensor) (x, tmp *Tensor, rows, cols int, err error) {
	if len(t.layout.Shape) == 0 {
		return nil, nil, 0, 0, pkg.Errorf(op, ErrShape, "a scalar has no last dim to sort")
	}
	if n := t.layout.Shape[len(t.layout.Shape)-1]; n > math.MaxUint32 {
		return nil, nil, 0, 0, pkg.Errorf(op, ErrShape, "rows of %d elements: U32 indices reach %d", n, uint32(math.MaxUint32))
	}
	rows, cols = lastDimRows(t.layout.Shape)
	x = t
	if !t.layout.IsContiguous() && rows > 0 {
		if tmp, err = t.Copy(); err != nil {
			return nil, nil, 0, 0, pkg.Wrap(op, err)
		}
		x = tmp
	}
	return x, tmp, rows, cols, nil
}

// The CPU's sorts: a stable sort of each row's indices.

// floatOrder compares floats in the sort order: NaN largest, -0 equal to
// +0.
func floatOrder(a, b float64) int {
	switch an, bn := a != a, b != b; {
	case an || bn:
		return cmp.Compare(b2i(an), b2i(bn))
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cpuArgsort writes the first k of each row's sorted indices. Each row's
// keys are read once into a slice of their compute type; equal keys keep
// their index order (an unstable sort that breaks ties by index is a
// stable one, and several times faster than slices.SortStableFunc).
func cpuArgsort(x view, dst *Storage, rows, cols, k int, desc bool) {
	s, d := dataOf(x.st), dataOf(dst)
	idx := make([]int32, cols)
	if s.dt.IsFloat() {
		argsortRows(s, d, x.l.Offset, rows, cols, k, desc, idx, s.f, floatOrder)
	} else {
		argsortRows(s, d, x.l.Offset, rows, cols, k, desc, idx, s.i, cmp.Compare[int64])
	}
}

func argsortRows[K any](s, d data, offset, rows, cols, k int, desc bool, idx []int32, get func(int) K, order func(a, b K) int) {
	keys := make([]K, cols)
	for r := range rows {
		base := offset + r*cols
		for i := range idx {
			idx[i] = int32(i)
			keys[i] = get(base + i)
		}
		slices.SortFunc(idx, func(a, b int32) int {
			c := order(keys[a], keys[b])
			if desc {
				c = -c
			}
			if c == 0 {
				return cmp.Compare(a, b)
			}
			return c
		})
		for i, v := range idx[:k] {
			d.setI(r*k+i, int64(v))
		}
	}
}

func (c *cpuBackend) argsort(x view, dst *Storage, rows, cols int, desc bool) error {
	cpuArgsort(x, dst, rows, cols, cols, desc)
	return nil
}

func (c *cpuBackend) topk(x view, dst *Storage, rows, cols, k int) error {
	cpuArgsort(x, dst, rows, cols, k, true)
	return nil
}

// The GPU's sorts (kernels/sort.hip).

// sortBlock is sort.hip's SORT_BLOCK.
const sortBlock = 512

// sortItems is sort.hip's Items: the keys a thread holds, by dtype.
func sortItems(dt DType) int {
	if dt.Size() == 8 {
		return 4
	}
	return 8
}

// sortKeySize is the size of the keys the kernels keep in scratch memory:
// u64 for the 64-bit dtypes, else u32.
func sortKeySize(dt DType) int { return max(dt.Size(), 4) }

// sortThreads is a sort block for rows of cols: the fewest threads (a
// multiple of 64, whole wavefronts on AMD) whose tile holds a row, up to
// sortBlock.
func sortThreads(cols, items int) int {
	n := ((cols+items-1)/items + 63) / 64 * 64
	return min(max(n, 64), sortBlock)
}

func (b *hipBackend) argsort(x view, dst *Storage, rows, cols int, desc bool) error {
	dt := x.st.dtype
	threads := sortThreads(cols, sortItems(dt))
	grid := min(rows, maxBlocks)
	var scratch hip.DevicePtr
	if cols > threads*sortItems(dt) {
		// Long rows: a slot of scratch per block, blocks taking rows from a
		// counter; a few blocks per multiprocessor keep it busy.
		grid = min(rows, max(b.props.MultiProcessorCount, 1)*4)
		blk, err := b.pool.get(256 + grid*cols*2*(sortKeySize(dt)+4))
		if err != nil {
			return err
		}
		defer blk.release()
		counter, err := blk.buf.Slice(0, 8)
		if err != nil {
			return err
		}
		if err := counter.MemsetAsync(0, b.stream); err != nil {
			return err
		}
		scratch = blk.buf.Ptr()
	}
	in, out := ptr(x), storagePtr(dst)
	return b.launch(kernelNames.argsort[dt], hip.Dim3{X: uint32(grid)}, hip.Dim3{X: uint32(threads)}, func(a *hip.Args) {
		a.Uint64(uint64(rows)).Uint64(uint64(cols)).Int32(int32(b2i(desc))).Ptr(in).Ptr(out).Ptr(scratch)
	})
}

// topk runs the selection's stages: each tile of a row (a chunk) gives its
// k best as candidates to the next stage, until a row is one chunk.
// Stages after the first take full blocks, whose tiles are at least 8k
// long, so that each stage shortens the rows.
func (b *hipBackend) topk(x view, dst *Storage, rows, cols, k int) error {
	dt := x.st.dtype
	items, ks := sortItems(dt), sortKeySize(dt)
	in, out := ptr(x), storagePtr(dst)
	var bufs [2]*block
	defer func() {
		for _, blk := range bufs {
			if blk != nil {
				blk.release()
			}
		}
	}()
	var ck, ci hip.DevicePtr
	for stage := 0; ; stage++ {
		threads := sortThreads(cols, items)
		tile := threads * items
		chunks := (cols + tile - 1) / tile
		var xin hip.DevicePtr
		if stage == 0 {
			xin = in
		}
		var ok, oi hip.DevicePtr
		blocks := rows
		if chunks > 1 {
			n := rows * chunks * k
			if bufs[stage%2] == nil {
				// Each stage has fewer candidates than the one before: a
				// buffer made for an earlier stage fits a later one.
				blk, err := b.pool.get(n * (ks + 4))
				if err != nil {
					return err
				}
				bufs[stage%2] = blk
			}
			ok = bufs[stage%2].buf.Ptr()
			oi = ok.Add(n * ks)
			blocks = rows * chunks
		}
		err := b.launch(kernelNames.topk[dt], hip.Dim3{X: uint32(min(blocks, maxBlocks))}, hip.Dim3{X: uint32(threads)}, func(a *hip.Args) {
			a.Uint64(uint64(rows)).Uint64(uint64(cols)).Uint32(uint32(k)).Ptr(xin).Ptr(ck).Ptr(ci).Ptr(ok).Ptr(oi).Ptr(out)
		})
		if err != nil || chunks == 1 {
			return err
		}
		ck, ci, cols = ok, oi, chunks*k
	}
}
