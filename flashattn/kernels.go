package flashattn

import (
	"embed"
	"io/fs"
	"path"
	"sort"
	"unsafe"

	"github.com/rocm-go/rocm/hiprtc"
)

// kernelFiles are the kernels' HIP C++, one module: attention.hip
// includes a file of each kernel family (fwd.hip, combine.hip,
// decode.hip, mma.hip, wgmma.hip, amd.hip), and each family includes
// common.h. It compiles with hipRTC and with NVRTC; the matrix-core
// families are compiled only for the archs that have them (the arch
// macros guard them).
//
//go:embed kernels/*.hip kernels/*.h
var kernelFiles embed.FS

// moduleName is the module's source in kernels/, and its name in caches
// and compiler messages.
const moduleName = "attention.hip"

// kernels are the kernels, compiled through hiprtc's kernel cache
// (hiprtc.DefaultCache: ROCM_GO_CACHE_DIR, else the user's cache folder)
// for each device's architecture, and loaded once per device for every
// handle.
var kernels = newModule(nil)

// KernelModules are the package's kernel modules (one: attention.hip and
// the files it includes) compiled through c (nil: hiprtc.DefaultCache),
// for compiling them ahead of time (the rocm-go-kernels command) into the
// cache folder an image ships: the entries are the ones a Handle reads
// at run time from a cache in the same folder.
func KernelModules(c *hiprtc.Cache) []*hiprtc.Kernels { return []*hiprtc.Kernels{newModule(c)} }

// newModule is the module compiled through c. Every file of kernels/ is
// its source or one of its in-memory headers, so that a change to any of
// them changes its cache entries.
func newModule(c *hiprtc.Cache) *hiprtc.Kernels {
	files, err := fs.ReadDir(kernelFiles, "kernels")
	if err != nil {
		panic("flashattn: the embedded kernels: " + err.Error())
	}
	var source string
	headers := map[string]string{}
	for _, f := range files {
		b, err := kernelFiles.ReadFile(path.Join("kernels", f.Name()))
		if err != nil {
			panic("flashattn: the embedded kernels: " + err.Error())
		}
		if f.Name() == moduleName {
			source = string(b)
		} else {
			headers[f.Name()] = string(b)
		}
	}
	return &hiprtc.Kernels{Name: moduleName, Source: source, Options: hiprtc.Options{Std: "c++17", Headers: headers},
		Cache: c, Target: compileTarget}
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

// kernelNames lists the kernels the planner launches on arch ("sm_90a",
// "gfx942"), sorted: every name of its tables, the matrix-core kernels
// only for the archs that have them (matrixBackend and wgmmaArch, which
// the planner's target reads too). The module compiled for arch holds
// exactly these (the tier-1 tests check it). The module compiles an sm_90
// device's kernels for sm_90a where NVRTC knows it (12 and later):
// attn_wgmma is there.
func kernelNames(arch string) []string {
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
