package flashattn

import (
	"fmt"
	"math"
	"strconv"
	"strings"

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
// or ALiBi), and returns ErrUnsupported elsewhere.
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

// kParams is the kernels' Params (kernels/common.h), byte for byte.
type kParams struct {
	Q, K, V, O, LSE, OPart, LSEPart uint64
	CuQ, CuK, SeqLensK, BlockTable  uint64
	QS, KS, VS, OS                  [3]int64
	BTStride                        int64
	Batch, SQ, SK, HQ, HKV, D       int32
	MaxSQ                           int32
	PageSize, NumPages, Splits      int32
	WindowLeft, WindowRight         int32
	Flags                           int32
	Scale, SoftCap                  float32
	Alibi                           [MaxAlibiHeads]float32
	Counters                        uint64 // flagFuse's: the handle's
	NewK, NewV, Cos, Sin            uint64 // flagRotary's (Params.Rotary)
	NKS, NVS                        [2]int64
	CSStride                        int64
}

// The kernels' flags.
const (
	flagVarlen  = 1
	flagPaged   = 2
	flagAligned = 4
	flagAlibi   = 8
	flagLSE     = 16
	flagFuse    = 32 // attn_mmadec merges its own splits (Counters)
	flagRotary  = 64 // attn_decode_paged turns q and the new keys and writes the new rows (Params.Rotary)
)

// threads is the block size of the portable and decode kernels
// (FA_THREADS); mmaWarps is attn_mma's warps a block (MmaTiles::WARPS);
// amdWaves is the waves of a block of attn_mfma and attn_wmma
// (FA_AMD_WAVES).
const (
	threads  = 256
	mmaWarps = 4
	amdWaves = 4
)

// fuseSplits and fuseOutputs bound the attn_mmadec launches that merge
// their own splits: splits, and a block's outputs (rows × head dim), which
// its warp holds at once (mma.hip's FA_MERGE_SPLITS, and
// FA_MERGE_OUT a lane).
const (
	fuseSplits  = 8
	fuseOutputs = 4 * 32
)

// decodeRows is the most query rows a KV head may have for FlashDecoding;
// mmaDecRows and mmaDecMaxD the most rows and the largest head dim of
// attn_mma's decode kernels (attn_mmadec: one m tile of 16 rows a block).
const (
	decodeRows = 8
	mmaDecRows = 16
	mmaDecMaxD = 128
)

// buckets are the head-dim buckets of the kernels: their DMAX.
var buckets = [...]int{32, 64, 128, 256}

// bucketIndex is the index in buckets of the kernel that takes d.
func bucketIndex(d int) int {
	for i, b := range buckets[:len(buckets)-1] {
		if d <= b {
			return i
		}
	}
	return len(buckets) - 1
}

// dtypes are the dtypes the kernels take; mmaDTypes attn_mma's (and
// attn_mfma's and attn_wmma's).
var (
	dtypes    = [...]DType{F16, BF16, F32}
	mmaDTypes = [...]DType{F16, BF16}
)

// The kernels' names, built once: fwdNames[dt][bucketIndex(d)] is
// attn_fwd_<dt>_d<DMAX>, mmaNames[dt][bi][0] the same of attn_mma (head
// dim DMAX itself) and [1] its _pad kernel (smaller head dims), decodeNames[dt][bi][0]
// attn_decode_<dt>_d<DMAX>_r1 and [1] its _r4, combineNames[dt]
// attn_combine_<dt>; mfmaNames and wmmaNames those of attn_mfma and
// attn_wmma.
var fwdNames, mmaNames, decodeNames, combineNames = kernelNameTables()
var mfmaNames, wmmaNames = amdNameTables()

// pagedNames[dt][bi] is attn_decode_<dt>_d<DMAX>_paged, FlashDecoding's
// four-row kernel for an LLM's decode step (pagedStep), F16 and BF16.
var pagedNames = func() (pn [F32 + 1][len(buckets)]string) {
	for _, dt := range mmaDTypes {
		for i, d := range buckets {
			pn[dt][i] = fmt.Sprintf("attn_decode_%s_d%d_paged", dt, d)
		}
	}
	return pn
}()

// pagedStep reports whether a FlashDecoding launch of four-row blocks is
// an LLM's decode step, which attn_decode_<dt>_d<DMAX>_paged serves: F16 or
// BF16, a paged cache of power-of-two pages, 16-byte aligned rows, head
// dim a bucket's, and no window side, soft-capping or ALiBi. (A paged
// launch's q is dense: (b, s_q, h_q, d).)
func pagedStep(pr *problem, p *Params, aligned bool, left, right int) bool {
	if pr.paged == nil || pr.q.DType == F32 || !aligned || pr.d != buckets[bucketIndex(pr.d)] {
		return false
	}
	ps := pr.k.Shape[1]
	return ps > 0 && ps&(ps-1) == 0 && left < 0 && right < 0 && p.SoftCap == 0 && p.AlibiSlopes == nil
}

// wgmmaNames[dt][bi] is attn_wgmma_<dt>_d<DMAX> for the head dims it has
// kernels of (wgmmaDim), "" for the others.
var wgmmaNames = func() (wg [F32 + 1][len(buckets)]string) {
	for _, dt := range mmaDTypes {
		for i, d := range buckets {
			if wgmmaDim(d) {
				wg[dt][i] = fmt.Sprintf("attn_wgmma_%s_d%d", dt, d)
			}
		}
	}
	return wg
}()

// wgmmaDim reports whether attn_wgmma has a kernel of head dim d (its
// DMAX, exactly).
func wgmmaDim(d int) bool { return d == 64 || d == 128 }

// wgmmaTakes reports whether attn_wgmma runs a prefill of head dim d over
// at most maxSK keys a sequence on a device that has it: head dim 128
// always, 64 from 2048 keys. Measured on an H200 (TFLOP/s, attn_wgmma
// against attn_mma): d128 bf16 GQA causal s512 b8 161 / 157, s2048 b1
// 265 / 181, f16 s1024 b1 287 / 235, s4096 b4 415 / 303; d64 bf16 GQA
// causal s512 b8 113 / 125 (a block's few tiles, one block an SM against
// attn_mma's several), f16 s1024 b1 190 / 196, bf16 GQA causal s2048 b1
// 182 / 157, f16 s4096 b4 291 / 279.
func wgmmaTakes(d, maxSK int) bool { return d == 128 || d == 64 && maxSK >= 2048 }

// wgmmaTiles are attn_wgmma's rows per block, keys per tile, block size
// and dynamic shared memory (WgTiles in wgmma.hip): two warpgroups of
// 64 rows, 128 keys a tile, q and two stages of K and V, and 1 KiB to
// align them on.
func wgmmaTiles(dmax int) (bm, bn, nthreads, smem int) {
	const rows, keys = 128, 128
	return rows, keys, 256, 1024 + rows*dmax*2 + 4*keys*dmax*2
}

// mmaDecNames[dt][bi] are attn_mmadec_<dt>_d<DMAX> and its _pad kernel,
// for the buckets up to mmaDecMaxD.
var mmaDecNames = func() (dec [F32 + 1][len(buckets)][2]string) {
	for _, dt := range mmaDTypes {
		for i, d := range buckets {
			if d <= mmaDecMaxD {
				dec[dt][i] = [2]string{fmt.Sprintf("attn_mmadec_%s_d%d", dt, d), fmt.Sprintf("attn_mmadec_%s_d%d_pad", dt, d)}
			}
		}
	}
	return dec
}()

func amdNameTables() (mfma, wmma [F32 + 1][len(buckets)]string) {
	for _, dt := range mmaDTypes {
		for i, d := range buckets {
			mfma[dt][i] = fmt.Sprintf("attn_mfma_%s_d%d", dt, d)
			wmma[dt][i] = fmt.Sprintf("attn_wmma_%s_d%d", dt, d)
		}
	}
	return mfma, wmma
}

func kernelNameTables() (fwd [F32 + 1][len(buckets)]string, mma, dec [F32 + 1][len(buckets)][2]string, combine [F32 + 1]string) {
	for _, dt := range dtypes {
		for i, d := range buckets {
			fwd[dt][i] = fmt.Sprintf("attn_fwd_%s_d%d", dt, d)
			mma[dt][i] = [2]string{fmt.Sprintf("attn_mma_%s_d%d", dt, d), fmt.Sprintf("attn_mma_%s_d%d_pad", dt, d)}
			dec[dt][i] = [2]string{fmt.Sprintf("attn_decode_%s_d%d_r1", dt, d), fmt.Sprintf("attn_decode_%s_d%d_r4", dt, d)}
		}
		combine[dt] = fmt.Sprintf("attn_combine_%s", dt)
	}
	return fwd, mma, dec, combine
}

// tiles are the portable kernel's rows per block and keys per tile
// (Tiles in fwd.hip).
func tiles(dt DType, dmax int) (bm, bn int) {
	bm = threads / (dmax / 16)
	bn = min(64, 16384/(dmax*dt.Size()))
	return bm, bn
}

// mmaTiles are attn_mma's rows per block, keys per tile, block size and
// dynamic shared memory in bytes (MmaTiles in mma.hip): m tiles of
// 16 rows a warp (two up to head dim 128, q's rows then in shared memory
// too), keys a tile (64 below head dim 128, 32 from it), stages of K and V
// (two up to 128).
func mmaTiles(dmax int) (bm, bn, nthreads, smem int) {
	mt, bn, st := 2, 64, 2
	if dmax >= 128 {
		bn = 32
	}
	if dmax > 128 {
		mt, st = 1, 1
	}
	bm = mmaWarps * mt * 16
	ld := dmax + 8 // a shared row, padded by 16 bytes
	smem = 2 * st * bn * ld * 2
	if mt == 2 {
		smem += bm * ld * 2
	}
	return bm, bn, mmaWarps * 32, smem
}

// mmaDecWarps are attn_mmadec's warps, over the keys of a tile
// (MmaTiles<DMAX, mmaDecWarps>).
const mmaDecWarps = 4

// mmaDecTiles are the same of attn_mmadec: one m tile, q's fragments in
// registers, tiles of 16 keys a warp in two stages.
func mmaDecTiles(dmax int) (bm, bn, nthreads, smem int) {
	const keys, stages = 16 * mmaDecWarps, 2
	return 16, keys, 32 * mmaDecWarps, 2 * stages * keys * (dmax + 8) * 2
}

// mmaDecSplits is attn_mmadec's split count for blocks blocks (before
// splitting) on slots block slots, at most most: the fewest splits whose
// blocks take 60% of the slots, within one wave. Its blocks stream the
// cache: two or three an SM keep the memory busy, and a second wave, or
// more splits, cost more than idle slots. Measured on an H200 (396 slots
// at d128, µs): MHA f16 b8 h32 kv4096 (256 blocks) 137.7 at one split,
// 161.4-161.7 at two, 144.4-146.3 at three to six; GQA b8 h32/8 (64
// blocks) 49.3-49.7 at four, 50.9-51.4 at three and six.
func mmaDecSplits(blocks, slots, most int) int {
	if blocks <= 0 || slots <= 0 {
		return 1
	}
	need := (3*slots + 4) / 5
	s := (need + blocks - 1) / blocks
	for s > 1 && blocks*s > slots {
		s--
	}
	return max(1, min(s, most))
}

// mmaDecode reports whether a MatrixCore launch of rows query rows per KV
// head and head dim d runs attn_mmadec.
func mmaDecode(rows int64, d int) bool { return rows <= mmaDecRows && d <= mmaDecMaxD }

// amdTiles are attn_mfma's and attn_wmma's rows per block, keys per tile
// and block size (AmdTiles): four waves of M rows, M being the fragments'
// size (MFMA: 32 up to head dim 128, 16 at 256; WMMA: 16), and the most
// of 64, 32, 16 keys whose K and Vᵀ tiles (rows padded by 8 elements)
// take 32 KiB at most.
func amdTiles(b Backend, dmax int) (bm, bn, nthreads int) {
	m, wave := 16, 32
	if b == MFMA {
		wave = 64
		if dmax <= 128 {
			m = 32
		}
	}
	bn = 16
	for _, n := range []int{64, 32} {
		if 2*(n*(dmax+8)+dmax*(n+8)) <= 32768 {
			bn = n
			break
		}
	}
	return amdWaves * m, bn, amdWaves * wave
}

// decodeTiles are attn_decode's rows per block (RM), key groups (NG: a
// group of DMAX/8 threads holds a key) and keys a group loads at once (U,
// 2 for both kernels: decode.hip's FA_DECODE), for a KV head's rows.
func decodeTiles(dmax, rows int) (rm, ng, u int) {
	rm = 4
	if rows <= 1 {
		rm = 1
	}
	return rm, threads / (dmax / 8), 2
}

// target is what the choice of kernels needs to know of a device.
type target struct {
	cus   int     // compute units, for split-KV
	mc    Backend // the arch's matrix-core kernels: MatrixCore, MFMA, WMMA; 0 if none
	wgmma bool    // MatrixCore runs attn_wgmma where it can (the kernels compiled for sm_90a)
	// slots, when set, is how many blocks of a kernel the device runs at
	// once (0: unknown), for decode's split-KV.
	slots func(kernel string, nthreads, shared int) int
}

// decodeSplits is the split-KV of a decode launch of blocks blocks (before
// splitting) on a device that runs slots of them at once: the fewest
// splits, at most most, whose blocks fill at least 90% of the slots over
// the waves they take (waveFill), else the fullest, the fewest of equals
// (1 for no blocks or slots). A wave a fraction full costs as much as a
// full one: 256 blocks on 528 slots (132 SMs, four blocks each, on an
// H200) ran 1.5× as long unsplit as in 2 splits, and 3 splits (1.45 waves)
// were slower than 2 or 4.
func decodeSplits(blocks, slots, most int) int {
	best, bestFill := 1, -1.0
	for s := 1; s <= most; s++ {
		f := waveFill(blocks*s, slots)
		if f >= 0.9 {
			return s
		}
		if f > bestFill {
			best, bestFill = s, f
		}
	}
	return best
}

// waveFill is the share of the slots that blocks keep busy over the whole
// waves they take: a last wave a fraction full costs as much as a full
// one. 0 for no blocks or no slots.
func waveFill(blocks, slots int) float64 {
	if blocks <= 0 || slots <= 0 {
		return 0
	}
	return float64(blocks) / float64((blocks+slots-1)/slots*slots)
}

// newTarget reads the arch the kernels are compiled for ("sm_90a",
// "gfx942:sramecc+:xnack-"): compileTarget of the device's.
func newTarget(arch string, cus int) target {
	return target{cus: cus, mc: matrixBackend(arch), wgmma: wgmmaArch(arch)}
}

// wgmmaArch reports whether the kernels have attn_wgmma for arch:
// NVIDIA sm_90a, Hopper's arch-specific target (wgmma.mma_async).
func wgmmaArch(arch string) bool { return arch == "sm_90a" }

// matrixBackend is the matrix-core backend that the kernels have for
// arch, 0 if none: the arch macros that guard attn_mma, attn_mfma and
// attn_wmma there.
func matrixBackend(arch string) Backend {
	switch {
	case mmaArch(arch):
		return MatrixCore
	case mfmaArch(arch):
		return MFMA
	case wmmaArch(arch):
		return WMMA
	}
	return 0
}

// mfmaArch reports whether the kernels have attn_mfma for arch: AMD
// CDNA2 and CDNA3 (gfx90a, gfx942, gfx950), whose MFMA take bf16 in the
// _1k form.
func mfmaArch(arch string) bool {
	arch, _, _ = strings.Cut(arch, ":")
	return arch == "gfx90a" || arch == "gfx942" || arch == "gfx950"
}

// wmmaArch reports whether the kernels have attn_wmma for arch: AMD
// RDNA3 (gfx11xx) and RDNA4 (gfx12xx), in wave32.
func wmmaArch(arch string) bool {
	arch, _, _ = strings.Cut(arch, ":")
	v, ok := strings.CutPrefix(arch, "gfx")
	if !ok || len(v) != 4 || (!strings.HasPrefix(v, "11") && !strings.HasPrefix(v, "12")) {
		return false
	}
	_, err := strconv.ParseUint(v[2:], 16, 8)
	return err == nil
}

// mmaArch reports whether the kernels have attn_mma for arch: NVIDIA
// sm_80 and later.
func mmaArch(arch string) bool {
	arch, _, _ = strings.Cut(arch, ":")
	if v, ok := strings.CutPrefix(arch, "sm_"); ok {
		n, err := strconv.Atoi(strings.TrimRight(v, "abf"))
		return err == nil && n >= 80
	}
	return false
}

// plan is one call, checked and ready to launch.
type plan struct {
	kp         kParams
	backend    Backend
	kernel     string // attn_fwd_, attn_mma_, attn_mmadec_, attn_mfma_, attn_wmma_ or attn_decode_<dt>_d<DMAX>...
	streams    bool   // a decode kernel (attn_decode, attn_mmadec): splits fill the device's block slots
	combine    string // attn_combine_<dt>, when split
	fusable    bool   // the kernel merges its own splits, given the handle's counters (flagFuse)
	grid       hip.Dim3
	threads    int // the kernel's block size
	shared     int // the kernel's dynamic shared memory, bytes
	splits     int
	rows       int // rows of q over the batch (the LSE's and the partials')
	workspace  int // bytes of split-KV partials: the outputs, then the LSEs
	lsePartOff int // offset in the workspace of the partial LSEs
	empty      bool
}

// choose is the dispatch rule of Backend's godoc.
func choose(pr *problem, dev target, aligned bool) Backend {
	rows := int64(pr.maxSQ) * int64(pr.hq/pr.hkv)
	mc := dev.mc != 0 && pr.q.DType != F32 && pr.paged == nil && aligned
	switch {
	case mc && dev.mc == MatrixCore && mmaDecode(rows, pr.d):
		return MatrixCore
	case rows <= decodeRows:
		return FlashDecoding
	case mc:
		return dev.mc
	}
	return Portable
}

// check of one operand: pointer, dtype, shape, strides.
func checkTensor(op, name string, t Tensor, dt DType) error {
	if t.Ptr == 0 {
		return errorf(op, ErrArgument, "%s has a nil pointer", name)
	}
	if t.DType.Size() == 0 {
		return errorf(op, ErrDType, "%s is %v: want F16, BF16 or F32", name, t.DType)
	}
	if t.DType != dt {
		return errorf(op, ErrDType, "%s is %v and q is %v: convert one so that every operand has q's dtype", name, t.DType, dt)
	}
	for i, d := range t.Shape {
		if d < 0 || d > math.MaxInt32 {
			return errorf(op, ErrShape, "%s has shape %v: dim %d is out of range", name, t.Shape, i)
		}
	}
	if t.Stride != [4]int{} {
		if t.Stride[3] != 1 {
			return errorf(op, ErrShape, "%s has strides %v: the head dim must be contiguous (stride 1); copy it first", name, t.Stride)
		}
		for i, s := range t.Stride[:3] {
			if s < 0 {
				return errorf(op, ErrShape, "%s has strides %v: dim %d's stride is negative", name, t.Stride, i)
			}
		}
	}
	if t.Ptr%hip.DevicePtr(t.DType.Size()) != 0 {
		return errorf(op, ErrArgument, "%s at %#x is not aligned to its %v elements", name, uint64(t.Ptr), t.DType)
	}
	return nil
}

// checkParams checks what Params says, for h_q query heads.
func checkParams(op string, p *Params, hq int) error {
	if math.IsNaN(p.Scale) || math.IsInf(p.Scale, 0) || math.Abs(p.Scale) > math.MaxFloat32 {
		return errorf(op, ErrArgument, "Params.Scale %v: want a finite float32, or 0 for 1/√d", p.Scale)
	}
	if math.IsNaN(p.SoftCap) || p.SoftCap < 0 || p.SoftCap > math.MaxFloat32 {
		return errorf(op, ErrArgument, "Params.SoftCap %v: want a positive finite float32, or 0 for none", p.SoftCap)
	}
	if w := p.Window; w != nil && (w.Left > math.MaxInt32 || w.Right > math.MaxInt32) {
		return errorf(op, ErrArgument, "Params.Window %+v: a side is larger than an int32 counts", *w)
	}
	if p.AlibiSlopes != nil {
		if len(p.AlibiSlopes) != hq {
			return errorf(op, ErrArgument, "Params.AlibiSlopes has %d slopes for %d query heads: give one per query head", len(p.AlibiSlopes), hq)
		}
		if hq > MaxAlibiHeads {
			return errorf(op, ErrArgument, "Params.AlibiSlopes: %d query heads; ALiBi takes at most %d", hq, MaxAlibiHeads)
		}
		for h, s := range p.AlibiSlopes {
			if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
				return errorf(op, ErrArgument, "Params.AlibiSlopes[%d] is %v: want a finite slope", h, s)
			}
		}
	}
	if p.Splits < 0 || p.Splits > MaxSplits {
		return errorf(op, ErrArgument, "Params.Splits %d: want 0 (automatic), 1 (none) up to %d", p.Splits, MaxSplits)
	}
	if p.LSE%4 != 0 {
		return errorf(op, ErrArgument, "Params.LSE at %#x is not aligned to float32", uint64(p.LSE))
	}
	return nil
}

// window is the effective window of p: (-1, -1) for none, the causal mask
// folded in as a right side of at most 0.
func window(p *Params) (left, right int) {
	left, right = -1, -1
	if p.Window != nil {
		left, right = max(p.Window.Left, -1), max(p.Window.Right, -1)
	}
	if p.Causal {
		right = 0
	}
	return left, right
}

// overlaps reports whether two operands' byte ranges meet.
func overlaps(a, b Tensor) bool {
	if a.span() == 0 || b.span() == 0 {
		return false
	}
	return a.Ptr < b.Ptr+hip.DevicePtr(b.span()) && b.Ptr < a.Ptr+hip.DevicePtr(a.span())
}

// problem is what the three entry points have in common once checked.
type problem struct {
	q, k, v, out     Tensor
	batch, sq, maxSQ int
	hq, hkv, d       int
	maxSK            int // the longest key sequence, for split-KV
	varlen           *Varlen
	paged            *PagedKV
}

// newPlan builds the launch of a checked problem on a device.
func newPlan(op string, pr *problem, p *Params, dev target) (plan, error) {
	if err := checkParams(op, p, pr.hq); err != nil {
		return plan{}, err
	}
	dt := pr.q.DType
	bi := bucketIndex(pr.d)
	g := pr.hq / pr.hkv
	q, kk, v, o := pr.q, pr.k, pr.v, pr.out
	qs, ks, vs, os := q.strides(), kk.strides(), v.strides(), o.strides()
	// Vector loads of 8 elements need 16-byte rows everywhere.
	aligned := true
	for _, t := range []struct {
		p  hip.DevicePtr
		st [4]int
	}{{q.Ptr, qs}, {kk.Ptr, ks}, {v.Ptr, vs}, {o.Ptr, os}} {
		if t.p%16 != 0 {
			aligned = false
		}
		for _, s := range t.st[:3] {
			if s*dt.Size()%16 != 0 {
				aligned = false
			}
		}
	}
	left, right := window(p)
	// A side wider than every sequence hides nothing: unbounded, which
	// also keeps the kernels' i + offset ± side within int32. Row i of s_q
	// sees up to key i + s_k - s_q + right: a right side of s_q - 1 or
	// more hides nothing, and a decode step's causal mask (one query a
	// sequence) is no mask, which spares the kernels its checks.
	if left >= pr.maxSK {
		left = -1
	}
	if right >= pr.maxSQ-1 {
		right = -1
	}
	pl := plan{backend: choose(pr, dev, aligned)}
	// bm rows a block; a split takes whole units of unit keys; decode
	// streams u units a step.
	var bm, unit, u int
	switch pl.backend {
	case FlashDecoding:
		bm, unit, u = decodeTiles(buckets[bi], pr.maxSQ*g)
		pl.kernel, pl.threads, pl.streams = decodeNames[dt][bi][bm/4], threads, true
		if bm == 4 && pagedStep(pr, p, aligned, left, right) {
			pl.kernel = pagedNames[dt][bi]
		}
	case MatrixCore:
		names := mmaNames[dt][bi]
		if mmaDecode(int64(pr.maxSQ)*int64(g), pr.d) {
			bm, unit, pl.threads, pl.shared = mmaDecTiles(buckets[bi])
			names, u, pl.streams = mmaDecNames[dt][bi], 1, true
		} else if dev.wgmma && wgmmaTakes(pr.d, pr.maxSK) {
			bm, unit, pl.threads, pl.shared = wgmmaTiles(pr.d)
			names = [2]string{wgmmaNames[dt][bi]}
		} else {
			bm, unit, pl.threads, pl.shared = mmaTiles(buckets[bi])
		}
		pl.kernel = names[0]
		if pr.d != buckets[bi] {
			pl.kernel = names[1]
		}
	case MFMA:
		bm, unit, pl.threads = amdTiles(MFMA, buckets[bi])
		pl.kernel = mfmaNames[dt][bi]
	case WMMA:
		bm, unit, pl.threads = amdTiles(WMMA, buckets[bi])
		pl.kernel = wmmaNames[dt][bi]
	default:
		bm, unit = tiles(dt, buckets[bi])
		pl.kernel, pl.threads = fwdNames[dt][bi], threads
	}
	if pr.batch == 0 || pr.maxSQ == 0 {
		pl.empty = true
		return pl, nil
	}
	if int64(pr.maxSQ)*int64(g) > math.MaxInt32 {
		return plan{}, errorf(op, ErrShape, "%d query rows × %d query heads per KV head are more rows than the kernel counts (2³¹)", pr.maxSQ, g)
	}
	gx := (pr.maxSQ*g + bm - 1) / bm
	if pr.hkv > 65535 {
		return plan{}, errorf(op, ErrShape, "%d KV heads: the kernel takes at most 65535", pr.hkv)
	}
	blocks := gx * pr.hkv * pr.batch
	splits := p.Splits
	units := (pr.maxSK + unit - 1) / unit
	if splits == 0 {
		splits = 1
		switch {
		case pl.streams:
			// Decode streams the cache: splits that fill the device's
			// block slots, each with a step of keys or more
			// (attn_decode: its loads of a step are in flight at once,
			// and a block's steps follow one another) or two tiles
			// (attn_mmadec: its two stages overlap them; mmaDecSplits).
			slots := dev.cus
			if dev.slots != nil {
				if n := dev.slots(pl.kernel, pl.threads, pl.shared); n > 0 {
					slots = n
				}
			}
			if pl.backend == FlashDecoding {
				splits = decodeSplits(blocks, slots, max(units/u, 1))
			} else {
				splits = mmaDecSplits(blocks, slots, max(units/(2*u), 1))
			}
		case dev.cus > 0 && blocks < dev.cus && units >= 4:
			splits = min((2*dev.cus+blocks-1)/blocks, units/2, 64)
		}
	}
	// The grid's z holds batch × splits, at most 65535.
	splits = max(1, min(splits, max(units, 1), MaxSplits, 65535/pr.batch))
	if pr.batch*splits > 65535 {
		return plan{}, errorf(op, ErrShape, "batch %d: the kernel takes at most 65535 batch entries; run the batch in parts", pr.batch)
	}
	rows := pr.batch * pr.sq
	if pr.varlen != nil {
		rows = pr.sq // the packed rows
	}
	pl.grid = hip.Dim3{X: uint32(gx), Y: uint32(pr.hkv), Z: uint32(pr.batch * splits)}
	pl.splits, pl.rows = splits, rows
	if splits > 1 {
		pl.combine = combineNames[dt]
		// attn_mmadec merges its splits itself where that is one round of
		// loads (fa_fused_merge): an MHA decode step's row.
		pl.fusable = pl.backend == MatrixCore && pl.streams && splits <= fuseSplits && min(bm, pr.maxSQ*g)*pr.d <= fuseOutputs
		n := int64(splits) * int64(pr.hq) * int64(rows)
		off := alignUp(n*int64(pr.d)*4, 256)
		pl.lsePartOff, pl.workspace = int(off), int(off+n*4)
	}

	k := &pl.kp
	k.Q, k.K, k.V, k.O, k.LSE = uint64(q.Ptr), uint64(kk.Ptr), uint64(v.Ptr), uint64(o.Ptr), uint64(p.LSE)
	for i := range 3 {
		k.QS[i], k.KS[i], k.VS[i], k.OS[i] = int64(qs[i]), int64(ks[i]), int64(vs[i]), int64(os[i])
	}
	k.Batch, k.SQ, k.HQ, k.HKV, k.D = int32(pr.batch), int32(pr.sq), int32(pr.hq), int32(pr.hkv), int32(pr.d)
	k.SK = int32(kk.Shape[1])
	k.MaxSQ = int32(pr.maxSQ)
	k.Splits = int32(splits)
	k.WindowLeft, k.WindowRight = int32(left), int32(right)
	scale := p.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(pr.d))
	}
	k.Scale, k.SoftCap = float32(scale), float32(p.SoftCap)
	if p.AlibiSlopes != nil {
		k.Flags |= flagAlibi
		copy(k.Alibi[:], p.AlibiSlopes)
	}
	if p.LSE != 0 {
		k.Flags |= flagLSE
	}
	if vl := pr.varlen; vl != nil {
		k.Flags |= flagVarlen
		k.CuQ, k.CuK = uint64(vl.DevCuSeqlensQ), uint64(vl.DevCuSeqlensK)
	}
	if pg := pr.paged; pg != nil {
		k.Flags |= flagPaged
		k.SeqLensK, k.BlockTable = uint64(pg.DevSeqLens), uint64(pg.BlockTable)
		k.BTStride = int64(pg.BlockTableStride)
		k.PageSize, k.NumPages = int32(kk.Shape[1]), int32(kk.Shape[0])
		k.SK = 0
	}
	if aligned {
		k.Flags |= flagAligned
	}
	if r := p.Rotary; r != nil {
		if err := checkRotary(op, pr, r, pl.kernel == pagedNames[dt][bi]); err != nil {
			return plan{}, err
		}
		k.Flags |= flagRotary
		k.NewK, k.NewV, k.Cos, k.Sin = uint64(r.NewK.Ptr), uint64(r.NewV.Ptr), uint64(r.Cos), uint64(r.Sin)
		nk, nv := r.NewK.strides(), r.NewV.strides()
		k.NKS, k.NVS = [2]int64{int64(nk[0]), int64(nk[2])}, [2]int64{int64(nv[0]), int64(nv[2])}
		k.CSStride = int64(r.CosStride)
	}
	return pl, nil
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// checkRotary checks Params.Rotary for a plan whose kernel is (paged) or
// is not attn_decode_paged.
func checkRotary(op string, pr *problem, r *Rotary, paged bool) error {
	if !paged || pr.maxSQ != 1 { // paged: pagedStep's launch, a paged cache's
		return errorf(op, ErrUnsupported, "Params.Rotary: only a Decode of one query a sequence that runs attn_decode_paged takes it (F16 or BF16, a paged cache of power-of-two pages, aligned rows, head dim 32, 64, 128 or 256, no window, soft-capping or ALiBi); rotate q and k before the call")
	}
	dt, d := pr.q.DType, pr.d
	for _, x := range []struct {
		name string
		t    Tensor
	}{{"Rotary.NewK", r.NewK}, {"Rotary.NewV", r.NewV}} {
		if err := checkTensor(op, x.name, x.t, dt); err != nil {
			return err
		}
		if want := [4]int{pr.batch, 1, pr.hkv, d}; x.t.Shape != want {
			return errorf(op, ErrShape, "%s has shape %v: want %v (batch, 1, h_kv, d)", x.name, x.t.Shape, want)
		}
		st := x.t.strides()
		if x.t.Ptr%16 != 0 || st[0]*dt.Size()%16 != 0 || st[2]*dt.Size()%16 != 0 {
			return errorf(op, ErrArgument, "%s at %#x with strides %v: want 16-byte aligned rows", x.name, uint64(x.t.Ptr), st)
		}
	}
	if r.Cos == 0 || r.Sin == 0 || r.Cos%16 != 0 || r.Sin%16 != 0 || r.CosStride < d/2 || r.CosStride*dt.Size()%16 != 0 {
		return errorf(op, ErrArgument, "Rotary.Cos %#x, Sin %#x, CosStride %d: want 16-byte aligned rows of at least d/2 = %d angles", uint64(r.Cos), uint64(r.Sin), r.CosStride, d/2)
	}
	return nil
}

// checkQKV checks the operands that every entry point shares: dtypes,
// head dims, heads, and out against q.
func checkQKV(op string, q, k, v, out Tensor) error {
	dt := q.DType
	if err := checkTensor(op, "q", q, dt); err != nil {
		return err
	}
	for _, x := range []struct {
		name string
		t    Tensor
	}{{"k", k}, {"v", v}, {"out", out}} {
		if err := checkTensor(op, x.name, x.t, dt); err != nil {
			return err
		}
	}
	d := q.Shape[3]
	if d < 8 || d > MaxHeadDim || d%8 != 0 {
		return errorf(op, ErrShape, "q has head dim %d: want a multiple of 8 from 8 to %d", d, MaxHeadDim)
	}
	if k.Shape[3] != d || v.Shape[3] != d {
		return errorf(op, ErrShape, "head dims: q %d, k %d, v %d: they must be equal", d, k.Shape[3], v.Shape[3])
	}
	if k.Shape != v.Shape {
		return errorf(op, ErrShape, "k has shape %v and v %v: they must be equal", k.Shape, v.Shape)
	}
	if out.Shape != q.Shape {
		return errorf(op, ErrShape, "out has shape %v: it must be q's, %v", out.Shape, q.Shape)
	}
	hq, hkv := q.Shape[2], k.Shape[2]
	if hq == 0 || hkv == 0 || hq%hkv != 0 {
		return errorf(op, ErrShape, "%d query heads and %d KV heads: h_q must be a positive multiple of h_kv (GQA/MQA)", hq, hkv)
	}
	for _, x := range []struct {
		name string
		t    Tensor
	}{{"k", k}, {"v", v}} {
		if overlaps(out, x.t) {
			return errorf(op, ErrArgument, "out overlaps %s: the output must not share memory with k or v", x.name)
		}
	}
	return nil
}

// forwardProblem checks Forward's operands.
func forwardProblem(op string, q, k, v, out Tensor) (problem, error) {
	if err := checkQKV(op, q, k, v, out); err != nil {
		return problem{}, err
	}
	if k.Shape[0] != q.Shape[0] {
		return problem{}, errorf(op, ErrShape, "q has batch %d and k %d: they must be equal", q.Shape[0], k.Shape[0])
	}
	return problem{q: q, k: k, v: v, out: out, batch: q.Shape[0], sq: q.Shape[1], maxSQ: q.Shape[1],
		hq: q.Shape[2], hkv: k.Shape[2], d: q.Shape[3], maxSK: k.Shape[1]}, nil
}

// checkCumulative checks cumulative lengths: batch+1 entries from 0,
// never decreasing, the last at most (or, exact, equal to) total.
func checkCumulative(op, name string, cu []int32, dev hip.DevicePtr, total int, exact bool) (maxLen int, err error) {
	if len(cu) < 2 {
		return 0, errorf(op, ErrArgument, "Varlen.%s has %d entries: want batch+1 (at least 2), from 0", name, len(cu))
	}
	if dev == 0 || dev%4 != 0 {
		return 0, errorf(op, ErrArgument, "Varlen.Dev%s at %#x: want the int32 copy of %s on the device", name, uint64(dev), name)
	}
	if cu[0] != 0 {
		return 0, errorf(op, ErrArgument, "Varlen.%s starts at %d: it must start at 0", name, cu[0])
	}
	for b := 1; b < len(cu); b++ {
		if cu[b] < cu[b-1] {
			return 0, errorf(op, ErrArgument, "Varlen.%s decreases at entry %d (%d after %d): lengths cannot be negative", name, b, cu[b], cu[b-1])
		}
		maxLen = max(maxLen, int(cu[b]-cu[b-1]))
	}
	last := int(cu[len(cu)-1])
	if exact && last != total {
		return 0, errorf(op, ErrArgument, "Varlen.%s ends at %d but the tensor has %d rows: they must be equal, so that every output row is written", name, last, total)
	}
	if last > total {
		return 0, errorf(op, ErrArgument, "Varlen.%s ends at %d but the tensor has only %d rows", name, last, total)
	}
	return maxLen, nil
}

// varlenProblem checks ForwardVarlen's operands.
func varlenProblem(op string, q, k, v, out Tensor, vl *Varlen) (problem, error) {
	if err := checkQKV(op, q, k, v, out); err != nil {
		return problem{}, err
	}
	if q.Shape[0] != 1 || k.Shape[0] != 1 {
		return problem{}, errorf(op, ErrShape, "q has batch %d and k %d: a variable-length batch is packed along the seq dim of tensors of batch 1", q.Shape[0], k.Shape[0])
	}
	maxQ, err := checkCumulative(op, "CuSeqlensQ", vl.CuSeqlensQ, vl.DevCuSeqlensQ, q.Shape[1], true)
	if err != nil {
		return problem{}, err
	}
	maxK, err := checkCumulative(op, "CuSeqlensK", vl.CuSeqlensK, vl.DevCuSeqlensK, k.Shape[1], false)
	if err != nil {
		return problem{}, err
	}
	if len(vl.CuSeqlensK) != len(vl.CuSeqlensQ) {
		return problem{}, errorf(op, ErrArgument, "Varlen.CuSeqlensQ has %d entries and CuSeqlensK %d: both are batch+1", len(vl.CuSeqlensQ), len(vl.CuSeqlensK))
	}
	return problem{q: q, k: k, v: v, out: out, batch: len(vl.CuSeqlensQ) - 1, sq: q.Shape[1], maxSQ: maxQ,
		hq: q.Shape[2], hkv: k.Shape[2], d: q.Shape[3], maxSK: maxK, varlen: vl}, nil
}

// pagedProblem checks Decode's operands.
func pagedProblem(op string, q Tensor, kv *PagedKV, out Tensor) (problem, error) {
	if err := checkQKV(op, q, kv.K, kv.V, out); err != nil {
		return problem{}, err
	}
	b := q.Shape[0]
	pages, pageSize := kv.K.Shape[0], kv.K.Shape[1]
	if pages == 0 || pageSize == 0 {
		return problem{}, errorf(op, ErrShape, "the cache has shape %v: want (pages, page size, h_kv, d) with at least one page of one row", kv.K.Shape)
	}
	if kv.DevSeqLens == 0 || kv.DevSeqLens%4 != 0 {
		return problem{}, errorf(op, ErrArgument, "PagedKV.DevSeqLens at %#x: want the int32 copy of SeqLens on the device", uint64(kv.DevSeqLens))
	}
	if kv.BlockTable == 0 || kv.BlockTable%4 != 0 {
		return problem{}, errorf(op, ErrArgument, "PagedKV.BlockTable at %#x: want the int32 (batch, BlockTableStride) table on the device", uint64(kv.BlockTable))
	}
	if kv.BlockTableStride <= 0 || kv.BlockTableStride > math.MaxInt32 {
		return problem{}, errorf(op, ErrArgument, "PagedKV.BlockTableStride %d: want the entries per row of the block table", kv.BlockTableStride)
	}
	room := int64(kv.BlockTableStride) * int64(pageSize)
	if kv.MaxSeqLen < 0 || int64(kv.MaxSeqLen) > room || kv.MaxSeqLen > math.MaxInt32 {
		return problem{}, errorf(op, ErrArgument, "PagedKV.MaxSeqLen %d: want 0 (the launch sized for SeqLens) or up to %d (BlockTableStride %d × page size %d)", kv.MaxSeqLen, room, kv.BlockTableStride, pageSize)
	}
	if kv.MaxSeqLen > 0 {
		room = int64(kv.MaxSeqLen)
	}
	if len(kv.SeqLens) != b && !(kv.MaxSeqLen > 0 && kv.SeqLens == nil) {
		return problem{}, errorf(op, ErrArgument, "PagedKV.SeqLens has %d entries for a batch of %d: give each entry's cache length (or nil with MaxSeqLen)", len(kv.SeqLens), b)
	}
	maxK := kv.MaxSeqLen
	for i, n := range kv.SeqLens {
		if n < 0 || int64(n) > room {
			if kv.MaxSeqLen > 0 {
				return problem{}, errorf(op, ErrArgument, "PagedKV.SeqLens[%d] is %d: want 0 to MaxSeqLen %d", i, n, kv.MaxSeqLen)
			}
			return problem{}, errorf(op, ErrArgument, "PagedKV.SeqLens[%d] is %d: want 0 to %d (BlockTableStride %d × page size %d)", i, n, room, kv.BlockTableStride, pageSize)
		}
		if kv.MaxSeqLen == 0 {
			maxK = max(maxK, int(n))
		}
	}
	return problem{q: q, k: kv.K, v: kv.V, out: out, batch: b, sq: q.Shape[1], maxSQ: q.Shape[1],
		hq: q.Shape[2], hkv: kv.K.Shape[2], d: q.Shape[3], maxSK: maxK, paged: kv}, nil
}
