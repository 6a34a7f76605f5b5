// Package gguf reads and writes GGUF files, llama.cpp's model format: a
// header of typed metadata (the model's config, its tokenizer) and tensor
// infos, then the tensors' data, aligned. One file is a whole model.
//
// Open maps a file read-only (candle.MappedFile) and parses its header;
// Data gives a tensor's bytes without copying them, and a File is a
// candle.Weights: Load and LoadQ put a tensor on a candle device
// (quantized tensors stay quantized as candle.QTensor) through candle's
// pipelined pinned upload, as safetensors files go. Versions 2 and 3 are
// read; Writer writes version 3. The file's vocabulary becomes a
// tokenizer in candle/models.
//
// Every count, length and offset of a file is checked against the file's
// size before anything is allocated for it: a truncated or corrupt file is
// an error that says where, never a crash or a huge allocation.
//
// Dims are in candle's order, the slowest-varying first: GGUF lists a
// tensor's dims fastest first (ggml's ne), and a (rows, cols) weight of
// candle is GGUF's [cols, rows].
package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/errs"
)

// pkg makes this package's errors.
const pkg errs.Package = "gguf"

// magic is "GGUF", little-endian.
const magic = 0x46554747

// DefaultAlignment is the data alignment of a file whose metadata gives
// none (general.alignment).
const DefaultAlignment = 32

// maxDims is the most dims a GGUF tensor has (ggml's GGML_MAX_DIMS).
const maxDims = 4

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name string
	// Dims in candle's order (GGUF's reversed): a weight (out, in).
	Dims []int
	Type candle.GGMLType
	// Offset is where the data starts, from the start of the data section.
	Offset uint64
	// Bytes is the data's size; 0 for a type this package does not know
	// (Type.Known() is false).
	Bytes int
}

// Elems is the number of elements.
func (t TensorInfo) Elems() int {
	n := 1
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is a parsed GGUF file: its metadata, and its tensors as
// candle.Weights. Its methods are safe for many goroutines.
type File struct {
	version   uint32
	alignment int
	keys      []string
	meta      map[string]Value
	tensors   []TensorInfo
	byName    map[string]int
	data      []byte // the whole file; nil once closed
	dataStart int
	m         *candle.MappedFile // nil for a file Parse read
}

var _ candle.Weights = (*File)(nil)

// Open maps a GGUF file read-only and parses its header; opts say how its
// tensors move to a HIP device (candle.WithTransfer). Close unmaps it; the
// byte slices Data returned are invalid after.
func Open(path string, opts ...candle.LoadOption) (*File, error) {
	m, err := candle.MapFile(path, opts...)
	if err != nil {
		return nil, pkg.Wrap("Open", err)
	}
	f, err := OpenMapped(m)
	if err != nil {
		m.Close()
		return nil, err
	}
	return f, nil
}

// OpenMapped parses the header of a mapped GGUF file, which the File then
// owns: its Close closes m.
func OpenMapped(m *candle.MappedFile) (*File, error) {
	f, err := Parse(m.Bytes())
	if err != nil {
		e := err.(*errs.Error)
		e.Op, e.Path = "Open", m.Path()
		return nil, e
	}
	f.m = m
	var spans []candle.Span
	for _, t := range f.tensors {
		if t.Type.Known() {
			spans = append(spans, f.span(t))
		}
	}
	m.SetTensors(spans)
	return f, nil
}

// span is where a tensor's data is in the file.
func (f *File) span(t TensorInfo) candle.Span {
	start := f.dataStart + int(t.Offset)
	return candle.Span{Start: start, End: start + t.Bytes}
}

// Close unmaps a file that Open mapped; it is a no-op for a parsed one,
// and closing twice does nothing.
func (f *File) Close() error {
	f.data = nil
	if f.m == nil {
		return nil
	}
	return pkg.Wrap("File.Close", f.m.Close())
}

// Path is the file's path ("" for a file Parse read).
func (f *File) Path() string {
	if f.m == nil {
		return ""
	}
	return f.m.Path()
}

// Version is the file's GGUF version (2 or 3).
func (f *File) Version() int { return int(f.version) }

// Alignment is the data alignment in bytes.
func (f *File) Alignment() int { return f.alignment }

// Keys lists the metadata keys in file order.
func (f *File) Keys() []string { return append([]string(nil), f.keys...) }

// Get is a metadata value.
func (f *File) Get(key string) (Value, bool) {
	v, ok := f.meta[key]
	return v, ok
}

// Tensors lists the tensors in file order.
func (f *File) Tensors() []TensorInfo {
	out := make([]TensorInfo, len(f.tensors))
	for i, t := range f.tensors {
		t.Dims = append([]int(nil), t.Dims...)
		out[i] = t
	}
	return out
}

// Tensor is the info of the tensor named name.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	t := f.tensors[i]
	t.Dims = append([]int(nil), t.Dims...)
	return t, true
}

// Data is a tensor's bytes, in place in the file (no copy): read-only, and
// valid until Close.
func (f *File) Data(t TensorInfo) ([]byte, error) {
	const op = "File.Data"
	i, ok := f.byName[t.Name]
	if !ok {
		return nil, f.errorf(op, errs.ErrNotFound, "no tensor %q", t.Name)
	}
	t = f.tensors[i]
	if !t.Type.Known() {
		return nil, f.errorf(op, errs.ErrDType, "tensor %s: type %s is not one this package decodes", t.Name, t.Type)
	}
	if f.data == nil {
		return nil, f.errorf(op, errs.ErrClosed, "tensor %s: the file is closed", t.Name)
	}
	s := f.span(t)
	return f.data[s.Start:s.End:s.End], nil
}

// Names lists the tensors, sorted (Tensors lists them in file order).
func (f *File) Names() []string {
	names := make([]string, len(f.tensors))
	for i, t := range f.tensors {
		names[i] = t.Name
	}
	slices.Sort(names)
	return names
}

// Info describes a tensor as candle.Weights do: float tensors are Dense,
// the quantized types Quantized, the types this package does not decode
// neither.
func (f *File) Info(name string) (candle.WeightInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return candle.WeightInfo{}, false
	}
	t := f.tensors[i]
	w := candle.WeightInfo{Shape: candle.Shape(t.Dims), Type: t.Type.String()}
	if dt, ok := t.Type.DType(); ok {
		w.Dense, w.DType = true, dt
	} else if t.Type.Known() && t.Type.Quantized() {
		w.Quantized, w.Quant = true, t.Type
	}
	return w, true
}

// Load puts a float tensor (F32, F16, BF16, F64) on dev in its dtype. A
// quantized one is an error of kind errs.ErrDType: LoadQ it.
func (f *File) Load(name string, dev candle.Device) (*candle.Tensor, error) {
	const op = "File.Load"
	t, err := f.tensor(op, name)
	if err != nil {
		return nil, err
	}
	dt, ok := t.Type.DType()
	if !ok {
		return nil, f.errorf(op, errs.ErrDType, "tensor %s is %s, not a float tensor: LoadQ it", name, t.Type)
	}
	var x *candle.Tensor
	if f.m != nil {
		x, err = f.m.Load(dev, dt, f.span(t), t.Dims...)
	} else {
		x, err = candle.FromBytes(dev, dt, f.data[f.span(t).Start:f.span(t).End], t.Dims...)
	}
	return x, f.wrap(op, name, err)
}

// LoadQ puts a quantized tensor on dev as its blocks. A float tensor is an
// error of kind errs.ErrDType: Load it.
func (f *File) LoadQ(name string, dev candle.Device) (*candle.QTensor, error) {
	const op = "File.LoadQ"
	t, err := f.tensor(op, name)
	if err != nil {
		return nil, err
	}
	if !t.Type.Quantized() {
		return nil, f.errorf(op, errs.ErrDType, "tensor %s is %s, not quantized: Load it", name, t.Type)
	}
	var q *candle.QTensor
	if f.m != nil {
		q, err = f.m.LoadQ(dev, t.Type, f.span(t), t.Dims...)
	} else {
		q, err = candle.NewQTensor(dev, t.Type, f.data[f.span(t).Start:f.span(t).End], t.Dims...)
	}
	return q, f.wrap(op, name, err)
}

// tensor is the tensor of the name, known and in a file still open.
func (f *File) tensor(op, name string) (TensorInfo, error) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, f.errorf(op, errs.ErrNotFound, "no tensor %s", name)
	}
	t := f.tensors[i]
	if !t.Type.Known() {
		return t, f.errorf(op, errs.ErrDType, "tensor %s: type %s is not one this package decodes", name, t.Type)
	}
	if f.data == nil {
		return t, f.errorf(op, errs.ErrClosed, "tensor %s: the file is closed", name)
	}
	return t, nil
}

// TransferStats says how the tensors loaded so far reached HIP devices
// (zero for a file Parse read, which stages what it loads).
func (f *File) TransferStats() candle.TransferStats {
	if f.m == nil {
		return candle.TransferStats{}
	}
	return f.m.TransferStats()
}

func (f *File) errorf(op string, kind error, format string, args ...any) error {
	return &errs.Error{Pkg: string(pkg), Op: op, Kind: kind, Path: f.Path(), Detail: fmt.Sprintf(format, args...)}
}

// wrap attributes a load's failure to op, naming the tensor.
func (f *File) wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	e := pkg.Wrap(op, err).(*errs.Error)
	if e.Path == "" {
		e.Path = f.Path()
	}
	e.Field = "tensor " + name
	return e
}

// reader reads little-endian values from a byte slice, remembering the
// first error: a read past the end.
type reader struct {
	b   []byte
	pos int
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = pkg.Errorf("Parse", errs.ErrFormat, "at byte %d: %s", r.pos, fmt.Sprintf(format, args...))
	}
}

func (r *reader) left() int { return len(r.b) - r.pos }

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.left() {
		r.fail("%s of %d bytes past the end of the file (%d left): truncated?", what, n, r.left())
		return nil
	}
	b := r.b[r.pos : r.pos+n]
	r.pos += n
	return b
}

func (r *reader) u8(what string) uint8 {
	if b := r.take(1, what); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16(what string) uint16 {
	if b := r.take(2, what); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32(what string) uint32 {
	if b := r.take(4, what); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64(what string) uint64 {
	if b := r.take(8, what); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// count reads a u64 count of items of at least min bytes each, checked
// against the bytes left, so that nothing is allocated for items the file
// cannot hold.
func (r *reader) count(what string, min int) int {
	n := r.u64(what)
	if r.err != nil {
		return 0
	}
	if n > uint64(r.left()/min) {
		r.fail("%s %d: the %d bytes left hold at most %d", what, n, r.left(), r.left()/min)
		return 0
	}
	return int(n)
}

func (r *reader) str(what string) string {
	n := r.count(what+"'s length", 1)
	return string(r.take(n, what))
}

// Parse reads a GGUF file held in memory. The file keeps data: Data
// returns slices of it.
func Parse(data []byte) (*File, error) {
	bad := func(format string, args ...any) error { return pkg.Errorf("Parse", errs.ErrFormat, format, args...) }
	r := &reader{b: data}
	if m := r.u32("magic"); r.err == nil && m != magic {
		if m == 0x47475546 {
			return nil, bad("a big-endian GGUF file: this package reads little-endian ones")
		}
		return nil, bad("magic %#08x is not GGUF's (%q): not a GGUF file", m, "GGUF")
	}
	f := &File{version: r.u32("version"), meta: map[string]Value{}, byName: map[string]int{}, alignment: DefaultAlignment, data: data}
	if r.err != nil {
		return nil, r.err
	}
	switch f.version {
	case 2, 3:
	case 1:
		return nil, bad("version 1 (32-bit counts) is not read: convert the file with a current llama.cpp")
	default:
		if f.version > 0xffff {
			return nil, bad("version %#x: a big-endian GGUF file? This package reads versions 2 and 3, little-endian", f.version)
		}
		return nil, bad("version %d: this package reads versions 2 and 3", f.version)
	}
	// A tensor info takes at least 24 bytes, a key-value 13.
	nt := r.count("tensor count", 24)
	nkv := r.count("metadata count", 13)
	for range nkv {
		key := r.str("a key")
		kind := Kind(r.u32("the kind of " + key))
		v := r.value(kind, key, 0)
		if r.err != nil {
			return nil, r.err
		}
		if _, dup := f.meta[key]; dup {
			return nil, bad("key %q appears twice", key)
		}
		f.meta[key] = v
		f.keys = append(f.keys, key)
	}
	if v, ok := f.meta["general.alignment"]; ok {
		a, ok := v.asUint()
		if !ok || a == 0 || a&(a-1) != 0 || a > 1<<30 {
			return nil, bad("general.alignment %v (%s): want a power of two", v, v.kind)
		}
		f.alignment = int(a)
	}
	for range nt {
		t := TensorInfo{Name: r.str("a tensor name")}
		nd := r.u32("the dims of " + t.Name)
		if r.err == nil && nd > maxDims {
			return nil, bad("tensor %s has %d dims: GGUF tensors have at most %d", t.Name, nd, maxDims)
		}
		ne := make([]uint64, nd)
		for i := range ne {
			ne[i] = r.u64("a dim of " + t.Name)
		}
		t.Type = candle.GGMLType(r.u32("the type of " + t.Name))
		t.Offset = r.u64("the offset of " + t.Name)
		if r.err != nil {
			return nil, r.err
		}
		if _, dup := f.byName[t.Name]; dup {
			return nil, bad("tensor %q appears twice", t.Name)
		}
		elems := uint64(1)
		t.Dims = make([]int, nd)
		for i, d := range ne {
			if d != 0 && elems > math.MaxInt64/d || d > math.MaxInt64 {
				return nil, bad("tensor %s: dims %v: more elements than an int64 counts", t.Name, ne)
			}
			elems *= d
			t.Dims[int(nd)-1-i] = int(d)
		}
		if t.Type.Known() {
			bs := uint64(t.Type.BlockSize())
			if nd > 0 && ne[0]%bs != 0 {
				return nil, bad("tensor %s: %s rows of %d elements: want a multiple of its block of %d", t.Name, t.Type, ne[0], bs)
			}
			if elems/bs > uint64(len(data))/uint64(t.Type.TypeSize()) {
				return nil, bad("tensor %s: %v of %s: more bytes than the file holds", t.Name, t.Dims, t.Type)
			}
			t.Bytes = int(elems / bs * uint64(t.Type.TypeSize()))
		}
		f.byName[t.Name] = len(f.tensors)
		f.tensors = append(f.tensors, t)
	}
	if r.err != nil {
		return nil, r.err
	}
	f.dataStart = alignUp(r.pos, f.alignment)
	if f.dataStart > len(data) && len(f.tensors) > 0 {
		return nil, bad("the data section starts at byte %d, past the end of the file (%d bytes): truncated?", f.dataStart, len(data))
	}
	section := uint64(max(len(data)-f.dataStart, 0))
	for _, t := range f.tensors {
		if t.Offset%uint64(f.alignment) != 0 {
			return nil, bad("tensor %s at offset %d: not a multiple of the alignment %d", t.Name, t.Offset, f.alignment)
		}
		if t.Offset > section || uint64(t.Bytes) > section-t.Offset {
			return nil, bad("tensor %s: bytes [%d, %d) of a data section of %d: out of range (truncated?)", t.Name, t.Offset,
				t.Offset+uint64(t.Bytes), section)
		}
	}
	return f, nil
}

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// maxDepth bounds arrays of arrays.
const maxDepth = 8

// value reads a value of kind.
func (r *reader) value(kind Kind, key string, depth int) Value {
	v := Value{kind: kind}
	switch kind {
	case Uint8:
		v.u = uint64(r.u8(key))
	case Uint16:
		v.u = uint64(r.u16(key))
	case Uint32:
		v.u = uint64(r.u32(key))
	case Uint64:
		v.u = r.u64(key)
	case Int8:
		v.i = int64(int8(r.u8(key)))
	case Int16:
		v.i = int64(int16(r.u16(key)))
	case Int32:
		v.i = int64(int32(r.u32(key)))
	case Int64:
		v.i = int64(r.u64(key))
	case Float32:
		v.f = float64(math.Float32frombits(r.u32(key)))
	case Float64:
		v.f = math.Float64frombits(r.u64(key))
	case Bool:
		b := r.u8(key)
		if r.err == nil && b > 1 {
			r.fail("%s: bool byte %d: want 0 or 1", key, b)
		}
		v.b = b == 1
	case String:
		v.s = r.str(key)
	case Array:
		if depth >= maxDepth {
			r.fail("%s: arrays nested deeper than %d", key, maxDepth)
			return v
		}
		v.elem = Kind(r.u32(key + "'s element kind"))
		if r.err == nil && v.elem >= numKinds {
			r.fail("%s: array of kind %d: not a GGUF value kind", key, uint32(v.elem))
			return v
		}
		n := r.count(key+"'s length", v.elem.size())
		v.arr = r.array(v.elem, n, key, depth)
	default:
		r.fail("%s: value kind %d: not a GGUF value kind", key, uint32(kind))
	}
	return v
}

// array reads n elements of kind (n checked against the bytes left).
func (r *reader) array(kind Kind, n int, key string, depth int) any {
	if r.err != nil {
		return nil
	}
	fixed := func(size int) []byte { return r.take(n*size, key) }
	switch kind {
	case Uint8:
		return append([]uint8(nil), fixed(1)...)
	case Int8:
		b := fixed(1)
		a := make([]int8, len(b))
		for i, x := range b {
			a[i] = int8(x)
		}
		return a
	case Bool:
		b := fixed(1)
		a := make([]bool, len(b))
		for i, x := range b {
			if x > 1 {
				r.fail("%s[%d]: bool byte %d: want 0 or 1", key, i, x)
				return nil
			}
			a[i] = x == 1
		}
		return a
	case Uint16, Int16:
		b := fixed(2)
		if kind == Uint16 {
			a := make([]uint16, len(b)/2)
			for i := range a {
				a[i] = binary.LittleEndian.Uint16(b[2*i:])
			}
			return a
		}
		a := make([]int16, len(b)/2)
		for i := range a {
			a[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
		}
		return a
	case Uint32, Int32, Float32:
		b := fixed(4)
		switch kind {
		case Uint32:
			a := make([]uint32, len(b)/4)
			for i := range a {
				a[i] = binary.LittleEndian.Uint32(b[4*i:])
			}
			return a
		case Int32:
			a := make([]int32, len(b)/4)
			for i := range a {
				a[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
			}
			return a
		}
		a := make([]float32, len(b)/4)
		for i := range a {
			a[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return a
	case Uint64, Int64, Float64:
		b := fixed(8)
		switch kind {
		case Uint64:
			a := make([]uint64, len(b)/8)
			for i := range a {
				a[i] = binary.LittleEndian.Uint64(b[8*i:])
			}
			return a
		case Int64:
			a := make([]int64, len(b)/8)
			for i := range a {
				a[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
			}
			return a
		}
		a := make([]float64, len(b)/8)
		for i := range a {
			a[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
		return a
	case String:
		a := make([]string, n)
		for i := range a {
			a[i] = r.str(key)
			if r.err != nil {
				return nil
			}
		}
		return a
	case Array:
		a := make([]Value, n)
		for i := range a {
			a[i] = r.value(Array, key, depth+1)
			if r.err != nil {
				return nil
			}
		}
		return a
	}
	return nil
}

// LoadSlice puts part of a float tensor on dev in its dtype: elements
// [start, start+n) of dim d, reading only those bytes of a mapped file
// (candle.SlicedWeights).
func (f *File) LoadSlice(name string, dev candle.Device, d, start, n int) (*candle.Tensor, error) {
	const op = "File.LoadSlice"
	t, err := f.tensor(op, name)
	if err != nil {
		return nil, err
	}
	dt, ok := t.Type.DType()
	if !ok {
		return nil, f.errorf(op, errs.ErrDType, "tensor %s is %s, not a float tensor: LoadQSlice it", name, t.Type)
	}
	if f.m != nil {
		x, err := f.m.LoadSlice(dev, dt, f.span(t), t.Dims, d, start, n)
		return x, f.wrap(op, name, err)
	}
	whole, err := f.Load(name, dev) // a parsed file is in memory already
	if err != nil {
		return nil, err
	}
	defer whole.Close()
	v, err := whole.Narrow(d, start, n)
	if err != nil {
		return nil, f.wrap(op, name, err)
	}
	defer v.Close()
	x, err := v.Contiguous()
	return x, f.wrap(op, name, err)
}

// LoadQSlice puts part of a quantized tensor on dev as its blocks, as
// LoadSlice: along the last dim, start and n are whole blocks. A float
// tensor is an error of kind errs.ErrDType: LoadSlice it.
func (f *File) LoadQSlice(name string, dev candle.Device, d, start, n int) (*candle.QTensor, error) {
	const op = "File.LoadQSlice"
	t, err := f.tensor(op, name)
	if err != nil {
		return nil, err
	}
	if !t.Type.Quantized() {
		return nil, f.errorf(op, errs.ErrDType, "tensor %s is %s, not quantized: LoadSlice it", name, t.Type)
	}
	if f.m == nil {
		return nil, f.errorf(op, errs.ErrUnsupported, "tensor %s: slices load from a mapped file (Open), not a parsed one", name)
	}
	q, err := f.m.LoadQSlice(dev, t.Type, f.span(t), t.Dims, d, start, n)
	return q, f.wrap(op, name, err)
}
