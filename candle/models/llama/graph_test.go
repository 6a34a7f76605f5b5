package llama

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/errs"
)

// Tier 0: a model's graph options reach its runner (models.Runner).

func TestGraphOptions(t *testing.T) {
	dir := writeModel(t, tinySpecs["qwen2 window 5"])
	_, err := Load(dir, candle.CPU(), candle.F32, Options{MaxGraphs: -1})
	require.ErrorIs(t, err, errs.ErrArgument)
	assert.ErrorContains(t, err, "MaxGraphs -1")
	// The CPU device runs decode steps op by op: no graphs.
	m := load(t, dir, candle.CPU(), candle.F32, Options{CacheTokens: 64, PageSize: 4})
	x, err := m.Forward([]uint64{1}, [][]int32{{1, 2, 3}})
	require.NoError(t, err)
	x.Close()
	x, err = m.Forward([]uint64{1}, [][]int32{{4}})
	require.NoError(t, err)
	x.Close()
	assert.Empty(t, m.DecodeGraphs())
}

// Tier 2.

// decodeRun drives a model through prompts of different lengths (crossing
// pages), then steps decode steps of the whole batch, releasing the
// sequence of entry 1 at step steps/2 and putting a new one (prefilled
// alone, op by op) in its place. It returns the logits of every decode
// step and the device allocations made by the decode steps after the
// first two.
func decodeRun(t *testing.T, m decoder, batch, steps int, vocab int) ([][][]float64, int64) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(batch), 77))
	seqs := make([]uint64, batch)
	for i := range seqs {
		seqs[i] = uint64(100*batch + i)
		x, err := m.Forward(seqs[i:i+1], [][]int32{randomTokens(r, 3+7*i, vocab)})
		require.NoError(t, err)
		x.Close()
	}
	var out [][][]float64
	var allocs int64
	d := m.Device()
	for n := range steps {
		if n == steps/2 && batch > 1 {
			m.Release(seqs[1])
			seqs[1] += 50
			x, err := m.Forward(seqs[1:2], [][]int32{randomTokens(r, 13, vocab)})
			require.NoError(t, err)
			x.Close()
		}
		tokens := make([][]int32, batch)
		for i := range tokens {
			tokens[i] = randomTokens(r, 1, vocab)
		}
		before := d.MemoryStats().Allocs
		x, err := m.Forward(seqs, tokens)
		require.NoError(t, err, "decode step %d of batch %d", n, batch)
		if n >= 2 {
			allocs += d.MemoryStats().Allocs - before
		}
		out = append(out, rows(t, x))
		x.Close()
	}
	for _, id := range seqs {
		m.Release(id)
	}
	return out, allocs
}

// TestGPUDecodeGraphs compares decode steps replayed as graphs with the
// same steps run op by op (Options.NoGraphs: the same kernels with the
// same launches, so the logits should be bitwise equal; the test allows
// 1e-5 of the logits' scale, in case the BLAS library picks another
// algorithm under capture, and logs which it was) and with the CPU device
// (gpuTolerance), over 40 steps of batches of 1, 3 and 8 sequences of
// different lengths crossing pages, with a release and a replacement, for
// GQA with llama3 RoPE scaling, a sliding window (Mistral) and MQA with
// biases (Qwen2). Replayed steps must allocate no device memory, and
// closing the model frees every graph's private memory.
func TestGPUDecodeGraphs(t *testing.T) {
	dev := hipDevice(t)
	const steps = 40
	for _, name := range []string{"llama gqa llama3 tied", "mistral window 4 head dim 32", "qwen2 biases mqa tied"} {
		t.Run(name, func(t *testing.T) {
			s := tinySpecs[name]
			dir := writeModel(t, s)
			opts := Options{CacheTokens: 2048, PageSize: 8}
			g, err := Load(dir, dev, candle.F32, opts)
			require.NoError(t, err)
			defer g.Close()
			opts.NoGraphs = true
			e := load(t, dir, dev, candle.F32, opts)
			c := load(t, dir, candle.CPU(), candle.F32, opts)
			for _, b := range []int{1, 3, 8} {
				lg, allocs := decodeRun(t, g, b, steps, s.Vocab)
				le, _ := decodeRun(t, e, b, steps, s.Vocab)
				lc, _ := decodeRun(t, c, b, steps, s.Vocab)
				worstE, worstC, bitwise := 0.0, 0.0, true
				for n := range lg {
					ee := maxRelErr(le[n], lg[n])
					require.LessOrEqual(t, ee, 1e-5, "batch %d, step %d: graph against op by op", b, n)
					worstE = math.Max(worstE, ee)
					bitwise = bitwise && ee == 0
					ec := maxRelErr(lc[n], lg[n])
					require.LessOrEqual(t, ec, gpuTolerance[candle.F32], "batch %d, step %d: graph against the CPU", b, n)
					worstC = math.Max(worstC, ec)
				}
				t.Logf("batch %d, %d steps: graph against op by op %.3g (bitwise equal: %v), against the CPU %.3g", b, steps, worstE, bitwise, worstC)
				assert.Zero(t, allocs, "batch %d: replayed decode steps allocate no device memory", b)
			}
			assert.Equal(t, []int{1, 3, 8}, g.DecodeGraphs())
			assert.Empty(t, e.DecodeGraphs())
			assert.Positive(t, dev.MemoryStats().Graphs)
			require.NoError(t, g.Close())
			require.NoError(t, dev.Synchronize())
			assert.Zero(t, dev.MemoryStats().Graphs, "Close frees the graphs' private memory")
		})
	}
}

// TestGPUDecodeGraphsEvicted keeps at most two graphs: a third batch size
// replaces the least recently used, and a graph recaptured after that
// still gives the logits of op-by-op steps.
func TestGPUDecodeGraphsEvicted(t *testing.T) {
	dev := hipDevice(t)
	s := tinySpecs["llama gqa llama3 tied"]
	dir := writeModel(t, s)
	g := load(t, dir, dev, candle.F32, Options{CacheTokens: 1024, PageSize: 8, MaxGraphs: 2})
	e := load(t, dir, dev, candle.F32, Options{CacheTokens: 1024, PageSize: 8, NoGraphs: true})
	for i, b := range []int{1, 2, 3, 1, 2} {
		lg, _ := decodeRun(t, g, b, 6, s.Vocab)
		le, _ := decodeRun(t, e, b, 6, s.Vocab)
		for n := range lg {
			require.LessOrEqual(t, maxRelErr(le[n], lg[n]), 1e-5, "run %d (batch %d), step %d", i, b, n)
		}
		assert.Len(t, g.DecodeGraphs(), min(i+1, 2))
		assert.Contains(t, g.DecodeGraphs(), b)
	}
	// SetGraphs(false) runs op by op with the same inputs.
	g.SetGraphs(false)
	lg, _ := decodeRun(t, g, 2, 4, s.Vocab)
	le, _ := decodeRun(t, e, 2, 4, s.Vocab)
	for n := range lg {
		require.LessOrEqual(t, maxRelErr(le[n], lg[n]), 1e-5, "graphs off, step %d", n)
	}
}
