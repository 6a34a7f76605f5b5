package flashattn

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/errs"
)

// TestDecodeMaxSeqLen: a paged decode sized by PagedKV.MaxSeqLen plans
// the same launch whatever the step's lengths (none on the host, or any
// within MaxSeqLen), and refuses a MaxSeqLen past the block table.
func TestDecodeMaxSeqLen(t *testing.T) {
	kc := Contiguous(dev+1<<30, F16, 64, 16, 8, 64)
	vc := Contiguous(dev+2<<30, F16, 64, 16, 8, 64)
	q, _, _, out := operands(3, 1, 0, 32, 8, 64)
	fixed := PagedKV{K: kc, V: vc, BlockTable: dev + 4096, BlockTableStride: 64, DevSeqLens: dev + 8192, MaxSeqLen: 1000}
	pr, err := pagedProblem("D", q, &fixed, out)
	require.NoError(t, err)
	assert.Equal(t, 1000, pr.maxSK, "the launch is sized for MaxSeqLen")
	want, err := newPlan("D", &pr, &Params{Causal: true}, h100)
	require.NoError(t, err)
	assert.Equal(t, FlashDecoding, want.backend)
	assert.Greater(t, want.splits, 1)
	for _, lens := range [][]int32{{1, 2, 3}, {0, 1000, 17}, {999, 999, 999}} {
		kv := fixed
		kv.SeqLens = lens
		pr, err := pagedProblem("D", q, &kv, out)
		require.NoError(t, err)
		pl, err := newPlan("D", &pr, &Params{Causal: true}, h100)
		require.NoError(t, err)
		assert.Equal(t, want.grid, pl.grid, "lengths %v", lens)
		assert.Equal(t, want.splits, pl.splits, "lengths %v", lens)
		assert.Equal(t, want.workspace, pl.workspace, "lengths %v", lens)
		assert.Equal(t, want.kp, pl.kp, "lengths %v", lens)
	}
	// A window wider than MaxSeqLen hides nothing, as one wider than
	// every length does without it.
	pl, err := newPlan("D", &pr, &Params{Causal: true, Window: &Window{Left: 1000, Right: 0}}, h100)
	require.NoError(t, err)
	assert.Equal(t, int32(-1), pl.kp.WindowLeft)
	pl, err = newPlan("D", &pr, &Params{Causal: true, Window: &Window{Left: 999, Right: 0}}, h100)
	require.NoError(t, err)
	assert.Equal(t, int32(999), pl.kp.WindowLeft)

	for _, c := range []struct {
		name string
		edit func(*PagedKV)
		msg  string
	}{
		{"past the table", func(kv *PagedKV) { kv.MaxSeqLen = 64*16 + 1 }, "MaxSeqLen 1025: want 0 (the launch sized for SeqLens) or up to 1024"},
		{"negative", func(kv *PagedKV) { kv.MaxSeqLen = -1 }, "MaxSeqLen -1"},
		{"a length past it", func(kv *PagedKV) { kv.SeqLens = []int32{1, 1001, 1} }, "SeqLens[1] is 1001: want 0 to MaxSeqLen 1000"},
		{"lengths of another batch", func(kv *PagedKV) { kv.SeqLens = []int32{1} }, "1 entries for a batch of 3"},
		{"no lengths without MaxSeqLen", func(kv *PagedKV) { kv.MaxSeqLen = 0 }, "0 entries for a batch of 3"},
	} {
		kv := fixed
		c.edit(&kv)
		_, err := pagedProblem("D", q, &kv, out)
		assert.ErrorIs(t, err, errs.ErrArgument, c.name)
		assert.ErrorContains(t, err, c.msg, c.name)
	}
}

// TestDecodeStepSplits: a paged decode of few blocks splits its keys into
// parts of one step of attn_decode each (64 keys at head dim 64): a
// block's steps run one after another, while its loads of a step are in
// flight at once. The LLM's step (batch 1, GQA 32/8, 528 keys of a launch
// sized for 640) takes 9 blocks of one step instead of 5 of two: 9.2 µs a
// layer against 15.9 on an H200.
func TestDecodeStepSplits(t *testing.T) {
	kc := Contiguous(dev+1<<30, F16, 64, 16, 8, 64)
	vc := Contiguous(dev+2<<30, F16, 64, 16, 8, 64)
	q, _, _, out := operands(1, 1, 0, 32, 8, 64)
	kv := PagedKV{K: kc, V: vc, BlockTable: dev + 4096, BlockTableStride: 40, DevSeqLens: dev + 8192, MaxSeqLen: 640}
	pr, err := pagedProblem("D", q, &kv, out)
	require.NoError(t, err)
	pl, err := newPlan("D", &pr, &Params{Causal: true}, h100)
	require.NoError(t, err)
	require.Equal(t, FlashDecoding, pl.backend)
	_, ng, u := decodeTiles(64, 4)
	step := ng * u
	assert.Equal(t, 64, step)
	assert.Equal(t, 640/step, pl.splits, "one step a split: 8 blocks never fill the device")
	per := ((528+pl.splits-1)/pl.splits + step - 1) / step * step
	assert.Equal(t, step, per, "528 keys: a step a split (split_keys)")
}
