// Command vecadd is rocm-go's hello world: it compiles a kernel with hipRTC
// for the GPU it finds (NVRTC on the NVIDIA platform), adds two vectors of
// random numbers on it, checks every element and reports the architecture,
// the compile time and the bandwidth.
//
//	go run ./examples/vecadd [-n elements] [-iters k] [-platform amd|nvidia]
package main

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
)

const source = `
#include <hip/hip_runtime.h>
extern "C" __global__ void vecadd(const float* a, const float* b, float* c, size_t n) {
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		c[i] = a[i] + b[i];
}
`

func main() {
	n := flag.Int("n", 1<<24, "number of float32 elements per vector")
	iters := flag.Int("iters", 20, "timed launches (after one warm-up)")
	platform := flag.String("platform", "", "HIP platform: amd or nvidia (default: $HIP_PLATFORM, else whichever loads)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: vecadd [-n elements] [-iters k] [-platform amd|nvidia]\n\n"+
			"Compiles a vector add with hipRTC for the first GPU, runs it on random data,\n"+
			"checks every element and prints the arch, the compile time and the bandwidth.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*n, *iters, *platform); err != nil {
		fmt.Fprintln(os.Stderr, "vecadd:", err)
		os.Exit(1)
	}
}

func run(n, iters int, platformName string) error {
	if n <= 0 || iters <= 0 {
		return fmt.Errorf("-n and -iters must be positive")
	}
	var opts []hip.LoadOption
	if platformName != "" {
		p, err := hip.ParsePlatform(platformName)
		if err != nil {
			return err
		}
		opts = append(opts, hip.WithPlatform(p))
	}
	if err := hip.Load(opts...); err != nil {
		var np *hip.NoPlatformError
		if errors.As(err, &np) {
			return errors.New("no GPU: neither ROCm's HIP runtime nor CUDA's was found (go run ./examples/devinfo lists the paths tried)")
		}
		return fmt.Errorf("no GPU: %s", firstLine(err))
	}
	defer hip.Unload()
	dev, err := hip.GetDevice(0)
	if err != nil {
		return fmt.Errorf("no GPU: %s", firstLine(err))
	}
	props, err := dev.Properties()
	if err != nil {
		return err
	}
	fmt.Printf("device:  %s (%s, %s platform)\n", props.Name, props.ArchName, hip.LoadedPlatform())

	start := time.Now()
	code, err := hiprtc.Compile(source, hiprtc.Options{Arch: props.ArchName, Name: "vecadd.hip"})
	if err != nil {
		return err
	}
	fmt.Printf("compile: %v for %s (%s code object)\n", time.Since(start).Round(time.Microsecond), code.Arch, humanize.IBytes(uint64(len(code.Image))))
	mod, err := dev.LoadModule(code.Image)
	if err != nil {
		return err
	}
	defer mod.Close()
	kernel, err := mod.Function("vecadd")
	if err != nil {
		return err
	}

	a, b := make([]float32, n), make([]float32, n)
	for i := range a {
		a[i], b[i] = rand.Float32(), rand.Float32()
	}
	bytes := n * 4
	var bufs [3]*hip.Buffer
	for i := range bufs {
		if bufs[i], err = dev.Malloc(bytes); err != nil {
			return err
		}
		defer bufs[i].Close()
	}
	if err := bufs[0].CopyFromHost(hip.AsBytes(a)); err != nil {
		return err
	}
	if err := bufs[1].CopyFromHost(hip.AsBytes(b)); err != nil {
		return err
	}
	if err := bufs[2].Memset(0xFF); err != nil { // NaN: every element must be written
		return err
	}

	stream, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer stream.Close()
	blocks := min((n+255)/256, props.MultiProcessorCount*32)
	cfg := hip.LaunchConfig{Grid: hip.Dim3{X: uint32(blocks)}, Block: hip.Dim3{X: 256}, Stream: stream}
	var args hip.Args
	args.Ptr(bufs[0].Ptr()).Ptr(bufs[1].Ptr()).Ptr(bufs[2].Ptr()).Uint64(uint64(n))
	if err := kernel.Launch(cfg, &args); err != nil { // warm-up
		return err
	}
	begin, err := dev.NewEvent(hip.EventDefault)
	if err != nil {
		return err
	}
	defer begin.Close()
	end, err := dev.NewEvent(hip.EventDefault)
	if err != nil {
		return err
	}
	defer end.Close()
	if err := begin.Record(stream); err != nil {
		return err
	}
	for range iters {
		if err := kernel.Launch(cfg, &args); err != nil {
			return err
		}
	}
	if err := end.Record(stream); err != nil {
		return err
	}
	if err := stream.Synchronize(); err != nil {
		return err
	}
	elapsed, err := hip.ElapsedTime(begin, end)
	if err != nil {
		return err
	}

	c := make([]float32, n)
	if err := bufs[2].CopyToHost(hip.AsBytes(c)); err != nil {
		return err
	}
	for i := range c {
		if c[i] != a[i]+b[i] {
			return fmt.Errorf("element %d: %v + %v gave %v", i, a[i], b[i], c[i])
		}
	}
	per := elapsed / time.Duration(iters)
	fmt.Printf("checked: all %d elements\n", n)
	fmt.Printf("kernel:  %v per launch, %.1f GB/s (%s read and written)\n", per.Round(time.Microsecond/10),
		float64(3*bytes)/per.Seconds()/1e9, humanize.IBytes(uint64(3*bytes)))
	return nil
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
