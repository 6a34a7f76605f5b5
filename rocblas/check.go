package rocblas

import "fmt"

// Errors for arguments refused before any C call, beside the generated
// invalid (StatusInvalidValue).
func invalidSize(op, format string, args ...any) error {
	return &Error{Op: op, Status: StatusInvalidSize, Detail: fmt.Sprintf(format, args...)}
}

func invalidPointer(op, format string, args ...any) error {
	return &Error{Op: op, Status: StatusInvalidPointer, Detail: fmt.Sprintf(format, args...)}
}
