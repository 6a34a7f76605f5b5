package flashattn

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
	"github.com/rocm-go/rocm/internal/testenv"
)

// TestNVRTCCompilesEveryKernel compiles the kernels with the real NVRTC
// (tier 1 has Debian's NVRTC 12 and CUDA's fp16 headers) for an sm_90
// device, whose kernels the module compiles for sm_90a, and checks that the
// CUBIN holds exactly the kernels the Go side names: attn_mma's and
// attn_wgmma's inline PTX assembled without a GPU. One arch: a compile
// takes a minute or two of a CI machine's core, and sm_90a's kernels are
// a superset of sm_80's.
func TestNVRTCCompilesEveryKernel(t *testing.T) {
	testenv.NeedNVRTC(t, 1, loadNVRTC, hiprtc.Unload)
	v, err := hiprtc.Version()
	require.NoError(t, err)
	c, err := hiprtc.NewCache(t.TempDir())
	require.NoError(t, err)
	m := newModule(c)
	const arch = "sm_90"
	start := time.Now()
	code, err := m.Compile(arch)
	require.NoError(t, err, arch)
	target := compileTarget(arch)
	assert.Equal(t, target, code.Arch)
	t.Logf("%s for %s (%s, NVRTC %d.%d): %v, %d bytes", moduleName, arch, code.Arch, v.Major, v.Minor, time.Since(start).Round(time.Millisecond), len(code.Image))
	syms, err := hiprtc.KernelSymbols(code.Image)
	require.NoError(t, err)
	assert.ElementsMatch(t, kernelNames(target), syms, "%s: the kernels are exactly those the Go side names", target)
	wg := 0
	for _, s := range syms {
		if strings.HasPrefix(s, "attn_wgmma_") {
			wg++
		}
	}
	if v.Major >= 12 {
		assert.Equal(t, "sm_90a", code.Arch, "NVRTC %d.%d knows sm_90a", v.Major, v.Minor)
		assert.Equal(t, 4, wg, "attn_wgmma for f16 and bf16, head dims 64 and 128")
	} else {
		assert.Zero(t, wg, "NVRTC %d.%d compiles sm_90 without attn_wgmma", v.Major, v.Minor)
	}
}

// loadNVRTC loads hiprtc for the NVIDIA platform: NVRTC without a GPU.
func loadNVRTC() (string, error) {
	err := hiprtc.Load(hiprtc.WithPlatform(hip.PlatformNVIDIA))
	return hiprtc.CUDAIncludeDir(), err
}
