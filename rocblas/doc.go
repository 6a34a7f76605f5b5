// Package rocblas is typed BLAS on a HIP stream: rocBLAS on AMD GPUs, and
// on NVIDIA GPUs cuBLAS behind a C translation of every bound function.
//
// A Handle is created once for a hip.Stream and is safe for concurrent use
// (its calls are serialized; use one Handle per stream for parallel work).
// Operands are device memory described by Matrix (column-major, with a
// leading dimension), Vector (with an increment), and their strided-batch
// forms StridedMatrix and StridedVector:
//
//	h, err := rocblas.NewHandle(stream)
//	defer h.Close()
//	a := rocblas.Mat[float32](bufA, m, k)
//	b := rocblas.Mat[float32](bufB, k, n)
//	c := rocblas.Mat[float32](bufC, m, n)
//	err = rocblas.Gemm(h, rocblas.OperationNone, rocblas.OperationNone, 1, a, b, 0, c)
//
// Each operation is one generic Go function over the element type
// (float32, float64, complex64, complex128; also hip.Half for Gemm) that
// calls rocBLAS's s, d, c, z or h function. Batched forms take slices of
// operands (the handle copies their device addresses to device memory it
// owns, in stream order) or strided operands and a batch size. GemmEx and
// GemmStridedBatchedEx take mixed precision: f16, bf16 and f32 with float32
// accumulation, f64, and int8 with int32.
//
// Every argument is checked in Go before any C call: dimensions, leading
// dimensions against transposes, increments, the elements each buffer must
// hold, buffers closed or on another device, element types, nil or closed
// handles. A refused call returns an *Error with a rocBLAS status and a
// detail naming the argument; a failed rocBLAS call returns an *Error with
// the library's status. errors.Is matches both against ErrInvalidSize and
// the other sentinels.
//
// Work is queued on the handle's stream and runs asynchronously, except the
// reductions (Dot, Nrm2, Asum, Iamax, ...) that return host values, which
// wait for their result; their ...To forms write the result to device
// memory instead.
//
// The library is loaded with dlopen on first use (or by Load):
// librocblas.so.5 or .4 on AMD, libcublas.so.13 or .12 on NVIDIA, following
// the platform package hip loaded.
package rocblas
