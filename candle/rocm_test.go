package candle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
	"github.com/rocm-go/rocm/internal/testenv"
)

// rocmTargets are the architectures tier 1 compiles every kernel for.
var rocmTargets = []string{"gfx90a", "gfx942", "gfx1100", "gfx1201"}

// TestROCmCompilesEveryKernel compiles every module with the real hipRTC
// for each target, in a fresh cache, and checks that each kernel the Go
// side launches is in the code object.
func TestROCmCompilesEveryKernel(t *testing.T) {
	err := hiprtc.Load(hiprtc.WithPlatform(hip.PlatformAMD))
	testenv.Need(t, 1, "ROCm's hipRTC (libhiprtc)", err)
	defer hiprtc.Unload()
	kc, err := NewKernelCache(t.TempDir())
	require.NoError(t, err)
	start := time.Now()
	err = kc.CompileAll(rocmTargets, func(p Progress) {
		if p.Err != nil {
			t.Errorf("%s for %s: %v", p.Module, p.Arch, p.Err)
			return
		}
		t.Logf("%s for %s: %v", p.Module, p.Arch, p.Took.Round(time.Millisecond))
	})
	require.NoError(t, err)
	t.Logf("%d modules for %d targets in %v", len(kc.Modules()), len(rocmTargets), time.Since(start).Round(time.Millisecond))
	for _, m := range kc.modules {
		for _, arch := range rocmTargets {
			code, err := m.Compile(arch)
			require.NoError(t, err)
			syms, err := hiprtc.KernelSymbols(code.Image)
			require.NoError(t, err)
			want := KernelNames(m.Name)
			require.NotEmpty(t, want, m.Name)
			for _, name := range want {
				assert.Contains(t, syms, name, "%s for %s", m.Name, arch)
			}
			assert.Len(t, syms, len(want), "%s for %s: the kernels are exactly those the Go side names", m.Name, arch)
		}
	}
}
