package llama

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
	"github.com/rocm-go/rocm/rccl"
)

// decoder is what decodeRun steps: a model on one device or split over
// several.
type decoder interface {
	forwarder
	Device() candle.Device
}

// Tier 2: tensor parallelism over GPUs (RCCL, NCCL on NVIDIA) against the
// model on one GPU, same weights.

// hipGroup is a group over the first n GPUs, closed when the test ends;
// the test skips, saying why, on a machine with fewer.
func hipGroup(t *testing.T, n int) *candle.Group {
	t.Helper()
	// NVLink multicast stays off: on shared machines it can take GPUs out
	// of service. NCCL reads it at its first communicator.
	if _, ok := os.LookupEnv("NCCL_NVLS_ENABLE"); !ok {
		t.Setenv("NCCL_NVLS_ENABLE", "0")
	}
	count, err := hip.DeviceCount()
	testenv.Need(t, 2, "a GPU", err)
	if count < n {
		t.Skipf("needs %d GPUs; the machine has %d", n, count)
	}
	testenv.Need(t, 2, "RCCL (NCCL on NVIDIA)", rccl.LoadError())
	devs := make([]*candle.HIPDevice, n)
	for i := range devs {
		devs[i], err = candle.HIP(i)
		require.NoError(t, err)
	}
	g, err := candle.NewHIPGroup(devs...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, g.Close()) })
	return g
}

// gpuRanks are the group sizes the machine runs: 2, and 4 where it has
// four GPUs.
func gpuRanks() []int {
	if n, err := hip.DeviceCount(); err == nil && n >= 4 {
		return []int{2, 4}
	}
	return []int{2}
}

// TestGPUTensorParallel splits the tiny models over 2 (and 4) GPUs and
// compares them with one GPU: every position's logits (F32 within 1e-4,
// BF16 within its noise), batched decode steps replayed as graphs on
// every GPU (one graph per batch size per GPU), and greedy generations.
func TestGPUTensorParallel(t *testing.T) {
	dev := hipDevice(t)
	for _, name := range []string{"llama gqa llama3 tied", "mistral window 4 head dim 32"} {
		s := tinySpecs[name]
		dir := writeModel(t, s)
		for _, n := range gpuRanks() {
			t.Run(fmt.Sprintf("%s at %d GPUs", name, n), func(t *testing.T) {
				g := hipGroup(t, n)
				opts := Options{CacheTokens: 2048, PageSize: 8}
				for _, dt := range []candle.DType{candle.F32, candle.BF16} {
					one := load(t, dir, dev, dt, opts)
					m := loadTP(t, dir, g, dt, opts)
					rng := rand.New(rand.NewPCG(s.Seed, 2))
					e := logitsErr(t, one, m, randomTokens(rng, 29, s.Vocab))
					t.Logf("%s: logits against one GPU %.3g", dt, e)
					assert.LessOrEqual(t, e, gpuTolerance[dt], "%s logits", dt)
					if dt != candle.F32 {
						continue
					}
					for _, b := range []int{1, 3, 8} {
						lo, _ := decodeRun(t, one, b, 12, s.Vocab)
						lt, _ := decodeRun(t, m, b, 12, s.Vocab)
						for i := range lo {
							require.LessOrEqual(t, maxRelErr(lo[i], lt[i]), 1e-4, "batch %d, step %d", b, i)
						}
					}
					for r, rr := range m.Ranks() {
						assert.Equal(t, []int{1, 3, 8}, rr.DecodeGraphs(), "rank %d's graphs", r)
					}
					prompt := randomTokens(rng, 9, s.Vocab)
					assert.Equal(t, greedy(t, one, prompt, 16), greedy(t, m, prompt, 16))
				}
			})
		}
	}
}

// TestGPUTensorParallelGGUF: a Q8_0 GGUF file split over 2 GPUs, each
// loading its blocks, against one GPU.
func TestGPUTensorParallelGGUF(t *testing.T) {
	dev := hipDevice(t)
	g := hipGroup(t, 2)
	path := writeGGUF(t, ggufSpec(), candle.GGMLQ8_0)
	one := loadGGUF(t, path, dev, candle.F32, Options{CacheTokens: 1024})
	m := loadTP(t, path, g, candle.F32, Options{CacheTokens: 1024})
	rng := rand.New(rand.NewPCG(5, 6))
	e := logitsErr(t, one, m, randomTokens(rng, 17, one.VocabSize()))
	t.Logf("Q8_0 logits against one GPU %.3g", e)
	assert.LessOrEqual(t, e, 1e-4)
	prompt := randomTokens(rng, 6, one.VocabSize())
	assert.Equal(t, greedy(t, one, prompt, 12), greedy(t, m, prompt, 12))
}
