package sd

import (
	"context"
	"image"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/internal/testenv"
)

// TestApproxPreview checks the cheap preview against ComfyUI's latent
// colour factors (comfy/latent_formats.py, SD15 and SDXL), written out
// here in its layout: for each output colour, the weights of the 4
// channels.
func TestApproxPreview(t *testing.T) {
	byColour := map[bool][3][5]float64{ // R, G, B: 4 channel weights, then the bias
		false: {{0.3512, 0.3250, -0.2829, -0.2120, 0}, {0.2297, 0.4974, 0.1762, -0.2616, 0}, {0.3227, 0.2350, 0.2721, -0.7177, 0}},
		true:  {{0.3651, -0.2533, 0.1076, -0.3165, 0.1084}, {0.4232, -0.0042, 0.1111, -0.2492, -0.0175}, {0.4341, 0.1068, -0.0362, -0.2188, -0.0011}},
	}
	const b, h, w = 2, 3, 5
	v := make([]float32, b*4*h*w)
	for i := range v {
		v[i] = float32(math.Sin(float64(i)*0.7) * 2.5)
	}
	lat, err := candle.FromSlice(candle.CPU(), v, b, 4, h, w)
	require.NoError(t, err)
	defer lat.Close()
	for _, xl := range []bool{false, true} {
		p := &Pipeline{xl: xl}
		imgs, err := p.preview(lat, Request{Preview: PreviewApprox})
		require.NoError(t, err)
		require.Len(t, imgs, b)
		for n, img := range imgs {
			require.Equal(t, image.Rect(0, 0, w, h), img.Bounds())
			for y := range h {
				for x := range w {
					got := img.RGBAAt(x, y)
					for k, ch := range []uint8{got.R, got.G, got.B} {
						f := byColour[xl][k]
						c := f[4]
						for i := range 4 {
							c += float64(v[((n*4+i)*h+y)*w+x]) * f[i]
						}
						want := math.Round(min(max((c+1)/2, 0), 1) * 255)
						assert.InDelta(t, want, float64(ch), 1, "xl %v image %d (%d, %d) colour %d", xl, n, x, y, k)
					}
					assert.Equal(t, uint8(255), got.A)
				}
			}
		}
	}
}

// TestPreviews runs the pipeline with each preview: the cheap one at the
// latents' size, the full one the image so far, at the last step the
// final image.
func TestPreviews(t *testing.T) {
	p := openTiny(t, candle.CPU(), candle.F32)
	r := Request{Prompt: "a photo of a cat", Width: 16, Height: 8, Steps: 3, Seed: 5, Batch: 2}
	final, err := p.Generate(context.Background(), r)
	require.NoError(t, err)
	for _, c := range []struct {
		kind Preview
		size image.Rectangle
	}{{PreviewNone, image.Rectangle{}}, {PreviewApprox, image.Rect(0, 0, 8, 4)}, {PreviewFull, image.Rect(0, 0, 16, 8)}} {
		var got []Progress
		r.Preview, r.Progress = c.kind, func(pr Progress) { got = append(got, pr) }
		imgs, err := p.Generate(context.Background(), r)
		require.NoError(t, err)
		require.Len(t, got, 3)
		for i, pr := range got {
			assert.Equal(t, Progress{Step: i + 1, Steps: 3}, Progress{Step: pr.Step, Steps: pr.Steps})
			if c.kind == PreviewNone {
				assert.Nil(t, pr.Preview)
				continue
			}
			require.Len(t, pr.Preview, 2)
			assert.Equal(t, c.size, pr.Preview[0].Bounds())
		}
		assert.Equal(t, final[0].Pix, imgs[0].Pix, "previews change nothing")
		if c.kind == PreviewFull {
			for i := range final {
				assert.Equal(t, final[i].Pix, got[2].Preview[i].Pix, "the last full preview is the image")
			}
			assert.NotEqual(t, final[0].Pix, got[0].Preview[0].Pix, "the first is not")
		}
	}
}

// TestTileVAE generates an image larger than the VAE's tile (16 pixels
// for tiny-sd) with and without tiling: same size, close but not the
// same pixels where the tiles meet.
func TestTileVAE(t *testing.T) {
	if testenv.Race || testing.Short() {
		t.Skip("ten seconds of CPU decodes, ten times that under -race or -short: it runs in full tier-1 runs")
	}
	p := openTiny(t, candle.CPU(), candle.F32)
	r := Request{Prompt: "a cat", Width: 40, Height: 28, Steps: 2, Seed: 3}
	whole, err := p.Generate(context.Background(), r)
	require.NoError(t, err)
	r.TileVAE = true
	tiled, err := p.Generate(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, image.Rect(0, 0, 40, 28), tiled[0].Bounds())
	assert.NotEqual(t, whole[0].Pix, tiled[0].Pix)
	// img2img and inpainting encode the init image in tiles too.
	r.Init, r.Strength = tiled[0], 0.5
	again, err := p.Generate(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, image.Rect(0, 0, 40, 28), again[0].Bounds())
	r.Mask = image.NewGray(image.Rect(0, 0, 40, 28))
	kept, err := p.Generate(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, image.Rect(0, 0, 40, 28), kept[0].Bounds())
	r.Init, r.Strength, r.Mask = nil, 0, nil
	// Within one tile the two decode alike.
	r.Width, r.Height = 16, 16
	a, err := p.Generate(context.Background(), r)
	require.NoError(t, err)
	r.TileVAE = false
	b, err := p.Generate(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, b[0].Pix, a[0].Pix)
	assert.False(t, p.tightMemory(nil), "the CPU never tiles by itself")
	assert.Equal(t, int64(4*2*(4*8*28*40+14*20*14*20)), p.decodeBytes(candle.Shape{2, 4, 14, 20}))
}
