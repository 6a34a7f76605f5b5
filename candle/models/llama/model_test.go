package llama

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/nn"
	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/mkmodel"
)

// tinySpecs are the small random models the tests run: each family and
// feature the package reads.
var tinySpecs = map[string]mkmodel.Spec{
	"llama gqa llama3 tied": {Family: "llama", Hidden: 64, Intermediate: 96, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 97,
		MaxPositions: 512, RopeTheta: 500000, TieEmbeddings: true, Seed: 3, NoTokenizer: true,
		RopeScaling: &mkmodel.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 64}},
	"llama biases linear untied": {Family: "llama", Hidden: 64, Intermediate: 80, Layers: 2, Heads: 2, KVHeads: 1, Vocab: 61,
		MaxPositions: 256, AttentionBias: true, MLPBias: true, Seed: 4, NoTokenizer: true,
		RopeScaling: &mkmodel.RopeScaling{Type: "linear", Factor: 4}},
	"mistral window 4 head dim 32": {Family: "mistral", Hidden: 64, Intermediate: 96, Layers: 2, Heads: 4, KVHeads: 4, HeadDim: 32,
		Vocab: 83, MaxPositions: 256, SlidingWindow: 4, Seed: 5, NoTokenizer: true},
	"qwen2 biases mqa tied": {Family: "qwen2", Hidden: 48, Intermediate: 64, Layers: 3, Heads: 3, KVHeads: 1, Vocab: 71,
		MaxPositions: 256, RopeTheta: 1e6, TieEmbeddings: true, Seed: 6, NoTokenizer: true},
	"qwen2 window 5": {Family: "qwen2", Hidden: 32, Intermediate: 48, Layers: 2, Heads: 2, KVHeads: 2, Vocab: 53,
		MaxPositions: 256, SlidingWindow: 5, Seed: 7, NoTokenizer: true},
}

func writeModel(t *testing.T, s mkmodel.Spec) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, mkmodel.Write(dir, s, nil))
	return dir
}

// configOf is the config of the checkpoint at path.
func configOf(t *testing.T, path string) *Config {
	t.Helper()
	c, err := models.Open(path)
	require.NoError(t, err)
	defer c.Close()
	cfg, err := ConfigOf(c)
	require.NoError(t, err)
	return cfg
}

func load(t *testing.T, dir string, dev candle.Device, dt candle.DType, opts Options) *Model {
	t.Helper()
	m, err := Load(dir, dev, dt, opts)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

func rows(t *testing.T, x *candle.Tensor) [][]float64 {
	t.Helper()
	require.Equal(t, candle.F32, x.DType())
	v, err := candle.ToSlice[float32](x)
	require.NoError(t, err)
	n, c := x.Dim(0), x.Dim(1)
	out := make([][]float64, n)
	for i := range n {
		out[i] = make([]float64, c)
		for j := range c {
			out[i][j] = float64(v[i*c+j])
		}
	}
	return out
}

// maxRelErr is max |got - want| over max |want|, the logits' scale.
// logitsErr is the largest relative error of got's logits of tokens
// against want's (maxRelErr).
func logitsErr(t *testing.T, want, got interface {
	Logits([]int32) (*candle.Tensor, error)
}, tokens []int32) float64 {
	t.Helper()
	lw, err := want.Logits(tokens)
	require.NoError(t, err)
	defer lw.Close()
	lg, err := got.Logits(tokens)
	require.NoError(t, err)
	defer lg.Close()
	return maxRelErr(rows(t, lw), rows(t, lg))
}

func maxRelErr(want, got [][]float64) float64 {
	scale, e := 0.0, 0.0
	for i := range want {
		for j := range want[i] {
			scale = math.Max(scale, math.Abs(want[i][j]))
			e = math.Max(e, math.Abs(want[i][j]-got[i][j]))
		}
	}
	return e / scale
}

func randomTokens(r *rand.Rand, n, vocab int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(r.IntN(vocab))
	}
	return out
}

// TestCPUForwardAgainstReference compares every position's logits of the
// CPU forward (F32) with the float64 reference, for each tiny model.
func TestCPUForwardAgainstReference(t *testing.T) {
	for name, s := range tinySpecs {
		t.Run(name, func(t *testing.T) {
			dir := writeModel(t, s)
			m := load(t, dir, candle.CPU(), candle.F32, Options{CacheTokens: 64, PageSize: 4})
			r := rand.New(rand.NewPCG(1, s.Seed))
			tokens := randomTokens(r, 13, s.Vocab)
			got, err := m.Logits(tokens)
			require.NoError(t, err)
			defer got.Close()
			require.Equal(t, candle.Shape{13, s.Vocab}, got.Shape())
			want := loadRef(t, dir).logits(tokens)
			e := maxRelErr(want, rows(t, got))
			t.Logf("max relative error %.2g", e)
			assert.LessOrEqual(t, e, 1e-4)
			assert.Equal(t, 64, m.CacheTokensFree(), "Logits leaves nothing in the cache")
		})
	}
}

// TestIncrementalDecode runs sequences of different lengths interleaved
// in batches that mix prefills, multi-token continuations and single-token
// decodes, and checks each step's logits against Logits of the whole
// sequence so far; then releases one and reuses its pages.
func TestIncrementalDecode(t *testing.T) {
	for _, name := range []string{"llama gqa llama3 tied", "mistral window 4 head dim 32"} {
		t.Run(name, func(t *testing.T) {
			s := tinySpecs[name]
			m := load(t, writeModel(t, s), candle.CPU(), candle.F32, Options{CacheTokens: 96, PageSize: 4})
			before := candle.CPU().MemoryStats().InUse
			incremental(t, m, s.Vocab, 1e-5)
			assert.Equal(t, before, candle.CPU().MemoryStats().InUse, "forward passes leave no storage behind")
		})
	}
}

// incremental drives the decode scenario on m and checks it against
// m.Logits with tolerance tol.
func incremental(t *testing.T, m *Model, vocab int, tol float64) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 8))
	history := map[uint64][]int32{}
	step := func(seqs []uint64, counts []int) {
		t.Helper()
		tokens := make([][]int32, len(seqs))
		for i := range seqs {
			tokens[i] = randomTokens(r, counts[i], vocab)
		}
		got, err := m.Forward(seqs, tokens)
		require.NoError(t, err)
		defer got.Close()
		require.Equal(t, candle.Shape{len(seqs), vocab}, got.Shape())
		gr := rows(t, got)
		for i, id := range seqs {
			history[id] = append(history[id], tokens[i]...)
			all, err := m.Logits(history[id])
			require.NoError(t, err)
			want := rows(t, all)
			all.Close()
			e := maxRelErr([][]float64{want[len(want)-1]}, [][]float64{gr[i]})
			require.LessOrEqual(t, e, tol, "sequence %d after %d tokens", id, len(history[id]))
		}
	}
	step([]uint64{10, 20}, []int{7, 3})
	step([]uint64{20, 10, 30}, []int{2, 1, 5})
	for range 4 {
		step([]uint64{30, 10, 20}, []int{1, 1, 1})
	}
	step([]uint64{10, 40, 20}, []int{3, 1, 1})
	free := m.CacheTokensFree()
	m.Release(10)
	assert.Greater(t, m.CacheTokensFree(), free)
	delete(history, 10)
	step([]uint64{50, 30}, []int{9, 1}) // 50 takes 10's pages
	step([]uint64{50}, []int{1})
}

func TestCacheFullAndContext(t *testing.T) {
	s := tinySpecs["llama gqa llama3 tied"]
	m := load(t, writeModel(t, s), candle.CPU(), candle.F32, Options{CacheTokens: 32, PageSize: 4, MaxBatch: 3})
	assert.Equal(t, 32, m.ContextLength(), "the cache bounds the context")
	assert.Equal(t, 32, m.CacheTokensFree())
	r := rand.New(rand.NewPCG(1, 2))
	x, err := m.Forward([]uint64{1}, [][]int32{randomTokens(r, 20, s.Vocab)})
	require.NoError(t, err)
	x.Close()
	assert.Equal(t, 12, m.CacheTokensFree())

	_, err = m.Forward([]uint64{1, 2}, [][]int32{{1}, randomTokens(r, 16, s.Vocab)})
	assert.ErrorIs(t, err, nn.ErrCacheFull)
	assert.ErrorContains(t, err, "release finished sequences")
	assert.Equal(t, 12, m.CacheTokensFree(), "a refused step changes nothing")
	n, _ := m.SequenceLen(1)
	assert.Equal(t, 20, n)

	_, err = m.Forward([]uint64{1}, [][]int32{randomTokens(r, 13, s.Vocab)})
	assert.ErrorIs(t, err, candle.ErrArgument)
	assert.ErrorContains(t, err, "the context length is 32")

	for _, c := range []struct {
		seqs []uint64
		toks [][]int32
		msg  string
	}{
		{nil, nil, "0 sequences"},
		{[]uint64{1}, [][]int32{{1}, {2}}, "1 sequences and 2 token lists"},
		{[]uint64{3}, [][]int32{{}}, "has no new tokens"},
		{[]uint64{3}, [][]int32{{1, int32(s.Vocab)}}, fmt.Sprintf("token %d at 1 is not in the vocabulary", s.Vocab)},
		{[]uint64{3}, [][]int32{{-1}}, "token -1 at 0"},
		{[]uint64{3, 3}, [][]int32{{1}, {2}}, "both entry 0 and entry 1"},
		{[]uint64{3, 4, 5, 6}, [][]int32{{1}, {1}, {1}, {1}}, "at most 3 (Options.MaxBatch)"},
	} {
		_, err := m.Forward(c.seqs, c.toks)
		assert.ErrorIs(t, err, candle.ErrArgument, c.msg)
		assert.ErrorContains(t, err, c.msg)
	}
	_, err = m.Logits(nil)
	assert.ErrorIs(t, err, candle.ErrArgument)
	assert.Equal(t, 12, m.CacheTokensFree())

	m.Release(99) // unknown: a no-op
	m.Release(1)
	assert.Equal(t, 32, m.CacheTokensFree())
	x, err = m.Forward([]uint64{2}, [][]int32{randomTokens(r, 32, s.Vocab)})
	require.NoError(t, err, "the whole cache for one sequence")
	x.Close()

	require.NoError(t, m.Close())
	require.NoError(t, m.Close())
	_, err = m.Forward([]uint64{2}, [][]int32{{1}})
	assert.ErrorIs(t, err, candle.ErrClosed)
	assert.Equal(t, 0, m.CacheTokensFree())
	m.Release(2)
}

func TestLoadErrors(t *testing.T) {
	s := tinySpecs["qwen2 biases mqa tied"]
	dir := writeModel(t, s)
	cpu := candle.CPU()
	_, err := Load(dir, cpu, candle.F64, Options{})
	assert.ErrorIs(t, err, errs.ErrDType)
	_, err = Load(dir, nil, candle.F32, Options{})
	assert.ErrorIs(t, err, errs.ErrDevice)
	_, err = Load(dir, cpu, candle.F32, Options{PageSize: -1})
	assert.ErrorIs(t, err, errs.ErrArgument)
	_, err = Load(filepath.Join(dir, "nothing"), cpu, candle.F32, Options{})
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.ErrorIs(t, err, errs.ErrNotFound)

	// Rewrite the weights with one missing, then one mis-shaped.
	f, err := safetensors.OpenFile(filepath.Join(dir, "model.safetensors"))
	require.NoError(t, err)
	all := map[string]*candle.Tensor{}
	for _, n := range f.Names() {
		all[n], err = f.Load(n, cpu)
		require.NoError(t, err)
	}
	f.Close()
	defer func() {
		for _, x := range all {
			x.Close()
		}
	}()
	save := func(ts map[string]*candle.Tensor) {
		require.NoError(t, safetensors.Save(filepath.Join(dir, "model.safetensors"), ts, nil))
	}
	missing := map[string]*candle.Tensor{}
	for n, x := range all {
		if n != "model.layers.1.self_attn.k_proj.bias" {
			missing[n] = x
		}
	}
	save(missing)
	_, err = Load(dir, cpu, candle.F32, Options{CacheTokens: 16})
	assert.ErrorIs(t, err, errs.ErrNotFound)
	assert.ErrorContains(t, err, `"model.layers.1.self_attn.k_proj.bias"`)

	bad := map[string]*candle.Tensor{}
	for n, x := range all {
		bad[n] = x
	}
	wrong, err := candle.Zeros(cpu, candle.F32, s.Intermediate+1, s.Hidden)
	require.NoError(t, err)
	defer wrong.Close()
	bad["model.layers.2.mlp.up_proj.weight"] = wrong
	save(bad)
	_, err = Load(dir, cpu, candle.F32, Options{CacheTokens: 16})
	assert.ErrorIs(t, err, errs.ErrShape)
	assert.ErrorContains(t, err, `"model.layers.2.mlp.up_proj.weight"`)

	// Untied without lm_head.
	u := tinySpecs["llama biases linear untied"]
	udir := writeModel(t, u)
	g, err := safetensors.OpenFile(filepath.Join(udir, "model.safetensors"))
	require.NoError(t, err)
	noHead := map[string]*candle.Tensor{}
	for _, n := range g.Names() {
		if n != "lm_head.weight" {
			noHead[n], err = g.Load(n, cpu)
			require.NoError(t, err)
		}
	}
	g.Close()
	require.NoError(t, safetensors.Save(filepath.Join(udir, "model.safetensors"), noHead, nil))
	for _, x := range noHead {
		x.Close()
	}
	_, err = Load(udir, cpu, candle.F32, Options{CacheTokens: 16})
	assert.ErrorContains(t, err, `"lm_head.weight"`)
}

// TestDTypesOnCPU runs BF16 and F16 models on the CPU against the F32 one:
// the same model within the 16-bit types' precision.
func TestDTypesOnCPU(t *testing.T) {
	s := tinySpecs["llama gqa llama3 tied"]
	dir := writeModel(t, s)
	tokens := randomTokens(rand.New(rand.NewPCG(3, 3)), 9, s.Vocab)
	ref := load(t, dir, candle.CPU(), candle.F32, Options{CacheTokens: 16})
	want, err := ref.Logits(tokens)
	require.NoError(t, err)
	defer want.Close()
	for _, dt := range []candle.DType{candle.BF16, candle.F16} {
		m := load(t, dir, candle.CPU(), dt, Options{CacheTokens: 16})
		got, err := m.Logits(tokens)
		require.NoError(t, err)
		e := maxRelErr(rows(t, want), rows(t, got))
		got.Close()
		t.Logf("%s: max relative error %.2g", dt, e)
		assert.LessOrEqual(t, e, map[candle.DType]float64{candle.BF16: 0.05, candle.F16: 0.01}[dt], "%s", dt)
	}
}

func TestDefaultCacheSize(t *testing.T) {
	s := tinySpecs["qwen2 biases mqa tied"]
	m := load(t, writeModel(t, s), candle.CPU(), candle.F32, Options{})
	// On the CPU, four contexts of 256 positions: 1024 tokens of 3 layers ×
	// 1 head × 16 × 2 × 4 bytes, far below the CPU's 1 GiB bound.
	assert.Equal(t, 256*4, m.CacheTokensFree())
	assert.Equal(t, 256, m.ContextLength())
	assert.Equal(t, s.Vocab, m.VocabSize())
	assert.Equal(t, candle.CPU(), m.Device())
	assert.Equal(t, "qwen2", m.Config().Family)
	assert.Equal(t, candle.F32, m.DType())
}

// TestLoadProgress checks that Load's progress ends at the weights' size,
// which Config.Parameters counts, for tied and untied models with biases.
func TestLoadProgress(t *testing.T) {
	for _, name := range []string{"llama biases linear untied", "qwen2 biases mqa tied"} {
		s := tinySpecs[name]
		dir := writeModel(t, s)
		want, err := s.Bytes()
		require.NoError(t, err)
		var calls int
		var last, total int64
		m := load(t, dir, candle.CPU(), candle.F32, Options{CacheTokens: 64, Progress: func(d, tot int64) {
			require.GreaterOrEqual(t, d, last, name)
			calls++
			last, total = d, tot
		}})
		require.Equal(t, want/int64(s.DType.Size())*4, total, "%s: total in f32 bytes", name)
		require.Equal(t, total, last, name)
		require.Greater(t, calls, 3, name)
		require.Equal(t, want/int64(s.DType.Size()), m.Config().Parameters(), name)
	}
}

// TestMLPBlocks checks that a pass whose MLP runs over blocks of tokens
// (as a long prefill's does) gives the logits of the MLP over all tokens
// at once, and leaves no storage behind.
func TestMLPBlocks(t *testing.T) {
	s := tinySpecs["llama gqa llama3 tied"]
	m := load(t, writeModel(t, s), candle.CPU(), candle.F32, Options{CacheTokens: 64, PageSize: 4})
	tokens := randomTokens(rand.New(rand.NewPCG(3, 4)), 13, s.Vocab)
	whole, err := m.Logits(tokens)
	require.NoError(t, err)
	defer whole.Close()
	before := candle.CPU().MemoryStats().InUse
	m.mlpRows = 4 // blocks of 4, 4, 4 and 1 tokens
	blocks, err := m.Logits(tokens)
	require.NoError(t, err)
	e := maxRelErr(rows(t, whole), rows(t, blocks))
	t.Logf("max relative error %.2g", e)
	assert.LessOrEqual(t, e, 1e-6)
	blocks.Close()
	assert.Equal(t, before, candle.CPU().MemoryStats().InUse, "blocks leave no storage behind")
}
