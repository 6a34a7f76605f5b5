package candle

import "github.com/rocm-go/rocm/hip"

// What kernels and libraries outside candle (package flashattn, called by
// candle/nn) need to work on tensors: their device addresses, and outputs
// they write whole.

// DevicePtr is a device address, hip's: what a tensor's DevicePtr gives
// and flashattn's parameters take, named here so that the layers above
// candle pass addresses without importing the runtime's binding.
type DevicePtr = hip.DevicePtr

// DevicePtr is the device address of the tensor's first element (its
// layout's Offset included) on a HIP device; Layout gives the strides.
// Queue the work that uses it on the device's stream (HIPDevice.Stream),
// where candle orders its own ops: the memory of a tensor closed after
// that work was queued is reused only by work queued later.
func (t *Tensor) DevicePtr() (hip.DevicePtr, error) {
	const op = "Tensor.DevicePtr"
	if err := t.alive(op); err != nil {
		return 0, err
	}
	if _, ok := t.st.dev.(*HIPDevice); !ok {
		return 0, pkg.Errorf(op, ErrDevice, "the tensor is on %s: only a HIP device's tensors have device addresses", t.st.dev)
	}
	if t.st.mem == nil {
		return 0, pkg.Errorf(op, ErrArgument, "the tensor is empty: it has no memory")
	}
	return ptr(t.v()), nil
}

// Empty is a contiguous tensor of shape whose elements are not set, for an
// output that a kernel outside candle writes whole.
func Empty(dev Device, dt DType, shape ...int) (*Tensor, error) {
	const op = "Empty"
	if dev == nil {
		return nil, pkg.Errorf(op, ErrDevice, "nil device")
	}
	if !dt.valid() {
		return nil, pkg.Errorf(op, ErrDType, "%v is not a dtype", dt)
	}
	return newOutput(op, dev, dt, Shape(shape))
}
