package candle

// Cat concatenates tensors along dim d: they share their dtype, device and
// every other dim.
func Cat(ts []*Tensor, d int) (*Tensor, error) {
	const op = "Cat"
	if len(ts) == 0 {
		return nil, pkg.Errorf(op, ErrArgument, "no tensors")
	}
	if err := alive(op, ts...); err != nil {
		return nil, err
	}
	first := ts[0]
	if err := sameDevice(op, first.st.dev, ts...); err != nil {
		return nil, err
	}
	d, err := dim(op, d, first.Rank())
	if err != nil {
		return nil, err
	}
	shape := first.Shape()
	shape[d] = 0
	for i, t := range ts {
		if t.DType() != first.DType() {
			return nil, pkg.Errorf(op, ErrDType, "tensor %d is %s, tensor 0 %s", i, t.DType(), first.DType())
		}
		if t.Rank() != first.Rank() {
			return nil, pkg.Errorf(op, ErrShape, "tensor %d has shape %v, tensor 0 %v", i, t.layout.Shape, first.layout.Shape)
		}
		for k := range shape {
			if k != d && t.layout.Shape[k] != first.layout.Shape[k] {
				return nil, pkg.Errorf(op, ErrShape, "tensor %d has shape %v, tensor 0 %v: they differ in dim %d, not only in dim %d", i, t.layout.Shape, first.layout.Shape, k, d)
			}
		}
		shape[d] += t.layout.Shape[d]
	}
	out, err := newOutput(op, first.st.dev, first.DType(), shape, ts...)
	if err != nil || out.Elems() == 0 {
		return out, err
	}
	at := 0
	for _, t := range ts {
		n := t.layout.Shape[d]
		if n > 0 {
			dst, _ := out.layout.Narrow(d, at, n)
			if err := first.st.dev.backend().copy(t.v(), view{out.st, dst}); err != nil {
				out.Close()
				return nil, pkg.Wrap(op, err)
			}
		}
		at += n
	}
	return out, nil
}

// SliceAssign writes src into t along dim d from start: t's elements
// [start, start+src's dim d) of that dim take src's values. It is the one
// op that writes in place (for KV caches): every view of t's storage sees
// the change. src has t's dtype, device and other dims.
func (t *Tensor) SliceAssign(src *Tensor, d, start int) error {
	const op = "Tensor.SliceAssign"
	if err := alive(op, t, src); err != nil {
		return err
	}
	if err := sameDevice(op, t.st.dev, src); err != nil {
		return err
	}
	if t.DType() != src.DType() {
		return pkg.Errorf(op, ErrDType, "%s source for a %s tensor", src.DType(), t.DType())
	}
	d, err := dim(op, d, t.Rank())
	if err != nil {
		return err
	}
	if src.Rank() != t.Rank() {
		return pkg.Errorf(op, ErrShape, "source %v for a tensor %v: the ranks differ", src.layout.Shape, t.layout.Shape)
	}
	for k := range t.layout.Shape {
		if k != d && src.layout.Shape[k] != t.layout.Shape[k] {
			return pkg.Errorf(op, ErrShape, "source %v for a tensor %v: dim %d differs", src.layout.Shape, t.layout.Shape, k)
		}
	}
	dst, err := t.layout.Narrow(d, start, src.layout.Shape[d])
	if err != nil {
		return pkg.Errorf(op, ErrShape, "%d rows of dim %d from %d do not fit in %d", src.layout.Shape[d], d, start, t.layout.Shape[d])
	}
	if src.Elems() == 0 {
		return nil
	}
	if hasOverlap(dst) {
		return pkg.Errorf(op, ErrArgument, "the destination %v repeats elements (a broadcast view): a write would be ambiguous", dst)
	}
	return pkg.Wrap(op, t.st.dev.backend().copy(src.v(), view{t.st, dst}))
}

// hasOverlap reports whether a layout reaches an element twice (a stride
// 0 over a dim of more than one element).
func hasOverlap(l Layout) bool {
	for i, s := range l.Stride {
		if s == 0 && l.Shape[i] > 1 {
			return true
		}
	}
	return false
}
