package candle

import "github.com/rocm-go/rocm/hip"

// IndexAssign writes src into t along dim d at the indices, in place: for
// a 1-D ids as long as src's dim d, t[..., ids[i], ...] = src[..., i, ...];
// src has t's dtype, device and other dims. Like SliceAssign it writes in
// place (a paged KV cache scatters each step's new rows into their pages
// with it): every view of t's storage sees the change. Where indices
// repeat, one of the writes wins.
//
// An index out of range is an ErrIndex on the CPU device, before anything
// is written. On a GPU the op cannot stop without waiting for the device:
// an index out of range writes nothing there (as Scatter).
//
// On a HIP device, when the dims after d are contiguous in both t and src
// (rows, as a cache's (heads, head dim)), a block copies each row with
// vector loads; other layouts write element by element.
func (t *Tensor) IndexAssign(ids, src *Tensor, d int) error {
	const op = "Tensor.IndexAssign"
	d, err := checkPut(op, t, ids, src, d)
	if err != nil {
		return err
	}
	if ids.Rank() != 1 || src.Rank() != t.Rank() || ids.layout.Shape[0] != src.layout.Shape[d] {
		return pkg.Errorf(op, ErrShape, "indices %v and a source %v for a tensor %v: want 1-D indices as long as the source's dim %d, and a source of the tensor's rank", ids.layout.Shape, src.layout.Shape, t.layout.Shape, d)
	}
	for k := range t.layout.Shape {
		if k != d && src.layout.Shape[k] != t.layout.Shape[k] {
			return pkg.Errorf(op, ErrShape, "a source %v for a tensor %v: dim %d differs", src.layout.Shape, t.layout.Shape, k)
		}
	}
	if src.Elems() == 0 {
		return nil
	}
	if t.layout.Shape[d] == 0 {
		return pkg.Errorf(op, ErrIndex, "indices into dim %d of size 0", d)
	}
	if hasOverlap(t.layout) {
		return pkg.Errorf(op, ErrArgument, "the destination %v repeats elements (a broadcast view): a write would be ambiguous", t.layout)
	}
	be, ok := t.st.dev.backend().(indexAssigner)
	if !ok {
		return pkg.Errorf(op, ErrDevice, "%s cannot assign at indices", t.st.dev)
	}
	return pkg.Wrap(op, be.indexAssign(t.v(), ids.v(), src.v(), d))
}

// indexAssigner is the backends' IndexAssign: dst[..., ids[i], ...] =
// src[..., i, ...] along d, in dst's own layout.
type indexAssigner interface {
	indexAssign(dst, ids, src view, d int) error
}

func (c *cpuBackend) indexAssign(dst, ids, src view, d int) error {
	x := dataOf(ids.st)
	size := dst.l.Shape[d]
	// Every index is checked before the first write: nothing half-written.
	var err error
	walk(ids.l.Shape, []Layout{ids.l}, func(_ int, o []int) {
		if err == nil {
			_, err = index(x, o[0], size)
		}
	})
	if err != nil {
		return err
	}
	out, s := dataOf(dst.st), dataOf(src.st)
	shape := src.l.Shape
	stride := dst.l.Stride[d]
	walk(shape, []Layout{along(dst.l, shape, d), onlyDim(ids.l, shape, d), src.l}, func(_ int, o []int) {
		copyElem(out, o[0]+int(x.i(o[1]))*stride, s, o[2])
	})
	return nil
}

func (b *hipBackend) indexAssign(dst, ids, src view, d int) error {
	shape := src.l.Shape
	size := dst.st.dtype.Size()
	pd, pi, ps := ptr(dst), ptr(ids), ptr(src)
	n, stride := int64(dst.l.Shape[d]), int64(dst.l.Stride[d])
	inner := shape[d+1:]
	dstInner := Layout{Shape: inner, Stride: dst.l.Stride[d+1:]}
	srcInner := Layout{Shape: inner, Stride: src.l.Stride[d+1:]}
	if rowlen := inner.Elems(); rowlen >= minRow && dstInner.IsContiguous() && srcInner.IsContiguous() {
		// Whole rows: a block copies each.
		outer := shape[:d+1]
		rows := makeIndex(outer, true,
			along(Layout{Shape: outer, Stride: dst.l.Stride[:d+1]}, outer, d),
			onlyDim(ids.l, outer, d),
			Layout{Shape: outer, Stride: src.l.Stride[:d+1]})
		nrows := outer.Elems()
		if rowsAligned(rows, size, pd) && pointerAligned(ps, rows, 2, size) && stride*int64(size)%16 == 0 {
			rows.Flags |= 1
		}
		return b.launch(kernelNames.putRows[ids.st.dtype][size], b.rowGrid(nrows), block1D, func(a *hip.Args) {
			hip.ArgValue(a, rows).Uint64(uint64(nrows)).Uint64(uint64(rowlen)).Ptr(pi).Ptr(ps).Ptr(pd).Int64(n).Int64(stride)
		})
	}
	ne := shape.Elems()
	ix := makeIndex(shape, true, along(dst.l, shape, d), onlyDim(ids.l, shape, d), src.l)
	return b.launch(kernelNames.put[ids.st.dtype][size], b.grid(ne, 1), block1D, func(a *hip.Args) {
		hip.ArgValue(a, ix).Uint64(uint64(ne)).Ptr(pi).Ptr(ps).Ptr(pd).Int64(n).Int64(stride)
	})
}

// pointerAligned reports whether every row start of operand t of a rows
// index is 16-byte aligned, from base p.
func pointerAligned(p hip.DevicePtr, ix kIndex, t, size int) bool {
	if p%16 != 0 {
		return false
	}
	for d := range ix.Rank {
		if ix.Strides[t][d]*int64(size)%16 != 0 {
			return false
		}
	}
	return true
}
