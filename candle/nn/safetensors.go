package nn

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/rocm-go/rocm/candle"
)

// ErrFormat is the error of a file that is not what it claims to be: a
// safetensors file with a bad header, offsets out of range, a truncated
// body, or an index that names no file.
var ErrFormat = errors.New("bad model file")

// ErrMissing is the error of a tensor that the files do not hold.
var ErrMissing = errors.New("no such tensor")

// maxHeader bounds a safetensors header, as the format's reference
// implementation does (100 MB): a larger length is a corrupt file, never
// an allocation.
const maxHeader = 100 << 20

// TensorInfo is one tensor of a safetensors file: its dtype as the file
// names it ("F16", "BF16", ...), its shape, and its bytes' range in the
// data that follows the header.
type TensorInfo struct {
	DType      string
	Shape      []int
	Begin, End int
}

// Safetensors is a safetensors file mapped into memory: tensors load from
// the page cache straight to a device, with one copy (see Transfer).
type Safetensors struct {
	path     string
	file     *os.File // what HIP loads read (pread); nil when closed
	mapped   []byte   // the whole file; nil when closed
	data     []byte   // what follows the header
	base     int      // where data starts in mapped
	tensors  map[string]TensorInfo
	metadata map[string]string
	transfer Transfer

	mu     sync.Mutex // guards ups, staged and closed
	ups    map[*candle.HIPDevice]*uploader
	staged int64
	closed bool
}

// OpenSafetensors maps a safetensors file and checks its header: every
// tensor's dtype, shape and byte range (within the file, of the size its
// shape and dtype give). It is read-only and safe for many goroutines;
// Close unmaps it. opts say how tensors move to a HIP device (WithTransfer).
func OpenSafetensors(path string, opts ...LoadOption) (*Safetensors, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("nn: %w", err)
	}
	// Kept open for loads to a HIP device, which read it (Transfer).
	keep := false
	defer func() {
		if !keep {
			f.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("nn: %w", err)
	}
	size := st.Size()
	if size < 8 {
		return nil, fmt.Errorf("nn: %s: %d bytes, too short for a safetensors header: %w", path, size, ErrFormat)
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("nn: %s: %d bytes, more than this platform maps: %w", path, size, ErrFormat)
	}
	mapped, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("nn: mapping %s: %w", path, err)
	}
	// Read ahead: a model loads every byte of its files, in order.
	_ = syscall.Madvise(mapped, syscall.MADV_WILLNEED)
	s, err := parseSafetensors(mapped)
	if err != nil {
		syscall.Munmap(mapped)
		return nil, fmt.Errorf("nn: %s: %w", path, err)
	}
	s.path, s.file, s.mapped = path, f, mapped
	keep = true
	for _, o := range opts {
		o(&s.transfer)
	}
	return s, nil
}

// parseSafetensors reads the header of a whole file's bytes.
func parseSafetensors(b []byte) (*Safetensors, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("%d bytes, too short for a safetensors header: %w", len(b), ErrFormat)
	}
	n := binary.LittleEndian.Uint64(b)
	if n > maxHeader || n > uint64(len(b)-8) {
		return nil, fmt.Errorf("a header of %d bytes in a file of %d (at most %d): %w", n, len(b), min(maxHeader, len(b)-8), ErrFormat)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &raw); err != nil {
		return nil, fmt.Errorf("the header is not a JSON object: %v: %w", err, ErrFormat)
	}
	s := &Safetensors{data: b[8+n:], base: 8 + int(n), tensors: make(map[string]TensorInfo, len(raw))}
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &s.metadata); err != nil {
				return nil, fmt.Errorf("__metadata__ is not an object of strings: %v: %w", err, ErrFormat)
			}
			continue
		}
		var e struct {
			DType   string `json:"dtype"`
			Shape   []int  `json:"shape"`
			Offsets []int  `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, fmt.Errorf("tensor %q: %v: %w", name, err, ErrFormat)
		}
		size, ok := dtypeSize(e.DType)
		if !ok {
			return nil, fmt.Errorf("tensor %q: unknown dtype %q: %w", name, e.DType, ErrFormat)
		}
		if len(e.Offsets) != 2 {
			return nil, fmt.Errorf("tensor %q: data_offsets %v: want [begin, end]: %w", name, e.Offsets, ErrFormat)
		}
		elems := 1
		for _, d := range e.Shape {
			if d < 0 || d > 0 && elems > math.MaxInt/d {
				return nil, fmt.Errorf("tensor %q: shape %v: %w", name, e.Shape, ErrFormat)
			}
			elems *= d
		}
		begin, end := e.Offsets[0], e.Offsets[1]
		switch {
		case begin < 0 || end < begin || end > len(s.data):
			return nil, fmt.Errorf("tensor %q: bytes [%d, %d) outside the %d bytes of data (a truncated file?): %w", name, begin, end, len(s.data), ErrFormat)
		case elems > math.MaxInt/size || end-begin != elems*size:
			return nil, fmt.Errorf("tensor %q: %d bytes for shape %v of %s (%d bytes): %w", name, end-begin, e.Shape, e.DType, elems*size, ErrFormat)
		}
		s.tensors[name] = TensorInfo{DType: e.DType, Shape: e.Shape, Begin: begin, End: end}
	}
	return s, nil
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

// Names lists the file's tensors, sorted.
func (s *Safetensors) Names() []string {
	names := make([]string, 0, len(s.tensors))
	for n := range s.tensors {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Info describes a tensor of the file.
func (s *Safetensors) Info(name string) (TensorInfo, bool) {
	i, ok := s.tensors[name]
	return i, ok
}

// Metadata is the file's __metadata__ (nil when it has none).
func (s *Safetensors) Metadata() map[string]string { return s.metadata }

// Load copies a tensor from the file to dev, in the file's dtype.
func (s *Safetensors) Load(name string, dev candle.Device) (*candle.Tensor, error) {
	if s.mapped == nil {
		return nil, fmt.Errorf("nn: %s: the file is closed", s.path)
	}
	info, ok := s.tensors[name]
	if !ok {
		return nil, fmt.Errorf("nn: %s has no tensor %q: %w", s.path, name, ErrMissing)
	}
	// candle's dtypes are named as safetensors names them, in lower case;
	// the others (I32, BOOL, F8_E4M3, ...) candle does not hold.
	dt, err := candle.ParseDType(info.DType)
	if err != nil {
		return nil, fmt.Errorf("nn: %s: tensor %q is %s, a dtype candle does not hold: %w", s.path, name, info.DType, candle.ErrDType)
	}
	if hd, ok := dev.(*candle.HIPDevice); ok && !s.transfer.Staging {
		up := s.uploader(hd)
		if up == nil {
			return nil, fmt.Errorf("nn: %s: the file is closed", s.path)
		}
		t, err := up.load(name, dt, span{s.base + info.Begin, s.base + info.End}, info.Shape)
		switch {
		case err == nil:
			return t, nil
		case errors.Is(err, errClosing):
			return nil, fmt.Errorf("nn: %s: the file is closed", s.path)
		case !errors.Is(err, errStage):
			return nil, fmt.Errorf("nn: %s: tensor %q: %w", s.path, name, err)
		}
		// Registration failed: stage this tensor and the rest.
	}
	t, err := candle.FromBytes(dev, dt, s.data[info.Begin:info.End], info.Shape...)
	if _, ok := dev.(*candle.HIPDevice); ok && err == nil {
		s.mu.Lock()
		s.staged += int64(info.End - info.Begin)
		s.mu.Unlock()
	}
	return t, err
}

// uploader is the file's uploader to dev, made on first use; nil once the
// file is closed.
func (s *Safetensors) uploader(dev *candle.HIPDevice) *uploader {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if up := s.ups[dev]; up != nil {
		return up
	}
	var spans []span
	for _, info := range s.tensors {
		if _, err := candle.ParseDType(info.DType); err == nil {
			spans = append(spans, span{s.base + info.Begin, s.base + info.End})
		}
	}
	if s.ups == nil {
		s.ups = map[*candle.HIPDevice]*uploader{}
	}
	up := newUploader(dev, s.file, s.mapped, s.transfer, spans)
	s.ups[dev] = up
	return up
}

// TransferStats says how the tensors loaded so far reached HIP devices.
func (s *Safetensors) TransferStats() TransferStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := TransferStats{Staged: s.staged}
	for _, up := range s.ups {
		st.add(up.readStats())
	}
	return st
}

// Close waits for the copies still reading the file, releases its chunks
// (their pinned buffers go back to the process's, registered ones are
// unregistered), unmaps it and closes it; the tensors loaded from it stay
// valid.
func (s *Safetensors) Close() error {
	s.mu.Lock()
	if s.closed || s.mapped == nil {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ups := s.ups
	s.mu.Unlock()
	var errs []error
	for _, up := range ups {
		errs = append(errs, up.close())
	}
	errs = append(errs, syscall.Munmap(s.mapped), s.file.Close())
	s.file, s.mapped, s.data = nil, nil, nil
	return errors.Join(errs...)
}

// SaveSafetensors writes tensors to a safetensors file at path, sorted by
// name, with metadata (may be nil) as its __metadata__. The file appears
// whole or not at all: it is written beside path and renamed over it.
func SaveSafetensors(path string, tensors map[string]*candle.Tensor, metadata map[string]string) (err error) {
	names := make([]string, 0, len(tensors))
	for n, t := range tensors {
		switch {
		case n == "" || n == "__metadata__":
			return fmt.Errorf("nn: saving %s: %q is not a tensor name", path, n)
		case t == nil:
			return fmt.Errorf("nn: saving %s: tensor %q is nil", path, n)
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
		return fmt.Errorf("nn: saving %s: %w", path, err)
	}
	// Pad the header with spaces so that the data starts 8-byte aligned.
	h = append(h, bytes.Repeat([]byte{' '}, (8-len(h)%8)%8)...)

	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("nn: saving %s: %w", path, err)
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
			return fmt.Errorf("nn: saving %s: tensor %q: %w", path, n, err)
		}
		w.Write(b)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("nn: saving %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("nn: saving %s: %w", path, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("nn: saving %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("nn: saving %s: %w", path, err)
	}
	return nil
}
