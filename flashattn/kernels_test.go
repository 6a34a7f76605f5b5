package flashattn

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rocm-go/rocm/internal/kernelcheck"
)

// Every kernel launches early (hip.LaunchConfig.EarlyLaunch), so every
// kernel must wait for the previous one before it touches memory.
func TestEveryKernelWaitsFirst(t *testing.T) {
	kernels, missing := kernelcheck.NotWaiting(KernelSource, []string{"FA_GRID_WAIT();"})
	// attn_fwd, attn_decode r1 and r4, attn_combine, attn_mma and _pad,
	// attn_mmadec and _pad, attn_<mfma|wmma>: the macros that define them.
	assert.GreaterOrEqual(t, kernels, 9, "kernel definitions found")
	assert.Empty(t, missing, "kernels whose first statement is not FA_GRID_WAIT()")
}
