package candle

import (
	"math"
)

// How values convert between dtypes, on every device:
//   - to a float dtype: through float64, then float32 for F32, F16 and
//     BF16 (rounding to nearest, ties to even, at each step);
//   - a float to an integer dtype: truncated toward zero and saturated to
//     the dtype's range; NaN becomes 0;
//   - an integer to an integer dtype: the low bits (wrapping), as in C.

// saturate converts a float to an integer dtype's value.
func saturate(dt DType, v float64) int64 {
	if v != v {
		return 0
	}
	v = math.Trunc(v)
	lo, hi := intRange(dt)
	switch {
	case v <= lo:
		return int64(lo)
	case v >= hi:
		if dt == I64 {
			return math.MaxInt64
		}
		return int64(hi)
	}
	return int64(v)
}

// intRange is an integer dtype's range as floats; I64's top is 2^63,
// which saturate maps to MaxInt64.
func intRange(dt DType) (lo, hi float64) {
	switch dt {
	case U8:
		return 0, 255
	case U32:
		return 0, math.MaxUint32
	}
	return math.MinInt64, math.Exp2(63)
}

// wrapInt keeps an integer dtype's low bits.
func wrapInt(dt DType, v int64) int64 {
	switch dt {
	case U8:
		return int64(uint8(v))
	case U32:
		return int64(uint32(v))
	}
	return v
}
