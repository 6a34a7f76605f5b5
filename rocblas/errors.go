package rocblas

import (
	"errors"
	"fmt"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/dl"
)

// Error is a failed rocBLAS call, or a call refused before it reached the
// library because an argument was wrong. Op is the rocBLAS function
// ("rocblas_sgemm") or the Go function that refused the call ("Gemm");
// Detail names the argument and what was wrong with it. errors.Is matches
// it against the sentinels below by Status:
//
//	if errors.Is(err, rocblas.ErrInvalidSize) { ... }
type Error struct {
	Op     string
	Status Status
	Detail string
	// cause is what errors.Unwrap returns: hip.ErrClosed for a closed
	// buffer, ErrClosed for a closed handle, a *hip.Error for a device that
	// could not be made current.
	cause error
}

func (e *Error) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("rocblas: %s: %s (%s)", e.Op, e.Detail, e.Status)
	}
	return fmt.Sprintf("rocblas: %s: %s (%s)", e.Op, e.Status, e.Status.Description())
}

// Is reports whether target is an *Error with the same Status: the
// sentinels are such errors.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Status == e.Status
}

// Unwrap returns the error's cause, if any.
func (e *Error) Unwrap() error { return e.cause }

func sentinel(s Status) error { return &Error{Op: "sentinel", Status: s} }

// Sentinels for errors.Is, one for each failure status of rocblas_status.
var (
	ErrInvalidHandle     = sentinel(StatusInvalidHandle)
	ErrNotImplemented    = sentinel(StatusNotImplemented)
	ErrInvalidPointer    = sentinel(StatusInvalidPointer)
	ErrInvalidSize       = sentinel(StatusInvalidSize)
	ErrMemoryError       = sentinel(StatusMemoryError)
	ErrInternalError     = sentinel(StatusInternalError)
	ErrPerfDegraded      = sentinel(StatusPerfDegraded)
	ErrSizeQueryMismatch = sentinel(StatusSizeQueryMismatch)
	ErrSizeIncreased     = sentinel(StatusSizeIncreased)
	ErrSizeUnchanged     = sentinel(StatusSizeUnchanged)
	ErrInvalidValue      = sentinel(StatusInvalidValue)
	ErrContinue          = sentinel(StatusContinue)
	ErrCheckNumericsFail = sentinel(StatusCheckNumericsFail)
	ErrExcludedFromBuild = sentinel(StatusExcludedFromBuild)
	ErrArchMismatch      = sentinel(StatusArchMismatch)
)

// ErrClosed is wrapped by the errors of calls on a closed Handle.
var ErrClosed = errors.New("rocblas: use of a closed handle")

// ErrLibraryNotFound matches the error of a failed load: no candidate file
// of the library could be opened. The error lists every path tried.
var ErrLibraryNotFound = dl.ErrLibraryNotFound

// ErrSymbolNotFound matches the error of a call whose function the loaded
// library does not provide (an older rocBLAS).
var ErrSymbolNotFound = dl.ErrSymbolNotFound

// Status values the generated trampolines return instead of calling rocBLAS.
const (
	statusSuccess  Status = 0
	statusMissing  Status = 0x7fffff01 // RG_ROCBLAS_MISSING
	statusNoDevice Status = 0x7fffff02 // RG_ROCBLAS_NODEVICE
	statusCUDA     Status = 0x7fffff03 // RG_ROCBLAS_CUDA_MISSING (nvidia.c)
)

// check turns a status into an error; nil for success.
func check[S ~uint32](op string, s S) error {
	if s == 0 {
		return nil
	}
	return statusError(op, Status(s))
}

func statusError(op string, s Status) error {
	switch s {
	case statusMissing:
		return missing(op)
	case statusCUDA:
		return &dl.SymbolError{Library: "CUDA runtime or cuBLAS", Path: libraryPath(), Symbol: op,
			Reason: "the CUDA libraries lack the function it is translated to (an older CUDA?)"}
	case statusNoDevice:
		// Say why, when HIP can: no GPU at all is the usual reason.
		var cause error = &hip.Error{Op: "hipSetDevice", Status: hip.StatusInvalidDevice}
		detail := "could not make the handle's device current"
		if hip.LoadedPlatform() != hip.PlatformNone {
			if _, err := hip.DeviceCount(); err != nil {
				cause, detail = err, detail+": "+err.Error()
			}
		}
		return &Error{Op: op, Status: StatusInvalidValue, Detail: detail, cause: cause}
	}
	return &Error{Op: op, Status: s}
}

func libraryPath() string {
	if libs := blasLib.Libraries(); len(libs) > 0 {
		return libs[0].Path()
	}
	return "(not loaded)"
}

func missing(op string) error {
	reason := "the loaded library does not export it (an older rocBLAS?)"
	if Platform() == hip.PlatformNVIDIA {
		reason = "rocm-go does not translate it to cuBLAS"
	}
	return &dl.SymbolError{Library: "rocBLAS", Path: libraryPath(), Symbol: op, Reason: reason}
}

// Errors for arguments refused before any C call.
func invalidSize(op, format string, args ...any) error {
	return &Error{Op: op, Status: StatusInvalidSize, Detail: fmt.Sprintf(format, args...)}
}

func invalidValue(op, format string, args ...any) error {
	return &Error{Op: op, Status: StatusInvalidValue, Detail: fmt.Sprintf(format, args...)}
}

func invalidPointer(op, format string, args ...any) error {
	return &Error{Op: op, Status: StatusInvalidPointer, Detail: fmt.Sprintf(format, args...)}
}
