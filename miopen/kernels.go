package miopen

import (
	_ "embed"
	"fmt"
	"sync"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
)

// KernelSource is the HIP C++ of rocm-go's own kernels: the activation
// modes and the within-channel LRN that legacy cuDNN lacks, run on the
// NVIDIA platform, and the power activation's gradient, run on both (MIOpen
// 6.4's leaves out dy). It compiles with hipRTC and with NVRTC.
//
//go:embed kernels.hip
var KernelSource string

// KernelNames lists the kernels of KernelSource, by their symbol names.
func KernelNames() []string {
	var out []string
	for _, k := range []string{"activation_fwd", "activation_bwd", "lrn_within_fwd", "lrn_within_bwd"} {
		for _, t := range kernelTypes {
			out = append(out, k+"_"+t)
		}
	}
	return out
}

var kernelTypes = []string{"f16", "bf16", "f32", "f64"}

// kernelSuffix is the kernel name suffix of a data type, "" for none.
func kernelSuffix(t DataType) string {
	switch t {
	case DataTypeHalf:
		return "f16"
	case DataTypeBFloat16:
		return "bf16"
	case DataTypeFloat:
		return "f32"
	case DataTypeDouble:
		return "f64"
	}
	return ""
}

// compiled holds the code object of each architecture, compiled once per
// process.
var compiled struct {
	mu    sync.Mutex
	code  map[string]*hiprtc.Code
	fails map[string]error
}

func compileKernels(arch string) (*hiprtc.Code, error) {
	compiled.mu.Lock()
	defer compiled.mu.Unlock()
	if c := compiled.code[arch]; c != nil {
		return c, nil
	}
	if err := compiled.fails[arch]; err != nil {
		return nil, err
	}
	c, err := hiprtc.Compile(KernelSource, hiprtc.Options{Arch: arch, Name: "miopen_kernels.hip", Std: "c++17"})
	if err != nil {
		if compiled.fails == nil {
			compiled.fails = map[string]error{}
		}
		err = fmt.Errorf("miopen: compiling rocm-go's kernels for %s: %w", arch, err)
		compiled.fails[arch] = err
		return nil, err
	}
	if compiled.code == nil {
		compiled.code = map[string]*hiprtc.Code{}
	}
	compiled.code[arch] = c
	return c, nil
}

// kernelSet is the kernels loaded on a handle's device.
type kernelSet struct {
	mod *hip.Module
	fns map[string]*hip.Function
}

func (k *kernelSet) close() error { return k.mod.Close() }

// kernelsLocked loads the kernels on the handle's device on first use.
func (h *Handle) kernelsLocked() (*kernelSet, error) {
	if h.kernels != nil {
		return h.kernels, nil
	}
	props, err := h.dev.Properties()
	if err != nil {
		return nil, err
	}
	code, err := compileKernels(props.ArchName)
	if err != nil {
		return nil, err
	}
	mod, err := h.dev.LoadModule(code.Image)
	if err != nil {
		return nil, fmt.Errorf("miopen: loading rocm-go's kernels: %w", err)
	}
	h.kernels = &kernelSet{mod: mod, fns: map[string]*hip.Function{}}
	return h.kernels, nil
}

func (k *kernelSet) function(name string) (*hip.Function, error) {
	if f := k.fns[name]; f != nil {
		return f, nil
	}
	f, err := k.mod.Function(name)
	if err != nil {
		return nil, err
	}
	k.fns[name] = f
	return f, nil
}

// kernelShape is the kernels' Shape: up to four tensors of the same
// dimensions, each with its strides. Its layout is the C++ struct's.
type kernelShape struct {
	N       int64
	Rank    int32
	_       int32
	Dims    [MaxDims]int64
	Strides [4][MaxDims]int64
}

func newKernelShape(ts ...*TensorDescriptor) kernelShape {
	var s kernelShape
	s.N = int64(ts[0].Elements())
	s.Rank = int32(len(ts[0].dims))
	for i, d := range ts[0].dims {
		s.Dims[i] = int64(d)
	}
	for t, d := range ts {
		for i, st := range d.strides {
			s.Strides[t][i] = int64(st)
		}
	}
	return s
}

// launchLocked runs kernel name_<type> of the handle's kernels over n
// elements on the handle's stream; args packs the arguments after Shape.
func (h *Handle) launchLocked(name string, dt DataType, shape kernelShape, args func(*hip.Args)) error {
	sfx := kernelSuffix(dt)
	if sfx == "" {
		return notImplemented(name, "rocm-go's kernels take half, bfloat16, float or double data, not %v", dt)
	}
	ks, err := h.kernelsLocked()
	if err != nil {
		return err
	}
	f, err := ks.function(name + "_" + sfx)
	if err != nil {
		return err
	}
	var a hip.Args
	hip.ArgValue(&a, shape)
	args(&a)
	const block = 256
	grid := min((shape.N+block-1)/block, 65535)
	return f.Launch(hip.LaunchConfig{Grid: hip.Dim3{X: uint32(max(grid, 1))}, Block: hip.Dim3{X: block}, Stream: h.stream}, &a)
}
