package miopen_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rocm-go/rocm/miopen"
)

// Tier 0: the float64 references of the tier-2 tests check themselves: a
// gradient against finite differences of its forward pass, a transpose
// against its adjoint identity.

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// numGrad is the gradient of sum(dy * f(x)) by central differences.
func numGrad(x, dy []float64, f func([]float64) []float64) []float64 {
	g := make([]float64, len(x))
	const h = 1e-6
	for i := range x {
		xp, xm := append([]float64(nil), x...), append([]float64(nil), x...)
		xp[i] += h
		xm[i] -= h
		g[i] = (dot(dy, f(xp)) - dot(dy, f(xm))) / (2 * h)
	}
	return g
}

func TestReferencesConvolutionsAreAdjoint(t *testing.T) {
	for _, c := range convCases {
		p := refParams(c.p, len(c.x)-2)
		yd, err := c.p.OutputDims(c.x, c.w)
		if !assert.NoError(t, err, c.name) {
			continue
		}
		x, w, dy := random(prod(c.x), -1, 1), random(prod(c.w), -1, 1), random(prod(yd), -1, 1)
		fwd, bwd := gather, scatter
		if c.p.Transposed {
			fwd, bwd = scatter, gather
		}
		y := fwd(x, c.x, w, c.w, p, yd)
		// <y, dy> = <x, dx> = <w, dw>.
		assert.InDelta(t, dot(y, dy), dot(x, bwd(dy, yd, w, c.w, p, c.x)), 1e-9*float64(len(y)), c.name)
		dw := wgrad(x, c.x, dy, yd, p, c.w)
		if c.p.Transposed {
			dw = wgrad(dy, yd, x, c.x, p, c.w)
		}
		assert.InDelta(t, dot(y, dy), dot(w, dw), 1e-9*float64(len(y)), c.name)
	}
	// A hand case: a 1x1x3x3 input of ones, a 2x2 kernel of ones, no padding.
	y := gather([]float64{1, 1, 1, 1, 1, 1, 1, 1, 1}, []int{1, 1, 3, 3}, []float64{1, 2, 3, 4}, []int{1, 1, 2, 2}, refParams(miopen.ConvolutionParams{}, 2), []int{1, 1, 2, 2})
	assert.Equal(t, []float64{10, 10, 10, 10}, y)
}

func TestReferencesActivationGradients(t *testing.T) {
	x := []float64{-1.7, -0.6, -0.2, 0.3, 0.8, 1.9}
	dy := []float64{0.5, -1, 0.25, 2, -0.75, 1}
	for _, c := range []struct {
		mode    miopen.ActivationMode
		a, b, g float64
	}{
		{miopen.ActivationPassThrough, 0, 0, 0}, {miopen.ActivationLogistic, 0, 0, 0}, {miopen.ActivationTanh, 1.5, 0.5, 0},
		{miopen.ActivationReLU, 0, 0, 0}, {miopen.ActivationSoftReLU, 0, 0, 0}, {miopen.ActivationAbs, 0, 0, 0},
		{miopen.ActivationPower, 0.2, 1, 2}, {miopen.ActivationClippedReLU, 0.5, 0, 0}, {miopen.ActivationLeakyReLU, 0.1, 0, 0},
		{miopen.ActivationELU, 0.7, 0, 0},
	} {
		f := func(v []float64) []float64 {
			out := make([]float64, len(v))
			for i, xi := range v {
				out[i] = activation(c.mode, c.a, c.b, c.g, xi)
			}
			return out
		}
		num := numGrad(x, dy, f)
		y := f(x)
		for i := range x {
			assert.InDelta(t, num[i], activationGrad(c.mode, c.a, c.b, c.g, dy[i], x[i], y[i]), 1e-6, "%v at %v", c.mode, x[i])
		}
	}
}

func TestReferencesSoftmaxLRNPoolingBatchNorm(t *testing.T) {
	dims := []int{2, 3, 2, 2}
	x, dy := random(prod(dims), -1, 1), random(prod(dims), -1, 1)
	for _, algo := range []miopen.SoftmaxAlgorithm{miopen.SoftmaxAlgorithmAccurate, miopen.SoftmaxAlgorithmLog} {
		for _, mode := range []miopen.SoftmaxMode{miopen.SoftmaxModeInstance, miopen.SoftmaxModeChannel} {
			f := func(v []float64) []float64 { return softmaxRef(v, dims, algo, mode) }
			assertClose(t, numGrad(x, dy, f), softmaxGradRef(f(x), dy, dims, algo, mode), "softmax")
		}
	}
	ldims := []int{1, 5, 4, 3}
	lx, ldy := random(prod(ldims), -1, 1), random(prod(ldims), -1, 1)
	for _, l := range []miopen.LRNParams{{Mode: miopen.LRNModeCrossChannel, N: 3, Alpha: 0.5, Beta: 0.75, K: 1},
		{Mode: miopen.LRNModeWithinChannel, N: 3, Alpha: 0.5, Beta: 0.75, K: 1}} {
		f := func(v []float64) []float64 {
			y, _ := lrnRef(v, ldims, l, make([]float64, len(v)), make([]float64, len(v)))
			return y
		}
		_, dx := lrnRef(lx, ldims, l, f(lx), ldy)
		assertClose(t, numGrad(lx, ldy, f), dx, "LRN")
	}
	pdims := []int{1, 2, 5, 4}
	px := random(prod(pdims), -1, 1)
	for _, p := range []miopen.PoolingParams{
		{Mode: miopen.PoolingModeMax, Window: []int{3, 3}, Pad: []int{1, 1}, Stride: []int{2, 2}},
		{Mode: miopen.PoolingModeAverage, Window: []int{3, 3}, Pad: []int{1, 1}, Stride: []int{2, 2}},
		{Mode: miopen.PoolingModeAverageInclusive, Window: []int{3, 3}, Pad: []int{1, 1}, Stride: []int{2, 2}},
	} {
		yd, err := p.OutputDims(pdims)
		assert.NoError(t, err)
		pdy := random(prod(yd), -1, 1)
		f := func(v []float64) []float64 { y, _ := poolRef(v, pdims, p, yd, pdy); return y }
		_, dx := poolRef(px, pdims, p, yd, pdy)
		assertClose(t, numGrad(px, pdy, f), dx, "pooling")
	}
	// Batch norm in training: y as a function of x through the batch's
	// statistics; its gradient as the tier-2 test computes it. Eight
	// samples: the variance of a per-activation group of two can be so
	// small that finite differences lose their digits.
	dims = []int{8, 3, 2, 2}
	x, dy = random(prod(dims), -1, 1), random(prod(dims), -1, 1)
	for _, mode := range []miopen.BatchNormMode{miopen.BatchNormModeSpatial, miopen.BatchNormModePerActivation} {
		groups := bnGroups(dims, mode)
		scale := random(len(groups), 0.5, 1.5)
		f := func(v []float64) []float64 {
			y := make([]float64, len(v))
			for c, g := range groups {
				m, variance := meanVar(v, g)
				for _, i := range g {
					y[i] = scale[c] * (v[i] - m) / math.Sqrt(variance+1e-5)
				}
			}
			return y
		}
		mean, inv := make([]float64, len(groups)), make([]float64, len(groups))
		for c, g := range groups {
			m, variance := meanVar(x, g)
			mean[c], inv[c] = m, 1/math.Sqrt(variance+1e-5)
		}
		dx, _, _ := bnBackwardRef(x, dy, groups, scale, mean, inv)
		assertClose(t, numGrad(x, dy, f), dx, "batch norm")
	}
}

func assertClose(t *testing.T, want, got []float64, what string) {
	t.Helper()
	assert.Less(t, relErr(got, want), 1e-6, what)
}
