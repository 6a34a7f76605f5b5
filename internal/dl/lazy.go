package dl

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Lazy is the load state every binding package keeps: loaded on first use
// or by explicit, counted Loads; a failed first use is remembered; the
// libraries close when the last explicit Load is matched by Unload (never
// when they were loaded on first use). O is the package's load options and
// S what a successful open produced (its platform, say).
type Lazy[O, S any] struct {
	// Open opens the libraries and fills the package's tables.
	Open func(O) ([]*Library, S, error)
	// Defaults returns the options of an implicit load (from the
	// environment, typically).
	Defaults func() (O, error)
	// Compatible says whether options agree with what is loaded; nil
	// means any options do.
	Compatible func(O, S) error
	// Unbind empties the package's tables before the libraries close.
	Unbind func()
	// Key, when set, names what a first-use load depends on (the platform
	// package hip loaded, for the packages that follow it). A first-use
	// load, or a remembered failure, made under another key is redone.
	Key func() string

	mu       sync.Mutex
	held     atomic.Bool       // refs > 0: an explicit Load holds the libraries, whatever Key says
	current  atomic.Pointer[S] // what the open produced while loaded (nil when not), read without the lock
	refs     int
	implicit bool
	key      string // Key's value at the last first-use load or failure
	err      error
	libs     []*Library
}

// Ensure loads with the defaults on first use. A failure is remembered:
// later calls return it at once, until a Load succeeds.
func (z *Lazy[O, S]) Ensure() error {
	if z.current.Load() != nil && (z.Key == nil || z.held.Load()) {
		return nil
	}
	key := ""
	if z.Key != nil {
		key = z.Key()
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.current.Load() != nil {
		if z.refs > 0 || !z.implicit || key == z.key {
			return nil
		}
		// Loaded on first use under another key: load again.
		z.closeLocked()
		z.implicit = false
	}
	if z.err != nil && key == z.key {
		return z.err
	}
	z.key = key
	o, err := z.Defaults()
	if err == nil {
		err = z.openLocked(o)
	}
	if err != nil {
		z.err = err
		return err
	}
	z.implicit = true
	return nil
}

// Load loads with options, or, when already loaded, checks that the
// options are compatible; either way it counts one Load.
func (z *Lazy[O, S]) Load(o O) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.current.Load() != nil {
		if z.Compatible != nil {
			if err := z.Compatible(o, *z.current.Load()); err != nil {
				return err
			}
		}
	} else if err := z.openLocked(o); err != nil {
		return err
	}
	z.refs++
	z.held.Store(true)
	return nil
}

func (z *Lazy[O, S]) openLocked(o O) error {
	libs, state, err := z.Open(o)
	if err != nil {
		return err
	}
	z.libs, z.err = libs, nil
	z.current.Store(&state)
	return nil
}

// Unload drops one Load, and closes the libraries when none is left and
// they were not loaded on first use.
func (z *Lazy[O, S]) Unload() error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.refs == 0 {
		return errors.New("Unload without a matching Load")
	}
	z.refs--
	z.held.Store(z.refs > 0)
	if z.refs > 0 || z.implicit {
		return nil
	}
	return z.closeLocked()
}

func (z *Lazy[O, S]) closeLocked() error {
	z.current.Store(nil)
	if z.Unbind != nil {
		z.Unbind()
	}
	var errs []error
	for _, l := range z.libs {
		errs = append(errs, l.Close())
	}
	z.libs, z.err = nil, nil
	return errors.Join(errs...)
}

// Reset forgets everything, closing the libraries whatever loaded them:
// the one reference to each that the open took (another package may hold
// its own). Tests use it to switch between fakes and real libraries.
func (z *Lazy[O, S]) Reset() {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.closeLocked()
	z.refs, z.implicit = 0, false
	z.held.Store(false)
}

// Loaded reports whether the libraries are loaded.
func (z *Lazy[O, S]) Loaded() bool { return z.current.Load() != nil }

// State returns what the open produced, and whether anything is loaded,
// without taking the lock (the ops of a package ask for its platform).
func (z *Lazy[O, S]) State() (S, bool) {
	if p := z.current.Load(); p != nil {
		return *p, true
	}
	var zero S
	return zero, false
}

// Libraries returns the open libraries.
func (z *Lazy[O, S]) Libraries() []*Library {
	z.mu.Lock()
	defer z.mu.Unlock()
	return append([]*Library(nil), z.libs...)
}
