package bind

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/dl"
)

// ErrClosed is the cause of every error of a call given a closed handle,
// buffer or descriptor, in every package: each re-exports it as its own
// ErrClosed, so errors.Is(err, hip.ErrClosed) holds for a closed buffer
// passed to rocblas too. It is errs.ErrClosed, the kind the packages above
// the bindings give a closed handle.
var ErrClosed = errs.ErrClosed

// FormatError is the one message format of the packages' Error types:
//
//	pkg: op: STATUS_NAME (description): detail: cause
//
// The description is left out when the header gave none (it is then the
// name), and so are an empty detail and a nil cause.
func FormatError(pkg, op, status, description, detail string, cause error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s: %s", pkg, op, status)
	if description != "" && description != status {
		fmt.Fprintf(&b, " (%s)", description)
	}
	if detail != "" {
		b.WriteString(": " + detail)
	}
	if cause != nil {
		b.WriteString(": " + cause.Error())
	}
	return b.String()
}

// NoDeviceDetail is the Detail of the error of a call whose device could
// not be made current; its cause is DeviceError's.
const NoDeviceDetail = "could not make the device current"

// DeviceError says why a device could not be made current, as package hip
// knows it (no GPU at all is the usual reason): the cause of every
// package's no-device error, so that errors.Is(err, hip.ErrNoDevice) holds
// whichever package failed.
func DeviceError() error {
	if p := current.Load(); p != nil && p.deviceError != nil {
		return p.deviceError()
	}
	return errors.New("the HIP runtime is not loaded")
}

// MissingSymbol is the error of a call whose function the loaded library
// does not provide: on AMD an older library; on NVIDIA a function rocm-go
// does not translate.
func (l *Library) MissingSymbol(symbol string) error {
	name, path := l.first()
	reason := fmt.Sprintf("the loaded %s does not export it (an older %s?)", name, name)
	if l.Platform() == PlatformNVIDIA {
		reason = fmt.Sprintf("rocm-go does not translate it to %s", name)
	}
	return &dl.SymbolError{Library: name, Path: path, Symbol: symbol, Reason: reason}
}

// MissingCUDA is the error of a call that the NVIDIA platform translates
// to a CUDA function its CUDA libraries lack.
func (l *Library) MissingCUDA(symbol string) error {
	name, path := l.first()
	return &dl.SymbolError{Library: name, Path: path, Symbol: symbol,
		Reason: fmt.Sprintf("the %s libraries lack the function it is translated to (an older %s?)", l.NVIDIA, l.NVIDIA)}
}

// first names the library of the loaded platform and its first file, for
// messages.
func (l *Library) first() (name, path string) {
	name = l.Name
	if l.Platform() == PlatformNVIDIA {
		name = l.NVIDIA
	}
	libs := l.Libraries()
	if len(libs) == 0 {
		return name, "not loaded"
	}
	return name, libs[0].Path()
}
