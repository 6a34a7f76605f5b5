package candle

import (
	"embed"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
)

//go:embed kernels/*.hip kernels/*.h
var kernelFiles embed.FS

// family is a kernel module: one HIP C++ source of one op family.
type family uint8

const (
	famUnary family = iota
	famBinary
	famCast
	famFill
	famCopy
	famWhere
	famIndex
	famReduce
	famNN
	famSort
	famSample
	famQuant
	numFamilies
)

var familyNames = [numFamilies]string{"unary", "binary", "cast", "fill", "copy", "where", "index", "reduce", "nn", "sort", "sample", "quant"}

func (f family) String() string { return familyNames[f] }

// KernelCache compiles candle's kernels for the devices that run them: one
// module per op family (unary, binary, cast, fill, copy, where, index,
// reduce, nn for the fused ops of neural networks, sort, sample
// for drawing tokens from logits, and quant for GGML blocks), HIP C++ embedded in the package, compiled with hipRTC (NVRTC on
// NVIDIA) for the device's exact architecture on first use, loaded once
// per device, and kept on disk by a hiprtc.Cache (ROCM_GO_CACHE_DIR, else
// the user's cache folder) so that the next process starts warm.
// CompileAll compiles the whole set ahead of time for images that have no
// compiler (the rocm-go-kernels command).
type KernelCache struct {
	cache   *hiprtc.Cache
	modules [numFamilies]*hiprtc.Kernels
}

// NewKernelCache returns a kernel cache kept in dir ("" means the default
// folder, hiprtc.DefaultCacheDir).
func NewKernelCache(dir string) (*KernelCache, error) {
	c, err := hiprtc.NewCache(dir)
	if err != nil {
		return nil, pkg.Wrap("NewKernelCache", err)
	}
	return newKernelCache(c), nil
}

func newKernelCache(c *hiprtc.Cache) *KernelCache {
	common, err := kernelFiles.ReadFile("kernels/common.h")
	if err != nil {
		panic("candle: the embedded kernels lack common.h")
	}
	k := &KernelCache{cache: c}
	for f := range numFamilies {
		src, err := kernelFiles.ReadFile("kernels/" + f.String() + ".hip")
		if err != nil {
			panic("candle: the embedded kernels lack " + f.String() + ".hip")
		}
		k.modules[f] = &hiprtc.Kernels{
			Name:    f.String() + ".hip",
			Source:  string(src),
			Options: hiprtc.Options{Std: "c++17", Headers: map[string]string{"common.h": string(common)}},
			Cache:   c,
		}
	}
	return k
}

var defaultKernels struct {
	once  sync.Once
	cache *KernelCache
}

// DefaultKernelCache is the kernel cache every HIP device uses, on
// hiprtc.DefaultCache.
func DefaultKernelCache() *KernelCache {
	defaultKernels.once.Do(func() { defaultKernels.cache = newKernelCache(hiprtc.DefaultCache()) })
	return defaultKernels.cache
}

// Dir is the folder the compiled kernels are kept in ("" when in memory
// only).
func (k *KernelCache) Dir() string { return k.cache.Dir() }

// Stats reports what the cache did: hits in memory and on disk, compiles.
func (k *KernelCache) Stats() hiprtc.CacheStats { return k.cache.Stats() }

// Modules names the kernel modules: "unary.hip", ...
func (k *KernelCache) Modules() []string {
	var out []string
	for _, m := range k.modules {
		out = append(out, m.Name)
	}
	return out
}

// Source is a module's HIP C++ source and the headers it includes.
func (k *KernelCache) Source(module string) (source string, headers map[string]string, err error) {
	for _, m := range k.modules {
		if m.Name == module {
			return m.Source, m.Options.Headers, nil
		}
	}
	return "", nil, pkg.Errorf("KernelCache.Source", ErrArgument, "no module %q (want one of %v)", module, k.Modules())
}

// Progress reports one module compiled (or read from the cache) for one
// architecture: how long it took, whether it was compiled, the size of its
// code.
type Progress struct {
	Module, Arch string
	Took         time.Duration
	Compiled     bool
	Bytes        int
	Err          error
}

// CompileAll compiles every module for every architecture (gfx942,
// gfx90a:sramecc+:xnack-, sm_90, ...) into the cache, calling progress (if
// not nil) after each. It returns the first error; the rest go on.
func (k *KernelCache) CompileAll(archs []string, progress func(Progress)) error {
	var first error
	for _, arch := range archs {
		for _, m := range k.modules {
			start, before := time.Now(), k.cache.Stats().Compiles
			code, err := m.Compile(arch)
			p := Progress{Module: m.Name, Arch: arch, Took: time.Since(start), Err: err,
				Compiled: k.cache.Stats().Compiles > before}
			if err != nil && first == nil {
				first = err
			}
			if code != nil {
				p.Bytes = len(code.Image)
			}
			if progress != nil {
				progress(p)
			}
		}
	}
	return first
}

// Warm compiles (or reads from the cache) and loads every module on a
// device, so that the first ops run at full speed. On NVIDIA the modules
// compile at once (NVRTC compiles programs in parallel); on AMD one after
// another (hipRTC compiles one program at a time per process).
func (k *KernelCache) Warm(d *HIPDevice) error {
	if hip.LoadedPlatform() != hip.PlatformNVIDIA {
		for _, m := range k.modules {
			if _, err := m.Module(d.dev); err != nil {
				return pkg.Wrap("KernelCache.Warm", err)
			}
		}
		return nil
	}
	errs := make([]error, len(k.modules))
	var wg sync.WaitGroup
	for i, m := range k.modules {
		wg.Go(func() { _, errs[i] = m.Module(d.dev) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return pkg.Wrap("KernelCache.Warm", err)
	}
	return nil
}

// Close unloads the cache's modules from every device (after the devices'
// queued work); the next use loads them again. The devices' own cache
// (DefaultKernelCache) is theirs to keep.
func (k *KernelCache) Close() error {
	var errs []error
	for _, m := range k.modules {
		errs = append(errs, m.Close())
	}
	return errors.Join(errs...)
}

// function returns a kernel of a family on a device.
func (k *KernelCache) function(d *hip.Device, f family, name string) (*hip.Function, error) {
	fn, err := k.modules[f].Function(d, name)
	if err != nil {
		return nil, fmt.Errorf("candle: kernel %s of %s: %w", name, k.modules[f].Name, err)
	}
	return fn, nil
}

// KernelNames lists every kernel symbol a module defines, sorted, as the
// source's instantiations name them (for checks of compiled code objects).
func KernelNames(module string) []string {
	var names []string
	add := func(format string, args ...any) { names = append(names, fmt.Sprintf(format, args...)) }
	floats := []DType{F32, F16, BF16, F64}
	ints := []DType{U8, U32, I64}
	idx := ints
	sizes := []string{"b1", "b2", "b4", "b8"}
	switch module {
	case "unary.hip":
		for op := range numUnary {
			for _, dt := range DTypes() {
				if op.takes(dt) {
					add("%s_%s", op, dt)
				}
			}
		}
	case "binary.hip":
		for op := range numBinary {
			for _, dt := range DTypes() {
				add("%s_%s", op, dt)
			}
		}
	case "cast.hip":
		for _, s := range DTypes() {
			for _, d := range DTypes() {
				add("cast_%s_%s", s, d)
			}
		}
	case "fill.hip":
		for _, s := range sizes {
			add("fill_%s", s)
		}
		for _, dt := range DTypes() {
			add("arange_%s", dt)
		}
		for _, dt := range floats {
			add("rand_uniform_%s", dt)
			add("rand_normal_%s", dt)
		}
	case "copy.hip":
		for _, s := range sizes {
			add("copy_%s", s)
			add("copy_rows_%s", s)
			add("transpose_%s", s)
		}
	case "where.hip":
		for _, i := range idx {
			for _, s := range sizes {
				add("where_%s_%s", i, s)
			}
		}
	case "index.hip":
		for _, i := range idx {
			for _, s := range sizes {
				add("take_%s_%s", i, s)
				add("take_rows_%s_%s", i, s)
				add("put_%s_%s", i, s)
				add("put_rows_%s_%s", i, s)
			}
			for _, dt := range DTypes() {
				add("put_add_%s_%s", i, dt)
			}
		}
	case "nn.hip":
		for _, dt := range []DType{F32, F16, BF16} {
			for _, k := range []string{"softmax", "softmax_full", "rms_norm", "layer_norm", "group_norm", "rope", "rope_cache", "silu_mul"} {
				add("%s_%s", k, dt)
			}
		}
		for _, dt := range floats {
			add("upsample_nearest_%s", dt)
			add("upsample_bilinear_%s", dt)
		}
	case "sort.hip":
		for _, dt := range DTypes() {
			add("argsort_%s", dt)
			add("topk_%s", dt)
		}
	case "sample.hip":
		add("sample_prev")
		for _, dt := range []DType{F32, F16, BF16} {
			add("sample_max_%s", dt)
			add("sample_hist_%s", dt)
			add("sample_draw_%s", dt)
		}
	case "quant.hip":
		for _, q := range quantTypes() {
			for _, dt := range []DType{F32, F16, BF16} {
				kinds := []quantKind{qDequant, qRows, qMatvec} // the float products, or the 8-bit ones
				if qmatvecI8(q, dt) {
					kinds = []quantKind{qDequant, qRows, qMatvec8, qMatvec8W}
					if q == GGMLQ6_K {
						kinds = append(kinds, qMatvec8S)
					}
				}
				for _, k := range kinds {
					add("%s", quantKernelName(k, q, dt))
				}
			}
		}
		for _, dt := range []DType{F16, BF16} {
			add("qx_%s", dt)
			add("qmatvec8k4_%s", dt)
			add("qmatvec8k4x2_%s", dt)
			add("qmatvec8k4q_%s", dt)
			add("qmatvec8k4qx2_%s", dt)
		}
	case "reduce.hip":
		for op := range numReduce {
			for _, dt := range DTypes() {
				add("%s_%s", op, dt)
			}
		}
	}
	sort.Strings(names)
	return names
}
