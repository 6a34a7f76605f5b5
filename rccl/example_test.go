package rccl_test

import (
	"errors"
	"fmt"
	"log"
	"sync"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/rccl"
)

// One process, every GPU: a communicator over them with CommInitAll, and
// an all-reduce driven by one goroutine inside a group. (It needs GPUs,
// so it has no Output to check.)
func Example() {
	devs, err := hip.Devices()
	if err != nil {
		log.Fatal(err)
	}
	comms, err := rccl.CommInitAll(devs...)
	if err != nil {
		log.Fatal(err)
	}
	defer rccl.CloseAll(comms...)

	const n = 1024
	bufs := make([]*hip.Buffer, len(devs))
	streams := make([]*hip.Stream, len(devs))
	for i, d := range devs {
		streams[i], _ = d.NewStream()
		defer streams[i].Close()
		bufs[i], _ = d.Malloc(4 * n)
		defer bufs[i].Close()
		data := make([]float32, n)
		for j := range data {
			data[j] = float32(i + 1)
		}
		_ = bufs[i].CopyFromHost(hip.AsBytes(data))
	}
	// In place: every GPU's buffer becomes the sum over the GPUs.
	err = rccl.Group(func() error {
		for i, c := range comms {
			if err := c.AllReduce(bufs[i], bufs[i], n, rccl.DataTypeFloat32, rccl.OpSum, streams[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	out := make([]float32, n)
	_ = streams[0].Synchronize()
	_ = bufs[0].CopyToHost(hip.AsBytes(out))
	fmt.Println(out[0]) // 1 + 2 + ... + len(devs)
}

// One goroutine per GPU, as processes would be: rank 0 makes the unique
// ID, whose bytes reach the others (here through a variable; between
// processes through a socket or a file), and each rank joins with
// CommInitRank, then runs its collectives outside any group.
func ExampleCommInitRank() {
	devs, err := hip.Devices()
	if err != nil {
		log.Fatal(err)
	}
	id, err := rccl.GetUniqueID()
	if err != nil {
		log.Fatal(err)
	}
	wire := id.Bytes()
	errs := make([]error, len(devs))
	var wg sync.WaitGroup
	for rank, dev := range devs {
		wg.Go(func() {
			id, err := rccl.UniqueIDFromBytes(wire)
			if err != nil {
				errs[rank] = err
				return
			}
			c, err := rccl.CommInitRank(dev, len(devs), id, rank) // returns once every rank joined
			if err != nil {
				errs[rank] = err
				return
			}
			defer c.Close()
			buf, _ := dev.Malloc(4 * 256)
			defer buf.Close()
			// rank 0's 256 floats reach every rank.
			errs[rank] = c.Broadcast(buf, buf, 256, rccl.DataTypeFloat32, 0, nil)
			if errs[rank] == nil {
				errs[rank] = dev.Synchronize()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		log.Fatal(err)
	}
}

// The data type of a Go element type, and its size.
func ExampleDataTypeOf() {
	t := rccl.DataTypeOf[hip.BFloat16]()
	fmt.Println(t, t.Size())
	fmt.Println(rccl.DataTypeOf[float32](), rccl.OpAvg)
	// Output:
	// ncclBfloat16 2
	// ncclFloat32 ncclAvg
}
