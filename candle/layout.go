package candle

import (
	"fmt"
	"slices"
)

// Layout is how a tensor's elements sit in its storage: the shape, the
// stride of each dim in elements, and the offset of the first element. A
// broadcast dim has stride 0. Views (transpose, narrow, broadcast, ...)
// change the layout and share the storage.
type Layout struct {
	Shape  Shape
	Stride []int
	Offset int
}

// ContiguousLayout is the row-major layout of shape at offset 0.
func ContiguousLayout(shape Shape) Layout {
	// One allocation for both slices: every op's output has a layout.
	n := len(shape)
	buf := make([]int, 2*n)
	copy(buf, shape)
	l := Layout{Shape: Shape(buf[:n:n]), Stride: buf[n:]}
	stride := 1
	for i := n - 1; i >= 0; i-- {
		l.Stride[i] = stride
		stride *= shape[i]
	}
	return l
}

func (l Layout) String() string {
	return fmt.Sprintf("shape %v stride %v offset %d", l.Shape, l.Stride, l.Offset)
}

// clone copies the slices, so that a view never shares them.
func (l Layout) clone() Layout {
	return Layout{Shape: l.Shape.Clone(), Stride: slices.Clone(l.Stride), Offset: l.Offset}
}

// IsContiguous reports whether the elements are dense in row-major order
// (the strides of dims of size 1 do not matter).
func (l Layout) IsContiguous() bool {
	n := 1
	for i := len(l.Shape) - 1; i >= 0; i-- {
		if l.Shape[i] == 1 {
			continue
		}
		if l.Stride[i] != n {
			return false
		}
		n *= l.Shape[i]
	}
	return true
}

// Transpose swaps two dims.
func (l Layout) Transpose(d1, d2 int) (Layout, error) {
	const op = "Layout.Transpose"
	a, err := dim(op, d1, len(l.Shape))
	if err != nil {
		return Layout{}, err
	}
	b, err := dim(op, d2, len(l.Shape))
	if err != nil {
		return Layout{}, err
	}
	out := l.clone()
	out.Shape[a], out.Shape[b] = out.Shape[b], out.Shape[a]
	out.Stride[a], out.Stride[b] = out.Stride[b], out.Stride[a]
	return out, nil
}

// Permute reorders the dims: dim i of the result is dim order[i].
func (l Layout) Permute(order ...int) (Layout, error) {
	const op = "Layout.Permute"
	if len(order) != len(l.Shape) {
		return Layout{}, pkg.Errorf(op, ErrShape, "%d dims in the order %v for %d dims", len(order), order, len(l.Shape))
	}
	out := Layout{Shape: make(Shape, len(order)), Stride: make([]int, len(order)), Offset: l.Offset}
	seen := make([]bool, len(order))
	for i, o := range order {
		d, err := dim(op, o, len(l.Shape))
		if err != nil {
			return Layout{}, err
		}
		if seen[d] {
			return Layout{}, pkg.Errorf(op, ErrShape, "dim %d appears twice in the order %v", d, order)
		}
		seen[d] = true
		out.Shape[i], out.Stride[i] = l.Shape[d], l.Stride[d]
	}
	return out, nil
}

// Narrow keeps length elements of a dim from start.
func (l Layout) Narrow(d, start, length int) (Layout, error) {
	const op = "Layout.Narrow"
	d, err := dim(op, d, len(l.Shape))
	if err != nil {
		return Layout{}, err
	}
	if start < 0 || length < 0 || start > l.Shape[d]-length {
		return Layout{}, pkg.Errorf(op, ErrShape, "[%d, %d) is not inside dim %d of size %d", start, start+length, d, l.Shape[d])
	}
	out := l.clone()
	out.Shape[d] = length
	if length > 0 {
		out.Offset += start * l.Stride[d]
	}
	return out, nil
}

// BroadcastAs views the layout as shape: dims of size 1 (and new leading
// dims) repeat with stride 0.
func (l Layout) BroadcastAs(shape Shape) (Layout, error) {
	const op = "Layout.BroadcastAs"
	if err := shape.check(op); err != nil {
		return Layout{}, err
	}
	if len(shape) < len(l.Shape) {
		return Layout{}, pkg.Errorf(op, ErrShape, "cannot broadcast %v to %v, which has fewer dims", l.Shape, shape)
	}
	out := Layout{Shape: shape.Clone(), Stride: make([]int, len(shape)), Offset: l.Offset}
	lead := len(shape) - len(l.Shape)
	for i, d := range l.Shape {
		switch {
		case d == shape[lead+i]:
			out.Stride[lead+i] = l.Stride[i]
		case d == 1:
			out.Stride[lead+i] = 0
		default:
			return Layout{}, pkg.Errorf(op, ErrShape, "cannot broadcast %v to %v: dim %d is %d, not 1 or %d", l.Shape, shape, i, d, shape[lead+i])
		}
	}
	return out, nil
}

// Reshape views a contiguous layout with another shape of as many
// elements; a layout that is not contiguous cannot be reshaped without a
// copy (Tensor.Reshape copies then).
func (l Layout) Reshape(shape Shape) (Layout, error) {
	const op = "Layout.Reshape"
	if err := shape.check(op); err != nil {
		return Layout{}, err
	}
	if shape.Elems() != l.Shape.Elems() {
		return Layout{}, pkg.Errorf(op, ErrShape, "cannot reshape %v (%d elements) to %v (%d elements)", l.Shape, l.Shape.Elems(), shape, shape.Elems())
	}
	if !l.IsContiguous() {
		return Layout{}, pkg.Errorf(op, ErrShape, "a layout that is not contiguous (%v) cannot be reshaped in place", l)
	}
	out := ContiguousLayout(shape)
	out.Offset = l.Offset
	return out, nil
}

// Squeeze removes a dim of size 1.
func (l Layout) Squeeze(d int) (Layout, error) {
	const op = "Layout.Squeeze"
	d, err := dim(op, d, len(l.Shape))
	if err != nil {
		return Layout{}, err
	}
	if l.Shape[d] != 1 {
		return Layout{}, pkg.Errorf(op, ErrShape, "dim %d of %v has size %d, not 1", d, l.Shape, l.Shape[d])
	}
	out := l.clone()
	out.Shape = slices.Delete(out.Shape, d, d+1)
	out.Stride = slices.Delete(out.Stride, d, d+1)
	return out, nil
}

// Unsqueeze inserts a dim of size 1 before dim d (d may equal the rank,
// to append one; negative counts from the end of the result).
func (l Layout) Unsqueeze(d int) (Layout, error) {
	const op = "Layout.Unsqueeze"
	d, err := dim(op, d, len(l.Shape)+1)
	if err != nil {
		return Layout{}, err
	}
	if len(l.Shape) >= MaxRank {
		return Layout{}, pkg.Errorf(op, ErrShape, "%v has %d dims already; at most %d", l.Shape, len(l.Shape), MaxRank)
	}
	st := 1
	if d < len(l.Shape) {
		st = l.Stride[d] * l.Shape[d]
	}
	out := l.clone()
	out.Shape = slices.Insert(out.Shape, d, 1)
	out.Stride = slices.Insert(out.Stride, d, st)
	return out, nil
}
