package hiprtc

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
)

// Tier 1: ROCm's real hipRTC, without a GPU.

func useROCmCompiler(t *testing.T) {
	t.Helper()
	library.Reset()
	t.Cleanup(library.Reset)
	testenv.Need(t, 1, "ROCm's hipRTC (libhiprtc)", Load(WithPlatform(hip.PlatformAMD)))
}

// The targets the SDK supports: CDNA2, CDNA3, RDNA3, RDNA4.
var rocmTargets = []string{"gfx90a", "gfx942", "gfx1100", "gfx1201"}

func TestROCmCompilesTheKernelSetForEveryTarget(t *testing.T) {
	useROCmCompiler(t)
	v, err := Version()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, v.Major, 6)
	t.Logf("hipRTC %s from %s", v, LibraryPaths())
	src, err := os.ReadFile("testdata/kernels.hip")
	require.NoError(t, err)
	exprs := []string{"axpy<float>", "axpy<double>", "fill<int>", "fill<unsigned short>"}
	for _, arch := range rocmTargets {
		t.Run(arch, func(t *testing.T) {
			code, err := Compile(string(src), Options{Arch: arch, Name: "kernels.hip", Std: "c++17",
				Defines: map[string]string{"SCALE": "2.0f"}, NameExpressions: exprs, Flags: []string{"-O3"}})
			require.NoError(t, err)
			assert.True(t, bytes.Contains(code.Image, []byte("amdgcn-amd-amdhsa--"+arch)), "the code object targets %s", arch)
			syms, err := KernelSymbols(code.Image)
			require.NoError(t, err)
			want := []string{"row_sum_f32", "empty"}
			for _, e := range exprs {
				lowered := code.Symbol(e)
				assert.NotEqual(t, e, lowered, "%s has a lowered name", e)
				want = append(want, lowered)
			}
			assert.ElementsMatch(t, want, syms)
			assert.Equal(t, "_Z4axpyIfEvT_PKS0_PS0_m", code.Symbol("axpy<float>"))
		})
	}
}

func TestROCmCompilesHalfAndBFloat16(t *testing.T) {
	useROCmCompiler(t)
	src, err := os.ReadFile("testdata/halves.hip")
	require.NoError(t, err)
	for _, arch := range rocmTargets {
		code, err := Compile(string(src), Options{Arch: arch, Name: "halves.hip"})
		require.NoError(t, err, arch)
		syms, err := KernelSymbols(code.Image)
		require.NoError(t, err)
		assert.Equal(t, []string{"halves"}, syms, arch)
	}
}

func TestROCmCompileErrorCarriesTheLog(t *testing.T) {
	useROCmCompiler(t)
	_, err := Compile("__global__ void broken() { undeclared_thing(); }\n", Options{Arch: "gfx942", Name: "broken.hip"})
	var ce *CompileError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.ErrorIs(t, err, ErrCompilation)
	assert.Contains(t, ce.Log, "undeclared_thing")
	assert.Contains(t, ce.Log, "broken.hip")
	assert.Equal(t, []string{"--gpu-architecture=gfx942"}, ce.Options)

	_, err = Compile("extern \"C\" __global__ void k() {}\n", Options{Arch: "gfx942", NameExpressions: []string{"no_such_kernel<int>"}})
	assert.Error(t, err, "a name expression that names nothing")
}
