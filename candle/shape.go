package candle

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// MaxRank is the most dimensions a tensor has.
const MaxRank = 8

// Shape is a tensor's dimensions, outermost first. The empty shape is a
// scalar of one element; a shape with a zero dimension has no elements.
type Shape []int

// Rank is the number of dimensions.
func (s Shape) Rank() int { return len(s) }

// Elems is the number of elements: the product of the dimensions.
func (s Shape) Elems() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Equal reports whether two shapes are the same.
func (s Shape) Equal(o Shape) bool { return slices.Equal(s, o) }

// Clone returns a copy.
func (s Shape) Clone() Shape { return append(Shape{}, s...) }

func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// check refuses negative dimensions, more than MaxRank of them, and
// element counts that overflow.
func (s Shape) check(op string) error {
	if len(s) > MaxRank {
		return pkg.Errorf(op, ErrShape, "shape %v has %d dims; at most %d", s, len(s), MaxRank)
	}
	n := 1
	for _, d := range s {
		if d < 0 {
			return pkg.Errorf(op, ErrShape, "shape %v has a negative dim", s)
		}
		if d > 0 && n > math.MaxInt64/d {
			return pkg.Errorf(op, ErrShape, "shape %v has too many elements", s)
		}
		n *= d
	}
	return nil
}

// BroadcastShapes is the shape two operands broadcast to, by NumPy's rules:
// dims are aligned from the last; each pair must be equal or one of them 1.
func BroadcastShapes(a, b Shape) (Shape, error) {
	n := max(len(a), len(b))
	out := make(Shape, n)
	for i := range n {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == db, db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, pkg.Errorf("BroadcastShapes", ErrShape, "shapes %v and %v do not broadcast: dim %d is %d against %d", a, b, i-n, da, db)
		}
	}
	return out, nil
}

// dim resolves a dimension index of a rank-r shape; negative counts from
// the end (-1 is the last).
func dim(op string, d, rank int) (int, error) {
	if d < 0 {
		d += rank
	}
	if d < 0 || d >= rank {
		return 0, pkg.Errorf(op, ErrShape, "dim %d is out of range for %d dims", d, rank)
	}
	return d, nil
}
