package candle

import (
	"encoding/binary"
	"math"
	"runtime"

	"github.com/rocm-go/rocm/hip"
)

// QuantizeBlocks quantizes vals (a whole number of typ's blocks) into
// typ's blocks (a float type's elements too). The scales are simple and
// deterministic: a block's (or a group's) largest magnitude, or its range,
// mapped onto the levels, as llama.cpp's reference quantizers do for the
// 32-element types; for the K types llama.cpp searches the scales and
// does somewhat better (quant_test.go states each type's error bound).
func QuantizeBlocks(typ GGMLType, vals []float32) ([]byte, error) {
	const op = "QuantizeBlocks"
	if !typ.Known() || typ == GGMLQ8_1 {
		return nil, pkg.Errorf(op, ErrDType, "%s: not a type this package encodes", typ)
	}
	bs, size := typ.BlockSize(), typ.TypeSize()
	if len(vals)%bs != 0 {
		return nil, pkg.Errorf(op, ErrShape, "%d values: not a whole number of %s blocks of %d", len(vals), typ, bs)
	}
	for i, v := range vals {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, pkg.Errorf(op, ErrArgument, "value %d is %v: quantize finite values", i, v)
		}
	}
	nb := len(vals) / bs
	out := make([]byte, nb*size)
	if dt, ok := typ.DType(); ok {
		for i, v := range vals {
			b := out[i*size:]
			switch dt {
			case F32:
				binary.LittleEndian.PutUint32(b, math.Float32bits(v))
			case F16:
				putF16(b, v)
			case BF16:
				binary.LittleEndian.PutUint16(b, uint16(hip.BFloat16FromFloat32(v)))
			case F64:
				binary.LittleEndian.PutUint64(b, math.Float64bits(float64(v)))
			}
		}
		return out, nil
	}
	workers := min(nb, runtime.GOMAXPROCS(0))
	parallel(workers, func(w int) {
		for i := w; i < nb; i += workers {
			encodeBlock(typ, vals[i*bs:(i+1)*bs], out[i*size:(i+1)*size])
		}
	})
	return out, nil
}

// nearest rounds half away from zero, to an int.
func nearest(x float32) int { return int(math.Round(float64(x))) }

func clampInt(x, lo, hi int) int { return max(lo, min(hi, x)) }

// absMax is the value of largest magnitude (its sign kept).
func absMax(x []float32) float32 {
	var m float32
	for _, v := range x {
		if abs32(v) > abs32(m) {
			m = v
		}
	}
	return m
}

func abs32(x float32) float32 { return float32(math.Abs(float64(x))) }

func minMax(x []float32) (lo, hi float32) {
	lo, hi = x[0], x[0]
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// inv is 1/d, 0 for 0.
func inv(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// f16r is x rounded to f16, as the block stores it.
func f16r(x float32) float32 {
	var b [2]byte
	putF16(b[:], x)
	return f16(b[:])
}

// encodeBlock writes one block of typ.
func encodeBlock(typ GGMLType, x []float32, b []byte) {
	switch typ {
	case GGMLQ4_0, GGMLQ5_0:
		levels := 8
		if typ == GGMLQ5_0 {
			levels = 16
		}
		d := f16r(absMax(x) / float32(-levels))
		putF16(b, d)
		id := inv(d)
		q := func(v float32) int { return clampInt(nearest(v*id)+levels, 0, 2*levels-1) }
		if typ == GGMLQ4_0 {
			for j := range 16 {
				b[2+j] = byte(q(x[j])) | byte(q(x[j+16]))<<4
			}
			return
		}
		var qh uint32
		for j := range 16 {
			lo, hi := q(x[j]), q(x[j+16])
			b[6+j] = byte(lo&0xF) | byte(hi&0xF)<<4
			qh |= uint32(lo>>4) << j
			qh |= uint32(hi>>4) << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[2:], qh)
	case GGMLQ4_1, GGMLQ5_1:
		top := 15
		if typ == GGMLQ5_1 {
			top = 31
		}
		lo, hi := minMax(x)
		d, m := f16r((hi-lo)/float32(top)), f16r(lo)
		putF16(b, d)
		putF16(b[2:], m)
		id := inv(d)
		q := func(v float32) int { return clampInt(nearest((v-m)*id), 0, top) }
		if typ == GGMLQ4_1 {
			for j := range 16 {
				b[4+j] = byte(q(x[j])) | byte(q(x[j+16]))<<4
			}
			return
		}
		var qh uint32
		for j := range 16 {
			l, h := q(x[j]), q(x[j+16])
			b[8+j] = byte(l&0xF) | byte(h&0xF)<<4
			qh |= uint32(l>>4) << j
			qh |= uint32(h>>4) << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[4:], qh)
	case GGMLQ8_0:
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		d := f16r(amax / 127)
		putF16(b, d)
		id := inv(d)
		for j, v := range x {
			b[2+j] = byte(int8(clampInt(nearest(v*id), -127, 127)))
		}
	case GGMLQ8_K:
		m := absMax(x)
		var d float32
		if m != 0 {
			d = m / -128
		}
		binary.LittleEndian.PutUint32(b, math.Float32bits(d))
		id := inv(d)
		for g := range 16 {
			var sum int
			for i := range 16 {
				q := clampInt(nearest(x[16*g+i]*id), -128, 127)
				b[4+16*g+i] = byte(int8(q))
				sum += q
			}
			binary.LittleEndian.PutUint16(b[260+2*g:], uint16(int16(sum)))
		}
	case GGMLQ2_K:
		encodeQ2K(x, b)
	case GGMLQ3_K:
		encodeQ3K(x, b)
	case GGMLQ4_K, GGMLQ5_K:
		encodeQ45K(typ, x, b)
	case GGMLQ6_K:
		encodeQ6K(x, b)
	}
}

// groupScaleMin is a group's scale and min for levels 0..top: x ≈ s·q − m,
// with m ≥ 0 (the group's minimum, or 0 when that is positive).
func groupScaleMin(x []float32, top int) (s, m float32) {
	lo, hi := minMax(x)
	lo = min(lo, 0)
	return (hi - lo) / float32(top), -lo
}

// superScale is the f16 scale that maps the largest of vals onto top.
func superScale(vals []float32, top int) float32 {
	var mx float32
	for _, v := range vals {
		mx = max(mx, v)
	}
	return f16r(mx / float32(top))
}

func encodeQ2K(x []float32, b []byte) {
	var s, m [16]float32
	for g := range 16 {
		s[g], m[g] = groupScaleMin(x[16*g:16*g+16], 3)
	}
	d, dmin := superScale(s[:], 15), superScale(m[:], 15)
	putF16(b[80:], d)
	putF16(b[82:], dmin)
	sc, qs := b[:16], b[16:80]
	for g := range 16 {
		ls, lm := clampInt(nearest(s[g]*inv(d)), 0, 15), clampInt(nearest(m[g]*inv(dmin)), 0, 15)
		sc[g] = byte(ls) | byte(lm)<<4
		ds, ms := d*float32(ls), dmin*float32(lm)
		n, j := g/8, g%8/2
		for i := range 16 {
			q := clampInt(nearest((x[16*g+i]+ms)*inv(ds)), 0, 3)
			qs[32*n+16*(g%2)+i] |= byte(q) << (2 * j)
		}
	}
}

func encodeQ3K(x []float32, b []byte) {
	var s [16]float32
	for g := range 16 {
		var a float32
		for _, v := range x[16*g : 16*g+16] {
			a = max(a, abs32(v))
		}
		s[g] = a / 4
	}
	d := superScale(s[:], 31)
	putF16(b[108:], d)
	hm, qs, sc := b[:32], b[32:96], b[96:108]
	for g := range 16 {
		l := clampInt(nearest(s[g]*inv(d)), -32, 31)
		u := byte(l + 32)
		sc[g%8] |= (u & 0xF) << (4 * (g / 8))
		sc[8+g%4] |= (u >> 4) << (2 * (g / 4))
		ds := d * float32(l)
		n, j := g/8, g%8/2
		for i := range 16 {
			q := clampInt(nearest(x[16*g+i]*inv(ds)), -4, 3) + 4
			e := 16*(g%2) + i
			qs[32*n+e] |= byte(q&3) << (2 * j)
			if q >= 4 {
				hm[e] |= 1 << (4*n + j)
			}
		}
	}
}

func encodeQ45K(typ GGMLType, x []float32, b []byte) {
	top := 15
	if typ == GGMLQ5_K {
		top = 31
	}
	var s, m [8]float32
	for g := range 8 {
		s[g], m[g] = groupScaleMin(x[32*g:32*g+32], top)
	}
	d, dmin := superScale(s[:], 63), superScale(m[:], 63)
	putF16(b, d)
	putF16(b[2:], dmin)
	sc := b[4:16]
	qs, qh := b[16:], []byte(nil)
	if typ == GGMLQ5_K {
		qh, qs = b[16:48], b[48:]
	}
	for g := range 8 {
		ls, lm := uint8(clampInt(nearest(s[g]*inv(d)), 0, 63)), uint8(clampInt(nearest(m[g]*inv(dmin)), 0, 63))
		if g < 4 {
			sc[g] |= ls
			sc[g+4] |= lm
		} else {
			sc[g+4] = ls&0xF | (lm&0xF)<<4
			sc[g-4] |= (ls >> 4) << 6
			sc[g] |= (lm >> 4) << 6
		}
		ds, ms := d*float32(ls), dmin*float32(lm)
		for i := range 32 {
			q := clampInt(nearest((x[32*g+i]+ms)*inv(ds)), 0, top)
			qs[32*(g/2)+i] |= byte(q&0xF) << (4 * (g % 2))
			if qh != nil && q >= 16 {
				qh[i] |= 1 << g
			}
		}
	}
}

func encodeQ6K(x []float32, b []byte) {
	var s [16]float32
	for g := range 16 {
		var a float32
		for _, v := range x[16*g : 16*g+16] {
			a = max(a, abs32(v))
		}
		s[g] = a / 31
	}
	d := superScale(s[:], 127)
	putF16(b[208:], d)
	ql, qh, sc := b[:128], b[128:192], b[192:208]
	for g := range 16 {
		l := clampInt(nearest(s[g]*inv(d)), -128, 127)
		sc[g] = byte(int8(l))
		ds := d * float32(l)
		n, k, half := g/8, g%8/2, g%2
		for i := range 16 {
			e := 16*half + i
			q := clampInt(nearest(x[16*g+i]*inv(ds)), -32, 31) + 32
			ql[64*n+32*(k%2)+e] |= byte(q&0xF) << (4 * (k / 2))
			qh[32*n+e] |= byte(q>>4) << (2 * k)
		}
	}
}
