package candle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFusedOnCPU(t *testing.T) {
	cpu := CPU()
	ok := keep(t)
	e1, e2, e3 := math.Exp(1), math.Exp(2), math.Exp(3)
	s := e1 + e2 + e3
	x := tensorOf(t, cpu, F64, []float64{1, 2, 3}, 1, 3)
	_, err := x.SoftmaxLastDim()
	assert.ErrorIs(t, err, ErrDType, "f64 is not a fused dtype")

	x = tensorOf(t, cpu, F32, []float64{1, 2, 3, 1000, 1001, math.NaN()}, 2, 3)
	got := values(t, ok(x.SoftmaxLastDim()))
	near(t, []float64{e1 / s, e2 / s, e3 / s}, got[:3], 1e-6)
	assert.True(t, math.IsNaN(got[3]) && math.IsNaN(got[4]) && math.IsNaN(got[5]), "a row with a NaN is all NaN")
	big := tensorOf(t, cpu, F32, []float64{1000, 1001}, 1, 2)
	near(t, []float64{1 / (1 + math.E), math.E / (1 + math.E)}, values(t, ok(big.SoftmaxLastDim())), 1e-6, "no overflow")
	near(t, []float64{-math.Log1p(math.E), 1 - math.Log1p(math.E)}, values(t, ok(big.LogSoftmaxLastDim())), 1e-6)
	// A strided input reads as its values.
	col := ok(tensorOf(t, cpu, F32, []float64{1, 5, 2, 6, 3, 7}, 3, 2).T())
	near(t, []float64{e1 / s, e2 / s, e3 / s}, values(t, ok(col.SoftmaxLastDim()))[:3], 1e-6)

	v := tensorOf(t, cpu, F32, []float64{1, 2, 3, 4}, 1, 4)
	alpha := tensorOf(t, cpu, F32, []float64{1, 1, 2, 2})
	beta := tensorOf(t, cpu, F32, []float64{0, 1, 0, 1})
	rms := math.Sqrt(30.0 / 4)
	near(t, []float64{1 / rms, 2 / rms, 6 / rms, 8 / rms}, values(t, ok(v.RMSNorm(alpha, 0))), 1e-6)
	sd := math.Sqrt(1.25 + 1e-5)
	near(t, []float64{-1.5 / sd, -0.5/sd + 1, 2 * 0.5 / sd, 2*1.5/sd + 1}, values(t, ok(v.LayerNorm(alpha, beta, 1e-5))), 1e-6)
	near(t, []float64{-1.5 / sd, -0.5 / sd, 2 * 0.5 / sd, 2 * 1.5 / sd}, values(t, ok(v.LayerNorm(alpha, nil, 1e-5))), 1e-6)

	// Pair 0 turns a quarter, pair 1 stays.
	q := tensorOf(t, cpu, F32, []float64{1, 2, 3, 4}, 1, 1, 1, 4)
	cos, sin := tensorOf(t, cpu, F32, []float64{0, 1}, 1, 2), tensorOf(t, cpu, F32, []float64{1, 0}, 1, 2)
	assert.Equal(t, []float64{-3, 2, 1, 4}, values(t, ok(q.RoPE(cos, sin))), "half-split pairs (x0, x2), (x1, x3)")
	assert.Equal(t, []float64{-2, 1, 3, 4}, values(t, ok(q.RoPEInterleaved(cos, sin))), "interleaved pairs (x0, x1), (x2, x3)")
	// (b, t, h, d): position 1 turns a quarter; per batch, batch 1 turns back.
	p := tensorOf(t, cpu, F32, []float64{1, 0, 1, 0, 1, 0, 1, 0}, 2, 2, 1, 2)
	c2, s2 := tensorOf(t, cpu, F32, []float64{1, 0}, 2, 1), tensorOf(t, cpu, F32, []float64{0, 1}, 2, 1)
	assert.Equal(t, []float64{1, 0, 0, 1, 1, 0, 0, 1}, values(t, ok(p.RoPETHD(c2, s2))))
	cb, sb := tensorOf(t, cpu, F32, []float64{1, 0, 1, 0}, 2, 2, 1), tensorOf(t, cpu, F32, []float64{0, 1, 0, -1}, 2, 2, 1)
	assert.Equal(t, []float64{1, 0, 0, 1, 1, 0, 0, -1}, values(t, ok(p.RoPETHD(cb, sb))))

	a, b := tensorOf(t, cpu, F32, []float64{1, -1}), tensorOf(t, cpu, F32, []float64{2, 3})
	near(t, []float64{2 / (1 + 1/math.E), -3 / (1 + math.E)}, values(t, ok(a.SiLUMul(b))), 1e-6)
}

func TestFusedErrors(t *testing.T) {
	cpu := CPU()
	ok := keep(t)
	x := ok(Zeros(cpu, F32, 2, 4))
	_, err := ok(Zeros(cpu, I64, 2, 4)).SoftmaxLastDim()
	assert.ErrorIs(t, err, ErrDType)
	assert.ErrorContains(t, err, "the fused ops take f32, f16 or bf16")
	_, err = x.RMSNorm(ok(Zeros(cpu, F32, 3)), 1e-5)
	assert.ErrorIs(t, err, ErrShape)
	assert.ErrorContains(t, err, "alpha is [3]; want [4], the last dim of [2 4]")
	_, err = x.RMSNorm(ok(Zeros(cpu, F16, 4)), 1e-5)
	assert.ErrorIs(t, err, ErrDType)
	_, err = x.RMSNorm(nil, 1e-5)
	assert.ErrorIs(t, err, ErrArgument)
	_, err = x.LayerNorm(ok(Zeros(cpu, F32, 4)), ok(Zeros(cpu, F32, 2)), 1e-5)
	assert.ErrorContains(t, err, "beta is [2]")
	_, err = x.RMSNorm(ok(Zeros(cpu, F32, 4)), -1)
	assert.ErrorIs(t, err, ErrArgument)
	cs := ok(Zeros(cpu, F32, 3, 2))
	_, err = x.RoPE(cs, cs)
	assert.ErrorContains(t, err, "want rank 4")
	_, err = ok(Zeros(cpu, F32, 1, 2, 3, 5)).RoPE(cs, cs)
	assert.ErrorContains(t, err, "the head dim 5 is odd")
	_, err = ok(Zeros(cpu, F32, 1, 2, 4, 4)).RoPE(cs, cs)
	assert.ErrorContains(t, err, "cos is [3 2]: want [4 2] (t, d/2) or [1 4 2] (b, t, d/2)")
	_, err = ok(Zeros(cpu, F32, 1, 2, 3, 4)).RoPE(cs, ok(Zeros(cpu, F32, 1, 3, 2)))
	assert.ErrorContains(t, err, "sin is [1 3 2] and cos [3 2]")
	_, err = x.SiLUMul(ok(Zeros(cpu, F32, 4)))
	assert.ErrorIs(t, err, ErrShape)
	y := ok(Zeros(cpu, F32, 2, 4))
	require.NoError(t, y.Close())
	_, err = x.SiLUMul(y)
	assert.ErrorIs(t, err, ErrClosed)
	// Empty rows: empty outputs.
	e := ok(ok(Zeros(cpu, F32, 0, 4)).SoftmaxLastDim())
	assert.Equal(t, Shape{0, 4}, e.Shape())
}

// TestGPUFused checks the fused kernels against the CPU: rows that stay
// in registers and rows too long for them, vector and scalar rows, large
// magnitudes, strided inputs, every rotary layout.
func TestGPUFused(t *testing.T) {
	d := gpu(t)
	ok := keep(t)
	r := rand.New(rand.NewPCG(7, 8))
	gen := values01(r)
	for _, dt := range []DType{F32, F16, BF16} {
		tol := tolerance(dt) * 2
		for _, cols := range []int{1, 7, 64, 1000, 4096, 4097, 8192, 8193, 32000} {
			for _, layout := range []string{"contiguous", "narrowed", "transposed"} {
				shape := Shape{5, cols}
				x := makeOperand(t, d, dt, shape, layout, gen)
				name := fmt.Sprintf("%s %v %s", dt, shape, layout)
				cs, gs := ok(x.cpu.SoftmaxLastDim()), ok(x.gpu.SoftmaxLastDim())
				same(t, cs, gs, tol, "softmax "+name)
				// Scaled by the row length, so that entries of about 1/cols
				// are held to the relative tolerance too.
				same(t, ok(cs.Affine(float64(cols), 0)), ok(gs.Affine(float64(cols), 0)), tol, "softmax × cols "+name)
				same(t, ok(x.cpu.LogSoftmaxLastDim()), ok(x.gpu.LogSoftmaxLastDim()), tol, "log-softmax "+name)
				alpha, beta := makeOperand(t, d, dt, Shape{cols}, "contiguous", gen), makeOperand(t, d, dt, Shape{cols}, "contiguous", gen)
				same(t, ok(x.cpu.RMSNorm(alpha.cpu, 1e-6)), ok(x.gpu.RMSNorm(alpha.gpu, 1e-6)), tol*2, "rms_norm "+name)
				same(t, ok(x.cpu.LayerNorm(alpha.cpu, beta.cpu, 1e-5)), ok(x.gpu.LayerNorm(alpha.gpu, beta.gpu, 1e-5)), tol*2, "layer_norm "+name)
				same(t, ok(x.cpu.LayerNorm(alpha.cpu, nil, 1e-5)), ok(x.gpu.LayerNorm(alpha.gpu, nil, 1e-5)), tol*2, "layer_norm without beta "+name)
				y := makeOperand(t, d, dt, shape, layout, gen)
				same(t, ok(x.cpu.SiLUMul(y.cpu)), ok(x.gpu.SiLUMul(y.gpu)), tol, "silu_mul "+name)
			}
		}
		// Large magnitudes: no overflow.
		big := makeOperand(t, d, dt, Shape{3, 4096}, "contiguous", func() float64 { return 60000 * gen() / 2 })
		same(t, ok(big.cpu.SoftmaxLastDim()), ok(big.gpu.SoftmaxLastDim()), tol, "softmax of large values "+dt.String())
		for _, sh := range []Shape{{2, 3, 5, 8}, {1, 32, 7, 128}, {3, 4, 1, 64}} {
			cosT := makeOperand(t, d, dt, Shape{sh[2], sh[3] / 2}, "contiguous", gen)
			sinT := makeOperand(t, d, dt, Shape{sh[2], sh[3] / 2}, "contiguous", gen)
			cosB := makeOperand(t, d, dt, Shape{sh[0], sh[2], sh[3] / 2}, "contiguous", gen)
			sinB := makeOperand(t, d, dt, Shape{sh[0], sh[2], sh[3] / 2}, "contiguous", gen)
			for _, layout := range []string{"contiguous", "transposed"} {
				x := makeOperand(t, d, dt, sh, layout, gen)
				name := fmt.Sprintf("%s %v %s", dt, sh, layout)
				same(t, ok(x.cpu.RoPE(cosT.cpu, sinT.cpu)), ok(x.gpu.RoPE(cosT.gpu, sinT.gpu)), tol, "rope "+name)
				same(t, ok(x.cpu.RoPEInterleaved(cosT.cpu, sinT.cpu)), ok(x.gpu.RoPEInterleaved(cosT.gpu, sinT.gpu)), tol, "rope_i "+name)
				same(t, ok(x.cpu.RoPE(cosB.cpu, sinB.cpu)), ok(x.gpu.RoPE(cosB.gpu, sinB.gpu)), tol, "rope per batch "+name)
				xt := makeOperand(t, d, dt, Shape{sh[0], sh[2], sh[1], sh[3]}, layout, gen)
				same(t, ok(xt.cpu.RoPETHD(cosT.cpu, sinT.cpu)), ok(xt.gpu.RoPETHD(cosT.gpu, sinT.gpu)), tol, "rope_thd "+name)
				same(t, ok(xt.cpu.RoPETHD(cosB.cpu, sinB.cpu)), ok(xt.gpu.RoPETHD(cosB.gpu, sinB.gpu)), tol, "rope_thd per batch "+name)
			}
		}
	}
}
