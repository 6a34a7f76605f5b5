// Command gemm multiplies random matrices on the GPU with package rocblas
// (rocBLAS on AMD, cuBLAS on NVIDIA), checks the result against the CPU and
// prints the throughput.
//
//	go run ./examples/gemm [-m 4096] [-n 4096] [-k 4096] [-dtype bf16] [-transa N] [-transb T] [-batch 1] [-iters 20]
//
// With -batch above 1 the product is a strided batch. The check compares
// entries of the first product (all of them for small ones, 1024 sampled
// ones otherwise) with a float64 computation on the CPU.
package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/rocblas"
)

// config is the command line.
type config struct {
	m, n, k, batch, iters int
	dtype                 string
	ta, tb                rocblas.Operation
}

// dtypes are the -dtype values: the element types and how they multiply.
var dtypes = map[string]string{
	"f32":  "float32, sgemm (no TF32)",
	"f64":  "float64, dgemm",
	"c64":  "complex64, cgemm",
	"c128": "complex128, zgemm",
	"f16":  "half in and out, float32 accumulation (gemm_ex)",
	"bf16": "bfloat16 in and out, float32 accumulation (gemm_ex)",
	"i8":   "int8 in, int32 out and accumulation (gemm_ex)",
}

func main() {
	var c config
	var ta, tb string
	flag.IntVar(&c.m, "m", 4096, "rows of op(A) and of C")
	flag.IntVar(&c.n, "n", 4096, "columns of op(B) and of C")
	flag.IntVar(&c.k, "k", 4096, "columns of op(A), rows of op(B)")
	flag.StringVar(&c.dtype, "dtype", "bf16", "element type: f32, f64, c64, c128, f16, bf16 or i8")
	flag.StringVar(&ta, "transa", "N", "op(A): N (A), T (Aᵀ) or C (Aᴴ)")
	flag.StringVar(&tb, "transb", "N", "op(B): N, T or C")
	flag.IntVar(&c.batch, "batch", 1, "products in a strided batch")
	flag.IntVar(&c.iters, "iters", 20, "timed calls (after one warm-up)")
	flag.Usage = func() {
		out := flag.CommandLine.Output()
		fmt.Fprintf(out, "usage: gemm [-m M] [-n N] [-k K] [-dtype T] [-transa N|T|C] [-transb N|T|C] [-batch B] [-iters I]\n\n"+
			"Computes C = op(A)·op(B) (column-major, C m×n) on the first GPU with rocBLAS\n"+
			"(cuBLAS on NVIDIA), checks it against the CPU and prints TFLOP/s.\n\ndtypes:\n")
		for _, d := range []string{"f32", "f64", "c64", "c128", "f16", "bf16", "i8"} {
			fmt.Fprintf(out, "  %-5s %s\n", d, dtypes[d])
		}
		fmt.Fprintln(out)
		flag.PrintDefaults()
	}
	flag.Parse()
	var err error
	if c.ta, err = parseOp(ta); err == nil {
		c.tb, err = parseOp(tb)
	}
	if err == nil {
		err = run(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gemm:", err)
		os.Exit(1)
	}
}

func parseOp(s string) (rocblas.Operation, error) {
	switch strings.ToUpper(s) {
	case "N":
		return rocblas.OperationNone, nil
	case "T":
		return rocblas.OperationTranspose, nil
	case "C":
		return rocblas.OperationConjugateTranspose, nil
	}
	return 0, fmt.Errorf("transpose %q: want N, T or C", s)
}

func run(c config) error {
	if _, ok := dtypes[c.dtype]; !ok {
		return fmt.Errorf("-dtype %q: want f32, f64, c64, c128, f16, bf16 or i8", c.dtype)
	}
	if c.m < 1 || c.n < 1 || c.k < 1 || c.batch < 1 || c.iters < 1 {
		return errors.New("-m, -n, -k, -batch and -iters must be positive")
	}
	if err := hip.LoadError(); err != nil {
		return errors.New("no GPU: neither ROCm's HIP runtime nor CUDA's was found (go run ./examples/devinfo lists the paths tried)")
	}
	dev, err := hip.GetDevice(0)
	if err != nil {
		return fmt.Errorf("no GPU: %s", firstLine(err))
	}
	props, err := dev.Properties()
	if err != nil {
		return err
	}
	s, err := dev.NewStream(hip.WithStreamFlags(hip.StreamNonBlocking))
	if err != nil {
		return err
	}
	defer s.Close()
	h, err := rocblas.NewHandle(s)
	if err != nil {
		return err
	}
	defer h.Close()
	ver, _ := rocblas.Version()
	fmt.Printf("device:  %s (%s, %s platform), BLAS %s (%s)\n", props.Name, props.ArchName, hip.LoadedPlatform(), ver, rocblas.LibraryPaths()[0])
	fmt.Printf("product: C (%d×%d) = %s·%s, k = %d, batch %d, %s\n", c.m, c.n, opName(c.ta, "A"), opName(c.tb, "B"), c.k, c.batch, dtypes[c.dtype])

	switch c.dtype {
	case "f32":
		return product(c, dev, h, gemm[float32], 1e-4, re[float32], re[float32])
	case "f64":
		return product(c, dev, h, gemm[float64], 1e-12, re[float64], re[float64])
	case "c64":
		return product(c, dev, h, gemm[complex64], 1e-4, cx[complex64], cx[complex64])
	case "c128":
		return product(c, dev, h, gemm[complex128], 1e-12, cx[complex128], cx[complex128])
	case "f16":
		return product(c, dev, h, gemmEx[hip.Half, hip.Half], 2e-3, half, half)
	case "bf16":
		return product(c, dev, h, gemmEx[hip.BFloat16, hip.BFloat16], 1e-2, bfloat, bfloat)
	}
	return product(c, dev, h, gemmEx[int8, int32], 0, re[int8], re[int32])
}

// The exact value of an element, for the check on the CPU.
func re[T float32 | float64 | int8 | int32](v T) complex128 { return complex(float64(v), 0) }
func cx[T complex64 | complex128](v T) complex128           { return complex128(v) }
func half(v hip.Half) complex128                            { return complex(float64(v.Float32()), 0) }
func bfloat(v hip.BFloat16) complex128                      { return complex(float64(v.Float32()), 0) }
func exact[T any](s []T, value func(T) complex128) []complex128 {
	out := make([]complex128, len(s))
	for i, v := range s {
		out[i] = value(v)
	}
	return out
}

// call queues C = op(A)·op(B) for a batch of products.
type call[A, C rocblas.Numeric] func(h *rocblas.Handle, c config, a, b rocblas.StridedMatrix[A], out rocblas.StridedMatrix[C]) error

func gemm[T rocblas.Elem](h *rocblas.Handle, c config, a, b rocblas.StridedMatrix[T], out rocblas.StridedMatrix[T]) error {
	if c.batch == 1 {
		return rocblas.Gemm(h, c.ta, c.tb, 1, a.Matrix, b.Matrix, 0, out.Matrix)
	}
	return rocblas.GemmStridedBatched(h, c.ta, c.tb, 1, a, b, 0, out, c.batch)
}

func gemmEx[A rocblas.ExIn, C rocblas.ExOut](h *rocblas.Handle, c config, a, b rocblas.StridedMatrix[A], out rocblas.StridedMatrix[C]) error {
	if c.batch == 1 {
		return rocblas.GemmEx(h, c.ta, c.tb, 1, a.Matrix, b.Matrix, 0, out.Matrix, out.Matrix)
	}
	return rocblas.GemmStridedBatchedEx(h, c.ta, c.tb, 1, a, b, 0, out, out, c.batch)
}

// product uploads random operands, runs and times the product and checks
// the first one of the batch against the CPU.
func product[A, C rocblas.Numeric](c config, dev *hip.Device, h *rocblas.Handle, f call[A, C], tol float64,
	valueA func(A) complex128, valueC func(C) complex128) error {
	rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
	ar, ac := c.m, c.k
	if c.ta != rocblas.OperationNone {
		ar, ac = ac, ar
	}
	br, bc := c.k, c.n
	if c.tb != rocblas.OperationNone {
		br, bc = bc, br
	}
	aHost, bHost := randoms[A](rng, ar*ac*c.batch), randoms[A](rng, br*bc*c.batch)
	a, err := upload(dev, aHost)
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := upload(dev, bHost)
	if err != nil {
		return err
	}
	defer b.Close()
	out, err := dev.Malloc(c.m * c.n * c.batch * int(sizeOf[C]()))
	if err != nil {
		return err
	}
	defer out.Close()
	// NaN: every element must be written. The memset goes on the handle's
	// stream, which does not wait for the null stream's work (non-blocking).
	if err := out.MemsetAsync(0xff, h.Stream()); err != nil {
		return err
	}
	sa := rocblas.Strided(rocblas.Mat[A](a, ar, ac))
	sb := rocblas.Strided(rocblas.Mat[A](b, br, bc))
	sc := rocblas.Strided(rocblas.Mat[C](out, c.m, c.n))
	if err := f(h, c, sa, sb, sc); err != nil {
		return err
	}
	if err := h.Stream().Synchronize(); err != nil {
		return err
	}
	got := make([]C, c.m*c.n)
	if err := out.CopyToHost(hip.AsBytes(got)); err != nil {
		return err
	}
	rel, checked := check(c, exact(aHost, valueA), exact(bHost, valueA), exact(got, valueC), ar, br, rng)
	verdict := "ok"
	if !(rel <= tol) {
		verdict = "FAILED"
	}
	fmt.Printf("check:   %d entries of the first product, relative error %.2e (tolerance %.0e): %s\n", checked, rel, tol, verdict)

	start, err := dev.NewEvent(hip.EventDefault)
	if err != nil {
		return err
	}
	defer start.Close()
	end, err := dev.NewEvent(hip.EventDefault)
	if err != nil {
		return err
	}
	defer end.Close()
	s := h.Stream()
	if err := start.Record(s); err != nil {
		return err
	}
	for range c.iters {
		if err := f(h, c, sa, sb, sc); err != nil {
			return err
		}
	}
	if err := end.Record(s); err != nil {
		return err
	}
	if err := end.Synchronize(); err != nil {
		return err
	}
	d, err := hip.ElapsedTime(start, end)
	if err != nil {
		return err
	}
	per := d / time.Duration(c.iters)
	flop := 2 * float64(c.m) * float64(c.n) * float64(c.k) * float64(c.batch)
	if strings.HasPrefix(c.dtype, "c") {
		flop *= 4 // a complex multiply-add is four real ones
	}
	fmt.Printf("time:    %v per call (%d calls between two events, after a warm-up)\n", per, c.iters)
	fmt.Printf("rate:    %.2f TFLOP/s\n", flop/per.Seconds()/1e12)
	if verdict != "ok" {
		return fmt.Errorf("the result differs from the CPU's")
	}
	return nil
}

// check compares entries (i, j) of the first product with a float64 sum on
// the CPU: every entry when there are at most 65536, else 1024 random ones.
func check(c config, a, b, got []complex128, lda, ldb int, rng *rand.Rand) (rel float64, n int) {
	at := func(t rocblas.Operation, x []complex128, ld, i, j int) complex128 {
		switch t {
		case rocblas.OperationTranspose:
			return x[j+i*ld]
		case rocblas.OperationConjugateTranspose:
			return cmplx.Conj(x[j+i*ld])
		}
		return x[i+j*ld]
	}
	var num, den float64
	entry := func(i, j int) {
		var want complex128
		for l := 0; l < c.k; l++ {
			want += at(c.ta, a, lda, i, l) * at(c.tb, b, ldb, l, j)
		}
		d := got[i+j*c.m] - want
		num += real(d)*real(d) + imag(d)*imag(d)
		den += real(want)*real(want) + imag(want)*imag(want)
		n++
	}
	if c.m*c.n <= 1<<16 {
		for j := 0; j < c.n; j++ {
			for i := 0; i < c.m; i++ {
				entry(i, j)
			}
		}
	} else {
		for range 1024 {
			entry(rng.IntN(c.m), rng.IntN(c.n))
		}
	}
	if den == 0 {
		den = 1
	}
	return math.Sqrt(num / den), n
}

func upload[T rocblas.Numeric](dev *hip.Device, host []T) (*hip.Buffer, error) {
	b, err := dev.Malloc(len(host) * int(sizeOf[T]()))
	if err != nil {
		return nil, err
	}
	if err := b.CopyFromHost(hip.AsBytes(host)); err != nil {
		return nil, errors.Join(err, b.Close())
	}
	return b, nil
}

func sizeOf[T any]() uintptr {
	var zero T
	switch any(zero).(type) {
	case int8:
		return 1
	case hip.Half, hip.BFloat16:
		return 2
	case float32, int32:
		return 4
	case float64, complex64:
		return 8
	}
	return 16
}

// randoms returns n random values in [-1, 1) (never 0), whole numbers in
// [-8, 8] for int8, as T.
func randoms[T rocblas.Numeric](rng *rand.Rand, n int) []T {
	out := make([]T, n)
	switch x := any(out).(type) {
	case []float32:
		for i := range x {
			x[i] = float32(value(rng))
		}
	case []float64:
		for i := range x {
			x[i] = value(rng)
		}
	case []complex64:
		for i := range x {
			x[i] = complex(float32(value(rng)), float32(value(rng)))
		}
	case []complex128:
		for i := range x {
			x[i] = complex(value(rng), value(rng))
		}
	case []hip.Half:
		for i := range x {
			x[i] = hip.HalfFromFloat32(float32(value(rng)))
		}
	case []hip.BFloat16:
		for i := range x {
			x[i] = hip.BFloat16FromFloat32(float32(value(rng)))
		}
	case []int8:
		for i := range x {
			x[i] = int8(rng.IntN(16) - 8)
			if x[i] >= 0 {
				x[i]++
			}
		}
	}
	return out
}

func value(rng *rand.Rand) float64 {
	v := 0.05 + 0.95*rng.Float64()
	if rng.IntN(2) == 0 {
		return -v
	}
	return v
}

func opName(t rocblas.Operation, m string) string {
	switch t {
	case rocblas.OperationTranspose:
		return m + "ᵀ"
	case rocblas.OperationConjugateTranspose:
		return m + "ᴴ"
	}
	return m
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
