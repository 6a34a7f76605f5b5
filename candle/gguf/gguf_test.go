package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/errs"
)

// sample writes a small file with every value kind and three tensors.
func sample(t testing.TB) ([]byte, map[string][]byte) {
	meta := []KV{
		{"general.architecture", "llama"},
		{"u8", uint8(200)}, {"i8", int8(-100)}, {"u16", uint16(60000)}, {"i16", int16(-30000)},
		{"u32", uint32(4000000000)}, {"i32", int32(-2000000000)}, {"f32", float32(1.5)}, {"bool", true},
		{"u64", uint64(1) << 60}, {"i64", int64(-1) << 60}, {"f64", math.Pi}, {"str", "héllo"},
		{"arr.u8", []uint8{1, 2}}, {"arr.i8", []int8{-1}}, {"arr.u16", []uint16{7}}, {"arr.i16", []int16{-7}},
		{"arr.u32", []uint32{1, 2, 3}}, {"arr.i32", []int32{-3}}, {"arr.f32", []float32{0.25, -2}}, {"arr.bool", []bool{true, false}},
		{"arr.str", []string{"a", "", "ccc"}}, {"arr.u64", []uint64{9}}, {"arr.i64", []int64{-9}}, {"arr.f64", []float64{2.5}},
		{"arr.arr", []Value{mustValue(t, []uint32{1}), mustValue(t, []string{"x", "y"})}},
		{"llama.block_count", uint32(2)},
	}
	f32 := make([]byte, 4*6)
	for i := range 6 {
		binary.LittleEndian.PutUint32(f32[4*i:], math.Float32bits(float32(i)-2.5))
	}
	q := make([]float32, 2*64)
	for i := range q {
		q[i] = float32(i%17) - 8
	}
	q80, err := candle.QuantizeBlocks(candle.GGMLQ8_0, q)
	require.NoError(t, err)
	f16, err := candle.QuantizeBlocks(candle.GGMLF16, q[:10])
	require.NoError(t, err)
	specs := []TensorSpec{{"a.f32", []int{2, 3}, candle.GGMLF32}, {"b.q8", []int{2, 64}, candle.GGMLQ8_0}, {"c.f16", []int{10}, candle.GGMLF16}}
	data := map[string][]byte{"a.f32": f32, "b.q8": q80, "c.f16": f16}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, meta, specs)
	require.NoError(t, err)
	for _, s := range specs {
		require.NoError(t, w.WriteTensor(s.Name, data[s.Name]))
	}
	require.NoError(t, w.Close())
	return buf.Bytes(), data
}

func mustValue(t testing.TB, x any) Value {
	v, err := ValueOf(x)
	require.NoError(t, err)
	return v
}

func TestRoundTrip(t *testing.T) {
	b, data := sample(t)
	f, err := Parse(b)
	require.NoError(t, err)
	assert.Equal(t, 3, f.Version())
	assert.Equal(t, 32, f.Alignment())
	assert.Equal(t, "llama", f.Architecture())
	n, err := f.ArchUint("block_count")
	require.NoError(t, err)
	assert.EqualValues(t, 2, n)
	want := map[string]any{"u8": uint8(200), "i8": int8(-100), "u16": uint16(60000), "i16": int16(-30000), "u32": uint32(4000000000),
		"i32": int32(-2000000000), "f32": float32(1.5), "bool": true, "u64": uint64(1) << 60, "i64": int64(-1) << 60, "f64": math.Pi, "str": "héllo",
		"arr.u8": []uint8{1, 2}, "arr.i8": []int8{-1}, "arr.u16": []uint16{7}, "arr.i16": []int16{-7}, "arr.u32": []uint32{1, 2, 3},
		"arr.i32": []int32{-3}, "arr.f32": []float32{0.25, -2}, "arr.bool": []bool{true, false}, "arr.str": []string{"a", "", "ccc"},
		"arr.u64": []uint64{9}, "arr.i64": []int64{-9}, "arr.f64": []float64{2.5}}
	for k, w := range want {
		v, ok := f.Get(k)
		require.True(t, ok, k)
		assert.Equal(t, w, v.Any(), k)
	}
	nested, _ := f.Get("arr.arr")
	require.Equal(t, Array, nested.Elem())
	inner := nested.Any().([]Value)
	assert.Equal(t, []uint32{1}, inner[0].Any())
	assert.Equal(t, []string{"x", "y"}, inner[1].Any())
	assert.Len(t, f.Keys(), 27)

	s, err := f.Strings("arr.str")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "", "ccc"}, s)
	ints, err := f.Ints("arr.u32")
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 2, 3}, ints)
	fl, err := f.Floats("arr.f32")
	require.NoError(t, err)
	assert.Equal(t, []float64{0.25, -2}, fl)
	u, err := f.Uint("u16")
	require.NoError(t, err)
	assert.EqualValues(t, 60000, u)
	_, err = f.Uint("i8")
	assert.ErrorIs(t, err, errs.ErrFormat, "a value of another kind")
	assert.ErrorContains(t, err, "i8 is a i8, want a non-negative integer")
	_, err = f.String("u8")
	assert.ErrorIs(t, err, errs.ErrFormat)
	_, err = f.Float("nope")
	assert.ErrorIs(t, err, errs.ErrNotFound, "a missing key")
	assert.ErrorContains(t, err, "the file has no nope")
	x, err := f.Float("f32")
	require.NoError(t, err)
	assert.Equal(t, 1.5, x)

	require.Len(t, f.Tensors(), 3)
	for _, info := range f.Tensors() {
		d, err := f.Data(info)
		require.NoError(t, err)
		assert.Equal(t, data[info.Name], d, info.Name)
		assert.Zero(t, info.Offset%32)
	}
	info, ok := f.Tensor("b.q8")
	require.True(t, ok)
	assert.Equal(t, []int{2, 64}, info.Dims)
	assert.Equal(t, candle.GGMLQ8_0, info.Type)
	assert.Equal(t, 128, info.Elems())

	// As candle.Weights.
	assert.Equal(t, []string{"a.f32", "b.q8", "c.f16"}, f.Names())
	wi, ok := f.Info("b.q8")
	require.True(t, ok)
	assert.Equal(t, candle.WeightInfo{Shape: candle.Shape{2, 64}, Type: "Q8_0", Quantized: true, Quant: candle.GGMLQ8_0}, wi)
	assert.Equal(t, len(data["b.q8"]), wi.Bytes())
	wi, _ = f.Info("c.f16")
	assert.Equal(t, candle.WeightInfo{Shape: candle.Shape{10}, Type: "F16", Dense: true, DType: candle.F16}, wi)
	_, ok = f.Info("none")
	assert.False(t, ok)
	cpu := candle.CPU()
	a, err := f.Load("a.f32", cpu)
	require.NoError(t, err)
	assert.Equal(t, candle.F32, a.DType(), "a float tensor loads in its own dtype")
	a64, err := a.ToDType(candle.F64)
	require.NoError(t, err)
	av, err := candle.ToSlice[float64](a64)
	require.NoError(t, err)
	assert.Equal(t, []float64{-2.5, -1.5, -0.5, 0.5, 1.5, 2.5}, av)
	assert.Equal(t, candle.Shape{2, 3}, a.Shape())
	q, err := f.LoadQ("b.q8", cpu)
	require.NoError(t, err)
	assert.Equal(t, candle.Shape{2, 64}, q.Shape())
	qd, err := q.Dequantize(candle.F32)
	require.NoError(t, err)
	qv, err := candle.ToSlice[float32](qd)
	require.NoError(t, err)
	for i, v := range qv {
		assert.InDelta(t, float32(i%17)-8, v, 0.04, "element %d", i)
	}
	_, err = f.Load("b.q8", cpu)
	assert.ErrorIs(t, err, errs.ErrDType, "a quantized tensor: LoadQ it")
	_, err = f.LoadQ("a.f32", cpu)
	assert.ErrorIs(t, err, errs.ErrDType)
	_, err = f.Load("none", cpu)
	assert.ErrorIs(t, err, errs.ErrNotFound)
	_, err = f.LoadQ("none", cpu)
	assert.ErrorIs(t, err, errs.ErrNotFound)
	assert.Equal(t, candle.TransferStats{}, f.TransferStats())

	// The same bytes through a file and the mapping.
	path := filepath.Join(t.TempDir(), "m.gguf")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	mf, err := Open(path)
	require.NoError(t, err)
	assert.Equal(t, path, mf.Path())
	d, err := mf.Data(info)
	require.NoError(t, err)
	assert.Equal(t, data["b.q8"], d)
	mq, err := mf.LoadQ("b.q8", cpu)
	require.NoError(t, err)
	mb, err := mq.Blocks()
	require.NoError(t, err)
	got, err := candle.ToBytes(mb)
	require.NoError(t, err)
	assert.Equal(t, data["b.q8"], got, "the blocks as the file holds them")
	mc, err := mf.Load("c.f16", cpu)
	require.NoError(t, err)
	got, err = candle.ToBytes(mc)
	require.NoError(t, err)
	assert.Equal(t, data["c.f16"], got)
	require.NoError(t, mf.Close())
	require.NoError(t, mf.Close())
	_, err = mf.Data(info)
	assert.ErrorIs(t, err, errs.ErrClosed)
	_, err = mf.LoadQ("b.q8", cpu)
	assert.ErrorIs(t, err, errs.ErrClosed)
	for _, c := range []interface{ Close() error }{a, a64, q, qd, mq, mb, mc} {
		c.Close()
	}
}

// header builds a raw header for the corruption tests.
type header struct{ bytes.Buffer }

func (h *header) u32(v uint32) *header { binary.Write(&h.Buffer, binary.LittleEndian, v); return h }
func (h *header) u64(v uint64) *header { binary.Write(&h.Buffer, binary.LittleEndian, v); return h }
func (h *header) str(s string) *header { h.u64(uint64(len(s))); h.WriteString(s); return h }

func TestBadFiles(t *testing.T) {
	good, _ := sample(t)
	cases := map[string][]byte{
		"empty":       {},
		"magic":       append([]byte("GGUG"), good[4:]...),
		"big-endian":  append([]byte{'F', 'U', 'G', 'G'}, good[4:]...),
		"version 1":   (&header{}).u32(magic).u32(1).Bytes(),
		"version 9":   (&header{}).u32(magic).u32(9).Bytes(),
		"huge counts": (&header{}).u32(magic).u32(3).u64(1 << 60).u64(1 << 60).Bytes(),
		"huge kv":     (&header{}).u32(magic).u32(3).u64(0).u64(1 << 40).Bytes(),
		"huge string": (&header{}).u32(magic).u32(3).u64(0).u64(1).str("k").u32(uint32(String)).u64(1 << 62).Bytes(),
		"huge array":  (&header{}).u32(magic).u32(3).u64(0).u64(1).str("k").u32(uint32(Array)).u32(uint32(Uint64)).u64(1 << 61).Bytes(),
		"bad kind":    (&header{}).u32(magic).u32(3).u64(0).u64(1).str("k").u32(77).Bytes(),
		"bad elem":    (&header{}).u32(magic).u32(3).u64(0).u64(1).str("k").u32(uint32(Array)).u32(77).u64(0).Bytes(),
		"dup key":     (&header{}).u32(magic).u32(3).u64(0).u64(2).str("k").u32(uint32(Uint32)).u32(1).str("k").u32(uint32(Uint32)).u32(1).Bytes(),
		"alignment":   (&header{}).u32(magic).u32(3).u64(0).u64(1).str("general.alignment").u32(uint32(Uint32)).u32(24).Bytes(),
		"dims":        (&header{}).u32(magic).u32(3).u64(1).u64(0).str("t").u32(5).u64(1).u64(1).u64(1).u64(1).u64(1).u32(0).u64(0).Bytes(),
		"overflow":    (&header{}).u32(magic).u32(3).u64(1).u64(0).str("t").u32(2).u64(1 << 40).u64(1 << 40).u32(0).u64(0).Bytes(),
		"out of file": (&header{}).u32(magic).u32(3).u64(1).u64(0).str("t").u32(1).u64(1000).u32(0).u64(0).Bytes(),
		"partial block": (&header{}).u32(magic).u32(3).u64(1).u64(0).str("t").u32(1).u64(33).u32(uint32(candle.GGMLQ4_0)).u64(0).
			Bytes(),
	}
	for n := range 40 {
		cases["truncated "+string(rune('a'+n))] = good[:len(good)*n/40]
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := Parse(b)
			assert.Nil(t, f)
			require.Error(t, err)
			assert.ErrorIs(t, err, errs.ErrFormat)
		})
	}
	// An unaligned offset, and a tensor past the data section.
	bad := (&header{}).u32(magic).u32(3).u64(1).u64(0).str("t").u32(1).u64(8).u32(0).u64(4).Bytes()
	bad = append(bad, make([]byte, 64)...)
	_, err := Parse(bad)
	assert.ErrorIs(t, err, errs.ErrFormat)
	bad = (&header{}).u32(magic).u32(3).u64(1).u64(0).str("t").u32(1).u64(8).u32(0).u64(64).Bytes()
	bad = append(bad, make([]byte, 64)...)
	_, err = Parse(bad)
	assert.ErrorIs(t, err, errs.ErrFormat)
	// An unknown type is listed but not read.
	unk := (&header{}).u32(magic).u32(3).u64(1).u64(0).str("t").u32(1).u64(8).u32(23).u64(0).Bytes()
	f, err := Parse(append(unk, make([]byte, 64)...))
	require.NoError(t, err)
	info, _ := f.Tensor("t")
	assert.False(t, info.Type.Known())
	_, err = f.Data(info)
	assert.ErrorIs(t, err, errs.ErrDType)
	wi, ok := f.Info("t")
	require.True(t, ok)
	assert.False(t, wi.Dense || wi.Quantized, "a type candle does not hold")
	_, err = f.Load("t", candle.CPU())
	assert.ErrorIs(t, err, errs.ErrDType)
	_, err = f.LoadQ("t", candle.CPU())
	assert.ErrorIs(t, err, errs.ErrDType)
}

// TestOpenBadFiles: a file Open cannot read says which file and why.
func TestOpenBadFiles(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(filepath.Join(dir, "none.gguf"))
	assert.ErrorIs(t, err, errs.ErrNotFound)
	good, _ := sample(t)
	for name, b := range map[string][]byte{"empty": nil, "truncated": good[:len(good)-40], "not gguf": []byte("{\"a\": 1}")} {
		path := filepath.Join(dir, "bad.gguf")
		require.NoError(t, os.WriteFile(path, b, 0o644))
		_, err := Open(path)
		assert.ErrorIs(t, err, errs.ErrFormat, name)
		assert.ErrorContains(t, err, path, name)
	}
}

func TestHugeCountsAllocateNothing(t *testing.T) {
	b := (&header{}).u32(magic).u32(3).u64(1 << 60).u64(1 << 60).Bytes()
	allocs := testing.AllocsPerRun(20, func() { Parse(b) })
	assert.Less(t, allocs, 20.0)
}

func TestWriterErrors(t *testing.T) {
	var buf bytes.Buffer
	_, err := NewWriter(&buf, []KV{{"k", struct{}{}}}, nil)
	assert.Error(t, err)
	_, err = NewWriter(&buf, []KV{{"k", 1}, {"k", 2}}, nil)
	assert.Error(t, err)
	_, err = NewWriter(&buf, nil, []TensorSpec{{"t", []int{33}, candle.GGMLQ4_0}})
	assert.Error(t, err)
	_, err = NewWriter(&buf, nil, []TensorSpec{{"t", []int{32}, candle.GGMLQ4_0}, {"t", []int{32}, candle.GGMLQ4_0}})
	assert.Error(t, err)
	_, err = NewWriter(&buf, []KV{{"general.alignment", uint32(3)}}, nil)
	assert.Error(t, err)
	w, err := NewWriter(&buf, []KV{{"general.alignment", uint32(64)}}, []TensorSpec{{"a", []int{32}, candle.GGMLQ4_0}, {"b", []int{2}, candle.GGMLF32}})
	require.NoError(t, err)
	assert.Error(t, w.WriteTensor("b", make([]byte, 8)))
	w, err = NewWriter(&buf, nil, []TensorSpec{{"a", []int{32}, candle.GGMLQ4_0}})
	require.NoError(t, err)
	assert.Error(t, w.WriteTensor("a", make([]byte, 17)))
	assert.Error(t, w.Close())
	buf.Reset()
	w, err = NewWriter(&buf, []KV{{"general.alignment", uint32(64)}}, []TensorSpec{{"a", []int{32}, candle.GGMLQ4_0}, {"b", []int{2}, candle.GGMLF32}})
	require.NoError(t, err)
	require.NoError(t, w.WriteTensor("a", make([]byte, 18)))
	require.NoError(t, w.WriteTensor("b", make([]byte, 8)))
	require.NoError(t, w.Close())
	assert.Error(t, w.WriteTensor("c", nil))
	f, err := Parse(buf.Bytes())
	require.NoError(t, err)
	assert.Equal(t, 64, f.Alignment())
	info, _ := f.Tensor("b")
	assert.EqualValues(t, 64, info.Offset)
}

func FuzzParse(f *testing.F) {
	good, _ := sample(f)
	f.Add(good)
	f.Add(good[:100])
	f.Add((&header{}).u32(magic).u32(3).u64(1).u64(0).str("t").u32(1).u64(8).u32(0).u64(0).Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse(b)
		if err != nil {
			return
		}
		for _, k := range file.Keys() {
			v, _ := file.Get(k)
			_ = v.String()
		}
		for _, info := range file.Tensors() {
			if d, err := file.Data(info); err == nil && len(d) != info.Bytes {
				t.Fatalf("tensor %s: %d bytes, info says %d", info.Name, len(d), info.Bytes)
			}
		}
	})
}

// TestVersion2 reads a version 2 file: the same layout with 64-bit counts.
func TestVersion2(t *testing.T) {
	b, data := sample(t)
	v2 := append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(v2[4:], 2)
	f, err := Parse(v2)
	require.NoError(t, err)
	assert.Equal(t, 2, f.Version())
	info, ok := f.Tensor("b.q8")
	require.True(t, ok)
	d, err := f.Data(info)
	require.NoError(t, err)
	assert.Equal(t, data["b.q8"], d)
}
