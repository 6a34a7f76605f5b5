package hip

import "math"

// Half is an IEEE 754 binary16 number (__half), as stored in device memory.
type Half uint16

// BFloat16 is a bfloat16 number (__hip_bfloat16, __nv_bfloat16): the top
// 16 bits of a float32.
type BFloat16 uint16

// HalfFromFloat32 rounds f to the nearest Half, ties to even; out of range
// values become infinities and NaN stays NaN.
func HalfFromFloat32(f float32) Half {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf or NaN
		if man != 0 {
			return Half(sign | 0x7e00)
		}
		return Half(sign | 0x7c00)
	case exp-127 > 15: // overflow
		return Half(sign | 0x7c00)
	case exp-127 >= -14: // normal
		h := uint32(exp-127+15)<<10 | man>>13
		// Round to nearest even on the 13 bits dropped; a carry into the
		// exponent is right, up to infinity.
		rest := man & 0x1fff
		if rest > 0x1000 || rest == 0x1000 && h&1 == 1 {
			h++
		}
		return Half(sign | uint16(h))
	case exp-127 >= -25: // subnormal
		m := man | 0x800000
		shift := uint(-(exp - 127) - 14 + 13)
		h := m >> shift
		rest := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || rest == half && h&1 == 1 {
			h++
		}
		return Half(sign | uint16(h))
	}
	return Half(sign) // underflow to zero
}

// Float32 converts exactly.
func (h Half) Float32() float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp-15+127)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: normalize.
	e := uint32(127 - 15 + 1)
	for man&0x400 == 0 {
		man <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
}

// BFloat16FromFloat32 rounds f to the nearest BFloat16, ties to even; NaN
// stays NaN.
func BFloat16FromFloat32(f float32) BFloat16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return BFloat16(b>>16 | 0x40) // quiet NaN
	}
	b += 0x7fff + (b>>16)&1
	return BFloat16(b >> 16)
}

// Float32 converts exactly.
func (b BFloat16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }
