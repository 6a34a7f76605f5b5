package miopen

/*
#include "helpers.h"
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/bind"
)

// MaxDims is the most dimensions a tensor descriptor takes.
const MaxDims = 8

// Size is the size of one element in bytes, 0 for an unknown type.
func (t DataType) Size() int {
	switch t {
	case DataTypeHalf, DataTypeBFloat16:
		return 2
	case DataTypeFloat, DataTypeInt32:
		return 4
	case DataTypeInt8:
		return 1
	case DataTypeDouble, DataTypeInt64:
		return 8
	}
	return 0
}

// IsFloat reports whether the type is a floating-point type.
func (t DataType) IsFloat() bool {
	return t == DataTypeHalf || t == DataTypeBFloat16 || t == DataTypeFloat || t == DataTypeDouble
}

// Layout is the memory order of a 4-D or 5-D tensor whose dimensions are
// given in N, C, (D,) H, W order.
type Layout int

// Layouts.
const (
	// LayoutNCHW is row-major: N, C, (D,) H, W from slowest to fastest.
	LayoutNCHW Layout = iota
	// LayoutNHWC keeps the channels last: N, (D,) H, W, C.
	LayoutNHWC
)

func (l Layout) String() string {
	switch l {
	case LayoutNCHW:
		return "NCHW"
	case LayoutNHWC:
		return "NHWC"
	}
	return fmt.Sprintf("Layout(%d)", int(l))
}

// TensorDescriptor describes the shape of a tensor: its element type, its
// dimensions and the stride of each in elements. It holds no data (see
// Tensor). A descriptor is read-only once made, so one may serve several
// handles and goroutines at once; Close it when no call uses it any more.
type TensorDescriptor struct {
	d       C.miopenTensorDescriptor_t
	dtype   DataType
	dims    []int
	strides []int
	life    bind.Lifetime
}

// NewTensorDescriptor describes a tensor of 1 to MaxDims dimensions. With
// strides nil the tensor is packed in row-major order (NCHW for four
// dimensions); otherwise there is one positive stride per dimension, in
// elements (miopenSetTensorDescriptor).
func NewTensorDescriptor(dt DataType, dims, strides []int) (*TensorDescriptor, error) {
	const op = "NewTensorDescriptor"
	if err := checkShape(op, dt, dims, strides); err != nil {
		return nil, err
	}
	if strides == nil {
		strides = packedStrides(dims)
	}
	return newTensor(op, dt, dims, strides, func(d C.miopenTensorDescriptor_t) error {
		cd, cs := cInts(dims), cInts(strides)
		return check("miopenSetTensorDescriptor", C.rg_miopenSetTensorDescriptor(d, C.miopenDataType_t(dt), C.int(len(dims)), &cd[0], &cs[0]))
	})
}

// NewTensor4D describes a packed NCHW tensor (miopenSet4dTensorDescriptor).
func NewTensor4D(dt DataType, n, c, h, w int) (*TensorDescriptor, error) {
	const op = "NewTensor4D"
	dims := []int{n, c, h, w}
	if err := checkShape(op, dt, dims, nil); err != nil {
		return nil, err
	}
	return newTensor(op, dt, dims, packedStrides(dims), func(d C.miopenTensorDescriptor_t) error {
		return check("miopenSet4dTensorDescriptor", C.rg_miopenSet4dTensorDescriptor(d, C.miopenDataType_t(dt), C.int(n), C.int(c), C.int(h), C.int(w)))
	})
}

// NewTensorLayout describes a packed 4-D or 5-D tensor whose dimensions
// are given in N, C, (D,) H, W order and laid out in memory as the layout
// says (miopenSetNdTensorDescriptorWithLayout): LayoutNHWC keeps the
// channels last while Dims still reports N, C, H, W.
func NewTensorLayout(dt DataType, layout Layout, dims []int) (*TensorDescriptor, error) {
	const op = "NewTensorLayout"
	if len(dims) != 4 && len(dims) != 5 {
		return nil, invalid(op, "a layout describes 4 or 5 dimensions (N, C, (D,) H, W), not %d", len(dims))
	}
	if err := checkShape(op, dt, dims, nil); err != nil {
		return nil, err
	}
	var cl C.miopenTensorLayout_t
	var strides []int
	switch layout {
	case LayoutNCHW:
		cl, strides = C.miopenTensorNCHW, packedStrides(dims)
		if len(dims) == 5 {
			cl = C.miopenTensorNCDHW
		}
	case LayoutNHWC:
		cl, strides = C.miopenTensorNHWC, channelsLastStrides(dims)
		if len(dims) == 5 {
			cl = C.miopenTensorNDHWC
		}
	default:
		return nil, invalid(op, "unknown layout %v", layout)
	}
	return newTensor(op, dt, dims, strides, func(d C.miopenTensorDescriptor_t) error {
		cd := cInts(dims)
		return check("miopenSetNdTensorDescriptorWithLayout", C.rg_miopenSetNdTensorDescriptorWithLayout(d, C.miopenDataType_t(dt), cl, &cd[0], C.int(len(dims))))
	})
}

// newTensor creates a descriptor and sets it with set; nothing is left
// behind when set fails.
func newTensor(op string, dt DataType, dims, strides []int, set func(C.miopenTensorDescriptor_t) error) (*TensorDescriptor, error) {
	if err := ensure(); err != nil {
		return nil, err
	}
	var d C.miopenTensorDescriptor_t
	if err := check("miopenCreateTensorDescriptor", C.rg_miopenCreateTensorDescriptor(&d)); err != nil {
		return nil, err
	}
	if err := set(d); err != nil {
		C.rg_miopenDestroyTensorDescriptor(d)
		return nil, withDetail(err, describe(dt, dims, strides))
	}
	t := &TensorDescriptor{d: d, dtype: dt, dims: append([]int(nil), dims...), strides: append([]int(nil), strides...)}
	bind.Backstop(&t.life, t, func(p unsafe.Pointer) { C.rg_miopenDestroyTensorDescriptor(C.miopenTensorDescriptor_t(p)) }, unsafe.Pointer(d))
	return t, nil
}

// checkShape validates a type, dimensions and strides before any C call.
func checkShape(op string, dt DataType, dims, strides []int) error {
	if dt.Size() == 0 {
		return invalid(op, "unknown data type %v", dt)
	}
	if len(dims) < 1 || len(dims) > MaxDims {
		return invalid(op, "%d dimensions: a tensor has 1 to %d", len(dims), MaxDims)
	}
	if strides != nil && len(strides) != len(dims) {
		return invalid(op, "%d strides for %d dimensions", len(strides), len(dims))
	}
	elems := 1.0
	for i, d := range dims {
		if d <= 0 || d > math.MaxInt32 {
			return invalid(op, "dimension %d is %d: dimensions are positive 32-bit sizes (dims %v)", i, d, dims)
		}
		elems *= float64(d)
		if strides != nil && (strides[i] <= 0 || strides[i] > math.MaxInt32) {
			return invalid(op, "stride %d is %d: strides are positive 32-bit counts of elements (strides %v)", i, strides[i], strides)
		}
	}
	span := 1.0
	s := strides
	if s == nil {
		s = packedStrides(dims)
	}
	for i, d := range dims {
		span += float64(d-1) * float64(s[i])
	}
	if span > math.MaxInt32 || elems > math.MaxInt32 {
		return invalid(op, "dims %v with strides %v span %.0f elements: the libraries index tensors with 32-bit integers", dims, s, span)
	}
	return nil
}

func packedStrides(dims []int) []int {
	s := make([]int, len(dims))
	acc := 1
	for i := len(dims) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= dims[i]
	}
	return s
}

// channelsLastStrides are the strides of a packed N, C, (D,) H, W tensor
// stored N, (D,) H, W, C.
func channelsLastStrides(dims []int) []int {
	s := make([]int, len(dims))
	s[1] = 1
	acc := dims[1]
	for i := len(dims) - 1; i >= 2; i-- {
		s[i] = acc
		acc *= dims[i]
	}
	s[0] = acc
	return s
}

func cInts(v []int) []C.int {
	out := make([]C.int, max(len(v), 1))
	for i, x := range v {
		out[i] = C.int(x)
	}
	return out
}

func describe(dt DataType, dims, strides []int) string {
	return fmt.Sprintf("%v dims %v strides %v", dt, dims, strides)
}

func (t *TensorDescriptor) alive(op string) error {
	if t == nil {
		return invalid(op, "nil tensor descriptor")
	}
	if t.life.Closed() {
		return closedError(op)
	}
	return nil
}

// DataType is the element type.
func (t *TensorDescriptor) DataType() DataType { return t.dtype }

// Dims returns the dimensions, in N, C, (D,) H, W order for 4-D and 5-D
// tensors whatever the layout.
func (t *TensorDescriptor) Dims() []int { return append([]int(nil), t.dims...) }

// Strides returns the stride of each dimension, in elements.
func (t *TensorDescriptor) Strides() []int { return append([]int(nil), t.strides...) }

// Elements is the number of elements.
func (t *TensorDescriptor) Elements() int {
	n := 1
	for _, d := range t.dims {
		n *= d
	}
	return n
}

// Bytes is the size of the memory the tensor spans: from its first element
// to its last, as MIOpen counts it (miopenGetTensorNumBytes).
func (t *TensorDescriptor) Bytes() int {
	last := 0
	for i, d := range t.dims {
		last += (d - 1) * t.strides[i]
	}
	return (last + 1) * t.dtype.Size()
}

// IsPacked reports whether the elements are contiguous in row-major order.
func (t *TensorDescriptor) IsPacked() bool {
	return sameStrides(t.dims, t.strides, packedStrides(t.dims))
}

// IsChannelsLast reports whether a 4-D or 5-D tensor is packed with its
// channels last (NHWC, NDHWC).
func (t *TensorDescriptor) IsChannelsLast() bool {
	return len(t.dims) >= 3 && sameStrides(t.dims, t.strides, channelsLastStrides(t.dims))
}

// sameStrides compares strides, ignoring those of dimensions of size 1.
func sameStrides(dims, a, b []int) bool {
	for i, d := range dims {
		if d != 1 && a[i] != b[i] {
			return false
		}
	}
	return true
}

// Raw is the miopenTensorDescriptor_t, for code that calls the library
// itself. It is valid until Close.
func (t *TensorDescriptor) Raw() unsafe.Pointer { return unsafe.Pointer(t.d) }

func (t *TensorDescriptor) String() string {
	if t == nil {
		return "miopen.TensorDescriptor(nil)"
	}
	layout := ""
	switch {
	case t.IsPacked():
		layout = " packed"
	case t.IsChannelsLast():
		layout = " channels-last"
	}
	return fmt.Sprintf("miopen.TensorDescriptor(%v %s strides %s%s)", t.dtype, joinInts(t.dims, "x"), joinInts(t.strides, ","), layout)
}

func joinInts(v []int, sep string) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, sep)
}

// Query asks the library for the descriptor's type, dimensions and strides
// (miopenGetTensorDescriptorSize and miopenGetTensorDescriptor): they equal
// DataType, Dims and Strides.
func (t *TensorDescriptor) Query() (DataType, []int, []int, error) {
	if err := t.alive("TensorDescriptor.Query"); err != nil {
		return 0, nil, nil, err
	}
	var n C.int
	if err := check("miopenGetTensorDescriptorSize", C.rg_miopenGetTensorDescriptorSize(t.d, &n)); err != nil {
		return 0, nil, nil, err
	}
	if n < 1 || n > MaxDims {
		return 0, nil, nil, &Error{Op: "miopenGetTensorDescriptorSize", Status: StatusInternalError, Detail: fmt.Sprintf("%d dimensions", n)}
	}
	var dt C.miopenDataType_t
	dims, strides := make([]C.int, n), make([]C.int, n)
	err := check("miopenGetTensorDescriptor", C.rg_miopenGetTensorDescriptor(t.d, &dt, &dims[0], &strides[0]))
	runtime.KeepAlive(t)
	if err != nil {
		return 0, nil, nil, err
	}
	return DataType(dt), goInts(dims), goInts(strides), nil
}

// NumBytes asks the library for the bytes the tensor spans
// (miopenGetTensorNumBytes); it equals Bytes.
func (t *TensorDescriptor) NumBytes() (int, error) {
	if err := t.alive("TensorDescriptor.NumBytes"); err != nil {
		return 0, err
	}
	var n C.size_t
	err := check("miopenGetTensorNumBytes", C.rg_miopenGetTensorNumBytes(t.d, &n))
	runtime.KeepAlive(t)
	return int(n), err
}

func goInts(v []C.int) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// Close destroys the descriptor. Closing twice does nothing.
func (t *TensorDescriptor) Close() error {
	if t == nil {
		return nil
	}
	return t.life.Close(func() error { return check("miopenDestroyTensorDescriptor", C.rg_miopenDestroyTensorDescriptor(t.d)) })
}

// sameShape reports whether two descriptors have the same type and
// dimensions (strides may differ).
func sameShape(a, b *TensorDescriptor) bool {
	if a.dtype != b.dtype || len(a.dims) != len(b.dims) {
		return false
	}
	for i := range a.dims {
		if a.dims[i] != b.dims[i] {
			return false
		}
	}
	return true
}

// key identifies a descriptor's shape for the Find cache.
func (t *TensorDescriptor) key() string {
	return fmt.Sprintf("%d:%v:%v", t.dtype, t.dims, t.strides)
}

// Tensor is device memory with the descriptor of what it holds. Calls
// check that the memory covers the descriptor and lies on the handle's
// device.
type Tensor struct {
	Desc *TensorDescriptor
	Data *hip.Buffer
}

// check validates a tensor argument of a call on the device dev.
func (t Tensor) check(op, name string, dev *hip.Device) error {
	switch {
	case t.Desc == nil:
		return invalid(op, "%s: nil descriptor", name)
	case t.Desc.life.Closed():
		return fmt.Errorf("miopen: %s: %s: %w", op, name, ErrClosed)
	case t.Data == nil:
		return invalid(op, "%s: nil buffer", name)
	}
	// Slice fails on a closed buffer; it is the one check hip exports.
	if _, err := t.Data.Slice(0, 1); err != nil {
		return fmt.Errorf("miopen: %s: %s: %w", op, name, err)
	}
	if need := t.Desc.Bytes(); t.Data.Size() < need {
		return invalid(op, "%s: %s needs %d bytes, the buffer has %d", name, t.Desc, need, t.Data.Size())
	}
	if dev != nil && t.Data.Device().Ordinal() != dev.Ordinal() {
		return invalid(op, "%s: the buffer is on device %d, the handle's device is %d", name, t.Data.Device().Ordinal(), dev.Ordinal())
	}
	return nil
}

// ptr is the tensor's device address for a C call.
func (t Tensor) ptr() unsafe.Pointer { return devPtr(t.Data) }

// devPtr is a buffer's device address for a C call, nil for no buffer.
func devPtr(b *hip.Buffer) unsafe.Pointer {
	if b == nil {
		return nil
	}
	return C.rg_miopen_ptr(C.uintptr_t(b.Ptr()))
}
