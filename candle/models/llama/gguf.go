package llama

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/gguf"
)

// The GGUF architectures the package loads: llama (Llama 2 and 3,
// Mistral, TinyLlama) and qwen2.
var ggufFamilies = map[string]string{"llama": "llama", "qwen2": "qwen2"}

// ConfigFromGGUF reads a model's config from a GGUF file's metadata
// (llama.cpp's keys: <arch>.embedding_length, <arch>.block_count, ...) and
// tensors (biases, a tied output, rope_freqs). Config.DType is the file's
// float weights' dtype, or BF16 when its matrices are quantized.
func ConfigFromGGUF(f *gguf.File) (*Config, error) {
	arch := f.Architecture()
	family, ok := ggufFamilies[arch]
	if !ok {
		return nil, configErr(ErrUnsupported, "GGUF architecture %q: the package loads llama and qwen2", arch)
	}
	c := &Config{Family: family, Architecture: architectures[family]}
	req := func(dst *int, key string) error {
		v, err := f.ArchUint(key)
		if err != nil {
			return configErr(ErrConfig, "%v", err)
		}
		if v == 0 || v > 1<<31 {
			return configErr(ErrConfig, "%s.%s = %d: want a positive size", arch, key, v)
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
		return nil, configErr(ErrConfig, "head dim %d: rotary embeddings rotate pairs, want an even head dim", c.HeadDim)
	}
	if rot != c.HeadDim {
		return nil, configErr(ErrUnsupported, "%s.rope.dimension_count %d: rotary embeddings over part of a head (of %d) are not implemented", arch, rot, c.HeadDim)
	}
	if c.Heads%c.KVHeads != 0 {
		return nil, configErr(ErrConfig, "%d heads, %d KV heads: want KV heads dividing heads", c.Heads, c.KVHeads)
	}
	eps, err := f.Float(arch + ".attention.layer_norm_rms_epsilon")
	if err != nil {
		return nil, configErr(ErrConfig, "%v", err)
	}
	c.RMSNormEps = eps
	c.RopeTheta = 10000
	if _, ok := f.Get(arch + ".rope.freq_base"); ok {
		if c.RopeTheta, err = f.Float(arch + ".rope.freq_base"); err != nil {
			return nil, configErr(ErrConfig, "%v", err)
		}
	}
	if err := ggufRope(f, arch, c); err != nil {
		return nil, err
	}
	embd, ok := f.Tensor("token_embd.weight")
	if !ok {
		return nil, configErr(ErrConfig, "the file has no token_embd.weight")
	}
	if len(embd.Dims) != 2 {
		return nil, configErr(ErrConfig, "token_embd.weight has dims %v: want (vocab, %d)", embd.Dims, c.HiddenSize)
	}
	c.VocabSize = embd.Dims[0]
	_, hasOutput := f.Tensor("output.weight")
	c.TieEmbeddings = !hasOutput
	_, c.QKVBias = f.Tensor("blk.0.attn_q.bias")
	_, c.OutputBias = f.Tensor("blk.0.attn_output.bias")
	if _, ok := f.Tensor("blk.0.ffn_up.bias"); ok {
		return nil, configErr(ErrUnsupported, "MLP biases in a GGUF file are not implemented")
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
			return configErr(ErrConfig, "%v", err)
		}
		switch typ {
		case "none", "":
		case "linear":
			factor, err := f.Float(arch + ".rope.scaling.factor")
			if err != nil {
				return configErr(ErrConfig, "%v", err)
			}
			if factor <= 0 {
				return configErr(ErrConfig, "%s.rope.scaling.factor %g: want > 0", arch, factor)
			}
			c.RopeScaling = &RopeScaling{Type: "linear", Factor: factor}
		default:
			return configErr(ErrUnsupported, "%s.rope.scaling.type %q: the package implements linear and rope_freqs factors", arch, typ)
		}
	}
	info, ok := f.Tensor("rope_freqs.weight")
	if !ok {
		return nil
	}
	if c.RopeScaling != nil {
		return configErr(ErrUnsupported, "both %s.rope.scaling.type and a rope_freqs tensor", arch)
	}
	if info.Type != candle.GGMLF32 || len(info.Dims) != 1 || info.Dims[0] != c.HeadDim/2 {
		return configErr(ErrConfig, "rope_freqs.weight: %s %v: want F32 (%d)", info.Type, info.Dims, c.HeadDim/2)
	}
	data, err := f.Data(info)
	if err != nil {
		return configErr(ErrConfig, "%v", err)
	}
	vals, err := candle.DequantizeBlocks(nil, candle.GGMLF32, data)
	if err != nil {
		return configErr(ErrConfig, "rope_freqs.weight: %v", err)
	}
	s := &RopeScaling{Type: "factors", Factors: make([]float64, len(vals))}
	for i, v := range vals {
		if !(v > 0) {
			return configErr(ErrConfig, "rope_freqs.weight[%d] = %g: want > 0", i, v)
		}
		s.Factors[i] = float64(v)
	}
	c.RopeScaling = s
	return nil
}

// LoadGGUF reads a GGUF model file (llama.cpp's format: the config, the
// tokenizer and the weights in one file, quantized or not) onto dev,
// computing in dtype (F32, F16 or BF16), with its KV cache as opts say.
// Quantized matrices stay quantized on the device (candle.QTensor); the
// norms and float matrices become dtype.
func LoadGGUF(path string, dev candle.Device, dtype candle.DType, opts Options) (*Model, error) {
	if err := checkLoad("LoadGGUF", dev, dtype, opts); err != nil {
		return nil, err
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("llama: LoadGGUF: %w", err)
	}
	defer f.Close()
	cfg, err := ConfigFromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("llama: LoadGGUF %s: %w", path, err)
	}
	return newModel("LoadGGUF", cfg, dev, dtype, opts, func(m *Model) error { return m.loadGGUF(f, opts.Progress) })
}

// ggufLoader loads a GGUF file's tensors and remembers the first error.
type ggufLoader struct {
	f           *gguf.File
	m           *Model
	err         error
	done, total int64
	progress    func(done, total int64)
}

// bytes reads a tensor's blocks, checking its shape (candle's order), with
// its rows put back in Hugging Face's order when heads > 0: llama.cpp's
// converter interleaves the two halves of each head's q and k rows (its
// RoPE rotates neighbouring pairs; this package's rotates the halves).
func (g *ggufLoader) bytes(name string, heads int, shape ...int) ([]byte, candle.GGMLType) {
	if g.err != nil {
		return nil, 0
	}
	info, ok := g.f.Tensor(name)
	if !ok {
		g.err = fmt.Errorf("%s: the file has no such tensor: %w", name, ErrConfig)
		return nil, 0
	}
	if !candle.Shape(info.Dims).Equal(candle.Shape(shape)) {
		g.err = fmt.Errorf("%s: shape %v, want %v: %w", name, info.Dims, shape, ErrConfig)
		return nil, 0
	}
	data, err := g.f.Data(info)
	if err != nil {
		g.err = fmt.Errorf("%s: %w", name, err)
		return nil, 0
	}
	if heads > 0 {
		data = unpermuteRows(data, heads, shape[0]/heads)
	}
	g.done += int64(len(data))
	if g.progress != nil {
		g.progress(min(g.done, g.total), g.total)
	}
	return data, info.Type
}

// unpermuteRows undoes llama.cpp's q/k row order: within each head of hd
// rows, GGUF row 2i+j is Hugging Face row j·hd/2+i.
func unpermuteRows(data []byte, heads, hd int) []byte {
	row := len(data) / (heads * hd)
	out := make([]byte, len(data))
	for h := range heads {
		for i := range hd / 2 {
			for j := range 2 {
				src := (h*hd + 2*i + j) * row
				dst := (h*hd + j*hd/2 + i) * row
				copy(out[dst:dst+row], data[src:src+row])
			}
		}
	}
	return out
}

// dense loads a float tensor in the model's dtype (a quantized one is
// dequantized), its rows unpermuted when heads > 0 (bytes).
func (g *ggufLoader) dense(name string, heads int, shape ...int) *candle.Tensor {
	data, typ := g.bytes(name, heads, shape...)
	if g.err != nil {
		return nil
	}
	t, err := g.upload(data, typ, shape)
	g.err = err
	return t
}

func (g *ggufLoader) upload(data []byte, typ candle.GGMLType, shape []int) (*candle.Tensor, error) {
	if dt, ok := typ.DType(); ok {
		t, err := candle.FromBytes(g.m.dev, dt, data, shape...)
		if err != nil || dt == g.m.dtype {
			return t, err
		}
		defer t.Close()
		return t.ToDType(g.m.dtype)
	}
	q, err := candle.NewQTensor(g.m.dev, typ, data, shape...)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	return q.Dequantize(g.m.dtype)
}

// part is one of a fused projection's weights: its name, rows and, for q
// and k, its heads (unpermuteRows).
type part struct {
	name  string
	rows  int
	heads int
}

// linear loads a projection from its parts, fused along the rows: one
// dense weight when they are float, one QTensor when they share a
// quantized type, else a QTensor each.
func (g *ggufLoader) linear(in int, parts ...part) linear {
	if g.err != nil {
		return linear{}
	}
	data := make([][]byte, len(parts))
	types := make([]candle.GGMLType, len(parts))
	same := true
	for i, p := range parts {
		data[i], types[i] = g.bytes(p.name, p.heads, p.rows, in)
		same = same && types[i] == types[0]
	}
	if g.err != nil {
		return linear{}
	}
	rows := 0
	for _, p := range parts {
		rows += p.rows
	}
	if !same && slices.ContainsFunc(types, func(t candle.GGMLType) bool { return !t.Quantized() }) {
		g.err = fmt.Errorf("%s: float and quantized parts (%v) in one projection: %w", parts[0].name, types, ErrUnsupported)
		return linear{}
	}
	if !types[0].Quantized() {
		ts := make([]*candle.Tensor, len(parts))
		for i, p := range parts {
			if ts[i], g.err = g.upload(data[i], types[i], []int{p.rows, in}); g.err != nil {
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
	if same {
		q, err := candle.NewQTensor(g.m.dev, types[0], bytes.Join(data, nil), rows, in)
		g.err = err
		return linear{q: []*candle.QTensor{q}}
	}
	l := linear{}
	for i, p := range parts {
		q, err := candle.NewQTensor(g.m.dev, types[i], data[i], p.rows, in)
		if err != nil {
			l.close()
			g.err = err
			return linear{}
		}
		l.q = append(l.q, q)
	}
	return l
}

// loadGGUF loads the weights of a GGUF file, named as llama.cpp names
// them (token_embd, blk.N.attn_q, ...).
func (m *Model) loadGGUF(f *gguf.File, progress func(done, total int64)) error {
	c := m.cfg
	h, qd, kvd, in := c.HiddenSize, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim, c.IntermediateSize
	g := &ggufLoader{f: f, m: m, progress: progress}
	for _, t := range f.Tensors() {
		g.total += int64(t.Bytes)
	}
	permute := c.Family == "llama" // llama.cpp's converter permutes llama's q and k, not qwen2's
	heads := func(n int) int {
		if permute {
			return n
		}
		return 0
	}
	if info, ok := f.Tensor("token_embd.weight"); ok && info.Type.Quantized() {
		data, typ := g.bytes("token_embd.weight", 0, c.VocabSize, h)
		if g.err == nil {
			m.embedQ, g.err = candle.NewQTensor(m.dev, typ, data, c.VocabSize, h)
		}
		if g.err == nil && c.TieEmbeddings {
			m.lmHead.q = []*candle.QTensor{m.embedQ}
		}
	} else {
		m.embed = g.dense("token_embd.weight", 0, c.VocabSize, h)
		if g.err == nil && c.TieEmbeddings {
			m.lmHead.wT, g.err = m.embed.T()
		}
	}
	m.norm = g.dense("output_norm.weight", 0, h)
	if !c.TieEmbeddings {
		m.lmHead = g.linear(h, part{name: "output.weight", rows: c.VocabSize})
	}
	for i := range c.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ly := &layer{}
		m.layers = append(m.layers, ly)
		ly.inNorm = g.dense(p+"attn_norm.weight", 0, h)
		ly.postNorm = g.dense(p+"ffn_norm.weight", 0, h)
		ly.qkv = g.linear(h, part{p + "attn_q.weight", qd, heads(c.Heads)}, part{p + "attn_k.weight", kvd, heads(c.KVHeads)}, part{p + "attn_v.weight", kvd, 0})
		if c.QKVBias {
			q, k, v := g.dense(p+"attn_q.bias", heads(c.Heads), qd), g.dense(p+"attn_k.bias", heads(c.KVHeads), kvd), g.dense(p+"attn_v.bias", 0, kvd)
			if g.err == nil {
				ly.qkvBias, g.err = candle.Cat([]*candle.Tensor{q, k, v}, 0)
			}
			closeAll(q, k, v)
		}
		ly.o = g.linear(qd, part{name: p + "attn_output.weight", rows: h})
		if c.OutputBias {
			ly.oBias = g.dense(p+"attn_output.bias", 0, h)
		}
		ly.gateUp = g.linear(h, part{name: p + "ffn_gate.weight", rows: in}, part{name: p + "ffn_up.weight", rows: in})
		ly.down = g.linear(in, part{name: p + "ffn_down.weight", rows: h})
		if g.err != nil {
			return g.err
		}
	}
	return g.err
}

// IsGGUF reports whether path names a GGUF file (by its name: *.gguf).
func IsGGUF(path string) bool { return strings.HasSuffix(strings.ToLower(path), ".gguf") }
