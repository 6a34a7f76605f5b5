package safetensors

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/errs"
)

// shardedModel writes a model of two shards and their index into a new
// folder.
func shardedModel(t *testing.T) string {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), safetensorsBytes(t, []string{"model.embed.weight", "model.norm.weight"}, map[string]entry{
		"model.embed.weight": {"F32", []int{3, 2}, f32s(0, 1, 10, 11, 20, 21)},
		"model.norm.weight":  {"F32", []int{2}, f32s(1, 2)},
	}, nil))
	writeFile(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), safetensorsBytes(t, []string{"lm.weight", "lm.bias"}, map[string]entry{
		"lm.weight": {"F32", []int{3, 2}, f32s(1, 0, 0, 1, 1, 1)},
		"lm.bias":   {"F32", []int{3}, f32s(0.5, 0, -1)},
	}, nil))
	index := `{"metadata": {}, "weight_map": {"model.embed.weight": "model-00001-of-00002.safetensors", "model.norm.weight": "model-00001-of-00002.safetensors",
		"lm.weight": "model-00002-of-00002.safetensors", "lm.bias": "model-00002-of-00002.safetensors"}}`
	writeFile(t, filepath.Join(dir, Index), []byte(index))
	return dir
}

func TestOpenSharded(t *testing.T) {
	dir := shardedModel(t)
	cpu := candle.CPU()
	for _, path := range []string{dir, filepath.Join(dir, Index)} {
		w, err := Open(path)
		require.NoError(t, err, path)
		assert.Equal(t, []string{"lm.bias", "lm.weight", "model.embed.weight", "model.norm.weight"}, w.Names())
		require.Len(t, w.Files(), 2)
		assert.Equal(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), w.Files()[0].Path())
		info, ok := w.Info("lm.weight")
		require.True(t, ok)
		assert.Equal(t, candle.Shape{3, 2}, info.Shape)
		_, ok = w.Info("nope")
		assert.False(t, ok)
		x, err := w.Load("model.embed.weight", cpu)
		require.NoError(t, err)
		assert.Equal(t, []float32{0, 1, 10, 11, 20, 21}, values(t, x))
		x.Close()
		x, err = w.Load("lm.bias", cpu)
		require.NoError(t, err)
		assert.Equal(t, []float32{0.5, 0, -1}, values(t, x))
		x.Close()
		_, err = w.Load("nope", cpu)
		assert.ErrorIs(t, err, errs.ErrNotFound)
		assert.ErrorContains(t, err, `no tensor "nope"`)
		_, err = w.LoadQ("lm.bias", cpu)
		assert.ErrorIs(t, err, errs.ErrDType)
		_, err = w.LoadQ("nope", cpu)
		assert.ErrorIs(t, err, errs.ErrNotFound)
		assert.Equal(t, candle.TransferStats{}, w.TransferStats(), "nothing went to a HIP device")
		require.NoError(t, w.Close())
		require.NoError(t, w.Close(), "closing twice does nothing")
		_, err = w.Load("lm.bias", cpu)
		assert.ErrorIs(t, err, errs.ErrClosed)
	}

	// A folder of files without an index: every *.safetensors.
	one := t.TempDir()
	writeFile(t, filepath.Join(one, "b.safetensors"), safetensorsBytes(t, []string{"b"}, map[string]entry{"b": {"F32", []int{1}, f32s(2)}}, nil))
	writeFile(t, filepath.Join(one, "a.safetensors"), safetensorsBytes(t, []string{"a"}, map[string]entry{"a": {"F32", []int{1}, f32s(1)}}, nil))
	w, err := Open(one)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, w.Names())
	require.NoError(t, w.Close())
	// One file by its path.
	w, err = Open(filepath.Join(one, "b.safetensors"))
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, w.Names())
	require.NoError(t, w.Close())
}

// TestOpenBadModels: each way a model's weights can be wrong is a clear
// error of its kind, and leaves nothing open.
func TestOpenBadModels(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "nothing"))
	assert.ErrorIs(t, err, errs.ErrNotFound)
	assert.ErrorContains(t, err, "no such file or folder")

	_, err = Open(t.TempDir())
	assert.ErrorIs(t, err, errs.ErrNotFound)
	assert.ErrorContains(t, err, "holds no model.safetensors.index.json, model.safetensors or *.safetensors")

	bad := t.TempDir()
	for _, c := range []struct{ index, want string }{
		{`{"weight_map": {"a": "../x.safetensors"}}`, `shard "../x.safetensors" is not a file beside the index`},
		{`{"weight_map": {"a": ".."}}`, "not a file beside the index"},
		{`{"weight_map": {}}`, "no weight_map"},
		{`{"weight_map": [1]}`, "not a sharded model's index"},
		{`nope`, "not a sharded model's index"},
	} {
		writeFile(t, filepath.Join(bad, Index), []byte(c.index))
		_, err = Open(bad)
		assert.ErrorIs(t, err, errs.ErrFormat, c.index)
		assert.ErrorContains(t, err, c.want, c.index)
	}

	// An index that names a shard that is not there.
	dir := shardedModel(t)
	writeFile(t, filepath.Join(dir, Index), []byte(`{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00003-of-00003.safetensors"}}`))
	_, err = Open(dir)
	assert.ErrorIs(t, err, errs.ErrNotFound)
	assert.ErrorContains(t, err, "the shard model-00003-of-00003.safetensors is not there")

	// A truncated shard.
	dir = shardedModel(t)
	good := safetensorsBytes(t, []string{"lm.bias"}, map[string]entry{"lm.bias": {"F32", []int{3}, f32s(0.5, 0, -1)}}, nil)
	writeFile(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), good[:len(good)-2])
	_, err = Open(dir)
	assert.ErrorIs(t, err, errs.ErrFormat)
	assert.ErrorContains(t, err, "model-00002-of-00002.safetensors")
	assert.ErrorContains(t, err, "a truncated file?")

	// One tensor in two shards.
	dup := t.TempDir()
	one := safetensorsBytes(t, []string{"a"}, map[string]entry{"a": {"F32", []int{1}, f32s(1)}}, nil)
	writeFile(t, filepath.Join(dup, "x.safetensors"), one)
	writeFile(t, filepath.Join(dup, "y.safetensors"), one)
	_, err = Open(dup)
	assert.ErrorIs(t, err, errs.ErrFormat)
	assert.ErrorContains(t, err, `tensor "a" is in both`)
}
