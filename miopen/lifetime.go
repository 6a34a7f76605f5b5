package miopen

/*
#include "helpers.h"
*/
import "C"

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// lifetime is what every descriptor keeps beside its C handle: whether it
// was closed, and the cleanup that destroys it should it be dropped
// unclosed (a leak backstop; Close is the way).
type lifetime struct {
	closed  atomic.Bool
	cleanup runtime.Cleanup
}

// backstop arms the cleanup of owner: destroy(p) once owner is garbage.
func backstop[T any](owner *T, l *lifetime, p unsafe.Pointer, destroy func(unsafe.Pointer)) {
	l.cleanup = runtime.AddCleanup(owner, destroy, p)
}

// alive fails for a closed descriptor; the caller checks for nil first,
// with what it is in the message.
func (l *lifetime) alive(op string) error {
	if l.closed.Load() {
		return closedError(op)
	}
	return nil
}

// close destroys the descriptor the first time; later calls do nothing.
func (l *lifetime) close(op string, destroy func() C.miopenStatus_t) error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	l.cleanup.Stop()
	return check(op, destroy())
}
