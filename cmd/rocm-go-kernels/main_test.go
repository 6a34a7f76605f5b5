package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
	"github.com/rocm-go/rocm/internal/testenv"
)

// With -j, the command runs itself once per architecture: the test binary
// stands in for it when asked to.
func TestMain(m *testing.M) {
	if os.Getenv("ROCM_GO_KERNELS_AS_COMMAND") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no targets: name them with -arch"},
		{[]string{"-arch", " , "}, "no targets"},
		{[]string{"-arch", "gfx942,sm_90"}, "mix AMD and NVIDIA"},
		{[]string{"-arch", "mi300"}, `target "mi300" is neither an AMD GPU (gfxNNN) nor an NVIDIA one (sm_XY)`},
		{[]string{"-arch", "gfx942", "extra"}, "unexpected arguments"},
		{[]string{"-bogus"}, "flag provided but not defined"},
	} {
		var stderr strings.Builder
		_, err := parse(tc.args, &stderr)
		assert.ErrorContains(t, err, tc.want, "%q", tc.args)
	}
	c, err := parse([]string{"-arch", "gfx942, gfx90a:xnack-", "-j", "0", "-dir", "/x"}, &strings.Builder{})
	require.NoError(t, err)
	assert.Equal(t, &config{archs: []string{"gfx942", "gfx90a:xnack-"}, platform: hip.PlatformAMD, dir: "/x", jobs: 1}, c)
	c, err = parse([]string{"-arch", "sm_90"}, &strings.Builder{})
	require.NoError(t, err)
	assert.Equal(t, hip.PlatformNVIDIA, c.platform)
	assert.Equal(t, hiprtc.DefaultCacheDir(), c.dir)
}

func TestWithoutCompiler(t *testing.T) {
	if hiprtc.Load(hiprtc.WithPlatform(hip.PlatformAMD)) == nil {
		hiprtc.Unload()
		t.Skip("hipRTC loads here: TestCompilesAheadOfTime covers this machine")
	}
	var out strings.Builder
	err := run([]string{"-arch", "gfx942", "-dir", t.TempDir()}, &out, &out)
	assert.ErrorContains(t, err, "compiling for gfx942 needs ROCm's hipRTC")
	assert.ErrorIs(t, err, hiprtc.ErrLibraryNotFound)
}

// TestCompilesAheadOfTime compiles the set for two targets in two child
// processes, then runs again: everything comes from the cache.
func TestCompilesAheadOfTime(t *testing.T) {
	err := hiprtc.Load(hiprtc.WithPlatform(hip.PlatformAMD))
	testenv.Need(t, 1, "ROCm's hipRTC (libhiprtc)", err)
	hiprtc.Unload()
	t.Setenv("ROCM_GO_KERNELS_AS_COMMAND", "1")
	dir := t.TempDir()
	modules := len(candle.DefaultKernelCache().Modules()) + 1 // and flashattn's

	var out strings.Builder
	require.NoError(t, run([]string{"-arch", "gfx90a,gfx1201", "-dir", dir, "-j", "2"}, &out, &out), out.String())
	t.Log(out.String())
	assert.Equal(t, 2*modules, strings.Count(out.String(), " compiled "), "a line per module and target")
	assert.Contains(t, out.String(), fmt.Sprintf("%d modules × 2 targets (gfx90a,gfx1201) ready in %s", modules, dir))
	files, err := filepath.Glob(filepath.Join(dir, "*.code"))
	require.NoError(t, err)
	assert.Len(t, files, 2*modules)

	out.Reset()
	require.NoError(t, run([]string{"-arch", "gfx1201", "-dir", dir}, &out, &out))
	assert.Equal(t, modules, strings.Count(out.String(), " from the cache "), out.String())
	assert.NotContains(t, out.String(), " compiled ")
}

// TestCompilesAheadOfTimeForNVIDIA compiles the set with NVRTC through
// HIP's NVIDIA platform into the default cache: the one candle's devices
// use, so that on a GPU machine candle's tests find every module there
// after it. A second run finds them all. Tier 1 has Debian's NVRTC 12.
func TestCompilesAheadOfTimeForNVIDIA(t *testing.T) {
	testenv.NeedNVRTC(t, 1, loadNVRTC, hiprtc.Unload)
	modules := len(candle.DefaultKernelCache().Modules()) + 1 // and flashattn's
	for i := range 2 {
		var out strings.Builder
		require.NoError(t, run([]string{"-arch", "sm_90"}, &out, &out), out.String())
		t.Log(out.String())
		assert.Equal(t, modules, strings.Count(out.String(), " compiled ")+strings.Count(out.String(), " from the cache "))
		assert.Contains(t, out.String(), fmt.Sprintf("%d modules × 1 target (sm_90) ready in %s", modules, hiprtc.DefaultCacheDir()))
		if i == 1 {
			assert.NotContains(t, out.String(), " compiled ", "the second run finds every module")
		}
	}
}

// loadNVRTC loads hiprtc for the NVIDIA platform: NVRTC without a GPU.
func loadNVRTC() (string, error) {
	err := hiprtc.Load(hiprtc.WithPlatform(hip.PlatformNVIDIA))
	return hiprtc.CUDAIncludeDir(), err
}
