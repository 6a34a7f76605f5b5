package candle

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/hip"
)

// Graph is work captured from a HIP device's stream (a HIP graph, a CUDA
// graph on NVIDIA): Replay queues all of it again with one launch, without
// the host work that queued it the first time. It suits a step that runs
// many times with the same shapes, such as a decode step of a language
// model, whose hundreds of small launches otherwise leave the GPU waiting
// for the host.
//
// A graph replays the same kernels with the same arguments: the same
// device addresses, sizes and launch configurations. Inputs that change
// from replay to replay must live in device memory that the captured
// kernels read (write them before Replay, with Storage.Write say), and the
// outputs land in the same tensors every time.
//
// The memory the captured work allocates is the graph's own: it comes
// from a private pool, which keeps every block until Close, so that no
// other tensor gets memory a replay writes. Tensors that the captured
// function returns (its outputs) keep their memory too; they are the
// caller's to close, after the graph's last replay is done with them.
type Graph struct {
	dev   *HIPDevice
	exec  *hip.GraphExec
	mem   *graphMem
	nodes int

	mu     sync.Mutex
	closed bool
}

// Capture captures fn on a device into a graph: fn is any work on the
// device's tensors (ops, and rocBLAS or flashattn calls queued on its
// stream). It is an error on the CPU device, which runs ops as they are
// called.
func Capture(dev Device, fn func() error) (*Graph, error) {
	switch d := dev.(type) {
	case *HIPDevice:
		return d.Capture(fn)
	case nil:
		return nil, pkg.Errorf("Capture", ErrDevice, "nil device")
	}
	return nil, pkg.Errorf("Capture", ErrDevice, "%s runs ops as they are called: graphs capture the work of a HIP device; call the function directly", dev)
}

// Capture runs fn twice and returns a graph of the work the second run
// queued. The first run is a rehearsal: fn runs eagerly (its work is
// done), which loads every kernel and library handle it uses and sizes
// the graph's private memory; the second runs while the device's stream
// is captured, so that its work is recorded, not run. Replay the graph to
// run that work. fn must therefore queue the same work both times, and
// running its work twice must be harmless (a decode step that writes the
// same keys and values into the same cache rows, say); tensors it makes
// for the caller in the first run, the caller closes before the second.
//
// Both runs allocate from the graph's private memory (see Graph), and
// blocks freed meanwhile go to it, whoever frees them. While fn runs
// under capture, uploads from the host (FromSlice, Storage.Write) and
// reads back (ToSlice, Synchronize) are errors: their host side would not
// be part of the graph. Captures do not nest, and nothing else may use the
// device while one runs: work queued on its stream by any goroutine would
// become part of the graph.
func (d *HIPDevice) Capture(fn func() error) (*Graph, error) {
	const op = "HIPDevice.Capture"
	if fn == nil {
		return nil, pkg.Errorf(op, ErrArgument, "nil function: give the work to capture")
	}
	gm := &graphMem{dev: d, free: freeBlocks{}}
	if !d.capture.CompareAndSwap(nil, gm) {
		return nil, pkg.Errorf(op, ErrArgument, "a capture is under way on %s: captures do not nest; capture the inner work as part of the outer one", d)
	}
	fail := func(err error) (*Graph, error) {
		d.capture.Store(nil)
		gm.close()
		return nil, err
	}
	if err := fn(); err != nil {
		return fail(pkg.Wrapf(op, err, "the rehearsal"))
	}
	gm.seal()
	// A capture must end on the thread it began on (outside CUDA's
	// relaxed mode), and the goroutine's cgo calls are on its thread.
	runtime.LockOSThread()
	d.capturing.Store(true)
	if err := d.stream.BeginCapture(hip.StreamCaptureModeGlobal); err != nil {
		d.capturing.Store(false)
		runtime.UnlockOSThread()
		return fail(pkg.Wrap(op, err))
	}
	ferr := fn()
	g, err := d.stream.EndCapture()
	d.capturing.Store(false)
	runtime.UnlockOSThread()
	if ferr != nil || err != nil {
		if g != nil {
			g.Close()
		}
		if ferr != nil {
			return fail(pkg.Wrapf(op, ferr, "under capture"))
		}
		return fail(pkg.Wrap(op, err))
	}
	nodes, err := g.NodeCount()
	var exec *hip.GraphExec
	if err == nil {
		exec, err = g.Instantiate()
	}
	g.Close()
	if err != nil {
		return fail(pkg.Wrap(op, err))
	}
	// Blocks freed from now on go back to where they came from; the
	// private ones to the graph.
	d.capture.Store(nil)
	return &Graph{dev: d, exec: exec, mem: gm, nodes: nodes}, nil
}

// Replay queues the captured work on the device's stream, ordered with
// the ops queued before and after it, and returns at once.
func (g *Graph) Replay() error {
	const op = "Graph.Replay"
	if g == nil {
		return pkg.Errorf(op, ErrArgument, "nil graph")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return &Error{Pkg: string(pkg), Op: op, Kind: ErrClosed, Detail: "use of a closed graph", Err: ErrClosed}
	}
	if g.dev.capture.Load() != nil {
		return pkg.Errorf(op, ErrArgument, "a capture is under way on %s: replay the graph before or after it", g.dev)
	}
	return pkg.Wrap(op, g.exec.Launch(g.dev.stream))
}

// Nodes is the number of operations the graph holds (kernels, copies,
// memsets).
func (g *Graph) Nodes() int { return g.nodes }

// Bytes is the private memory the graph keeps: the blocks its captured
// work allocated, whether a tensor (an output) holds one now or not.
func (g *Graph) Bytes() int64 {
	g.mem.mu.Lock()
	defer g.mem.mu.Unlock()
	return g.mem.bytes
}

// Device is the graph's device.
func (g *Graph) Device() *HIPDevice { return g.dev }

// Close waits for the device's queued work (which may replay the graph)
// and frees the graph and its private memory; the memory of outputs still
// open is freed when they close. Closing twice does nothing.
func (g *Graph) Close() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	err := g.exec.Close()
	g.mem.close()
	return pkg.Wrap("Graph.Close", err)
}

// graphMem is a graph's private memory: a pool of blocks by size class
// like the device's, which only the graph's capture takes from. During
// the rehearsal a miss takes a block from the device's pool or allocates
// one; under capture, when allocating would not be captured, a miss is an
// error. The blocks stay until the graph closes.
type graphMem struct {
	dev    *HIPDevice
	mu     sync.Mutex
	free   freeBlocks
	bytes  int64 // every block the graph holds, free or not
	sealed bool  // under capture: no new blocks
	closed bool
}

func (m *graphMem) get(size int) (*block, error) {
	class := sizeClass(size)
	st := &m.dev.stats
	m.mu.Lock()
	if buf := m.free.pop(class); buf != nil {
		m.mu.Unlock()
		st.graphs.Add(-int64(class))
		st.add(int64(class))
		return &block{buf: buf, class: class, gm: m}, nil
	}
	sealed := m.sealed
	m.mu.Unlock()
	if sealed {
		return nil, &Error{Pkg: string(pkg), Op: "alloc", Kind: ErrArgument, Err: errCaptureAlloc,
			Detail: fmt.Sprintf("the captured work asked for %s on %s beyond what its rehearsal used: a captured function must queue the same work each time it runs",
				humanize.IBytes(uint64(size)), m.dev)}
	}
	p := &m.dev.pool
	buf := p.take(class)
	if buf == nil {
		var err error
		if buf, err = p.alloc(size, class); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	m.bytes += int64(class)
	m.mu.Unlock()
	st.add(int64(class))
	return &block{buf: buf, class: class, gm: m}, nil
}

// put keeps a block for the capture; once the graph is closed, it frees
// the block (in stream order).
func (m *graphMem) put(b *block) {
	st := &m.dev.stats
	st.add(-int64(b.class))
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		b.buf.Close()
		return
	}
	if b.pool != nil { // a block of the device's pool, freed during the capture
		b.pool = nil
		m.bytes += int64(b.class)
	}
	m.free[b.class] = append(m.free[b.class], b.buf)
	m.mu.Unlock()
	st.graphs.Add(int64(b.class))
}

func (m *graphMem) seal() {
	m.mu.Lock()
	m.sealed = true
	m.mu.Unlock()
}

// close frees the free blocks (in stream order, after the work queued);
// blocks that tensors still hold are freed when they close.
func (m *graphMem) close() {
	m.mu.Lock()
	free := m.free
	m.free, m.closed = nil, true
	m.mu.Unlock()
	m.dev.stats.graphs.Add(-free.closeAll())
}

// errCaptureAlloc is the cause of an allocation refused under capture.
var errCaptureAlloc = errors.New("allocation under graph capture")

// capturingError is the error of a host transfer or wait while the
// device's stream is captured.
func capturingError(op string, d *HIPDevice) error {
	return pkg.Errorf(op, ErrArgument, "%s is capturing a graph: host copies and waits are not captured; write the graph's inputs before Replay and read its outputs after", d)
}
