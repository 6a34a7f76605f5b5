// Package candle is tensors on AMD GPUs (and on NVIDIA GPUs through HIP's
// NVIDIA platform), the Go counterpart of Hugging Face candle's GPU
// backend: the Device, Storage, Tensor and KernelCache that inference
// workers build on, composed from packages hip and hiprtc.
//
// # Devices
//
// A Device is the CPU (pure Go: the reference every GPU op is tested
// against, and the fallback that runs anywhere) or a GPU (HIP). Devices
// are made once and shared:
//
//	dev, err := candle.NewDevice("auto") // hip:0 when there is a GPU, else cpu
//
// A HIP device queues every op on its own non-blocking stream; the host
// waits only when it reads data back (ToSlice, Storage.Read) or calls
// Synchronize.
//
// # Tensors
//
// A Tensor is a Storage (a typed buffer on a device) seen through a Layout
// (shape, strides in elements, offset). Views share the storage: Reshape,
// Transpose, Permute, Narrow, Squeeze, Unsqueeze and BroadcastAs copy
// nothing. Ops read strided views as they are and write fresh contiguous
// tensors:
//
//	x, err := candle.FromSlice(dev, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
//	y, err := x.T()              // a view, 3×2
//	z, err := y.Exp()            // a new contiguous tensor
//	s, err := z.Sum(false, -1)   // [3]
//	v, err := candle.ToSlice[float32](s)
//
// Products and the fused ops of networks are ops like any other:
//
//	y, err := x.Matmul(w)              // (…, m, k) × (…, k, n), rocBLAS on a GPU
//	p, err := logits.SoftmaxLastDim()  // also LogSoftmaxLastDim
//	h, err := x.RMSNorm(gain, 1e-6)    // also LayerNorm, GroupNorm
//	q, err := q.RoPE(cos, sin)         // also RoPEInterleaved, RoPETHD
//	g, err := gate.SiLUMul(up)         // silu(gate)·up
//	a, err := x.GroupNormSiLU(32, w, b, 1e-5) // silu(group_norm(x)), one pass
//	f, err := hg.GEGLU()               // hg (…, 2n): hg[…, :n]·gelu_erf(hg[…, n:])
//	v, i, err := logits.TopK(40)       // also ArgsortLastDim, SortLastDim
//
// Matmul reads transposed and broadcast operands in place (BLAS transpose
// flags, leading dimensions, batch strides of 0); the fused ops read
// their inputs once and write their output once.
//
// Images are NCHW or NHWC (Format): convolutions (Conv1d, Conv2d and their
// transposes, with strides, padding, dilation and groups) and pooling run
// on MIOpen (cuDNN on NVIDIA) through the device's handle, each problem's
// Find once; upsampling is candle's own kernels, with PyTorch's semantics:
//
//	y, err := x.Conv2d(w, bias, candle.Conv2dParams{Padding: [2]int{1, 1}, Format: candle.NHWC})
//	p, err := y.AvgPool2d(candle.Pool2dParams{Kernel: [2]int{2, 2}, Format: candle.NHWC})
//	u, err := p.UpsampleNearest2d(64, 64, candle.NHWC) // also UpsampleBilinear2d
//
// Every op returns (*Tensor, error). Shapes, dtypes, devices and closed
// tensors are checked before anything is queued; errors are *Error values
// that errors.Is matches against ErrShape, ErrDType, ErrDevice, ErrIndex,
// ErrArgument, ErrOutOfMemory, ErrClosed and the other kinds below. *Error
// is package errs' one error type, which every package above the bindings
// returns (flashattn, the tokenizer, nn, gguf, the models, generate), so
// these kinds match their errors too: errors.Is(err, candle.ErrOutOfMemory)
// holds wherever the memory ran out.
//
// # Memory
//
// Close a tensor when done: its storage goes back to the device when the
// last tensor viewing it closes. A Scope closes a forward pass's
// intermediates together, except what it keeps. On a HIP device, storages
// come from a stream-ordered pool (hipMallocAsync on the device's stream,
// blocks reused by size class, no allocation per op once warm); on
// out-of-memory the pool gives back what it keeps and tries once more,
// then fails with ErrOutOfMemory naming the sizes. Garbage collection
// frees forgotten storages only as a backstop.
//
// # Graphs
//
// HIPDevice.Capture records a step's work (ops, rocBLAS and flashattn
// calls) into a Graph that Replay queues again with one launch, without
// the host work of each op: a decode step of a language model, say. The
// step reads its changing inputs from fixed storages written before each
// replay; the graph's activations come from private memory that it keeps
// until Close (MemoryStats.Graphs), so a replay allocates nothing.
//
// # Several GPUs
//
// A Group is a set of devices with one rank each, and the collectives on
// their tensors: AllReduce (sum, prod, max, min, avg), AllGather and
// ReduceScatter along a dim, and Broadcast, each given one tensor per
// rank, of one shape and dtype, each on its rank's device. NewHIPGroup
// makes one over GPUs, with RCCL (NCCL on NVIDIA) queuing on each
// device's stream; one goroutine drives every GPU, or each goroutine its
// Member:
//
//	g, err := candle.NewHIPGroup(gpu0, gpu1)
//	sums, err := g.AllReduce([]*candle.Tensor{x0, x1}, candle.ReduceSum)
//	parts, err := g.ReduceScatter([]*candle.Tensor{y0, y1}, -1, candle.ReduceSum)
//
// NewGroup takes any Communicator: an in-process one runs the collectives
// on the CPU in tests.
//
// # Kernels
//
// The GPU ops are HIP C++ kernels embedded in the package, one module per
// op family, compiled with hipRTC (NVRTC on NVIDIA) for the device's exact
// architecture on first use and kept on disk by the KernelCache
// (ROCM_GO_CACHE_DIR, else the user's cache folder). Kernels take their
// operands' layout by value and never assume a warp size. Each waits for
// the kernel before it first thing and is launched early
// (hip.LaunchConfig.EarlyLaunch): on NVIDIA sm_90 and later a kernel's
// launch overlaps the end of the one before. The rocm-go-kernels command
// compiles the whole set ahead of time for images without a compiler.
//
// # Quantized tensors
//
// A QTensor keeps GGML's blocks (GGUF files' Q4_0 … Q8_0, Q2_K … Q8_K) as
// they are, on its device: x.QMatmul(w) is a linear layer, x · wᵀ, the
// weight dequantized on the fly (a matrix-vector kernel for up to four
// rows of x, on 8-bit dot products for F16 and BF16 x as llama.cpp's;
// BLAS over dequantized slices of at most 16 MiB for more rows);
// x.QMatmulWith(w, opts) runs the layer's RMSNorm, a gated MLP's gate and
// a residual add inside those kernels; w.Rows(ids, dt) an embedding
// lookup; Dequantize expands it. Package candle/gguf reads the files.
//
// # Values
//
// The CPU device computes float ops in float64 and rounds once to the
// dtype; GPUs compute 16- and 32-bit floats in float32 and f64 in double,
// so results agree to a few units in the last place. Conversions follow
// ToDType's rules on every device; random numbers come from a
// counter-based generator (Philox4x32-10): the same seed and sequence of
// random ops give the same numbers on every device.
package candle
