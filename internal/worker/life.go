package worker

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Life is a worker's life once its host listens: load the model (in a
// goroutine of its own, so that a signal is heard meanwhile), warm it up,
// serve until ctx ends or serving fails, then drain. B is the worker's
// loaded model.
type Life[B io.Closer] struct {
	Host *Host
	Gate *Gate
	// Load loads the model; LoadDone, when set, hears at once when the
	// load ends or is abandoned (a progress bar to finish).
	Load     func() (B, error)
	LoadDone func()
	// Kernels, when set, readies the device's kernels in a goroutine of
	// its own while the model loads (a machine's first start compiles
	// them), calling each as each module is ready; the warm-up waits for
	// it. A failure is logged: the warm-up then compiles what it uses.
	Kernels func(each func(KernelModule)) error
	// Loaded hears the model and the time its load took (the log line, the
	// device for heartbeats).
	Loaded func(b B, took time.Duration)
	// WarmUp runs the model once, so that the first client does not pay
	// for compiling kernels.
	WarmUp func(ctx context.Context, b B) error
	// Ready opens the server on b.
	Ready func(b B)
	// Close ends what serves b and b itself, once the requests have
	// drained; nil: b.Close. It gets b's zero value when no model loaded.
	Close func(b B, loaded bool) error
}

// Run lives the life; it returns the exit status: 0 after a clean
// shutdown, 1 for a failure (the load, the warm-up, serving), ExitCut
// after a shutdown that cut requests.
func (l Life[B]) Run(ctx context.Context) int {
	log := l.Host.cfg.Log
	drain := func(b B, loaded bool) int {
		return l.Host.Drain(func() error {
			if l.Close != nil {
				return l.Close(b, loaded)
			}
			if loaded {
				return b.Close()
			}
			return nil
		})
	}
	type loaded struct {
		b   B
		err error
	}
	done := make(chan loaded, 1)
	start := time.Now()
	kernels := l.readyKernels()
	go func() {
		b, err := l.Load()
		done <- loaded{b, err}
	}()
	var b, zero B
	select {
	case <-ctx.Done():
		if l.LoadDone != nil {
			l.LoadDone()
		}
		log.Warn("interrupted while loading the model")
		drain(zero, false)
		return 1
	case r := <-done:
		if l.LoadDone != nil {
			l.LoadDone()
		}
		if r.err != nil {
			log.Error("loading the model failed", "err", r.err)
			l.Gate.SetFailed(r.err.Error())
			drain(zero, false)
			return 1
		}
		b = r.b
	}
	if l.Loaded != nil {
		l.Loaded(b, time.Since(start))
	}
	select {
	case err := <-kernels:
		if err != nil { // the warm-up compiles what it needs, and fails if it cannot
			log.Warn("readying the kernels ahead failed: they compile as first used", "err", err)
		}
	case <-ctx.Done():
		log.Warn("interrupted while readying the kernels")
		drain(b, true)
		return 1
	}
	if err := l.WarmUp(ctx, b); err != nil {
		if ctx.Err() != nil {
			log.Warn("interrupted during the warm-up")
		} else {
			log.Error("warm-up failed", "err", err)
			l.Gate.SetFailed("warm-up: " + err.Error())
		}
		drain(b, true)
		return 1
	}
	l.Ready(b)
	l.Host.Changed()
	log.Info("ready", "url", fmt.Sprintf("http://%s", l.Host.Addr()), "model", l.Host.cfg.Model)
	code := 0
	select {
	case <-ctx.Done():
		log.Info("signal received")
	case err := <-l.Host.ServeErr():
		log.Error("serving failed", "err", err)
		code = 1
	}
	if drain(b, true) > 0 && code == 0 {
		code = ExitCut
	}
	return code
}

// KernelModule is what Life.Kernels reports of a kernel module once it is
// loaded on the device.
type KernelModule struct {
	Name        string        // "quant.hip", ...
	Took        time.Duration // since the kernels began
	Done, Total int           // modules ready so far, of all
}

// slowModule is the time past which a module's readiness gets a log line:
// it was compiled, not read from the disk cache.
const slowModule = time.Second

// readyKernels runs Kernels, when set, logging the modules that took long
// (a first start's compile, its progress) and the total; the channel gets
// its result.
func (l Life[B]) readyKernels() <-chan error {
	res := make(chan error, 1)
	if l.Kernels == nil {
		res <- nil
		return res
	}
	log := l.Host.cfg.Log
	go func() {
		start := time.Now()
		compiled := 0
		err := l.Kernels(func(m KernelModule) {
			if m.Took >= slowModule {
				compiled++
				log.Info("kernel module ready", "module", m.Name, "took", m.Took.Round(100*time.Millisecond),
					"modules", fmt.Sprintf("%d of %d", m.Done, m.Total))
			}
		})
		if err == nil {
			log.Info("kernels ready", "took", time.Since(start).Round(time.Millisecond), "slow_modules", compiled)
		}
		res <- err
	}()
	return res
}
