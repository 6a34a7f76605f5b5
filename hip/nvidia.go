package hip

/*
#include "helpers.h"
*/
import "C"

import (
	"github.com/rocm-go/rocm/internal/dl"
)

// loadNVIDIA opens the CUDA runtime and driver and fills the table with the
// translation layer (nvidia.c).
func loadNVIDIA(explicit []string) ([]*dl.Library, error) {
	cudart, err := dl.OpenCUDART(explicit)
	if err != nil {
		return nil, err
	}
	cuda, err := dl.OpenProbed("CUDA driver (libcuda)", dl.CUDAHint, dl.CUDA(explicit, "libcuda.so.1").Candidates(), "cuLaunchKernel")
	if err != nil {
		cudart.Close()
		return nil, err
	}
	C.rg_hip_install_nvidia(cudart.Handle(), cuda.Handle())
	return []*dl.Library{cudart, cuda}, nil
}

// nvidiaStatus translates a CUDA status to HIP's as the NVIDIA platform
// does, and cudaStatus back (for tests).
func nvidiaStatus(cuda int) Status { return Status(C.rg_hip_nvidia_status(C.int(cuda))) }
func cudaStatus(s Status) int      { return int(C.rg_hip_nvidia_cuda_status(C.int(s))) }
