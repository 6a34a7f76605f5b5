package candle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hiprtc"
	"github.com/rocm-go/rocm/internal/testenv/nvrtc"
)

// TestNVRTCCompilesEveryKernel compiles every module with the real NVRTC
// (tier 1 has Debian's NVRTC 12 and CUDA's fp16 headers) for sm_90, in a
// fresh cache, and checks that each CUBIN holds exactly the kernels the Go
// side names: the NVIDIA side of every source (its inline PTX among it)
// checked without a GPU.
func TestNVRTCCompilesEveryKernel(t *testing.T) {
	nvrtc.Need(t, 1)
	kc, err := NewKernelCache(t.TempDir())
	require.NoError(t, err)
	const arch = "sm_90"
	start := time.Now()
	require.NoError(t, kc.CompileAll([]string{arch}, func(p Progress) {
		if p.Err != nil {
			t.Errorf("%s for %s: %v", p.Module, p.Arch, p.Err)
			return
		}
		t.Logf("%s for %s: %v", p.Module, p.Arch, p.Took.Round(time.Millisecond))
	}))
	t.Logf("%d modules for %s in %v", len(kc.Modules()), arch, time.Since(start).Round(time.Millisecond))
	for _, m := range kc.modules {
		code, err := m.Compile(arch)
		require.NoError(t, err)
		syms, err := hiprtc.KernelSymbols(code.Image)
		require.NoError(t, err)
		want := KernelNames(m.Name)
		require.NotEmpty(t, want, m.Name)
		assert.ElementsMatch(t, want, syms, "%s for %s: the kernels are exactly those the Go side names", m.Name, arch)
	}
}
