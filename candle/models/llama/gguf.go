package llama

import (
	"fmt"
	"slices"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/gguf"
	"github.com/rocm-go/rocm/candle/nn"
	"github.com/rocm-go/rocm/errs"
)

// The GGUF architectures the package loads: llama (Llama 2 and 3,
// Mistral, TinyLlama) and qwen2.
var ggufFamilies = map[string]string{"llama": "llama", "qwen2": "qwen2"}

// configFromGGUF reads a model's config from a GGUF file's metadata
// (llama.cpp's keys: <arch>.embedding_length, <arch>.block_count, ...) and
// tensors (biases, a tied output, rope_freqs). Config.DType is the file's
// float weights' dtype, or BF16 when its matrices are quantized.
func configFromGGUF(f *gguf.File) (*Config, error) {
	arch := f.Architecture()
	family, ok := ggufFamilies[arch]
	if !ok {
		return nil, configErr(errs.ErrUnsupported, "GGUF architecture %q: the package loads llama and qwen2", arch)
	}
	c := &Config{Family: family, Architecture: architectures[family]}
	req := func(dst *int, key string) error {
		v, err := f.ArchUint(key)
		if err != nil {
			return pkg.Wrap("config", err)
		}
		if v == 0 || v > 1<<31 {
			return configErr(errs.ErrFormat, "%s.%s = %d: want a positive size", arch, key, v)
		}
		*dst = int(v)
		return nil
	}
	opt := func(dst *int, key string, def int) error {
		if _, ok := f.Get(arch + "." + key); !ok {
			*dst = def
			return nil
		}
		return req(dst, key)
	}
	for _, k := range []struct {
		dst *int
		key string
	}{
		{&c.HiddenSize, "embedding_length"},
		{&c.Layers, "block_count"},
		{&c.IntermediateSize, "feed_forward_length"},
		{&c.Heads, "attention.head_count"},
		{&c.MaxPositions, "context_length"},
	} {
		if err := req(k.dst, k.key); err != nil {
			return nil, err
		}
	}
	if err := opt(&c.KVHeads, "attention.head_count_kv", c.Heads); err != nil {
		return nil, err
	}
	if err := opt(&c.HeadDim, "attention.key_length", c.HiddenSize/c.Heads); err != nil {
		return nil, err
	}
	var rot int
	if err := opt(&rot, "rope.dimension_count", c.HeadDim); err != nil {
		return nil, err
	}
	if c.HeadDim%2 != 0 {
		return nil, configErr(errs.ErrFormat, "head dim %d: rotary embeddings rotate pairs, want an even head dim", c.HeadDim)
	}
	if rot != c.HeadDim {
		return nil, configErr(errs.ErrUnsupported, "%s.rope.dimension_count %d: rotary embeddings over part of a head (of %d) are not implemented", arch, rot, c.HeadDim)
	}
	if c.Heads%c.KVHeads != 0 {
		return nil, configErr(errs.ErrFormat, "%d heads, %d KV heads: want KV heads dividing heads", c.Heads, c.KVHeads)
	}
	eps, err := f.Float(arch + ".attention.layer_norm_rms_epsilon")
	if err != nil {
		return nil, pkg.Wrap("config", err)
	}
	c.RMSNormEps = eps
	c.RopeTheta = 10000
	if _, ok := f.Get(arch + ".rope.freq_base"); ok {
		if c.RopeTheta, err = f.Float(arch + ".rope.freq_base"); err != nil {
			return nil, pkg.Wrap("config", err)
		}
	}
	if err := ggufRope(f, arch, c); err != nil {
		return nil, err
	}
	embd, ok := f.Tensor("token_embd.weight")
	if !ok {
		return nil, configErr(errs.ErrFormat, "the file has no token_embd.weight")
	}
	if len(embd.Dims) != 2 {
		return nil, configErr(errs.ErrFormat, "token_embd.weight has dims %v: want (vocab, %d)", embd.Dims, c.HiddenSize)
	}
	c.VocabSize = embd.Dims[0]
	_, hasOutput := f.Tensor("output.weight")
	c.TieEmbeddings = !hasOutput
	_, c.QKVBias = f.Tensor("blk.0.attn_q.bias")
	_, c.OutputBias = f.Tensor("blk.0.attn_output.bias")
	if _, ok := f.Tensor("blk.0.ffn_up.bias"); ok {
		return nil, configErr(errs.ErrUnsupported, "MLP biases in a GGUF file are not implemented")
	}
	c.DType = candle.BF16
	if dt, ok := embd.Type.DType(); ok {
		c.DType = dt
	}
	return c, nil
}

// ggufRope reads the RoPE scaling: <arch>.rope.scaling.type linear, or a
// rope_freqs tensor of per-frequency divisors (Llama 3.1's scaling as
// llama.cpp's converter stores it).
func ggufRope(f *gguf.File, arch string, c *Config) error {
	if _, ok := f.Get(arch + ".rope.scaling.type"); ok {
		typ, err := f.String(arch + ".rope.scaling.type")
		if err != nil {
			return pkg.Wrap("config", err)
		}
		switch typ {
		case "none", "":
		case "linear":
			factor, err := f.Float(arch + ".rope.scaling.factor")
			if err != nil {
				return pkg.Wrap("config", err)
			}
			if factor <= 0 {
				return configErr(errs.ErrFormat, "%s.rope.scaling.factor %g: want > 0", arch, factor)
			}
			c.RopeScaling = &RopeScaling{Type: "linear", Factor: factor}
		default:
			return configErr(errs.ErrUnsupported, "%s.rope.scaling.type %q: the package implements linear and rope_freqs factors", arch, typ)
		}
	}
	info, ok := f.Tensor("rope_freqs.weight")
	if !ok {
		return nil
	}
	if c.RopeScaling != nil {
		return configErr(errs.ErrUnsupported, "both %s.rope.scaling.type and a rope_freqs tensor", arch)
	}
	if info.Type != candle.GGMLF32 || len(info.Dims) != 1 || info.Dims[0] != c.HeadDim/2 {
		return configErr(errs.ErrFormat, "rope_freqs.weight: %s %v: want F32 (%d)", info.Type, info.Dims, c.HeadDim/2)
	}
	data, err := f.Data(info)
	if err != nil {
		return pkg.Wrap("config", err)
	}
	vals, err := candle.DequantizeBlocks(nil, candle.GGMLF32, data)
	if err != nil {
		return pkg.Wrapf("config", err, "rope_freqs.weight")
	}
	s := &RopeScaling{Type: "factors", Factors: make([]float64, len(vals))}
	for i, v := range vals {
		if !(v > 0) {
			return configErr(errs.ErrFormat, "rope_freqs.weight[%d] = %g: want > 0", i, v)
		}
		s.Factors[i] = float64(v)
	}
	c.RopeScaling = s
	return nil
}

// ggufLoader loads a GGUF checkpoint's tensors through a VarBuilder
// (candle's pipelined upload, quantized blocks included) and remembers the
// first error.
type ggufLoader struct {
	vb          *nn.VarBuilder
	m           *Model
	err         error
	done, total int64
	progress    func(done, total int64)
}

// info is a tensor's description, checked against shape; it counts the
// tensor's bytes as loaded for the progress.
func (g *ggufLoader) info(name string, shape ...int) candle.WeightInfo {
	if g.err != nil {
		return candle.WeightInfo{}
	}
	info, ok := g.vb.Info(name)
	switch {
	case !ok:
		g.err = pkg.Errorf("New", errs.ErrNotFound, "the file has no tensor %s", name)
	case !slices.Equal(info.Shape, shape):
		g.err = pkg.Errorf("New", errs.ErrShape, "tensor %s: shape %v, want %v", name, []int(info.Shape), shape)
	case !info.Dense && !info.Quantized:
		g.err = pkg.Errorf("New", errs.ErrUnsupported, "tensor %s is %s, a type this package does not decode", name, info.Type)
	}
	return info
}

// loaded counts a tensor's bytes in the file as on the device.
func (g *ggufLoader) loaded(info candle.WeightInfo) {
	g.done += int64(info.Bytes())
	if g.progress != nil {
		g.progress(min(g.done, g.total), g.total)
	}
}

// unpermute puts the rows of t (rows, ...) back in Hugging Face's order:
// llama.cpp's converter interleaves the two halves of each head's q and k
// rows (its RoPE rotates neighbouring pairs; this package's rotates the
// halves), so that within each head of hd rows, GGUF row 2i+j is Hugging
// Face row j·hd/2+i: a transpose of each head's (hd/2, 2) rows, one copy
// on the device. It takes t.
func unpermute(t *candle.Tensor, heads int) (*candle.Tensor, error) {
	defer t.Close()
	shape := t.Shape()
	hd := shape[0] / heads
	v, err := t.Reshape(append([]int{heads, hd / 2, 2}, shape[1:]...)...)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	tv, err := v.Transpose(1, 2)
	if err != nil {
		return nil, err
	}
	defer tv.Close()
	c, err := tv.Contiguous()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Reshape(shape...)
}

// dense loads a tensor in the model's dtype (a quantized one is
// dequantized), its rows unpermuted when heads > 0 (unpermute).
func (g *ggufLoader) dense(name string, heads int, shape ...int) *candle.Tensor {
	return g.denseCut(name, heads, cut{}, shape...)
}

// denseCut is dense of the rank's part k of the tensor; heads are the
// part's.
func (g *ggufLoader) denseCut(name string, heads int, k cut, shape ...int) *candle.Tensor {
	info := g.info(name, shape...)
	if g.err != nil {
		return nil
	}
	var t *candle.Tensor
	var err error
	if k.all(shape) {
		t, err = g.vb.Get(name, shape...)
	} else {
		t, err = g.vb.GetSlice(name, k.d, k.start, k.n, shape...)
	}
	if err == nil && heads > 0 {
		t, err = unpermute(t, heads)
	}
	if g.err = err; err != nil {
		return nil
	}
	g.loaded(info)
	return t
}

// blocks loads a quantized tensor's blocks, (rows, row bytes), of the
// rank's part k, its rows unpermuted when heads > 0.
func (g *ggufLoader) blocks(name string, heads int, k cut, shape ...int) *candle.Tensor {
	q, err := g.getQ(name, k, shape...)
	if err != nil {
		g.err = err
		return nil
	}
	b, err := q.Blocks()
	q.Close()
	if err == nil && heads > 0 {
		b, err = unpermute(b, heads)
	}
	g.err = err
	return b
}

// getQ loads the rank's part k of a quantized tensor.
func (g *ggufLoader) getQ(name string, k cut, shape ...int) (*candle.QTensor, error) {
	if k.all(shape) {
		return g.vb.GetQ(name, shape...)
	}
	return g.vb.GetQSlice(name, k.d, k.start, k.n, shape...)
}

// quantized loads the rank's part k of a quantized tensor as a QTensor,
// its rows unpermuted when heads > 0.
func (g *ggufLoader) quantized(name string, heads int, typ candle.GGMLType, k cut, shape ...int) *candle.QTensor {
	if heads == 0 {
		q, err := g.getQ(name, k, shape...)
		g.err = err
		return q
	}
	b := g.blocks(name, heads, k, shape...)
	if g.err != nil {
		return nil
	}
	defer b.Close()
	q, err := candle.QTensorFromBlocks(b, typ, k.of(shape)...)
	g.err = err
	return q
}

// part is one of a fused projection's weights: its name, rows and, for q
// and k, the heads of the rank's part (unpermute); k is the rank's part.
type part struct {
	name  string
	rows  int
	heads int
	k     cut
}

// linear loads a projection from its parts, fused along the rows: one
// dense weight when they are float, one QTensor when they share a
// quantized type (their blocks joined on the device), else a QTensor
// each.
func (g *ggufLoader) linear(in int, parts ...part) linear {
	infos := make([]candle.WeightInfo, len(parts))
	same := true
	for i, p := range parts {
		infos[i] = g.info(p.name, p.rows, in)
		same = same && infos[i].Type == infos[0].Type
	}
	if g.err != nil {
		return linear{}
	}
	rows := 0 // of the rank's parts
	for _, p := range parts {
		rows += p.k.of([]int{p.rows, in})[0]
	}
	cols := in
	if len(parts) > 0 {
		cols = parts[0].k.of([]int{parts[0].rows, in})[1]
	}
	types := make([]string, len(infos))
	for i, info := range infos {
		types[i] = info.Type
	}
	if !same && slices.ContainsFunc(infos, func(i candle.WeightInfo) bool { return !i.Quantized }) {
		g.err = pkg.Errorf("New", errs.ErrUnsupported, "%s: float and quantized parts (%v) in one projection", parts[0].name, types)
		return linear{}
	}
	if !infos[0].Quantized {
		ts := make([]*candle.Tensor, len(parts))
		for i, p := range parts {
			if ts[i] = g.denseCut(p.name, p.heads, p.k, p.rows, in); g.err != nil {
				closeAll(ts...)
				return linear{}
			}
		}
		w := ts[0]
		if len(ts) > 1 {
			w, g.err = candle.Cat(ts, 0)
			closeAll(ts...)
			if g.err != nil {
				return linear{}
			}
		}
		d, err := dense(w)
		g.err = err
		return d
	}
	if same && len(parts) > 1 {
		bs := make([]*candle.Tensor, len(parts))
		defer func() { closeAll(bs...) }()
		for i, p := range parts {
			if bs[i] = g.blocks(p.name, p.heads, p.k, p.rows, in); g.err != nil {
				return linear{}
			}
			g.loaded(infos[i])
		}
		joined, err := candle.Cat(bs, 0)
		if err != nil {
			g.err = err
			return linear{}
		}
		defer joined.Close()
		q, err := candle.QTensorFromBlocks(joined, infos[0].Quant, rows, cols)
		g.err = err
		return linear{q: []*candle.QTensor{q}}
	}
	l := linear{}
	for i, p := range parts {
		q := g.quantized(p.name, p.heads, infos[i].Quant, p.k, p.rows, in)
		if g.err != nil {
			l.close()
			return linear{}
		}
		g.loaded(infos[i])
		l.q = append(l.q, q)
	}
	return l
}

// vocabRows loads the rank's rows of a (vocab, hidden) matrix (the
// embedding, the output), zero rows past the vocabulary: dense (w and wT
// set) or quantized (one QTensor).
func (g *ggufLoader) vocabRows(name string) linear {
	c, s := g.m.cfg, &g.m.sh
	full := []int{c.VocabSize, c.HiddenSize}
	info := g.info(name, full...)
	if g.err != nil {
		return linear{}
	}
	k := rowsCut(s.vocabStart, s.vocabReal)
	if !info.Quantized {
		t := g.denseCut(name, 0, k, full...)
		if g.err != nil {
			return linear{}
		}
		if t, g.err = padRows(t, s.vocab); g.err != nil {
			return linear{}
		}
		d, err := dense(t)
		g.err = err
		return d
	}
	b := g.blocks(name, 0, k, full...)
	if g.err != nil {
		return linear{}
	}
	g.loaded(info)
	// Zero blocks dequantize to zeros in every GGML type (a zero scale).
	if b, g.err = padRows(b, s.vocab); g.err != nil {
		return linear{}
	}
	defer b.Close()
	q, err := candle.QTensorFromBlocks(b, info.Quant, s.vocab, c.HiddenSize)
	g.err = err
	return linear{q: []*candle.QTensor{q}}
}

// loadGGUF loads the weights of a GGUF file, named as llama.cpp names
// them (token_embd, blk.N.attn_q, ...).
func (m *Model) loadGGUF(vb *nn.VarBuilder, progress func(done, total int64)) error {
	c, s := m.cfg, &m.sh
	h, qd, kvd, in, hd := c.HiddenSize, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim, c.IntermediateSize, c.HeadDim
	g := &ggufLoader{vb: vb, m: m, progress: progress}
	// The rank's parts, as loadWeights takes them.
	qc, kvc := rowsCut(s.headStart*hd, s.heads*hd), rowsCut(s.kvStart*hd, s.kvHeads*hd)
	oc, ic, dc := colsCut(s.headStart*hd, s.heads*hd), rowsCut(s.interStart, s.inter), colsCut(s.interStart, s.inter)
	w := vb.Weights()
	for _, n := range w.Names() {
		if n != "rope_freqs.weight" { // the config's, read with it
			info, _ := w.Info(n)
			g.total += int64(info.Bytes())
		}
	}
	permute := c.Family == "llama" // llama.cpp's converter permutes llama's q and k, not qwen2's
	heads := func(n int) int {
		if permute {
			return n
		}
		return 0
	}
	if emb := g.vocabRows("token_embd.weight"); g.err == nil {
		m.embed = emb.w
		if len(emb.q) == 1 {
			m.embedQ = emb.q[0]
		}
		if c.TieEmbeddings { // the output is the embedding: its view, or its QTensor
			m.lmHead = linear{wT: emb.wT, q: emb.q}
		} else {
			emb.wT.Close()
		}
	}
	m.norm = g.dense("output_norm.weight", 0, h)
	if !c.TieEmbeddings {
		m.lmHead = g.vocabRows("output.weight")
	}
	for i := range c.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ly := &layer{}
		m.layers = append(m.layers, ly)
		ly.inNorm = g.dense(p+"attn_norm.weight", 0, h)
		ly.postNorm = g.dense(p+"ffn_norm.weight", 0, h)
		ly.qkv = g.linear(h, part{p + "attn_q.weight", qd, heads(s.heads), qc}, part{p + "attn_k.weight", kvd, heads(s.kvHeads), kvc}, part{p + "attn_v.weight", kvd, 0, kvc})
		if c.QKVBias {
			q, k, v := g.denseCut(p+"attn_q.bias", heads(s.heads), qc, qd), g.denseCut(p+"attn_k.bias", heads(s.kvHeads), kvc, kvd), g.denseCut(p+"attn_v.bias", 0, kvc, kvd)
			if g.err == nil {
				ly.qkvBias, g.err = candle.Cat([]*candle.Tensor{q, k, v}, 0)
			}
			closeAll(q, k, v)
		}
		ly.o = g.linear(qd, part{name: p + "attn_output.weight", rows: h, k: oc})
		if c.OutputBias {
			ly.oBias = g.dense(p+"attn_output.bias", 0, h)
		}
		ly.gateUp = g.linear(h, part{name: p + "ffn_gate.weight", rows: in, k: ic}, part{name: p + "ffn_up.weight", rows: in, k: ic})
		ly.down = g.linear(in, part{name: p + "ffn_down.weight", rows: h, k: dc})
		if g.err != nil {
			return g.err
		}
	}
	return g.err
}
