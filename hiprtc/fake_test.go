package hiprtc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/internal/testenv"

	"github.com/rocm-go/rocm/hip"
)

// These tests run in tier 0 against testdata/fakertc.c, built as a fake
// libhiprtc and as a fake libnvrtc.

var fakes struct {
	once sync.Once
	dir  string
	err  error
}

func buildFakes(t *testing.T) string {
	t.Helper()
	fakes.once.Do(func() {
		dir, err := os.MkdirTemp("", "rocm-go-fakertc")
		if err != nil {
			fakes.err = err
			return
		}
		for _, b := range []struct{ out, def string }{{"libhiprtc.so.6", "-DFAKE_HIPRTC"}, {"libnvrtc.so.13", "-DFAKE_NVRTC"}} {
			out, err := exec.Command("cc", "-shared", "-fPIC", b.def, "-o", filepath.Join(dir, b.out), "testdata/fakertc.c").CombinedOutput()
			if err != nil {
				fakes.err = errors.New(string(out))
				return
			}
		}
		fakes.dir = dir
	})
	if fakes.err != nil {
		testenv.FakeBuildFailed(t, "the fake compilers", fakes.err)
	}
	return fakes.dir
}

func useFakeCompiler(t *testing.T, p hip.Platform) {
	t.Helper()
	dir := buildFakes(t)
	library.Reset()
	t.Cleanup(library.Reset)
	require.NoError(t, Load(WithPlatform(p), WithLibraryPaths(dir)))
}

// fields splits the fake's code text into its fields.
func fields(t *testing.T, code *Code) map[string]string {
	out := map[string]string{}
	for _, line := range strings.SplitN(string(code.Image), "\n", 4) {
		k, v, _ := strings.Cut(line, "=")
		out[k] = v
	}
	return out
}

func TestFakeHipRTCCompile(t *testing.T) {
	useFakeCompiler(t, hip.PlatformAMD)
	assert.Equal(t, hip.PlatformAMD, LoadedPlatform())
	v, err := Version()
	require.NoError(t, err)
	assert.Equal(t, []int{6, 4}, []int{v.Major, v.Minor})
	assert.Contains(t, LibraryPaths()[0], "libhiprtc.so.6")

	code, err := Compile("extern \"C\" __global__ void k() {}\n", Options{
		Arch:            "gfx942:sramecc+:xnack-",
		Name:            "k.hip",
		Defines:         map[string]string{"N": "64", "FAST": "", "A": "1"},
		IncludePaths:    []string{"/opt/inc"},
		Headers:         map[string]string{"b.h": "#pragma once\n", "a.h": "#pragma once\n"},
		Std:             "c++17",
		NameExpressions: []string{"scale<float>", "scale<double>"},
		Flags:           []string{"-O3"},
	})
	require.NoError(t, err)
	f := fields(t, code)
	assert.Equal(t, "FAKE name", strings.SplitN(string(code.Image), "=", 2)[0])
	assert.Equal(t, "--gpu-architecture=gfx942:sramecc+:xnack- -std=c++17 -DA=1 -DFAST -DN=64 -I/opt/inc -O3 ", f["opts"], "flags in a fixed order")
	assert.Equal(t, "a.h b.h ", f["headers"], "headers sorted by name")
	assert.Equal(t, "extern \"C\" __global__ void k() {}\n", f["src"])
	assert.Equal(t, "gfx942:sramecc+:xnack-", code.Arch)
	assert.Equal(t, "warning: fake compiler", code.Log)
	assert.Equal(t, "_Z_scale<float>", code.Symbol("scale<float>"))
	assert.Equal(t, "k", code.Symbol("k"), "a plain name is its own symbol")
}

func TestFakeHipRTCErrors(t *testing.T) {
	useFakeCompiler(t, hip.PlatformAMD)
	_, err := Compile("  \n", Options{Arch: "gfx942"})
	assert.ErrorIs(t, err, ErrInvalidInput)

	_, err = Compile("#error\n", Options{Arch: "gfx90a", Name: "bad.hip", Defines: map[string]string{"X": "1"}})
	var ce *CompileError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.ErrorIs(t, err, ErrCompilation)
	assert.Equal(t, "bad.hip", ce.Name)
	assert.Equal(t, "gfx90a", ce.Arch)
	assert.Equal(t, []string{"--gpu-architecture=gfx90a", "-DX=1"}, ce.Options)
	assert.Contains(t, ce.Log, "error: #error reached")
	assert.Contains(t, err.Error(), "compiling bad.hip for gfx90a")
	assert.Contains(t, err.Error(), "options: --gpu-architecture=gfx90a -DX=1")

	_, err = Compile("k", Options{Arch: "gfx942", Flags: []string{"--bad-option"}})
	require.True(t, errors.As(err, &ce))
	assert.ErrorIs(t, err, ErrInvalidOption)

	_, err = Compile("k", Options{Arch: "sm_90"})
	assert.ErrorIs(t, err, ErrInvalidOption)
	assert.ErrorContains(t, err, "not an AMD GPU arch")

	_, err = Compile("k", Options{Arch: "gfx942", NameExpressions: []string{"a", "b", "c", "d", "e"}})
	assert.ErrorIs(t, err, ErrInvalidInput)
	assert.ErrorContains(t, err, `name expression "e"`)
}

func TestFakeNVRTCTranslation(t *testing.T) {
	useFakeCompiler(t, hip.PlatformNVIDIA)
	assert.Equal(t, hip.PlatformNVIDIA, LoadedPlatform())
	v, err := Version()
	require.NoError(t, err)
	assert.Equal(t, 13, v.Major)

	code, err := Compile("__global__ void k(float* x) { x[hipThreadIdx_x] = warpSize; }\n", Options{
		Arch:  "sm_90",
		Name:  "k.hip",
		Flags: []string{"-O3", "-ffast-math", "--offload-arch=sm_90", "-fgpu-rdc"},
	})
	require.NoError(t, err)
	f := fields(t, code)
	opts := f["opts"]
	assert.Contains(t, opts, "--gpu-architecture=sm_90 ")
	assert.Contains(t, opts, "--use_fast_math")
	assert.Contains(t, opts, "-rdc=true")
	assert.NotContains(t, opts, "-O3", "NVRTC refuses -O3")
	assert.NotContains(t, opts, "offload-arch")
	assert.Equal(t, "hip/hip_runtime.h hip/hip_fp16.h hip/hip_bf16.h ", f["headers"], "the prelude headers are added")
	assert.True(t, strings.HasPrefix(f["src"], "#include <hip/hip_runtime.h>\n#line 1 \"k.hip\"\n__global__ void k"), f["src"])

	// A virtual arch: no CUBIN, so the PTX is the code.
	code, err = Compile("__global__ void k() {}\n", Options{Arch: "compute_90"})
	require.NoError(t, err)
	assert.Contains(t, string(code.Image), "--gpu-architecture=compute_90")

	_, err = Compile("k", Options{Arch: "gfx942"})
	assert.ErrorContains(t, err, "not an NVIDIA arch")

	// Without CUDA's headers the error says where hiprtc looked for them.
	_, err = Compile("#include <cuda_fp16.h>\n", Options{Arch: "sm_90"})
	if CUDAIncludeDir() == "" {
		assert.ErrorIs(t, err, ErrCompilation)
		assert.ErrorContains(t, err, `cannot open source file "cuda_fp16.h"`)
		assert.ErrorContains(t, err, "hint: no CUDA headers were found for NVRTC (cuda_fp16.h)")
		assert.ErrorContains(t, err, "$CUDA_PATH")
	} else {
		assert.NoError(t, err, "the fake compiles with the headers of %s", CUDAIncludeDir())
	}
	_, err = Compile("#error\n", Options{Arch: "sm_90"})
	assert.NotContains(t, err.Error(), "hint:", "other failures have no hint")
}

func TestCompileWithoutArchAsksTheDevice(t *testing.T) {
	useFakeCompiler(t, hip.PlatformAMD)
	if _, err := hip.GetDevice(0); err == nil {
		t.Skip("tier 0: this machine has a GPU; the no-device path needs none")
	}
	_, err := Compile("k", Options{})
	assert.ErrorContains(t, err, "Options.Arch is empty and there is no device to ask")
	assert.ErrorContains(t, err, "gfx942")
}

func TestKernelSymbolsRejectsJunk(t *testing.T) {
	_, err := KernelSymbols([]byte("not a code object"))
	assert.ErrorContains(t, err, "neither an ELF code object nor PTX")
	ptx := []byte(".version 8.0\n.target sm_90\n.visible .entry scale_f32(\n.param .u64 p\n)\n.entry _Z3addIfEvPT_(\n")
	syms, err := KernelSymbols(ptx)
	require.NoError(t, err)
	assert.Equal(t, []string{"_Z3addIfEvPT_", "scale_f32"}, syms)
	self, err := os.ReadFile("/proc/self/exe")
	require.NoError(t, err)
	_, err = KernelSymbols(self)
	assert.ErrorContains(t, err, "not a GPU")
}
