package candle

import (
	"fmt"
	"math"
	"runtime"
	"sync/atomic"

	"github.com/rocm-go/rocm/hip"
)

// Storage is a typed buffer on a device: the memory that tensors view.
// Tensors made by ops own their storage; views (Reshape, Transpose,
// Narrow, ...) share it. A storage counts its users (its owner, until
// Close, and the tensors made from it) and gives its memory back to the
// device when the last one closes. A garbage-collector cleanup gives back
// the memory of a storage that became unreachable unclosed, as a backstop
// only.
type Storage struct {
	dev   Device
	dtype DType
	n     int
	mem   memory // nil when n == 0
	refs  atomic.Int64
	owned atomic.Bool // the owner's reference is held (NewStorage, ToDType, Copy)
	// backstop gives the memory back if the storage becomes unreachable
	// unclosed; the last release stops it, which keeps the runtime's list
	// of cleanups short (four times cheaper per op than leaving it).
	backstop runtime.Cleanup
}

// newStorage allocates n uninitialized elements, with one reference for
// the caller.
func newStorage(op string, dev Device, dt DType, n int) (*Storage, error) {
	if n > math.MaxInt/dt.Size() {
		return nil, pkg.Errorf(op, ErrOutOfMemory, "%d elements of %s are more bytes than an int counts", n, dt)
	}
	st := &Storage{dev: dev, dtype: dt, n: n}
	st.refs.Store(1)
	if n == 0 {
		return st, nil
	}
	mem, err := dev.backend().alloc(dt, n)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	st.mem = mem
	// The cleanup's argument is the memory, not the storage, which would
	// never become unreachable; releasing memory twice is a no-op.
	st.backstop = runtime.AddCleanup(st, memory.release, mem)
	return st, nil
}

// NewStorage copies host data into a new storage on dev; the dtype is the
// elements'.
func NewStorage[T Element](dev Device, data []T) (*Storage, error) {
	const op = "NewStorage"
	if dev == nil {
		return nil, pkg.Errorf(op, ErrDevice, "nil device")
	}
	st, err := storageOf(op, dev, DTypeOf[T](), len(data), hip.AsBytes(data))
	if err != nil {
		return nil, err
	}
	st.owned.Store(true)
	return st, nil
}

// storageOf is a new storage of n elements holding data's bytes.
func storageOf(op string, dev Device, dt DType, n int, data []byte) (*Storage, error) {
	st, err := newStorage(op, dev, dt, n)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		if err := dev.backend().write(st, data); err != nil {
			st.release()
			return nil, pkg.Wrap(op, err)
		}
	}
	return st, nil
}

// Device is the device the storage is on.
func (s *Storage) Device() Device { return s.dev }

// DType is the elements' type.
func (s *Storage) DType() DType { return s.dtype }

// Len is the number of elements.
func (s *Storage) Len() int { return s.n }

// Bytes is the size in bytes.
func (s *Storage) Bytes() int { return s.n * s.dtype.Size() }

func (s *Storage) String() string {
	return fmt.Sprintf("candle.Storage(%d × %s on %s)", s.n, s.dtype, s.dev)
}

func (s *Storage) alive(op string) error {
	if s == nil {
		return pkg.Errorf(op, ErrArgument, "nil storage")
	}
	if !s.owned.Load() || s.refs.Load() <= 0 {
		return &Error{Pkg: string(pkg), Op: op, Kind: ErrClosed, Detail: "use of a closed storage", Err: ErrClosed}
	}
	return nil
}

// retain adds a user; it fails once the storage is closed.
func (s *Storage) retain() bool {
	for {
		r := s.refs.Load()
		if r <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// release drops a user; the last one gives the memory back.
func (s *Storage) release() {
	if s.refs.Add(-1) == 0 && s.mem != nil {
		s.backstop.Stop()
		s.mem.release()
	}
}

// Close drops the owner's reference; the memory goes back once the
// tensors made from the storage are closed too. Closing twice does
// nothing.
func (s *Storage) Close() error {
	if s != nil && s.owned.CompareAndSwap(true, false) {
		s.release()
	}
	return nil
}

// Read copies the storage to dst, a slice of the dtype's Go type
// (Element) of exactly Len elements; on a GPU it waits for the work that
// writes the storage.
func (s *Storage) Read(dst any) error {
	const op = "Storage.Read"
	if err := s.alive(op); err != nil {
		return err
	}
	b, err := hostBytes(op, s.dtype, s.n, dst)
	if err != nil || s.n == 0 {
		return err
	}
	return pkg.Wrap(op, s.dev.backend().read(s, 0, s.n, b))
}

// Write copies src, a slice of the dtype's Go type of exactly Len
// elements, into the storage.
func (s *Storage) Write(src any) error {
	const op = "Storage.Write"
	if err := s.alive(op); err != nil {
		return err
	}
	b, err := hostBytes(op, s.dtype, s.n, src)
	if err != nil || s.n == 0 {
		return err
	}
	return pkg.Wrap(op, s.dev.backend().write(s, b))
}

// hostBytes checks that x is a slice of dt's Go type with n elements and
// returns its bytes.
func hostBytes(op string, dt DType, n int, x any) ([]byte, error) {
	var b []byte
	var got int
	ok := true
	switch v := x.(type) {
	case []float32:
		b, got, ok = hip.AsBytes(v), len(v), dt == F32
	case []hip.Half:
		b, got, ok = hip.AsBytes(v), len(v), dt == F16
	case []hip.BFloat16:
		b, got, ok = hip.AsBytes(v), len(v), dt == BF16
	case []float64:
		b, got, ok = hip.AsBytes(v), len(v), dt == F64
	case []uint8:
		b, got, ok = v, len(v), dt == U8
	case []uint32:
		b, got, ok = hip.AsBytes(v), len(v), dt == U32
	case []int64:
		b, got, ok = hip.AsBytes(v), len(v), dt == I64
	default:
		ok = false
	}
	if !ok {
		return nil, pkg.Errorf(op, ErrDType, "%T for %s data: want []%s", x, dt, dt.hostType())
	}
	if got != n {
		return nil, pkg.Errorf(op, ErrShape, "%d elements for %d", got, n)
	}
	return b, nil
}

// ToDType converts the storage to another dtype, in a new storage (a copy
// for its own dtype).
func (s *Storage) ToDType(dt DType) (*Storage, error) {
	if dt == s.dtype {
		return s.Copy()
	}
	return s.through("Storage.ToDType", func(t *Tensor) (*Tensor, error) { return t.ToDType(dt) })
}

// Copy is a copy of the storage, on the same device.
func (s *Storage) Copy() (*Storage, error) {
	return s.through("Storage.Copy", (*Tensor).Copy)
}

// through runs a tensor op on the storage seen as 1-D and returns the
// result's storage.
func (s *Storage) through(op string, f func(*Tensor) (*Tensor, error)) (*Storage, error) {
	if err := s.alive(op); err != nil {
		return nil, err
	}
	t, err := FromStorage(s, Shape{s.n})
	if err != nil {
		return nil, err
	}
	defer t.Close()
	out, err := f(t)
	if err != nil {
		return nil, err
	}
	return out.detach(), nil
}

// bytesAt views n elements of a CPU storage from element off.
func (s *Storage) bytesAt(off, n int) []byte {
	m := s.mem.(*cpuMemory)
	sz := s.dtype.Size()
	return m.b[off*sz : (off+n)*sz]
}

// Copy2D copies a block of rows × cols elements from s into dst, which
// share a dtype and device: row r of the block starts at element
// srcOffset + r·srcStride of s and dstOffset + r·dstStride of dst (the
// strides are in elements). It is candle's copy2d, the move behind KV
// caches and concatenations that a worker writes itself. The block must
// lie inside both storages, and dst's rows must not overlap
// (dstStride ≥ cols); when s is dst, the two blocks must not overlap
// either (the GPU copies rows in no set order).
func (s *Storage) Copy2D(dst *Storage, rows, cols, srcStride, dstStride, srcOffset, dstOffset int) error {
	const op = "Storage.Copy2D"
	if err := s.alive(op); err != nil {
		return err
	}
	if err := dst.alive(op); err != nil {
		return err
	}
	if dst.dev != s.dev {
		return pkg.Errorf(op, ErrDevice, "source on %s, destination on %s: move one first", s.dev, dst.dev)
	}
	if dst.dtype != s.dtype {
		return pkg.Errorf(op, ErrDType, "%s source, %s destination", s.dtype, dst.dtype)
	}
	if rows < 0 || cols < 0 || srcStride < 0 || dstStride < 0 || srcOffset < 0 || dstOffset < 0 {
		return pkg.Errorf(op, ErrArgument, "rows %d, cols %d, strides %d and %d, offsets %d and %d: none may be negative",
			rows, cols, srcStride, dstStride, srcOffset, dstOffset)
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	if rows > 1 && dstStride < cols {
		return pkg.Errorf(op, ErrArgument, "destination stride %d is less than a row of %d: the rows would overlap", dstStride, cols)
	}
	if end := span(rows, cols, srcStride, srcOffset); end > s.n {
		return pkg.Errorf(op, ErrIndex, "%d rows of %d from element %d, stride %d, reach element %d of a source of %d", rows, cols, srcOffset, srcStride, end, s.n)
	}
	if end := span(rows, cols, dstStride, dstOffset); end > dst.n {
		return pkg.Errorf(op, ErrIndex, "%d rows of %d from element %d, stride %d, reach element %d of a destination of %d", rows, cols, dstOffset, dstStride, end, dst.n)
	}
	shape := Shape{rows, cols}
	from := Layout{Shape: shape, Stride: []int{srcStride, 1}, Offset: srcOffset}
	to := Layout{Shape: shape, Stride: []int{dstStride, 1}, Offset: dstOffset}
	return pkg.Wrap(op, s.dev.backend().copy(view{s, from}, view{dst, to}))
}

// span is the end (one past the last element) of rows of cols elements,
// stride apart, from offset; math.MaxInt when it overflows.
func span(rows, cols, stride, offset int) int {
	if offset > math.MaxInt-cols {
		return math.MaxInt
	}
	last, ok := mulAdd(rows-1, stride, offset+cols)
	if !ok {
		return math.MaxInt
	}
	return last
}

// mulAdd is a·b + c for non-negative values, and whether it fits.
func mulAdd(a, b, c int) (int, bool) {
	if a != 0 && b > (math.MaxInt-c)/a {
		return 0, false
	}
	return a*b + c, true
}
