package candle

import "github.com/rocm-go/rocm/errs"

// Blocks is the quantized tensor's blocks as a U8 tensor of (rows, row
// bytes), a row for each row of its last dim: a view that shares the
// tensor's memory, for the ops that move whole rows (Narrow, Cat,
// Reshape and Transpose over the rows, IndexSelect) and for reading the
// blocks back (ToBytes). QTensorFromBlocks makes a QTensor of the result.
func (q *QTensor) Blocks() (*Tensor, error) {
	const op = "QTensor.Blocks"
	if err := q.alive(op); err != nil {
		return nil, err
	}
	k := q.shape[len(q.shape)-1]
	row, err := q.typ.RowBytes(k)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	rows := 0
	if k > 0 {
		rows = q.shape.Elems() / k
	}
	if !q.st.retain() {
		return nil, pkg.Errorf(op, errs.ErrClosed, "quantized tensor %s %v is closed", q.typ, q.shape)
	}
	return newTensor(q.st, ContiguousLayout(Shape{rows, row})), nil
}

// QTensorFromBlocks makes a quantized tensor of typ and shape (elements;
// the last dim a multiple of typ's block) of blocks, a U8 tensor that
// holds its blocks row after row in row-major order (any shape of the
// right size: what Blocks gives, or rows moved by tensor ops). It shares
// the memory of contiguous blocks that fill their storage, and copies
// other views.
func QTensorFromBlocks(blocks *Tensor, typ GGMLType, shape ...int) (*QTensor, error) {
	const op = "QTensorFromBlocks"
	if err := alive(op, blocks); err != nil {
		return nil, err
	}
	if blocks.DType() != U8 {
		return nil, pkg.Errorf(op, errs.ErrDType, "blocks of %s: want u8", blocks.DType())
	}
	size, err := checkQShape(op, typ, shape)
	if err != nil {
		return nil, err
	}
	if blocks.Elems() != size {
		return nil, pkg.Errorf(op, errs.ErrShape, "%d bytes of blocks for %s %v: want %d", blocks.Elems(), typ, Shape(shape), size)
	}
	src := blocks
	if !blocks.layout.IsContiguous() || blocks.layout.Offset != 0 || blocks.st.n != size {
		c, err := blocks.Copy()
		if err != nil {
			return nil, pkg.Wrap(op, err)
		}
		defer c.Close()
		src = c
	}
	if !src.st.retain() {
		return nil, pkg.Errorf(op, errs.ErrClosed, "the blocks are closed")
	}
	return &QTensor{st: src.st, typ: typ, shape: Shape(shape).Clone()}, nil
}
