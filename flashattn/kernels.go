package flashattn

import (
	_ "embed"
	"sort"
	"unsafe"

	"github.com/rocm-go/rocm/hiprtc"
)

// KernelSource is the HIP C++ of the kernels. It compiles with hipRTC and
// with NVRTC; the matrix-core kernels are compiled only for the archs
// that have them (the arch macros guard them).
//
//go:embed attention.hip
var KernelSource string

// ModuleName is the kernel module's name in caches and compiler messages.
const ModuleName = "attention.hip"

var kernelOptions = hiprtc.Options{Std: "c++17"}

// kernels are the portable kernels, compiled through hiprtc's kernel cache
// (hiprtc.DefaultCache: ROCM_GO_CACHE_DIR, else the user's cache folder)
// for each device's architecture, and loaded once per device for every
// handle.
var kernels = Module(nil)

// Module is the portable kernels as a module compiled through c (nil:
// hiprtc.DefaultCache), for compiling them ahead of time into the cache
// folder an image ships (Compile per architecture): the entries are the
// ones Handle reads at run time from a cache in the same folder.
func Module(c *hiprtc.Cache) *hiprtc.Kernels {
	return &hiprtc.Kernels{Name: ModuleName, Source: KernelSource, Options: kernelOptions, Cache: c, Target: compileTarget}
}

// compileTarget is the target the kernels compile for on a device of
// arch: an sm_90 device's is sm_90a, for attn_wgmma, where the compiler
// knows it (NVRTC 12 and later; the older ones compile sm_90 without
// attn_wgmma).
func compileTarget(arch string) string {
	if arch != "sm_90" {
		return arch
	}
	if v, err := hiprtc.Version(); err != nil || v.Major < 12 {
		return arch
	}
	return "sm_90a"
}

// KernelNames lists the kernel symbols of KernelSource compiled for arch
// ("sm_90a", "gfx942"), sorted: the matrix-core kernels exist only for the
// archs that have them. Module compiles an sm_90 device's kernels for
// sm_90a where NVRTC knows it (12 and later): attn_wgmma is there.
func KernelNames(arch string) []string {
	var names []string
	for _, dt := range dtypes {
		names = append(names, fwdNames[dt][:]...)
		for _, d := range decodeNames[dt] {
			names = append(names, d[:]...)
		}
		names = append(names, combineNames[dt])
	}
	for _, dt := range mmaDTypes {
		names = append(names, pagedNames[dt][:]...)
		switch matrixBackend(arch) {
		case MatrixCore:
			for i, m := range mmaNames[dt] {
				names = append(names, m[:]...)
				if mmaDecNames[dt][i][0] != "" {
					names = append(names, mmaDecNames[dt][i][:]...)
				}
				if wgmmaArch(arch) && wgmmaNames[dt][i] != "" {
					names = append(names, wgmmaNames[dt][i])
				}
			}
		case MFMA:
			names = append(names, mfmaNames[dt][:]...)
		case WMMA:
			names = append(names, wmmaNames[dt][:]...)
		}
	}
	sort.Strings(names)
	return names
}

// kParams is the kernels' Params byte for byte (a static_assert there).
var (
	_ [unsafe.Sizeof(kParams{}) - 1360]struct{}
	_ [1360 - unsafe.Sizeof(kParams{})]struct{}
)
