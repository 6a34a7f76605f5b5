package candle

import (
	"math"
	"sync/atomic"
)

// QTensor is a block-quantized tensor (GGMLType) kept as its blocks on
// its device: a GGUF file's weights, read without expanding them. Its
// last dim is a whole number of the type's blocks. A 2-D QTensor of
// shape (n, k) is a linear layer's weight: x.QMatmul(w) is x · wᵀ,
// dequantized on the fly, and w.Rows(ids) an embedding lookup.
//
// Close a QTensor when done; its memory goes back to the device.
type QTensor struct {
	st     *Storage // U8: the blocks, row after row
	typ    GGMLType
	shape  Shape
	closed atomic.Bool
}

// Type is the tensor's GGML type.
func (q *QTensor) Type() GGMLType { return q.typ }

// Shape is a copy of the tensor's dims (elements, not blocks).
func (q *QTensor) Shape() Shape { return q.shape.Clone() }

// Elems is the number of elements the blocks hold.
func (q *QTensor) Elems() int { return q.shape.Elems() }

// Device is where the blocks are.
func (q *QTensor) Device() Device { return q.st.dev }

// Bytes is the size of the blocks.
func (q *QTensor) Bytes() int { return q.st.Bytes() }

// Close gives the tensor's memory back to its device; closing twice is a
// no-op.
func (q *QTensor) Close() error {
	if q.closed.Swap(true) {
		return nil
	}
	q.st.release()
	return nil
}

func (q *QTensor) alive(op string) error {
	if q == nil {
		return pkg.Errorf(op, ErrArgument, "nil quantized tensor")
	}
	if q.closed.Load() {
		return pkg.Errorf(op, ErrClosed, "quantized tensor %s %v is closed", q.typ, q.shape)
	}
	return nil
}

// quantizable reports whether QTensor takes typ: the block-quantized
// types but Q8_1 (an activation format, never a weight's).
func quantizable(typ GGMLType) bool { return typ.Quantized() && typ != GGMLQ8_1 }

// checkQShape checks a quantized tensor's type and shape and returns its
// size in bytes.
func checkQShape(op string, typ GGMLType, shape Shape) (int, error) {
	if !quantizable(typ) {
		return 0, pkg.Errorf(op, ErrDType, "%s: QTensor takes Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K or Q8_K (float tensors are Tensors)", typ)
	}
	if len(shape) == 0 {
		return 0, pkg.Errorf(op, ErrShape, "a quantized scalar: want a shape whose last dim is a multiple of %s's block of %d", typ, typ.BlockSize())
	}
	if err := shape.check(op); err != nil {
		return 0, err
	}
	k := shape[len(shape)-1]
	row, err := typ.RowBytes(k)
	if err != nil {
		return 0, pkg.Errorf(op, ErrShape, "shape %v: the last dim %d is not a multiple of %s's block of %d", shape, k, typ, typ.BlockSize())
	}
	rows := shape.Elems() / max(k, 1)
	if k == 0 {
		rows = 0
	}
	return rows * row, nil
}

// NewQTensor copies the blocks of a quantized tensor of typ and shape
// (elements; the last dim a multiple of typ's block) to dev, as a GGUF
// file lays them out.
func NewQTensor(dev Device, typ GGMLType, data []byte, shape ...int) (*QTensor, error) {
	const op = "NewQTensor"
	if dev == nil {
		return nil, pkg.Errorf(op, ErrDevice, "nil device")
	}
	size, err := checkQShape(op, typ, shape)
	if err != nil {
		return nil, err
	}
	if len(data) != size {
		return nil, pkg.Errorf(op, ErrShape, "%d bytes for %s %v: want %d", len(data), typ, Shape(shape), size)
	}
	st, err := storageOf(op, dev, U8, size, data)
	if err != nil {
		return nil, err
	}
	return &QTensor{st: st, typ: typ, shape: Shape(shape).Clone()}, nil
}

// Quantize quantizes t (F32, F16, BF16 or F64; its last dim a multiple of
// typ's block) into a QTensor of typ on t's device (QuantizeBlocks'
// scales). It runs on the host, t read back: a model's weights are
// quantized once, when written or loaded.
func Quantize(t *Tensor, typ GGMLType) (*QTensor, error) {
	const op = "Quantize"
	if err := alive(op, t); err != nil {
		return nil, err
	}
	if !t.DType().IsFloat() {
		return nil, pkg.Errorf(op, ErrDType, "%s: Quantize takes a float tensor", t.DType())
	}
	shape := t.Shape()
	if _, err := checkQShape(op, typ, shape); err != nil {
		return nil, err
	}
	f, err := t.ToDType(F32)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	vals, err := ToSlice[float32](f)
	f.Close()
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	data, err := QuantizeBlocks(typ, vals)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	return NewQTensor(t.st.dev, typ, data, shape...)
}

// Dequantize expands the tensor into a Tensor of dt (F32, F16 or BF16)
// and the same shape.
func (q *QTensor) Dequantize(dt DType) (*Tensor, error) {
	const op = "QTensor.Dequantize"
	if err := q.alive(op); err != nil {
		return nil, err
	}
	if dt != F32 && dt != F16 && dt != BF16 {
		return nil, pkg.Errorf(op, ErrDType, "%s: dequantize to f32, f16 or bf16", dt)
	}
	out, err := newOutput(op, q.st.dev, dt, q.shape.Clone())
	if err != nil || out.Elems() == 0 {
		return out, err
	}
	if err := q.st.dev.backend().dequantize(q.typ, q.st, out.st, out.Elems()); err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return out, nil
}

// QMatmul multiplies t (…, k) by the transpose of the 2-D quantized w
// (n, k): a linear layer, t · wᵀ, of shape (…, n) and t's dtype (F32, F16
// or BF16, with float32 accumulation). The weight is dequantized on the
// fly, a block at a time; a strided t is made contiguous first. On a GPU,
// up to eight rows of F16 or BF16 t (decode batches) meet the types with
// 8-bit dot products (all but Q2_K, Q3_K and Q8_K) as llama.cpp has them
// meet: t quantized to 8 bits a chunk of 32 values (each value within
// 1/254 of its chunk's largest), the products in integer dot products.
// F32 t multiplies in float32.
func (t *Tensor) QMatmul(w *QTensor) (*Tensor, error) {
	const op = "Tensor.QMatmul"
	if err := checkQMatmul(op, t, w, 1); err != nil {
		return nil, err
	}
	return t.qmatmul(op, w)
}

// QMatmulOptions are the ops around a linear layer's product that
// Tensor.QMatmulWith runs with it.
type QMatmulOptions struct {
	// Norm, when set, makes the product's input RMSNorm(t, Norm, Eps)
	// (Tensor.RMSNorm): a transformer block's norm and projection.
	Norm *Tensor
	Eps  float64
	// Gated makes the input silu(a)·b (Tensor.SiLUMul) of t's halves a and
	// b along its last dim, which is then twice the weight's in-features:
	// a gated MLP's down projection of its gate and up projections.
	Gated bool
	// Residual, when set, is added to the product (a residual
	// connection): of the product's shape and t's dtype.
	Residual *Tensor
}

// QMatmulWith is QMatmul with o's ops around it. For up to eight rows of
// F16 or BF16 t on a GPU, and the types with 8-bit dot products (all but
// Q2_K, Q3_K and Q8_K), they run in the product's kernel: no intermediate
// tensors and no kernels of their own, which is what a decode step of a
// quantized model spends much of its time on. Elsewhere they run as the
// ops they name, with the same results to rounding. Norm and Gated do not
// go together.
func (t *Tensor) QMatmulWith(w *QTensor, o QMatmulOptions) (*Tensor, error) {
	const op = "Tensor.QMatmulWith"
	cols := 1
	if o.Gated {
		cols = 2
	}
	if err := checkQMatmul(op, t, w, cols); err != nil {
		return nil, err
	}
	if o.Gated && o.Norm != nil {
		return nil, pkg.Errorf(op, ErrArgument, "Norm and Gated together: run one of them as its own op (RMSNorm, SiLUMul)")
	}
	n, k := w.shape[0], w.shape[1]
	ts := t.layout.Shape
	shape := append(ts[:len(ts)-1].Clone(), n)
	for _, p := range []struct {
		name string
		x    *Tensor
	}{{"Norm", o.Norm}, {"Residual", o.Residual}} {
		if p.x == nil {
			continue
		}
		if err := alive(op, p.x); err != nil {
			return nil, err
		}
		if err := sameDevice(op, t.st.dev, p.x); err != nil {
			return nil, err
		}
		if p.x.DType() != t.DType() {
			return nil, pkg.Errorf(op, ErrDType, "%s is %s, t %s: convert one with ToDType", p.name, p.x.DType(), t.DType())
		}
	}
	if o.Norm != nil && !o.Norm.layout.Shape.Equal(Shape{k}) {
		return nil, pkg.Errorf(op, ErrShape, "Norm is %v; want [%d], the weight's in-features", o.Norm.layout.Shape, k)
	}
	if o.Norm != nil && (o.Eps < 0 || math.IsNaN(o.Eps) || o.Eps > math.MaxFloat32) {
		return nil, pkg.Errorf(op, ErrArgument, "Eps %v: want a non-negative float32", o.Eps)
	}
	if o.Residual != nil && !o.Residual.layout.Shape.Equal(shape) {
		return nil, pkg.Errorf(op, ErrShape, "Residual is %v; want the product's shape %v", o.Residual.layout.Shape, shape)
	}
	m := shape.Elems() / max(n, 1)
	if n == 0 || k == 0 || !t.st.dev.backend().qmatmulFuses(w.typ, t.DType(), m) {
		return t.qmatmulOps(op, w, o)
	}
	f, err := fuse(op, shape, t, o.Norm, o.Residual)
	if err != nil {
		return nil, err
	}
	return f.run(op, func(b backend) error {
		return b.qmatmulFused(w.typ, f.in[0], w.st, f.out.st, m, n, k, qfuse{alpha: f.in[1], eps: o.Eps, gated: o.Gated, res: f.in[2]})
	})
}

// qmatmulOps is QMatmulWith as separate ops.
func (t *Tensor) qmatmulOps(op string, w *QTensor, o QMatmulOptions) (*Tensor, error) {
	x, k := t, w.shape[1]
	var err error
	switch {
	case o.Norm != nil:
		x, err = t.RMSNorm(o.Norm, o.Eps)
	case o.Gated:
		last := len(t.layout.Shape) - 1
		var a, b *Tensor
		if a, err = t.Narrow(last, 0, k); err == nil {
			if b, err = t.Narrow(last, k, k); err == nil {
				x, err = a.SiLUMul(b)
				b.Close()
			}
			a.Close()
		}
	}
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	if x != t {
		defer x.Close()
	}
	y, err := x.qmatmul(op, w)
	if err != nil || o.Residual == nil {
		return y, err
	}
	defer y.Close()
	z, err := y.Add(o.Residual)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	return z, nil
}

// qfuse is QMatmulOptions for a backend: contiguous views (a zero view
// for none).
type qfuse struct {
	alpha view
	eps   float64
	gated bool
	res   view
}

// checkQMatmul checks t (…, cols·k) against the weight (n, k).
func checkQMatmul(op string, t *Tensor, w *QTensor, cols int) error {
	if err := alive(op, t); err != nil {
		return err
	}
	if err := w.alive(op); err != nil {
		return err
	}
	if err := sameDevice(op, w.st.dev, t); err != nil {
		return err
	}
	dt := t.DType()
	if dt != F32 && dt != F16 && dt != BF16 {
		return pkg.Errorf(op, ErrDType, "%s: QMatmul takes f32, f16 or bf16 activations (convert with ToDType)", dt)
	}
	if len(w.shape) != 2 {
		return pkg.Errorf(op, ErrShape, "weight %v: want a 2-D (out, in) weight", w.shape)
	}
	ts := t.layout.Shape
	if k := w.shape[1]; len(ts) == 0 || ts[len(ts)-1] != cols*k {
		if cols == 2 {
			return pkg.Errorf(op, ErrShape, "%v × %v ᵀ, gated: want t's last dim to be twice the weight's in-features, %d", ts, w.shape, 2*k)
		}
		return pkg.Errorf(op, ErrShape, "%v × %v ᵀ: want t's last dim to be the weight's in-features, %d", ts, w.shape, k)
	}
	return nil
}

func (t *Tensor) qmatmul(op string, w *QTensor) (*Tensor, error) {
	dt, ts := t.DType(), t.layout.Shape
	n, k := w.shape[0], w.shape[1]
	shape := append(ts[:len(ts)-1].Clone(), n)
	out, err := newOutput(op, t.st.dev, dt, shape, t)
	if err != nil || out.Elems() == 0 {
		return out, err
	}
	if k == 0 { // an empty sum: the weight has no bytes to read
		if err := t.st.dev.backend().fill(out.v(), scalar{}); err != nil {
			out.Close()
			return nil, pkg.Wrap(op, err)
		}
		return out, nil
	}
	x := t
	if !t.layout.IsContiguous() {
		if x, err = t.Copy(); err != nil {
			out.Close()
			return nil, pkg.Wrap(op, err)
		}
		defer x.Close()
	}
	if err := t.st.dev.backend().qmatmul(w.typ, x.v(), w.st, out.st, x.Elems()/k, n, k); err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return out, nil
}

// Rows dequantizes the rows of the 2-D q (rows, k) that the 1-D ids (U8,
// U32 or I64) name into a (len(ids), k) tensor of dt (F32, F16 or BF16):
// an embedding lookup in a quantized table. An index out of range is an
// ErrIndex on the CPU device; on a GPU its row is zeros (as IndexSelect).
func (q *QTensor) Rows(ids *Tensor, dt DType) (*Tensor, error) {
	const op = "QTensor.Rows"
	if err := q.alive(op); err != nil {
		return nil, err
	}
	if err := alive(op, ids); err != nil {
		return nil, err
	}
	if err := sameDevice(op, q.st.dev, ids); err != nil {
		return nil, err
	}
	if !ids.DType().IsInt() {
		return nil, pkg.Errorf(op, ErrDType, "%s indices: want u8, u32 or i64", ids.DType())
	}
	if ids.Rank() != 1 {
		return nil, pkg.Errorf(op, ErrShape, "indices of shape %v: want 1-D", ids.layout.Shape)
	}
	if dt != F32 && dt != F16 && dt != BF16 {
		return nil, pkg.Errorf(op, ErrDType, "%s: rows dequantize to f32, f16 or bf16", dt)
	}
	if len(q.shape) != 2 {
		return nil, pkg.Errorf(op, ErrShape, "table %v: want a 2-D (rows, k) table", q.shape)
	}
	k := q.shape[1]
	out, err := newOutput(op, q.st.dev, dt, Shape{ids.layout.Shape[0], k}, ids)
	if err != nil || out.Elems() == 0 {
		return out, err
	}
	if q.shape[0] == 0 {
		out.Close()
		return nil, pkg.Errorf(op, ErrIndex, "indices into an empty table")
	}
	// The kernels read contiguous i64 indices.
	x := ids
	if ids.DType() != I64 {
		x, err = ids.ToDType(I64)
	} else if !ids.layout.IsContiguous() {
		x, err = ids.Copy()
	}
	if err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	if x != ids {
		defer x.Close()
	}
	if err := q.st.dev.backend().qrows(q.typ, q.st, x.v(), out.st, k); err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return out, nil
}
