package unet

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/internal/mkmodel"
	"github.com/rocm-go/rocm/internal/testenv"
)

// forwardPeak writes a UNet of SD 1.x's block structure (four blocks of
// two resnets and transformers, cross-attention but in the last down and
// first up block) with channels ch and random weights, runs it on zero
// latents (batch, 4, size, size), and returns the peak bytes its second
// forward added to what was in use before it, and the bytes of the
// largest activation: the feed-forward's (batch, size², 8·ch[0]).
func forwardPeak(t *testing.T, dev candle.Device, dt candle.DType, ch []int, heads, groups, batch, size int) (peak, largest int64) {
	t.Helper()
	dir := t.TempDir()
	spec := mkmodel.TinySD()
	spec.UNetChannels, spec.UNetLayers, spec.UNetHeads, spec.UNetGroups, spec.DType = ch, 2, heads, groups, dt
	require.NoError(t, mkmodel.WriteSD(dir, spec, nil))
	cfg, err := LoadConfig(filepath.Join(dir, "unet", "config.json"))
	require.NoError(t, err)
	w, err := safetensors.Open(filepath.Join(dir, "unet", "diffusion_pytorch_model.safetensors"))
	require.NoError(t, err)
	defer w.Close()
	m, err := New(w, cfg, dev, dt)
	require.NoError(t, err)
	defer m.Close()
	x, err := candle.Zeros(dev, dt, batch, 4, size, size)
	require.NoError(t, err)
	defer x.Close()
	text, err := candle.Zeros(dev, dt, batch, 77, cfg.CrossAttentionDim)
	require.NoError(t, err)
	defer text.Close()
	forward := func() error {
		y, err := m.Forward(x, 500, Cond{Text: text})
		if err == nil {
			y.Close()
		}
		return err
	}
	require.NoError(t, forward()) // the first forward makes what the weights cache
	peak, err = candle.PeakDuring(dev, forward)
	require.NoError(t, err)
	return peak, int64(batch * size * size * 8 * ch[0] * dt.Size())
}

// TestForwardPeak bounds the memory of a UNet forward with SD 1.x's
// structure at a twentieth of its channels: at their peak the activations
// are the skips and a few of the largest at once, not every step's
// intermediates: 2.64× the largest on the CPU, against 7.2–7.4× when the
// transformer layers and their attention keep each step's tensors to the
// end of their block, and 7.8–8.3× when the resnets, the upsamplers and
// the skips do too.
func TestForwardPeak(t *testing.T) {
	if testenv.Race || testing.Short() {
		t.Skip("CPU convolutions for seconds, ten times that under -race or -short: it runs in full tier-1 runs")
	}
	peak, largest := forwardPeak(t, candle.CPU(), candle.F32, []int{16, 32, 64, 64}, 2, 8, 2, 16)
	t.Logf("forward of 2×4×16×16 latents: peak %d bytes above the weights, largest activation %d (%.2f×)", peak, largest, float64(peak)/float64(largest))
	assert.LessOrEqual(t, peak, 3*largest, "the forward's peak, above the weights")
}

// TestGPUForwardPeak is TestForwardPeak with SD 1.5's channels (320,
// 640, 1280, 1280) in F16 on the GPU, at 512² images with guidance
// (batch 2, 64×64 latents), its convolutions' workspaces from the same
// pool counted: 2.74× on an H200 (cuDNN 9), 4.80× before the transformer
// layers dropped their steps' tensors.
func TestGPUForwardPeak(t *testing.T) {
	dev, err := candle.HIP(0)
	testenv.Need(t, 2, "a GPU", err)
	peak, largest := forwardPeak(t, dev, candle.F16, []int{320, 640, 1280, 1280}, 8, 32, 2, 64)
	t.Logf("forward of 2×4×64×64 latents: peak %d bytes above the weights, largest activation %d (%.2f×)", peak, largest, float64(peak)/float64(largest))
	assert.LessOrEqual(t, peak, 7*largest/2, "the forward's peak, above the weights")
}
