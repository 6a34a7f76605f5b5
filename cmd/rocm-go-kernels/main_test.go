package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
	"github.com/rocm-go/rocm/internal/kernelcheck"
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
		{[]string{"-arch", "auto,sm_90"}, `target "auto" is neither`},
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
	c, err = parse([]string{"-arch", "auto"}, &strings.Builder{})
	require.NoError(t, err)
	assert.Empty(t, c.archs, "auto: run asks the GPUs")
}

// TestAutoWithoutGPU: -arch auto on a machine without a GPU says so, and
// compiles nothing.
func TestAutoWithoutGPU(t *testing.T) {
	if n, err := hip.DeviceCount(); err == nil && n > 0 {
		t.Skip("tier 0 and 1: this machine has a GPU (tier 2's gpu/run.sh runs -arch auto itself)")
	}
	dir := t.TempDir()
	var out strings.Builder
	err := run([]string{"-arch", "auto", "-dir", dir}, &out, &out)
	assert.ErrorContains(t, err, "-arch auto: ")
	entries, _ := os.ReadDir(dir)
	assert.Empty(t, entries)
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
	modules := countModules()

	var out strings.Builder
	require.NoError(t, run([]string{"-arch", "gfx90a,gfx1201", "-dir", dir, "-j", "2"}, &out, &out), out.String())
	t.Log(out.String())
	assert.Equal(t, 2*modules, strings.Count(out.String(), " compiled "), "a line per module and target")
	assert.Contains(t, out.String(), fmt.Sprintf("%d modules × 2 targets (gfx90a,gfx1201) ready in %s", modules, dir))
	files, err := filepath.Glob(filepath.Join(dir, "*.code"))
	require.NoError(t, err)
	assert.Len(t, files, 2*modules)
	for _, want := range []string{"gfx90a   candle/quant.hip", "gfx1201  flashattn/attention.hip", "gfx90a   miopen/miopen_kernels.hip"} {
		assert.Contains(t, out.String(), want+" ", "a line per package's module")
	}

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
	modules := countModules()
	for i := range 2 {
		var out strings.Builder
		require.NoError(t, run([]string{"-arch", "sm_90"}, &out, &out), out.String())
		t.Log(out.String())
		assert.Equal(t, modules, strings.Count(out.String(), " compiled ")+strings.Count(out.String(), " from the cache "))
		assert.Contains(t, out.String(), "sm_90    miopen/miopen_kernels.hip ", "MIOpen's kernels for the NVIDIA platform")
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

// countModules is how many modules the owners have.
func countModules() int {
	n := 0
	for _, o := range owners {
		n += len(o.modules(nil))
	}
	return n
}

// TestRegistry checks the owners' modules: each compiles through the cache
// it is given, and is its source and the in-memory headers that the
// source includes, each of them reached: the cache key hashes the source
// and every header (package hiprtc's tests check that), so that a change
// to any file of a module changes its entries.
func TestRegistry(t *testing.T) {
	cache, err := hiprtc.NewCache(t.TempDir())
	require.NoError(t, err)
	require.NotEmpty(t, owners)
	assert.Equal(t, "candle, flashattn and miopen", ownerNames())
	names := map[string]bool{}
	for _, o := range owners {
		ms := o.modules(cache)
		require.NotEmpty(t, ms, o.pkg)
		for _, m := range ms {
			name := o.pkg + "/" + m.Name
			assert.False(t, names[name], "%s twice", name)
			names[name] = true
			assert.Same(t, cache, m.Cache, name)
			assert.NotEmpty(t, m.Source, name)
			assert.Empty(t, m.Options.IncludePaths, "%s: includes come from the module's headers, not from folders the key does not cover", name)
			reached, missing := kernelcheck.Includes(m.Source, m.Options.Headers)
			assert.Empty(t, missing, "%s: includes that are none of its headers", name)
			var headers []string
			for h := range m.Options.Headers {
				headers = append(headers, h)
			}
			slices.Sort(headers)
			assert.Equal(t, headers, reached, "%s: headers its source never includes", name)
		}
	}
	assert.Len(t, names, countModules())
	assert.GreaterOrEqual(t, len(names), 14, "candle's 12, flashattn's and miopen's")
}

// Every kernel source of the repository (a .hip file, or any file of a
// kernels folder; testdata aside) is a module's source or header, in a
// package of owners: a package with kernels that the command leaves out,
// or a file that no module compiles, fails here.
func TestRegistryHasEveryKernelSource(t *testing.T) {
	root := filepath.Join("..", "..")
	contents := map[string][]string{} // by package folder: every module's files
	for _, o := range owners {
		for _, m := range o.modules(nil) {
			contents[o.pkg] = append(contents[o.pkg], m.Source)
			for _, h := range m.Options.Headers {
				contents[o.pkg] = append(contents[o.pkg], h)
			}
		}
	}
	// The build outputs the root .gitignore names (/gpu/, /build/) hold
	// copies of the sources, not sources.
	ignored := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(root, ".gitignore")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "/") && strings.HasSuffix(line, "/") {
				ignored[filepath.Join(root, strings.Trim(line, "/"))] = true
			}
		}
	}
	found := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (ignored[path] || n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		dir := filepath.Dir(path)
		inKernels := filepath.Base(dir) == "kernels"
		switch ext := filepath.Ext(path); {
		case ext == ".md":
			return nil // a design note beside the kernels
		case !inKernels && ext != ".hip":
			return nil
		}
		if inKernels {
			dir = filepath.Dir(dir)
		}
		pkg, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		pkg = filepath.ToSlash(pkg)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found++
		rel, _ := filepath.Rel(root, path)
		if _, ok := contents[pkg]; !ok {
			t.Errorf("%s: package %s has kernels but is none of the command's owners", rel, pkg)
		} else if !slices.Contains(contents[pkg], string(b)) {
			t.Errorf("%s: no module of %s compiles it", rel, pkg)
		}
		return nil
	})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, found, 22, "candle's 13 files, flashattn's 8, miopen's 1")
}
