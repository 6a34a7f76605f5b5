package rocblas_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/rocblas"
)

// A product of two matrices on the GPU: a handle for a stream, operands in
// device memory, the result read back. (It needs a GPU, so it has no
// Output to check.)
func Example() {
	dev, err := hip.GetDevice(0)
	if err != nil {
		log.Fatal(err)
	}
	stream, err := dev.NewStream()
	if err != nil {
		log.Fatal(err)
	}
	defer stream.Close()
	h, err := rocblas.NewHandle(stream)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()

	// Column-major: A is 2×3, B is 3×2.
	a := []float32{1, 4, 2, 5, 3, 6}
	b := []float32{1, 0, 1, 0, 1, 1}
	bufA, _ := dev.Malloc(4 * len(a))
	bufB, _ := dev.Malloc(4 * len(b))
	bufC, _ := dev.Malloc(4 * 4)
	defer bufA.Close()
	defer bufB.Close()
	defer bufC.Close()
	_ = bufA.CopyFromHost(hip.AsBytes(a))
	_ = bufB.CopyFromHost(hip.AsBytes(b))

	err = rocblas.Gemm(h, rocblas.OperationNone, rocblas.OperationNone, 1,
		rocblas.Mat[float32](bufA, 2, 3), rocblas.Mat[float32](bufB, 3, 2), 0, rocblas.Mat[float32](bufC, 2, 2))
	if err != nil {
		log.Fatal(err)
	}
	c := make([]float32, 4)
	if err := bufC.CopyToHost(hip.AsBytes(c)); err != nil { // waits for the device
		log.Fatal(err)
	}
	fmt.Println(c) // [4 10 5 11]
}

// Mixed precision: bf16 operands, float32 accumulation, bf16 result in
// place (D is C). The batched form takes strided operands and a count.
func ExampleGemmStridedBatchedEx() {
	dev, err := hip.GetDevice(0)
	if err != nil {
		log.Fatal(err)
	}
	stream, _ := dev.NewStream()
	defer stream.Close()
	h, err := rocblas.NewHandle(stream)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	const n, batch = 128, 32
	q, _ := dev.Malloc(2 * n * n * batch)
	k, _ := dev.Malloc(2 * n * n * batch)
	s, _ := dev.Malloc(2 * n * n * batch)
	defer q.Close()
	defer k.Close()
	defer s.Close()
	sq := rocblas.Strided(rocblas.Mat[hip.BFloat16](q, n, n))
	sk := rocblas.Strided(rocblas.Mat[hip.BFloat16](k, n, n))
	ss := rocblas.Strided(rocblas.Mat[hip.BFloat16](s, n, n))
	// S_i = Q_i · K_iᵀ for each of the 32 entries.
	if err := rocblas.GemmStridedBatchedEx(h, rocblas.OperationNone, rocblas.OperationTranspose, 1, sq, sk, 0, ss, ss, batch); err != nil {
		log.Fatal(err)
	}
}

// Reductions return host values; their ...To forms leave the result in
// device memory instead, without waiting.
func ExampleDot() {
	dev, err := hip.GetDevice(0)
	if err != nil {
		log.Fatal(err)
	}
	stream, _ := dev.NewStream()
	defer stream.Close()
	h, err := rocblas.NewHandle(stream)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	buf, _ := dev.Malloc(8 * 3)
	defer buf.Close()
	_ = buf.CopyFromHost(hip.AsBytes([]float64{1, 2, 3}))
	x := rocblas.Vec[float64](buf, 3)
	d, err := rocblas.Dot(h, x, x)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d) // 14
}

// Every argument is checked in Go before any C call, and a refused call
// says which argument is wrong. This one has no handle at all.
func ExampleError() {
	var h *rocblas.Handle
	err := rocblas.Gemm[float32](h, rocblas.OperationNone, rocblas.OperationNone, 1,
		rocblas.Matrix[float32]{}, rocblas.Matrix[float32]{}, 0, rocblas.Matrix[float32]{})
	fmt.Println(err)
	fmt.Println(errors.Is(err, rocblas.ErrInvalidHandle))
	var e *rocblas.Error
	if errors.As(err, &e) {
		fmt.Println(e.Op, e.Status)
	}
	// Output:
	// rocblas: Gemm: rocblas_status_invalid_handle (Handle not initialized, invalid or null): nil handle, or one not made by rocblas.NewHandle
	// true
	// Gemm rocblas_status_invalid_handle
}

// Statuses carry rocBLAS's names and descriptions without loading the
// library; StatusString asks the library itself.
func ExampleStatus() {
	s := rocblas.StatusInvalidSize
	fmt.Println(s, "-", s.Description())
	// Output:
	// rocblas_status_invalid_size - Invalid size argument
}

// Strided packs a batch of matrices one after another: the stride is the
// leading dimension times the columns.
func ExampleStrided() {
	m := rocblas.Matrix[float32]{Rows: 7, Cols: 5, Ld: 8}
	s := rocblas.Strided(m)
	fmt.Println(s.Stride)
	// Output:
	// 40
}
