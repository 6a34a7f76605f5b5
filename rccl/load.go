package rccl

/*
#include "helpers.h"
*/
import "C"

import (
	"fmt"
	"os"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/bind"
	"github.com/rocm-go/rocm/internal/dl"
)

// The load API (Load, Unload, LoadedPlatform, Symbol, StatusString, ...) is
// generated from cgen.spec into zload.go; this file holds how the library
// opens.

// open opens RCCL on AMD, NCCL on NVIDIA.
func open(o bind.Options) ([]*dl.Library, int, error) {
	if o.Platform == bind.PlatformNVIDIA {
		l, err := dl.OpenProbed("NCCL (libnccl)",
			"Install NVIDIA's NCCL (libnccl2, or the nvidia-nccl pip wheel, whose lib folder goes on LD_LIBRARY_PATH), or set CUDA_PATH, or pass rccl.WithLibraryPaths.",
			dl.CUDA(o.Paths, "libnccl.so.2").Candidates(), "ncclGetVersion")
		if err != nil {
			return nil, bind.PlatformNone, err
		}
		C.rg_rccl_install_nvidia(l.Handle())
		return []*dl.Library{l}, o.Platform, nil
	}
	l, err := dl.OpenProbed("RCCL (librccl)", "Install ROCm's RCCL (librccl), or set ROCM_PATH, or pass rccl.WithLibraryPaths.",
		dl.ROCm(o.Paths, "librccl.so.1").Candidates(), "ncclGetVersion")
	if err != nil {
		return nil, bind.PlatformNone, err
	}
	if err := sameHIP(l); err != nil {
		l.Close()
		return nil, bind.PlatformNone, err
	}
	C.rg_rccl_bind(l.Handle())
	return []*dl.Library{l}, o.Platform, nil
}

// sameHIP checks that RCCL runs on the HIP runtime package hip loaded:
// RCCL links libamdhip64 of its ROCm, and where that is another file (a
// machine with two ROCm versions) the streams and device memory that
// package hip gives it would mean nothing to it.
func sameHIP(l *dl.Library) error {
	const probe = "hipRuntimeGetVersion"
	if _, err := l.Sym(probe); err != nil {
		return nil // no HIP of its own to compare: nothing to check
	}
	theirs := l.File(probe)
	paths := hip.LibraryPaths()
	if len(paths) == 0 {
		return nil
	}
	a, errA := os.Stat(theirs)
	b, errB := os.Stat(paths[0])
	if errA != nil || errB != nil || os.SameFile(a, b) {
		return nil
	}
	return fmt.Errorf("rccl: %s runs on the HIP runtime %s, but package hip loaded %s: "+
		"load both from one ROCm (set ROCM_PATH, or pass one folder to hip.WithLibraryPaths and rccl.WithLibraryPaths)", l.Path(), theirs, paths[0])
}

// nvidiaStatus translates an NCCL status as the NVIDIA platform does (for
// tests).
func nvidiaStatus(nccl int) Status { return Status(C.rg_rccl_nvidia_status(C.int(nccl))) }

// Version reports the NCCL API version the library implements, from
// ncclGetVersion: NCCL's own on NVIDIA; on AMD the NCCL version RCCL keeps
// pace with (RCCL 7.2.4 reports 2.27.7), not RCCL's release.
func Version() (hip.Version, error) {
	if err := ensure(); err != nil {
		return hip.Version{}, err
	}
	var code C.int
	if err := check("ncclGetVersion", C.rg_ncclGetVersion(&code)); err != nil {
		return hip.Version{}, err
	}
	return decodeVersion(int(code)), nil
}

// decodeVersion reads NCCL_VERSION_CODE: X*1000 + Y*100 + Z up to 2.8,
// X*10000 + Y*100 + Z since 2.9.
func decodeVersion(code int) hip.Version {
	if code >= 10000 {
		return hip.Version{Major: code / 10000, Minor: code / 100 % 100, Patch: code % 100, Raw: code}
	}
	return hip.Version{Major: code / 1000, Minor: code / 100 % 10, Patch: code % 100, Raw: code}
}
