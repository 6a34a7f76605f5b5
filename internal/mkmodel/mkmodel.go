// Package mkmodel writes Llama-architecture model folders with random
// weights, in Hugging Face's layout (config.json, model.safetensors,
// generation_config.json, and a byte-level BPE tokenizer.json with its
// tokenizer_config.json and a Llama 3 chat template): models the project
// builds itself, with no network, for demos, tests and benchmarks; and
// Stable Diffusion 1.x folders in diffusers' layout (WriteSD). The
// rocm-go-mkmodel command is its front end.
package mkmodel

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/hip"
)

// Spec is the shape of a model to write.
type Spec struct {
	Family                             string // "llama" (default), "mistral" or "qwen2"
	Hidden, Intermediate, Layers       int
	Heads, KVHeads, HeadDim            int // HeadDim 0: Hidden / Heads (and no head_dim in the config)
	Vocab                              int // 0: the tokenizer's size
	MaxPositions                       int
	RopeTheta                          float64
	RopeScaling                        *RopeScaling
	RMSNormEps                         float64
	TieEmbeddings                      bool
	AttentionBias, MLPBias             bool // llama's attention_bias and mlp_bias (qwen2 has q/k/v biases always)
	SlidingWindow                      int  // mistral's sliding_window; qwen2's with use_sliding_window
	DType                              candle.DType
	Seed                               uint64
	Merges                             int // BPE merges of the tokenizer (default 240)
	SpecialBase                        int // the id of <|begin_of_text|> (0: right after the merges)
	NoTokenizer                        bool
	NormJitter                         float64 // norm weights are 1 + NormJitter·N(0, 1) (default 0.1)
	EmbedScale, WeightScale, BiasScale float64 // std of embeddings × √hidden, of weights × √fan-in, of biases (defaults 2, 1, 0.1)
}

// RopeScaling is a config's rope_scaling.
type RopeScaling struct {
	Type                          string  `json:"rope_type"`
	Factor                        float64 `json:"factor"`
	LowFreqFactor                 float64 `json:"low_freq_factor,omitempty"`
	HighFreqFactor                float64 `json:"high_freq_factor,omitempty"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings,omitempty"`
}

// Tiny is a small model that runs fast on the CPU: 4 layers of 128, GQA,
// llama3 RoPE scaling, tied embeddings, the tokenizer's vocabulary, F32.
func Tiny() Spec {
	return Spec{Family: "llama", Hidden: 128, Intermediate: 384, Layers: 4, Heads: 4, KVHeads: 2, MaxPositions: 2048,
		RopeTheta: 500000, RMSNormEps: 1e-5, TieEmbeddings: true, DType: candle.F32, Seed: 1,
		RopeScaling: &RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 256}}
}

// Llama32_1B is Llama 3.2 1B's shape: hidden 2048, 16 layers, 32 heads, 8
// KV heads, intermediate 8192, vocab 128256, BF16, tied embeddings,
// llama3 RoPE scaling, Llama 3's special token ids.
func Llama32_1B() Spec {
	return Spec{Family: "llama", Hidden: 2048, Intermediate: 8192, Layers: 16, Heads: 32, KVHeads: 8, Vocab: 128256,
		MaxPositions: 131072, RopeTheta: 500000, RMSNormEps: 1e-5, TieEmbeddings: true, DType: candle.BF16, Seed: 1,
		SpecialBase: 128000,
		RopeScaling: &RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}}
}

// Llama31_8B is Llama 3.1 8B's shape: hidden 4096, 32 layers, 32 heads, 8
// KV heads, intermediate 14336, vocab 128256, BF16, untied embeddings,
// llama3 RoPE scaling, Llama 3's special token ids.
func Llama31_8B() Spec {
	return Spec{Family: "llama", Hidden: 4096, Intermediate: 14336, Layers: 32, Heads: 32, KVHeads: 8, Vocab: 128256,
		MaxPositions: 131072, RopeTheta: 500000, RMSNormEps: 1e-5, DType: candle.BF16, Seed: 1, SpecialBase: 128000,
		RopeScaling: &RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}}
}

// Presets are the named specs.
var Presets = map[string]func() Spec{"tiny": Tiny, "llama-3.2-1b": Llama32_1B, "llama-3.1-8b": Llama31_8B}

// Progress is what Write reports: the stage, and for tensors how many of
// how many bytes are done.
type Progress struct {
	Stage       string // "weights", "save", "tokenizer", "done"
	Done, Total int64
}

var architectures = map[string]string{"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM"}

func (s *Spec) check() error {
	if s.Family == "" {
		s.Family = "llama"
	}
	if _, ok := architectures[s.Family]; !ok {
		return fmt.Errorf("mkmodel: family %q: want llama, mistral or qwen2", s.Family)
	}
	if s.Hidden < 1 || s.Intermediate < 1 || s.Layers < 1 || s.Heads < 1 || s.KVHeads < 1 || s.Heads%s.KVHeads != 0 {
		return fmt.Errorf("mkmodel: hidden %d, intermediate %d, layers %d, heads %d, KV heads %d: want positive sizes, KV heads dividing heads", s.Hidden, s.Intermediate, s.Layers, s.Heads, s.KVHeads)
	}
	if s.HeadDim == 0 && s.Hidden%s.Heads != 0 {
		return fmt.Errorf("mkmodel: hidden %d is not a multiple of %d heads: give a head dim", s.Hidden, s.Heads)
	}
	if s.DType != candle.F32 && s.DType != candle.F16 && s.DType != candle.BF16 {
		return fmt.Errorf("mkmodel: dtype %s: want f32, f16 or bf16", s.DType)
	}
	if s.Merges == 0 {
		s.Merges = 240
	}
	if s.MaxPositions == 0 {
		s.MaxPositions = 2048
	}
	if s.RopeTheta == 0 {
		s.RopeTheta = 10000
	}
	if s.RMSNormEps == 0 {
		s.RMSNormEps = 1e-5
	}
	if s.NormJitter == 0 {
		s.NormJitter = 0.1
	}
	if s.EmbedScale == 0 {
		s.EmbedScale = 2
	}
	if s.WeightScale == 0 {
		s.WeightScale = 1
	}
	if s.BiasScale == 0 {
		s.BiasScale = 0.1
	}
	return nil
}

func (s *Spec) headDim() int {
	if s.HeadDim > 0 {
		return s.HeadDim
	}
	return s.Hidden / s.Heads
}

// tensorSpec is one weight to make: its name, shape and distribution.
type tensorSpec struct {
	name      string
	shape     []int
	mean, std float64
}

// tensors lists the weights of a spec, in Hugging Face's names.
func (s *Spec) tensors() []tensorSpec {
	hd := s.headDim()
	h, q, kv, in := s.Hidden, s.Heads*hd, s.KVHeads*hd, s.Intermediate
	w := func(name string, out, fanIn int) tensorSpec {
		return tensorSpec{name: name, shape: []int{out, fanIn}, std: s.WeightScale / math.Sqrt(float64(fanIn))}
	}
	norm := func(name string) tensorSpec {
		return tensorSpec{name: name, shape: []int{h}, mean: 1, std: s.NormJitter}
	}
	bias := func(name string, n int) tensorSpec { return tensorSpec{name: name, shape: []int{n}, std: s.BiasScale} }
	ts := []tensorSpec{
		{name: "model.embed_tokens.weight", shape: []int{s.Vocab, h}, std: s.EmbedScale / math.Sqrt(float64(h))},
		norm("model.norm.weight"),
	}
	if !s.TieEmbeddings {
		ts = append(ts, w("lm_head.weight", s.Vocab, h))
	}
	qkvBias := s.Family == "qwen2" || (s.Family == "llama" && s.AttentionBias)
	for i := range s.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		ts = append(ts, norm(p+"input_layernorm.weight"), norm(p+"post_attention_layernorm.weight"),
			w(p+"self_attn.q_proj.weight", q, h), w(p+"self_attn.k_proj.weight", kv, h), w(p+"self_attn.v_proj.weight", kv, h),
			w(p+"self_attn.o_proj.weight", h, q),
			w(p+"mlp.gate_proj.weight", in, h), w(p+"mlp.up_proj.weight", in, h), w(p+"mlp.down_proj.weight", h, in))
		if qkvBias {
			ts = append(ts, bias(p+"self_attn.q_proj.bias", q), bias(p+"self_attn.k_proj.bias", kv), bias(p+"self_attn.v_proj.bias", kv))
		}
		if s.Family == "llama" && s.AttentionBias {
			ts = append(ts, bias(p+"self_attn.o_proj.bias", h))
		}
		if s.Family == "llama" && s.MLPBias {
			ts = append(ts, bias(p+"mlp.gate_proj.bias", in), bias(p+"mlp.up_proj.bias", in), bias(p+"mlp.down_proj.bias", h))
		}
	}
	return ts
}

// Bytes is the size of the weights a spec makes.
func (s Spec) Bytes() (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if s.Vocab == 0 {
		s.Vocab = s.tokenizerSize()
	}
	return s.weightBytes(), nil
}

// weightBytes is the size of the weights of a checked spec whose Vocab is
// set.
func (s *Spec) weightBytes() int64 {
	var n int64
	for _, t := range s.tensors() {
		n += int64(elems(t.shape))
	}
	return n * int64(s.DType.Size())
}

// start is what Write and WriteGGUF begin with: s checked, its tokenizer
// trained (nil with NoTokenizer), its vocabulary filled in, and a progress
// func that is never nil.
func (s *Spec) start(progress func(Progress)) (*bpe, func(Progress), error) {
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	if progress == nil {
		progress = func(Progress) {}
	}
	var tok *bpe
	if !s.NoTokenizer {
		tok = trainBPE(s.Merges)
	}
	if s.Vocab == 0 {
		s.Vocab = s.tokenizerSize()
	}
	if !s.NoTokenizer && s.Vocab < s.tokenizerSize() {
		return nil, nil, fmt.Errorf("mkmodel: vocab %d is smaller than the tokenizer's %d tokens", s.Vocab, s.tokenizerSize())
	}
	return tok, progress, nil
}

// Write makes dir (if need be) and writes the model into it; progress, if
// not nil, hears how it goes.
func Write(dir string, s Spec, progress func(Progress)) error {
	tok, progress, err := s.start(progress)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("mkmodel: %w", err)
	}
	specs := s.tensors()
	total := s.weightBytes()
	tensors := make(map[string]*candle.Tensor, len(specs))
	defer func() {
		for _, t := range tensors {
			t.Close()
		}
	}()
	var mu sync.Mutex
	var done int64
	var firstErr error
	work := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range work {
				t, err := s.random(specs[i])
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if t != nil {
					tensors[specs[i].name] = t
					done += int64(elems(specs[i].shape) * s.DType.Size())
					progress(Progress{Stage: "weights", Done: done, Total: total})
				}
				mu.Unlock()
			}
		})
	}
	for i := range specs {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	progress(Progress{Stage: "save", Total: total})
	meta := map[string]string{"format": "pt", "generator": "rocm-go-mkmodel"}
	if err := safetensors.Save(filepath.Join(dir, "model.safetensors"), tensors, meta); err != nil {
		return err
	}
	progress(Progress{Stage: "save", Done: total, Total: total})
	if err := writeJSON(filepath.Join(dir, "config.json"), s.config()); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, "generation_config.json"), s.generationConfig()); err != nil {
		return err
	}
	if tok != nil {
		progress(Progress{Stage: "tokenizer"})
		if err := writeJSON(filepath.Join(dir, "tokenizer.json"), tok.tokenizerJSON(s.specialBase(tok), s.Vocab)); err != nil {
			return err
		}
		if err := writeJSON(filepath.Join(dir, "tokenizer_config.json"), tokenizerConfig(s.specialBase(tok), s.Vocab, s.MaxPositions)); err != nil {
			return err
		}
	}
	progress(Progress{Stage: "done", Done: total, Total: total})
	return nil
}

func elems(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// random makes one tensor on the CPU, from a stream of its own (the seed
// and the tensor's name), so that every tensor is the same whatever the
// order they are made in.
func (s *Spec) random(t tensorSpec) (*candle.Tensor, error) {
	h := fnv.New64a()
	h.Write([]byte(t.name))
	r := rand.New(rand.NewPCG(s.Seed, h.Sum64()))
	n := elems(t.shape)
	cpu := candle.CPU()
	switch s.DType {
	case candle.BF16:
		v := make([]hip.BFloat16, n)
		for i := range v {
			v[i] = hip.BFloat16FromFloat32(float32(t.mean + t.std*r.NormFloat64()))
		}
		return candle.FromSlice(cpu, v, t.shape...)
	case candle.F16:
		v := make([]hip.Half, n)
		for i := range v {
			v[i] = hip.HalfFromFloat32(float32(t.mean + t.std*r.NormFloat64()))
		}
		return candle.FromSlice(cpu, v, t.shape...)
	default:
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(t.mean + t.std*r.NormFloat64())
		}
		return candle.FromSlice(cpu, v, t.shape...)
	}
}

var torchDTypes = map[candle.DType]string{candle.F32: "float32", candle.F16: "float16", candle.BF16: "bfloat16"}

// config is config.json, in transformers 4's form (which 5 reads too).
func (s *Spec) config() map[string]any {
	c := map[string]any{
		"architectures":           []string{architectures[s.Family]},
		"model_type":              s.Family,
		"hidden_size":             s.Hidden,
		"intermediate_size":       s.Intermediate,
		"num_hidden_layers":       s.Layers,
		"num_attention_heads":     s.Heads,
		"num_key_value_heads":     s.KVHeads,
		"hidden_act":              "silu",
		"max_position_embeddings": s.MaxPositions,
		"rms_norm_eps":            s.RMSNormEps,
		"rope_theta":              s.RopeTheta,
		"vocab_size":              s.Vocab,
		"tie_word_embeddings":     s.TieEmbeddings,
		"torch_dtype":             torchDTypes[s.DType],
		"initializer_range":       0.02,
		"use_cache":               true,
		"attention_dropout":       0.0,
	}
	if s.HeadDim > 0 {
		c["head_dim"] = s.HeadDim
	}
	if s.RopeScaling != nil {
		c["rope_scaling"] = s.RopeScaling
	}
	switch s.Family {
	case "llama":
		c["attention_bias"] = s.AttentionBias
		c["mlp_bias"] = s.MLPBias
	case "mistral":
		if s.SlidingWindow > 0 {
			c["sliding_window"] = s.SlidingWindow
		} else {
			c["sliding_window"] = nil
		}
	case "qwen2":
		c["use_sliding_window"] = s.SlidingWindow > 0
		c["sliding_window"] = 4096 // Qwen2's default, unused without use_sliding_window
		if s.SlidingWindow > 0 {
			c["sliding_window"] = s.SlidingWindow
		}
		c["max_window_layers"] = 0
	}
	if !s.NoTokenizer {
		base := s.specialBase(nil)
		c["bos_token_id"] = base
		c["eos_token_id"] = base + 1
	}
	return c
}

func (s *Spec) generationConfig() map[string]any {
	g := map[string]any{"_from_model_config": false, "do_sample": true, "temperature": 0.6, "top_p": 0.9}
	if !s.NoTokenizer {
		base := s.specialBase(nil)
		g["bos_token_id"] = base
		g["eos_token_id"] = []int{base + 1, base + 9} // <|end_of_text|>, <|eot_id|>
	}
	return g
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("mkmodel: %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("mkmodel: %w", err)
	}
	return nil
}
