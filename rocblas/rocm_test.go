package rocblas

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
)

// The tests in this file run in tier 1: against ROCm's real HIP runtime and
// rocBLAS, installed on a machine without a GPU.

// useROCm loads the real HIP runtime and rocBLAS. They stay loaded: a C++
// library as large as rocBLAS is not unloaded and reloaded per test.
func useROCm(t *testing.T) {
	t.Helper()
	if p := LoadedPlatform(); p != hip.PlatformNone && p != hip.PlatformAMD || hip.LoadedPlatform() == hip.PlatformNVIDIA {
		t.Skip("tier 1: another platform is loaded in this process")
	}
	err := hip.Load(hip.WithPlatform(hip.PlatformAMD))
	if err == nil {
		err = Load(WithPlatform(hip.PlatformAMD))
	}
	testenv.Need(t, 1, "ROCm's HIP runtime and rocBLAS (librocblas)", err)
}

func TestROCmLibraryLoads(t *testing.T) {
	useROCm(t)
	assert.Equal(t, hip.PlatformAMD, LoadedPlatform())
	assert.Regexp(t, `librocblas\.so\.[45]`, LibraryPaths()[0])
	assert.Empty(t, untranslated(), "rocBLAS exports every function the spec binds, by these names")
	v, err := Version()
	require.NoError(t, err)
	assert.Contains(t, []int{4, 5}, v.Major, v)
	t.Logf("rocBLAS %s from %s", v, LibraryPaths()[0])
	p, err := Symbol("rocblas_gemm_strided_batched_ex")
	require.NoError(t, err)
	assert.NotNil(t, p)
	_, err = Symbol("rocblas_rocm_go_no_such_function")
	assert.ErrorIs(t, err, ErrSymbolNotFound)
}

func TestROCmStatusStrings(t *testing.T) {
	useROCm(t)
	for _, s := range statusValues {
		text, err := StatusString(s)
		require.NoError(t, err)
		assert.Equal(t, s.String(), text, "rocblas_status_to_string(%d)", uint32(s))
	}
}

// Without a GPU, creating a handle fails with a clear error: our path
// cannot make device 0 current (and says there is no device), and
// rocBLAS's own rocblas_create_handle fails too.
func TestROCmHandleWithoutGPU(t *testing.T) {
	useROCm(t)
	if n, err := hip.DeviceCount(); err == nil {
		t.Skipf("tier 1: this machine has %d GPU(s); the no-device paths need none", n)
	}
	_, err := create(0)
	require.Error(t, err)
	assert.ErrorIs(t, err, hip.ErrNoDevice)
	assert.ErrorContains(t, err, "rocblas: rocblas_create_handle: rocblas_status_invalid_value (Passed argument not valid): could not make the device current")
	var e *Error
	require.True(t, errors.As(err, &e))
	assert.Equal(t, "rocblas_create_handle", e.Op)

	err = createHere()
	require.Error(t, err, "rocblas_create_handle without a device")
	require.True(t, errors.As(err, &e), "%v", err)
	assert.Equal(t, "rocblas_create_handle", e.Op)
	t.Logf("rocblas_create_handle without a GPU: %v", err)
}
