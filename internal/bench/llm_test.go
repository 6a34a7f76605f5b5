package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/gguf"
	"github.com/rocm-go/rocm/candle/models/llama"
	"github.com/rocm-go/rocm/internal/mkmodel"
	"github.com/rocm-go/rocm/internal/testenv"
)

func TestLLMRooflineAndSizes(t *testing.T) {
	// Llama 3.2 1B in BF16 (1.236 G parameters, tied) at 3 TB/s of copy:
	// about 1213 tokens/s, the "about 1200 on an H100".
	cfg := &llama.Config{HiddenSize: 2048, IntermediateSize: 8192, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64, VocabSize: 128256, TieEmbeddings: true}
	weights := cfg.Parameters() * 2
	assert.Equal(t, int64(2*1_235_814_400), weights)
	assert.InDelta(t, 3000e9/float64(weights), Roofline(weights, 3000), 1e-9)
	assert.InDelta(t, 1213.7, Roofline(weights, 3000), 0.1)
	assert.Zero(t, Roofline(0, 3000))

	s := LLMSettings{Prompt: 512, Steps: 128, Batches: []int{1, 8}, Reps: 5}
	// 512 + 128 tokens are 40 pages of 16, and a spare page: 41 × 16 each.
	assert.Equal(t, 8*41*16, s.CacheTokens(16))
	assert.Equal(t, 2, s.decodeReps())
	// Keys and values of 16 layers, 8 heads of 64, BF16: 32 KiB a token.
	assert.Equal(t, int64(5248*32768), KVCacheBytes(cfg, candle.BF16, 5248, 16))
	assert.Equal(t, int64(16*32768), KVCacheBytes(cfg, candle.BF16, 1, 16), "whole pages")

	for _, bad := range []LLMSettings{
		{Prompt: 0, Steps: 8, Batches: []int{1}, Reps: 1},
		{Prompt: 8, Steps: 1, Batches: []int{1}, Reps: 1},
		{Prompt: 8, Steps: 8, Reps: 1},
		{Prompt: 8, Steps: 8, Batches: []int{65}, Reps: 1},
		{Prompt: 8, Steps: 8, Batches: []int{1}},
	} {
		assert.Error(t, bad.check(), "%+v", bad)
	}
	require.NoError(t, s.check())
}

// figures are made-up measurements in the range.
func figures() (*LLMFigures, *TransformersLLM) {
	ours := &LLMFigures{Prefill: map[string]float64{"1": 40e3, "8": 150e3}, Decode: map[string]float64{"1": 800, "8": 2000},
		DecodeEager: map[string]float64{"1": 400},
		Engine:      map[string]float64{"1": 700, "8": 1900}, TTFT: 0.015, Peak: 3 << 30, Weights: 2 << 30, KV: 1 << 29}
	tf := &TransformersLLM{Runs: map[string]*LLMFigures{
		"eager": {Prefill: map[string]float64{"1": 36.2e3, "8": 160e3}, Decode: map[string]float64{"1": 49.4, "8": 352}, TTFT: 0.03, Peak: 3 << 30},
		"sdpa":  {Prefill: map[string]float64{"1": 50e3, "8": 200e3}, Decode: map[string]float64{"1": 55, "8": 400}, TTFT: 0.025},
	}}
	return ours, tf
}

func TestLLMRows(t *testing.T) {
	s := LLMSettings{Prompt: 512, Steps: 128, Batches: []int{1, 8}, Reps: 5}
	ours, tf := figures()
	rows := LLMRows(s, ours, tf, "eager", 1200)
	require.Len(t, rows, 9)
	byName := map[string]Row{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	p1 := byName["prefill of 512 tokens, batch 1"]
	assert.Equal(t, "40.0 k tok/s", p1.Ours)
	assert.Equal(t, "36.2 k tok/s (sdpa: 50.0 k tok/s)", p1.Theirs)
	assert.InDelta(t, 40/36.2, p1.Ratio, 1e-9)
	assert.True(t, *p1.Met)
	p8 := byName["prefill of 512 tokens, batch 8"]
	assert.False(t, *p8.Met, "150 k against 160 k")

	ttft := byName["time to first token, a 512-token prompt (ratio: theirs / ours)"]
	assert.Equal(t, "15.0 ms", ttft.Ours)
	assert.Equal(t, "30.0 ms (sdpa: 25.0 ms)", ttft.Theirs)
	assert.InDelta(t, 2, ttft.Ratio, 1e-9)
	assert.True(t, *ttft.Met)

	d1 := byName["greedy decode, batch 1, 128 new tokens (tok/s after the first)"]
	assert.Equal(t, "800.0 tok/s, 0.67 of the roofline", d1.Ours)
	assert.Equal(t, "≥ 10×, toward 0.7 of the roofline (1200 tok/s)", d1.Target)
	assert.InDelta(t, 800/49.4, d1.Ratio, 1e-9)
	assert.True(t, *d1.Met)
	d8 := byName["greedy decode, batch 8, 128 new tokens (tok/s after the first)"]
	assert.Equal(t, "≥ 5×", d8.Target)
	assert.InDelta(t, 2000/352.0, d8.Ratio, 1e-9)
	assert.True(t, *d8.Met)

	g1 := byName["the same op by op (no graphs), batch 1"]
	assert.Equal(t, "400.0 tok/s (graphs: 2.00×)", g1.Ours)
	assert.Equal(t, "—", g1.Theirs)
	assert.Nil(t, g1.Met)

	e1 := byName["the same through generate.Engine, batch 1"]
	assert.Equal(t, "700.0 tok/s (0.88 of the direct loop)", e1.Ours)
	assert.Nil(t, e1.Met)

	mem := byName["peak device memory (ratio: ours / (weights + KV cache))"]
	assert.InDelta(t, 3/2.5, mem.Ratio, 1e-9)
	assert.False(t, *mem.Met)
	assert.Equal(t, "3.00 GiB (weights 2.00 GiB + KV 0.50 GiB)", mem.Ours)
	assert.Equal(t, "3.00 GiB", mem.Theirs)

	var out strings.Builder
	PrintTable(&out, "transformers (eager attention)", rows)
	assert.Contains(t, out.String(), "| measurement | rocm-go | transformers (eager attention) | ratio | target | met |")
	assert.Contains(t, out.String(), "| greedy decode, batch 8, 128 new tokens (tok/s after the first) | 2000.0 tok/s | 352.0 tok/s (sdpa: 400.0 tok/s) | 5.682 | ≥ 5× | yes |")
	assert.Contains(t, out.String(), "| 1.200 | ≤ 1.10 | **no** |")
}

// Without transformers the relative rows have no verdict; the absolute
// goals (TTFT, memory) still have one.
func TestLLMRowsWithoutTransformers(t *testing.T) {
	s := LLMSettings{Prompt: 64, Steps: 16, Batches: []int{1}, Reps: 1}
	ours, _ := figures()
	ours.TTFT = 0.025
	rows := LLMRows(s, ours, nil, "eager", 0)
	require.Len(t, rows, 6)
	for _, r := range rows {
		assert.Equal(t, "—", r.Theirs, r.Name)
		switch {
		case strings.HasPrefix(r.Name, "time to first token"):
			assert.False(t, *r.Met)
		case strings.HasPrefix(r.Name, "peak"):
			assert.NotNil(t, r.Met)
		default:
			assert.Nil(t, r.Met, r.Name)
			assert.Zero(t, r.Ratio, r.Name)
		}
	}
	assert.Equal(t, "≥ 10×", rows[2].Target, "no roofline: the target alone")
	assert.Equal(t, "800.0 tok/s", rows[2].Ours)
}

// The JSON of torch_llm.py decodes into the figures.
func TestTransformersJSON(t *testing.T) {
	var tf TransformersLLM
	require.NoError(t, json.Unmarshal([]byte(`{"torch": "2.11", "transformers": "5.17", "gpu": "H100", "skipped": {},
		"runs": {"eager": {"prefill_tok_s": {"1": 36200.0, "8": 160000.0}, "decode_tok_s": {"1": 49.4, "8": 352.0},
		"ttft_s": 0.03, "peak_bytes": 3000000000, "attention": "eager"}}}`), &tf))
	e := tf.Runs["eager"]
	assert.Equal(t, 36200.0, e.Prefill["1"])
	assert.Equal(t, 352.0, e.Decode["8"])
	assert.Equal(t, int64(3000000000), e.Peak)
	assert.Equal(t, "eager", e.Attention)
}

func tinyBF16() mkmodel.Spec {
	s := mkmodel.Tiny()
	s.DType = candle.BF16
	return s
}

func TestPrepareLLMModel(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	var out strings.Builder
	reused, err := PrepareLLMModel(dir, tinyBF16(), &out)
	require.NoError(t, err)
	assert.False(t, reused)
	assert.Contains(t, out.String(), "model: writing")
	assert.Contains(t, out.String(), "model: written in")
	assert.FileExists(t, filepath.Join(dir, "model.safetensors"))

	out.Reset()
	reused, err = PrepareLLMModel(dir, tinyBF16(), &out)
	require.NoError(t, err)
	assert.True(t, reused)
	assert.Contains(t, out.String(), "model: reusing "+dir)

	// Another shape in the folder: refused, never overwritten.
	other := tinyBF16()
	other.Layers = 2
	_, err = PrepareLLMModel(dir, other, &out)
	assert.ErrorContains(t, err, "holds another model (hidden 128, 4 layers")
	// A truncated weights file is not reused.
	require.NoError(t, os.Truncate(filepath.Join(dir, "model.safetensors"), 100))
	_, err = PrepareLLMModel(dir, tinyBF16(), &out)
	assert.ErrorContains(t, err, "or an incomplete one")
	// A config that does not read.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte("{"), 0o644))
	_, err = PrepareLLMModel(dir, tinyBF16(), &out)
	assert.ErrorContains(t, err, "whose config does not read")
}

func TestPrepareGGUF(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m-q8_0.gguf")
	spec := tinyBF16()
	var out strings.Builder
	require.NoError(t, PrepareGGUF(path, spec, candle.GGMLQ8_0, &out))
	assert.Contains(t, out.String(), "wrote "+path)
	f, err := gguf.Open(path)
	require.NoError(t, err)
	info, ok := f.Tensor("blk.0.attn_q.weight")
	f.Close()
	require.True(t, ok)
	assert.Equal(t, candle.GGMLQ8_0, info.Type)

	out.Reset()
	require.NoError(t, PrepareGGUF(path, spec, candle.GGMLQ8_0, &out))
	assert.Contains(t, out.String(), "reusing "+path)
	// Another type or shape is refused, and the file stays.
	assert.ErrorContains(t, PrepareGGUF(path, spec, candle.GGMLQ4_0, &out), "another model or type")
	other := spec
	other.Layers++
	assert.ErrorContains(t, PrepareGGUF(path, other, candle.GGMLQ8_0, &out), "another model or type")
	require.NoError(t, os.WriteFile(path, []byte("not gguf"), 0o644))
	assert.ErrorContains(t, PrepareGGUF(path, spec, candle.GGMLQ8_0, &out), "does not read as GGUF")
}

func TestLLMQuantRows(t *testing.T) {
	s := LLMSettings{Prompt: 64, Batches: []int{1, 8}}
	bf16 := &LLMFigures{Prefill: map[string]float64{"1": 1000, "8": 4000}, Decode: map[string]float64{"1": 500, "8": 2000}}
	qs := []*LLMQuantFigures{
		{Type: "Q4_K", RooflineTokS: 1000, Prefill: map[string]float64{"1": 600, "8": 2400}, Decode: map[string]float64{"1": 650, "8": 1500}},
		{Type: "Q8_0", RooflineTokS: 800, Prefill: map[string]float64{"1": 700}, Decode: map[string]float64{"1": 400, "8": 1800}},
	}
	rows := LLMQuantRows(s, bf16, qs)
	require.Len(t, rows, 6, "decode at each batch and prefill at the first, per type")
	q4 := rows[0]
	assert.Equal(t, "Q4_K model, greedy decode, batch 1 (reference: the BF16 model)", q4.Name)
	assert.Equal(t, "650.0 tok/s, 0.65 of its roofline (1000 tok/s)", q4.Ours)
	assert.InDelta(t, 1.3, q4.Ratio, 1e-9)
	assert.Equal(t, "≥ 0.6 of the roofline", q4.Target)
	assert.Equal(t, Met(true), q4.Met)
	assert.Equal(t, "Q4_K model, prefill of 64 tokens, batch 1", rows[1].Name)
	assert.InDelta(t, 0.6, rows[1].Ratio, 1e-9)
	assert.Equal(t, "reported", rows[2].Target, "batch 8 is reported")
	q8 := rows[3]
	assert.Equal(t, "reported", q8.Target, "only Q4_K has a target")
	assert.Contains(t, q8.Ours, "0.50 of its roofline")
	// Without the BF16 model's figures: no ratios.
	for _, r := range LLMQuantRows(s, nil, qs) {
		assert.Zero(t, r.Ratio, r.Name)
	}
}

func TestLLMLastChars(t *testing.T) {
	assert.Equal(t, "abc", lastChars("abc", 3))
	assert.Equal(t, "…cd", lastChars("abcd", 2))
	err := checkTransformers("no-such-python-here")
	assert.ErrorContains(t, err, "no no-such-python-here")
}

// TestGPULLMBench runs the whole benchmark on a tiny model (the command's
// -quick), transformers included where python3 has torch and
// transformers, and checks the report's figures are there and sane.
func TestGPULLMBench(t *testing.T) {
	b, err := OpenTensors()
	testenv.Need(t, 2, "a GPU", err)
	b.Close()
	python := "python3"
	if err := checkTransformers(python); err != nil {
		t.Logf("without transformers: %v", err)
		python = ""
	}
	s := LLMSettings{Prompt: 64, Steps: 16, Batches: []int{1, 8}, Reps: 2, Seed: 1}
	var out strings.Builder
	rep, err := RunLLMBench(LLMBench{Model: filepath.Join(t.TempDir(), "tiny"), Spec: tinyBF16(), Settings: s, Python: python,
		CopyBytes: 64 << 20, Quant: []candle.GGMLType{candle.GGMLQ8_0}}, &out)
	t.Log(out.String())
	require.NoError(t, err)
	assert.Positive(t, rep.CopyGBps)
	assert.Positive(t, rep.RooflineTokS)
	o := rep.Ours
	for _, k := range []string{"1", "8"} {
		assert.Positive(t, o.Prefill[k], k)
		assert.Positive(t, o.Decode[k], k)
		assert.Positive(t, o.DecodeEager[k], k)
		assert.Positive(t, o.Engine[k], k)
	}
	assert.Positive(t, o.TTFT)
	assert.Positive(t, o.Weights)
	assert.Positive(t, o.KV)
	// The peak holds the weights and the cache at least.
	assert.GreaterOrEqual(t, o.Peak, o.Weights+o.KV)
	if python != "" {
		require.NotNil(t, rep.Transformers, rep.NoReference)
		e := rep.Transformers.Runs["eager"]
		require.NotNil(t, e)
		assert.Positive(t, e.Prefill["8"])
		assert.Positive(t, e.Decode["1"])
		assert.Positive(t, e.TTFT)
	} else {
		assert.Contains(t, out.String(), "transformers: SKIPPED:")
	}
	assert.Contains(t, out.String(), "| greedy decode, batch 8, 16 new tokens")
	require.Len(t, rep.Rows, 10, "prefill, TTFT, decode, op by op and through the engine at two batches, and the peak")
	// The model as a Q8_0 GGUF file beside it.
	require.Len(t, rep.Quant, 1)
	q := rep.Quant[0]
	assert.Equal(t, "Q8_0", q.Type)
	assert.Positive(t, q.WeightBytes)
	for _, k := range []string{"1", "8"} {
		assert.Positive(t, q.Prefill[k], k)
		assert.Positive(t, q.Decode[k], k)
	}
	assert.Len(t, rep.QuantRows, 3)
}

// The table against transformers compiled: ratios, the roofline's share in
// batch 1's verdict, the compile time reported apart; none without the run.
func TestCompiledRows(t *testing.T) {
	s := LLMSettings{Prompt: 512, Steps: 128, Batches: []int{1, 8}, Reps: 2}
	ours := &LLMFigures{Prefill: map[string]float64{"1": 50000, "8": 90000}, Decode: map[string]float64{"1": 900, "8": 5000}, TTFT: 0.01}
	tf := &TransformersLLM{Runs: map[string]*LLMFigures{"compiled": {Prefill: map[string]float64{"1": 40000, "8": 100000},
		Decode: map[string]float64{"1": 700, "8": 5000}, TTFT: 0.02, Compile: map[string]float64{"decode/1": 30, "prefill/1": 12.5}}}}
	assert.Nil(t, CompiledRows(s, ours, nil, 1000))
	assert.Nil(t, CompiledRows(s, ours, &TransformersLLM{Runs: map[string]*LLMFigures{"eager": {}}}, 1000))

	rows := CompiledRows(s, ours, tf, 1000)
	require.Len(t, rows, 6, "two prefills, TTFT, two decodes, the compile time")
	assert.InDelta(t, 1.25, rows[0].Ratio, 1e-9)
	assert.True(t, *rows[0].Met)
	assert.False(t, *rows[1].Met, "0.9× of their prefill")
	assert.InDelta(t, 2.0, rows[2].Ratio, 1e-9, "TTFT: theirs / ours")
	assert.Nil(t, rows[2].Met)
	b1 := rows[3]
	assert.InDelta(t, 900.0/700, b1.Ratio, 1e-9)
	assert.Contains(t, b1.Ours, "0.90 of the roofline")
	assert.True(t, *b1.Met, "1.29× and 0.90 of the roofline")
	assert.False(t, *rows[4].Met, "1.0× is short of 1.2×")
	assert.Equal(t, "42.5 s", rows[5].Theirs)

	slow := CompiledRows(s, ours, tf, 2000)
	assert.False(t, *slow[3].Met, "1.29× but 0.45 of the roofline")
}
