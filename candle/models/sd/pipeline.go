package sd

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"path/filepath"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/sd/clip"
	"github.com/rocm-go/rocm/candle/models/sd/scheduler"
	"github.com/rocm-go/rocm/candle/models/sd/unet"
	"github.com/rocm-go/rocm/candle/models/sd/vae"
	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/tokenizer"
)

// Pipeline is a Stable Diffusion 1.x or 2.x pipeline (text-to-image and
// image-to-image) of a diffusers folder: its tokenizer, text encoder,
// UNet, VAE and the training noise schedule its samplers start from.
type Pipeline struct {
	tok     *tokenizer.Tokenizer
	text    *clip.Model
	unet    *unet.Model
	vae     *vae.Model
	sched   scheduler.Config
	sampler scheduler.Kind // the folder's, where it is one of ours
	dev     candle.Device
	dtype   candle.DType
}

// Open loads the pipeline of a diffusers folder (model_index.json,
// tokenizer/, text_encoder/, unet/, vae/, scheduler/) onto dev in dtype.
// An SDXL folder is refused (its two text encoders are not wired yet; its
// UNet is package unet's).
func Open(dir string, dev candle.Device, dtype candle.DType) (*Pipeline, error) {
	const op = "Open"
	b, err := pkg.ReadFile(op, filepath.Join(dir, "model_index.json"))
	if err != nil {
		return nil, err
	}
	var index struct {
		Class string `json:"_class_name"`
	}
	if err := json.Unmarshal(b, &index); err != nil {
		return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: filepath.Join(dir, "model_index.json"), Detail: err.Error()}
	}
	if index.Class != "StableDiffusionPipeline" && index.Class != "StableDiffusionImg2ImgPipeline" {
		return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrUnsupported, Path: filepath.Join(dir, "model_index.json"), Field: "_class_name",
			Detail: index.Class + ": Open takes Stable Diffusion 1.x and 2.x pipelines (StableDiffusionPipeline)"}
	}
	p := &Pipeline{dev: dev, dtype: dtype, sampler: scheduler.Euler}
	if err := p.load(dir); err != nil {
		p.Close()
		return nil, pkg.Wrap(op, err)
	}
	return p, nil
}

func (p *Pipeline) load(dir string) error {
	var err error
	if p.tok, err = tokenizer.LoadDir(filepath.Join(dir, "tokenizer")); err != nil {
		return err
	}
	if p.sched, err = scheduler.LoadConfig(filepath.Join(dir, "scheduler", "scheduler_config.json")); err != nil {
		return err
	}
	if k, err := scheduler.KindOf(p.sched.ClassName); err == nil {
		p.sampler = k
	}
	tcfg, err := clip.LoadConfig(filepath.Join(dir, "text_encoder", "config.json"))
	if err != nil {
		return err
	}
	if p.text, err = loadWith(filepath.Join(dir, "text_encoder"), func(w candle.Weights) (*clip.Model, error) {
		return clip.New(w, tcfg, p.dev, p.dtype)
	}); err != nil {
		return err
	}
	ucfg, err := unet.LoadConfig(filepath.Join(dir, "unet", "config.json"))
	if err != nil {
		return err
	}
	if ucfg.TextTime() {
		return pkg.Errorf("Open", errs.ErrUnsupported, "the UNet takes SDXL's added conditioning: not a Stable Diffusion 1.x or 2.x folder")
	}
	if ucfg.CrossAttentionDim != tcfg.HiddenSize {
		return pkg.Errorf("Open", errs.ErrFormat, "the UNet attends to %d-wide text and the text encoder gives %d", ucfg.CrossAttentionDim, tcfg.HiddenSize)
	}
	if p.unet, err = loadWith(filepath.Join(dir, "unet"), func(w candle.Weights) (*unet.Model, error) {
		return unet.New(w, ucfg, p.dev, p.dtype)
	}); err != nil {
		return err
	}
	vcfg, err := vae.LoadConfig(filepath.Join(dir, "vae", "config.json"))
	if err != nil {
		return err
	}
	if vcfg.LatentChannels != ucfg.InChannels {
		return pkg.Errorf("Open", errs.ErrFormat, "the VAE has %d latent channels and the UNet takes %d", vcfg.LatentChannels, ucfg.InChannels)
	}
	p.vae, err = loadWith(filepath.Join(dir, "vae"), func(w candle.Weights) (*vae.Model, error) {
		return vae.New(w, vcfg, p.dev, p.dtype)
	})
	return err
}

// loadWith opens a component folder's safetensors weights for one
// constructor.
func loadWith[M any](dir string, build func(candle.Weights) (M, error)) (M, error) {
	w, err := safetensors.Open(dir)
	if err != nil {
		var zero M
		return zero, err
	}
	defer w.Close()
	return build(w)
}

// Close frees the models. Closing twice does nothing.
func (p *Pipeline) Close() error {
	if p.text != nil {
		p.text.Close()
		p.text = nil
	}
	if p.unet != nil {
		p.unet.Close()
		p.unet = nil
	}
	if p.vae != nil {
		p.vae.Close()
		p.vae = nil
	}
	return nil
}

// Request is one generation.
type Request struct {
	Prompt, NegativePrompt string
	// Width and Height are the images' size in pixels: multiples of the
	// VAE's factor times the UNet's (64 for SD).
	Width, Height int
	// Steps is the sampler's steps (default 30); Sampler the sampler
	// (default: the folder's scheduler where it is one of
	// scheduler.Kinds, else Euler).
	Steps   int
	Sampler scheduler.Kind
	// Guidance is the classifier-free guidance scale (default 7.5); 1 or
	// less runs the prompt alone.
	Guidance float64
	// Seed makes the noise; Batch images share the prompt (default 1).
	Seed  uint64
	Batch int
	// Noise, when set, is the first latents' noise, (batch, latent
	// channels, height/f, width/f) values in order, instead of the seed's
	// (as diffusers' latents argument).
	Noise []float32
	// Init and Strength make an image-to-image run: Init's latents noised
	// to the step that Strength (in (0, 1]) starts from.
	Init     image.Image
	Strength float64
	// Progress, when not nil, hears after each step.
	Progress func(step, steps int)
}

// Generate runs a request and returns its images. A canceled ctx stops
// it between steps with errs.ErrCanceled.
func (p *Pipeline) Generate(ctx context.Context, r Request) ([]*image.RGBA, error) {
	x, err := p.generate(ctx, r)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	imgs, err := Images(x)
	return imgs, pkg.Wrap("Generate", err)
}

// generate is Generate up to the VAE's output (batch, 3, height, width).
func (p *Pipeline) generate(ctx context.Context, r Request) (*candle.Tensor, error) {
	const op = "Generate"
	if p.unet == nil {
		return nil, pkg.Errorf(op, errs.ErrClosed, "the pipeline is closed")
	}
	if r.Steps == 0 {
		r.Steps = 30
	}
	if r.Guidance == 0 {
		r.Guidance = 7.5
	}
	if r.Batch == 0 {
		r.Batch = 1
	}
	if r.Sampler == "" {
		r.Sampler = p.sampler
	}
	f := p.vae.Config().Factor()
	uf := 1 << (len(p.unet.Config().BlockOutChannels) - 1)
	if r.Width < 1 || r.Height < 1 || r.Width%(f*uf) != 0 || r.Height%(f*uf) != 0 || r.Batch < 1 {
		return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrArgument, Field: "Width",
			Detail: fmt.Sprintf("%d×%d, batch %d: width and height must be positive multiples of %d, and the batch at least 1", r.Width, r.Height, r.Batch, f*uf)}
	}
	sch, err := scheduler.New(r.Sampler, p.sched, r.Steps)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	if r.Init != nil {
		if sch, err = sch.FromImage(r.Strength); err != nil {
			return nil, pkg.Wrap(op, err)
		}
	}
	lc := p.unet.Config().InChannels
	shape := []int{r.Batch, lc, r.Height / f, r.Width / f}
	count := r.Batch * lc * (r.Height / f) * (r.Width / f)
	noise := scheduler.NewNoise(r.Seed)
	var z *candle.Tensor
	if r.Noise != nil {
		if len(r.Noise) != count {
			return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrShape, Field: "Noise", Detail: fmt.Sprintf("%d values: want %d, the latents' %v", len(r.Noise), count, shape)}
		}
		z, err = candle.FromSlice(p.dev, r.Noise, shape...)
		if err == nil && p.dtype != candle.F32 {
			z32 := z
			z, err = z32.ToDType(p.dtype)
			z32.Close()
		}
	} else {
		z, err = NoiseTensor(noise, p.dev, p.dtype, shape...)
	}
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	x, err := p.initLatents(r, sch, z)
	z.Close()
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	cond, err := p.encode(r)
	if err != nil {
		x.Close()
		return nil, pkg.Wrap(op, err)
	}
	defer cond.Close()
	var prev *candle.Tensor
	closeAll := func(ts ...*candle.Tensor) {
		for _, t := range ts {
			if t != nil {
				t.Close()
			}
		}
	}
	for i, st := range sch.Steps {
		if err := ctx.Err(); err != nil {
			closeAll(x, prev)
			return nil, pkg.Errorf(op, errs.ErrCanceled, "after %d of %d steps: %v", i, len(sch.Steps), err)
		}
		e, err := p.predict(x, st, cond, r)
		if err != nil {
			closeAll(x, prev)
			return nil, pkg.Wrap(op, err)
		}
		var zt *candle.Tensor
		if st.Noise != 0 {
			if zt, err = NoiseTensor(noise, p.dev, p.dtype, shape...); err != nil {
				closeAll(x, prev, e)
				return nil, pkg.Wrap(op, err)
			}
		}
		next, den, err := Step(st, x, e, prev, zt)
		closeAll(x, prev, e, zt)
		if err != nil {
			return nil, pkg.Wrap(op, err)
		}
		x, prev = next, den
		if r.Progress != nil {
			r.Progress(i+1, len(sch.Steps))
		}
	}
	prev.Close()
	defer x.Close()
	img, err := p.vae.Decode(x)
	return img, pkg.Wrap(op, err)
}

// initLatents is InitNoiseSigma·z, plus InitImage·(the init image's
// latents) for img2img.
func (p *Pipeline) initLatents(r Request, sch *scheduler.Schedule, z *candle.Tensor) (*candle.Tensor, error) {
	x, err := z.Affine(sch.InitNoiseSigma, 0)
	if err != nil || r.Init == nil {
		return x, err
	}
	defer x.Close()
	b := r.Init.Bounds()
	if b.Dx() != r.Width || b.Dy() != r.Height {
		return nil, &errs.Error{Pkg: string(pkg), Op: "Generate", Kind: errs.ErrShape, Field: "Init",
			Detail: fmt.Sprintf("the init image is %d×%d and the request %d×%d", b.Dx(), b.Dy(), r.Width, r.Height)}
	}
	imgs := make([]image.Image, r.Batch)
	for i := range imgs {
		imgs[i] = r.Init
	}
	in, err := FromImages(imgs, p.dev, p.dtype)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	lat, err := p.vae.Encode(in)
	if err != nil {
		return nil, err
	}
	defer lat.Close()
	l, err := lat.Affine(sch.InitImage, 0)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return l.Add(x)
}

// guided reports whether a request runs classifier-free guidance.
func guided(r Request) bool { return r.Guidance > 1 }

// encode is the text conditioning: the negative prompt's hidden states
// for each image, then the prompt's (guided), or the prompt's alone.
func (p *Pipeline) encode(r Request) (*candle.Tensor, error) {
	first := func(text string) ([]int32, error) {
		w, err := p.tok.EncodeWindows(text, p.text.Config().MaxPositions)
		if err != nil {
			return nil, err
		}
		return w[0], nil // diffusers truncates to one window
	}
	pos, err := first(r.Prompt)
	if err != nil {
		return nil, err
	}
	var windows [][]int32
	if guided(r) {
		neg, err := first(r.NegativePrompt)
		if err != nil {
			return nil, err
		}
		for range r.Batch {
			windows = append(windows, neg)
		}
	}
	for range r.Batch {
		windows = append(windows, pos)
	}
	out, err := p.text.Forward(windows)
	if err != nil {
		return nil, err
	}
	last := out.Last
	out.Last = nil
	out.Close()
	return last, nil
}

// predict is the UNet's guided prediction at a step.
func (p *Pipeline) predict(x *candle.Tensor, st scheduler.Step, cond *candle.Tensor, r Request) (*candle.Tensor, error) {
	in, err := x.Affine(st.InputScale, 0)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	if !guided(r) {
		return p.unet.Forward(in, st.Timestep, unet.Cond{Text: cond})
	}
	both, err := candle.Cat([]*candle.Tensor{in, in}, 0)
	if err != nil {
		return nil, err
	}
	defer both.Close()
	e, err := p.unet.Forward(both, st.Timestep, unet.Cond{Text: cond})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	b := r.Batch
	u, err := e.Narrow(0, 0, b)
	if err != nil {
		return nil, err
	}
	defer u.Close()
	c, err := e.Narrow(0, b, b)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// u + g·(c − u) = (1−g)·u + g·c
	uu, err := u.Affine(1-r.Guidance, 0)
	if err != nil {
		return nil, err
	}
	defer uu.Close()
	cc, err := c.Affine(r.Guidance, 0)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	return uu.Add(cc)
}
