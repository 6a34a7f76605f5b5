package candle

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/hip"
)

// pool is a HIP device's stream-ordered memory pool: blocks come from
// hipMallocAsync on the device's stream, and a block a storage gives back
// is kept for the next storage of its size class instead of being freed.
// Every op runs on the device's one stream, so a block given back after
// the work that used it was queued can be reused by work queued later: the
// stream orders them. On out-of-memory the pool frees what it keeps and
// tries once more.
type pool struct {
	dev   *HIPDevice
	mu    sync.Mutex
	free  freeBlocks
	stats *memStats
}

// freeBlocks are the blocks a pool keeps for reuse, by size class (the
// device's pool and a graph's private memory, graph.go); the caller holds
// the lock that guards them.
type freeBlocks map[int][]*hip.Buffer

// pop is a kept block of a size class, or nil.
func (f freeBlocks) pop(class int) *hip.Buffer {
	l := f[class]
	if len(l) == 0 {
		return nil
	}
	f[class] = l[:len(l)-1]
	return l[len(l)-1]
}

// closeAll frees every block, in stream order, and returns their bytes.
func (f freeBlocks) closeAll() int64 {
	var n int64
	for class, l := range f {
		for _, buf := range l {
			buf.Close()
			n += int64(class)
		}
	}
	return n
}

// block is a storage's memory on a HIP device: from the device's pool, or
// from a graph's private memory (graph.go) when gm is set.
type block struct {
	buf      *hip.Buffer
	class    int
	pool     *pool
	gm       *graphMem
	released atomic.Bool
}

func (b *block) release() {
	if b.released.CompareAndSwap(false, true) {
		if b.gm != nil {
			b.gm.put(b)
			return
		}
		b.pool.put(b)
	}
}

// sizeClass rounds a request up: to 512 bytes, then to a quarter of its
// power of two (at most 25% more than asked).
func sizeClass(n int) int {
	if n <= 512 {
		return 512
	}
	e := bits.Len(uint(n - 1)) // 2^(e-1) < n <= 2^e
	step := 1 << max(e-3, 9)
	return (n + step - 1) / step * step
}

// get is a block of at least size bytes: from a capture's private memory
// while one runs on the device (graph.go), else from the pool's free
// blocks of the size class, else new.
func (p *pool) get(size int) (*block, error) {
	if gm := p.dev.capture.Load(); gm != nil {
		return gm.get(size)
	}
	class := sizeClass(size)
	if buf := p.take(class); buf != nil {
		p.stats.add(int64(class))
		return &block{buf: buf, class: class, pool: p}, nil
	}
	buf, err := p.alloc(size, class)
	if err != nil {
		return nil, err
	}
	p.stats.add(int64(class))
	return &block{buf: buf, class: class, pool: p}, nil
}

// take is a free block of a size class, if the pool keeps one.
func (p *pool) take(class int) *hip.Buffer {
	p.mu.Lock()
	buf := p.free.pop(class)
	p.mu.Unlock()
	if buf != nil {
		p.stats.cached.Add(-int64(class))
	}
	return buf
}

// alloc is new device memory of a size class, in stream order; on
// out-of-memory the pool frees what it keeps and tries once more.
func (p *pool) alloc(size, class int) (*hip.Buffer, error) {
	buf, err := p.dev.stream.MallocAsync(class)
	if errors.Is(err, hip.ErrOutOfMemory) {
		released := p.trim()
		buf, err = p.dev.stream.MallocAsync(class)
		if err != nil {
			return nil, p.oom(size, released, err)
		}
	}
	if err != nil {
		return nil, err
	}
	p.stats.allocs.Add(1)
	return buf, nil
}

// put keeps a block for reuse. While a capture runs on the device, the
// capture's private memory takes it instead: the captured work may still
// read it when the graph replays, so nothing else may get it.
func (p *pool) put(b *block) {
	if gm := p.dev.capture.Load(); gm != nil {
		b.gm = gm
		gm.put(b)
		return
	}
	p.stats.add(-int64(b.class))
	p.stats.cached.Add(int64(b.class))
	p.mu.Lock()
	p.free[b.class] = append(p.free[b.class], b.buf)
	p.mu.Unlock()
}

// trim frees every block the pool keeps, in stream order, and waits for
// the stream so that the memory is back with the device; it returns the
// bytes freed.
func (p *pool) trim() int64 {
	p.mu.Lock()
	free := p.free
	p.free = freeBlocks{}
	p.mu.Unlock()
	n := free.closeAll()
	p.stats.cached.Add(-n)
	p.dev.stream.Synchronize()
	return n
}

func (p *pool) oom(size int, released int64, err error) error {
	detail := fmt.Sprintf("%s asked on %s", humanize.IBytes(uint64(size)), p.dev)
	if free, total, e := p.dev.dev.MemInfo(); e == nil {
		detail += fmt.Sprintf("; %s free of %s", humanize.IBytes(uint64(free)), humanize.IBytes(uint64(total)))
	}
	detail += fmt.Sprintf("; the pool gave back %s and tried again; live tensors hold %s",
		humanize.IBytes(uint64(released)), humanize.IBytes(uint64(p.stats.inUse.Load())))
	return &Error{Pkg: string(pkg), Op: "alloc", Kind: ErrOutOfMemory, Detail: detail, Err: err}
}
