package miopen

import (
	_ "embed"
	"fmt"

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

// kernels are rocm-go's kernels, compiled through the kernel cache and
// loaded once per device for every handle.
var kernels = &hiprtc.Kernels{Name: "miopen_kernels.hip", Source: KernelSource, Options: hiprtc.Options{Std: "c++17"}}

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
	f, err := kernels.Function(h.dev, name+"_"+sfx)
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
