package flashattn

import (
	"math"
	"strconv"
	"strings"

	"github.com/rocm-go/rocm/hip"

	"github.com/rocm-go/rocm/errs"
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
		return plan{}, pkg.Errorf(op, errs.ErrShape, "%d query rows × %d query heads per KV head are more rows than the kernel counts (2³¹)", pr.maxSQ, g)
	}
	gx := (pr.maxSQ*g + bm - 1) / bm
	if pr.hkv > 65535 {
		return plan{}, pkg.Errorf(op, errs.ErrShape, "%d KV heads: the kernel takes at most 65535", pr.hkv)
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
		return plan{}, pkg.Errorf(op, errs.ErrShape, "batch %d: the kernel takes at most 65535 batch entries; run the batch in parts", pr.batch)
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
