package candle

import (
	"embed"
	"errors"
	"io/fs"
	"path"
	"strings"
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

// KernelModules are candle's kernel modules compiled through c (nil:
// hiprtc.DefaultCache): one per op family, unary.hip to quant.hip, each
// with every header of kernels/ (common.h) in memory, so that a change to
// any file of a module changes its cache entries. The rocm-go-kernels
// command compiles them ahead of time; a KernelCache on the same folder
// then finds every entry.
func KernelModules(c *hiprtc.Cache) []*hiprtc.Kernels {
	m := kernelModules(c)
	return m[:]
}

func kernelModules(c *hiprtc.Cache) (modules [numFamilies]*hiprtc.Kernels) {
	read := func(name string) string {
		b, err := kernelFiles.ReadFile(path.Join("kernels", name))
		if err != nil {
			panic("candle: the embedded kernels lack " + name)
		}
		return string(b)
	}
	files, err := fs.ReadDir(kernelFiles, "kernels")
	if err != nil {
		panic("candle: the embedded kernels: " + err.Error())
	}
	headers := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f.Name(), ".h") {
			headers[f.Name()] = read(f.Name())
		}
	}
	for f := range numFamilies {
		name := f.String() + ".hip"
		modules[f] = &hiprtc.Kernels{Name: name, Source: read(name), Options: hiprtc.Options{Std: "c++17", Headers: headers}, Cache: c}
	}
	return modules
}

// KernelCache compiles candle's kernels for the devices that run them: one
// module per op family (unary, binary, cast, fill, copy, where, index,
// reduce, nn for the fused ops of neural networks, sort, sample
// for drawing tokens from logits, and quant for GGML blocks), HIP C++ embedded in the package, compiled with hipRTC (NVRTC on
// NVIDIA) for the device's exact architecture on first use, loaded once
// per device, and kept on disk by a hiprtc.Cache (ROCM_GO_CACHE_DIR, else
// the user's cache folder) so that the next process starts warm. The
// rocm-go-kernels command compiles the modules (KernelModules) ahead of
// time for images that have no compiler.
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
	return &KernelCache{cache: c, modules: kernelModules(c)}
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

// Warm compiles (or reads from the cache) and loads every module on a
// device, so that the first ops run at full speed. On NVIDIA the modules
// compile at once (NVRTC compiles programs in parallel); on AMD one after
// another (hipRTC compiles one program at a time per process).
func (k *KernelCache) Warm(d *HIPDevice) error { return k.WarmEach(d, nil) }

// ModuleReady is what WarmEach reports of a module once it is loaded.
type ModuleReady struct {
	Name        string        // the module: "quant.hip", ...
	Took        time.Duration // since the warm-up began
	Done, Total int           // modules loaded so far, of all
}

// WarmEach is Warm, calling each (when not nil; one call at a time) as
// each module is loaded, so that a long first compile can show progress.
func (k *KernelCache) WarmEach(d *HIPDevice, each func(ModuleReady)) error {
	start := time.Now()
	var mu sync.Mutex
	done := 0
	load := func(m *hiprtc.Kernels) error {
		_, err := m.Module(d.dev)
		if err == nil && each != nil {
			mu.Lock() // before the clock: Took counts up with Done
			done++
			each(ModuleReady{Name: m.Name, Took: time.Since(start), Done: done, Total: len(k.modules)})
			mu.Unlock()
		}
		return err
	}
	if hip.LoadedPlatform() != hip.PlatformNVIDIA {
		for _, m := range k.modules {
			if err := load(m); err != nil {
				return pkg.Wrap("KernelCache.Warm", err)
			}
		}
		return nil
	}
	errs := make([]error, len(k.modules))
	var wg sync.WaitGroup
	for i, m := range k.modules {
		wg.Go(func() { errs[i] = load(m) })
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

// function returns a kernel on a device.
func (k *KernelCache) function(d *hip.Device, kn kernel) (*hip.Function, error) {
	if kn.name == "" {
		return nil, pkg.Errorf("launch", ErrDType, "no %s kernel for the operands' dtypes", kn.fam)
	}
	fn, err := k.modules[kn.fam].Function(d, kn.name)
	if err != nil {
		return nil, pkg.Wrapf("launch", err, "kernel %s of %s", kn.name, k.modules[kn.fam].Name)
	}
	return fn, nil
}

// kernel is a kernel of candle's modules: its family (the module) and its
// symbol name. The zero kernel is none: the table has no kernel for the
// operands' dtypes.
type kernel struct {
	fam  family
	name string
}

// kernelTable holds the kernels the ops launch, made once so that a launch
// builds no string. Its entries for dtypes (or element sizes) a kernel
// does not take are zero.
type kernelTable struct {
	unary  [numUnary][numDTypes]kernel
	binary [numBinary][numDTypes]kernel
	cast   [numDTypes][numDTypes]kernel
	reduce [numReduce][numDTypes]kernel
	// By element size (the kernels that only move bytes).
	copy, copyRows, transpose, fill [9]kernel
	arange, randUniform, randNormal [numDTypes]kernel
	// By the condition's or the indices' dtype, then element size.
	where, take, takeRows, put, putRows [numDTypes][9]kernel
	putAdd                              [numDTypes][numDTypes]kernel // by indices, values
	// The fused ops (nn.hip), by dtype.
	softmax, softmaxFull, rmsNorm, layerNorm, rope, siluMul [numDTypes]kernel
	groupNorm, groupStats, groupApply, ropeCache, geglu     [numDTypes]kernel
	argsort, topk                                           [numDTypes]kernel    // sort.hip
	sampleMax, sampleHist, sampleDraw, tokenMask            [numDTypes]kernel    // sample.hip
	samplePrev, sampleBias, sampleScale                     kernel               // sample.hip
	upsample                                                [2][numDTypes]kernel // nn.hip, [bilinear][dtype]
	// The quantized ops (quant.hip), by kind, GGML type id and dtype.
	quant [numQuantKinds][GGMLQ8_K + 1][numDTypes]kernel
	qx    [numDTypes]kernel
	k4    [2][2][numDTypes]kernel // qmatvec8k4 by x quantized in it, rows a warp less one
}

// kernelNames are the kernels the ops launch; launchable lists every one,
// in the order newKernelTable made them. A launch takes a kernel, and
// newKernelTable makes every kernel value of the package (a test checks
// that no other code does), so launchable is all that the ops can launch:
// the tier-1 tests check that each module's code object holds exactly
// launchable's kernels of its family.
var kernelNames, launchable = newKernelTable()

func newKernelTable() (k kernelTable, all []kernel) {
	add := func(f family, name string) kernel {
		kn := kernel{f, name}
		all = append(all, kn)
		return kn
	}
	ids := []DType{U8, U32, I64}     // the indices' and conditions' dtypes (DType.IsInt)
	fused := []DType{F32, F16, BF16} // the fused ops' dtypes (fuse), sampling's and GGML's x
	halves := []DType{F16, BF16}     // the 8-bit products' x
	sizes := []int{1, 2, 4, 8}       // element sizes
	for op := range numUnary {
		for _, dt := range DTypes() {
			if op.takes(dt) {
				k.unary[op][dt] = add(famUnary, unaryNames[op]+"_"+dtypeNames[dt])
			}
		}
	}
	for op := range numBinary {
		for _, dt := range DTypes() {
			k.binary[op][dt] = add(famBinary, binaryNames[op]+"_"+dtypeNames[dt])
		}
	}
	for _, from := range DTypes() {
		for _, to := range DTypes() {
			k.cast[from][to] = add(famCast, "cast_"+dtypeNames[from]+"_"+dtypeNames[to])
		}
	}
	for _, sz := range sizes {
		k.fill[sz] = add(famFill, "fill_"+sizeNames[sz])
	}
	for _, dt := range DTypes() {
		k.arange[dt] = add(famFill, "arange_"+dtypeNames[dt])
		if dt.IsFloat() {
			k.randUniform[dt] = add(famFill, "rand_uniform_"+dtypeNames[dt])
			k.randNormal[dt] = add(famFill, "rand_normal_"+dtypeNames[dt])
		}
	}
	for _, sz := range sizes {
		b := sizeNames[sz]
		k.copy[sz], k.copyRows[sz], k.transpose[sz] = add(famCopy, "copy_"+b), add(famCopy, "copy_rows_"+b), add(famCopy, "transpose_"+b)
	}
	for _, dt := range ids {
		for _, sz := range sizes {
			k.where[dt][sz] = add(famWhere, "where_"+dtypeNames[dt]+"_"+sizeNames[sz])
		}
	}
	for _, dt := range ids {
		d := dtypeNames[dt]
		for _, sz := range sizes {
			b := sizeNames[sz]
			k.take[dt][sz], k.takeRows[dt][sz] = add(famIndex, "take_"+d+"_"+b), add(famIndex, "take_rows_"+d+"_"+b)
			k.put[dt][sz], k.putRows[dt][sz] = add(famIndex, "put_"+d+"_"+b), add(famIndex, "put_rows_"+d+"_"+b)
		}
		for _, v := range DTypes() {
			k.putAdd[dt][v] = add(famIndex, "put_add_"+d+"_"+dtypeNames[v])
		}
	}
	for op := range numReduce {
		for _, dt := range DTypes() {
			k.reduce[op][dt] = add(famReduce, reduceNames[op]+"_"+dtypeNames[dt])
		}
	}
	for _, dt := range fused {
		d := dtypeNames[dt]
		k.softmax[dt], k.softmaxFull[dt] = add(famNN, "softmax_"+d), add(famNN, "softmax_full_"+d)
		k.rmsNorm[dt], k.layerNorm[dt], k.groupNorm[dt] = add(famNN, "rms_norm_"+d), add(famNN, "layer_norm_"+d), add(famNN, "group_norm_"+d)
		k.groupStats[dt], k.groupApply[dt] = add(famNN, "group_stats_"+d), add(famNN, "group_apply_"+d)
		k.rope[dt], k.ropeCache[dt], k.siluMul[dt] = add(famNN, "rope_"+d), add(famNN, "rope_cache_"+d), add(famNN, "silu_mul_"+d)
		k.geglu[dt] = add(famNN, "geglu_"+d)
	}
	for _, dt := range DTypes() {
		if dt.IsFloat() {
			k.upsample[0][dt], k.upsample[1][dt] = add(famNN, "upsample_nearest_"+dtypeNames[dt]), add(famNN, "upsample_bilinear_"+dtypeNames[dt])
		}
	}
	for _, dt := range DTypes() {
		k.argsort[dt], k.topk[dt] = add(famSort, "argsort_"+dtypeNames[dt]), add(famSort, "topk_"+dtypeNames[dt])
	}
	k.samplePrev, k.sampleBias, k.sampleScale = add(famSample, "sample_prev"), add(famSample, "sample_bias"), add(famSample, "sample_scale")
	for _, dt := range fused {
		d := dtypeNames[dt]
		k.sampleMax[dt], k.sampleHist[dt], k.sampleDraw[dt] = add(famSample, "sample_max_"+d), add(famSample, "sample_hist_"+d), add(famSample, "sample_draw_"+d)
		k.tokenMask[dt] = add(famSample, "token_mask_"+d)
	}
	for _, typ := range quantTypes() {
		for _, dt := range fused {
			// The float matrix-vector product, or the 8-bit ones
			// (qmatvecI8), whose third runs Q6_K's kernel of its own.
			kinds := []quantKind{qDequant, qRows, qMatvec}
			if qmatvecI8(typ, dt) {
				kinds = []quantKind{qDequant, qRows, qMatvec8, qMatvec8W}
				if typ == GGMLQ6_K {
					kinds = append(kinds, qMatvec8S)
				}
			}
			for _, kind := range kinds {
				k.quant[kind][typ][dt] = add(famQuant, quantKernelName(kind, typ, dt))
			}
		}
	}
	for _, dt := range halves {
		d := dtypeNames[dt]
		k.qx[dt] = add(famQuant, "qx_"+d)
		k.k4[0][0][dt], k.k4[0][1][dt] = add(famQuant, "qmatvec8k4_"+d), add(famQuant, "qmatvec8k4x2_"+d)
		k.k4[1][0][dt], k.k4[1][1][dt] = add(famQuant, "qmatvec8k4q_"+d), add(famQuant, "qmatvec8k4qx2_"+d)
	}
	return k, all
}
