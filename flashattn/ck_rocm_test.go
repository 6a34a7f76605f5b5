package flashattn

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/internal/testenv"
)

// Tier 1 has ROCm's hipcc but no Composable Kernel: Debian packages no
// ck_tile (its composable-kernel, in experimental only, ships the older ck
// headers for ROCm 7). So tier 1 builds the shim's ABI side with hipcc,
// as scripts/build-ck-shim.sh does, beside the stand-in for CK, and checks
// the library's exports and that flashattn loads it; the CK side is built
// only where a checkout is named (TestROCmBuildsCKShim).

// findHIPCC finds hipcc as the build script does.
func findHIPCC() (string, error) {
	dirs := []string{"/opt/rocm"}
	if r := os.Getenv("ROCM_PATH"); r != "" {
		dirs = append([]string{r}, dirs...)
	}
	for _, d := range dirs {
		if st, err := os.Stat(filepath.Join(d, "bin", "hipcc")); err == nil && !st.IsDir() {
			return filepath.Join(d, "bin", "hipcc"), nil
		}
	}
	return exec.LookPath("hipcc")
}

// checkShimExports checks that lib exports the ABI and nothing else of
// the shim's, and that flashattn loads it.
func checkShimExports(t *testing.T, lib, targets string) {
	t.Helper()
	out, err := exec.Command("nm", "-D", "--defined-only", lib).CombinedOutput()
	require.NoError(t, err, "%s", out)
	var syms []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && (strings.HasPrefix(f[2], "rocm_go_") || strings.HasPrefix(f[2], "rg_")) {
			assert.Equal(t, "T", f[1], f[2])
			syms = append(syms, f[2])
		}
	}
	slices.Sort(syms)
	assert.Equal(t, []string{"rocm_go_fmha_abi_version", "rocm_go_fmha_build_info", "rocm_go_fmha_fwd", "rocm_go_fmha_fwd_supports"}, syms)

	ckState.Reset()
	t.Cleanup(ckState.Reset)
	require.NoError(t, LoadCK(lib))
	info, err := CKInfo()
	require.NoError(t, err)
	t.Logf("loaded %s", info)
	assert.Contains(t, info, "targets "+targets)
	require.NoError(t, UnloadCK())
}

func TestROCmBuildsCKShimABI(t *testing.T) {
	hipcc, err := findHIPCC()
	testenv.Need(t, 1, "ROCm's hipcc", err)
	dir := t.TempDir()
	lib := filepath.Join(dir, ckSoname)
	exports := filepath.Join(dir, "exports.map")
	require.NoError(t, os.WriteFile(exports, []byte("{ global: rocm_go_fmha_*; local: *; };\n"), 0o644))
	start := time.Now()
	// The script's flags, the stand-in for CK in place of CK's sources.
	cmd := exec.Command(hipcc, "-std=c++17", "-O2", "-fPIC", "-shared", "--offload-arch=gfx942", "-Wall", "-Werror",
		"-Ickshim", `-DROCM_GO_FMHA_ARCHS="gfx942"`, "-o", lib, "ckshim/rocm_go_fmha.cpp", "testdata/fakeck.cpp",
		"-Wl,--version-script="+exports, "-Wl,-soname,"+ckSoname)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("hipcc built the shim's ABI side for gfx942 in %v", time.Since(start).Round(time.Millisecond))
	checkShimExports(t, lib, "gfx942")
}

// TestROCmBuildsCKShim builds the real shim with scripts/build-ck-shim.sh
// from the Composable Kernel checkout that ROCM_GO_CK_DIR names, for
// gfx942 and the kernels ROCM_GO_CK_FILTER selects (default: one, f16
// head dim 128 without mask), and checks it as above. Without a checkout
// it says so and skips: no Debian package has ck_tile.
func TestROCmBuildsCKShim(t *testing.T) {
	ckDir := os.Getenv("ROCM_GO_CK_DIR")
	if ckDir == "" {
		t.Skip("tier 1: set ROCM_GO_CK_DIR to a Composable Kernel checkout to build the real shim (no Debian package has ck_tile)")
	}
	if _, err := findHIPCC(); err != nil {
		t.Skip("tier 1: building the shim needs ROCm's hipcc")
	}
	filter := os.Getenv("ROCM_GO_CK_FILTER")
	if filter == "" {
		filter = "fmha_fwd_d128_fp16_batch_*_qr_async_vr_psddv"
	}
	out := t.TempDir()
	start := time.Now()
	cmd := exec.Command("../scripts/build-ck-shim.sh", ckDir, out)
	cmd.Env = append(os.Environ(), "GPU_TARGETS=gfx942", "CK_FMHA_FILTER="+filter)
	log, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", log)
	t.Logf("built the shim (%s) in %v:\n%s", filter, time.Since(start).Round(time.Second), log)
	lib := filepath.Join(out, ckSoname)
	checkShimExports(t, lib, "gfx942")

	// The GPU code: an offload bundle with CK's kernel for gfx942.
	f, err := elf.Open(lib)
	require.NoError(t, err)
	defer f.Close()
	sec := f.Section(".hip_fatbin")
	require.NotNil(t, sec, "the shim holds no GPU code")
	fat, err := sec.Data()
	require.NoError(t, err)
	if bytes.HasPrefix(fat, []byte("__CLANG_OFFLOAD_BUNDLE__")) {
		assert.Contains(t, string(fat), "amdgcn-amd-amdhsa--gfx942")
		assert.Contains(t, string(fat), "FmhaFwdKernel", "CK's kernel is in the code object")
	} else {
		t.Logf("the offload bundle is compressed (%.8q): its kernels are not listed", fat)
	}
}
