package hip_test

import (
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"syscall"

	"github.com/rocm-go/rocm/hip"
)

// Errors from HIP calls and from arguments refused before any call match
// the same sentinels.
func Example_errors() {
	var buf *hip.Buffer // nil: refused before any C call
	err := buf.Memset(0)
	fmt.Println(errors.Is(err, hip.ErrInvalidValue))
	fmt.Println(err)

	var e *hip.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, uint32(e.Status))
	}
	fmt.Println(hip.StatusOutOfMemory.Description())
	// Output:
	// true
	// hip: Buffer.Memset: hipErrorInvalidValue (One or more of the parameters passed to the API call is NULL or not in an acceptable range.): nil buffer
	// hipErrorInvalidValue 1
	// out of memory range.
}

// Kernel arguments are packed at their natural alignment, as the kernel's
// parameter list lays them out.
func ExampleArgs() {
	type params struct { // a struct passed by value: float, int, double
		Scale float32
		N     int32
		Bias  float64
	}
	var a hip.Args
	a.Ptr(0x7f0000001000).Int8(1).Float64(2.5)
	hip.ArgValue(&a, params{Scale: 0.5, N: 1024, Bias: -1})
	fmt.Println(a.Len(), "bytes")
	// Output: 40 bytes
}

func ExampleParsePlatform() {
	p, err := hip.ParsePlatform("nvidia")
	fmt.Println(p, err)
	_, err = hip.ParsePlatform("cuda")
	fmt.Println(err)
	// Output:
	// nvidia <nil>
	// hip: HIP_PLATFORM="cuda": want amd or nvidia (or unset, to pick the one that loads)
}

// Copying data to a GPU and back. Without a GPU, GetDevice returns an error
// matching hip.ErrNoDevice.
func ExampleDevice_Malloc() {
	dev, err := hip.GetDevice(0)
	if err != nil {
		log.Fatal(err)
	}
	host := make([]float32, 1<<20)
	for i := range host {
		host[i] = rand.Float32()
	}
	buf, err := dev.Malloc(len(host) * 4)
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	if err := buf.CopyFromHost(hip.AsBytes(host)); err != nil {
		log.Fatal(err)
	}
	back := make([]float32, len(host))
	if err := buf.CopyToHost(hip.AsBytes(back)); err != nil {
		log.Fatal(err)
	}
	fmt.Println(back[42] == host[42])
}

// Asynchronous copies go through pinned host memory and run in order on a
// stream.
func ExampleBuffer_CopyFromHostAsync() {
	dev, err := hip.GetDevice(0)
	if err != nil {
		log.Fatal(err)
	}
	stream, err := dev.NewStream(hip.WithStreamFlags(hip.StreamNonBlocking))
	if err != nil {
		log.Fatal(err)
	}
	defer stream.Close()
	pinned, err := dev.MallocHost(64<<20, hip.HostMallocDefault)
	if err != nil {
		log.Fatal(err)
	}
	defer pinned.Close()
	buf, err := stream.MallocAsync(pinned.Size())
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	copy(pinned.Bytes(), "hello")
	if err := buf.CopyFromHostAsync(pinned, stream); err != nil {
		log.Fatal(err)
	}
	if err := buf.CopyToHostAsync(pinned, stream); err != nil {
		log.Fatal(err)
	}
	if err := stream.Synchronize(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(pinned.Bytes()[:5]))
}

// Launching a kernel from a code object (see package hiprtc for compiling
// one at run time).
func ExampleFunction_Launch() {
	dev, err := hip.GetDevice(0)
	if err != nil {
		log.Fatal(err)
	}
	mod, err := dev.LoadModuleFile("scale.co")
	if err != nil {
		log.Fatal(err)
	}
	defer mod.Close()
	scale, err := mod.Function("scale")
	if err != nil {
		log.Fatal(err)
	}
	const n = 1 << 20
	x, err := dev.Malloc(n * 4)
	if err != nil {
		log.Fatal(err)
	}
	defer x.Close()
	var args hip.Args
	args.Ptr(x.Ptr()).Float32(2).Int32(n)
	cfg := hip.LaunchConfig{Grid: hip.Dim3{X: (n + 255) / 256}, Block: hip.Dim3{X: 256}}
	if err := scale.Launch(cfg, &args); err != nil {
		log.Fatal(err)
	}
	if err := dev.Synchronize(); err != nil {
		log.Fatal(err)
	}
}

// A file's bytes go from the page cache to the device with no staging
// copy: its read-only mapping is registered, then copied from by DMA.
func ExampleDevice_RegisterHost() {
	dev, err := hip.GetDevice(0)
	if err != nil {
		log.Fatal(err)
	}
	f, err := os.Open("weights.bin")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		log.Fatal(err)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		log.Fatal(err)
	}
	defer syscall.Munmap(m) // after the registration's Close
	reg, err := dev.RegisterHost(m, hip.HostRegisterReadOnly)
	if err != nil {
		log.Fatal(err) // a loader copies through MallocHost's memory instead
	}
	defer reg.Close()
	buf, err := dev.Malloc(len(m))
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	if err := buf.CopyFromHostAsync(reg, nil); err != nil {
		log.Fatal(err)
	}
	if err := dev.Synchronize(); err != nil {
		log.Fatal(err)
	}
}
