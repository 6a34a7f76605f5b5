package sd

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/sd/clip"
	"github.com/rocm-go/rocm/candle/models/sd/scheduler"
	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/testenv"
)

// tinyRules are the rules of testdata's tiny models, whose widths are not
// SD's: 4 groups, one head in each block of the SD 1.x UNet, heads 8 wide,
// and SD 1.x's latent scale for the XL VAE too.
var tinyRules = ldmRules{groups: 4, sd1Heads: 1, headDim: 8, vaeScale: 0.18215, vaeScaleXL: 0.18215, vaeSample: 16, vaeSampleXL: 16}

// ldmManifest is testdata/ldm-*.json (testdata/make_ldm.py): a single
// file's tensors in the original names, made of a folder's by diffusers'
// own conversions.
type ldmManifest struct {
	Layout  string
	Tensors []struct {
		Name  string
		Op    string
		From  [][2]string
		Shape []int
	}
}

// ldmTensors makes a manifest's tensors of folder's weights, on the CPU.
func ldmTensors(t *testing.T, m ldmManifest, folder string) map[string]*candle.Tensor {
	t.Helper()
	files := map[string]*safetensors.Files{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	load := func(src [2]string) *candle.Tensor {
		f, ok := files[src[0]]
		if !ok {
			var err error
			f, err = safetensors.Open(filepath.Join("testdata", folder, src[0]))
			require.NoError(t, err)
			files[src[0]] = f
		}
		x, err := f.Load(src[1], candle.CPU())
		require.NoError(t, err, src[1])
		return x
	}
	out := map[string]*candle.Tensor{}
	t.Cleanup(func() {
		for _, x := range out {
			x.Close()
		}
	})
	for _, e := range m.Tensors {
		var x *candle.Tensor
		var err error
		switch e.Op {
		case "same":
			x = load(e.From[0])
		case "cat":
			var parts []*candle.Tensor
			for _, s := range e.From {
				parts = append(parts, load(s))
			}
			x, err = candle.Cat(parts, 0)
			for _, p := range parts {
				p.Close()
			}
		case "conv":
			w := load(e.From[0])
			x, err = w.Reshape(append(slices.Clone([]int(w.Shape())), 1, 1)...)
			w.Close()
		case "T":
			w := load(e.From[0])
			var tr *candle.Tensor
			if tr, err = w.T(); err == nil {
				x, err = tr.Contiguous()
				tr.Close()
			}
			w.Close()
		case "zeros":
			x, err = candle.Zeros(candle.CPU(), candle.F32, e.Shape...)
		default:
			t.Fatalf("%s: op %q", e.Name, e.Op)
		}
		require.NoError(t, err, e.Name)
		out[e.Name] = x
	}
	return out
}

// writeLDM writes a single file of a manifest and returns its path.
func writeLDM(t *testing.T, manifest, folder string, edit func(map[string]*candle.Tensor)) string {
	t.Helper()
	ts := ldmTensors(t, readJSON[ldmManifest](t, manifest), folder)
	if edit != nil {
		edit(ts)
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	require.NoError(t, safetensors.Save(path, ts, nil))
	return path
}

// generateOnce runs the golden request of a folder and returns the
// decoded images' values.
func generateOnce(t *testing.T, p *Pipeline, golden string) []float32 {
	t.Helper()
	g, noise := readGolden(t, golden)
	x, err := p.generate(context.Background(), group{{Prompt: g.Prompt, Width: 16, Height: 12, Steps: g.Steps,
		Guidance: g.Guidance, Batch: 2, Noise: noise}})
	require.NoError(t, err)
	defer x.Close()
	v, err := candle.ToSlice[float32](x)
	require.NoError(t, err)
	return v
}

// TestSingleFileIsTheFolder loads SD 1.x and XL single files made of the
// tiny folders by diffusers' conversions, and checks that they generate
// the folders' images bit for bit on the CPU in F32.
func TestSingleFileIsTheFolder(t *testing.T) {
	if testenv.Race || testing.Short() {
		t.Skip("ten seconds of CPU pipelines, ten times that under -race or -short: it runs in full tier-1 runs")
	}
	// Files saved with transformers before 4.x name CLIP's tensors without
	// text_model.
	oldCLIP := func(ts map[string]*candle.Tensor) {
		for k, x := range ts {
			if rest, ok := strings.CutPrefix(k, ldmSD1+"text_model."); ok {
				delete(ts, k)
				ts[ldmSD1+rest] = x
			}
		}
	}
	for _, c := range []struct {
		manifest, folder, golden string
		edit                     func(map[string]*candle.Tensor)
	}{
		{"ldm-sd1.json", "tiny-sd", "golden.json", nil},
		{"ldm-sd1.json", "tiny-sd", "golden.json", oldCLIP},
		{"ldm-sdxl.json", "tiny-sdxl", "golden-xl.json", nil},
	} {
		path := writeLDM(t, c.manifest, c.folder, c.edit)
		dir := filepath.Join("testdata", c.folder)
		p, err := openSingleFile(path, candle.CPU(), candle.F32, Options{Tokenizer: dir}, tinyRules)
		require.NoError(t, err, c.manifest)
		want := generateOnce(t, openFolder(t, c.folder, candle.CPU(), candle.F32), c.golden)
		got := generateOnce(t, p, c.golden)
		require.NoError(t, p.Close())
		require.Len(t, got, 2*3*12*16)
		assert.Equal(t, want, got, c.manifest)
	}
}

// perBlock spreads a one-value list over n blocks.
func perBlock(v []int, n int) []int {
	if len(v) == 1 {
		return slices.Repeat(v, n)
	}
	return v
}

// TestSingleFileConfigs checks the configs read from each layout's shapes
// against the folders' config.json files.
func TestSingleFileConfigs(t *testing.T) {
	for _, c := range []struct {
		manifest, folder string
		xl               bool
	}{{"ldm-sd1.json", "tiny-sd", false}, {"ldm-sdxl.json", "tiny-sdxl", true}} {
		w, err := safetensors.Open(writeLDM(t, c.manifest, c.folder, nil))
		require.NoError(t, err)
		defer w.Close()
		got, err := ldmParts("model.safetensors", w, tinyRules)
		require.NoError(t, err)
		want, err := folderParts(filepath.Join("testdata", c.folder))
		require.NoError(t, err)
		assert.Equal(t, c.xl, got.xl)
		assert.Equal(t, c.xl, got.zeroNegative)
		assert.Equal(t, scheduler.SD(), got.sched)
		require.Len(t, got.texts, len(want.texts))
		for i := range want.texts {
			g, w := got.texts[i], want.texts[i]
			g.Architectures, w.Architectures = nil, nil
			if i == 0 {
				w.ProjectionDim = 0 // the folder's config names one its weights lack
			}
			assert.Equal(t, w, g, "%s text encoder %d", c.manifest, i)
		}
		gu, wu := got.unet, want.unet
		n := len(wu.BlockOutChannels)
		assert.Equal(t, wu.BlockOutChannels, gu.BlockOutChannels)
		assert.Equal(t, wu.DownBlockTypes, gu.DownBlockTypes)
		assert.Equal(t, wu.UpBlockTypes, gu.UpBlockTypes)
		assert.Equal(t, wu.LayersPerBlock, gu.LayersPerBlock)
		assert.Equal(t, wu.NormNumGroups, gu.NormNumGroups)
		assert.Equal(t, wu.CrossAttentionDim, gu.CrossAttentionDim)
		assert.Equal(t, perBlock(wu.NumAttentionHeads, n), perBlock(gu.NumAttentionHeads, n))
		assert.Equal(t, perBlock(wu.TransformerLayersPerBlock, n), perBlock(gu.TransformerLayersPerBlock, n))
		assert.Equal(t, wu.UseLinearProjection, gu.UseLinearProjection)
		assert.Equal(t, wu.TextTime(), gu.TextTime())
		assert.Equal(t, wu.AdditionTimeEmbedDim, gu.AdditionTimeEmbedDim)
		assert.Equal(t, wu.ProjectionClassEmbeddingsInput, gu.ProjectionClassEmbeddingsInput)
		assert.Equal(t, [2]int{wu.InChannels, wu.OutChannels}, [2]int{gu.InChannels, gu.OutChannels})
		gv, wv := got.vae, want.vae
		gv.ShiftFactor, wv.ShiftFactor, gv.LatentsMean, wv.LatentsMean = nil, nil, nil, nil
		assert.Equal(t, wv, gv, "%s VAE", c.manifest)
	}
}

// TestSingleFileSD2 reads an SD 2.x file: tiny-sd with its text encoder
// in OpenCLIP's names. SD 2.x conditions on the penultimate block's
// output with the final norm, so the encoder is tiny-sd's first layer
// with gelu; the prediction is v unless the options say otherwise.
func TestSingleFileSD2(t *testing.T) {
	path := writeLDM(t, "ldm-sd2.json", "tiny-sd", nil)
	w, err := safetensors.Open(path)
	require.NoError(t, err)
	defer w.Close()
	pt, err := ldmParts(path, w, tinyRules)
	require.NoError(t, err)
	assert.False(t, pt.xl)
	assert.Equal(t, scheduler.VPrediction, pt.sched.PredictionType)
	require.Len(t, pt.texts, 1)
	cfg := pt.texts[0]
	assert.Equal(t, []any{1, "gelu", 4, 32, 128, 0}, []any{cfg.Layers, cfg.HiddenAct, cfg.Heads, cfg.HiddenSize, cfg.IntermediateSize, cfg.ProjectionDim})
	assert.Equal(t, []int{1, 2}, []int(pt.unet.NumAttentionHeads), "SD 2.x's heads are 8 wide here")
	view, err := pt.weights("text_encoder")
	require.NoError(t, err)
	_, hasProj := view.Info("text_projection.weight")
	assert.False(t, hasProj, "SD 2.x does not use its text projection")
	got, err := clip.New(view, cfg, candle.CPU(), candle.F32)
	require.NoError(t, err)
	defer got.Close()

	dir := filepath.Join("testdata", "tiny-sd", "text_encoder")
	want0, err := clip.LoadConfig(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	want0.Layers, want0.HiddenAct = 1, "gelu"
	fw, err := safetensors.Open(dir)
	require.NoError(t, err)
	defer fw.Close()
	want, err := clip.New(fw, want0, candle.CPU(), candle.F32)
	require.NoError(t, err)
	defer want.Close()
	windows := [][]int32{make([]int32, 77)}
	for i := range windows[0] {
		windows[0][i] = int32(i * 7 % 900)
	}
	a, err := got.Forward(windows)
	require.NoError(t, err)
	defer a.Close()
	b, err := want.Forward(windows)
	require.NoError(t, err)
	defer b.Close()
	av, err := candle.ToSlice[float32](a.Last)
	require.NoError(t, err)
	bv, err := candle.ToSlice[float32](b.Last)
	require.NoError(t, err)
	assert.Equal(t, bv, av)

	tok := filepath.Join("testdata", "tiny-sd")
	for pred, want := range map[string]string{"": scheduler.VPrediction, scheduler.Epsilon: scheduler.Epsilon} {
		p, err := openSingleFile(path, candle.CPU(), candle.F32, Options{Tokenizer: tok, Prediction: pred}, tinyRules)
		require.NoError(t, err)
		assert.Equal(t, want, p.sched.PredictionType)
		p.Close()
	}
}

// TestSingleFileErrors checks that files that are not checkpoints, or
// whose tensors are missing or mis-shaped, are errors that name them.
func TestSingleFileErrors(t *testing.T) {
	tok := Options{Tokenizer: filepath.Join("testdata", "tiny-sd")}
	open := func(path string, o Options) error {
		p, err := openSingleFile(path, candle.CPU(), candle.F32, o, tinyRules)
		if err == nil {
			p.Close()
		}
		return err
	}
	for _, c := range []struct {
		what string
		edit func(map[string]*candle.Tensor)
		kind error
		text string
	}{
		{"a missing tensor", func(ts map[string]*candle.Tensor) {
			delete(ts, "model.diffusion_model.middle_block.1.transformer_blocks.0.attn2.to_k.weight")
		}, errs.ErrFormat, "model.diffusion_model.middle_block.1.transformer_blocks.0.attn2.to_k.weight"},
		{"an unknown UNet tensor", func(ts map[string]*candle.Tensor) {
			ts["model.diffusion_model.extra.0.weight"] = ts["model.diffusion_model.out.0.weight"]
		}, errs.ErrFormat, "model.diffusion_model.extra.0.weight"},
		{"a mis-shaped VAE attention", func(ts map[string]*candle.Tensor) {
			x, err := candle.Zeros(candle.CPU(), candle.F32, 16, 16, 3, 3)
			require.NoError(t, err)
			ts["first_stage_model.encoder.mid.attn_1.q.weight"] = x
		}, errs.ErrFormat, "first_stage_model.encoder.mid.attn_1.q.weight"},
		{"no text encoder", func(ts map[string]*candle.Tensor) {
			for k := range ts {
				if strings.HasPrefix(k, "cond_stage_model.") {
					delete(ts, k)
				}
			}
		}, errs.ErrFormat, "no text encoder"},
		{"no VAE", func(ts map[string]*candle.Tensor) {
			for k := range ts {
				if strings.HasPrefix(k, "first_stage_model.") {
					delete(ts, k)
				}
			}
		}, errs.ErrFormat, "first_stage_model."},
	} {
		err := open(writeLDM(t, "ldm-sd1.json", "tiny-sd", c.edit), tok)
		require.ErrorIs(t, err, c.kind, c.what)
		assert.ErrorContains(t, err, c.text, c.what)
	}
	// SD's own rules refuse a text encoder 32 wide (heads are 64 wide).
	path := writeLDM(t, "ldm-sd1.json", "tiny-sd", nil)
	_, err := OpenWith(path, candle.CPU(), candle.F32, tok)
	require.ErrorIs(t, err, errs.ErrFormat)
	assert.ErrorContains(t, err, "multiple of 64")

	// A truncated file.
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	short := filepath.Join(t.TempDir(), "short.safetensors")
	require.NoError(t, os.WriteFile(short, b[:len(b)/2], 0o644))
	assert.Error(t, open(short, tok))

	// No tokenizer beside the file and none named.
	err = open(path, Options{})
	require.ErrorIs(t, err, errs.ErrNotFound)
	assert.ErrorContains(t, err, "Options.Tokenizer")
	var e *errs.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "Tokenizer", e.Field)

	_, err = OpenWith(path, candle.CPU(), candle.F32, Options{Prediction: "sample"})
	require.ErrorIs(t, err, errs.ErrArgument)
}

// TestTokenizerDirs checks where a single file's tokenizers are looked
// for: beside the file, or in the folder the options name.
func TestTokenizerDirs(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "tokenizer"), 0o755))
	file := filepath.Join(dir, "m.safetensors")
	got, err := tokenizerDirs(file, Options{}, 2)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "tokenizer"), filepath.Join(dir, "tokenizer")}, got)
	xl := filepath.Join("testdata", "tiny-sdxl")
	got, err = tokenizerDirs(file, Options{Tokenizer: xl}, 2)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(xl, "tokenizer"), filepath.Join(xl, "tokenizer_2")}, got)
	vocab := filepath.Join("testdata", "tiny-sd", "tokenizer")
	got, err = tokenizerDirs(file, Options{Tokenizer: vocab}, 1)
	require.NoError(t, err)
	assert.Equal(t, []string{vocab}, got)
}

// shapeWeights is a checkpoint's names and shapes without data
// (testdata/ldm-shapes-*.txt).
type shapeWeights struct {
	shapes map[string]candle.Shape
	// unet and vae are how many tensors diffusers' models have.
	unet, vae int
}

func readShapes(t *testing.T, name string) *shapeWeights {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	w := &shapeWeights{shapes: map[string]candle.Shape{}}
	_, err = fmt.Sscanf(lines[0], "# %s diffusers' UNet has %d tensors and its VAE %d", new(string), &w.unet, &w.vae)
	require.NoError(t, err, lines[0])
	prev := ""
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		require.Len(t, f, 3, l)
		n, err := strconv.Atoi(f[0])
		require.NoError(t, err, l)
		name := prev[:n] + f[1]
		var s candle.Shape
		for _, d := range strings.Split(f[2], ",") {
			v, err := strconv.Atoi(d)
			require.NoError(t, err, l)
			s = append(s, v)
		}
		w.shapes[name], prev = s, name
	}
	return w
}

func (w *shapeWeights) Names() []string {
	return slices.Sorted(maps.Keys(w.shapes))
}

func (w *shapeWeights) Info(name string) (candle.WeightInfo, bool) {
	s, ok := w.shapes[name]
	return candle.WeightInfo{Shape: s, Type: "F16", Dense: true, DType: candle.F16}, ok
}

func (w *shapeWeights) Load(name string, dev candle.Device) (*candle.Tensor, error) {
	return nil, errs.ErrUnsupported
}

func (w *shapeWeights) LoadQ(name string, dev candle.Device) (*candle.QTensor, error) {
	return nil, errs.ErrUnsupported
}

func (w *shapeWeights) TransferStats() candle.TransferStats { return candle.TransferStats{} }
func (w *shapeWeights) Close() error                        { return nil }

// TestSingleFileRealConfigs reads the configs of SD 1.5's, SD 2.1's and
// SDXL base's single files (their names and shapes, written from
// diffusers' models) by SD's own rules.
func TestSingleFileRealConfigs(t *testing.T) {
	type text struct {
		hidden, layers, heads, inter, proj int
		act                                string
	}
	clipL := text{768, 12, 12, 3072, 0, "quick_gelu"}
	for _, c := range []struct {
		file       string
		chans      []int
		heads      []int
		depth      []int
		cross      int
		linear     bool
		addTime    int
		texts      []text
		prediction string
		scale      float64
	}{
		{"ldm-shapes-sd15.txt", []int{320, 640, 1280, 1280}, []int{8, 8, 8, 8}, []int{1, 1, 1, 1}, 768, false, 0,
			[]text{clipL}, scheduler.Epsilon, 0.18215},
		{"ldm-shapes-sd21.txt", []int{320, 640, 1280, 1280}, []int{5, 10, 20, 20}, []int{1, 1, 1, 1}, 1024, true, 0,
			[]text{{1024, 23, 16, 4096, 0, "gelu"}}, scheduler.VPrediction, 0.18215},
		{"ldm-shapes-sdxl.txt", []int{320, 640, 1280}, []int{5, 10, 20}, []int{1, 2, 10}, 2048, true, 256,
			[]text{clipL, {1280, 32, 20, 5120, 1280, "gelu"}}, scheduler.Epsilon, 0.13025},
	} {
		w := readShapes(t, c.file)
		pt, err := ldmParts(c.file, w, sdRules)
		require.NoError(t, err, c.file)
		u := pt.unet
		assert.Equal(t, c.chans, u.BlockOutChannels, c.file)
		assert.Equal(t, c.heads, []int(u.NumAttentionHeads), c.file)
		assert.Equal(t, c.depth, []int(u.TransformerLayersPerBlock), c.file)
		assert.Equal(t, []any{4, 4, 2, 32, c.cross, c.linear}, []any{u.InChannels, u.OutChannels, u.LayersPerBlock, u.NormNumGroups, u.CrossAttentionDim, u.UseLinearProjection}, c.file)
		assert.Equal(t, c.addTime > 0, u.TextTime(), c.file)
		assert.Equal(t, c.addTime, u.AdditionTimeEmbedDim, c.file)
		if c.addTime > 0 {
			assert.Equal(t, 2816, u.ProjectionClassEmbeddingsInput, c.file)
		}
		require.Len(t, pt.texts, len(c.texts), c.file)
		for i, want := range c.texts {
			g := pt.texts[i]
			assert.Equal(t, want, text{g.HiddenSize, g.Layers, g.Heads, g.IntermediateSize, g.ProjectionDim, g.HiddenAct}, "%s text encoder %d", c.file, i)
			assert.Equal(t, []int{49408, 77}, []int{g.VocabSize, g.MaxPositions}, c.file)
		}
		v := pt.vae
		assert.Equal(t, []int{128, 256, 512, 512}, v.BlockOutChannels, c.file)
		assert.Equal(t, []any{3, 3, 4, 2, 32, c.scale}, []any{v.InChannels, v.OutChannels, v.LatentChannels, v.LayersPerBlock, v.NormNumGroups, v.ScalingFactor}, c.file)
		assert.Equal(t, c.prediction, pt.sched.PredictionType, c.file)

		// Every tensor of diffusers' models is in the views, in its shape.
		uw, err := pt.weights("unet")
		require.NoError(t, err)
		assert.Len(t, uw.Names(), w.unet, c.file)
		vw, err := pt.weights("vae")
		require.NoError(t, err)
		assert.Len(t, vw.Names(), w.vae, c.file)
		q, ok := vw.Info("decoder.mid_block.attentions.0.to_q.weight")
		require.True(t, ok)
		assert.Equal(t, candle.Shape{512, 512}, q.Shape)
		if len(c.texts) == 2 {
			tw, err := pt.weights("text_encoder_2")
			require.NoError(t, err)
			for name, want := range map[string]candle.Shape{
				"text_projection.weight":                              {1280, 1280},
				"text_model.encoder.layers.31.self_attn.k_proj.bias":  {1280},
				"text_model.encoder.layers.0.self_attn.v_proj.weight": {1280, 1280},
			} {
				i, ok := tw.Info(name)
				require.True(t, ok, name)
				assert.Equal(t, want, i.Shape, name)
			}
		}
	}
}
