package sd

import (
	"fmt"
	"image"
	"image/color"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/models/sd/scheduler"
	"github.com/rocm-go/rocm/errs"
)

// checkMask checks a request's init image and mask against each other,
// the request's size and the UNet.
func checkMask(r Request, inpaintUNet bool) error {
	bad := func(kind error, field, format string, args ...any) error {
		return &errs.Error{Pkg: string(pkg), Op: "Generate", Kind: kind, Field: field, Detail: fmt.Sprintf(format, args...)}
	}
	if r.Init != nil {
		if b := r.Init.Bounds(); b.Dx() != r.Width || b.Dy() != r.Height {
			return bad(errs.ErrShape, "Init", "the init image is %d×%d and the request %d×%d", b.Dx(), b.Dy(), r.Width, r.Height)
		}
	}
	switch {
	case r.Mask != nil && r.Init == nil:
		return bad(errs.ErrArgument, "Mask", "a mask needs the image it masks (Init)")
	case r.Mask == nil && inpaintUNet:
		return bad(errs.ErrArgument, "Mask", "the UNet is an inpainting UNet (9 input channels): it needs Init and Mask")
	case r.Mask != nil:
		if b := r.Mask.Bounds(); b.Dx() != r.Width || b.Dy() != r.Height {
			return bad(errs.ErrShape, "Mask", "the mask is %d×%d and the request %d×%d", b.Dx(), b.Dy(), r.Width, r.Height)
		}
	}
	return nil
}

// maskPixels is a mask binarized as diffusers' mask processor does it:
// the grey level of PIL's L conversion, (19595·R + 38470·G + 7471·B +
// 2¹⁵) >> 16 of the 8-bit colours, over 255, is 1 at 0.5 and over, else
// 0. It returns the height·width values in rows.
func maskPixels(m image.Image) []float32 {
	b := m.Bounds()
	v := make([]float32, b.Dx()*b.Dy())
	for y := range b.Dy() {
		for x := range b.Dx() {
			c := color.NRGBAModel.Convert(m.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
			l := (19595*uint32(c.R) + 38470*uint32(c.G) + 7471*uint32(c.B) + 1<<15) >> 16
			if l >= 128 {
				v[y*b.Dx()+x] = 1
			}
		}
	}
	return v
}

// inputs is what a run takes from its init image and mask.
type inputs struct {
	image *candle.Tensor // the init image's latents, where the run needs them
	mask  *candle.Tensor // 4-channel inpainting: the mask at the latents' size, (batch, 1, h, w)
	cond  *candle.Tensor // 9-channel inpainting: cat(mask, masked image's latents), (batch, 5, h, w)
}

func (in *inputs) close() {
	for _, t := range []*candle.Tensor{in.image, in.mask, in.cond} {
		if t != nil {
			t.Close()
		}
	}
}

// prepare encodes a request's init image (where start asks for its
// latents, or a 4-channel UNet inpaints) and makes its mask's tensors:
// for a 9-channel UNet the mask at the latents' size and the latents of
// the init image where the mask keeps it (zero, mid-grey, where it
// repaints).
func (p *Pipeline) prepare(r Request, inpaintUNet, start bool) (*inputs, error) {
	in := &inputs{}
	if r.Init == nil {
		return in, nil
	}
	imgs := make([]image.Image, r.Batch)
	for i := range imgs {
		imgs[i] = r.Init
	}
	pixels, err := FromImages(imgs, p.dev, p.vaeDType)
	if err != nil {
		return nil, err
	}
	defer pixels.Close()
	if start || (r.Mask != nil && !inpaintUNet) {
		if in.image, err = p.latents(pixels, r); err != nil {
			return nil, err
		}
	}
	if r.Mask == nil {
		return in, nil
	}
	pm := maskPixels(r.Mask)
	f := p.vae.Config().Factor()
	h, w := r.Height/f, r.Width/f
	lm := make([]float32, 0, r.Batch*h*w)
	for range r.Batch {
		for y := range h {
			for x := range w {
				lm = append(lm, pm[y*f*r.Width+x*f])
			}
		}
	}
	ps := models.NewPass()
	defer ps.Close()
	mask := ps.Own(candle.FromSlice(p.dev, lm, r.Batch, 1, h, w))
	mask = ps.T(mask.ToDType(p.dtype))
	if !inpaintUNet {
		if ps.Err != nil {
			in.close()
			return nil, ps.Err
		}
		in.mask = ps.Keep(mask)
		return in, nil
	}
	keep := make([]float32, len(pm))
	for i, v := range pm {
		keep[i] = 1 - v
	}
	k := ps.Own(candle.FromSlice(p.dev, keep, 1, 1, r.Height, r.Width))
	masked := ps.T(ps.In(pixels).Mul(ps.T(k.ToDType(p.vaeDType))))
	if ps.Err != nil {
		in.close()
		return nil, ps.Err
	}
	ml, err := p.latents(masked, r)
	if err != nil {
		in.close()
		return nil, err
	}
	ml = ps.Own(ml, nil)
	in.cond = ps.Keep(ps.T(candle.Cat([]*candle.Tensor{mask, ml}, 1)))
	if ps.Err != nil {
		in.close()
		return nil, ps.Err
	}
	return in, nil
}

// latents is the VAE's latents of images in its dtype, in the pipeline's
// dtype, encoded in tiles where the request tiles the VAE.
func (p *Pipeline) latents(pixels *candle.Tensor, r Request) (*candle.Tensor, error) {
	encode := p.vae.Encode
	if r.TileVAE {
		encode = p.vae.EncodeTiled
	}
	enc, err := encode(pixels)
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	return enc.ToDType(p.dtype)
}

// blend puts the kept region of the init image's latents back into the
// latents x after a step, noised to the level of step next with the run's
// first noise z: (1−mask)·kept + mask·x, as diffusers' inpainting with a
// 4-channel UNet. It closes x.
func (in *inputs) blend(x, z *candle.Tensor, sch *scheduler.Schedule, next int) (*candle.Tensor, error) {
	p := models.NewPass()
	defer p.Close()
	x = p.Own(x, nil)
	a, b := sch.NoiseTo(next)
	kept := p.T(p.In(in.image).Affine(a, 0))
	if b != 0 {
		kept = p.T(kept.Add(p.T(p.In(z).Affine(b, 0))))
	}
	// kept + mask·(x − kept)
	out := p.T(kept.Add(p.T(p.In(in.mask).Mul(p.T(x.Sub(kept))))))
	if p.Err != nil {
		return nil, p.Err
	}
	return p.Keep(out), nil
}
