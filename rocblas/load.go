package rocblas

/*
#include <stdlib.h>
#include <string.h>
#include "helpers.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/bind"
	"github.com/rocm-go/rocm/internal/dl"
)

// The load API (Load, Unload, LoadedPlatform, Symbol, StatusString, ...) is
// generated from cgen.spec into zload.go; this file holds how the library
// opens.

// open opens rocBLAS on AMD, cuBLAS and the CUDA runtime of its major
// version on NVIDIA.
func open(o bind.Options) ([]*dl.Library, int, error) {
	if o.Platform == bind.PlatformNVIDIA {
		cublas, cudart, err := dl.OpenCUBLAS(o.Paths)
		if err != nil {
			return nil, bind.PlatformNone, err
		}
		C.rg_rocblas_install_nvidia(cublas.Handle(), cudart.Handle())
		return []*dl.Library{cublas, cudart}, o.Platform, nil
	}
	l, err := dl.OpenProbed("rocBLAS (librocblas)", "Install ROCm's rocBLAS (librocblas), or set ROCM_PATH, or pass rocblas.WithLibraryPaths.",
		dl.ROCm(o.Paths, "librocblas.so.5", "librocblas.so.4").Candidates(), "rocblas_create_handle")
	if err != nil {
		return nil, bind.PlatformNone, err
	}
	C.rg_rocblas_bind(l.Handle())
	return []*dl.Library{l}, o.Platform, nil
}

// nvidiaStatus translates a cuBLAS status as the NVIDIA platform does (for
// tests).
func nvidiaStatus(cublas int) Status { return Status(C.rg_rocblas_nvidia_status(C.int(cublas))) }

// Version reports the library's version: rocBLAS's on AMD (its string
// "4.4.1.be8e9f4c" without the commit), cuBLAS's on NVIDIA.
func Version() (hip.Version, error) {
	if err := ensure(); err != nil {
		return hip.Version{}, err
	}
	var n C.size_t
	if err := check("rocblas_get_version_string_size", C.rg_rocblas_get_version_string_size(&n)); err != nil {
		return hip.Version{}, err
	}
	if n == 0 || n > 1<<16 {
		return hip.Version{}, &Error{Op: "rocblas_get_version_string_size", Status: StatusInternalError, Detail: fmt.Sprintf("a version string of %d bytes", n)}
	}
	buf := (*C.char)(C.malloc(n))
	defer C.free(unsafe.Pointer(buf))
	if err := check("rocblas_get_version_string", C.rg_rocblas_get_version_string(buf, n)); err != nil {
		return hip.Version{}, err
	}
	s := C.GoStringN(buf, C.int(C.strnlen(buf, n)))
	var v hip.Version
	if _, err := fmt.Sscanf(s, "%d.%d.%d", &v.Major, &v.Minor, &v.Patch); err != nil {
		return hip.Version{}, &Error{Op: "rocblas_get_version_string", Status: StatusInternalError, Detail: fmt.Sprintf("version %q: %v", s, err)}
	}
	return v, nil
}
