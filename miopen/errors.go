package miopen

import "fmt"

// The error vocabulary (Error, the sentinels, ErrClosed) is generated from
// cgen.spec into zerrors.go; this file holds what only MIOpen's policy
// needs. On the NVIDIA platform a cuDNN status is translated to MIOpen's by
// name (CUDNN_STATUS_BAD_PARAM is StatusBadParm, CUDNN_STATUS_NOT_SUPPORTED
// StatusNotImplemented, ...) and Detail names the cuDNN function and
// status.

// notImplemented is the error for what a platform cannot do: a layout, a
// data type, an operation such as multi-head attention on NVIDIA
// (ErrNotImplemented).
func notImplemented(op, format string, args ...any) error {
	return &Error{Op: op, Status: StatusNotImplemented, Detail: fmt.Sprintf(format, args...)}
}
