package candle

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/hip"
)

// Transfer says how tensors move from a mapped checkpoint file
// (MappedFile: a safetensors or GGUF file) to a HIP device. By default
// goroutines read the file (pread, from the page cache) a chunk at a time
// into pinned buffers, in file order from the tensor a load asks for and a
// few chunks beyond it, and each tensor is copied by DMA from them; a
// chunk's buffer goes back once every tensor in it is loaded. The buffers
// are the process's, kept for the next load (FreePinnedBuffers frees
// them): allocating pinned memory is slower than reading a file, and
// ReservePinnedBuffers allocates them before a first load. If reading or
// allocating fails, the file's tensors go through candle's staging
// buffers instead (FromBytes), with the same result. The CPU device reads
// the mapping directly either way.
type Transfer struct {
	// Register copies by DMA straight from the file's mapping, registered
	// with the device (hip.Device.RegisterHost, read-only) a chunk at a
	// time, instead of reading it into pinned buffers: no copy on the
	// host, but on the H100 hosts measured registering ran at 10-38 GB/s,
	// slower than reading (candle/NOTES.md). A chunk is unregistered once
	// every tensor in it has been copied. Where registration fails (a
	// runtime that refuses read-only file mappings, as AMD's may), the
	// file's tensors stage.
	Register bool
	// Staging copies every tensor through candle's staging buffers
	// (FromBytes), the slowest way.
	Staging bool
	// Chunk is the bytes read or registered at a time, a multiple of the
	// page size (default 4 MiB read, 128 MiB registered).
	Chunk int
	// Workers is the goroutines reading or registering chunks (default 14
	// read, fewer on a host of fewer cores; 2 registered).
	Workers int
	// Ahead is how many chunks are read or registered beyond the last one
	// a load asks for (default 8 read, 4 registered).
	Ahead int
	// Keep keeps every registered chunk registered until Close, instead of
	// unregistering each once its tensors are loaded: no unregistering
	// while copies run, at the cost of the whole file pinned meanwhile.
	// Registering only.
	Keep bool
}

// The defaults of Transfer: what measured best of the strategies
// tensorbench's loading rows try (candle/NOTES.md). On H200 hosts, 4 MiB
// chunks read by 14 goroutines, 8 ahead, moved a 2.47 GB checkpoint from
// the page cache at 0.80-0.89 of the pinned copy rate where 12 goroutines,
// 24 ahead (the default before) read 0.72-0.85 in the same runs: fewer
// buffers in flight, and fewer to allocate for a process's first load.
// Registering 128 MiB chunks reached 0.37-0.42.
const (
	defaultReadChunk   = 4 << 20
	defaultReadWorkers = 14
	defaultReadAhead   = 8
	defaultRegChunk    = 128 << 20
	defaultRegWorkers  = 2
	defaultRegAhead    = 4
)

// resolved fills the zero fields with the defaults.
func (t Transfer) resolved() Transfer {
	page := os.Getpagesize()
	chunk, workers, ahead := defaultReadChunk, max(4, min(defaultReadWorkers, runtime.NumCPU()-2)), defaultReadAhead
	if t.Register {
		chunk, workers, ahead = defaultRegChunk, defaultRegWorkers, defaultRegAhead
	}
	if t.Chunk <= 0 {
		t.Chunk = chunk
	}
	t.Chunk = (t.Chunk + page - 1) / page * page
	if t.Workers <= 0 {
		t.Workers = workers
	}
	if t.Ahead <= 0 {
		t.Ahead = ahead
	}
	return t
}

// pinnedBuffers is how many pinned buffers a load that reads holds at
// most: one a reading goroutine, the chunks ahead, and two a load copies
// from. t is resolved.
func (t Transfer) pinnedBuffers() int { return t.Workers + t.Ahead + 2 }

func (t Transfer) String() string {
	if t.Staging {
		return "staging"
	}
	t = t.resolved()
	if !t.Register {
		return fmt.Sprintf("read in %s chunks by %d goroutines, %d ahead", humanize.IBytes(uint64(t.Chunk)), t.Workers, t.Ahead)
	}
	s := fmt.Sprintf("registered in %s chunks by %d goroutines, %d ahead", humanize.IBytes(uint64(t.Chunk)), t.Workers, t.Ahead)
	if t.Keep {
		s += ", kept until Close"
	}
	return s
}

// LoadOption configures MapFile, and the openers of the file formats that
// map their files with it.
type LoadOption func(*Transfer)

// WithTransfer sets how tensors move to a HIP device; zero fields keep
// their defaults.
func WithTransfer(t Transfer) LoadOption { return func(o *Transfer) { *o = t } }

// TransferStats says how a file's tensors reached HIP devices.
type TransferStats struct {
	// Read is the bytes copied from pinned buffers the file was read
	// into; Registered, from the registered mapping; Staged, through
	// candle's staging buffers.
	Read, Registered, Staged int64
	// Chunks counts chunks read or registered (a chunk read again for a
	// tensor loaded twice counts twice).
	Chunks int
	// ReadTime is the time spent reading chunks; RegisterTime and
	// UnregisterTime, in hipHostRegister and hipHostUnregister; each
	// summed over goroutines (unregistering includes the wait for the
	// chunk's copies).
	ReadTime, RegisterTime, UnregisterTime time.Duration
	// Fallback is why reading or registering was given up, nil when it
	// was not.
	Fallback error
}

// Add sums o into s: the stats of several files (Fallback keeps the
// first).
func (s *TransferStats) Add(o TransferStats) {
	s.Read += o.Read
	s.Registered += o.Registered
	s.Staged += o.Staged
	s.Chunks += o.Chunks
	s.ReadTime += o.ReadTime
	s.RegisterTime += o.RegisterTime
	s.UnregisterTime += o.UnregisterTime
	if s.Fallback == nil {
		s.Fallback = o.Fallback
	}
}

// errClosing is the error of a load that finds its file closing; errStage,
// of one whose file could not be read or registered (the cause follows
// it); errNoRoom, a register's answer when every pinned buffer it may use
// is in use: not a failure, the chunk stays where it is.
var (
	errClosing = errors.New("the file is closed")
	errStage   = errors.New("reading or registering the file failed")
	errNoRoom  = errors.New("no pinned buffer free")
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

// window holds a file's chunks for loads to copy from: worker goroutines
// read or register chunks in file order, from the first chunk of the
// latest load to ahead chunks beyond its last; a load waits for the chunks
// it covers (or takes one the workers have not reached), copies from each
// as it is ready, and a chunk is released once every tensor in it has been
// loaded and no load uses it. A chunk is never held twice at once: the
// runtime refuses a range registered twice. register may answer errNoRoom
// (every pinned buffer in use): a worker then releases a chunk read ahead
// for loads that went elsewhere, if there is one, and waits for a release;
// a load copies that chunk's part through direct instead. H is the
// holder (a *held; the tests use a fake). Methods are safe for many
// goroutines.
type window[H any] struct {
	mapped   []byte
	chunk    int
	ahead    int
	workers  int
	keep     bool
	register func(b []byte) (H, error)
	release  func(h H, done func()) // hands a holder over; done, once released

	mu       sync.Mutex
	cond     sync.Cond
	cs       []chunkState[H]
	next     int // the chunk the workers look at next
	limit    int // workers take chunks below it
	released int // releases done, for workers waiting for room
	started  bool
	closing  bool
	active   int // loads in progress
	loaded   map[Span]bool
	err      error // the first failure: loads stage from then on
	running  sync.WaitGroup
	stats    TransferStats
}

func newWindow[H any](mapped []byte, t Transfer, tensors []Span, register func([]byte) (H, error), release func(H, func())) *window[H] {
	t = t.resolved()
	w := &window[H]{mapped: mapped, chunk: t.Chunk, ahead: t.Ahead, workers: t.Workers, keep: t.Keep, register: register, release: release,
		cs: make([]chunkState[H], (len(mapped)+t.Chunk-1)/t.Chunk), loaded: map[Span]bool{}}
	w.cond.L = &w.mu
	seen := make(map[Span]bool, len(tensors))
	for _, s := range tensors {
		if seen[s] {
			continue // two names for the same bytes: loaded once, counted once
		}
		seen[s] = true
		w.each(s, func(k, lo, hi int) { w.cs[k].left += int64(hi - lo) })
	}
	return w
}

// each calls f for every chunk k that s covers, with the part of s in it.
func (w *window[H]) each(s Span, f func(k, lo, hi int)) {
	for lo := s.Start; lo < s.End; {
		k := lo / w.chunk
		hi := min(s.End, (k+1)*w.chunk)
		f(k, lo, hi)
		lo = hi
	}
}

// bytes is chunk k of the mapping.
func (w *window[H]) bytes(k int) []byte {
	return w.mapped[k*w.chunk : min((k+1)*w.chunk, len(w.mapped))]
}

// work is a reading or registering goroutine.
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
		// Skip what is held or taken, or holds nothing to load.
		if w.cs[k].state != chunkAbsent || w.cs[k].left <= 0 {
			continue
		}
		if !w.registerLocked(k) && w.err == nil {
			// No room: come back to k once a chunk is released.
			w.next = min(w.next, k)
			seen := w.released
			w.evictLocked()
			for !w.closing && w.err == nil && w.released == seen {
				w.cond.Wait()
			}
		}
	}
}

// registerLocked reads or registers chunk k, unlocking while it works,
// and reports whether the chunk is held.
func (w *window[H]) registerLocked(k int) bool {
	w.cs[k].state = chunkRegistering
	w.mu.Unlock()
	start := time.Now()
	h, err := w.register(w.bytes(k))
	d := time.Since(start)
	w.mu.Lock()
	w.stats.RegisterTime += d
	switch {
	case err == nil:
		w.cs[k].state, w.cs[k].h = chunkReady, h
		w.stats.Chunks++
	case errors.Is(err, errNoRoom):
		w.cs[k].state = chunkAbsent
	default:
		w.cs[k].state = chunkAbsent
		if w.err == nil {
			w.err = err
		}
	}
	w.cond.Broadcast()
	return err == nil
}

// releaseLocked hands chunk k, held and unused, over to release, unlocking
// while it does.
func (w *window[H]) releaseLocked(k int) {
	h := w.cs[k].h
	var zero H
	w.cs[k].state, w.cs[k].h = chunkReleasing, zero
	w.mu.Unlock()
	w.release(h, func() {
		w.mu.Lock()
		w.cs[k].state = chunkAbsent
		w.released++
		w.cond.Broadcast()
		w.mu.Unlock()
	})
	w.mu.Lock()
}

// evictLocked releases the held chunk that no load uses farthest from
// the workers' range: one read ahead for loads that went elsewhere. It
// is read again if a load comes back to it.
func (w *window[H]) evictLocked() {
	if w.keep {
		return
	}
	best, far := -1, 0
	for k := range w.cs {
		c := &w.cs[k]
		if c.state != chunkReady || c.users > 0 || (k >= w.next && k < w.limit) {
			continue
		}
		if d := max(w.next-k, k-w.limit+1); d > far {
			best, far = k, d
		}
	}
	if best >= 0 {
		w.releaseLocked(best)
	}
}

// load copies a tensor, bytes s of the mapping, calling copy for each
// chunk's part as the chunk is held (off is where the part starts in the
// chunk), or direct where no pinned buffer was free (off is where it
// starts in the mapping); at is where the part starts in the tensor. A
// failure to read or register returns the error that makes the file stage
// (w.err); copy's and direct's errors are returned as they are.
func (w *window[H]) load(s Span, copy func(h H, off, n, at int) error, direct func(off, n, at int) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return errClosing
	}
	if w.err != nil {
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
	// The workers take this load's chunks with it, then read ahead of it.
	first, last := s.Start/w.chunk, (s.End-1)/w.chunk
	w.next, w.limit = first, min(last+1+w.ahead, len(w.cs))
	w.cond.Broadcast()
	for k := first; k <= last; k++ {
		w.cs[k].users++
	}
	count := !w.loaded[s] // its bytes leave their chunks once
	w.loaded[s] = true
	var err error
	w.each(s, func(k, lo, hi int) {
		for err == nil && w.err == nil && (w.cs[k].state == chunkRegistering || w.cs[k].state == chunkReleasing) {
			w.cond.Wait()
		}
		if err == nil && w.err == nil {
			// Absent: behind the workers (released, loaded again) or not
			// reached yet; taken here.
			held := w.cs[k].state == chunkReady || w.registerLocked(k)
			if w.err == nil {
				h := w.cs[k].h
				w.mu.Unlock()
				if held {
					err = copy(h, lo-k*w.chunk, hi-lo, lo-s.Start)
				} else {
					err = direct(lo, hi-lo, lo-s.Start)
				}
				w.mu.Lock()
			}
		}
		c := &w.cs[k]
		c.users--
		if count {
			c.left -= int64(hi - lo)
		}
		if c.users == 0 && c.left <= 0 && c.state == chunkReady && !w.keep {
			w.releaseLocked(k)
		}
	})
	if err == nil && w.err != nil {
		err = fmt.Errorf("%w: %w", errStage, w.err)
	}
	if err == nil {
		w.stats.Registered += int64(s.End - s.Start)
	}
	w.active--
	w.cond.Broadcast()
	return err
}

// close stops the workers, waits for the loads in progress and for the
// releases handed over, and returns the holders still held, for the
// caller to release.
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

// readStats returns the counts so far (bytes copied from held chunks as
// Registered, the time in register as RegisterTime).
func (w *window[H]) readStats() TransferStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Fallback = w.err
	return s
}

// held is a chunk's holder: the pinned memory copies read from, and the
// pool's buffer it views when the chunk was read (nil when registered).
type held struct {
	pin, slot *hip.PinnedBuffer
}

// uploader moves one file's tensors to one HIP device through a window of
// chunks, read into pinned buffers or registered; a releasing goroutine
// returns each chunk's buffer (or unregisters it) once its copies, marked
// by an event on the device's stream, are done.
type uploader struct {
	dev      *HIPDevice
	read     bool
	file     io.ReaderAt
	mapped   []byte
	pool     *pinnedPool
	room     int // pinned buffers the window may hold
	win      *window[*held]
	releases chan release
	done     chan struct{}

	spareMu sync.Mutex // guards spare: the direct path's buffer
	spare   *hip.PinnedBuffer

	mu         sync.Mutex
	unregister time.Duration
	direct     int64   // bytes copied through spare
	errs       []error // releasing's
}

type release struct {
	h     *held
	event *hip.Event // nil: wait for the device
	done  func()
}

func newUploader(dev *HIPDevice, file io.ReaderAt, mapped []byte, t Transfer, tensors []Span) *uploader {
	t = t.resolved()
	u := &uploader{dev: dev, read: !t.Register, file: file, mapped: mapped, done: make(chan struct{})}
	register := func(b []byte) (*held, error) {
		pin, err := dev.HIP().RegisterHost(b, hip.HostRegisterReadOnly)
		return &held{pin: pin}, err
	}
	if u.read {
		u.pool, u.room = poolOf(t.Chunk), t.pinnedBuffers()
		register = u.readChunk
	}
	u.win = newWindow(mapped, t, tensors, register, u.release)
	// Never full: a chunk is released at most once per holder, and the
	// releaser drains the channel.
	u.releases = make(chan release, len(u.win.cs)+1)
	go u.releaser()
	return u
}

// readChunk reads chunk b of the mapping (its offset is where it starts
// in mapped, which b's capacity runs to the end of) into a pool buffer.
func (u *uploader) readChunk(b []byte) (*held, error) {
	slot, err := u.pool.get(u.dev.HIP(), u.room)
	if err != nil {
		return nil, err
	}
	pin, err := slot.Slice(0, len(b))
	if err == nil {
		off := len(u.mapped) - cap(b)
		if _, err = u.file.ReadAt(pin.Bytes(), int64(off)); err != nil {
			err = fmt.Errorf("reading %s at byte %d: %w", humanize.IBytes(uint64(len(b))), off, err)
		}
	}
	if err != nil {
		u.pool.put(slot)
		return nil, err
	}
	return &held{pin: pin, slot: slot}, nil
}

// release marks the end of the copies queued so far from h and hands it
// to the releaser, without waiting.
func (u *uploader) release(h *held, done func()) {
	e, err := u.dev.HIP().NewEvent(hip.EventDisableTiming)
	if err == nil {
		if err = e.Record(u.dev.Stream()); err != nil {
			e.Close()
		}
	}
	if err != nil {
		e = nil
	}
	u.releases <- release{h: h, event: e, done: done}
}

func (u *uploader) releaser() {
	defer close(u.done)
	for r := range u.releases {
		start := time.Now()
		wait := u.dev.Synchronize
		if r.event != nil {
			wait = r.event.Synchronize
		}
		var err error
		if r.h.slot != nil {
			// The buffer goes back only once its copies are done.
			if err = wait(); err == nil {
				u.pool.put(r.h.slot)
			}
		} else if r.event != nil {
			err = r.h.pin.CloseAfter(r.event)
		} else {
			err = r.h.pin.Close()
		}
		if r.event != nil {
			err = errors.Join(err, r.event.Close())
		}
		u.mu.Lock()
		if r.h.slot == nil {
			u.unregister += time.Since(start)
		}
		if err != nil {
			u.errs = append(u.errs, err)
		}
		u.mu.Unlock()
		r.done()
	}
}

// copyDirect reads bytes [off, off+n) of the file through the spare
// buffer into dst from byte at, waiting for each piece's copy: the path of
// a load that found no pinned buffer free.
func (u *uploader) copyDirect(dst *Storage, off, n, at int) error {
	u.spareMu.Lock()
	defer u.spareMu.Unlock()
	if u.spare == nil {
		var err error
		if u.spare, err = u.dev.HIP().MallocHost(u.win.chunk, hip.HostMallocPortable); err != nil {
			return err
		}
	}
	for done := 0; done < n; {
		m := min(n-done, u.spare.Size())
		part, err := u.spare.Slice(0, m)
		if err != nil {
			return err
		}
		if _, err := u.file.ReadAt(part.Bytes(), int64(off+done)); err != nil {
			return fmt.Errorf("reading %s at byte %d: %w", humanize.IBytes(uint64(m)), off+done, err)
		}
		if err := u.dev.copyPinned(dst, at+done, part); err != nil {
			return err
		}
		if err := u.dev.Synchronize(); err != nil {
			return err
		}
		done += m
	}
	u.mu.Lock()
	u.direct += int64(n)
	u.mu.Unlock()
	return nil
}

// load copies bytes s of the mapping into dst, from its first byte. A
// failure to read or register returns the window's error (the caller
// stages instead).
func (u *uploader) load(dst *Storage, s Span) error {
	if s.End == s.Start {
		return nil
	}
	return u.win.load(s, func(h *held, off, n, at int) error {
		part, err := h.pin.Slice(off, n)
		if err != nil {
			return err
		}
		return u.dev.copyPinned(dst, at, part)
	}, func(off, n, at int) error {
		if !u.read {
			return errors.New("no registered chunk to copy from") // registering never runs out of room
		}
		return u.copyDirect(dst, off, n, at)
	})
}

// close waits for the copies, releases every chunk, and reports the first
// failure to release.
func (u *uploader) close() error {
	held := u.win.close()
	start := time.Now()
	var failed []error
	for _, h := range held {
		if h.slot != nil {
			failed = append(failed, u.dev.Synchronize())
			u.pool.put(h.slot)
		} else {
			failed = append(failed, h.pin.Close())
		}
	}
	close(u.releases)
	<-u.done
	u.spareMu.Lock()
	failed = append(failed, u.spare.Close())
	u.spare = nil
	u.spareMu.Unlock()
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.read {
		u.unregister += time.Since(start)
	}
	return errors.Join(append(failed, u.errs...)...)
}

func (u *uploader) readStats() TransferStats {
	s := u.win.readStats()
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.read {
		s.Read, s.Registered = s.Registered, 0
		s.ReadTime, s.RegisterTime = s.RegisterTime, 0
	} else {
		s.UnregisterTime = u.unregister
	}
	return s
}

// pinnedPools keep the pinned buffers that loads read files into, by
// size, for the process, so that a buffer serves load after load until
// FreePinnedBuffers. Buffers come in slabs of slabBytes: memory the process
// maps in huge pages, populates and registers with the device once, cut
// into buffers. Fresh memory is what the first load of a process waits
// for: on an H200's host, 144 MiB took 50-56 ms as 36 mappings of 4 MiB,
// populated and registered (MallocHost's memory, 50 ms; the page faults,
// not the registration, cost the most), and 21 ms as one mapping in huge
// pages; populated by several threads at once (mapPopulated), 96 MiB took
// 6.3-8.2 ms against 10.3-13.9 in one. A first load still waits for some
// of it and for fresh device memory: 2.47 GB in 63-87 ms there (71 ms
// populating in one thread, on the same machine), against 50-55 ms once
// the pool has grown (ReservePinnedBuffers grows it beforehand).
// Where mapping or registering fails, MallocHost's memory serves, a
// buffer at a time. The memory is portable: every device of the process
// copies from it.
var pinnedPools struct {
	sync.Mutex
	bySize map[int]*pinnedPool
}

// slabBytes is the memory a pool maps at a time (at least one buffer):
// a load's first copies wait for 16 MiB of fresh memory, not for all of
// it, and the rest comes while they run.
const slabBytes = 16 << 20

type pinnedPool struct {
	size  int
	grow  sync.Mutex // held while a slab is made: one at a time
	mu    sync.Mutex
	free  []*hip.PinnedBuffer
	n     int // buffers allocated (free or in use) or being allocated
	slabs map[*hip.PinnedBuffer]*pinnedSlab
}

// pinnedSlab is memory a pool allocated at once and the buffers cut from
// it.
type pinnedSlab struct {
	whole  *hip.PinnedBuffer // registered (or MallocHost's, one buffer)
	mapped []byte            // the mapping under whole, nil for MallocHost's
	bufs   []*hip.PinnedBuffer
}

func poolOf(size int) *pinnedPool {
	pinnedPools.Lock()
	defer pinnedPools.Unlock()
	if pinnedPools.bySize == nil {
		pinnedPools.bySize = map[int]*pinnedPool{}
	}
	p := pinnedPools.bySize[size]
	if p == nil {
		p = &pinnedPool{size: size, slabs: map[*hip.PinnedBuffer]*pinnedSlab{}}
		pinnedPools.bySize[size] = p
	}
	return p
}

// get takes a free buffer, or makes a slab on dev while fewer than room
// buffers are; else errNoRoom. Goroutines that find no buffer while a slab
// is being made wait for it.
func (p *pinnedPool) get(dev *hip.Device, room int) (*hip.PinnedBuffer, error) {
	if b, err := p.take(room); b != nil || err != nil {
		return b, err
	}
	p.grow.Lock()
	defer p.grow.Unlock()
	if b, err := p.take(room); b != nil || err != nil {
		return b, err
	}
	p.mu.Lock()
	k := max(1, min(slabBytes/p.size, room-p.n))
	p.n += k
	p.mu.Unlock()
	s, err := allocSlab(dev, p.size, k)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.n -= k
		return nil, err
	}
	p.n += len(s.bufs) - k // MallocHost's: one
	for _, b := range s.bufs {
		p.slabs[b] = s
	}
	p.free = append(p.free, s.bufs[1:]...)
	return s.bufs[0], nil
}

// take is a free buffer, nil when none is and more may be made, or
// errNoRoom.
func (p *pinnedPool) take(room int) (*hip.PinnedBuffer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k := len(p.free); k > 0 {
		b := p.free[k-1]
		p.free = p.free[:k-1]
		return b, nil
	}
	if p.n >= room {
		return nil, errNoRoom
	}
	return nil, nil
}

// allocSlab makes k buffers of size bytes: an anonymous mapping in huge
// pages where the kernel gives them, populated and registered with the
// device, or one buffer of MallocHost's memory where that fails.
func allocSlab(dev *hip.Device, size, k int) (*pinnedSlab, error) {
	if m, a, err := mapPopulated(size * k); err == nil {
		whole, err := dev.RegisterHost(a, hip.HostRegisterPortable)
		if err == nil {
			s := &pinnedSlab{whole: whole, mapped: m}
			for i := range k {
				b, err := whole.Slice(i*size, size)
				if err != nil {
					return nil, errors.Join(err, whole.Close(), syscall.Munmap(m))
				}
				s.bufs = append(s.bufs, b)
			}
			return s, nil
		}
		syscall.Munmap(m)
	}
	b, err := dev.MallocHost(size, hip.HostMallocPortable)
	if err != nil {
		return nil, err
	}
	return &pinnedSlab{whole: b, bufs: []*hip.PinnedBuffer{b}}, nil
}

// mapPopulated maps n bytes aligned to huge pages (2 MiB), asks for huge
// pages (madvise: where transparent huge pages are off it has no effect)
// and populates them, with MADV_POPULATE_WRITE or, on kernels before 5.14,
// a write a page. It returns the mapping (for munmap) and the n bytes.
func mapPopulated(n int) (m, a []byte, err error) {
	const huge = 2 << 20
	m, err = syscall.Mmap(-1, 0, n+huge, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, err
	}
	skip := int((huge - uintptr(unsafe.Pointer(unsafe.SliceData(m)))%huge) % huge)
	a = m[skip : skip+n : skip+n]
	syscall.Madvise(a, madvHugePage) // advice: nothing to do when refused
	// The kernel zeroes each fresh page in the thread that faults it in:
	// pieces of whole huge pages populated on several cores at once.
	pages := (n + huge - 1) / huge
	parts := max(1, min(runtime.GOMAXPROCS(0), populateThreads, pages))
	per := (pages + parts - 1) / parts * huge
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += per {
		wg.Go(func() { populate(a[lo:min(lo+per, n)]) })
	}
	wg.Wait()
	return m, a, nil
}

// populateThreads bounds the goroutines that populate a mapping.
const populateThreads = 8

// populate faults b's pages in for writing: MADV_POPULATE_WRITE, or a
// write a page on kernels before 5.14.
func populate(b []byte) {
	if syscall.Madvise(b, madvPopulateWrite) != nil {
		page := os.Getpagesize()
		for i := 0; i < len(b); i += page {
			b[i] = 0
		}
	}
}

// Linux's madvise advice values (not in package syscall).
const (
	madvHugePage      = 14
	madvPopulateWrite = 23
)

// freeSlabs frees the slabs whose buffers are all free, and keeps the
// other buffers free; it returns the bytes freed. The caller holds p.mu.
func (p *pinnedPool) freeSlabs() (int64, error) {
	free := map[*pinnedSlab]int{}
	for _, b := range p.free {
		free[p.slabs[b]]++
	}
	kept := p.free[:0]
	for _, b := range p.free {
		if s := p.slabs[b]; free[s] < len(s.bufs) {
			kept = append(kept, b)
		}
	}
	p.free = kept
	var freed int64
	var failed []error
	for s, n := range free {
		if n < len(s.bufs) {
			continue
		}
		for _, b := range s.bufs {
			delete(p.slabs, b)
		}
		p.n -= n
		freed += int64(n * p.size)
		err := s.whole.Close()
		if err == nil && s.mapped != nil { // memory still registered stays mapped
			err = syscall.Munmap(s.mapped)
		}
		failed = append(failed, err)
	}
	return freed, errors.Join(failed...)
}

func (p *pinnedPool) put(b *hip.PinnedBuffer) {
	p.mu.Lock()
	p.free = append(p.free, b)
	p.mu.Unlock()
}

// ReservePinnedBuffers allocates the pinned buffers that a load with t
// reads into (Transfer: Chunk, Workers and Ahead; none for Register or
// Staging), so that the process's first load does not wait for them, and
// reports the bytes they hold. Fresh pinned memory comes slowly (96 MiB
// in 6-8 ms on an H200's host), and there a process's first load of a
// 2.47 GB checkpoint took 63-87 ms allocating its own buffers, where a
// repeated load takes 50-55 ms (bench/RESULTS.md): call it while the
// program does something else before loading, as llm-worker does while
// its tokenizer loads. The buffers are the process's, kept until
// FreePinnedBuffers.
func ReservePinnedBuffers(dev *HIPDevice, t Transfer) (int64, error) {
	const op = "ReservePinnedBuffers"
	if dev == nil {
		return 0, pkg.Errorf(op, errs.ErrDevice, "nil device")
	}
	if t.Register || t.Staging {
		return 0, nil
	}
	t = t.resolved()
	p, room := poolOf(t.Chunk), t.pinnedBuffers()
	var got []*hip.PinnedBuffer
	defer func() {
		for _, b := range got {
			p.put(b)
		}
	}()
	for {
		b, err := p.get(dev.HIP(), room)
		if errors.Is(err, errNoRoom) {
			break
		}
		if err != nil {
			return 0, pkg.Wrap(op, err)
		}
		got = append(got, b)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return int64(p.n) * int64(p.size), nil
}

// FreePinnedBuffers frees the pinned buffers that loading keeps for the
// next load (Transfer), a slab at a time: those of every slab whose
// buffers no load is using. It reports how many bytes it freed. A later
// load allocates again.
func FreePinnedBuffers() (int64, error) {
	pinnedPools.Lock()
	defer pinnedPools.Unlock()
	var freed int64
	var failed []error
	for _, p := range pinnedPools.bySize {
		p.mu.Lock()
		n, err := p.freeSlabs()
		p.mu.Unlock()
		freed += n
		failed = append(failed, err)
	}
	return freed, pkg.Wrap("FreePinnedBuffers", errors.Join(failed...))
}
