package candle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
)

// qTolerance is QMatmul's tolerance on the GPU against the CPU's float32
// products, relative to the sum of the products' magnitudes: float32
// sums in another order (F32), and the output's rounding (F16, BF16; x is
// rounded to dt on both sides). For up to eight rows of F16 or BF16 x the
// GPU quantizes x to 8 bits a chunk of 32 (the 8-bit dot products): each
// value off by up to 1/254 of its chunk's largest, which for these
// normal x and weights came to 2e-3 of the magnitudes at worst.
var qTolerance = map[DType]float64{F32: 2e-5, F16: 5e-3, BF16: 1e-2}

// TestGPUQuantized checks every type's kernels against the CPU device:
// Dequantize and Rows (with ids out of range) to a rounding of the
// output (the GPU may fuse a block's scale and min into one FMA), and
// QMatmul for decode's row counts (the matrix-vector kernel) and
// prefill's (BLAS over dequantized slices), with odd row counts.
func TestGPUQuantized(t *testing.T) {
	d := gpu(t)
	cpu := CPU()
	r := rand.New(rand.NewPCG(41, 42))
	// Slices of 16 KiB: prefill's products take several (4 to 64 rows of
	// these shapes), the last one short.
	defer func(b int) { qsliceBytes = b }(qsliceBytes)
	qsliceBytes = 16 << 10
	for _, typ := range quantTypes() {
		// 96 columns: three chunks a row, fewer than a warp's lanes.
		for _, shape := range [][2]int{{37, 512}, {300, 256}, {29, 96}} {
			n, k := shape[0], shape[1]
			if k%typ.BlockSize() != 0 {
				continue
			}
			qg, qc, b := quantPair(t, d, r, typ, n, k)
			want, err := DequantizeBlocks(nil, typ, b)
			require.NoError(t, err)
			for _, dt := range []DType{F32, F16, BF16} {
				t.Run(fmt.Sprintf("%s %dx%d %s", typ, n, k, dt), func(t *testing.T) {
					w, err := qg.Dequantize(dt)
					require.NoError(t, err)
					got := values(t, w)
					w.Close()
					var scale float64
					for _, v := range want {
						scale = math.Max(scale, math.Abs(float64(v)))
					}
					ulp := map[DType]float64{F32: 1e-6, F16: 1e-3, BF16: 8e-3}[dt] * scale
					for i, v := range want {
						require.InDelta(t, roundTo(dt, float64(v)), got[i], ulp, "dequantized element %d", i)
					}
					ids := []int64{int64(n - 1), 0, 5, int64(n), 5, -1}
					idg, err := FromSlice(d, ids, len(ids))
					require.NoError(t, err)
					rows, err := qg.Rows(idg, dt)
					require.NoError(t, err)
					rv := values(t, rows)
					rows.Close()
					idg.Close()
					for i, id := range ids {
						for p := range k {
							w := 0.0
							if id >= 0 && id < int64(n) {
								w = roundTo(dt, float64(want[int(id)*k+p]))
							}
							require.InDelta(t, w, rv[i*k+p], ulp, "row %d (id %d) element %d", i, id, p)
						}
					}
					for _, m := range []int{1, 3, 4, 5, 8, 9, 64, 200} {
						xs := make([]float64, m*k)
						for i := range xs {
							xs[i] = roundTo(dt, r.NormFloat64())
						}
						xg := tensorOf(t, d, dt, xs, m, k)
						xc := tensorOf(t, cpu, F32, xs, m, k)
						yg, err := xg.QMatmul(qg)
						require.NoError(t, err)
						yc, err := xc.QMatmul(qc)
						require.NoError(t, err)
						gv, cv := values(t, yg), values(t, yc)
						worst := 0.0
						for i := range m {
							for j := range n {
								var mag float64
								for p := range k {
									mag += math.Abs(xs[i*k+p] * float64(want[j*k+p]))
								}
								e := math.Abs(gv[i*n+j]-cv[i*n+j]) / (mag + 1e-30)
								worst = math.Max(worst, e)
							}
						}
						assert.LessOrEqual(t, worst, qTolerance[dt], "m %d: worst relative error %.3g", m, worst)
						xg.Close()
						xc.Close()
						yg.Close()
						yc.Close()
					}
				})
			}
		}
	}
}

// TestGPUQMatvecOneRow runs the products of one row of x on each of
// their ways against the CPU: qmatvec8k4 (Q4_K) with two rows a warp (n
// past a wave of blocks of a warp a row, with a short last block), with
// warps sharing rows (few rows, long ones; rows of 2304 values leave the
// last round of a row's pairs 4 lanes of 32) and with a warp a row, x
// quantized in the kernel (k up to 2048) or by qx (longer rows);
// qmatvec8s (Q6_K rows of 2048 values: 16-byte aligned); qmatvec8 for the
// other types; each with and without a residual.
func TestGPUQMatvecOneRow(t *testing.T) {
	d := gpu(t)
	cpu := CPU()
	r := rand.New(rand.NewPCG(49, 50))
	b := (*hipBackend)(d)
	warps := int(block1D.X) / b.props.WarpSize
	wide := warps*b.props.MultiProcessorCount*qmatvecBlocksPerSM + 5
	for _, s := range []struct {
		typ  GGMLType
		n, k int
	}{
		{GGMLQ4_K, wide, 256}, {GGMLQ4_K, wide, 4096}, {GGMLQ4_K, 40, 8192}, {GGMLQ4_K, 37, 512}, {GGMLQ4_K, 3, 2048},
		{GGMLQ4_K, 21, 2304},
		{GGMLQ6_K, 37, 2048}, {GGMLQ8_0, 45, 1024}, {GGMLQ4_0, 300, 512}, {GGMLQ5_K, 29, 1024}, {GGMLQ5_1, 9, 256},
	} {
		typ, n, k := s.typ, s.n, s.k
		qg, qc, blocks := quantPair(t, d, r, typ, n, k)
		w, err := DequantizeBlocks(nil, typ, blocks)
		require.NoError(t, err)
		for _, dt := range []DType{F16, BF16} {
			for _, residual := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s %dx%d %s residual %v", typ, n, k, dt, residual), func(t *testing.T) {
					xs := make([]float64, k)
					for i := range xs {
						xs[i] = roundTo(dt, r.NormFloat64())
					}
					rs := make([]float64, n)
					for i := range rs {
						if residual {
							rs[i] = roundTo(dt, r.NormFloat64())
						}
					}
					xg, xc := tensorOf(t, d, dt, xs, 1, k), tensorOf(t, cpu, F32, xs, 1, k)
					var og, oc QMatmulOptions
					if residual {
						og.Residual, oc.Residual = tensorOf(t, d, dt, rs, 1, n), tensorOf(t, cpu, F32, rs, 1, n)
					}
					yg, err := xg.QMatmulWith(qg, og)
					require.NoError(t, err)
					yc, err := xc.QMatmulWith(qc, oc)
					require.NoError(t, err)
					gv, cv := values(t, yg), values(t, yc)
					worst, diff2, want2 := 0.0, 0.0, 0.0
					for j := range n {
						mag := math.Abs(rs[j])
						for p := range k {
							mag += math.Abs(xs[p] * float64(w[j*k+p]))
						}
						worst = math.Max(worst, math.Abs(gv[j]-cv[j])/(mag+1e-30))
						diff2 += (gv[j] - cv[j]) * (gv[j] - cv[j])
						want2 += cv[j] * cv[j]
					}
					assert.LessOrEqual(t, worst, qTolerance[dt], "worst relative error %.3g", worst)
					// Against the outputs' own size too: an output missing a
					// split's or a row's share (or zeros) is 0.7 or more off
					// there, where Σ|x·w| of rows of 8192 could hide it. (x in
					// 8 bits and the outputs' rounding alone: up to 0.044 for
					// 3 rows of 2048 over 200 seeds in a float64 model.)
					assert.Less(t, math.Sqrt(diff2/want2), 0.1, "relative error of the whole output")
					yg.Close()
					yc.Close()
				})
			}
		}
	}
}

// TestGPUQMatvecExtremeX gives the matrix-vector kernels x rows that the
// 8-bit path must not get wrong quietly: a NaN (the row's outputs NaN),
// an infinity (not finite), values near BF16's smallest normal and near
// its largest (quantized a chunk at a time, they scale like any other).
func TestGPUQMatvecExtremeX(t *testing.T) {
	d := gpu(t)
	cpu := CPU()
	r := rand.New(rand.NewPCG(45, 46))
	const n, k = 64, 512
	for _, typ := range []GGMLType{GGMLQ4_0, GGMLQ8_0, GGMLQ4_K, GGMLQ6_K} {
		qg, qc, b := quantPair(t, d, r, typ, n, k)
		w, err := DequantizeBlocks(nil, typ, b)
		require.NoError(t, err)
		for _, dt := range []DType{F16, BF16} {
			t.Run(fmt.Sprintf("%s %s", typ, dt), func(t *testing.T) {
				// huge: the largest values whose products (up to 4·huge·Σ|w|
				// a row) stay an eighth of dt's range.
				tiny, top := 1e-37, 3.4e38
				if dt == F16 {
					tiny, top = 1e-4, 65504
				}
				var wsum float64
				for j := range n {
					var s float64
					for p := range k {
						s += math.Abs(float64(w[j*k+p]))
					}
					wsum = math.Max(wsum, s)
				}
				huge := math.Min(top/8/4/wsum, top/8)
				xs := make([]float64, 4*k)
				for i := range xs {
					xs[i] = r.NormFloat64()
				}
				xs[5] = math.NaN()
				xs[k+300] = math.Inf(1)
				for i := range k {
					xs[2*k+i] = roundTo(dt, xs[2*k+i]*tiny)
					xs[3*k+i] = roundTo(dt, xs[3*k+i]*huge)
				}
				xg := tensorOf(t, d, dt, xs, 4, k)
				defer xg.Close()
				yg, err := xg.QMatmul(qg)
				require.NoError(t, err)
				defer yg.Close()
				got := values(t, yg)
				for j := range n {
					assert.True(t, math.IsNaN(got[j]), "row 0 (a NaN in x), output %d: %g", j, got[j])
					v := got[n+j]
					assert.True(t, math.IsNaN(v) || math.IsInf(v, 0), "row 1 (an infinity in x), output %d: %g", j, v)
				}
				for _, row := range []int{2, 3} {
					xr := tensorOf(t, cpu, F32, xs[row*k:(row+1)*k], 1, k)
					yc, err := xr.QMatmul(qc)
					require.NoError(t, err)
					want := values(t, yc)
					xr.Close()
					yc.Close()
					for j := range n {
						var mag float64
						for p := range k {
							mag += math.Abs(xs[row*k+p] * float64(w[j*k+p]))
						}
						assert.InDelta(t, want[j], got[row*n+j], qTolerance[dt]*mag, "row %d output %d", row, j)
					}
				}
			})
		}
	}
}

// TestGPUQMatmulWith checks the fused norm, gate and residual of the
// 8-bit matrix-vector kernels (up to four rows, and the wide one's five to
// eight) and, for nine rows and Q3_K, of the ops path against the CPU's
// ops in float32.
func TestGPUQMatmulWith(t *testing.T) {
	d := gpu(t)
	cpu := CPU()
	r := rand.New(rand.NewPCG(47, 48))
	// 64×2048: two warps a row (qmatvecSplit) for the types on qmatvec8,
	// and a norm over a row of eight values a thread of one block (qx's,
	// or Q4_K's qmatvec8k4q's for one row); 40×4096: Q4_K's one row through
	// qx and qmatvec8k4, norm and gate.
	for _, c := range []struct {
		typ  GGMLType
		n, k int
	}{{GGMLQ4_K, 300, 512}, {GGMLQ8_0, 300, 512}, {GGMLQ6_K, 300, 512}, {GGMLQ5_0, 300, 512}, {GGMLQ3_K, 300, 512}, {GGMLQ4_K, 64, 2048}, {GGMLQ4_K, 40, 4096}} {
		typ, n, k := c.typ, c.n, c.k
		qg, qc, _ := quantPair(t, d, r, typ, n, k)
		for _, dt := range []DType{F16, BF16} {
			for _, m := range []int{1, 4, 5, 8, 9} {
				for _, mode := range []string{"norm", "gated", "norm+residual", "gated+residual"} {
					t.Run(fmt.Sprintf("%s %dx%d %s m%d %s", typ, n, k, dt, m, mode), func(t *testing.T) {
						cols := k
						if strings.HasPrefix(mode, "gated") {
							cols = 2 * k
						}
						rnd := func(scale float64, shape ...int) (*Tensor, *Tensor) {
							v := make([]float64, Shape(shape).Elems())
							for i := range v {
								v[i] = roundTo(dt, r.NormFloat64()*scale)
							}
							return tensorOf(t, d, dt, v, shape...), tensorOf(t, cpu, F32, v, shape...)
						}
						xg, xc := rnd(1, m, cols)
						ag, ac := rnd(0.5, k)
						rg, rc := rnd(3, m, n)
						og, oc := QMatmulOptions{Eps: 1e-5}, QMatmulOptions{Eps: 1e-5}
						if strings.HasPrefix(mode, "norm") {
							og.Norm, oc.Norm = ag, ac
						} else {
							og.Gated, oc.Gated = true, true
						}
						if strings.HasSuffix(mode, "residual") {
							og.Residual, oc.Residual = rg, rc
						}
						yg, err := xg.QMatmulWith(qg, og)
						require.NoError(t, err)
						yc, err := xc.QMatmulWith(qc, oc)
						require.NoError(t, err)
						got, want := values(t, yg), values(t, yc)
						// The product's error (the 8-bit x) relative to the
						// product's largest value, not the residual's, which
						// would hide a wrong product; and the output's
						// rounding of the residual added.
						res := make([]float64, len(want))
						if og.Residual != nil {
							res = values(t, rc)
						}
						var prod float64
						for i, v := range want {
							prod = math.Max(prod, math.Abs(v-res[i]))
						}
						require.Positive(t, prod)
						for i := range want {
							require.InDelta(t, want[i], got[i], 2e-2*prod+1e-2*math.Abs(res[i]), "element %d", i)
						}
						for _, x := range []*Tensor{xg, xc, ag, ac, rg, rc, yg, yc} {
							x.Close()
						}
					})
				}
			}
		}
	}
}

// quantPair makes random blocks of typ for an (n, k) weight, as QTensors
// on the GPU and on the CPU that the test's end closes.
func quantPair(t *testing.T, d *HIPDevice, r *rand.Rand, typ GGMLType, n, k int) (qg, qc *QTensor, b []byte) {
	t.Helper()
	b = randomBlocks(r, typ, n*k/typ.BlockSize(), func() float32 { return float32(r.NormFloat64() * 0.05) })
	qg, err := NewQTensor(d, typ, b, n, k)
	require.NoError(t, err)
	t.Cleanup(func() { qg.Close() })
	qc, err = NewQTensor(CPU(), typ, b, n, k)
	require.NoError(t, err)
	t.Cleanup(func() { qc.Close() })
	return qg, qc, b
}

func roundTo(dt DType, v float64) float64 {
	switch dt {
	case F16:
		return float64(hip.HalfFromFloat32(float32(v)).Float32())
	case BF16:
		return float64(hip.BFloat16FromFloat32(float32(v)).Float32())
	}
	return float64(float32(v))
}

// TestGPUQMatvecSpeed prints the matrix-vector kernel's rate per type for
// decode's shapes (bytes of the weight read once, a copy's rate for
// scale), and the sliced prefill product's.
func TestGPUQMatvecSpeed(t *testing.T) {
	d := gpu(t)
	poisonAllocs.Store(false)
	r := rand.New(rand.NewPCG(43, 44))
	shapes := [][2]int{{3072, 2048}, {2048, 2048}, {8192, 2048}, {2048, 8192}, {128256, 2048}}
	for _, typ := range []GGMLType{GGMLQ4_0, GGMLQ4_K, GGMLQ8_0, GGMLQ6_K, GGMLQ5_K, GGMLQ2_K, GGMLQ3_K, GGMLQ4_1, GGMLQ5_0, GGMLQ5_1} {
		for _, s := range shapes {
			n, k := s[0], s[1]
			b := randomBlocks(r, typ, n*k/typ.BlockSize(), func() float32 { return float32(r.NormFloat64() * 0.05) })
			q, err := NewQTensor(d, typ, b, n, k)
			require.NoError(t, err)
			line := fmt.Sprintf("%-5s %6d×%-5d %6.1f MiB:", typ, n, k, float64(len(b))/(1<<20))
			kinds := []quantKind{qMatvec}
			if qmatvecI8(typ, BF16) {
				kinds = []quantKind{qMatvec8, qMatvec8W}
			}
			for _, kind := range kinds {
				if f, err := (*hipBackend)(d).function(quantKernel(kind, typ, BF16)); err == nil {
					regs, _ := f.Attribute(hip.FuncAttributeNumRegs)
					local, _ := f.Attribute(hip.FuncAttributeLocalSizeBytes)
					line = fmt.Sprintf("%s (%s: %d registers, %d bytes local)", line, quantKindNames[kind], regs, local)
				}
			}
			for _, m := range []int{1, 4, 8, 512} {
				x, err := RandNormal(d, BF16, 0, 1, m, k)
				require.NoError(t, err)
				run := func() {
					y, err := x.QMatmul(q)
					require.NoError(t, err)
					y.Close()
				}
				for range 3 {
					run()
				}
				require.NoError(t, d.Synchronize())
				reps := 50
				if m == 512 {
					reps = 10
				}
				start := time.Now()
				for range reps {
					run()
				}
				require.NoError(t, d.Synchronize())
				per := time.Since(start) / time.Duration(reps)
				if m == 512 {
					line += fmt.Sprintf("  m %d: %7.1f µs (%.1f TFLOP/s)", m, float64(per.Nanoseconds())/1e3, 2*float64(m*n*k)/per.Seconds()/1e12)
				} else {
					line += fmt.Sprintf("  m %d: %7.1f µs (%6.0f GB/s)", m, float64(per.Nanoseconds())/1e3, float64(len(b))/per.Seconds()/1e9)
				}
				x.Close()
			}
			t.Log(line)
			q.Close()
		}
	}
}
