package candle

// SlicedWeights are Weights that load part of a tensor: elements [start,
// start+n) of dim d, every other dim whole. Only that part's bytes are
// read from the file, which is how each rank of a tensor-parallel model
// loads its own rows or columns of a projection without the whole
// matrix. candle/safetensors and candle/gguf implement it, as does
// candle/nn's TensorWeights.
type SlicedWeights interface {
	Weights
	// LoadSlice is Load of part of a tensor.
	LoadSlice(name string, dev Device, d, start, n int) (*Tensor, error)
	// LoadQSlice is LoadQ of part of a quantized tensor: along its last
	// dim, start and n are whole blocks (GGMLType.BlockSize).
	LoadQSlice(name string, dev Device, d, start, n int) (*QTensor, error)
}

// sliceBytes is part of the bytes of a row-major tensor of shape whose
// elements are elem bytes each: elements [start, start+n) of dim d. When
// the dims before d are all 1 the part is one run of the bytes, returned
// in place; else the runs are copied into one fresh buffer.
func sliceBytes(op string, b []byte, shape Shape, elem, d, start, n int) ([]byte, Shape, error) {
	if d < 0 || d >= len(shape) {
		return nil, nil, pkg.Errorf(op, ErrShape, "dim %d of a tensor of %d dims", d, len(shape))
	}
	if start < 0 || n < 1 || start+n > shape[d] {
		return nil, nil, pkg.Errorf(op, ErrIndex, "elements [%d, %d) of dim %d, which has %d", start, start+n, d, shape[d])
	}
	inner := elem
	for _, x := range shape[d+1:] {
		inner *= x
	}
	outer := leading(shape, d)
	out := shape.Clone()
	out[d] = n
	row := shape[d] * inner // bytes of one outer index
	if outer == 1 {
		return b[start*inner : (start+n)*inner], out, nil
	}
	buf := make([]byte, 0, outer*n*inner)
	for o := range outer {
		at := o*row + start*inner
		buf = append(buf, b[at:at+n*inner]...)
	}
	return buf, out, nil
}

// LoadSlice copies part of the tensor of dt and shape at bytes s of the
// file to dev: elements [start, start+n) of dim d (SlicedWeights). Only
// that part is read; it reaches a HIP device as one staged copy.
func (m *MappedFile) LoadSlice(dev Device, dt DType, s Span, shape []int, d, start, n int) (*Tensor, error) {
	const op = "MappedFile.LoadSlice"
	if err := checkNew(op, dev, dt, shape); err != nil {
		return nil, err
	}
	if err := m.check(op, s, Shape(shape).Elems()*dt.Size()); err != nil {
		return nil, err
	}
	b, part, err := sliceBytes(op, m.mapped[s.Start:s.End], shape, dt.Size(), d, start, n)
	if err != nil {
		return nil, err
	}
	t, err := FromBytes(dev, dt, b, part...)
	if _, ok := dev.(*HIPDevice); ok && err == nil {
		m.addStaged(Span{0, len(b)})
	}
	return t, pkg.Wrap(op, err)
}

// LoadQSlice copies part of a quantized tensor of typ and shape at bytes
// s of the file to dev, as LoadSlice: along the last dim, start and n are
// whole blocks of typ.
func (m *MappedFile) LoadQSlice(dev Device, typ GGMLType, s Span, shape []int, d, start, n int) (*QTensor, error) {
	const op = "MappedFile.LoadQSlice"
	if dev == nil {
		return nil, pkg.Errorf(op, ErrDevice, "nil device")
	}
	size, err := checkQShape(op, typ, shape)
	if err != nil {
		return nil, err
	}
	if err := m.check(op, s, size); err != nil {
		return nil, err
	}
	b, part, err := sliceQBytes(op, m.mapped[s.Start:s.End], typ, shape, d, start, n)
	if err != nil {
		return nil, err
	}
	q, err := NewQTensor(dev, typ, b, part...)
	if _, ok := dev.(*HIPDevice); ok && err == nil {
		m.addStaged(Span{0, len(b)})
	}
	return q, pkg.Wrap(op, err)
}

// sliceQBytes is sliceBytes of a quantized tensor's blocks: its last dim
// counted in blocks, so that a slice along it is whole blocks.
func sliceQBytes(op string, b []byte, typ GGMLType, shape []int, d, start, n int) ([]byte, Shape, error) {
	last := len(shape) - 1
	bs := typ.BlockSize()
	blocks := Shape(shape).Clone()
	blocks[last] /= bs
	if d == last {
		if start%bs != 0 || n%bs != 0 {
			return nil, nil, pkg.Errorf(op, ErrShape, "elements [%d, %d) of the last dim of a %s tensor: a slice along it takes whole blocks of %d", start, start+n, typ, bs)
		}
		start, n = start/bs, n/bs
	}
	raw, part, err := sliceBytes(op, b, blocks, typ.TypeSize(), d, start, n)
	if err != nil {
		return nil, nil, err
	}
	part[last] *= bs
	return raw, part, nil
}
