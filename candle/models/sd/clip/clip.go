// Package clip is the CLIP text encoder of Stable Diffusion on package
// candle: OpenAI's CLIP ViT-L/14 text model (SD 1.x), OpenCLIP's ViT-H
// and ViT-bigG (SD 2.x, and SDXL's second encoder with its projection),
// from a diffusers text_encoder/ or text_encoder_2/ folder (config.json
// and safetensors weights in transformers' names), in F32, F16 or BF16, on
// a HIP device or the CPU.
//
// Forward takes token windows (tokenizer.Tokenizer.EncodeWindows) and
// returns what the pipelines use: the last hidden state (SD 1.x's and
// 2.x's conditioning), the penultimate one (SDXL's, and "CLIP skip"), the
// pooled state and its projection (SDXL's added text embedding).
//
//	cfg, err := clip.LoadConfig(filepath.Join(dir, "text_encoder", "config.json"))
//	w, err := safetensors.Open(filepath.Join(dir, "text_encoder"))
//	enc, err := clip.New(w, cfg, dev, candle.F16)
//	out, err := enc.Forward(windows)
//	defer out.Close()
package clip

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/nn"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/flashattn"
)

// pkg makes this package's errors.
const pkg errs.Package = "clip"

// Config is a CLIPTextConfig (the folder's config.json).
type Config struct {
	Architectures    []string `json:"architectures"`
	VocabSize        int      `json:"vocab_size"`
	HiddenSize       int      `json:"hidden_size"`
	IntermediateSize int      `json:"intermediate_size"`
	Layers           int      `json:"num_hidden_layers"`
	Heads            int      `json:"num_attention_heads"`
	MaxPositions     int      `json:"max_position_embeddings"`
	// HiddenAct is quick_gelu (OpenAI's CLIP) or gelu (OpenCLIP's, the
	// erf form).
	HiddenAct    string  `json:"hidden_act"`
	LayerNormEps float64 `json:"layer_norm_eps"`
	// ProjectionDim is the projection's width, where the weights have
	// one (text_projection.weight: CLIPTextModelWithProjection).
	ProjectionDim int `json:"projection_dim"`
	// EOSTokenID picks the pooled position: 2, the value of the configs
	// written before transformers 4.31 (every SD checkpoint's), means the
	// position of each window's largest id (CLIP's EOS is its largest);
	// any other, that id's first position.
	EOSTokenID int `json:"eos_token_id"`
}

// ParseConfig reads a CLIPTextConfig's JSON and checks it.
func ParseConfig(b []byte) (Config, error) {
	const op = "ParseConfig"
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, pkg.Errorf(op, errs.ErrFormat, "not a CLIP text config: %v", err)
	}
	if c.LayerNormEps == 0 {
		c.LayerNormEps = 1e-5
	}
	bad := func(field, format string, args ...any) error {
		return &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrArgument, Field: field, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.VocabSize < 1:
		return Config{}, bad("vocab_size", "%d: want a positive size", c.VocabSize)
	case c.HiddenSize < 1 || c.Heads < 1 || c.HiddenSize%c.Heads != 0:
		return Config{}, bad("num_attention_heads", "hidden_size %d over %d heads: want a positive multiple", c.HiddenSize, c.Heads)
	case (c.HiddenSize/c.Heads)%8 != 0 || c.HiddenSize/c.Heads > 256:
		return Config{}, bad("num_attention_heads", "head dim %d: want a multiple of 8 up to 256", c.HiddenSize/c.Heads)
	case c.IntermediateSize < 1 || c.Layers < 1 || c.MaxPositions < 1:
		return Config{}, bad("num_hidden_layers", "intermediate_size %d, num_hidden_layers %d, max_position_embeddings %d: want positive sizes", c.IntermediateSize, c.Layers, c.MaxPositions)
	case c.HiddenAct != "quick_gelu" && c.HiddenAct != "gelu":
		return Config{}, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrUnsupported, Field: "hidden_act", Detail: fmt.Sprintf("%q: want quick_gelu or gelu", c.HiddenAct)}
	}
	return c, nil
}

// LoadConfig reads a text encoder folder's config.json.
func LoadConfig(path string) (Config, error) {
	b, err := pkg.ReadFile("LoadConfig", path)
	if err != nil {
		return Config{}, err
	}
	c, err := ParseConfig(b)
	return c, errs.AtPath(err, path)
}

// Model is a CLIP text encoder. Its methods are safe for concurrent use.
type Model struct {
	cfg    Config
	dev    candle.Device
	dtype  candle.DType
	tok    *nn.Embedding
	pos    *candle.Tensor // (positions, hidden)
	layers []*layer
	final  *nn.LayerNorm
	proj   *nn.Linear // nil without a projection
}

type layer struct {
	ln1, ln2 *nn.LayerNorm
	qkv      *nn.Linear // q, k and v projections fused: (3·hidden, hidden)
	out      *nn.Linear
	fc1, fc2 *nn.Linear
}

func (l *layer) close() {
	for _, n := range []*nn.LayerNorm{l.ln1, l.ln2} {
		if n != nil {
			n.Close()
		}
	}
	for _, x := range []*nn.Linear{l.qkv, l.out, l.fc1, l.fc2} {
		if x != nil {
			x.Close()
		}
	}
}

// New loads a text encoder's weights (transformers' names: text_model.*,
// or the same without text_model. as transformers 5 saves them, and
// text_projection.weight where the model has one) onto dev in dtype. A
// missing or mis-shaped weight is an error that names it.
func New(w candle.Weights, cfg Config, dev candle.Device, dtype candle.DType) (*Model, error) {
	const op = "New"
	vb, err := models.VarBuilder(w, dev, dtype)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	m := &Model{cfg: cfg, dev: dev, dtype: dtype}
	if err := m.load(vb, w); err != nil {
		m.Close()
		return nil, pkg.Wrap(op, err)
	}
	return m, nil
}

func (m *Model) load(vb *nn.VarBuilder, w candle.Weights) error {
	c := m.cfg
	h := c.HiddenSize
	tm := "text_model."
	if _, ok := w.Info(tm + "embeddings.token_embedding.weight"); !ok {
		if _, ok := w.Info("embeddings.token_embedding.weight"); ok {
			tm = ""
		}
	}
	var err error
	if m.tok, err = nn.NewEmbedding(vb, tm+"embeddings.token_embedding", c.VocabSize, h); err != nil {
		return err
	}
	if m.pos, err = vb.Get(tm+"embeddings.position_embedding.weight", c.MaxPositions, h); err != nil {
		return err
	}
	for i := range c.Layers {
		p := fmt.Sprintf("%sencoder.layers.%d.", tm, i)
		l := &layer{}
		m.layers = append(m.layers, l)
		if l.ln1, err = nn.NewLayerNorm(vb, p+"layer_norm1", h, c.LayerNormEps, true); err != nil {
			return err
		}
		if l.ln2, err = nn.NewLayerNorm(vb, p+"layer_norm2", h, c.LayerNormEps, true); err != nil {
			return err
		}
		if l.qkv, err = fused(vb, p+"self_attn.", h); err != nil {
			return err
		}
		if l.out, err = nn.NewLinear(vb, p+"self_attn.out_proj", h, h, true); err != nil {
			return err
		}
		if l.fc1, err = nn.NewLinear(vb, p+"mlp.fc1", h, c.IntermediateSize, true); err != nil {
			return err
		}
		if l.fc2, err = nn.NewLinear(vb, p+"mlp.fc2", c.IntermediateSize, h, true); err != nil {
			return err
		}
	}
	if m.final, err = nn.NewLayerNorm(vb, tm+"final_layer_norm", h, c.LayerNormEps, true); err != nil {
		return err
	}
	if info, ok := w.Info("text_projection.weight"); ok {
		if len(info.Shape) != 2 || (c.ProjectionDim != 0 && info.Shape[0] != c.ProjectionDim) {
			return pkg.Errorf("New", errs.ErrShape, "text_projection.weight has shape %v: want (projection_dim %d, hidden %d)", info.Shape, c.ProjectionDim, h)
		}
		if m.proj, err = nn.NewLinear(vb, "text_projection", h, info.Shape[0], false); err != nil {
			return err
		}
	}
	return nil
}

// fused loads the q, k and v projections as one (3·h, h) linear.
func fused(vb *nn.VarBuilder, prefix string, h int) (*nn.Linear, error) {
	var ws, bs []*candle.Tensor
	defer func() {
		for _, t := range append(ws, bs...) {
			t.Close()
		}
	}()
	for _, n := range []string{"q", "k", "v"} {
		l, err := nn.NewLinear(vb, prefix+n+"_proj", h, h, true)
		if err != nil {
			return nil, err
		}
		ws, bs = append(ws, l.W), append(bs, l.B)
	}
	w, err := candle.Cat(ws, 0)
	if err != nil {
		return nil, err
	}
	b, err := candle.Cat(bs, 0)
	if err != nil {
		w.Close()
		return nil, err
	}
	return &nn.Linear{W: w, B: b}, nil
}

// Config is the encoder's config.
func (m *Model) Config() Config { return m.cfg }

// HasProjection reports whether Forward's Output has Projected.
func (m *Model) HasProjection() bool { return m.proj != nil }

// Close frees the weights. Closing twice does nothing.
func (m *Model) Close() error {
	if m.tok != nil {
		m.tok.Close()
		m.tok = nil
	}
	if m.pos != nil {
		m.pos.Close()
		m.pos = nil
	}
	for _, l := range m.layers {
		l.close()
	}
	m.layers = nil
	if m.final != nil {
		m.final.Close()
		m.final = nil
	}
	if m.proj != nil {
		m.proj.Close()
		m.proj = nil
	}
	return nil
}

// Output is what Forward returns, in the model's dtype on its device; the
// caller closes it.
type Output struct {
	// Last is the last hidden state after the final LayerNorm:
	// (windows, tokens, hidden).
	Last *candle.Tensor
	// Penultimate is the last layer's input, without the final LayerNorm
	// (transformers' hidden_states[-2]): (windows, tokens, hidden).
	Penultimate *candle.Tensor
	// Pooled is Last at each window's EOS: (windows, hidden).
	Pooled *candle.Tensor
	// Projected is Pooled through the projection: (windows,
	// projection_dim); nil without one.
	Projected *candle.Tensor
}

// Close frees the tensors.
func (o *Output) Close() {
	for _, t := range []*candle.Tensor{o.Last, o.Penultimate, o.Pooled, o.Projected} {
		if t != nil {
			t.Close()
		}
	}
}

// Forward encodes windows of token ids, all of one length of at most
// max_position_embeddings (77 for every SD encoder), each id below
// vocab_size.
func (m *Model) Forward(windows [][]int32) (*Output, error) {
	const op = "Forward"
	if m.tok == nil {
		return nil, pkg.Errorf(op, errs.ErrClosed, "the encoder is closed")
	}
	b := len(windows)
	if b == 0 {
		return nil, pkg.Errorf(op, errs.ErrArgument, "no windows")
	}
	s := len(windows[0])
	if s < 1 || s > m.cfg.MaxPositions {
		return nil, pkg.Errorf(op, errs.ErrArgument, "windows of %d tokens: want 1 to %d (max_position_embeddings)", s, m.cfg.MaxPositions)
	}
	flat := make([]uint32, 0, b*s)
	rows := make([]uint32, b) // each window's pooled row in (b·s)
	for i, w := range windows {
		if len(w) != s {
			return nil, pkg.Errorf(op, errs.ErrArgument, "window %d has %d tokens and window 0 %d: they must be equal", i, len(w), s)
		}
		for j, id := range w {
			if id < 0 || int(id) >= m.cfg.VocabSize {
				return nil, pkg.Errorf(op, errs.ErrArgument, "window %d: token %d at %d is not in the vocabulary of %d", i, id, j, m.cfg.VocabSize)
			}
			flat = append(flat, uint32(id))
		}
		rows[i] = uint32(i*s + m.pooledAt(w))
	}
	h, heads := m.cfg.HiddenSize, m.cfg.Heads
	p := models.NewPass()
	defer p.Close()
	ids := p.Own(candle.FromSlice(m.dev, flat, b*s))
	x := p.T(m.tok.Table.IndexSelect(ids, 0)) // (b·s, h)
	x = p.T(p.T(x.Reshape(b, s, h)).Add(p.T(p.In(m.pos).Narrow(0, 0, s))))
	var pen *candle.Tensor
	for i, l := range m.layers {
		if i == len(m.layers)-1 {
			pen = p.T(x.Contiguous())
		}
		x = p.Block(x, func(x *candle.Tensor) *candle.Tensor { return m.layer(p, l, x, b, s, h, heads) })
	}
	last := p.T(m.final.Forward(x))
	idx := p.Own(candle.FromSlice(m.dev, rows, b))
	pooled := p.T(p.T(last.Reshape(b*s, h)).IndexSelect(idx, 0))
	var projected *candle.Tensor
	if m.proj != nil {
		projected = p.T(m.proj.Forward(pooled))
	}
	if p.Err != nil {
		return nil, pkg.Wrap(op, p.Err)
	}
	out := &Output{Last: p.Keep(last), Penultimate: p.Keep(pen), Pooled: p.Keep(pooled)}
	if projected != nil {
		out.Projected = p.Keep(projected)
	}
	return out, nil
}

// pooledAt is a window's pooled position (Config.EOSTokenID).
func (m *Model) pooledAt(w []int32) int {
	if m.cfg.EOSTokenID == 2 {
		return slices.Index(w, slices.Max(w))
	}
	if i := slices.Index(w, int32(m.cfg.EOSTokenID)); i >= 0 {
		return i
	}
	return len(w) - 1
}

// layer is one pre-LayerNorm transformer layer: causal self-attention,
// then the MLP, each with its residual.
func (m *Model) layer(p *models.Pass, l *layer, x *candle.Tensor, b, s, h, heads int) *candle.Tensor {
	d := h / heads
	qkv := p.T(p.T(l.qkv.Forward(p.T(l.ln1.Forward(x)))).Reshape(b, s, 3, heads, d))
	// q, k and v are strided views of it, which attention reads in place.
	part := func(i int) *candle.Tensor { return p.T(p.T(qkv.Narrow(2, i, 1)).Squeeze(2)) }
	q, k, v := part(0), part(1), part(2)
	if p.Err != nil {
		return nil
	}
	att := p.Own(nn.ScaledDotProductAttention(q, k, v, flashattn.Params{Causal: true})) // (b, s, heads, d)
	x = p.T(x.Add(p.T(l.out.Forward(p.T(att.Reshape(b, s, h))))))
	f := p.T(l.fc1.Forward(p.T(l.ln2.Forward(x))))
	if m.cfg.HiddenAct == "quick_gelu" {
		f = p.T(f.Mul(p.T(p.T(f.Affine(1.702, 0)).Sigmoid()))) // x·σ(1.702x)
	} else {
		f = p.T(f.GeluErf())
	}
	return p.T(x.Add(p.T(l.fc2.Forward(f))))
}
