package models_test

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/gguf"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/mkmodel"
)

// tinyFolder writes mkmodel's tiny model as a Hugging Face folder.
func tinyFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, mkmodel.Write(dir, mkmodel.Tiny(), nil))
	return dir
}

// tinyGGUF writes mkmodel's tiny model as a GGUF file named name.
func tinyGGUF(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, mkmodel.WriteGGUF(path, mkmodel.Tiny(), candle.GGMLQ8_0, nil))
	return path
}

func TestOpenHuggingFace(t *testing.T) {
	dir := tinyFolder(t)
	f, err := models.Detect(dir)
	require.NoError(t, err)
	assert.Equal(t, models.HuggingFace, f)
	c, err := models.Open(dir)
	require.NoError(t, err)
	assert.Equal(t, dir, c.Path)
	assert.Equal(t, models.HuggingFace, c.Format)
	assert.Equal(t, "llama", c.Architecture)
	want, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	assert.Equal(t, want, c.Config)
	assert.Nil(t, c.GGUF)
	info, ok := c.Weights.Info("model.embed_tokens.weight")
	require.True(t, ok)
	assert.Equal(t, mkmodel.Tiny().Hidden, info.Shape[1])
	x, err := c.Weights.Load("model.norm.weight", candle.CPU())
	require.NoError(t, err)
	assert.Equal(t, candle.Shape{mkmodel.Tiny().Hidden}, x.Shape())
	x.Close()
	tok, err := c.Tokenizer()
	require.NoError(t, err)
	require.NotNil(t, tok)
	again, err := c.Tokenizer()
	require.NoError(t, err)
	assert.Same(t, tok, again, "read once")
	ids, err := tok.Encode("hello there", false)
	require.NoError(t, err)
	assert.NotEmpty(t, ids)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "closing twice does nothing")
	_, err = c.Weights.Load("model.norm.weight", candle.CPU())
	assert.ErrorIs(t, err, errs.ErrClosed)
}

// TestOpenGGUF opens a GGUF file, by its bytes whatever its name: the
// architecture from its metadata, its tensors as the weights, the
// tokenizer from its vocabulary, the same as the folder's.
func TestOpenGGUF(t *testing.T) {
	ref, err := models.Open(tinyFolder(t))
	require.NoError(t, err)
	defer ref.Close()
	want, err := ref.Tokenizer()
	require.NoError(t, err)
	for _, name := range []string{"tiny.gguf", "blob-sha256-1234"} {
		path := tinyGGUF(t, name)
		f, err := models.Detect(path)
		require.NoError(t, err)
		assert.Equal(t, models.GGUF, f, name)
		c, err := models.Open(path)
		require.NoError(t, err, name)
		assert.Equal(t, models.GGUF, c.Format)
		assert.Equal(t, "llama", c.Architecture)
		assert.Nil(t, c.Config)
		require.NotNil(t, c.GGUF)
		assert.Equal(t, candle.Weights(c.GGUF), c.Weights)
		info, ok := c.Weights.Info("blk.0.attn_q.weight")
		require.True(t, ok)
		assert.True(t, info.Quantized)
		assert.Equal(t, candle.GGMLQ8_0, info.Quant)
		q, err := c.Weights.LoadQ("blk.0.attn_q.weight", candle.CPU())
		require.NoError(t, err)
		q.Close()
		tok, err := c.Tokenizer()
		require.NoError(t, err)
		require.NotNil(t, tok)
		for _, text := range []string{"Hello! How are you today?", " spaces  and\nlines"} {
			a, err := want.Encode(text, true)
			require.NoError(t, err)
			b, err := tok.Encode(text, true)
			require.NoError(t, err)
			assert.Equal(t, a, b, "%q", text)
		}
		require.NoError(t, c.Close())
	}
}

// TestOpenSafetensorsFile opens one safetensors file on its own: its
// tensors, and no config or tokenizer.
func TestOpenSafetensorsFile(t *testing.T) {
	path := filepath.Join(tinyFolder(t), "model.safetensors")
	f, err := models.Detect(path)
	require.NoError(t, err)
	assert.Equal(t, models.Safetensors, f)
	c, err := models.Open(path)
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, models.Safetensors, c.Format)
	assert.Empty(t, c.Architecture)
	assert.Nil(t, c.Config)
	assert.Contains(t, c.Weights.Names(), "model.norm.weight")
	tok, err := c.Tokenizer()
	assert.NoError(t, err)
	assert.Nil(t, tok, "a single file holds no tokenizer")
}

// TestOpenBadPaths: every way a path can fail to be a model is an error
// of its kind that names the path and says what Open takes.
func TestOpenBadPaths(t *testing.T) {
	write := func(path string, b []byte) string {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, b, 0o644))
		return path
	}
	type bad struct {
		path string
		kind error
		want string
	}
	var cases []bad
	add := func(path string, kind error, want string) { cases = append(cases, bad{path, kind, want}) }

	add(filepath.Join(t.TempDir(), "none"), errs.ErrNotFound, "no such file or folder")
	add(t.TempDir(), errs.ErrNotFound, "holds neither config.json (a Hugging Face model) nor model_index.json (a diffusers pipeline)")

	noConfig := tinyFolder(t)
	require.NoError(t, os.Remove(filepath.Join(noConfig, "config.json")))
	add(noConfig, errs.ErrNotFound, "holds neither config.json")

	diffusers := t.TempDir()
	write(filepath.Join(diffusers, "model_index.json"), []byte(`{"_class_name": "StableDiffusionPipeline"}`))
	write(filepath.Join(diffusers, "unet", "config.json"), []byte(`{}`))
	add(diffusers, errs.ErrUnsupported, "a diffusers pipeline (model_index.json)")

	noWeights := t.TempDir()
	write(filepath.Join(noWeights, "config.json"), []byte(`{"model_type": "llama"}`))
	add(noWeights, errs.ErrNotFound, "holds no model.safetensors.index.json, model.safetensors or *.safetensors")

	notJSON := tinyFolder(t)
	write(filepath.Join(notJSON, "config.json"), []byte(`{"model_type": `))
	add(notJSON, errs.ErrFormat, "config.json: not a JSON object")

	missingShard := t.TempDir()
	write(filepath.Join(missingShard, "config.json"), []byte(`{"model_type": "llama"}`))
	write(filepath.Join(missingShard, safetensors.Index), []byte(`{"weight_map": {"a": "model-00001-of-00002.safetensors"}}`))
	add(missingShard, errs.ErrNotFound, "the shard model-00001-of-00002.safetensors is not there")

	truncShard := tinyFolder(t)
	st, err := os.ReadFile(filepath.Join(truncShard, "model.safetensors"))
	require.NoError(t, err)
	write(filepath.Join(truncShard, "model.safetensors"), st[:len(st)/2])
	add(truncShard, errs.ErrFormat, "a truncated file?")

	g, err := os.ReadFile(tinyGGUF(t, "tiny.gguf"))
	require.NoError(t, err)
	add(write(filepath.Join(t.TempDir(), "trunc.gguf"), g[:len(g)/2]), errs.ErrFormat, "truncated")
	add(write(filepath.Join(t.TempDir(), "head.gguf"), g[:40]), errs.ErrFormat, "the 24 bytes left hold at most 1")
	add(write(filepath.Join(t.TempDir(), "trunc.safetensors"), st[:len(st)-1]), errs.ErrFormat, "a truncated file?")
	add(write(filepath.Join(t.TempDir(), "notes.txt"), []byte("a model, surely")), errs.ErrFormat, "neither a GGUF file nor a safetensors file")
	add(write(filepath.Join(t.TempDir(), "config.json"), []byte(`{"model_type": "llama"}`)), errs.ErrFormat, "neither a GGUF file nor a safetensors file")
	add(write(filepath.Join(t.TempDir(), "empty.gguf"), nil), errs.ErrFormat, "an empty file")

	for _, c := range cases {
		_, err := models.Open(c.path)
		require.Error(t, err, c.path)
		assert.ErrorIs(t, err, c.kind, c.path)
		assert.ErrorContains(t, err, c.want, c.path)
		assert.ErrorContains(t, err, c.path, "the error names the path")
		var e *errs.Error
		assert.ErrorAs(t, err, &e)
	}
	// Detect says the same of what it can tell without reading weights.
	_, err = models.Detect(filepath.Join(t.TempDir(), "none"))
	assert.ErrorIs(t, err, errs.ErrNotFound)
	f, err := models.Detect(diffusers)
	require.NoError(t, err)
	assert.Equal(t, models.Diffusers, f)
	_, err = models.Detect(write(filepath.Join(t.TempDir(), "x.txt"), []byte("hi")))
	assert.ErrorIs(t, err, errs.ErrFormat)
}

// TestTokenizerOptional: a folder without tokenizer.json and a GGUF file
// without a vocabulary have no tokenizer; a broken tokenizer.json is an
// error from Tokenizer, not from Open.
func TestTokenizerOptional(t *testing.T) {
	dir := tinyFolder(t)
	require.NoError(t, os.Remove(filepath.Join(dir, "tokenizer.json")))
	c, err := models.Open(dir)
	require.NoError(t, err)
	tok, err := c.Tokenizer()
	assert.NoError(t, err)
	assert.Nil(t, tok)
	require.NoError(t, c.Close())

	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(`{"model": `), 0o644))
	c, err = models.Open(dir)
	require.NoError(t, err, "the tokenizer is read when asked for")
	tok, err = c.Tokenizer()
	assert.Error(t, err)
	assert.Nil(t, tok)
	require.NoError(t, c.Close())

	path := filepath.Join(t.TempDir(), "bare.gguf")
	out, err := os.Create(path)
	require.NoError(t, err)
	w, err := gguf.NewWriter(out, []gguf.KV{{Key: "general.architecture", Value: "llama"}}, nil)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, out.Close())
	c, err = models.Open(path)
	require.NoError(t, err)
	defer c.Close()
	tok, err = c.Tokenizer()
	assert.NoError(t, err)
	assert.Nil(t, tok)
	assert.Empty(t, c.Weights.Names())
}

func TestFormatString(t *testing.T) {
	for f, want := range map[models.Format]string{models.HuggingFace: "a Hugging Face model folder", models.GGUF: "a GGUF file",
		models.Safetensors: "a single safetensors file", models.Diffusers: "a diffusers pipeline folder", models.Format(9): "Format(9)"} {
		assert.Equal(t, want, f.String())
	}
}

// TestBlockResultJoinsThePass checks that a block's result is the pass's
// like any op's: freed by Close unless kept, with what the block made
// inside freed when it ends.
func TestBlockResultJoinsThePass(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	cpu := candle.CPU()
	x, err := candle.Zeros(cpu, candle.F32, 256)
	require.NoError(t, err)
	defer x.Close()
	before := cpu.MemoryStats().InUse
	p := models.NewPass()
	y := p.Block(p.In(x), func(x *candle.Tensor) *candle.Tensor {
		inner := p.T(x.Affine(2, 0))
		return p.T(inner.Affine(1, 1))
	})
	require.NoError(t, p.Err)
	assert.Equal(t, before+1024, cpu.MemoryStats().InUse, "only the block's result is left")
	z := p.Block(y, func(y *candle.Tensor) *candle.Tensor { return p.T(y.Affine(3, 0)) })
	assert.Equal(t, before+1024, cpu.MemoryStats().InUse, "a block frees the result it took")
	p.Close()
	assert.Equal(t, before, cpu.MemoryStats().InUse, "the pass frees the block's result")
	assert.NoError(t, z.Close(), "closing it again does nothing")

	p = models.NewPass()
	kept := p.Keep(p.Block(p.In(x), func(x *candle.Tensor) *candle.Tensor { return p.T(x.Affine(2, 0)) }))
	p.Close()
	assert.Equal(t, before+1024, cpu.MemoryStats().InUse, "a kept result outlives the pass")
	require.NoError(t, kept.Close())
}
