package candle

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/miopen"
	"github.com/rocm-go/rocm/rocblas"
)

// HIPDevice is a GPU through HIP: AMD natively, NVIDIA through HIP's
// NVIDIA platform, with the same code. There is one per ordinal, made on
// first use and shared: it owns a non-blocking stream on which every op is
// queued in order, a stream-ordered memory pool, the device's kernels
// (from a KernelCache) and its random-number state.
type HIPDevice struct {
	ordinal int
	dev     *hip.Device
	stream  *hip.Stream
	props   *hip.DeviceProperties
	kc      *KernelCache
	pool    pool
	rng     rngState
	stats   memStats
	fns     atomic.Pointer[map[string]*hip.Function] // by kernel name
	fnsMu   sync.Mutex
	maxGrid uint32 // blocks of a grid-stride loop
	staging staging
	args    sync.Pool

	libs sync.Mutex // guards blas and dnn
	blas *rocblas.Handle
	dnn  *miopen.Handle

	plans dnnPlans // MIOpen descriptors by problem (hipconv.go)

	// capture is the private memory of the capture under way (graph.go),
	// from its rehearsal on; capturing is set while the stream records.
	capture   atomic.Pointer[graphMem]
	capturing atomic.Bool
}

var hipDevices struct {
	mu sync.Mutex
	m  map[int]*HIPDevice
}

// HIP returns the HIP device of an ordinal, opening it on first use.
// Opening includes the driver's setup of its stream-ordered memory pool
// (7-12 ms on an H200), which the process's first allocation would pay
// otherwise: open the device before timing or serving anything.
func HIP(ordinal int) (*HIPDevice, error) {
	const op = "HIP"
	hipDevices.mu.Lock()
	defer hipDevices.mu.Unlock()
	if d := hipDevices.m[ordinal]; d != nil {
		return d, nil
	}
	if err := checkOrdinal(op, ordinal); err != nil {
		return nil, err
	}
	dev, err := hip.GetDevice(ordinal)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	props, err := dev.Properties()
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	stream, err := dev.NewStream(hip.WithStreamFlags(hip.StreamNonBlocking))
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	// A process's first stream-ordered allocation sets up the driver's
	// memory pool: 7.6-11.7 ms on an H200, against 0.03-0.14 ms for each
	// one after (a scratch program, three processes). The device pays it
	// here, not the first op that allocates (a checkpoint's first load, a
	// first token). Best effort: an op that cannot allocate says why.
	if b, err := stream.MallocAsync(512); err == nil {
		b.Close()
	}
	d := &HIPDevice{ordinal: ordinal, dev: dev, stream: stream, props: props, kc: DefaultKernelCache(),
		maxGrid: uint32(max(props.MultiProcessorCount, 1) * 32)}
	d.pool = pool{dev: d, free: freeBlocks{}, stats: &d.stats}
	d.staging.dev = d
	d.args.New = func() any { return new(hip.Args) }
	if hipDevices.m == nil {
		hipDevices.m = map[int]*HIPDevice{}
	}
	hipDevices.m[ordinal] = d
	return d, nil
}

func (d *HIPDevice) String() string { return fmt.Sprintf("hip:%d", d.ordinal) }

// Ordinal is the device's HIP ordinal.
func (d *HIPDevice) Ordinal() int { return d.ordinal }

// HIP is the device as package hip sees it.
func (d *HIPDevice) HIP() *hip.Device { return d.dev }

// Stream is the stream the device's ops are queued on. Work a caller
// queues on it is ordered with the ops.
func (d *HIPDevice) Stream() *hip.Stream { return d.stream }

// Properties are the device's properties, read once.
func (d *HIPDevice) Properties() *hip.DeviceProperties { return d.props }

// KernelCache is the cache the device's kernels come from.
func (d *HIPDevice) KernelCache() *KernelCache { return d.kc }

// Synchronize waits for every op queued on the device.
func (d *HIPDevice) Synchronize() error {
	const op = "HIPDevice.Synchronize"
	if d.capturing.Load() {
		return capturingError(op, d)
	}
	return pkg.Wrap(op, d.stream.Synchronize())
}

// SetSeed restarts the device's random numbers.
func (d *HIPDevice) SetSeed(seed uint64) { d.rng.set(seed) }

// MemoryStats reports the device memory of live storages and what the
// pool keeps for reuse.
func (d *HIPDevice) MemoryStats() MemoryStats { return d.stats.read() }

// ResetPeak starts MemoryStats.Peak again from the bytes in use now, so
// that the next reading is the peak of what ran in between.
func (d *HIPDevice) ResetPeak() { d.stats.resetPeak() }

// ReleaseCache frees the memory the pool keeps for reuse, after the queued
// work, and returns the bytes freed.
// It frees nothing while the device's stream is capturing a graph.
func (d *HIPDevice) ReleaseCache() int64 {
	if d.capturing.Load() {
		return 0
	}
	return d.pool.trim()
}

// Warm loads every kernel module on the device (compiling those the cache
// lacks), so that the first ops run at full speed.
func (d *HIPDevice) Warm() error { return d.kc.Warm(d) }

func (d *HIPDevice) backend() backend { return (*hipBackend)(d) }

// BLAS is the device's rocBLAS handle (cuBLAS on NVIDIA), made on first
// use and bound to the device's stream, so that its products are ordered
// with the ops. It is shared and safe for many goroutines; the device owns
// it (do not Close it). A failure to make it is not remembered: the next
// call tries again.
func (d *HIPDevice) BLAS() (*rocblas.Handle, error) {
	d.libs.Lock()
	defer d.libs.Unlock()
	if d.blas == nil {
		h, err := rocblas.NewHandle(d.stream)
		if err != nil {
			return nil, pkg.Wrap("HIPDevice.BLAS", err)
		}
		d.blas = h
	}
	return d.blas, nil
}

// MIOpen is the device's MIOpen handle (cuDNN on NVIDIA), made on first
// use and bound to the device's stream, as BLAS is.
func (d *HIPDevice) MIOpen() (*miopen.Handle, error) {
	d.libs.Lock()
	defer d.libs.Unlock()
	if d.dnn == nil {
		h, err := miopen.NewHandle(d.stream)
		if err != nil {
			return nil, pkg.Wrap("HIPDevice.MIOpen", err)
		}
		d.dnn = h
	}
	return d.dnn, nil
}

// staging moves host data through a ring of pinned buffers, so that the
// copy into one overlaps the transfers of the others, and no async copy
// ever reads Go memory. Writes go round the ring, so that a write waits
// only for the transfer of stagingSlots writes back, not for the work
// queued since. A buffer is allocated on first use.
type staging struct {
	dev    *HIPDevice
	mu     sync.Mutex
	bufs   [stagingSlots]*hip.PinnedBuffer
	events [stagingSlots]*hip.Event
	used   [stagingSlots]bool
	next   int // the slot a write starts at: consecutive writes rotate
}

const (
	stagingSize  = 16 << 20
	stagingSlots = 4
)

// slot waits until buffer k's last transfer is done, making the buffer on
// first use.
func (s *staging) slot(k int) error {
	if s.bufs[k] == nil {
		b, err := s.dev.dev.MallocHost(stagingSize, hip.HostMallocDefault)
		if err != nil {
			return err
		}
		e, err := s.dev.dev.NewEvent(hip.EventDisableTiming)
		if err != nil {
			b.Close()
			return err
		}
		s.bufs[k], s.events[k] = b, e
	}
	if s.used[k] {
		s.used[k] = false
		return s.events[k].Synchronize()
	}
	return nil
}

// write queues src into buf from byte off; it returns once src is copied
// into pinned memory, before the transfers are done.
func (s *staging) write(buf *hip.Buffer, off int, src []byte) error {
	if s.dev.capturing.Load() {
		return capturingError("upload", s.dev)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, k := 0, s.next; i < len(src); i, k = i+stagingSize, (k+1)%stagingSlots {
		n := min(stagingSize, len(src)-i)
		if err := s.slot(k); err != nil {
			return err
		}
		hostCopy(s.bufs[k].Bytes(), src[i:i+n])
		pin, _ := s.bufs[k].Slice(0, n)
		dst, err := buf.Slice(off+i, n)
		if err != nil {
			return err
		}
		if err := dst.CopyFromHostAsync(pin, s.dev.stream); err != nil {
			return err
		}
		if err := s.events[k].Record(s.dev.stream); err != nil {
			return err
		}
		s.used[k] = true
		s.next = (k + 1) % stagingSlots
	}
	return nil
}

// read copies bytes [off, off+len(dst)) of buf to dst, after the queued
// work, with up to stagingSlots transfers in flight.
func (s *staging) read(buf *hip.Buffer, off int, dst []byte) error {
	if s.dev.capturing.Load() {
		return capturingError("download", s.dev)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	queue := func(i int) error {
		k := i / stagingSize % stagingSlots
		if err := s.slot(k); err != nil {
			return err
		}
		pin, _ := s.bufs[k].Slice(0, min(stagingSize, len(dst)-i))
		src, err := buf.Slice(off+i, pin.Size())
		if err != nil {
			return err
		}
		if err := src.CopyToHostAsync(pin, s.dev.stream); err != nil {
			return err
		}
		s.used[k] = true
		return s.events[k].Record(s.dev.stream)
	}
	ahead := 0 // bytes queued
	for i := 0; i < len(dst); i += stagingSize {
		for ; ahead < len(dst) && ahead < i+stagingSlots*stagingSize; ahead += stagingSize {
			if err := queue(ahead); err != nil {
				return err
			}
		}
		k := i / stagingSize % stagingSlots
		if err := s.slot(k); err != nil {
			return err
		}
		hostCopy(dst[i:], s.bufs[k].Bytes()[:min(stagingSize, len(dst)-i)])
	}
	return nil
}

// hostCopy copies src to the start of dst, over several goroutines when it
// is large: one core's memcpy falls well short of a PCIe link, and reading
// a freshly mapped file adds page faults to it.
func hostCopy(dst, src []byte) {
	const part = 2 << 20
	parts := min(runtime.GOMAXPROCS(0), len(src)/part, 8)
	if parts < 2 {
		copy(dst, src)
		return
	}
	step := (len(src) + parts - 1) / parts
	var wg sync.WaitGroup
	for i := 0; i < len(src); i += step {
		j := min(i+step, len(src))
		wg.Go(func() { copy(dst[i:j], src[i:j]) })
	}
	wg.Wait()
}
