package candle_test

import (
	"fmt"

	"github.com/rocm-go/rocm/candle"
)

// A tensor on a device, two ops and the result back on the host. "auto"
// would pick the GPU when there is one; the output below is the CPU's, and
// a GPU's is the same.
func Example() {
	dev, err := candle.NewDevice("cpu")
	if err != nil {
		fmt.Println(err)
		return
	}
	x, err := candle.FromSlice(dev, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Close()
	y, err := x.Mul(x)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer y.Close()
	rows, err := y.Sum(false, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rows.Close()
	v, err := candle.ToSlice[float32](rows)
	fmt.Println(rows, v, err)
	// Output: candle.Tensor([2] f32 on cpu) [14 77] <nil>
}

// Views share their storage: a transpose costs nothing until an op reads
// it, and ops read strided views without a copy first. A view holds the
// storage too, so it is closed like any tensor.
func ExampleTensor_Transpose() {
	dev := candle.CPU()
	x, _ := candle.Arange(dev, candle.F32, 0, 6, 1)
	defer x.Close()
	m, _ := x.Reshape(2, 3)
	defer m.Close()
	t, _ := m.Transpose(0, 1)
	defer t.Close()
	fmt.Println(t, t.Shape(), t.IsContiguous())
	c, _ := t.Contiguous()
	defer c.Close()
	v, _ := candle.ToSlice[float32](c)
	fmt.Println(v)
	// Output:
	// candle.Tensor([3 2] f32 on cpu, strided) [3 2] false
	// [0 3 1 4 2 5]
}

// Errors say what went wrong before anything runs, and match the kinds
// with errors.Is.
func ExampleTensor_Add_error() {
	dev := candle.CPU()
	a, _ := candle.Zeros(dev, candle.F32, 2, 3)
	b, _ := candle.Zeros(dev, candle.F32, 4)
	defer a.Close()
	defer b.Close()
	_, err := a.Add(b)
	fmt.Println(err)
	// Output: candle: Tensor.Add: shapes [2 3] and [4] do not broadcast: dim -1 is 3 against 4
}

// A scope closes every tensor an op made inside it, except those kept:
// the shape of a forward pass that must not leak device memory.
func ExampleScope() {
	dev := candle.CPU()
	w, _ := candle.Full(dev, candle.F32, 0.5, 4)
	defer w.Close()
	in, _ := candle.Arange(dev, candle.F32, 1, 5, 1)
	defer in.Close()

	s := candle.NewScope()
	x, _ := s.Adopt(in)
	h, _ := x.Mul(w) // in the scope: made from a scoped tensor
	h, _ = h.Silu()
	out, _ := h.Sum(false)
	s.Keep(out)
	fmt.Println("tensors in the scope:", s.Len()) // x and two intermediates
	s.Close()

	v, _ := candle.ToSlice[float32](out)
	fmt.Printf("%.4f\n", v)
	out.Close()
	// Output:
	// tensors in the scope: 3
	// [4.0302]
}

// The kernel cache compiles candle's kernels once per architecture and
// keeps them on disk; rocm-go-kernels fills it ahead of time.
func ExampleKernelCache() {
	kc := candle.DefaultKernelCache()
	fmt.Println(kc.Modules())
	// Output:
	// [unary.hip binary.hip cast.hip fill.hip copy.hip where.hip index.hip reduce.hip nn.hip sort.hip sample.hip quant.hip]
}

// NewDevice names a device; "auto" is the GPU when HIP loads and finds
// one, else the CPU, so that one program runs anywhere.
func ExampleNewDevice() {
	for _, name := range []string{"cpu", "hip:-1", "tpu"} {
		dev, err := candle.NewDevice(name)
		fmt.Println(dev, err)
	}
	// Output:
	// cpu <nil>
	// <nil> candle: NewDevice: "hip:-1": the ordinal must be a number ≥ 0
	// <nil> candle: NewDevice: "tpu" is not a device: want cpu, hip:N or auto
}

// On a GPU: the device is opened once per ordinal and shared; Warm loads
// every kernel module up front (from the disk cache after the first run),
// so that the first ops run at full speed.
func ExampleHIP() {
	gpu, err := candle.HIP(0)
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	if err := gpu.Warm(); err != nil {
		fmt.Println(err)
		return
	}
	x, _ := candle.RandNormal(gpu, candle.BF16, 0, 1, 4096, 4096)
	defer x.Close()
	y, _ := x.Gelu()
	defer y.Close()
	fmt.Println(y, gpu.MemoryStats().InUse, "bytes in use")
}

// A product of a batch with one matrix read transposed: no copy is made on
// a GPU (the BLAS transpose flag), and the batch broadcasts.
func ExampleTensor_Matmul() {
	dev := candle.CPU()
	x, _ := candle.FromSlice(dev, []float32{1, 2, 3, 4, 5, 6, 7, 8}, 2, 2, 2)
	defer x.Close()
	w, _ := candle.FromSlice(dev, []float32{1, 0, 1, 1}, 2, 2)
	defer w.Close()
	wt, _ := w.T()
	defer wt.Close()
	y, err := x.Matmul(wt) // (2, 2, 2) × (2, 2)ᵀ
	if err != nil {
		fmt.Println(err)
		return
	}
	defer y.Close()
	v, _ := candle.ToSlice[float32](y)
	fmt.Println(y.Shape(), v)
	// Output: [2 2 2] [1 3 3 7 5 11 7 15]
}

// Softmax over the last dim, without overflow at any magnitude.
func ExampleTensor_SoftmaxLastDim() {
	x, _ := candle.FromSlice(candle.CPU(), []float32{0, 0, 1000, 1000}, 2, 2)
	defer x.Close()
	p, err := x.SoftmaxLastDim()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	v, _ := candle.ToSlice[float32](p)
	fmt.Println(v)
	// Output: [0.5 0.5 0.5 0.5]
}
