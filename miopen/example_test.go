package miopen_test

import (
	"errors"
	"fmt"
	"log"
	"math/rand/v2"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/miopen"
)

// The output size of a convolution is known before any library is loaded.
func ExampleConvolutionParams_OutputDims() {
	p := miopen.ConvolutionParams{Pad: []int{1, 1}, Stride: []int{2, 2}}
	out, err := p.OutputDims([]int{8, 320, 64, 64}, []int{640, 320, 3, 3})
	fmt.Println(out, err)

	up := miopen.ConvolutionParams{Pad: []int{1, 1}, Stride: []int{2, 2}, Transposed: true, OutputPad: []int{1, 1}}
	out, err = up.OutputDims([]int{8, 640, 32, 32}, []int{640, 320, 3, 3})
	fmt.Println(out, err)

	_, err = miopen.ConvolutionParams{Groups: 3}.OutputDims([]int{8, 320, 64, 64}, []int{320, 320, 3, 3})
	fmt.Println(errors.Is(err, miopen.ErrBadParm))
	// Output:
	// [8 640 32 32] <nil>
	// [8 320 64 64] <nil>
	// true
}

func ExamplePoolingParams_OutputDims() {
	p := miopen.PoolingParams{Mode: miopen.PoolingModeMax, Window: []int{3, 3}, Pad: []int{1, 1}, Stride: []int{2, 2}}
	out, _ := p.OutputDims([]int{1, 64, 112, 112})
	fmt.Println(out)
	// Output: [1 64 56 56]
}

// Errors match the sentinel of their status.
func ExampleError() {
	err := error(&miopen.Error{Op: "miopenConvolutionForward", Status: miopen.StatusNotImplemented})
	fmt.Println(errors.Is(err, miopen.ErrNotImplemented), errors.Is(err, miopen.ErrBadParm))
	fmt.Println(err)
	// Output:
	// true false
	// miopen: miopenConvolutionForward: miopenStatusNotImplemented (Use of unimplemented feature.)
}

// A half-precision 3x3 convolution, channels last, on the first GPU: the
// first call runs the Find, later ones the fastest algorithm it found.
func ExampleHandle_ConvolutionForward() {
	dev, err := hip.GetDevice(0)
	if err != nil {
		log.Fatal(err)
	}
	stream, err := dev.NewStream()
	if err != nil {
		log.Fatal(err)
	}
	defer stream.Close()
	h, err := miopen.NewHandle(stream)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()

	tensor := func(dims ...int) miopen.Tensor {
		d, err := miopen.NewTensorLayout(miopen.DataTypeHalf, miopen.LayoutNHWC, dims)
		if err != nil {
			log.Fatal(err)
		}
		b, err := dev.Malloc(d.Bytes())
		if err != nil {
			log.Fatal(err)
		}
		data := make([]hip.Half, d.Elements())
		for i := range data {
			data[i] = hip.HalfFromFloat32(rand.Float32() - 0.5)
		}
		if err := b.CopyFromHost(hip.AsBytes(data)); err != nil {
			log.Fatal(err)
		}
		return miopen.Tensor{Desc: d, Data: b}
	}
	x, w, y := tensor(8, 320, 64, 64), tensor(320, 320, 3, 3), tensor(8, 320, 64, 64)
	conv, err := miopen.NewConvolutionDescriptor(miopen.ConvolutionParams{Pad: []int{1, 1}})
	if err != nil {
		log.Fatal(err)
	}
	defer conv.Close()
	perfs, err := h.FindConvolutionForward(conv, x, w, y)
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range perfs {
		fmt.Println(p)
	}
	if err := h.ConvolutionForward(conv, x, w, y); err != nil {
		log.Fatal(err)
	}
	if err := stream.Synchronize(); err != nil {
		log.Fatal(err)
	}
}

// Activations take their parameters in the descriptor.
func ExampleNewActivationDescriptor() {
	leaky, err := miopen.NewActivationDescriptor(miopen.ActivationLeakyReLU, 0.01, 0, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer leaky.Close()
	alpha, _, _ := leaky.Params()
	fmt.Println(leaky.Mode(), alpha) // leaky ReLU 0.01
}
