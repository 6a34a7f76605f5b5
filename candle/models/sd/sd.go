// Package sd is Stable Diffusion's pipeline (1.x, 2.x and XL) over its
// models (candle/models/sd/clip, candle/models/sd/unet,
// candle/models/sd/vae, and the samplers of candle/models/sd/scheduler):
// Open a diffusers folder or a single-file checkpoint and Generate images:
// text-to-image, image-to-image or inpainting (9-channel inpainting UNets,
// or any UNet by blending the kept region back each step), with
// classifier-free guidance, seeded and cancellable, with preview images as
// it goes and a tiled VAE decode for large images. GenerateBatch runs
// text-to-image requests of one size, step count and sampler (BatchKey
// groups them) as one UNet batch, each with its own prompts, seed and
// guidance, as an image server batches its clients. OpenWith merges LoRA
// files (kohya / AUTOMATIC1111 and diffusers / PEFT) into the weights as
// they load, each at a scale (Options, LoRA). Its parts are exported too:
// the denoising loop's step on the device, seeded noise as a tensor, and
// images to and from tensors.
//
//	p, err := sd.Open("stable-diffusion-v1-5", dev, candle.F16)
//	defer p.Close()
//	imgs, err := p.Generate(ctx, sd.Request{Prompt: "a photo of a cat", Width: 512, Height: 512, Steps: 25, Seed: 42})
//	png.Encode(f, imgs[0])
//
// A single .safetensors file in the original (LDM/SGM) names, as
// AUTOMATIC1111 and ComfyUI load them, opens too: SD 1.x, SD 2.x (its
// OpenCLIP text encoder) and SDXL, with the configs read from the tensors'
// shapes. It holds no tokenizer: name one in Options.Tokenizer (the
// model's diffusers folder, say), or put tokenizer/ (and tokenizer_2/) beside
// the file. SD 2.x files predict v by default; Options.Prediction says
// otherwise.
//
//	p, err := sd.OpenWith("v1-5-pruned-emaonly.safetensors", dev, candle.F16,
//		sd.Options{Tokenizer: "stable-diffusion-v1-5"})
package sd

import (
	"image"
	"image/color"
	"math"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/models/sd/scheduler"
	"github.com/rocm-go/rocm/errs"
)

// pkg makes this package's errors.
const pkg errs.Package = "sd"

// Step applies a scheduler step to the latents x given the model's output
// out, the previous step's denoised estimate prev (nil at the first step)
// and fresh noise z (nil where st.Noise is zero): it returns the next
// latents and this step's denoised estimate, tensors of the caller's own,
// in x's dtype. The arithmetic is in F32 whatever the dtype, as
// diffusers' schedulers upcast it.
func Step(st scheduler.Step, x, out, prev, z *candle.Tensor) (next, denoised *candle.Tensor, err error) {
	const op = "Step"
	if x == nil || out == nil {
		return nil, nil, pkg.Errorf(op, errs.ErrArgument, "no latents or no model output")
	}
	if st.DPrev != 0 && prev == nil {
		return nil, nil, pkg.Errorf(op, errs.ErrArgument, "a multistep step needs the previous denoised estimate")
	}
	if st.Noise != 0 && z == nil {
		return nil, nil, pkg.Errorf(op, errs.ErrArgument, "an ancestral step needs fresh noise")
	}
	p := models.NewPass()
	defer p.Close()
	f32 := func(t *candle.Tensor) *candle.Tensor { return p.T(p.In(t).ToDType(candle.F32)) }
	xf := f32(x)
	// denoised = DX·x + DOut·out
	d := p.T(p.T(xf.Affine(st.DX, 0)).Add(p.T(f32(out).Affine(st.DOut, 0))))
	// next = X·x + D·denoised + DPrev·prev + Noise·z
	n := p.T(p.T(xf.Affine(st.X, 0)).Add(p.T(d.Affine(st.D, 0))))
	if st.DPrev != 0 {
		n = p.T(n.Add(p.T(f32(prev).Affine(st.DPrev, 0))))
	}
	if st.Noise != 0 {
		n = p.T(n.Add(p.T(f32(z).Affine(st.Noise, 0))))
	}
	dt := x.DType()
	n, d = p.T(n.ToDType(dt)), p.T(d.ToDType(dt))
	if p.Err != nil {
		return nil, nil, pkg.Wrap(op, p.Err)
	}
	return p.Keep(n), p.Keep(d), nil
}

// NoiseTensor is the next standard normal values of a seeded noise
// stream as a tensor of the shape, on dev in dtype: the same values for a
// seed on every device (they are made on the host).
func NoiseTensor(n *scheduler.Noise, dev candle.Device, dtype candle.DType, shape ...int) (*candle.Tensor, error) {
	count := 1
	for _, d := range shape {
		count *= d
	}
	v := make([]float32, count)
	n.Fill(v)
	t, err := hostTensor(v, dev, dtype, shape...)
	return t, pkg.Wrap("NoiseTensor", err)
}

// hostTensor is values made on the host as a tensor of the shape, on dev
// in dtype.
func hostTensor(v []float32, dev candle.Device, dtype candle.DType, shape ...int) (*candle.Tensor, error) {
	t, err := candle.FromSlice(dev, v, shape...)
	if err != nil || dtype == candle.F32 {
		return t, err
	}
	defer t.Close()
	return t.ToDType(dtype)
}

// Images turns a VAE's output (batch, 3, height, width), about [-1, 1],
// into images: (x+1)/2 clamped to [0, 1], rounded to 8 bits, as
// diffusers' image processor does.
func Images(x *candle.Tensor) ([]*image.RGBA, error) {
	const op = "Images"
	if x == nil {
		return nil, pkg.Errorf(op, errs.ErrArgument, "nil tensor")
	}
	s := x.Shape()
	if len(s) != 4 || s[1] != 3 {
		return nil, pkg.Errorf(op, errs.ErrShape, "shape %v: want (batch, 3, height, width)", s)
	}
	imgs, err := linearImages(x, [][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, [3]float64{})
	return imgs, pkg.Wrap(op, err)
}

// linearImages makes an image of each of x's (batch, channels, height,
// width): the colour of a pixel of channel values l is Σ_c l_c·f[c] +
// bias in [-1, 1] (f has a row of R, G, B weights for each channel),
// taken to 8 bits by to8.
func linearImages(x *candle.Tensor, f [][3]float64, bias [3]float64) ([]*image.RGBA, error) {
	s := x.Shape()
	x32, err := x.ToDType(candle.F32)
	if err != nil {
		return nil, err
	}
	defer x32.Close()
	v, err := candle.ToSlice[float32](x32)
	if err != nil {
		return nil, err
	}
	b, chans, h, w := s[0], s[1], s[2], s[3]
	out := make([]*image.RGBA, b)
	for i := range b {
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		base := i * chans * h * w
		for y := range h {
			for x := range w {
				var rgb [3]uint8
				for k := range 3 {
					c := bias[k]
					for ch := range chans {
						if f[ch][k] != 0 { // an infinite value counts in its own colour only
							c += float64(v[base+ch*h*w+y*w+x]) * f[ch][k]
						}
					}
					rgb[k] = to8(c)
				}
				img.SetRGBA(x, y, color.RGBA{rgb[0], rgb[1], rgb[2], 255})
			}
		}
		out[i] = img
	}
	return out, nil
}

// to8 is a value in [-1, 1] as 8 bits: (x+1)/2 clamped to [0, 1],
// rounded.
func to8(x float64) uint8 {
	y := min(max((x+1)/2, 0), 1)
	return uint8(math.RoundToEven(y * 255))
}

// FromImages turns images of one size into a VAE's input (batch, 3,
// height, width) in [-1, 1] on dev in dtype (img2img, inpainting).
func FromImages(imgs []image.Image, dev candle.Device, dtype candle.DType) (*candle.Tensor, error) {
	const op = "FromImages"
	if len(imgs) == 0 {
		return nil, pkg.Errorf(op, errs.ErrArgument, "no images")
	}
	r := imgs[0].Bounds()
	h, w := r.Dy(), r.Dx()
	v := make([]float32, len(imgs)*3*h*w)
	for i, img := range imgs {
		b := img.Bounds()
		if b.Dx() != w || b.Dy() != h {
			return nil, pkg.Errorf(op, errs.ErrShape, "image %d is %d×%d and image 0 %d×%d: they must be one size", i, b.Dx(), b.Dy(), w, h)
		}
		base := i * 3 * h * w
		for y := range h {
			for x := range w {
				c := color.NRGBAModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
				o := y*w + x
				for k, ch := range []uint8{c.R, c.G, c.B} {
					v[base+k*h*w+o] = float32(ch)/127.5 - 1
				}
			}
		}
	}
	t, err := candle.FromSlice(dev, v, len(imgs), 3, h, w)
	if err != nil || dtype == candle.F32 {
		return t, pkg.Wrap(op, err)
	}
	defer t.Close()
	c, err := t.ToDType(dtype)
	return c, pkg.Wrap(op, err)
}
