package candle

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
)

// refDequant decodes one block in float64, written from the format's
// definition with ggml's loop structure (not decodeChunk's chunks).
func refDequant(typ GGMLType, b []byte) []float64 {
	h := func(o int) float64 { return float64(hip.Half(binary.LittleEndian.Uint16(b[o:])).Float32()) }
	var y []float64
	switch typ {
	case GGMLQ4_0, GGMLQ4_1:
		d, m, qs := h(0), 0.0, b[2:18]
		if typ == GGMLQ4_1 {
			m, qs = h(2), b[4:20]
		}
		y = make([]float64, 32)
		for j := range 16 {
			lo, hi := float64(qs[j]&15), float64(qs[j]>>4)
			if typ == GGMLQ4_0 {
				y[j], y[j+16] = d*(lo-8), d*(hi-8)
			} else {
				y[j], y[j+16] = d*lo+m, d*hi+m
			}
		}
	case GGMLQ5_0, GGMLQ5_1:
		d, m, o := h(0), 0.0, 2
		if typ == GGMLQ5_1 {
			m, o = h(2), 4
		}
		qh := uint64(b[o]) | uint64(b[o+1])<<8 | uint64(b[o+2])<<16 | uint64(b[o+3])<<24
		qs := b[o+4 : o+20]
		y = make([]float64, 32)
		for j := range 16 {
			lo := float64(int(qs[j]&15) + 16*int(qh>>j&1))
			hi := float64(int(qs[j]>>4) + 16*int(qh>>(16+j)&1))
			if typ == GGMLQ5_0 {
				y[j], y[j+16] = d*(lo-16), d*(hi-16)
			} else {
				y[j], y[j+16] = d*lo+m, d*hi+m
			}
		}
	case GGMLQ8_0:
		for j := range 32 {
			y = append(y, h(0)*float64(int8(b[2+j])))
		}
	case GGMLQ2_K:
		d, dmin := h(80), h(82)
		is := 0
		for n := range 2 {
			q := b[16+32*n:]
			for shift := 0; shift < 8; shift += 2 {
				for half := range 2 {
					sc := b[is]
					is++
					for l := range 16 {
						y = append(y, d*float64(sc&15)*float64(q[16*half+l]>>shift&3)-dmin*float64(sc>>4))
					}
				}
			}
		}
	case GGMLQ3_K:
		d := h(108)
		var sc [16]int
		for j := range 16 {
			low := int(b[96+j%8]>>(4*(j/8))) & 15
			high := int(b[104+j%4]>>(2*(j/4))) & 3
			sc[j] = low + 16*high - 32
		}
		m, is := byte(1), 0
		for n := range 2 {
			q := b[32+32*n:]
			for shift := 0; shift < 8; shift += 2 {
				for half := range 2 {
					for l := range 16 {
						v := int(q[16*half+l]>>shift) & 3
						if b[16*half+l]&m == 0 {
							v -= 4
						}
						y = append(y, d*float64(sc[is])*float64(v))
					}
					is++
				}
				m <<= 1
			}
		}
	case GGMLQ4_K, GGMLQ5_K:
		d, dmin, s := h(0), h(2), b[4:16]
		get := func(j int) (float64, float64) {
			if j < 4 {
				return float64(s[j] & 63), float64(s[j+4] & 63)
			}
			return float64(s[j+4]&15 | s[j-4]>>6<<4), float64(s[j+4]>>4 | s[j]>>6<<4)
		}
		qs, qh := b[16:144], []byte(nil)
		if typ == GGMLQ5_K {
			qh, qs = b[16:48], b[48:176]
		}
		for p := range 4 {
			for half := range 2 {
				sc, mn := get(2*p + half)
				for l := range 32 {
					v := float64(qs[32*p+l] >> (4 * half) & 15)
					if qh != nil && qh[l]>>(2*p+half)&1 == 1 {
						v += 16
					}
					y = append(y, d*sc*v-dmin*mn)
				}
			}
		}
	case GGMLQ6_K:
		d := h(208)
		y = make([]float64, 256)
		for n := range 2 {
			ql, qh, sc := b[64*n:], b[128+32*n:], b[192+8*n:]
			for l := range 32 {
				is := l / 16
				q1 := int(ql[l]&15|(qh[l]>>0&3)<<4) - 32
				q2 := int(ql[l+32]&15|(qh[l]>>2&3)<<4) - 32
				q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				y[128*n+l] = d * float64(int8(sc[is])) * float64(q1)
				y[128*n+l+32] = d * float64(int8(sc[is+2])) * float64(q2)
				y[128*n+l+64] = d * float64(int8(sc[is+4])) * float64(q3)
				y[128*n+l+96] = d * float64(int8(sc[is+6])) * float64(q4)
			}
		}
	case GGMLQ8_K:
		d := float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
		for j := range 256 {
			y = append(y, d*float64(int8(b[4+j])))
		}
	}
	return y
}

// scaleOffsets are where a block's f16 scales are.
var scaleOffsets = map[GGMLType][]int{
	GGMLQ4_0: {0}, GGMLQ4_1: {0, 2}, GGMLQ5_0: {0}, GGMLQ5_1: {0, 2}, GGMLQ8_0: {0},
	GGMLQ2_K: {80, 82}, GGMLQ3_K: {108}, GGMLQ4_K: {0, 2}, GGMLQ5_K: {0, 2}, GGMLQ6_K: {208},
}

// randomBlocks are nb blocks of random bytes with their scales set from
// scale(i) (f16, or f32 for Q8_K).
func randomBlocks(r *rand.Rand, typ GGMLType, nb int, scale func() float32) []byte {
	size := typ.TypeSize()
	b := make([]byte, nb*size)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	for i := range nb {
		blk := b[i*size:]
		if typ == GGMLQ8_K {
			binary.LittleEndian.PutUint32(blk, math.Float32bits(scale()))
			continue
		}
		for _, o := range scaleOffsets[typ] {
			binary.LittleEndian.PutUint16(blk[o:], uint16(hip.HalfFromFloat32(scale())))
		}
	}
	return b
}

func TestDequantizeEveryTypeAgainstDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	extremes := []float32{65504, -65504, 6.0e-8, -6.0e-8, 0, 1, -0.5, 1.0 / 1024}
	for _, typ := range quantTypes() {
		t.Run(typ.String(), func(t *testing.T) {
			i := 0
			scale := func() float32 {
				i++
				if i%3 == 0 {
					return extremes[i/3%len(extremes)]
				}
				return float32(r.NormFloat64() * 0.1)
			}
			b := randomBlocks(r, typ, 24, scale)
			got, err := DequantizeBlocks(nil, typ, b)
			require.NoError(t, err)
			require.Len(t, got, 24*typ.BlockSize())
			for k := range 24 {
				want := refDequant(typ, b[k*typ.TypeSize():(k+1)*typ.TypeSize()])
				for j, w := range want {
					g := got[k*typ.BlockSize()+j]
					// float32 products of the same factors: exact or one rounding apart.
					if math.IsInf(w, 0) || math.Abs(w) > math.MaxFloat32 {
						continue
					}
					assert.InDelta(t, w, float64(g), 1e-6*math.Abs(w)+1e-30, "block %d element %d", k, j)
				}
			}
		})
	}
}

func TestQuantizeRoundTrip(t *testing.T) {
	// RMS error over RMS(x) of Gaussian data, for this package's scales
	// (llama.cpp's searched scales do somewhat better on the K types).
	bounds := map[GGMLType]float64{
		GGMLQ4_0: 0.12, GGMLQ4_1: 0.10, GGMLQ5_0: 0.06, GGMLQ5_1: 0.05, GGMLQ8_0: 0.008,
		GGMLQ2_K: 0.45, GGMLQ3_K: 0.22, GGMLQ4_K: 0.11, GGMLQ5_K: 0.055, GGMLQ6_K: 0.03, GGMLQ8_K: 0.008,
	}
	r := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 256*64)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, typ := range quantTypes() {
		b, err := QuantizeBlocks(typ, x)
		require.NoError(t, err, typ)
		require.Len(t, b, len(x)/typ.BlockSize()*typ.TypeSize())
		y, err := DequantizeBlocks(nil, typ, b)
		require.NoError(t, err)
		var se, sx float64
		for i := range x {
			se += (float64(y[i]) - float64(x[i])) * (float64(y[i]) - float64(x[i]))
			sx += float64(x[i]) * float64(x[i])
		}
		rel := math.Sqrt(se / sx)
		t.Logf("%s: relative RMS error %.4f", typ, rel)
		assert.Less(t, rel, bounds[typ], typ)
		// Zeros, huge and tiny blocks stay finite and zeros stay zeros.
		for _, c := range []float32{0, 60000, -60000, 2e-3} {
			v := make([]float32, typ.BlockSize())
			for i := range v {
				v[i] = c * float32(i%7-3) / 3
			}
			b, err := QuantizeBlocks(typ, v)
			require.NoError(t, err)
			y, err := DequantizeBlocks(nil, typ, b)
			require.NoError(t, err)
			for i, w := range y {
				require.False(t, math.IsNaN(float64(w)) || math.IsInf(float64(w), 0), "%s %g: %v", typ, c, w)
				if c == 0 {
					require.Zero(t, w)
				}
				assert.InDelta(t, v[i], w, 0.6*math.Abs(float64(c))+1e-9, "%s %g element %d", typ, c, i)
			}
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	_, err := QuantizeBlocks(GGMLQ4_0, make([]float32, 33))
	assert.ErrorIs(t, err, ErrShape)
	_, err = QuantizeBlocks(GGMLQ8_1, make([]float32, 32))
	assert.ErrorIs(t, err, ErrDType)
	_, err = QuantizeBlocks(GGMLQ4_K, append(make([]float32, 255), float32(math.NaN())))
	assert.ErrorIs(t, err, ErrArgument)
	_, err = DequantizeBlocks(nil, GGMLQ4_K, make([]byte, 143))
	assert.ErrorIs(t, err, ErrShape)
	_, err = DequantizeBlocks(nil, GGMLType(99), make([]byte, 4))
	assert.ErrorIs(t, err, ErrDType)
	_, err = ParseGGMLType("q9_9")
	assert.ErrorIs(t, err, ErrDType)
	typ, err := ParseGGMLType("q4_k")
	require.NoError(t, err)
	assert.Equal(t, GGMLQ4_K, typ)
}

func TestQTensorOnCPU(t *testing.T) {
	cpu := CPU()
	r := rand.New(rand.NewPCG(5, 6))
	for _, typ := range quantTypes() {
		t.Run(typ.String(), func(t *testing.T) {
			n, k := 7, 2*typ.BlockSize()
			if typ.BlockSize() == 32 {
				k = 96
			}
			b := randomBlocks(r, typ, n*k/typ.BlockSize(), func() float32 { return float32(r.NormFloat64() * 0.05) })
			q, err := NewQTensor(cpu, typ, b, n, k)
			require.NoError(t, err)
			defer q.Close()
			assert.Equal(t, Shape{n, k}, q.Shape())
			assert.Equal(t, len(b), q.Bytes())
			want, err := DequantizeBlocks(nil, typ, b)
			require.NoError(t, err)
			for _, dt := range []DType{F32, F16, BF16} {
				w, err := q.Dequantize(dt)
				require.NoError(t, err)
				got := floats(t, w)
				for i := range want {
					tol := 1e-6 * math.Abs(float64(want[i]))
					if dt != F32 {
						tol = 8e-3*math.Abs(float64(want[i])) + 1e-7
					}
					require.InDelta(t, want[i], got[i], tol, "%s element %d", dt, i)
				}
				w.Close()
			}
			// QMatmul against dequantize-then-matmul in float64.
			for _, m := range []int{1, 3, 9} {
				xs := make([]float32, m*k)
				for i := range xs {
					xs[i] = float32(r.NormFloat64())
				}
				x, err := FromSlice(cpu, xs, m, k)
				require.NoError(t, err)
				y, err := x.QMatmul(q)
				require.NoError(t, err)
				assert.Equal(t, Shape{m, n}, y.Shape())
				got := floats(t, y)
				for i := range m {
					for j := range n {
						var acc, mag float64
						for p := range k {
							acc += float64(xs[i*k+p]) * float64(want[j*k+p])
							mag += math.Abs(float64(xs[i*k+p]) * float64(want[j*k+p]))
						}
						require.InDelta(t, acc, got[i*n+j], 1e-5*mag+1e-6, "m %d row %d col %d", m, i, j)
					}
				}
				x.Close()
				y.Close()
			}
			// Rows against the dequantized table.
			ids, err := FromSlice(cpu, []uint32{6, 0, 3, 3}, 4)
			require.NoError(t, err)
			rows, err := q.Rows(ids, F32)
			require.NoError(t, err)
			got := floats(t, rows)
			for i, id := range []int{6, 0, 3, 3} {
				for p := range k {
					require.Equal(t, want[id*k+p], float32(got[i*k+p]))
				}
			}
			bad, err := FromSlice(cpu, []int64{7}, 1)
			require.NoError(t, err)
			_, err = q.Rows(bad, F32)
			assert.ErrorIs(t, err, ErrIndex)
		})
	}
}

func floats(t *testing.T, x *Tensor) []float64 {
	t.Helper()
	f, err := x.ToDType(F64)
	require.NoError(t, err)
	defer f.Close()
	v, err := ToSlice[float64](f)
	require.NoError(t, err)
	return v
}

func TestQTensorErrors(t *testing.T) {
	cpu := CPU()
	_, err := NewQTensor(cpu, GGMLQ4_0, make([]byte, 18), 33)
	assert.ErrorIs(t, err, ErrShape)
	_, err = NewQTensor(cpu, GGMLQ4_0, make([]byte, 17), 32)
	assert.ErrorIs(t, err, ErrShape)
	_, err = NewQTensor(cpu, GGMLF16, make([]byte, 64), 32)
	assert.ErrorIs(t, err, ErrDType)
	_, err = NewQTensor(nil, GGMLQ4_0, make([]byte, 18), 32)
	assert.ErrorIs(t, err, ErrDevice)
	q, err := NewQTensor(cpu, GGMLQ8_0, make([]byte, 2*34), 2, 32)
	require.NoError(t, err)
	x, err := Zeros(cpu, F32, 3, 31)
	require.NoError(t, err)
	_, err = x.QMatmul(q)
	assert.ErrorIs(t, err, ErrShape)
	xi, err := Zeros(cpu, I64, 3, 32)
	require.NoError(t, err)
	_, err = xi.QMatmul(q)
	assert.ErrorIs(t, err, ErrDType)
	_, err = q.Dequantize(U8)
	assert.ErrorIs(t, err, ErrDType)
	ids, err := FromSlice(cpu, []float32{1}, 1)
	require.NoError(t, err)
	_, err = q.Rows(ids, F32)
	assert.ErrorIs(t, err, ErrDType)
	q3, err := NewQTensor(cpu, GGMLQ8_0, make([]byte, 2*34), 1, 2, 32)
	require.NoError(t, err)
	_, err = x.QMatmul(q3)
	assert.ErrorIs(t, err, ErrShape)
	q.Close()
	x32, err := Zeros(cpu, F32, 3, 32)
	require.NoError(t, err)
	_, err = x32.QMatmul(q)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = q.Dequantize(F32)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = Quantize(x32, GGMLQ4_K)
	assert.ErrorIs(t, err, ErrShape)
	// A weight of no columns: zeros, as Matmul gives.
	empty, err := NewQTensor(cpu, GGMLQ4_K, nil, 3, 0)
	require.NoError(t, err)
	x0, err := Zeros(cpu, F32, 2, 0)
	require.NoError(t, err)
	y0, err := x0.QMatmul(empty)
	require.NoError(t, err)
	assert.Equal(t, []float64{0, 0, 0, 0, 0, 0}, floats(t, y0))
	qq, err := Quantize(x32, GGMLQ8_0)
	require.NoError(t, err)
	assert.Equal(t, GGMLQ8_0, qq.Type())
	assert.NoError(t, qq.Close())
	assert.NoError(t, qq.Close())
}

// TestQmatvecSplit checks the warps a row on the 8-bit matrix-vector
// path for a 1B model's weights on an H200 (132 SMs, 528 block slots,
// eight warps a block of 32) and an MI300X (304 CUs, 1216 slots, four
// warps of 64).
func TestQmatvecSplit(t *testing.T) {
	for _, c := range []struct{ n, per, warps, warpSize, slots, want int }{
		{2048, 64, 8, 32, 528, 2},   // o: one pass either way, 512 blocks over 256
		{3072, 64, 8, 32, 528, 1},   // q, k and v: one pass of 384 blocks over two of 768
		{16384, 64, 8, 32, 528, 1},  // gate and up: four passes over eight
		{2048, 256, 8, 32, 528, 2},  // down: a pass of four chunks a lane
		{128256, 64, 8, 32, 528, 1}, // the LM head
		{1, 64, 8, 32, 528, 1},      // one row: one block either way
		{2048, 64, 4, 64, 1216, 1},  // a 64-wide warp takes the row's 64 chunks
		{2048, 256, 4, 64, 1216, 2}, // down: two chunks a lane in one pass
		{2048, 32, 8, 32, 528, 1},   // never a warp without a chunk
		{4096, 344, 8, 32, 528, 1},  // a 7B model's down (k 11008)
	} {
		assert.Equal(t, c.want, qmatvecSplit(c.n, c.per, c.warps, c.warpSize, c.slots), "n %d, %d chunks, %d warps of %d, %d slots",
			c.n, c.per, c.warps, c.warpSize, c.slots)
	}
	assert.Equal(t, 1, qmatvecSplit(0, 0, 8, 0, 0), "nothing to split")
}

// TestQMatmulWithOnCPU checks QMatmulWith's ops against the same ops run
// one by one (the CPU has no fused kernel: the two must be equal), and
// its argument errors.
func TestQMatmulWithOnCPU(t *testing.T) {
	cpu := CPU()
	r := rand.New(rand.NewPCG(7, 8))
	const n, k = 5, 64
	q, err := NewQTensor(cpu, GGMLQ8_0, randomBlocks(r, GGMLQ8_0, n*k/32, func() float32 { return float32(r.NormFloat64() * 0.05) }), n, k)
	require.NoError(t, err)
	defer q.Close()
	rnd := func(shape ...int) *Tensor {
		x, err := RandNormal(cpu, F32, 0, 1, shape...)
		require.NoError(t, err)
		t.Cleanup(func() { x.Close() })
		return x
	}
	x, gu, alpha, res := rnd(3, k), rnd(3, 2*k), rnd(k), rnd(3, n)
	check := func(name string, got *Tensor, err error, want func() *Tensor) {
		t.Helper()
		require.NoError(t, err, name)
		defer got.Close()
		w := want()
		defer w.Close()
		assert.Equal(t, floats(t, w), floats(t, got), name)
	}
	must := func(y *Tensor, err error) *Tensor {
		t.Helper()
		require.NoError(t, err)
		return y
	}
	y, err := x.QMatmulWith(q, QMatmulOptions{Norm: alpha, Eps: 1e-5, Residual: res})
	check("norm and residual", y, err, func() *Tensor {
		h := must(x.RMSNorm(alpha, 1e-5))
		defer h.Close()
		p := must(h.QMatmul(q))
		defer p.Close()
		return must(p.Add(res))
	})
	y, err = gu.QMatmulWith(q, QMatmulOptions{Gated: true})
	check("gated", y, err, func() *Tensor {
		a, b := must(gu.Narrow(1, 0, k)), must(gu.Narrow(1, k, k))
		defer a.Close()
		defer b.Close()
		h := must(a.SiLUMul(b))
		defer h.Close()
		return must(h.QMatmul(q))
	})
	y, err = x.QMatmulWith(q, QMatmulOptions{})
	check("none", y, err, func() *Tensor { return must(x.QMatmul(q)) })
	none := rnd(0, 2*k)
	y, err = none.QMatmulWith(q, QMatmulOptions{Gated: true})
	require.NoError(t, err)
	assert.Equal(t, Shape{0, n}, y.Shape(), "no rows")
	y.Close()

	bf, err := x.ToDType(BF16)
	require.NoError(t, err)
	defer bf.Close()
	for name, c := range map[string]struct {
		x    *Tensor
		o    QMatmulOptions
		want error
		text string
	}{
		"norm and gate":    {gu, QMatmulOptions{Norm: alpha, Gated: true}, ErrArgument, "Norm and Gated together"},
		"gated, k columns": {x, QMatmulOptions{Gated: true}, ErrShape, "twice the weight's in-features, 128"},
		"norm of 2k":       {x, QMatmulOptions{Norm: gu}, ErrShape, "Norm is [3 128]; want [64], the weight's in-features"},
		"negative eps":     {x, QMatmulOptions{Norm: alpha, Eps: -1}, ErrArgument, "Eps -1"},
		"residual shape":   {x, QMatmulOptions{Residual: alpha}, ErrShape, "Residual is [64]; want the product's shape [3 5]"},
		"residual dtype":   {bf, QMatmulOptions{Residual: res}, ErrDType, "Residual is f32, t bf16"},
		"norm dtype":       {bf, QMatmulOptions{Norm: alpha}, ErrDType, "Norm is f32, t bf16"},
		"closed residual":  {x, QMatmulOptions{Residual: closed(t, cpu)}, ErrClosed, ""},
	} {
		_, err := c.x.QMatmulWith(q, c.o)
		assert.ErrorIs(t, err, c.want, name)
		assert.ErrorContains(t, err, c.text, name)
	}
}

func closed(t *testing.T, dev Device) *Tensor {
	x, err := Zeros(dev, F32, 2)
	require.NoError(t, err)
	x.Close()
	return x
}
