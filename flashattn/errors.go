package flashattn

import (
	"errors"
	"fmt"

	"github.com/rocm-go/rocm/hip"
)

// The kinds of error a call returns; errors.Is matches an *Error against
// them.
var (
	// ErrShape: shapes or strides that do not fit (mismatched dims, a head
	// dim that is not a multiple of 8 up to 256, a non-contiguous head dim,
	// h_q not a multiple of h_kv).
	ErrShape = errors.New("shape mismatch")
	// ErrDType: a dtype other than F16, BF16 and F32, or operands of
	// different dtypes.
	ErrDType = errors.New("unsupported dtype")
	// ErrArgument: any other argument that cannot be taken (a nil pointer,
	// a NaN scale, cumulative lengths that decrease, ...).
	ErrArgument = errors.New("invalid argument")
	// ErrUnsupported: a valid request that this call does not take
	// (Params.Rotary where Decode does not run attn_decode_paged): the
	// caller does it another way.
	ErrUnsupported = errors.New("unsupported")
	// ErrDevice: the device failed (its runtime, compiler or kernels).
	ErrDevice = errors.New("device error")
	// ErrClosed: a closed handle. It is the same value as hip.ErrClosed.
	ErrClosed = hip.ErrClosed
)

// Error is a call that failed: Op names it ("Handle.Forward"), Kind is one
// of the Err values above, Detail says what was wrong and what to do, and
// Err is the cause from a lower layer, if any.
type Error struct {
	Op     string
	Kind   error
	Detail string
	Err    error
}

func (e *Error) Error() string {
	s := "flashattn: " + e.Op + ": "
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
	kind := ErrDevice
	if errors.Is(err, hip.ErrClosed) {
		kind = ErrClosed
	}
	return &Error{Op: op, Kind: kind, Err: err}
}
