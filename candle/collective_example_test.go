package candle_test

import (
	"fmt"
	"log"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/hip"
)

// Tensor parallelism's two collectives on every GPU of the machine: the
// sum of the GPUs' partial results, and each GPU's slice of a sum. (It
// needs GPUs, so it has no Output to check.)
func ExampleNewHIPGroup() {
	n, err := hip.DeviceCount()
	if err != nil {
		log.Fatal(err)
	}
	devs := make([]*candle.HIPDevice, n)
	xs := make([]*candle.Tensor, n)
	for i := range devs {
		if devs[i], err = candle.HIP(i); err != nil {
			log.Fatal(err)
		}
		// Each GPU's partial result, [4, 2n].
		data := make([]float32, 4*2*n)
		for j := range data {
			data[j] = float32(i + 1)
		}
		if xs[i], err = candle.FromSlice(devs[i], data, 4, 2*n); err != nil {
			log.Fatal(err)
		}
		defer xs[i].Close()
	}
	g, err := candle.NewHIPGroup(devs...)
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()

	sums, err := g.AllReduce(xs, candle.ReduceSum) // [4, 2n] on every GPU
	if err != nil {
		log.Fatal(err)
	}
	parts, err := g.ReduceScatter(xs, -1, candle.ReduceSum) // [4, 2] on each GPU: its columns
	if err != nil {
		log.Fatal(err)
	}
	v, err := candle.ToSlice[float32](sums[0])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v[0], parts[n-1].Shape()) // n(n+1)/2 [4 2]
	for i := range n {
		sums[i].Close()
		parts[i].Close()
	}
}
