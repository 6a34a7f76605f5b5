package hiprtc

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
)

// useFakeHIPAndCompiler loads package hip's fake runtime (whose modules
// take the fake compiler's "code" and hold one kernel, echo) and the fake
// hipRTC. reload unloads and loads both again.
func useFakeHIPAndCompiler(t *testing.T) (reload func()) {
	t.Helper()
	src := "../hip/testdata/fakehip.c"
	if _, err := os.Stat(src); err != nil {
		t.Skip("tier 0: needs package hip's fake runtime (the source tree)")
	}
	if hip.LoadedPlatform() != hip.PlatformNone {
		t.Skip("tier 0: HIP is loaded already: the fakes need a process where it is not")
	}
	lib := filepath.Join(t.TempDir(), "libamdhip64.so.6")
	if out, err := exec.Command("cc", "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("building the fake HIP runtime: %v\n%s", err, out)
	}
	require.NoError(t, hip.Load(hip.WithPlatform(hip.PlatformAMD), hip.WithLibraryPaths(lib)))
	t.Cleanup(func() { assert.NoError(t, hip.Unload()) })
	dir := buildFakes(t)
	library.Reset()
	t.Cleanup(library.Reset)
	require.NoError(t, Load(WithLibraryPaths(dir)), "the compiler follows HIP's platform")
	return func() {
		require.NoError(t, hip.Unload())
		require.NoError(t, hip.Load(hip.WithPlatform(hip.PlatformAMD), hip.WithLibraryPaths(lib)))
		library.Reset()
		require.NoError(t, Load(WithLibraryPaths(dir)))
	}
}

func TestKernelsCompileAndLoadOncePerDevice(t *testing.T) {
	reload := useFakeHIPAndCompiler(t)
	cache, err := NewCache(t.TempDir())
	require.NoError(t, err)
	k := &Kernels{Name: "echo.hip", Source: "extern \"C\" __global__ void echo() {}\n", Options: Options{Std: "c++17"}, Cache: cache}
	t.Cleanup(func() { assert.NoError(t, k.Close()) })
	dev0, err := hip.GetDevice(0)
	require.NoError(t, err)
	dev1, err := hip.GetDevice(1)
	require.NoError(t, err)

	var wg sync.WaitGroup
	fns := make([]*hip.Function, 16)
	for i := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dev := dev0
			if i%2 == 1 {
				dev = dev1
			}
			f, err := k.Function(dev, "echo")
			assert.NoError(t, err)
			fns[i] = f
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(2), cache.Stats().Compiles, "one compile per arch (gfx942 and gfx1100)")
	for i, f := range fns {
		assert.Same(t, fns[i%2], f, "one module per device, its functions cached")
	}
	m0, err := k.Module(dev0)
	require.NoError(t, err)
	assert.Same(t, m0, fns[0].Module())

	_, err = k.Function(dev0, "missing")
	assert.ErrorIs(t, err, hip.ErrNotFound)
	code, err := k.Compile("gfx90a")
	require.NoError(t, err)
	assert.Contains(t, string(code.Image), "name=echo.hip\nopts=--gpu-architecture=gfx90a -std=c++17")
	_, err = k.Compile("")
	assert.ErrorIs(t, err, ErrInvalidOption)

	// Target maps a device's arch to the compile target, on the device's
	// load as in Compile.
	var asked []string
	mapped := &Kernels{Name: "echo.hip", Source: k.Source, Cache: cache, Target: func(arch string) string {
		asked = append(asked, arch)
		if arch == "gfx90a" {
			return "gfx90a:xnack+"
		}
		return arch
	}}
	t.Cleanup(func() { assert.NoError(t, mapped.Close()) })
	_, err = mapped.Function(dev0, "echo")
	require.NoError(t, err)
	code, err = mapped.Compile("gfx90a")
	require.NoError(t, err)
	assert.Equal(t, "gfx90a:xnack+", code.Arch)
	assert.Equal(t, []string{"gfx942:sramecc+:xnack-", "gfx90a"}, asked, "the device's arch, then the one named")
	_, err = k.Module(nil)
	assert.ErrorIs(t, err, ErrInvalidInput)

	// A source that does not compile fails for the device, and stays failed.
	bad := &Kernels{Name: "bad.hip", Source: "#error\n", Cache: cache}
	_, failure := bad.Function(dev0, "echo")
	assert.ErrorIs(t, failure, ErrCompilation)
	_, err = bad.Function(dev0, "echo")
	assert.Same(t, failure, err, "the failure is remembered")

	require.NoError(t, k.Close())
	assert.ErrorIs(t, fns[0].Launch(hip.LaunchConfig{Grid: hip.Dim3{X: 1}, Block: hip.Dim3{X: 1}}, nil), hip.ErrClosed, "Close unloads the modules")
	f, err := k.Function(dev0, "echo")
	require.NoError(t, err, "the next use loads again")
	assert.NotSame(t, fns[0], f)

	// Once HIP loads again, the modules and failures of the old runtime
	// are gone: the failure is tried again, the module loaded again.
	reload()
	_, err = bad.Function(dev0, "echo")
	assert.ErrorIs(t, err, ErrCompilation)
	assert.NotSame(t, failure, err, "the failure is tried again after HIP reloads")
	again, err := k.Function(dev0, "echo")
	require.NoError(t, err)
	assert.NotSame(t, f, again, "a module of the new runtime")
}
