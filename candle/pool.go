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
	free  map[int][]*hip.Buffer // by size class
	stats *memStats
}

// block is a storage's memory on a HIP device.
type block struct {
	buf      *hip.Buffer
	class    int
	pool     *pool
	released atomic.Bool
}

func (b *block) release() {
	if b.released.CompareAndSwap(false, true) {
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

func (p *pool) get(size int) (*block, error) {
	class := sizeClass(size)
	p.mu.Lock()
	if l := p.free[class]; len(l) > 0 {
		buf := l[len(l)-1]
		p.free[class] = l[:len(l)-1]
		p.mu.Unlock()
		p.stats.cached.Add(-int64(class))
		p.stats.add(int64(class))
		return &block{buf: buf, class: class, pool: p}, nil
	}
	p.mu.Unlock()
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
	p.stats.add(int64(class))
	return &block{buf: buf, class: class, pool: p}, nil
}

func (p *pool) put(b *block) {
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
	p.free = map[int][]*hip.Buffer{}
	p.mu.Unlock()
	var n int64
	for class, l := range free {
		for _, buf := range l {
			buf.Close()
			n += int64(class)
		}
	}
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
	return &Error{Op: "alloc", Kind: ErrOutOfMemory, Detail: detail, Err: err}
}
