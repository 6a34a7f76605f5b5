package hip

/*
#include "helpers.h"

void rg_hip_install_nvidia(void* cudart, void* cuda);
int rg_hip_nvidia_status(int cuda_status);
int rg_hip_nvidia_cuda_status(int hip_status);
*/
import "C"

import (
	"fmt"

	"github.com/rocm-go/rocm/internal/dl"
)

// CUDASearch says where the CUDA libraries of the NVIDIA platform are
// looked for: explicit paths, $CUDA_PATH and $CUDA_HOME, /usr/local/cuda,
// then the system loader path. Binding packages use it for cuBLAS, NVRTC
// and cuDNN as well.
func CUDASearch(explicit []string, sonames ...string) dl.Search {
	sub := []string{"lib64", "lib", "targets/x86_64-linux/lib"}
	return dl.Search{
		Explicit: explicit,
		Env:      []dl.EnvDir{{Var: "CUDA_PATH", Subdir: sub}, {Var: "CUDA_HOME", Subdir: sub}},
		Dirs:     []string{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/nvidia/lib64"},
		Sonames:  sonames,
	}
}

// CUDAHint is what to set when a CUDA library is not found.
const CUDAHint = "Install the NVIDIA driver and CUDA 12 or 13, or set CUDA_PATH, or add the library's folder to LD_LIBRARY_PATH."

// loadNVIDIA opens the CUDA runtime and driver and fills the table with the
// translation layer (nvidia.c).
func loadNVIDIA(explicit []string) ([]*dl.Library, error) {
	cudart, err := dl.Open("CUDA runtime (libcudart)", CUDAHint, CUDASearch(explicit, "libcudart.so.13", "libcudart.so.12").Candidates())
	if err != nil {
		return nil, err
	}
	cuda, err := dl.Open("CUDA driver (libcuda)", CUDAHint, CUDASearch(explicit, "libcuda.so.1").Candidates())
	if err != nil {
		cudart.Close()
		return nil, err
	}
	for _, probe := range []struct {
		lib *dl.Library
		sym string
	}{{cudart, "cudaRuntimeGetVersion"}, {cuda, "cuLaunchKernel"}} {
		if _, err := probe.lib.Sym(probe.sym); err != nil {
			cudart.Close()
			cuda.Close()
			return nil, fmt.Errorf("hip: %s is not a %s: %w", probe.lib.Path(), probe.lib.Name(), err)
		}
	}
	C.rg_hip_install_nvidia(cudart.Handle(), cuda.Handle())
	return []*dl.Library{cudart, cuda}, nil
}

// nvidiaStatus translates a CUDA status to HIP's as the NVIDIA platform
// does, and cudaStatus back (for tests).
func nvidiaStatus(cuda int) Status { return Status(C.rg_hip_nvidia_status(C.int(cuda))) }
func cudaStatus(s Status) int      { return int(C.rg_hip_nvidia_cuda_status(C.int(s))) }

// untranslated lists the bound functions the loaded platform cannot call.
func untranslated() []string {
	var out []string
	for i := C.int(0); i < C.rg_hip_count; i++ {
		if C.rg_hip_has(i) == 0 {
			out = append(out, C.GoString(C.rg_hip_name(i)))
		}
	}
	return out
}
