package bind

import (
	"runtime"
	"sync/atomic"
)

// Lifetime is what every handle keeps beside its C object: whether it was
// closed, and the cleanup that frees the object should the handle be
// dropped unclosed (a leak backstop only; Close is the way). Views that
// share an allocation share its Lifetime.
type Lifetime struct {
	closed  atomic.Bool
	cleanup runtime.Cleanup
}

// Backstop arms l's cleanup: free(arg) once owner is garbage. arg must not
// reach owner, or owner never becomes garbage.
func Backstop[T, S any](l *Lifetime, owner *T, free func(S), arg S) {
	l.cleanup = runtime.AddCleanup(owner, free, arg)
}

// Closed reports whether the handle was closed.
func (l *Lifetime) Closed() bool { return l.closed.Load() }

// End marks the handle closed and disarms the backstop. It reports whether
// this call closed it: only the first call does, and only that caller
// frees the C object.
func (l *Lifetime) End() bool {
	if !l.Mark() {
		return false
	}
	l.Disarm()
	return true
}

// Mark marks the handle closed and reports whether this call did, leaving
// the backstop armed: for a handle whose C object outlives its Close
// while others still use it (a module that open graphs captured).
func (l *Lifetime) Mark() bool { return l.closed.CompareAndSwap(false, true) }

// Disarm stops the backstop, once the C object is freed.
func (l *Lifetime) Disarm() { l.cleanup.Stop() }

// Close is End followed by free on the first call; later calls do
// nothing and return nil.
func (l *Lifetime) Close(free func() error) error {
	if !l.End() {
		return nil
	}
	return free()
}
