package dl

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenMissingListsEveryPath(t *testing.T) {
	dir := t.TempDir()
	s := Search{
		Explicit: []string{filepath.Join(dir, "nope.so")},
		Dirs:     []string{dir},
		Sonames:  []string{"libdoesnotexist.so.7", "libdoesnotexist.so.6"},
	}
	lib, err := Open("Test library", "set TEST_PATH", s.Candidates())
	require.Error(t, err)
	assert.Nil(t, lib)
	assert.ErrorIs(t, err, ErrLibraryNotFound)
	var le *LoadError
	require.True(t, errors.As(err, &le))
	assert.Equal(t, []string{
		filepath.Join(dir, "nope.so"),
		filepath.Join(dir, "libdoesnotexist.so.7"),
		filepath.Join(dir, "libdoesnotexist.so.6"),
		"libdoesnotexist.so.7",
		"libdoesnotexist.so.6",
	}, paths(le.Tried))
	msg := err.Error()
	for _, a := range le.Tried {
		assert.Contains(t, msg, a.Path)
		assert.NotEmpty(t, a.Err)
	}
	assert.Contains(t, msg, "Test library not found")
	assert.Contains(t, msg, "set TEST_PATH")
}

func TestOpenNoCandidates(t *testing.T) {
	_, err := Open("Nothing", "", nil)
	assert.ErrorIs(t, err, ErrLibraryNotFound)
	assert.Contains(t, err.Error(), "no path to try")
}

func paths(as []Attempt) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Path)
	}
	return out
}

func TestSymbolPresentAndMissing(t *testing.T) {
	lib, err := Open("C math library", "", []string{"libm.so.6"})
	require.NoError(t, err)
	defer lib.Close()
	p, err := lib.Sym("cos")
	require.NoError(t, err)
	assert.NotNil(t, p)
	assert.Contains(t, lib.File("cos"), "libm")

	p, err = lib.Sym("rocm_go_no_such_symbol")
	assert.Nil(t, p)
	assert.ErrorIs(t, err, ErrSymbolNotFound)
	assert.Contains(t, err.Error(), "rocm_go_no_such_symbol")
	assert.Contains(t, err.Error(), "libm.so.6")
}

func TestReferenceCounting(t *testing.T) {
	a, err := Open("C math library", "", []string{"libm.so.6"})
	require.NoError(t, err)
	b, err := Open("C math library", "", []string{"libm.so.6"})
	require.NoError(t, err)
	assert.Same(t, a, b)
	assert.Equal(t, 2, a.Refs())

	require.NoError(t, a.Close())
	assert.Equal(t, 1, a.Refs())
	_, err = b.Sym("sin")
	assert.NoError(t, err, "still open after one of two closes")

	require.NoError(t, b.Close())
	assert.Equal(t, 0, a.Refs())
	assert.Nil(t, a.Handle())
	_, err = a.Sym("sin")
	assert.ErrorIs(t, err, ErrSymbolNotFound)
	assert.Contains(t, err.Error(), "closed")

	err = a.Close()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "already closed")

	// A fresh open after the last close maps it again.
	c, err := Open("C math library", "", []string{"libm.so.6"})
	require.NoError(t, err)
	assert.NotSame(t, a, c)
	require.NoError(t, c.Close())
}

func TestCandidatesOrder(t *testing.T) {
	root := t.TempDir()
	explicitDir := t.TempDir()
	t.Setenv("RG_TEST_ROOT", root)
	t.Setenv("RG_TEST_EMPTY", "")
	s := Search{
		Explicit: []string{"/x/libfoo.so", explicitDir},
		Env: []EnvDir{
			{Var: "RG_TEST_ROOT", Subdir: []string{"lib", "lib64"}},
			{Var: "RG_TEST_EMPTY", Subdir: []string{"lib"}},
			{Var: "RG_TEST_UNSET_VARIABLE", Subdir: []string{"lib"}},
		},
		Dirs:    []string{"/opt/rocm/lib", filepath.Join(root, "lib")}, // duplicate dropped
		Sonames: []string{"libfoo.so.2", "libfoo.so.1"},
	}
	want := []string{
		"/x/libfoo.so",
		filepath.Join(explicitDir, "libfoo.so.2"), filepath.Join(explicitDir, "libfoo.so.1"),
		filepath.Join(root, "lib", "libfoo.so.2"), filepath.Join(root, "lib", "libfoo.so.1"),
		filepath.Join(root, "lib64", "libfoo.so.2"), filepath.Join(root, "lib64", "libfoo.so.1"),
		"/opt/rocm/lib/libfoo.so.2", "/opt/rocm/lib/libfoo.so.1",
		"libfoo.so.2", "libfoo.so.1",
	}
	assert.Equal(t, want, s.Candidates())
}

func TestOpenProbed(t *testing.T) {
	lib, err := OpenProbed("C math library", "", []string{"libm.so.6"}, "cos")
	require.NoError(t, err)
	require.NoError(t, lib.Close())

	lib, err = OpenProbed("HIP runtime (libamdhip64)", "", []string{"libm.so.6"}, "hipRuntimeGetVersion")
	assert.Nil(t, lib)
	assert.ErrorIs(t, err, ErrSymbolNotFound)
	assert.EqualError(t, err, "HIP runtime (libamdhip64) (libm.so.6) has no symbol hipRuntimeGetVersion: it is another library, not HIP runtime (libamdhip64)")
	m, err := Open("C math library", "", []string{"libm.so.6"})
	require.NoError(t, err)
	assert.Equal(t, 1, m.Refs(), "the refused library was closed")
	require.NoError(t, m.Close())
}

func TestPlatformSearches(t *testing.T) {
	rocm, cuda := t.TempDir(), t.TempDir()
	t.Setenv("ROCM_PATH", rocm)
	t.Setenv("CUDA_PATH", cuda)
	t.Setenv("CUDA_HOME", "")
	assert.Equal(t, []string{
		"/x/librocblas.so",
		filepath.Join(rocm, "lib", "librocblas.so.5"), filepath.Join(rocm, "lib", "librocblas.so.4"),
		"/opt/rocm/lib/librocblas.so.5", "/opt/rocm/lib/librocblas.so.4",
		"librocblas.so.5", "librocblas.so.4",
	}, ROCm([]string{"/x/librocblas.so"}, "librocblas.so.5", "librocblas.so.4").Candidates())
	assert.Equal(t, []string{
		filepath.Join(cuda, "lib64", "libcudnn.so.9"), filepath.Join(cuda, "lib", "libcudnn.so.9"),
		filepath.Join(cuda, "targets/x86_64-linux/lib", "libcudnn.so.9"),
		"/usr/local/cuda/lib64/libcudnn.so.9", "/usr/local/cuda/targets/x86_64-linux/lib/libcudnn.so.9",
		"/usr/local/nvidia/lib64/libcudnn.so.9", "libcudnn.so.9",
	}, CUDA(nil, "libcudnn.so.9").Candidates())
}

func TestOpenCUDARTNotFound(t *testing.T) {
	t.Setenv("CUDA_PATH", "")
	t.Setenv("CUDA_HOME", "")
	dir := t.TempDir()
	cudart, err := OpenCUDART([]string{dir})
	if err == nil {
		require.NoError(t, cudart.Close())
		t.Skip("tier 0: the CUDA runtime is installed here; its absence is what this test checks")
	}
	assert.ErrorIs(t, err, ErrLibraryNotFound)
	var le *LoadError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "CUDA runtime (libcudart)", le.Library)
	assert.Equal(t, CUDAHint, le.Hint)
	var tried []string
	for _, a := range le.Tried {
		tried = append(tried, a.Path)
	}
	assert.Equal(t, CUDA([]string{dir}, "libcudart.so.13", "libcudart.so.12").Candidates(), tried,
		"the explicit folder, CUDA's folders and the loader path, the newest soname first")
}

func TestOpenCUBLASNotFound(t *testing.T) {
	t.Setenv("CUDA_PATH", "")
	t.Setenv("CUDA_HOME", "")
	cublas, cudart, err := OpenCUBLAS([]string{t.TempDir()})
	if err == nil {
		require.NoError(t, errors.Join(cublas.Close(), cudart.Close()))
		t.Skip("tier 0: cuBLAS is installed here; its absence is what this test checks")
	}
	assert.ErrorIs(t, err, ErrLibraryNotFound)
	assert.ErrorContains(t, err, "cuBLAS (libcublas)")
	assert.ErrorContains(t, err, "set CUDA_PATH")
}
