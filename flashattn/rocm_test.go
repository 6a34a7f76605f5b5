package flashattn

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
	"github.com/rocm-go/rocm/internal/testenv"
)

// rocmTargets are the architectures tier 1 compiles the kernels for.
var rocmTargets = []string{"gfx90a", "gfx942", "gfx1100", "gfx1201"}

// TestROCmCompilesEveryKernel compiles the portable kernels with the real
// hipRTC for each target, in a fresh cache, and checks that the code
// object holds exactly the kernels the Go side launches.
func TestROCmCompilesEveryKernel(t *testing.T) {
	err := hiprtc.Load(hiprtc.WithPlatform(hip.PlatformAMD))
	testenv.Need(t, 1, "ROCm's hipRTC (libhiprtc)", err)
	defer hiprtc.Unload()
	c, err := hiprtc.NewCache(t.TempDir())
	require.NoError(t, err)
	m := Module(c)
	for _, arch := range rocmTargets {
		start := time.Now()
		code, err := m.Compile(arch)
		require.NoError(t, err, arch)
		t.Logf("%s for %s: %v, %d bytes", ModuleName, arch, time.Since(start).Round(time.Millisecond), len(code.Image))
		if code.Log != "" {
			t.Logf("compiler log: %s", code.Log)
		}
		syms, err := hiprtc.KernelSymbols(code.Image)
		require.NoError(t, err)
		assert.ElementsMatch(t, KernelNames(arch), syms, "%s: the kernels are exactly those the Go side names", arch)
	}
}

// TestROCmTypeChecksNVIDIAKernels compiles the NVIDIA-only kernels
// (attn_mma, under the sm_80 guard) with hipRTC for gfx942, their inline
// PTX taken out: tier 1 has no NVRTC, and this checks their C++ (types,
// templates, every instantiation) all the same. The PTX itself is checked
// by NVRTC at tier 2.
func TestROCmTypeChecksNVIDIAKernels(t *testing.T) {
	err := hiprtc.Load(hiprtc.WithPlatform(hip.PlatformAMD))
	testenv.Need(t, 1, "ROCm's hipRTC (libhiprtc)", err)
	defer hiprtc.Unload()
	const guard = "#if defined(__HIP_PLATFORM_NVIDIA__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800"
	require.Contains(t, KernelSource, guard)
	src := strings.Replace(KernelSource, guard, "#if 1", 1)
	src = regexp.MustCompile(`(?s)asm( volatile)?\(".*?\);`).ReplaceAllString(src, ";")
	// The other kernels are compiled by TestROCmCompilesEveryKernel.
	src = strings.Replace(src, "FA_FWD(T, 32) FA_FWD(T, 64) FA_FWD(T, 128) FA_FWD(T, 256)", "", 1)
	code, err := hiprtc.Compile(src, hiprtc.Options{Arch: "gfx942", Std: "c++17", Name: "attention-nvidia.hip"})
	require.NoError(t, err)
	syms, err := hiprtc.KernelSymbols(code.Image)
	require.NoError(t, err)
	var want []string
	for _, s := range KernelNames("sm_90") {
		if strings.HasPrefix(s, "attn_mma_") || strings.HasPrefix(s, "attn_combine_") {
			want = append(want, s)
		}
	}
	assert.ElementsMatch(t, want, syms)
}
