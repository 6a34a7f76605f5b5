package candle_test

import (
	"fmt"

	"github.com/rocm-go/rocm/candle"
)

// Quantize a linear layer's weight to Q8_0 and apply it: x · wᵀ with the
// weight dequantized on the fly.
func ExampleTensor_QMatmul() {
	dev := candle.CPU()
	vals := make([]float32, 3*32)
	for i := range vals {
		vals[i] = float32(i%3) - 1 // rows of -1, 0, 1, ...
	}
	w, err := candle.FromSlice(dev, vals, 3, 32)
	if err != nil {
		panic(err)
	}
	q, err := candle.Quantize(w, candle.GGMLQ8_0)
	if err != nil {
		panic(err)
	}
	defer q.Close()
	x, err := candle.Ones(dev, candle.F32, 1, 32)
	if err != nil {
		panic(err)
	}
	y, err := x.QMatmul(q)
	if err != nil {
		panic(err)
	}
	out, err := candle.ToSlice[float32](y)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s, %d bytes: %v %.3f\n", q.Type(), q.Bytes(), y.Shape(), out)
	// Output: Q8_0, 102 bytes: [1 3] [-1.000 0.000 1.000]
}

// A transformer block's projection with its norm and its residual
// connection: y = RMSNorm(x)·wᵀ + r, in the product's kernels on a GPU (for
// decode's few rows), as three ops here.
func ExampleTensor_QMatmulWith() {
	dev := candle.CPU()
	w, err := candle.Ones(dev, candle.F32, 3, 32)
	if err != nil {
		panic(err)
	}
	q, err := candle.Quantize(w, candle.GGMLQ8_0)
	if err != nil {
		panic(err)
	}
	defer q.Close()
	x, err := candle.Full(dev, candle.F32, 2, 1, 32) // RMS 2: the norm makes it ones
	if err != nil {
		panic(err)
	}
	gain, err := candle.Ones(dev, candle.F32, 32)
	if err != nil {
		panic(err)
	}
	res, err := candle.FromSlice(dev, []float32{10, 20, 30}, 1, 3)
	if err != nil {
		panic(err)
	}
	y, err := x.QMatmulWith(q, candle.QMatmulOptions{Norm: gain, Residual: res})
	if err != nil {
		panic(err)
	}
	out, err := candle.ToSlice[float32](y)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%.2f\n", out)
	// Output: [42.00 52.00 62.00]
}
