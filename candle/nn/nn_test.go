package nn

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
)

// entry is a tensor for weightsOf: its safetensors dtype, shape and
// bytes.
type entry struct {
	dtype string
	shape []int
	data  []byte
}

func f32s(v ...float32) []byte { return hip.AsBytes(v) }

// weightsOf holds tensors on the CPU as a model's weights.
func weightsOf(t *testing.T, es map[string]entry) TensorWeights {
	t.Helper()
	w := TensorWeights{Tensors: map[string]*candle.Tensor{}}
	for n, e := range es {
		dt, err := candle.ParseDType(e.dtype)
		require.NoError(t, err)
		x, err := candle.FromBytes(candle.CPU(), dt, e.data, e.shape...)
		require.NoError(t, err)
		t.Cleanup(func() { x.Close() })
		w.Tensors[n] = x
	}
	return w
}

func values(t *testing.T, x *candle.Tensor) []float32 {
	t.Helper()
	f, err := x.ToDType(candle.F32)
	require.NoError(t, err)
	defer f.Close()
	v, err := candle.ToSlice[float32](f)
	require.NoError(t, err)
	return v
}

func TestVarBuilder(t *testing.T) {
	cpu := candle.CPU()
	w := weightsOf(t, map[string]entry{
		"model.embed.weight": {"F32", []int{3, 2}, f32s(0, 1, 10, 11, 20, 21)},
		"model.norm.weight":  {"F32", []int{2}, f32s(1, 2)},
		"lm.weight":          {"F32", []int{3, 2}, f32s(1, 0, 0, 1, 1, 1)},
		"lm.bias":            {"F32", []int{3}, f32s(0.5, 0, -1)},
	})
	{
		vb, err := NewVarBuilder(w, cpu, candle.F32)
		require.NoError(t, err)
		assert.Equal(t, w, vb.Weights())
		assert.Equal(t, cpu, vb.Device())
		assert.Equal(t, candle.F32, vb.DType())
		assert.True(t, vb.Contains("lm.bias"))
		assert.True(t, vb.Prefix("model").Contains("norm.weight"))
		_, err = vb.Get("lm.weight", 2, 3)
		assert.ErrorIs(t, err, errs.ErrShape)
		assert.ErrorContains(t, err, `tensor "lm.weight" is [3 2] in `)
		assert.ErrorContains(t, err, "the model wants [2 3]")
		_, err = vb.Prefix("model").Prefix("layers.0").Get("q.weight", 2)
		assert.ErrorIs(t, err, errs.ErrNotFound)
		assert.ErrorContains(t, err, `no tensor "model.layers.0.q.weight"`)

		emb, err := NewEmbedding(vb.Prefix("model"), "embed", 3, 2)
		require.NoError(t, err)
		ids, err := candle.FromSlice(cpu, []int64{2, 0, 1, 2}, 2, 2)
		require.NoError(t, err)
		e, err := emb.Forward(ids)
		require.NoError(t, err)
		assert.Equal(t, candle.Shape{2, 2, 2}, e.Shape())
		assert.Equal(t, []float32{20, 21, 0, 1, 10, 11, 20, 21}, values(t, e))

		lin, err := NewLinear(vb, "lm", 2, 3, true)
		require.NoError(t, err)
		y, err := lin.Forward(e)
		require.NoError(t, err)
		assert.Equal(t, candle.Shape{2, 2, 3}, y.Shape())
		// rows (20, 21) → (20.5, 21, 40)
		assert.Equal(t, []float32{20.5, 21, 40}, values(t, y)[:3])

		norm, err := NewRMSNorm(vb.Prefix("model"), "norm", 2, 0)
		require.NoError(t, err)
		x, err := candle.FromSlice(cpu, []float32{3, 4}, 1, 2)
		require.NoError(t, err)
		n, err := norm.Forward(x)
		require.NoError(t, err)
		rms := float32(math.Sqrt(12.5))
		assert.InDeltaSlice(t, []float32{3 / rms, 8 / rms}, values(t, n), 1e-6)
		ln, err := NewLayerNorm(vb.Prefix("model"), "norm", 2, 0, false)
		require.NoError(t, err)
		l, err := ln.Forward(x)
		require.NoError(t, err)
		assert.InDeltaSlice(t, []float32{-1, 2}, values(t, l), 1e-6)
		gn, err := NewGroupNorm(vb.Prefix("model"), "norm", 1, 2, 0, false)
		require.NoError(t, err)
		xg, err := candle.FromSlice(cpu, []float32{1, 3, 5, 7}, 1, 2, 2) // (N, C, L)
		require.NoError(t, err)
		g, err := gn.Forward(xg)
		require.NoError(t, err)
		// One group: mean 4, variance 5; channel 1 scaled by 2.
		r5 := float32(math.Sqrt(5))
		assert.InDeltaSlice(t, []float32{-3 / r5, -1 / r5, 2 / r5, 6 / r5}, values(t, g), 1e-6)
		gs, err := gn.ForwardSiLU(xg)
		require.NoError(t, err)
		silu := func(v float32) float32 { return float32(float64(v) / (1 + math.Exp(-float64(v)))) }
		assert.InDeltaSlice(t, []float32{silu(-3 / r5), silu(-1 / r5), silu(2 / r5), silu(6 / r5)}, values(t, gs), 1e-6)
		_, err = NewGroupNorm(vb.Prefix("model"), "norm", 3, 2, 0, false)
		assert.ErrorIs(t, err, candle.ErrArgument)
		assert.ErrorContains(t, err, "the groups must divide the channels")
		for _, c := range []interface{ Close() }{emb, lin, norm, ln, gn} {
			c.Close()
		}
		for _, c := range []*candle.Tensor{ids, e, y, x, n, l, xg, g, gs} {
			c.Close()
		}
	}

	// Converted to the builder's dtype.
	vb, err := NewVarBuilder(w, cpu, candle.F16)
	require.NoError(t, err)
	x, err := vb.Get("lm.bias", 3)
	require.NoError(t, err)
	assert.Equal(t, candle.F16, x.DType())
	assert.Equal(t, []float32{0.5, 0, -1}, values(t, x))
	x.Close()
	_, err = vb.GetQ("lm.bias", 3)
	assert.ErrorIs(t, err, errs.ErrDType)
	assert.ErrorContains(t, err, "not quantized: Get it")
	_, err = vb.GetQ("lm.nope", 3)
	assert.ErrorIs(t, err, errs.ErrNotFound)

	_, err = NewVarBuilder(w, cpu, candle.I64)
	assert.ErrorIs(t, err, errs.ErrDType)
	_, err = NewVarBuilder(w, nil, candle.F32)
	assert.ErrorIs(t, err, errs.ErrDevice)
	_, err = NewVarBuilder(nil, cpu, candle.F32)
	assert.ErrorIs(t, err, errs.ErrArgument)
}

// TestVarBuilderQuantized loads quantized weights as they are (GetQ) and
// dequantized (Get), and integer tensors in their own dtype.
func TestVarBuilderQuantized(t *testing.T) {
	cpu := candle.CPU()
	vals := make([]float32, 2*64)
	for i := range vals {
		vals[i] = float32(i%9) - 4
	}
	blocks, err := candle.QuantizeBlocks(candle.GGMLQ8_0, vals)
	require.NoError(t, err)
	q, err := candle.NewQTensor(cpu, candle.GGMLQ8_0, blocks, 2, 64)
	require.NoError(t, err)
	defer q.Close()
	ids, err := candle.FromSlice(cpu, []int64{3, 1}, 2)
	require.NoError(t, err)
	defer ids.Close()
	w := TensorWeights{Tensors: map[string]*candle.Tensor{"ids": ids}, Quantized: map[string]*candle.QTensor{"blk.w": q}}
	assert.Equal(t, []string{"blk.w", "ids"}, w.Names())
	info, ok := w.Info("blk.w")
	require.True(t, ok)
	assert.Equal(t, candle.WeightInfo{Shape: candle.Shape{2, 64}, Type: "Q8_0", Quantized: true, Quant: candle.GGMLQ8_0}, info)
	vb, err := NewVarBuilder(w, cpu, candle.F32)
	require.NoError(t, err)
	info, ok = vb.Prefix("blk").Info("w")
	require.True(t, ok)
	assert.True(t, info.Quantized)
	g, err := vb.Prefix("blk").GetQ("w", 2, 64)
	require.NoError(t, err)
	assert.Equal(t, candle.GGMLQ8_0, g.Type())
	d, err := g.Dequantize(candle.F32)
	require.NoError(t, err)
	want := values(t, d)
	g.Close()
	d.Close()
	dq, err := vb.Get("blk.w", 2, 64)
	require.NoError(t, err, "a quantized tensor is dequantized to the builder's dtype")
	assert.Equal(t, want, values(t, dq))
	for i, v := range want {
		assert.InDelta(t, vals[i], v, 0.04)
	}
	dq.Close()
	_, err = vb.GetQ("blk.w", 64, 2)
	assert.ErrorIs(t, err, errs.ErrShape)
	got, err := vb.Get("ids", 2)
	require.NoError(t, err)
	assert.Equal(t, candle.I64, got.DType(), "integer tensors keep their dtype")
	got.Close()
	_, err = w.Load("blk.w", cpu)
	assert.ErrorIs(t, err, errs.ErrDType)
	_, err = w.LoadQ("ids", cpu)
	assert.ErrorIs(t, err, errs.ErrDType)
	_, err = w.LoadQ("nope", cpu)
	assert.ErrorIs(t, err, errs.ErrNotFound)
	_, err = w.Load("nope", cpu)
	assert.ErrorIs(t, err, errs.ErrNotFound)
	assert.Equal(t, candle.TransferStats{}, w.TransferStats())
	assert.NoError(t, w.Close())
	// The map's tensors outlive what was loaded from them.
	back, err := q.Dequantize(candle.F32)
	require.NoError(t, err)
	assert.Equal(t, want, values(t, back))
	back.Close()
}

func TestKVCache(t *testing.T) {
	cpu := candle.CPU()
	c, err := NewKVCache(cpu, candle.F32, []int{1, 2, 0, 3}, 2, 4)
	require.NoError(t, err)
	defer c.Close()
	step := func(v float32, n int) (*candle.Tensor, *candle.Tensor) {
		data := make([]float32, 2*n*3)
		for i := range data {
			data[i] = v
		}
		k, err := candle.FromSlice(cpu, data, 1, 2, n, 3)
		require.NoError(t, err)
		for i := range data {
			data[i] = -v // the values differ from the keys
		}
		vals, err := candle.FromSlice(cpu, data, 1, 2, n, 3)
		require.NoError(t, err)
		t.Cleanup(func() { k.Close(); vals.Close() })
		return k, vals
	}
	allocs := cpu.MemoryStats().Allocs
	k, v := step(1, 3)
	keys, values, err := c.Append(k, v)
	require.NoError(t, err)
	assert.Equal(t, candle.Shape{1, 2, 3, 3}, keys.Shape())
	keys.Close()
	values.Close()
	k, v = step(2, 1)
	keys, values, err = c.Append(k, v)
	require.NoError(t, err)
	assert.Equal(t, 4, c.Len())
	got, err := candle.ToSlice[float32](keys)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2}, got[:12], "head 0: three positions of 1, then one of 2")
	got, err = candle.ToSlice[float32](values)
	require.NoError(t, err)
	assert.Equal(t, []float32{-1, -1, -1, -1, -1, -1, -1, -1, -1, -2, -2, -2}, got[:12], "the values beside the keys")
	keys.Close()
	values.Close()
	assert.Equal(t, allocs+4, cpu.MemoryStats().Allocs, "the steps' inputs only: the cache allocates nothing per step")
	_, _, err = c.Append(step(3, 1))
	assert.ErrorIs(t, err, candle.ErrArgument)
	assert.ErrorContains(t, err, "pass the capacity of 4")
	c.Reset()
	assert.Equal(t, 0, c.Len())
	_, err = NewKVCache(cpu, candle.F32, []int{2}, 1, 4)
	assert.ErrorIs(t, err, candle.ErrArgument)
}

// TestGPULoadAndForward loads a model's weights onto the GPU as bf16 and
// runs the layers there, against the CPU.
func TestGPULoadAndForward(t *testing.T) {
	dev := hipDevice(t)
	w := make([]float32, 64*48)
	for i := range w {
		w[i] = float32(i%13)/13 - 0.5
	}
	weights := weightsOf(t, map[string]entry{
		"lin.weight":  {"F32", []int{48, 64}, hip.AsBytes(w)},
		"lin.bias":    {"F32", []int{48}, hip.AsBytes(w[:48])},
		"norm.weight": {"F32", []int{48}, hip.AsBytes(w[48:96])},
	})
	var outs [2][]float32
	for i, d := range []candle.Device{candle.CPU(), dev} {
		vb, err := NewVarBuilder(weights, d, candle.BF16)
		require.NoError(t, err)
		lin, err := NewLinear(vb, "lin", 64, 48, true)
		require.NoError(t, err)
		norm, err := NewRMSNorm(vb, "norm", 48, 1e-6)
		require.NoError(t, err)
		x, err := candle.FromSlice(d, w[:5*64], 5, 64)
		require.NoError(t, err)
		xb, err := x.ToDType(candle.BF16)
		require.NoError(t, err)
		y, err := lin.Forward(xb)
		require.NoError(t, err)
		z, err := norm.Forward(y)
		require.NoError(t, err)
		outs[i] = values(t, z)
		for _, c := range []*candle.Tensor{x, xb, y, z} {
			c.Close()
		}
		lin.Close()
		norm.Close()
	}
	assert.InDeltaSlice(t, outs[0], outs[1], 0.05, "bf16 on the GPU against the CPU")
}

// hipDevice is HIP device 0, or the test is skipped below tier 2.
func hipDevice(t *testing.T) *candle.HIPDevice {
	t.Helper()
	n, err := hip.DeviceCount()
	if err == nil && n == 0 {
		err = candle.ErrDevice
	}
	var dev *candle.HIPDevice
	if err == nil {
		dev, err = candle.HIP(0)
	}
	testenv.Need(t, 2, "a GPU", err)
	return dev
}

// TestVarBuilderSlices: GetSlice and GetQSlice of tensors in memory
// (TensorWeights) are the same parts of the whole, dense and quantized,
// in the builder's dtype; bad parts are errors.
func TestVarBuilderSlices(t *testing.T) {
	cpu := candle.CPU()
	vals := make([]float32, 4*64)
	for i := range vals {
		vals[i] = float32(math.Sin(float64(i)))
	}
	x, err := candle.FromSlice(cpu, vals, 4, 64)
	require.NoError(t, err)
	defer x.Close()
	q, err := candle.Quantize(x, candle.GGMLQ8_0)
	require.NoError(t, err)
	defer q.Close()
	vb, err := NewVarBuilder(TensorWeights{Tensors: map[string]*candle.Tensor{"x": x}, Quantized: map[string]*candle.QTensor{"q": q}}, cpu, candle.F32)
	require.NoError(t, err)
	whole := map[string]*candle.Tensor{}
	for _, name := range []string{"x", "q"} {
		w, err := vb.Get(name, 4, 64)
		require.NoError(t, err)
		defer w.Close()
		whole[name] = w
	}
	for _, name := range []string{"x", "q"} {
		for _, k := range []struct{ d, start, n int }{{0, 1, 2}, {1, 32, 32}} {
			got, err := vb.GetSlice(name, k.d, k.start, k.n, 4, 64)
			require.NoError(t, err, name, k)
			assert.Equal(t, candle.F32, got.DType())
			v, err := whole[name].Narrow(k.d, k.start, k.n)
			require.NoError(t, err)
			want, err := v.Contiguous()
			require.NoError(t, err)
			gv, _ := candle.ToSlice[float32](got)
			wv, _ := candle.ToSlice[float32](want)
			assert.Equal(t, wv, gv, name, k)
			got.Close()
			v.Close()
			want.Close()
		}
	}
	_, err = vb.GetQSlice("q", 1, 8, 32, 4, 64)
	assert.ErrorIs(t, err, errs.ErrShape)
	_, err = vb.GetQSlice("x", 0, 0, 1, 4, 64)
	assert.ErrorIs(t, err, errs.ErrDType)
	_, err = vb.GetSlice("x", 0, 0, 1, 4, 63)
	assert.ErrorIs(t, err, errs.ErrShape)
	_, err = vb.GetSlice("x", 0, 3, 2, 4, 64)
	assert.Error(t, err)
}

// On the CPU there are no kernels to ready; a bad name is NewDevice's.
func TestWarmKernelsCPU(t *testing.T) {
	called := false
	require.NoError(t, WarmKernels("cpu", func(candle.ModuleReady) { called = true }))
	assert.False(t, called)
	assert.ErrorIs(t, WarmKernels("tpu:0", nil), candle.ErrDevice)
}

// On a GPU every module is reported once, flashattn's among candle's.
func TestGPUWarmKernels(t *testing.T) {
	d := hipDevice(t)
	var names []string
	require.NoError(t, WarmKernels(d.String(), func(m candle.ModuleReady) {
		names = append(names, m.Name)
		assert.Equal(t, len(names), m.Done)
		assert.Equal(t, len(d.KernelCache().Modules())+1, m.Total)
	}))
	assert.ElementsMatch(t, append(d.KernelCache().Modules(), "attention.hip"), names)
}
