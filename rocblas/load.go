package rocblas

/*
#include <stdlib.h>
#include <string.h>
#include "zrocblas.h"

void rg_rocblas_install_nvidia(void* cublas, void* cudart);
int rg_rocblas_nvidia_status(int cublas_status);

static void rg_rocblas_use_setdev(void* f) { rg_rocblas_set_setdev((int (*)(int))f); }
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/dl"
	"github.com/rocm-go/rocm/internal/follow"
	"github.com/rocm-go/rocm/internal/hipcore"
)

// LoadOption configures Load.
type LoadOption func(*loadOptions)

type loadOptions struct {
	platform hip.Platform
	paths    []string
}

// WithPlatform chooses the platform instead of following package hip. It
// must be the platform HIP loaded: rocBLAS runs on HIP's devices and
// streams.
func WithPlatform(p hip.Platform) LoadOption { return func(o *loadOptions) { o.platform = p } }

// WithLibraryPaths names files or directories to try first for librocblas
// (AMD) or libcublas and libcudart (NVIDIA).
func WithLibraryPaths(paths ...string) LoadOption {
	return func(o *loadOptions) { o.paths = append(o.paths, paths...) }
}

var blasLib = dl.Lazy[loadOptions, hip.Platform]{
	Open:     openLibrary,
	Defaults: func() (loadOptions, error) { return loadOptions{}, nil },
	// A first-use load follows package hip's platform; tests switch it.
	Key: follow.HIPPlatform,
	Compatible: func(o loadOptions, p hip.Platform) error {
		if o.platform != hip.PlatformNone && o.platform != p {
			return fmt.Errorf("rocblas: Load: the %s BLAS library is loaded already; Unload it first", p)
		}
		return nil
	},
	Unbind: func() {
		C.rg_rocblas_unbind()
		C.rg_rocblas_use_setdev(nil)
	},
}

// Load loads the BLAS library: rocBLAS on AMD, cuBLAS behind rocm-go's
// translation on NVIDIA. Without WithPlatform it follows the platform
// package hip loads (HIP_PLATFORM, else whichever loads), loading HIP
// first. Loads are counted as in hip.Load; every call loads on first use,
// so Load is needed only for options or to see the error early.
func Load(opts ...LoadOption) error {
	var o loadOptions
	for _, opt := range opts {
		opt(&o)
	}
	return blasLib.Load(o)
}

// Unload drops one Load; see hip.Unload. Every Handle must be closed first.
func Unload() error {
	if err := blasLib.Unload(); err != nil {
		return fmt.Errorf("rocblas: %w", err)
	}
	return nil
}

// Available reports whether the BLAS library loads, loading it if needed.
func Available() bool { return ensure() == nil }

// LoadError returns why the library could not be loaded on first use, or
// nil.
func LoadError() error { return ensure() }

func ensure() error { return blasLib.Ensure() }

// Platform reports the platform of the loaded library, hip.PlatformNone
// when none is loaded.
func Platform() hip.Platform {
	p, _ := blasLib.State()
	return p
}

// LibraryPath is the BLAS library file as the loader mapped it:
// librocblas on AMD, libcublas on NVIDIA; "" when none is loaded.
func LibraryPath() string {
	libs := blasLib.Libraries()
	if len(libs) == 0 {
		return ""
	}
	sym := "rocblas_create_handle"
	if Platform() == hip.PlatformNVIDIA {
		sym = "cublasCreate_v2"
	}
	return libs[0].File(sym)
}

// amdHint is what to do when librocblas is not found.
const amdHint = "Install ROCm's rocBLAS (librocblas), or set ROCM_PATH, or pass rocblas.WithLibraryPaths."

func openLibrary(o loadOptions) ([]*dl.Library, hip.Platform, error) {
	// rocBLAS makes devices current through HIP, and every handle is bound
	// to a HIP stream: HIP comes first.
	if err := hip.LoadError(); err != nil {
		return nil, hip.PlatformNone, fmt.Errorf("rocblas: BLAS runs on the HIP platform, which did not load: %w", err)
	}
	p := hip.LoadedPlatform()
	if o.platform != hip.PlatformNone && o.platform != p {
		return nil, hip.PlatformNone, fmt.Errorf("rocblas: Load: the %s platform was asked for, but HIP loaded %s", o.platform, p)
	}
	var libs []*dl.Library
	switch p {
	case hip.PlatformAMD:
		l, err := dl.OpenProbed("rocBLAS (librocblas)", amdHint, dl.ROCm(o.paths, "librocblas.so.5", "librocblas.so.4").Candidates(), "rocblas_create_handle")
		if err != nil {
			return nil, hip.PlatformNone, err
		}
		C.rg_rocblas_bind(l.Handle())
		libs = []*dl.Library{l}
	case hip.PlatformNVIDIA:
		cublas, cudart, err := dl.OpenCUBLAS(o.paths)
		if err != nil {
			return nil, hip.PlatformNone, err
		}
		C.rg_rocblas_install_nvidia(cublas.Handle(), cudart.Handle())
		libs = []*dl.Library{cublas, cudart}
	default:
		return nil, hip.PlatformNone, fmt.Errorf("rocblas: HIP loaded no platform")
	}
	C.rg_rocblas_use_setdev(hipcore.SetDeviceFunc())
	return libs, p, nil
}

// Symbol returns the address of a bound rocBLAS function ("rocblas_sgemm")
// as the package calls it: the library's own on AMD, rocm-go's cuBLAS
// translation on NVIDIA. It is for callers that call rocBLAS from their own
// C code, with Handle.Raw; such code must make the handle's device current
// in the same C call.
func Symbol(name string) (unsafe.Pointer, error) {
	if err := ensure(); err != nil {
		return nil, err
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if i := C.rg_rocblas_index(cname); i >= 0 {
		if p := C.rg_rocblas_sym(i); p != nil {
			return p, nil
		}
	}
	libs := blasLib.Libraries()
	if Platform() == hip.PlatformAMD && len(libs) > 0 {
		return libs[0].Sym(name)
	}
	return nil, missing(name)
}

// nvidiaStatus translates a cuBLAS status as the NVIDIA platform does (for
// tests).
func nvidiaStatus(cublas int) Status { return Status(C.rg_rocblas_nvidia_status(C.int(cublas))) }

// untranslated lists the bound functions the loaded platform cannot call.
func untranslated() []string {
	var out []string
	for i := C.int(0); i < C.rg_rocblas_count; i++ {
		if C.rg_rocblas_has(i) == 0 {
			out = append(out, C.GoString(C.rg_rocblas_name(i)))
		}
	}
	return out
}

// Version reports the library's version string: rocBLAS's
// ("4.4.1.be8e9f4c"), or on NVIDIA cuBLAS's ("cuBLAS 13.1.0").
func Version() (string, error) {
	if err := ensure(); err != nil {
		return "", err
	}
	var n C.size_t
	if err := check("rocblas_get_version_string_size", C.rg_rocblas_get_version_string_size(&n)); err != nil {
		return "", err
	}
	if n == 0 || n > 1<<16 {
		return "", &Error{Op: "rocblas_get_version_string_size", Status: StatusInternalError, Detail: fmt.Sprintf("a version string of %d bytes", n)}
	}
	buf := (*C.char)(C.malloc(n))
	defer C.free(unsafe.Pointer(buf))
	if err := check("rocblas_get_version_string", C.rg_rocblas_get_version_string(buf, n)); err != nil {
		return "", err
	}
	return C.GoStringN(buf, C.int(C.strnlen(buf, n))), nil
}

// StatusString asks the loaded library for a status's text
// (rocblas_status_to_string): the C name of the status on AMD, and the same
// names on NVIDIA. Status.String gives rocm-go's name without loading
// anything.
func StatusString(s Status) (string, error) {
	if err := ensure(); err != nil {
		return "", err
	}
	if C.rg_rocblas_has(C.rg_rocblas_idx_rocblas_status_to_string) == 0 {
		return "", missing("rocblas_status_to_string")
	}
	p := C.rg_rocblas_status_to_string(C.rocblas_status(s))
	if p == nil {
		return "", &Error{Op: "rocblas_status_to_string", Status: StatusInternalError, Detail: "no text for " + s.String()}
	}
	return C.GoString(p), nil
}
