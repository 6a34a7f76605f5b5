package miopen

/*
#include "helpers.h"
*/
import "C"

import (
	"errors"
	"fmt"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/dl"
)

// Error is a failed MIOpen call, or a call refused before it reached MIOpen
// because its arguments were invalid. Status says which; errors.Is matches
// it against the sentinels below:
//
//	if errors.Is(err, miopen.ErrNotImplemented) { ... }
//
// On the NVIDIA platform a cuDNN status is translated to MIOpen's by name
// (CUDNN_STATUS_BAD_PARAM is StatusBadParm, CUDNN_STATUS_NOT_SUPPORTED
// StatusNotImplemented, ...) and Detail names the cuDNN function and status.
type Error struct {
	Op     string // the MIOpen function ("miopenConvolutionForward") or the Go method that refused the call
	Status Status
	Detail string // what was wrong with the arguments, or context; may be empty
}

func (e *Error) Error() string {
	s := fmt.Sprintf("miopen: %s: %s (%s)", e.Op, e.Status, e.Status.Description())
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is reports whether target is an *Error with the same Status: the
// sentinels are such errors.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Status == e.Status
}

func sentinel(s Status) error { return &Error{Op: "sentinel", Status: s} }

// Sentinels for errors.Is, one per miopenStatus_t value but success. Each
// matches every *Error with its Status.
var (
	ErrNotInitialized = sentinel(StatusNotInitialized)
	ErrInvalidValue   = sentinel(StatusInvalidValue)
	ErrBadParm        = sentinel(StatusBadParm)
	ErrAllocFailed    = sentinel(StatusAllocFailed)
	ErrInternalError  = sentinel(StatusInternalError)
	// ErrNotImplemented matches what the library (or, on the NVIDIA
	// platform, legacy cuDNN) does not implement: a layout, a data type, an
	// operation such as multi-head attention on NVIDIA.
	ErrNotImplemented       = sentinel(StatusNotImplemented)
	ErrUnknownError         = sentinel(StatusUnknownError)
	ErrUnsupportedOp        = sentinel(StatusUnsupportedOp)
	ErrGpuOperationsSkipped = sentinel(StatusGpuOperationsSkipped)
	ErrVersionMismatch      = sentinel(StatusVersionMismatch)
)

// ErrClosed is returned by methods of a handle or descriptor that was
// closed, and by calls given one.
var ErrClosed = errors.New("miopen: use of a closed handle or descriptor")

// ErrLibraryNotFound matches the error of a failed load: no candidate file
// of MIOpen (or cuDNN) could be opened. The error lists every path tried.
var ErrLibraryNotFound = dl.ErrLibraryNotFound

// ErrSymbolNotFound matches the error of a call whose function the loaded
// library does not provide.
var ErrSymbolNotFound = dl.ErrSymbolNotFound

// Status values the generated trampolines and the NVIDIA layer return
// instead of calling the library.
const (
	statusMissing      Status = 0x7fffff01 // RG_MIOPEN_MISSING
	statusNoDevice     Status = 0x7fffff02 // RG_MIOPEN_NODEVICE
	statusCUDNNMissing Status = 0x7fffff03 // RG_MIOPEN_CUDNN_MISSING (nvidia.c)
)

// check turns a status into an error; nil for success.
func check(op string, s C.miopenStatus_t) error {
	if s == C.miopenStatusSuccess {
		return nil
	}
	return statusError(op, Status(s))
}

func statusError(op string, s Status) error {
	switch s {
	case statusMissing:
		lib, path := loadedLibrary()
		reason := "the loaded MIOpen does not export it (an older ROCm?)"
		if Platform() == hip.PlatformNVIDIA {
			reason = "rocm-go does not translate it to cuDNN"
		}
		return &dl.SymbolError{Library: lib, Path: path, Symbol: op, Reason: reason}
	case statusCUDNNMissing:
		lib, path := loadedLibrary()
		return &dl.SymbolError{Library: lib, Path: path, Symbol: op, Reason: "the cuDNN library lacks the function it is translated to (not cuDNN 9?)"}
	case statusNoDevice:
		return &Error{Op: op, Status: StatusNotInitialized, Detail: "could not make the device current"}
	}
	return &Error{Op: op, Status: s}
}

// invalid is the error for arguments refused before any C call.
func invalid(op, format string, args ...any) error {
	return &Error{Op: op, Status: StatusBadParm, Detail: fmt.Sprintf(format, args...)}
}

// notImplemented is the error for what a platform cannot do.
func notImplemented(op, format string, args ...any) error {
	return &Error{Op: op, Status: StatusNotImplemented, Detail: fmt.Sprintf(format, args...)}
}

func closedError(op string) error { return fmt.Errorf("miopen: %s: %w", op, ErrClosed) }

// withDetail adds context to an *Error that has none.
func withDetail(err error, detail string) error {
	var e *Error
	if errors.As(err, &e) && e.Detail == "" {
		e.Detail = detail
	}
	return err
}

// LibraryErrorString asks the loaded library for a status's name
// (miopenGetErrorString). Status.String gives rocm-go's name without
// loading anything.
func LibraryErrorString(s Status) (string, error) {
	if err := ensure(); err != nil {
		return "", err
	}
	if C.rg_miopen_has(C.rg_miopen_idx_miopenGetErrorString) == 0 {
		return "", statusError("miopenGetErrorString", statusMissing)
	}
	return C.GoString(C.rg_miopenGetErrorString(C.miopenStatus_t(s))), nil
}
