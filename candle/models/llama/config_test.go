package llama

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/errs"
)

// Llama 3.2 1B's config.json as published (transformers 4's form).
const llama32Config = `{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256}`

// Mistral 7B v0.1's.
const mistralConfig = `{
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
  "sliding_window": 4096, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.34.0.dev0", "use_cache": true, "vocab_size": 32000}`

// Qwen2.5 0.5B Instruct's.
const qwen25Config = `{
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936}`

// A transformers 5 save: rope_parameters and dtype.
const llamaV5Config = `{
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
  "max_position_embeddings": 256, "dtype": "float32",
  "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
    "high_freq_factor": 4.0, "original_max_position_embeddings": 64}}`

func TestParseConfigFamilies(t *testing.T) {
	c, err := ParseConfig([]byte(llama32Config))
	require.NoError(t, err)
	assert.Equal(t, &Config{Architecture: "LlamaForCausalLM", Family: "llama", HiddenSize: 2048, IntermediateSize: 8192, Layers: 16,
		Heads: 32, KVHeads: 8, HeadDim: 64, RMSNormEps: 1e-5, RopeTheta: 500000, MaxPositions: 131072, VocabSize: 128256,
		TieEmbeddings: true, DType: candle.BF16,
		RopeScaling: &RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}}, c)
	assert.Equal(t, 0, c.Window(3))

	c, err = ParseConfig([]byte(mistralConfig))
	require.NoError(t, err)
	assert.Equal(t, "mistral", c.Family)
	assert.Equal(t, 4096, c.SlidingWindow)
	assert.Equal(t, 4096, c.Window(31))
	assert.Equal(t, 128, c.HeadDim)
	assert.False(t, c.QKVBias || c.TieEmbeddings)

	c, err = ParseConfig([]byte(qwen25Config))
	require.NoError(t, err)
	assert.True(t, c.QKVBias)
	assert.False(t, c.OutputBias)
	assert.True(t, c.TieEmbeddings)
	assert.Equal(t, 0, c.SlidingWindow, "use_sliding_window is false")
	assert.Equal(t, 64, c.HeadDim)
	assert.Equal(t, 1e6, c.RopeTheta)

	c, err = ParseConfig([]byte(llamaV5Config))
	require.NoError(t, err)
	assert.Equal(t, 500000.0, c.RopeTheta)
	assert.Equal(t, "llama3", c.RopeScaling.Type)
	assert.Equal(t, 64, c.RopeScaling.OriginalMaxPositionEmbeddings)
	assert.Equal(t, candle.F32, c.DType)

	// Qwen2 with its window from max_window_layers on, and with
	// layer_types (transformers 5).
	c, err = ParseConfig([]byte(`{"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 4,
		"num_attention_heads": 4, "vocab_size": 10, "use_sliding_window": true, "sliding_window": 16, "max_window_layers": 2}`))
	require.NoError(t, err)
	assert.Equal(t, []int{0, 0, 16, 16}, []int{c.Window(0), c.Window(1), c.Window(2), c.Window(3)})
	c, err = ParseConfig([]byte(`{"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 2,
		"num_attention_heads": 4, "vocab_size": 10, "use_sliding_window": true, "sliding_window": 16,
		"layer_types": ["sliding_attention", "full_attention"]}`))
	require.NoError(t, err)
	assert.Equal(t, []int{16, 0}, []int{c.Window(0), c.Window(1)})

	// Defaults, and the family from the architecture alone.
	c, err = ParseConfig([]byte(`{"architectures": ["MistralForCausalLM"], "hidden_size": 64, "intermediate_size": 64,
		"num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 10}`))
	require.NoError(t, err)
	assert.Equal(t, "mistral", c.Family)
	assert.Equal(t, 2, c.KVHeads)
	assert.Equal(t, 32, c.HeadDim)
	assert.Equal(t, 10000.0, c.RopeTheta)
	assert.Equal(t, 1e-6, c.RMSNormEps)
	assert.Equal(t, 131072, c.MaxPositions)
	assert.Equal(t, candle.F32, c.DType)

	// A folder, opened once by models.Open.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(mistralConfig), 0o644))
	require.NoError(t, safetensors.Save(filepath.Join(dir, "model.safetensors"), nil, nil))
	ck, err := models.Open(dir)
	require.NoError(t, err)
	c, err = ConfigOf(ck)
	require.NoError(t, err)
	assert.Equal(t, "mistral", c.Family)
	assert.Equal(t, "mistral", ck.Architecture)
	require.NoError(t, ck.Close())
	// A checkpoint of another format is not a Llama model's.
	_, err = ConfigOf(&models.Checkpoint{Path: "x.safetensors", Format: models.Safetensors})
	assert.ErrorIs(t, err, errs.ErrUnsupported)
	assert.ErrorContains(t, err, "a single safetensors file: a Llama-family model loads from a Hugging Face folder (config.json) or a GGUF file")
	// A bad config names its file.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type": "llama"}`), 0o644))
	ck, err = models.Open(dir)
	require.NoError(t, err)
	defer ck.Close()
	_, err = ConfigOf(ck)
	assert.ErrorIs(t, err, errs.ErrFormat)
	assert.ErrorContains(t, err, filepath.Join(dir, "config.json"))
	assert.ErrorContains(t, err, "hidden_size is missing")
}

func TestParseConfigErrors(t *testing.T) {
	base := `"hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 10`
	for _, c := range []struct {
		json string
		kind error
		msg  string
	}{
		{`not json`, errs.ErrFormat, "not a config.json"},
		{`{` + base + `}`, errs.ErrFormat, "neither model_type nor architectures"},
		{`{"model_type": "gemma2", ` + base + `}`, errs.ErrUnsupported, `model_type "gemma2": this package loads llama, mistral, qwen2`},
		{`{"architectures": ["GPT2LMHeadModel"], ` + base + `}`, errs.ErrUnsupported, `architecture "GPT2LMHeadModel"`},
		{`{"model_type": "llama", "architectures": ["LlamaForSequenceClassification"], ` + base + `}`, errs.ErrUnsupported, "loads as LlamaForCausalLM"},
		{`{"model_type": "llama", "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4}`, errs.ErrFormat, "vocab_size is missing"},
		{`{"model_type": "llama", "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 0, "num_attention_heads": 4, "vocab_size": 10}`, errs.ErrFormat, "num_hidden_layers is 0"},
		{`{"model_type": "llama", ` + base + `, "num_key_value_heads": 3}`, errs.ErrFormat, "the KV heads must divide the heads"},
		{`{"model_type": "llama", "hidden_size": 66, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 10}`, errs.ErrFormat, "not a multiple of num_attention_heads"},
		{`{"model_type": "llama", ` + base + `, "head_dim": 12}`, errs.ErrUnsupported, "head dim 12"},
		{`{"model_type": "llama", ` + base + `, "hidden_act": "gelu"}`, errs.ErrUnsupported, `hidden_act "gelu"`},
		{`{"model_type": "llama", ` + base + `, "rope_scaling": {"rope_type": "yarn", "factor": 4}}`, errs.ErrUnsupported, `rope_scaling of type "yarn"`},
		{`{"model_type": "llama", ` + base + `, "rope_scaling": {"type": "dynamic", "factor": 2}}`, errs.ErrUnsupported, `"dynamic"`},
		{`{"model_type": "llama", ` + base + `, "rope_scaling": {"rope_type": "llama3", "factor": 8}}`, errs.ErrFormat, "low_freq_factor, high_freq_factor"},
		{`{"model_type": "llama", ` + base + `, "rope_scaling": {"rope_type": "linear"}}`, errs.ErrFormat, "factor is missing"},
		{`{"model_type": "llama", ` + base + `, "rope_theta": -1}`, errs.ErrFormat, "rope_theta -1"},
		{`{"model_type": "llama", ` + base + `, "partial_rotary_factor": 0.5}`, errs.ErrUnsupported, "partial_rotary_factor"},
		{`{"model_type": "mistral", ` + base + `, "attention_bias": true}`, errs.ErrUnsupported, "attention_bias or mlp_bias on a mistral"},
		{`{"model_type": "llama", ` + base + `, "torch_dtype": "float8_e4m3fn"}`, errs.ErrUnsupported, `dtype "float8_e4m3fn"`},
		{`{"model_type": "qwen2", ` + base + `, "use_sliding_window": true, "sliding_window": 8, "layer_types": ["full_attention", "x"]}`, errs.ErrFormat, "layer_types has 2 entries for 1 layers"},
	} {
		_, err := ParseConfig([]byte(c.json))
		assert.ErrorIs(t, err, c.kind, c.msg)
		assert.ErrorContains(t, err, c.msg)
	}
}

// TestInvFreq checks the llama3 scaling at its three regimes against
// values computed by hand from its definition.
func TestInvFreq(t *testing.T) {
	c := &Config{HeadDim: 8, RopeTheta: 10000}
	f := c.InvFreq()
	assert.InDeltaSlice(t, []float64{1, 0.1, 0.01, 0.001}, f, 1e-15)
	c.RopeScaling = &RopeScaling{Type: "linear", Factor: 4}
	assert.InDeltaSlice(t, []float64{0.25, 0.025, 0.0025, 0.00025}, c.InvFreq(), 1e-15)
	// Wavelengths 2π, 62.8, 628 and 6283; with an original context of
	// 400, low 1 and high 4: those below 100 are kept, those above 400
	// divided by 8 (none falls between).
	c.RopeScaling = &RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 400}
	assert.InDeltaSlice(t, []float64{1, 0.1, 0.01 / 8, 0.001 / 8}, c.InvFreq(), 1e-15)
	// An original context of 1000: wavelength 628 is between 250 and
	// 1000, smoothed with s = (1000/628.3 - 1) / 3.
	c.RopeScaling.OriginalMaxPositionEmbeddings = 1000
	s := (1000/(2*math.Pi/0.01) - 1) / 3
	assert.InDeltaSlice(t, []float64{1, 0.1, (1-s)*0.01/8 + s*0.01, 0.001 / 8}, c.InvFreq(), 1e-15)
}
