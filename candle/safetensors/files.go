package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/errs"
)

// Index is the file that maps a sharded model's tensors to their files.
const Index = "model.safetensors.index.json"

// Files is a model's weights in safetensors files: one file, or the
// shards of a sharded model, each tensor in one of them. It is a
// candle.Weights.
type Files struct {
	files []*File
	where map[string]*File
}

var _ candle.Weights = (*Files)(nil)

// Open opens a model's weights: one .safetensors file, a sharded model's
// index (model.safetensors.index.json, whose weight_map names each
// tensor's file), or a folder holding either (the index first, then
// model.safetensors, then every *.safetensors). opts say how tensors move
// to a HIP device (candle.WithTransfer). A tensor in two files is an
// error, and so is a shard the index names that is not there.
func Open(path string, opts ...candle.LoadOption) (*Files, error) {
	paths, err := weightFiles(path)
	if err != nil {
		return nil, err
	}
	w := &Files{where: map[string]*File{}}
	for _, p := range paths {
		f, err := OpenFile(p, opts...)
		if err != nil {
			w.Close()
			if errors.Is(err, errs.ErrNotFound) && p != path {
				return nil, &errs.Error{Pkg: string(pkg), Op: "Open", Kind: errs.ErrNotFound, Path: path,
					Detail: fmt.Sprintf("the shard %s is not there", filepath.Base(p)), Err: err}
			}
			return nil, pkg.Wrap("Open", err)
		}
		w.files = append(w.files, f)
		for n := range f.tensors {
			if other, dup := w.where[n]; dup {
				w.Close()
				return nil, pkg.Errorf("Open", errs.ErrFormat, "tensor %q is in both %s and %s", n, other.Path(), f.Path())
			}
			w.where[n] = f
		}
	}
	return w, nil
}

// weightFiles resolves a model path to its safetensors files.
func weightFiles(path string) ([]string, error) {
	const op = "Open"
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrNotFound, Path: path, Detail: "no such file or folder", Err: err}
		}
		return nil, pkg.Wrap(op, err)
	}
	if st.IsDir() {
		for _, name := range []string{Index, "model.safetensors"} {
			if _, err := os.Stat(filepath.Join(path, name)); err == nil {
				return weightFiles(filepath.Join(path, name))
			}
		}
		matches, _ := filepath.Glob(filepath.Join(path, "*.safetensors"))
		if len(matches) == 0 {
			return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrNotFound, Path: path,
				Detail: "the folder holds no " + Index + ", model.safetensors or *.safetensors"}
		}
		slices.Sort(matches)
		return matches, nil
	}
	if !strings.HasSuffix(path, ".json") {
		return []string{path}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	bad := func(format string, args ...any) error {
		return &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: path, Detail: fmt.Sprintf(format, args...)}
	}
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &index); err != nil {
		return nil, bad("not a sharded model's index: %v", err)
	}
	if len(index.WeightMap) == 0 {
		return nil, bad("no weight_map")
	}
	dir := filepath.Dir(path)
	var files []string
	for _, f := range index.WeightMap {
		if f != filepath.Base(f) || f == "." || f == ".." {
			return nil, bad("shard %q is not a file beside the index", f)
		}
		files = append(files, filepath.Join(dir, f))
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// Files lists the open files, sorted by path.
func (w *Files) Files() []*File { return slices.Clone(w.files) }

// Names lists every tensor of the files, sorted.
func (w *Files) Names() []string { return slices.Sorted(maps.Keys(w.where)) }

// Info describes a tensor.
func (w *Files) Info(name string) (candle.WeightInfo, bool) {
	f, ok := w.where[name]
	if !ok {
		return candle.WeightInfo{}, false
	}
	return f.Info(name)
}

// Load copies a tensor from its file to dev, in the file's dtype.
func (w *Files) Load(name string, dev candle.Device) (*candle.Tensor, error) {
	f, ok := w.where[name]
	if !ok {
		return nil, pkg.Errorf("Files.Load", errs.ErrNotFound, "the weights have no tensor %q", name)
	}
	return f.Load(name, dev)
}

// LoadQ is an error: safetensors files hold no quantized blocks.
func (w *Files) LoadQ(name string, dev candle.Device) (*candle.QTensor, error) {
	f, ok := w.where[name]
	if !ok {
		return nil, pkg.Errorf("Files.LoadQ", errs.ErrNotFound, "the weights have no tensor %q", name)
	}
	return f.LoadQ(name, dev)
}

// TransferStats says how the tensors loaded so far reached HIP devices,
// summed over the files.
func (w *Files) TransferStats() candle.TransferStats {
	var st candle.TransferStats
	for _, f := range w.files {
		st.Add(f.TransferStats())
	}
	return st
}

// Close waits for the copies still reading the files and unmaps them; the
// tensors loaded stay valid. Closing twice does nothing.
func (w *Files) Close() error {
	var failed []error
	for _, f := range w.files {
		failed = append(failed, f.Close())
	}
	return pkg.Wrap("Files.Close", errors.Join(failed...))
}

// LoadSlice copies part of a tensor from its file to dev
// (candle.SlicedWeights): elements [start, start+n) of dim d.
func (w *Files) LoadSlice(name string, dev candle.Device, d, start, n int) (*candle.Tensor, error) {
	f, ok := w.where[name]
	if !ok {
		return nil, pkg.Errorf("Files.LoadSlice", errs.ErrNotFound, "the weights have no tensor %q", name)
	}
	return f.LoadSlice(name, dev, d, start, n)
}

// LoadQSlice is an error: safetensors files hold no quantized blocks.
func (w *Files) LoadQSlice(name string, dev candle.Device, d, start, n int) (*candle.QTensor, error) {
	return w.LoadQ(name, dev)
}
