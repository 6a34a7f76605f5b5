package rccl

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
)

// The tests in this file run in tier 1: against ROCm's real RCCL,
// installed on a machine without a GPU. The tier-1 root
// (scripts/rocm-env.sh) holds Debian experimental's RCCL 7.2.4 in
// rcclEnvDir, beside ROCm 7.2's HIP and HSA runtimes it links to, while
// its own HIP is ROCm 6.4's: so they run in a child process of the test
// binary whose loader path starts with that folder, where package hip
// loads HIP 7.2 and RCCL runs on it. On a machine with ROCm installed the
// child finds both in ROCM_PATH or /opt/rocm.

// rcclEnvDir is where scripts/rocm-env.sh unpacks RCCL and its runtimes.
const rcclEnvDir = "/opt/rocm-go-rccl/lib"

// childEnv marks the child process.
const childEnv = "ROCM_GO_RCCL_TIER1_CHILD"

// needNote is how the child says that RCCL did not load.
const needNote = "rccl tier 1 needs: "

// TestROCm runs TestROCmChild in a child process and reports what it did.
func TestROCm(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("this is the child process: TestROCmChild runs")
	}
	if p := os.Getenv("HIP_PLATFORM"); p == "nvidia" {
		t.Skip("tier 1: HIP_PLATFORM=nvidia")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestROCmChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1", "ROCM_GO_TIER=")
	if st, err := os.Stat(rcclEnvDir); err == nil && st.IsDir() {
		cmd.Env = append(cmd.Env, "LD_LIBRARY_PATH="+strings.TrimSuffix(rcclEnvDir+":"+os.Getenv("LD_LIBRARY_PATH"), ":"))
	}
	out, err := cmd.CombinedOutput()
	if m := regexp.MustCompile(needNote + `(.*)`).FindSubmatch(out); m != nil {
		testenv.Need(t, 1, "ROCm's RCCL (librccl) and the HIP runtime it links", errors.New(string(m[1])))
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(line, "rocm_test.go") || strings.HasPrefix(strings.TrimSpace(line), "---") {
			t.Log(strings.TrimSpace(line))
		}
	}
	require.NoError(t, err, "the child process failed:\n%s", out)
	require.Contains(t, string(out), "--- PASS: TestROCmChild", "the child ran:\n%s", out)
	testenv.Need(t, 1, "ROCm's RCCL (librccl) and the HIP runtime it links", nil)
}

// TestROCmChild is the tier-1 test proper, in the child process.
func TestROCmChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("runs in TestROCm's child process")
	}
	err := hip.Load(hip.WithPlatform(hip.PlatformAMD))
	if err == nil {
		err = Load(WithPlatform(hip.PlatformAMD))
	}
	if err != nil {
		t.Skip(needNote + strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	v, err := Version()
	require.NoError(t, err)
	t.Logf("RCCL with NCCL's API %s from %s, on HIP %v from %s", v, LibraryPaths()[0], hipVersion(), hip.LibraryPaths()[0])

	t.Run("Library", func(t *testing.T) {
		assert.Equal(t, hip.PlatformAMD, LoadedPlatform())
		assert.Regexp(t, `librccl\.so\.1`, LibraryPaths()[0])
		assert.Empty(t, untranslated(), "RCCL exports every function the spec binds, by these names")
		assert.Equal(t, 2, v.Major)
		assert.GreaterOrEqual(t, v.Minor, 18, "ncclCommSplit came in 2.18")
		p, err := Symbol("ncclAllReduce")
		require.NoError(t, err)
		assert.NotNil(t, p)
		_, err = Symbol("ncclRocmGoNoSuchFunction")
		assert.ErrorIs(t, err, ErrSymbolNotFound)
	})
	t.Run("StatusStrings", func(t *testing.T) {
		for _, s := range statusValues {
			text, err := StatusString(s)
			require.NoError(t, err)
			assert.NotEmpty(t, text, s)
		}
		text, err := StatusString(StatusSuccess)
		require.NoError(t, err)
		assert.Equal(t, "no error", text)
	})

	n, devErr := hip.DeviceCount()
	t.Run("UniqueID", func(t *testing.T) {
		id, err := GetUniqueID()
		if devErr != nil {
			// RCCL 7.2 initializes HIP in ncclGetUniqueId.
			require.Error(t, err, "ncclGetUniqueId without a GPU")
			assert.ErrorIs(t, err, ErrUnhandledCudaError)
			t.Skipf("tier 1: ncclGetUniqueId needs a GPU in RCCL (NCCL %s initializes HIP first): %v", v, err)
		}
		require.NoError(t, err)
		assert.NotEqual(t, UniqueID{}, id)
	})
	t.Run("WithoutGPU", func(t *testing.T) {
		if devErr == nil {
			t.Skipf("tier 1: this machine has %d GPU(s); the no-device paths need none", n)
		}
		assert.ErrorIs(t, devErr, hip.ErrNoDevice)
		// Our trampoline cannot make device 0 current and says why.
		_, err := initRank(0, 1, UniqueID{}, 0)
		require.Error(t, err)
		assert.ErrorIs(t, err, hip.ErrNoDevice)
		assert.ErrorContains(t, err, "rccl: ncclCommInitRank: ncclUnhandledCudaError (Unhandled HIP error): could not make the device current")
		// RCCL's own ncclCommInitAll fails with its status.
		_, err = initAll([]int{0})
		require.Error(t, err)
		var e *Error
		require.True(t, errors.As(err, &e), "%v", err)
		assert.Equal(t, "ncclCommInitAll", e.Op)
		t.Logf("ncclCommInitAll without a GPU: %v", err)
	})
}

func hipVersion() hip.Version {
	v, _ := hip.RuntimeVersion()
	return v
}
