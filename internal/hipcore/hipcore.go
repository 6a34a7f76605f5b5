// Package hipcore carries what package hip shares with the other binding
// packages once the HIP runtime is loaded: the platform and the C function
// that makes a device current on the calling thread.
package hipcore

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

var (
	platform  atomic.Int32
	setDevice atomic.Pointer[byte]
)

// Publish records the loaded platform and its set-device function, an
// int (*)(int) that returns 0 on success; Publish(PlatformNone, nil) clears
// them.
func Publish(p int, setDeviceFn unsafe.Pointer) {
	platform.Store(int32(p))
	setDevice.Store((*byte)(setDeviceFn))
}

// Platform reports the loaded platform.
func Platform() int { return int(platform.Load()) }

// SetDeviceFunc returns the C set-device function, or nil when HIP is not
// loaded.
func SetDeviceFunc() unsafe.Pointer { return unsafe.Pointer(setDevice.Load()) }
