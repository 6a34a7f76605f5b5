package sd

import (
	"context"
	"image"
	"image/color"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/testenv"
)

// golden-inpaint.json (testdata/make.py): inpainting runs of
// tiny-sd-inpaint (a 9-channel UNet, strength 1) and of tiny-sd (4
// channels, strength 0.75) by the reference components in diffusers'
// inpainting loop with its image and mask processors, and the VAE's
// tiled decoding and encoding of larger latents and images.
type inpaintGolden struct {
	Prompt    string
	Guidance  float64
	Steps     int
	Pixels    [][][3]uint8
	Mask      [][][3]uint8
	Noise     [][][][]float64
	Image9    [][][][]float64
	Strength4 float64
	Image4    [][][][]float64
	Latents   [][][][]float64
	Tiled     [][][][]float64
	Images    [][][][]float64
	Encoded   [][][][]float64
}

func rgbImage(px [][][3]uint8) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, len(px[0]), len(px)))
	for y, row := range px {
		for x, c := range row {
			img.SetNRGBA(x, y, color.NRGBA{c[0], c[1], c[2], 255})
		}
	}
	return img
}

func checkInpaint(t *testing.T, dev candle.Device, dt candle.DType, tol float64) {
	g := readJSON[inpaintGolden](t, "golden-inpaint.json")
	r := Request{Prompt: g.Prompt, Width: 16, Height: 12, Steps: g.Steps, Guidance: g.Guidance,
		Noise: f32s(flat4(g.Noise)), Init: rgbImage(g.Pixels), Mask: rgbImage(g.Mask)}
	for _, c := range []struct {
		folder   string
		strength float64
		want     [][][][]float64
	}{{"tiny-sd-inpaint", 0, g.Image9}, {"tiny-sd", g.Strength4, g.Image4}} {
		p := openFolder(t, c.folder, dev, dt)
		r.Strength = c.strength
		x, err := p.generate(context.Background(), group{r})
		require.NoError(t, err, c.folder)
		worst := relErr(t, x, c.want)
		x.Close()
		t.Logf("%s %s: inpainting against diffusers' loop, max relative error %.2g", c.folder, dt, worst)
		assert.LessOrEqual(t, worst, tol, c.folder)
	}
	p := openTiny(t, dev, dt)
	for _, c := range []struct {
		name      string
		in, want  [][][][]float64
		transform func(*candle.Tensor) (*candle.Tensor, error)
	}{{"decode", g.Latents, g.Tiled, p.vae.DecodeTiled}, {"encode", g.Images, g.Encoded, p.vae.EncodeTiled}} {
		shape := []int{len(c.in), len(c.in[0]), len(c.in[0][0]), len(c.in[0][0][0])}
		x, err := candle.FromSlice(dev, f32s(flat4(c.in)), shape...)
		require.NoError(t, err)
		defer x.Close()
		xd, err := x.ToDType(p.vaeDType)
		require.NoError(t, err)
		defer xd.Close()
		y, err := c.transform(xd)
		require.NoError(t, err)
		defer y.Close()
		worst := relErr(t, y, c.want)
		t.Logf("%s: tiled %s of %v against diffusers' tiling, max relative error %.2g", p.vaeDType, c.name, shape, worst)
		assert.LessOrEqual(t, worst, tol, c.name)
	}
}

// TestInpaintAgainstReference runs both kinds of inpainting and the tiled
// decoding and encoding on the CPU and compares them with diffusers'.
func TestInpaintAgainstReference(t *testing.T) { checkInpaint(t, candle.CPU(), candle.F32, 1e-5) }

func TestGPUInpaintAgainstReference(t *testing.T) {
	dev, err := candle.HIP(0)
	testenv.Need(t, 2, "a GPU", err)
	checkInpaint(t, dev, candle.F32, 1e-4)
}

func TestMaskPixels(t *testing.T) {
	m := image.NewNRGBA(image.Rect(0, 0, 5, 1))
	for x, c := range []color.NRGBA{
		{127, 127, 127, 255}, // grey 127: keep
		{128, 128, 128, 255}, // grey 128 (≥ 0.5): repaint
		{255, 0, 0, 255},     // L 76: keep
		{0, 255, 0, 255},     // L 150: repaint
		{255, 255, 255, 0},   // transparent white: the alpha does not count
	} {
		m.SetNRGBA(x, 0, c)
	}
	assert.Equal(t, []float32{0, 1, 0, 1, 1}, maskPixels(m))
	g := image.NewGray(image.Rect(2, 3, 4, 4))
	g.SetGray(3, 3, color.Gray{200})
	assert.Equal(t, []float32{0, 1}, maskPixels(g), "a grey image from its bounds' corner")
}

func TestInpaintErrors(t *testing.T) {
	p := openTiny(t, candle.CPU(), candle.F32)
	nine := openFolder(t, "tiny-sd-inpaint", candle.CPU(), candle.F32)
	img := image.NewNRGBA(image.Rect(0, 0, 16, 8))
	small := image.NewNRGBA(image.Rect(0, 0, 8, 8))
	for _, c := range []struct {
		p    *Pipeline
		r    Request
		kind error
		text string
	}{
		{p, Request{Width: 16, Height: 8, Mask: img}, errs.ErrArgument, "a mask needs the image it masks (Init)"},
		{p, Request{Width: 16, Height: 8, Init: img, Mask: small}, errs.ErrShape, "the mask is 8×8 and the request 16×8"},
		{p, Request{Width: 16, Height: 8, Init: img, Mask: img, Strength: 1.5}, errs.ErrArgument, "strength 1.5"},
		{nine, Request{Width: 16, Height: 8}, errs.ErrArgument, "inpainting UNet (9 input channels): it needs Init and Mask"},
		{nine, Request{Width: 16, Height: 8, Init: img, Strength: 0.5}, errs.ErrArgument, "needs Init and Mask"},
	} {
		c.r.Steps = 2
		_, err := c.p.Generate(context.Background(), c.r)
		require.ErrorIs(t, err, c.kind, "%+v", c.r)
		assert.ErrorContains(t, err, c.text)
	}
	// The 9-channel UNet at strength 0.5, and a batch.
	imgs, err := nine.Generate(context.Background(), Request{Prompt: "a cat", Width: 16, Height: 8, Steps: 4, Init: img, Mask: img, Strength: 0.5, Batch: 2})
	require.NoError(t, err)
	assert.Len(t, imgs, 2)
	// Where the mask keeps everything, a 4-channel run gives the init
	// image back as the VAE reproduces it.
	black := image.NewGray(image.Rect(0, 0, 16, 8))
	kept, err := p.Generate(context.Background(), Request{Prompt: "a cat", Width: 16, Height: 8, Steps: 3, Init: img, Mask: black, Seed: 1})
	require.NoError(t, err)
	again, err := p.Generate(context.Background(), Request{Prompt: "a dog", Width: 16, Height: 8, Steps: 3, Init: img, Mask: black, Seed: 2})
	require.NoError(t, err)
	assert.Equal(t, kept[0].Pix, again[0].Pix, "a black mask keeps the image whatever the prompt and noise")
}
