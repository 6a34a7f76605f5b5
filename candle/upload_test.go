package candle

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/hip"
)

// The window's scheduling in tier 0, with a fake registration that checks
// what the HIP runtime would: no range registered twice at once, and no
// copy from a range that is not registered.

type fakeReg struct{ lo, hi int }

type fakeDevice struct {
	t       *testing.T
	mapped  []byte
	mu      sync.Mutex
	live    map[int]fakeReg // by lo
	regs    int
	frees   int
	failAt  int // the chunk start whose registration fails; -1: none
	room    int // chunks held at once, beyond which register answers errNoRoom; 0: any
	direct  int // bytes copied without a holder
	delay   time.Duration
	maxLive int
	async   bool           // release later, in a goroutine
	pending sync.WaitGroup // releases under way
}

func newFakeDevice(t *testing.T, mapped []byte) *fakeDevice {
	return &fakeDevice{t: t, mapped: mapped, live: map[int]fakeReg{}, failAt: -1}
}

var errFakeRefused = errors.New("the fake refuses this range")

func (f *fakeDevice) register(b []byte) (*fakeReg, error) {
	lo := len(f.mapped) - cap(b) // b is a slice of mapped: its offset
	hi := lo + len(b)
	time.Sleep(f.delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	if lo == f.failAt {
		return nil, errFakeRefused
	}
	if f.room > 0 && len(f.live) >= f.room {
		return nil, errNoRoom
	}
	for _, r := range f.live {
		if lo < r.hi && r.lo < hi {
			f.t.Errorf("[%d, %d) registered while [%d, %d) is", lo, hi, r.lo, r.hi)
		}
	}
	f.live[lo] = fakeReg{lo, hi}
	f.regs++
	f.maxLive = max(f.maxLive, len(f.live))
	r := f.live[lo]
	return &r, nil
}

// release unregisters r later, as the uploader does after the chunk's
// copies, and then calls done.
func (f *fakeDevice) release(r *fakeReg, done func()) {
	if !f.async {
		f.unregister(r)
		done()
		return
	}
	f.pending.Go(func() {
		time.Sleep(f.delay)
		f.unregister(r)
		done()
	})
}

func (f *fakeDevice) unregister(r *fakeReg) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.live[r.lo]; !ok {
		f.t.Errorf("[%d, %d) released but not registered", r.lo, r.hi)
	}
	delete(f.live, r.lo)
	f.frees++
}

func (f *fakeDevice) copier(dst []byte) func(r *fakeReg, off, n, at int) error {
	return func(r *fakeReg, off, n, at int) error {
		f.mu.Lock()
		live, ok := f.live[r.lo]
		f.mu.Unlock()
		if !ok || live != *r || off < 0 || off+n > r.hi-r.lo {
			return fmt.Errorf("copy of [%d, %d) from %v, which is not registered", off, off+n, *r)
		}
		copy(dst[at:at+n], f.mapped[r.lo+off:r.lo+off+n])
		return nil
	}
}

// directer copies without a holder, straight from the mapping, as the
// uploader does through its spare buffer.
func (f *fakeDevice) directer(dst []byte) func(off, n, at int) error {
	return func(off, n, at int) error {
		if off < 0 || off+n > len(f.mapped) {
			return fmt.Errorf("direct copy of [%d, %d) outside the file", off, off+n)
		}
		copy(dst[at:at+n], f.mapped[off:off+n])
		f.mu.Lock()
		f.direct += n
		f.mu.Unlock()
		return nil
	}
}

// testFile is a mapping of random bytes and tensors laid over it: some
// inside a chunk, some across two or three, a gap with no tensor.
func testFile(t *testing.T) (mapped []byte, spans []Span, chunk int) {
	chunk = os.Getpagesize()
	mapped = make([]byte, 12*chunk+100)
	for i := range mapped {
		mapped[i] = byte(rand.IntN(256))
	}
	cuts := []int{40, 100, chunk - 8, chunk + 50, 3*chunk + 7, 3*chunk + 9, 4 * chunk, 5*chunk - 1}
	for i := 1; i < len(cuts); i++ {
		spans = append(spans, Span{cuts[i-1], cuts[i]})
	}
	// Chunks 5 and 6 hold no tensor; then tensors to the end.
	spans = append(spans, Span{7 * chunk, 7*chunk + 1}, Span{7*chunk + 1, 10*chunk + 3}, Span{10*chunk + 3, len(mapped)})
	return mapped, spans, chunk
}

func loadAll(t *testing.T, w *window[*fakeReg], f *fakeDevice, spans []Span, order []int) {
	t.Helper()
	for _, i := range order {
		s := spans[i]
		dst := make([]byte, s.End-s.Start)
		require.NoError(t, w.load(s, f.copier(dst), f.directer(dst)))
		require.Equal(t, f.mapped[s.Start:s.End], dst, "tensor %d", i)
	}
}

func TestWindowInFileOrder(t *testing.T) {
	mapped, spans, chunk := testFile(t)
	f := newFakeDevice(t, mapped)
	w := newWindow(mapped, Transfer{Chunk: chunk, Workers: 2, Ahead: 2}, spans, f.register, f.release)
	order := make([]int, len(spans))
	for i := range order {
		order[i] = i
	}
	loadAll(t, w, f, spans, order)
	assert.Empty(t, w.close(), "every chunk was released as its last tensor loaded")
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Empty(t, f.live)
	assert.Equal(t, 11, f.regs, "each chunk that holds tensors registered once; the two empty ones never")
	assert.Equal(t, f.regs, f.frees, "close waited for the releases")
	assert.LessOrEqual(t, f.maxLive, 6, "at most the four chunks of the largest tensor and two ahead")
	st := w.readStats()
	total := 0
	for _, s := range spans {
		total += s.End - s.Start
	}
	assert.Equal(t, int64(total), st.Registered, "every tensor's bytes")
	assert.Equal(t, 11, st.Chunks)
	assert.NoError(t, st.Fallback)
}

// TestWindowAliases: two tensors over the same bytes count once, so that
// their chunks are still released once both have loaded.
func TestWindowAliases(t *testing.T) {
	mapped, spans, chunk := testFile(t)
	f := newFakeDevice(t, mapped)
	aliased := append(slices.Clone(spans), spans[3], spans[9])
	w := newWindow(mapped, Transfer{Chunk: chunk, Workers: 2, Ahead: 2}, aliased, f.register, f.release)
	order := make([]int, len(aliased))
	for i := range order {
		order[i] = i
	}
	loadAll(t, w, f, aliased, order)
	assert.Empty(t, w.close(), "every chunk was released")
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Empty(t, f.live)
}

func TestWindowKeepsUntilClose(t *testing.T) {
	mapped, spans, chunk := testFile(t)
	f := newFakeDevice(t, mapped)
	w := newWindow(mapped, Transfer{Chunk: chunk, Keep: true}, spans, f.register, f.release)
	loadAll(t, w, f, spans, []int{2, 0, 1, 3, 4, 5, 6, 7, 8, 9, 2, 9})
	assert.Len(t, w.close(), 11, "every chunk that holds tensors, registered once and kept")
	assert.Zero(t, f.frees)
	assert.Equal(t, 11, f.regs)
}

func TestWindowAheadIsBounded(t *testing.T) {
	mapped, spans, chunk := testFile(t)
	f := newFakeDevice(t, mapped)
	w := newWindow(mapped, Transfer{Chunk: chunk, Workers: 3, Ahead: 2}, spans, f.register, f.release)
	loadAll(t, w, f, spans, []int{0})
	// The workers stop at the limit: chunks 1 and 2 (chunk 0 was in use,
	// and stays: tensors 1 and 2 are still to load from it).
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.next >= w.limit && w.cs[1].state == chunkReady && w.cs[2].state == chunkReady
	}, 5*time.Second, time.Millisecond)
	f.mu.Lock()
	var los []int
	for lo := range f.live {
		los = append(los, lo/chunk)
	}
	f.mu.Unlock()
	slices.Sort(los)
	assert.Equal(t, []int{0, 1, 2}, los)
	held := w.close()
	assert.Len(t, held, 3, "close hands back what is still registered")
	for _, r := range held {
		f.unregister(r)
	}
	dst := make([]byte, 100)
	assert.ErrorIs(t, w.load(spans[1], f.copier(dst), f.directer(dst)), errClosing)
}

func TestWindowConcurrentAndRepeated(t *testing.T) {
	mapped, spans, chunk := testFile(t)
	f := newFakeDevice(t, mapped)
	f.delay, f.async = 200*time.Microsecond, true
	w := newWindow(mapped, Transfer{Chunk: chunk, Workers: 2, Ahead: 1}, spans, f.register, f.release)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for _, i := range rand.Perm(len(spans)) {
				if (i+g)%3 == 0 {
					continue
				}
				s := spans[i]
				dst := make([]byte, s.End-s.Start)
				if err := w.load(s, f.copier(dst), f.directer(dst)); err != nil {
					t.Error(err)
					return
				}
				if !slices.Equal(f.mapped[s.Start:s.End], dst) {
					t.Errorf("tensor %d differs", i)
				}
			}
		})
	}
	wg.Wait()
	// Every tensor was loaded at least once: nothing is left registered
	// but chunks a repeat load registered again and released again.
	assert.Empty(t, w.close())
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Empty(t, f.live)
	assert.Equal(t, f.regs, f.frees)
	assert.GreaterOrEqual(t, f.regs, 11)
	t.Logf("%d registrations of %d chunks of %d bytes", f.regs, len(w.cs), chunk)
}

func TestWindowFallsBackWhenRegistrationFails(t *testing.T) {
	mapped, spans, chunk := testFile(t)
	f := newFakeDevice(t, mapped)
	f.failAt = 3 * chunk
	w := newWindow(mapped, Transfer{Chunk: chunk, Workers: 2, Ahead: 8}, spans, f.register, f.release)
	staged := false
	for _, s := range spans {
		dst := make([]byte, s.End-s.Start)
		err := w.load(s, f.copier(dst), f.directer(dst))
		if err != nil {
			assert.ErrorIs(t, err, errStage)
			assert.ErrorIs(t, err, errFakeRefused, "the cause is kept")
			staged = true
			continue
		}
		assert.False(t, staged, "once registration failed, every load stages")
		assert.Equal(t, mapped[s.Start:s.End], dst)
	}
	assert.True(t, staged)
	assert.ErrorIs(t, w.readStats().Fallback, errFakeRefused)
	for _, r := range w.close() {
		f.unregister(r)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Empty(t, f.live, "nothing left registered")
}

// TestWindowWithoutRoom holds at most two chunks at once, with loads that
// jump about the file: the workers release chunks read ahead for loads that
// went elsewhere, loads copy directly where no holder is free, and every
// tensor arrives whole.
func TestWindowWithoutRoom(t *testing.T) {
	mapped, spans, chunk := testFile(t)
	f := newFakeDevice(t, mapped)
	f.room, f.delay, f.async = 2, 100*time.Microsecond, true
	w := newWindow(mapped, Transfer{Chunk: chunk, Workers: 3, Ahead: 4}, spans, f.register, f.release)
	loadAll(t, w, f, spans, []int{9, 0, 5, 1, 8, 2, 7, 3, 6, 4, 0, 9})
	for _, r := range w.close() {
		f.unregister(r)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Empty(t, f.live)
	assert.LessOrEqual(t, f.maxLive, 2)
	assert.Equal(t, f.regs, f.frees)
	t.Logf("%d chunks held, %d bytes copied directly", f.regs, f.direct)
	assert.Positive(t, f.direct, "tensor 9 covers three chunks, one more than the room")
	assert.NoError(t, w.readStats().Fallback, "no room is not a failure")
}

func TestTransferOptions(t *testing.T) {
	page := os.Getpagesize()
	d := Transfer{}.resolved()
	workers := max(4, min(defaultReadWorkers, runtime.NumCPU()-2))
	assert.Equal(t, Transfer{Chunk: defaultReadChunk, Workers: workers, Ahead: defaultReadAhead}, d)
	assert.Equal(t, Transfer{Register: true, Chunk: defaultRegChunk, Workers: defaultRegWorkers, Ahead: defaultRegAhead}, Transfer{Register: true}.resolved())
	assert.Equal(t, 2*page, Transfer{Chunk: page + 1}.resolved().Chunk, "rounded up to pages")
	assert.Equal(t, fmt.Sprintf("read in 4.0 MiB chunks by %d goroutines, 8 ahead", workers), Transfer{}.String())
	assert.Equal(t, workers+defaultReadAhead+2, d.pinnedBuffers())
	assert.Equal(t, "registered in 128 MiB chunks by 2 goroutines, 4 ahead", Transfer{Register: true}.String())
	assert.Equal(t, "staging", Transfer{Staging: true}.String())
	assert.Equal(t, "registered in 8.0 MiB chunks by 2 goroutines, 4 ahead, kept until Close", Transfer{Register: true, Chunk: 8 << 20, Keep: true}.String())
	var o Transfer
	WithTransfer(Transfer{Workers: 4})(&o)
	assert.Equal(t, 4, o.Workers)
	_, err := ReservePinnedBuffers(nil, Transfer{})
	assert.ErrorIs(t, err, errs.ErrDevice, "a nil device is an error, not a crash")
}

// TestMappedFileOnCPU maps a file and loads tensors from it onto the CPU
// device, which reads the mapping whatever the transfer, and checks the
// bad spans, shapes and a closed file.
func TestMappedFileOnCPU(t *testing.T) {
	page := os.Getpagesize()
	data := make([]byte, 3*page+10)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	path := filepath.Join(t.TempDir(), "file.bin")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	m, err := MapFile(path, WithTransfer(Transfer{Chunk: page}))
	require.NoError(t, err)
	assert.Equal(t, path, m.Path())
	assert.Equal(t, data, m.Bytes())
	assert.Equal(t, page, m.Transfer().Chunk)
	m.SetTensors([]Span{{8, 16}, {page - 8, 2*page + 8}, {3 * page, 3*page + 10}})
	cpu := CPU()

	x, err := m.Load(cpu, F32, Span{8, 16}, 2)
	require.NoError(t, err)
	got, err := ToBytes(x)
	require.NoError(t, err)
	assert.Equal(t, data[8:16], got)
	y, err := m.Load(cpu, U8, Span{page - 8, 2*page + 8}, page+16)
	require.NoError(t, err)
	got, err = ToBytes(y)
	require.NoError(t, err)
	assert.Equal(t, data[page-8:2*page+8], got, "across chunks")
	// Blocks: ten bytes are not a Q8_0 block (34); 34 bytes from 0 are.
	_, err = m.LoadQ(cpu, GGMLQ8_0, Span{3 * page, 3*page + 10}, 32)
	assert.ErrorIs(t, err, errs.ErrShape)
	q, err := m.LoadQ(cpu, GGMLQ8_0, Span{0, 34}, 32)
	require.NoError(t, err)
	assert.Equal(t, 34, q.Bytes())
	assert.Equal(t, TransferStats{}, m.TransferStats(), "nothing went to a HIP device")

	_, err = m.Load(cpu, F32, Span{8, 16}, 3)
	assert.ErrorIs(t, err, errs.ErrShape, "8 bytes for 3 f32")
	_, err = m.Load(cpu, F32, Span{len(data) - 4, len(data) + 4}, 2)
	assert.ErrorIs(t, err, errs.ErrArgument)
	assert.ErrorContains(t, err, "outside the file's")
	_, err = m.Load(cpu, F32, Span{8, 4})
	assert.ErrorIs(t, err, errs.ErrArgument, "a reversed span")
	_, err = m.Load(nil, F32, Span{8, 16}, 2)
	assert.ErrorIs(t, err, errs.ErrDevice)

	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "closing twice does nothing")
	assert.Nil(t, m.Bytes())
	_, err = m.Load(cpu, F32, Span{8, 16}, 2)
	assert.ErrorIs(t, err, errs.ErrClosed)
	assert.ErrorContains(t, err, "the file is closed")
	got, err = ToBytes(x)
	require.NoError(t, err)
	assert.Equal(t, data[8:16], got, "loaded tensors outlive the mapping")
	for _, c := range []interface{ Close() error }{x, y, q} {
		c.Close()
	}
}

// TestMapFileErrors: a missing file, a folder and an empty file are
// clear errors.
func TestMapFileErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := MapFile(filepath.Join(dir, "missing.bin"))
	assert.ErrorIs(t, err, errs.ErrNotFound)
	assert.ErrorIs(t, err, os.ErrNotExist, "the cause is kept")
	_, err = MapFile(dir)
	assert.ErrorIs(t, err, errs.ErrFormat)
	assert.ErrorContains(t, err, "a folder, not a file")
	empty := filepath.Join(dir, "empty.bin")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	_, err = MapFile(empty)
	assert.ErrorIs(t, err, errs.ErrFormat)
	assert.ErrorContains(t, err, empty+": an empty file")
}

// TestPinnedSlabs checks the pool's bookkeeping of slabs: FreePinnedBuffers
// frees a slab only once every buffer of it is free, and keeps the free
// buffers of a slab still in use.
func TestPinnedSlabs(t *testing.T) {
	p := &pinnedPool{size: 4 << 20, slabs: map[*hip.PinnedBuffer]*pinnedSlab{}}
	slab := func(k int) *pinnedSlab {
		s := &pinnedSlab{} // no memory: Close of a nil buffer does nothing
		for range k {
			b := &hip.PinnedBuffer{}
			s.bufs = append(s.bufs, b)
			p.slabs[b] = s
		}
		p.n += k
		return s
	}
	a, b := slab(4), slab(2)
	p.free = append(p.free, a.bufs...)
	p.free = append(p.free, b.bufs[1])
	freed, err := p.freeSlabs()
	require.NoError(t, err)
	assert.Equal(t, int64(4*p.size), freed, "slab a, all free")
	assert.Equal(t, []*hip.PinnedBuffer{b.bufs[1]}, p.free, "b's free buffer kept while the other is in use")
	assert.Equal(t, 2, p.n)
	assert.Len(t, p.slabs, 2)
	p.put(b.bufs[0])
	freed, err = p.freeSlabs()
	require.NoError(t, err)
	assert.Equal(t, int64(2*p.size), freed)
	assert.Empty(t, p.free)
	assert.Zero(t, p.n)
	assert.Empty(t, p.slabs)
	b2, err := p.take(1)
	assert.Nil(t, b2)
	assert.NoError(t, err, "room for one more: the caller makes a slab")
	p.n = 1
	_, err = p.take(1)
	assert.ErrorIs(t, err, errNoRoom)
}

// TestMapPopulated checks the mapping loading's slabs use: aligned to
// huge pages, the length asked, written through; in one piece and in
// pieces populated at once (the last one short).
func TestMapPopulated(t *testing.T) {
	for _, n := range []int{448 << 10, 3 << 20, 17<<20 + 4096} {
		m, a, err := mapPopulated(n)
		require.NoError(t, err)
		assert.Len(t, a, n)
		assert.Zero(t, uintptr(unsafe.Pointer(unsafe.SliceData(a)))%(2<<20), "aligned to 2 MiB")
		off := int(uintptr(unsafe.Pointer(&a[0])) - uintptr(unsafe.Pointer(&m[0])))
		for _, i := range []int{0, n / 2, n - 1} {
			assert.Zero(t, a[i], "byte %d of %d: fresh memory reads zero", i, n)
			a[i] = 7
			assert.Equal(t, byte(7), m[off+i], "byte %d of %d, seen through the mapping", i, n)
		}
		require.NoError(t, syscall.Munmap(m))
	}
}
