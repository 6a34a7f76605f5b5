// Package follow serves the binding packages whose library follows the
// platform package hip loads (hiprtc, rocblas, miopen).
package follow

import "github.com/rocm-go/rocm/hip"

// HIPPlatform loads package hip if needed and names the platform it
// loaded: the key (dl.Lazy.Key) of a first-use load that follows it, so that
// the load is redone when HIP's platform changes.
func HIPPlatform() string {
	hip.LoadError()
	return hip.LoadedPlatform().String()
}
