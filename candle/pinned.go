package candle

import "github.com/rocm-go/rocm/hip"

// CopyFromPinned queues a copy of all of src into the tensor's bytes from
// byte off (counted from its first element) on the device's stream, and
// returns without waiting. It fills a tensor from Empty piece by piece
// with no staging copy: src is pinned host memory, MallocHost's or a
// mapped file that hip.Device.RegisterHost registered, and must stay valid
// until the copy has run (record an event on HIPDevice.Stream after it,
// or synchronize). The tensor must be contiguous, on a HIP device.
func (t *Tensor) CopyFromPinned(off int, src *hip.PinnedBuffer) error {
	const op = "Tensor.CopyFromPinned"
	if err := t.alive(op); err != nil {
		return err
	}
	d, ok := t.st.dev.(*HIPDevice)
	if !ok {
		return pkg.Errorf(op, ErrDevice, "the tensor is on %s: pinned memory is copied to a HIP device's tensors (write a CPU tensor's memory directly)", t.st.dev)
	}
	if !t.layout.IsContiguous() {
		return pkg.Errorf(op, ErrArgument, "the tensor's layout (%s) is not contiguous: fill a tensor from Empty", t.layout)
	}
	if src == nil {
		return pkg.Errorf(op, ErrArgument, "nil pinned buffer")
	}
	size := t.Elems() * t.DType().Size()
	if off < 0 || src.Size() > size-off {
		return pkg.Errorf(op, ErrArgument, "%d bytes at byte %d do not fit in the tensor's %d bytes", src.Size(), off, size)
	}
	return pkg.Wrap(op, d.copyPinned(t.st, t.layout.Offset*t.DType().Size()+off, src))
}
