package candle

// The index ops take indices of dtype U8, U32 or I64. An index out of
// range is an ErrIndex on the CPU device. On a GPU the op cannot stop:
// IndexSelect and Gather write 0 for it, and Scatter, ScatterAdd and
// IndexAdd skip it.

func checkIndices(op string, t, ids *Tensor) error {
	if err := alive(op, t, ids); err != nil {
		return err
	}
	if err := sameDevice(op, t.st.dev, ids); err != nil {
		return err
	}
	if !ids.DType().IsInt() {
		return pkg.Errorf(op, ErrDType, "%s indices: want u8, u32 or i64", ids.DType())
	}
	return nil
}

// IndexSelect picks entries of dim d by a 1-D tensor of indices: the
// result has t's shape with dim d of len(ids), and its entry i along d is
// t's entry ids[i].
func (t *Tensor) IndexSelect(ids *Tensor, d int) (*Tensor, error) {
	const op = "Tensor.IndexSelect"
	if err := checkIndices(op, t, ids); err != nil {
		return nil, err
	}
	d, err := dim(op, d, t.Rank())
	if err != nil {
		return nil, err
	}
	if ids.Rank() != 1 {
		return nil, pkg.Errorf(op, ErrShape, "indices of shape %v: want 1-D", ids.layout.Shape)
	}
	shape := t.Shape()
	shape[d] = ids.layout.Shape[0]
	return t.take(op, ids, shape, d, backend.indexSelect)
}

// take makes a tensor of shape whose entries come from t at the indices,
// by one of the backend's reads (indexSelect, gather).
func (t *Tensor) take(op string, ids *Tensor, shape Shape, d int, read func(backend, view, view, int, *Storage) error) (*Tensor, error) {
	out, err := newOutput(op, t.st.dev, t.DType(), shape, t, ids)
	if err != nil || out.Elems() == 0 {
		return out, err
	}
	if t.layout.Shape[d] == 0 {
		out.Close()
		return nil, pkg.Errorf(op, ErrIndex, "indices into dim %d of size 0", d)
	}
	if err := read(t.st.dev.backend(), t.v(), ids.v(), d, out.st); err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return out, nil
}

// Gather picks, along dim d, the entries the indices name: ids has t's
// rank and dims no larger than t's (but along d), and the result has ids'
// shape with out[..., j, ...] = t[..., ids[..., j, ...], ...].
func (t *Tensor) Gather(ids *Tensor, d int) (*Tensor, error) {
	const op = "Tensor.Gather"
	if err := checkIndices(op, t, ids); err != nil {
		return nil, err
	}
	d, err := dim(op, d, t.Rank())
	if err != nil {
		return nil, err
	}
	if err := fitsIn(op, ids, t, d); err != nil {
		return nil, err
	}
	return t.take(op, ids, ids.layout.Shape, d, backend.gather)
}

// fitsIn checks that ids has t's rank and no dim larger than t's, but d.
func fitsIn(op string, ids, t *Tensor, d int) error {
	if ids.Rank() != t.Rank() {
		return pkg.Errorf(op, ErrShape, "indices of shape %v for a tensor %v: the ranks differ", ids.layout.Shape, t.layout.Shape)
	}
	for k, n := range ids.layout.Shape {
		if k != d && n > t.layout.Shape[k] {
			return pkg.Errorf(op, ErrShape, "indices of shape %v for a tensor %v: dim %d is larger", ids.layout.Shape, t.layout.Shape, k)
		}
	}
	return nil
}

// Scatter is a copy of t with src's entries written along dim d where the
// indices say: out[..., ids[..., j, ...], ...] = src[..., j, ...]. ids and
// src share a shape that fits in t but along d. Where indices repeat, one
// of the writes wins.
func (t *Tensor) Scatter(ids, src *Tensor, d int) (*Tensor, error) {
	return t.scatter("Tensor.Scatter", ids, src, d, false)
}

// ScatterAdd is Scatter that adds src's entries to t's instead of
// replacing them; repeated indices add up.
func (t *Tensor) ScatterAdd(ids, src *Tensor, d int) (*Tensor, error) {
	return t.scatter("Tensor.ScatterAdd", ids, src, d, true)
}

func (t *Tensor) scatter(op string, ids, src *Tensor, d int, add bool) (*Tensor, error) {
	d, err := checkPut(op, t, ids, src, d)
	if err != nil {
		return nil, err
	}
	if !ids.layout.Shape.Equal(src.layout.Shape) {
		return nil, pkg.Errorf(op, ErrShape, "indices of shape %v and a source %v: want one shape", ids.layout.Shape, src.layout.Shape)
	}
	if err := fitsIn(op, ids, t, d); err != nil {
		return nil, err
	}
	out, err := t.Copy()
	if err != nil || ids.Elems() == 0 {
		return out, err
	}
	if err := t.st.dev.backend().scatter(out.st, out.layout.Shape, ids.v(), src.v(), d, add); err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return out, nil
}

// checkPut checks the operands of the ops that write a source into a copy
// of t at indices along d, and resolves d.
func checkPut(op string, t, ids, src *Tensor, d int) (int, error) {
	if err := checkIndices(op, t, ids); err != nil {
		return 0, err
	}
	if err := src.alive(op); err != nil {
		return 0, err
	}
	if err := sameDevice(op, t.st.dev, src); err != nil {
		return 0, err
	}
	if src.DType() != t.DType() {
		return 0, pkg.Errorf(op, ErrDType, "a %s source for a %s tensor", src.DType(), t.DType())
	}
	return dim(op, d, t.Rank())
}

// IndexAdd is a copy of t with src added along dim d at the indices: for a
// 1-D ids of len(src's dim d), out[..., ids[i], ...] += src[..., i, ...].
// src has t's other dims; repeated indices add up.
func (t *Tensor) IndexAdd(ids, src *Tensor, d int) (*Tensor, error) {
	const op = "Tensor.IndexAdd"
	d, err := checkPut(op, t, ids, src, d)
	if err != nil {
		return nil, err
	}
	if ids.Rank() != 1 || src.Rank() != t.Rank() || ids.layout.Shape[0] != src.layout.Shape[d] {
		return nil, pkg.Errorf(op, ErrShape, "indices %v and a source %v for a tensor %v: want 1-D indices as long as the source's dim %d", ids.layout.Shape, src.layout.Shape, t.layout.Shape, d)
	}
	for k := range t.layout.Shape {
		if k != d && src.layout.Shape[k] != t.layout.Shape[k] {
			return nil, pkg.Errorf(op, ErrShape, "a source %v for a tensor %v: dim %d differs", src.layout.Shape, t.layout.Shape, k)
		}
	}
	out, err := t.Copy()
	if err != nil || src.Elems() == 0 {
		return out, err
	}
	if err := t.st.dev.backend().indexAdd(out.st, out.layout.Shape, ids.v(), src.v(), d); err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return out, nil
}
