package safetensors

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
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/hip"
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

// must checks the error of an op and closes its tensor at the test's end.
func must(t *testing.T) func(*candle.Tensor, error) *candle.Tensor {
	return func(x *candle.Tensor, err error) *candle.Tensor {
		t.Helper()
		require.NoError(t, err)
		t.Cleanup(func() { x.Close() })
		return x
	}
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
	raw := safetensorsBytes(t, []string{"a", "h", "b", "i", "s", "q"}, es, map[string]string{"format": "pt"})
	path := writeFile(t, filepath.Join(dir, "m.safetensors"), raw)
	base := 8 + int(binary.LittleEndian.Uint64(raw))
	f, err := OpenFile(path)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, []string{"a", "b", "h", "i", "q", "s"}, f.Names())
	assert.Equal(t, map[string]string{"format": "pt"}, f.Metadata())
	info, ok := f.Info("a")
	assert.True(t, ok)
	assert.Equal(t, candle.WeightInfo{Type: "F32", Shape: candle.Shape{2, 3}, Dense: true, DType: candle.F32}, info)
	span, ok := f.Span("a")
	assert.True(t, ok)
	assert.Equal(t, candle.Span{Start: base, End: base + 24}, span)
	info, _ = f.Info("q")
	assert.Equal(t, candle.WeightInfo{Type: "I32", Shape: candle.Shape{1}}, info, "a dtype candle does not hold")
	_, ok = f.Info("nope")
	assert.False(t, ok)
	assert.Equal(t, path, f.Path())

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
	assert.ErrorIs(t, err, errs.ErrDType)
	assert.ErrorContains(t, err, `tensor "q" is I32, a dtype candle does not hold`)
	_, err = f.Load("nope", cpu)
	assert.ErrorIs(t, err, errs.ErrNotFound)
	_, err = f.LoadQ("a", cpu)
	assert.ErrorIs(t, err, errs.ErrDType)
	assert.ErrorContains(t, err, "not quantized")
	_, err = f.LoadQ("nope", cpu)
	assert.ErrorIs(t, err, errs.ErrNotFound)

	// Loaded tensors outlive the mapping.
	require.NoError(t, f.Close())
	assert.Equal(t, []float32{1, 2, 3, 4, 5, 6}, values(t, a))
	_, err = f.Load("a", cpu)
	assert.ErrorContains(t, err, "the file is closed")
}

func TestSave(t *testing.T) {
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
	require.NoError(t, Save(path, map[string]*candle.Tensor{"z.a": a, "at": at, "h": h, "b": b, "i": i, "e": e},
		map[string]string{"format": "pt"}))

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Zero(t, (8+binary.LittleEndian.Uint64(raw))%8, "the data starts 8-byte aligned")
	f, err := OpenFile(path)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, []string{"at", "b", "e", "h", "i", "z.a"}, f.Names())
	assert.Equal(t, map[string]string{"format": "pt"}, f.Metadata())
	info, _ := f.Info("at")
	assert.Equal(t, candle.WeightInfo{Type: "F32", Shape: candle.Shape{3, 2}, Dense: true, DType: candle.F32}, info)
	span, _ := f.Span("at")
	assert.Equal(t, candle.Span{Start: 8 + int(binary.LittleEndian.Uint64(raw)), End: 8 + int(binary.LittleEndian.Uint64(raw)) + 24}, span)
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
	assert.ErrorContains(t, Save(filepath.Join(dir, "n.safetensors"), map[string]*candle.Tensor{"x": nil}, nil), `tensor "x" is nil`)
	assert.ErrorContains(t, Save(filepath.Join(dir, "n.safetensors"), map[string]*candle.Tensor{"__metadata__": a}, nil), "not a tensor name")
	closed := mk(candle.FromSlice(cpu, []float32{1}, 1))
	closed.Close()
	err = Save(filepath.Join(dir, "n.safetensors"), map[string]*candle.Tensor{"c": closed}, nil)
	assert.ErrorIs(t, err, candle.ErrClosed)
	assert.Error(t, Save(filepath.Join(dir, "no", "such", "dir.safetensors"), map[string]*candle.Tensor{"a": a}, nil))
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
		"empty":           {nil, "an empty file"},
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
		_, err := OpenFile(path)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, errs.ErrFormat, name)
		assert.ErrorContains(t, err, c.want, name)
	}
	_, err := OpenFile(filepath.Join(dir, "missing.safetensors"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.ErrorIs(t, err, errs.ErrNotFound)
}

// FuzzParseSafetensors: no input crashes the parser or makes it allocate
// what the header claims.
func FuzzParseSafetensors(f *testing.F) {
	f.Add([]byte{})
	f.Add(binary.LittleEndian.AppendUint64(nil, 2))
	h := `{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}`
	f.Add(append(append(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), h...), make([]byte, 8)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parse(b)
		if err != nil {
			return
		}
		for name, x := range s.tensors {
			if x.span.Start < 8 || x.span.End > len(b) || x.span.Start > x.span.End {
				t.Fatalf("accepted range [%d, %d) of %d bytes", x.span.Start, x.span.End, len(b))
			}
			if x.info.Dense && x.info.Bytes() != x.span.End-x.span.Start {
				t.Fatalf("tensor %q: %d bytes for %v of %s", name, x.span.End-x.span.Start, x.info.Shape, x.info.Type)
			}
		}
	})
}

// TestLoadSlice: part of a tensor along each dim, read from the file,
// equals the same part of the whole; parts out of range are errors.
func TestLoadSlice(t *testing.T) {
	cpu := candle.CPU()
	vals := make([]float32, 2*3*4)
	for i := range vals {
		vals[i] = float32(i) - 7.5
	}
	x, err := candle.FromSlice(cpu, vals, 2, 3, 4)
	require.NoError(t, err)
	defer x.Close()
	path := filepath.Join(t.TempDir(), "m.safetensors")
	require.NoError(t, Save(path, map[string]*candle.Tensor{"x": x}, nil))
	w, err := Open(path)
	require.NoError(t, err)
	defer w.Close()
	for _, c := range []struct{ d, start, n int }{{0, 1, 1}, {0, 0, 2}, {1, 1, 2}, {2, 0, 3}, {2, 3, 1}} {
		got, err := w.LoadSlice("x", cpu, c.d, c.start, c.n)
		require.NoError(t, err, c)
		v, err := x.Narrow(c.d, c.start, c.n)
		require.NoError(t, err)
		want, err := v.Contiguous()
		require.NoError(t, err)
		assert.Equal(t, want.Shape(), got.Shape(), c)
		gv, _ := candle.ToSlice[float32](got)
		wv, _ := candle.ToSlice[float32](want)
		assert.Equal(t, wv, gv, c)
		got.Close()
		want.Close()
		v.Close()
	}
	for _, c := range []struct {
		d, start, n int
		kind        error
		msg         string
	}{
		{3, 0, 1, errs.ErrShape, "dim 3 of a tensor of 3 dims"},
		{1, 2, 2, errs.ErrIndex, "elements [2, 4) of dim 1, which has 3"},
		{0, 0, 0, errs.ErrIndex, "elements [0, 0) of dim 0"},
	} {
		_, err := w.LoadSlice("x", cpu, c.d, c.start, c.n)
		assert.ErrorIs(t, err, c.kind, c.msg)
		assert.ErrorContains(t, err, c.msg)
	}
	_, err = w.LoadSlice("y", cpu, 0, 0, 1)
	assert.ErrorIs(t, err, errs.ErrNotFound)
	_, err = w.LoadQSlice("x", cpu, 0, 0, 1)
	assert.ErrorIs(t, err, errs.ErrDType)
}
