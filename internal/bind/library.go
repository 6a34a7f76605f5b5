package bind

import (
	"fmt"
	"strconv"
	"sync"
	"unsafe"

	"github.com/rocm-go/rocm/internal/dl"
)

// Options are what a package's Load takes.
type Options struct {
	// Platform is the platform asked for; PlatformNone means the default
	// (for package hip: HIP_PLATFORM, else whichever loads; for the others:
	// the platform HIP loaded).
	Platform int
	// Paths are files or folders to try before the standard places.
	Paths []string
}

// Tables is what a binding package gives its Library.
type Tables interface {
	// Open opens the libraries of a platform and fills the package's
	// tables. A follower's Open is given HIP's platform; package hip's is
	// given the one asked for (PlatformNone: automatic) and returns the one
	// it loaded.
	Open(o Options) ([]*dl.Library, int, error)
	// Unbind empties the package's tables before the libraries close.
	Unbind()
	// SetDevice installs HIP's set-device function in the package's
	// device trampolines; nil removes it.
	SetDevice(fn unsafe.Pointer)
}

// Library is the load state of one binding package's library, and the
// rules they share: loaded on first use or by counted Loads; a library
// that follows HIP loads HIP first, takes HIP's platform, and is loaded
// again on first use when HIP's platform changed; its trampolines get
// HIP's set-device function once it is open.
type Library struct {
	// Pkg is the Go package, the prefix of its messages: "rocblas".
	Pkg string
	// Name is the library on AMD, NVIDIA what the NVIDIA platform
	// translates it to: "rocBLAS", "cuBLAS".
	Name, NVIDIA string
	// Follow loads package hip (hip.LoadError), for a library that follows
	// HIP's platform; nil for package hip itself, whose Open picks the
	// platform.
	Follow func() error
	// Standalone says that the library needs no HIP when a platform is
	// named (a compiler): only the default follows HIP's.
	Standalone bool
	// Tables is the package's side: its hand-written open and its
	// generated tables.
	Tables Tables

	once sync.Once
	lazy dl.Lazy[Options, int]
}

func (l *Library) state() *dl.Lazy[Options, int] {
	l.once.Do(func() {
		l.lazy.Open = l.open
		l.lazy.Defaults = func() (Options, error) { return Options{}, nil }
		l.lazy.Compatible = l.compatible
		l.lazy.Unbind = l.unbind
		if l.Follow != nil {
			// A first-use load follows HIP's platform; tests switch it.
			l.lazy.Key = func() string { l.Follow(); return strconv.Itoa(Platform()) }
		}
	})
	return &l.lazy
}

func (l *Library) open(o Options) ([]*dl.Library, int, error) {
	if l.Follow != nil && !(l.Standalone && o.Platform != PlatformNone) {
		if err := l.Follow(); err != nil {
			return nil, PlatformNone, fmt.Errorf("%s: %s follows the HIP platform, which did not load: %w", l.Pkg, l.Name, err)
		}
		p := Platform()
		if o.Platform != PlatformNone && o.Platform != p {
			return nil, PlatformNone, fmt.Errorf("%s: the %s platform was asked for, but package hip loaded %s: %s runs on HIP's devices and streams",
				l.Pkg, PlatformName(o.Platform), PlatformName(p), l.Name)
		}
		o.Platform = p
	}
	libs, p, err := l.Tables.Open(o)
	if err != nil {
		return nil, PlatformNone, err
	}
	l.Tables.SetDevice(SetDeviceFunc())
	return libs, p, nil
}

func (l *Library) compatible(o Options, loaded int) error {
	if o.Platform != PlatformNone && o.Platform != loaded {
		return fmt.Errorf("%s: Load: the %s platform is loaded already; Unload it before loading %s", l.Pkg, PlatformName(loaded), PlatformName(o.Platform))
	}
	return nil
}

func (l *Library) unbind() {
	l.Tables.SetDevice(nil)
	l.Tables.Unbind()
}

// Load loads with options, or checks them against what is loaded; either
// way it counts one Load.
func (l *Library) Load(o Options) error { return l.state().Load(o) }

// Unload drops one Load; the libraries close when none is left and they
// were not loaded on first use.
func (l *Library) Unload() error {
	if err := l.state().Unload(); err != nil {
		return fmt.Errorf("%s: %w", l.Pkg, err)
	}
	return nil
}

// Ensure loads with the defaults on first use; a failure is remembered.
func (l *Library) Ensure() error { return l.state().Ensure() }

// Platform reports the platform of the loaded library, PlatformNone when
// none is loaded.
func (l *Library) Platform() int {
	p, _ := l.state().State()
	return p
}

// Libraries returns the open libraries, the package's own first.
func (l *Library) Libraries() []*dl.Library { return l.state().Libraries() }

// Paths lists the files of the open libraries as the loader mapped them.
func (l *Library) Paths() []string {
	var out []string
	for _, lib := range l.Libraries() {
		out = append(out, lib.Origin())
	}
	return out
}

// Symbol resolves a symbol of the library the package binds, for what its
// table does not hold: the library's own on AMD; on NVIDIA nothing
// outside rocm-go's translation table.
func (l *Library) Symbol(name string) (unsafe.Pointer, error) {
	if err := l.Ensure(); err != nil {
		return nil, err
	}
	libs := l.Libraries()
	if l.Platform() == PlatformAMD && len(libs) > 0 {
		return libs[0].Sym(name)
	}
	return nil, l.MissingSymbol(name)
}

// Reset forgets everything, closing the libraries whatever loaded them.
// Tests use it to switch between fakes and real libraries.
func (l *Library) Reset() { l.state().Reset() }
