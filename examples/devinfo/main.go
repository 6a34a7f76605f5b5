// Command devinfo reports which HIP platform loaded (or why none did), the
// runtime and driver versions, and every GPU with its architecture, memory
// and key properties.
//
//	go run ./examples/devinfo [-platform amd|nvidia] [-v]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/hip"
)

func main() {
	platform := flag.String("platform", "", "HIP platform to load: amd or nvidia (default: $HIP_PLATFORM, else whichever loads)")
	verbose := flag.Bool("v", false, "on a machine with no GPU runtime, list every library path tried")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: devinfo [-platform amd|nvidia] [-v]\n\n"+
			"Reports the HIP platform, runtime and driver versions, and every GPU.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(os.Stdout, *platform, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "devinfo:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, platformName string, verbose bool) error {
	var opts []hip.LoadOption
	if platformName != "" {
		p, err := hip.ParsePlatform(platformName)
		if err != nil {
			return err
		}
		opts = append(opts, hip.WithPlatform(p))
	}
	if err := hip.Load(opts...); err != nil {
		// Reporting that nothing loads is this command's job. A machine
		// with no GPU runtime at all gets one line (the paths tried with
		// -v); a runtime that is there but fails gets the whole story.
		if errors.Is(err, hip.ErrLibraryNotFound) && platformName == "" && !verbose {
			fmt.Fprintln(w, "platform: none: neither ROCm's HIP runtime nor NVIDIA's CUDA runtime is installed, so programs run on the CPU (-v lists the paths tried)")
			return nil
		}
		fmt.Fprintln(w, "platform: none")
		fmt.Fprintln(w, err)
		return nil
	}
	defer hip.Unload()

	rt, err := hip.RuntimeVersion()
	if err != nil {
		return err
	}
	drv, err := hip.DriverVersion()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "platform: %s (runtime %s, driver %s)\n", hip.LoadedPlatform(), rt, drv)
	fmt.Fprintf(w, "loaded:   %s\n", strings.Join(hip.LibraryPaths(), ", "))

	devices, err := hip.Devices()
	if errors.Is(err, hip.ErrNoDevice) {
		fmt.Fprintln(w, "devices:  none: the runtime loaded, but this machine has no GPU it can use")
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "devices:  %d\n", len(devices))
	for _, d := range devices {
		if err := describe(w, d); err != nil {
			return fmt.Errorf("device %d: %w", d.Ordinal(), err)
		}
	}
	return nil
}

func describe(w io.Writer, d *hip.Device) error {
	p, err := d.Properties()
	if err != nil {
		return err
	}
	free, total, err := d.MemInfo()
	if err != nil {
		return err
	}
	bus, err := d.PCIBusID()
	if err != nil {
		bus = "unknown"
	}
	fmt.Fprintf(w, "\n[%d] %s\n", d.Ordinal(), p.Name)
	row := func(k, format string, args ...any) { fmt.Fprintf(w, "    %-22s %s\n", k, fmt.Sprintf(format, args...)) }
	row("arch", "%s (compute %d.%d)", p.ArchName, p.Major, p.Minor)
	row("memory", "%s total, %s free", humanize.IBytes(uint64(total)), humanize.IBytes(uint64(free)))
	row("compute units", "%d, %d threads each at most", p.MultiProcessorCount, p.MaxThreadsPerMultiProcessor)
	row("warp size", "%d", p.WarpSize)
	row("clock", "%d MHz (memory %d MHz, %d-bit bus)", p.ClockRateKHz/1000, p.MemoryClockRateKHz/1000, p.MemoryBusWidth)
	row("L2 cache", "%s", humanize.IBytes(uint64(p.L2CacheSize)))
	row("shared memory/block", "%s (%s opt-in)", humanize.IBytes(uint64(p.SharedMemPerBlock)), humanize.IBytes(uint64(p.SharedMemPerBlockOptin)))
	row("max threads/block", "%d, block %v, grid %v", p.MaxThreadsPerBlock, p.MaxThreadsDim, p.MaxGridSize)
	row("PCI", "%s", bus)
	return nil
}
