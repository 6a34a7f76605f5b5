package flashattn

import (
	"fmt"

	"github.com/rocm-go/rocm/hip"
)

// DType is the element type of the attention operands.
type DType uint8

// The element types. Arithmetic is float32 for each.
const (
	F16 DType = iota + 1
	BF16
	F32
)

var dtypeNames = map[DType]string{F16: "f16", BF16: "bf16", F32: "f32"}

func (d DType) String() string {
	if s, ok := dtypeNames[d]; ok {
		return s
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size is the size of an element in bytes (0 for an unknown dtype).
func (d DType) Size() int {
	switch d {
	case F16, BF16:
		return 2
	case F32:
		return 4
	}
	return 0
}

// MaxHeadDim is the largest head dim; head dims are multiples of 8.
const MaxHeadDim = 256

// MaxAlibiHeads is the most query heads that ALiBi slopes are given for.
const MaxAlibiHeads = 256

// MaxSplits is the most splits of the keys that split-KV makes.
const MaxSplits = 128

// Tensor is an operand in device memory, laid out BSHD: Shape is (batch,
// seq, heads, head dim) and Stride each dim's stride in elements. The head
// dim must be contiguous (Stride[3] == 1); the other strides are free
// (a q sliced out of a fused qkv projection, say). A zero Stride means the
// contiguous strides of Shape.
//
// For a paged KV cache (PagedKV), Shape is (pages, page size, h_kv, d).
type Tensor struct {
	Ptr    hip.DevicePtr
	DType  DType
	Shape  [4]int
	Stride [4]int
}

// Contiguous is a tensor of shape (b, s, h, d), densely packed.
func Contiguous(ptr hip.DevicePtr, dt DType, b, s, h, d int) Tensor {
	return Tensor{Ptr: ptr, DType: dt, Shape: [4]int{b, s, h, d}}
}

// strides are the tensor's strides, the contiguous ones when unset.
func (t Tensor) strides() [4]int {
	if t.Stride != [4]int{} {
		return t.Stride
	}
	s := t.Shape
	return [4]int{s[1] * s[2] * s[3], s[2] * s[3], s[3], 1}
}

// span is the bytes between the first element and one past the last.
func (t Tensor) span() int {
	st := t.strides()
	n := 1
	for i, d := range t.Shape {
		if d == 0 {
			return 0
		}
		n += (d - 1) * st[i]
	}
	return n * t.DType.Size()
}

// Window limits the keys a query sees to a band around its diagonal: query
// i (of s_q) sees key j (of s_kv) when i + s_kv - s_q - Left <= j <=
// i + s_kv - s_q + Right. A negative side is unbounded.
type Window struct {
	Left, Right int
}

// Params are the options of an attention call. The zero value is plain
// softmax attention scaled by 1/√d.
//
// A logit is, in this order: scale·q·k; soft-capped to cap·tanh(x/cap)
// when SoftCap > 0; minus slope_h·|i + s_kv - s_q - j| with ALiBi; and
// -inf where the causal mask or the window hides key j from query i.
// A query that sees no key gets a zero output and a log-sum-exp of -inf.
type Params struct {
	// Scale multiplies q·k; 0 means 1/√d.
	Scale float64
	// Causal hides the keys after each query's diagonal, aligned to the
	// bottom right: query i sees keys j <= i + s_kv - s_q (as
	// FlashAttention-2). With a Window, the window's right side becomes
	// at most 0.
	Causal bool
	// Window, when not nil, is a sliding window around the diagonal.
	Window *Window
	// AlibiSlopes, when not nil, has one slope per query head (at most
	// MaxAlibiHeads), float32 as in every ALiBi model.
	AlibiSlopes []float32
	// SoftCap, when positive, caps the logits smoothly (Gemma 2's
	// attention soft-capping).
	SoftCap float64
	// LSE, when not zero, receives the natural log-sum-exp of each row's
	// logits as float32: (batch, h_q, s_q) for Forward and Decode,
	// (h_q, total q rows) for ForwardVarlen, contiguous.
	LSE hip.DevicePtr
	// Splits is how many parts the keys of each row are split into, run
	// in parallel and merged (split-KV, as flash-decoding): 0 chooses from
	// the device's size and the problem's, 1 never splits, at most
	// MaxSplits.
	Splits int
	// Workspace, when not zero, is device memory of WorkspaceBytes that
	// the call keeps its split-KV partials in instead of allocating them
	// (Handle.DecodeWorkspace says how many bytes a Decode needs). It must
	// stay allocated until the call's kernels are done. A call that
	// allocates nothing can be captured into a graph.
	Workspace      hip.DevicePtr
	WorkspaceBytes int
	// Rotary, when not nil, has Decode turn q and the step's new keys by
	// their rotary embeddings and write the new keys and values into the
	// cache, in its kernel: an LLM's decode step without a kernel before
	// it for them. See Rotary.
	Rotary *Rotary
}

// Rotary is a decode step's rotary embeddings and cache writes, done by
// Decode's kernel (Params.Rotary). q then holds the query heads before
// their rotation. Each batch entry's new token is the last of its cache
// length: key SeqLens[b] - 1, whose rows of the pages Decode writes (the
// rotated key and the value) instead of reading them. NewK and NewV
// (batch, 1, h_kv, d), in q's dtype, hold the new keys before rotation and
// the values; Cos and Sin, in q's dtype, a row of d/2 angles' cosines and
// sines for each batch entry's new token, rows CosStride elements apart:
// the pairs (i, i + d/2) turn as candle's RoPETHD turns them (half-split).
// Rows and pointers 16-byte aligned. Decode takes it where it runs
// attn_decode_paged (one query a sequence, F16 or BF16, a paged cache of
// power-of-two pages, head dim 32, 64, 128 or 256, no window, soft-capping
// or ALiBi), and returns errs.ErrUnsupported elsewhere.
type Rotary struct {
	NewK, NewV Tensor
	Cos, Sin   hip.DevicePtr
	CosStride  int
}

// Varlen describes the sequences of a variable-length batch, packed along
// the seq dim of tensors of batch 1: sequence b of q is rows CuSeqlensQ[b]
// to CuSeqlensQ[b+1] (exclusive), of k and v rows CuSeqlensK[b] to
// CuSeqlensK[b+1]. Each list has batch+1 entries, starts at 0 and never
// decreases; CuSeqlensQ ends at q's row count, CuSeqlensK at most at k's.
// The host lists are checked and size the launch; the device copies (int32,
// the same values) are what the kernel reads.
type Varlen struct {
	CuSeqlensQ, CuSeqlensK       []int32
	DevCuSeqlensQ, DevCuSeqlensK hip.DevicePtr
}

// PagedKV is a paged KV cache: K and V are (pages, PageSize, h_kv, d),
// and row j of batch entry b's cache is row j % PageSize of page
// BlockTable[b][j / PageSize]. SeqLens[b] is the cache length of entry b;
// BlockTable is int32 (batch, BlockTableStride) on the device, each row
// naming at least ceil(SeqLens[b] / PageSize) pages. The host SeqLens are
// checked and size the launch; DevSeqLens (int32, the same values) is what
// the kernel reads. A page index outside [0, pages) makes the rows that
// read it NaN.
//
// MaxSeqLen, when positive, sizes the launch (its grid, its split-KV
// splits and their workspace) for cache lengths up to MaxSeqLen instead of
// for SeqLens, which may then be nil: the call depends on no length known
// on the host, so that a graph that captured it serves every later step
// whose lengths (written to DevSeqLens, with their pages in BlockTable)
// stay within MaxSeqLen. It is at most BlockTableStride × page size; the
// kernel never reads a block-table row past that, whatever DevSeqLens
// holds. The splits past a short sequence's keys cost a block each that
// does nothing.
type PagedKV struct {
	K, V             Tensor
	BlockTable       hip.DevicePtr
	BlockTableStride int
	SeqLens          []int32
	DevSeqLens       hip.DevicePtr
	MaxSeqLen        int
}

// Backend names the implementation that ran a call.
type Backend uint8

// The backends. A Handle chooses per call, in this order:
//
//   - MatrixCore's decode kernel (attn_mmadec: four warps over each tile
//     of keys, the keys split over blocks) on NVIDIA sm_80 and later when
//     a KV head has at most 16 query rows (s_q × h_q/h_kv: a decode step,
//     a few speculative tokens) and the head dim is at most 128, for a
//     call that MatrixCore takes (below);
//   - FlashDecoding for the other calls with at most 8 query rows a KV
//     head: any dtype, dense, variable-length or paged;
//   - CK on the AMD platform when the Composable Kernel shim is loaded and
//     accepts the call (CK's godoc says which calls it takes);
//   - MIOpen on the AMD platform, where ROCM_GO_MIOPEN_MHA=on, when
//     MIOpen's fused attention has a solution for the call (MIOpen's
//     godoc says which calls it is asked);
//   - a matrix-core backend where the device's arch has one: MatrixCore
//     on NVIDIA sm_80 and later (on sm_90 attn_wgmma for head dim 128,
//     and 64 over 2048 keys or more; attn_mma otherwise), MFMA on AMD
//     CDNA (gfx90a, gfx942, gfx950), WMMA on AMD RDNA3 and RDNA4 (gfx11xx,
//     gfx12xx); for F16 and BF16, dense or variable-length K and V (not
//     paged), when q, k, v and out start on 16 bytes and every stride but
//     the head dim's is a multiple of 16 bytes; every head dim and every
//     feature;
//   - Portable for everything else (F32, paged caches with more rows,
//     unaligned layouts, devices without matrix cores).
const (
	// Portable is attn_fwd (kernels/fwd.hip): HIP C++ compiled at run time
	// for the device, plain float arithmetic, any arch and warp size.
	Portable Backend = iota + 1
	// MatrixCore is attn_mma: FlashAttention-2 with q·kᵀ and p·v on the
	// matrix cores (NVIDIA: mma.sync, ldmatrix and cp.async); attn_wgmma,
	// the same on Hopper's warpgroup instructions (sm_90a: head dim 128,
	// and 64 over 2048 keys or more); and attn_mmadec, for a decode step's
	// few rows.
	MatrixCore
	// FlashDecoding is attn_decode: the keys, not the query rows, spread
	// over the threads of a block and over blocks (split-KV), for the
	// few rows of a decode step.
	FlashDecoding
	// MFMA is attn_mfma: attn_mma's algorithm on AMD CDNA's matrix cores
	// (v_mfma 32×32×8 up to head dim 128, 16×16×16 at 256; wave64).
	// Compiled and checked by emulation, but no AMD GPU has run it yet.
	MFMA
	// WMMA is attn_wmma: attn_mma's algorithm on AMD RDNA3 and RDNA4's
	// matrix cores (v_wmma 16×16×16, wave32). Compiled and checked by
	// emulation, but no AMD GPU has run it yet.
	WMMA
)

var backendNames = map[Backend]string{Portable: "portable", MatrixCore: "matrix-core", FlashDecoding: "flash-decoding", MFMA: "mfma", WMMA: "wmma", CK: "ck", MIOpen: "miopen"}

func (b Backend) String() string {
	if s, ok := backendNames[b]; ok {
		return s
	}
	return fmt.Sprintf("Backend(%d)", uint8(b))
}
