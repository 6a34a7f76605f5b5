package candle

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"sync"
	"syscall"

	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/hip"
)

// Span is a tensor's bytes in a file: [Start, End).
type Span struct{ Start, End int }

// MappedFile is a checkpoint file (safetensors, GGUF) mapped read-only into
// memory, and the way its tensors reach devices: the CPU device reads the
// mapping, a HIP device gets each tensor by DMA through the pipelined
// upload that Transfer describes. The file formats (candle/gguf,
// candle/safetensors) parse its bytes and load their tensors through
// Load and LoadQ. It is safe for many goroutines; Close unmaps it.
type MappedFile struct {
	path     string
	file     *os.File // what HIP loads read (pread); nil when closed
	mapped   []byte   // the whole file; nil when closed
	transfer Transfer
	spans    []Span // the tensors the file holds (SetTensors)

	mu     sync.Mutex // guards ups, staged and closed
	ups    map[*HIPDevice]*uploader
	staged int64
	closed bool
}

// MapFile maps the file at path read-only; opts say how its tensors move
// to a HIP device (WithTransfer). A file that does not exist is an error
// of kind errs.ErrNotFound, an empty one of errs.ErrFormat.
func MapFile(path string, opts ...LoadOption) (*MappedFile, error) {
	const op = "MapFile"
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrNotFound, Path: path, Detail: "no such file", Err: err}
		}
		return nil, pkg.Wrap(op, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, pkg.Wrap(op, err)
	}
	size := st.Size()
	var fail string
	switch {
	case st.IsDir():
		fail = "a folder, not a file"
	case size == 0:
		fail = "an empty file"
	case size > math.MaxInt:
		fail = "more bytes than this platform maps"
	}
	if fail != "" {
		f.Close()
		return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: path, Detail: fail}
	}
	mapped, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrIO, Path: path, Detail: "mapping the file", Err: err}
	}
	// Read ahead: a model loads every byte of its files, in order.
	_ = syscall.Madvise(mapped, syscall.MADV_WILLNEED)
	m := &MappedFile{path: path, file: f, mapped: mapped}
	for _, o := range opts {
		o(&m.transfer)
	}
	return m, nil
}

// Path is the file's path.
func (m *MappedFile) Path() string { return m.path }

// Bytes is the whole file, read-only; nil once closed.
func (m *MappedFile) Bytes() []byte { return m.mapped }

// Transfer is how the file's tensors move to a HIP device.
func (m *MappedFile) Transfer() Transfer { return m.transfer }

// SetTensors tells the upload where the file's tensors are, before the
// first load: a chunk read for a HIP device is let go once every tensor in
// it has loaded. Spans of tensors that will not load (a dtype candle does
// not hold) are left out, else their chunks stay until Close.
func (m *MappedFile) SetTensors(spans []Span) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.spans = spans
}

// check checks a load's span against the file and the size its dtype and
// shape give.
func (m *MappedFile) check(op string, s Span, size int) error {
	if m.mapped == nil {
		return &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrClosed, Path: m.path, Detail: "the file is closed"}
	}
	if s.Start < 0 || s.End < s.Start || s.End > len(m.mapped) {
		return &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrArgument, Path: m.path,
			Detail: fmt.Sprintf("bytes [%d, %d) outside the file's %d", s.Start, s.End, len(m.mapped))}
	}
	if s.End-s.Start != size {
		return pkg.Errorf(op, errs.ErrShape, "%s: %d bytes for a tensor of %d", m.path, s.End-s.Start, size)
	}
	return nil
}

// Load copies bytes s of the file to dev as a tensor of dt and shape
// (row-major, as safetensors and GGUF lay tensors out).
func (m *MappedFile) Load(dev Device, dt DType, s Span, shape ...int) (*Tensor, error) {
	const op = "MappedFile.Load"
	if dev == nil {
		return nil, pkg.Errorf(op, errs.ErrDevice, "nil device")
	}
	if !dt.valid() {
		return nil, pkg.Errorf(op, errs.ErrDType, "%v is not a dtype", dt)
	}
	if err := Shape(shape).check(op); err != nil {
		return nil, err
	}
	if err := m.check(op, s, Shape(shape).Elems()*dt.Size()); err != nil {
		return nil, err
	}
	hd, ok := dev.(*HIPDevice)
	if ok && !m.transfer.Staging {
		t, err := newOutput(op, dev, dt, Shape(shape))
		if err != nil {
			return nil, err
		}
		err = m.upload(op, hd, t.st, s)
		if err == nil {
			return t, nil
		}
		t.Close()
		if !errors.Is(err, errStage) {
			return nil, err
		}
		// Reading or registering failed: stage this tensor and the rest.
	}
	t, err := FromBytes(dev, dt, m.mapped[s.Start:s.End], shape...)
	if ok && err == nil {
		m.addStaged(s)
	}
	return t, pkg.Wrap(op, err)
}

// LoadQ copies bytes s of the file, the blocks of a quantized tensor of
// typ and shape (as NewQTensor takes them), to dev.
func (m *MappedFile) LoadQ(dev Device, typ GGMLType, s Span, shape ...int) (*QTensor, error) {
	const op = "MappedFile.LoadQ"
	if dev == nil {
		return nil, pkg.Errorf(op, errs.ErrDevice, "nil device")
	}
	size, err := checkQShape(op, typ, shape)
	if err != nil {
		return nil, err
	}
	if err := m.check(op, s, size); err != nil {
		return nil, err
	}
	hd, ok := dev.(*HIPDevice)
	if ok && !m.transfer.Staging {
		st, err := newStorage(op, dev, U8, size)
		if err != nil {
			return nil, err
		}
		err = m.upload(op, hd, st, s)
		if err == nil {
			return &QTensor{st: st, typ: typ, shape: Shape(shape).Clone()}, nil
		}
		st.release()
		if !errors.Is(err, errStage) {
			return nil, err
		}
	}
	q, err := NewQTensor(dev, typ, m.mapped[s.Start:s.End], shape...)
	if ok && err == nil {
		m.addStaged(s)
	}
	return q, pkg.Wrap(op, err)
}

func (m *MappedFile) addStaged(s Span) {
	m.mu.Lock()
	m.staged += int64(s.End - s.Start)
	m.mu.Unlock()
}

// upload copies bytes s into dst through the file's uploader to dev. An
// error that wraps errStage means the file could not be read or
// registered: the caller stages.
func (m *MappedFile) upload(op string, dev *HIPDevice, dst *Storage, s Span) error {
	up := m.uploader(dev)
	if up == nil {
		return &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrClosed, Path: m.path, Detail: "the file is closed"}
	}
	err := up.load(dst, s)
	switch {
	case err == nil, errors.Is(err, errStage):
		return err
	case errors.Is(err, errClosing):
		return &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrClosed, Path: m.path, Detail: "the file is closed"}
	}
	w := pkg.Wrap(op, err).(*errs.Error)
	w.Path = m.path
	return w
}

// uploader is the file's uploader to dev, made on first use; nil once the
// file is closed.
func (m *MappedFile) uploader(dev *HIPDevice) *uploader {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	if up := m.ups[dev]; up != nil {
		return up
	}
	if m.ups == nil {
		m.ups = map[*HIPDevice]*uploader{}
	}
	up := newUploader(dev, m.file, m.mapped, m.transfer, m.spans)
	m.ups[dev] = up
	return up
}

// TransferStats says how the tensors loaded so far reached HIP devices.
func (m *MappedFile) TransferStats() TransferStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := TransferStats{Staged: m.staged}
	for _, up := range m.ups {
		st.Add(up.readStats())
	}
	return st
}

// Close waits for the copies still reading the file, releases its chunks
// (their pinned buffers go back to the process's, registered ones are
// unregistered), unmaps it and closes it; the tensors loaded from it stay
// valid. Closing twice does nothing.
func (m *MappedFile) Close() error {
	m.mu.Lock()
	if m.closed || m.mapped == nil {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	ups := m.ups
	m.mu.Unlock()
	var failed []error
	for _, up := range ups {
		failed = append(failed, up.close())
	}
	failed = append(failed, syscall.Munmap(m.mapped), m.file.Close())
	m.file, m.mapped = nil, nil
	return pkg.Wrap("MappedFile.Close", errors.Join(failed...))
}

// copyPinned queues a copy of src into dst's bytes from byte off on the
// device's stream.
func (d *HIPDevice) copyPinned(dst *Storage, off int, src *hip.PinnedBuffer) error {
	buf, err := dst.mem.(*block).buf.Slice(off, src.Size())
	if err != nil {
		return err
	}
	return buf.CopyFromHostAsync(src, d.stream)
}
