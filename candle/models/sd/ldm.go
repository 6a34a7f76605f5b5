package sd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/sd/clip"
	"github.com/rocm-go/rocm/candle/models/sd/scheduler"
	"github.com/rocm-go/rocm/candle/models/sd/unet"
	"github.com/rocm-go/rocm/candle/models/sd/vae"
	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/errs"
)

// A single-file checkpoint holds the models of a pipeline in the names of
// the original Stable Diffusion code (CompVis' latent diffusion and
// Stability's generative-models): the UNet under model.diffusion_model.,
// the VAE under first_stage_model., and the text encoders under
// cond_stage_model.transformer. (SD 1.x: OpenAI's CLIP in transformers'
// names), cond_stage_model.model. (SD 2.x: OpenCLIP's names) or
// conditioner.embedders.0.transformer. and conditioner.embedders.1.model.
// (SDXL). Each model is read through an ldmView, which gives its tensors
// the names of a diffusers folder, and a config read from their shapes.

const (
	ldmUNet = "model.diffusion_model."
	ldmVAE  = "first_stage_model."
	ldmSD1  = "cond_stage_model.transformer."
	ldmSD2  = "cond_stage_model.model."
	ldmXL1  = "conditioner.embedders.0.transformer."
	ldmXL2  = "conditioner.embedders.1.model."
)

// ldmRules is what a checkpoint's shapes cannot say, SD's values in
// sdRules.
type ldmRules struct {
	groups   int // the UNet's and the VAE's GroupNorm groups
	sd1Heads int // an SD 1.x UNet's heads in every block
	// headDim is the head width of SD 2.x's and XL's UNets and of every
	// text encoder.
	headDim              int
	vaeScale, vaeScaleXL float64 // the VAE's latent scaling factor
	// vaeSample, vaeSampleXL: the image size the VAE was made for, its
	// tiles' size when it decodes in tiles.
	vaeSample, vaeSampleXL int
}

var sdRules = ldmRules{groups: 32, sd1Heads: 8, headDim: 64, vaeScale: 0.18215, vaeScaleXL: 0.13025, vaeSample: 512, vaeSampleXL: 1024}

// Layouts of single files.
const (
	layoutSD1 = "SD 1.x"
	layoutSD2 = "SD 2.x"
	layoutXL  = "SDXL"
)

// ldmFile is a single file's tensors by their original names.
type ldmFile struct {
	path   string
	w      candle.Weights
	names  []string
	layout string
	rules  ldmRules
}

// bad is an error about the file: its key (or what is missing) in Field.
func (f *ldmFile) bad(kind error, key, format string, args ...any) error {
	return &errs.Error{Pkg: string(pkg), Op: "Open", Kind: kind, Path: f.path, Field: key, Detail: fmt.Sprintf(format, args...)}
}

func (f *ldmFile) has(key string) bool {
	_, ok := f.w.Info(key)
	return ok
}

// shape is a tensor's shape, which must have rank dims.
func (f *ldmFile) shape(key string, rank int) (candle.Shape, error) {
	i, ok := f.w.Info(key)
	if !ok {
		return nil, f.bad(errs.ErrFormat, key, "the %s checkpoint has no tensor %s", f.layout, key)
	}
	if len(i.Shape) != rank {
		return nil, f.bad(errs.ErrFormat, key, "shape %v: want %d dims", i.Shape, rank)
	}
	return i.Shape, nil
}

// dim is one dim of a tensor of rank dims.
func (f *ldmFile) dim(key string, rank, d int) (int, error) {
	s, err := f.shape(key, rank)
	if err != nil {
		return 0, err
	}
	return s[d], nil
}

// count is how many numbered children prefix has (prefix+"N." for N from
// 0): one more than the largest N.
func (f *ldmFile) count(prefix string) int {
	n := 0
	for _, k := range f.names {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			if i, _, ok := cutIndex(rest); ok {
				n = max(n, i+1)
			}
		}
	}
	return n
}

// cutIndex splits "N.rest" into N and rest.
func cutIndex(s string) (int, string, bool) {
	head, rest, ok := strings.Cut(s, ".")
	if !ok {
		return 0, "", false
	}
	i, err := strconv.Atoi(head)
	return i, rest, err == nil && i >= 0
}

// openSingleFile loads a pipeline from a single-file checkpoint.
func openSingleFile(path string, dev candle.Device, dtype candle.DType, o Options, rules ldmRules) (*Pipeline, error) {
	const op = "Open"
	w, err := safetensors.Open(path)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	defer w.Close()
	pt, err := ldmParts(path, w, rules)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	if pt.tokDirs, err = tokenizerDirs(path, o, len(pt.texts)); err != nil {
		return nil, pkg.Wrap(op, err)
	}
	return build(pt, dev, dtype, o)
}

// tokenizerDirs is where a single file's tokenizers are (Options.Tokenizer).
func tokenizerDirs(path string, o Options, n int) ([]string, error) {
	root := o.Tokenizer
	if root == "" {
		root = filepath.Dir(path)
	}
	isDir := func(p string) bool { st, err := os.Stat(p); return err == nil && st.IsDir() }
	dirs := make([]string, n)
	for i := range dirs {
		switch {
		case i > 0 && isDir(filepath.Join(root, "tokenizer_2")):
			dirs[i] = filepath.Join(root, "tokenizer_2")
		case isDir(filepath.Join(root, "tokenizer")):
			dirs[i] = filepath.Join(root, "tokenizer")
		case o.Tokenizer != "" && isDir(root):
			dirs[i] = root // vocab.json and merges.txt
		default:
			where := "there is no tokenizer/ folder beside it"
			if o.Tokenizer != "" {
				where = "Options.Tokenizer is not a folder"
			}
			return nil, &errs.Error{Pkg: string(pkg), Op: "Open", Kind: errs.ErrNotFound, Path: root, Field: "Tokenizer",
				Detail: "a single-file checkpoint holds no tokenizer and " + where + ": set Options.Tokenizer to a folder with tokenizer/ (and tokenizer_2/ for SDXL), such as the model's diffusers folder, or to a folder of CLIP's vocab.json and merges.txt"}
		}
	}
	return dirs, nil
}

// ldmParts reads a single file's layout and its models' configs, and
// makes the views that load them.
func ldmParts(path string, w candle.Weights, rules ldmRules) (*parts, error) {
	f := &ldmFile{path: path, w: w, names: w.Names(), rules: rules}
	hasPrefix := func(p string) bool {
		for _, k := range f.names {
			if strings.HasPrefix(k, p) {
				return true
			}
		}
		return false
	}
	switch {
	case hasPrefix(ldmXL1) && hasPrefix(ldmXL2):
		f.layout = layoutXL
	case hasPrefix(ldmSD2):
		f.layout = layoutSD2
	case hasPrefix(ldmSD1):
		f.layout = layoutSD1
	default:
		return nil, f.bad(errs.ErrFormat, "", "no text encoder in the names of a single-file checkpoint (%s, %s, or %s and %s): the file is not an SD 1.x, 2.x or XL checkpoint in the original names", ldmSD1, ldmSD2, ldmXL1, ldmXL2)
	}
	for _, p := range []string{ldmUNet, ldmVAE} {
		if !hasPrefix(p) {
			return nil, f.bad(errs.ErrFormat, p, "the %s checkpoint has no tensor under %s", f.layout, p)
		}
	}
	pt := &parts{xl: f.layout == layoutXL, zeroNegative: f.layout == layoutXL, sched: scheduler.SD(), sampler: scheduler.Euler}
	if f.layout == layoutSD2 {
		pt.sched.PredictionType = scheduler.VPrediction
	}
	views := map[string]*ldmView{}
	type text func() (clip.Config, *ldmView, error)
	texts := map[string][]text{
		layoutSD1: {func() (clip.Config, *ldmView, error) { return f.openAIText(ldmSD1) }},
		layoutSD2: {func() (clip.Config, *ldmView, error) { return f.openCLIPText(ldmSD2, false) }},
		layoutXL: {func() (clip.Config, *ldmView, error) { return f.openAIText(ldmXL1) },
			func() (clip.Config, *ldmView, error) { return f.openCLIPText(ldmXL2, true) }},
	}[f.layout]
	for i, load := range texts {
		cfg, v, err := load()
		if err != nil {
			return nil, err
		}
		pt.texts, views[textEncoderName(i)] = append(pt.texts, cfg), v
	}
	var err error
	pooled := 0
	if pt.xl {
		pooled = pt.texts[1].ProjectionDim
	}
	if pt.unet, views["unet"], err = f.unetPart(pooled); err != nil {
		return nil, err
	}
	if pt.vae, views["vae"], err = f.vaePart(); err != nil {
		return nil, err
	}
	pt.weights = func(name string) (candle.Weights, error) { return views[name], nil }
	return pt, nil
}

// openAIText is the CLIP ViT-L text encoder of SD 1.x and of XL's first,
// under prefix in transformers' names (quick_gelu, no projection). Files
// saved with transformers before 4.x name its tensors without text_model.
func (f *ldmFile) openAIText(prefix string) (clip.Config, *ldmView, error) {
	p := prefix + "text_model."
	if !f.has(p+"embeddings.token_embedding.weight") && f.has(prefix+"embeddings.token_embedding.weight") {
		p = prefix
	}
	v := newView(f)
	for _, k := range f.names {
		name, ok := strings.CutPrefix(k, p)
		if !ok || name == "embeddings.position_ids" || !(strings.HasPrefix(name, "embeddings.") ||
			strings.HasPrefix(name, "encoder.") || strings.HasPrefix(name, "final_layer_norm.")) {
			continue
		}
		if err := v.add("text_model."+name, k, opSame); err != nil {
			return clip.Config{}, nil, err
		}
	}
	return f.textConfig(v, p+"embeddings.token_embedding.weight", p+"embeddings.position_embedding.weight",
		p+"encoder.layers.0.mlp.fc1.weight", f.count(p+"encoder.layers."), "quick_gelu", 0)
}

// openCLIPText is an OpenCLIP text encoder under prefix (gelu): SD 2.x's
// ViT-H, whose last block SD 2.x skips (it conditions on the penultimate
// state, with the final norm) and whose projection it does not use, or
// XL's ViT-bigG with its projection.
func (f *ldmFile) openCLIPText(prefix string, projection bool) (clip.Config, *ldmView, error) {
	v := newView(f)
	layers := f.count(prefix + "transformer.resblocks.")
	if !projection {
		layers--
	}
	fixed := map[string]string{
		"token_embedding.weight": "text_model.embeddings.token_embedding.weight",
		"positional_embedding":   "text_model.embeddings.position_embedding.weight",
		"ln_final.weight":        "text_model.final_layer_norm.weight",
		"ln_final.bias":          "text_model.final_layer_norm.bias",
	}
	block := []struct {
		ldm, hf string
		op      viewOp
	}{
		{"ln_1.", "layer_norm1.", opSame}, {"ln_2.", "layer_norm2.", opSame},
		{"attn.out_proj.", "self_attn.out_proj.", opSame}, {"mlp.c_fc.", "mlp.fc1.", opSame}, {"mlp.c_proj.", "mlp.fc2.", opSame},
	}
	for _, k := range f.names {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		if name, ok := fixed[rest]; ok {
			if err := v.add(name, k, opSame); err != nil {
				return clip.Config{}, nil, err
			}
			continue
		}
		if rest == "text_projection" && projection {
			if err := v.add("text_projection.weight", k, opT); err != nil {
				return clip.Config{}, nil, err
			}
			continue
		}
		r, ok := strings.CutPrefix(rest, "transformer.resblocks.")
		if !ok {
			continue // logit_scale, an unused projection
		}
		i, r, ok := cutIndex(r)
		if !ok || i >= layers {
			continue
		}
		to := fmt.Sprintf("text_model.encoder.layers.%d.", i)
		var err error
		switch {
		case r == "attn.in_proj_weight" || r == "attn.in_proj_bias":
			suffix := "weight"
			if strings.HasSuffix(r, "bias") {
				suffix = "bias"
			}
			for j, qkv := range []string{"q", "k", "v"} {
				if err = v.add(to+"self_attn."+qkv+"_proj."+suffix, k, opQ+viewOp(j)); err != nil {
					break
				}
			}
		default:
			err = f.bad(errs.ErrFormat, k, "not a tensor of an OpenCLIP block")
			for _, m := range block {
				if tail, ok := strings.CutPrefix(r, m.ldm); ok {
					err = v.add(to+m.hf+tail, k, m.op)
					break
				}
			}
		}
		if err != nil {
			return clip.Config{}, nil, err
		}
	}
	proj := 0
	if projection {
		var err error
		if proj, err = f.dim(prefix+"text_projection", 2, 1); err != nil {
			return clip.Config{}, nil, err
		}
	}
	return f.textConfig(v, prefix+"token_embedding.weight", prefix+"positional_embedding",
		prefix+"transformer.resblocks.0.mlp.c_fc.weight", layers, "gelu", proj)
}

// textConfig is a text encoder's config from its shapes.
func (f *ldmFile) textConfig(v *ldmView, tokens, positions, fc1 string, layers int, act string, proj int) (clip.Config, *ldmView, error) {
	tok, err := f.shape(tokens, 2)
	if err != nil {
		return clip.Config{}, nil, err
	}
	npos, err := f.dim(positions, 2, 0)
	if err != nil {
		return clip.Config{}, nil, err
	}
	inter, err := f.dim(fc1, 2, 0)
	if err != nil {
		return clip.Config{}, nil, err
	}
	hidden := tok[1]
	if layers < 1 || hidden%f.rules.headDim != 0 {
		return clip.Config{}, nil, f.bad(errs.ErrFormat, tokens, "a text encoder %d wide with %d layers: want at least one layer and a width that is a multiple of %d", hidden, layers, f.rules.headDim)
	}
	arch := "CLIPTextModel"
	if proj > 0 {
		arch = "CLIPTextModelWithProjection"
	}
	cfg, err := clip.ParseConfig(mustJSON(map[string]any{
		"architectures": []string{arch}, "vocab_size": tok[0], "hidden_size": hidden, "intermediate_size": inter,
		"num_hidden_layers": layers, "num_attention_heads": hidden / f.rules.headDim, "max_position_embeddings": npos,
		"hidden_act": act, "layer_norm_eps": 1e-5, "projection_dim": proj, "eos_token_id": 2,
	}))
	return cfg, v, errs.AtPath(err, f.path)
}

// unetPart is the UNet's config and view. pooled is XL's pooled text
// width, from which the time ids' embedding width follows.
func (f *ldmFile) unetPart(pooled int) (unet.Config, *ldmView, error) {
	const P = ldmUNet
	var zero unet.Config
	in, err := f.shape(P+"input_blocks.0.0.weight", 4)
	if err != nil {
		return zero, nil, err
	}
	out, err := f.dim(P+"out.2.weight", 4, 0)
	if err != nil {
		return zero, nil, err
	}
	nIn := f.count(P + "input_blocks.")
	var ops []int // the downsamplers' input blocks
	for i := range nIn {
		if f.has(fmt.Sprintf("%sinput_blocks.%d.0.op.weight", P, i)) {
			ops = append(ops, i)
		}
	}
	blocks, lpb := len(ops)+1, nIn-2
	if len(ops) > 0 {
		lpb = ops[0] - 1
	}
	if lpb < 1 || nIn != blocks*(lpb+1) || f.count(P+"output_blocks.") != nIn {
		return zero, nil, f.bad(errs.ErrFormat, P+"input_blocks", "%d input blocks, %d output blocks and downsamplers in %v: not a UNet of blocks of equal layers", nIn, f.count(P+"output_blocks."), ops)
	}
	var chans, heads, depth []int
	var down, up []string
	for i := range blocks {
		first := fmt.Sprintf("%sinput_blocks.%d.", P, 1+i*(lpb+1))
		c, err := f.dim(first+"0.in_layers.2.weight", 4, 0)
		if err != nil {
			return zero, nil, err
		}
		chans = append(chans, c)
		d := 1
		if f.has(first + "1.proj_in.weight") {
			down, d = append(down, "CrossAttnDownBlock2D"), f.count(first+"1.transformer_blocks.")
		} else {
			down = append(down, "DownBlock2D")
		}
		depth = append(depth, d)
		if f.has(fmt.Sprintf("%soutput_blocks.%d.1.proj_in.weight", P, i*(lpb+1))) {
			up = append(up, "CrossAttnUpBlock2D")
		} else {
			up = append(up, "UpBlock2D")
		}
		h := f.rules.sd1Heads
		if f.layout != layoutSD1 {
			if c%f.rules.headDim != 0 {
				return zero, nil, f.bad(errs.ErrUnsupported, first+"0.in_layers.2.weight", "%d channels: want a multiple of the head width %d", c, f.rules.headDim)
			}
			h = c / f.rules.headDim
		}
		heads = append(heads, h)
	}
	projIn, ok := f.w.Info(P + "middle_block.1.proj_in.weight")
	if !ok || (len(projIn.Shape) != 2 && len(projIn.Shape) != 4) {
		return zero, nil, f.bad(errs.ErrFormat, P+"middle_block.1.proj_in.weight", "no mid-block attention's input projection, a linear or 1×1 convolution weight")
	}
	cross, err := f.dim(P+"middle_block.1.transformer_blocks.0.attn2.to_k.weight", 2, 1)
	if err != nil {
		return zero, nil, err
	}
	cfg := map[string]any{
		"in_channels": in[1], "out_channels": out, "block_out_channels": chans, "layers_per_block": lpb,
		"down_block_types": down, "up_block_types": up, "norm_num_groups": f.rules.groups,
		"cross_attention_dim": cross, "attention_head_dim": heads, "transformer_layers_per_block": depth,
		"use_linear_projection": len(projIn.Shape) == 2,
	}
	if f.layout == layoutXL {
		add, err := f.dim(P+"label_emb.0.0.weight", 2, 1)
		if err != nil {
			return zero, nil, err
		}
		if add <= pooled || (add-pooled)%6 != 0 {
			return zero, nil, f.bad(errs.ErrFormat, P+"label_emb.0.0.weight", "%d inputs: want the pooled text's %d and six time ids' embeddings", add, pooled)
		}
		cfg["addition_embed_type"], cfg["addition_time_embed_dim"], cfg["projection_class_embeddings_input_dim"] = "text_time", (add-pooled)/6, add
	}
	ucfg, err := unet.ParseConfig(mustJSON(cfg))
	if err != nil {
		return zero, nil, errs.AtPath(err, f.path)
	}
	v, err := f.unetView(lpb)
	return ucfg, v, err
}

// unetView names the UNet's tensors as diffusers does.
func (f *ldmFile) unetView(lpb int) (*ldmView, error) {
	fixed := map[string]string{
		"time_embed.0.": "time_embedding.linear_1.", "time_embed.2.": "time_embedding.linear_2.",
		"input_blocks.0.0.": "conv_in.", "out.0.": "conv_norm_out.", "out.2.": "conv_out.",
		"label_emb.0.0.": "add_embedding.linear_1.", "label_emb.0.2.": "add_embedding.linear_2.",
	}
	v := newView(f)
	for _, k := range f.names {
		rest, ok := strings.CutPrefix(k, ldmUNet)
		if !ok {
			continue
		}
		name := ""
		for from, to := range fixed {
			if tail, ok := strings.CutPrefix(rest, from); ok && !strings.Contains(tail, ".") {
				name = to + tail
			}
		}
		if name == "" {
			name = unetName(rest, lpb)
		}
		if name == "" {
			return nil, f.bad(errs.ErrFormat, k, "not a tensor of an SD UNet")
		}
		if err := v.add(name, k, opSame); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// unetName is the diffusers name of a UNet block's tensor ("" for none).
func unetName(rest string, lpb int) string {
	group, r, _ := strings.Cut(rest, ".")
	i, r, ok := cutIndex(r)
	if !ok {
		return ""
	}
	j := -1 // the layer within input and output blocks
	if group != "middle_block" {
		if j, r, ok = cutIndex(r); !ok {
			return ""
		}
	}
	res := func(s string) string {
		for _, m := range [][2]string{{"in_layers.0.", "norm1."}, {"in_layers.2.", "conv1."}, {"out_layers.0.", "norm2."},
			{"out_layers.3.", "conv2."}, {"emb_layers.1.", "time_emb_proj."}, {"skip_connection.", "conv_shortcut."}} {
			if tail, ok := strings.CutPrefix(s, m[0]); ok {
				return m[1] + tail
			}
		}
		return ""
	}
	join := func(head, tail string) string {
		if tail == "" || strings.HasSuffix(tail, ".") {
			return ""
		}
		return head + tail
	}
	switch group {
	case "input_blocks":
		if i < 1 {
			return ""
		}
		b, l := (i-1)/(lpb+1), (i-1)%(lpb+1)
		switch {
		case j == 0 && strings.HasPrefix(r, "op."):
			return join(fmt.Sprintf("down_blocks.%d.downsamplers.0.conv.", b), r[len("op."):])
		case j == 0:
			return join(fmt.Sprintf("down_blocks.%d.resnets.%d.", b, l), res(r))
		case j == 1:
			return join(fmt.Sprintf("down_blocks.%d.attentions.%d.", b, l), r)
		}
	case "middle_block":
		switch {
		case i == 0 || i == 2:
			return join(fmt.Sprintf("mid_block.resnets.%d.", i/2), res(r))
		case i == 1:
			return join("mid_block.attentions.0.", r)
		}
	case "output_blocks":
		b, l := i/(lpb+1), i%(lpb+1)
		switch {
		case j > 0 && strings.HasPrefix(r, "conv."):
			return join(fmt.Sprintf("up_blocks.%d.upsamplers.0.conv.", b), r[len("conv."):])
		case j == 0:
			return join(fmt.Sprintf("up_blocks.%d.resnets.%d.", b, l), res(r))
		case j == 1:
			return join(fmt.Sprintf("up_blocks.%d.attentions.%d.", b, l), r)
		}
	}
	return ""
}

// vaePart is the VAE's config and view.
func (f *ldmFile) vaePart() (vae.Config, *ldmView, error) {
	const P = ldmVAE
	var zero vae.Config
	in, err := f.dim(P+"encoder.conv_in.weight", 4, 1)
	if err != nil {
		return zero, nil, err
	}
	out, err := f.dim(P+"decoder.conv_out.weight", 4, 0)
	if err != nil {
		return zero, nil, err
	}
	latent, err := f.dim(P+"decoder.conv_in.weight", 4, 1)
	if err != nil {
		return zero, nil, err
	}
	blocks, lpb := f.count(P+"encoder.down."), f.count(P+"encoder.down.0.block.")
	if blocks < 1 || lpb < 1 || f.count(P+"decoder.up.") != blocks || f.count(P+"decoder.up.0.block.") != lpb+1 {
		return zero, nil, f.bad(errs.ErrFormat, P+"encoder.down", "%d encoder blocks of %d layers and %d decoder blocks of %d: want as many decoder blocks, of one more layer",
			blocks, lpb, f.count(P+"decoder.up."), f.count(P+"decoder.up.0.block."))
	}
	var chans []int
	var down, up []string
	for i := range blocks {
		c, err := f.dim(fmt.Sprintf("%sencoder.down.%d.block.0.conv1.weight", P, i), 4, 0)
		if err != nil {
			return zero, nil, err
		}
		chans, down, up = append(chans, c), append(down, "DownEncoderBlock2D"), append(up, "UpDecoderBlock2D")
	}
	scale, sample := f.rules.vaeScale, f.rules.vaeSample
	if f.layout == layoutXL {
		scale, sample = f.rules.vaeScaleXL, f.rules.vaeSampleXL
	}
	vcfg, err := vae.ParseConfig(mustJSON(map[string]any{
		"in_channels": in, "out_channels": out, "latent_channels": latent, "block_out_channels": chans,
		"layers_per_block": lpb, "norm_num_groups": f.rules.groups, "scaling_factor": scale, "force_upcast": true, "sample_size": sample,
		"down_block_types": down, "up_block_types": up,
		"use_quant_conv": f.has(P + "quant_conv.weight"), "use_post_quant_conv": f.has(P + "post_quant_conv.weight"),
		"mid_block_add_attention": f.has(P + "encoder.mid.attn_1.q.weight"),
	}))
	if err != nil {
		return zero, nil, errs.AtPath(err, f.path)
	}
	v := newView(f)
	for _, k := range f.names {
		rest, ok := strings.CutPrefix(k, P)
		if !ok || strings.HasPrefix(rest, "loss.") { // a training loss's discriminator
			continue
		}
		name, op := vaeName(rest, blocks)
		if name == "" {
			return zero, nil, f.bad(errs.ErrFormat, k, "not a tensor of an SD VAE")
		}
		if err := v.add(name, k, op); err != nil {
			return zero, nil, err
		}
	}
	return vcfg, v, nil
}

// vaeName is the diffusers name of a VAE tensor ("" for none), and how
// its tensor changes: the mid-block attention's 1×1 convolutions are
// linear layers in diffusers.
func vaeName(rest string, blocks int) (string, viewOp) {
	part, r, _ := strings.Cut(rest, ".")
	switch part {
	case "quant_conv", "post_quant_conv":
		return rest, opSame
	case "encoder", "decoder":
	default:
		return "", opSame
	}
	head := part + "."
	switch r {
	case "conv_in.weight", "conv_in.bias", "conv_out.weight", "conv_out.bias":
		return head + r, opSame
	case "norm_out.weight", "norm_out.bias":
		return head + "conv_" + r, opSame
	}
	res := func(to, tail string) string {
		switch tail {
		case "norm1.weight", "norm1.bias", "conv1.weight", "conv1.bias", "norm2.weight", "norm2.bias", "conv2.weight", "conv2.bias":
			return to + tail
		case "nin_shortcut.weight", "nin_shortcut.bias":
			return to + "conv_shortcut." + tail[len("nin_shortcut."):]
		}
		return ""
	}
	if tail, ok := strings.CutPrefix(r, "mid."); ok {
		if t, ok := strings.CutPrefix(tail, "block_1."); ok {
			return res(head+"mid_block.resnets.0.", t), opSame
		}
		if t, ok := strings.CutPrefix(tail, "block_2."); ok {
			return res(head+"mid_block.resnets.1.", t), opSame
		}
		t, ok := strings.CutPrefix(tail, "attn_1.")
		if !ok {
			return "", opSame
		}
		to := head + "mid_block.attentions.0."
		switch t {
		case "norm.weight", "norm.bias":
			return to + "group_norm." + t[len("norm."):], opSame
		case "q.bias", "k.bias", "v.bias":
			return to + "to_" + t, opSame
		case "proj_out.bias":
			return to + "to_out.0.bias", opSame
		case "q.weight", "k.weight", "v.weight":
			return to + "to_" + t, opFlat
		case "proj_out.weight":
			return to + "to_out.0.weight", opFlat
		}
		return "", opSame
	}
	updown, sample := "down", "downsample"
	hfBlocks, hfSample := "down_blocks", "downsamplers"
	if part == "decoder" {
		updown, sample, hfBlocks, hfSample = "up", "upsample", "up_blocks", "upsamplers"
	}
	tail, ok := strings.CutPrefix(r, updown+".")
	if !ok {
		return "", opSame
	}
	i, t, ok := cutIndex(tail)
	if !ok || i >= blocks {
		return "", opSame
	}
	if part == "decoder" {
		i = blocks - 1 - i // the decoder's blocks count from the top in LDM
	}
	to := fmt.Sprintf("%s%s.%d.", head, hfBlocks, i)
	if c, ok := strings.CutPrefix(t, sample+".conv."); ok && (c == "weight" || c == "bias") {
		return to + hfSample + ".0.conv." + c, opSame
	}
	if b, ok := strings.CutPrefix(t, "block."); ok {
		j, c, ok := cutIndex(b)
		if ok {
			return res(fmt.Sprintf("%sresnets.%d.", to, j), c), opSame
		}
	}
	return "", opSame
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps of numbers, strings and slices of them
	}
	return b
}

// viewOp is how a view's tensor comes from the file's.
type viewOp int

const (
	opSame viewOp = iota
	opQ           // the first third of a fused q, k, v projection (dim 0)
	opK           // its second third
	opV           // its last third
	opFlat        // a 1×1 convolution's (c, c, 1, 1) weight as a linear (c, c)
	opT           // a matrix transposed
)

type viewTensor struct {
	key   string
	op    viewOp
	shape candle.Shape
}

// ldmView is one model's tensors of a single file in diffusers' names.
// It does not own the file: Close does nothing.
type ldmView struct {
	f *ldmFile
	m map[string]viewTensor
}

func newView(f *ldmFile) *ldmView { return &ldmView{f: f, m: map[string]viewTensor{}} }

// add names key's tensor, changed by op, name.
func (v *ldmView) add(name, key string, op viewOp) error {
	info, ok := v.f.w.Info(key)
	if !ok {
		return v.f.bad(errs.ErrFormat, key, "no tensor %s", key)
	}
	s := append(candle.Shape(nil), info.Shape...)
	switch op {
	case opQ, opK, opV:
		if len(s) < 1 || s[0]%3 != 0 {
			return v.f.bad(errs.ErrFormat, key, "shape %v: a fused q, k, v projection has 3·width rows", s)
		}
		s[0] /= 3
	case opFlat:
		switch {
		case len(s) == 2:
			op = opSame
		case len(s) == 4 && s[2] == 1 && s[3] == 1:
			s = s[:2]
		default:
			return v.f.bad(errs.ErrFormat, key, "shape %v: want a 1×1 convolution's (c, c, 1, 1)", s)
		}
	case opT:
		if len(s) != 2 {
			return v.f.bad(errs.ErrFormat, key, "shape %v: want a matrix", s)
		}
		s[0], s[1] = s[1], s[0]
	}
	if op != opSame && !info.Dense {
		return v.f.bad(errs.ErrDType, key, "type %s: only dense tensors can be split or reshaped", info.Type)
	}
	if _, dup := v.m[name]; dup {
		return v.f.bad(errs.ErrFormat, key, "two tensors are %s", name)
	}
	v.m[name] = viewTensor{key: key, op: op, shape: s}
	return nil
}

func (v *ldmView) Names() []string {
	out := make([]string, 0, len(v.m))
	for n := range v.m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (v *ldmView) Info(name string) (candle.WeightInfo, bool) {
	t, ok := v.m[name]
	if !ok {
		return candle.WeightInfo{}, false
	}
	info, _ := v.f.w.Info(t.key)
	info.Shape = append(candle.Shape(nil), t.shape...)
	return info, true
}

func (v *ldmView) Load(name string, dev candle.Device) (*candle.Tensor, error) {
	const op = "Open"
	t, ok := v.m[name]
	if !ok {
		return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrNotFound, Path: v.f.path, Field: name,
			Detail: fmt.Sprintf("the %s checkpoint has no tensor that is %s", v.f.layout, name)}
	}
	x, err := v.f.w.Load(t.key, dev)
	if err != nil || t.op == opSame {
		return x, err
	}
	defer x.Close()
	var y *candle.Tensor
	switch t.op {
	case opQ, opK, opV:
		y, err = x.Narrow(0, int(t.op-opQ)*t.shape[0], t.shape[0])
	case opFlat:
		return x.Reshape(t.shape...)
	case opT:
		y, err = x.T()
	}
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	defer y.Close()
	c, err := y.Contiguous()
	return c, pkg.Wrap(op, err)
}

func (v *ldmView) LoadQ(name string, dev candle.Device) (*candle.QTensor, error) {
	t, ok := v.m[name]
	if !ok || t.op != opSame {
		return nil, &errs.Error{Pkg: string(pkg), Op: "Open", Kind: errs.ErrDType, Path: v.f.path, Field: name, Detail: "not a quantized tensor of the checkpoint"}
	}
	return v.f.w.LoadQ(t.key, dev)
}

func (v *ldmView) TransferStats() candle.TransferStats { return v.f.w.TransferStats() }

func (v *ldmView) Close() error { return nil }

// ldmUNetAliases names a diffusers UNet's modules as the LDM checkpoints
// do (input_blocks.4.1.transformer_blocks.0.attn1.to_q for
// down_blocks.1.attentions.0.transformer_blocks.0.attn1.to_q), the names
// kohya's SDXL LoRAs use. Each alias is kept only where unetName, the
// single-file loader's own renaming, maps it back to the module.
func ldmUNetAliases(names []string) map[string]string {
	lpb := 0 // layers per down block
	for _, n := range names {
		if rest, ok := strings.CutPrefix(n, "down_blocks.0.resnets."); ok {
			if i, _, ok := cutIndex(rest); ok {
				lpb = max(lpb, i+1)
			}
		}
	}
	resnet := map[string]string{"norm1": "in_layers.0", "conv1": "in_layers.2", "norm2": "out_layers.0", "conv2": "out_layers.3",
		"time_emb_proj": "emb_layers.1", "conv_shortcut": "skip_connection"}
	out := map[string]string{}
	for _, n := range names {
		m, ok := strings.CutSuffix(n, ".weight")
		if !ok {
			continue
		}
		group, rest, _ := strings.Cut(m, ".")
		b := 0
		if group != "mid_block" {
			if b, rest, ok = cutIndex(rest); !ok {
				continue
			}
		}
		kind, rest, _ := strings.Cut(rest, ".")
		l, tail, ok := cutIndex(rest)
		if !ok {
			continue
		}
		if kind == "resnets" {
			sub, after, _ := strings.Cut(tail, ".")
			if resnet[sub] == "" {
				continue
			}
			tail = resnet[sub] + strings.TrimSuffix("."+after, ".")
		}
		var cands []string
		switch group + "/" + kind {
		case "down_blocks/attentions":
			cands = []string{fmt.Sprintf("input_blocks.%d.1.%s", 1+b*(lpb+1)+l, tail)}
		case "down_blocks/resnets":
			cands = []string{fmt.Sprintf("input_blocks.%d.0.%s", 1+b*(lpb+1)+l, tail)}
		case "down_blocks/downsamplers":
			cands = []string{fmt.Sprintf("input_blocks.%d.0.op", (b+1)*(lpb+1))}
		case "mid_block/attentions":
			cands = []string{"middle_block.1." + tail}
		case "mid_block/resnets":
			cands = []string{fmt.Sprintf("middle_block.%d.%s", 2*l, tail)}
		case "up_blocks/attentions":
			cands = []string{fmt.Sprintf("output_blocks.%d.1.%s", b*(lpb+1)+l, tail)}
		case "up_blocks/resnets":
			cands = []string{fmt.Sprintf("output_blocks.%d.0.%s", b*(lpb+1)+l, tail)}
		case "up_blocks/upsamplers":
			i := b*(lpb+1) + lpb
			cands = []string{fmt.Sprintf("output_blocks.%d.1.conv", i), fmt.Sprintf("output_blocks.%d.2.conv", i)}
		}
		for _, c := range cands {
			if unetName(c+".weight", lpb) == n {
				out[c] = m
				break
			}
		}
	}
	return out
}
