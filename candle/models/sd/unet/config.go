package unet

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/rocm-go/rocm/errs"
)

// Config is a UNet2DConditionModel config (the folder's config.json).
// intOrList fields take diffusers' two spellings: one value for every
// block, or one per block.
type Config struct {
	// SampleSize is the latents' side the model was trained at (64 for
	// SD 1.5's 512-pixel images); 0 where the config does not say.
	SampleSize       int      `json:"sample_size"`
	InChannels       int      `json:"in_channels"`
	OutChannels      int      `json:"out_channels"`
	BlockOutChannels []int    `json:"block_out_channels"`
	DownBlockTypes   []string `json:"down_block_types"`
	UpBlockTypes     []string `json:"up_block_types"`
	MidBlockType     *string  `json:"mid_block_type"`
	LayersPerBlock   int      `json:"layers_per_block"`
	NormNumGroups    int      `json:"norm_num_groups"`
	NormEps          float64  `json:"norm_eps"`
	// CrossAttentionDim is the text encoder's width (768 SD 1.x, 1024 SD
	// 2.x, 2048 SDXL).
	CrossAttentionDim int `json:"cross_attention_dim"`
	// AttentionHeadDim is, for SD's UNets, the number of heads of each
	// block (diffusers' historical name), unless NumAttentionHeads is set.
	AttentionHeadDim          intOrList `json:"attention_head_dim"`
	NumAttentionHeads         intOrList `json:"num_attention_heads"`
	TransformerLayersPerBlock intOrList `json:"transformer_layers_per_block"`
	UseLinearProjection       bool      `json:"use_linear_projection"`
	FlipSinToCos              *bool     `json:"flip_sin_to_cos"`
	FreqShift                 float64   `json:"freq_shift"`
	// AdditionEmbedType "text_time" is SDXL's: the pooled text embedding
	// and the six time ids added to the time embedding.
	AdditionEmbedType              *string `json:"addition_embed_type"`
	AdditionTimeEmbedDim           int     `json:"addition_time_embed_dim"`
	ProjectionClassEmbeddingsInput int     `json:"projection_class_embeddings_input_dim"`
	// What is not implemented; a config that sets it is refused.
	ActFn                 string  `json:"act_fn"`
	ClassEmbedType        *string `json:"class_embed_type"`
	EncoderHidDim         *int    `json:"encoder_hid_dim"`
	TimeCondProjDim       *int    `json:"time_cond_proj_dim"`
	ResnetTimeScaleShift  string  `json:"resnet_time_scale_shift"`
	OnlyCrossAttention    any     `json:"only_cross_attention"`
	DualCrossAttention    bool    `json:"dual_cross_attention"`
	UpcastAttention       bool    `json:"upcast_attention"`
	CenterInputSample     bool    `json:"center_input_sample"`
	ConvInKernel          int     `json:"conv_in_kernel"`
	ConvOutKernel         int     `json:"conv_out_kernel"`
	ReverseTransformerPer any     `json:"reverse_transformer_layers_per_block"`
}

// intOrList is a JSON number or list of numbers.
type intOrList []int

func (v *intOrList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = nil
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		*v = intOrList{n}
		return nil
	}
	var l []int
	if err := json.Unmarshal(b, &l); err != nil {
		return fmt.Errorf("neither a number nor a list of numbers: %s", b)
	}
	*v = l
	return nil
}

// per is v's value for each of n blocks.
func (v intOrList) per(n int) []int {
	if len(v) == 1 {
		out := make([]int, n)
		for i := range out {
			out[i] = v[0]
		}
		return out
	}
	return slices.Clone(v)
}

// ParseConfig reads a UNet2DConditionModel config's JSON and checks it.
func ParseConfig(b []byte) (Config, error) {
	const op = "ParseConfig"
	c := Config{NormNumGroups: 32, NormEps: 1e-5, ActFn: "silu", ConvInKernel: 3, ConvOutKernel: 3}
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, pkg.Errorf(op, errs.ErrFormat, "not a UNet2DConditionModel config: %v", err)
	}
	if len(c.NumAttentionHeads) == 0 {
		c.NumAttentionHeads = c.AttentionHeadDim
	}
	if len(c.TransformerLayersPerBlock) == 0 {
		c.TransformerLayersPerBlock = intOrList{1}
	}
	return c, c.check(op)
}

func (c *Config) check(op string) error {
	bad := func(kind error, field, format string, args ...any) error {
		return &errs.Error{Pkg: string(pkg), Op: op, Kind: kind, Field: field, Detail: fmt.Sprintf(format, args...)}
	}
	n := len(c.BlockOutChannels)
	switch {
	case c.InChannels < 1 || c.OutChannels < 1 || c.CrossAttentionDim < 1:
		return bad(errs.ErrArgument, "in_channels", "in_channels %d, out_channels %d, cross_attention_dim %d: want positive sizes", c.InChannels, c.OutChannels, c.CrossAttentionDim)
	case n == 0 || len(c.DownBlockTypes) != n || len(c.UpBlockTypes) != n:
		return bad(errs.ErrArgument, "block_out_channels", "%d blocks, %d down and %d up block types: want one of each per block", n, len(c.DownBlockTypes), len(c.UpBlockTypes))
	case c.LayersPerBlock < 1 || c.NormNumGroups < 1:
		return bad(errs.ErrArgument, "layers_per_block", "layers_per_block %d, norm_num_groups %d: want positive counts", c.LayersPerBlock, c.NormNumGroups)
	case len(c.NumAttentionHeads) != 1 && len(c.NumAttentionHeads) != n:
		return bad(errs.ErrArgument, "attention_head_dim", "%v: want one head count, or one per block", c.NumAttentionHeads)
	case len(c.TransformerLayersPerBlock) != 1 && len(c.TransformerLayersPerBlock) != n:
		return bad(errs.ErrArgument, "transformer_layers_per_block", "%v: want one count, or one per block", c.TransformerLayersPerBlock)
	case c.ActFn != "silu":
		return bad(errs.ErrUnsupported, "act_fn", "%q: SD's UNets use silu", c.ActFn)
	case c.ClassEmbedType != nil, c.EncoderHidDim != nil, c.TimeCondProjDim != nil:
		return bad(errs.ErrUnsupported, "class_embed_type", "class embeddings, encoder_hid_dim and time_cond_proj_dim are not implemented")
	case c.ResnetTimeScaleShift != "" && c.ResnetTimeScaleShift != "default":
		return bad(errs.ErrUnsupported, "resnet_time_scale_shift", "%q: only default is implemented", c.ResnetTimeScaleShift)
	case c.OnlyCrossAttention != nil && c.OnlyCrossAttention != false, c.DualCrossAttention:
		return bad(errs.ErrUnsupported, "only_cross_attention", "only and dual cross-attention are not implemented")
	case c.CenterInputSample:
		return bad(errs.ErrUnsupported, "center_input_sample", "true is not implemented")
	case c.ConvInKernel != 3 || c.ConvOutKernel != 3:
		return bad(errs.ErrUnsupported, "conv_in_kernel", "kernels %d and %d: only 3 is implemented", c.ConvInKernel, c.ConvOutKernel)
	case c.MidBlockType != nil && *c.MidBlockType != "UNetMidBlock2DCrossAttn":
		return bad(errs.ErrUnsupported, "mid_block_type", "%q: only UNetMidBlock2DCrossAttn is implemented", *c.MidBlockType)
	case c.ReverseTransformerPer != nil:
		return bad(errs.ErrUnsupported, "reverse_transformer_layers_per_block", "not implemented")
	}
	if c.AdditionEmbedType != nil && *c.AdditionEmbedType != "text_time" {
		return bad(errs.ErrUnsupported, "addition_embed_type", "%q: only text_time (SDXL's) is implemented", *c.AdditionEmbedType)
	}
	heads := c.NumAttentionHeads.per(n)
	for i, ch := range c.BlockOutChannels {
		if ch < 1 || ch%c.NormNumGroups != 0 {
			return bad(errs.ErrArgument, "block_out_channels", "%d: want a positive multiple of norm_num_groups %d", ch, c.NormNumGroups)
		}
		if heads[i] < 1 || ch%heads[i] != 0 || (ch/heads[i])%8 != 0 || ch/heads[i] > 256 {
			return bad(errs.ErrUnsupported, "attention_head_dim", "%d channels over %d heads: want a head dim that is a multiple of 8 up to 256", ch, heads[i])
		}
	}
	for _, t := range c.DownBlockTypes {
		if t != "CrossAttnDownBlock2D" && t != "DownBlock2D" {
			return bad(errs.ErrUnsupported, "down_block_types", "%q: want CrossAttnDownBlock2D or DownBlock2D", t)
		}
	}
	for _, t := range c.UpBlockTypes {
		if t != "CrossAttnUpBlock2D" && t != "UpBlock2D" {
			return bad(errs.ErrUnsupported, "up_block_types", "%q: want CrossAttnUpBlock2D or UpBlock2D", t)
		}
	}
	return nil
}

// LoadConfig reads a unet folder's config.json.
func LoadConfig(path string) (Config, error) {
	b, err := pkg.ReadFile("LoadConfig", path)
	if err != nil {
		return Config{}, err
	}
	c, err := ParseConfig(b)
	return c, errs.AtPath(err, path)
}

// TextTime reports whether the UNet takes SDXL's added conditioning (the
// pooled text embedding and the time ids).
func (c Config) TextTime() bool {
	return c.AdditionEmbedType != nil && *c.AdditionEmbedType == "text_time"
}

// flip is flip_sin_to_cos (default true).
func (c Config) flip() bool { return c.FlipSinToCos == nil || *c.FlipSinToCos }
