package sd

import (
	"fmt"
	"image"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/errs"
)

// Progress is what Request.Progress hears after each step.
type Progress struct {
	// Step steps of Steps are done.
	Step, Steps int
	// Preview is one image per image of the batch where Request.Preview
	// asks for them, else nil: the step's denoised estimate (at the last
	// step, the final latents), approximated or decoded.
	Preview []*image.RGBA
}

// Preview is the preview images a run gives its Progress callback.
type Preview int

const (
	// PreviewNone gives none.
	PreviewNone Preview = iota
	// PreviewApprox maps each latent pixel to a colour by a linear map of
	// its 4 channels, made on the host at the latents' resolution (an
	// eighth of the image's): the factors AUTOMATIC1111's and ComfyUI's
	// cheap previews use for SD 1.x/2.x and XL latents. It costs a copy of
	// the latents to the host.
	PreviewApprox
	// PreviewFull decodes with the VAE: the image the run would give if
	// it stopped there, at the cost of a decode each step.
	PreviewFull
)

// String is the preview's name: none, approx or full.
func (v Preview) String() string {
	switch v {
	case PreviewNone:
		return "none"
	case PreviewApprox:
		return "approx"
	case PreviewFull:
		return "full"
	}
	return fmt.Sprintf("Preview(%d)", int(v))
}

// rgbFactors are the colours of SD 1.x/2.x's latent channels (rows: the
// channels; columns: R, G, B), rgbFactorsXL and rgbBiasXL XL's: their
// sum over the channels is about the image's colour in [-1, 1].
var (
	rgbFactors = [4][3]float64{
		{0.3512, 0.2297, 0.3227},
		{0.3250, 0.4974, 0.2350},
		{-0.2829, 0.1762, 0.2721},
		{-0.2120, -0.2616, -0.7177},
	}
	rgbFactorsXL = [4][3]float64{
		{0.3651, 0.4232, 0.4341},
		{-0.2533, -0.0042, 0.1068},
		{0.1076, 0.1111, -0.0362},
		{-0.3165, -0.2492, -0.2188},
	}
	rgbBiasXL = [3]float64{0.1084, -0.0175, -0.0011}
)

// preview makes the preview images of latents (in the pipeline's dtype)
// that a request asks for.
func (p *Pipeline) preview(lat *candle.Tensor, r Request) ([]*image.RGBA, error) {
	if r.Preview == PreviewApprox {
		f, b := rgbFactors, [3]float64{}
		if p.xl {
			f, b = rgbFactorsXL, rgbBiasXL
		}
		return approxImages(lat, f, b)
	}
	x, err := p.decode(lat, r)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	return Images(x)
}

// approxImages maps latents (batch, 4, h, w) to h×w images by the
// colour factors f and bias (linearImages).
func approxImages(lat *candle.Tensor, f [4][3]float64, bias [3]float64) ([]*image.RGBA, error) {
	if s := lat.Shape(); len(s) != 4 || s[1] != 4 {
		return nil, pkg.Errorf("Generate", errs.ErrUnsupported, "latents of shape %v: the approximate preview takes 4 latent channels", s)
	}
	return linearImages(lat, f[:], bias)
}
