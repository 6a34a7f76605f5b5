package gguf

import (
	"bufio"
	"encoding/binary"
	"io"
	"math"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/errs"
)

// KV is a metadata entry to write: Value is a Go value ValueOf takes, or a
// Value.
type KV struct {
	Key   string
	Value any
}

// TensorSpec is a tensor to write: its name, dims in candle's order and
// type; its bytes come later, through Writer.WriteTensor.
type TensorSpec struct {
	Name string
	Dims []int
	Type candle.GGMLType
}

// Writer writes a GGUF version 3 file: NewWriter writes the header (the
// metadata and the tensor infos, offsets computed from the specs), then
// WriteTensor writes each tensor's bytes in the specs' order, so that a
// model's tensors need not all be in memory at once.
type Writer struct {
	w         *bufio.Writer
	specs     []TensorSpec
	sizes     []int
	next      int
	pos       int64
	alignment int
	err       error
}

// NewWriter writes the header of a file with meta (general.alignment, if
// given, sets the alignment) and the tensors of specs to w.
func NewWriter(w io.Writer, meta []KV, specs []TensorSpec) (*Writer, error) {
	gw := &Writer{w: bufio.NewWriterSize(w, 1<<20), alignment: DefaultAlignment}
	vals := make([]Value, len(meta))
	seen := map[string]bool{}
	for i, kv := range meta {
		v, err := ValueOf(kv.Value)
		if err != nil {
			return nil, pkg.Wrapf("NewWriter", err, "metadata %s", kv.Key)
		}
		if seen[kv.Key] {
			return nil, pkg.Errorf("NewWriter", errs.ErrArgument, "metadata %s given twice", kv.Key)
		}
		seen[kv.Key] = true
		vals[i] = v
		if kv.Key == "general.alignment" {
			a, ok := v.asUint()
			if v.kind != Uint32 || !ok || a == 0 || a&(a-1) != 0 || a > 1<<30 {
				return nil, pkg.Errorf("NewWriter", errs.ErrArgument, "general.alignment %v: want a u32 power of two", v)
			}
			gw.alignment = int(a)
		}
	}
	names := map[string]bool{}
	var offset int64
	offsets := make([]int64, len(specs))
	for i, s := range specs {
		if names[s.Name] {
			return nil, pkg.Errorf("NewWriter", errs.ErrArgument, "tensor %s given twice", s.Name)
		}
		names[s.Name] = true
		if len(s.Dims) > maxDims {
			return nil, pkg.Errorf("NewWriter", errs.ErrShape, "tensor %s: %d dims, GGUF has at most %d", s.Name, len(s.Dims), maxDims)
		}
		n := 1
		for _, d := range s.Dims {
			if d < 0 || (d > 0 && n > math.MaxInt/d) {
				return nil, pkg.Errorf("NewWriter", errs.ErrShape, "tensor %s: dims %v", s.Name, s.Dims)
			}
			n *= d
		}
		last := 1
		if len(s.Dims) > 0 {
			last = s.Dims[len(s.Dims)-1]
		}
		row, err := s.Type.RowBytes(last)
		if err != nil {
			return nil, pkg.Wrapf("NewWriter", err, "tensor %s", s.Name)
		}
		size := row
		if last > 0 {
			size = n / last * row
		}
		gw.sizes = append(gw.sizes, size)
		offsets[i] = offset
		offset = int64(alignUp(int(offset)+size, gw.alignment))
	}
	gw.specs = specs
	gw.u32(magic)
	gw.u32(3)
	gw.u64(uint64(len(specs)))
	gw.u64(uint64(len(meta)))
	for i, kv := range meta {
		gw.str(kv.Key)
		gw.u32(uint32(vals[i].kind))
		gw.value(vals[i])
	}
	for i, s := range specs {
		gw.str(s.Name)
		gw.u32(uint32(len(s.Dims)))
		for j := len(s.Dims) - 1; j >= 0; j-- {
			gw.u64(uint64(s.Dims[j]))
		}
		gw.u32(uint32(s.Type))
		gw.u64(uint64(offsets[i]))
	}
	gw.pad()
	if gw.err != nil {
		return nil, gw.err
	}
	return gw, nil
}

func (w *Writer) write(b []byte) {
	if w.err != nil {
		return
	}
	if _, err := w.w.Write(b); err != nil {
		w.err = pkg.Wrapf("Writer", err, "writing at byte %d", w.pos)
	}
	w.pos += int64(len(b))
}

func (w *Writer) u32(v uint32) { w.write(binary.LittleEndian.AppendUint32(nil, v)) }
func (w *Writer) u64(v uint64) { w.write(binary.LittleEndian.AppendUint64(nil, v)) }
func (w *Writer) str(s string) { w.u64(uint64(len(s))); w.write([]byte(s)) }

func (w *Writer) pad() {
	if n := alignUp(int(w.pos), w.alignment) - int(w.pos); n > 0 {
		w.write(make([]byte, n))
	}
}

// value writes a value's payload (its kind is written by the caller).
func (w *Writer) value(v Value) {
	switch v.kind {
	case Uint8, Int8, Bool:
		b := byte(v.u)
		if v.kind == Int8 {
			b = byte(int8(v.i))
		}
		if v.kind == Bool && v.b {
			b = 1
		}
		w.write([]byte{b})
	case Uint16:
		w.write(binary.LittleEndian.AppendUint16(nil, uint16(v.u)))
	case Int16:
		w.write(binary.LittleEndian.AppendUint16(nil, uint16(int16(v.i))))
	case Uint32:
		w.u32(uint32(v.u))
	case Int32:
		w.u32(uint32(int32(v.i)))
	case Float32:
		w.u32(math.Float32bits(float32(v.f)))
	case Uint64:
		w.u64(v.u)
	case Int64:
		w.u64(uint64(v.i))
	case Float64:
		w.u64(math.Float64bits(v.f))
	case String:
		w.str(v.s)
	case Array:
		w.u32(uint32(v.elem))
		w.u64(uint64(v.Len()))
		w.array(v.arr)
	}
}

func (w *Writer) array(arr any) {
	var b []byte
	switch a := arr.(type) {
	case []uint8:
		b = a
	case []int8:
		for _, x := range a {
			b = append(b, byte(x))
		}
	case []bool:
		for _, x := range a {
			if x {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		}
	case []uint16:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint16(b, x)
		}
	case []int16:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint16(b, uint16(x))
		}
	case []uint32:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint32(b, x)
		}
	case []int32:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		}
	case []float32:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
	case []uint64:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint64(b, x)
		}
	case []int64:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		}
	case []float64:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		}
	case []string:
		for _, s := range a {
			w.str(s)
		}
	case []Value:
		for _, v := range a { // an element's kind is the array's: no tag
			w.value(v)
		}
	}
	w.write(b)
}

// WriteTensor writes the next tensor's bytes: data is the tensor the specs
// name next, of exactly its size.
func (w *Writer) WriteTensor(name string, data []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.next >= len(w.specs) {
		return pkg.Errorf("Writer.WriteTensor", errs.ErrArgument, "%s: every tensor is written", name)
	}
	s := w.specs[w.next]
	if name != s.Name {
		return pkg.Errorf("Writer.WriteTensor", errs.ErrArgument, "%s: the next tensor is %s (tensors are written in the specs' order)", name, s.Name)
	}
	if len(data) != w.sizes[w.next] {
		return pkg.Errorf("Writer.WriteTensor", errs.ErrShape, "%s: %d bytes, want %d for %s %v", name, len(data), w.sizes[w.next], s.Type, s.Dims)
	}
	w.write(data)
	w.pad()
	w.next++
	return w.err
}

// Close flushes the file; every tensor must have been written.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.next < len(w.specs) {
		return pkg.Errorf("Writer.Close", errs.ErrArgument, "tensor %s and %d more not written", w.specs[w.next].Name, len(w.specs)-w.next-1)
	}
	return pkg.Wrap("Writer.Close", w.w.Flush())
}
