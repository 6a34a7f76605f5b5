// Package bind is what the binding packages (hip, hiprtc, rocblas, miopen)
// share: the platform package hip loaded and its set-device function, the
// load state of a library that follows it (Library), the lifetime of a C
// handle (Lifetime), and the rules for the failures every library has
// (ErrClosed, a missing symbol, a device that cannot be made current).
//
// It imports no public package: package hip publishes what the others need
// when it loads (Publish), and each package passes its own hooks in.
package bind

import (
	"sync/atomic"
	"unsafe"
)

// Platform values; they match hip.Platform.
const (
	PlatformNone   = 0
	PlatformAMD    = 1
	PlatformNVIDIA = 2
)

// PlatformName names a platform as HIP_PLATFORM spells it.
func PlatformName(p int) string {
	switch p {
	case PlatformAMD:
		return "amd"
	case PlatformNVIDIA:
		return "nvidia"
	}
	return "none"
}

// published is what package hip publishes when it loads.
type published struct {
	platform    int
	setDevice   unsafe.Pointer // C: int (*)(int), 0 on success
	deviceError func() error
}

var (
	current     atomic.Pointer[published]
	generations atomic.Uint64
)

// Publish records what package hip loaded: the platform, its C set-device
// function (int (*)(int), returning 0 on success) and a function that says
// why a device could not be made current. Publish(PlatformNone, nil, nil)
// clears them when HIP unloads.
func Publish(platform int, setDevice unsafe.Pointer, deviceError func() error) {
	generations.Add(1)
	if platform == PlatformNone {
		current.Store(nil)
		return
	}
	current.Store(&published{platform: platform, setDevice: setDevice, deviceError: deviceError})
}

// Generation counts HIP's loads and unloads: what was made with HIP (a
// loaded module, a failure to compile for a device) holds only while it
// stays the same.
func Generation() uint64 { return generations.Load() }

// Platform reports the platform package hip loaded, PlatformNone when
// none is loaded.
func Platform() int {
	if p := current.Load(); p != nil {
		return p.platform
	}
	return PlatformNone
}

// SetDeviceFunc returns HIP's C set-device function, nil when HIP is not
// loaded.
func SetDeviceFunc() unsafe.Pointer {
	if p := current.Load(); p != nil {
		return p.setDevice
	}
	return nil
}
