package hip

/*
#include "helpers.h"
*/
import "C"

import (
	"errors"
	"fmt"

	"github.com/rocm-go/rocm/internal/dl"
)

// Error is a failed HIP call, or a call refused before it reached HIP
// because its arguments were invalid. Status says which; errors.Is matches
// it against the sentinels below:
//
//	if errors.Is(err, hip.ErrOutOfMemory) { ... }
type Error struct {
	Op     string // the HIP function ("hipMalloc") or the Go method that refused the call
	Status Status
	Detail string // what was wrong with the arguments, or context; may be empty
}

func (e *Error) Error() string {
	s := fmt.Sprintf("hip: %s: %s (%s)", e.Op, e.Status, e.Status.Description())
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is reports whether target is an *Error with the same Status: the
// sentinels are such errors with no Op.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Status == e.Status
}

func sentinel(s Status) error { return &Error{Op: "sentinel", Status: s} }

// Sentinels for errors.Is. Each matches every *Error with its Status.
var (
	ErrInvalidValue          = sentinel(StatusInvalidValue)
	ErrOutOfMemory           = sentinel(StatusOutOfMemory)
	ErrNotInitialized        = sentinel(StatusNotInitialized)
	ErrInvalidConfiguration  = sentinel(StatusInvalidConfiguration)
	ErrInvalidDevicePointer  = sentinel(StatusInvalidDevicePointer)
	ErrInvalidDeviceFunction = sentinel(StatusInvalidDeviceFunction)
	ErrNoDevice              = sentinel(StatusNoDevice)
	ErrInvalidDevice         = sentinel(StatusInvalidDevice)
	ErrInvalidImage          = sentinel(StatusInvalidImage)
	ErrInvalidContext        = sentinel(StatusInvalidContext)
	ErrNoBinaryForGPU        = sentinel(StatusNoBinaryForGpu)
	ErrInvalidKernelFile     = sentinel(StatusInvalidKernelFile)
	ErrInvalidHandle         = sentinel(StatusInvalidHandle)
	ErrNotFound              = sentinel(StatusNotFound)
	ErrNotReady              = sentinel(StatusNotReady)
	ErrIllegalAddress        = sentinel(StatusIllegalAddress)
	ErrLaunchOutOfResources  = sentinel(StatusLaunchOutOfResources)
	ErrLaunchFailure         = sentinel(StatusLaunchFailure)
	ErrPeerAccessUnsupported = sentinel(StatusPeerAccessUnsupported)
	ErrNotSupported          = sentinel(StatusNotSupported)
	ErrStreamCaptureInvalid  = sentinel(StatusStreamCaptureInvalidated)
	ErrUnknown               = sentinel(StatusUnknown)
)

// ErrClosed is returned by methods of a handle that was closed.
var ErrClosed = errors.New("hip: use of a closed handle")

// ErrLibraryNotFound matches the error of a failed load: no candidate file
// of the runtime could be opened. The error lists every path tried.
var ErrLibraryNotFound = dl.ErrLibraryNotFound

// ErrSymbolNotFound matches the error of a call whose function the loaded
// runtime does not provide (an older runtime, or a function the platform
// does not translate).
var ErrSymbolNotFound = dl.ErrSymbolNotFound

// Status values the generated trampolines return instead of calling HIP.
const (
	statusMissing     Status = 0x7fffff01 // RG_HIP_MISSING
	statusNoDevice    Status = 0x7fffff02 // RG_HIP_NODEVICE
	statusCUDAMissing Status = 0x7fffff03 // RG_HIP_CUDA_MISSING (nvidia.c)
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
		lib, path := loadedLibrary()
		reason := "the loaded runtime does not export it (an older ROCm?)"
		if LoadedPlatform() == PlatformNVIDIA {
			reason = "rocm-go does not translate it to CUDA"
		}
		return &dl.SymbolError{Library: lib, Path: path, Symbol: op, Reason: reason}
	case statusCUDAMissing:
		lib, path := loadedLibrary()
		return &dl.SymbolError{Library: lib, Path: path, Symbol: op, Reason: "the CUDA libraries lack the function it is translated to (an older CUDA?)"}
	case statusNoDevice:
		return &Error{Op: op, Status: StatusInvalidDevice, Detail: "could not make the device current"}
	}
	return &Error{Op: op, Status: s}
}

// invalid is the error for arguments refused before any C call.
func invalid(op, format string, args ...any) error {
	return &Error{Op: op, Status: StatusInvalidValue, Detail: fmt.Sprintf(format, args...)}
}

func closedError(op string) error { return fmt.Errorf("hip: %s: %w", op, ErrClosed) }

// RuntimeErrorName asks the loaded runtime for a status's name
// (hipGetErrorName; on NVIDIA, CUDA's name of the translated code).
// Status.String gives rocm-go's name without loading anything.
func RuntimeErrorName(s Status) (string, error) {
	if err := ensure(); err != nil {
		return "", err
	}
	if C.rg_hip_has(C.rg_hip_idx_hipGetErrorName) == 0 {
		return "", statusError("hipGetErrorName", statusMissing)
	}
	return C.GoString(C.rg_hipGetErrorName(C.hipError_t(s))), nil
}

// RuntimeErrorString asks the loaded runtime for a status's description
// (hipGetErrorString).
func RuntimeErrorString(s Status) (string, error) {
	if err := ensure(); err != nil {
		return "", err
	}
	if C.rg_hip_has(C.rg_hip_idx_hipGetErrorString) == 0 {
		return "", statusError("hipGetErrorString", statusMissing)
	}
	return C.GoString(C.rg_hipGetErrorString(C.hipError_t(s))), nil
}
