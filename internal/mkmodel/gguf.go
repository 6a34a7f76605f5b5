package mkmodel

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/gguf"
)

// ggufName maps a Hugging Face weight name to llama.cpp's.
func ggufName(name string) string {
	r := strings.NewReplacer(
		"model.embed_tokens.", "token_embd.", "model.norm.", "output_norm.", "lm_head.", "output.",
		"model.layers.", "blk.", ".input_layernorm.", ".attn_norm.", ".post_attention_layernorm.", ".ffn_norm.",
		".self_attn.q_proj.", ".attn_q.", ".self_attn.k_proj.", ".attn_k.", ".self_attn.v_proj.", ".attn_v.",
		".self_attn.o_proj.", ".attn_output.", ".mlp.gate_proj.", ".ffn_gate.", ".mlp.up_proj.", ".ffn_up.",
		".mlp.down_proj.", ".ffn_down.")
	return r.Replace(name)
}

// tensorType is the GGML type a weight is written in: typ for matrices
// whose rows are whole blocks of it (else Q8_0, else F16, as llama.cpp
// falls back), F32 for vectors.
func tensorType(t tensorSpec, typ candle.GGMLType) candle.GGMLType {
	if len(t.shape) < 2 {
		return candle.GGMLF32
	}
	k := t.shape[len(t.shape)-1]
	for _, c := range []candle.GGMLType{typ, candle.GGMLQ8_0, candle.GGMLF16} {
		if k%c.BlockSize() == 0 {
			return c
		}
	}
	return candle.GGMLF32
}

// WriteGGUF writes the model of s as one GGUF file at path, as llama.cpp's
// converter would write the folder Write makes (the same weights for the
// same spec): llama.cpp's tensor names, q and k rows of llama-family
// models in its order, Llama 3.1's RoPE scaling as a rope_freqs tensor,
// the tokenizer in the metadata, and the matrices in typ (a float type, or
// a quantized one; matrices whose rows are not whole blocks of it fall
// back to Q8_0 or F16).
func WriteGGUF(path string, s Spec, typ candle.GGMLType, progress func(Progress)) error {
	if !typ.Known() || typ == candle.GGMLQ8_1 || typ == candle.GGMLQ8_K {
		return fmt.Errorf("mkmodel: GGUF type %s: want F32, F16, BF16 or a quantized weight type", typ)
	}
	tok, progress, err := s.start(progress)
	if err != nil {
		return err
	}
	if s.Family == "qwen2" || s.AttentionBias || s.MLPBias || s.SlidingWindow > 0 {
		return fmt.Errorf("mkmodel: GGUF: the %s family with biases or a sliding window is not written (llama without biases is)", s.Family)
	}
	meta, err := s.ggufMeta(tok)
	if err != nil {
		return err
	}
	specs := s.tensors()
	var gs []gguf.TensorSpec
	for _, t := range specs {
		gs = append(gs, gguf.TensorSpec{Name: ggufName(t.name), Dims: t.shape, Type: tensorType(t, typ)})
	}
	factors := s.ropeFactors()
	if factors != nil {
		gs = append(gs, gguf.TensorSpec{Name: "rope_freqs.weight", Dims: []int{len(factors)}, Type: candle.GGMLF32})
	}
	// The folder is made if need be, as Write makes its own.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("mkmodel: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("mkmodel: %w", err)
	}
	defer f.Close()
	w, err := gguf.NewWriter(f, meta, gs)
	if err != nil {
		return fmt.Errorf("mkmodel: %w", err)
	}
	// Tensors are made ahead by the CPU's cores and written in order.
	type result struct {
		b   []byte
		err error
	}
	results := make([]chan result, len(specs))
	for i := range results {
		results[i] = make(chan result, 1)
	}
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i, t := range specs {
			select {
			case slots <- struct{}{}:
			case <-stop:
				return
			}
			go func() {
				b, err := s.ggufBytes(t, gs[i].Type)
				results[i] <- result{b, err}
			}()
		}
	}()
	var total, done int64
	for _, g := range gs {
		if b, err := g.Type.RowBytes(g.Dims[len(g.Dims)-1]); err == nil {
			total += int64(b * elems(g.Dims) / g.Dims[len(g.Dims)-1])
		}
	}
	for i, t := range specs {
		r := <-results[i]
		<-slots
		if r.err != nil {
			return r.err
		}
		if err := w.WriteTensor(ggufName(t.name), r.b); err != nil {
			return fmt.Errorf("mkmodel: %w", err)
		}
		done += int64(len(r.b))
		progress(Progress{Stage: "weights", Done: done, Total: total})
	}
	if factors != nil {
		b, err := candle.QuantizeBlocks(candle.GGMLF32, factors)
		if err != nil {
			return err
		}
		if err := w.WriteTensor("rope_freqs.weight", b); err != nil {
			return fmt.Errorf("mkmodel: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("mkmodel: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("mkmodel: %w", err)
	}
	progress(Progress{Stage: "done", Done: total, Total: total})
	return nil
}

// ggufBytes makes a weight as Write does and encodes it in typ, q and k
// rows interleaved as llama.cpp's converter interleaves them.
func (s *Spec) ggufBytes(t tensorSpec, typ candle.GGMLType) ([]byte, error) {
	x, err := s.random(t)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	f, err := x.ToDType(candle.F32)
	if err != nil {
		return nil, err
	}
	vals, err := candle.ToSlice[float32](f)
	f.Close()
	if err != nil {
		return nil, err
	}
	switch {
	case strings.HasSuffix(t.name, "q_proj.weight"):
		vals = permuteRows(vals, s.Heads, s.headDim(), t.shape[1])
	case strings.HasSuffix(t.name, "k_proj.weight"):
		vals = permuteRows(vals, s.KVHeads, s.headDim(), t.shape[1])
	}
	return candle.QuantizeBlocks(typ, vals)
}

// permuteRows puts each head's rows in llama.cpp's order: its row 2i+j is
// Hugging Face's row j·hd/2+i.
func permuteRows(x []float32, heads, hd, cols int) []float32 {
	out := make([]float32, len(x))
	for h := range heads {
		for i := range hd / 2 {
			for j := range 2 {
				copy(out[(h*hd+2*i+j)*cols:][:cols], x[(h*hd+j*hd/2+i)*cols:][:cols])
			}
		}
	}
	return out
}

// ropeFactors are llama3 RoPE scaling's divisors of each frequency, as
// llama.cpp's converter writes them (nil without llama3 scaling).
func (s *Spec) ropeFactors() []float32 {
	r := s.RopeScaling
	if r == nil || r.Type != "llama3" {
		return nil
	}
	hd := s.headDim()
	old := float64(r.OriginalMaxPositionEmbeddings)
	lowWave, highWave := old/r.LowFreqFactor, old/r.HighFreqFactor
	out := make([]float32, hd/2)
	for i := range out {
		freq := 1 / math.Pow(s.RopeTheta, float64(2*i)/float64(hd))
		wave := 2 * math.Pi / freq
		switch {
		case wave < highWave:
			out[i] = 1
		case wave > lowWave:
			out[i] = float32(r.Factor)
		default:
			smooth := (old/wave - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/r.Factor + smooth))
		}
	}
	return out
}

// ggufMeta is the file's metadata: the config under llama.*, the
// tokenizer under tokenizer.*.
func (s *Spec) ggufMeta(tok *bpe) ([]gguf.KV, error) {
	a := "llama."
	meta := []gguf.KV{
		{Key: "general.architecture", Value: "llama"},
		{Key: "general.name", Value: "rocm-go-mkmodel " + s.Family},
		{Key: a + "context_length", Value: uint32(s.MaxPositions)},
		{Key: a + "embedding_length", Value: uint32(s.Hidden)},
		{Key: a + "block_count", Value: uint32(s.Layers)},
		{Key: a + "feed_forward_length", Value: uint32(s.Intermediate)},
		{Key: a + "attention.head_count", Value: uint32(s.Heads)},
		{Key: a + "attention.head_count_kv", Value: uint32(s.KVHeads)},
		{Key: a + "attention.layer_norm_rms_epsilon", Value: float32(s.RMSNormEps)},
		{Key: a + "rope.freq_base", Value: float32(s.RopeTheta)},
		{Key: a + "rope.dimension_count", Value: uint32(s.headDim())},
		{Key: a + "vocab_size", Value: uint32(s.Vocab)},
	}
	if s.HeadDim > 0 {
		meta = append(meta, gguf.KV{Key: a + "attention.key_length", Value: uint32(s.HeadDim)}, gguf.KV{Key: a + "attention.value_length", Value: uint32(s.HeadDim)})
	}
	if r := s.RopeScaling; r != nil && r.Type == "linear" {
		meta = append(meta, gguf.KV{Key: a + "rope.scaling.type", Value: "linear"}, gguf.KV{Key: a + "rope.scaling.factor", Value: float32(r.Factor)})
	} else if r != nil && r.Type != "llama3" {
		return nil, fmt.Errorf("mkmodel: GGUF: rope scaling %q is not written", r.Type)
	}
	if tok == nil {
		return meta, nil
	}
	base := s.specialBase(tok)
	tokens := make([]string, s.Vocab)
	types := make([]int32, s.Vocab)
	for i := range tokens {
		tokens[i], types[i] = fmt.Sprintf("[PAD%d]", i), 5 // unused
	}
	for i, r := range byteUnicode {
		tokens[i], types[i] = string(r), 1
	}
	for i, t := range tok.tokens {
		tokens[256+i], types[256+i] = t, 1
	}
	for i, name := range specials(base, s.Vocab) {
		if base+i < s.Vocab {
			tokens[base+i], types[base+i] = name, 3 // control
		}
	}
	merges := make([]string, len(tok.merges))
	for i, m := range tok.merges {
		merges[i] = m[0] + " " + m[1]
	}
	return append(meta,
		gguf.KV{Key: "tokenizer.ggml.model", Value: "gpt2"},
		gguf.KV{Key: "tokenizer.ggml.pre", Value: "llama-bpe"},
		gguf.KV{Key: "tokenizer.ggml.tokens", Value: tokens},
		gguf.KV{Key: "tokenizer.ggml.token_type", Value: types},
		gguf.KV{Key: "tokenizer.ggml.merges", Value: merges},
		gguf.KV{Key: "tokenizer.ggml.bos_token_id", Value: uint32(base)},
		gguf.KV{Key: "tokenizer.ggml.eos_token_id", Value: uint32(base + 1)},
		gguf.KV{Key: "tokenizer.ggml.eot_token_id", Value: uint32(base + 9)},
		gguf.KV{Key: "tokenizer.ggml.add_bos_token", Value: true},
		gguf.KV{Key: "tokenizer.chat_template", Value: chatTemplate},
	), nil
}
