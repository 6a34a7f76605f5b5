package candle

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/internal/kernelcheck"
)

// Every kernel launches early (hip.LaunchConfig.EarlyLaunch), so every
// kernel must wait for the previous one before it touches memory (or,
// RG_WAITS_INSIDE, before it touches memory a kernel may write).
func TestEveryKernelWaitsFirst(t *testing.T) {
	files, err := fs.Glob(kernelFiles, "kernels/*.hip")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	common, err := fs.ReadFile(kernelFiles, "kernels/common.h")
	require.NoError(t, err)
	kernels, marked := 0, 0
	for _, f := range files {
		src, err := fs.ReadFile(kernelFiles, f)
		require.NoError(t, err)
		n, missing := kernelcheck.NotWaiting(string(src), []string{"RG_GRID_WAIT();", "RG_WAITS_INSIDE();"}, string(common))
		assert.Positive(t, n, "%s: no kernel found", f)
		assert.Empty(t, missing, "%s: kernels whose first statement is neither RG_GRID_WAIT() nor RG_WAITS_INSIDE()", f)
		m, missing := kernelcheck.NotWaitingInside(string(src), "RG_WAITS_INSIDE();", "RG_GRID_WAIT();")
		assert.Empty(t, missing, "%s: kernels marked RG_WAITS_INSIDE whose device function never calls RG_GRID_WAIT", f)
		kernels, marked = kernels+n, marked+m
	}
	assert.GreaterOrEqual(t, kernels, 44, "kernel definitions found in the sources")
	assert.Equal(t, 4, marked, "qmatvec8k4's four kernels wait inside")
}

// The kernels count a warp's lanes in RG_WARP (common.h), a constant on
// NVIDIA, not in warpSize, which NVRTC does not know: a loop over lanes
// in warpSize stays a loop there, a division by it a division.
func TestKernelsUseRGWarp(t *testing.T) {
	files, err := fs.Glob(kernelFiles, "kernels/*")
	require.NoError(t, err)
	require.Contains(t, files, "kernels/common.h")
	require.Greater(t, len(files), 10, "the kernel sources")
	word := regexp.MustCompile(`\bwarpSize\b`)
	defined := false
	for _, f := range files {
		src, err := fs.ReadFile(kernelFiles, f)
		require.NoError(t, err)
		for i, line := range strings.Split(string(src), "\n") {
			code, _, _ := strings.Cut(line, "//")
			definition := f == "kernels/common.h" && strings.HasPrefix(strings.TrimSpace(code), "#define RG_WARP")
			defined = defined || definition
			if word.MatchString(code) && !definition {
				t.Errorf("%s:%d: warpSize outside RG_WARP's definition: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
	assert.True(t, defined, "common.h defines RG_WARP")
}
