package candle

import (
	"fmt"
	"sync/atomic"

	"github.com/rocm-go/rocm/hip"
)

// Tensor is a storage seen through a layout: a dtype, a shape and the
// device its storage is on. Tensors are immutable: views (Reshape,
// Transpose, Permute, Narrow, Squeeze, Unsqueeze, BroadcastAs) share the
// storage, and ops write fresh contiguous outputs. Ops are queued on the
// device and the host waits only when it reads data back.
//
// Every op returns (*Tensor, error): bad shapes, dtypes, devices or closed
// tensors are errors before any work is queued. Close a tensor when done
// (or let a Scope close a forward pass's intermediates): device memory is
// given back deterministically; garbage collection only backs that up.
type Tensor struct {
	st     *Storage
	layout Layout
	scope  atomic.Pointer[Scope]
	closed atomic.Bool
}

// newTensor makes a tensor of a storage it takes a reference of, in the
// scope of the first scoped input.
func newTensor(st *Storage, l Layout, inputs ...*Tensor) *Tensor {
	t := &Tensor{st: st, layout: l}
	for _, in := range inputs {
		if in == nil {
			continue
		}
		if s := in.scope.Load(); s != nil {
			s.add(t)
			break
		}
	}
	return t
}

// newOutput allocates a fresh contiguous output of shape and dtype on
// dev, in the scope of the first scoped input.
func newOutput(op string, dev Device, dt DType, shape Shape, inputs ...*Tensor) (*Tensor, error) {
	if err := shape.check(op); err != nil {
		return nil, err
	}
	st, err := newStorage(op, dev, dt, shape.Elems())
	if err != nil {
		return nil, err
	}
	return newTensor(st, ContiguousLayout(shape), inputs...), nil
}

// FromSlice copies host data into a tensor of the given shape on dev (a
// 1-D tensor of len(data) elements without one). The dtype is the
// elements' (Element).
func FromSlice[T Element](dev Device, data []T, shape ...int) (*Tensor, error) {
	const op = "FromSlice"
	if shape == nil {
		shape = []int{len(data)}
	}
	if err := Shape(shape).check(op); err != nil {
		return nil, err
	}
	if Shape(shape).Elems() != len(data) {
		return nil, pkg.Errorf(op, ErrShape, "%d elements for shape %v of %d", len(data), Shape(shape), Shape(shape).Elems())
	}
	t, err := FromBytes(dev, DTypeOf[T](), hip.AsBytes(data), shape...)
	return t, pkg.Wrap(op, err)
}

// checkNew checks what a new tensor is made of: a device, a dtype, a shape.
func checkNew(op string, dev Device, dt DType, shape []int) error {
	if dev == nil {
		return pkg.Errorf(op, ErrDevice, "nil device")
	}
	if !dt.valid() {
		return pkg.Errorf(op, ErrDType, "%v is not a dtype", dt)
	}
	return Shape(shape).check(op)
}

// FromBytes copies raw element bytes, little-endian as safetensors files
// and the devices keep them, into a new tensor of dtype dt and shape (a
// loader's way in: no conversion, one copy to the device).
func FromBytes(dev Device, dt DType, data []byte, shape ...int) (*Tensor, error) {
	const op = "FromBytes"
	if err := checkNew(op, dev, dt, shape); err != nil {
		return nil, err
	}
	n := Shape(shape).Elems()
	if n > len(data)/dt.Size() || n*dt.Size() != len(data) {
		return nil, pkg.Errorf(op, ErrShape, "%d bytes for shape %v of %d %s elements (%d bytes)", len(data), Shape(shape), n, dt, n*dt.Size())
	}
	st, err := storageOf(op, dev, dt, n, data)
	if err != nil {
		return nil, err
	}
	return newTensor(st, ContiguousLayout(Shape(shape))), nil
}

// FromStorage views a whole storage with a shape of as many elements. The
// tensor holds its own reference: closing the storage's owner leaves it
// valid.
func FromStorage(st *Storage, shape Shape) (*Tensor, error) {
	const op = "FromStorage"
	if err := st.alive(op); err != nil {
		return nil, err
	}
	if err := shape.check(op); err != nil {
		return nil, err
	}
	if shape.Elems() != st.n {
		return nil, pkg.Errorf(op, ErrShape, "shape %v of %d elements for a storage of %d", shape, shape.Elems(), st.n)
	}
	if !st.retain() {
		return nil, &Error{Pkg: string(pkg), Op: op, Kind: ErrClosed, Detail: "use of a closed storage", Err: ErrClosed}
	}
	return newTensor(st, ContiguousLayout(shape)), nil
}

// ToSlice copies a tensor to the host, in row-major order, as a slice of
// its dtype's Go type; T must match the dtype.
func ToSlice[T Element](t *Tensor) ([]T, error) {
	const op = "ToSlice"
	if err := t.alive(op); err != nil {
		return nil, err
	}
	if dt := DTypeOf[T](); dt != t.DType() {
		var z T
		return nil, pkg.Errorf(op, ErrDType, "[]%T for a %s tensor: want []%s (or convert with ToDType)", z, t.DType(), t.DType().hostType())
	}
	out := make([]T, t.Elems())
	if err := readRowMajor(op, t, hip.AsBytes(out)); err != nil {
		return nil, err
	}
	return out, nil
}

// readRowMajor copies t's elements to dst (their bytes), in row-major
// order.
func readRowMajor(op string, t *Tensor, dst []byte) error {
	if len(dst) == 0 {
		return nil
	}
	c, err := t.Contiguous()
	if err != nil {
		return err
	}
	defer c.Close()
	return pkg.Wrap(op, c.st.dev.backend().read(c.st, c.layout.Offset, c.Elems(), dst))
}

// ToBytes copies a tensor to the host, in row-major order, as its
// elements' little-endian bytes: the inverse of FromBytes, for any dtype.
func ToBytes(t *Tensor) ([]byte, error) {
	const op = "ToBytes"
	if err := t.alive(op); err != nil {
		return nil, err
	}
	out := make([]byte, t.Elems()*t.DType().Size())
	if err := readRowMajor(op, t, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Close gives the tensor's reference to its storage back; the storage's
// memory returns to the device when its last user closes. Closing twice
// does nothing. A closed tensor's ops fail with ErrClosed.
func (t *Tensor) Close() error {
	if t != nil && t.closed.CompareAndSwap(false, true) {
		if s := t.scope.Load(); s != nil {
			s.forget(t) // the scope lets go of it: no closed tensor held until Scope.Close
		}
		t.st.release()
	}
	return nil
}

// detach turns the tensor's reference into the owner's reference of its
// storage, for ops that return a Storage.
func (t *Tensor) detach() *Storage {
	t.closed.Store(true)
	if s := t.scope.Load(); s != nil {
		s.forget(t)
	}
	t.st.owned.Store(true)
	return t.st
}

func (t *Tensor) alive(op string) error {
	if t == nil {
		return pkg.Errorf(op, ErrArgument, "nil tensor")
	}
	if t.closed.Load() {
		return &Error{Pkg: string(pkg), Op: op, Kind: ErrClosed, Detail: fmt.Sprintf("use of a closed tensor (%v %s)", t.layout.Shape, t.DType()), Err: ErrClosed}
	}
	return nil
}

// alive checks every operand.
func alive(op string, ts ...*Tensor) error {
	for _, t := range ts {
		if err := t.alive(op); err != nil {
			return err
		}
	}
	return nil
}

// Device is the device the tensor is on.
func (t *Tensor) Device() Device { return t.st.dev }

// DType is the elements' type.
func (t *Tensor) DType() DType { return t.st.dtype }

// Shape is a copy of the dims.
func (t *Tensor) Shape() Shape { return t.layout.Shape.Clone() }

// Rank is the number of dims.
func (t *Tensor) Rank() int { return len(t.layout.Shape) }

// Dim is the size of dim d (negative counts from the end); 0 when d is out
// of range.
func (t *Tensor) Dim(d int) int {
	d, err := dim("Tensor.Dim", d, len(t.layout.Shape))
	if err != nil {
		return 0
	}
	return t.layout.Shape[d]
}

// Elems is the number of elements.
func (t *Tensor) Elems() int { return t.layout.Shape.Elems() }

// Layout is a copy of the tensor's layout in its storage.
func (t *Tensor) Layout() Layout { return t.layout.clone() }

// IsContiguous reports whether the elements are dense in row-major order.
func (t *Tensor) IsContiguous() bool { return t.layout.IsContiguous() }

func (t *Tensor) String() string {
	if t == nil {
		return "candle.Tensor(nil)"
	}
	s := fmt.Sprintf("candle.Tensor(%v %s on %s", t.layout.Shape, t.DType(), t.st.dev)
	if !t.IsContiguous() {
		s += ", strided"
	}
	if t.closed.Load() {
		s += ", closed"
	}
	return s + ")"
}

func (t *Tensor) v() view { return view{st: t.st, l: t.layout} }

// view makes a tensor sharing t's storage through layout l.
func (t *Tensor) view(op string, l Layout) (*Tensor, error) {
	if !t.st.retain() {
		return nil, &Error{Pkg: string(pkg), Op: op, Kind: ErrClosed, Detail: "use of a closed tensor", Err: ErrClosed}
	}
	return newTensor(t.st, l, t), nil
}

func (t *Tensor) viewWith(op string, f func(Layout) (Layout, error)) (*Tensor, error) {
	if err := t.alive(op); err != nil {
		return nil, err
	}
	l, err := f(t.layout)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	return t.view(op, l)
}

// Reshape views the tensor with another shape of as many elements; one dim
// may be -1, inferred. A tensor that is not contiguous is copied first.
func (t *Tensor) Reshape(shape ...int) (*Tensor, error) {
	const op = "Tensor.Reshape"
	if err := t.alive(op); err != nil {
		return nil, err
	}
	s, err := inferShape(op, shape, t.Elems())
	if err != nil {
		return nil, err
	}
	if t.layout.IsContiguous() {
		return t.viewWith(op, func(l Layout) (Layout, error) { return l.Reshape(s) })
	}
	c, err := t.Copy()
	if err != nil {
		return nil, err
	}
	c.layout, err = c.layout.Reshape(s)
	return c, err
}

// inferShape resolves one -1 dim of a reshape to n elements.
func inferShape(op string, shape []int, n int) (Shape, error) {
	s := Shape(shape).Clone()
	infer, known := -1, 1
	for i, d := range s {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d < 0:
			return nil, pkg.Errorf(op, ErrShape, "shape %v: only one dim may be -1, and none below", Shape(shape))
		default:
			known *= d
		}
	}
	if infer >= 0 {
		if known == 0 || n%known != 0 {
			return nil, pkg.Errorf(op, ErrShape, "cannot infer the -1 of %v for %d elements", Shape(shape), n)
		}
		s[infer] = n / known
	}
	if err := s.check(op); err != nil {
		return nil, err
	}
	if s.Elems() != n {
		return nil, pkg.Errorf(op, ErrShape, "cannot reshape %d elements to %v (%d elements)", n, s, s.Elems())
	}
	return s, nil
}

// Transpose swaps two dims (negative counts from the end), without a copy.
func (t *Tensor) Transpose(d1, d2 int) (*Tensor, error) {
	return t.viewWith("Tensor.Transpose", func(l Layout) (Layout, error) { return l.Transpose(d1, d2) })
}

// T swaps the last two dims.
func (t *Tensor) T() (*Tensor, error) { return t.Transpose(-2, -1) }

// Permute reorders the dims: dim i of the result is dim order[i].
func (t *Tensor) Permute(order ...int) (*Tensor, error) {
	return t.viewWith("Tensor.Permute", func(l Layout) (Layout, error) { return l.Permute(order...) })
}

// Narrow keeps length elements of dim d from start.
func (t *Tensor) Narrow(d, start, length int) (*Tensor, error) {
	return t.viewWith("Tensor.Narrow", func(l Layout) (Layout, error) { return l.Narrow(d, start, length) })
}

// Squeeze removes dim d, of size 1.
func (t *Tensor) Squeeze(d int) (*Tensor, error) {
	return t.viewWith("Tensor.Squeeze", func(l Layout) (Layout, error) { return l.Squeeze(d) })
}

// Unsqueeze inserts a dim of size 1 before dim d (d may be the rank).
func (t *Tensor) Unsqueeze(d int) (*Tensor, error) {
	return t.viewWith("Tensor.Unsqueeze", func(l Layout) (Layout, error) { return l.Unsqueeze(d) })
}

// BroadcastAs views the tensor as shape, repeating dims of size 1 (and new
// leading dims) with stride 0.
func (t *Tensor) BroadcastAs(shape ...int) (*Tensor, error) {
	return t.viewWith("Tensor.BroadcastAs", func(l Layout) (Layout, error) { return l.BroadcastAs(shape) })
}

// Contiguous is the tensor itself (a new reference) when it is contiguous,
// else a contiguous copy.
func (t *Tensor) Contiguous() (*Tensor, error) {
	const op = "Tensor.Contiguous"
	if err := t.alive(op); err != nil {
		return nil, err
	}
	if t.layout.IsContiguous() {
		return t.view(op, t.layout.clone())
	}
	return t.Copy()
}

// Copy is a contiguous copy of the tensor.
func (t *Tensor) Copy() (*Tensor, error) {
	const op = "Tensor.Copy"
	if err := t.alive(op); err != nil {
		return nil, err
	}
	out, err := newOutput(op, t.st.dev, t.DType(), t.layout.Shape, t)
	if err != nil || out.Elems() == 0 {
		return out, err
	}
	if err := t.st.dev.backend().copy(t.v(), out.v()); err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return out, nil
}

// CopyFrom copies src's elements into the tensor, in place: src has the
// tensor's shape, dtype and device, in any layout; the tensor is
// contiguous (a tensor of its own, or a contiguous view of one) and does
// not overlap src. The copy is queued on the device like an op. It fills
// tensors whose memory must stay where it is, such as the inputs of a
// captured Graph, from results on the device.
func (t *Tensor) CopyFrom(src *Tensor) error {
	const op = "Tensor.CopyFrom"
	if err := t.alive(op); err != nil {
		return err
	}
	if src == nil {
		return pkg.Errorf(op, ErrArgument, "nil source")
	}
	if err := src.alive(op); err != nil {
		return err
	}
	if src.st.dev != t.st.dev {
		return pkg.Errorf(op, ErrDevice, "source on %s, destination on %s: move one first (ToDevice)", src.st.dev, t.st.dev)
	}
	if src.DType() != t.DType() {
		return pkg.Errorf(op, ErrDType, "%s source, %s destination: convert it first (ToDType)", src.DType(), t.DType())
	}
	if !src.layout.Shape.Equal(t.layout.Shape) {
		return pkg.Errorf(op, ErrShape, "source of shape %v, destination of shape %v", src.layout.Shape, t.layout.Shape)
	}
	if !t.layout.IsContiguous() {
		return pkg.Errorf(op, ErrArgument, "the destination's layout (%s) is not contiguous", t.layout)
	}
	if src.st == t.st {
		return pkg.Errorf(op, ErrArgument, "source and destination share their storage: copy the source first (Copy)")
	}
	if t.Elems() == 0 {
		return nil
	}
	return pkg.Wrap(op, t.st.dev.backend().copy(src.v(), t.v()))
}

// ToDevice copies the tensor to another device (the tensor itself, a new
// reference, when it is there already).
func (t *Tensor) ToDevice(dev Device) (*Tensor, error) {
	const op = "Tensor.ToDevice"
	if err := t.alive(op); err != nil {
		return nil, err
	}
	if dev == nil {
		return nil, pkg.Errorf(op, ErrDevice, "nil device")
	}
	if dev == t.st.dev {
		return t.view(op, t.layout.clone())
	}
	c, err := t.Contiguous()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	out, err := newOutput(op, dev, t.DType(), t.layout.Shape, t)
	if err != nil || out.Elems() == 0 {
		return out, err
	}
	host := make([]byte, out.st.Bytes())
	if err := c.st.dev.backend().read(c.st, c.layout.Offset, out.Elems(), host); err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	if err := dev.backend().write(out.st, host); err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return out, nil
}
