package candle

// ToDType converts the elements to another dtype, in a fresh contiguous
// tensor (a new reference to t itself for its own dtype). Floats round to
// nearest, ties to even; floats become integers truncated toward zero and
// saturated to the dtype's range (NaN becomes 0); integers keep their low
// bits.
func (t *Tensor) ToDType(dt DType) (*Tensor, error) {
	const op = "Tensor.ToDType"
	if err := t.alive(op); err != nil {
		return nil, err
	}
	if !dt.valid() {
		return nil, pkg.Errorf(op, ErrDType, "%v is not a dtype", dt)
	}
	if dt == t.DType() {
		return t.view(op, t.layout.clone())
	}
	out, err := newOutput(op, t.st.dev, dt, t.layout.Shape, t)
	if err != nil || out.Elems() == 0 {
		return out, err
	}
	if err := t.st.dev.backend().cast(t.v(), out.st); err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return out, nil
}
