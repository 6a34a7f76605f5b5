// Command devinfo reports which HIP platform loaded (or why none did), the
// runtime and driver versions, and every GPU with its architecture, memory
// and key properties.
//
//	go run ./examples/devinfo [-platform amd|nvidia]
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/hip"
)

func main() {
	platform := flag.String("platform", "", "HIP platform to load: amd or nvidia (default: $HIP_PLATFORM, else whichever loads)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: devinfo [-platform amd|nvidia]\n\n"+
			"Reports the HIP platform, runtime and driver versions, and every GPU.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*platform); err != nil {
		fmt.Fprintln(os.Stderr, "devinfo:", err)
		os.Exit(1)
	}
}

func run(platformName string) error {
	var opts []hip.LoadOption
	if platformName != "" {
		p, err := hip.ParsePlatform(platformName)
		if err != nil {
			return err
		}
		opts = append(opts, hip.WithPlatform(p))
	}
	if err := hip.Load(opts...); err != nil {
		fmt.Println("platform: none")
		fmt.Println(err)
		return nil // reporting that nothing loads is this command's job
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
	fmt.Printf("platform: %s (runtime %s, driver %s)\n", hip.LoadedPlatform(), rt, drv)
	fmt.Printf("loaded:   %s\n", strings.Join(hip.LibraryPaths(), ", "))

	devices, err := hip.Devices()
	if errors.Is(err, hip.ErrNoDevice) {
		fmt.Println("devices:  none: the runtime loaded, but this machine has no GPU it can use")
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Printf("devices:  %d\n", len(devices))
	for _, d := range devices {
		if err := describe(d); err != nil {
			return fmt.Errorf("device %d: %w", d.Ordinal(), err)
		}
	}
	return nil
}

func describe(d *hip.Device) error {
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
	fmt.Printf("\n[%d] %s\n", d.Ordinal(), p.Name)
	row := func(k, format string, args ...any) { fmt.Printf("    %-22s %s\n", k, fmt.Sprintf(format, args...)) }
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
