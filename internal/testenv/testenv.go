// Package testenv gates tests by tier (the README's Tests section).
//
// Tier 0 runs anywhere; tier 1 needs the real ROCm userspace; tier 2 needs a
// GPU. A test whose tier the machine cannot serve skips with a one-line
// reason, except when ROCM_GO_TIER names that very tier as the one the run
// covers: then it fails, so that a tier-1 or tier-2 run cannot pass by
// skipping. (The tiers are not nested: a tier-2 run on an NVIDIA GPU has no
// ROCm userspace, so its tier-1 tests skip.) A test that passes its gate
// logs "tier N: ran with ...", which `make test` counts.
package testenv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Tier is the tier this run is meant to cover: ROCM_GO_TIER, 0 when unset.
func Tier() int {
	n, _ := strconv.Atoi(os.Getenv("ROCM_GO_TIER"))
	return n
}

// Need gates a test of the given tier on err, the result of checking for
// what it needs (described by what: "the ROCm runtime", "a GPU").
func Need(t testing.TB, tier int, what string, err error) {
	t.Helper()
	if err == nil {
		t.Logf("tier %d: ran with %s", tier, what)
		return
	}
	if Tier() == tier {
		t.Fatalf("tier %d: this run must have %s (ROCM_GO_TIER=%d), but: %v", tier, what, Tier(), err)
	} else {
		t.Skipf("tier %d: needs %s", tier, what)
	}
}

// FakeBuildFailed ends a test whose fake C library did not build: a skip
// where no C compiler is installed, a failure where one is (the fake itself
// is broken, and its tests must not pass by skipping).
func FakeBuildFailed(t testing.TB, what string, err error) {
	t.Helper()
	if _, lerr := exec.LookPath("cc"); lerr != nil {
		t.Skipf("tier 0: needs a C compiler (cc) to build %s", what)
	} else {
		t.Fatalf("building %s: %v", what, err)
	}
}

// FakeLog points a fake library's log, the file the environment variable
// env names, at a fresh file for the test, and returns a function that
// reads the lines logged since its last call (nil for none).
func FakeLog(t testing.TB, env string) func() []string {
	path := filepath.Join(t.TempDir(), "calls.log")
	t.Setenv(env, path)
	return func() []string {
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err == nil {
			err = os.Remove(path)
		}
		if err != nil {
			t.Fatalf("the fake library's log: %v", err)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
}

// Logged returns the lines of a fake library's log that start with
// prefix: the calls of one function, as the fakes log them.
func Logged(lines []string, prefix string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// NeedNVRTC gates a test of tier on NVIDIA's NVRTC and CUDA's cuda_fp16.h
// (tier 1 has Debian's NVRTC 12): load loads hiprtc for the NVIDIA
// platform and returns the folder of CUDA's headers it found ("" for none),
// and unload undoes it when the test ends. The caller passes package
// hiprtc's functions, which this package, below every public one, cannot
// import.
func NeedNVRTC(t testing.TB, tier int, load func() (includeDir string, err error), unload func() error) {
	t.Helper()
	dir, err := load()
	if err == nil {
		t.Cleanup(func() { unload() })
		if dir == "" {
			err = errors.New("no folder with cuda_fp16.h beside NVRTC, under $CUDA_PATH or in /usr/local/cuda/include")
		}
	}
	Need(t, tier, "NVIDIA's NVRTC (libnvrtc) and CUDA's cuda_fp16.h", err)
}
