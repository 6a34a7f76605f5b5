package hip

/*
#include "helpers.h"
*/
import "C"

// The error vocabulary (Error, the sentinels, ErrClosed) is generated from
// cgen.spec into zerrors.go; this file holds what only HIP has.

// StatusName asks the loaded runtime for a status's name
// (hipGetErrorName; on NVIDIA, CUDA's name of the translated code).
// Status.String gives rocm-go's name without loading anything.
func StatusName(s Status) (string, error) {
	if err := ensure(); err != nil {
		return "", err
	}
	if C.rg_hip_has(C.rg_hip_idx_hipGetErrorName) == 0 {
		return "", statusError("hipGetErrorName", statusMissing)
	}
	return C.GoString(C.rg_hipGetErrorName(C.hipError_t(s))), nil
}

// deviceError says why a device could not be made current: no device at
// all, or an ordinal out of range. Every package's no-device error has it
// as its cause (published to internal/bind on load).
func deviceError() error {
	if _, err := DeviceCount(); err != nil {
		return err
	}
	return &Error{Op: "hipSetDevice", Status: StatusInvalidDevice, Detail: "no such device ordinal"}
}
