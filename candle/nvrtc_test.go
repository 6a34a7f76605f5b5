package candle

import (
	"testing"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
	"github.com/rocm-go/rocm/internal/testenv"
)

// TestNVRTCCompilesEveryKernel compiles every module with the real NVRTC
// (tier 1 has Debian's NVRTC 12 and CUDA's fp16 headers) for sm_90, in a
// fresh cache, and checks that each CUBIN holds exactly the kernels the Go
// side can launch: the NVIDIA side of every source (its inline PTX among it)
// checked without a GPU.
func TestNVRTCCompilesEveryKernel(t *testing.T) {
	testenv.NeedNVRTC(t, 1, loadNVRTC, hiprtc.Unload)
	compileEveryKernel(t, []string{"sm_90"}, nil)
}

// loadNVRTC loads hiprtc for the NVIDIA platform: NVRTC without a GPU.
func loadNVRTC() (string, error) {
	err := hiprtc.Load(hiprtc.WithPlatform(hip.PlatformNVIDIA))
	return hiprtc.CUDAIncludeDir(), err
}
