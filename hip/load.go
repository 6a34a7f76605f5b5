package hip

/*
#include "helpers.h"
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/rocm-go/rocm/internal/dl"
	"github.com/rocm-go/rocm/internal/hipcore"
)

// Platform is the vendor stack that carries the HIP calls.
type Platform int

// Platforms.
const (
	PlatformNone   Platform = hipcore.PlatformNone   // nothing loaded
	PlatformAMD    Platform = hipcore.PlatformAMD    // ROCm: libamdhip64
	PlatformNVIDIA Platform = hipcore.PlatformNVIDIA // CUDA, through rocm-go's translation layer
)

func (p Platform) String() string {
	switch p {
	case PlatformAMD:
		return "amd"
	case PlatformNVIDIA:
		return "nvidia"
	}
	return "none"
}

// ParsePlatform reads a HIP_PLATFORM value: "amd" (or the old "hcc"),
// "nvidia" (or "nvcc"). The empty string means automatic: PlatformNone.
func ParsePlatform(s string) (Platform, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return PlatformNone, nil
	case "amd", "hcc":
		return PlatformAMD, nil
	case "nvidia", "nvcc":
		return PlatformNVIDIA, nil
	}
	return PlatformNone, fmt.Errorf("hip: HIP_PLATFORM=%q: want amd or nvidia (or unset, to pick the one that loads)", s)
}

// LoadOption configures Load.
type LoadOption func(*loadOptions)

type loadOptions struct {
	platform Platform
	paths    []string
}

// WithPlatform chooses the platform, overriding HIP_PLATFORM.
func WithPlatform(p Platform) LoadOption { return func(o *loadOptions) { o.platform = p } }

// WithLibraryPaths names files or directories to try first for the
// runtime library: libamdhip64 on AMD, libcudart and libcuda on NVIDIA.
func WithLibraryPaths(paths ...string) LoadOption {
	return func(o *loadOptions) { o.paths = append(o.paths, paths...) }
}

// hipLib is the load state of the HIP runtime.
var hipLib = dl.Lazy[loadOptions, Platform]{
	Open:     openRuntime,
	Defaults: func() (loadOptions, error) { return resolveOptions(nil) },
	Compatible: func(o loadOptions, loaded Platform) error {
		if o.platform != PlatformNone && o.platform != loaded {
			return fmt.Errorf("hip: Load: the %s platform is loaded already; Unload it before loading %s", loaded, o.platform)
		}
		return nil
	},
	Unbind: func() {
		unbindTables()
		hipcore.Publish(hipcore.PlatformNone, nil)
	},
}

// Load loads the HIP runtime. Without options it follows HIP_PLATFORM: amd,
// nvidia, or, when unset, AMD if the ROCm runtime loads, else NVIDIA if the
// CUDA driver and runtime load.
//
// Every API call loads the runtime on first use, so Load is needed only to
// choose options or to see the error early. Loads are counted: each
// successful Load is matched by one Unload, and the library is closed when
// the count drops to zero (never when it was loaded on first use). A Load
// while the runtime is loaded succeeds when its options agree with the
// loaded platform.
func Load(opts ...LoadOption) error {
	o, err := resolveOptions(opts)
	if err != nil {
		return err
	}
	return hipLib.Load(o)
}

// Unload drops one Load. When none is left, and the runtime was not loaded
// implicitly on first use, it closes the library; every call then fails
// until the next Load. Unload must not race with calls that use HIP objects.
func Unload() error {
	if err := hipLib.Unload(); err != nil {
		return fmt.Errorf("hip: %w", err)
	}
	return nil
}

// Available reports whether the HIP runtime loads, loading it if needed.
func Available() bool { return ensure() == nil }

// LoadError returns why the runtime could not be loaded on first use, or
// nil.
func LoadError() error { return ensure() }

// LoadedPlatform reports the loaded platform, PlatformNone when none is.
func LoadedPlatform() Platform {
	p, _ := hipLib.State()
	return p
}

// LibraryPaths lists the files of the loaded runtime as the dynamic loader
// mapped them.
func LibraryPaths() []string {
	var out []string
	for _, l := range hipLib.Libraries() {
		out = append(out, l.File(probeSymbol(l)))
	}
	return out
}

// probeSymbol is a symbol every library of a platform exports, used to find
// the file it came from.
func probeSymbol(l *dl.Library) string {
	switch {
	case strings.Contains(l.Path(), "amdhip64"):
		return "hipRuntimeGetVersion"
	case strings.Contains(l.Path(), "cudart"):
		return "cudaRuntimeGetVersion"
	}
	return "cuInit"
}

func loadedLibrary() (name, path string) {
	libs := hipLib.Libraries()
	if len(libs) == 0 {
		return "HIP runtime", "(not loaded)"
	}
	return libs[0].Name(), libs[0].Path()
}

// ensure loads the runtime with the defaults on first use.
func ensure() error { return hipLib.Ensure() }

func resolveOptions(opts []LoadOption) (loadOptions, error) {
	var o loadOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.platform == PlatformNone {
		p, err := ParsePlatform(os.Getenv("HIP_PLATFORM"))
		if err != nil {
			return o, err
		}
		o.platform = p
	}
	return o, nil
}

// openRuntime opens the platform's libraries and fills the tables.
func openRuntime(o loadOptions) ([]*dl.Library, Platform, error) {
	var libs []*dl.Library
	var err error
	platform := o.platform
	switch platform {
	case PlatformAMD:
		libs, err = loadAMD(o.paths)
	case PlatformNVIDIA:
		libs, err = loadNVIDIA(o.paths)
	default:
		var amdErr, nvErr error
		if libs, amdErr = loadAMD(o.paths); amdErr == nil {
			platform = PlatformAMD
		} else if libs, nvErr = loadNVIDIA(o.paths); nvErr == nil {
			platform = PlatformNVIDIA
		} else {
			err = &NoPlatformError{AMD: amdErr, NVIDIA: nvErr}
		}
	}
	if err != nil {
		return nil, PlatformNone, err
	}
	C.rg_hip_install_setdev()
	hipcore.Publish(int(platform), unsafe.Pointer(C.rg_hip_setdev_func()))
	return libs, platform, nil
}

// NoPlatformError says that neither platform loaded. errors.Is matches it
// against ErrLibraryNotFound when both libraries were missing.
type NoPlatformError struct {
	AMD, NVIDIA error
}

func (e *NoPlatformError) Error() string {
	return fmt.Sprintf("hip: no HIP platform could be loaded (set HIP_PLATFORM=amd or nvidia to pick one)\n"+
		"AMD: %v\nNVIDIA: %v", indent(e.AMD), indent(e.NVIDIA))
}

// Unwrap returns both causes.
func (e *NoPlatformError) Unwrap() []error { return []error{e.AMD, e.NVIDIA} }

func indent(err error) string { return strings.ReplaceAll(err.Error(), "\n", "\n  ") }

func loadAMD(explicit []string) ([]*dl.Library, error) {
	l, err := dl.OpenProbed("HIP runtime (libamdhip64)",
		"Install ROCm's HIP runtime, or set ROCM_PATH to its root, or pass hip.WithLibraryPaths.",
		dl.ROCm(explicit, "libamdhip64.so.7", "libamdhip64.so.6").Candidates(), "hipRuntimeGetVersion")
	if err != nil {
		return nil, err
	}
	C.rg_hip_bind(l.Handle())
	return []*dl.Library{l}, nil
}

// unbindTables empties the function table.
func unbindTables() { C.rg_hip_unbind() }

// Symbol returns the address of a function in the loaded runtime, for
// callers that bind more of HIP through cgo themselves. On the NVIDIA
// platform it is the translated function of rocm-go's table, and only the
// functions package hip binds are there.
func Symbol(name string) (unsafe.Pointer, error) {
	if err := ensure(); err != nil {
		return nil, err
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if i := C.rg_hip_index(cname); i >= 0 {
		if p := C.rg_hip_sym(i); p != nil {
			return p, nil
		}
	}
	if LoadedPlatform() == PlatformAMD {
		return hipLib.Libraries()[0].Sym(name)
	}
	n, p := loadedLibrary()
	return nil, &dl.SymbolError{Library: n, Path: p, Symbol: name, Reason: "not in rocm-go's translation table"}
}
