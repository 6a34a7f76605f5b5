package mkmodel

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/safetensors"
)

// SDSpec is the shape of a Stable Diffusion 1.x folder to write in
// diffusers' layout (model_index.json, tokenizer/, text_encoder/, unet/,
// vae/, scheduler/), with random weights in diffusers' and transformers'
// names. Its tokenizer is CLIP's form (vocab.json, merges.txt) over the
// bytes alone: every character a token.
type SDSpec struct {
	// The text encoder: CLIP's text transformer.
	TextHidden, TextLayers, TextHeads int
	// The UNet: channels per block (the first block without
	// cross-attention in the last position, as SD 1.x's), resnets per
	// block, heads per transformer (as attention_head_dim).
	UNetChannels        []int
	UNetLayers          int
	UNetHeads           int
	UNetGroups          int
	VAEChannels         []int
	VAELayers, VAEGroup int
	DType               candle.DType
	Seed                uint64
	// SampleSize is the UNet config's sample_size, the latents' side of
	// the model's default image (0: 64, SD 1.5's).
	SampleSize int
}

// TinySD is a Stable Diffusion folder of a few hundred kilobytes that
// runs in seconds on the CPU: latents at half the image's size, 16×16
// images by default.
func TinySD() SDSpec {
	return SDSpec{TextHidden: 32, TextLayers: 2, TextHeads: 4, UNetChannels: []int{16, 32}, UNetLayers: 1, UNetHeads: 2,
		UNetGroups: 4, VAEChannels: []int{8, 16}, VAELayers: 1, VAEGroup: 4, DType: candle.F32, Seed: 1, SampleSize: 8}
}

// SD15 is Stable Diffusion 1.5's shape (CLIP ViT-L/14's text encoder, the
// 860M-parameter UNet, the 8× VAE), for benchmarks with random weights.
func SD15() SDSpec {
	return SDSpec{TextHidden: 768, TextLayers: 12, TextHeads: 12, UNetChannels: []int{320, 640, 1280, 1280}, UNetLayers: 2,
		UNetHeads: 8, UNetGroups: 32, VAEChannels: []int{128, 256, 512, 512}, VAELayers: 2, VAEGroup: 32, DType: candle.F16, Seed: 1}
}

func (s *SDSpec) check() error {
	bad := func(format string, args ...any) error { return fmt.Errorf("mkmodel: SD spec: "+format, args...) }
	switch {
	case s.TextHidden < 8 || s.TextHeads < 1 || s.TextHidden%s.TextHeads != 0 || s.TextLayers < 2:
		return bad("text encoder %d wide, %d heads, %d layers: want heads dividing the width, two layers or more", s.TextHidden, s.TextHeads, s.TextLayers)
	case len(s.UNetChannels) < 2 || s.UNetLayers < 1 || s.UNetHeads < 1 || s.UNetGroups < 1:
		return bad("UNet %v × %d layers, %d heads, %d groups: want two blocks or more", s.UNetChannels, s.UNetLayers, s.UNetHeads, s.UNetGroups)
	case len(s.VAEChannels) < 1 || s.VAELayers < 1 || s.VAEGroup < 1:
		return bad("VAE %v × %d layers, %d groups", s.VAEChannels, s.VAELayers, s.VAEGroup)
	case s.DType != candle.F32 && s.DType != candle.F16 && s.DType != candle.BF16:
		return bad("dtype %s: want f32, f16 or bf16", s.DType)
	}
	for _, c := range s.UNetChannels {
		if c%s.UNetGroups != 0 || c%s.UNetHeads != 0 || (c/s.UNetHeads)%8 != 0 {
			return bad("UNet channels %d: want multiples of the groups (%d) and of 8 heads' worth (%d heads)", c, s.UNetGroups, s.UNetHeads)
		}
	}
	for _, c := range s.VAEChannels {
		if c%s.VAEGroup != 0 {
			return bad("VAE channels %d: want multiples of the groups (%d)", c, s.VAEGroup)
		}
	}
	return nil
}

// sdVocab is the tokenizer's size: the 256 bytes, the same as word ends,
// and the two special tokens.
const sdVocab = 2*256 + 2

// WriteSD makes dir (if need be) and writes a Stable Diffusion folder.
func WriteSD(dir string, s SDSpec, progress func(Progress)) error {
	if err := s.check(); err != nil {
		return err
	}
	if progress == nil {
		progress = func(Progress) {}
	}
	gen := Spec{Seed: s.Seed, DType: s.DType}
	parts := []struct {
		dir, file string
		tensors   []tensorSpec
		config    map[string]any
	}{
		{"text_encoder", "model.safetensors", s.textTensors(), s.textConfig()},
		{"unet", "diffusion_pytorch_model.safetensors", s.unetTensors(), s.unetConfig()},
		{"vae", "diffusion_pytorch_model.safetensors", s.vaeTensors(), s.vaeConfig()},
	}
	var total, done int64
	for _, p := range parts {
		for _, t := range p.tensors {
			total += int64(elems(t.shape) * s.DType.Size())
		}
	}
	for _, p := range parts {
		if err := os.MkdirAll(filepath.Join(dir, p.dir), 0o755); err != nil {
			return fmt.Errorf("mkmodel: %w", err)
		}
		tensors := map[string]*candle.Tensor{}
		closeAll := func() {
			for _, t := range tensors {
				t.Close()
			}
		}
		for _, t := range p.tensors {
			x, err := gen.random(tensorSpec{name: p.dir + "/" + t.name, shape: t.shape, mean: t.mean, std: t.std})
			if err != nil {
				closeAll()
				return err
			}
			tensors[t.name] = x
			done += int64(elems(t.shape) * s.DType.Size())
			progress(Progress{Stage: "weights", Done: done, Total: total})
		}
		err := safetensors.Save(filepath.Join(dir, p.dir, p.file), tensors, map[string]string{"format": "pt", "generator": "rocm-go-mkmodel"})
		closeAll()
		if err != nil {
			return err
		}
		if err := writeJSON(filepath.Join(dir, p.dir, "config.json"), p.config); err != nil {
			return err
		}
	}
	if err := s.writeTokenizer(filepath.Join(dir, "tokenizer")); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "scheduler"), 0o755); err != nil {
		return fmt.Errorf("mkmodel: %w", err)
	}
	if err := writeJSON(filepath.Join(dir, "scheduler", "scheduler_config.json"), map[string]any{
		"_class_name": "EulerDiscreteScheduler", "num_train_timesteps": 1000, "beta_start": 0.00085, "beta_end": 0.012,
		"beta_schedule": "scaled_linear", "steps_offset": 1, "set_alpha_to_one": false, "clip_sample": false,
		"timestep_spacing": "leading", "prediction_type": "epsilon"}); err != nil {
		return err
	}
	progress(Progress{Stage: "done", Done: total, Total: total})
	return writeJSON(filepath.Join(dir, "model_index.json"), map[string]any{
		"_class_name": "StableDiffusionPipeline", "_diffusers_version": "0.30.0",
		"scheduler": []string{"diffusers", "EulerDiscreteScheduler"}, "text_encoder": []string{"transformers", "CLIPTextModel"},
		"tokenizer": []string{"transformers", "CLIPTokenizer"}, "unet": []string{"diffusers", "UNet2DConditionModel"},
		"vae": []string{"diffusers", "AutoencoderKL"}, "safety_checker": []any{nil, nil}, "feature_extractor": []any{nil, nil},
		"requires_safety_checker": false})
}

// writeTokenizer writes CLIP's tokenizer files over the bytes: the 256
// byte characters, the same ending a word, <|startoftext|> and
// <|endoftext|> (the largest id, as CLIP's), and no merges.
func (s *SDSpec) writeTokenizer(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("mkmodel: %w", err)
	}
	vocab := map[string]int{}
	for b := range 256 {
		vocab[string(byteUnicode[b])] = b
		vocab[string(byteUnicode[b])+"</w>"] = 256 + b
	}
	vocab["<|startoftext|>"], vocab["<|endoftext|>"] = sdVocab-2, sdVocab-1
	if err := writeJSON(filepath.Join(dir, "vocab.json"), vocab); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "merges.txt"), []byte("#version: 0.2\n"), 0o644); err != nil {
		return fmt.Errorf("mkmodel: %w", err)
	}
	return writeJSON(filepath.Join(dir, "tokenizer_config.json"), map[string]any{
		"tokenizer_class": "CLIPTokenizer", "bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>",
		"unk_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "model_max_length": 77, "do_lower_case": true})
}

// sdParts builds tensor lists: weights scaled by fan-in, norms about 1,
// biases small.
type sdParts struct{ ts []tensorSpec }

func (p *sdParts) linear(name string, in, out int, bias bool) {
	p.ts = append(p.ts, tensorSpec{name: name + ".weight", shape: []int{out, in}, std: 1 / math.Sqrt(float64(in))})
	if bias {
		p.ts = append(p.ts, tensorSpec{name: name + ".bias", shape: []int{out}, std: 0.02})
	}
}

func (p *sdParts) conv(name string, in, out, k int) {
	p.ts = append(p.ts, tensorSpec{name: name + ".weight", shape: []int{out, in, k, k}, std: 1 / math.Sqrt(float64(in*k*k))},
		tensorSpec{name: name + ".bias", shape: []int{out}, std: 0.02})
}

func (p *sdParts) norm(name string, ch int) {
	p.ts = append(p.ts, tensorSpec{name: name + ".weight", shape: []int{ch}, mean: 1, std: 0.05},
		tensorSpec{name: name + ".bias", shape: []int{ch}, std: 0.02})
}

func (p *sdParts) resnet(name string, in, out, temb int) {
	p.norm(name+".norm1", in)
	p.conv(name+".conv1", in, out, 3)
	if temb > 0 {
		p.linear(name+".time_emb_proj", temb, out, true)
	}
	p.norm(name+".norm2", out)
	p.conv(name+".conv2", out, out, 3)
	if in != out {
		p.conv(name+".conv_shortcut", in, out, 1)
	}
}

func (s *SDSpec) textTensors() []tensorSpec {
	p := &sdParts{}
	h := s.TextHidden
	p.ts = append(p.ts, tensorSpec{name: "text_model.embeddings.token_embedding.weight", shape: []int{sdVocab, h}, std: 0.5},
		tensorSpec{name: "text_model.embeddings.position_embedding.weight", shape: []int{77, h}, std: 0.1})
	for i := range s.TextLayers {
		l := fmt.Sprintf("text_model.encoder.layers.%d.", i)
		p.norm(l+"layer_norm1", h)
		for _, n := range []string{"q", "k", "v", "out"} {
			p.linear(l+"self_attn."+n+"_proj", h, h, true)
		}
		p.norm(l+"layer_norm2", h)
		p.linear(l+"mlp.fc1", h, 4*h, true)
		p.linear(l+"mlp.fc2", 4*h, h, true)
	}
	p.norm("text_model.final_layer_norm", h)
	return p.ts
}

func (s *SDSpec) textConfig() map[string]any {
	return map[string]any{"architectures": []string{"CLIPTextModel"}, "model_type": "clip_text_model",
		"hidden_size": s.TextHidden, "intermediate_size": 4 * s.TextHidden, "num_hidden_layers": s.TextLayers,
		"num_attention_heads": s.TextHeads, "max_position_embeddings": 77, "vocab_size": sdVocab,
		"hidden_act": "quick_gelu", "layer_norm_eps": 1e-5, "projection_dim": s.TextHidden,
		"bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1, "torch_dtype": torchDTypes[s.DType]}
}

// unetBlocks are SD 1.x's block types: cross-attention in every down
// block but the last, in every up block but the first.
func (s *SDSpec) unetBlocks() (down, up []string) {
	n := len(s.UNetChannels)
	for i := range n {
		d, u := "CrossAttnDownBlock2D", "CrossAttnUpBlock2D"
		if i == n-1 {
			d = "DownBlock2D"
		}
		if i == 0 {
			u = "UpBlock2D"
		}
		down, up = append(down, d), append(up, u)
	}
	return down, up
}

func (s *SDSpec) transformer(p *sdParts, name string, ch int) {
	p.norm(name+".norm", ch)
	p.conv(name+".proj_in", ch, ch, 1)
	b := name + ".transformer_blocks.0."
	for _, n := range []string{"norm1", "norm2", "norm3"} {
		p.norm(b+n, ch)
	}
	for _, a := range []string{"attn1", "attn2"} {
		ctx := ch
		if a == "attn2" {
			ctx = s.TextHidden
		}
		p.linear(b+a+".to_q", ch, ch, false)
		p.linear(b+a+".to_k", ctx, ch, false)
		p.linear(b+a+".to_v", ctx, ch, false)
		p.linear(b+a+".to_out.0", ch, ch, true)
	}
	p.linear(b+"ff.net.0.proj", ch, 8*ch, true)
	p.linear(b+"ff.net.2", 4*ch, ch, true)
	p.conv(name+".proj_out", ch, ch, 1)
}

func (s *SDSpec) unetTensors() []tensorSpec {
	p := &sdParts{}
	ch := s.UNetChannels
	n := len(ch)
	temb := 4 * ch[0]
	down, up := s.unetBlocks()
	p.linear("time_embedding.linear_1", ch[0], temb, true)
	p.linear("time_embedding.linear_2", temb, temb, true)
	p.conv("conv_in", 4, ch[0], 3)
	out := ch[0]
	for i := range n {
		in := out
		out = ch[i]
		for j := range s.UNetLayers {
			rin := out
			if j == 0 {
				rin = in
			}
			p.resnet(fmt.Sprintf("down_blocks.%d.resnets.%d", i, j), rin, out, temb)
			if down[i] == "CrossAttnDownBlock2D" {
				s.transformer(p, fmt.Sprintf("down_blocks.%d.attentions.%d", i, j), out)
			}
		}
		if i < n-1 {
			p.conv(fmt.Sprintf("down_blocks.%d.downsamplers.0.conv", i), out, out, 3)
		}
	}
	last := ch[n-1]
	p.resnet("mid_block.resnets.0", last, last, temb)
	s.transformer(p, "mid_block.attentions.0", last)
	p.resnet("mid_block.resnets.1", last, last, temb)
	rev := slices.Clone(ch)
	slices.Reverse(rev)
	out = rev[0]
	for i := range n {
		prev := out
		out = rev[i]
		in := rev[min(i+1, n-1)]
		for j := range s.UNetLayers + 1 {
			skip := out
			if j == s.UNetLayers {
				skip = in
			}
			rin := out
			if j == 0 {
				rin = prev
			}
			p.resnet(fmt.Sprintf("up_blocks.%d.resnets.%d", i, j), rin+skip, out, temb)
			if up[i] == "CrossAttnUpBlock2D" {
				s.transformer(p, fmt.Sprintf("up_blocks.%d.attentions.%d", i, j), out)
			}
		}
		if i < n-1 {
			p.conv(fmt.Sprintf("up_blocks.%d.upsamplers.0.conv", i), out, out, 3)
		}
	}
	p.norm("conv_norm_out", ch[0])
	p.conv("conv_out", ch[0], 4, 3)
	return p.ts
}

func (s *SDSpec) unetConfig() map[string]any {
	down, up := s.unetBlocks()
	return map[string]any{"_class_name": "UNet2DConditionModel", "_diffusers_version": "0.30.0",
		"sample_size": cmp.Or(s.SampleSize, 64), "in_channels": 4, "out_channels": 4, "block_out_channels": s.UNetChannels,
		"down_block_types": down, "up_block_types": up, "mid_block_type": "UNetMidBlock2DCrossAttn",
		"layers_per_block": s.UNetLayers, "norm_num_groups": s.UNetGroups, "norm_eps": 1e-5,
		"cross_attention_dim": s.TextHidden, "attention_head_dim": s.UNetHeads, "flip_sin_to_cos": true,
		"freq_shift": 0, "act_fn": "silu", "use_linear_projection": false}
}

func (s *SDSpec) vaeTensors() []tensorSpec {
	p := &sdParts{}
	ch := s.VAEChannels
	n := len(ch)
	p.conv("encoder.conv_in", 3, ch[0], 3)
	prev := ch[0]
	for i, out := range ch {
		for j := range s.VAELayers {
			in := out
			if j == 0 {
				in = prev
			}
			p.resnet(fmt.Sprintf("encoder.down_blocks.%d.resnets.%d", i, j), in, out, 0)
		}
		if i < n-1 {
			p.conv(fmt.Sprintf("encoder.down_blocks.%d.downsamplers.0.conv", i), out, out, 3)
		}
		prev = out
	}
	last := ch[n-1]
	for _, side := range []string{"encoder", "decoder"} {
		m := side + ".mid_block."
		p.resnet(m+"resnets.0", last, last, 0)
		p.norm(m+"attentions.0.group_norm", last)
		for _, x := range []string{"to_q", "to_k", "to_v", "to_out.0"} {
			p.linear(m+"attentions.0."+x, last, last, true)
		}
		p.resnet(m+"resnets.1", last, last, 0)
	}
	p.norm("encoder.conv_norm_out", last)
	p.conv("encoder.conv_out", last, 8, 3)
	p.conv("quant_conv", 8, 8, 1)
	p.conv("post_quant_conv", 4, 4, 1)
	p.conv("decoder.conv_in", 4, last, 3)
	rev := slices.Clone(ch)
	slices.Reverse(rev)
	prev = rev[0]
	for i, out := range rev {
		for j := range s.VAELayers + 1 {
			in := out
			if j == 0 {
				in = prev
			}
			p.resnet(fmt.Sprintf("decoder.up_blocks.%d.resnets.%d", i, j), in, out, 0)
		}
		if i < n-1 {
			p.conv(fmt.Sprintf("decoder.up_blocks.%d.upsamplers.0.conv", i), out, out, 3)
		}
		prev = out
	}
	p.norm("decoder.conv_norm_out", ch[0])
	p.conv("decoder.conv_out", ch[0], 3, 3)
	return p.ts
}

func (s *SDSpec) vaeConfig() map[string]any {
	n := len(s.VAEChannels)
	down, up := make([]string, n), make([]string, n)
	for i := range n {
		down[i], up[i] = "DownEncoderBlock2D", "UpDecoderBlock2D"
	}
	return map[string]any{"_class_name": "AutoencoderKL", "_diffusers_version": "0.30.0", "in_channels": 3,
		"out_channels": 3, "latent_channels": 4, "block_out_channels": s.VAEChannels, "down_block_types": down,
		"up_block_types": up, "layers_per_block": s.VAELayers, "norm_num_groups": s.VAEGroup, "act_fn": "silu",
		"scaling_factor": 0.18215, "sample_size": 512}
}
