package candle

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync"

	"github.com/rocm-go/rocm/hip"
)

// The block layouts (ggml's, bytes in order; d, m, dmin are f16 unless
// said; q the quantized values):
//
//	Q4_0  d, qs[16]                    x = d·(q−8), q 4 bits: element j low nibble of qs[j], j+16 its high one
//	Q4_1  d, m, qs[16]                 x = d·q + m
//	Q5_0  d, qh u32, qs[16]            x = d·(q−16), q's 5th bit: bit j of qh for element j
//	Q5_1  d, m, qh u32, qs[16]         x = d·q + m
//	Q8_0  d, qs int8[32]               x = d·q
//	Q2_K  scales[16], qs[64], d, dmin  16 groups of 16: scale (low nibble) and min (high) of 4 bits,
//	                                   x = d·sc·q − dmin·mn, q 2 bits
//	Q3_K  hmask[32], qs[64], scales[12], d
//	                                   16 groups of 16, 6-bit scales − 32, x = d·sc·q, q in [−4, 3]:
//	                                   2 bits in qs, the third (set: no −4) in hmask
//	Q4_K  d, dmin, scales[12], qs[128] 8 groups of 32, 6-bit scales and mins, x = d·sc·q − dmin·mn
//	Q5_K  d, dmin, scales[12], qh[32], qs[128]
//	                                   as Q4_K with a 5th bit from qh
//	Q6_K  ql[128], qh[64], scales int8[16], d
//	                                   16 groups of 16, x = d·sc·(q−32), q 6 bits (4 in ql, 2 in qh)
//	Q8_K  d f32, qs int8[256], bsums int16[16]
//	                                   x = d·q (bsums: sums of groups of 16, for dot products)
//
// A K-type block of 256 is read as eight chunks of 32 (decodeChunk), the
// unit the GPU kernels decode too.

func f16(b []byte) float32 { return hip.Half(binary.LittleEndian.Uint16(b)).Float32() }

func putF16(b []byte, x float32) { binary.LittleEndian.PutUint16(b, uint16(hip.HalfFromFloat32(x))) }

// scaleMinK4 unpacks the j-th 6-bit scale and min of a Q4_K or Q5_K
// block's 12 scale bytes.
func scaleMinK4(j int, q []byte) (sc, mn uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return (q[j+4] & 0xF) | ((q[j-4] >> 6) << 4), (q[j+4] >> 4) | ((q[j] >> 6) << 4)
}

// scaleQ3K is the j-th signed 6-bit scale of a Q3_K block's 12 scale
// bytes: the low 4 bits in the nibbles of bytes 0–7, the high 2 in bytes
// 8–11.
func scaleQ3K(j int, q []byte) int {
	lo := q[j%8] >> (4 * (j / 8)) & 0xF
	hi := q[8+j%4] >> (2 * (j / 4)) & 3
	return int(lo|hi<<4) - 32
}

// decodeChunk writes the 32 values of chunk c of a block (c < block/32).
func decodeChunk(typ GGMLType, b []byte, c int, y *[32]float32) {
	switch typ {
	case GGMLQ4_0:
		d := f16(b)
		for j := range 16 {
			y[j] = d * float32(int(b[2+j]&0xF)-8)
			y[j+16] = d * float32(int(b[2+j]>>4)-8)
		}
	case GGMLQ4_1:
		d, m := f16(b), f16(b[2:])
		for j := range 16 {
			y[j] = d*float32(b[4+j]&0xF) + m
			y[j+16] = d*float32(b[4+j]>>4) + m
		}
	case GGMLQ5_0, GGMLQ5_1:
		d, m, off := f16(b), float32(0), 2
		if typ == GGMLQ5_1 {
			m, off = f16(b[2:]), 4
		}
		qh := binary.LittleEndian.Uint32(b[off:])
		qs := b[off+4:]
		for j := range 16 {
			lo := int(qs[j]&0xF) | int(qh>>j&1)<<4
			hi := int(qs[j]>>4) | int(qh>>(j+16)&1)<<4
			if typ == GGMLQ5_0 {
				y[j], y[j+16] = d*float32(lo-16), d*float32(hi-16)
			} else {
				y[j], y[j+16] = d*float32(lo)+m, d*float32(hi)+m
			}
		}
	case GGMLQ8_0:
		d := f16(b)
		for j := range 32 {
			y[j] = d * float32(int8(b[2+j]))
		}
	case GGMLQ2_K:
		sc, qs, d, dmin := b[:16], b[16:80], f16(b[80:]), f16(b[82:])
		n, j := c/4, c%4
		for i := range 32 {
			s := sc[8*n+2*j+i/16]
			q := qs[32*n+i] >> (2 * j) & 3
			y[i] = d*float32(s&0xF)*float32(q) - dmin*float32(s>>4)
		}
	case GGMLQ3_K:
		hm, qs, sc, d := b[:32], b[32:96], b[96:108], f16(b[108:])
		n, j := c/4, c%4
		bit := byte(1) << (4*n + j)
		for i := range 32 {
			q := int(qs[32*n+i] >> (2 * j) & 3)
			if hm[i]&bit == 0 {
				q -= 4
			}
			y[i] = d * float32(scaleQ3K(8*n+2*j+i/16, sc)) * float32(q)
		}
	case GGMLQ4_K, GGMLQ5_K:
		d, dmin, sc := f16(b), f16(b[2:]), b[4:16]
		qs, qh := b[16:], []byte(nil)
		if typ == GGMLQ5_K {
			qh, qs = b[16:48], b[48:]
		}
		s, mn := scaleMinK4(c, sc)
		ds, ms := d*float32(s), dmin*float32(mn)
		for i := range 32 {
			q := qs[32*(c/2)+i]
			if c%2 == 0 {
				q &= 0xF
			} else {
				q >>= 4
			}
			if qh != nil && qh[i]>>c&1 != 0 {
				q += 16
			}
			y[i] = ds*float32(q) - ms
		}
	case GGMLQ6_K:
		ql, qh, sc, d := b[:128], b[128:192], b[192:208], f16(b[208:])
		n, k := c/4, c%4
		for i := range 32 {
			l := ql[64*n+32*(k%2)+i]
			if k >= 2 {
				l >>= 4
			}
			q := int(l&0xF) | int(qh[32*n+i]>>(2*k)&3)<<4
			y[i] = d * float32(int8(sc[8*n+i/16+2*k])) * float32(q-32)
		}
	case GGMLQ8_K:
		d := math.Float32frombits(binary.LittleEndian.Uint32(b))
		for i := range 32 {
			y[i] = d * float32(int8(b[4+32*c+i]))
		}
	}
}

// DequantizeBlocks expands typ's blocks (a float type's elements too) into
// float32 values, appended to dst.
func DequantizeBlocks(dst []float32, typ GGMLType, blocks []byte) ([]float32, error) {
	const op = "DequantizeBlocks"
	if !typ.Known() || typ == GGMLQ8_1 {
		return nil, pkg.Errorf(op, ErrDType, "%s: not a type this package decodes", typ)
	}
	size, bs := typ.TypeSize(), typ.BlockSize()
	if len(blocks)%size != 0 {
		return nil, pkg.Errorf(op, ErrShape, "%d bytes: not a whole number of %s blocks of %d bytes", len(blocks), typ, size)
	}
	nb := len(blocks) / size
	if dt, ok := typ.DType(); ok {
		for i := range nb {
			dst = append(dst, float32(floatAt(dt, blocks[i*size:])))
		}
		return dst, nil
	}
	var y [32]float32
	for i := range nb {
		b := blocks[i*size : (i+1)*size]
		for c := range bs / 32 {
			decodeChunk(typ, b, c, &y)
			dst = append(dst, y[:]...)
		}
	}
	return dst, nil
}

func floatAt(dt DType, b []byte) float64 {
	switch dt {
	case F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case F16:
		return float64(f16(b))
	case BF16:
		return float64(hip.BFloat16(binary.LittleEndian.Uint16(b)).Float32())
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}

// decodeRow expands row r of k elements of a QTensor's blocks into y.
func decodeRow(typ GGMLType, blocks []byte, r, k int, y []float32) {
	size, bs := typ.TypeSize(), typ.BlockSize()
	row := blocks[r*(k/bs)*size:]
	var ch [32]float32
	for i := range k / 32 {
		blk := i * 32 / bs
		decodeChunk(typ, row[blk*size:(blk+1)*size], i%(bs/32), &ch)
		copy(y[i*32:], ch[:])
	}
}

func qbytes(st *Storage) []byte { return st.mem.(*cpuMemory).b }

func (c *cpuBackend) dequantize(typ GGMLType, q, dst *Storage, n int) error {
	blocks, d := qbytes(q), dataOf(dst)
	k := typ.BlockSize() * (256 / typ.BlockSize()) // rows of 256 elements (every type's blocks divide them)
	rows := (n + k - 1) / k
	parallel(min(rows, 4*runtime.GOMAXPROCS(0)), func(w int) {
		var ch [32]float32
		per := (rows + 4*runtime.GOMAXPROCS(0) - 1) / (4 * runtime.GOMAXPROCS(0))
		for r := w * per; r < min(rows, (w+1)*per); r++ {
			for e := r * k; e < min(n, (r+1)*k); e += 32 {
				blk := e / typ.BlockSize()
				decodeChunk(typ, blocks[blk*typ.TypeSize():(blk+1)*typ.TypeSize()], e%typ.BlockSize()/32, &ch)
				for i, v := range ch {
					d.setF(e+i, float64(v))
				}
			}
		}
	})
	return nil
}

// qmatmulFuses: the CPU runs QMatmulWith's ops one by one.
func (c *cpuBackend) qmatmulFuses(GGMLType, DType, int) bool { return false }

func (c *cpuBackend) qmatmulFused(GGMLType, view, *Storage, *Storage, int, int, int, qfuse) error {
	return pkg.Errorf("Tensor.QMatmulWith", ErrDevice, "the CPU fuses no ops into a product (its qmatmulFuses says so)")
}

// qmatmul decodes each weight row once for all of x's rows.
func (c *cpuBackend) qmatmul(typ GGMLType, x view, w, dst *Storage, m, n, k int) error {
	xs := gatherF(x)
	xf := make([]float32, len(xs))
	for i, v := range xs {
		xf[i] = float32(v)
	}
	blocks, d := qbytes(w), dataOf(dst)
	var mu sync.Mutex
	pool := [][]float32{}
	parallel(n, func(j int) {
		mu.Lock()
		var y []float32
		if len(pool) > 0 {
			y, pool = pool[len(pool)-1], pool[:len(pool)-1]
		} else {
			y = make([]float32, k)
		}
		mu.Unlock()
		decodeRow(typ, blocks, j, k, y)
		for i := range m {
			xr := xf[i*k : (i+1)*k]
			var acc float32
			for p, v := range y {
				acc += v * xr[p]
			}
			d.setF(i*n+j, float64(acc))
		}
		mu.Lock()
		pool = append(pool, y)
		mu.Unlock()
	})
	return nil
}

func (c *cpuBackend) qrows(typ GGMLType, w *Storage, ids view, dst *Storage, k int) error {
	idx, blocks, d := dataOf(ids.st), qbytes(w), dataOf(dst)
	rows := w.n / (k / typ.BlockSize() * typ.TypeSize())
	n := ids.l.Shape.Elems()
	for i := range n {
		if r := idx.i(ids.l.Offset + i); r < 0 || r >= int64(rows) {
			return pkg.Errorf("qrows", ErrIndex, "index %d of a table of %d rows", r, rows)
		}
	}
	parallel(n, func(i int) {
		y := make([]float32, k)
		decodeRow(typ, blocks, int(idx.i(ids.l.Offset+i)), k, y)
		for p, v := range y {
			d.setF(i*k+p, float64(v))
		}
	})
	return nil
}
