package hip

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/testenv"
)

// The tests in this file run the NVIDIA translation layer (nvidia.c) in
// tier 0, against testdata/fakecuda.c: one library standing in for both
// libcudart and libcuda.

var fakeCUDA struct {
	once sync.Once
	dir  string
	err  error
}

func useFakeCUDA(t *testing.T) *Device {
	t.Helper()
	fakeCUDA.once.Do(func() {
		dir, err := os.MkdirTemp("", "rocm-go-fakecuda")
		if err != nil {
			fakeCUDA.err = err
			return
		}
		lib := filepath.Join(dir, "libcudart.so.13")
		if out, err := exec.Command("cc", "-shared", "-fPIC", "-o", lib, "testdata/fakecuda.c").CombinedOutput(); err != nil {
			fakeCUDA.err = &os.PathError{Op: "cc", Path: lib, Err: os.ErrInvalid}
			t.Log(string(out))
			return
		}
		fakeCUDA.err = os.Symlink(lib, filepath.Join(dir, "libcuda.so.1"))
		fakeCUDA.dir = dir
	})
	if fakeCUDA.err != nil {
		testenv.FakeBuildFailed(t, "the fake CUDA libraries", fakeCUDA.err)
	}
	resetForTest()
	t.Cleanup(resetForTest)
	require.NoError(t, Load(WithPlatform(PlatformNVIDIA), WithLibraryPaths(fakeCUDA.dir)))
	d, err := GetDevice(0)
	require.NoError(t, err)
	return d
}

func TestNVIDIATranslatesEveryFunction(t *testing.T) {
	useFakeCUDA(t)
	assert.Equal(t, PlatformNVIDIA, LoadedPlatform())
	assert.Empty(t, untranslated(), "every bound HIP function has a CUDA translation")
	paths := LibraryPaths()
	require.Len(t, paths, 2)
	assert.Contains(t, paths[0], "libcudart.so.13")
}

func TestNVIDIAVersionsAndProperties(t *testing.T) {
	d := useFakeCUDA(t)
	v, err := RuntimeVersion()
	require.NoError(t, err)
	assert.Equal(t, "13.0", v.String())
	p, err := d.Properties()
	require.NoError(t, err)
	assert.Equal(t, "Fake H200", p.Name)
	assert.Equal(t, "sm_90", p.ArchName, "gcnArchName carries the CUDA arch")
	assert.Equal(t, int64(141<<30), p.TotalMemory)
	assert.Equal(t, 32, p.WarpSize)
	assert.Equal(t, 132, p.MultiProcessorCount)
	assert.Equal(t, 9, p.Major)
	assert.Equal(t, int64(60<<20), p.L2CacheSize)
	assert.Equal(t, bytes.Repeat([]byte{7}, 16), p.UUID[:])

	ws, err := d.Attribute(DeviceAttributeWarpSize)
	require.NoError(t, err)
	assert.Equal(t, 32, ws, "HIP's attribute 87 is CUDA's 10")
	_, err = d.Attribute(DeviceAttributeTotalGlobalMem)
	assert.ErrorIs(t, err, ErrInvalidValue, "attributes CUDA lacks are invalid values")
	least, greatest, err := d.StreamPriorityRange()
	require.NoError(t, err)
	assert.Equal(t, []int{0, -5}, []int{least, greatest})
}

func TestNVIDIAMemoryAndLaunch(t *testing.T) {
	d := useFakeCUDA(t)
	b, err := d.Malloc(256)
	require.NoError(t, err, "the device trampoline made the device current first")
	defer b.Close()
	require.NoError(t, b.MemsetD32(0x01020304))
	got := make([]byte, 8)
	require.NoError(t, b.CopyToHost(got))
	assert.Equal(t, []byte{4, 3, 2, 1, 4, 3, 2, 1}, got)
	_, err = d.Malloc(2 << 40)
	assert.ErrorIs(t, err, ErrOutOfMemory)
	assert.ErrorIs(t, err, errs.ErrOutOfMemory, "CUDA's out-of-memory, translated")

	m, err := d.LoadModule([]byte("FAKE cubin"))
	require.NoError(t, err)
	defer m.Close()
	_, err = m.Function("missing")
	assert.ErrorIs(t, err, ErrNotFound)
	f, err := m.Function("echo")
	require.NoError(t, err)
	var a Args
	a.Ptr(b.Ptr()).Int32(42).Float64(0.5)
	require.NoError(t, f.Launch(LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 1}}, &a), "extra ends with CUDA's END")
	echo := make([]byte, 8+a.Len())
	require.NoError(t, b.CopyToHost(echo))
	assert.Equal(t, uint64(a.Len()), binary.LittleEndian.Uint64(echo))
	assert.Equal(t, a.Bytes(), echo[8:])

	// An early launch (the fake's device is sm_90) goes through
	// cuLaunchKernelEx with programmatic stream serialization, id 6, on.
	require.NoError(t, b.MemsetD32(0))
	require.NoError(t, f.Launch(LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 1}, EarlyLaunch: true}, &a))
	early := make([]byte, 8+a.Len()+8)
	require.NoError(t, b.CopyToHost(early))
	assert.Equal(t, a.Bytes(), early[8:8+a.Len()])
	assert.Equal(t, []uint32{6, 1}, []uint32{binary.LittleEndian.Uint32(early[8+a.Len():]), binary.LittleEndian.Uint32(early[12+a.Len():])})
}

func TestNVIDIAFlagsAndStatuses(t *testing.T) {
	d := useFakeCUDA(t)
	// CUDA refuses unknown flags: the AMD-only ones must be dropped.
	p, err := d.MallocHost(64, HostMallocPortable|HostMallocCoherent|HostMallocNumaUser)
	require.NoError(t, err)
	require.NoError(t, p.Close())
	e, err := d.NewEvent(EventDisableTiming | EventReleaseToSystem)
	require.NoError(t, err)
	defer e.Close()
	_, err = e.Query()
	assert.ErrorIs(t, err, &Error{Status: StatusInvalidTexture}, "CUDA's 18 is HIP's 912")

	// A function the fake CUDA lacks: the error says so.
	s, err := d.NewStream()
	assert.ErrorIs(t, err, ErrSymbolNotFound)
	assert.ErrorContains(t, err, "the CUDA libraries lack the function")
	assert.Nil(t, s)

	name, err := StatusName(StatusOutOfMemory)
	require.NoError(t, err)
	assert.Equal(t, "cudaErrorMemoryAllocation", name)
	name, err = StatusName(StatusInvalidTexture)
	require.NoError(t, err)
	assert.Equal(t, "cudaErrorInvalidTexture", name, "HIP's 912 is CUDA's 18")
}

func TestNVIDIAStatusTranslation(t *testing.T) {
	for cuda, hip := range map[int]Status{
		0: StatusSuccess, 2: StatusOutOfMemory, 100: StatusNoDevice, 201: StatusInvalidContext,
		209: StatusNoBinaryForGpu, 500: StatusNotFound, 600: StatusNotReady, 700: StatusIllegalAddress,
		18: StatusInvalidTexture, 20: StatusInvalidChannelDescriptor, 911: StatusUnknown, 912: StatusUnknown,
		36: StatusInsufficientDriver, 716: StatusLaunchFailure, 12345: StatusUnknown, 10000: StatusUnknown,
	} {
		assert.Equal(t, hip, nvidiaStatus(cuda), "CUDA %d", cuda)
	}
	assert.Equal(t, 20, cudaStatus(StatusInvalidChannelDescriptor))
	assert.Equal(t, 2, cudaStatus(StatusOutOfMemory))
	assert.Equal(t, 999, cudaStatus(Status(1052)), "HIP-only codes are CUDA's unknown")
}
