package flashattn

import (
	"embed"
	"io/fs"
	"path"
	"unsafe"

	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/hip"
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

// Warm compiles (or reads from the kernel cache) and loads the attention
// kernels on dev, so that the first Forward or Decode does not pay for it:
// a machine's first use compiles them, which takes a minute or more.
func Warm(dev *hip.Device) error {
	if dev == nil {
		return pkg.Errorf("Warm", errs.ErrArgument, "nil device")
	}
	_, err := kernels.Module(dev)
	return pkg.Wrap("Warm", err)
}

// ModuleName is the attention kernels' module, as Warm's callers report it.
const ModuleName = moduleName

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

// kParams is the kernels' Params byte for byte (a static_assert there).
var (
	_ [unsafe.Sizeof(kParams{}) - 1360]struct{}
	_ [1360 - unsafe.Sizeof(kParams{})]struct{}
)

// kParams is the kernels' Params (kernels/common.h), byte for byte.
type kParams struct {
	Q, K, V, O, LSE, OPart, LSEPart uint64
	CuQ, CuK, SeqLensK, BlockTable  uint64
	QS, KS, VS, OS                  [3]int64
	BTStride                        int64
	Batch, SQ, SK, HQ, HKV, D       int32
	MaxSQ                           int32
	PageSize, NumPages, Splits      int32
	WindowLeft, WindowRight         int32
	Flags                           int32
	Scale, SoftCap                  float32
	Alibi                           [MaxAlibiHeads]float32
	Counters                        uint64 // flagFuse's: the handle's
	NewK, NewV, Cos, Sin            uint64 // flagRotary's (Params.Rotary)
	NKS, NVS                        [2]int64
	CSStride                        int64
}

// The kernels' flags.
const (
	flagVarlen  = 1
	flagPaged   = 2
	flagAligned = 4
	flagAlibi   = 8
	flagLSE     = 16
	flagFuse    = 32 // attn_mmadec merges its own splits (Counters)
	flagRotary  = 64 // attn_decode_paged turns q and the new keys and writes the new rows (Params.Rotary)
)
