package hip

/*
#include "helpers.h"
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/rocm-go/rocm/internal/bind"
	"github.com/rocm-go/rocm/internal/dl"
)

// The load API (Load, Unload, LoadedPlatform, Symbol, ...) is generated
// from cgen.spec into zload.go; this file holds how HIP picks and opens its
// platform.

// Platform is the vendor stack that carries the HIP calls.
type Platform int

// Platforms.
const (
	PlatformNone   Platform = bind.PlatformNone   // nothing loaded
	PlatformAMD    Platform = bind.PlatformAMD    // ROCm: libamdhip64
	PlatformNVIDIA Platform = bind.PlatformNVIDIA // CUDA, through rocm-go's translation layer
)

func (p Platform) String() string { return bind.PlatformName(int(p)) }

// ParsePlatform reads a HIP_PLATFORM value: "amd" (or the old "hcc"),
// "nvidia" (or "nvcc"). The empty string means automatic: PlatformNone.
func ParsePlatform(s string) (Platform, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return PlatformNone, nil
	case "amd", "hcc":
		return PlatformAMD, nil
	case "nvidia", "nvcc":
		return PlatformNVIDIA, nil
	}
	return PlatformNone, fmt.Errorf("hip: HIP_PLATFORM=%q: want amd or nvidia (or unset, to pick the one that loads)", s)
}

// open opens the platform asked for, else HIP_PLATFORM's, else the first
// that loads, fills the table and publishes the platform to the packages
// that follow it.
func open(o bind.Options) ([]*dl.Library, int, error) {
	platform := Platform(o.Platform)
	if platform == PlatformNone {
		p, err := ParsePlatform(os.Getenv("HIP_PLATFORM"))
		if err != nil {
			return nil, bind.PlatformNone, err
		}
		platform = p
	}
	var libs []*dl.Library
	var err error
	switch platform {
	case PlatformAMD:
		libs, err = loadAMD(o.Paths)
	case PlatformNVIDIA:
		libs, err = loadNVIDIA(o.Paths)
	default:
		var amdErr, nvErr error
		if libs, amdErr = loadAMD(o.Paths); amdErr == nil {
			platform = PlatformAMD
		} else if libs, nvErr = loadNVIDIA(o.Paths); nvErr == nil {
			platform = PlatformNVIDIA
		} else {
			err = &NoPlatformError{AMD: amdErr, NVIDIA: nvErr}
		}
	}
	if err != nil {
		return nil, bind.PlatformNone, err
	}
	bind.Publish(int(platform), unsafe.Pointer(C.rg_hip_setdev_func()), deviceError)
	return libs, int(platform), nil
}

// NoPlatformError says that neither platform loaded. errors.Is matches it
// against ErrLibraryNotFound when both libraries were missing.
type NoPlatformError struct {
	AMD, NVIDIA error
}

func (e *NoPlatformError) Error() string {
	return fmt.Sprintf("hip: no HIP platform could be loaded (set HIP_PLATFORM=amd or nvidia to pick one)\n"+
		"AMD: %v\nNVIDIA: %v", indent(e.AMD), indent(e.NVIDIA))
}

// Unwrap returns both causes.
func (e *NoPlatformError) Unwrap() []error { return []error{e.AMD, e.NVIDIA} }

func indent(err error) string { return strings.ReplaceAll(err.Error(), "\n", "\n  ") }

func loadAMD(explicit []string) ([]*dl.Library, error) {
	l, err := dl.OpenProbed("HIP runtime (libamdhip64)",
		"Install ROCm's HIP runtime, or set ROCM_PATH to its root, or pass hip.WithLibraryPaths.",
		dl.ROCm(explicit, "libamdhip64.so.7", "libamdhip64.so.6").Candidates(), "hipRuntimeGetVersion")
	if err != nil {
		return nil, err
	}
	C.rg_hip_bind(l.Handle())
	return []*dl.Library{l}, nil
}
