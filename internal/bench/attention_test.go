package bench

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/internal/testenv"
)

// TestAttentionRows: issue 13's shapes and Stable Diffusion's, named
// once, with their FLOPs and bytes, and the same list for the PyTorch
// script.
func TestAttentionRows(t *testing.T) {
	shapes := attentionShapes(1)
	require.Len(t, shapes, 10)
	names := map[string]bool{}
	for _, a := range shapes {
		assert.False(t, names[a.name()], a.name())
		names[a.name()] = true
	}
	assert.Equal(t, "attention f16 b4 h32 s4096 d128", shapes[0].name())
	assert.Equal(t, "attention f16 b4 h32 s4096 d128 causal", shapes[1].name())
	assert.Equal(t, "attention bf16 b4 h32/8 (GQA) s4096 d128 causal", shapes[2].name())
	assert.Equal(t, "decode attention f16 b8 h32 kv4096 d128", shapes[3].name())
	assert.Equal(t, "attention f16 b2 h8 s4096 d40", shapes[4].name())
	assert.Equal(t, "attention f16 b2 h8 s4096×77 d40", shapes[5].name(), "cross-attention to the text")
	assert.Equal(t, "attention f16 b2 h20 s1024 d64", shapes[9].name())
	assert.Equal(t, 128, attentionShapes(64)[0].s, "at least 128 keys")
	assert.Equal(t, [2]int{64, 77}, [2]int{attentionShapes(64)[5].sq, attentionShapes(64)[5].s}, "at least 64 pixels; the 77 tokens stay")

	var spec []struct {
		Name, DType          string
		B, HQ, HKV, SQ, S, D int
		Causal               bool
	}
	require.NoError(t, json.Unmarshal([]byte(TorchAttentionSpec(1)), &spec))
	require.Len(t, spec, len(shapes))
	for i, s := range spec {
		a := shapes[i]
		assert.Equal(t, a.name(), s.Name)
		assert.Equal(t, a.dt.String(), s.DType)
		assert.Equal(t, [7]int{a.b, a.hq, a.hkv, a.sq, a.s, a.d, map[bool]int{false: 0, true: 1}[a.causal]},
			[7]int{s.B, s.HQ, s.HKV, s.SQ, s.S, s.D, map[bool]int{false: 0, true: 1}[s.Causal]})
	}
}

// TestAttentionBenchmarksRun runs the attention rows once at a 32nd of the
// sequence length, and checks the unfused attention against flashattn's
// (the comparison measures the same attention) and its memory.
func TestAttentionBenchmarksRun(t *testing.T) {
	b, err := OpenTensors()
	testenv.Need(t, 2, "a GPU", err)
	defer b.Close()
	ops, err := b.AttentionOps(32)
	require.NoError(t, err)
	require.Len(t, ops, 10)
	for _, op := range ops {
		d, err := b.DeviceTime(op)
		require.NoError(t, err, op.Name)
		assert.Positive(t, d, op.Name)
		assert.Positive(t, op.Flops+op.Bytes, op.Name)
		t.Logf("%s: %v", op.Name, d)
		op.Close()
	}
	assert.Equal(t, int64(4*4*32*128*128*128/2), ops[1].Flops, "causal halves the FLOPs")
	assert.Equal(t, int64(2*8*32*128*128*2), ops[3].Bytes, "decode reads K and V once")

	u, err := b.UnfusedAttention(32)
	require.NoError(t, err)
	defer u.Close()
	ref, err := u.Unfused.Run()
	require.NoError(t, err)
	unfPeak := u.Peak()
	flash, err := u.Flash.Run()
	require.NoError(t, err)
	flashPeak := u.Peak()
	// Unfused is (b, h, s, d), flash (b, s, h, d).
	ft, err := flash.Transpose(1, 2)
	require.NoError(t, err)
	fc, err := ft.Contiguous()
	require.NoError(t, err)
	want, got := f32s(t, ref), f32s(t, fc)
	require.Len(t, got, len(want))
	worst := 0.0
	for i := range want {
		worst = math.Max(worst, math.Abs(float64(want[i]-got[i])))
	}
	assert.Less(t, worst, 5e-3, "unfused and flash attention agree")
	out := int64(4 * 32 * 128 * 128 * 2)
	assert.Equal(t, out, flashPeak, "flashattn allocates its output only")
	scores := int64(4 * 32 * 128 * 128 * 2)
	assert.GreaterOrEqual(t, unfPeak, 2*scores, "the unfused peak: the scores and their softmax at once")
	t.Logf("peaks beyond the inputs: unfused %d, flash %d bytes", unfPeak, flashPeak)
	for _, x := range []*candle.Tensor{ref, flash, ft, fc} {
		x.Close()
	}
}

func f32s(t *testing.T, x *candle.Tensor) []float32 {
	t.Helper()
	y, err := x.ToDType(candle.F32)
	require.NoError(t, err)
	defer y.Close()
	v, err := candle.ToSlice[float32](y)
	require.NoError(t, err)
	return v
}
