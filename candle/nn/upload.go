package nn

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/hip"
)

// Transfer says how tensors move from a mapped safetensors file to a HIP
// device. By default the mapping is registered with the device
// (hip.Device.RegisterHost, read-only) a chunk at a time, by goroutines
// that run ahead of the copies, and each tensor is copied by DMA straight
// from the page cache: no staging copy. A chunk is unregistered once every
// tensor in it has been copied. Where registration fails (a runtime that
// refuses read-only file mappings, as AMD's may), the file's tensors go
// through candle's pinned staging buffers instead, with the same result.
// The CPU device reads the mapping directly either way.
type Transfer struct {
	// Staging copies every tensor through candle's staging buffers
	// (candle.FromBytes), as loading did before registration.
	Staging bool
	// Chunk is the bytes registered at a time, a multiple of the page
	// size (default 128 MiB).
	Chunk int
	// Workers is the goroutines registering chunks ahead (default 2).
	Workers int
	// Ahead is how many chunks are registered beyond the furthest one a
	// load has used (default 4).
	Ahead int
	// Keep keeps every chunk registered until Close, instead of
	// unregistering each once its tensors are loaded: no unregistering
	// while copies run, at the cost of the whole file pinned meanwhile.
	Keep bool
}

// The defaults of Transfer: what measured best on an H100 of the
// strategies bench's loading rows try (bench/RESULTS.md: 94 ms for a
// 2.47 GB checkpoint, against 114 ms with 32 MiB chunks 8 ahead).
const (
	defaultChunk   = 128 << 20
	defaultWorkers = 2
	defaultAhead   = 4
)

// resolved fills the zero fields with the defaults.
func (t Transfer) resolved() Transfer {
	page := os.Getpagesize()
	if t.Chunk <= 0 {
		t.Chunk = defaultChunk
	}
	t.Chunk = (t.Chunk + page - 1) / page * page
	if t.Workers <= 0 {
		t.Workers = defaultWorkers
	}
	if t.Ahead <= 0 {
		t.Ahead = defaultAhead
	}
	return t
}

func (t Transfer) String() string {
	if t.Staging {
		return "staging"
	}
	t = t.resolved()
	s := fmt.Sprintf("registered in %s chunks by %d goroutines, %d ahead", humanize.IBytes(uint64(t.Chunk)), t.Workers, t.Ahead)
	if t.Keep {
		s += ", kept until Close"
	}
	return s
}

// LoadOption configures OpenSafetensors and OpenVarBuilder.
type LoadOption func(*Transfer)

// WithTransfer sets how tensors move to a HIP device; zero fields keep
// their defaults.
func WithTransfer(t Transfer) LoadOption { return func(o *Transfer) { *o = t } }

// TransferStats says how a file's tensors reached HIP devices.
type TransferStats struct {
	// Registered is the bytes copied straight from the registered
	// mapping; Staged, the bytes copied through staging buffers.
	Registered, Staged int64
	// Chunks counts registrations (a chunk registered again for a tensor
	// loaded twice counts twice).
	Chunks int
	// RegisterTime and UnregisterTime are the time spent in
	// hipHostRegister and hipHostUnregister, summed over goroutines
	// (unregistering includes the wait for the chunk's copies).
	RegisterTime, UnregisterTime time.Duration
	// Fallback is why registration was given up, nil when it was not.
	Fallback error
}

func (s *TransferStats) add(o TransferStats) {
	s.Registered += o.Registered
	s.Staged += o.Staged
	s.Chunks += o.Chunks
	s.RegisterTime += o.RegisterTime
	s.UnregisterTime += o.UnregisterTime
	if s.Fallback == nil {
		s.Fallback = o.Fallback
	}
}

// errClosing is the error of a load that finds its file closing; errStage,
// of one whose file could not be registered (the cause follows it).
var (
	errClosing = errors.New("the file is closed")
	errStage   = errors.New("registering the mapping failed")
)

// chunk states.
const (
	chunkAbsent = iota
	chunkRegistering
	chunkReady
	chunkReleasing // handed over for unregistering, not yet unregistered
)

type chunkState[H any] struct {
	state uint8
	h     H
	users int   // loads copying from the chunk now
	left  int64 // bytes of tensors in it not yet loaded once
}

// window registers a file's mapping with a device chunk by chunk: worker
// goroutines register chunks in file order, up to ahead chunks beyond the
// furthest one a load has used; a load waits for the chunks it covers (or
// registers one the workers will not reach), copies from each as it is
// ready, and the chunk is released once every tensor in it has been loaded
// and no load uses it. A chunk is never registered again before its
// release has called done: the runtime refuses a range registered twice.
// H is the registration (a *hip.PinnedBuffer; the tests use a fake).
// Methods are safe for many goroutines.
type window[H any] struct {
	mapped   []byte
	chunk    int
	ahead    int
	workers  int
	keep     bool
	register func(b []byte) (H, error)
	release  func(h H, done func()) // hands a registration over; done, once unregistered

	mu      sync.Mutex
	cond    sync.Cond
	cs      []chunkState[H]
	next    int // the chunk the workers look at next
	limit   int // workers register chunks below it
	started bool
	closing bool
	active  int // loads in progress
	loaded  map[string]bool
	err     error // the first registration failure: loads stage from then on
	running sync.WaitGroup
	stats   TransferStats
}

// span is a tensor's bytes in the mapping.
type span struct{ lo, hi int }

func newWindow[H any](mapped []byte, t Transfer, tensors []span, register func([]byte) (H, error), release func(H, func())) *window[H] {
	t = t.resolved()
	w := &window[H]{mapped: mapped, chunk: t.Chunk, ahead: t.Ahead, workers: t.Workers, keep: t.Keep, register: register, release: release,
		cs: make([]chunkState[H], (len(mapped)+t.Chunk-1)/t.Chunk), loaded: map[string]bool{}}
	w.cond.L = &w.mu
	for _, s := range tensors {
		w.each(s, func(k, lo, hi int) { w.cs[k].left += int64(hi - lo) })
	}
	return w
}

// each calls f for every chunk k that s covers, with the part of s in it.
func (w *window[H]) each(s span, f func(k, lo, hi int)) {
	for lo := s.lo; lo < s.hi; {
		k := lo / w.chunk
		hi := min(s.hi, (k+1)*w.chunk)
		f(k, lo, hi)
		lo = hi
	}
}

// bytes is chunk k of the mapping.
func (w *window[H]) bytes(k int) []byte {
	return w.mapped[k*w.chunk : min((k+1)*w.chunk, len(w.mapped))]
}

// work is a registering goroutine.
func (w *window[H]) work() {
	defer w.running.Done()
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		for !w.closing && w.err == nil && w.next < len(w.cs) && w.next >= w.limit {
			w.cond.Wait()
		}
		if w.closing || w.err != nil || w.next >= len(w.cs) {
			return
		}
		k := w.next
		w.next++
		// Skip what a load registers itself, or holds nothing to load.
		if w.cs[k].state != chunkAbsent || w.cs[k].left <= 0 {
			continue
		}
		w.registerLocked(k)
	}
}

// registerLocked registers chunk k, unlocking while the runtime works.
func (w *window[H]) registerLocked(k int) {
	w.cs[k].state = chunkRegistering
	w.mu.Unlock()
	start := time.Now()
	h, err := w.register(w.bytes(k))
	d := time.Since(start)
	w.mu.Lock()
	w.stats.RegisterTime += d
	if err != nil {
		w.cs[k].state = chunkAbsent
		if w.err == nil {
			w.err = err
		}
	} else {
		w.cs[k].state, w.cs[k].h = chunkReady, h
		w.stats.Chunks++
	}
	w.cond.Broadcast()
}

// load copies tensor name, bytes s of the mapping, calling copy for each
// chunk's part as the chunk is ready: at is where the part starts in the
// tensor. A registration failure returns the error that makes the file
// stage (w.err); copy's error is returned as it is.
func (w *window[H]) load(name string, s span, copy func(h H, off, n, at int) error) error {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return errClosing
	}
	if w.err != nil {
		defer w.mu.Unlock()
		return fmt.Errorf("%w: %w", errStage, w.err)
	}
	w.active++
	if !w.started {
		w.started = true
		w.running.Add(w.workers)
		for range w.workers {
			go w.work()
		}
	}
	first, last := s.lo/w.chunk, (s.hi-1)/w.chunk
	if l := min(last+1+w.ahead, len(w.cs)); l > w.limit {
		w.limit = l
		w.cond.Broadcast()
	}
	for k := first; k <= last; k++ {
		w.cs[k].users++
	}
	var err error
	w.each(s, func(k, lo, hi int) {
		for err == nil && w.err == nil && (w.cs[k].state == chunkRegistering || w.cs[k].state == chunkReleasing) {
			w.cond.Wait()
		}
		if err != nil || w.err != nil {
			return
		}
		if w.cs[k].state == chunkAbsent {
			// Behind the workers (a chunk released, loaded again) or
			// beyond them: register it here.
			w.registerLocked(k)
			if w.err != nil {
				return
			}
		}
		h := w.cs[k].h
		w.mu.Unlock()
		err = copy(h, lo-k*w.chunk, hi-lo, lo-s.lo)
		w.mu.Lock()
	})
	if err == nil && w.err != nil {
		err = fmt.Errorf("%w: %w", errStage, w.err)
	}
	if err == nil {
		w.stats.Registered += int64(s.hi - s.lo)
		if !w.loaded[name] {
			w.loaded[name] = true
			w.each(s, func(k, lo, hi int) { w.cs[k].left -= int64(hi - lo) })
		}
	}
	type freed struct {
		k int
		h H
	}
	var free []freed
	for k := first; k <= last; k++ {
		c := &w.cs[k]
		c.users--
		if c.users == 0 && c.left <= 0 && c.state == chunkReady && !w.keep {
			free = append(free, freed{k, c.h})
			var zero H
			c.state, c.h = chunkReleasing, zero
		}
	}
	w.mu.Unlock()
	// Released before the load counts as done, so that close, which waits
	// for the loads, finds every release handed over.
	for _, f := range free {
		k := f.k
		w.release(f.h, func() {
			w.mu.Lock()
			w.cs[k].state = chunkAbsent
			w.cond.Broadcast()
			w.mu.Unlock()
		})
	}
	w.mu.Lock()
	w.active--
	w.cond.Broadcast()
	w.mu.Unlock()
	return err
}

// close stops the workers, waits for the loads in progress and for the
// releases handed over, and returns the registrations still held, for the
// caller to unregister.
func (w *window[H]) close() []H {
	w.mu.Lock()
	w.closing = true
	w.cond.Broadcast()
	for w.active > 0 {
		w.cond.Wait()
	}
	w.mu.Unlock()
	w.running.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	for slices.ContainsFunc(w.cs, func(c chunkState[H]) bool { return c.state == chunkReleasing }) {
		w.cond.Wait()
	}
	var held []H
	for k := range w.cs {
		if w.cs[k].state == chunkReady {
			held = append(held, w.cs[k].h)
			var zero H
			w.cs[k].state, w.cs[k].h = chunkAbsent, zero
		}
	}
	return held
}

// readStats returns the counts so far.
func (w *window[H]) readStats() TransferStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Fallback = w.err
	return s
}

// uploader moves one file's tensors to one HIP device through a window of
// registered chunks; a releasing goroutine unregisters each chunk once its
// copies, marked by an event on the device's stream, are done.
type uploader struct {
	dev      *candle.HIPDevice
	win      *window[*hip.PinnedBuffer]
	releases chan release
	done     chan struct{}

	mu         sync.Mutex
	unregister time.Duration
	errs       []error // unregistering's
}

type release struct {
	pin   *hip.PinnedBuffer
	event *hip.Event // nil: wait for the device
	done  func()
}

func newUploader(dev *candle.HIPDevice, mapped []byte, t Transfer, tensors []span) *uploader {
	u := &uploader{dev: dev, done: make(chan struct{})}
	u.win = newWindow(mapped, t, tensors, func(b []byte) (*hip.PinnedBuffer, error) {
		return dev.HIP().RegisterHost(b, hip.HostRegisterReadOnly)
	}, u.release)
	// Never full: a chunk is released at most once per registration, and
	// the releaser drains the channel.
	u.releases = make(chan release, len(u.win.cs)+1)
	go u.releaser()
	return u
}

// release marks the end of the copies queued so far from pin and hands it
// to the releaser, without waiting.
func (u *uploader) release(pin *hip.PinnedBuffer, done func()) {
	e, err := u.dev.HIP().NewEvent(hip.EventDisableTiming)
	if err == nil {
		if err = e.Record(u.dev.Stream()); err != nil {
			e.Close()
		}
	}
	if err != nil {
		e = nil
	}
	u.releases <- release{pin: pin, event: e, done: done}
}

func (u *uploader) releaser() {
	defer close(u.done)
	for r := range u.releases {
		start := time.Now()
		var err error
		if r.event != nil {
			err = errors.Join(r.pin.CloseAfter(r.event), r.event.Close())
		} else {
			err = r.pin.Close()
		}
		u.mu.Lock()
		u.unregister += time.Since(start)
		if err != nil {
			u.errs = append(u.errs, err)
		}
		u.mu.Unlock()
		r.done()
	}
}

// load copies a tensor of dt and shape, bytes s of the mapping, into a new
// tensor on the device. A registration failure returns the window's error
// (the caller stages instead).
func (u *uploader) load(name string, dt candle.DType, s span, shape []int) (*candle.Tensor, error) {
	t, err := candle.Empty(u.dev, dt, shape...)
	if err != nil {
		return nil, err
	}
	if s.hi == s.lo {
		return t, nil
	}
	err = u.win.load(name, s, func(pin *hip.PinnedBuffer, off, n, at int) error {
		part, err := pin.Slice(off, n)
		if err != nil {
			return err
		}
		return t.CopyFromPinned(at, part)
	})
	if err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// close waits for the copies, unregisters every chunk, and reports the
// first failure to unregister.
func (u *uploader) close() error {
	held := u.win.close()
	start := time.Now()
	var errs []error
	for _, pin := range held {
		errs = append(errs, pin.Close())
	}
	close(u.releases)
	<-u.done
	u.mu.Lock()
	defer u.mu.Unlock()
	u.unregister += time.Since(start)
	return errors.Join(append(errs, u.errs...)...)
}

func (u *uploader) readStats() TransferStats {
	s := u.win.readStats()
	u.mu.Lock()
	s.UnregisterTime = u.unregister
	u.mu.Unlock()
	return s
}
