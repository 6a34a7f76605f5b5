package candle_test

import (
	"fmt"

	"github.com/rocm-go/rocm/candle"
)

// A 3x3 convolution with padding 1 and a bias, then a 2x2 max pooling and
// a nearest-neighbour upsampling back to the input's size. On a GPU the
// convolution and the pooling are MIOpen's (cuDNN's), the first call of a
// shape running the library's Find.
func ExampleTensor_Conv2d() {
	dev := candle.CPU()
	x, _ := candle.FromSlice(dev, []float32{
		1, 2, 3, 4,
		5, 6, 7, 8,
		9, 10, 11, 12,
		13, 14, 15, 16,
	}, 1, 1, 4, 4) // (N, C, H, W)
	defer x.Close()
	w, _ := candle.FromSlice(dev, []float32{0, 0, 0, 0, 1, 0, 0, 0, -1}, 1, 1, 3, 3) // x[i,j] - x[i+1,j+1]
	defer w.Close()
	b, _ := candle.FromSlice(dev, []float32{100})
	defer b.Close()
	y, err := x.Conv2d(w, b, candle.Conv2dParams{Padding: [2]int{1, 1}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer y.Close()
	p, _ := y.MaxPool2d(candle.Pool2dParams{Kernel: [2]int{2, 2}})
	defer p.Close()
	u, _ := p.UpsampleNearest2d(4, 4, candle.NCHW)
	defer u.Close()
	for _, t := range []*candle.Tensor{y, p, u} {
		v, _ := candle.ToSlice[float32](t)
		fmt.Println(t.Shape(), v)
	}
	// Output:
	// [1 1 4 4] [95 95 95 104 95 95 95 108 95 95 95 112 113 114 115 116]
	// [1 1 2 2] [95 108 114 116]
	// [1 1 4 4] [95 95 108 108 95 95 108 108 114 114 116 116 114 114 116 116]
}
