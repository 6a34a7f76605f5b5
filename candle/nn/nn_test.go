package nn

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
)

// entry is a tensor for writeFile: its safetensors dtype, shape and bytes.
type entry struct {
	dtype string
	shape []int
	data  []byte
}

func f32s(v ...float32) []byte { return hip.AsBytes(v) }

// safetensorsBytes encodes tensors (in the order given) as a safetensors
// file.
func safetensorsBytes(t *testing.T, names []string, es map[string]entry, meta map[string]string) []byte {
	t.Helper()
	header := map[string]any{}
	if meta != nil {
		header["__metadata__"] = meta
	}
	var data []byte
	for _, n := range names {
		e := es[n]
		header[n] = map[string]any{"dtype": e.dtype, "shape": e.shape, "data_offsets": []int{len(data), len(data) + len(e.data)}}
		data = append(data, e.data...)
	}
	h, err := json.Marshal(header)
	require.NoError(t, err)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	return append(append(out, h...), data...)
}

func writeFile(t *testing.T, path string, b []byte) string {
	t.Helper()
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

func values(t *testing.T, x *candle.Tensor) []float32 {
	t.Helper()
	f, err := x.ToDType(candle.F32)
	require.NoError(t, err)
	defer f.Close()
	v, err := candle.ToSlice[float32](f)
	require.NoError(t, err)
	return v
}

func TestSafetensorsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	h := []hip.Half{hip.HalfFromFloat32(1.5), hip.HalfFromFloat32(-2)}
	b := []hip.BFloat16{hip.BFloat16FromFloat32(3)}
	es := map[string]entry{
		"a": {"F32", []int{2, 3}, f32s(1, 2, 3, 4, 5, 6)},
		"h": {"F16", []int{2}, hip.AsBytes(h)},
		"b": {"BF16", []int{1, 1}, hip.AsBytes(b)},
		"i": {"I64", []int{2}, hip.AsBytes([]int64{7, -9})},
		"s": {"F32", []int{}, f32s(42)},
		"q": {"I32", []int{1}, hip.AsBytes([]int32{1})},
	}
	path := writeFile(t, filepath.Join(dir, "m.safetensors"), safetensorsBytes(t, []string{"a", "h", "b", "i", "s", "q"}, es, map[string]string{"format": "pt"}))
	f, err := OpenSafetensors(path)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, []string{"a", "b", "h", "i", "q", "s"}, f.Names())
	assert.Equal(t, map[string]string{"format": "pt"}, f.Metadata())
	info, ok := f.Info("a")
	assert.True(t, ok)
	assert.Equal(t, TensorInfo{DType: "F32", Shape: []int{2, 3}, Begin: 0, End: 24}, info)

	cpu := candle.CPU()
	load := func(name string) *candle.Tensor {
		x, err := f.Load(name, cpu)
		require.NoError(t, err, name)
		t.Cleanup(func() { x.Close() })
		return x
	}
	a := load("a")
	assert.Equal(t, candle.Shape{2, 3}, a.Shape())
	assert.Equal(t, []float32{1, 2, 3, 4, 5, 6}, values(t, a))
	assert.Equal(t, []float32{1.5, -2}, values(t, load("h")))
	assert.Equal(t, candle.BF16, load("b").DType())
	assert.Equal(t, []float32{3}, values(t, load("b")))
	i, err := candle.ToSlice[int64](load("i"))
	require.NoError(t, err)
	assert.Equal(t, []int64{7, -9}, i)
	assert.Equal(t, candle.Shape{}, load("s").Shape())
	_, err = f.Load("q", cpu)
	assert.ErrorIs(t, err, candle.ErrDType)
	assert.ErrorContains(t, err, `tensor "q" is I32, a dtype candle does not hold`)
	_, err = f.Load("nope", cpu)
	assert.ErrorIs(t, err, ErrMissing)

	// Loaded tensors outlive the mapping.
	require.NoError(t, f.Close())
	assert.Equal(t, []float32{1, 2, 3, 4, 5, 6}, values(t, a))
	_, err = f.Load("a", cpu)
	assert.ErrorContains(t, err, "the file is closed")
}

func TestSaveSafetensors(t *testing.T) {
	dir := t.TempDir()
	cpu := candle.CPU()
	mk := must(t)
	a := mk(candle.FromSlice(cpu, []float32{1, 2, 3, 4, 5, 6}, 2, 3))
	at := mk(a.Transpose(0, 1)) // saved in row-major order of its view
	h := mk(candle.FromSlice(cpu, []hip.Half{hip.HalfFromFloat32(1.5)}, 1))
	b := mk(candle.FromSlice(cpu, []hip.BFloat16{hip.BFloat16FromFloat32(-3)}, 1, 1))
	i := mk(candle.FromSlice(cpu, []int64{7, -9, 11}, 3))
	e := mk(candle.FromSlice(cpu, []float32{}, 0, 4))
	path := filepath.Join(dir, "m.safetensors")
	require.NoError(t, SaveSafetensors(path, map[string]*candle.Tensor{"z.a": a, "at": at, "h": h, "b": b, "i": i, "e": e},
		map[string]string{"format": "pt"}))

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Zero(t, (8+binary.LittleEndian.Uint64(raw))%8, "the data starts 8-byte aligned")
	f, err := OpenSafetensors(path)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, []string{"at", "b", "e", "h", "i", "z.a"}, f.Names())
	assert.Equal(t, map[string]string{"format": "pt"}, f.Metadata())
	info, _ := f.Info("at")
	assert.Equal(t, TensorInfo{DType: "F32", Shape: []int{3, 2}, Begin: 0, End: 24}, info)
	load := func(name string) *candle.Tensor { return mk(f.Load(name, cpu)) }
	assert.Equal(t, []float32{1, 4, 2, 5, 3, 6}, values(t, load("at")))
	assert.Equal(t, []float32{1, 2, 3, 4, 5, 6}, values(t, load("z.a")))
	assert.Equal(t, candle.F16, load("h").DType())
	assert.Equal(t, []float32{1.5}, values(t, load("h")))
	assert.Equal(t, []float32{-3}, values(t, load("b")))
	got, err := candle.ToSlice[int64](load("i"))
	require.NoError(t, err)
	assert.Equal(t, []int64{7, -9, 11}, got)
	assert.Equal(t, candle.Shape{0, 4}, load("e").Shape())

	// Bad input: an error, and nothing left behind.
	assert.ErrorContains(t, SaveSafetensors(filepath.Join(dir, "n.safetensors"), map[string]*candle.Tensor{"x": nil}, nil), `tensor "x" is nil`)
	assert.ErrorContains(t, SaveSafetensors(filepath.Join(dir, "n.safetensors"), map[string]*candle.Tensor{"__metadata__": a}, nil), "not a tensor name")
	closed := mk(candle.FromSlice(cpu, []float32{1}, 1))
	closed.Close()
	err = SaveSafetensors(filepath.Join(dir, "n.safetensors"), map[string]*candle.Tensor{"c": closed}, nil)
	assert.ErrorIs(t, err, candle.ErrClosed)
	assert.Error(t, SaveSafetensors(filepath.Join(dir, "no", "such", "dir.safetensors"), map[string]*candle.Tensor{"a": a}, nil))
	left, err := filepath.Glob(filepath.Join(dir, "n.safetensors*"))
	require.NoError(t, err)
	assert.Empty(t, left)
}

func TestSafetensorsBadFiles(t *testing.T) {
	dir := t.TempDir()
	good := safetensorsBytes(t, []string{"a"}, map[string]entry{"a": {"F32", []int{2}, f32s(1, 2)}}, nil)
	header := func(h string, data int) []byte {
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
		return append(append(b, h...), make([]byte, data)...)
	}
	huge := binary.LittleEndian.AppendUint64(nil, math.MaxUint64)
	cases := map[string]struct {
		b    []byte
		want string
	}{
		"empty":           {nil, "too short for a safetensors header"},
		"seven bytes":     {good[:7], "too short"},
		"huge header":     {huge, "a header of 18446744073709551615 bytes"},
		"header past end": {good[:20], "a header of"},
		"not json":        {header("{nope", 0), "the header is not a JSON object"},
		"json array":      {header("[1,2]", 0), "the header is not a JSON object"},
		"bad metadata":    {header(`{"__metadata__": {"a": 1}}`, 0), "__metadata__ is not an object of strings"},
		"bad entry":       {header(`{"a": 7}`, 0), `tensor "a"`},
		"unknown dtype":   {header(`{"a": {"dtype": "F128", "shape": [1], "data_offsets": [0, 16]}}`, 16), `unknown dtype "F128"`},
		"one offset":      {header(`{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}}`, 4), "want [begin, end]"},
		"out of range":    {header(`{"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}`, 8), "outside the 8 bytes of data (a truncated file?)"},
		"negative":        {header(`{"a": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}}`, 4), "outside"},
		"reversed":        {header(`{"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}`, 4), "outside"},
		"size mismatch":   {header(`{"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}`, 8), "8 bytes for shape [3] of F32 (12 bytes)"},
		"negative dim":    {header(`{"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}`, 0), "shape [-1]"},
		"overflow":        {header(`{"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 4], "data_offsets": [0, 0]}}`, 0), "shape"},
		"truncated body":  {good[:len(good)-1], "a truncated file?"},
	}
	for name, c := range cases {
		path := writeFile(t, filepath.Join(dir, "bad.safetensors"), c.b)
		_, err := OpenSafetensors(path)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, ErrFormat, name)
		assert.ErrorContains(t, err, c.want, name)
	}
	_, err := OpenSafetensors(filepath.Join(dir, "missing.safetensors"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// FuzzParseSafetensors: no input crashes the parser or makes it allocate
// what the header claims.
func FuzzParseSafetensors(f *testing.F) {
	f.Add([]byte{})
	f.Add(binary.LittleEndian.AppendUint64(nil, 2))
	h := `{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}`
	f.Add(append(append(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), h...), make([]byte, 8)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseSafetensors(b)
		if err != nil {
			return
		}
		for _, info := range s.tensors {
			if info.Begin < 0 || info.End > len(s.data) || info.Begin > info.End {
				t.Fatalf("accepted range [%d, %d) of %d bytes", info.Begin, info.End, len(s.data))
			}
		}
	})
}

func TestVarBuilder(t *testing.T) {
	dir := t.TempDir()
	cpu := candle.CPU()
	// A sharded model: two files and an index.
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
	writeFile(t, filepath.Join(dir, "model.safetensors.index.json"), []byte(index))

	for _, path := range []string{dir, filepath.Join(dir, "model.safetensors.index.json")} {
		vb, err := OpenVarBuilder(path, cpu, candle.F32)
		require.NoError(t, err, path)
		assert.True(t, vb.Contains("lm.bias"))
		assert.True(t, vb.Prefix("model").Contains("norm.weight"))
		_, err = vb.Get("lm.weight", 2, 3)
		assert.ErrorIs(t, err, candle.ErrShape)
		assert.ErrorContains(t, err, `tensor "lm.weight" is [3 2] in `)
		assert.ErrorContains(t, err, "the model wants [2 3]")
		_, err = vb.Prefix("model").Prefix("layers.0").Get("q.weight", 2)
		assert.ErrorIs(t, err, ErrMissing)
		assert.ErrorContains(t, err, `no tensor "model.layers.0.q.weight"`)

		emb, err := NewEmbedding(vb.Prefix("model"), "embed", 3, 2)
		require.NoError(t, err)
		ids, err := candle.FromSlice(cpu, []int64{2, 0, 1, 2}, 2, 2)
		require.NoError(t, err)
		e, err := emb.Forward(ids)
		require.NoError(t, err)
		assert.Equal(t, candle.Shape{2, 2, 2}, e.Shape())
		assert.Equal(t, []float32{20, 21, 0, 1, 10, 11, 20, 21}, values(t, e))

		lin, err := NewLinear(vb, "lm", 2, 3, true)
		require.NoError(t, err)
		y, err := lin.Forward(e)
		require.NoError(t, err)
		assert.Equal(t, candle.Shape{2, 2, 3}, y.Shape())
		// rows (20, 21) → (20.5, 21, 40)
		assert.Equal(t, []float32{20.5, 21, 40}, values(t, y)[:3])

		norm, err := NewRMSNorm(vb.Prefix("model"), "norm", 2, 0)
		require.NoError(t, err)
		x, err := candle.FromSlice(cpu, []float32{3, 4}, 1, 2)
		require.NoError(t, err)
		n, err := norm.Forward(x)
		require.NoError(t, err)
		rms := float32(math.Sqrt(12.5))
		assert.InDeltaSlice(t, []float32{3 / rms, 8 / rms}, values(t, n), 1e-6)
		ln, err := NewLayerNorm(vb.Prefix("model"), "norm", 2, 0, false)
		require.NoError(t, err)
		l, err := ln.Forward(x)
		require.NoError(t, err)
		assert.InDeltaSlice(t, []float32{-1, 2}, values(t, l), 1e-6)
		gn, err := NewGroupNorm(vb.Prefix("model"), "norm", 1, 2, 0, false)
		require.NoError(t, err)
		xg, err := candle.FromSlice(cpu, []float32{1, 3, 5, 7}, 1, 2, 2) // (N, C, L)
		require.NoError(t, err)
		g, err := gn.Forward(xg)
		require.NoError(t, err)
		// One group: mean 4, variance 5; channel 1 scaled by 2.
		r5 := float32(math.Sqrt(5))
		assert.InDeltaSlice(t, []float32{-3 / r5, -1 / r5, 2 / r5, 6 / r5}, values(t, g), 1e-6)
		_, err = NewGroupNorm(vb.Prefix("model"), "norm", 3, 2, 0, false)
		assert.ErrorIs(t, err, candle.ErrArgument)
		assert.ErrorContains(t, err, "the groups must divide the channels")
		for _, c := range []interface{ Close() }{emb, lin, norm, ln, gn} {
			c.Close()
		}
		for _, c := range []*candle.Tensor{ids, e, y, x, n, l, xg, g} {
			c.Close()
		}
		require.NoError(t, vb.Close())
	}

	// Converted to the builder's dtype.
	vb, err := OpenVarBuilder(dir, cpu, candle.F16)
	require.NoError(t, err)
	w, err := vb.Get("lm.bias", 3)
	require.NoError(t, err)
	assert.Equal(t, candle.F16, w.DType())
	assert.Equal(t, []float32{0.5, 0, -1}, values(t, w))
	w.Close()
	require.NoError(t, vb.Close())

	_, err = OpenVarBuilder(dir, cpu, candle.I64)
	assert.ErrorIs(t, err, candle.ErrDType)
	_, err = OpenVarBuilder(dir, nil, candle.F32)
	assert.ErrorIs(t, err, candle.ErrDevice)
	_, err = OpenVarBuilder(t.TempDir(), cpu, candle.F32)
	assert.ErrorIs(t, err, ErrMissing)
	bad := t.TempDir()
	writeFile(t, filepath.Join(bad, "model.safetensors.index.json"), []byte(`{"weight_map": {"a": "../x.safetensors"}}`))
	_, err = OpenVarBuilder(bad, cpu, candle.F32)
	assert.ErrorIs(t, err, ErrFormat)
	assert.ErrorContains(t, err, "not a file beside the index")
	writeFile(t, filepath.Join(bad, "model.safetensors.index.json"), []byte(`{"weight_map": {}}`))
	_, err = OpenVarBuilder(bad, cpu, candle.F32)
	assert.ErrorContains(t, err, "no weight_map")
	// One tensor in two shards.
	dup := t.TempDir()
	one := safetensorsBytes(t, []string{"a"}, map[string]entry{"a": {"F32", []int{1}, f32s(1)}}, nil)
	writeFile(t, filepath.Join(dup, "x.safetensors"), one)
	writeFile(t, filepath.Join(dup, "y.safetensors"), one)
	_, err = OpenVarBuilder(dup, cpu, candle.F32)
	assert.ErrorContains(t, err, `tensor "a" is in both`)
}

func TestKVCache(t *testing.T) {
	cpu := candle.CPU()
	c, err := NewKVCache(cpu, candle.F32, []int{1, 2, 0, 3}, 2, 4)
	require.NoError(t, err)
	defer c.Close()
	step := func(v float32, n int) (*candle.Tensor, *candle.Tensor) {
		data := make([]float32, 2*n*3)
		for i := range data {
			data[i] = v
		}
		k, err := candle.FromSlice(cpu, data, 1, 2, n, 3)
		require.NoError(t, err)
		for i := range data {
			data[i] = -v // the values differ from the keys
		}
		vals, err := candle.FromSlice(cpu, data, 1, 2, n, 3)
		require.NoError(t, err)
		t.Cleanup(func() { k.Close(); vals.Close() })
		return k, vals
	}
	allocs := cpu.MemoryStats().Allocs
	k, v := step(1, 3)
	keys, values, err := c.Append(k, v)
	require.NoError(t, err)
	assert.Equal(t, candle.Shape{1, 2, 3, 3}, keys.Shape())
	keys.Close()
	values.Close()
	k, v = step(2, 1)
	keys, values, err = c.Append(k, v)
	require.NoError(t, err)
	assert.Equal(t, 4, c.Len())
	got, err := candle.ToSlice[float32](keys)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2}, got[:12], "head 0: three positions of 1, then one of 2")
	got, err = candle.ToSlice[float32](values)
	require.NoError(t, err)
	assert.Equal(t, []float32{-1, -1, -1, -1, -1, -1, -1, -1, -1, -2, -2, -2}, got[:12], "the values beside the keys")
	keys.Close()
	values.Close()
	assert.Equal(t, allocs+4, cpu.MemoryStats().Allocs, "the steps' inputs only: the cache allocates nothing per step")
	_, _, err = c.Append(step(3, 1))
	assert.ErrorIs(t, err, candle.ErrArgument)
	assert.ErrorContains(t, err, "pass the capacity of 4")
	c.Reset()
	assert.Equal(t, 0, c.Len())
	_, err = NewKVCache(cpu, candle.F32, []int{2}, 1, 4)
	assert.ErrorIs(t, err, candle.ErrArgument)
}

// TestGPULoadAndForward loads a model's weights onto the GPU as bf16 and
// runs the layers there, against the CPU.
func TestGPULoadAndForward(t *testing.T) {
	dev := hipDevice(t)
	dir := t.TempDir()
	w := make([]float32, 64*48)
	for i := range w {
		w[i] = float32(i%13)/13 - 0.5
	}
	writeFile(t, filepath.Join(dir, "model.safetensors"), safetensorsBytes(t, []string{"lin.weight", "lin.bias", "norm.weight"}, map[string]entry{
		"lin.weight":  {"F32", []int{48, 64}, hip.AsBytes(w)},
		"lin.bias":    {"F32", []int{48}, hip.AsBytes(w[:48])},
		"norm.weight": {"F32", []int{48}, hip.AsBytes(w[48:96])},
	}, nil))
	var outs [2][]float32
	for i, d := range []candle.Device{candle.CPU(), dev} {
		vb, err := OpenVarBuilder(dir, d, candle.BF16)
		require.NoError(t, err)
		lin, err := NewLinear(vb, "lin", 64, 48, true)
		require.NoError(t, err)
		norm, err := NewRMSNorm(vb, "norm", 48, 1e-6)
		require.NoError(t, err)
		x, err := candle.FromSlice(d, w[:5*64], 5, 64)
		require.NoError(t, err)
		xb, err := x.ToDType(candle.BF16)
		require.NoError(t, err)
		y, err := lin.Forward(xb)
		require.NoError(t, err)
		z, err := norm.Forward(y)
		require.NoError(t, err)
		outs[i] = values(t, z)
		for _, c := range []*candle.Tensor{x, xb, y, z} {
			c.Close()
		}
		lin.Close()
		norm.Close()
		require.NoError(t, vb.Close())
	}
	assert.InDeltaSlice(t, outs[0], outs[1], 0.05, "bf16 on the GPU against the CPU")
}

// hipDevice is HIP device 0, or the test is skipped below tier 2.
func hipDevice(t *testing.T) *candle.HIPDevice {
	t.Helper()
	n, err := hip.DeviceCount()
	if err == nil && n == 0 {
		err = candle.ErrDevice
	}
	var dev *candle.HIPDevice
	if err == nil {
		dev, err = candle.HIP(0)
	}
	testenv.Need(t, 2, "a GPU", err)
	return dev
}
