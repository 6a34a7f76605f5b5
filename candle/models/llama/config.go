package llama

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/flashattn"
)

// A config that lacks a field the model needs or holds a value it cannot
// take is an error of kind errs.ErrFormat; a model this package does not
// implement (another architecture, an activation or a RoPE scaling it
// lacks), of kind errs.ErrUnsupported.

// Families are the model_type values the package loads.
var Families = []string{"llama", "mistral", "qwen2"}

// Config is a model's config.json as the package reads it (Hugging Face's
// names in the comments). Both the transformers 4 form (rope_theta and
// rope_scaling at the top, torch_dtype) and the transformers 5 form
// (rope_parameters, dtype) are read.
type Config struct {
	Architecture     string // architectures[0], "LlamaForCausalLM"
	Family           string // model_type: "llama", "mistral" or "qwen2"
	HiddenSize       int    // hidden_size
	IntermediateSize int    // intermediate_size
	Layers           int    // num_hidden_layers
	Heads            int    // num_attention_heads
	KVHeads          int    // num_key_value_heads (default Heads; fewer is GQA)
	HeadDim          int    // head_dim (default HiddenSize / Heads)
	RMSNormEps       float64
	RopeTheta        float64      // rope_theta (default 10000)
	RopeScaling      *RopeScaling // nil: plain RoPE
	MaxPositions     int          // max_position_embeddings
	VocabSize        int
	TieEmbeddings    bool // tie_word_embeddings: the output projection is the embedding table
	// QKVBias: q, k and v projections have biases (Qwen2; Llama's
	// attention_bias). OutputBias: o_proj has one (Llama's
	// attention_bias). MLPBias: gate, up and down have them (Llama's
	// mlp_bias).
	QKVBias, OutputBias, MLPBias bool
	// SlidingWindow, when > 0, limits each token's attention to itself and
	// the SlidingWindow-1 tokens before it, in the layers SlidingLayers
	// marks (nil: all of them). Mistral's sliding_window; Qwen2's with
	// use_sliding_window (from max_window_layers on, or as layer_types
	// says).
	SlidingWindow int
	SlidingLayers []bool
	// DType is torch_dtype (dtype in transformers 5): the weights' dtype,
	// F32 when the config does not say; a natural dtype to Load with.
	DType candle.DType
}

// RopeScaling is a config's rope_scaling (rope_parameters): how the
// rotary frequencies are stretched for long contexts.
type RopeScaling struct {
	// Type is "linear" (every frequency divided by Factor), "llama3"
	// (Llama 3.1's: low frequencies divided by Factor, high ones kept, a
	// smooth ramp between) or "factors" (frequency i divided by
	// Factors[i]: the rope_freqs tensor of a GGUF file, which holds
	// llama3's divisors computed ahead).
	Type                          string
	Factor                        float64
	LowFreqFactor                 float64   // llama3
	HighFreqFactor                float64   // llama3
	OriginalMaxPositionEmbeddings int       // llama3
	Factors                       []float64 // factors: HeadDim/2 of them
}

// rawConfig is config.json; pointers tell a missing field from a zero.
type rawConfig struct {
	Architectures         []string        `json:"architectures"`
	ModelType             string          `json:"model_type"`
	HiddenSize            *int            `json:"hidden_size"`
	IntermediateSize      *int            `json:"intermediate_size"`
	NumHiddenLayers       *int            `json:"num_hidden_layers"`
	NumAttentionHeads     *int            `json:"num_attention_heads"`
	NumKeyValueHeads      *int            `json:"num_key_value_heads"`
	HeadDim               *int            `json:"head_dim"`
	RMSNormEps            *float64        `json:"rms_norm_eps"`
	RopeTheta             *float64        `json:"rope_theta"`
	RopeScaling           json.RawMessage `json:"rope_scaling"`
	RopeParameters        json.RawMessage `json:"rope_parameters"`
	PartialRotaryFactor   *float64        `json:"partial_rotary_factor"`
	MaxPositionEmbeddings *int            `json:"max_position_embeddings"`
	VocabSize             *int            `json:"vocab_size"`
	TieWordEmbeddings     *bool           `json:"tie_word_embeddings"`
	AttentionBias         *bool           `json:"attention_bias"`
	MLPBias               *bool           `json:"mlp_bias"`
	HiddenAct             *string         `json:"hidden_act"`
	SlidingWindow         *int            `json:"sliding_window"`
	UseSlidingWindow      *bool           `json:"use_sliding_window"`
	MaxWindowLayers       *int            `json:"max_window_layers"`
	LayerTypes            []string        `json:"layer_types"`
	TorchDType            *string         `json:"torch_dtype"`
	DType                 *string         `json:"dtype"`
}

// rawRope is rope_scaling or rope_parameters.
type rawRope struct {
	RopeType                      *string  `json:"rope_type"`
	Type                          *string  `json:"type"` // the older name of rope_type
	RopeTheta                     *float64 `json:"rope_theta"`
	Factor                        *float64 `json:"factor"`
	LowFreqFactor                 *float64 `json:"low_freq_factor"`
	HighFreqFactor                *float64 `json:"high_freq_factor"`
	OriginalMaxPositionEmbeddings *int     `json:"original_max_position_embeddings"`
}

// architectures maps each family to its causal-LM class.
var architectures = map[string]string{
	"llama":   "LlamaForCausalLM",
	"mistral": "MistralForCausalLM",
	"qwen2":   "Qwen2ForCausalLM",
}

// defaultMaxPositions are the families' max_position_embeddings when a
// config leaves it out (transformers' defaults).
var defaultMaxPositions = map[string]int{"llama": 2048, "mistral": 4096 * 32, "qwen2": 32768}

// ConfigOf reads the config of a checkpoint: config.json of a Hugging
// Face folder (ParseConfig), or a GGUF file's metadata and tensors.
func ConfigOf(c *models.Checkpoint) (*Config, error) {
	const op = "ConfigOf"
	var (
		cfg  *Config
		err  error
		path = c.Path
	)
	switch c.Format {
	case models.HuggingFace:
		path = filepath.Join(path, "config.json")
		cfg, err = ParseConfig(c.Config)
	case models.GGUF:
		cfg, err = configFromGGUF(c.GGUF)
	default:
		return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrUnsupported, Path: c.Path,
			Detail: c.Format.String() + ": a Llama-family model loads from a Hugging Face folder (config.json) or a GGUF file"}
	}
	if err != nil {
		e := pkg.Wrap(op, err).(*errs.Error)
		e.Path = path
		return nil, e
	}
	return cfg, nil
}

func configErr(kind error, format string, args ...any) error {
	return pkg.Errorf("config", kind, format, args...)
}

// ParseConfig reads config.json's bytes.
func ParseConfig(b []byte) (*Config, error) {
	var r rawConfig
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, configErr(errs.ErrFormat, "not a config.json: %v", err)
	}
	c := &Config{}
	if len(r.Architectures) > 0 {
		c.Architecture = r.Architectures[0]
	}
	c.Family = r.ModelType
	if c.Family == "" {
		for f, a := range architectures {
			if a == c.Architecture {
				c.Family = f
			}
		}
	}
	want, ok := architectures[c.Family]
	switch {
	case c.Family == "" && c.Architecture == "":
		return nil, configErr(errs.ErrFormat, "neither model_type nor architectures says what the model is (want model_type %s)", strings.Join(Families, ", "))
	case c.Family == "":
		return nil, configErr(errs.ErrUnsupported, "architecture %q: this package loads %s", c.Architecture, strings.Join(Families, ", "))
	case !ok:
		return nil, configErr(errs.ErrUnsupported, "model_type %q: this package loads %s", c.Family, strings.Join(Families, ", "))
	case c.Architecture != "" && c.Architecture != want:
		return nil, configErr(errs.ErrUnsupported, "architecture %q: a %s model loads as %s (a causal LM with its lm_head)", c.Architecture, c.Family, want)
	}
	if c.Architecture == "" {
		c.Architecture = want
	}

	required := []struct {
		name string
		v    *int
		dst  *int
	}{
		{"hidden_size", r.HiddenSize, &c.HiddenSize},
		{"intermediate_size", r.IntermediateSize, &c.IntermediateSize},
		{"num_hidden_layers", r.NumHiddenLayers, &c.Layers},
		{"num_attention_heads", r.NumAttentionHeads, &c.Heads},
		{"vocab_size", r.VocabSize, &c.VocabSize},
	}
	for _, f := range required {
		if f.v == nil {
			return nil, configErr(errs.ErrFormat, "%s is missing", f.name)
		}
		if *f.v < 1 {
			return nil, configErr(errs.ErrFormat, "%s is %d: want a positive number", f.name, *f.v)
		}
		*f.dst = *f.v
	}
	c.KVHeads = c.Heads
	if r.NumKeyValueHeads != nil {
		c.KVHeads = *r.NumKeyValueHeads
	}
	if c.KVHeads < 1 || c.Heads%c.KVHeads != 0 {
		return nil, configErr(errs.ErrFormat, "%d attention heads and %d KV heads: the KV heads must divide the heads", c.Heads, c.KVHeads)
	}
	if r.HeadDim != nil {
		c.HeadDim = *r.HeadDim
	} else {
		if c.HiddenSize%c.Heads != 0 {
			return nil, configErr(errs.ErrFormat, "hidden_size %d is not a multiple of num_attention_heads %d, and head_dim is not given", c.HiddenSize, c.Heads)
		}
		c.HeadDim = c.HiddenSize / c.Heads
	}
	if c.HeadDim < 8 || c.HeadDim%8 != 0 || c.HeadDim > flashattn.MaxHeadDim {
		return nil, configErr(errs.ErrUnsupported, "head dim %d: attention takes a multiple of 8 from 8 to %d", c.HeadDim, flashattn.MaxHeadDim)
	}
	c.RMSNormEps = 1e-6
	if r.RMSNormEps != nil {
		c.RMSNormEps = *r.RMSNormEps
	}
	if c.RMSNormEps < 0 || math.IsNaN(c.RMSNormEps) {
		return nil, configErr(errs.ErrFormat, "rms_norm_eps %v: want a small positive number", c.RMSNormEps)
	}
	c.MaxPositions = defaultMaxPositions[c.Family]
	if r.MaxPositionEmbeddings != nil {
		c.MaxPositions = *r.MaxPositionEmbeddings
	}
	if c.MaxPositions < 1 {
		return nil, configErr(errs.ErrFormat, "max_position_embeddings %d: want a positive number", c.MaxPositions)
	}
	if r.HiddenAct != nil && *r.HiddenAct != "silu" {
		return nil, configErr(errs.ErrUnsupported, "hidden_act %q: the %s MLP here is SiLU-gated (silu)", *r.HiddenAct, c.Family)
	}
	if r.PartialRotaryFactor != nil && *r.PartialRotaryFactor != 1 {
		return nil, configErr(errs.ErrUnsupported, "partial_rotary_factor %v: rotary embeddings here span the whole head", *r.PartialRotaryFactor)
	}
	if r.TieWordEmbeddings != nil {
		c.TieEmbeddings = *r.TieWordEmbeddings
	}
	if err := c.readRope(&r); err != nil {
		return nil, err
	}
	if err := c.readBiasesAndWindow(&r); err != nil {
		return nil, err
	}
	c.DType = candle.F32
	for _, d := range []*string{r.DType, r.TorchDType} {
		if d == nil {
			continue
		}
		switch *d {
		case "float32":
			c.DType = candle.F32
		case "float16":
			c.DType = candle.F16
		case "bfloat16":
			c.DType = candle.BF16
		default:
			return nil, configErr(errs.ErrUnsupported, "dtype %q: the weights load as float32, float16 or bfloat16", *d)
		}
		break
	}
	return c, nil
}

// readRope reads rope_theta and the scaling, from rope_parameters
// (transformers 5) or rope_theta and rope_scaling (transformers 4).
func (c *Config) readRope(r *rawConfig) error {
	c.RopeTheta = 10000
	if r.RopeTheta != nil {
		c.RopeTheta = *r.RopeTheta
	}
	raw, name := r.RopeScaling, "rope_scaling"
	if len(r.RopeParameters) > 0 && string(r.RopeParameters) != "null" {
		raw, name = r.RopeParameters, "rope_parameters"
	}
	if len(raw) > 0 && string(raw) != "null" {
		var rr rawRope
		if err := json.Unmarshal(raw, &rr); err != nil {
			return configErr(errs.ErrFormat, "%s: %v", name, err)
		}
		if rr.RopeTheta != nil {
			c.RopeTheta = *rr.RopeTheta
		}
		typ := "default"
		if rr.RopeType != nil {
			typ = *rr.RopeType
		} else if rr.Type != nil {
			typ = *rr.Type
		}
		switch typ {
		case "default":
		case "linear", "llama3":
			s := &RopeScaling{Type: typ}
			if rr.Factor == nil || *rr.Factor <= 0 {
				return configErr(errs.ErrFormat, "%s of type %s: factor is missing or not positive", name, typ)
			}
			s.Factor = *rr.Factor
			if typ == "llama3" {
				if rr.LowFreqFactor == nil || rr.HighFreqFactor == nil || rr.OriginalMaxPositionEmbeddings == nil {
					return configErr(errs.ErrFormat, "%s of type llama3: low_freq_factor, high_freq_factor and original_max_position_embeddings are all needed", name)
				}
				s.LowFreqFactor, s.HighFreqFactor = *rr.LowFreqFactor, *rr.HighFreqFactor
				s.OriginalMaxPositionEmbeddings = *rr.OriginalMaxPositionEmbeddings
				if s.LowFreqFactor <= 0 || s.HighFreqFactor <= s.LowFreqFactor || s.OriginalMaxPositionEmbeddings < 1 {
					return configErr(errs.ErrFormat, "%s of type llama3: want 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings ≥ 1, got %v, %v, %d", name, s.LowFreqFactor, s.HighFreqFactor, s.OriginalMaxPositionEmbeddings)
				}
			}
			c.RopeScaling = s
		default:
			return configErr(errs.ErrUnsupported, "%s of type %q: this package implements default, linear and llama3", name, typ)
		}
	}
	if !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0) {
		return configErr(errs.ErrFormat, "rope_theta %v: want a positive number", c.RopeTheta)
	}
	return nil
}

// readBiasesAndWindow reads what differs between the families: biases
// and sliding windows.
func (c *Config) readBiasesAndWindow(r *rawConfig) error {
	attnBias := r.AttentionBias != nil && *r.AttentionBias
	mlpBias := r.MLPBias != nil && *r.MLPBias
	switch c.Family {
	case "llama":
		c.QKVBias, c.OutputBias, c.MLPBias = attnBias, attnBias, mlpBias
	case "qwen2":
		c.QKVBias = true // Qwen2's attention always has them, unsaid in its config
	}
	if c.Family != "llama" && (attnBias || mlpBias) {
		return configErr(errs.ErrUnsupported, "attention_bias or mlp_bias on a %s model: its modules have none", c.Family)
	}
	switch c.Family {
	case "mistral":
		if r.SlidingWindow != nil {
			c.SlidingWindow = *r.SlidingWindow
		}
	case "qwen2":
		if r.UseSlidingWindow != nil && *r.UseSlidingWindow && r.SlidingWindow != nil {
			c.SlidingWindow = *r.SlidingWindow
			from := c.Layers
			if r.MaxWindowLayers != nil {
				from = *r.MaxWindowLayers
			}
			c.SlidingLayers = make([]bool, c.Layers)
			for i := range c.SlidingLayers {
				c.SlidingLayers[i] = i >= from
			}
		}
	}
	if c.SlidingWindow < 0 {
		return configErr(errs.ErrFormat, "sliding_window %d: want a positive number, or none", c.SlidingWindow)
	}
	if r.LayerTypes != nil && c.SlidingWindow > 0 {
		if len(r.LayerTypes) != c.Layers {
			return configErr(errs.ErrFormat, "layer_types has %d entries for %d layers", len(r.LayerTypes), c.Layers)
		}
		c.SlidingLayers = make([]bool, c.Layers)
		for i, t := range r.LayerTypes {
			switch t {
			case "sliding_attention":
				c.SlidingLayers[i] = true
			case "full_attention":
			default:
				return configErr(errs.ErrUnsupported, "layer_types[%d] is %q: want full_attention or sliding_attention", i, t)
			}
		}
	}
	return nil
}

// Parameters is how many weights the model has (its embeddings counted
// once when tied).
func (c *Config) Parameters() int64 {
	h, qd, kvd, in := int64(c.HiddenSize), int64(c.Heads*c.HeadDim), int64(c.KVHeads*c.HeadDim), int64(c.IntermediateSize)
	layer := 2*h + h*(qd+2*kvd) + qd*h + 3*h*in
	if c.QKVBias {
		layer += qd + 2*kvd
	}
	if c.OutputBias {
		layer += h
	}
	if c.MLPBias {
		layer += 2*in + h
	}
	n := int64(c.VocabSize)*h + h + int64(c.Layers)*layer
	if !c.TieEmbeddings {
		n += int64(c.VocabSize) * h
	}
	return n
}

// Window is layer i's sliding window: 0 for full attention.
func (c *Config) Window(i int) int {
	if c.SlidingWindow <= 0 || (c.SlidingLayers != nil && !c.SlidingLayers[i]) {
		return 0
	}
	return c.SlidingWindow
}

// InvFreq is the rotary embeddings' inverse frequencies, HeadDim/2 of
// them, with the config's scaling: θ^(-2i/d), divided by Factor for
// linear scaling, and for llama3 divided where the wavelength is longer
// than OriginalMaxPositionEmbeddings/LowFreqFactor, kept where it is
// shorter than .../HighFreqFactor, and interpolated between.
func (c *Config) InvFreq() []float64 {
	d := c.HeadDim
	f := make([]float64, d/2)
	for i := range f {
		f[i] = 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(d))
	}
	s := c.RopeScaling
	if s == nil {
		return f
	}
	for i, x := range f {
		switch s.Type {
		case "linear":
			f[i] = x / s.Factor
		case "factors":
			f[i] = x / s.Factors[i]
		case "llama3":
			old := float64(s.OriginalMaxPositionEmbeddings)
			lowWave, highWave := old/s.LowFreqFactor, old/s.HighFreqFactor
			wave := 2 * math.Pi / x
			switch {
			case wave < highWave:
			case wave > lowWave:
				f[i] = x / s.Factor
			default:
				smooth := (old/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
				f[i] = (1-smooth)*x/s.Factor + smooth*x
			}
		}
	}
	return f
}
