package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
)

// TestRun: on a machine with no GPU runtime the report is one line, with
// the paths tried under -v; with a runtime it names the platform.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(&out, "", false))
	loadErr := hip.Load()
	if loadErr == nil {
		hip.Unload()
		assert.True(t, strings.HasPrefix(out.String(), "platform: "), out.String())
		assert.NotContains(t, out.String(), "platform: none")
		return
	}
	assert.Equal(t, "platform: none: neither ROCm's HIP runtime nor NVIDIA's CUDA runtime is installed, so programs run on the CPU (-v lists the paths tried)\n", out.String())
	out.Reset()
	require.NoError(t, run(&out, "", true))
	assert.Contains(t, out.String(), "cannot open shared object file", "-v: the paths tried")
	out.Reset()
	assert.Error(t, run(&out, "tpu", false))
}
