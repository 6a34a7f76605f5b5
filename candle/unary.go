package candle

// unary runs an elementwise op into a fresh contiguous tensor of the same
// shape and dtype.
func (t *Tensor) unary(name string, op unaryOp, p0, p1 float64) (*Tensor, error) {
	if err := t.alive(name); err != nil {
		return nil, err
	}
	if !op.takes(t.DType()) {
		return nil, pkg.Errorf(name, ErrDType, "takes a float tensor, not %s (convert with ToDType)", t.DType())
	}
	out, err := newOutput(name, t.st.dev, t.DType(), t.layout.Shape, t)
	if err != nil || out.Elems() == 0 {
		return out, err
	}
	if err := t.st.dev.backend().unary(op, [2]float64{p0, p1}, t.v(), out.st); err != nil {
		out.Close()
		return nil, pkg.Wrap(name, err)
	}
	return out, nil
}

// Neg is -x.
func (t *Tensor) Neg() (*Tensor, error) { return t.unary("Tensor.Neg", opNeg, 0, 0) }

// Recip is 1/x.
func (t *Tensor) Recip() (*Tensor, error) { return t.unary("Tensor.Recip", opRecip, 0, 0) }

// Exp is eˣ.
func (t *Tensor) Exp() (*Tensor, error) { return t.unary("Tensor.Exp", opExp, 0, 0) }

// Log is the natural logarithm.
func (t *Tensor) Log() (*Tensor, error) { return t.unary("Tensor.Log", opLog, 0, 0) }

// Sin is the sine.
func (t *Tensor) Sin() (*Tensor, error) { return t.unary("Tensor.Sin", opSin, 0, 0) }

// Cos is the cosine.
func (t *Tensor) Cos() (*Tensor, error) { return t.unary("Tensor.Cos", opCos, 0, 0) }

// Tanh is the hyperbolic tangent.
func (t *Tensor) Tanh() (*Tensor, error) { return t.unary("Tensor.Tanh", opTanh, 0, 0) }

// Erf is the error function.
func (t *Tensor) Erf() (*Tensor, error) { return t.unary("Tensor.Erf", opErf, 0, 0) }

// Ceil rounds up (integers stay as they are).
func (t *Tensor) Ceil() (*Tensor, error) { return t.unary("Tensor.Ceil", opCeil, 0, 0) }

// Floor rounds down (integers stay as they are).
func (t *Tensor) Floor() (*Tensor, error) { return t.unary("Tensor.Floor", opFloor, 0, 0) }

// Round rounds to the nearest integer, half away from zero.
func (t *Tensor) Round() (*Tensor, error) { return t.unary("Tensor.Round", opRound, 0, 0) }

// Abs is |x|.
func (t *Tensor) Abs() (*Tensor, error) { return t.unary("Tensor.Abs", opAbs, 0, 0) }

// Sqr is x².
func (t *Tensor) Sqr() (*Tensor, error) { return t.unary("Tensor.Sqr", opSqr, 0, 0) }

// Sqrt is the square root.
func (t *Tensor) Sqrt() (*Tensor, error) { return t.unary("Tensor.Sqrt", opSqrt, 0, 0) }

// Gelu is GELU with the tanh approximation:
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
func (t *Tensor) Gelu() (*Tensor, error) { return t.unary("Tensor.Gelu", opGelu, 0, 0) }

// GeluErf is the exact GELU: 0.5·x·(1 + erf(x/√2)).
func (t *Tensor) GeluErf() (*Tensor, error) { return t.unary("Tensor.GeluErf", opGeluErf, 0, 0) }

// Relu is max(x, 0).
func (t *Tensor) Relu() (*Tensor, error) { return t.unary("Tensor.Relu", opRelu, 0, 0) }

// Silu is x·sigmoid(x).
func (t *Tensor) Silu() (*Tensor, error) { return t.unary("Tensor.Silu", opSilu, 0, 0) }

// Sigmoid is 1/(1 + e⁻ˣ).
func (t *Tensor) Sigmoid() (*Tensor, error) { return t.unary("Tensor.Sigmoid", opSigmoid, 0, 0) }

// Sign is -1, 0 or 1 (0 for NaN).
func (t *Tensor) Sign() (*Tensor, error) { return t.unary("Tensor.Sign", opSign, 0, 0) }

// NormCDF is the standard normal distribution's CDF.
func (t *Tensor) NormCDF() (*Tensor, error) { return t.unary("Tensor.NormCDF", opNormCDF, 0, 0) }

// Elu is x for x ≥ 0, else alpha·(eˣ - 1).
func (t *Tensor) Elu(alpha float64) (*Tensor, error) { return t.unary("Tensor.Elu", opElu, alpha, 0) }

// Powf is xᵉ.
func (t *Tensor) Powf(e float64) (*Tensor, error) { return t.unary("Tensor.Powf", opPowf, e, 0) }

// Clamp limits every element to [lo, hi].
func (t *Tensor) Clamp(lo, hi float64) (*Tensor, error) {
	if !(lo <= hi) {
		return nil, pkg.Errorf("Tensor.Clamp", ErrArgument, "low %v is above high %v", lo, hi)
	}
	return t.unary("Tensor.Clamp", opClamp, lo, hi)
}

// Affine is x·mul + add.
func (t *Tensor) Affine(mul, add float64) (*Tensor, error) {
	return t.unary("Tensor.Affine", opAffine, mul, add)
}
