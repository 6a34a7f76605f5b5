package candle

import (
	"testing"

	"github.com/rocm-go/rocm/internal/testenv/nvrtc"
)

// TestNVRTCCompilesEveryKernel compiles every module with the real NVRTC
// (tier 1 has Debian's NVRTC 12 and CUDA's fp16 headers) for sm_90, in a
// fresh cache, and checks that each CUBIN holds exactly the kernels the Go
// side names: the NVIDIA side of every source (its inline PTX among it)
// checked without a GPU.
func TestNVRTCCompilesEveryKernel(t *testing.T) {
	nvrtc.Need(t, 1)
	compileEveryKernel(t, []string{"sm_90"}, nil)
}
