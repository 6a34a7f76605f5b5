package nn

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/errs"
)

func TestConvLayers(t *testing.T) {
	cpu := candle.CPU()
	// conv: 2 groups, 4 → 2 channels, 3x3; line: 1-D, 2 → 1 channel, kernel 2.
	wv := make([]float32, 2*2*3*3)
	for i := range wv {
		wv[i] = float32(i%7) - 3
	}
	w := weightsOf(t, map[string]entry{
		"conv.weight": {"F32", []int{2, 2, 3, 3}, f32s(wv...)},
		"conv.bias":   {"F32", []int{2}, f32s(0.5, -1)},
		"line.weight": {"F32", []int{1, 2, 2}, f32s(1, 2, 3, 4)},
	})
	vb, err := NewVarBuilder(w, cpu, candle.F64)
	require.NoError(t, err)

	xv := make([]float64, 4*5*5)
	for i := range xv {
		xv[i] = math.Sin(float64(i))
	}
	x, err := candle.FromSlice(cpu, xv, 1, 4, 5, 5)
	require.NoError(t, err)
	defer x.Close()

	p := candle.Conv2dParams{Padding: [2]int{1, 1}, Groups: 2}
	conv, err := NewConv2d(vb, "conv", 4, 2, 3, p, true)
	require.NoError(t, err)
	defer conv.Close()
	assert.Equal(t, candle.Shape{2, 2, 3, 3}, conv.Weight.Shape())
	y, err := conv.Forward(x)
	require.NoError(t, err)
	defer y.Close()
	want, err := x.Conv2d(conv.Weight, conv.Bias, p)
	require.NoError(t, err)
	defer want.Close()
	assert.Equal(t, values(t, want), values(t, y))
	// Output channel 1, pixel (0, 0): the second group's inputs (channels
	// 2, 3) through the second filter, plus -1.
	sum := -1.0
	for c := range 2 {
		for r := range 3 {
			for s := range 3 {
				iy, ix := r-1, s-1
				if iy < 0 || ix < 0 {
					continue
				}
				sum += xv[(2+c)*25+iy*5+ix] * float64(wv[18+c*9+r*3+s])
			}
		}
	}
	assert.InDelta(t, sum, values(t, y)[25], 1e-5)

	// NHWC: the weight reordered at load, the same result channels last.
	pn := p
	pn.Format = candle.NHWC
	convN, err := NewConv2d(vb, "conv", 4, 2, 3, pn, true)
	require.NoError(t, err)
	defer convN.Close()
	assert.Equal(t, candle.Shape{2, 3, 3, 2}, convN.Weight.Shape())
	xp, err := x.Permute(0, 2, 3, 1)
	require.NoError(t, err)
	defer xp.Close()
	yn, err := convN.Forward(xp)
	require.NoError(t, err)
	defer yn.Close()
	back, err := yn.Permute(0, 3, 1, 2)
	require.NoError(t, err)
	defer back.Close()
	assert.Equal(t, values(t, y), values(t, back))

	line, err := NewConv1d(vb, "line", 2, 1, 2, candle.Conv1dParams{}, false)
	require.NoError(t, err)
	defer line.Close()
	x1, err := candle.FromSlice(cpu, []float64{1, 2, 3, 10, 20, 30}, 1, 2, 3)
	require.NoError(t, err)
	defer x1.Close()
	y1, err := line.Forward(x1)
	require.NoError(t, err)
	defer y1.Close()
	assert.Equal(t, []float32{1*1 + 2*2 + 10*3 + 20*4, 2*1 + 3*2 + 20*3 + 30*4}, values(t, y1))
	lineN, err := NewConv1d(vb, "line", 2, 1, 2, candle.Conv1dParams{Format: candle.NHWC}, false)
	require.NoError(t, err)
	defer lineN.Close()
	assert.Equal(t, candle.Shape{1, 2, 2}, lineN.Weight.Shape())

	_, err = NewConv2d(vb, "conv", 4, 2, 5, p, true)
	assert.ErrorIs(t, err, errs.ErrShape)
	assert.ErrorContains(t, err, `tensor "conv.weight" is [2 2 3 3]`)
	_, err = NewConv2d(vb, "conv", 4, 2, 3, candle.Conv2dParams{Groups: 3}, true)
	assert.ErrorIs(t, err, candle.ErrArgument)
	_, err = NewConv1d(vb, "line", 2, 1, 2, candle.Conv1dParams{}, true)
	assert.ErrorIs(t, err, errs.ErrNotFound)
}

func TestActivations(t *testing.T) {
	cpu := candle.CPU()
	in := []float64{-2, -0.5, 0, 0.3, 1.5}
	x, err := candle.FromSlice(cpu, in, len(in))
	require.NoError(t, err)
	defer x.Close()
	sigmoid := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	want := map[Activation]func(float64) float64{
		ReLU:      func(v float64) float64 { return math.Max(v, 0) },
		SiLU:      func(v float64) float64 { return v * sigmoid(v) },
		GELU:      func(v float64) float64 { return 0.5 * v * (1 + math.Erf(v/math.Sqrt2)) },
		GELUTanh:  func(v float64) float64 { return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))) },
		QuickGELU: func(v float64) float64 { return v * sigmoid(1.702*v) },
		Sigmoid:   sigmoid,
		Tanh:      math.Tanh,
	}
	for a, f := range want {
		y, err := a.Forward(x)
		require.NoError(t, err, a)
		got, err := candle.ToSlice[float64](y)
		require.NoError(t, err)
		for i, v := range in {
			assert.InDelta(t, f(v), got[i], 1e-12, "%s(%v)", a, v)
		}
		y.Close()
	}
	for name, a := range map[string]Activation{"swish": SiLU, "gelu_new": GELUTanh, " GELU ": GELU, "ReLU": ReLU} {
		got, err := ParseActivation(name)
		require.NoError(t, err, name)
		assert.Equal(t, a, got, name)
	}
	y, err := Activation("swish").Forward(x)
	require.NoError(t, err, "an alias runs as its activation")
	assert.InDelta(t, -2*sigmoid(-2), values(t, y)[0], 1e-6)
	y.Close()
	_, err = ParseActivation("mish")
	assert.ErrorIs(t, err, candle.ErrArgument)
	assert.ErrorContains(t, err, `"mish" is not an activation: want one of gelu, gelu_new`)
	_, err = Activation("mish").Forward(x)
	assert.ErrorIs(t, err, candle.ErrArgument)
}
