package llama

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/mkmodel"
	"github.com/rocm-go/rocm/internal/testenv"
)

// Tier 2: the HIP device against the CPU device and against transformers.

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

// gpuTolerance is the largest relative error (to the logits' scale) of
// the HIP device against the CPU device in each dtype: F32 is float32
// arithmetic in another order; BF16 and F16 round each op's output.
var gpuTolerance = map[candle.DType]float64{candle.F32: 1e-4, candle.BF16: 4e-2, candle.F16: 8e-3}

// scenario is a batched run: steps that mix prefills, continuations and
// decodes of several sequences, with a release and a reuse. It returns
// every step's logits.
func scenario(t *testing.T, m *Model, vocab int, long bool) [][][]float64 {
	t.Helper()
	r := rand.New(rand.NewPCG(31, 32))
	var out [][][]float64
	step := func(seqs []uint64, counts []int) {
		t.Helper()
		tokens := make([][]int32, len(seqs))
		for i := range seqs {
			tokens[i] = randomTokens(r, counts[i], vocab)
		}
		x, err := m.Forward(seqs, tokens)
		require.NoError(t, err)
		out = append(out, rows(t, x))
		x.Close()
	}
	first := 9
	if long {
		first = 300 // long enough for split-KV decode
	}
	step([]uint64{1, 2}, []int{first, 4})
	step([]uint64{2, 1, 3}, []int{3, 1, 17})
	for range 5 {
		step([]uint64{3, 1, 2}, []int{1, 1, 1})
	}
	step([]uint64{4, 2, 1, 3}, []int{6, 2, 1, 1})
	m.Release(2)
	step([]uint64{5, 1}, []int{11, 1})
	for range 3 {
		step([]uint64{1, 3, 4, 5}, []int{1, 1, 1, 1})
	}
	return out
}

// greedy generates n tokens after prompt as sequence 7: the prompt, then
// one token at a time through the paged cache, argmax on the host.
func greedy(t *testing.T, m forwarder, prompt []int32, n int) []int32 {
	t.Helper()
	var out []int32
	next := prompt
	for len(out) < n {
		x, err := m.Forward([]uint64{7}, [][]int32{next})
		require.NoError(t, err)
		l := rows(t, x)[0]
		x.Close()
		best := 0
		for j, v := range l {
			if v > l[best] {
				best = j
			}
		}
		out = append(out, int32(best))
		next = []int32{int32(best)}
	}
	m.Release(7)
	return out
}

// TestGPUForwardAgainstCPU runs each tiny model on the HIP device and on
// the CPU in F32, BF16 and F16: every position's logits of a prompt, and a
// batched scenario of mixed prefills and decodes over several pages.
func TestGPUForwardAgainstCPU(t *testing.T) {
	dev := hipDevice(t)
	for name, s := range tinySpecs {
		dir := writeModel(t, s)
		for _, dt := range []candle.DType{candle.F32, candle.BF16, candle.F16} {
			t.Run(fmt.Sprintf("%s %s", name, dt), func(t *testing.T) {
				opts := Options{CacheTokens: 512, PageSize: 8}
				g := load(t, dir, dev, dt, opts)
				c := load(t, dir, candle.CPU(), dt, opts)
				tol := gpuTolerance[dt]
				tokens := randomTokens(rand.New(rand.NewPCG(5, 6)), 29, s.Vocab)
				e := logitsErr(t, c, g, tokens)
				t.Logf("logits of %d tokens: max relative error %.2g", len(tokens), e)
				assert.LessOrEqual(t, e, tol)

				long := s.MaxPositions >= 512 && dt == candle.F32
				sg, sc := scenario(t, g, s.Vocab, long), scenario(t, c, s.Vocab, long)
				worst := 0.0
				for i := range sc {
					worst = math.Max(worst, maxRelErr(sc[i], sg[i]))
				}
				t.Logf("batched scenario, %d steps: max relative error %.2g", len(sc), worst)
				assert.LessOrEqual(t, worst, tol)
				assert.Equal(t, c.CacheTokensFree(), g.CacheTokensFree())
			})
		}
	}
}

// TestGPUIncrementalDecode checks on the GPU that batched, paged decoding
// gives the logits of the whole sequence at once (varlen prefill against
// paged decode).
func TestGPUIncrementalDecode(t *testing.T) {
	dev := hipDevice(t)
	for _, name := range []string{"llama gqa llama3 tied", "mistral window 4 head dim 32", "qwen2 biases mqa tied"} {
		t.Run(name, func(t *testing.T) {
			s := tinySpecs[name]
			m := load(t, writeModel(t, s), dev, candle.F32, Options{CacheTokens: 256, PageSize: 4})
			incremental(t, m, s.Vocab, 1e-4)
		})
	}
}

// TestGPUMkmodelShape loads a model that mkmodel writes with Llama 3.2
// 1B's layer shape (hidden 2048, 32 heads of 64, 8 KV heads, intermediate
// 8192; one layer and a smaller vocabulary keep it quick) in BF16, and
// checks that decoding through the cache gives the logits of the whole
// prompt at once.
func TestGPUMkmodelShape(t *testing.T) {
	dev := hipDevice(t)
	s := mkmodel.Llama32_1B()
	s.Layers, s.Vocab, s.SpecialBase = 1, 4096, 0
	dir := t.TempDir()
	require.NoError(t, mkmodel.Write(dir, s, nil))
	m := load(t, dir, dev, candle.BF16, Options{CacheTokens: 8192})
	assert.Equal(t, 4096, m.VocabSize())
	r := rand.New(rand.NewPCG(1, 1))
	prompt := randomTokens(r, 100, m.VocabSize())
	x, err := m.Forward([]uint64{1}, [][]int32{prompt[:99]})
	require.NoError(t, err)
	x.Close()
	x, err = m.Forward([]uint64{1}, [][]int32{prompt[99:]})
	require.NoError(t, err)
	dec := rows(t, x)[0]
	x.Close()
	all, err := m.Logits(prompt)
	require.NoError(t, err)
	want := rows(t, all)
	all.Close()
	for _, v := range dec {
		require.False(t, math.IsNaN(v) || math.IsInf(v, 0))
	}
	e := maxRelErr([][]float64{want[99]}, [][]float64{dec})
	t.Logf("decode against prefill of 100 tokens: max relative error %.2g", e)
	assert.LessOrEqual(t, e, gpuTolerance[candle.BF16])
}

// transformersRef is what testdata/transformers_ref.py saves per model.
type transformersRef struct {
	Prompt       []int32 `json:"prompt"`
	Greedy       []int32 `json:"greedy"`
	Vocab        int     `json:"vocab"`
	Torch        string  `json:"torch"`
	Transformers string  `json:"transformers"`
	Device       string  `json:"device"`
	f32, bf16    [][]float64
}

func readLogits(t *testing.T, path string, n, vocab int) [][]float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, b, n*vocab*4, path)
	out := make([][]float64, n)
	for i := range out {
		out[i] = make([]float64, vocab)
		for j := range vocab {
			out[i][j] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[(i*vocab+j)*4:])))
		}
	}
	return out
}

// TestGPUAgainstTransformers builds small random Llama (llama3 RoPE
// scaling), Mistral (a sliding window shorter than the prompt) and Qwen2
// (QKV biases, tied embeddings) models with transformers
// (testdata/transformers_ref.py), loads each folder on the HIP device and
// compares: the prompt's logits in F32 (max relative error ≤ 1e-4 of the
// largest |logit|), 64 greedy tokens in F32 (identical), and the prompt's
// logits in BF16 against transformers' F32 (within twice what transformers
// itself loses in BF16, and at least 2e-2).
func TestGPUAgainstTransformers(t *testing.T) {
	dev := hipDevice(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("tier 2: needs python3 with torch and transformers")
	}
	if err := exec.Command("python3", "-c", "import torch, transformers").Run(); err != nil {
		t.Skip("tier 2: needs python3 with torch and transformers (import failed)")
	}
	out := t.TempDir()
	cmd := exec.Command("python3", filepath.Join("testdata", "transformers_ref.py"), out)
	log, err := cmd.CombinedOutput()
	require.NoError(t, err, "transformers_ref.py:\n%s", log)
	t.Logf("transformers_ref.py:\n%s", log)
	for _, name := range []string{"llama", "mistral", "qwen2"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(out, name)
			b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
			require.NoError(t, err)
			var ref transformersRef
			require.NoError(t, json.Unmarshal(b, &ref))
			n := len(ref.Prompt)
			ref.f32 = readLogits(t, filepath.Join(dir, "logits_f32.bin"), n, ref.Vocab)
			ref.bf16 = readLogits(t, filepath.Join(dir, "logits_bf16.bin"), n, ref.Vocab)
			cfg := configOf(t, dir)
			t.Logf("torch %s, transformers %s on %s; config: %+v", ref.Torch, ref.Transformers, ref.Device, *cfg)

			m := load(t, dir, dev, candle.F32, Options{CacheTokens: 1024})
			lg, err := m.Logits(ref.Prompt)
			require.NoError(t, err)
			got := rows(t, lg)
			lg.Close()
			e := maxRelErr(ref.f32, got)
			t.Logf("F32 logits of %d tokens: max relative error %.3g", n, e)
			assert.LessOrEqual(t, e, 1e-4, "F32 logits")

			// Greedy: the prompt, then one token at a time through the
			// paged cache, argmax on the host.
			assert.Equal(t, ref.Greedy, greedy(t, m, ref.Prompt, len(ref.Greedy)), "64 greedy tokens in F32")

			mb := load(t, dir, dev, candle.BF16, Options{CacheTokens: 1024})
			lb, err := mb.Logits(ref.Prompt)
			require.NoError(t, err)
			gotB := rows(t, lb)
			lb.Close()
			eb, eRef := maxRelErr(ref.f32, gotB), maxRelErr(ref.f32, ref.bf16)
			tol := math.Max(2*eRef, 2e-2)
			t.Logf("BF16 logits: max relative error %.3g against transformers' F32 (transformers' own BF16: %.3g; tolerance %.3g)", eb, eRef, tol)
			assert.LessOrEqual(t, eb, tol, "BF16 logits")
		})
	}
}

// TestGPUOutOfMemory loads a model whose KV cache (2³⁰ tokens of 256 bytes) no GPU
// holds: the error is candle.ErrOutOfMemory, through nn's cache and
// llama's Load, with HIP's status underneath; then the same model loads
// with a cache that fits, so nothing of the failed load stayed behind.
func TestGPUOutOfMemory(t *testing.T) {
	dev := hipDevice(t)
	dir := writeModel(t, tinySpecs["llama gqa llama3 tied"])
	inUse := dev.MemoryStats().InUse
	_, err := Load(dir, dev, candle.F16, Options{CacheTokens: 1 << 30, PageSize: 16})
	require.Error(t, err)
	assert.ErrorIs(t, err, candle.ErrOutOfMemory)
	assert.ErrorIs(t, err, hip.ErrOutOfMemory)
	var e *candle.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "llama", e.Pkg)
	assert.Equal(t, inUse, dev.MemoryStats().InUse, "the failed load freed what it took")
	m := load(t, dir, dev, candle.F16, Options{CacheTokens: 256, PageSize: 16})
	x, err := m.Forward([]uint64{1}, [][]int32{{1, 2, 3}})
	require.NoError(t, err)
	x.Close()
}
