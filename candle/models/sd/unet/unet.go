// Package unet is Stable Diffusion's denoiser, diffusers'
// UNet2DConditionModel, on package candle: SD 1.x, 2.x and SDXL (its
// added text and time conditioning) from a diffusers unet/ folder
// (config.json and safetensors weights), in F32, F16 or BF16, on a HIP
// device or the CPU. Its attention is package flashattn's on a GPU (head
// dims 40, 80, 160 and 64), its convolutions candle's.
package unet

import (
	"fmt"
	"math"
	"slices"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/nn"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/flashattn"
)

// pkg makes this package's errors.
const pkg errs.Package = "unet"

// Model is a UNet2DConditionModel. Its methods are safe for concurrent use.
type Model struct {
	cfg      Config
	dev      candle.Device
	dtype    candle.DType
	time1    *nn.Linear // time_embedding
	time2    *nn.Linear
	add1     *nn.Linear // add_embedding (SDXL), or nil
	add2     *nn.Linear
	convIn   *nn.Conv2d
	downs    []*block
	mid      *block
	ups      []*block
	normOut  *nn.GroupNorm
	convOut  *nn.Conv2d
	closers  []func()
	timeDim  int // the sinusoidal embedding's width: block_out_channels[0]
	addTime  int // addition_time_embed_dim
	addInput int // projection_class_embeddings_input_dim
}

// block is a down, mid or up block: resnets, each followed by a
// transformer where the block has cross-attention, then a resampler.
type block struct {
	resnets      []*resnet
	transformers []*transformer // nil entries in blocks without attention
	resample     *nn.Conv2d     // a stride-2 convolution (down) or after a 2× upsample (up), or nil
	up           bool
}

type resnet struct {
	norm1, norm2 *nn.GroupNorm
	conv1, conv2 *nn.Conv2d
	shortcut     *nn.Conv2d
	temb         *nn.Linear
}

type transformer struct {
	norm    *nn.GroupNorm
	inL     *nn.Linear // proj_in as a linear (use_linear_projection), or
	inC     *nn.Conv2d // as a 1×1 convolution
	outL    *nn.Linear
	outC    *nn.Conv2d
	blocks  []*basic
	heads   int
	channel int
}

type basic struct {
	norm1, norm2, norm3 *nn.LayerNorm
	self, cross         *attention
	ffIn, ffOut         *nn.Linear
}

type attention struct {
	q, k, v, out *nn.Linear
	heads        int
}

// loader loads weights, keeps the first error and what to close.
type loader struct {
	vb     *nn.VarBuilder
	cfg    Config
	err    error
	closes []func()
}

func (l *loader) linear(name string, in, out int, bias bool) *nn.Linear {
	if l.err != nil {
		return nil
	}
	x, err := nn.NewLinear(l.vb, name, in, out, bias)
	if l.err = err; err == nil {
		l.closes = append(l.closes, x.Close)
	}
	return x
}

func (l *loader) conv(name string, in, out, k, stride, pad int) *nn.Conv2d {
	if l.err != nil {
		return nil
	}
	c, err := nn.NewConv2d(l.vb, name, in, out, k, candle.Conv2dParams{Stride: [2]int{stride, stride}, Padding: [2]int{pad, pad}}, true)
	if l.err = err; err == nil {
		l.closes = append(l.closes, c.Close)
	}
	return c
}

func (l *loader) groupNorm(name string, ch int, eps float64) *nn.GroupNorm {
	if l.err != nil {
		return nil
	}
	n, err := nn.NewGroupNorm(l.vb, name, l.cfg.NormNumGroups, ch, eps, true)
	if l.err = err; err == nil {
		l.closes = append(l.closes, n.Close)
	}
	return n
}

func (l *loader) layerNorm(name string, ch int) *nn.LayerNorm {
	if l.err != nil {
		return nil
	}
	n, err := nn.NewLayerNorm(l.vb, name, ch, 1e-5, true)
	if l.err = err; err == nil {
		l.closes = append(l.closes, n.Close)
	}
	return n
}

func (l *loader) resnet(name string, in, out, temb int) *resnet {
	eps := l.cfg.NormEps
	r := &resnet{norm1: l.groupNorm(name+".norm1", in, eps), conv1: l.conv(name+".conv1", in, out, 3, 1, 1),
		temb: l.linear(name+".time_emb_proj", temb, out, true), norm2: l.groupNorm(name+".norm2", out, eps),
		conv2: l.conv(name+".conv2", out, out, 3, 1, 1)}
	if in != out {
		r.shortcut = l.conv(name+".conv_shortcut", in, out, 1, 1, 0)
	}
	return r
}

func (l *loader) attention(name string, dim, ctx, heads int) *attention {
	return &attention{q: l.linear(name+".to_q", dim, dim, false), k: l.linear(name+".to_k", ctx, dim, false),
		v: l.linear(name+".to_v", ctx, dim, false), out: l.linear(name+".to_out.0", dim, dim, true), heads: heads}
}

func (l *loader) transformer(name string, ch, heads, layers int) *transformer {
	t := &transformer{norm: l.groupNorm(name+".norm", ch, 1e-6), heads: heads, channel: ch}
	if l.cfg.UseLinearProjection {
		t.inL, t.outL = l.linear(name+".proj_in", ch, ch, true), l.linear(name+".proj_out", ch, ch, true)
	} else {
		t.inC, t.outC = l.conv(name+".proj_in", ch, ch, 1, 1, 0), l.conv(name+".proj_out", ch, ch, 1, 1, 0)
	}
	for k := range layers {
		b := fmt.Sprintf("%s.transformer_blocks.%d", name, k)
		t.blocks = append(t.blocks, &basic{
			norm1: l.layerNorm(b+".norm1", ch), self: l.attention(b+".attn1", ch, ch, heads),
			norm2: l.layerNorm(b+".norm2", ch), cross: l.attention(b+".attn2", ch, l.cfg.CrossAttentionDim, heads),
			norm3: l.layerNorm(b+".norm3", ch), ffIn: l.linear(b+".ff.net.0.proj", ch, 8*ch, true),
			ffOut: l.linear(b+".ff.net.2", 4*ch, ch, true)})
	}
	return t
}

// New loads a UNet's weights onto dev in dtype. A missing or mis-shaped
// weight is an error that names it.
func New(w candle.Weights, cfg Config, dev candle.Device, dtype candle.DType) (*Model, error) {
	const op = "New"
	vb, err := models.VarBuilder(w, dev, dtype)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	l := &loader{vb: vb, cfg: cfg}
	ch := cfg.BlockOutChannels
	n := len(ch)
	heads, layers := cfg.NumAttentionHeads.per(n), cfg.TransformerLayersPerBlock.per(n)
	temb := 4 * ch[0]
	m := &Model{cfg: cfg, dev: dev, dtype: dtype, timeDim: ch[0]}
	m.time1 = l.linear("time_embedding.linear_1", ch[0], temb, true)
	m.time2 = l.linear("time_embedding.linear_2", temb, temb, true)
	if cfg.TextTime() {
		m.addTime, m.addInput = cfg.AdditionTimeEmbedDim, cfg.ProjectionClassEmbeddingsInput
		if m.addTime < 2 || m.addTime%2 != 0 || m.addInput <= 6*m.addTime {
			return nil, pkg.Errorf(op, errs.ErrArgument, "addition_time_embed_dim %d, projection_class_embeddings_input_dim %d: want an even time width and room for the pooled text embedding", m.addTime, m.addInput)
		}
		m.add1 = l.linear("add_embedding.linear_1", m.addInput, temb, true)
		m.add2 = l.linear("add_embedding.linear_2", temb, temb, true)
	}
	m.convIn = l.conv("conv_in", cfg.InChannels, ch[0], 3, 1, 1)
	out := ch[0]
	for i := range n {
		in := out
		out = ch[i]
		b := &block{}
		for j := range cfg.LayersPerBlock {
			name := fmt.Sprintf("down_blocks.%d", i)
			rin := out
			if j == 0 {
				rin = in
			}
			b.resnets = append(b.resnets, l.resnet(fmt.Sprintf("%s.resnets.%d", name, j), rin, out, temb))
			var t *transformer
			if cfg.DownBlockTypes[i] == "CrossAttnDownBlock2D" {
				t = l.transformer(fmt.Sprintf("%s.attentions.%d", name, j), out, heads[i], layers[i])
			}
			b.transformers = append(b.transformers, t)
		}
		if i < n-1 {
			b.resample = l.conv(fmt.Sprintf("down_blocks.%d.downsamplers.0.conv", i), out, out, 3, 2, 1)
		}
		m.downs = append(m.downs, b)
	}
	last := ch[n-1]
	// The mid block is a resnet, a transformer and a resnet.
	m.mid = &block{resnets: []*resnet{l.resnet("mid_block.resnets.0", last, last, temb), l.resnet("mid_block.resnets.1", last, last, temb)},
		transformers: []*transformer{l.transformer("mid_block.attentions.0", last, heads[n-1], layers[n-1])}}
	rev := slices.Clone(ch)
	slices.Reverse(rev)
	rheads, rlayers := slices.Clone(heads), slices.Clone(layers)
	slices.Reverse(rheads)
	slices.Reverse(rlayers)
	out = rev[0]
	for i := range n {
		prev := out
		out = rev[i]
		in := rev[min(i+1, n-1)]
		b := &block{up: true}
		name := fmt.Sprintf("up_blocks.%d", i)
		for j := range cfg.LayersPerBlock + 1 {
			skip := out
			if j == cfg.LayersPerBlock {
				skip = in
			}
			rin := out
			if j == 0 {
				rin = prev
			}
			b.resnets = append(b.resnets, l.resnet(fmt.Sprintf("%s.resnets.%d", name, j), rin+skip, out, temb))
			var t *transformer
			if cfg.UpBlockTypes[i] == "CrossAttnUpBlock2D" {
				t = l.transformer(fmt.Sprintf("%s.attentions.%d", name, j), out, rheads[i], rlayers[i])
			}
			b.transformers = append(b.transformers, t)
		}
		if i < n-1 {
			b.resample = l.conv(name+".upsamplers.0.conv", out, out, 3, 1, 1)
		}
		m.ups = append(m.ups, b)
	}
	m.normOut = l.groupNorm("conv_norm_out", ch[0], cfg.NormEps)
	m.convOut = l.conv("conv_out", ch[0], cfg.OutChannels, 3, 1, 1)
	m.closers = l.closes
	if l.err != nil {
		m.Close()
		return nil, pkg.Wrap(op, l.err)
	}
	return m, nil
}

// Config is the UNet's config.
func (m *Model) Config() Config { return m.cfg }

// Close frees the weights. Closing twice does nothing.
func (m *Model) Close() error {
	for _, c := range m.closers {
		c()
	}
	m.closers = nil
	m.convIn = nil
	return nil
}

// Cond is a step's conditioning.
type Cond struct {
	// Text is the text encoder's hidden states: (batch, tokens,
	// cross_attention_dim).
	Text *candle.Tensor
	// TextEmbeds and TimeIDs are SDXL's added conditioning: the pooled,
	// projected text embedding (batch, width) and six numbers a sample
	// (original height and width, crop top and left, target height and
	// width).
	TextEmbeds *candle.Tensor
	TimeIDs    [][6]float64
}

// Forward predicts the noise (or v) of latents x (batch, in_channels,
// height, width; height and width multiples of 2^(blocks−1)) at timestep
// t, as a tensor of the caller's own in the model's dtype.
func (m *Model) Forward(x *candle.Tensor, t float64, c Cond) (*candle.Tensor, error) {
	const op = "Forward"
	if m.convIn == nil {
		return nil, pkg.Errorf(op, errs.ErrClosed, "the UNet is closed")
	}
	if err := m.check(op, x, c); err != nil {
		return nil, err
	}
	p := models.NewPass()
	defer p.Close()
	y := m.body(p, p.In(x), m.embedding(p, t, x.Shape()[0], c), p.In(c.Text))
	if p.Err != nil {
		return nil, pkg.Wrap(op, p.Err)
	}
	return p.Keep(y), nil
}

// embedding is SiLU of the time embedding at t, with SDXL's added
// embedding of c: (1, 4·block_out[0]), or (b, …) with the added one.
func (m *Model) embedding(p *models.Pass, t float64, b int, c Cond) *candle.Tensor {
	emb := m.timeEmbedding(p, t)
	if m.add1 != nil {
		emb = p.T(emb.Add(m.addEmbedding(p, b, c)))
	}
	return p.T(emb.Silu())
}

// body is the forward pass from conv_in to conv_out, given the SiLU of the
// embedding; its result is p's.
func (m *Model) body(p *models.Pass, x, embSilu, text *candle.Tensor) *candle.Tensor {
	h := p.T(m.convIn.Forward(x))
	// The skips are views of their own: a block takes the handle it is
	// given (models.Pass.Block).
	skips := []*candle.Tensor{p.In(h)}
	for _, blk := range m.downs {
		for j, r := range blk.resnets {
			h = r.forward(p, h, embSilu)
			if tr := blk.transformers[j]; tr != nil {
				h = tr.forward(p, h, text)
			}
			skips = append(skips, p.In(h))
		}
		if blk.resample != nil {
			down := p.T(blk.resample.Forward(h))
			p.Drop(h) // its skip keeps it
			h = down
			skips = append(skips, p.In(h))
		}
	}
	h = m.mid.resnets[0].forward(p, h, embSilu)
	for j, tr := range m.mid.transformers {
		h = tr.forward(p, h, text)
		h = m.mid.resnets[j+1].forward(p, h, embSilu)
	}
	for _, blk := range m.ups {
		for j, r := range blk.resnets {
			skip := skips[len(skips)-1]
			skips = skips[:len(skips)-1]
			cat := p.T(candle.Cat([]*candle.Tensor{h, skip}, 1))
			p.Drop(h, skip)
			h = r.forward(p, cat, embSilu)
			if tr := blk.transformers[j]; tr != nil {
				h = tr.forward(p, h, text)
			}
		}
		if blk.resample != nil && p.Err == nil {
			h = p.Block(h, func(h *candle.Tensor) *candle.Tensor {
				s := h.Shape()
				up := p.T(h.UpsampleNearest2d(2*s[2], 2*s[3], candle.NCHW))
				p.Drop(h)
				return p.T(blk.resample.Forward(up))
			})
		}
	}
	return p.Block(h, func(h *candle.Tensor) *candle.Tensor {
		n := p.T(m.normOut.ForwardSiLU(h))
		p.Drop(h)
		return p.T(m.convOut.Forward(n))
	})
}

func (m *Model) check(op string, x *candle.Tensor, c Cond) error {
	if x == nil || c.Text == nil {
		return pkg.Errorf(op, errs.ErrArgument, "no latents or no text conditioning")
	}
	f := 1 << (len(m.cfg.BlockOutChannels) - 1)
	s := x.Shape()
	if len(s) != 4 || s[0] < 1 || s[1] != m.cfg.InChannels || s[2] < 1 || s[3] < 1 || s[2]%f != 0 || s[3]%f != 0 {
		return pkg.Errorf(op, errs.ErrShape, "latents of shape %v: want (batch, %d, height, width), height and width multiples of %d", s, m.cfg.InChannels, f)
	}
	ts := c.Text.Shape()
	if len(ts) != 3 || ts[0] != s[0] || ts[2] != m.cfg.CrossAttentionDim {
		return pkg.Errorf(op, errs.ErrShape, "text of shape %v: want (%d, tokens, %d)", ts, s[0], m.cfg.CrossAttentionDim)
	}
	for _, t := range []*candle.Tensor{x, c.Text} {
		if t.DType() != m.dtype {
			return pkg.Errorf(op, errs.ErrDType, "%s input to a %s UNet: convert it first (ToDType)", t.DType(), m.dtype)
		}
	}
	if m.add1 != nil {
		if c.TextEmbeds == nil || len(c.TimeIDs) != s[0] {
			return pkg.Errorf(op, errs.ErrArgument, "an SDXL UNet needs TextEmbeds and one TimeIDs a sample (%d)", s[0])
		}
		es := c.TextEmbeds.Shape()
		if len(es) != 2 || es[0] != s[0] || es[1] != m.addInput-6*m.addTime || c.TextEmbeds.DType() != m.dtype {
			return pkg.Errorf(op, errs.ErrShape, "text embeds %s %v: want %s (%d, %d)", c.TextEmbeds.DType(), es, m.dtype, s[0], m.addInput-6*m.addTime)
		}
	}
	return nil
}

// sinusoidal is diffusers' get_timestep_embedding of v in dim values.
func (m *Model) sinusoidal(dst []float64, v float64, dim int) {
	half := dim / 2
	for i := range half {
		e := v * math.Exp(-math.Log(10000)*float64(i)/(float64(half)-m.cfg.FreqShift))
		s, c := math.Sincos(e)
		if m.cfg.flip() {
			dst[i], dst[half+i] = c, s
		} else {
			dst[i], dst[half+i] = s, c
		}
	}
}

// timeEmbedding is time_embedding(sinusoidal(t)): (1, 4·block_out[0]).
func (m *Model) timeEmbedding(p *models.Pass, t float64) *candle.Tensor {
	v := make([]float64, m.timeDim)
	m.sinusoidal(v, t, m.timeDim)
	e := p.Own(candle.FromSlice(m.dev, v, 1, m.timeDim))
	e = p.T(e.ToDType(m.dtype))
	e = p.T(p.T(m.time1.Forward(e)).Silu())
	return p.T(m.time2.Forward(e))
}

// addEmbedding is SDXL's add_embedding(cat(text embeds, sinusoidal(time
// ids))): (batch, 4·block_out[0]).
func (m *Model) addEmbedding(p *models.Pass, b int, c Cond) *candle.Tensor {
	v := make([]float64, b*6*m.addTime)
	for i, ids := range c.TimeIDs {
		for k, id := range ids {
			m.sinusoidal(v[(i*6+k)*m.addTime:], id, m.addTime)
		}
	}
	ids := p.T(p.Own(candle.FromSlice(m.dev, v, b, 6*m.addTime)).ToDType(m.dtype))
	in := p.T(candle.Cat([]*candle.Tensor{p.In(c.TextEmbeds), ids}, 1))
	e := p.T(p.T(m.add1.Forward(in)).Silu())
	return p.T(m.add2.Forward(e))
}

// forward is ResnetBlock2D with the time embedding added between its
// convolutions.
func (r *resnet) forward(p *models.Pass, x, embSilu *candle.Tensor) *candle.Tensor {
	return p.Block(x, func(x *candle.Tensor) *candle.Tensor {
		n := p.T(r.norm1.ForwardSiLU(x))
		h := p.T(r.conv1.Forward(n))
		p.Drop(n)
		te := p.T(r.temb.Forward(embSilu)) // (1 or b, out)
		s := te.Shape()
		ht := p.T(h.Add(p.T(te.Reshape(s[0], s[1], 1, 1))))
		p.Drop(h)
		n = p.T(r.norm2.ForwardSiLU(ht))
		p.Drop(ht)
		h = p.T(r.conv2.Forward(n))
		p.Drop(n)
		if r.shortcut != nil {
			sc := p.T(r.shortcut.Forward(x))
			p.Drop(x)
			x = sc
		}
		return p.T(x.Add(h))
	})
}

// forward is Transformer2DModel: GroupNorm, proj_in, the transformer
// blocks over the h·w positions, proj_out, the residual.
func (t *transformer) forward(p *models.Pass, x, text *candle.Tensor) *candle.Tensor {
	return p.Block(x, func(x *candle.Tensor) *candle.Tensor {
		s := x.Shape()
		b, c, hw := s[0], s[1], s[2]*s[3]
		// Each step drops what it read: the activations of a block's
		// steps are not all held to its end.
		step := func(h, y *candle.Tensor) *candle.Tensor {
			p.Drop(h)
			return y
		}
		seq := func(h *candle.Tensor) *candle.Tensor { // (b, c, h, w) → (b, hw, c)
			r := p.T(h.Reshape(b, c, hw))
			tr := p.T(r.Transpose(1, 2))
			p.Drop(h, r)
			return step(tr, p.T(tr.Contiguous()))
		}
		img := func(h *candle.Tensor) *candle.Tensor { // (b, hw, c) → (b, c, h, w)
			tr := p.T(h.Transpose(1, 2))
			p.Drop(h)
			c := step(tr, p.T(tr.Contiguous()))
			return step(c, p.T(c.Reshape(s...)))
		}
		h := p.T(t.norm.Forward(x))
		if t.inC != nil {
			h = seq(step(h, p.T(t.inC.Forward(h))))
		} else {
			h = seq(h)
			h = step(h, p.T(t.inL.Forward(h)))
		}
		for _, blk := range t.blocks {
			h = p.Block(h, func(h *candle.Tensor) *candle.Tensor { return blk.forward(p, h, text) })
		}
		if t.outC != nil {
			h = img(h)
			h = step(h, p.T(t.outC.Forward(h)))
		} else {
			h = img(step(h, p.T(t.outL.Forward(h))))
		}
		return p.T(x.Add(h))
	})
}

// forward is BasicTransformerBlock: self-attention, cross-attention to
// the text, and the GEGLU feed-forward, each after a LayerNorm and with
// its residual.
func (blk *basic) forward(p *models.Pass, x, text *candle.Tensor) *candle.Tensor {
	// residual adds f(norm(x)) to x, dropping what it no longer reads.
	residual := func(x *candle.Tensor, norm *nn.LayerNorm, f func(n *candle.Tensor) *candle.Tensor) *candle.Tensor {
		n := p.T(norm.Forward(x))
		y := f(n)
		p.Drop(n)
		out := p.T(x.Add(y))
		p.Drop(x, y)
		return out
	}
	x = residual(x, blk.norm1, func(n *candle.Tensor) *candle.Tensor { return blk.self.forward(p, n, n) })
	x = residual(x, blk.norm2, func(n *candle.Tensor) *candle.Tensor { return blk.cross.forward(p, n, text) })
	return residual(x, blk.norm3, func(n *candle.Tensor) *candle.Tensor {
		f := p.T(blk.ffIn.Forward(n)) // (b, s, 8c): hidden, then gate
		g := p.T(f.GEGLU())           // hidden · gelu(gate)
		p.Drop(f)
		o := p.T(blk.ffOut.Forward(g))
		p.Drop(g)
		return o
	})
}

// forward is multi-head attention of x's queries over ctx's keys and
// values.
func (a *attention) forward(p *models.Pass, x, ctx *candle.Tensor) *candle.Tensor {
	q := p.T(a.q.Forward(x))
	k := p.T(a.k.Forward(ctx))
	v := p.T(a.v.Forward(ctx))
	if p.Err != nil {
		return nil
	}
	qs, ks := q.Shape(), k.Shape()
	d := qs[2] / a.heads
	heads := func(t *candle.Tensor, s []int) *candle.Tensor { // a view: t's memory goes with it
		h := p.T(t.Reshape(s[0], s[1], a.heads, d))
		p.Drop(t)
		return h
	}
	q, k, v = heads(q, qs), heads(k, ks), heads(v, ks)
	if p.Err != nil {
		return nil
	}
	o := p.Own(nn.ScaledDotProductAttention(q, k, v, flashattn.Params{}))
	p.Drop(q, k, v)
	flat := p.T(o.Reshape(qs[0], qs[1], qs[2]))
	p.Drop(o)
	y := p.T(a.out.Forward(flat))
	p.Drop(flat)
	return y
}
