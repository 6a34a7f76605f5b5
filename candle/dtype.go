package candle

import (
	"fmt"
	"strings"

	"github.com/rocm-go/rocm/hip"
)

// DType is the element type of a tensor: the set candle's GPU backend
// supports.
type DType uint8

// The element types.
const (
	F32  DType = iota // float32
	F16               // IEEE binary16 (hip.Half)
	BF16              // bfloat16 (hip.BFloat16)
	F64               // float64
	U8                // uint8, also the type of comparisons' results
	U32               // uint32, also the type of argmin's and argmax's results
	I64               // int64
	numDTypes
)

var dtypeNames = [numDTypes]string{"f32", "f16", "bf16", "f64", "u8", "u32", "i64"}

// DTypes lists every element type.
func DTypes() []DType { return []DType{F32, F16, BF16, F64, U8, U32, I64} }

// String is the type's name in kernel names and messages: "f32", "bf16".
func (d DType) String() string {
	if d < numDTypes {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// ParseDType reads a type's name ("f32", "bf16", ...; also "float32",
// "float16", "bfloat16", "float64", "uint8", "uint32", "int64").
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "f32", "float32", "float":
		return F32, nil
	case "f16", "float16", "half":
		return F16, nil
	case "bf16", "bfloat16":
		return BF16, nil
	case "f64", "float64", "double":
		return F64, nil
	case "u8", "uint8":
		return U8, nil
	case "u32", "uint32":
		return U32, nil
	case "i64", "int64":
		return I64, nil
	}
	return 0, &Error{Pkg: string(pkg), Op: "ParseDType", Kind: ErrDType, Detail: fmt.Sprintf("%q is not a dtype: want one of %s", s, strings.Join(dtypeNames[:], ", "))}
}

// Size is the size of one element in bytes.
func (d DType) Size() int {
	switch d {
	case F16, BF16:
		return 2
	case F32, U32:
		return 4
	case F64, I64:
		return 8
	case U8:
		return 1
	}
	return 0
}

// IsFloat reports whether the type is a floating-point type.
func (d DType) IsFloat() bool { return d == F32 || d == F16 || d == BF16 || d == F64 }

// IsInt reports whether the type is an integer type.
func (d DType) IsInt() bool { return d == U8 || d == U32 || d == I64 }

func (d DType) valid() bool { return d < numDTypes }

// Element is the Go type of a dtype's elements on the host: float32 (F32),
// hip.Half (F16), hip.BFloat16 (BF16), float64 (F64), uint8 (U8), uint32
// (U32), int64 (I64).
type Element interface {
	float32 | hip.Half | hip.BFloat16 | float64 | uint8 | uint32 | int64
}

// DTypeOf is the dtype of a Go element type.
func DTypeOf[T Element]() DType {
	var z T
	switch any(z).(type) {
	case float32:
		return F32
	case hip.Half:
		return F16
	case hip.BFloat16:
		return BF16
	case float64:
		return F64
	case uint8:
		return U8
	case uint32:
		return U32
	}
	return I64
}

// hostType names the Go element type of a dtype, for messages.
func (d DType) hostType() string {
	return [...]string{"float32", "hip.Half", "hip.BFloat16", "float64", "uint8", "uint32", "int64"}[d]
}
