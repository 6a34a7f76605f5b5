package bench

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/mkmodel"
	"github.com/rocm-go/rocm/internal/testenv"
)

func TestLLMTPRows(t *testing.T) {
	s := LLMSettings{Prompt: 512, Batches: []int{1, 8}}
	runs := []*LLMTPFigures{
		{Ranks: 1, Prefill: map[string]float64{"1": 1000, "8": 4000}, Decode: map[string]float64{"1": 100, "8": 600}},
		{Ranks: 2, Prefill: map[string]float64{"1": 1800, "8": 7000}, Decode: map[string]float64{"1": 180, "8": 1000}},
		{Ranks: 4, Prefill: map[string]float64{"1": 3000, "8": 12000}, Decode: map[string]float64{"1": 250, "8": 1800}},
	}
	rows := LLMTPRows(s, runs)
	require.Len(t, rows, 12, "prefill and decode at two batches, three sizes")
	assert.Equal(t, "TP 1: prefill 1×512", rows[0].Name)
	assert.InDelta(t, 1, rows[0].Ratio, 1e-9)
	d2 := rows[6]
	assert.Equal(t, "TP 2: decode, batch 1", d2.Name)
	assert.Equal(t, "180.0 tok/s", d2.Ours)
	assert.Equal(t, "100.0 tok/s", d2.Theirs)
	assert.InDelta(t, 1.8, d2.Ratio, 1e-9)
	assert.Equal(t, "≥ 1.7×", d2.Target)
	assert.Equal(t, Met(true), d2.Met)
	d4 := rows[10]
	assert.Equal(t, "TP 4: decode, batch 1", d4.Name)
	assert.Equal(t, Met(false), d4.Met, "2.5× is short of 2.8×")
	assert.Empty(t, rows[11].Target, "batch 8 is reported")
	// Without one GPU's run: no ratios.
	for _, r := range LLMTPRows(s, runs[1:]) {
		assert.Zero(t, r.Ratio, r.Name)
		assert.Nil(t, r.Met, r.Name)
	}
	_, err := RunLLMTP(LLMTP{Settings: s}, &strings.Builder{})
	assert.Error(t, err, "settings without steps")
}

// TestGPULLMTP runs the tensor-parallel benchmark on the tiny model over
// one GPU and, where the machine has them, two.
func TestGPULLMTP(t *testing.T) {
	n, err := hip.DeviceCount()
	testenv.Need(t, 2, "a GPU", err)
	spec := mkmodel.Tiny()
	spec.DType, spec.Vocab = candle.BF16, 512
	var out strings.Builder
	runs, err := RunLLMTP(LLMTP{Spec: spec, Ranks: []int{1, 2}, Settings: LLMSettings{Prompt: 64, Steps: 8, Batches: []int{1, 8}, Reps: 1, Seed: 1}}, &out)
	t.Log(out.String())
	require.NoError(t, err)
	require.Len(t, runs, min(n, 2))
	for _, f := range runs {
		for _, k := range []string{"1", "8"} {
			assert.Positive(t, f.Prefill[k], k)
			assert.Positive(t, f.Decode[k], k)
		}
	}
	assert.Contains(t, out.String(), "| TP 1: decode, batch 1")
}
