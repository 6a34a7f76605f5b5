package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/mkmodel"
	"github.com/rocm-go/rocm/internal/testenv"
	"github.com/rocm-go/rocm/tokenizer"
)

// TestRealBackendOnCPU runs the real backend on a small random model:
// the chat template, encoding, a greedy generation (twice, the same),
// the engine's refusals as the worker's errors, and Close.
func TestRealBackendOnCPU(t *testing.T) { testRealBackend(t, "cpu", "f32") }

// TestGPURealBackend is the same on the GPU, where the model loads
// through pinned buffers reserved while the tokenizer loads.
func TestGPURealBackend(t *testing.T) {
	n, err := hip.DeviceCount()
	if err == nil && n == 0 {
		err = candle.ErrDevice
	}
	testenv.Need(t, 2, "a GPU", err)
	testRealBackend(t, "hip:0", "bf16")
}

func testRealBackend(t *testing.T, device, wantDType string) {
	dir := t.TempDir()
	require.NoError(t, mkmodel.Write(dir, mkmodel.Tiny(), nil))
	var done, total int64
	b, err := openBackend(LoadOptions{Dir: dir, Device: device, DType: "auto", MaxBatch: 4, MaxQueue: 4,
		Progress: func(d, tot int64) { done, total = d, tot }})
	require.NoError(t, err)
	assert.Positive(t, total)
	assert.Equal(t, total, done, "the progress reaches the total")
	info := b.Info()
	assert.Equal(t, device, info.Device)
	assert.Equal(t, wantDType, info.DType)
	assert.Equal(t, "F32", info.Weights, "mkmodel's tiny model is F32 in its files")
	assert.Positive(t, info.CacheTokens)
	assert.NotEmpty(t, b.EOS())
	st := b.Stats()
	assert.Zero(t, st.KVCacheUsage, "no sequence holds the cache yet")
	assert.Positive(t, st.DeviceMemoryInUse, "the weights and the cache")

	text, err := b.ApplyChatTemplate([]tokenizer.Message{{Role: "user", Content: "Hello, GPU!"}}, true)
	require.NoError(t, err)
	ids, err := b.Encode(text, false)
	require.NoError(t, err)
	require.NotEmpty(t, ids)
	for _, id := range ids {
		require.Less(t, int(id), b.VocabSize())
	}

	run := func() ([]int32, string) {
		ch, err := b.Generate(context.Background(), generate.Request{Prompt: ids, MaxTokens: 12})
		require.NoError(t, err)
		var toks []int32
		var text string
		var last generate.Event
		for ev := range ch {
			toks = append(toks, ev.Tokens...)
			text += ev.Text
			last = ev
		}
		require.True(t, last.Done)
		require.NoError(t, last.Err)
		assert.Contains(t, []string{"length", "stop"}, last.FinishReason)
		assert.Equal(t, len(ids), last.PromptTokens)
		return toks, text
	}
	t1, s1 := run()
	t2, s2 := run()
	require.NotEmpty(t, t1)
	assert.Equal(t, t1, t2, "greedy is deterministic")
	assert.Equal(t, s1, s2)
	require.Eventually(t, func() bool { return b.Stats().KVCacheUsage == 0 }, 5*time.Second, time.Millisecond,
		"the finished sequences gave their pages back")

	_, err = b.Generate(context.Background(), generate.Request{Prompt: nil, MaxTokens: 4})
	assert.ErrorIs(t, err, errs.ErrArgument, "an empty prompt")
	require.NoError(t, b.Close())
	_, err = b.Generate(context.Background(), generate.Request{Prompt: ids, MaxTokens: 4})
	assert.ErrorIs(t, err, errs.ErrClosed, "after Close")
}

// TestGGUFBackendOnCPU serves the same model from one GGUF file: the
// tokenizer and chat template come from its metadata, and greedy text
// matches the folder's token for token (F32 weights).
func TestGGUFBackendOnCPU(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	require.NoError(t, mkmodel.WriteGGUF(path, mkmodel.Tiny(), candle.GGMLF32, nil))
	require.NoError(t, mkmodel.Write(dir, mkmodel.Tiny(), nil))
	c, err := parseFlags([]string{"-model", path}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "tiny", c.modelRef)
	assert.Equal(t, 1, c.weightFiles)
	greedy := func(model string) []int32 {
		b, err := openBackend(LoadOptions{Dir: model, Device: "cpu", DType: "auto", MaxBatch: 2, MaxQueue: 2})
		require.NoError(t, err)
		defer b.Close()
		text, err := b.ApplyChatTemplate([]tokenizer.Message{{Role: "user", Content: "Hello, GPU!"}}, true)
		require.NoError(t, err)
		ids, err := b.Encode(text, false)
		require.NoError(t, err)
		ch, err := b.Generate(context.Background(), generate.Request{Prompt: ids, MaxTokens: 8})
		require.NoError(t, err)
		var toks []int32
		for ev := range ch {
			require.NoError(t, ev.Err)
			toks = append(toks, ev.Tokens...)
		}
		return append(ids, toks...)
	}
	assert.Equal(t, greedy(dir), greedy(path))
	_, err = parseFlags([]string{"-model", filepath.Join(dir, "config.json")}, io.Discard)
	assert.ErrorContains(t, err, "not a .gguf")

	// A quantized file runs in f32 on the CPU, and says what its weights
	// are (the tiny model's rows of 128 are too short for Q4_K's blocks of
	// 256: mkmodel writes them in Q8_0).
	q := filepath.Join(dir, "tiny-q4_k.gguf")
	require.NoError(t, mkmodel.WriteGGUF(q, mkmodel.Tiny(), candle.GGMLQ4_K, nil))
	b, err := openBackend(LoadOptions{Dir: q, Device: "cpu", DType: "auto"})
	require.NoError(t, err)
	defer b.Close()
	assert.Equal(t, "f32", b.Info().DType)
	assert.Equal(t, "Q8_0", b.Info().Weights)
}

// TestBackendMemoryOptions: -max-model-len and -kv-cache-memory reach the
// model: the context and the KV cache they ask for.
func TestBackendMemoryOptions(t *testing.T) {
	dir := t.TempDir()
	spec := mkmodel.Tiny() // 4 layers × 2 KV heads × 32 × 2 × 4 bytes: 2 KiB a token in F32
	require.NoError(t, mkmodel.Write(dir, spec, nil))
	b, err := openBackend(LoadOptions{Dir: dir, Device: "cpu", DType: "f32", MaxModelLen: 256})
	require.NoError(t, err)
	assert.Equal(t, 256, b.ContextLength())
	assert.Equal(t, 4*256, b.Info().CacheTokens, "four contexts of -max-model-len on the CPU")
	require.NoError(t, b.Close())
	b, err = openBackend(LoadOptions{Dir: dir, Device: "cpu", DType: "f32", CacheBytes: 1 << 20})
	require.NoError(t, err)
	assert.Equal(t, 512, b.Info().CacheTokens, "1 MiB of 2 KiB tokens")
	assert.Equal(t, 512, b.ContextLength(), "the cache bounds the context")
	require.NoError(t, b.Close())
}

// TestTensorParallelBackendOnCPU: -tensor-parallel 2 and 4 on the CPU
// serve the model split over CPU ranks, greedy text token for token as
// on one device, and say how many devices.
func TestTensorParallelBackendOnCPU(t *testing.T) { testTensorParallelBackend(t, "cpu", []int{2, 4}) }

// TestGPUTensorParallelBackend is the same over the first two GPUs (and
// four where the machine has them).
func TestGPUTensorParallelBackend(t *testing.T) {
	n, err := hip.DeviceCount()
	testenv.Need(t, 2, "a GPU", err)
	if n < 2 {
		t.Skipf("needs 2 GPUs; the machine has %d", n)
	}
	ranks := []int{2}
	if n >= 4 {
		ranks = append(ranks, 4)
	}
	testTensorParallelBackend(t, "hip:0", ranks)
}

func testTensorParallelBackend(t *testing.T, device string, ranks []int) {
	dir := t.TempDir()
	require.NoError(t, mkmodel.Write(dir, mkmodel.Tiny(), nil))
	// A prompt of several cache pages that repeats itself: the second
	// run of it reads the first's pages from the prefix cache, and both
	// draft tokens from it (speculative decoding), whatever the ranks.
	prompt := strings.Repeat("Hello, GPUs! Hello, devices. ", 12)
	greedy := func(n int) ([]int32, BackendInfo) {
		b, err := openBackend(LoadOptions{Dir: dir, Device: device, TensorParallel: n, DType: "f32", MaxBatch: 2, MaxQueue: 2, SpeculativeTokens: 4})
		require.NoError(t, err)
		defer func() { assert.NoError(t, b.Close()) }()
		ids, err := b.Encode(prompt, true)
		require.NoError(t, err)
		var runs [2][]int32
		for i := range runs {
			ch, err := b.Generate(context.Background(), generate.Request{Prompt: ids, MaxTokens: 24})
			require.NoError(t, err)
			for ev := range ch {
				require.NoError(t, ev.Err)
				runs[i] = append(runs[i], ev.Tokens...)
				if ev.Done && i == 1 {
					assert.Positive(t, ev.CachedTokens, "%d devices: the second run reads the prompt's pages from the prefix cache", n)
				}
			}
		}
		assert.Equal(t, runs[0], runs[1], "%d devices: cached or not, the same tokens", n)
		drafted, _ := b.(*modelBackend).engine.SpeculativeStats()
		assert.Positive(t, drafted, "%d devices: the repeated prompt's tokens drafted", n)
		assert.Positive(t, b.Stats().DeviceMemoryInUse)
		return runs[0], b.Info()
	}
	want, info := greedy(1)
	require.NotEmpty(t, want)
	assert.Equal(t, 1, info.Devices)
	for _, n := range ranks {
		got, info := greedy(n)
		assert.Equal(t, want, got, "greedy at %d devices", n)
		assert.Equal(t, n, info.Devices)
		if device == "cpu" {
			assert.Equal(t, "cpu/rank0,cpu/rank1", strings.Join(strings.Split(info.Device, ",")[:2], ","))
		}
	}
	_, err := openBackend(LoadOptions{Dir: dir, Device: device, TensorParallel: 3, DType: "f32"})
	assert.ErrorContains(t, err, "4 attention heads over 3 devices")
}

// brokenModel is a split model whose rank has failed: Forward fails, and
// Err says why once it has broken.
type brokenModel struct {
	servedModel
	err    error
	broken bool
}

func (m *brokenModel) Forward([]uint64, [][]int32) (*candle.Tensor, error) { return nil, m.err }

func (m *brokenModel) Err() error {
	if m.broken {
		return m.err
	}
	return nil
}

// TestWatchedModel: a Forward that fails because the model broke is
// reported once; one that fails otherwise (a refused batch) is not.
func TestWatchedModel(t *testing.T) {
	m := &brokenModel{err: errs.ErrArgument}
	w := &watchedModel{servedModel: m}
	var heard []error
	(&modelBackend{watched: w}).OnBroken(func(err error) { heard = append(heard, err) })
	_, err := w.Forward([]uint64{1}, [][]int32{{1}})
	assert.ErrorIs(t, err, errs.ErrArgument)
	assert.Empty(t, heard, "a refused batch breaks nothing")
	m.err, m.broken = errs.ErrClosed, true
	for range 2 {
		_, err = w.Forward([]uint64{1}, [][]int32{{1}})
		assert.ErrorIs(t, err, errs.ErrClosed)
	}
	assert.Equal(t, []error{errs.ErrClosed}, heard, "reported once")
}

// TestTensorParallelBackendBreaks: when the devices' group fails under a
// split model (aborted here, as a failing rank aborts it), the request
// under way ends with an error, the worker hears that the model broke,
// and nothing hangs.
func TestTensorParallelBackendBreaks(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, mkmodel.Write(dir, mkmodel.Tiny(), nil))
	b, err := openBackend(LoadOptions{Dir: dir, Device: "cpu", TensorParallel: 2, DType: "f32", MaxBatch: 2, MaxQueue: 2})
	require.NoError(t, err)
	defer b.Close()
	broke := make(chan error, 1)
	b.(*modelBackend).OnBroken(func(err error) { broke <- err })
	require.NoError(t, b.(*modelBackend).group.Abort())
	ids, err := b.Encode("Hello", true)
	require.NoError(t, err)
	ch, err := b.Generate(context.Background(), generate.Request{Prompt: ids, MaxTokens: 4})
	require.NoError(t, err)
	var last generate.Event
	for ev := range ch {
		last = ev
	}
	assert.True(t, last.Done)
	assert.Error(t, last.Err)
	select {
	case err := <-broke:
		assert.ErrorIs(t, err, errs.ErrClosed)
		assert.ErrorContains(t, err, "a rank failed, and the group was aborted")
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not hear that the model broke")
	}
}
