// Package safetensors reads and writes safetensors files, Hugging Face's
// checkpoint format: an 8-byte header length, a JSON header naming each
// tensor's dtype, shape and byte range, then the tensors' bytes.
//
// OpenFile maps one file (candle.MappedFile) and checks its header: every
// tensor's dtype, shape and byte range, within the file and of the size
// its shape and dtype give, before anything is loaded. Open takes what a
// model folder holds: one file, a sharded model's index
// (model.safetensors.index.json) or a folder holding either. Both are
// candle.Weights, whose tensors reach a HIP device through candle's
// pipelined pinned upload (candle.Transfer). Save writes a file.
//
//	w, err := safetensors.Open("/models/Llama-3.2-1B")
//	defer w.Close()
//	vb, err := nn.NewVarBuilder(w, dev, candle.BF16)
package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/errs"
)

// pkg makes this package's errors.
const pkg errs.Package = "safetensors"

// maxHeader bounds a header, as the format's reference implementation
// does (100 MB): a larger length is a corrupt file, never an allocation.
const maxHeader = 100 << 20

// File is one safetensors file, mapped: a candle.Weights whose tensors load
// from the page cache straight to a device. It is read-only and safe for
// many goroutines.
type File struct {
	m        *candle.MappedFile
	tensors  map[string]tensor
	metadata map[string]string
}

// tensor is a tensor of the file: how it loads, and where its bytes are
// in the file.
type tensor struct {
	info candle.WeightInfo
	span candle.Span
}

var _ candle.Weights = (*File)(nil)

// OpenFile maps a safetensors file and checks its header; opts say how
// tensors move to a HIP device (candle.WithTransfer). Close unmaps it.
func OpenFile(path string, opts ...candle.LoadOption) (*File, error) {
	m, err := candle.MapFile(path, opts...)
	if err != nil {
		return nil, pkg.Wrap("OpenFile", err)
	}
	f, err := OpenMapped(m)
	if err != nil {
		m.Close()
		return nil, err
	}
	return f, nil
}

// OpenMapped reads the header of a mapped safetensors file, which the
// File then owns: its Close closes m.
func OpenMapped(m *candle.MappedFile) (*File, error) {
	f, err := parse(m.Bytes())
	if err != nil {
		e := err.(*errs.Error)
		e.Path = m.Path()
		return nil, e
	}
	f.m = m
	var spans []candle.Span
	for _, t := range f.tensors {
		if t.info.Dense {
			spans = append(spans, t.span)
		}
	}
	m.SetTensors(spans)
	return f, nil
}

// parse reads the header of a whole file's bytes. Its errors are
// *errs.Error of kind errs.ErrFormat.
func parse(b []byte) (*File, error) {
	const op = "OpenFile"
	bad := func(format string, args ...any) error { return pkg.Errorf(op, errs.ErrFormat, format, args...) }
	if len(b) < 8 {
		return nil, bad("%d bytes, too short for a safetensors header", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > maxHeader || n > uint64(len(b)-8) {
		return nil, bad("a header of %d bytes in a file of %d (at most %d)", n, len(b), min(maxHeader, len(b)-8))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &raw); err != nil {
		return nil, bad("the header is not a JSON object: %v", err)
	}
	base, data := 8+int(n), len(b)-8-int(n)
	f := &File{tensors: make(map[string]tensor, len(raw))}
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &f.metadata); err != nil {
				return nil, bad("__metadata__ is not an object of strings: %v", err)
			}
			continue
		}
		var e struct {
			DType   string `json:"dtype"`
			Shape   []int  `json:"shape"`
			Offsets []int  `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, bad("tensor %q: %v", name, err)
		}
		size, ok := dtypeSize(e.DType)
		if !ok {
			return nil, bad("tensor %q: unknown dtype %q", name, e.DType)
		}
		if len(e.Offsets) != 2 {
			return nil, bad("tensor %q: data_offsets %v: want [begin, end]", name, e.Offsets)
		}
		elems := 1
		for _, d := range e.Shape {
			if d < 0 || d > 0 && elems > math.MaxInt/d {
				return nil, bad("tensor %q: shape %v", name, e.Shape)
			}
			elems *= d
		}
		begin, end := e.Offsets[0], e.Offsets[1]
		switch {
		case begin < 0 || end < begin || end > data:
			return nil, bad("tensor %q: bytes [%d, %d) outside the %d bytes of data (a truncated file?)", name, begin, end, data)
		case elems > math.MaxInt/size || end-begin != elems*size:
			return nil, bad("tensor %q: %d bytes for shape %v of %s (%d bytes)", name, end-begin, e.Shape, e.DType, elems*size)
		}
		info := candle.WeightInfo{Shape: candle.Shape(e.Shape), Type: e.DType}
		// candle's dtypes are named as safetensors names them, in lower
		// case; the others (I32, BOOL, F8_E4M3, ...) candle does not hold.
		if dt, err := candle.ParseDType(e.DType); err == nil {
			info.Dense, info.DType = true, dt
		}
		f.tensors[name] = tensor{info: info, span: candle.Span{Start: base + begin, End: base + end}}
	}
	return f, nil
}

// dtypeSize is the element size of a safetensors dtype name.
func dtypeSize(name string) (int, bool) {
	switch name {
	case "BOOL", "U8", "I8", "F8_E4M3", "F8_E5M2":
		return 1, true
	case "U16", "I16", "F16", "BF16":
		return 2, true
	case "U32", "I32", "F32":
		return 4, true
	case "U64", "I64", "F64":
		return 8, true
	}
	return 0, false
}

// Path is the file's path.
func (f *File) Path() string { return f.m.Path() }

// Names lists the file's tensors, sorted.
func (f *File) Names() []string { return slices.Sorted(maps.Keys(f.tensors)) }

// Info describes a tensor of the file.
func (f *File) Info(name string) (candle.WeightInfo, bool) {
	t, ok := f.tensors[name]
	return t.info, ok
}

// Span is where a tensor's bytes are in the file.
func (f *File) Span(name string) (candle.Span, bool) {
	t, ok := f.tensors[name]
	return t.span, ok
}

// Metadata is the file's __metadata__ (nil when it has none).
func (f *File) Metadata() map[string]string { return f.metadata }

// dense is a tensor of the file that candle can hold.
func (f *File) dense(op, name string) (tensor, error) {
	t, ok := f.tensors[name]
	switch {
	case !ok:
		return tensor{}, f.errorf(op, errs.ErrNotFound, "no tensor %q", name)
	case !t.info.Dense:
		return tensor{}, f.errorf(op, errs.ErrDType, "tensor %q is %s, a dtype candle does not hold", name, t.info.Type)
	}
	return t, nil
}

// Load copies a tensor from the file to dev, in the file's dtype.
func (f *File) Load(name string, dev candle.Device) (*candle.Tensor, error) {
	const op = "File.Load"
	t, err := f.dense(op, name)
	if err != nil {
		return nil, err
	}
	x, err := f.m.Load(dev, t.info.DType, t.span, t.info.Shape...)
	if err != nil {
		return nil, f.wrap(op, name, err)
	}
	return x, nil
}

// LoadQ is an error of kind errs.ErrDType: safetensors files hold no
// quantized blocks.
func (f *File) LoadQ(name string, dev candle.Device) (*candle.QTensor, error) {
	const op = "File.LoadQ"
	t, ok := f.tensors[name]
	if !ok {
		return nil, f.errorf(op, errs.ErrNotFound, "no tensor %q", name)
	}
	return nil, f.errorf(op, errs.ErrDType, "tensor %q is %s, not quantized: Load it", name, t.info.Type)
}

// TransferStats says how the tensors loaded so far reached HIP devices.
func (f *File) TransferStats() candle.TransferStats { return f.m.TransferStats() }

// Close waits for the copies still reading the file, releases its chunks,
// unmaps it and closes it; the tensors loaded from it stay valid.
func (f *File) Close() error { return pkg.Wrap("File.Close", f.m.Close()) }

func (f *File) errorf(op string, kind error, format string, args ...any) error {
	return &errs.Error{Pkg: string(pkg), Op: op, Kind: kind, Path: f.m.Path(), Detail: fmt.Sprintf(format, args...)}
}

// wrap attributes a load's failure to op, naming the tensor.
func (f *File) wrap(op, name string, err error) error {
	e := pkg.Wrap(op, err).(*errs.Error)
	e.Path, e.Field = f.m.Path(), fmt.Sprintf("tensor %q", name)
	return e
}

// Save writes tensors to a safetensors file at path, sorted by name, with
// metadata (may be nil) as its __metadata__. The file appears whole or not
// at all: it is written beside path and renamed over it.
func Save(path string, tensors map[string]*candle.Tensor, metadata map[string]string) (err error) {
	const op = "Save"
	fail := func(kind error, format string, args ...any) error {
		return &errs.Error{Pkg: string(pkg), Op: op, Kind: kind, Path: path, Detail: fmt.Sprintf(format, args...)}
	}
	wrap := func(err error) error {
		e := pkg.Wrap(op, err).(*errs.Error)
		e.Path = path
		return e
	}
	names := make([]string, 0, len(tensors))
	for n, t := range tensors {
		switch {
		case n == "" || n == "__metadata__":
			return fail(errs.ErrArgument, "%q is not a tensor name", n)
		case t == nil:
			return fail(errs.ErrArgument, "tensor %q is nil", n)
		}
		names = append(names, n)
	}
	slices.Sort(names)
	type entry struct {
		DType   string `json:"dtype"`
		Shape   []int  `json:"shape"`
		Offsets [2]int `json:"data_offsets"`
	}
	header := make(map[string]any, len(names)+1)
	if metadata != nil {
		header["__metadata__"] = metadata
	}
	off := 0
	for _, n := range names {
		t := tensors[n]
		size := t.Elems() * t.DType().Size()
		header[n] = entry{DType: strings.ToUpper(t.DType().String()), Shape: t.Shape(), Offsets: [2]int{off, off + size}}
		off += size
	}
	h, err := json.Marshal(header)
	if err != nil {
		return wrap(err)
	}
	// Pad the header with spaces so that the data starts 8-byte aligned.
	h = append(h, bytes.Repeat([]byte{' '}, (8-len(h)%8)%8)...)

	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return wrap(err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	w.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(h))))
	w.Write(h)
	for _, n := range names {
		b, err := candle.ToBytes(tensors[n])
		if err != nil {
			e := wrap(err).(*errs.Error)
			e.Field = fmt.Sprintf("tensor %q", n)
			return e
		}
		w.Write(b)
	}
	if err := w.Flush(); err != nil {
		return wrap(err)
	}
	if err := f.Close(); err != nil {
		return wrap(err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return wrap(err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return wrap(err)
	}
	return nil
}

// LoadSlice copies part of a tensor from the file to dev, in the file's
// dtype: elements [start, start+n) of dim d, reading only those bytes
// (candle.SlicedWeights).
func (f *File) LoadSlice(name string, dev candle.Device, d, start, n int) (*candle.Tensor, error) {
	const op = "File.LoadSlice"
	t, err := f.dense(op, name)
	if err != nil {
		return nil, err
	}
	x, err := f.m.LoadSlice(dev, t.info.DType, t.span, t.info.Shape, d, start, n)
	if err != nil {
		return nil, f.wrap(op, name, err)
	}
	return x, nil
}

// LoadQSlice is an error of kind errs.ErrDType: safetensors files hold no
// quantized blocks.
func (f *File) LoadQSlice(name string, dev candle.Device, d, start, n int) (*candle.QTensor, error) {
	_, err := f.LoadQ(name, dev)
	return nil, err
}
