// Package miopen binds MIOpen, AMD's library of deep-learning primitives:
// convolutions with their Find (algorithm search), activations, softmax,
// pooling, batch normalization, local response normalization, element-wise
// tensor operations and multi-head attention. On the NVIDIA platform the
// same calls run on cuDNN 9 (its legacy API, and its graph API for
// convolutions) behind a C translation layer.
//
// A Handle is bound to a hip.Stream; operations take Tensors, device
// memory with a TensorDescriptor that says its type, dimensions and
// strides. Descriptors are validated when they are made and read-only
// afterwards:
//
//	x, _ := miopen.NewTensor4D(miopen.DataTypeHalf, 8, 320, 64, 64)
//	w, _ := miopen.NewTensor4D(miopen.DataTypeHalf, 320, 320, 3, 3)
//	conv, _ := miopen.NewConvolutionDescriptor(miopen.ConvolutionParams{Pad: []int{1, 1}})
//	dims, _ := conv.OutputShape(x, w) // [8 320 64 64]
//	y, _ := miopen.NewTensorDescriptor(miopen.DataTypeHalf, dims, nil)
//	...
//	err := h.ConvolutionForward(conv, miopen.Tensor{Desc: x, Data: xb}, miopen.Tensor{Desc: w, Data: wb}, miopen.Tensor{Desc: y, Data: yb})
//
// A convolution runs the fastest algorithm of a Find, which the handle runs
// once per problem and caches (FindConvolutionForward returns every
// algorithm with its time and workspace; on NVIDIA a graph-API plan's time
// is the median of three timings of four runs in a row, so that the
// host's time to queue a run stays out of it). On NVIDIA the Find is cuDNN's
// legacy Find, plus the execution plans of the first ten engine
// configurations that cuDNN's graph-API heuristics list (as PyTorch's
// cudnn.benchmark does: often several configurations of one engine, which
// differ in their knobs) and up to four of its fallback list, each checked
// against a legacy algorithm's result, and cuBLAS for a 1x1 convolution;
// the handle keeps the plans by problem and frees them when it closes. Any
// failure of the graph API leaves the legacy algorithms, with no error;
// ROCM_GO_CUDNN_GRAPH=0 leaves it out.
//
// On NVIDIA by default, and on AMD with ROCM_GO_FIND_CACHE=on (or a
// folder), the results of a Find also persist on disk, so that a new
// process, or a new handle, skips the Find of a problem seen before: in the
// find folder of $ROCM_GO_CACHE_DIR, else ~/.cache/rocm-go/find. They hold
// for one device model, architecture and library version (see
// FindCacheDir). Otherwise (ROCM_GO_FIND_CACHE=off) they are kept in
// memory only, per handle.
//
// On the NVIDIA platform: MIOpen's tensor, convolution, pooling, LRN and
// activation descriptors are rocm-go structs holding cuDNN descriptors;
// weights get a cuDNN filter descriptor at call time; a transposed
// convolution runs as cuDNN's data gradient; statuses are translated by
// name. What legacy cuDNN lacks runs on rocm-go's own HIP kernels, compiled
// with hiprtc on first use (or ahead of time by the rocm-go-kernels
// command, for images without NVRTC): the activation modes pass-through,
// soft ReLU, abs, power, leaky ReLU and tanh with alpha or beta other than
// 1, and the within-channel LRN. Multi-head attention has no legacy-cuDNN
// equivalent and returns ErrNotImplemented there.
//
// The library is loaded on first use (Load chooses options): libMIOpen.so.1
// on AMD, libcudnn.so.9 on NVIDIA, following package hip's platform.
package miopen
