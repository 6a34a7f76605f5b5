package miopen

/*
#include "helpers.h"
*/
import "C"

import (
	"os"
	"unsafe"

	"github.com/rocm-go/rocm/internal/bind"
	"github.com/rocm-go/rocm/internal/dl"
)

// The load API (Load, Unload, LoadedPlatform, Symbol, StatusString, ...) is
// generated from cgen.spec into zload.go; this file holds how the library
// opens. MIOpen is looked for in the paths given, $ROCM_PATH/lib,
// /opt/rocm/lib and the system loader path; cuDNN in the paths given,
// $CUDA_PATH, $CUDA_HOME, /usr/local/cuda and the loader path (where a pip
// wheel's folder may be listed in LD_LIBRARY_PATH).

// open opens MIOpen (libMIOpen.so.1) on AMD, or cuDNN 9 (libcudnn.so.9),
// with cuBLAS when it loads, on NVIDIA.
func open(o bind.Options) ([]*dl.Library, int, error) {
	if o.Platform != bind.PlatformNVIDIA {
		l, err := dl.OpenProbed("MIOpen (libMIOpen)",
			"Install ROCm's MIOpen (libMIOpen.so.1, Debian's libmiopen1), or set ROCM_PATH, or pass miopen.WithLibraryPaths.",
			dl.ROCm(o.Paths, "libMIOpen.so.1").Candidates(), "miopenCreateWithStream")
		if err != nil {
			return nil, bind.PlatformNone, err
		}
		C.rg_miopen_bind(l.Handle())
		return []*dl.Library{l}, o.Platform, nil
	}
	l, err := dl.OpenProbed("cuDNN (libcudnn)", dl.CUDAHint+" cuDNN 9 also comes in the nvidia-cudnn-cu12 and -cu13 pip wheels.",
		dl.CUDA(o.Paths, "libcudnn.so.9").Candidates(), "cudnnCreate")
	if err != nil {
		return nil, bind.PlatformNone, err
	}
	libs := []*dl.Library{l}
	// cuBLAS computes 1x1 convolutions faster than legacy cuDNN; it is
	// optional, and cudart times it in Find, and the plans of cuDNN's graph
	// API.
	var cublas, cudart unsafe.Pointer
	if useCUBLAS {
		if b, r, err := dl.OpenCUBLAS(o.Paths); err == nil {
			libs = append(libs, b, r)
			cublas, cudart = b.Handle(), r.Handle()
		}
	}
	graph := useGraphAPI && os.Getenv("ROCM_GO_CUDNN_GRAPH") != "0"
	if graph && cudart == nil {
		if r, err := dl.OpenCUDART(o.Paths); err == nil {
			libs = append(libs, r)
			cudart = r.Handle()
		}
	}
	C.rg_miopen_install_nvidia(l.Handle(), cublas, cudart, C.int(bool2int(graph)))
	return libs, o.Platform, nil
}

func bool2int(b bool) int {
	if b {
		return 1
	}
	return 0
}

// useCUBLAS says whether the NVIDIA platform loads cuBLAS for 1x1
// convolutions; the tests of the translation against a fake cuDNN turn it
// off, to keep a real cuBLAS out of a fake cuDNN.
var useCUBLAS = true

// useGraphAPI says whether Find on the NVIDIA platform also times the
// engines of cuDNN's graph API (unless $ROCM_GO_CUDNN_GRAPH is 0); the
// tests of the legacy translation turn it off.
var useGraphAPI = true
