package hiprtc

/*
#include "helpers.h"
*/
import "C"

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/rocm-go/rocm/internal/bind"
	"github.com/rocm-go/rocm/internal/dl"
)

// The load API (Load, Unload, LoadedPlatform, Symbol, ...) is generated
// from cgen.spec into zload.go; this file holds how the compiler opens.

// open opens hipRTC on AMD, NVRTC (and its builtins) on NVIDIA.
func open(o bind.Options) ([]*dl.Library, int, error) {
	cudaInclude.Store(new(string))
	if o.Platform == bind.PlatformNVIDIA {
		return openNVRTC(o.Paths)
	}
	l, err := dl.OpenProbed("hipRTC (libhiprtc)",
		"Install ROCm's hipRTC (libhiprtc), or set ROCM_PATH, or pass hiprtc.WithLibraryPaths.",
		dl.ROCm(o.Paths, "libhiprtc.so.7", "libhiprtc.so.6").Candidates(), "hiprtcCompileProgram")
	if err != nil {
		return nil, bind.PlatformNone, err
	}
	C.rg_hiprtc_bind(l.Handle())
	return []*dl.Library{l}, o.Platform, nil
}

func openNVRTC(explicit []string) ([]*dl.Library, int, error) {
	l, err := dl.OpenProbed("NVRTC (libnvrtc)", dl.CUDAHint, dl.CUDA(explicit, "libnvrtc.so.13", "libnvrtc.so.12").Candidates(), "nvrtcCompileProgram")
	if err != nil {
		return nil, bind.PlatformNone, err
	}
	libs := []*dl.Library{l}
	// NVRTC opens its builtins library by soname at compile time: load it
	// from NVRTC's own folder first, for the folders the system loader
	// does not search.
	dir := filepath.Dir(l.Origin())
	if builtins, _ := filepath.Glob(filepath.Join(dir, "libnvrtc-builtins.so.*")); len(builtins) > 0 {
		if b, err := dl.Open("NVRTC builtins", "", builtins); err == nil {
			libs = append(libs, b)
		}
	}
	C.rg_hiprtc_install_nvidia(l.Handle())
	include := findCUDAInclude(dir)
	cudaInclude.Store(&include)
	return libs, bind.PlatformNVIDIA, nil
}

// cudaInclude is the folder of cuda_fp16.h that NVRTC compiles are given.
var cudaInclude atomic.Pointer[string]

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
	if LoadedPlatform() == bind.PlatformNVIDIA {
		if p := cudaInclude.Load(); p != nil {
			return *p
		}
	}
	return ""
}
