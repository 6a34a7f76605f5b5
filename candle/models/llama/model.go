package llama

import (
	"fmt"
	"math"
	"sync"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/nn"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/flashattn"
)

// Options are the runner's (models.Options): the KV cache's size, the
// batch, the decode graphs, and the load's progress.
type Options = models.Options

// Model is a Llama-family decoder (Llama 2 and 3.x, Mistral, Qwen2/2.5)
// on a candle device, with a paged KV cache shared by every sequence
// (nn.PagedKVCache). Its methods are safe for concurrent use; forward
// passes run one at a time.
//
// The weights are those of the Hugging Face folder, in the dtype Load is
// given, with two fusions made at load time so that each layer runs fewer,
// larger products: q, k and v projections are one (q·k·v rows, hidden)
// matrix, and the MLP's gate and up projections one (2·intermediate,
// hidden) matrix, whose product is taken transposed so that the gate and
// the up halves come out as contiguous blocks for the fused SiLU gate. A
// layer is: RMSNorm, the fused QKV product (+ biases), rotary embeddings
// of q and k at each token's position (one fused op over both), the new
// keys and values scattered into their cache pages, causal attention over
// each sequence's cache (GQA, and a sliding window where the config has
// one), o_proj, the residual; RMSNorm, the gate/up product, SiLU(gate) ·
// up, down, the residual. The logits are those of the final RMSNorm and
// lm_head (the embedding table when tied) on each sequence's last token.
//
// A Model embeds the models.Runner that runs it: Forward, Logits, Release,
// the cache's sizes and the decode graphs (a decode step replays one
// captured graph on a HIP device) come from there, and this package holds
// only the architecture.
type Model struct {
	*models.Runner
	cfg     *Config
	dev     candle.Device
	dtype   candle.DType
	embed   *candle.Tensor  // (vocab, hidden), or nil when quantized
	embedQ  *candle.QTensor // (vocab, hidden) when quantized (GGUF)
	lmHead  linear          // (vocab, hidden): lm_head, or the embeddings when tied
	norm    *candle.Tensor
	layers  []*layer
	rope    *candle.Tensor // (2, context, head dim / 2) in the model's dtype: cos, then sin
	mlpRows int            // the most tokens an MLP product takes at once (mlpRows)
	sh      shard          // the model's part on this device: all of it, or a rank's (NewTP)
	freed   sync.Once
}

type layer struct {
	inNorm, postNorm *candle.Tensor
	qkv              linear         // (q+k+v rows, hidden)
	qkvBias          *candle.Tensor // (q+k+v rows) or nil
	o                linear         // (hidden, heads·head dim)
	oBias            *candle.Tensor
	gateUp           linear         // (2·intermediate, hidden)
	gateUpBias       *candle.Tensor // (2·intermediate, 1) or nil
	down             linear         // (hidden, intermediate)
	downBias         *candle.Tensor
	attn             flashattn.Params // the layer's sliding window, if any
}

func (l *layer) close() {
	closeAll(l.inNorm, l.postNorm, l.qkvBias, l.oBias, l.gateUpBias, l.downBias)
	for _, w := range []*linear{&l.qkv, &l.o, &l.gateUp, &l.down} {
		w.close()
	}
}

// linear is a projection's weight (out, in): dense (w, and wT its
// transposed view, which the products take), or quantized blocks (GGUF),
// one QTensor or, when the fused projections' parts have different
// types, one per part, their outputs concatenated.
type linear struct {
	w, wT *candle.Tensor
	q     []*candle.QTensor
}

func (w *linear) close() {
	closeAll(w.wT, w.w)
	for _, q := range w.q {
		q.Close()
	}
}

// dense makes a linear of a dense weight (out, in); it takes w.
func dense(w *candle.Tensor) (linear, error) {
	if w == nil {
		return linear{}, nil
	}
	wT, err := w.T()
	if err != nil {
		w.Close()
		return linear{}, err
	}
	return linear{w: w, wT: wT}, nil
}

func closeAll(ts ...*candle.Tensor) {
	for _, t := range ts {
		if t != nil {
			t.Close()
		}
	}
}

// Load opens a model path once (models.Open: a Hugging Face folder with
// config.json and safetensors weights, or a GGUF file) and builds the
// model from it (New).
func Load(path string, dev candle.Device, dtype candle.DType, opts Options) (*Model, error) {
	c, err := models.Open(path)
	if err != nil {
		return nil, pkg.Wrap("Load", err)
	}
	defer c.Close()
	m, err := New(c, dev, dtype, opts)
	return m, pkg.Wrap("Load", err)
}

// New builds the model of a checkpoint (ConfigOf) on dev, computing in
// dtype (F32, F16 or BF16; Config.DType is the checkpoint's own), and
// allocates its KV cache as opts say. The weights of a Hugging Face folder
// load as dtype; a GGUF file's quantized matrices stay quantized on the
// device (candle.QTensor), its norms and float matrices become dtype.
// Every tensor reaches a HIP device through candle's pipelined upload. A
// missing or mis-shaped weight is an error that names it. The checkpoint
// stays the caller's to close once New returns.
func New(c *models.Checkpoint, dev candle.Device, dtype candle.DType, opts Options) (*Model, error) {
	const op = "New"
	if c == nil {
		return nil, pkg.Errorf(op, errs.ErrArgument, "no checkpoint")
	}
	vb, err := models.VarBuilder(c.Weights, dev, dtype)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	if err := opts.Check(); err != nil {
		return nil, pkg.Wrap(op, err)
	}
	cfg, err := ConfigOf(c)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	load := func(m *Model) error { return m.loadWeights(vb, opts.Progress) }
	if c.Format == models.GGUF {
		load = func(m *Model) error { return m.loadGGUF(vb, opts.Progress) }
	}
	return newModel(op, cfg, dev, dtype, opts, load)
}

// newModel makes a model of cfg whose weights load does, and its runner.
func newModel(op string, cfg *Config, dev candle.Device, dtype candle.DType, opts Options, load func(*Model) error) (*Model, error) {
	m := &Model{cfg: cfg, dev: dev, dtype: dtype, mlpRows: mlpRows, sh: whole(cfg)}
	if err := load(m); err != nil {
		m.Close()
		return nil, pkg.Wrap(op, err)
	}
	shape := models.Shape{Layers: cfg.Layers, KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, VocabSize: cfg.VocabSize, MaxPositions: cfg.MaxPositions}
	r, err := models.NewRunner(dev, dtype, shape, opts, m.run)
	if err == nil {
		m.Runner = r
		err = m.ropeTables()
	}
	if err != nil {
		m.Close()
		return nil, pkg.Wrap(op, err)
	}
	return m, nil
}

// loader loads tensors and remembers the first error, so that the list of
// weights reads as a list.
type loader struct {
	vb          *nn.VarBuilder
	err         error
	done, total int64
	progress    func(done, total int64)
}

func (l *loader) get(name string, shape ...int) *candle.Tensor {
	return l.part(name, cut{}, shape...)
}

// part loads the rank's part k of a weight of shape (the whole weight
// when k is).
func (l *loader) part(name string, k cut, shape ...int) *candle.Tensor {
	if l.err != nil {
		return nil
	}
	var t *candle.Tensor
	var err error
	if k.all(shape) {
		t, err = l.vb.Get(name, shape...)
	} else {
		t, err = l.vb.GetSlice(name, k.d, k.start, k.n, shape...)
	}
	l.err = err
	if err == nil && l.progress != nil {
		l.done += int64(t.Elems()) * int64(t.DType().Size())
		l.progress(min(l.done, l.total), l.total)
	}
	return t
}

// cat loads tensors and concatenates them along dim 0 (the fused
// projections).
func (l *loader) cat(parts ...*candle.Tensor) *candle.Tensor {
	defer closeAll(parts...)
	if l.err != nil {
		return nil
	}
	t, err := candle.Cat(parts, 0)
	l.err = err
	return t
}

// dense makes a linear of a loaded weight.
func (l *loader) dense(w *candle.Tensor) linear {
	if l.err != nil {
		return linear{}
	}
	d, err := dense(w)
	l.err = err
	return d
}

func (l *loader) view(t *candle.Tensor, err error) *candle.Tensor {
	if l.err != nil {
		return nil
	}
	l.err = err
	return t
}

func (m *Model) loadWeights(vb *nn.VarBuilder, progress func(done, total int64)) error {
	c, s := m.cfg, &m.sh
	h, qd, kvd, in, hd := c.HiddenSize, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim, c.IntermediateSize, c.HeadDim
	l := &loader{vb: vb, progress: progress, total: c.Parameters() * int64(m.dtype.Size()) / int64(s.size)}
	// The rank's parts: query heads, KV heads, the intermediate rows
	// (column-parallel q, k, v, gate and up; row-parallel o and down) and
	// the vocabulary's rows.
	qc, kvc := rowsCut(s.headStart*hd, s.heads*hd), rowsCut(s.kvStart*hd, s.kvHeads*hd)
	oc, ic, dc := colsCut(s.headStart*hd, s.heads*hd), rowsCut(s.interStart, s.inter), colsCut(s.interStart, s.inter)
	vocab := func(name string) *candle.Tensor {
		t := l.part(name, rowsCut(s.vocabStart, s.vocabReal), c.VocabSize, h)
		if l.err != nil {
			return nil
		}
		return l.view(padRows(t, s.vocab))
	}
	m.embed = vocab("model.embed_tokens.weight")
	m.norm = l.get("model.norm.weight", h)
	if c.TieEmbeddings {
		m.lmHead.wT = l.view(m.embed.T())
	} else {
		m.lmHead = l.dense(vocab("lm_head.weight"))
	}
	for i := range c.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		ly := &layer{}
		if w := c.Window(i); w > 0 {
			ly.attn.Window = &flashattn.Window{Left: w - 1, Right: 0}
		}
		m.layers = append(m.layers, ly)
		ly.inNorm = l.get(p+"input_layernorm.weight", h)
		ly.postNorm = l.get(p+"post_attention_layernorm.weight", h)
		a := p + "self_attn."
		ly.qkv = l.dense(l.cat(l.part(a+"q_proj.weight", qc, qd, h), l.part(a+"k_proj.weight", kvc, kvd, h), l.part(a+"v_proj.weight", kvc, kvd, h)))
		if c.QKVBias {
			ly.qkvBias = l.cat(l.part(a+"q_proj.bias", qc, qd), l.part(a+"k_proj.bias", kvc, kvd), l.part(a+"v_proj.bias", kvc, kvd))
		}
		ly.o = l.dense(l.part(a+"o_proj.weight", oc, h, qd))
		if c.OutputBias {
			ly.oBias = l.get(a+"o_proj.bias", h)
		}
		f := p + "mlp."
		ly.gateUp = l.dense(l.cat(l.part(f+"gate_proj.weight", ic, in, h), l.part(f+"up_proj.weight", ic, in, h)))
		ly.down = l.dense(l.part(f+"down_proj.weight", dc, h, in))
		if c.MLPBias {
			gu := l.cat(l.part(f+"gate_proj.bias", ic, in), l.part(f+"up_proj.bias", ic, in))
			if l.err == nil {
				ly.gateUpBias = l.view(gu.Reshape(2*s.inter, 1))
				gu.Close()
			}
			ly.downBias = l.get(f+"down_proj.bias", h)
		}
		if l.err != nil {
			return l.err
		}
	}
	if l.err == nil && l.progress != nil && l.done != l.total {
		// A rank's parts (replicated norms and KV heads, a padded
		// vocabulary) are not exactly its share of the parameters.
		l.progress(l.total, l.total)
	}
	return l.err
}

// ropeTables computes cos and sin of every position's angles in float64,
// stored in the model's dtype as one table, so that a step gathers its
// tokens' rows of both in one op.
func (m *Model) ropeTables() error {
	f := m.cfg.InvFreq()
	n, half := m.ContextLength(), len(f)
	t := make([]float64, 2*n*half)
	cos, sin := t[:n*half], t[n*half:]
	for p := range n {
		for i, x := range f {
			s, c := math.Sincos(float64(p) * x)
			cos[p*half+i], sin[p*half+i] = c, s
		}
	}
	x, err := candle.FromSlice(m.dev, t, 2, n, half)
	if err != nil {
		return err
	}
	m.rope, err = x.ToDType(m.dtype)
	x.Close()
	return err
}

// Config is the model's config.
func (m *Model) Config() *Config { return m.cfg }

// Close frees the weights, the cache and the decode graphs, once the pass
// running has ended. Closing twice does nothing; a closed model's Forward
// is an error (candle.ErrClosed).
func (m *Model) Close() error {
	var err error
	if m.Runner != nil {
		err = m.Runner.Close()
	}
	m.freed.Do(func() {
		for _, l := range m.layers {
			l.close()
		}
		m.lmHead.close()
		closeAll(m.embed, m.norm, m.rope)
		if m.embedQ != nil {
			m.embedQ.Close()
		}
	})
	return pkg.Wrap("Close", err)
}

// times is x · wᵀ: x (T, in) by the weight (out, in) into (T, out).
func times(f *models.Pass, x *candle.Tensor, w *linear) *candle.Tensor {
	if f.Err != nil {
		return nil
	}
	switch len(w.q) {
	case 0:
		return f.T(x.Matmul(w.wT))
	case 1:
		return f.T(x.QMatmul(w.q[0]))
	}
	parts := make([]*candle.Tensor, len(w.q))
	for i, q := range w.q {
		parts[i] = f.T(x.QMatmul(q))
	}
	if f.Err != nil {
		return nil
	}
	return f.T(candle.Cat(parts, 1))
}

// timesWith is times with o's ops around the product: in its kernel where
// candle can (Tensor.QMatmulWith: a quantized weight of one part, decode's
// few rows), else as the ops.
func timesWith(f *models.Pass, x *candle.Tensor, w *linear, o candle.QMatmulOptions) *candle.Tensor {
	if f.Err != nil {
		return nil
	}
	if len(w.q) == 1 {
		return f.T(x.QMatmulWith(w.q[0], o))
	}
	if o.Norm != nil {
		x = f.T(x.RMSNorm(o.Norm, o.Eps))
	}
	if o.Gated {
		half := x.Shape()[1] / 2
		x = f.T(f.T(x.Narrow(1, 0, half)).SiLUMul(f.T(x.Narrow(1, half, half))))
	}
	y := times(f, x, w)
	if o.Residual != nil {
		y = f.T(o.Residual.Add(y))
	}
	return y
}

// run is the forward pass of a step: the logits of every new token (all)
// or of each sequence's last, F32. It leaves the step uncommitted.
func (m *Model) run(step *nn.PagedStep, all bool) (*candle.Tensor, error) {
	c := m.cfg
	f := models.NewPass()
	defer f.Close()
	ids := f.In(step.Tokens())
	pos := f.In(step.Positions())
	rope := f.T(m.rope.IndexSelect(pos, 1)) // (2, T, head dim / 2)
	cos := f.T(f.T(rope.Narrow(0, 0, 1)).Squeeze(0))
	sin := f.T(f.T(rope.Narrow(0, 1, 1)).Squeeze(0))
	x := m.embedRows(f, ids) // (T, hidden)
	// Each half layer (attention, MLP) is a block of the pass: its
	// intermediates are freed when it ends.
	for i, l := range m.layers {
		x = f.Block(x, func(xl *candle.Tensor) *candle.Tensor { return m.attention(f, step, i, l, xl, cos, sin) })
		x = f.Block(x, func(xl *candle.Tensor) *candle.Tensor { return m.mlp(f, l, xl) })
		if f.Err != nil {
			break
		}
	}
	if !all && !step.EveryRowLast() {
		last := f.In(step.LastRows())
		x = f.T(x.IndexSelect(last, 0))
	}
	logits := timesWith(f, x, &m.lmHead, candle.QMatmulOptions{Norm: m.norm, Eps: c.RMSNormEps})
	logits = m.gatherLogits(f, logits)
	if m.dtype != candle.F32 {
		logits = f.T(logits.ToDType(candle.F32))
	}
	if f.Err != nil {
		return nil, f.Err
	}
	return f.Keep(logits), nil
}

// attention is a layer's first half: xl plus attention over the cache of
// RMSNorm(xl)'s projections.
func (m *Model) attention(f *models.Pass, step *nn.PagedStep, i int, l *layer, xl, cos, sin *candle.Tensor) *candle.Tensor {
	c := m.cfg
	T := step.Len()
	hq, hkv, hd := m.sh.heads, m.sh.kvHeads, c.HeadDim
	qkv := timesWith(f, xl, &l.qkv, candle.QMatmulOptions{Norm: l.inNorm, Eps: c.RMSNormEps}) // (T, (hq+2hkv)·hd)
	if l.qkvBias != nil {
		qkv = f.T(qkv.Add(l.qkvBias))
	}
	heads := f.T(qkv.Reshape(T, hq+2*hkv, hd))
	var att *candle.Tensor
	if f.Err == nil {
		// The rotary embeddings of q and k, the cache's writes and the
		// attention: a decode step's rotation and writes are one kernel.
		att = f.Own(step.AttentionQKV(i, heads, cos, sin, l.attn)) // (T, hq, hd)
	}
	att = f.T(att.Reshape(T, hq*hd))
	if l.oBias == nil && !m.sh.split() {
		return timesWith(f, att, &l.o, candle.QMatmulOptions{Residual: xl})
	}
	// Row-parallel: each rank's product is a partial sum of o's.
	o := m.allReduce(f, times(f, att, &l.o))
	if l.oBias != nil {
		o = f.T(o.Add(l.oBias))
	}
	return f.T(xl.Add(o))
}

// mlpRows bounds the tokens an MLP product takes at once. A long
// prefill's gate and up halves (tokens × 2·intermediate) are its largest
// intermediates: the llmbench prefill of 8×512 tokens of a 1B model peaked
// at 1.12× the weights and KV cache with the MLP over all its tokens at
// once. Blocks of 1024 tokens still fill the GPU.
const mlpRows = 1024

// mlp is a layer's second half: xl plus the gated MLP of RMSNorm(xl), over
// blocks of at most m.mlpRows tokens, each block's intermediates freed
// before the next.
func (m *Model) mlp(f *models.Pass, l *layer, xl *candle.Tensor) *candle.Tensor {
	if f.Err != nil {
		return nil
	}
	T := xl.Shape()[0]
	if T <= m.mlpRows {
		return m.mlpBlock(f, l, xl)
	}
	out := f.Own(candle.Empty(m.dev, m.dtype, xl.Shape()...))
	outer := f.Scope
	for start := 0; start < T && f.Err == nil; start += m.mlpRows {
		n := min(m.mlpRows, T-start)
		bs := candle.NewScope()
		f.Scope = bs
		rows := f.Own(xl.Narrow(0, start, n)) // in bs
		y := m.mlpBlock(f, l, rows)
		if f.Err == nil {
			f.Err = out.SliceAssign(y, 0, start)
		}
		f.Scope = outer
		bs.Close()
	}
	if f.Err != nil {
		return nil
	}
	return out
}

// mlpBlock is mlp over xl's tokens at once.
func (m *Model) mlpBlock(f *models.Pass, l *layer, xl *candle.Tensor) *candle.Tensor {
	c, inter := m.cfg, m.sh.inter
	if l.gateUp.q != nil && l.downBias == nil && !m.sh.split() {
		// The quantized products are x · wᵀ: gate and up are the halves
		// of each row (GGUF models have no MLP biases). The norm, the gate
		// and the residual run in the products' kernels where they can.
		gu := timesWith(f, xl, &l.gateUp, candle.QMatmulOptions{Norm: l.postNorm, Eps: c.RMSNormEps}) // (T, 2·intermediate)
		return timesWith(f, gu, &l.down, candle.QMatmulOptions{Gated: true, Residual: xl})
	}
	h := f.T(xl.RMSNorm(l.postNorm, c.RMSNormEps))
	var act *candle.Tensor // (T, intermediate)
	if l.gateUp.q == nil {
		ht := f.T(h.T())
		gu := f.T(l.gateUp.w.Matmul(ht)) // (2·intermediate, T): gate and up are contiguous halves
		if l.gateUpBias != nil {
			gu = f.T(gu.Add(l.gateUpBias))
		}
		gate := f.T(gu.Narrow(0, 0, inter))
		up := f.T(gu.Narrow(0, inter, inter))
		act = f.T(gate.SiLUMul(up)) // (intermediate, T)
		act = f.T(act.T())
	} else {
		gu := times(f, h, &l.gateUp) // (T, 2·intermediate)
		gate := f.T(gu.Narrow(1, 0, inter))
		up := f.T(gu.Narrow(1, inter, inter))
		act = f.T(gate.SiLUMul(up))
	}
	d := m.allReduce(f, times(f, act, &l.down)) // row-parallel: partial sums
	if l.downBias != nil {
		d = f.T(d.Add(l.downBias))
	}
	return f.T(xl.Add(d))
}
