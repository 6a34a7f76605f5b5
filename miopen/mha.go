package miopen

/*
#include "helpers.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/bind"
)

// MHAParams configure a multi-head attention forward pass.
type MHAParams struct {
	// Scale multiplies Q·Kᵀ before the softmax, commonly 1/sqrt(D).
	Scale float32
	// Causal masks each query from the keys after it (top-left aligned).
	Causal bool
}

// MHASolution is one solution a Find returned for an MHA problem.
type MHASolution struct {
	Time      time.Duration
	Workspace int    // bytes
	SolverID  uint64 // MIOpen's solver
}

// MHAForward is MIOpen's fused multi-head attention forward problem (the
// Find 2.0 API): O = softmax(Scale · Q·Kᵀ) · V over tensors of dimensions
// N x H x S x D (batch, heads, sequence, head size), plus the row maxima M
// and inverse row sums ZInv of the softmax (N x H x S x 1, float).
//
// MIOpen 6.4 solves it on CDNA GPUs (gfx90a, gfx94x; its CK solver takes
// half precision, equal head counts, D ≤ 256 and a multiple of 8); Find
// returns ErrNotImplemented elsewhere. Legacy cuDNN has no equivalent:
// on the NVIDIA platform NewMHAForward returns ErrNotImplemented.
//
// Dropout is off and the fp8 scale and descale factors are 1: MHAForward
// keeps those scalars, the maxima and the amax outputs in device memory of
// its own, on the device of the first handle it runs on.
type MHAForward struct {
	mu        sync.Mutex
	p         MHAParams
	q, k, v   *TensorDescriptor
	o         *TensorDescriptor
	problem   C.miopenProblem_t
	scalar    *TensorDescriptor // 1x1x1x1 float
	index     *TensorDescriptor // 1x1x1x1 int64
	stats     *TensorDescriptor // N x H x S x 1 float
	solutions []C.miopenSolution_t
	found     []MHASolution
	scratch   *hip.Buffer
	life      bind.Lifetime
}

// The scalars' offsets in the scratch buffer, and the maxima's.
const (
	mhaDescaleQ = 16 * iota
	mhaDescaleK
	mhaDescaleV
	mhaDescaleS
	mhaScaleS
	mhaScaleO
	mhaDropout
	mhaAmaxO
	mhaAmaxS
	mhaSeed
	mhaOffset
	mhaStats = 256
)

// mhaDescs caches one MHA descriptor per scale: MIOpen 6.4 has no call to
// destroy one.
var mhaDescs struct {
	mu sync.Mutex
	m  map[float32]C.miopenMhaDescriptor_t
}

func mhaDescriptor(scale float32) (C.miopenMhaDescriptor_t, error) {
	mhaDescs.mu.Lock()
	defer mhaDescs.mu.Unlock()
	if d, ok := mhaDescs.m[scale]; ok {
		return d, nil
	}
	var d C.miopenMhaDescriptor_t
	if err := check("miopenCreateMhaDescriptor", C.rg_miopenCreateMhaDescriptor(&d)); err != nil {
		return nil, err
	}
	if err := check("miopenSetMhaDescriptor", C.rg_miopenSetMhaDescriptor(d, C.float(scale))); err != nil {
		return nil, err
	}
	if mhaDescs.m == nil {
		mhaDescs.m = map[float32]C.miopenMhaDescriptor_t{}
	}
	mhaDescs.m[scale] = d
	return d, nil
}

// MHAScale reads back the scale of the MHA descriptor the library keeps
// for scale (miopenGetMhaDescriptor): a round trip through MIOpen.
func MHAScale(scale float32) (float32, error) {
	if err := ensure(); err != nil {
		return 0, err
	}
	d, err := mhaDescriptor(scale)
	if err != nil {
		return 0, err
	}
	var s C.float
	err = check("miopenGetMhaDescriptor", C.rg_miopenGetMhaDescriptor(d, &s))
	return float32(s), err
}

// errNoMHA is the error of multi-head attention on the NVIDIA platform.
func errNoMHA(op string) error {
	return notImplemented(op, "multi-head attention (MIOpen's Find 2.0 MHA) has no legacy-cuDNN equivalent on the NVIDIA platform")
}

// NewMHAForward describes the problem (miopenCreateMhaProblem and
// miopenSetProblemTensorDescriptor for each tensor). q and o are
// N x H x S x D, k and v N x H x S_k x D, all of one type.
func NewMHAForward(q, k, v, o *TensorDescriptor, p MHAParams) (*MHAForward, error) {
	const op = "NewMHAForward"
	for i, t := range []*TensorDescriptor{q, k, v, o} {
		if err := t.alive(op); err != nil {
			return nil, withDetail(err, "QKVO"[i:i+1])
		}
		if len(t.dims) != 4 || t.dtype != q.dtype {
			return nil, invalid(op, "%c is %s: attention takes 4-D N x H x S x D tensors of one type", "QKVO"[i], t)
		}
	}
	qd, kd := q.dims, k.dims
	if !slices.Equal(qd, o.dims) || !slices.Equal(kd, v.dims) || qd[0] != kd[0] || qd[1] != kd[1] || qd[3] != kd[3] {
		return nil, invalid(op, "Q %v, K %v, V %v, O %v: Q and O agree, K and V agree, and all share N, H and D", qd, kd, v.dims, o.dims)
	}
	if math.IsNaN(float64(p.Scale)) || math.IsInf(float64(p.Scale), 0) || p.Scale == 0 {
		return nil, invalid(op, "scale %v", p.Scale)
	}
	if err := ensure(); err != nil {
		return nil, err
	}
	if LoadedPlatform() == hip.PlatformNVIDIA {
		return nil, errNoMHA(op)
	}
	d, err := mhaDescriptor(p.Scale)
	if err != nil {
		return nil, err
	}
	m := &MHAForward{p: p, q: q, k: k, v: v, o: o}
	if err := check("miopenCreateMhaProblem", C.rg_miopenCreateMhaProblem(&m.problem, d, C.miopenProblemDirectionForward)); err != nil {
		return nil, err
	}
	if err := m.describe(); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

func (m *MHAForward) describe() error {
	var err error
	if m.scalar, err = NewTensor4D(DataTypeFloat, 1, 1, 1, 1); err != nil {
		return err
	}
	if m.index, err = NewTensor4D(DataTypeInt64, 1, 1, 1, 1); err != nil {
		return err
	}
	if m.stats, err = NewTensor4D(DataTypeFloat, m.q.dims[0], m.q.dims[1], m.q.dims[2], 1); err != nil {
		return err
	}
	for _, a := range m.arguments() {
		if err := check("miopenSetProblemTensorDescriptor", C.rg_miopenSetProblemTensorDescriptor(m.problem, a.id, a.desc.d)); err != nil {
			return withDetail(err, fmt.Sprintf("argument %d: %s", a.id, a.desc))
		}
	}
	return nil
}

type mhaArgument struct {
	id     C.miopenTensorArgumentId_t
	desc   *TensorDescriptor
	offset int // in the scratch buffer, -1 for the caller's tensors
}

func (m *MHAForward) arguments() []mhaArgument {
	return []mhaArgument{
		{C.miopenTensorMhaQ, m.q, -1}, {C.miopenTensorMhaK, m.k, -1}, {C.miopenTensorMhaV, m.v, -1}, {C.miopenTensorMhaO, m.o, -1},
		{C.miopenTensorMhaDescaleQ, m.scalar, mhaDescaleQ}, {C.miopenTensorMhaDescaleK, m.scalar, mhaDescaleK},
		{C.miopenTensorMhaDescaleV, m.scalar, mhaDescaleV}, {C.miopenTensorMhaDescaleS, m.scalar, mhaDescaleS},
		{C.miopenTensorMhaScaleS, m.scalar, mhaScaleS}, {C.miopenTensorMhaScaleO, m.scalar, mhaScaleO},
		{C.miopenTensorMhaDropoutProbability, m.scalar, mhaDropout}, {C.miopenTensorMhaDropoutSeed, m.index, mhaSeed},
		{C.miopenTensorMhaDropoutOffset, m.index, mhaOffset}, {C.miopenTensorMhaAmaxO, m.scalar, mhaAmaxO},
		{C.miopenTensorMhaAmaxS, m.scalar, mhaAmaxS}, {C.miopenTensorMhaM, m.stats, mhaStats},
		{C.miopenTensorMhaZInv, m.stats, mhaStats + align256(m.stats.Bytes())},
	}
}

func align256(n int) int { return (n + 255) &^ 255 }

// Find runs MIOpen's Find for the problem on the handle's device
// (miopenFindSolutions) and keeps the solutions, fastest first.
func (m *MHAForward) Find(h *Handle) ([]MHASolution, error) {
	const op = "MHAForward.Find"
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.life.Closed() {
		return nil, closedError(op)
	}
	if err := h.lock(op); err != nil {
		return nil, err
	}
	defer h.mu.Unlock()
	sols := make([]C.miopenSolution_t, 16)
	var n C.size_t
	err := h.callLocked("miopenFindSolutions", func() C.miopenStatus_t {
		return C.rg_miopenFindSolutions_on(h.c(), h.h, m.problem, nil, &sols[0], &n, C.size_t(len(sols)))
	})
	if err != nil {
		return nil, withDetail(err, fmt.Sprintf("attention of Q %s (MIOpen 6.4 solves it on CDNA GPUs)", m.q))
	}
	if n == 0 {
		return nil, notImplemented("miopenFindSolutions", "no solution for attention of Q %s on this GPU (MIOpen 6.4 solves it on CDNA GPUs)", m.q)
	}
	m.destroySolutions()
	for _, s := range sols[:n] {
		var ws C.size_t
		var t C.float
		var id C.uint64_t
		if err := errors.Join(check("miopenGetSolutionWorkspaceSize", C.rg_miopenGetSolutionWorkspaceSize(s, &ws)),
			check("miopenGetSolutionTime", C.rg_miopenGetSolutionTime(s, &t)),
			check("miopenGetSolutionSolverId", C.rg_miopenGetSolutionSolverId(s, &id))); err != nil {
			for _, s := range sols[:n] {
				C.rg_miopenDestroySolution(s)
			}
			return nil, err
		}
		m.solutions = append(m.solutions, s)
		m.found = append(m.found, MHASolution{Time: time.Duration(float64(t) * float64(time.Millisecond)), Workspace: int(ws), SolverID: uint64(id)})
	}
	return slices.Clone(m.found), nil
}

func (m *MHAForward) destroySolutions() {
	for _, s := range m.solutions {
		C.rg_miopenDestroySolution(s)
	}
	m.solutions, m.found = nil, nil
}

// scratchLocked allocates the scalars and statistics on the handle's
// device on first use.
func (m *MHAForward) scratchLocked(h *Handle) error {
	if m.scratch != nil {
		if m.scratch.Device().Ordinal() != h.dev.Ordinal() {
			return invalid("MHAForward.Run", "the problem's buffers are on device %d, the handle's device is %d", m.scratch.Device().Ordinal(), h.dev.Ordinal())
		}
		return nil
	}
	b, err := h.dev.Malloc(mhaStats + 2*align256(m.stats.Bytes()))
	if err != nil {
		return err
	}
	init := make([]byte, mhaStats)
	for _, off := range []int{mhaDescaleQ, mhaDescaleK, mhaDescaleV, mhaDescaleS, mhaScaleS, mhaScaleO} {
		binary.LittleEndian.PutUint32(init[off:], math.Float32bits(1))
	}
	if err := b.CopyFromHost(init); err != nil {
		b.Close()
		return err
	}
	m.scratch = b
	return nil
}

// Run computes o from q, k and v with the fastest solution of Find,
// running Find first if it has not run (miopenRunSolution). The workspace
// is the handle's.
func (m *MHAForward) Run(h *Handle, q, k, v, o Tensor) error {
	const op = "MHAForward.Run"
	if m == nil {
		return invalid(op, "nil MHAForward")
	}
	m.mu.Lock()
	found := len(m.solutions) > 0
	m.mu.Unlock()
	if !found {
		if _, err := m.Find(h); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.life.Closed() {
		return closedError(op)
	}
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if err := h.checkTensors(op, []string{"q", "k", "v", "o"}, q, k, v, o); err != nil {
		return err
	}
	for i, t := range []Tensor{q, k, v, o} {
		want := []*TensorDescriptor{m.q, m.k, m.v, m.o}[i]
		if !sameShape(t.Desc, want) || !slices.Equal(t.Desc.strides, want.strides) {
			return invalid(op, "%c is %s; the problem was described with %s", "qkvo"[i], t.Desc, want)
		}
	}
	if err := m.scratchLocked(h); err != nil {
		return err
	}
	ws, err := h.workspaceLocked(m.found[0].Workspace)
	if err != nil {
		return err
	}
	args := m.arguments()
	n := len(args)
	if m.p.Causal {
		n++
	}
	// The arguments and the mask live in C memory: the mask is read on the
	// host through a pointer in the array.
	mem := C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.miopenTensorArgument_t{}))+C.size_t(unsafe.Sizeof(C.int(0))))
	if mem == nil {
		return &Error{Op: op, Status: StatusAllocFailed, Detail: "argument array"}
	}
	defer C.free(mem)
	arr := unsafe.Slice((*C.miopenTensorArgument_t)(mem), n)
	base := devPtr(m.scratch)
	for i, a := range args {
		arr[i].id = a.id
		switch {
		case a.offset >= 0:
			arr[i].buffer = unsafe.Add(base, a.offset)
		default:
			arr[i].buffer = []Tensor{q, k, v, o}[i].ptr()
		}
	}
	if m.p.Causal {
		mask := (*C.int)(unsafe.Add(mem, n*int(unsafe.Sizeof(C.miopenTensorArgument_t{}))))
		*mask = 1 // miopenMhaMaskCausal
		arr[n-1].id = C.miopenTensorMhaMask
		arr[n-1].buffer = unsafe.Pointer(mask)
	}
	err = h.callLocked("miopenRunSolution", func() C.miopenStatus_t {
		return C.rg_miopenRunSolution_on(h.c(), h.h, m.solutions[0], C.size_t(n), &arr[0], devPtr(ws), wsSize(ws))
	})
	keepAlive(q, k, v, o)
	runtime.KeepAlive(ws)
	return err
}

// Stats returns views of the softmax's row maxima M and inverse row sums
// ZInv of the last Run (N x H x S x 1, float).
func (m *MHAForward) Stats() (maxima, zInv Tensor, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.scratch == nil {
		return Tensor{}, Tensor{}, invalid("MHAForward.Stats", "Run has not run")
	}
	n := m.stats.Bytes()
	mb, err := m.scratch.Slice(mhaStats, n)
	if err != nil {
		return Tensor{}, Tensor{}, err
	}
	zb, err := m.scratch.Slice(mhaStats+align256(n), n)
	if err != nil {
		return Tensor{}, Tensor{}, err
	}
	return Tensor{Desc: m.stats, Data: mb}, Tensor{Desc: m.stats, Data: zb}, nil
}

// Close frees the problem, its solutions, descriptors and device memory.
// Closing twice does nothing.
func (m *MHAForward) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.life.End() {
		return nil
	}
	m.destroySolutions()
	var errs []error
	if m.problem != nil {
		errs = append(errs, check("miopenDestroyProblem", C.rg_miopenDestroyProblem(m.problem)))
	}
	errs = append(errs, m.scalar.Close(), m.index.Close(), m.stats.Close(), m.scratch.Close())
	return errors.Join(errs...)
}
