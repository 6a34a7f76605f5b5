package gguf

import (
	"fmt"

	"github.com/rocm-go/rocm/errs"
)

// The metadata getters' errors: a key the file does not have is of kind
// errs.ErrNotFound, one that holds a value of another kind than asked for
// of kind errs.ErrFormat; both name the key (Error.Field).

func (f *File) lookup(key string) (Value, error) {
	v, ok := f.meta[key]
	if !ok {
		return Value{}, &errs.Error{Pkg: string(pkg), Op: "File.Get", Kind: errs.ErrNotFound, Path: f.Path(), Field: key, Detail: "the file has no " + key}
	}
	return v, nil
}

func (f *File) kindErr(key string, v Value, want string) error {
	got := v.kind.String()
	if v.kind == Array {
		got = "array of " + v.elem.String()
	}
	return &errs.Error{Pkg: string(pkg), Op: "File.Get", Kind: errs.ErrFormat, Path: f.Path(), Field: key, Detail: fmt.Sprintf("%s is a %s, want %s", key, got, want)}
}

// String is a string value.
func (f *File) String(key string) (string, error) {
	v, err := f.lookup(key)
	if err != nil {
		return "", err
	}
	if v.kind != String {
		return "", f.kindErr(key, v, "a string")
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
		return 0, f.kindErr(key, v, "a non-negative integer")
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
		return 0, f.kindErr(key, v, "an integer")
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
	return 0, f.kindErr(key, v, "a number")
}

// Bool is a bool value.
func (f *File) Bool(key string) (bool, error) {
	v, err := f.lookup(key)
	if err != nil {
		return false, err
	}
	if v.kind != Bool {
		return false, f.kindErr(key, v, "a bool")
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
		return nil, f.kindErr(key, v, "an array of strings")
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
		return nil, f.kindErr(key, v, "an array of integers")
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
		return nil, f.kindErr(key, v, "an array of floats")
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
