// Package vae is Stable Diffusion's variational autoencoder
// (diffusers' AutoencoderKL) on package candle: the decoder that turns
// latents into images and the encoder that turns images into latents
// (img2img, inpainting), from a diffusers vae/ folder (config.json and
// safetensors weights), in F32, F16 or BF16, on a HIP device or the CPU.
//
// Images are (batch, 3, height, width) in [-1, 1]; latents (batch,
// latent_channels, height/f, width/f), f = 2^(len(block_out_channels)−1)
// (8 for every SD VAE), scaled by the config's scaling_factor as the
// UNet sees them. SDXL's VAE overflows F16 (its config's force_upcast):
// run it in F32 (or BF16), as diffusers does.
package vae

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/nn"
	"github.com/rocm-go/rocm/errs"
)

// pkg makes this package's errors.
const pkg errs.Package = "vae"

// Config is an AutoencoderKL config (the folder's config.json).
type Config struct {
	InChannels        int       `json:"in_channels"`
	OutChannels       int       `json:"out_channels"`
	LatentChannels    int       `json:"latent_channels"`
	BlockOutChannels  []int     `json:"block_out_channels"`
	LayersPerBlock    int       `json:"layers_per_block"`
	NormNumGroups     int       `json:"norm_num_groups"`
	ScalingFactor     float64   `json:"scaling_factor"`
	ForceUpcast       bool      `json:"force_upcast"`
	DownBlockTypes    []string  `json:"down_block_types"`
	UpBlockTypes      []string  `json:"up_block_types"`
	ActFn             string    `json:"act_fn"`
	UseQuantConv      *bool     `json:"use_quant_conv"`
	UsePostQuantConv  *bool     `json:"use_post_quant_conv"`
	MidBlockAttention *bool     `json:"mid_block_add_attention"`
	ShiftFactor       *float64  `json:"shift_factor"`
	LatentsMean       []float64 `json:"latents_mean"`
	// SampleSize is the image size the VAE was made for (512 for SD
	// 1.x's): DecodeTiled's tile size in pixels. A list (height, width)
	// counts by its first value, as diffusers' tiling does. Default 32.
	SampleSize sampleSize `json:"sample_size"`
}

// sampleSize is config.json's sample_size, a number or a list.
type sampleSize int

func (s *sampleSize) UnmarshalJSON(b []byte) error {
	var n float64
	if err := json.Unmarshal(b, &n); err == nil {
		*s = sampleSize(n)
		return nil
	}
	var l []float64
	if err := json.Unmarshal(b, &l); err != nil || len(l) == 0 {
		return fmt.Errorf("sample_size %s: want a number or a list of them", b)
	}
	*s = sampleSize(l[0])
	return nil
}

// ParseConfig reads an AutoencoderKL config's JSON and checks it.
func ParseConfig(b []byte) (Config, error) {
	const op = "ParseConfig"
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, pkg.Errorf(op, errs.ErrFormat, "not an AutoencoderKL config: %v", err)
	}
	if c.ActFn == "" {
		c.ActFn = "silu"
	}
	if c.ScalingFactor == 0 {
		c.ScalingFactor = 0.18215
	}
	if c.SampleSize == 0 {
		c.SampleSize = 32
	}
	bad := func(kind error, field, format string, args ...any) error {
		return &errs.Error{Pkg: string(pkg), Op: op, Kind: kind, Field: field, Detail: fmt.Sprintf(format, args...)}
	}
	n := len(c.BlockOutChannels)
	switch {
	case c.InChannels < 1 || c.OutChannels < 1 || c.LatentChannels < 1:
		return Config{}, bad(errs.ErrArgument, "latent_channels", "in_channels %d, out_channels %d, latent_channels %d: want positive counts", c.InChannels, c.OutChannels, c.LatentChannels)
	case n == 0 || c.LayersPerBlock < 1 || c.NormNumGroups < 1:
		return Config{}, bad(errs.ErrArgument, "block_out_channels", "%v with layers_per_block %d, norm_num_groups %d: want blocks, layers and groups", c.BlockOutChannels, c.LayersPerBlock, c.NormNumGroups)
	case slices.ContainsFunc(c.BlockOutChannels, func(ch int) bool { return ch < 1 || ch%c.NormNumGroups != 0 }):
		return Config{}, bad(errs.ErrArgument, "block_out_channels", "%v: each a positive multiple of norm_num_groups %d", c.BlockOutChannels, c.NormNumGroups)
	case c.ActFn != "silu":
		return Config{}, bad(errs.ErrUnsupported, "act_fn", "%q: SD's VAEs use silu", c.ActFn)
	case c.ShiftFactor != nil && *c.ShiftFactor != 0, len(c.LatentsMean) > 0:
		return Config{}, bad(errs.ErrUnsupported, "shift_factor", "latents shifted or normalised per channel (SD3's and Flux's VAEs) are not implemented")
	}
	for _, t := range c.DownBlockTypes {
		if t != "DownEncoderBlock2D" {
			return Config{}, bad(errs.ErrUnsupported, "down_block_types", "%q: only DownEncoderBlock2D is implemented", t)
		}
	}
	for _, t := range c.UpBlockTypes {
		if t != "UpDecoderBlock2D" {
			return Config{}, bad(errs.ErrUnsupported, "up_block_types", "%q: only UpDecoderBlock2D is implemented", t)
		}
	}
	if (len(c.DownBlockTypes) != 0 && len(c.DownBlockTypes) != n) || (len(c.UpBlockTypes) != 0 && len(c.UpBlockTypes) != n) {
		return Config{}, bad(errs.ErrArgument, "block_out_channels", "%d blocks with %d down and %d up block types: want one each", n, len(c.DownBlockTypes), len(c.UpBlockTypes))
	}
	return c, nil
}

// LoadConfig reads a vae folder's config.json.
func LoadConfig(path string) (Config, error) {
	b, err := pkg.ReadFile("LoadConfig", path)
	if err != nil {
		return Config{}, err
	}
	c, err := ParseConfig(b)
	return c, errs.AtPath(err, path)
}

// Factor is how many pixels a latent spans on each side.
func (c Config) Factor() int { return 1 << (len(c.BlockOutChannels) - 1) }

func on(b *bool) bool { return b == nil || *b }

// Model is an AutoencoderKL. Its methods are safe for concurrent use.
type Model struct {
	cfg   Config
	dev   candle.Device
	dtype candle.DType
	enc   *encoder
	dec   *decoder
	quant *nn.Conv2d // nil without quant_conv
	post  *nn.Conv2d // nil without post_quant_conv
}

// New loads the VAE's weights onto dev in dtype. A missing or mis-shaped
// weight is an error that names it.
func New(w candle.Weights, cfg Config, dev candle.Device, dtype candle.DType) (*Model, error) {
	const op = "New"
	vb, err := models.VarBuilder(w, dev, dtype)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	m := &Model{cfg: cfg, dev: dev, dtype: dtype}
	l := &loader{vb: vb, groups: cfg.NormNumGroups}
	m.dec = l.decoder(cfg)
	m.enc = l.encoder(cfg)
	lat := cfg.LatentChannels
	if on(cfg.UseQuantConv) {
		m.quant = l.conv("quant_conv", 2*lat, 2*lat, 1, 1, 0)
	}
	if on(cfg.UsePostQuantConv) {
		m.post = l.conv("post_quant_conv", lat, lat, 1, 1, 0)
	}
	if l.err != nil {
		m.Close()
		return nil, pkg.Wrap(op, l.err)
	}
	return m, nil
}

// Config is the VAE's config.
func (m *Model) Config() Config { return m.cfg }

// DType is the dtype the model runs in: its latents' and images'.
func (m *Model) DType() candle.DType { return m.dtype }

// Close frees the weights. Closing twice does nothing.
func (m *Model) Close() error {
	if m.dec != nil {
		m.dec.close()
		m.dec = nil
	}
	if m.enc != nil {
		m.enc.close()
		m.enc = nil
	}
	closeConv(m.quant, m.post)
	m.quant, m.post = nil, nil
	return nil
}

// Decode turns latents as the UNet sees them (scaled by scaling_factor)
// into images (batch, out_channels, height·f, width·f) in about [-1, 1],
// in the model's dtype.
func (m *Model) Decode(latents *candle.Tensor) (*candle.Tensor, error) {
	const op = "Decode"
	if m.dec == nil {
		return nil, pkg.Errorf(op, errs.ErrClosed, "the VAE is closed")
	}
	if err := m.checkInput(op, latents, m.cfg.LatentChannels, 1); err != nil {
		return nil, err
	}
	p := models.NewPass()
	defer p.Close()
	z := p.T(p.In(latents).Affine(1/m.cfg.ScalingFactor, 0))
	if m.post != nil {
		z = p.T(m.post.Forward(z))
	}
	y := m.dec.forward(p, z)
	if p.Err != nil {
		return nil, pkg.Wrap(op, p.Err)
	}
	return p.Keep(y), nil
}

// The tiling of DecodeTiled: tiles overlap by a quarter.
const tileOverlap = 0.25

// DecodeTiled is Decode in overlapping tiles, for images whose decode
// would not fit in memory: the latents are cut into tiles of
// sample_size/f latents, a quarter overlapping, each decoded alone, and
// each tile's first quarter blended linearly into the tiles above and on
// its left, as diffusers' AutoencoderKL.tiled_decode (same tiles, same
// weights, same result). Latents no larger than a tile are decoded
// whole. Tiles see no context beyond their edges, so the image differs
// a little from Decode's; the memory of the activations grows with the
// tile, not the image.
func (m *Model) DecodeTiled(latents *candle.Tensor) (*candle.Tensor, error) {
	const op = "DecodeTiled"
	if m.dec == nil {
		return nil, pkg.Errorf(op, errs.ErrClosed, "the VAE is closed")
	}
	if err := m.checkInput(op, latents, m.cfg.LatentChannels, 1); err != nil {
		return nil, err
	}
	sample := int(m.cfg.SampleSize)
	tile := sample / m.cfg.Factor()
	if s := latents.Shape(); s[2] <= tile && s[3] <= tile || tile < 1 {
		return m.Decode(latents)
	}
	p := models.NewPass()
	defer p.Close()
	z := p.T(p.In(latents).Affine(1/m.cfg.ScalingFactor, 0))
	y := tiled(p, z, tile, sample, func(t *candle.Tensor) *candle.Tensor {
		if m.post != nil {
			t = p.T(m.post.Forward(t))
		}
		return m.dec.forward(p, t)
	})
	if p.Err != nil {
		return nil, pkg.Wrap(op, p.Err)
	}
	return p.Keep(y), nil
}

// EncodeTiled is Encode in overlapping tiles of sample_size pixels, a
// quarter overlapping, their latents blended as DecodeTiled blends its
// tiles: diffusers' AutoencoderKL tiled encoding. Images no larger than
// a tile are encoded whole.
func (m *Model) EncodeTiled(images *candle.Tensor) (*candle.Tensor, error) {
	const op = "EncodeTiled"
	if m.enc == nil {
		return nil, pkg.Errorf(op, errs.ErrClosed, "the VAE is closed")
	}
	if err := m.checkInput(op, images, m.cfg.InChannels, m.cfg.Factor()); err != nil {
		return nil, err
	}
	sample := int(m.cfg.SampleSize)
	tile := sample / m.cfg.Factor()
	if s := images.Shape(); s[2] <= sample && s[3] <= sample || tile < 1 {
		return m.Encode(images)
	}
	p := models.NewPass()
	defer p.Close()
	h := tiled(p, p.In(images), sample, tile, func(t *candle.Tensor) *candle.Tensor {
		h := m.enc.forward(p, t)
		if m.quant != nil {
			h = p.T(m.quant.Forward(h))
		}
		return h
	})
	mean := p.T(p.T(h.Narrow(1, 0, m.cfg.LatentChannels)).Affine(m.cfg.ScalingFactor, 0))
	if p.Err != nil {
		return nil, pkg.Wrap(op, p.Err)
	}
	return p.Keep(p.T(mean.Contiguous())), nil
}

// tiled runs f on tiles of x (batch, channels, height, width) of in×in,
// a quarter overlapping, each of whose outputs is out×out (less at the
// edges), and puts the outputs together: each one's first quarter of out
// blended linearly into the tiles above and on its left, then cut to
// its first three quarters.
func tiled(p *models.Pass, x *candle.Tensor, in, out int, f func(*candle.Tensor) *candle.Tensor) *candle.Tensor {
	if p.Err != nil {
		return nil
	}
	s := x.Shape()
	h, w := s[2], s[3]
	step := max(int(float64(in)*(1-tileOverlap)), 1)
	blend := int(float64(out) * tileOverlap)
	keep := out - blend
	var rows [][]*candle.Tensor
	for i := 0; i < h && p.Err == nil; i += step {
		var row []*candle.Tensor
		for j := 0; j < w && p.Err == nil; j += step {
			t := p.T(p.T(p.T(x.Narrow(2, i, min(in, h-i))).Narrow(3, j, min(in, w-j))).Contiguous())
			row = append(row, p.Block(t, f))
		}
		rows = append(rows, row)
	}
	var parts []*candle.Tensor
	for i, row := range rows {
		var cols []*candle.Tensor
		for j := range row {
			if p.Err != nil {
				return nil
			}
			if i > 0 {
				row[j] = blendEdge(p, rows[i-1][j], row[j], blend, 2)
			}
			if j > 0 {
				row[j] = blendEdge(p, row[j-1], row[j], blend, 3)
			}
			t := row[j]
			ts := t.Shape()
			cols = append(cols, p.T(p.T(t.Narrow(2, 0, min(keep, ts[2]))).Narrow(3, 0, min(keep, ts[3]))))
		}
		parts = append(parts, p.T(candle.Cat(cols, 3)))
	}
	return p.T(candle.Cat(parts, 2))
}

// blendEdge blends the last n rows (dim 2) or columns (dim 3) of a into
// the first n of b: b's k-th becomes a's (n−k)-th from its end·(1 − k/n)
// + b's·k/n, n at most either's size.
func blendEdge(p *models.Pass, a, b *candle.Tensor, n, dim int) *candle.Tensor {
	if p.Err != nil {
		return nil
	}
	la, lb := a.Shape()[dim], b.Shape()[dim]
	n = min(n, la, lb)
	if n == 0 {
		return b
	}
	wa, wb := make([]float32, n), make([]float32, n)
	for k := range n {
		wa[k], wb[k] = float32(1-float64(k)/float64(n)), float32(float64(k)/float64(n))
	}
	shape := []int{1, 1, 1, 1}
	shape[dim] = n
	weight := func(v []float32) *candle.Tensor {
		t := p.Own(candle.FromSlice(a.Device(), v, shape...))
		if p.Err != nil || a.DType() == candle.F32 {
			return t
		}
		return p.T(t.ToDType(a.DType()))
	}
	edge := p.T(p.T(p.T(a.Narrow(dim, la-n, n)).Mul(weight(wa))).Add(p.T(p.T(b.Narrow(dim, 0, n)).Mul(weight(wb)))))
	if n == lb {
		return edge
	}
	return p.T(candle.Cat([]*candle.Tensor{edge, p.T(b.Narrow(dim, n, lb-n))}, dim))
}

// Encode turns images (batch, in_channels, height, width) in [-1, 1],
// height and width multiples of f, into latents as the UNet sees them:
// the mode of the encoder's distribution (its mean), times scaling_factor.
func (m *Model) Encode(images *candle.Tensor) (*candle.Tensor, error) {
	const op = "Encode"
	if m.enc == nil {
		return nil, pkg.Errorf(op, errs.ErrClosed, "the VAE is closed")
	}
	if err := m.checkInput(op, images, m.cfg.InChannels, m.cfg.Factor()); err != nil {
		return nil, err
	}
	p := models.NewPass()
	defer p.Close()
	h := m.enc.forward(p, p.In(images))
	if m.quant != nil {
		h = p.T(m.quant.Forward(h))
	}
	mean := p.T(h.Narrow(1, 0, m.cfg.LatentChannels))
	z := p.T(mean.Affine(m.cfg.ScalingFactor, 0))
	if p.Err != nil {
		return nil, pkg.Wrap(op, p.Err)
	}
	return p.Keep(p.T(z.Contiguous())), nil
}

func (m *Model) checkInput(op string, x *candle.Tensor, channels, multiple int) error {
	if x == nil {
		return pkg.Errorf(op, errs.ErrArgument, "nil tensor")
	}
	s := x.Shape()
	if len(s) != 4 || s[1] != channels || s[0] < 1 || s[2] < 1 || s[3] < 1 || s[2]%multiple != 0 || s[3]%multiple != 0 {
		return pkg.Errorf(op, errs.ErrShape, "shape %v: want (batch, %d, height, width), height and width multiples of %d", s, channels, multiple)
	}
	if x.DType() != m.dtype {
		return pkg.Errorf(op, errs.ErrDType, "%s input to a %s VAE: convert it first (ToDType)", x.DType(), m.dtype)
	}
	if x.Device() != m.dev {
		return pkg.Errorf(op, errs.ErrDevice, "input on %s, VAE on %s", x.Device(), m.dev)
	}
	return nil
}

// loader loads weights and keeps the first error, so that the blocks
// read as lists of their parts.
type loader struct {
	vb     *nn.VarBuilder
	groups int
	err    error
}

func (l *loader) conv(name string, in, out, k, stride, pad int) *nn.Conv2d {
	if l.err != nil {
		return nil
	}
	c, err := nn.NewConv2d(l.vb, name, in, out, k, candle.Conv2dParams{Stride: [2]int{stride, stride}, Padding: [2]int{pad, pad}}, true)
	l.err = err
	return c
}

func (l *loader) norm(name string, ch int) *nn.GroupNorm {
	if l.err != nil {
		return nil
	}
	n, err := nn.NewGroupNorm(l.vb, name, l.groups, ch, 1e-6, true)
	l.err = err
	return n
}

func (l *loader) linear(name string, in, out int) *nn.Linear {
	if l.err != nil {
		return nil
	}
	x, err := nn.NewLinear(l.vb, name, in, out, true)
	l.err = err
	return x
}

func closeConv(cs ...*nn.Conv2d) {
	for _, c := range cs {
		if c != nil {
			c.Close()
		}
	}
}

func closeNorm(ns ...*nn.GroupNorm) {
	for _, n := range ns {
		if n != nil {
			n.Close()
		}
	}
}

// resnet is diffusers' ResnetBlock2D without a time embedding:
// x + conv2(silu(norm2(conv1(silu(norm1(x)))))), x through a 1×1
// convolution where the channels change.
type resnet struct {
	norm1, norm2 *nn.GroupNorm
	conv1, conv2 *nn.Conv2d
	shortcut     *nn.Conv2d
}

func (l *loader) resnet(name string, in, out int) *resnet {
	r := &resnet{norm1: l.norm(name+".norm1", in), conv1: l.conv(name+".conv1", in, out, 3, 1, 1),
		norm2: l.norm(name+".norm2", out), conv2: l.conv(name+".conv2", out, out, 3, 1, 1)}
	if in != out {
		r.shortcut = l.conv(name+".conv_shortcut", in, out, 1, 1, 0)
	}
	return r
}

func (r *resnet) close() {
	closeNorm(r.norm1, r.norm2)
	closeConv(r.conv1, r.conv2, r.shortcut)
}

func (r *resnet) forward(p *models.Pass, x *candle.Tensor) *candle.Tensor {
	return p.Block(x, func(x *candle.Tensor) *candle.Tensor {
		n := p.T(r.norm1.ForwardSiLU(x))
		h := p.T(r.conv1.Forward(n))
		p.Drop(n)
		n = p.T(r.norm2.ForwardSiLU(h))
		p.Drop(h)
		h = p.T(r.conv2.Forward(n))
		p.Drop(n)
		if r.shortcut != nil {
			s := p.T(r.shortcut.Forward(x))
			p.Drop(x)
			x = s
		}
		return p.T(x.Add(h))
	})
}

// attention is the mid block's single-head self-attention over the
// spatial positions, with its GroupNorm and residual.
type attention struct {
	norm       *nn.GroupNorm
	q, k, v, o *nn.Linear
}

func (l *loader) attention(name string, ch int) *attention {
	return &attention{norm: l.norm(name+".group_norm", ch), q: l.linear(name+".to_q", ch, ch),
		k: l.linear(name+".to_k", ch, ch), v: l.linear(name+".to_v", ch, ch), o: l.linear(name+".to_out.0", ch, ch)}
}

func (a *attention) close() {
	closeNorm(a.norm)
	for _, x := range []*nn.Linear{a.q, a.k, a.v, a.o} {
		if x != nil {
			x.Close()
		}
	}
}

// forward is softmax(q·kᵀ/√c)·v over the h·w positions. The head is as
// wide as the channels (512 in SD's VAEs), beyond flashattn's 256: the
// scores are a product and a softmax, in F32, for c queries at a time,
// so that they take no more memory than the activation (not the (h·w)²
// of all the scores: 1 GiB at 1024² pixels).
func (a *attention) forward(p *models.Pass, x *candle.Tensor) *candle.Tensor {
	return p.Block(x, func(x *candle.Tensor) *candle.Tensor {
		s := x.Shape()
		b, c, hw := s[0], s[1], s[2]*s[3]
		h := p.T(p.T(p.T(a.norm.Forward(x)).Reshape(b, c, hw)).Transpose(1, 2)) // (b, hw, c)
		q, k, v := p.T(a.q.Forward(h)), p.T(a.k.Forward(h)), p.T(a.v.Forward(h))
		p.Drop(h)
		dt := x.DType()
		k32 := p.T(p.T(k.ToDType(candle.F32)).Transpose(1, 2))
		var parts []*candle.Tensor
		for i := 0; i < hw && p.Err == nil; i += c {
			parts = append(parts, p.Block(p.In(q), func(q *candle.Tensor) *candle.Tensor {
				q32 := p.T(p.T(q.Narrow(1, i, min(c, hw-i))).ToDType(candle.F32))
				scores := p.T(p.T(q32.Matmul(k32)).Affine(1/math.Sqrt(float64(c)), 0))
				w := p.T(p.T(scores.SoftmaxLastDim()).ToDType(dt))
				return p.T(w.Matmul(v))
			}))
		}
		p.Drop(q, k, v, k32)
		if p.Err != nil {
			return nil
		}
		o := parts[0]
		if len(parts) > 1 {
			o = p.T(candle.Cat(parts, 1))
			p.Drop(parts...)
		}
		y := p.T(a.o.Forward(o))                                        // (b, hw, c)
		y = p.T(p.T(p.T(y.Transpose(1, 2)).Contiguous()).Reshape(s...)) // (b, c, h, w)
		return p.T(x.Add(y))
	})
}

// mid is the mid block: resnet, attention, resnet.
type mid struct {
	r1, r2 *resnet
	att    *attention // nil without mid_block_add_attention
}

func (l *loader) mid(name string, ch int, att bool) *mid {
	m := &mid{r1: l.resnet(name+".resnets.0", ch, ch), r2: l.resnet(name+".resnets.1", ch, ch)}
	if att {
		m.att = l.attention(name+".attentions.0", ch)
	}
	return m
}

func (m *mid) close() {
	m.r1.close()
	m.r2.close()
	if m.att != nil {
		m.att.close()
	}
}

func (m *mid) forward(p *models.Pass, x *candle.Tensor) *candle.Tensor {
	x = m.r1.forward(p, x)
	if m.att != nil {
		x = m.att.forward(p, x)
	}
	return m.r2.forward(p, x)
}

// decoder is diffusers' Decoder: conv_in, the mid block, the up blocks
// (resnets, then a 2× nearest upsample and a convolution but in the
// last), GroupNorm, SiLU, conv_out.
type decoder struct {
	convIn, convOut *nn.Conv2d
	mid             *mid
	ups             []upBlock
	normOut         *nn.GroupNorm
}

type upBlock struct {
	resnets []*resnet
	up      *nn.Conv2d // nil in the last block
}

func (l *loader) decoder(c Config) *decoder {
	ch := slices.Clone(c.BlockOutChannels)
	slices.Reverse(ch)
	d := &decoder{convIn: l.conv("decoder.conv_in", c.LatentChannels, ch[0], 3, 1, 1),
		mid: l.mid("decoder.mid_block", ch[0], on(c.MidBlockAttention))}
	prev := ch[0]
	for i, out := range ch {
		name := fmt.Sprintf("decoder.up_blocks.%d", i)
		var u upBlock
		for j := range c.LayersPerBlock + 1 {
			in := out
			if j == 0 {
				in = prev
			}
			u.resnets = append(u.resnets, l.resnet(fmt.Sprintf("%s.resnets.%d", name, j), in, out))
		}
		if i < len(ch)-1 {
			u.up = l.conv(name+".upsamplers.0.conv", out, out, 3, 1, 1)
		}
		d.ups = append(d.ups, u)
		prev = out
	}
	d.normOut = l.norm("decoder.conv_norm_out", c.BlockOutChannels[0])
	d.convOut = l.conv("decoder.conv_out", c.BlockOutChannels[0], c.OutChannels, 3, 1, 1)
	return d
}

func (d *decoder) close() {
	closeConv(d.convIn, d.convOut)
	closeNorm(d.normOut)
	if d.mid != nil {
		d.mid.close()
	}
	for _, u := range d.ups {
		for _, r := range u.resnets {
			r.close()
		}
		closeConv(u.up)
	}
}

func (d *decoder) forward(p *models.Pass, z *candle.Tensor) *candle.Tensor {
	x := p.T(d.convIn.Forward(z))
	x = d.mid.forward(p, x)
	for _, u := range d.ups {
		for _, r := range u.resnets {
			x = r.forward(p, x)
		}
		if u.up != nil && p.Err == nil {
			x = p.Block(x, func(x *candle.Tensor) *candle.Tensor {
				s := x.Shape()
				up := p.T(x.UpsampleNearest2d(2*s[2], 2*s[3], candle.NCHW))
				p.Drop(x)
				return p.T(u.up.Forward(up))
			})
		}
	}
	return normSiLUConv(p, x, d.normOut, d.convOut)
}

// encoder is diffusers' Encoder: conv_in, the down blocks (resnets, then
// a stride-2 convolution over the input padded by one on the right and
// bottom but in the last), the mid block, GroupNorm, SiLU, and conv_out to
// the mean and log-variance.
type encoder struct {
	convIn, convOut *nn.Conv2d
	downs           []downBlock
	mid             *mid
	normOut         *nn.GroupNorm
}

type downBlock struct {
	resnets []*resnet
	down    *nn.Conv2d // nil in the last block
}

func (l *loader) encoder(c Config) *encoder {
	ch := c.BlockOutChannels
	e := &encoder{convIn: l.conv("encoder.conv_in", c.InChannels, ch[0], 3, 1, 1)}
	prev := ch[0]
	for i, out := range ch {
		name := fmt.Sprintf("encoder.down_blocks.%d", i)
		var d downBlock
		for j := range c.LayersPerBlock {
			in := out
			if j == 0 {
				in = prev
			}
			d.resnets = append(d.resnets, l.resnet(fmt.Sprintf("%s.resnets.%d", name, j), in, out))
		}
		if i < len(ch)-1 {
			d.down = l.conv(name+".downsamplers.0.conv", out, out, 3, 2, 0)
		}
		e.downs = append(e.downs, d)
		prev = out
	}
	last := ch[len(ch)-1]
	e.mid = l.mid("encoder.mid_block", last, on(c.MidBlockAttention))
	e.normOut = l.norm("encoder.conv_norm_out", last)
	e.convOut = l.conv("encoder.conv_out", last, 2*c.LatentChannels, 3, 1, 1)
	return e
}

func (e *encoder) close() {
	closeConv(e.convIn, e.convOut)
	closeNorm(e.normOut)
	if e.mid != nil {
		e.mid.close()
	}
	for _, d := range e.downs {
		for _, r := range d.resnets {
			r.close()
		}
		closeConv(d.down)
	}
}

func (e *encoder) forward(p *models.Pass, x *candle.Tensor) *candle.Tensor {
	x = p.T(e.convIn.Forward(x))
	for _, d := range e.downs {
		for _, r := range d.resnets {
			x = r.forward(p, x)
		}
		if d.down != nil && p.Err == nil {
			x = p.Block(x, func(x *candle.Tensor) *candle.Tensor { return p.T(d.down.Forward(padRightBottom(p, x))) })
		}
	}
	x = e.mid.forward(p, x)
	return normSiLUConv(p, x, e.normOut, e.convOut)
}

// normSiLUConv is conv(silu(norm(x))), x and the normalised x freed once
// read: the decoder's and the encoder's output.
func normSiLUConv(p *models.Pass, x *candle.Tensor, norm *nn.GroupNorm, conv *nn.Conv2d) *candle.Tensor {
	return p.Block(x, func(x *candle.Tensor) *candle.Tensor {
		n := p.T(norm.ForwardSiLU(x))
		p.Drop(x)
		return p.T(conv.Forward(n))
	})
}

// padRightBottom adds a column of zeros on the right and a row at the
// bottom of (N, C, H, W) images.
func padRightBottom(p *models.Pass, x *candle.Tensor) *candle.Tensor {
	s := x.Shape()
	col := p.Own(candle.Zeros(x.Device(), x.DType(), s[0], s[1], s[2], 1))
	x = p.T(candle.Cat([]*candle.Tensor{x, col}, 3))
	row := p.Own(candle.Zeros(x.Device(), x.DType(), s[0], s[1], 1, s[3]+1))
	return p.T(candle.Cat([]*candle.Tensor{x, row}, 2))
}
