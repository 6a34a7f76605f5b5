package candle

// binary runs an elementwise op on two tensors of one dtype, broadcast to
// a common shape, into a fresh contiguous tensor (U8 for comparisons).
func (t *Tensor) binary(name string, op binaryOp, o *Tensor) (*Tensor, error) {
	if err := alive(name, t, o); err != nil {
		return nil, err
	}
	if err := sameDevice(name, t.st.dev, o); err != nil {
		return nil, err
	}
	if t.DType() != o.DType() {
		return nil, pkg.Errorf(name, ErrDType, "%s and %s operands: convert one with ToDType", t.DType(), o.DType())
	}
	shape, a, b := t.layout.Shape, t.layout, o.layout
	if !shape.Equal(o.layout.Shape) {
		var err error
		if shape, err = BroadcastShapes(t.layout.Shape, o.layout.Shape); err != nil {
			return nil, pkg.Wrap(name, err)
		}
		if a, err = t.layout.BroadcastAs(shape); err != nil {
			return nil, pkg.Wrap(name, err)
		}
		if b, err = o.layout.BroadcastAs(shape); err != nil {
			return nil, pkg.Wrap(name, err)
		}
	}
	dt := t.DType()
	if op.isCmp() {
		dt = U8
	}
	out, err := newOutput(name, t.st.dev, dt, shape, t, o)
	if err != nil || out.Elems() == 0 {
		return out, err
	}
	if err := t.st.dev.backend().binary(op, view{t.st, a}, view{o.st, b}, out.st); err != nil {
		out.Close()
		return nil, pkg.Wrap(name, err)
	}
	return out, nil
}

// Add is t + o, broadcasting.
func (t *Tensor) Add(o *Tensor) (*Tensor, error) { return t.binary("Tensor.Add", opAdd, o) }

// Sub is t - o, broadcasting.
func (t *Tensor) Sub(o *Tensor) (*Tensor, error) { return t.binary("Tensor.Sub", opSub, o) }

// Mul is t·o, broadcasting.
func (t *Tensor) Mul(o *Tensor) (*Tensor, error) { return t.binary("Tensor.Mul", opMul, o) }

// Div is t/o, broadcasting; integer division truncates, and gives 0 for a
// zero divisor.
func (t *Tensor) Div(o *Tensor) (*Tensor, error) { return t.binary("Tensor.Div", opDiv, o) }

// Maximum is the larger of t and o, broadcasting; NaN propagates.
func (t *Tensor) Maximum(o *Tensor) (*Tensor, error) { return t.binary("Tensor.Maximum", opMaximum, o) }

// Minimum is the smaller of t and o, broadcasting; NaN propagates.
func (t *Tensor) Minimum(o *Tensor) (*Tensor, error) { return t.binary("Tensor.Minimum", opMinimum, o) }

// Eq is 1 where t == o, else 0 (U8).
func (t *Tensor) Eq(o *Tensor) (*Tensor, error) { return t.binary("Tensor.Eq", opEq, o) }

// Ne is 1 where t != o, else 0 (U8).
func (t *Tensor) Ne(o *Tensor) (*Tensor, error) { return t.binary("Tensor.Ne", opNe, o) }

// Lt is 1 where t < o, else 0 (U8).
func (t *Tensor) Lt(o *Tensor) (*Tensor, error) { return t.binary("Tensor.Lt", opLt, o) }

// Le is 1 where t <= o, else 0 (U8).
func (t *Tensor) Le(o *Tensor) (*Tensor, error) { return t.binary("Tensor.Le", opLe, o) }

// Gt is 1 where t > o, else 0 (U8).
func (t *Tensor) Gt(o *Tensor) (*Tensor, error) { return t.binary("Tensor.Gt", opGt, o) }

// Ge is 1 where t >= o, else 0 (U8).
func (t *Tensor) Ge(o *Tensor) (*Tensor, error) { return t.binary("Tensor.Ge", opGe, o) }
