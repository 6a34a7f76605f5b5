package sd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/errs"
)

// A pipeline with two LoRAs merged into its weights: a style at full
// strength and a detail LoRA at half.
func ExampleLoRA() {
	p, err := OpenWith("stable-diffusion-v1-5", candle.CPU(), candle.F32, Options{LoRAs: []LoRA{
		{Path: "watercolor.safetensors", Scale: 1},
		{Path: "detail.safetensors", Scale: 0.5},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	imgs, err := p.Generate(context.Background(), Request{Prompt: "a lighthouse at dusk", Width: 512, Height: 512, Steps: 25, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(imgs))
}

// loraSpec is one module of a test LoRA file: its name in the file
// (without the part's suffix), how the file names its parts, and the
// weight of a folder's component it adapts.
type loraSpec struct {
	base      string
	style     string // "kohya", "peft", "old" (lora.down), "linear" (lora_linear_layer.down) or "proc" (to_q_lora.down)
	component string
	weight    string
	rank      int
	alpha     float64 // 0: none in the file
}

// loraValues are a module's matrices as the test made them, row-major.
type loraValues struct {
	spec                loraSpec
	up, down            []float64
	upShape, downShape  []int
	scaleAlphaOverRank  float64
	outRows, innerWidth int
}

// weightOf reads a folder's weight in float64.
func weightOf(t *testing.T, folder, component, name string) ([]float64, candle.Shape) {
	t.Helper()
	w, err := safetensors.Open(filepath.Join("testdata", folder, component))
	require.NoError(t, err)
	defer w.Close()
	x, err := w.Load(name, candle.CPU())
	require.NoError(t, err)
	defer x.Close()
	return toF64(t, x), x.Shape()
}

// writeLoRA writes a LoRA file of random matrices for specs and returns
// them.
func writeLoRA(t *testing.T, folder, path string, scale float64, seed uint64, specs ...loraSpec) []loraValues {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	tensors := map[string]*candle.Tensor{}
	put := func(name string, v []float64, shape ...int) {
		x, err := candle.FromSlice(candle.CPU(), f32s(v), shape...)
		require.NoError(t, err)
		t.Cleanup(func() { x.Close() })
		tensors[name] = x
	}
	var out []loraValues
	for _, s := range specs {
		_, ws := weightOf(t, folder, s.component, s.weight)
		lv := loraValues{spec: s, outRows: ws[0], innerWidth: ws.Elems() / ws[0]}
		lv.upShape, lv.downShape = []int{ws[0], s.rank}, []int{s.rank, ws[1]}
		if len(ws) == 4 { // LoCon
			lv.upShape, lv.downShape = []int{ws[0], s.rank, 1, 1}, []int{s.rank, ws[1], ws[2], ws[3]}
		}
		lv.up = make([]float64, ws[0]*s.rank)
		lv.down = make([]float64, s.rank*lv.innerWidth)
		for i := range lv.up {
			lv.up[i] = float64(float32(rng.NormFloat64() * 0.5))
		}
		for i := range lv.down {
			lv.down[i] = float64(float32(rng.NormFloat64() * 0.5))
		}
		alpha := float64(s.rank)
		if s.alpha != 0 {
			alpha = s.alpha
		}
		lv.scaleAlphaOverRank = scale * alpha / float64(s.rank)
		down, up := ".lora_down.weight", ".lora_up.weight"
		switch s.style {
		case "peft":
			down, up = ".lora_A.weight", ".lora_B.weight"
		case "old":
			down, up = ".lora.down.weight", ".lora.up.weight"
		case "linear":
			down, up = ".lora_linear_layer.down.weight", ".lora_linear_layer.up.weight"
		case "proc":
			down, up = "_lora.down.weight", "_lora.up.weight"
		}
		put(s.base+down, lv.down, lv.downShape...)
		put(s.base+up, lv.up, lv.upShape...)
		if s.alpha != 0 {
			put(s.base+".alpha", []float64{s.alpha}, []int{}...)
		}
		out = append(out, lv)
	}
	require.NoError(t, safetensors.Save(path, tensors, nil))
	return out
}

// want adds the LoRAs' updates to the folder's weights in float64.
func want(t *testing.T, folder string, all ...[]loraValues) map[string][]float64 {
	w := map[string][]float64{}
	for _, lvs := range all {
		for _, lv := range lvs {
			k := lv.spec.component + "/" + lv.spec.weight
			if w[k] == nil {
				w[k], _ = weightOf(t, folder, lv.spec.component, lv.spec.weight)
			}
			r := lv.spec.rank
			for i := range lv.outRows {
				for j := range lv.innerWidth {
					s := 0.0
					for q := range r {
						s += lv.up[i*r+q] * lv.down[q*lv.innerWidth+j]
					}
					w[k][i*lv.innerWidth+j] += lv.scaleAlphaOverRank * s
				}
			}
		}
	}
	return w
}

// merged loads the weights through the LoRA views, as a pipeline does.
func merged(t *testing.T, folder string, loras []LoRA, keys []string) map[string][]float64 {
	l, err := openLoRAs(loras)
	require.NoError(t, err)
	defer l.close()
	got := map[string][]float64{}
	for _, k := range keys {
		component, name, _ := strings.Cut(k, "/")
		f, err := safetensors.Open(filepath.Join("testdata", folder, component))
		require.NoError(t, err)
		v, err := l.view(component, f)
		require.NoError(t, err)
		x, err := v.Load(name, candle.CPU())
		require.NoError(t, err)
		assert.Equal(t, candle.F32, x.DType())
		got[k] = toF64(t, x)
		x.Close()
		v.Close()
	}
	return got
}

func assertMerged(t *testing.T, folder string, loras []LoRA, all ...[]loraValues) {
	t.Helper()
	w := want(t, folder, all...)
	var keys []string
	for k := range w {
		keys = append(keys, k)
	}
	got := merged(t, folder, loras, keys)
	for _, k := range keys {
		require.Len(t, got[k], len(w[k]), k)
		base, _ := weightOf(t, folder, strings.Split(k, "/")[0], strings.Split(k, "/")[1])
		diff, change := 0.0, 0.0
		for i := range w[k] {
			diff = max(diff, math.Abs(got[k][i]-w[k][i]))
			change = max(change, math.Abs(w[k][i]-base[i]))
		}
		assert.Less(t, diff, 2e-6, "%s: merged and float64 reference", k)
		assert.Greater(t, change, 1e-2, "%s: the LoRA changes it", k)
	}
}

// TestLoRAMergesSD merges a kohya file (linear, 1×1 and 3×3 convolution
// LoCon, the text encoder) and a diffusers/PEFT one (some of the same
// weights, so the two add up in order) into tiny-sd's weights and checks
// each against W + scale·alpha/r·up@down in float64.
func TestLoRAMergesSD(t *testing.T) {
	dir := t.TempDir()
	const blk = "down_blocks.0.attentions.0."
	kohya := writeLoRA(t, "tiny-sd", filepath.Join(dir, "kohya.safetensors"), 0.8, 1,
		loraSpec{"lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_out_0", "kohya", "unet", blk + "transformer_blocks.0.attn1.to_out.0.weight", 2, 1},
		loraSpec{"lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn2_to_k", "kohya", "unet", blk + "transformer_blocks.0.attn2.to_k.weight", 3, 0},
		loraSpec{"lora_unet_down_blocks_0_attentions_0_proj_in", "kohya", "unet", blk + "proj_in.weight", 2, 0},
		loraSpec{"lora_unet_down_blocks_0_resnets_0_conv1", "kohya", "unet", "down_blocks.0.resnets.0.conv1.weight", 4, 2},
		loraSpec{"lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_ff_net_0_proj", "kohya", "unet", blk + "transformer_blocks.0.ff.net.0.proj.weight", 2, 4},
		loraSpec{"lora_te_text_model_encoder_layers_0_self_attn_q_proj", "kohya", "text_encoder", "text_model.encoder.layers.0.self_attn.q_proj.weight", 4, 2},
		loraSpec{"lora_te_text_model_encoder_layers_1_mlp_fc1", "kohya", "text_encoder", "text_model.encoder.layers.1.mlp.fc1.weight", 2, 0},
	)
	peft := writeLoRA(t, "tiny-sd", filepath.Join(dir, "peft.safetensors"), -1.5, 2,
		loraSpec{"unet." + blk + "transformer_blocks.0.attn1.to_out.0", "peft", "unet", blk + "transformer_blocks.0.attn1.to_out.0.weight", 2, 0},
		loraSpec{"unet.down_blocks.0.resnets.0.time_emb_proj", "old", "unet", "down_blocks.0.resnets.0.time_emb_proj.weight", 2, 8},
		loraSpec{"unet.down_blocks.0.resnets.0.conv2", "peft", "unet", "down_blocks.0.resnets.0.conv2.weight", 2, 0},
		loraSpec{"text_encoder.text_model.encoder.layers.0.self_attn.k_proj", "peft", "text_encoder", "text_model.encoder.layers.0.self_attn.k_proj.weight", 2, 3},
		loraSpec{"text_encoder.text_model.encoder.layers.0.self_attn.q_proj", "old", "text_encoder", "text_model.encoder.layers.0.self_attn.q_proj.weight", 3, 0},
		// diffusers' older names, as its conversion of kohya files gives them
		loraSpec{"unet." + blk + "transformer_blocks.0.attn2.processor.to_out", "proc", "unet", blk + "transformer_blocks.0.attn2.to_out.0.weight", 2, 0},
		loraSpec{"unet." + blk + "transformer_blocks.0.attn1.processor.to_v", "proc", "unet", blk + "transformer_blocks.0.attn1.to_v.weight", 2, 1},
		loraSpec{"text_encoder.text_model.encoder.layers.1.self_attn.to_out", "proc", "text_encoder", "text_model.encoder.layers.1.self_attn.out_proj.weight", 2, 0},
		loraSpec{"text_encoder.text_model.encoder.layers.1.mlp.fc2", "linear", "text_encoder", "text_model.encoder.layers.1.mlp.fc2.weight", 2, 0},
	)
	assertMerged(t, "tiny-sd", []LoRA{{filepath.Join(dir, "kohya.safetensors"), 0.8}, {filepath.Join(dir, "peft.safetensors"), -1.5}}, kohya, peft)
}

// TestLoRAMergesSDXL merges kohya (lora_te1_, lora_te2_, diffusers-named
// UNet modules) and PEFT (text_encoder_2.) files into tiny-sdxl's weights.
func TestLoRAMergesSDXL(t *testing.T) {
	dir := t.TempDir()
	const blk = "down_blocks.1.attentions.0.transformer_blocks.1."
	kohya := writeLoRA(t, "tiny-sdxl", filepath.Join(dir, "kohya.safetensors"), 1, 3,
		loraSpec{"lora_te1_text_model_encoder_layers_0_self_attn_v_proj", "kohya", "text_encoder", "text_model.encoder.layers.0.self_attn.v_proj.weight", 2, 1},
		loraSpec{"lora_te2_text_model_encoder_layers_0_self_attn_v_proj", "kohya", "text_encoder_2", "text_model.encoder.layers.0.self_attn.v_proj.weight", 3, 1.5},
		loraSpec{"lora_unet_down_blocks_1_attentions_0_transformer_blocks_1_attn2_to_k", "kohya", "unet", blk + "attn2.to_k.weight", 2, 0},
		loraSpec{"lora_unet_down_blocks_1_attentions_0_proj_in", "kohya", "unet", "down_blocks.1.attentions.0.proj_in.weight", 2, 0},
		loraSpec{"lora_unet_down_blocks_0_downsamplers_0_conv", "kohya", "unet", "down_blocks.0.downsamplers.0.conv.weight", 2, 1},
	)
	peft := writeLoRA(t, "tiny-sdxl", filepath.Join(dir, "peft.safetensors"), 0.5, 4,
		loraSpec{"text_encoder_2.text_model.encoder.layers.1.mlp.fc2", "peft", "text_encoder_2", "text_model.encoder.layers.1.mlp.fc2.weight", 2, 0},
		loraSpec{"unet." + blk + "attn1.to_q", "peft", "unet", blk + "attn1.to_q.weight", 2, 0},
		loraSpec{blk + "attn1.to_v", "peft", "unet", blk + "attn1.to_v.weight", 2, 0}, // no component: the UNet's
	)
	assertMerged(t, "tiny-sdxl", []LoRA{{filepath.Join(dir, "kohya.safetensors"), 1}, {filepath.Join(dir, "peft.safetensors"), 0.5}}, kohya, peft)
}

// TestLoRAModuleTable: a kohya name that two module paths flatten to, and
// one of a module without a .weight, match nothing.
func TestLoRAModuleTable(t *testing.T) {
	tab := newModuleTable("unet", []string{"a_b.c.weight", "a.b_c.weight", "a.b.bias"})
	_, err := tab.resolve(&loraModule{key: "lora_unet_a_b_c", module: "a_b_c", kohya: true})
	assert.ErrorIs(t, err, errs.ErrFormat)
	assert.ErrorContains(t, err, "more than one")
	_, err = tab.resolve(&loraModule{key: "lora_unet_a_b", module: "a_b", kohya: true})
	assert.ErrorContains(t, err, "matches no weight", "a module without a .weight")
}

// generated runs a short txt2img on a folder with LoRAs and returns the
// VAE's output.
func generated(t *testing.T, folder string, loras []LoRA) []float64 {
	t.Helper()
	p, err := OpenWith(filepath.Join("testdata", folder), candle.CPU(), candle.F32, Options{LoRAs: loras})
	require.NoError(t, err)
	defer p.Close()
	x, err := p.generate(context.Background(), group{{Prompt: "a photo of a cat", Width: 16, Height: 16, Steps: 2, Seed: 3}})
	require.NoError(t, err)
	defer x.Close()
	return toF64(t, x)
}

// TestLoRAGenerate: a LoRA at scale 0 leaves the images as they are, and
// at another scale changes them, whether it adapts the UNet or a text
// encoder.
func TestLoRAGenerate(t *testing.T) {
	for _, folder := range []string{"tiny-sd", "tiny-sdxl"} {
		dir := t.TempDir()
		te := "lora_te_text_model_encoder_layers_0_self_attn_q_proj"
		if folder == "tiny-sdxl" {
			te = "lora_te2_text_model_encoder_layers_0_self_attn_q_proj"
		}
		unetLoRA := filepath.Join(dir, "unet.safetensors")
		writeLoRA(t, folder, unetLoRA, 1, 6,
			loraSpec{"lora_unet_down_blocks_0_resnets_0_conv1", "kohya", "unet", "down_blocks.0.resnets.0.conv1.weight", 2, 0})
		teLoRA := filepath.Join(dir, "te.safetensors")
		component := map[bool]string{false: "text_encoder", true: "text_encoder_2"}[folder == "tiny-sdxl"]
		writeLoRA(t, folder, teLoRA, 1, 7,
			loraSpec{te, "kohya", component, "text_model.encoder.layers.0.self_attn.q_proj.weight", 4, 0})
		plain := generated(t, folder, nil)
		assert.Equal(t, plain, generated(t, folder, []LoRA{{unetLoRA, 0}, {teLoRA, 0}}), "%s: scale 0", folder)
		for _, l := range []string{unetLoRA, teLoRA} {
			assert.NotEqual(t, plain, generated(t, folder, []LoRA{{l, 2}}), "%s: %s", folder, filepath.Base(l))
		}
	}
}

// TestLoRAErrors: files and tensors that cannot be merged are errors that
// name them.
func TestLoRAErrors(t *testing.T) {
	dir := t.TempDir()
	open := func(folder string, loras ...LoRA) error {
		p, err := OpenWith(filepath.Join("testdata", folder), candle.CPU(), candle.F32, Options{LoRAs: loras})
		if err == nil {
			p.Close()
		}
		return err
	}
	file := func(name string, specs ...loraSpec) string {
		path := filepath.Join(dir, name+".safetensors")
		writeLoRA(t, "tiny-sd", path, 1, 8, specs...)
		return path
	}
	conv1 := loraSpec{"lora_unet_down_blocks_0_resnets_0_conv1", "kohya", "unet", "down_blocks.0.resnets.0.conv1.weight", 2, 0}

	err := open("tiny-sd", LoRA{filepath.Join(dir, "missing.safetensors"), 1})
	assert.ErrorIs(t, err, errs.ErrNotFound)
	assert.ErrorContains(t, err, "missing.safetensors")

	notST := filepath.Join(dir, "notes.safetensors")
	require.NoError(t, os.WriteFile(notST, []byte("a LoRA, honest"), 0o644))
	err = open("tiny-sd", LoRA{notST, 1})
	assert.ErrorIs(t, err, errs.ErrFormat)
	assert.ErrorContains(t, err, "notes.safetensors")

	// a module the UNet does not have
	noSuch := conv1
	noSuch.base = "lora_unet_down_blocks_9_resnets_0_conv1"
	err = open("tiny-sd", LoRA{file("nosuch", noSuch), 1})
	assert.ErrorIs(t, err, errs.ErrFormat)
	assert.ErrorContains(t, err, "lora_unet_down_blocks_9_resnets_0_conv1")
	assert.ErrorContains(t, err, "nosuch.safetensors")
	err = open("tiny-sd", LoRA{file("nosuch", noSuch), 0})
	assert.ErrorIs(t, err, errs.ErrFormat, "at scale 0 too")

	// a second text encoder on SD 1.x
	te2 := loraSpec{"lora_te2_text_model_encoder_layers_0_self_attn_q_proj", "kohya", "text_encoder", "text_model.encoder.layers.0.self_attn.q_proj.weight", 2, 0}
	err = open("tiny-sd", LoRA{file("te2", te2), 1})
	assert.ErrorIs(t, err, errs.ErrFormat)
	assert.ErrorContains(t, err, "lora_te2_text_model_encoder_layers_0_self_attn_q_proj")
	assert.ErrorContains(t, err, "text_encoder_2")

	// a module of the wrong shape: q_proj's matrices for fc1
	wrong := file("shape", loraSpec{"lora_te_text_model_encoder_layers_0_self_attn_q_proj", "kohya", "text_encoder", "text_model.encoder.layers.0.mlp.fc1.weight", 2, 0})
	err = open("tiny-sd", LoRA{wrong, 1})
	assert.ErrorIs(t, err, errs.ErrShape)
	assert.ErrorContains(t, err, "[128 2]")
	assert.ErrorContains(t, err, "[32 32]")

	// names of no LoRA format, and a module without its up matrix
	x, err := candle.FromSlice(candle.CPU(), []float32{1, 2, 3, 4}, 2, 2)
	require.NoError(t, err)
	defer x.Close()
	for name, tensors := range map[string]map[string]*candle.Tensor{
		"model.diffusion_model.input_blocks.0.0.weight":     {"model.diffusion_model.input_blocks.0.0.weight": x},
		"lora_unet_down_blocks_0_resnets_0_conv1":           {"lora_unet_down_blocks_0_resnets_0_conv1.lora_down.weight": x},
		"lora_unet_down_blocks_0_resnets_0_conv1.hada_w1_a": {"lora_unet_down_blocks_0_resnets_0_conv1.hada_w1_a": x},
		"unet.down_blocks.0.resnets.0.conv1.lora_A.weight": {"unet.down_blocks.0.resnets.0.conv1.lora_A.weight": x,
			"unet.down_blocks.0.resnets.0.conv1.lora.down.weight": x, "unet.down_blocks.0.resnets.0.conv1.lora_B.weight": x},
	} {
		path := filepath.Join(dir, "bad.safetensors")
		require.NoError(t, safetensors.Save(path, tensors, nil))
		err = open("tiny-sd", LoRA{path, 1})
		assert.ErrorIs(t, err, errs.ErrFormat, name)
		assert.ErrorContains(t, err, name)
	}

	err = open("tiny-sd", LoRA{file("ok", conv1), math.NaN()})
	assert.ErrorIs(t, err, errs.ErrArgument)
	var e *errs.Error
	require.True(t, errors.As(err, &e))
	assert.Equal(t, "sd", e.Pkg)
}

// TestLoRAKohyaNames resolves kohya names to the modules that diffusers'
// conversion of kohya files (_convert_non_diffusers_lora_to_diffusers,
// then its PEFT renaming) gives them.
func TestLoRAKohyaNames(t *testing.T) {
	names := func(folder, component string) []string {
		w, err := safetensors.Open(filepath.Join("testdata", folder, component))
		require.NoError(t, err)
		defer w.Close()
		return w.Names()
	}
	for _, c := range []struct{ folder, component, kohya, module string }{
		{"tiny-sd", "unet", "down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_out_0", "down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_out.0"},
		{"tiny-sd", "unet", "down_blocks_0_attentions_0_transformer_blocks_0_attn2_to_k", "down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k"},
		{"tiny-sd", "unet", "down_blocks_0_attentions_0_proj_in", "down_blocks.0.attentions.0.proj_in"},
		{"tiny-sd", "unet", "down_blocks_0_attentions_0_transformer_blocks_0_ff_net_0_proj", "down_blocks.0.attentions.0.transformer_blocks.0.ff.net.0.proj"},
		{"tiny-sd", "unet", "down_blocks_0_resnets_0_conv1", "down_blocks.0.resnets.0.conv1"},
		{"tiny-sd", "unet", "down_blocks_0_resnets_0_time_emb_proj", "down_blocks.0.resnets.0.time_emb_proj"},
		{"tiny-sd", "unet", "down_blocks_0_downsamplers_0_conv", "down_blocks.0.downsamplers.0.conv"},
		{"tiny-sd", "unet", "mid_block_attentions_0_proj_in", "mid_block.attentions.0.proj_in"},
		{"tiny-sd", "unet", "up_blocks_1_resnets_0_conv_shortcut", "up_blocks.1.resnets.0.conv_shortcut"},
		{"tiny-sd", "text_encoder", "text_model_encoder_layers_0_self_attn_q_proj", "text_model.encoder.layers.0.self_attn.q_proj"},
		{"tiny-sd", "text_encoder", "text_model_encoder_layers_1_mlp_fc1", "text_model.encoder.layers.1.mlp.fc1"},
		{"tiny-sdxl", "text_encoder_2", "text_model_encoder_layers_0_self_attn_out_proj", "text_model.encoder.layers.0.self_attn.out_proj"},
	} {
		got, err := newModuleTable(c.component, names(c.folder, c.component)).resolve(&loraModule{key: c.kohya, module: c.kohya, kohya: true})
		require.NoError(t, err, c.kohya)
		assert.Equal(t, c.module, got, c.kohya)
	}
}

// TestLoRAKeepsTheDType: a weight in F16 merges in F32 and loads in F16.
func TestLoRAKeepsTheDType(t *testing.T) {
	dir := t.TempDir()
	const name = "down_blocks.0.resnets.0.conv1.weight"
	w32, shape := weightOf(t, "tiny-sd", "unet", name)
	x, err := candle.FromSlice(candle.CPU(), w32, shape...)
	require.NoError(t, err)
	defer x.Close()
	x16, err := x.ToDType(candle.F16)
	require.NoError(t, err)
	defer x16.Close()
	base := toF64(t, x16)
	path := filepath.Join(dir, "unet.safetensors")
	require.NoError(t, safetensors.Save(path, map[string]*candle.Tensor{name: x16}, nil))
	lora := filepath.Join(dir, "lora.safetensors")
	lv := writeLoRA(t, "tiny-sd", lora, 0.7, 9, loraSpec{"lora_unet_down_blocks_0_resnets_0_conv1", "kohya", "unet", name, 2, 3})

	l, err := openLoRAs([]LoRA{{lora, 0.7}})
	require.NoError(t, err)
	defer l.close()
	f, err := safetensors.OpenFile(path)
	require.NoError(t, err)
	v, err := l.view("unet", f)
	require.NoError(t, err)
	defer v.Close()
	m, err := v.Load(name, candle.CPU())
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, candle.F16, m.DType())
	got := toF64(t, m)
	delta := want(t, "tiny-sd", lv)["unet/"+name]
	for i := range got {
		ref := base[i] + delta[i] - w32[i]
		assert.InDelta(t, ref, got[i], math.Abs(ref)/1024+1e-6, "element %d", i)
	}
}

// TestLoRALDMNames: kohya's SDXL LoRAs name the UNet's modules as the LDM
// checkpoints do, and merge into the same weights as their diffusers
// names (input_blocks.3 is down_blocks.1 at one layer a block; SDXL's
// two make it input_blocks.4); every module of both tiny UNets has its
// LDM alias.
func TestLoRALDMNames(t *testing.T) {
	for _, c := range []struct {
		folder string
		spec   loraSpec
	}{
		{"tiny-sd", loraSpec{"lora_unet_input_blocks_1_0_in_layers_2", "kohya", "unet", "down_blocks.0.resnets.0.conv1.weight", 2, 0}},
		{"tiny-sdxl", loraSpec{"lora_unet_input_blocks_3_1_transformer_blocks_0_attn1_to_q", "kohya", "unet",
			"down_blocks.1.attentions.0.transformer_blocks.0.attn1.to_q.weight", 2, 0}},
	} {
		w, err := safetensors.Open(filepath.Join("testdata", c.folder, "unet"))
		require.NoError(t, err)
		names := w.Names()
		w.Close()
		modules := 0
		for _, n := range names {
			if strings.HasSuffix(n, ".weight") && !strings.HasPrefix(n, "conv_in.") && !strings.HasPrefix(n, "conv_out.") &&
				!strings.HasPrefix(n, "conv_norm_out.") && !strings.HasPrefix(n, "time_embedding.") && !strings.HasPrefix(n, "add_embedding.") {
				modules++
			}
		}
		assert.Len(t, ldmUNetAliases(names), modules, "%s: an alias for every block module", c.folder)
		path := filepath.Join(t.TempDir(), "ldm.safetensors")
		assertMerged(t, c.folder, []LoRA{{path, 1}}, writeLoRA(t, c.folder, path, 1, 5, c.spec))
	}
}

func TestLoRATextModelAliases(t *testing.T) {
	tab := newModuleTable("text_encoder", []string{"encoder.layers.0.self_attn.q_proj.weight", "encoder.layers.0.self_attn.q_proj.bias"})
	m, err := tab.resolve(&loraModule{key: "lora_te_text_model_encoder_layers_0_self_attn_q_proj", module: "text_model_encoder_layers_0_self_attn_q_proj", kohya: true})
	require.NoError(t, err)
	assert.Equal(t, "encoder.layers.0.self_attn.q_proj", m)
}
