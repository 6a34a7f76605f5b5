package miopen

import (
	_ "embed"
	"fmt"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
)

// kernelSource is the HIP C++ of rocm-go's own kernels: the activation
// modes and the within-channel LRN that legacy cuDNN lacks, run on the
// NVIDIA platform, and the power activation's gradient, run on both (MIOpen
// 6.4's leaves out dy). It compiles with hipRTC and with NVRTC.
//
//go:embed kernels.hip
var kernelSource string

// kernelKind is a kernel of kernelSource, made for each of kernelTypes.
type kernelKind uint8

const (
	activationFwd kernelKind = iota
	activationBwd
	lrnWithinFwd
	lrnWithinBwd
	numKernelKinds
)

var kernelKindNames = [numKernelKinds]string{"activation_fwd", "activation_bwd", "lrn_within_fwd", "lrn_within_bwd"}

// kernelTypes are the data types the kernels take, and the suffix of
// their names.
var kernelTypes = [...]struct {
	t      DataType
	suffix string
}{{DataTypeHalf, "f16"}, {DataTypeBFloat16, "bf16"}, {DataTypeFloat, "f32"}, {DataTypeDouble, "f64"}}

// kernelName is the kernel of kind for data of type t, the name a launch
// looks up: "activation_fwd_f32"; "" for a type the kernels do not take.
func kernelName(kind kernelKind, t DataType) string {
	for _, kt := range kernelTypes {
		if kt.t == t {
			return kernelKindNames[kind] + "_" + kt.suffix
		}
	}
	return ""
}

// kernelNames lists every kernel a launch can look up: kernelName of each
// kind and type. The code object of kernelSource holds exactly these (the
// tier-1 tests check it).
func kernelNames() []string {
	var out []string
	for kind := range numKernelKinds {
		for _, kt := range kernelTypes {
			out = append(out, kernelName(kind, kt.t))
		}
	}
	return out
}

// kernels are rocm-go's kernels, compiled through the kernel cache and
// loaded once per device for every handle.
var kernels = newModule(nil)

// KernelModules are the package's kernel modules (one: kernels.hip)
// compiled through c (nil: hiprtc.DefaultCache), for compiling them ahead
// of time (the rocm-go-kernels command) into the cache folder an image
// ships: the entries are the ones the handles read at run time from a
// cache in the same folder.
func KernelModules(c *hiprtc.Cache) []*hiprtc.Kernels { return []*hiprtc.Kernels{newModule(c)} }

func newModule(c *hiprtc.Cache) *hiprtc.Kernels {
	return &hiprtc.Kernels{Name: "miopen_kernels.hip", Source: kernelSource, Options: hiprtc.Options{Std: "c++17"}, Cache: c}
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

// launchLocked runs the kernel of kind for data of type dt over n elements
// on the handle's stream; args packs the arguments after Shape.
func (h *Handle) launchLocked(kind kernelKind, dt DataType, shape kernelShape, args func(*hip.Args)) error {
	name := kernelName(kind, dt)
	if name == "" {
		return notImplemented(kernelKindNames[kind], "rocm-go's kernels take half, bfloat16, float or double data, not %v", dt)
	}
	f, err := kernels.Function(h.dev, name)
	if err != nil {
		return fmt.Errorf("miopen: rocm-go's kernels: %w", err)
	}
	var a hip.Args
	hip.ArgValue(&a, shape)
	args(&a)
	const block = 256
	grid := min((shape.N+block-1)/block, 65535)
	return f.Launch(hip.LaunchConfig{Grid: hip.Dim3{X: uint32(max(grid, 1))}, Block: hip.Dim3{X: block}, Stream: h.stream}, &a)
}
