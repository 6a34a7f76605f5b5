package miopen

/*
#include "helpers.h"
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

// WithPlatform names the platform to load for. It must be the platform
// package hip has loaded (or loads): MIOpen's calls make the device current
// through HIP.
func WithPlatform(p hip.Platform) LoadOption { return func(o *loadOptions) { o.platform = p } }

// WithLibraryPaths names files or directories to try first for libMIOpen
// (AMD) or libcudnn (NVIDIA).
func WithLibraryPaths(paths ...string) LoadOption {
	return func(o *loadOptions) { o.paths = append(o.paths, paths...) }
}

// loaded is what a successful load found.
type loaded struct {
	platform hip.Platform
}

var lib = dl.Lazy[loadOptions, loaded]{
	Open:     openLibrary,
	Defaults: func() (loadOptions, error) { return loadOptions{}, nil },
	// A first-use load follows package hip's platform; tests switch it.
	Key: follow.HIPPlatform,
	Compatible: func(o loadOptions, l loaded) error {
		if o.platform != hip.PlatformNone && o.platform != l.platform {
			return fmt.Errorf("miopen: Load: the %s platform is loaded already; Unload it first", l.platform)
		}
		return nil
	},
	Unbind: func() {
		C.rg_miopen_unbind()
		C.rg_miopen_set_setdev(nil)
	},
}

// Load loads MIOpen (libMIOpen.so.1) on the AMD platform, or cuDNN 9
// (libcudnn.so.9) behind rocm-go's translation on the NVIDIA platform. It
// follows the platform package hip loads, loading HIP first if needed.
// Every call loads on first use, so Load is needed only to choose options
// or to see the error early. Loads are counted as in hip.Load.
//
// The AMD library is looked for in the paths given, then $ROCM_PATH/lib,
// /opt/rocm/lib and the system loader path; cuDNN in the paths given,
// $CUDA_PATH, $CUDA_HOME, /usr/local/cuda and the loader path (where a pip
// wheel's folder may be listed in LD_LIBRARY_PATH).
func Load(opts ...LoadOption) error {
	var o loadOptions
	for _, opt := range opts {
		opt(&o)
	}
	return lib.Load(o)
}

// Unload drops one Load; see hip.Unload.
func Unload() error {
	if err := lib.Unload(); err != nil {
		return fmt.Errorf("miopen: %w", err)
	}
	return nil
}

// Available reports whether the library loads, loading it if needed.
func Available() bool { return ensure() == nil }

// LoadError returns why the library could not be loaded, or nil.
func LoadError() error { return ensure() }

func ensure() error { return lib.Ensure() }

// Platform reports the platform of the loaded library, hip.PlatformNone
// when none is loaded.
func Platform() hip.Platform {
	l, _ := lib.State()
	return l.platform
}

// LibraryPath is the library file as the loader mapped it: libMIOpen on
// AMD, libcudnn on NVIDIA.
func LibraryPath() string {
	libs := lib.Libraries()
	if len(libs) == 0 {
		return ""
	}
	sym := "miopenGetVersion"
	if Platform() == hip.PlatformNVIDIA {
		sym = "cudnnGetVersion"
	}
	return libs[0].File(sym)
}

func loadedLibrary() (name, path string) {
	libs := lib.Libraries()
	if len(libs) == 0 {
		return "MIOpen", "(not loaded)"
	}
	return libs[0].Name(), libs[0].Path()
}

// AMDHint is what to set when MIOpen is not found.
const AMDHint = "Install ROCm's MIOpen (libMIOpen.so.1, Debian's libmiopen1), or set ROCM_PATH, or pass miopen.WithLibraryPaths."

func openLibrary(o loadOptions) ([]*dl.Library, loaded, error) {
	if err := hip.LoadError(); err != nil {
		return nil, loaded{}, fmt.Errorf("miopen: MIOpen follows the HIP platform, which did not load: %w", err)
	}
	p := hip.LoadedPlatform()
	if o.platform != hip.PlatformNone && o.platform != p {
		return nil, loaded{}, fmt.Errorf("miopen: the %s platform was asked for, but package hip has loaded %s: MIOpen makes its devices current through HIP", o.platform, p)
	}
	var libs []*dl.Library
	switch p {
	case hip.PlatformAMD:
		l, err := dl.OpenProbed("MIOpen (libMIOpen)", AMDHint, dl.ROCm(o.paths, "libMIOpen.so.1").Candidates(), "miopenCreateWithStream")
		if err != nil {
			return nil, loaded{}, err
		}
		C.rg_miopen_bind(l.Handle())
		libs = []*dl.Library{l}
	case hip.PlatformNVIDIA:
		l, err := dl.OpenProbed("cuDNN (libcudnn)", dl.CUDAHint+" cuDNN 9 also comes in the nvidia-cudnn-cu12 and -cu13 pip wheels.",
			dl.CUDA(o.paths, "libcudnn.so.9").Candidates(), "cudnnCreate")
		if err != nil {
			return nil, loaded{}, err
		}
		libs = []*dl.Library{l}
		// cuBLAS computes 1x1 convolutions faster than legacy cuDNN; it is
		// optional, and cudart times it in Find.
		var cublas, cudart unsafe.Pointer
		if useCUBLAS {
			if b, r, err := dl.OpenCUBLAS(o.paths); err == nil {
				libs = append(libs, b, r)
				cublas, cudart = b.Handle(), r.Handle()
			}
		}
		C.rg_miopen_install_nvidia(l.Handle(), cublas, cudart)
	default:
		return nil, loaded{}, fmt.Errorf("miopen: no HIP platform is loaded")
	}
	C.rg_miopen_set_setdev((*[0]byte)(hipcore.SetDeviceFunc()))
	return libs, loaded{platform: p}, nil
}

// useCUBLAS says whether the NVIDIA platform loads cuBLAS for 1x1
// convolutions; the tests of the translation against a fake cuDNN turn it
// off, to keep a real cuBLAS out of a fake cuDNN.
var useCUBLAS = true
