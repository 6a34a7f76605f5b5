package flashattn

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/rocm-go/rocm/hip"

	"github.com/rocm-go/rocm/errs"
)

// Handle queues attention on a stream of a device. It is safe for
// concurrent use; the kernels it runs are compiled and loaded once per
// device for every handle.
type Handle struct {
	dev    *hip.Device
	stream *hip.Stream
	target target // the device, for the choice of kernels
	arch   string // the device's gcnArchName, for the CK shim
	alibi  alibiSlopes
	// counters are attn_mmadec's arrival counts where it merges its own
	// splits (fuseCounters of them, zero between launches); nil where they
	// could not be made, and the splits merge in attn_combine.
	counters *hip.Buffer
	// mha is MIOpen's attention for the calls it takes (the MIOpen
	// backend, AMD only).
	mha    mhaState
	closed atomic.Bool
	// occupancy holds the blocks of each kernel (by name) the device runs
	// at once: see slots.
	occupancy sync.Map
}

// NewHandle returns a handle that queues its work on s, which must stay
// open while the handle uses it. On NVIDIA it keeps 64 KiB of device
// memory, allocated on s and freed by Close, for the decode steps whose
// kernel merges its own splits (an MHA row of head dim 128 or less, at
// most 8 splits): graphs that captured such calls of one handle share it,
// so run them one at a time. A handle made while s captures a graph has
// none, and its decode steps merge their splits in a second kernel.
func NewHandle(s *hip.Stream) (*Handle, error) {
	const op = "NewHandle"
	if s == nil {
		return nil, pkg.Errorf(op, errs.ErrArgument, "nil stream: a handle queues its work on a stream of its device")
	}
	if s.Closed() {
		return nil, &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrClosed, Detail: "the stream is closed"}
	}
	dev := s.Device()
	props, err := dev.Properties()
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	h := &Handle{dev: dev, stream: s, target: newTarget(compileTarget(props.ArchName), props.MultiProcessorCount), arch: props.ArchName}
	h.target.slots = h.slots
	h.mha.off = mhaOff()
	if h.target.mc == MatrixCore { // attn_mmadec's
		h.counters = newCounters(s)
	}
	return h, nil
}

// fuseCounters bounds the (batch entry, KV head, row block) triples of an
// attn_mmadec launch that merges its own splits; larger launches run
// attn_combine after it.
const fuseCounters = 1 << 14

// newCounters allocates and zeroes a handle's counters in s's order, or
// returns nil: under a stream capture (allocating would end it), or when
// the device refuses; the handle's decode splits then merge in
// attn_combine.
func newCounters(s *hip.Stream) *hip.Buffer {
	if capturing(s) {
		return nil
	}
	b, err := s.MallocAsync(fuseCounters * 4)
	if err != nil {
		return nil
	}
	if err := b.MemsetAsync(0, s); err != nil {
		b.Close()
		return nil
	}
	return b
}

// capturing reports whether s captures a graph, or cannot say: work that
// allocates or waits for the device would end a capture.
func capturing(s *hip.Stream) bool {
	st, err := s.CaptureStatus()
	return err != nil || st != hip.StreamCaptureStatusNone
}

// slots is how many blocks of a kernel (of nthreads threads and shared
// bytes of dynamic shared memory) the device runs at once, from the
// kernel's occupancy (its registers and shared memory), asked once a
// kernel; 0 if the kernel cannot be loaded (its launch says why).
func (h *Handle) slots(kernel string, nthreads, shared int) int {
	if n, ok := h.occupancy.Load(kernel); ok {
		return n.(int)
	}
	n := 0
	if fn, err := kernels.Function(h.dev, kernel); err == nil && optIn(fn, shared) == nil {
		if grid, block, err := fn.MaxPotentialBlockSize(shared, nthreads); err == nil && block > 0 {
			n = grid * block / nthreads
		}
	}
	h.occupancy.Store(kernel, n)
	return n
}

// Stream is the stream the handle queues its work on.
func (h *Handle) Stream() *hip.Stream { return h.stream }

// Device is the stream's device.
func (h *Handle) Device() *hip.Device { return h.dev }

// Close ends the handle; the stream and the loaded kernels stay. ALiBi
// slopes kept on the device for the CK backend, and the decode merge's
// counters (NewHandle), are freed once the stream's work is done: a graph
// that captured the handle's calls must not run after. Closing twice does
// nothing.
func (h *Handle) Close() error {
	if h == nil || h.closed.Swap(true) {
		return nil
	}
	// Each release runs whether or not one before it failed.
	errs := []error{h.alibi.release(h.stream), h.mha.close()}
	if h.counters != nil {
		errs = append(errs, h.counters.Close()) // in stream order
	}
	if err := errors.Join(errs...); err != nil {
		return pkg.Wrap("Handle.Close", err)
	}
	return nil
}

func (h *Handle) alive(op string) error {
	if h == nil {
		return pkg.Errorf(op, errs.ErrArgument, "nil handle")
	}
	if h.closed.Load() || h.stream.Closed() {
		return &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrClosed, Detail: "use of a closed handle (or of its closed stream)"}
	}
	return nil
}

// Forward queues out = attention(q, k, v) for a dense batch: q and out
// (batch, s_q, h_q, d), k and v (batch, s_kv, h_kv, d).
func (h *Handle) Forward(q, k, v, out Tensor, p Params) (Backend, error) {
	const op = "Handle.Forward"
	if err := h.alive(op); err != nil {
		return 0, err
	}
	pr, err := forwardProblem(op, q, k, v, out)
	if err != nil {
		return 0, err
	}
	return h.run(op, &pr, &p)
}

// ForwardVarlen queues attention for a variable-length batch packed along
// the seq dim: q and out (1, total_q, h_q, d), k and v (1, total_kv, h_kv,
// d), sequence b being the rows that seqs gives it. Causal masks and
// windows align each sequence's own ends.
func (h *Handle) ForwardVarlen(q, k, v, out Tensor, seqs Varlen, p Params) (Backend, error) {
	const op = "Handle.ForwardVarlen"
	if err := h.alive(op); err != nil {
		return 0, err
	}
	pr, err := varlenProblem(op, q, k, v, out, &seqs)
	if err != nil {
		return 0, err
	}
	return h.run(op, &pr, &p)
}

// Decode queues attention of q (batch, s_q, h_q, d) over a paged KV cache,
// into out (like q): the decode step of a server (s_q 1, or a few
// speculative tokens), whose keys are split across the device
// (Params.Splits, automatic by default) and merged. With
// PagedKV.MaxSeqLen and Params.Workspace, the call reads its lengths and
// pages from device memory only and allocates nothing, so that a graph
// captured from it replays every later step of the same shapes.
func (h *Handle) Decode(q Tensor, cache PagedKV, out Tensor, p Params) (Backend, error) {
	const op = "Handle.Decode"
	if err := h.alive(op); err != nil {
		return 0, err
	}
	pr, err := pagedProblem(op, q, &cache, out)
	if err != nil {
		return 0, err
	}
	return h.run(op, &pr, &p)
}

// DecodeWorkspace is the bytes of device memory that the split-KV partials
// of Decode(q, cache, out, p) take (0 when the call does not split): the
// Params.WorkspaceBytes of a Decode that allocates nothing. With
// PagedKV.MaxSeqLen it is the same for every step the launch serves. The
// split count depends on the kernel's occupancy, so the first call for a
// kernel loads it (compiling it on a cold kernel cache), as Decode would.
func (h *Handle) DecodeWorkspace(q Tensor, cache PagedKV, out Tensor, p Params) (int, error) {
	const op = "Handle.DecodeWorkspace"
	if err := h.alive(op); err != nil {
		return 0, err
	}
	pr, err := pagedProblem(op, q, &cache, out)
	if err != nil {
		return 0, err
	}
	pl, err := newPlan(op, &pr, &p, h.target)
	if err != nil || pl.empty || pl.splits <= 1 {
		return 0, err
	}
	return pl.workspace, nil
}

// optedIn holds the kernels whose launches may take more than 48 KiB of
// dynamic shared memory (NVIDIA wants each to opt in once).
var optedIn sync.Map // *hip.Function → true

// optIn lets fn's launches (and its occupancy queries) take shared bytes of
// dynamic shared memory: past 48 KiB, once a kernel.
func optIn(fn *hip.Function, shared int) error {
	if shared <= 48<<10 {
		return nil
	}
	if _, ok := optedIn.Load(fn); ok {
		return nil
	}
	if err := fn.SetMaxDynamicSharedMemory(shared); err != nil {
		return err
	}
	optedIn.Store(fn, true)
	return nil
}

// argsPool holds the launches' argument buffers, reused across calls and
// handles.
var argsPool = sync.Pool{New: func() any { return new(hip.Args) }}

func (h *Handle) run(op string, pr *problem, p *Params) (Backend, error) {
	pl, err := newPlan(op, pr, p, h.target)
	if err != nil {
		return 0, err
	}
	if pl.empty {
		return pl.backend, nil
	}
	if ran, err := h.runCK(op, pr, p, &pl); ran {
		return CK, err
	}
	if ran, err := h.runMIOpen(op, pr, &pl); ran {
		return MIOpen, err
	}
	fn, err := kernels.Function(h.dev, pl.kernel)
	if err != nil {
		return 0, pkg.Wrap(op, err)
	}
	if err := optIn(fn, pl.shared); err != nil {
		return 0, pkg.Wrap(op, err)
	}
	if p.Workspace%4 != 0 || p.WorkspaceBytes < 0 || (p.Workspace == 0) != (p.WorkspaceBytes == 0) {
		return 0, pkg.Errorf(op, errs.ErrArgument, "Params.Workspace %#x of %d bytes: want both zero, or float32-aligned memory and its size", uint64(p.Workspace), p.WorkspaceBytes)
	}
	if pl.splits > 1 {
		base := p.Workspace
		if base == 0 {
			ws, err := h.stream.MallocAsync(pl.workspace)
			if err != nil {
				return 0, pkg.Wrap(op, err)
			}
			// Freed in stream order, after the kernels that use it.
			defer ws.Close()
			base = ws.Ptr()
		} else if p.WorkspaceBytes < pl.workspace {
			return 0, pkg.Errorf(op, errs.ErrArgument, "Params.WorkspaceBytes %d: the call's %d split-KV partials take %d bytes", p.WorkspaceBytes, pl.splits, pl.workspace)
		}
		pl.kp.OPart = uint64(base)
		pl.kp.LSEPart = uint64(base.Add(pl.lsePartOff))
	}
	// attn_mmadec merges its own splits when the handle's counters cover
	// the launch; attn_combine merges them otherwise.
	fused := pl.fusable && h.counters != nil && int64(pl.grid.X)*int64(pl.grid.Y)*int64(pr.batch) <= fuseCounters
	if fused {
		pl.kp.Flags |= flagFuse
		pl.kp.Counters = uint64(h.counters.Ptr())
	}
	// The launches copy the arguments: the buffer goes back to the pool
	// when run returns.
	a := argsPool.Get().(*hip.Args)
	defer argsPool.Put(a)
	hip.ArgValue(a.Reset(), pl.kp)
	// Every kernel here waits for the stream's previous kernel first
	// thing (FA_GRID_WAIT), so each may launch before that one ends.
	if err := fn.Launch(hip.LaunchConfig{Grid: pl.grid, Block: hip.Dim3{X: uint32(pl.threads)}, SharedMem: uint32(pl.shared), Stream: h.stream, EarlyLaunch: true}, a); err != nil {
		return 0, pkg.Wrap(op, err)
	}
	if pl.splits > 1 && !fused {
		cf, err := kernels.Function(h.dev, pl.combine)
		if err != nil {
			return 0, pkg.Wrap(op, err)
		}
		// A block per (row, head).
		grid := uint32(min(int64(pl.rows)*int64(pr.hq), 65535))
		if err := cf.Launch(hip.LaunchConfig{Grid: hip.Dim3{X: grid}, Block: hip.Dim3{X: threads}, Stream: h.stream, EarlyLaunch: true}, a); err != nil {
			return 0, pkg.Wrap(op, err)
		}
	}
	return pl.backend, nil
}
