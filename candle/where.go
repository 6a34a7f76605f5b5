package candle

// Where picks, elementwise and broadcasting, t where cond is nonzero and f
// elsewhere. cond is U8, U32 or I64; t and f share a dtype.
func Where(cond, t, f *Tensor) (*Tensor, error) {
	const op = "Where"
	if err := alive(op, cond, t, f); err != nil {
		return nil, err
	}
	if err := sameDevice(op, t.st.dev, cond, f); err != nil {
		return nil, err
	}
	if !cond.DType().IsInt() {
		return nil, pkg.Errorf(op, ErrDType, "a %s condition: want u8, u32 or i64", cond.DType())
	}
	if t.DType() != f.DType() {
		return nil, pkg.Errorf(op, ErrDType, "%s and %s choices", t.DType(), f.DType())
	}
	shape, err := BroadcastShapes(cond.layout.Shape, t.layout.Shape)
	if err == nil {
		shape, err = BroadcastShapes(shape, f.layout.Shape)
	}
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	var ls [3]Layout
	for i, x := range []*Tensor{cond, t, f} {
		if ls[i], err = x.layout.BroadcastAs(shape); err != nil {
			return nil, pkg.Wrap(op, err)
		}
	}
	out, err := newOutput(op, t.st.dev, t.DType(), shape, cond, t, f)
	if err != nil || out.Elems() == 0 {
		return out, err
	}
	if err := t.st.dev.backend().where(view{cond.st, ls[0]}, view{t.st, ls[1]}, view{f.st, ls[2]}, out.st); err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return out, nil
}
