package candle

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rocm-go/rocm/hip"
)

// Device is where tensors live and ops run: the CPU (pure Go, the
// reference every GPU op is tested against and the fallback that runs
// anywhere) or a GPU through HIP (AMD natively, NVIDIA through HIP's NVIDIA
// platform). Devices are created once and shared; they are safe for
// concurrent use.
type Device interface {
	// String names the device as NewDevice takes it: "cpu", "hip:0".
	String() string
	// Synchronize waits for the work queued on the device.
	Synchronize() error
	// SetSeed restarts the device's random numbers: the same seed and the
	// same sequence of random ops give the same numbers on every device.
	SetSeed(seed uint64)
	// MemoryStats reports the device memory the device's tensors use.
	MemoryStats() MemoryStats
	// ResetPeak starts MemoryStats.Peak again from the bytes in use now.
	ResetPeak()

	backend() backend
}

// MemoryStats is a device's memory as its tensors use it.
type MemoryStats struct {
	InUse  int64 // bytes of live storages
	Cached int64 // bytes the pool keeps for reuse (HIP devices)
	Peak   int64 // the most InUse has been
	Allocs int64 // allocations from the device (not from the pool)
	// Graphs is the private memory captured graphs keep for their
	// replays and no tensor holds now (HIP devices; Graph.Close frees it).
	Graphs int64
}

// PeakDuring runs f between two synchronizations of dev and returns the
// most bytes dev's tensors held during it above what they held before: what
// f needs free to run. It resets dev's MemoryStats.Peak.
func PeakDuring(dev Device, f func() error) (int64, error) {
	if err := dev.Synchronize(); err != nil {
		return 0, err
	}
	dev.ResetPeak()
	before := dev.MemoryStats().InUse
	if err := errors.Join(f(), dev.Synchronize()); err != nil {
		return 0, err
	}
	return dev.MemoryStats().Peak - before, nil
}

// NewDevice opens a device by name: "cpu", "hip:N" (also "cuda:N", "gpu:N"
// and "hip" for hip:0), or "auto": hip:0 when HIP loads and has a GPU,
// else the CPU.
func NewDevice(name string) (Device, error) {
	const op = "NewDevice"
	s := strings.ToLower(strings.TrimSpace(name))
	switch s {
	case "cpu":
		return CPU(), nil
	case "auto":
		if n, err := hip.DeviceCount(); err == nil && n > 0 {
			return HIP(0)
		}
		return CPU(), nil
	case "hip", "gpu", "cuda":
		return HIP(0)
	}
	for _, p := range []string{"hip:", "gpu:", "cuda:"} {
		if rest, ok := strings.CutPrefix(s, p); ok {
			n, err := strconv.Atoi(rest)
			if err != nil || n < 0 {
				return nil, pkg.Errorf(op, ErrDevice, "%q: the ordinal must be a number ≥ 0", name)
			}
			return HIP(n)
		}
	}
	return nil, pkg.Errorf(op, ErrDevice, "%q is not a device: want cpu, hip:N or auto", name)
}

// sameDevice checks that every tensor is on dev.
func sameDevice(op string, dev Device, ts ...*Tensor) error {
	for _, t := range ts {
		if t.st.dev != dev {
			return pkg.Errorf(op, ErrDevice, "operands on %s and %s: move them to one device first (ToDevice)", dev, t.st.dev)
		}
	}
	return nil
}

// backend is what a device implements for the ops. Operands arrive
// checked: dtypes and shapes agree, views lie inside their storages, and
// outputs are fresh contiguous storages of the right size. Element counts
// are never zero (ops on empty tensors return before reaching a backend).
type backend interface {
	alloc(dt DType, n int) (memory, error)
	// write copies host bytes to the start of st; read copies elements
	// [off, off+n) of st to the host.
	write(st *Storage, src []byte) error
	read(st *Storage, off, n int, dst []byte) error

	unary(op unaryOp, p [2]float64, src view, dst *Storage) error
	binary(op binaryOp, a, b view, dst *Storage) error
	cast(src view, dst *Storage) error
	copy(src, dst view) error
	fill(dst view, v scalar) error
	arange(dst *Storage, start, step float64) error
	random(dst *Storage, dist distribution, a, b float64, seed, offset uint64) error
	where(cond, t, f view, dst *Storage) error
	indexSelect(src, ids view, d int, dst *Storage) error
	gather(src, ids view, d int, dst *Storage) error
	scatter(dst *Storage, dstShape Shape, ids, src view, d int, add bool) error
	indexAdd(dst *Storage, dstShape Shape, ids, src view, d int) error
	reduce(op reduceOp, src view, nred int, scale float64, dst *Storage) error
	// matmul multiplies a (…, m, k) by b (…, k, n), broadcast to one
	// batch, into the contiguous dst (…, m, n); k > 0, and each operand's
	// last two dims have a BLAS form (blasForm).
	matmul(a, b view, dst *Storage) error
	// The fused ops (fused.go) on contiguous views; beta may be a nil view.
	softmax(x view, dst *Storage, rows, cols int, log bool) error
	norm(x, alpha, beta view, dst *Storage, rows, cols int, eps float64, layer bool) error
	// groupNorm normalises rows of cols elements, each a group of channels
	// of spatial elements, row r being group r % groups; silu applies SiLU
	// to the result.
	groupNorm(x, alpha, beta view, dst *Storage, rows, cols, groups, spatial int, eps float64, silu bool) error
	rope(x, cos, sin view, dst *Storage, dims [4]int, interleaved, thd bool, csb int) error
	siluMul(a, b view, dst *Storage) error
	// geglu writes rows of n: each row of 2n's first half times gelu_erf
	// of its second.
	geglu(x view, dst *Storage, rows, n int) error
	// The image ops (conv.go, pooling.go) on contiguous views in the
	// spec's format.
	conv(x, w view, dst *Storage, s *convSpec) error
	pooling(x view, dst *Storage, s *poolSpec) error
	upsample(x view, dst *Storage, s *upsampleSpec) error
	// argsort writes each contiguous row's indices in sorted order (U32;
	// sort.go); topk the indices of each row's k largest, in order.
	argsort(x view, dst *Storage, rows, cols int, desc bool) error
	topk(x view, dst *Storage, rows, cols, k int) error
	// sample writes a token id (U32) of each contiguous row of logits,
	// drawn with the row's settings (sample.go); prev holds the rows'
	// previous tokens, hist (nil when no row has one) each row's token
	// history, which the token drawn joins.
	sample(x view, dst *Storage, rows, cols int, ps []sampleRow, prev []int32, hist []sampleHist) error
	// tokenMask writes contiguous logits (rows, cols) with -inf where the
	// contiguous U32 bitmask (rows, words) has a clear bit (tokenmask.go).
	tokenMask(x, mask view, dst *Storage, rows, cols, words int) error
	// addBias adds add[i] to element at[i] of the contiguous F32 x (no
	// element twice); scaleLogits applies each row's repetition penalty
	// (its history read, not extended) and divides by its temperature
	// (> 0), in place on the contiguous F32 (rows, cols) x (logits.go).
	addBias(x *Storage, at []uint64, add []float32) error
	scaleLogits(x *Storage, rows, cols int, ps []sampleRow, prev []int32, hist []sampleHist) error
	// The quantized ops (qtensor.go) on the blocks of a QTensor of typ,
	// a U8 storage of whole rows. dequantize expands its first n elements
	// into dst (F32, F16 or BF16). qmatmul multiplies the contiguous x
	// (m, k) of F32, F16 or BF16 by the transpose of w's rows (n, k) into
	// dst (m, n), x's dtype. qrows writes w's rows (of k elements) that
	// the contiguous 1-D I64 ids name into dst (len(ids), k) in dst's
	// dtype; ids out of range are an ErrIndex on the CPU, zero rows on a
	// GPU.
	dequantize(typ GGMLType, q, dst *Storage, n int) error
	qmatmul(typ GGMLType, x view, w, dst *Storage, m, n, k int) error
	qrows(typ GGMLType, w *Storage, ids view, dst *Storage, k int) error
	// qmatmulFuses says whether the backend has a kernel that runs
	// QMatmulWith's ops with the product of m rows of dt by typ's blocks;
	// qmatmulFused (called only then) is qmatmul with f's ops in it.
	qmatmulFuses(typ GGMLType, dt DType, m int) bool
	qmatmulFused(typ GGMLType, x view, w, dst *Storage, m, n, k int, f qfuse) error
}

// memory is a storage's bytes on its device.
type memory interface {
	// release gives the memory back to the device. The backend orders it
	// after the queued work that may use it.
	release()
}

// view is an operand: a storage and the layout through which an op reads
// (or writes) it.
type view struct {
	st *Storage
	l  Layout
}

// scalar is a fill value, exact for every dtype.
type scalar struct {
	f float64 // for float dtypes
	i int64   // for integer dtypes
}

func scalarOf(dt DType, v float64) scalar {
	if dt.IsFloat() {
		return scalar{f: v}
	}
	return scalar{i: saturate(dt, v)}
}

var errNoDevice = errors.New("no such device")

// checkOrdinal reports a HIP ordinal out of range as ErrDevice.
func checkOrdinal(op string, ordinal int) error {
	n, err := hip.DeviceCount()
	if err != nil {
		return &Error{Pkg: string(pkg), Op: op, Kind: ErrDevice, Detail: fmt.Sprintf("hip:%d cannot be opened", ordinal), Err: err}
	}
	if ordinal < 0 || ordinal >= n {
		return &Error{Pkg: string(pkg), Op: op, Kind: ErrDevice, Detail: fmt.Sprintf("hip:%d: the machine has %d GPU(s)", ordinal, n), Err: errNoDevice}
	}
	return nil
}
