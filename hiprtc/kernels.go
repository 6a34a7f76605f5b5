package hiprtc

import (
	"errors"
	"fmt"
	"sync"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/bind"
)

// Kernels is one kernel source compiled, through a Cache, for the
// architecture of each device it runs on, and loaded there once: the module
// store of a package's own kernels (package miopen's, candle's families).
// Lookups after the first take a read lock only; goroutines that need the
// module of a device at once share one compile and one load.
//
// Set the fields before the first use; Close unloads every module.
type Kernels struct {
	// Name names the source in messages and compiles: "unary.hip".
	Name string
	// Source is the HIP C++ source.
	Source string
	// Options are the compile's options; Arch is set per device and Name
	// defaults to the Kernels' Name.
	Options Options
	// Cache is where code is kept; nil means DefaultCache.
	Cache *Cache
	// Target, when set, maps a device's arch to the target the source
	// compiles for (NVIDIA's "sm_90" to "sm_90a", whose arch-specific
	// instructions run only there); nil compiles for the arch itself.
	Target func(arch string) string

	mu      sync.RWMutex
	modules map[int]*hip.Module // by device ordinal
	failed  map[int]error
	gen     uint64 // HIP's load generation the maps belong to
}

// Function returns the kernel named name (a symbol name) of the module on
// dev, compiling and loading it on first use.
func (k *Kernels) Function(dev *hip.Device, name string) (*hip.Function, error) {
	m, err := k.Module(dev)
	if err != nil {
		return nil, err
	}
	return m.Function(name)
}

// Module returns the module loaded on dev, compiling (or reading the
// cache) and loading it on first use. A failure is remembered for the
// device.
func (k *Kernels) Module(dev *hip.Device) (*hip.Module, error) {
	if dev == nil {
		return nil, invalid("Kernels.Module", "nil device")
	}
	ord, gen := dev.Ordinal(), bind.Generation()
	k.mu.RLock()
	m, err := k.modules[ord], k.failed[ord]
	current := k.gen == gen
	k.mu.RUnlock()
	if current && (m != nil || err != nil) {
		return m, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gen != gen {
		// HIP loaded again since: its modules went with the old runtime,
		// and a failure (no compiler for the platform then) may not recur.
		k.modules, k.failed, k.gen = nil, nil, gen
	}
	if m, err := k.modules[ord], k.failed[ord]; m != nil || err != nil {
		return m, err
	}
	m, err = k.load(dev)
	if err != nil {
		if k.failed == nil {
			k.failed = map[int]error{}
		}
		k.failed[ord] = err
		return nil, err
	}
	if k.modules == nil {
		k.modules = map[int]*hip.Module{}
	}
	k.modules[ord] = m
	return m, nil
}

func (k *Kernels) load(dev *hip.Device) (*hip.Module, error) {
	props, err := dev.Properties()
	if err != nil {
		return nil, err
	}
	code, err := k.Compile(props.ArchName)
	if err != nil {
		return nil, err
	}
	m, err := dev.LoadModule(code.Image)
	if err != nil {
		return nil, fmt.Errorf("hiprtc: loading %s on %s (%s): %w", k.name(), dev, props.ArchName, err)
	}
	return m, nil
}

// Compile returns the code for arch (through Target, when set), from the
// cache or compiled: the ahead-of-time step of images that ship compiled
// kernels, and the check that the source compiles for an arch without a
// device of it.
func (k *Kernels) Compile(arch string) (*Code, error) {
	if arch == "" {
		return nil, &Error{Op: "Kernels.Compile", Status: StatusInvalidOption, Detail: "no target arch"}
	}
	if k.Target != nil {
		arch = k.Target(arch)
	}
	o := k.Options
	o.Arch = arch
	if o.Name == "" {
		o.Name = k.name()
	}
	c := k.Cache
	if c == nil {
		c = DefaultCache()
	}
	return c.Compile(k.Source, o)
}

func (k *Kernels) name() string {
	if k.Name == "" {
		return "kernel.hip"
	}
	return k.Name
}

// Close unloads the module of every device, after the device's queued
// work; the next use loads them again.
func (k *Kernels) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	for _, m := range k.modules {
		errs = append(errs, m.Close())
	}
	k.modules, k.failed = nil, nil
	return errors.Join(errs...)
}
