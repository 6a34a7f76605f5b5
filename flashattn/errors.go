package flashattn

import "github.com/rocm-go/rocm/errs"

// pkg makes this package's errors.
const pkg errs.Package = "flashattn"

// Error is a call that failed: Op names it ("Handle.Forward"), Kind is its
// kind, Detail says what was wrong and what to do, and Err is the cause
// from a lower layer, if any. It is the one error type of every package
// above the bindings (errs.Error), so that candle and the layers above
// pass flashattn's errors on as they are.
//
// The kinds are package errs': errs.ErrShape (shapes or strides that do
// not fit: mismatched dims, a head dim that is not a multiple of 8 up to
// 256, a non-contiguous head dim, h_q not a multiple of h_kv),
// errs.ErrDType (a dtype other than F16, BF16 and F32, or operands of
// different dtypes), errs.ErrArgument (any other argument that cannot be
// taken: a nil pointer, a NaN scale, cumulative lengths that decrease,
// ...), errs.ErrUnsupported (a valid request that this call does not take,
// such as Params.Rotary where Decode does not run attn_decode_paged: the
// caller does it another way), errs.ErrOutOfMemory (no device memory for a
// workspace), errs.ErrDevice (the device failed: its runtime, compiler or
// kernels) and errs.ErrClosed (a closed handle).
type Error = errs.Error
