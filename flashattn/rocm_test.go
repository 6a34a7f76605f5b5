package flashattn

import (
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
