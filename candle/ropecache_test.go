package candle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ropeCacheRef is RoPECache in float64: the rotated queries, and the caches
// after the writes (rows × hkv × d each, starting from k0 and v0).
func ropeCacheRef(qkv, cos, sin []float64, n, hq, hkv, d int, slots []int, k0, v0 []float64) (q, kc, vc []float64) {
	h, half := hq+2*hkv, d/2
	q = make([]float64, n*hq*d)
	kc, vc = append([]float64(nil), k0...), append([]float64(nil), v0...)
	for t := range n {
		for hd := range h {
			x := qkv[(t*h+hd)*d:]
			for i := range half {
				c, s := cos[t*half+i], sin[t*half+i]
				y1, y2 := x[i]*c-x[i+half]*s, x[i]*s+x[i+half]*c
				switch {
				case hd < hq:
					q[(t*hq+hd)*d+i], q[(t*hq+hd)*d+i+half] = y1, y2
				case hd < hq+hkv:
					at := (slots[t]*hkv + hd - hq) * d
					kc[at+i], kc[at+i+half] = y1, y2
				default:
					at := (slots[t]*hkv + hd - hq - hkv) * d
					vc[at+i], vc[at+i+half] = x[i], x[i+half]
				}
			}
		}
	}
	return q, kc, vc
}

// normalF32s is k normal values, each exact in float32.
func normalF32s(r *rand.Rand, k int) []float64 {
	v := make([]float64, k)
	for i := range v {
		v[i] = float64(float32(r.NormFloat64()))
	}
	return v
}

func TestRoPECacheOnCPU(t *testing.T) {
	cpu := CPU()
	r := rand.New(rand.NewPCG(5, 6))
	const n, hq, hkv, d, rows = 3, 4, 2, 8, 7
	rnd := func(k int) []float64 { return normalF32s(r, k) }
	qkv, cos, sin := rnd(n*(hq+2*hkv)*d), rnd(n*d/2), rnd(n*d/2)
	k0, v0 := rnd(rows*hkv*d), rnd(rows*hkv*d)
	slots := []int{5, 0, 2}
	wq, wk, wv := ropeCacheRef(qkv, cos, sin, n, hq, hkv, d, slots, k0, v0)
	for _, idx := range []DType{U32, I64} {
		t.Run(idx.String(), func(t *testing.T) {
			x := tensorOf(t, cpu, F32, qkv, n, hq+2*hkv, d)
			c, s := tensorOf(t, cpu, F32, cos, n, d/2), tensorOf(t, cpu, F32, sin, n, d/2)
			kc, vc := tensorOf(t, cpu, F32, k0, rows, hkv, d), tensorOf(t, cpu, F32, v0, rows, hkv, d)
			sl := tensorOf(t, cpu, idx, []float64{5, 0, 2}, n)
			q, err := x.RoPECache(c, s, hq, sl, kc, vc)
			require.NoError(t, err)
			assert.Equal(t, Shape{n, hq, d}, q.Shape())
			for name, p := range map[string][2][]float64{"q": {wq, values(t, q)}, "kc": {wk, values(t, kc)}, "vc": {wv, values(t, vc)}} {
				require.Len(t, p[1], len(p[0]), name)
				for i := range p[0] {
					require.InDelta(t, p[0][i], p[1][i], 1e-5, "%s element %d", name, i)
				}
			}
		})
	}
}

// TestRoPEQKVOnCPU checks RoPEQKV's three parts against the reference:
// written to the rows 0..n-1 of zero caches, its k and v are those rows.
func TestRoPEQKVOnCPU(t *testing.T) {
	cpu := CPU()
	r := rand.New(rand.NewPCG(7, 8))
	const n, hq, hkv, d = 3, 2, 1, 8
	rnd := func(k int) []float64 { return normalF32s(r, k) }
	qkv, cos, sin := rnd(n*(hq+2*hkv)*d), rnd(n*d/2), rnd(n*d/2)
	zeros := make([]float64, n*hkv*d)
	wq, wk, wv := ropeCacheRef(qkv, cos, sin, n, hq, hkv, d, []int{0, 1, 2}, zeros, zeros)
	x := tensorOf(t, cpu, F32, qkv, n, hq+2*hkv, d)
	q, k, v, err := x.RoPEQKV(tensorOf(t, cpu, F32, cos, n, d/2), tensorOf(t, cpu, F32, sin, n, d/2), hq)
	require.NoError(t, err)
	defer q.Close()
	defer k.Close()
	defer v.Close()
	assert.True(t, q.Layout().IsContiguous(), "q comes back contiguous")
	for _, c := range []struct {
		name  string
		got   *Tensor
		want  []float64
		shape Shape
	}{{"q", q, wq, Shape{n, hq, d}}, {"k", k, wk, Shape{n, hkv, d}}, {"v", v, wv, Shape{n, hkv, d}}} {
		assert.Equal(t, c.shape, c.got.Shape(), c.name)
		got := values(t, c.got)
		require.Len(t, got, len(c.want), c.name)
		for i := range got {
			require.InDelta(t, c.want[i], got[i], 1e-5, "%s element %d", c.name, i)
		}
	}
	_, _, _, err = x.RoPEQKV(tensorOf(t, cpu, F32, cos, n, d/2), tensorOf(t, cpu, F32, sin, n, d/2), 3)
	assert.ErrorIs(t, err, ErrArgument, "3 query heads of 4 leave one for k and v")
}

func TestRoPECacheErrors(t *testing.T) {
	cpu := CPU()
	z := func(dt DType, s ...int) *Tensor {
		x, err := Zeros(cpu, dt, s...)
		require.NoError(t, err)
		return x
	}
	x, c, s, sl, kc, vc := z(F32, 2, 6, 4), z(F32, 2, 2), z(F32, 2, 2), z(U32, 2), z(F32, 5, 1, 4), z(F32, 5, 1, 4)
	for _, e := range []struct {
		name string
		call func() error
		kind error
	}{
		{"rank", func() error { _, err := z(F32, 12, 4).RoPECache(c, s, 4, sl, kc, vc); return err }, ErrShape},
		{"heads", func() error { _, err := x.RoPECache(c, s, 3, sl, kc, vc); return err }, ErrArgument},
		{"no kv heads", func() error { _, err := x.RoPECache(c, s, 6, sl, kc, vc); return err }, ErrArgument},
		{"odd head dim", func() error {
			_, err := z(F32, 2, 6, 3).RoPECache(z(F32, 2, 1), z(F32, 2, 1), 4, sl, z(F32, 5, 1, 3), z(F32, 5, 1, 3))
			return err
		}, ErrShape},
		{"cos", func() error { _, err := x.RoPECache(z(F32, 2, 4), s, 4, sl, kc, vc); return err }, ErrShape},
		{"slots", func() error { _, err := x.RoPECache(c, s, 4, z(U32, 3), kc, vc); return err }, ErrShape},
		{"caches", func() error { _, err := x.RoPECache(c, s, 4, sl, z(F32, 5, 2, 4), vc); return err }, ErrShape},
		{"dtype", func() error { _, err := x.RoPECache(c, s, 4, sl, z(F16, 5, 1, 4), z(F16, 5, 1, 4)); return err }, ErrDType},
		{"slot out of range", func() error {
			bad := tensorOf(t, cpu, U32, []float64{1, 5}, 2)
			_, err := x.RoPECache(c, s, 4, bad, kc, vc)
			return err
		}, ErrIndex},
	} {
		err := e.call()
		require.Error(t, err, e.name)
		assert.ErrorIs(t, err, e.kind, "%s: %v", e.name, err)
	}
}

// TestGPURoPECache checks the kernel against the CPU's ops for each float
// dtype, with a slot out of range (the GPU writes nothing for it).
func TestGPURoPECache(t *testing.T) {
	d := gpu(t)
	cpu := CPU()
	r := rand.New(rand.NewPCG(7, 8))
	for _, dt := range []DType{F32, F16, BF16} {
		for _, c := range []struct{ n, hq, hkv, hd int }{{1, 32, 8, 64}, {5, 4, 4, 128}, {3, 6, 2, 2}} {
			t.Run(fmt.Sprintf("%s %+v", dt, c), func(t *testing.T) {
				const rows = 9
				rnd := func(k int) []float64 {
					v := make([]float64, k)
					for i := range v {
						v[i] = roundTo(dt, r.NormFloat64())
					}
					return v
				}
				qkv, cos, sin := rnd(c.n*(c.hq+2*c.hkv)*c.hd), rnd(c.n*c.hd/2), rnd(c.n*c.hd/2)
				k0, v0 := rnd(rows*c.hkv*c.hd), rnd(rows*c.hkv*c.hd)
				slots := make([]float64, c.n) // distinct, as a cache's
				for i := range slots {
					slots[i] = float64((2*i + 1) % rows)
				}
				run := func(dev Device, slots []float64) (q, kc, vc []float64) {
					x := tensorOf(t, dev, dt, qkv, c.n, c.hq+2*c.hkv, c.hd)
					co, si := tensorOf(t, dev, dt, cos, c.n, c.hd/2), tensorOf(t, dev, dt, sin, c.n, c.hd/2)
					kt, vt := tensorOf(t, dev, dt, k0, rows, c.hkv, c.hd), tensorOf(t, dev, dt, v0, rows, c.hkv, c.hd)
					sl := tensorOf(t, dev, U32, slots, c.n)
					out, err := x.RoPECache(co, si, c.hq, sl, kt, vt)
					require.NoError(t, err)
					return values(t, out), values(t, kt), values(t, vt)
				}
				gq, gk, gv := run(d, slots)
				cq, ck, cv := run(cpu, slots)
				tol := map[DType]float64{F32: 1e-5, F16: 4e-3, BF16: 3e-2}[dt]
				for name, p := range map[string][2][]float64{"q": {cq, gq}, "kc": {ck, gk}, "vc": {cv, gv}} {
					for i := range p[0] {
						require.InDelta(t, p[0][i], p[1][i], tol*math.Max(1, math.Abs(p[0][i])), "%s element %d", name, i)
					}
				}
				// A slot out of range: that token's key and value go nowhere;
				// the others' rows are as on the CPU.
				bad := append([]float64(nil), slots...)
				bad[0] = rows
				_, bk, bv := run(d, bad)
				wk, wv := roundAll(dt, k0), roundAll(dt, v0)
				row := c.hkv * c.hd
				for j := 1; j < c.n; j++ {
					s := int(slots[j]) * row
					copy(wk[s:s+row], ck[s:s+row])
					copy(wv[s:s+row], cv[s:s+row])
				}
				for i := range wk {
					require.InDelta(t, wk[i], bk[i], tol*math.Max(1, math.Abs(wk[i])), "kc element %d", i)
					require.InDelta(t, wv[i], bv[i], tol*math.Max(1, math.Abs(wv[i])), "vc element %d", i)
				}
			})
		}
	}
}

func roundAll(dt DType, v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = roundTo(dt, x)
	}
	return out
}
