package gguf

import (
	"errors"
	"fmt"

	"github.com/rocm-go/rocm/candle"
)

// ErrMetadata is the error of a metadata key that is missing or holds a
// value of another kind than asked for.
var ErrMetadata = errors.New("GGUF metadata")

func (f *File) lookup(key string) (Value, error) {
	v, ok := f.meta[key]
	if !ok {
		return Value{}, fmt.Errorf("gguf: the file has no %s: %w", key, ErrMetadata)
	}
	return v, nil
}

func kindErr(key string, v Value, want string) error {
	got := v.kind.String()
	if v.kind == Array {
		got = "array of " + v.elem.String()
	}
	return fmt.Errorf("gguf: %s is a %s, want %s: %w", key, got, want, ErrMetadata)
}

// String is a string value.
func (f *File) String(key string) (string, error) {
	v, err := f.lookup(key)
	if err != nil {
		return "", err
	}
	if v.kind != String {
		return "", kindErr(key, v, "a string")
	}
	return v.s, nil
}

// Uint is an integer value of any kind that is not negative.
func (f *File) Uint(key string) (uint64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	u, ok := v.asUint()
	if !ok {
		return 0, kindErr(key, v, "a non-negative integer")
	}
	return u, nil
}

// Int is an integer value of any kind that fits an int64.
func (f *File) Int(key string) (int64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	i, ok := v.asInt()
	if !ok {
		return 0, kindErr(key, v, "an integer")
	}
	return i, nil
}

// Float is an f32 or f64 value (an integer's too).
func (f *File) Float(key string) (float64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	switch v.kind {
	case Float32, Float64:
		return v.f, nil
	}
	if i, ok := v.asInt(); ok {
		return float64(i), nil
	}
	return 0, kindErr(key, v, "a number")
}

// Bool is a bool value.
func (f *File) Bool(key string) (bool, error) {
	v, err := f.lookup(key)
	if err != nil {
		return false, err
	}
	if v.kind != Bool {
		return false, kindErr(key, v, "a bool")
	}
	return v.b, nil
}

// Strings is an array of strings.
func (f *File) Strings(key string) ([]string, error) {
	v, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	a, ok := v.arr.([]string)
	if v.kind != Array || !ok {
		return nil, kindErr(key, v, "an array of strings")
	}
	return append([]string(nil), a...), nil
}

// Ints is an array of integers of any kind, as int64s.
func (f *File) Ints(key string) ([]int64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	a, ok := v.ints()
	if v.kind != Array || !ok {
		return nil, kindErr(key, v, "an array of integers")
	}
	return a, nil
}

// Floats is an array of f32 or f64, as float64s.
func (f *File) Floats(key string) ([]float64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	a, ok := v.floats()
	if v.kind != Array || !ok {
		return nil, kindErr(key, v, "an array of floats")
	}
	return a, nil
}

// Architecture is general.architecture ("llama", "qwen2", ...), "" when
// the file has none.
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}

// ArchUint is Uint of the architecture's key: ArchUint("block_count")
// reads llama.block_count in a llama file.
func (f *File) ArchUint(key string) (uint64, error) {
	return f.Uint(f.Architecture() + "." + key)
}

// Load puts a tensor on dev as a dtype tensor of its dims: float tensors
// (F32, F16, BF16, F64) are converted, quantized ones dequantized (through
// candle.QTensor on dev). Use LoadQ to keep a quantized tensor quantized.
func (f *File) Load(name string, dev candle.Device, dt candle.DType) (*candle.Tensor, error) {
	info, data, err := f.tensorData(name)
	if err != nil {
		return nil, err
	}
	if fdt, ok := info.Type.DType(); ok {
		t, err := candle.FromBytes(dev, fdt, data, info.Dims...)
		if err != nil || fdt == dt {
			return t, wrapTensor(name, err)
		}
		defer t.Close()
		t2, err := t.ToDType(dt)
		return t2, wrapTensor(name, err)
	}
	q, err := candle.NewQTensor(dev, info.Type, data, info.Dims...)
	if err != nil {
		return nil, wrapTensor(name, err)
	}
	defer q.Close()
	t, err := q.Dequantize(dt)
	return t, wrapTensor(name, err)
}

// LoadQ puts a quantized tensor on dev as it is. A float tensor is an
// error: Load it.
func (f *File) LoadQ(name string, dev candle.Device) (*candle.QTensor, error) {
	info, data, err := f.tensorData(name)
	if err != nil {
		return nil, err
	}
	if !info.Type.Quantized() {
		return nil, fmt.Errorf("gguf: tensor %s is %s, not quantized: Load it: %w", name, info.Type, candle.ErrDType)
	}
	q, err := candle.NewQTensor(dev, info.Type, data, info.Dims...)
	return q, wrapTensor(name, err)
}

func (f *File) tensorData(name string) (TensorInfo, []byte, error) {
	info, ok := f.Tensor(name)
	if !ok {
		return info, nil, fmt.Errorf("gguf: the file has no tensor %s", name)
	}
	data, err := f.Data(info)
	return info, data, err
}

func wrapTensor(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("gguf: tensor %s: %w", name, err)
}
