package hiprtc

/*
#include "zhiprtc.h"

void rg_hiprtc_install_nvidia(void* nvrtc);
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/dl"
	"github.com/rocm-go/rocm/internal/follow"
)

// LoadOption configures Load.
type LoadOption func(*loadOptions)

type loadOptions struct {
	platform hip.Platform
	paths    []string
}

// WithPlatform chooses the platform instead of following package hip.
func WithPlatform(p hip.Platform) LoadOption { return func(o *loadOptions) { o.platform = p } }

// WithLibraryPaths names files or directories to try first for libhiprtc
// (AMD) or libnvrtc (NVIDIA).
func WithLibraryPaths(paths ...string) LoadOption {
	return func(o *loadOptions) { o.paths = append(o.paths, paths...) }
}

// loaded is what a successful load found.
type loaded struct {
	platform    hip.Platform
	cudaInclude string // NVIDIA: the folder of cuda_fp16.h, "" when not found
}

var rtcLib = dl.Lazy[loadOptions, loaded]{
	Open: openCompiler,
	Defaults: func() (loadOptions, error) {
		return loadOptions{}, nil
	},
	// A first-use load follows package hip's platform; tests switch it.
	Key: follow.HIPPlatform,
	Compatible: func(o loadOptions, l loaded) error {
		if o.platform != hip.PlatformNone && o.platform != l.platform {
			return fmt.Errorf("hiprtc: Load: the %s compiler is loaded already; Unload it first", l.platform)
		}
		return nil
	},
	Unbind: func() { C.rg_hiprtc_unbind() },
}

// Load loads the compiler library. Without WithPlatform it follows the
// platform package hip loads (HIP_PLATFORM, else whichever loads). Loads
// are counted as in hip.Load; every call loads on first use.
func Load(opts ...LoadOption) error {
	var o loadOptions
	for _, opt := range opts {
		opt(&o)
	}
	return rtcLib.Load(o)
}

// Unload drops one Load; see hip.Unload.
func Unload() error {
	if err := rtcLib.Unload(); err != nil {
		return fmt.Errorf("hiprtc: %w", err)
	}
	return nil
}

// Available reports whether the compiler loads, loading it if needed.
func Available() bool { return ensure() == nil }

// LoadError returns why the compiler could not be loaded, or nil.
func LoadError() error { return ensure() }

func ensure() error { return rtcLib.Ensure() }

// Platform reports the platform of the loaded compiler.
func Platform() hip.Platform {
	l, _ := rtcLib.State()
	return l.platform
}

// LibraryPath is the compiler library file as the loader mapped it.
func LibraryPath() string {
	libs := rtcLib.Libraries()
	if len(libs) == 0 {
		return ""
	}
	sym := "hiprtcVersion"
	if Platform() == hip.PlatformNVIDIA {
		sym = "nvrtcVersion"
	}
	return libs[0].File(sym)
}

func openCompiler(o loadOptions) ([]*dl.Library, loaded, error) {
	p := o.platform
	if p == hip.PlatformNone {
		if err := hip.LoadError(); err != nil {
			return nil, loaded{}, fmt.Errorf("hiprtc: the compiler follows the HIP platform, which did not load: %w", err)
		}
		p = hip.LoadedPlatform()
	}
	switch p {
	case hip.PlatformAMD:
		l, err := dl.OpenProbed("hipRTC (libhiprtc)",
			"Install ROCm's hipRTC (libhiprtc), or set ROCM_PATH, or pass hiprtc.WithLibraryPaths.",
			dl.ROCm(o.paths, "libhiprtc.so.7", "libhiprtc.so.6").Candidates(), "hiprtcCompileProgram")
		if err != nil {
			return nil, loaded{}, err
		}
		C.rg_hiprtc_bind(l.Handle())
		return []*dl.Library{l}, loaded{platform: p}, nil
	case hip.PlatformNVIDIA:
		return openNVRTC(o.paths)
	}
	return nil, loaded{}, fmt.Errorf("hiprtc: no platform to load the compiler for")
}

func openNVRTC(explicit []string) ([]*dl.Library, loaded, error) {
	l, err := dl.OpenProbed("NVRTC (libnvrtc)", dl.CUDAHint, dl.CUDA(explicit, "libnvrtc.so.13", "libnvrtc.so.12").Candidates(), "nvrtcCompileProgram")
	if err != nil {
		return nil, loaded{}, err
	}
	libs := []*dl.Library{l}
	// NVRTC opens its builtins library by soname at compile time: load it
	// from NVRTC's own folder first, for the folders the system loader
	// does not search.
	dir := filepath.Dir(l.File("nvrtcVersion"))
	if builtins, _ := filepath.Glob(filepath.Join(dir, "libnvrtc-builtins.so.*")); len(builtins) > 0 {
		if b, err := dl.Open("NVRTC builtins", "", builtins); err == nil {
			libs = append(libs, b)
		}
	}
	C.rg_hiprtc_install_nvidia(l.Handle())
	return libs, loaded{platform: hip.PlatformNVIDIA, cudaInclude: findCUDAInclude(dir)}, nil
}

// findCUDAInclude finds the folder of cuda_fp16.h: next to NVRTC's
// library folder, under $CUDA_PATH or $CUDA_HOME, or in /usr/local/cuda.
func findCUDAInclude(libDir string) string {
	var dirs []string
	dirs = append(dirs, filepath.Join(libDir, "..", "include"))
	for _, v := range []string{"CUDA_PATH", "CUDA_HOME"} {
		if r := os.Getenv(v); r != "" {
			dirs = append(dirs, filepath.Join(r, "include"), filepath.Join(r, "targets", "x86_64-linux", "include"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/include", "/usr/local/cuda/targets/x86_64-linux/include")
	// pip wheels put the headers of each component in its own folder.
	if strings.Contains(libDir, "site-packages") {
		more, _ := filepath.Glob(filepath.Join(libDir, "..", "..", "*", "include"))
		dirs = append(dirs, more...)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "cuda_fp16.h")); err == nil {
			return filepath.Clean(d)
		}
	}
	return ""
}

// CUDAIncludeDir is the folder of CUDA's headers that NVRTC compiles are
// given, "" on AMD or when it was not found.
func CUDAIncludeDir() string {
	l, _ := rtcLib.State()
	return l.cudaInclude
}
