package nn

import (
	"slices"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/errs"
)

// VarBuilder maps a model's weights (candle.Weights: safetensors files, a
// GGUF file, tensors in memory) onto named parameters: Get loads one by
// name onto the builder's device in its dtype, checking its shape; GetQ
// loads a quantized one as it is. Prefix gives a builder for a sub-module
// ("model.layers.0"). The weights stay the caller's to close.
type VarBuilder struct {
	w      candle.Weights
	prefix string
	dev    candle.Device
	dtype  candle.DType
}

// NewVarBuilder loads w's tensors onto dev, converted to dtype where a
// tensor holds another float dtype.
func NewVarBuilder(w candle.Weights, dev candle.Device, dtype candle.DType) (*VarBuilder, error) {
	const op = "NewVarBuilder"
	switch {
	case w == nil:
		return nil, pkg.Errorf(op, errs.ErrArgument, "no weights")
	case dev == nil:
		return nil, pkg.Errorf(op, errs.ErrDevice, "nil device")
	case !dtype.IsFloat():
		return nil, pkg.Errorf(op, errs.ErrDType, "%s: weights load as f32, f16, bf16 or f64", dtype)
	}
	return &VarBuilder{w: w, dev: dev, dtype: dtype}, nil
}

// Weights is what the builder loads from.
func (vb *VarBuilder) Weights() candle.Weights { return vb.w }

// Prefix is a builder whose names start with prefix and a dot.
func (vb *VarBuilder) Prefix(prefix string) *VarBuilder {
	c := *vb
	c.prefix = vb.name(prefix)
	return &c
}

// Device is where the builder loads tensors.
func (vb *VarBuilder) Device() candle.Device { return vb.dev }

// DType is the dtype the builder loads float tensors as.
func (vb *VarBuilder) DType() candle.DType { return vb.dtype }

func (vb *VarBuilder) name(n string) string {
	if vb.prefix == "" {
		return n
	}
	return vb.prefix + "." + n
}

// Contains reports whether the weights hold a tensor of the name.
func (vb *VarBuilder) Contains(name string) bool {
	_, ok := vb.w.Info(vb.name(name))
	return ok
}

// Info describes the tensor of the name.
func (vb *VarBuilder) Info(name string) (candle.WeightInfo, bool) { return vb.w.Info(vb.name(name)) }

// info is the tensor of a full name, checked against shape.
func (vb *VarBuilder) info(op, full string, shape []int) (candle.WeightInfo, error) {
	info, ok := vb.w.Info(full)
	if !ok {
		return info, pkg.Errorf(op, errs.ErrNotFound, "the weights have no tensor %q", full)
	}
	if !slices.Equal(info.Shape, shape) {
		return info, pkg.Errorf(op, errs.ErrShape, "tensor %q is %v in the weights; the model wants %v", full, []int(info.Shape), shape)
	}
	return info, nil
}

// Get loads a tensor by name, checked against shape, as the builder's
// dtype (float tensors; a quantized one is dequantized) or its own
// (integer ones). A missing tensor or another shape is an error that
// names it.
func (vb *VarBuilder) Get(name string, shape ...int) (*candle.Tensor, error) {
	const op = "VarBuilder.Get"
	full := vb.name(name)
	info, err := vb.info(op, full, shape)
	if err != nil {
		return nil, err
	}
	if info.Quantized {
		q, err := vb.w.LoadQ(full, vb.dev)
		if err != nil {
			return nil, pkg.Wrap(op, err)
		}
		defer q.Close()
		t, err := q.Dequantize(vb.dtype)
		return t, pkg.Wrap(op, err)
	}
	t, err := vb.w.Load(full, vb.dev)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	return vb.cast(op, t)
}

// GetSlice loads part of a tensor by name, as Get: elements [start,
// start+n) of dim d, the whole tensor checked against shape. Weights that
// load slices (candle.SlicedWeights: safetensors and GGUF files) read
// only that part; others load the whole tensor and keep the part.
func (vb *VarBuilder) GetSlice(name string, d, start, n int, shape ...int) (*candle.Tensor, error) {
	const op = "VarBuilder.GetSlice"
	full := vb.name(name)
	info, err := vb.info(op, full, shape)
	if err != nil {
		return nil, err
	}
	if info.Quantized {
		q, err := vb.GetQSlice(name, d, start, n, shape...)
		if err != nil {
			return nil, err
		}
		defer q.Close()
		t, err := q.Dequantize(vb.dtype)
		return t, pkg.Wrap(op, err)
	}
	var t *candle.Tensor
	if sw, ok := vb.w.(candle.SlicedWeights); ok {
		t, err = sw.LoadSlice(full, vb.dev, d, start, n)
	} else {
		t, err = narrowed(vb.w.Load(full, vb.dev))(d, start, n)
	}
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	return vb.cast(op, t)
}

// cast is a loaded float tensor in the builder's dtype; it takes t.
func (vb *VarBuilder) cast(op string, t *candle.Tensor) (*candle.Tensor, error) {
	if !t.DType().IsFloat() || t.DType() == vb.dtype {
		return t, nil
	}
	defer t.Close()
	c, err := t.ToDType(vb.dtype)
	return c, pkg.Wrap(op, err)
}

// narrowed is a loaded tensor's part, contiguous; it takes the tensor.
func narrowed(t *candle.Tensor, err error) func(d, start, n int) (*candle.Tensor, error) {
	return func(d, start, n int) (*candle.Tensor, error) {
		if err != nil {
			return nil, err
		}
		defer t.Close()
		v, err := t.Narrow(d, start, n)
		if err != nil {
			return nil, err
		}
		defer v.Close()
		return v.Contiguous()
	}
}

// GetQSlice loads part of a quantized tensor by name as its blocks, as
// GetQ: elements [start, start+n) of dim d (whole blocks along the last
// dim), the whole tensor checked against shape.
func (vb *VarBuilder) GetQSlice(name string, d, start, n int, shape ...int) (*candle.QTensor, error) {
	const op = "VarBuilder.GetQSlice"
	full := vb.name(name)
	info, err := vb.info(op, full, shape)
	if err != nil {
		return nil, err
	}
	if !info.Quantized {
		return nil, pkg.Errorf(op, errs.ErrDType, "tensor %q is %s, not quantized: GetSlice it", full, info.Type)
	}
	sw, ok := vb.w.(candle.SlicedWeights)
	if !ok {
		return nil, pkg.Errorf(op, errs.ErrUnsupported, "tensor %q: these weights (%T) load no slices of quantized tensors", full, vb.w)
	}
	q, err := sw.LoadQSlice(full, vb.dev, d, start, n)
	return q, pkg.Wrap(op, err)
}

// GetQ loads a quantized tensor by name as its blocks, checked against
// shape (elements). A tensor that is not quantized is an error of kind
// errs.ErrDType: Get it.
func (vb *VarBuilder) GetQ(name string, shape ...int) (*candle.QTensor, error) {
	const op = "VarBuilder.GetQ"
	full := vb.name(name)
	info, err := vb.info(op, full, shape)
	if err != nil {
		return nil, err
	}
	if !info.Quantized {
		return nil, pkg.Errorf(op, errs.ErrDType, "tensor %q is %s, not quantized: Get it", full, info.Type)
	}
	q, err := vb.w.LoadQ(full, vb.dev)
	return q, pkg.Wrap(op, err)
}

// TensorWeights is candle.Weights of tensors in memory, on any device: a
// model's parameters computed in the program rather than read from a
// file. Load and LoadQ give new references to the tensors (copies when
// they are on another device), so closing what they return leaves the
// map's tensors as they are.
type TensorWeights struct {
	Tensors   map[string]*candle.Tensor
	Quantized map[string]*candle.QTensor
}

var _ candle.SlicedWeights = TensorWeights{}

// Names lists the tensors of both maps, sorted.
func (w TensorWeights) Names() []string {
	names := make([]string, 0, len(w.Tensors)+len(w.Quantized))
	for n := range w.Tensors {
		names = append(names, n)
	}
	for n := range w.Quantized {
		if _, dup := w.Tensors[n]; !dup {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// Info describes a tensor.
func (w TensorWeights) Info(name string) (candle.WeightInfo, bool) {
	if t, ok := w.Tensors[name]; ok && t != nil {
		return candle.WeightInfo{Shape: t.Shape(), Type: t.DType().String(), Dense: true, DType: t.DType()}, true
	}
	if q, ok := w.Quantized[name]; ok && q != nil {
		return candle.WeightInfo{Shape: q.Shape(), Type: q.Type().String(), Quantized: true, Quant: q.Type()}, true
	}
	return candle.WeightInfo{}, false
}

// Load is the tensor on dev (Tensor.ToDevice).
func (w TensorWeights) Load(name string, dev candle.Device) (*candle.Tensor, error) {
	const op = "TensorWeights.Load"
	t, ok := w.Tensors[name]
	if !ok || t == nil {
		if _, q := w.Quantized[name]; q {
			return nil, pkg.Errorf(op, errs.ErrDType, "tensor %q is quantized: LoadQ it", name)
		}
		return nil, pkg.Errorf(op, errs.ErrNotFound, "no tensor %q", name)
	}
	c, err := t.ToDevice(dev)
	return c, pkg.Wrap(op, err)
}

// LoadQ is the quantized tensor on dev, its blocks shared (or copied to
// another device).
func (w TensorWeights) LoadQ(name string, dev candle.Device) (*candle.QTensor, error) {
	const op = "TensorWeights.LoadQ"
	q, ok := w.Quantized[name]
	if !ok || q == nil {
		if _, d := w.Tensors[name]; d {
			return nil, pkg.Errorf(op, errs.ErrDType, "tensor %q is not quantized: Load it", name)
		}
		return nil, pkg.Errorf(op, errs.ErrNotFound, "no tensor %q", name)
	}
	b, err := q.Blocks()
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	defer b.Close()
	on, err := b.ToDevice(dev)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	defer on.Close()
	c, err := candle.QTensorFromBlocks(on, q.Type(), q.Shape()...)
	return c, pkg.Wrap(op, err)
}

// LoadSlice is part of the tensor on dev: elements [start, start+n) of
// dim d, contiguous.
func (w TensorWeights) LoadSlice(name string, dev candle.Device, d, start, n int) (*candle.Tensor, error) {
	t, err := narrowed(w.Load(name, dev))(d, start, n)
	return t, pkg.Wrap("TensorWeights.LoadSlice", err)
}

// LoadQSlice is part of the quantized tensor on dev: elements [start,
// start+n) of dim d, whole blocks along the last.
func (w TensorWeights) LoadQSlice(name string, dev candle.Device, d, start, n int) (*candle.QTensor, error) {
	const op = "TensorWeights.LoadQSlice"
	q, err := w.LoadQ(name, dev)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	defer q.Close()
	shape := q.Shape()
	bs, ts := q.Type().BlockSize(), q.Type().TypeSize()
	last := len(shape) - 1
	if len(shape) != 2 || d == last && (start%bs != 0 || n%bs != 0) {
		return nil, pkg.Errorf(op, errs.ErrShape, "%v along dim %d from %d, %d elements: slices of a 2-D tensor, whole blocks of %d along the last dim", []int(shape), d, start, n, bs)
	}
	part := shape.Clone()
	part[d] = n
	bstart, bn := start, n
	if d == last {
		bstart, bn = start/bs*ts, n/bs*ts
	}
	sb, err := narrowed(q.Blocks())(d, bstart, bn) // blocks: (rows, row bytes)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	defer sb.Close()
	c, err := candle.QTensorFromBlocks(sb, q.Type(), part...)
	return c, pkg.Wrap(op, err)
}

// TransferStats is zero: nothing is read from a file.
func (TensorWeights) TransferStats() candle.TransferStats { return candle.TransferStats{} }

// Close does nothing: the tensors are the caller's.
func (TensorWeights) Close() error { return nil }
