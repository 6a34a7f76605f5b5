package miopen

import (
	"testing"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
	"github.com/rocm-go/rocm/internal/testenv"
)

// TestNVRTCKernelsCompile compiles the kernels with the real NVRTC (tier 1
// has Debian's NVRTC 12 and CUDA's fp16 headers) for sm_90, the platform
// that runs most of them, and checks that the CUBIN holds exactly the
// kernels a launch can look up.
func TestNVRTCKernelsCompile(t *testing.T) {
	testenv.NeedNVRTC(t, 1, func() (string, error) {
		err := hiprtc.Load(hiprtc.WithPlatform(hip.PlatformNVIDIA))
		return hiprtc.CUDAIncludeDir(), err
	}, hiprtc.Unload)
	compileKernels(t, "sm_90")
}
