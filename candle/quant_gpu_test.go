package candle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
)

// qTolerance is QMatmul's tolerance on the GPU against the CPU's float32
// products, relative to the sum of the products' magnitudes: float32
// sums in another order (F32), and the output's rounding (F16, BF16; x is
// rounded to dt on both sides).
var qTolerance = map[DType]float64{F32: 2e-5, F16: 2e-3, BF16: 1e-2}

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
		for _, shape := range [][2]int{{37, 512}, {300, 256}} {
			n, k := shape[0], shape[1]
			if k%typ.BlockSize() != 0 {
				continue
			}
			b := randomBlocks(r, typ, n*k/typ.BlockSize(), func() float32 { return float32(r.NormFloat64() * 0.05) })
			qg, err := NewQTensor(d, typ, b, n, k)
			require.NoError(t, err)
			qc, err := NewQTensor(cpu, typ, b, n, k)
			require.NoError(t, err)
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
			qg.Close()
			qc.Close()
		}
	}
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
	shapes := [][2]int{{8192, 2048}, {2048, 8192}, {128256, 2048}}
	for _, typ := range []GGMLType{GGMLQ4_0, GGMLQ4_K, GGMLQ8_0, GGMLQ6_K, GGMLQ5_K, GGMLQ2_K, GGMLQ3_K, GGMLQ4_1, GGMLQ5_0, GGMLQ5_1} {
		for _, s := range shapes {
			n, k := s[0], s[1]
			b := randomBlocks(r, typ, n*k/typ.BlockSize(), func() float32 { return float32(r.NormFloat64() * 0.05) })
			q, err := NewQTensor(d, typ, b, n, k)
			require.NoError(t, err)
			line := fmt.Sprintf("%-5s %6d×%-5d %6.1f MiB:", typ, n, k, float64(len(b))/(1<<20))
			if f, err := (*hipBackend)(d).function(famQuant, quantKernel("qmatvec", typ, BF16)); err == nil {
				if regs, err := f.Attribute(hip.FuncAttributeNumRegs); err == nil {
					line = fmt.Sprintf("%s (qmatvec: %d registers)", line, regs)
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
