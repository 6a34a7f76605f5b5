package hip

/*
#include "helpers.h"
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/dustin/go-humanize"
)

// Device is one GPU, by ordinal. Devices carry no resources and need no
// Close; every call that depends on the current device makes this one
// current inside the same C call.
type Device struct {
	ordinal int
	// early caches whether launches can start early (EarlyLaunch) on
	// the platform loaded when it was asked: 0 not asked, else
	// platform<<1 | 1 where they can, platform<<1 where not.
	early atomic.Int32
}

var devices sync.Map // ordinal → *Device

// DeviceCount reports the number of visible GPUs. With none it returns 0
// and an error matching ErrNoDevice.
func DeviceCount() (int, error) {
	if err := ensure(); err != nil {
		return 0, err
	}
	var n C.int
	if err := check("hipGetDeviceCount", C.rg_hipGetDeviceCount(&n)); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, &Error{Op: "hipGetDeviceCount", Status: StatusNoDevice, Detail: "no GPU is visible"}
	}
	return int(n), nil
}

// GetDevice returns the device with the given ordinal.
func GetDevice(ordinal int) (*Device, error) {
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, &Error{Op: "GetDevice", Status: StatusInvalidDevice, Detail: fmt.Sprintf("ordinal %d, but %d device(s) are visible", ordinal, n)}
	}
	d, _ := devices.LoadOrStore(ordinal, &Device{ordinal: ordinal})
	return d.(*Device), nil
}

// Devices returns every visible device.
func Devices() ([]*Device, error) {
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	out := make([]*Device, n)
	for i := range out {
		if out[i], err = GetDevice(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Ordinal is the device's index among the visible devices.
func (d *Device) Ordinal() int { return d.ordinal }

func (d *Device) String() string { return fmt.Sprintf("hip device %d", d.ordinal) }

func (d *Device) c() C.int { return C.int(d.ordinal) }

// DeviceProperties are a device's properties, from
// hipGetDevicePropertiesR0600. Sizes are in bytes, clocks in kHz.
type DeviceProperties struct {
	Name string
	// ArchName is the full target name: "gfx942:sramecc+:xnack-" on AMD,
	// "sm_90" on NVIDIA. Arch() drops the feature flags.
	ArchName string
	UUID     [16]byte
	// Major and Minor are the compute capability on NVIDIA and HIP's
	// equivalent on AMD (9.4 for gfx942).
	Major, Minor int

	TotalMemory                 int64
	TotalConstMemory            int64
	SharedMemPerBlock           int64
	SharedMemPerBlockOptin      int64
	SharedMemPerMultiprocessor  int64
	L2CacheSize                 int64
	RegsPerBlock                int
	WarpSize                    int
	MaxThreadsPerBlock          int
	MaxThreadsDim               [3]int
	MaxGridSize                 [3]int
	MultiProcessorCount         int // compute units on AMD, SMs on NVIDIA
	MaxThreadsPerMultiProcessor int
	ClockRateKHz                int
	MemoryClockRateKHz          int
	MemoryBusWidth              int // bits
	AsyncEngineCount            int

	PCIDomainID, PCIBusID, PCIDeviceID int

	Integrated                bool
	CanMapHostMemory          bool
	ConcurrentKernels         bool
	ECCEnabled                bool
	ManagedMemory             bool
	UnifiedAddressing         bool
	CooperativeLaunch         bool
	StreamPrioritiesSupported bool
	MemoryPoolsSupported      bool
	// HostRegisterSupported says RegisterHost can work; on NVIDIA,
	// HostRegisterReadOnlySupported says it can register read-only memory
	// (a file mapped PROT_READ) with HostRegisterReadOnly.
	HostRegisterSupported         bool
	HostRegisterReadOnlySupported bool
	IsLargeBar                    bool // AMD: the host can map all of the device's memory
	AsicRevision                  int  // AMD only
}

// Arch is ArchName without feature flags: "gfx942", "sm_90".
func (p *DeviceProperties) Arch() string {
	a, _, _ := strings.Cut(p.ArchName, ":")
	return a
}

// String is a short summary in human units.
func (p *DeviceProperties) String() string {
	return fmt.Sprintf("%s (%s), %s memory, %d compute units, warp size %d, %s L2, %s shared memory per block",
		p.Name, p.ArchName, humanize.IBytes(uint64(p.TotalMemory)), p.MultiProcessorCount, p.WarpSize,
		humanize.IBytes(uint64(p.L2CacheSize)), humanize.IBytes(uint64(p.SharedMemPerBlock)))
}

// Properties reads the device's properties.
func (d *Device) Properties() (*DeviceProperties, error) {
	if err := ensure(); err != nil {
		return nil, err
	}
	cp := (*C.hipDeviceProp_tR0600)(C.calloc(1, C.sizeof_hipDeviceProp_tR0600))
	defer C.free(unsafe.Pointer(cp))
	if err := check("hipGetDevicePropertiesR0600", C.rg_hipGetDevicePropertiesR0600(cp, d.c())); err != nil {
		return nil, err
	}
	p := &DeviceProperties{
		Name:                          C.GoString(&cp.name[0]),
		ArchName:                      C.GoString(&cp.gcnArchName[0]),
		Major:                         int(cp.major),
		Minor:                         int(cp.minor),
		TotalMemory:                   int64(cp.totalGlobalMem),
		TotalConstMemory:              int64(cp.totalConstMem),
		SharedMemPerBlock:             int64(cp.sharedMemPerBlock),
		SharedMemPerBlockOptin:        int64(cp.sharedMemPerBlockOptin),
		SharedMemPerMultiprocessor:    int64(cp.sharedMemPerMultiprocessor),
		L2CacheSize:                   int64(cp.l2CacheSize),
		RegsPerBlock:                  int(cp.regsPerBlock),
		WarpSize:                      int(cp.warpSize),
		MaxThreadsPerBlock:            int(cp.maxThreadsPerBlock),
		MultiProcessorCount:           int(cp.multiProcessorCount),
		MaxThreadsPerMultiProcessor:   int(cp.maxThreadsPerMultiProcessor),
		ClockRateKHz:                  int(cp.clockRate),
		MemoryClockRateKHz:            int(cp.memoryClockRate),
		MemoryBusWidth:                int(cp.memoryBusWidth),
		AsyncEngineCount:              int(cp.asyncEngineCount),
		PCIDomainID:                   int(cp.pciDomainID),
		PCIBusID:                      int(cp.pciBusID),
		PCIDeviceID:                   int(cp.pciDeviceID),
		Integrated:                    cp.integrated != 0,
		CanMapHostMemory:              cp.canMapHostMemory != 0,
		ConcurrentKernels:             cp.concurrentKernels != 0,
		ECCEnabled:                    cp.ECCEnabled != 0,
		ManagedMemory:                 cp.managedMemory != 0,
		UnifiedAddressing:             cp.unifiedAddressing != 0,
		CooperativeLaunch:             cp.cooperativeLaunch != 0,
		StreamPrioritiesSupported:     cp.streamPrioritiesSupported != 0,
		MemoryPoolsSupported:          cp.memoryPoolsSupported != 0,
		HostRegisterSupported:         cp.hostRegisterSupported != 0,
		HostRegisterReadOnlySupported: cp.hostRegisterReadOnlySupported != 0,
		IsLargeBar:                    cp.isLargeBar != 0,
		AsicRevision:                  int(cp.asicRevision),
	}
	for i := range 3 {
		p.MaxThreadsDim[i] = int(cp.maxThreadsDim[i])
		p.MaxGridSize[i] = int(cp.maxGridSize[i])
	}
	for i := range p.UUID {
		p.UUID[i] = byte(cp.uuid.bytes[i])
	}
	return p, nil
}

// canLaunchEarly reports whether kernels on the device can start before
// the previous kernel of their stream ends (LaunchConfig.EarlyLaunch):
// NVIDIA devices of compute capability 9.0 and later.
func (d *Device) canLaunchEarly() bool {
	p := LoadedPlatform()
	if v := d.early.Load(); v != 0 && v&^1 == int32(p)<<1 {
		return v&1 == 1
	}
	v := int32(p) << 1
	if p == PlatformNVIDIA {
		if cc, err := d.Attribute(DeviceAttributeComputeCapabilityMajor); err == nil && cc >= 9 {
			v |= 1
		}
	}
	d.early.Store(v)
	return v&1 == 1
}

// Attribute reads one device attribute.
func (d *Device) Attribute(a DeviceAttribute) (int, error) {
	if err := ensure(); err != nil {
		return 0, err
	}
	var v C.int
	if err := check("hipDeviceGetAttribute", C.rg_hipDeviceGetAttribute(&v, C.hipDeviceAttribute_t(a), d.c())); err != nil {
		return 0, withDetail(err, a.String())
	}
	return int(v), nil
}

// PCIBusID returns the device's PCI address, "0000:c1:00.0".
func (d *Device) PCIBusID() (string, error) {
	if err := ensure(); err != nil {
		return "", err
	}
	var buf [64]C.char
	if err := check("hipDeviceGetPCIBusId", C.rg_hipDeviceGetPCIBusId(&buf[0], C.int(len(buf)), d.c())); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// MemInfo reports the device's free and total memory in bytes.
func (d *Device) MemInfo() (free, total int64, err error) {
	if err := ensure(); err != nil {
		return 0, 0, err
	}
	var f, t C.size_t
	if err := check("hipMemGetInfo", C.rg_hipMemGetInfo_on(d.c(), &f, &t)); err != nil {
		return 0, 0, err
	}
	return int64(f), int64(t), nil
}

// Synchronize waits for all work queued on the device.
func (d *Device) Synchronize() error {
	if err := ensure(); err != nil {
		return err
	}
	return check("hipDeviceSynchronize", C.rg_hipDeviceSynchronize_on(d.c()))
}

// StreamPriorityRange returns the device's stream priorities: least is the
// default (0); greatest is the most urgent (a negative number), or equal to
// least where priorities are not supported.
func (d *Device) StreamPriorityRange() (least, greatest int, err error) {
	if err := ensure(); err != nil {
		return 0, 0, err
	}
	var l, g C.int
	if err := check("hipDeviceGetStreamPriorityRange", C.rg_hipDeviceGetStreamPriorityRange_on(d.c(), &l, &g)); err != nil {
		return 0, 0, err
	}
	return int(l), int(g), nil
}

// Version is a runtime or driver version.
type Version struct {
	Major, Minor, Patch int
	Raw                 int // as the platform reports it
}

func (v Version) String() string {
	if v.Patch != 0 {
		return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	}
	return fmt.Sprintf("%d.%d", v.Major, v.Minor)
}

// decodeVersion splits a raw version: HIP encodes major*10000000 +
// minor*100000 + patch, CUDA major*1000 + minor*10.
func decodeVersion(p Platform, raw int) Version {
	if p == PlatformNVIDIA {
		return Version{Major: raw / 1000, Minor: raw % 1000 / 10, Raw: raw}
	}
	return Version{Major: raw / 10000000, Minor: raw / 100000 % 100, Patch: raw % 100000, Raw: raw}
}

// RuntimeVersion reports the runtime's version: HIP's on AMD, the CUDA
// runtime's on NVIDIA.
func RuntimeVersion() (Version, error) {
	if err := ensure(); err != nil {
		return Version{}, err
	}
	var v C.int
	if err := check("hipRuntimeGetVersion", C.rg_hipRuntimeGetVersion(&v)); err != nil {
		return Version{}, err
	}
	return decodeVersion(LoadedPlatform(), int(v)), nil
}

// DriverVersion reports the driver's version. On AMD, HIP reports its own
// version here; the kernel driver's is not available through HIP.
func DriverVersion() (Version, error) {
	if err := ensure(); err != nil {
		return Version{}, err
	}
	var v C.int
	if err := check("hipDriverGetVersion", C.rg_hipDriverGetVersion(&v)); err != nil {
		return Version{}, err
	}
	return decodeVersion(LoadedPlatform(), int(v)), nil
}
