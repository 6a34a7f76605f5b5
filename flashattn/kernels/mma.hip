// Matrix cores on NVIDIA (sm_80 and later): attn_mma_<dt>_d<DMAX>[_pad],
// F16 and BF16, FlashAttention-2's forward with both products on tensor
// cores (mma.sync m16n8k16, f32 accumulators). A block is four warps of
// MT m tiles of 16 rows (MmaTiles); q's fragments stay in registers, or
// (QS) q's rows wait in shared memory and ldmatrix reads a warp's
// fragments once a tile. K and V tiles of BN keys come in with cp.async:
// with two stages both of tile t+1 load while tile t runs; with one, V's
// while q·kᵀ runs and the next K's while p·v runs. ldmatrix reads them
// (transposed for V) from rows padded by 16 bytes, which keeps its eight
// row reads on distinct banks; shared memory is dynamic (past 48 KiB the
// kernel opts in: package flashattn does it). The online softmax runs on
// the accumulator fragments (each thread holds two rows of each m tile,
// four threads a row), in log2 units with the scale folded into the
// exponent, and P becomes the A operand of p·v in registers. Tiles that
// some row sees only partly (the causal diagonal, window edges, the last
// keys) are the only ones masked; tiles no row sees are never loaded. The
// launch needs 16-byte aligned rows (FA_ALIGNED); package flashattn
// checks. Head dims below DMAX (the _pad kernels) pad q, K and V with
// zeros in shared memory and skip the chunks past d. Block index x runs
// backwards so that the longest causal blocks start first.
#pragma once
#include "common.h"
#if defined(__HIP_PLATFORM_NVIDIA__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define FA_NV_MMA 1
// MmaTiles: a block is WARPS warps of MT m tiles (16 query rows) each.
// K and V pass through shared memory BN keys at a time, in ST stages (2:
// tile t+1 loads while tile t runs); rows are padded by 16 bytes. With QS
// the block's q rows wait in shared memory too and a warp reads its q
// fragments once a tile instead of holding them: two m tiles of q would
// not fit the registers beside the output. Chosen by measurement on an
// H200 (f16, b4 h32 s4096, TFLOP/s): d128 32-key tiles with two m tiles a
// warp 294 (64-row blocks with q held and one stage: 270; that kernel
// with its head-dim checks at run time: 231), d64 64-key tiles 276, d256
// one m tile, one stage 211.
//
// DEC: attn_mmadec's tiles, for the at most 16 rows (s_q × G) of a KV
// head in a decode step: one m tile, q held in each of DEC warps, tiles of
// 16·DEC keys in two stages, each warp taking 16 of them with its own
// online softmax; the warps' states merge at the end. Measured on an H200
// (b8 kv4096 d128, µs): four warps over 64-key tiles (70 KiB at d128,
// three blocks an SM) took MHA f16 137.7 at one split against one warp
// over 16-key tiles at 145.6-147.0 however split (PyTorch's cuDNN kernel,
// four warps over 128-key tiles: 130.9), GQA h32/8 bf16 49.3-49.7 against
// 50.3-54.9; b1 h32/8 d64 over 1024 keys 11.2-11.3 against 10.7. Fewer,
// longer runs of contiguous rows reach more of the memory's bandwidth
// (ncu, one warp: 3.82 TB/s against cuDNN's 4.29). Before: one warp
// against attn_decode's 123 and 160; 32-key tiles and rings of four or
// eight stages did no better.
template <int DMAX, int DEC = 0> struct MmaTiles {
	static const int WARPS = DEC ? DEC : 4; // DEC: warps over the keys, sharing the rows
	static const int MT = DMAX > 128 || DEC ? 1 : 2;
	static const int BN = DEC ? 16 * DEC : DMAX >= 128 ? 32 : 64;
	static const int WN = DEC ? 16 : BN; // keys a warp takes of a tile
	static const int ST = DMAX > 128 ? 1 : 2;
	static const int QS = MT == 2;
	static const int BM = (DEC ? 1 : WARPS) * MT * 16;
	static const int THREADS = WARPS * 32;
	static const int LD = DMAX + 8; // a shared row, in elements
	// Dynamic shared memory: q's rows (QS), then ST tiles of K, then of V.
	static const int QBYTES = QS ? BM * LD * 2 : 0;
	static const int SMEM = QBYTES + 2 * ST * BN * LD * 2;
};

__device__ __forceinline__ unsigned smem_addr(const void* ptr) {
	unsigned r;
	asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }\n" : "=r"(r) : "l"(ptr));
	return r;
}
// cp16 copies 16 bytes from global to shared memory, asynchronously;
// bytes < 16 reads only that many and fills the rest with zeros. The L2
// fetches the 128 bytes around them (L2::128B): measured on an H200, the
// decode steps (b8 kv4096 d128) 147.0-147.6 µs against 149.8-150.2 for
// MHA and 52.9-53.5 against 54.3-54.4 for GQA, prefill unchanged
// (L2::256B: d256 4% slower).
__device__ __forceinline__ void cp16(unsigned dst, const void* src, int bytes) {
	asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
// cp_wait<N> waits until at most N of the thread's committed groups are
// in flight.
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
__device__ __forceinline__ void ldsm4(unsigned* r, unsigned addr) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(addr)
	             : "memory");
}
__device__ __forceinline__ void ldsm4t(unsigned* r, unsigned addr) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(addr)
	             : "memory");
}

// Split-KV merged by attn_mmadec itself (FA_FUSE) where the merge is one
// round of loads: at most 4·32 outputs a block (one row of head dim 128
// or less: an MHA decode step) over at most 8 splits. The splits past the
// keys return at once; the na that see keys write their partials as for
// attn_combine, and the last of them to arrive (a counter a block's rows,
// Params.counters, set back to zero for the next launch) merges them,
// while the other blocks still stream their keys: attn_combine's launch
// and its wait for every split are gone. f16 b8 h32 kv4096 d128, ten calls
// in a row: 137-139 µs a call against 146-148 on an H200, 194 against 199
// on an H100; one call alone 201.2 against 203.3 (H100). Larger merges
// keep attn_combine: GQA's four rows over 16 splits, a warp taking turns,
// took 89 µs against 55, and attn_decode's 256 threads merging the LLM's 9
// splits of a step lost 4 µs a layer.
#define FA_MERGE_SPLITS 8 // package flashattn's fuseSplits
#define FA_MERGE_OUT 4    // outputs a lane (fuseOutputs / 32)
#define FA_DEC_WARPS 4    // attn_mmadec's warps over a tile's keys (mmaDecWarps)

// fa_last_arrival counts the block in once every thread's partials are
// written, and reports (to every thread) whether it is the last of na.
__device__ __forceinline__ bool fa_last_arrival(unsigned* counter, int na) {
	__shared__ int fa_last;
	__threadfence(); // the partials before the count
	__syncthreads();
	if (threadIdx.x == 0) {
		const bool last = atomicAdd(counter, 1u) == (unsigned)(na - 1);
		if (last) *counter = 0; // every split has arrived: ready for the next launch
		fa_last = last;
	}
	__syncthreads();
	if (fa_last) __threadfence(); // the others' partials after their counts
	return fa_last;
}

// fa_ldcg loads from L2, past this multiprocessor's L1 (ld.global.cg).
__device__ __forceinline__ float fa_ldcg(const float* p) {
	float v = 0.0f;
	asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
	return v;
}

// MergeArgs is what fa_merge needs of Params, passed by value: a
// reference to the kernel's parameters would copy them to local memory.
struct MergeArgs {
	const float* opart;
	const float* lsepart;
	void* o;
	float* lse;
	i64 os1, os2, obase;
	int rows, h_q, s_q, sq, d, G, hk, m0, nr, na, b, row0; // s_q: Params'; sq: the sequence's rows
	bool varlen, want_lse;
};

// fa_merge merges the na splits of the block's rows m0 .. m0+nr-1 as
// attn_combine does, a warp with every split's partial and log-sum-exp of
// its outputs in flight at once. The loads go to L2 (fa_ldcg): this
// multiprocessor's L1 may hold stale lines of them. Out of line: only the
// last block runs it.
template <class T> __device__ __noinline__ void fa_merge(MergeArgs a) {
	const int lane = threadIdx.x & 31;
	const i64 step = (i64)a.h_q * a.rows; // a split's rows of partials
	float l[FA_MERGE_OUT][FA_MERGE_SPLITS], v[FA_MERGE_OUT][FA_MERGE_SPLITS];
#pragma unroll
	for (int e = 0; e < FA_MERGE_OUT; e++) {
		const int x = e * 32 + lane, rr = x / a.d, c = x % a.d, r = a.m0 + rr;
		const int i = r / a.G, h = a.hk * a.G + r % a.G;
		const bool ok = x < a.nr * a.d && i < a.sq;
		const i64 row = (i64)h * a.rows + a.row0 + i;
#pragma unroll
		for (int u = 0; u < FA_MERGE_SPLITS; u++) {
			const bool in = ok && u < a.na;
			l[e][u] = in ? fa_ldcg(a.lsepart + u * step + row) : neg_inf();
			v[e][u] = in ? fa_ldcg(a.opart + (u * step + row) * a.d + c) : 0.0f;
		}
	}
#pragma unroll
	for (int e = 0; e < FA_MERGE_OUT; e++) {
		const int x = e * 32 + lane, rr = x / a.d, c = x % a.d, r = a.m0 + rr;
		const int i = r / a.G, h = a.hk * a.G + r % a.G;
		if (x >= a.nr * a.d || i >= a.sq) continue;
		float mx = neg_inf();
#pragma unroll
		for (int u = 0; u < FA_MERGE_SPLITS; u++) mx = nanmax(mx, l[e][u]);
		float sum = 0.0f, acc = 0.0f;
		if (mx != neg_inf()) {
#pragma unroll
			for (int u = 0; u < FA_MERGE_SPLITS; u++) {
				if (l[e][u] == neg_inf()) continue;
				const float w = expf(l[e][u] - mx);
				sum += w;
				acc += w * v[e][u];
			}
		}
		const bool any = mx != neg_inf();
		((T*)a.o)[a.obase + (i64)i * a.os1 + (i64)h * a.os2 + c] = Tr<T>::store(any ? acc / sum : 0.0f);
		if (a.want_lse && c == 0) a.lse[lse_at(a.varlen, a.s_q, a.h_q, a.b, h, i, a.row0)] = any ? mx + logf(sum) : neg_inf();
	}
}

// fa_fused_merge ends an attn_mmadec block under FA_FUSE when na splits
// wrote partials: it counts the block in and, in the last, merges.
template <class T> __device__ __forceinline__ void fa_fused_merge(const Params& p, const Seq& s, int b, int hk, int m0, int nr, int na) {
	const i64 idx = ((i64)b * p.h_kv + hk) * gridDim.x + blockIdx.x;
	if (!fa_last_arrival(p.counters + idx, na) || threadIdx.x >= 32) return; // a warp merges
	MergeArgs a;
	a.opart = p.opart;
	a.lsepart = p.lsepart;
	a.o = p.o;
	a.lse = p.lse;
	a.os1 = p.os[1];
	a.os2 = p.os[2];
	a.obase = s.obase;
	a.rows = total_rows(p);
	a.h_q = p.h_q;
	a.s_q = p.s_q;
	a.sq = s.sq;
	a.d = p.d;
	a.G = p.h_q / p.h_kv;
	a.hk = hk;
	a.m0 = m0;
	a.nr = nr;
	a.na = na;
	a.b = b;
	a.row0 = s.row0;
	a.varlen = (p.flags & FA_VARLEN) != 0;
	a.want_lse = (p.flags & FA_LSE) != 0;
	fa_merge<T>(a);
}

// Mma<T>: c += a·b on one m16n8k16 tile, and two floats packed as a
// register of the A operand (the lower column in the low half).
template <class T> struct Mma;
template <> struct Mma<f16> {
	static __device__ __forceinline__ void run(float* c, const unsigned* a, unsigned b0, unsigned b1) {
		asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
		    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
	}
	static __device__ __forceinline__ unsigned pack(float lo, float hi) {
		unsigned r;
		asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
		return r;
	}
};
template <> struct Mma<bf16> {
	static __device__ __forceinline__ void run(float* c, const unsigned* a, unsigned b0, unsigned b1) {
		asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
		    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
	}
	static __device__ __forceinline__ unsigned pack(float lo, float hi) {
		unsigned r;
		asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
		return r;
	}
};

// MmaCopy is a thread's share of the copies of K or V tiles into shared
// memory: the same 16-byte chunk (head dims c to c + 7) of rows row0,
// row0 + RSTEP, ... of each tile. With INC the chunks are read through a
// byte pointer that moves a row stride at a time; without, each chunk's
// address comes from its row index, a 64-bit multiply and a dozen integer
// instructions (125 of the 807 instructions of attn_mma's tile step at
// d128). Measured on an H200 (TFLOP/s, f16 b4 h32 s4096; decode µs, b8
// kv4096 d128): INC made d256 266 against 218 (its spills went from 144
// bytes to 8) and the MHA decode step 149-151 against 153-156, but d128
// 293 against 301 and d64 273 against 279 (fewer instructions, a worse
// schedule): attn_mma takes it for decode and d256.
template <class T, class Ti, int DMAX, bool FULL, bool INC> struct MmaCopy {
	static const int CPR = DMAX / 8;            // chunks a row
	static const int RSTEP = Ti::THREADS / CPR; // rows between a thread's chunks
	static_assert(Ti::THREADS % CPR == 0, "a thread's chunks share their head dims");
	const T* base;   // the sequence's row 0
	const char* src; // INC: this thread's chunk of row tid / CPR
	i64 rs, rb;      // the row stride in elements and in bytes
	int d, tid;
	__device__ __forceinline__ MmaCopy(const T* s, i64 rs_, int d_, int tid_) : base(s), rs(rs_), rb(rs_ * (i64)sizeof(T)), d(d_), tid(tid_) {
		src = (const char*)(s + tid % CPR * 8) + tid / CPR * rb;
	}
	// tile queues the copy of BN rows from row n0 (of sk) into the shared
	// tile at dst; rows past the sequence are zeros.
	__device__ __forceinline__ void tile(unsigned dst, int n0, int sk) const {
		const int IT = (Ti::BN * CPR + Ti::THREADS - 1) / Ti::THREADS;
		if (INC) {
			const int row0 = tid / CPR, c = tid % CPR * 8;
			const char* g = src + n0 * rb;
#pragma unroll
			for (int it = 0; it < IT; it++) {
				const int row = row0 + it * RSTEP;
				if ((Ti::BN % RSTEP == 0 || row < Ti::BN) && (FULL || c < d)) {
					// A row past the sequence reads no byte (size 0) at the
					// thread's first chunk, a few rows past row 0 at most
					// (base itself, always inside, cost d256 32 more bytes of
					// spills).
					const bool ok = n0 + row < sk;
					cp16(dst + (row * Ti::LD + c) * 2, ok ? g : src, ok ? 16 : 0);
				}
				g += RSTEP * rb;
			}
		} else {
#pragma unroll
			for (int it = 0; it < IT; it++) {
				const int x = it * Ti::THREADS + tid, row = x / CPR, c = (x % CPR) * 8;
				if ((Ti::BN * CPR % Ti::THREADS == 0 || x < Ti::BN * CPR) && (FULL || c < d)) {
					const int j = n0 + row;
					const bool ok = j < sk;
					cp16(dst + (row * Ti::LD + c) * 2, base + (ok ? (i64)j * rs : 0) + c, ok ? 16 : 0);
				}
			}
		}
	}
};

template <class T, int DMAX, bool FULL, int DEC> __device__ __forceinline__ void attn_mma(const Params& p) {
	typedef MmaTiles<DMAX, DEC> Ti;
	const int BN = Ti::BN, LD = Ti::LD, BM = Ti::BM, MT = Ti::MT, NT = Ti::THREADS;
	const int NK = DMAX / 16;  // k chunks of q·kᵀ
	const int NS = Ti::WN / 8; // n tiles of a warp's score tile
	const int NO = DMAX / 8;   // n tiles of the output
	const int ST = Ti::ST, QS = Ti::QS;
	const unsigned TB = BN * LD * 2; // bytes of a tile
	extern __shared__ uint4 fa_smem[];
	uint4* const kbuf = fa_smem + Ti::QBYTES / 16;
	uint4* const vbuf = kbuf + ST * BN * LD / 8;

	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int gq = lane >> 2, tq = lane & 3; // the fragments' row group and column pair
	const int hk = blockIdx.y, b = blockIdx.z / p.splits, split = blockIdx.z % p.splits;
	const int G = p.h_q / p.h_kv;
	const Seq s = seq_of(p, b);
	const int m0 = (gridDim.x - 1 - blockIdx.x) * BM;
	if (m0 >= s.sq * G) return;
	const int off = s.sk - s.sq, left = p.window_left, right = p.window_right;

	const int ilo = m0 / G, ihi = min((m0 + BM - 1) / G, s.sq - 1);
	int lo = 0, hi = s.sk;
	if (left >= 0) lo = max(0, ilo + off - left);
	if (right >= 0) hi = min(s.sk, ihi + off + right + 1);
	const int t0 = lo / BN, t1 = hi > lo ? (hi + BN - 1) / BN : t0;
	const int per = (t1 - t0 + p.splits - 1) / p.splits;
	const int ta = min(t1, t0 + split * per), tb = min(t1, ta + per);
	int na = p.splits; // the splits that write partials
	if (DEC && (p.flags & FA_FUSE)) {
		// Merged here (fa_fused_merge): the splits without keys return.
		na = per > 0 ? (t1 - t0 + per - 1) / per : 1;
		if (split >= na) return;
	}

	// This thread's rows (gq and gq + 8 of each of its warp's m tiles):
	// position, head, the keys they see, and (without QS) their fragments
	// of q.
	int ri[MT][2], rh[MT][2], rlo[MT][2], rhi[MT][2];
	bool rv[MT][2];
	float slope[MT][2];
	unsigned qa[MT][QS ? 1 : NK][4];
#pragma unroll
	for (int mt = 0; mt < MT; mt++) {
#pragma unroll
		for (int rr = 0; rr < 2; rr++) {
			const int r = m0 + ((DEC ? 0 : warp) * MT + mt) * 16 + gq + rr * 8, i = r / G, h = hk * G + r % G;
			ri[mt][rr] = i;
			rh[mt][rr] = h;
			rv[mt][rr] = i < s.sq;
			rlo[mt][rr] = left >= 0 ? i + off - left : 0;
			rhi[mt][rr] = right >= 0 ? min(s.sk - 1, i + off + right) : s.sk - 1;
			slope[mt][rr] = alibi_slope(p, h);
			const T* qp = (const T*)p.q + s.qbase + (i64)min(i, s.sq - 1) * p.qs[1] + (i64)h * p.qs[2];
#pragma unroll
			for (int kc = 0; kc < (QS ? 0 : NK); kc++) {
#pragma unroll
				for (int hh = 0; hh < 2; hh++) {
					const int c = kc * 16 + hh * 8 + tq * 2;
					qa[mt][kc][rr + 2 * hh] = rv[mt][rr] && c < p.d ? *(const unsigned*)(qp + c) : 0u;
				}
			}
		}
	}

	// Zeros in the head dims past d, which the last chunk may read; the
	// copies never write there.
	if (!FULL) {
		const int w = (DMAX - p.d) / 8;
		unsigned short* kz = (unsigned short*)kbuf;
		unsigned short* vz = (unsigned short*)vbuf;
		for (int x = tid; x < ST * BN * w; x += NT) {
			const int o = (x / w) * LD + p.d + (x % w) * 8;
			*(uint4*)(kz + o) = make_uint4(0, 0, 0, 0);
			*(uint4*)(vz + o) = make_uint4(0, 0, 0, 0);
		}
	}

	float o[MT][NO][4];
#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int jn = 0; jn < NO; jn++) o[mt][jn][0] = o[mt][jn][1] = o[mt][jn][2] = o[mt][jn][3] = 0.0f;
	// The running maximum in log2 units, and sum.
	float mrow[MT][2], lrow[MT][2];
#pragma unroll
	for (int mt = 0; mt < MT; mt++) mrow[mt][0] = mrow[mt][1] = neg_inf(), lrow[mt][0] = lrow[mt][1] = 0.0f;
	// Plain logits stay raw until the exponent (exp2_ftz(x·sl - m)): their
	// maximum is the raw one's times a positive scale. The others become
	// log2 units first (sl 1).
	const bool plain = !(p.softcap > 0.0f) && !(p.flags & FA_ALIBI) && p.scale > 0.0f;
	const float sl = plain ? p.scale * FA_LOG2E : 1.0f;

	const unsigned qsm = smem_addr(fa_smem), ks = smem_addr(kbuf), vs = smem_addr(vbuf);
	typedef MmaCopy<T, Ti, DMAX, FULL, (DEC || DMAX > 128)> Copy;
	const Copy kcopy((const T*)p.k + s.kbase + (i64)p.ks[2] * hk, p.ks[1], p.d, tid);
	const Copy vcopy((const T*)p.v + s.vbase + (i64)p.vs[2] * hk, p.vs[1], p.d, tid);
	// The lanes' rows and columns in ldmatrix's four 8×8 matrices: for K
	// (x4: keys 0-7 and 8-15 of a pair of n tiles × dims 0-7, 8-15), for
	// V (x4.trans: keys 0-7, 8-15 × dims 0-7 and 8-15 of a pair of n
	// tiles).
	const int krow = (lane & 7) + ((lane >> 4) << 3), kcol = ((lane >> 3) & 1) << 3;
	const int vrow = (lane & 7) + (((lane >> 3) & 1) << 3), vcol = (lane >> 4) << 3;
	const unsigned kl = ks + (krow * LD + kcol) * 2, vl = vs + (vrow * LD + vcol) * 2;
	// q's A fragments by ldmatrix x4: rows 0-7, 8-15 × dims 0-7, then
	// the same × dims 8-15 (V's lane pattern), from the warp's rows.
	const unsigned ql = qsm + ((warp * MT * 16 + vrow) * LD + vcol) * 2;

	if (QS) {
		// q's rows, zeros past the sequence and past d; they arrive with
		// K(ta).
		const int CPR = DMAX / 8;
		for (int x = tid; x < BM * CPR; x += NT) {
			const int row = x / CPR, c = (x % CPR) * 8, r = m0 + row, i = r / G, h = hk * G + r % G;
			const bool ok = i < s.sq && c < p.d;
			const T* qp = (const T*)p.q + s.qbase + (i64)min(i, s.sq - 1) * p.qs[1] + (i64)h * p.qs[2];
			cp16(qsm + (row * LD + c) * 2, ok ? qp + c : qp, ok ? 16 : 0);
		}
	}
	if (ta < tb) {
		kcopy.tile(ks, ta * BN, s.sk);
		cp_commit();
		if (ST == 2) {
			vcopy.tile(vs, ta * BN, s.sk);
			cp_commit();
		}
	}
	// DEC's warps share the block's rows and take 16 keys each of a tile.
	const int kw = DEC ? warp * Ti::WN : 0;
	for (int t = ta; t < tb; t++) {
		const int n0 = t * BN, nw = n0 + kw;
		const unsigned so = ST == 2 ? ((t - ta) & 1) * TB : 0; // this tile's stage
		if (ST == 2) {
			cp_wait<1>();
			__syncthreads(); // K(t) is in; every warp is done with tile t-1
			if (t + 1 < tb) {
				kcopy.tile(ks + (TB - so), n0 + BN, s.sk);
				cp_commit();
				vcopy.tile(vs + (TB - so), n0 + BN, s.sk);
				cp_commit();
			}
		} else {
			cp_wait_all();
			__syncthreads(); // K(t) is in; every warp is done with V(t-1)
			vcopy.tile(vs, n0, s.sk);
			cp_commit();
		}

		// The lane's addresses, opaque to the compiler once a tile: held
		// across the loop, the constant offsets below would each take a
		// register (an asm operand cannot fold them) instead of folding
		// into ldmatrix's immediate.
		unsigned kt, vt;
		asm volatile("mov.u32 %0, %1;\n" : "=r"(kt) : "r"(kl + so + kw * LD * 2));
		asm volatile("mov.u32 %0, %1;\n" : "=r"(vt) : "r"(vl + so + kw * LD * 2));
		unsigned qt = 0;
		if (QS) asm volatile("mov.u32 %0, %1;\n" : "=r"(qt) : "r"(ql));
		float sacc[MT][NS][4];
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int jn = 0; jn < NS; jn++) sacc[mt][jn][0] = sacc[mt][jn][1] = sacc[mt][jn][2] = sacc[mt][jn][3] = 0.0f;
#pragma unroll
		for (int kc = 0; kc < NK; kc++) {
			if (FULL || kc * 16 < p.d) {
				unsigned bk[NS / 2][4], qf[MT][4];
#pragma unroll
				for (int jp = 0; jp < NS / 2; jp++) ldsm4(bk[jp], kt + (jp * 16 * LD + kc * 16) * 2);
#pragma unroll
				for (int mt = 0; mt < MT; mt++) {
					if (QS) {
						ldsm4(qf[mt], qt + (mt * 16 * LD + kc * 16) * 2);
					} else {
#pragma unroll
						for (int e = 0; e < 4; e++) qf[mt][e] = qa[mt][QS ? 0 : kc][e];
					}
				}
#pragma unroll
				for (int jp = 0; jp < NS / 2; jp++) {
#pragma unroll
					for (int mt = 0; mt < MT; mt++) {
						Mma<T>::run(sacc[mt][2 * jp], qf[mt], bk[jp][0], bk[jp][1]);
						Mma<T>::run(sacc[mt][2 * jp + 1], qf[mt], bk[jp][2], bk[jp][3]);
					}
				}
			}
		}

		// Masks only where some row sees part of the tile.
		const bool masked = n0 + BN > s.sk || (right >= 0 && n0 + BN - 1 > ilo + off + right) ||
		                    (left >= 0 && n0 < ihi + off - left);
		if (!plain) {
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int jn = 0; jn < NS; jn++)
#pragma unroll
					for (int c = 0; c < 4; c++) {
						const int rr = c >> 1, j = nw + jn * 8 + tq * 2 + (c & 1);
						float x = sacc[mt][jn][c] * p.scale;
						if (p.softcap > 0.0f) x = p.softcap * tanhf(x / p.softcap);
						sacc[mt][jn][c] = (x - slope[mt][rr] * fabsf((float)(ri[mt][rr] + off - j))) * FA_LOG2E;
					}
		}
		if (masked) {
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int jn = 0; jn < NS; jn++)
#pragma unroll
					for (int c = 0; c < 4; c++) {
						const int rr = c >> 1, j = nw + jn * 8 + tq * 2 + (c & 1);
						if (j < rlo[mt][rr] || j > rhi[mt][rr]) sacc[mt][jn][c] = neg_inf();
					}
		}
		// The online softmax of the thread's rows; a row's four threads
		// are neighbouring lanes.
#pragma unroll
		for (int mt = 0; mt < MT; mt++) {
			float alpha[2];
#pragma unroll
			for (int rr = 0; rr < 2; rr++) {
				float mx = neg_inf();
#pragma unroll
				for (int jn = 0; jn < NS; jn++) mx = fmaxf(mx, fmaxf(sacc[mt][jn][2 * rr], sacc[mt][jn][2 * rr + 1]));
				mx = fmaxf(mx, __shfl_xor(mx, 1));
				mx = fmaxf(mx, __shfl_xor(mx, 2));
				const float mn = fmaxf(mrow[mt][rr], mx * sl);
				const float ms = mn == neg_inf() ? 0.0f : mn; // nothing seen yet: every p is 0
				alpha[rr] = exp2_ftz(mrow[mt][rr] - ms);
				mrow[mt][rr] = mn;
				float sum = 0.0f;
#pragma unroll
				for (int jn = 0; jn < NS; jn++) {
					sacc[mt][jn][2 * rr] = exp2_ftz(fmaf(sacc[mt][jn][2 * rr], sl, -ms));
					sacc[mt][jn][2 * rr + 1] = exp2_ftz(fmaf(sacc[mt][jn][2 * rr + 1], sl, -ms));
					sum += sacc[mt][jn][2 * rr] + sacc[mt][jn][2 * rr + 1];
				}
				lrow[mt][rr] = lrow[mt][rr] * alpha[rr] + sum;
			}
			// The output rescales only when some row's maximum moved: past
			// the first tiles it seldom does, and the rescale is a quarter
			// of a tile's instructions.
			if (__any(alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
				for (int jn = 0; jn < NO; jn++) {
					o[mt][jn][0] *= alpha[0];
					o[mt][jn][1] *= alpha[0];
					o[mt][jn][2] *= alpha[1];
					o[mt][jn][3] *= alpha[1];
				}
			}
		}

		if (ST == 2) {
			if (t + 1 < tb)
				cp_wait<2>();
			else
				cp_wait<0>();
			__syncthreads(); // V(t) is in
		} else {
			cp_wait_all();
			__syncthreads(); // V(t) is in; every warp is done with K(t)
			if (t + 1 < tb) {
				kcopy.tile(ks, n0 + BN, s.sk);
				cp_commit();
			}
		}
#pragma unroll
		for (int kc = 0; kc < Ti::WN / 16; kc++) {
			// P's A fragments: rows gq, gq+8 × keys 2tq, 2tq+1 and +8.
			unsigned pa[MT][4];
#pragma unroll
			for (int mt = 0; mt < MT; mt++) {
				pa[mt][0] = Mma<T>::pack(sacc[mt][2 * kc][0], sacc[mt][2 * kc][1]);
				pa[mt][1] = Mma<T>::pack(sacc[mt][2 * kc][2], sacc[mt][2 * kc][3]);
				pa[mt][2] = Mma<T>::pack(sacc[mt][2 * kc + 1][0], sacc[mt][2 * kc + 1][1]);
				pa[mt][3] = Mma<T>::pack(sacc[mt][2 * kc + 1][2], sacc[mt][2 * kc + 1][3]);
			}
#pragma unroll
			for (int dp = 0; dp < NO / 2; dp++) {
				if (FULL || dp * 16 < p.d) {
					unsigned bv[4];
					ldsm4t(bv, vt + (kc * 16 * LD + dp * 16) * 2);
#pragma unroll
					for (int mt = 0; mt < MT; mt++) {
						Mma<T>::run(o[mt][2 * dp], pa[mt], bv[0], bv[1]);
						Mma<T>::run(o[mt][2 * dp + 1], pa[mt], bv[2], bv[3]);
					}
				}
			}
		}
	}

	if (QS && ta >= tb) cp_wait_all(); // q's copies, with no tile to wait for them
	if (DEC > 1) {
		// The warps' states merge into warp 0's, lane by lane (a lane
		// holds the same rows' and columns' values in every warp),
		// through the tiles' shared memory.
		const int NV = 4 + NO * 4; // floats a lane: m and l of its two rows, its outputs
		static_assert((DEC - 1) * NV * 32 * 4 <= Ti::SMEM, "the merge fits the tiles' shared memory");
		float* const xm = (float*)fa_smem;
		__syncthreads(); // every warp is done with the tiles
		if (warp > 0) {
			float* w = xm + (warp - 1) * NV * 32 + lane;
			w[0] = mrow[0][0], w[32] = mrow[0][1], w[64] = lrow[0][0], w[96] = lrow[0][1];
#pragma unroll
			for (int jn = 0; jn < NO; jn++)
#pragma unroll
				for (int c = 0; c < 4; c++) w[(4 + jn * 4 + c) * 32] = o[0][jn][c];
		}
		__syncthreads();
		if (warp == 0) {
#pragma unroll
			for (int u = 0; u < DEC - 1; u++) {
				const float* w = xm + u * NV * 32 + lane;
				float sa[2], sb[2];
#pragma unroll
				for (int rr = 0; rr < 2; rr++) {
					const float mu = w[rr * 32], mn = fmaxf(mrow[0][rr], mu);
					const float ms = mn == neg_inf() ? 0.0f : mn;
					sa[rr] = exp2_ftz(mrow[0][rr] - ms);
					sb[rr] = exp2_ftz(mu - ms);
					mrow[0][rr] = mn;
					lrow[0][rr] = lrow[0][rr] * sa[rr] + w[(2 + rr) * 32] * sb[rr];
				}
#pragma unroll
				for (int jn = 0; jn < NO; jn++)
#pragma unroll
					for (int c = 0; c < 4; c++) o[0][jn][c] = o[0][jn][c] * sa[c >> 1] + w[(4 + jn * 4 + c) * 32] * sb[c >> 1];
			}
		}
	}
#pragma unroll
	for (int mt = 0; mt < MT; mt++) {
		if (DEC > 1 && warp > 0) break; // warp 0 writes the merged rows
#pragma unroll
		for (int rr = 0; rr < 2; rr++) {
			float l = lrow[mt][rr];
			l += __shfl_xor(l, 1);
			l += __shfl_xor(l, 2);
			if (!rv[mt][rr]) continue;
			const int i = ri[mt][rr], h = rh[mt][rr];
			// A row that sees no key gets zeros and a log-sum-exp of -inf.
			const float inv = l > 0.0f ? 1.0f / l : 0.0f;
			const float lse = l > 0.0f ? (mrow[mt][rr] + log2f(l)) * FA_LN2 : neg_inf();
			if (na > 1) {
				const i64 row = ((i64)split * p.h_q + h) * total_rows(p) + s.row0 + i;
				float* op = p.opart + row * p.d;
#pragma unroll
				for (int jn = 0; jn < NO; jn++) {
					const int c = jn * 8 + tq * 2;
					if (c < p.d) *(float2*)(op + c) = make_float2(o[mt][jn][2 * rr] * inv, o[mt][jn][2 * rr + 1] * inv);
				}
				if (tq == 0) p.lsepart[row] = lse;
				continue;
			}
			T* op = (T*)p.o + s.obase + (i64)i * p.os[1] + (i64)h * p.os[2];
#pragma unroll
			for (int jn = 0; jn < NO; jn++) {
				const int c = jn * 8 + tq * 2;
				if (c < p.d) *(unsigned*)(op + c) = Mma<T>::pack(o[mt][jn][2 * rr] * inv, o[mt][jn][2 * rr + 1] * inv);
			}
			if ((p.flags & FA_LSE) && tq == 0) p.lse[lse_index(p, b, h, i, s.row0)] = lse;
		}
	}
	if (DEC && (p.flags & FA_FUSE) && na > 1) fa_fused_merge<T>(p, s, b, hk, m0, min(BM, s.sq * G - m0), na);
}

// attn_mma_<dt>_d<DMAX> takes head dim DMAX itself; attn_mma_<dt>_d<DMAX>_pad
// the smaller ones, skipping the chunks past d (checks that cost the
// full-width kernel 15% when it had them).
#define FA_MMA(T, D)                                                                                            \
	extern "C" __global__ __launch_bounds__(MmaTiles<D>::THREADS) void attn_mma_##T##_d##D(Params p) {           \
		FA_GRID_WAIT(); attn_mma<T, D, true, 0>(p);                                                          \
	}                                                                                                        \
	extern "C" __global__ __launch_bounds__(MmaTiles<D>::THREADS) void attn_mma_##T##_d##D##_pad(Params p) {     \
		FA_GRID_WAIT(); attn_mma<T, D, false, 0>(p);                                                         \
	}
// attn_mmadec_<dt>_d<DMAX>[_pad]: attn_mma for the few rows of a decode
// step, FA_DEC_WARPS warps over each tile's keys (package flashattn's
// mmaDecWarps), the keys spread over blocks by split-KV. Up to head dim
// 128: at 256 the output's fragments and q's take more registers than a
// thread has.
#define FA_MMADEC(T, D)                                                                                          \
	extern "C" __global__ __launch_bounds__((MmaTiles<D, FA_DEC_WARPS>::THREADS)) void attn_mmadec_##T##_d##D(Params p) { \
		FA_GRID_WAIT(); attn_mma<T, D, true, FA_DEC_WARPS>(p);                                              \
	}                                                                                                        \
	extern "C" __global__ __launch_bounds__((MmaTiles<D, FA_DEC_WARPS>::THREADS)) void attn_mmadec_##T##_d##D##_pad(Params p) { \
		FA_GRID_WAIT(); attn_mma<T, D, false, FA_DEC_WARPS>(p);                                             \
	}
FA_MMA(f16, 32) FA_MMA(f16, 64) FA_MMA(f16, 128) FA_MMA(f16, 256)
FA_MMA(bf16, 32) FA_MMA(bf16, 64) FA_MMA(bf16, 128) FA_MMA(bf16, 256)
FA_MMADEC(f16, 32) FA_MMADEC(f16, 64) FA_MMADEC(f16, 128)
FA_MMADEC(bf16, 32) FA_MMADEC(bf16, 64) FA_MMADEC(bf16, 128)
#endif // NVIDIA sm_80+
