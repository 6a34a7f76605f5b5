// Package nvrtc is the tests' way to NVIDIA's NVRTC without a GPU: tier 1
// has Debian's NVRTC 12 and the CUDA headers that rocm-go's kernels
// include. It sits apart from package testenv, which package hiprtc's own
// tests import.
package nvrtc

import (
	"errors"
	"testing"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
	"github.com/rocm-go/rocm/internal/testenv"
)

// Need loads hiprtc for the NVIDIA platform (NVRTC) for the rest of t,
// with testenv.Need's rule for tier: the test skips below and above it
// where NVRTC or CUDA's cuda_fp16.h is missing, and fails at it.
func Need(t testing.TB, tier int) {
	t.Helper()
	err := hiprtc.Load(hiprtc.WithPlatform(hip.PlatformNVIDIA))
	if err == nil {
		t.Cleanup(func() { hiprtc.Unload() })
		if hiprtc.CUDAIncludeDir() == "" {
			err = errors.New("no folder with cuda_fp16.h beside NVRTC, under $CUDA_PATH or in /usr/local/cuda/include")
		}
	}
	testenv.Need(t, tier, "NVIDIA's NVRTC (libnvrtc) and CUDA's cuda_fp16.h", err)
}
