package candle

import (
	"errors"
	"fmt"

	"github.com/rocm-go/rocm/hip"
)

// The kinds of error an op returns; errors.Is matches an *Error against
// them.
var (
	// ErrShape: shapes that do not fit the op (mismatched, not
	// broadcastable, out-of-range dims, too many dims).
	ErrShape = errors.New("shape mismatch")
	// ErrDType: a dtype the op does not take, or operands of different
	// dtypes.
	ErrDType = errors.New("unsupported dtype")
	// ErrDevice: operands on different devices, a device that cannot be
	// opened, or a failure of the device (its runtime, compiler or
	// kernels).
	ErrDevice = errors.New("device error")
	// ErrIndex: an index out of range (on the CPU device; see the index
	// ops for the GPU's behaviour).
	ErrIndex = errors.New("index out of range")
	// ErrArgument: any other argument the op cannot take.
	ErrArgument = errors.New("invalid argument")
	// ErrOutOfMemory: the device had no memory left for a tensor, even
	// after the memory pool gave back what it kept.
	ErrOutOfMemory = errors.New("out of device memory")
	// ErrClosed: a closed tensor or storage. It is the same value as
	// hip.ErrClosed.
	ErrClosed = hip.ErrClosed
)

// Error is an op that failed: Op names it ("Tensor.Add"), Kind is one of
// the Err values above, Detail says what was wrong, and Err is the cause
// from a lower layer (a *hip.Error, say), if any.
type Error struct {
	Op     string
	Kind   error
	Detail string
	Err    error
}

func (e *Error) Error() string {
	s := "candle: " + e.Op + ": "
	if e.Detail != "" {
		s += e.Detail
	} else {
		s += e.Kind.Error()
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the kind and the cause, for errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

func errorf(op string, kind error, format string, args ...any) error {
	return &Error{Op: op, Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// wrap attributes a lower layer's error to op.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*Error); ok {
		c := *e // the layer below's error, attributed to op
		c.Op = op
		return &c
	}
	kind := ErrDevice
	if errors.Is(err, hip.ErrOutOfMemory) {
		kind = ErrOutOfMemory
	} else if errors.Is(err, hip.ErrClosed) {
		kind = ErrClosed
	}
	return &Error{Op: op, Kind: kind, Err: err}
}
