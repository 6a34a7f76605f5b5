package gguf

import (
	"fmt"
	"math"

	"github.com/rocm-go/rocm/errs"
)

// Kind is the type of a metadata value, numbered as GGUF numbers them.
type Kind uint32

// The value kinds.
const (
	Uint8 Kind = iota
	Int8
	Uint16
	Int16
	Uint32
	Int32
	Float32
	Bool
	String
	Array
	Uint64
	Int64
	Float64
	numKinds
)

var kindNames = [numKinds]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"}

// String is the kind's name: "u32", "string", "array".
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint32(k))
}

// size is the bytes of a fixed-size kind's value, and the fewest bytes a
// value of the others takes (a string's length, an array's header).
func (k Kind) size() int {
	switch k {
	case Uint8, Int8, Bool:
		return 1
	case Uint16, Int16:
		return 2
	case Uint32, Int32, Float32:
		return 4
	case Uint64, Int64, Float64, String:
		return 8
	case Array:
		return 12
	}
	return 0
}

// Value is a metadata value: a number, a bool, a string, or an array of
// one kind (arrays of arrays included).
type Value struct {
	kind Kind
	elem Kind // an array's
	u    uint64
	i    int64
	f    float64
	s    string
	b    bool
	arr  any // []uint8 … []float64, []bool, []string, or []Value for arrays of arrays
}

// Kind is the value's kind.
func (v Value) Kind() Kind { return v.kind }

// Elem is an array's element kind.
func (v Value) Elem() Kind { return v.elem }

// Len is an array's length (0 for other kinds).
func (v Value) Len() int {
	switch a := v.arr.(type) {
	case []uint8:
		return len(a)
	case []int8:
		return len(a)
	case []uint16:
		return len(a)
	case []int16:
		return len(a)
	case []uint32:
		return len(a)
	case []int32:
		return len(a)
	case []float32:
		return len(a)
	case []bool:
		return len(a)
	case []string:
		return len(a)
	case []uint64:
		return len(a)
	case []int64:
		return len(a)
	case []float64:
		return len(a)
	case []Value:
		return len(a)
	}
	return 0
}

// Any is the value as a Go value: uint8 … float64, bool, string, or an
// array's slice ([]uint32, []string, []Value for arrays of arrays, ...).
func (v Value) Any() any {
	switch v.kind {
	case Uint8:
		return uint8(v.u)
	case Uint16:
		return uint16(v.u)
	case Uint32:
		return uint32(v.u)
	case Uint64:
		return v.u
	case Int8:
		return int8(v.i)
	case Int16:
		return int16(v.i)
	case Int32:
		return int32(v.i)
	case Int64:
		return v.i
	case Float32:
		return float32(v.f)
	case Float64:
		return v.f
	case Bool:
		return v.b
	case String:
		return v.s
	}
	return v.arr
}

func (v Value) String() string {
	if v.kind == Array {
		return fmt.Sprintf("[%d %s]", v.Len(), v.elem)
	}
	return fmt.Sprint(v.Any())
}

// ValueOf makes a value of a Go value: uint8, int8, uint16, int16, uint32,
// int32, float32, bool, string, uint64, int64, float64, a slice of one of
// them, or []Value (an array of arrays, each element an array). An int is
// taken as int64, a []int as []int64.
func ValueOf(x any) (Value, error) {
	switch x := x.(type) {
	case uint8:
		return Value{kind: Uint8, u: uint64(x)}, nil
	case uint16:
		return Value{kind: Uint16, u: uint64(x)}, nil
	case uint32:
		return Value{kind: Uint32, u: uint64(x)}, nil
	case uint64:
		return Value{kind: Uint64, u: x}, nil
	case int8:
		return Value{kind: Int8, i: int64(x)}, nil
	case int16:
		return Value{kind: Int16, i: int64(x)}, nil
	case int32:
		return Value{kind: Int32, i: int64(x)}, nil
	case int64:
		return Value{kind: Int64, i: x}, nil
	case int:
		return Value{kind: Int64, i: int64(x)}, nil
	case float32:
		return Value{kind: Float32, f: float64(x)}, nil
	case float64:
		return Value{kind: Float64, f: x}, nil
	case bool:
		return Value{kind: Bool, b: x}, nil
	case string:
		return Value{kind: String, s: x}, nil
	case []uint8:
		return Value{kind: Array, elem: Uint8, arr: x}, nil
	case []int8:
		return Value{kind: Array, elem: Int8, arr: x}, nil
	case []uint16:
		return Value{kind: Array, elem: Uint16, arr: x}, nil
	case []int16:
		return Value{kind: Array, elem: Int16, arr: x}, nil
	case []uint32:
		return Value{kind: Array, elem: Uint32, arr: x}, nil
	case []int32:
		return Value{kind: Array, elem: Int32, arr: x}, nil
	case []float32:
		return Value{kind: Array, elem: Float32, arr: x}, nil
	case []bool:
		return Value{kind: Array, elem: Bool, arr: x}, nil
	case []string:
		return Value{kind: Array, elem: String, arr: x}, nil
	case []uint64:
		return Value{kind: Array, elem: Uint64, arr: x}, nil
	case []int64:
		return Value{kind: Array, elem: Int64, arr: x}, nil
	case []int:
		a := make([]int64, len(x))
		for i, v := range x {
			a[i] = int64(v)
		}
		return Value{kind: Array, elem: Int64, arr: a}, nil
	case []float64:
		return Value{kind: Array, elem: Float64, arr: x}, nil
	case []Value:
		for i, v := range x {
			if v.kind != Array {
				return Value{}, pkg.Errorf("ValueOf", errs.ErrArgument, "element %d of an array of arrays is a %s", i, v.kind)
			}
		}
		return Value{kind: Array, elem: Array, arr: x}, nil
	case Value:
		return x, nil
	}
	return Value{}, pkg.Errorf("ValueOf", errs.ErrArgument, "%T is not a GGUF value type", x)
}

// asUint is an unsigned or non-negative integer value.
func (v Value) asUint() (uint64, bool) {
	switch v.kind {
	case Uint8, Uint16, Uint32, Uint64:
		return v.u, true
	case Int8, Int16, Int32, Int64:
		return uint64(v.i), v.i >= 0
	}
	return 0, false
}

// asInt is an integer value that fits an int64.
func (v Value) asInt() (int64, bool) {
	switch v.kind {
	case Uint8, Uint16, Uint32, Uint64:
		return int64(v.u), v.u <= math.MaxInt64
	case Int8, Int16, Int32, Int64:
		return v.i, true
	}
	return 0, false
}

// ints is an integer array as int64s.
func (v Value) ints() ([]int64, bool) {
	var out []int64
	conv := func(n int, at func(int) int64) []int64 {
		out = make([]int64, n)
		for i := range out {
			out[i] = at(i)
		}
		return out
	}
	switch a := v.arr.(type) {
	case []uint8:
		return conv(len(a), func(i int) int64 { return int64(a[i]) }), true
	case []int8:
		return conv(len(a), func(i int) int64 { return int64(a[i]) }), true
	case []uint16:
		return conv(len(a), func(i int) int64 { return int64(a[i]) }), true
	case []int16:
		return conv(len(a), func(i int) int64 { return int64(a[i]) }), true
	case []uint32:
		return conv(len(a), func(i int) int64 { return int64(a[i]) }), true
	case []int32:
		return conv(len(a), func(i int) int64 { return int64(a[i]) }), true
	case []int64:
		return append([]int64(nil), a...), true
	case []uint64:
		for _, x := range a {
			if x > math.MaxInt64 {
				return nil, false
			}
		}
		return conv(len(a), func(i int) int64 { return int64(a[i]) }), true
	}
	return nil, false
}

// floats is a float array as float64s (float32 values exactly).
func (v Value) floats() ([]float64, bool) {
	switch a := v.arr.(type) {
	case []float32:
		out := make([]float64, len(a))
		for i, x := range a {
			out[i] = float64(x)
		}
		return out, true
	case []float64:
		return append([]float64(nil), a...), true
	}
	return nil, false
}
