package candle

import (
	"fmt"
	"slices"
	"strings"
)

// GGMLType is the element type of a quantized tensor, numbered as GGUF
// files (llama.cpp's ggml) number them. Quantized types pack a block of
// BlockSize elements into TypeSize bytes: scales and small integers, laid
// out as ggml lays them out (QTensor keeps those bytes as they are, on
// its device).
type GGMLType uint32

// The GGML types: the float types and the quantized ones QTensor takes.
// Values absent here (the IQ types, the integer types) are types GGUF
// files may hold that this package does not decode.
const (
	GGMLF32  GGMLType = 0
	GGMLF16  GGMLType = 1
	GGMLQ4_0 GGMLType = 2
	GGMLQ4_1 GGMLType = 3
	GGMLQ5_0 GGMLType = 6
	GGMLQ5_1 GGMLType = 7
	GGMLQ8_0 GGMLType = 8
	GGMLQ8_1 GGMLType = 9
	GGMLQ2_K GGMLType = 10
	GGMLQ3_K GGMLType = 11
	GGMLQ4_K GGMLType = 12
	GGMLQ5_K GGMLType = 13
	GGMLQ6_K GGMLType = 14
	GGMLQ8_K GGMLType = 15
	GGMLF64  GGMLType = 28
	GGMLBF16 GGMLType = 30
)

// ggmlInfo is a type's name, block size (elements) and block bytes.
type ggmlInfo struct {
	name        string
	block, size int
	quantized   bool
}

var ggmlTypes = map[GGMLType]ggmlInfo{
	GGMLF32:  {"F32", 1, 4, false},
	GGMLF16:  {"F16", 1, 2, false},
	GGMLBF16: {"BF16", 1, 2, false},
	GGMLF64:  {"F64", 1, 8, false},
	GGMLQ4_0: {"Q4_0", 32, 2 + 16, true},
	GGMLQ4_1: {"Q4_1", 32, 2 + 2 + 16, true},
	GGMLQ5_0: {"Q5_0", 32, 2 + 4 + 16, true},
	GGMLQ5_1: {"Q5_1", 32, 2 + 2 + 4 + 16, true},
	GGMLQ8_0: {"Q8_0", 32, 2 + 32, true},
	GGMLQ8_1: {"Q8_1", 32, 2 + 2 + 32, true},
	GGMLQ2_K: {"Q2_K", 256, 16 + 64 + 2 + 2, true},
	GGMLQ3_K: {"Q3_K", 256, 32 + 64 + 12 + 2, true},
	GGMLQ4_K: {"Q4_K", 256, 2 + 2 + 12 + 128, true},
	GGMLQ5_K: {"Q5_K", 256, 2 + 2 + 12 + 32 + 128, true},
	GGMLQ6_K: {"Q6_K", 256, 128 + 64 + 16 + 2, true},
	GGMLQ8_K: {"Q8_K", 256, 4 + 256 + 2*16, true},
}

// String is the type's name as llama.cpp writes it ("Q4_K", "F16").
func (t GGMLType) String() string {
	if i, ok := ggmlTypes[t]; ok {
		return i.name
	}
	return fmt.Sprintf("GGMLType(%d)", uint32(t))
}

// Known reports whether this package knows the type's block layout.
func (t GGMLType) Known() bool { _, ok := ggmlTypes[t]; return ok }

// Quantized reports whether the type is a block-quantized one.
func (t GGMLType) Quantized() bool { return ggmlTypes[t].quantized }

// BlockSize is the number of elements in one block (1 for float types, 0
// for a type this package does not know).
func (t GGMLType) BlockSize() int { return ggmlTypes[t].block }

// TypeSize is the number of bytes of one block (0 for a type this package
// does not know).
func (t GGMLType) TypeSize() int { return ggmlTypes[t].size }

// RowBytes is the size in bytes of n elements of the type, or an error
// when n is not a whole number of blocks or the type is unknown.
func (t GGMLType) RowBytes(n int) (int, error) {
	i, ok := ggmlTypes[t]
	if !ok {
		return 0, pkg.Errorf("GGMLType.RowBytes", ErrDType, "%s: an unknown GGML type", t)
	}
	if n < 0 || n%i.block != 0 {
		return 0, pkg.Errorf("GGMLType.RowBytes", ErrShape, "%d elements of %s: want a multiple of its block of %d", n, t, i.block)
	}
	return n / i.block * i.size, nil
}

// ParseGGMLType reads a type's name ("q4_k", "Q8_0", "f16").
func ParseGGMLType(s string) (GGMLType, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	names := make([]string, 0, len(ggmlTypes))
	for t, i := range ggmlTypes {
		if i.name == u {
			return t, nil
		}
		names = append(names, i.name)
	}
	slices.Sort(names)
	return 0, pkg.Errorf("ParseGGMLType", ErrDType, "%q is not a GGML type this package knows: want one of %s", s, strings.Join(names, ", "))
}

// DType is the dtype of a float type's elements (F32, F16, BF16, F64);
// false for a quantized or unknown type.
func (t GGMLType) DType() (DType, bool) {
	switch t {
	case GGMLF32:
		return F32, true
	case GGMLF16:
		return F16, true
	case GGMLBF16:
		return BF16, true
	case GGMLF64:
		return F64, true
	}
	return 0, false
}

// GGMLTypeOf is the GGML type of a float dtype (F32, F16, BF16, F64).
func GGMLTypeOf(dt DType) (GGMLType, bool) {
	switch dt {
	case F32:
		return GGMLF32, true
	case F16:
		return GGMLF16, true
	case BF16:
		return GGMLBF16, true
	case F64:
		return GGMLF64, true
	}
	return 0, false
}
