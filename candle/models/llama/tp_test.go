package llama

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/nn"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/mkmodel"
)

// forwarder is what greedy runs: a model on one device or split over
// several.
type forwarder interface {
	Forward(seqs []uint64, tokens [][]int32) (*candle.Tensor, error)
	Release(seq uint64)
}

// Tier 0: tensor parallelism on CPU ranks (candle.NewCPUGroup) against
// the model on one device, same weights.

func cpuGroup(t *testing.T, n int) *candle.Group {
	t.Helper()
	g, err := candle.NewCPUGroup(n)
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	return g
}

func loadTP(t *testing.T, path string, g *candle.Group, dt candle.DType, opts Options) *TPModel {
	t.Helper()
	m, err := LoadTP(path, g, dt, opts)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

// TestTensorParallelMatchesOneDevice: every position's logits at 2 and 4
// ranks within 1e-4 of one device's (F32), greedy generations through the
// paged caches identical, for GQA with KV heads split and replicated
// (2 KV heads on 4 ranks, 1 on 2), biases, untied and tied outputs and a
// vocabulary the ranks do not divide (97, 61: padded).
func TestTensorParallelMatchesOneDevice(t *testing.T) {
	for _, c := range []struct {
		spec  string
		ranks []int
	}{
		{"llama gqa llama3 tied", []int{2, 4}},
		{"llama biases linear untied", []int{2}},
		{"mistral window 4 head dim 32", []int{2, 4}},
	} {
		s := tinySpecs[c.spec]
		dir := writeModel(t, s)
		one := load(t, dir, candle.CPU(), candle.F32, Options{})
		rng := rand.New(rand.NewPCG(s.Seed, 45))
		prompt := randomTokens(rng, 11, s.Vocab)
		want := greedy(t, one, prompt, 12)
		for _, n := range c.ranks {
			t.Run(fmt.Sprintf("%s at %d ranks", c.spec, n), func(t *testing.T) {
				m := loadTP(t, dir, cpuGroup(t, n), candle.F32, Options{})
				assert.Equal(t, one.ContextLength(), m.ContextLength())
				assert.Equal(t, s.Vocab, m.VocabSize())
				assert.Equal(t, "cpu/rank0", m.Device().String())
				assert.LessOrEqual(t, logitsErr(t, one, m, randomTokens(rng, 23, s.Vocab)), 1e-4)
				assert.Equal(t, want, greedy(t, m, prompt, 12), "greedy generations")
				assert.Equal(t, m.CacheTokensFree(), one.CacheTokensFree(), "every sequence released")
			})
		}
	}
}

// TestTensorParallelBatches: a batch of prefills and decodes at 2 ranks
// gives each sequence the logits one device gives it.
func TestTensorParallelBatches(t *testing.T) {
	s := tinySpecs["llama gqa llama3 tied"]
	dir := writeModel(t, s)
	one := load(t, dir, candle.CPU(), candle.F32, Options{})
	m := loadTP(t, dir, cpuGroup(t, 2), candle.F32, Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	steps := []struct {
		seqs []uint64
		toks [][]int32
	}{
		{[]uint64{1, 2}, [][]int32{randomTokens(rng, 5, s.Vocab), randomTokens(rng, 20, s.Vocab)}},
		{[]uint64{1, 2, 3}, [][]int32{{3}, {4}, randomTokens(rng, 7, s.Vocab)}},
		{[]uint64{3, 1}, [][]int32{{5}, {6}}},
	}
	for i, st := range steps {
		lw, err := one.Forward(st.seqs, st.toks)
		require.NoError(t, err)
		lg, err := m.Forward(st.seqs, st.toks)
		require.NoError(t, err)
		assert.LessOrEqual(t, maxRelErr(rows(t, lw), rows(t, lg)), 1e-4, "step %d", i)
		lw.Close()
		lg.Close()
	}
	// A batch refused before any pass breaks nothing.
	_, err := m.Forward([]uint64{1}, [][]int32{{int32(s.Vocab)}})
	assert.ErrorIs(t, err, errs.ErrArgument)
	assert.NoError(t, m.Err())
	x, err := m.Forward([]uint64{1}, [][]int32{{1}})
	require.NoError(t, err)
	x.Close()
}

// TestTensorParallelGGUF: a GGUF file's weights split over 2 ranks, float
// and quantized (each rank loads its blocks of the rows and columns).
func TestTensorParallelGGUF(t *testing.T) {
	s := ggufSpec()
	for _, typ := range []candle.GGMLType{candle.GGMLF32, candle.GGMLQ8_0} {
		t.Run(typ.String(), func(t *testing.T) {
			path := writeGGUF(t, s, typ)
			one := loadGGUF(t, path, candle.CPU(), candle.F32, Options{})
			var total int64
			m := loadTP(t, path, cpuGroup(t, 2), candle.F32, Options{Progress: func(done, all int64) { total = all; assert.LessOrEqual(t, done, all) }})
			assert.Positive(t, total)
			rng := rand.New(rand.NewPCG(3, 4))
			vocab := one.VocabSize()
			assert.LessOrEqual(t, logitsErr(t, one, m, randomTokens(rng, 17, vocab)), 1e-4)
			prompt := randomTokens(rng, 6, vocab)
			assert.Equal(t, greedy(t, one, prompt, 8), greedy(t, m, prompt, 8))
		})
	}
}

// TestTensorParallelErrors: models the ranks do not split are refused,
// saying why, before any weight loads.
func TestTensorParallelErrors(t *testing.T) {
	base := mkmodel.Spec{Family: "llama", Hidden: 64, Intermediate: 96, Layers: 1, Heads: 4, KVHeads: 2, Vocab: 50, MaxPositions: 64, Seed: 1, NoTokenizer: true}
	for _, c := range []struct {
		name  string
		edit  func(*Config)
		ranks int
		want  string
	}{
		{"heads", func(*Config) {}, 3, "4 attention heads over 3 devices: the devices must divide the heads"},
		{"kv heads", func(c *Config) { c.Heads, c.KVHeads = 12, 3 }, 4, "3 KV heads over 4 devices"},
		{"intermediate", func(c *Config) { c.IntermediateSize = 90 }, 4, "intermediate size 90 over 4 devices: the devices must divide it (it is not padded)"},
		{"vocab", func(c *Config) { c.VocabSize = 3 }, 4, "a vocabulary of 3 over 4 devices leaves the last none of it"},
		{"ranks", func(*Config) {}, 0, "0 ranks"},
	} {
		cfg := &Config{HiddenSize: base.Hidden, IntermediateSize: base.Intermediate, Heads: base.Heads, KVHeads: base.KVHeads, VocabSize: base.Vocab}
		c.edit(cfg)
		err := CheckTensorParallel(cfg, c.ranks)
		assert.ErrorIs(t, err, errs.ErrArgument, c.name)
		assert.ErrorContains(t, err, c.want, c.name)
	}
	assert.NoError(t, CheckTensorParallel(&Config{Heads: 8, KVHeads: 1, IntermediateSize: 8, VocabSize: 15}, 8))

	dir := writeModel(t, base)
	_, err := LoadTP(dir, cpuGroup(t, 3), candle.F32, Options{})
	assert.ErrorContains(t, err, "the devices must divide the heads")
	_, err = LoadTP(dir, nil, candle.F32, Options{})
	assert.ErrorContains(t, err, "no device group")
	// A weight missing on every rank: each rank's error, and nothing kept.
	c, err := models.Open(dir)
	require.NoError(t, err)
	cfg := c.Config
	require.NoError(t, c.Close())
	_, err = NewTP(&models.Checkpoint{Path: dir, Format: models.HuggingFace, Config: cfg, Weights: nn.TensorWeights{}}, cpuGroup(t, 2), candle.F32, Options{})
	assert.ErrorIs(t, err, errs.ErrNotFound)
	assert.ErrorContains(t, err, "model.embed_tokens.weight")
}

// TestGGUFQuantizedSlices: a rank's rows and columns of a Q8_0 matrix,
// read from the file as blocks, dequantize to the same part of the whole
// matrix; columns that cut a block are refused.
func TestGGUFQuantizedSlices(t *testing.T) {
	c, err := models.Open(writeGGUF(t, ggufSpec(), candle.GGMLQ8_0))
	require.NoError(t, err)
	defer c.Close()
	w := c.Weights.(candle.SlicedWeights)
	const name = "blk.0.ffn_down.weight" // (256, 512)
	whole, err := w.LoadQ(name, candle.CPU())
	require.NoError(t, err)
	defer whole.Close()
	all, err := whole.Dequantize(candle.F32)
	require.NoError(t, err)
	defer all.Close()
	for _, k := range []cut{{0, 64, 128}, {1, 256, 256}, {1, 32, 64}} {
		q, err := w.LoadQSlice(name, candle.CPU(), k.d, k.start, k.n)
		require.NoError(t, err, k)
		got, err := q.Dequantize(candle.F32)
		require.NoError(t, err)
		v, err := all.Narrow(k.d, k.start, k.n)
		require.NoError(t, err)
		want, err := v.Contiguous()
		require.NoError(t, err)
		assert.Equal(t, rows(t, want), rows(t, got), k)
		closeAll(got, v, want)
		q.Close()
	}
	_, err = w.LoadQSlice(name, candle.CPU(), 1, 16, 32)
	assert.ErrorIs(t, err, errs.ErrShape)
	assert.ErrorContains(t, err, "whole blocks of 32")
	_, err = w.LoadSlice(name, candle.CPU(), 0, 0, 1)
	assert.ErrorIs(t, err, errs.ErrDType, "a quantized tensor is LoadQSlice's")
}

// TestTensorParallelBF16: in BF16 the split model's logits stay within
// BF16's noise of one device's (each product's partial sums round before
// the all-reduce adds them).
func TestTensorParallelBF16(t *testing.T) {
	s := tinySpecs["llama gqa llama3 tied"]
	dir := writeModel(t, s)
	one := load(t, dir, candle.CPU(), candle.BF16, Options{})
	m := loadTP(t, dir, cpuGroup(t, 2), candle.BF16, Options{})
	e := logitsErr(t, one, m, randomTokens(rand.New(rand.NewPCG(8, 9)), 19, s.Vocab))
	t.Logf("BF16 logits at 2 ranks against one device: %.3g", e)
	assert.LessOrEqual(t, e, gpuTolerance[candle.BF16])
	assert.Positive(t, e, "BF16 rounds the partial sums: not bitwise the same")
}

// TestTensorParallelOnDevice: a model split over two CPU ranks from
// weights each rank makes itself (mkmodel.OnDevice, as llmbench's
// tensor-parallel benchmark makes them on GPUs).
func TestTensorParallelOnDevice(t *testing.T) {
	s := mkmodel.Tiny()
	s.Vocab = 300
	cfg, w, err := mkmodel.OnDevice(s)
	require.NoError(t, err)
	c := &models.Checkpoint{Format: models.HuggingFace, Config: cfg, Weights: w}
	m, err := NewTP(c, cpuGroup(t, 2), candle.F32, Options{CacheTokens: 256})
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, 300, m.VocabSize())
	logits, err := m.Forward([]uint64{1}, [][]int32{{1, 2, 3}})
	require.NoError(t, err)
	defer logits.Close()
	assert.Equal(t, candle.Shape{1, 300}, logits.Shape())
}
