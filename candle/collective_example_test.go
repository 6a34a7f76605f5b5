package candle_test

import (
	"fmt"
	"log"
	"sync"

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

// Two CPU ranks, one goroutine each, as tensor-parallel code runs on two
// GPUs: each holds half of a row-parallel product's input, and the
// all-reduce of their partial products is the whole product.
func ExampleNewCPUGroup() {
	g, err := candle.NewCPUGroup(2)
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	x := []float32{1, 2, 3, 4} // the input, split in halves over the ranks
	w := []float32{1, 1, 1, 1} // the weight's column, split the same way
	sums := make([]float32, 2)
	var wg sync.WaitGroup
	for r, dev := range g.Devices() {
		wg.Go(func() {
			m, _ := g.Member(r)
			xs, _ := candle.FromSlice(dev, x[2*r:2*r+2], 1, 2)
			ws, _ := candle.FromSlice(dev, w[2*r:2*r+2], 2, 1)
			part, _ := xs.Matmul(ws) // (1, 1): this rank's partial sum
			sum, err := m.AllReduce(part, candle.ReduceSum)
			if err != nil {
				log.Fatal(err)
			}
			v, _ := candle.ToSlice[float32](sum)
			sums[r] = v[0]
		})
	}
	wg.Wait()
	fmt.Println(g.Devices(), sums)
	// Output: [cpu/rank0 cpu/rank1] [10 10]
}
