package candle

import "github.com/rocm-go/rocm/errs"

// pkg makes this package's errors.
const pkg errs.Package = "candle"

// Error is an op that failed: Op names it ("Tensor.Add"), Kind is one of
// the Err values below, Detail says what was wrong, and Err is the cause
// from a lower layer (a *hip.Error, say), if any. It is the one error type
// of every package above the bindings (errs.Error): candle's, flashattn's,
// the tokenizer's, the layers' and the models' errors are all of it.
type Error = errs.Error

// The kinds of error every package above the bindings returns (package
// errs defines them; these are the same values). errors.Is matches an
// *Error against them wherever it came from: errors.Is(err,
// candle.ErrOutOfMemory) holds for memory that ran out in a tensor op, in
// flashattn's workspace or in a model's forward pass alike.
var (
	// ErrShape: shapes that do not fit the op (mismatched, not
	// broadcastable, out-of-range dims, too many dims).
	ErrShape = errs.ErrShape
	// ErrDType: a dtype the op does not take, or operands of different
	// dtypes.
	ErrDType = errs.ErrDType
	// ErrDevice: operands on different devices, a device that cannot be
	// opened, or a failure of the device (its runtime, compiler or
	// kernels).
	ErrDevice = errs.ErrDevice
	// ErrIndex: an index out of range (on the CPU device; see the index
	// ops for the GPU's behaviour).
	ErrIndex = errs.ErrIndex
	// ErrArgument: any other argument the op cannot take.
	ErrArgument = errs.ErrArgument
	// ErrOutOfMemory: the device had no memory left for a tensor, even
	// after the memory pool gave back what it kept. The bindings'
	// out-of-memory statuses (hip.ErrOutOfMemory, ...) match it too.
	ErrOutOfMemory = errs.ErrOutOfMemory
	// ErrClosed: a closed tensor, storage or handle. It is the same value
	// as hip.ErrClosed.
	ErrClosed = errs.ErrClosed
	// ErrUnsupported: a well-formed request this build or device does not
	// take.
	ErrUnsupported = errs.ErrUnsupported
	// ErrFormat: a file that is not what it claims to be.
	ErrFormat = errs.ErrFormat
	// ErrNotFound: a name the files do not hold.
	ErrNotFound = errs.ErrNotFound
	// ErrIO: a file that cannot be opened, read or written.
	ErrIO = errs.ErrIO
	// ErrCanceled: the caller's context was canceled or its deadline
	// passed.
	ErrCanceled = errs.ErrCanceled
)
