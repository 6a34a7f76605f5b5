package flashattn

/*
#include <stdlib.h>
#include <stdio.h>
#include "ckshim/rocm_go_fmha.h"

typedef int32_t (*rg_fmha_version_fn)(void);
typedef const char* (*rg_fmha_info_fn)(void);
typedef int32_t (*rg_fmha_call_fn)(const rocm_go_fmha_fwd_args*, char*, size_t);

static int32_t rg_fmha_version(void* fn) { return ((rg_fmha_version_fn)fn)(); }
static const char* rg_fmha_info(void* fn) { return ((rg_fmha_info_fn)fn)(); }

// rg_fmha_forward makes the device current, asks the shim whether it
// covers the call and, when it does, queues it: one C call, so that the
// device is current on the thread that calls the shim.
static int32_t rg_fmha_forward(void* setdev, void* supports, void* fwd, const rocm_go_fmha_fwd_args* a,
		char* msg, size_t n) {
	if (setdev != NULL) {
		int e = ((int (*)(int))setdev)(a->device);
		if (e != 0) {
			snprintf(msg, n, "hipSetDevice(%d) failed with HIP error %d", a->device, e);
			return ROCM_GO_FMHA_HIP_ERROR;
		}
	}
	int32_t st = ((rg_fmha_call_fn)supports)(a, msg, n);
	if (st != ROCM_GO_FMHA_OK) return st;
	return ((rg_fmha_call_fn)fwd)(a, msg, n);
}
*/
import "C"

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/bind"
	"github.com/rocm-go/rocm/internal/dl"

	"github.com/rocm-go/rocm/errs"
)

// CK is Composable Kernel's ck_tile FMHA forward (fmha_fwd), run through
// librocm_go_fmha.so, a shim that scripts/build-ck-shim.sh builds from a
// Composable Kernel checkout with hipcc (its C ABI is
// ckshim/rocm_go_fmha.h). A Handle runs it, on the AMD platform only, for
// the calls the shim accepts: F16 and BF16 prefill, dense or
// variable-length, head dims that are multiples of 8 up to 256, causal or
// windowed masks, GQA/MQA, ALiBi, LSE, on the GPU targets it was built for,
// with operands aligned to 16 bytes and offsets within int32; never for
// soft-capping, paged caches or decode steps (FlashDecoding's). Everything
// else, and everything when no shim is loaded, runs on the other backends.
//
// No AMD GPU was available to the authors of this package: the shim's CK
// side has been compiled against Composable Kernel with hipcc, and the
// dispatch and marshalling are tested against a stand-in, but CK itself
// has never run under it.
//
// Its value stands apart from the kernels' sequence so that adding a
// kernel never renumbers it.
const CK Backend = 16

// CKLibraryEnv names the environment variable that points at the CK shim:
// its file, or a folder holding librocm_go_fmha.so, tried before
// ROCM_PATH/lib, /opt/rocm/lib and the system loader path. "off" keeps the
// shim unloaded, so that every call runs rocm-go's own kernels.
const CKLibraryEnv = "ROCM_GO_FMHA_LIBRARY"

// ckSoname is the shim's file name.
const ckSoname = C.ROCM_GO_FMHA_SONAME

// The shim's arguments are 304 bytes (a static_assert in the header).
var (
	_ [unsafe.Sizeof(C.rocm_go_fmha_fwd_args{}) - 304]struct{}
	_ [304 - unsafe.Sizeof(C.rocm_go_fmha_fwd_args{})]struct{}
)

// ckShim is a loaded shim: its entry points.
type ckShim struct {
	lib           *dl.Library
	supports, fwd unsafe.Pointer
	info          string
}

// ckState is the shim's load state: loaded on first use on the AMD
// platform, or by LoadCK.
var ckState = dl.Lazy[[]string, *ckShim]{Open: openCK, Defaults: ckDefaults}

func ckDefaults() ([]string, error) {
	v := strings.TrimSpace(os.Getenv(CKLibraryEnv))
	if v == "off" {
		return nil, pkg.Errorf("LoadCK", errs.ErrUnsupported, "the Composable Kernel shim is off (%s=off)", CKLibraryEnv)
	}
	if v == "" {
		return nil, nil
	}
	return []string{v}, nil
}

func openCK(paths []string) ([]*dl.Library, *ckShim, error) {
	const name = "Composable Kernel FMHA shim (librocm_go_fmha)"
	l, err := dl.OpenProbed(name,
		"Build it with scripts/build-ck-shim.sh, then install it in ROCM_PATH/lib or name it in "+CKLibraryEnv+" (or pass its path to flashattn.LoadCK).",
		dl.ROCm(paths, ckSoname).Candidates(), "rocm_go_fmha_abi_version")
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) ([]*dl.Library, *ckShim, error) {
		l.Close()
		return nil, nil, err
	}
	ver, _ := l.Sym("rocm_go_fmha_abi_version")
	if v := int32(C.rg_fmha_version(ver)); v != C.ROCM_GO_FMHA_ABI_VERSION {
		return fail(&Error{Pkg: string(pkg), Op: "LoadCK", Kind: errs.ErrDevice, Detail: fmt.Sprintf(
			"%s has ABI version %d and this flashattn %d: rebuild the shim with this rocm-go's scripts/build-ck-shim.sh", l.Origin(), v, C.ROCM_GO_FMHA_ABI_VERSION)})
	}
	s := &ckShim{lib: l}
	for _, e := range []struct {
		sym string
		p   *unsafe.Pointer
	}{{"rocm_go_fmha_fwd_supports", &s.supports}, {"rocm_go_fmha_fwd", &s.fwd}} {
		if *e.p, err = l.Sym(e.sym); err != nil {
			return fail(err)
		}
	}
	if info, err := l.Sym("rocm_go_fmha_build_info"); err == nil {
		s.info = C.GoString(C.rg_fmha_info(info))
	}
	return []*dl.Library{l}, s, nil
}

// LoadCK loads the Composable Kernel shim (see CK), trying paths (files or
// folders) before ROCM_GO_FMHA_LIBRARY, ROCM_PATH/lib, /opt/rocm/lib and
// the system loader path. Load package hip first (on the AMD platform):
// the shim uses the HIP runtime that hip loaded.
//
// Handles load the shim on first use on the AMD platform, so LoadCK is
// needed only to choose its file or to see an error. Loads are counted:
// each successful LoadCK is matched by one UnloadCK.
func LoadCK(paths ...string) error {
	if len(paths) == 0 {
		var err error
		if paths, err = ckDefaults(); err != nil {
			return err
		}
	} else if v := strings.TrimSpace(os.Getenv(CKLibraryEnv)); v != "" && v != "off" {
		paths = append(paths, v)
	}
	return ckState.Load(paths)
}

// UnloadCK drops one LoadCK; the shim closes when none is left and it was
// not loaded on first use. It must not race with calls that may run it.
func UnloadCK() error {
	if err := ckState.Unload(); err != nil {
		return fmt.Errorf("flashattn: UnloadCK: %w", err)
	}
	return nil
}

// CKInfo loads the shim if needed and describes it: its file, Composable
// Kernel's revision, the GPU targets and the compiler it was built with.
func CKInfo() (string, error) {
	if err := ckState.Ensure(); err != nil {
		return "", err
	}
	s, ok := ckState.State()
	if !ok {
		return "", fmt.Errorf("flashattn: the Composable Kernel shim was unloaded")
	}
	return s.lib.Origin() + ": " + s.info, nil
}

// loadedCK returns the shim on the AMD platform, loading it on first use;
// nil when it is not there (a remembered failure costs nothing).
func loadedCK() *ckShim {
	if bind.Platform() != bind.PlatformAMD || ckState.Ensure() != nil {
		return nil
	}
	s, _ := ckState.State()
	return s
}

// runCK runs a planned call with the CK shim when it is loaded and covers
// the call: ran is false when another backend must run it, and nothing was
// queued then.
func (h *Handle) runCK(op string, pr *problem, p *Params, pl *plan) (ran bool, err error) {
	ran, _, err = h.tryCK(op, pr, p, pl)
	return ran, err
}

// ckCall is the memory a call hands the shim: its arguments and a buffer
// for its message.
type ckCall struct {
	a   C.rocm_go_fmha_fwd_args
	msg [512]C.char
}

// ckCalls holds the calls' memory, reused across calls and handles.
var ckCalls = sync.Pool{New: func() any { return new(ckCall) }}

// tryCK is runCK, and says why the shim did not run the call.
func (h *Handle) tryCK(op string, pr *problem, p *Params, pl *plan) (ran bool, declined string, err error) {
	switch {
	case pl.backend == FlashDecoding:
		return false, "a decode step runs on FlashDecoding", nil
	case pr.paged != nil:
		return false, "paged caches run on rocm-go's kernels", nil
	case pl.empty:
		return false, "nothing to compute", nil
	}
	s := loadedCK()
	if s == nil {
		return false, "no shim loaded on the AMD platform", nil
	}
	// The arguments and the message go to C, so they live on the heap:
	// pooled, a call allocates neither.
	c := ckCalls.Get().(*ckCall)
	defer ckCalls.Put(c)
	c.a, c.msg[0] = C.rocm_go_fmha_fwd_args{}, 0
	if ok, err := h.ckArgs(&c.a, pr, p, &pl.kp); !ok || err != nil {
		return err != nil, "too many sets of ALiBi slopes on the handle", pkg.Wrap(op, err)
	}
	st := C.rg_fmha_forward(bind.SetDeviceFunc(), s.supports, s.fwd, &c.a, &c.msg[0], C.size_t(len(c.msg)))
	runtime.KeepAlive(h.stream)
	if st == C.ROCM_GO_FMHA_OK {
		return true, "", nil
	}
	detail := C.GoString(&c.msg[0])
	kind, what := errs.ErrDevice, ""
	switch st {
	case C.ROCM_GO_FMHA_UNSUPPORTED:
		return false, detail, nil
	case C.ROCM_GO_FMHA_INVALID_ARGUMENT:
		kind, what = errs.ErrArgument, "invalid arguments"
	case C.ROCM_GO_FMHA_HIP_ERROR:
		what = "HIP error"
	case C.ROCM_GO_FMHA_INTERNAL_ERROR:
		what = "internal error"
	default:
		what = fmt.Sprintf("status %d", int32(st))
	}
	return true, "", &Error{Pkg: string(pkg), Op: op, Kind: kind, Detail: fmt.Sprintf("Composable Kernel shim (%s): %s: %s", s.lib.Origin(), what, detail)}
}

// ckArgs fills the shim's arguments from the kernels' parameters of the
// same call (pointers, strides, lengths, window, scale), which newPlan has
// checked. It reports false when the call cannot go to the shim.
func (h *Handle) ckArgs(a *C.rocm_go_fmha_fwd_args, pr *problem, p *Params, kp *kParams) (bool, error) {
	a.size = C.uint32_t(unsafe.Sizeof(*a))
	a.abi_version = C.ROCM_GO_FMHA_ABI_VERSION
	a.dtype = C.int32_t(pr.q.DType)
	a.device = C.int32_t(h.dev.Ordinal())
	for i := 0; i < len(h.arch) && i < len(a.arch)-1; i++ {
		a.arch[i] = C.char(h.arch[i])
	}
	a.q, a.k, a.v, a.out = C.uint64_t(kp.Q), C.uint64_t(kp.K), C.uint64_t(kp.V), C.uint64_t(kp.O)
	a.stream = h.stream.Raw()
	for i := range 3 {
		a.q_stride[i], a.k_stride[i] = C.int64_t(kp.QS[i]), C.int64_t(kp.KS[i])
		a.v_stride[i], a.out_stride[i] = C.int64_t(kp.VS[i]), C.int64_t(kp.OS[i])
	}
	a.batch, a.seqlen_q, a.seqlen_k = C.int32_t(kp.Batch), C.int32_t(kp.SQ), C.int32_t(kp.SK)
	a.max_seqlen_q, a.max_seqlen_k = C.int32_t(kp.MaxSQ), C.int32_t(min(pr.maxSK, math.MaxInt32))
	a.nhead_q, a.nhead_k, a.head_dim = C.int32_t(kp.HQ), C.int32_t(kp.HKV), C.int32_t(kp.D)
	a.window_left, a.window_right = C.int32_t(kp.WindowLeft), C.int32_t(kp.WindowRight)
	a.scale, a.softcap = C.float(kp.Scale), C.float(kp.SoftCap)
	if kp.Flags&flagVarlen != 0 {
		a.flags |= C.ROCM_GO_FMHA_VARLEN
		a.cu_seqlens_q, a.cu_seqlens_k = C.uint64_t(kp.CuQ), C.uint64_t(kp.CuK)
	}
	if kp.Flags&flagLSE != 0 {
		a.flags |= C.ROCM_GO_FMHA_LSE
		a.lse = C.uint64_t(kp.LSE)
	}
	if p.AlibiSlopes != nil {
		slopes, err := h.alibi.device(h.dev, p.AlibiSlopes)
		if err != nil || slopes == 0 {
			return false, err
		}
		a.flags |= C.ROCM_GO_FMHA_ALIBI
		a.alibi_slopes = C.uint64_t(slopes)
	}
	return true, nil
}

// alibiSlopes keeps ALiBi slopes on the device for the CK shim, which
// reads them from there: a model's slopes never change, so each set is
// copied once per handle and kept until the handle closes.
type alibiSlopes struct {
	mu   sync.Mutex
	bufs map[string]*hip.Buffer
}

// maxSlopeSets bounds the sets a handle keeps; calls with more sets run on
// the other backends (a set in use by queued work cannot be evicted).
const maxSlopeSets = 16

// device returns the slopes' device copy, making it on first use; 0 when
// the handle keeps too many sets already.
func (c *alibiSlopes) device(dev *hip.Device, slopes []float32) (hip.DevicePtr, error) {
	raw := hip.AsBytes(slopes)
	c.mu.Lock()
	defer c.mu.Unlock()
	// Looked up by string(raw), which the compiler does not copy: a call
	// whose slopes are kept allocates nothing.
	if b, ok := c.bufs[string(raw)]; ok {
		return b.Ptr(), nil
	}
	if len(c.bufs) >= maxSlopeSets {
		return 0, nil
	}
	b, err := dev.Malloc(len(raw))
	if err != nil {
		return 0, err
	}
	if err := b.CopyFromHost(raw); err != nil {
		b.Close()
		return 0, err
	}
	if c.bufs == nil {
		c.bufs = map[string]*hip.Buffer{}
	}
	c.bufs[string(raw)] = b
	return b.Ptr(), nil
}

// release frees the slopes once the work queued on s is done.
func (c *alibiSlopes) release(s *hip.Stream) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bufs) == 0 {
		return nil
	}
	// A closed stream has nothing more to queue; hipFree waits for the
	// device anyway.
	var err error
	if !s.Closed() {
		err = s.Synchronize()
	}
	for k, b := range c.bufs {
		if cerr := b.Close(); err == nil {
			err = cerr
		}
		delete(c.bufs, k)
	}
	return err
}
