package nn

import (
	"errors"
	"sync"
	"time"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/flashattn"
	"github.com/rocm-go/rocm/hip"
)

// WarmKernels opens the device named (candle.NewDevice) and, when it is a
// GPU, readies every kernel module the models run: candle's
// (KernelCache.WarmEach) and flashattn's attention kernels, calling each
// (when not nil; one call at a time) as each module is loaded. On NVIDIA
// they all compile at once; on AMD one after another (hipRTC compiles one
// program at a time). On the CPU it does nothing. A worker calls it while
// its model loads, so that a machine's first start compiles meanwhile.
func WarmKernels(device string, each func(candle.ModuleReady)) error {
	d, err := candle.NewDevice(device)
	if err != nil {
		return err
	}
	h, ok := d.(*candle.HIPDevice)
	if !ok {
		return nil
	}
	start := time.Now()
	total := len(h.KernelCache().Modules()) + 1
	var mu sync.Mutex
	done := 0
	report := func(name string) {
		if each == nil {
			return
		}
		mu.Lock() // before the clock: Took counts up with Done
		defer mu.Unlock()
		done++
		each(candle.ModuleReady{Name: name, Took: time.Since(start), Done: done, Total: total})
	}
	attention := func() error {
		if err := flashattn.Warm(h.HIP()); err != nil {
			return err
		}
		report(flashattn.ModuleName)
		return nil
	}
	var attnErr error
	var wg sync.WaitGroup
	if hip.LoadedPlatform() == hip.PlatformNVIDIA {
		wg.Go(func() { attnErr = attention() })
	}
	err = h.KernelCache().WarmEach(h, func(m candle.ModuleReady) { report(m.Name) })
	wg.Wait()
	if hip.LoadedPlatform() != hip.PlatformNVIDIA && err == nil {
		attnErr = attention()
	}
	return errors.Join(err, attnErr)
}
