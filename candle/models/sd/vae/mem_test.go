package vae

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

// randomVAE writes a VAE of SD's block structure with channels ch and
// random weights, and loads it onto dev in dt.
func randomVAE(t *testing.T, dev candle.Device, dt candle.DType, ch []int, groups int) *Model {
	t.Helper()
	dir := t.TempDir()
	spec := mkmodel.TinySD()
	spec.VAEChannels, spec.VAELayers, spec.VAEGroup = ch, 2, groups
	require.NoError(t, mkmodel.WriteSD(dir, spec, nil))
	cfg, err := LoadConfig(filepath.Join(dir, "vae", "config.json"))
	require.NoError(t, err)
	w, err := safetensors.Open(filepath.Join(dir, "vae", "diffusion_pytorch_model.safetensors"))
	require.NoError(t, err)
	defer w.Close()
	m, err := New(w, cfg, dev, dt)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

// peakOf runs f twice (the first run makes what the weights cache) and
// returns the peak bytes the second added to what was in use before it.
func peakOf(t *testing.T, dev candle.Device, f func() (*candle.Tensor, error)) int64 {
	t.Helper()
	run := func() error {
		y, err := f()
		if err == nil {
			y.Close()
		}
		return err
	}
	require.NoError(t, run())
	peak, err := candle.PeakDuring(dev, run)
	require.NoError(t, err)
	return peak
}

// decodePeak decodes zero latents of (batch, 4, size, size) and returns
// the peak bytes the decode added to what was in use before it, and the
// bytes of the largest activation (the last up block's upsampled input
// at the image's size).
func decodePeak(t *testing.T, dev candle.Device, m *Model, dt candle.DType, batch, size int) (peak, largest int64) {
	t.Helper()
	z, err := candle.Zeros(dev, dt, batch, m.cfg.LatentChannels, size, size)
	require.NoError(t, err)
	defer z.Close()
	peak = peakOf(t, dev, func() (*candle.Tensor, error) { return m.Decode(z) })
	f := m.cfg.Factor()
	ch := m.cfg.BlockOutChannels
	top := max(ch[0], ch[min(1, len(ch)-1)])
	return peak, int64(batch * top * size * f * size * f * dt.Size())
}

func encodePeak(t *testing.T, dev candle.Device, m *Model, dt candle.DType, batch, size int) int64 {
	t.Helper()
	x, err := candle.Zeros(dev, dt, batch, m.cfg.InChannels, size, size)
	require.NoError(t, err)
	defer x.Close()
	return peakOf(t, dev, func() (*candle.Tensor, error) { return m.Encode(x) })
}

// TestDecodePeak bounds the memory of a decode and an encode with SD's
// VAE structure (four blocks of two resnets, the mid block's attention)
// at an eighth of its channels and a small size: at their peak the
// activations are a few of the largest at once (on the CPU, the decode
// 2.5× the largest and the encode 3.6×), not every block's intermediates
// (6.0× and 8.0× when the blocks keep theirs to their end and the
// attention takes all its scores at once).
func TestDecodePeak(t *testing.T) {
	if testenv.Race || testing.Short() {
		t.Skip("CPU convolutions for seconds, ten times that under -race or -short: it runs in full tier-1 runs")
	}
	dev := candle.CPU()
	m := randomVAE(t, dev, candle.F32, []int{16, 32, 64, 64}, 8)
	peak, largest := decodePeak(t, dev, m, candle.F32, 1, 4)
	t.Logf("decode of 1×4×4×4 latents: peak %d bytes above the weights, largest activation %d (%.2f×)", peak, largest, float64(peak)/float64(largest))
	assert.LessOrEqual(t, peak, 3*largest, "the decode's peak, above the weights")
	enc := encodePeak(t, dev, m, candle.F32, 1, 16)
	in := int64(16 * 16 * 16 * candle.F32.Size()) // conv_in's output, the encoder's largest
	t.Logf("encode of 1×3×16×16 images: peak %d bytes above the weights (%.2f× the largest activation)", enc, float64(enc)/float64(in))
	assert.LessOrEqual(t, enc, 4*in, "the encode's peak, above the weights")
}

// TestGPUDecodePeak is TestDecodePeak with SD 1.5's VAE channels (128,
// 256, 512, 512) decoding 512×512 images in F16 on the GPU, where the
// attention's scores (4096 positions) would be 64 MiB at once: 4.59× on an
// H200 (cuDNN 9), the convolutions' workspaces from the same pool counted.
func TestGPUDecodePeak(t *testing.T) {
	dev, err := candle.HIP(0)
	testenv.Need(t, 2, "a GPU", err)
	m := randomVAE(t, dev, candle.F16, []int{128, 256, 512, 512}, 32)
	peak, largest := decodePeak(t, dev, m, candle.F16, 1, 64)
	t.Logf("decode of 1×4×64×64 latents: peak %d bytes above the weights, largest activation %d (%.2f×)", peak, largest, float64(peak)/float64(largest))
	assert.LessOrEqual(t, peak, 5*largest, "the decode's peak, above the weights")
}
