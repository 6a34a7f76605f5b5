package nn

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rocm-go/rocm/candle"
)

// VarBuilder maps a model's safetensors files onto named parameters: Get
// loads one by name onto the builder's device in its dtype, checking its
// shape. Prefix gives a builder for a sub-module ("model.layers.0").
type VarBuilder struct {
	files  *weights
	prefix string
	dev    candle.Device
	dtype  candle.DType
}

// weights is the open files of a VarBuilder and which file holds which
// tensor; builders made by Prefix share it.
type weights struct {
	files []*Safetensors
	where map[string]*Safetensors
}

// OpenVarBuilder opens a model's weights for dev, converted to dtype
// where a file holds another float dtype: one .safetensors file, a
// sharded model's index (model.safetensors.index.json, whose weight_map
// names each tensor's file), or a folder holding either. opts say how
// tensors move to a HIP device (WithTransfer; the default reads the files
// into pinned buffers ahead of the copies).
func OpenVarBuilder(path string, dev candle.Device, dtype candle.DType, opts ...LoadOption) (*VarBuilder, error) {
	if dev == nil {
		return nil, fmt.Errorf("nn: OpenVarBuilder: nil device: %w", candle.ErrDevice)
	}
	if !dtype.IsFloat() {
		return nil, fmt.Errorf("nn: OpenVarBuilder: %s: weights load as f32, f16, bf16 or f64: %w", dtype, candle.ErrDType)
	}
	files, err := weightFiles(path)
	if err != nil {
		return nil, err
	}
	w := &weights{where: map[string]*Safetensors{}}
	for _, f := range files {
		s, err := OpenSafetensors(f, opts...)
		if err != nil {
			w.close()
			return nil, err
		}
		w.files = append(w.files, s)
		for _, n := range s.Names() {
			if other, dup := w.where[n]; dup {
				w.close()
				return nil, fmt.Errorf("nn: tensor %q is in both %s and %s: %w", n, other.path, s.path, ErrFormat)
			}
			w.where[n] = s
		}
	}
	return &VarBuilder{files: w, dev: dev, dtype: dtype}, nil
}

// weightFiles resolves a model path to its safetensors files.
func weightFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("nn: %w", err)
	}
	if st.IsDir() {
		for _, name := range []string{"model.safetensors.index.json", "model.safetensors"} {
			if _, err := os.Stat(filepath.Join(path, name)); err == nil {
				return weightFiles(filepath.Join(path, name))
			}
		}
		matches, _ := filepath.Glob(filepath.Join(path, "*.safetensors"))
		if len(matches) == 0 {
			return nil, fmt.Errorf("nn: %s holds no model.safetensors, model.safetensors.index.json or *.safetensors: %w", path, ErrMissing)
		}
		slices.Sort(matches)
		return matches, nil
	}
	if !strings.HasSuffix(path, ".json") {
		return []string{path}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nn: %w", err)
	}
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &index); err != nil {
		return nil, fmt.Errorf("nn: %s: %v: %w", path, err, ErrFormat)
	}
	if len(index.WeightMap) == 0 {
		return nil, fmt.Errorf("nn: %s: no weight_map: %w", path, ErrFormat)
	}
	dir := filepath.Dir(path)
	var files []string
	for _, f := range index.WeightMap {
		if f != filepath.Base(f) {
			return nil, fmt.Errorf("nn: %s: shard %q is not a file beside the index: %w", path, f, ErrFormat)
		}
		files = append(files, filepath.Join(dir, f))
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

func (w *weights) close() error {
	var errs []error
	for _, f := range w.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// Close waits for the copies still reading the files and unmaps them; the
// tensors loaded stay valid. Close it once, on the builder OpenVarBuilder
// returned.
func (vb *VarBuilder) Close() error { return vb.files.close() }

// TransferStats says how the tensors loaded so far reached HIP devices,
// summed over the files.
func (vb *VarBuilder) TransferStats() TransferStats {
	var st TransferStats
	for _, f := range vb.files.files {
		st.add(f.TransferStats())
	}
	return st
}

// Prefix is a builder whose names start with prefix and a dot.
func (vb *VarBuilder) Prefix(prefix string) *VarBuilder {
	c := *vb
	c.prefix = vb.name(prefix)
	return &c
}

// Device is where the builder loads tensors.
func (vb *VarBuilder) Device() candle.Device { return vb.dev }

// DType is the dtype the builder loads float tensors as.
func (vb *VarBuilder) DType() candle.DType { return vb.dtype }

func (vb *VarBuilder) name(n string) string {
	if vb.prefix == "" {
		return n
	}
	return vb.prefix + "." + n
}

// Contains reports whether the files hold a tensor of the name.
func (vb *VarBuilder) Contains(name string) bool {
	_, ok := vb.files.where[vb.name(name)]
	return ok
}

// Get loads a tensor by name, checked against shape, as the builder's
// dtype (float tensors) or its own (integer ones). A missing tensor or
// another shape is an error that names it.
func (vb *VarBuilder) Get(name string, shape ...int) (*candle.Tensor, error) {
	full := vb.name(name)
	f, ok := vb.files.where[full]
	if !ok {
		return nil, fmt.Errorf("nn: the weights have no tensor %q: %w", full, ErrMissing)
	}
	info, _ := f.Info(full)
	if !slices.Equal(info.Shape, shape) {
		return nil, fmt.Errorf("nn: tensor %q is %v in %s; the model wants %v: %w", full, info.Shape, f.path, shape, candle.ErrShape)
	}
	t, err := f.Load(full, vb.dev)
	if err != nil || !t.DType().IsFloat() || t.DType() == vb.dtype {
		return t, err
	}
	defer t.Close()
	return t.ToDType(vb.dtype)
}
