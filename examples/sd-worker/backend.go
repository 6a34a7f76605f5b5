package main

import (
	"context"
	"fmt"
	"image"
	"slices"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/sd"
	"github.com/rocm-go/rocm/candle/models/sd/scheduler"
)

// Backend is what the server needs of a loaded pipeline: tests replace
// it.
type Backend interface {
	// Generate runs requests as one UNet batch (the requests BatchKey
	// groups, or one alone) and returns each one's images.
	Generate(ctx context.Context, rs []sd.Request) ([][]*image.RGBA, error)
	// BatchKey is the key of the requests that can share a UNet batch;
	// false for one that runs alone (img2img, inpainting).
	BatchKey(r sd.Request) (string, bool)
	// PromptWindows is how many of the text encoder's windows (77 tokens)
	// a prompt fills: beyond one, the rest is not seen.
	PromptWindows(text string) (int, error)
	// Fits says why a request would not fit in the device's memory, nil
	// when it would.
	Fits(r sd.Request) error
	Info() ModelInfo
	// Memory is the device memory the pipeline's tensors use now.
	Memory() candle.MemoryStats
	// ReleaseCache gives the memory the device's pool keeps back to the
	// device, and says how much (0 on the CPU).
	ReleaseCache() int64
	Close() error
}

// ModelInfo describes the loaded model.
type ModelInfo struct {
	Version        string // "v1-5", "v2-1", "xl", "turbo"
	Device         string // as candle names it: "cpu", "hip:0"
	DType          string
	Multiple       int    // width and height must be multiples of it
	DefaultSize    int    // the model's native size
	DefaultSampler string // A1111's name
	Inpainting     bool   // a 9-channel inpainting UNet: masks only
	DeviceMemory   int64  // in use after loading
}

// LoadOptions is how the worker asks for a pipeline.
type LoadOptions struct {
	Path      string // a diffusers folder or a single-file checkpoint
	Tokenizer string // a single file's tokenizers, when not beside it
	Version   string // "" or what -sd-version says: checked against the files
	Device    string // "auto", "cpu", "hip:N"
	DType     string // "auto", "f16", "f32", "bf16"
	LoRAs     []sd.LoRA
	Graphs    bool
}

// OpenFunc loads a backend.
type OpenFunc func(LoadOptions) (Backend, error)

// pipelineBackend is a Backend on an sd.Pipeline.
type pipelineBackend struct {
	p    *sd.Pipeline
	info ModelInfo
	dev  candle.Device
}

// openBackend loads the pipeline of o.
func openBackend(o LoadOptions) (Backend, error) {
	dev, err := candle.NewDevice(o.Device)
	if err != nil {
		return nil, err
	}
	dt := candle.F32
	switch o.DType {
	case "f16":
		dt = candle.F16
	case "bf16":
		dt = candle.BF16
	case "auto":
		if _, ok := dev.(*candle.HIPDevice); ok {
			dt = candle.F16
		}
	}
	p, err := sd.OpenWith(o.Path, dev, dt, sd.Options{Tokenizer: o.Tokenizer, LoRAs: o.LoRAs, Graphs: o.Graphs})
	if err != nil {
		return nil, err
	}
	b := &pipelineBackend{p: p, dev: dev}
	b.info = ModelInfo{Device: dev.String(), DType: dt.String(), Multiple: multiple(p), Version: version(p),
		Inpainting: p.UNet().Config().InChannels != p.VAE().Config().LatentChannels, DefaultSampler: samplerName(p.Sampler())}
	if o.Version != "" && o.Version != b.info.Version && !(o.Version == "turbo" && b.info.Version == "xl") {
		err := fmt.Errorf("-sd-version %s, but %s holds a %s model (%s)", o.Version, o.Path, b.info.Version, versionWhy(p))
		p.Close()
		return nil, err
	}
	if o.Version == "turbo" {
		b.info.Version = "turbo"
	}
	b.info.DefaultSize = defaultSize(b.info.Version, p)
	b.info.DeviceMemory = dev.MemoryStats().InUse
	return b, nil
}

// version tells SD 1.x, 2.x and XL apart by what the files hold: XL has
// two text encoders, 2.x an OpenCLIP one (gelu) where 1.x has OpenAI's
// CLIP (quick_gelu).
func version(p *sd.Pipeline) string {
	switch {
	case len(p.TextEncoders()) == 2:
		return "xl"
	case p.TextEncoders()[0].Config().HiddenAct == "gelu":
		return "v2-1"
	}
	return "v1-5"
}

func versionWhy(p *sd.Pipeline) string {
	t := p.TextEncoders()
	if len(t) == 2 {
		return "two text encoders"
	}
	return fmt.Sprintf("one text encoder with %s", t[0].Config().HiddenAct)
}

// multiple is the size step the pipeline takes: the VAE's factor times
// the UNet's downsampling.
func multiple(p *sd.Pipeline) int {
	return p.VAE().Config().Factor() * (1 << (len(p.UNet().Config().BlockOutChannels) - 1))
}

// defaultSize is the model's native image size: its UNet's sample size
// times the VAE's factor where the config gives one, else the version's.
func defaultSize(version string, p *sd.Pipeline) int {
	if s := p.UNet().Config().SampleSize; s > 0 {
		return s * p.VAE().Config().Factor()
	}
	switch version {
	case "xl":
		return 1024
	case "v2-1":
		return 768
	}
	return 512
}

func (b *pipelineBackend) Generate(ctx context.Context, rs []sd.Request) ([][]*image.RGBA, error) {
	if len(rs) == 1 {
		imgs, err := b.p.Generate(ctx, rs[0])
		return [][]*image.RGBA{imgs}, err
	}
	return b.p.GenerateBatch(ctx, rs)
}

func (b *pipelineBackend) BatchKey(r sd.Request) (string, bool) { return b.p.BatchKey(r) }

func (b *pipelineBackend) PromptWindows(text string) (int, error) {
	w, err := b.p.Tokenizers()[0].EncodeWindows(text, b.p.TextEncoders()[0].Config().MaxPositions)
	return len(w), err
}

// Fits compares a rough peak of the request, the UNet's (about three
// times its largest activation, the first block's output over the
// guided batch, and the attention scores over the latent pixels) and the
// VAE decode's (four full-resolution activations of its first block's
// width), with the device's free memory and what its pool keeps. On the
// CPU it says yes.
func (b *pipelineBackend) Fits(r sd.Request) error {
	d, ok := b.dev.(*candle.HIPDevice)
	if !ok {
		return nil
	}
	free, _, err := d.HIP().MemInfo()
	if err != nil {
		return nil
	}
	free += d.MemoryStats().Cached
	need := estimateBytes(r, b.p)
	if need > free {
		return fmt.Errorf("%d×%d with %d image(s) needs about %s of device memory, and %s is free", r.Width, r.Height, r.Batch,
			humanize.IBytes(uint64(need)), humanize.IBytes(uint64(free)))
	}
	return nil
}

// estimateBytes is Fits' estimate.
func estimateBytes(r sd.Request, p *sd.Pipeline) int64 {
	uc := p.UNet().Config()
	vc := p.VAE().Config()
	f := int64(vc.Factor())
	h, w := int64(r.Height)/f, int64(r.Width)/f
	rows := int64(max(r.Batch, 1)) * 2
	size := int64(p.DType().Size())
	unet := 3 * rows * int64(uc.BlockOutChannels[0]) * h * w * size
	// The attention scores over the latent pixels, bounded: flash
	// attention keeps far less of them.
	scores := min(rows*h*w*h*w*size, 4*unet)
	vae := int64(max(r.Batch, 1)) * 4 * int64(vc.BlockOutChannels[0]) * int64(r.Height) * int64(r.Width) * size
	return max(unet+scores, vae)
}

func (b *pipelineBackend) Info() ModelInfo            { return b.info }
func (b *pipelineBackend) Memory() candle.MemoryStats { return b.dev.MemoryStats() }

func (b *pipelineBackend) ReleaseCache() int64 {
	if d, ok := b.dev.(*candle.HIPDevice); ok {
		return d.ReleaseCache()
	}
	return 0
}
func (b *pipelineBackend) Close() error { return b.p.Close() }

// samplers maps A1111's sampler names to ours; the first name of each
// is the one the worker reports.
var samplers = []struct {
	kind  scheduler.Kind
	names []string
}{
	{scheduler.EulerAncestral, []string{"Euler a", "k_euler_a", "euler_ancestral"}},
	{scheduler.Euler, []string{"Euler", "k_euler"}},
	{scheduler.DPMPP2M, []string{"DPM++ 2M", "k_dpmpp_2m", "dpm++ 2m"}},
	{scheduler.DDIM, []string{"DDIM"}},
	{scheduler.LCM, []string{"LCM"}},
}

// parseSampler takes A1111's names, ours (scheduler.Kinds), and
// diffusers' class names, case aside; "" is the model's default.
func parseSampler(name string) (scheduler.Kind, error) {
	n := strings.TrimSpace(name)
	if n == "" {
		return "", nil
	}
	for _, s := range samplers {
		if strings.EqualFold(n, string(s.kind)) || slices.ContainsFunc(s.names, func(a string) bool { return strings.EqualFold(a, n) }) {
			return s.kind, nil
		}
	}
	if k, err := scheduler.KindOf(n); err == nil {
		return k, nil
	}
	var names []string
	for _, s := range samplers {
		names = append(names, s.names[0])
	}
	return "", fmt.Errorf("unknown sampler %q: want one of %s", name, strings.Join(names, ", "))
}

// samplerName is A1111's name of a sampler.
func samplerName(k scheduler.Kind) string {
	for _, s := range samplers {
		if s.kind == k {
			return s.names[0]
		}
	}
	return string(k)
}
