package flashattn

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/miopen"

	"github.com/rocm-go/rocm/errs"
)

// MIOpen is MIOpen's fused multi-head attention (package miopen's
// MHAForward): on the AMD platform, with MIOpenMHAEnv set to "on", a call
// that the CK shim did not take runs there when MIOpen has a solution for
// it, before rocm-go's kernels. It is off by default: MIOpen 6.4 has two
// solvers, Composable Kernel's FMHA (gfx94x, F16, no mask, q, k, v and out
// packed as N x H x S x D: (b, h, s, d) memory seen as BSHD) and a
// reference one (two GEMMs through an S x S float workspace, slower than
// flashattn's kernels and of the memory flashattn never takes), and no AMD
// GPU was available to the authors of this package to measure which
// calls MIOpen runs faster. It is asked only for dense batches of as many
// queries as keys (the reference solver assumes it; MIOpen's causal mask
// is aligned top-left, which is then flashattn's bottom-right) with as
// many KV heads as query heads, F16 or BF16, without a window, ALiBi,
// soft-capping or a log-sum-exp output. Each shape's problem and MIOpen's
// Find run once a handle; a shape MIOpen has no solution for, and every
// call while the stream captures a graph (MIOpen's allocations would end
// the capture), run rocm-go's kernels. It has run here only against a
// stand-in for MIOpen.
const MIOpen Backend = 17

// MIOpenMHAEnv names the environment variable that, set to "on", lets a
// handle made afterwards run the calls MIOpen's attention covers there.
const MIOpenMHAEnv = "ROCM_GO_MIOPEN_MHA"

// mhaKey is what decides a call's MIOpen problem: the dtype, the shapes
// and strides of q, k, v and out, the mask and the scale.
type mhaKey struct {
	dt              DType
	b, sq, sk, h, d int
	qs, ks, vs, os  [4]int
	causal          bool
	scale           float32
}

// mhaState is a handle's MIOpen side: its MIOpen handle, made on first
// use, each shape's problem, and why MIOpen does not take the others.
type mhaState struct {
	mu       sync.Mutex
	off      bool   // MIOpenMHAEnv is not "on", or not the AMD platform
	failed   string // why there is no MIOpen handle, once that failed
	h        *miopen.Handle
	problems map[mhaKey]*mhaProblem
	declined map[mhaKey]string
}

// mhaMaxProblems bounds the shapes of a handle that MIOpen runs.
const mhaMaxProblems = 64

// mhaProblem is a shape's MIOpen problem and its operands' descriptors
// (q, k, v, out).
type mhaProblem struct {
	fwd   *miopen.MHAForward
	descs [4]*miopen.TensorDescriptor
}

// mhaOff reports whether a handle made now keeps off MIOpen's attention:
// MIOpenMHAEnv is not "on", or the platform is not AMD's. MIOpen itself
// loads on first use.
func mhaOff() bool {
	return os.Getenv(MIOpenMHAEnv) != "on" || hip.LoadedPlatform() != hip.PlatformAMD
}

// mhaDType is MIOpen's data type of a flashattn dtype, ok false for those
// MIOpen's attention does not take.
func mhaDType(dt DType) (miopen.DataType, bool) {
	switch dt {
	case F16:
		return miopen.DataTypeHalf, true
	case BF16:
		return miopen.DataTypeBFloat16, true
	}
	return 0, false
}

// mhaCase says why MIOpen's attention does not cover a planned call, ""
// when it does, and the call's problem key.
func mhaCase(pr *problem, pl *plan) (mhaKey, string) {
	kp := &pl.kp
	switch {
	case pl.empty:
		return mhaKey{}, "nothing to compute"
	case pl.backend == FlashDecoding:
		return mhaKey{}, "a decode step runs on FlashDecoding"
	case pr.paged != nil || pr.varlen != nil:
		return mhaKey{}, "MIOpen's attention takes dense batches"
	case pr.hq != pr.hkv:
		return mhaKey{}, "MIOpen's attention takes as many KV heads as query heads"
	case kp.Flags&(flagAlibi|flagLSE) != 0 || kp.SoftCap != 0:
		return mhaKey{}, "ALiBi, soft-capping and the log-sum-exp run on rocm-go's kernels"
	case kp.WindowLeft != -1 || (kp.WindowRight != -1 && kp.WindowRight != 0):
		return mhaKey{}, "a window runs on rocm-go's kernels"
	}
	if pr.sq != pr.k.Shape[1] {
		return mhaKey{}, "MIOpen's attention is asked only with as many queries as keys"
	}
	if _, ok := mhaDType(pr.q.DType); !ok {
		return mhaKey{}, fmt.Sprintf("MIOpen's attention takes F16 and BF16, not %s", pr.q.DType)
	}
	causal := kp.WindowRight == 0
	return mhaKey{dt: pr.q.DType, b: pr.batch, sq: pr.sq, sk: pr.k.Shape[1], h: pr.hq, d: pr.d,
		qs: pr.q.strides(), ks: pr.k.strides(), vs: pr.v.strides(), os: pr.out.strides(), causal: causal, scale: kp.Scale}, ""
}

// mhaDesc describes a (b, s, h, d) operand as MIOpen's N x H x S x D.
func mhaDesc(dt miopen.DataType, t Tensor) (*miopen.TensorDescriptor, error) {
	s, st := t.Shape, t.strides()
	return miopen.NewTensorDescriptor(dt, []int{s[0], s[2], s[1], s[3]}, []int{st[0], st[2], st[1], st[3]})
}

// runMIOpen runs the call on MIOpen's attention where it covers it; ran
// false means the call is the other backends'.
func (h *Handle) runMIOpen(op string, pr *problem, pl *plan) (ran bool, err error) {
	ran, _, err = h.tryMIOpen(op, pr, pl)
	return ran, err
}

// tryMIOpen is runMIOpen, and says why MIOpen did not run the call.
func (h *Handle) tryMIOpen(op string, pr *problem, pl *plan) (ran bool, declined string, err error) {
	m := &h.mha
	if m.off {
		return false, "off (" + MIOpenMHAEnv + " is not on, or not the AMD platform)", nil
	}
	key, why := mhaCase(pr, pl)
	if why != "" {
		return false, why, nil
	}
	// MIOpen's Find, and a Run that grows its workspace, allocate and wait
	// for the device: a capture would end. Captured calls take rocm-go's
	// kernels, which a graph replays.
	if capturing(h.stream) {
		return false, "the stream captures a graph (or cannot say), and MIOpen would end the capture", nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if why, ok := m.declined[key]; ok {
		return false, why, nil
	}
	pb := m.problems[key]
	if pb == nil {
		// Each problem keeps device memory of its own (MIOpen's scratch):
		// a handle keeps a bounded number of shapes.
		if len(m.problems) >= mhaMaxProblems {
			return false, fmt.Sprintf("the handle holds MIOpen problems of %d shapes already", mhaMaxProblems), nil
		}
		if pb, why = m.find(h.stream, pr, key); pb == nil {
			if m.declined == nil || len(m.declined) >= 4*mhaMaxProblems {
				m.declined = map[mhaKey]string{}
			}
			m.declined[key] = why
			return false, why, nil
		}
		if m.problems == nil {
			m.problems = map[mhaKey]*mhaProblem{}
		}
		m.problems[key] = pb
	}
	var ts [4]miopen.Tensor
	for i, t := range []Tensor{pr.q, pr.k, pr.v, pr.out} {
		d := pb.descs[i]
		buf, err := h.dev.BufferAt(t.Ptr, d.Bytes())
		if err != nil {
			return true, "", pkg.Wrap(op, err)
		}
		ts[i] = miopen.Tensor{Desc: d, Data: buf}
	}
	if err := pb.fwd.Run(m.h, ts[0], ts[1], ts[2], ts[3]); err != nil {
		return true, "", &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrDevice, Detail: fmt.Sprintf("MIOpen's attention: %v", err)}
	}
	return true, "", nil
}

// find makes the MIOpen handle (once) and the problem of key, and runs
// MIOpen's Find; a nil problem comes with why MIOpen does not take it.
// m.mu is held.
func (m *mhaState) find(s *hip.Stream, pr *problem, key mhaKey) (*mhaProblem, string) {
	if m.failed != "" {
		return nil, m.failed
	}
	if m.h == nil {
		h, err := miopen.NewHandle(s)
		if err != nil {
			m.failed = fmt.Sprintf("no MIOpen handle: %v", err)
			return nil, m.failed
		}
		m.h = h
	}
	dt, _ := mhaDType(key.dt)
	pb := &mhaProblem{}
	for i, t := range []Tensor{pr.q, pr.k, pr.v, pr.out} {
		d, err := mhaDesc(dt, t)
		if err != nil {
			pb.close()
			return nil, fmt.Sprintf("MIOpen refused the operands: %v", err)
		}
		pb.descs[i] = d
	}
	fwd, err := miopen.NewMHAForward(pb.descs[0], pb.descs[1], pb.descs[2], pb.descs[3], miopen.MHAParams{Scale: key.scale, Causal: key.causal})
	if err != nil {
		pb.close()
		return nil, fmt.Sprintf("MIOpen refused the problem: %v", err)
	}
	pb.fwd = fwd
	if _, err := fwd.Find(m.h); err != nil {
		pb.close()
		if errors.Is(err, miopen.ErrNotImplemented) {
			return nil, "MIOpen has no solution for it on this GPU"
		}
		return nil, fmt.Sprintf("MIOpen's Find failed: %v", err)
	}
	return pb, ""
}

// close frees the problem, then its descriptors.
func (pb *mhaProblem) close() error {
	var errs []error
	if pb.fwd != nil {
		errs = append(errs, pb.fwd.Close())
	}
	for _, d := range pb.descs {
		if d != nil {
			errs = append(errs, d.Close())
		}
	}
	return errors.Join(errs...)
}

// close frees the problems, their descriptors and the MIOpen handle.
func (m *mhaState) close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, pb := range m.problems {
		errs = append(errs, pb.close())
	}
	m.problems, m.declined = nil, nil
	if m.h != nil {
		errs = append(errs, m.h.Close())
		m.h = nil
	}
	return errors.Join(errs...)
}
