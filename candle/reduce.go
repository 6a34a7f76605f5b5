package candle

import (
	"math"
)

// The reductions reduce over a set of dims (none given: all of them); with
// keepdim the reduced dims stay, of size 1. Sums of F16 and BF16
// accumulate in float32, of F32 in float32 with a tree, of integers in
// their own width (wrapping). Min and max propagate NaN; argmin and argmax
// return the index of the first extreme (or first NaN) within the reduced
// dims, flattened in row-major order, as U32.

// Sum adds the elements over dims.
func (t *Tensor) Sum(keepdim bool, dims ...int) (*Tensor, error) {
	return t.reduce("Tensor.Sum", opSum, keepdim, dims, false)
}

// Mean averages the elements over dims (float dtypes).
func (t *Tensor) Mean(keepdim bool, dims ...int) (*Tensor, error) {
	return t.reduce("Tensor.Mean", opSum, keepdim, dims, true)
}

// Min is the smallest element over dims.
func (t *Tensor) Min(keepdim bool, dims ...int) (*Tensor, error) {
	return t.reduce("Tensor.Min", opMin, keepdim, dims, false)
}

// Max is the largest element over dims.
func (t *Tensor) Max(keepdim bool, dims ...int) (*Tensor, error) {
	return t.reduce("Tensor.Max", opMax, keepdim, dims, false)
}

// Argmin is the index of the smallest element over dims (U32).
func (t *Tensor) Argmin(keepdim bool, dims ...int) (*Tensor, error) {
	return t.reduce("Tensor.Argmin", opArgmin, keepdim, dims, false)
}

// Argmax is the index of the largest element over dims (U32).
func (t *Tensor) Argmax(keepdim bool, dims ...int) (*Tensor, error) {
	return t.reduce("Tensor.Argmax", opArgmax, keepdim, dims, false)
}

func (t *Tensor) reduce(name string, op reduceOp, keepdim bool, dims []int, mean bool) (*Tensor, error) {
	if err := t.alive(name); err != nil {
		return nil, err
	}
	if mean && !t.DType().IsFloat() {
		return nil, pkg.Errorf(name, ErrDType, "the mean of a %s tensor: convert it to a float dtype first", t.DType())
	}
	rank := t.Rank()
	reduced := make([]bool, rank)
	if len(dims) == 0 {
		for i := range reduced {
			reduced[i] = true
		}
	}
	for _, d := range dims {
		d, err := dim(name, d, rank)
		if err != nil {
			return nil, err
		}
		if reduced[d] {
			return nil, pkg.Errorf(name, ErrShape, "dim %d appears twice in %v", d, dims)
		}
		reduced[d] = true
	}
	// Kept dims first, reduced dims last, each in their order: a view.
	var order []int
	shape := Shape{}
	inner, nred := 1, 0
	for i := range rank {
		if !reduced[i] {
			order = append(order, i)
			shape = append(shape, t.layout.Shape[i])
		}
	}
	for i := range rank {
		if reduced[i] {
			order = append(order, i)
			inner *= t.layout.Shape[i]
			nred++
		}
	}
	if keepdim {
		shape = t.Shape()
		for i := range reduced {
			if reduced[i] {
				shape[i] = 1
			}
		}
	}
	src, err := t.layout.Permute(order...)
	if err != nil {
		return nil, pkg.Wrap(name, err)
	}
	dt := t.DType()
	if op.isArg() {
		dt = U32
	}
	// The kernels index the elements of one output with 32 bits, and take
	// the largest value as "none yet".
	if inner >= math.MaxUint32 {
		return nil, pkg.Errorf(name, ErrShape, "%d elements to reduce into one: at most %d", inner, uint32(math.MaxUint32-1))
	}
	out, err := newOutput(name, t.st.dev, dt, shape, t)
	if err != nil || out.Elems() == 0 {
		return out, err
	}
	if inner == 0 {
		if op != opSum {
			out.Close()
			return nil, pkg.Errorf(name, ErrShape, "%s of no elements (dims %v of %v)", op, order[rank-nred:], t.layout.Shape)
		}
		v := 0.0
		if mean {
			v = math.NaN()
		}
		err = t.st.dev.backend().fill(out.v(), scalarOf(dt, v))
	} else {
		scale := 1.0
		if mean {
			scale = 1 / float64(inner)
		}
		err = t.st.dev.backend().reduce(op, view{t.st, src}, nred, scale, out.st)
	}
	if err != nil {
		out.Close()
		return nil, pkg.Wrap(name, err)
	}
	return out, nil
}
