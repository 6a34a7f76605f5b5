package sd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/models/sd/clip"
	"github.com/rocm-go/rocm/candle/models/sd/scheduler"
	"github.com/rocm-go/rocm/candle/models/sd/unet"
	"github.com/rocm-go/rocm/candle/models/sd/vae"
	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/tokenizer"
)

// Pipeline is a Stable Diffusion 1.x, 2.x or XL pipeline (text-to-image,
// image-to-image and inpainting) of a diffusers folder or a single-file
// checkpoint: its tokenizers and text encoders (two for XL), UNet, VAE and
// the training noise schedule its samplers start from. An inpainting UNet
// (9 input channels: the latents, the mask and the masked image's
// latents, as runwayml's stable-diffusion-inpainting) inpaints only; a
// 4-channel one does all three, inpainting by putting the kept region
// back after each step.
type Pipeline struct {
	toks    []*tokenizer.Tokenizer
	texts   []*clip.Model
	unet    *unet.Model
	vae     *vae.Model
	sched   scheduler.Config
	sampler scheduler.Kind // the folder's, where it is one of ours
	dev     candle.Device
	dtype   candle.DType
	xl      bool
	// zeroNegative: without a negative prompt, XL's unconditional
	// embeddings are zeros (model_index.json's force_zeros_for_empty_prompt).
	zeroNegative bool
	vaeDType     candle.DType // F32 where the VAE's config forces it over F16
	// graphs: the UNet's forward pass is captured and replayed (a HIP
	// device and Options.Graphs), one Generate or GenerateBatch at a time
	// (mu).
	graphs bool
	mu     sync.Mutex
}

// Open loads a pipeline onto dev in dtype: OpenWith with no options.
func Open(path string, dev candle.Device, dtype candle.DType) (*Pipeline, error) {
	return OpenWith(path, dev, dtype, Options{})
}

// OpenWith loads a pipeline onto dev in dtype from either
//   - a diffusers folder (model_index.json, tokenizer/, text_encoder/,
//     unet/, vae/, scheduler/, and for XL tokenizer_2/ and
//     text_encoder_2/), or
//   - a single-file checkpoint, a regular file whose name ends in
//     .safetensors, in the original (LDM/SGM) names that AUTOMATIC1111
//     and ComfyUI load: SD 1.x (CLIP ViT-L), SD 2.x (OpenCLIP ViT-H) or
//     SDXL (CLIP ViT-L and OpenCLIP ViT-bigG). Its models' configs are
//     read from the tensors' shapes, its schedule is SD's (scaled_linear
//     0.00085 to 0.012 over 1000 steps, leading, Euler), and an SD 2.x
//     checkpoint predicts v (o.Prediction overrides it). A file holds no
//     tokenizer: o.Tokenizer names one, else a tokenizer/ (and for XL
//     tokenizer_2/) folder beside the file is used.
//
// A VAE whose config forces float32 (SDXL's, which overflows F16) runs in
// F32 when dtype is F16, as diffusers runs it.
func OpenWith(path string, dev candle.Device, dtype candle.DType, o Options) (*Pipeline, error) {
	const op = "Open"
	switch o.Prediction {
	case "", scheduler.Epsilon, scheduler.VPrediction:
	default:
		return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrArgument, Field: "Prediction",
			Detail: fmt.Sprintf("%q: want %q, %q or empty", o.Prediction, scheduler.Epsilon, scheduler.VPrediction)}
	}
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && strings.HasSuffix(path, ".safetensors") {
		return openSingleFile(path, dev, dtype, o, sdRules)
	}
	pt, err := folderParts(path)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	return build(pt, dev, dtype, o)
}

// parts is what a pipeline is made of, from a folder or a single file.
type parts struct {
	xl, zeroNegative bool
	sched            scheduler.Config
	sampler          scheduler.Kind
	tokDirs          []string // one per text encoder
	texts            []clip.Config
	unet             unet.Config
	vae              vae.Config
	// weights opens a model's weights by its folder's name:
	// text_encoder, text_encoder_2, unet or vae.
	weights func(name string) (candle.Weights, error)
}

// folderParts reads a diffusers folder's index and configs.
func folderParts(dir string) (*parts, error) {
	const op = "Open"
	b, err := pkg.ReadFile(op, filepath.Join(dir, "model_index.json"))
	if err != nil {
		return nil, err
	}
	var index struct {
		Class     string `json:"_class_name"`
		ZeroEmpty *bool  `json:"force_zeros_for_empty_prompt"`
	}
	if err := json.Unmarshal(b, &index); err != nil {
		return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: filepath.Join(dir, "model_index.json"), Detail: err.Error()}
	}
	pt := &parts{sampler: scheduler.Euler, weights: func(name string) (candle.Weights, error) {
		return safetensors.Open(filepath.Join(dir, name))
	}}
	switch index.Class {
	case "StableDiffusionPipeline", "StableDiffusionImg2ImgPipeline", "StableDiffusionInpaintPipeline":
	case "StableDiffusionXLPipeline", "StableDiffusionXLImg2ImgPipeline", "StableDiffusionXLInpaintPipeline":
		pt.xl, pt.zeroNegative = true, index.ZeroEmpty == nil || *index.ZeroEmpty
	default:
		return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrUnsupported, Path: filepath.Join(dir, "model_index.json"), Field: "_class_name",
			Detail: index.Class + ": Open takes Stable Diffusion 1.x, 2.x and XL pipelines (StableDiffusionPipeline, StableDiffusionXLPipeline)"}
	}
	if pt.sched, err = scheduler.LoadConfig(filepath.Join(dir, "scheduler", "scheduler_config.json")); err != nil {
		return nil, err
	}
	if k, err := scheduler.KindOf(pt.sched.ClassName); err == nil {
		pt.sampler = k
	}
	suffixes := []string{""}
	if pt.xl {
		suffixes = append(suffixes, "_2")
	}
	for _, suf := range suffixes {
		pt.tokDirs = append(pt.tokDirs, filepath.Join(dir, "tokenizer"+suf))
		tcfg, err := clip.LoadConfig(filepath.Join(dir, "text_encoder"+suf, "config.json"))
		if err != nil {
			return nil, err
		}
		pt.texts = append(pt.texts, tcfg)
	}
	if pt.unet, err = unet.LoadConfig(filepath.Join(dir, "unet", "config.json")); err != nil {
		return nil, err
	}
	pt.vae, err = vae.LoadConfig(filepath.Join(dir, "vae", "config.json"))
	return pt, err
}

// build loads a pipeline's parts.
func build(pt *parts, dev candle.Device, dtype candle.DType, o Options) (*Pipeline, error) {
	p := &Pipeline{dev: dev, dtype: dtype, sampler: pt.sampler, xl: pt.xl, zeroNegative: pt.zeroNegative, sched: pt.sched}
	_, p.graphs = dev.(*candle.HIPDevice)
	p.graphs = p.graphs && o.Graphs
	if o.Prediction != "" {
		p.sched.PredictionType = o.Prediction
	}
	components := []string{"text_encoder", "unet"}
	if pt.xl {
		components = append(components, "text_encoder_2")
	}
	loras, err := openLoRAs(o.LoRAs)
	if err == nil {
		err = loras.outside(components...)
	}
	defer loras.close()
	if err != nil {
		return nil, pkg.Wrap("Open", err)
	}
	if err := p.load(pt, loras); err != nil {
		p.Close()
		return nil, pkg.Wrap("Open", err)
	}
	return p, nil
}

// load loads the models of pt with loras merged into their weights.
func (p *Pipeline) load(pt *parts, loras *loraSet) error {
	width := 0 // the text conditioning's: the encoders' widths together
	for k, tcfg := range pt.texts {
		tok, err := tokenizer.LoadDir(pt.tokDirs[k])
		if err != nil {
			return err
		}
		p.toks = append(p.toks, tok)
		enc, err := loadWith(loras, pt.weights, textEncoderName(k), func(w candle.Weights) (*clip.Model, error) {
			return clip.New(w, tcfg, p.dev, p.dtype)
		})
		if err != nil {
			return err
		}
		p.texts = append(p.texts, enc)
		width += tcfg.HiddenSize
	}
	ucfg, vcfg := pt.unet, pt.vae
	if ucfg.TextTime() != p.xl || (p.xl && !p.texts[1].HasProjection()) {
		return pkg.Errorf("Open", errs.ErrFormat, "the UNet's added conditioning (%v) and the pipeline (XL: %v, a projection on text_encoder_2) do not agree", ucfg.TextTime(), p.xl)
	}
	if ucfg.CrossAttentionDim != width {
		return pkg.Errorf("Open", errs.ErrFormat, "the UNet attends to %d-wide text and the text encoders give %d", ucfg.CrossAttentionDim, width)
	}
	var err error
	if p.unet, err = loadWith(loras, pt.weights, "unet", func(w candle.Weights) (*unet.Model, error) {
		return unet.New(w, ucfg, p.dev, p.dtype)
	}); err != nil {
		return err
	}
	if lc := vcfg.LatentChannels; ucfg.InChannels != lc && ucfg.InChannels != 2*lc+1 {
		return pkg.Errorf("Open", errs.ErrFormat, "the VAE has %d latent channels and the UNet takes %d: want %d, or %d for an inpainting UNet", lc, ucfg.InChannels, lc, 2*lc+1)
	}
	p.vaeDType = p.dtype
	if vcfg.ForceUpcast && p.dtype == candle.F16 {
		p.vaeDType = candle.F32
	}
	p.vae, err = loadWith(loras, pt.weights, "vae", func(w candle.Weights) (*vae.Model, error) {
		return vae.New(w, vcfg, p.dev, p.vaeDType)
	})
	return err
}

// textEncoderName is the folder of the k-th text encoder.
func textEncoderName(k int) string {
	if k == 0 {
		return "text_encoder"
	}
	return fmt.Sprintf("text_encoder_%d", k+1)
}

// loadWith opens a model's weights for one constructor, with the LoRAs
// of that model merged in.
func loadWith[M any](l *loraSet, open func(string) (candle.Weights, error), name string, build func(candle.Weights) (M, error)) (M, error) {
	var zero M
	f, err := open(name)
	if err != nil {
		return zero, err
	}
	w, err := l.view(name, f)
	if err != nil {
		f.Close()
		return zero, err
	}
	defer w.Close()
	return build(w)
}

// Tokenizers are the text encoders' tokenizers, in order (two for XL).
func (p *Pipeline) Tokenizers() []*tokenizer.Tokenizer { return p.toks }

// TextEncoders are the text encoders, in order (XL's second one has the
// projection).
func (p *Pipeline) TextEncoders() []*clip.Model { return p.texts }

// UNet is the denoising model.
func (p *Pipeline) UNet() *unet.Model { return p.unet }

// VAE is the autoencoder, in the dtype it runs in (F32 where its config
// forces it over F16).
func (p *Pipeline) VAE() *vae.Model { return p.vae }

// Sampler is the sampler a Request without one runs: the folder's
// scheduler where it is one of scheduler.Kinds, else Euler.
func (p *Pipeline) Sampler() scheduler.Kind { return p.sampler }

// DType is the dtype the pipeline runs in (the VAE's may be F32, see VAE).
func (p *Pipeline) DType() candle.DType { return p.dtype }

// Close frees the models. Closing twice does nothing.
func (p *Pipeline) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.texts {
		t.Close()
	}
	p.texts = nil
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
	// Mask, with Init of its size, makes an inpainting run, as diffusers'
	// inpainting pipelines: white repaints, black keeps. The mask is
	// binarized at half its grey level (PIL's L conversion of the 8-bit
	// colours: 128 and over repaint), and taken to the latents' size by
	// nearest neighbour. Strength defaults to 1 for inpainting, which
	// starts from noise alone (diffusers' SD 1.x/2.x default; its XL
	// inpainting pipeline defaults to 0.9999); under 1, from Init's
	// latents noised as for image-to-image. An inpainting UNet (9 input
	// channels) needs a mask.
	Mask image.Image
	// Progress, when not nil, hears after each step, with the preview
	// images that Preview asks for.
	Progress func(Progress)
	// Preview chooses the preview images Progress hears (default
	// PreviewNone).
	Preview Preview
	// TileVAE decodes the latents (and encodes Init) in overlapping
	// tiles blended together, as diffusers' AutoencoderKL with tiling
	// enabled (vae.DecodeTiled, vae.EncodeTiled): the VAE's memory then
	// grows with the tile, not the image. On a HIP device Generate tiles
	// the decode by itself too when the free memory (with what the pool
	// keeps) is under a rough estimate of an untiled decode's: four
	// full-resolution activations of the VAE's first block width and the
	// attention scores over the latent pixels.
	TileVAE bool
}

// Generate runs a request and returns its images. A canceled ctx stops
// it between steps with errs.ErrCanceled.
func (p *Pipeline) Generate(ctx context.Context, r Request) ([]*image.RGBA, error) {
	x, err := p.generate(ctx, group{r})
	if err != nil {
		return nil, err
	}
	defer x.Close()
	imgs, err := Images(x)
	return imgs, pkg.Wrap("Generate", err)
}

// group is the requests of one denoising loop, their defaults applied:
// one request (Generate), or several text-to-image requests that share
// their size, steps, sampler, guidance on or off, preview and VAE tiling
// (GenerateBatch). A request's images are its Batch rows of the loop's
// latents, after those of the requests before it.
type group []Request

// rows is the group's images: the latents' batch.
func (g group) rows() int {
	n := 0
	for _, r := range g {
		n += r.Batch
	}
	return n
}

// about says which request of a group of several err is about.
func (g group) about(i int, err error) error {
	var e *errs.Error
	if len(g) == 1 || !errors.As(err, &e) {
		return err
	}
	c := *e
	c.Detail = fmt.Sprintf("request %d: %s", i, c.Detail)
	return &c
}

// withDefaults is r with Generate's defaults in its zero fields.
func (p *Pipeline) withDefaults(r Request) Request {
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
	if r.Mask != nil && r.Strength == 0 {
		r.Strength = 1
	}
	return r
}

// generate is Generate up to the VAE's output (images, 3, height, width)
// for a group of requests. Its schedule, image inputs (Init, Mask) and
// VAE options are its first request's: the others share them.
func (p *Pipeline) generate(ctx context.Context, g group) (*candle.Tensor, error) {
	const op = "Generate"
	if p.graphs {
		p.mu.Lock()
		defer p.mu.Unlock()
	}
	if p.unet == nil {
		return nil, pkg.Errorf(op, errs.ErrClosed, "the pipeline is closed")
	}
	g = slices.Clone(g)
	f := p.vae.Config().Factor()
	uf := 1 << (len(p.unet.Config().BlockOutChannels) - 1)
	lc := p.vae.Config().LatentChannels
	inpaintUNet := p.unet.Config().InChannels != lc // 9 channels: latents, mask, masked latents
	for i := range g {
		r := p.withDefaults(g[i])
		if r.Width < 1 || r.Height < 1 || r.Width%(f*uf) != 0 || r.Height%(f*uf) != 0 || r.Batch < 1 {
			return nil, g.about(i, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrArgument, Field: "Width",
				Detail: fmt.Sprintf("%d×%d, batch %d: width and height must be positive multiples of %d, and the batch at least 1", r.Width, r.Height, r.Batch, f*uf)})
		}
		if err := checkMask(r, inpaintUNet); err != nil {
			return nil, g.about(i, err)
		}
		g[i] = r
	}
	r := g[0]
	sch, err := scheduler.New(r.Sampler, p.sched, r.Steps)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	// Inpainting at strength 1 starts from noise alone, as diffusers'
	// (its is_strength_max); img2img from the image noised to the first
	// step.
	fromNoise := r.Mask != nil && r.Strength == 1
	if r.Init != nil && !fromNoise {
		if sch, err = sch.FromImage(r.Strength); err != nil {
			return nil, pkg.Wrap(op, err)
		}
	}
	shape := []int{g.rows(), lc, r.Height / f, r.Width / f}
	streams := make([]*scheduler.Noise, len(g))
	for i, q := range g {
		streams[i] = scheduler.NewNoise(q.Seed)
	}
	z, err := p.noise(g, streams, true, shape)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	defer z.Close()
	in, err := p.prepare(r, inpaintUNet, !fromNoise)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	defer in.close()
	x, err := initLatents(sch, z, in.image)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	cond, err := p.encode(g)
	if err != nil {
		x.Close()
		return nil, pkg.Wrap(op, err)
	}
	defer cond.close()
	var prev *candle.Tensor
	var graph *unet.Captured // the run's, made at its first step
	defer func() {
		if graph != nil {
			graph.Close()
		}
	}()
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
			return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrCanceled, Detail: fmt.Sprintf("after %d of %d steps", i, len(sch.Steps)), Err: err}
		}
		e, err := p.predict(x, in.cond, st, cond, g, &graph)
		if err != nil {
			closeAll(x, prev)
			return nil, pkg.Wrap(op, err)
		}
		var zt *candle.Tensor
		if st.Noise != 0 {
			if zt, err = p.noise(g, streams, false, shape); err != nil {
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
		if in.mask != nil {
			if x, err = in.blend(x, z, sch, i+1); err != nil {
				closeAll(prev)
				return nil, pkg.Wrap(op, err)
			}
		}
		lat := prev
		if i == len(sch.Steps)-1 {
			lat = x
		}
		if err := p.progress(g, Progress{Step: i + 1, Steps: len(sch.Steps)}, lat); err != nil {
			closeAll(x, prev)
			return nil, pkg.Wrap(op, err)
		}
	}
	prev.Close()
	if graph != nil { // its memory, for the VAE
		graph.Close()
		graph = nil
	}
	defer x.Close()
	img, err := p.decode(x, r)
	return img, pkg.Wrap(op, err)
}

// noise is the next values of each request's noise stream, on its rows of
// the latents' shape, as one tensor; for the first latents (first), a
// request's Noise where it gives one instead, its stream left as it was.
func (p *Pipeline) noise(g group, streams []*scheduler.Noise, first bool, shape []int) (*candle.Tensor, error) {
	per := shape[1] * shape[2] * shape[3]
	all := make([]float32, shape[0]*per)
	v := all
	for i, r := range g {
		seg := v[:r.Batch*per]
		v = v[len(seg):]
		if !first || r.Noise == nil {
			streams[i].Fill(seg)
			continue
		}
		if len(r.Noise) != len(seg) {
			own := []int{r.Batch, shape[1], shape[2], shape[3]}
			return nil, g.about(i, &errs.Error{Pkg: string(pkg), Op: "Generate", Kind: errs.ErrShape, Field: "Noise",
				Detail: fmt.Sprintf("%d values: want %d, the latents' %v", len(r.Noise), len(seg), own)})
		}
		copy(seg, r.Noise)
	}
	return hostTensor(all, p.dev, p.dtype, shape...)
}

// decode runs the VAE on latents in the pipeline's dtype, tiled where
// the request asks for it or the device's free memory looks too small.
func (p *Pipeline) decode(x *candle.Tensor, r Request) (*candle.Tensor, error) {
	if p.vaeDType != p.dtype {
		x32, err := x.ToDType(p.vaeDType)
		if err != nil {
			return nil, err
		}
		defer x32.Close()
		x = x32
	}
	if r.TileVAE || p.tightMemory(x) {
		return p.vae.DecodeTiled(x)
	}
	return p.vae.Decode(x)
}

// initLatents is InitNoiseSigma·z, plus InitImage·lat where an image's
// latents start the run (img2img, inpainting under strength 1).
func initLatents(sch *scheduler.Schedule, z, lat *candle.Tensor) (*candle.Tensor, error) {
	x, err := z.Affine(sch.InitNoiseSigma, 0)
	if err != nil || lat == nil || sch.InitImage == 0 {
		return x, err
	}
	defer x.Close()
	l, err := lat.Affine(sch.InitImage, 0)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return l.Add(x)
}

// progress tells each request of a group that listens that a step is
// done, with its own images' previews of the latents lat where it asks
// for them (made once for the group, which shares Preview).
func (p *Pipeline) progress(g group, pr Progress, lat *candle.Tensor) error {
	var previews []*image.RGBA
	off := 0
	for _, r := range g {
		if r.Progress == nil {
			off += r.Batch
			continue
		}
		mine := pr
		if r.Preview != PreviewNone {
			if previews == nil {
				var err error
				if previews, err = p.preview(lat, r); err != nil {
					return err
				}
			}
			mine.Preview = previews[off : off+r.Batch : off+r.Batch]
		}
		r.Progress(mine)
		off += r.Batch
	}
	return nil
}

// guided reports whether a request runs classifier-free guidance.
func guided(r Request) bool { return r.Guidance > 1 }

// conditioning is a group's text conditioning for the UNet: guided, the
// negative prompts' rows of every request, then the prompts' rows of
// every request (each request's Batch rows, in order); unguided, the
// prompts' rows alone.
type conditioning struct {
	text   *candle.Tensor // (rows, tokens, cross_attention_dim)
	pooled *candle.Tensor // XL: (rows, projection width)
	ids    [][6]float64   // XL: the time ids of each row
}

func (c *conditioning) close() {
	for _, t := range []*candle.Tensor{c.text, c.pooled} {
		if t != nil {
			t.Close()
		}
	}
}

// encode runs the text encoders over a group's prompts, all in one batch.
// SD 1.x and 2.x condition on the last hidden state; XL on both encoders'
// penultimate states side by side and on the second's projected pooled
// state, with zeros for a negative prompt it was not given
// (force_zeros_for_empty_prompt), request by request.
func (p *Pipeline) encode(g group) (*conditioning, error) {
	guide := guided(g[0])
	// runs: the rows of the conditioning, those of zeros not encoded.
	var runs []rowRun
	if guide {
		for _, r := range g {
			runs = append(runs, rowRun{n: r.Batch, zero: p.zeroNegative && r.NegativePrompt == ""})
		}
	}
	runs = append(runs, rowRun{n: g.rows()})
	var hidden, pooled []*candle.Tensor
	defer func() {
		for _, t := range append(hidden, pooled...) {
			t.Close()
		}
	}()
	for k, enc := range p.texts {
		first := func(text string) ([]int32, error) {
			w, err := p.toks[k].EncodeWindows(text, enc.Config().MaxPositions)
			if err != nil {
				return nil, err
			}
			return w[0], nil // diffusers truncates to one window
		}
		var windows [][]int32
		add := func(i int, text string) error {
			w, err := first(text)
			if err != nil {
				return err
			}
			for range g[i].Batch {
				windows = append(windows, w)
			}
			return nil
		}
		if guide {
			for i, r := range g {
				if runs[i].zero {
					continue
				}
				if err := add(i, r.NegativePrompt); err != nil {
					return nil, err
				}
			}
		}
		for i, r := range g {
			if err := add(i, r.Prompt); err != nil {
				return nil, err
			}
		}
		out, err := enc.Forward(windows)
		if err != nil {
			return nil, err
		}
		if p.xl {
			hidden, out.Penultimate = append(hidden, out.Penultimate), nil
			if out.Projected != nil {
				pooled, out.Projected = append(pooled, out.Projected), nil
			}
		} else {
			hidden, out.Last = append(hidden, out.Last), nil
		}
		out.Close()
	}
	c := &conditioning{}
	var err error
	if c.text, err = withZeros(candle.Cat(hidden, 2))(runs); err != nil {
		return nil, err
	}
	if p.xl {
		if c.pooled, err = withZeros(pooled[len(pooled)-1].Contiguous())(runs); err != nil {
			c.close()
			return nil, err
		}
		rows := g.rows()
		if guide {
			rows *= 2
		}
		for range rows {
			h, w := float64(g[0].Height), float64(g[0].Width)
			c.ids = append(c.ids, [6]float64{h, w, 0, 0, h, w})
		}
	}
	return c, nil
}

// rowRun is n rows of a conditioning: of zeros, or the encoders' next.
type rowRun struct {
	n    int
	zero bool
}

// withZeros is the rows of runs: zeros where a run says so, else t's next
// rows. It takes t, and gives it back where no run is of zeros.
func withZeros(t *candle.Tensor, err error) func(runs []rowRun) (*candle.Tensor, error) {
	return func(runs []rowRun) (*candle.Tensor, error) {
		if err != nil || !slices.ContainsFunc(runs, func(r rowRun) bool { return r.zero }) {
			return t, err
		}
		p := models.NewPass()
		defer p.Close()
		if t = p.Own(t, nil); p.Err != nil {
			return nil, p.Err
		}
		parts := make([]*candle.Tensor, 0, len(runs))
		from := 0
		for _, r := range runs {
			if r.zero {
				shape := append([]int{r.n}, t.Shape()[1:]...)
				parts = append(parts, p.Own(candle.Zeros(t.Device(), t.DType(), shape...)))
				continue
			}
			parts = append(parts, p.T(t.Narrow(0, from, r.n)))
			from += r.n
		}
		if p.Err != nil {
			return nil, p.Err
		}
		return p.Keep(p.T(candle.Cat(parts, 0))), p.Err
	}
}

// predict is the UNet's guided prediction at a step, each request's rows
// guided by its own scale; extra, when not nil, goes after the scaled
// latents along the channels (an inpainting UNet's mask and masked image
// latents). graph is the run's captured UNet (see forward).
func (p *Pipeline) predict(x, extra *candle.Tensor, st scheduler.Step, cond *conditioning, g group, graph **unet.Captured) (*candle.Tensor, error) {
	in, err := x.Affine(st.InputScale, 0)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	if extra != nil {
		all, err := candle.Cat([]*candle.Tensor{in, extra}, 1)
		if err != nil {
			return nil, err
		}
		defer all.Close()
		in = all
	}
	uc := unet.Cond{Text: cond.text, TextEmbeds: cond.pooled, TimeIDs: cond.ids}
	if !guided(g[0]) {
		return p.forward(in, st.Timestep, uc, graph)
	}
	both, err := candle.Cat([]*candle.Tensor{in, in}, 0)
	if err != nil {
		return nil, err
	}
	defer both.Close()
	e, err := p.forward(both, st.Timestep, uc, graph)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	ps := models.NewPass()
	defer ps.Close()
	both = ps.In(e) // u then c, each of every request's rows
	n := g.rows()
	parts := make([]*candle.Tensor, len(g))
	off := 0
	for i, r := range g {
		u := ps.T(both.Narrow(0, off, r.Batch))
		c := ps.T(both.Narrow(0, n+off, r.Batch))
		// u + g·(c − u) = (1−g)·u + g·c
		parts[i] = ps.T(ps.T(u.Affine(1-r.Guidance, 0)).Add(ps.T(c.Affine(r.Guidance, 0))))
		off += r.Batch
	}
	if len(parts) == 1 {
		return ps.Keep(parts[0]), ps.Err
	}
	return ps.Keep(ps.T(candle.Cat(parts, 0))), ps.Err
}

// forward is the UNet's forward pass: op by op, or, where the pipeline
// captures graphs, captured into *graph at a run's first step and
// replayed from it at the others.
func (p *Pipeline) forward(x *candle.Tensor, t float64, c unet.Cond, graph **unet.Captured) (*candle.Tensor, error) {
	switch {
	case !p.graphs:
		return p.unet.Forward(x, t, c)
	case *graph == nil:
		g, y, err := p.unet.Capture(x, t, c)
		*graph = g
		return y, err
	}
	return (*graph).Forward(x, t, c)
}

// decodeBytes estimates the device memory of an untiled decode of
// latents of shape s: four full-resolution activations of the VAE's
// first block's width and the mid block's attention scores over the
// latent pixels, in the VAE's dtype.
func (p *Pipeline) decodeBytes(s candle.Shape) int64 {
	c := p.vae.Config()
	b, h, w := int64(s[0]), int64(s[2]), int64(s[3])
	f := int64(c.Factor())
	size := int64(p.vaeDType.Size())
	return size * b * (4*int64(c.BlockOutChannels[0])*h*f*w*f + h*w*h*w)
}

// tightMemory reports whether a HIP device's free memory (with what its
// pool keeps) is under decodeBytes of the latents x; on the CPU, never.
func (p *Pipeline) tightMemory(x *candle.Tensor) bool {
	d, ok := p.dev.(*candle.HIPDevice)
	if !ok {
		return false
	}
	free, _, err := d.HIP().MemInfo()
	if err != nil {
		return false
	}
	return free+d.MemoryStats().Cached < p.decodeBytes(x.Shape())
}
