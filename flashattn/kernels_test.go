package flashattn

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rocm-go/rocm/internal/kernelcheck"
)

// Every kernel launches early (hip.LaunchConfig.EarlyLaunch), so every
// kernel must wait for the previous one before it touches memory.
func TestEveryKernelWaitsFirst(t *testing.T) {
	assert.Empty(t, kernelcheck.NotWaiting(KernelSource, []string{"FA_GRID_WAIT();"}), "kernels whose first statement is not FA_GRID_WAIT()")
}
