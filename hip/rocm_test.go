package hip

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/internal/testenv"
)

// The tests in this file run in tier 1: against the real ROCm runtime,
// which is installed but has no GPU to drive.

// useROCm loads the real AMD runtime for the test.
func useROCm(t *testing.T) {
	t.Helper()
	resetForTest()
	t.Cleanup(resetForTest)
	testenv.Need(t, 1, "the ROCm HIP runtime (libamdhip64)", Load(WithPlatform(PlatformAMD)))
}

func TestROCmRuntimeLoads(t *testing.T) {
	useROCm(t)
	assert.Equal(t, PlatformAMD, LoadedPlatform())
	paths := LibraryPaths()
	require.Len(t, paths, 1)
	assert.Contains(t, paths[0], "libamdhip64.so")
	v, err := RuntimeVersion()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, v.Major, 6)
	assert.Greater(t, v.Patch, 0, "HIP reports its build number as the patch: %v", v)
	dv, err := DriverVersion()
	require.NoError(t, err)
	assert.Equal(t, v.Major, dv.Major)
	t.Logf("HIP runtime %s from %s", v, paths[0])

	// A symbol that no runtime has: an error, no crash.
	_, err = Symbol("hipRocmGoNoSuchFunction")
	assert.ErrorIs(t, err, ErrSymbolNotFound)
	p, err := Symbol("hipGetDevicePropertiesR0600")
	require.NoError(t, err)
	assert.NotNil(t, p)
}

// unknownToROCm64 are codes of the header that ROCm 6.4's hipGetErrorName
// does not know (it answers hipErrorUnknown).
var unknownToROCm64 = map[Status]bool{StatusInvalidChannelDescriptor: true, StatusInvalidTexture: true}

func TestROCmErrorNamesMatchTheRuntime(t *testing.T) {
	useROCm(t)
	for _, s := range statusValues {
		name, err := StatusName(s)
		require.NoError(t, err)
		if unknownToROCm64[s] && name == "hipErrorUnknown" {
			continue
		}
		assert.Equal(t, s.String(), name, "status %d", uint32(s))
		desc, err := StatusString(s)
		require.NoError(t, err)
		assert.NotEmpty(t, desc, "status %s", s)
	}
}

// Without a GPU every device call must fail with ErrNoDevice, not crash.
func TestROCmNoDeviceFromEveryDeviceCall(t *testing.T) {
	useROCm(t)
	n, err := DeviceCount()
	if err == nil {
		t.Skipf("tier 1: this machine has %d GPU(s); the no-device paths need none", n)
	}
	assert.ErrorIs(t, err, ErrNoDevice)
	assert.Zero(t, n)
	_, err = GetDevice(0)
	assert.ErrorIs(t, err, ErrNoDevice)
	_, err = Devices()
	assert.ErrorIs(t, err, ErrNoDevice)

	d := &Device{ordinal: 0} // GetDevice refuses to make one
	calls := map[string]func() error{
		"Properties":          func() error { _, err := d.Properties(); return err },
		"Attribute":           func() error { _, err := d.Attribute(DeviceAttributeWarpSize); return err },
		"PCIBusID":            func() error { _, err := d.PCIBusID(); return err },
		"MemInfo":             func() error { _, _, err := d.MemInfo(); return err },
		"Synchronize":         d.Synchronize,
		"StreamPriorityRange": func() error { _, _, err := d.StreamPriorityRange(); return err },
		"Malloc":              func() error { _, err := d.Malloc(1 << 20); return err },
		"MallocHost":          func() error { _, err := d.MallocHost(4096, HostMallocDefault); return err },
		"RegisterHost": func() error {
			m, err := syscall.Mmap(-1, 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
			require.NoError(t, err)
			defer syscall.Munmap(m)
			_, err = d.RegisterHost(m, HostRegisterReadOnly)
			return err
		},
		"NewStream":        func() error { _, err := d.NewStream(); return err },
		"NewEvent":         func() error { _, err := d.NewEvent(EventDefault); return err },
		"LoadModule":       func() error { _, err := d.LoadModule([]byte("not a code object")); return err },
		"CanAccessPeer":    func() error { _, err := d.CanAccessPeer(&Device{ordinal: 1}); return err },
		"EnablePeerAccess": func() error { return d.EnablePeerAccess(&Device{ordinal: 1}) },
	}
	for name, call := range calls {
		err := call()
		if assert.Error(t, err, name) {
			assert.ErrorIs(t, err, ErrNoDevice, "%s: %v", name, err)
			var e *Error
			require.True(t, errors.As(err, &e), name)
			assert.True(t, strings.HasPrefix(e.Op, "hip"), "%s: the error names the HIP call: %q", name, e.Op)
		}
	}
}
