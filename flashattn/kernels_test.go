package flashattn

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rocm-go/rocm/internal/kernelcheck"
)

// Every kernel launches early (hip.LaunchConfig.EarlyLaunch), so every
// kernel must wait for the previous one before it touches memory.
func TestEveryKernelWaitsFirst(t *testing.T) {
	m := newModule(nil)
	files := map[string]string{moduleName: m.Source}
	var all []string
	for name, src := range m.Options.Headers {
		files[name] = src
		all = append(all, src)
	}
	kernels := 0
	for name, src := range files {
		// The kernel macros of every file: decode.hip's FA_DECODE_KERNEL,
		// common.h's FA_KERNEL.
		n, missing := kernelcheck.NotWaiting(src, []string{"FA_GRID_WAIT();"}, all...)
		assert.Empty(t, missing, "%s: kernels whose first statement is not FA_GRID_WAIT()", name)
		kernels += n
	}
	// attn_fwd, attn_decode r1 and r4, attn_decode_paged, attn_combine,
	// attn_mma and _pad, attn_mmadec and _pad, attn_wgmma, attn_<mfma|wmma>:
	// the macros that define them.
	assert.GreaterOrEqual(t, kernels, 11, "kernel definitions found")
}
