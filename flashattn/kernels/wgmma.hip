// attn_wgmma: attn_mma's algorithm on Hopper's warpgroup instructions
// (wgmma.mma_async, sm_90a; package flashattn compiles sm_90 devices'
// kernels for sm_90a): a block is two warpgroups of 64 query rows each,
// q·kᵀ reads q and K straight from shared memory, p·v takes p from the
// registers the softmax leaves it in and V from shared memory, 128 keys a
// tile in two stages. The tiles are stored as wgmma's 128-byte swizzle
// wants them (wg_sw), which also keeps cp.async's writes free of bank
// conflicts. Head dims 64 and 128 exactly (package flashattn's wgmmaTakes
// says when it runs), 16-byte aligned rows, dense or
// variable-length K and V; every mask, ALiBi, soft-capping, split-KV and
// the log-sum-exp as attn_mma. Measured on an H200 (f16 b4 h32 s4096,
// TFLOP/s): d128 413-417 against attn_mma's 303, causal 372-376, GQA
// bf16 causal 385-389; d64 293-295 against 281. Slower, not kept: the
// softmax of tile t overlapping the p·v of tile t-1 (a second score tile
// in flight: 255 registers and spills, d128 395), and tiles in halves of
// 64 keys whose softmax overlaps the other half's products (357).
#pragma once
#include "mma.hip"
#if FA_NV_MMA
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FA_NV_WGMMA 1
template <int DMAX> struct WgTiles {
	static const int THREADS = 256; // two warpgroups
	static const int BM = 128;      // 64 rows a warpgroup
	static const int BN = 128;      // keys a tile
	static const int QBYTES = BM * DMAX * 2;
	static const int TBYTES = BN * DMAX * 2; // a K or V tile
	// Dynamic shared memory: 1 KiB to align on, q, two stages of K, two
	// of V.
	static const int SMEM = 1024 + QBYTES + 4 * TBYTES;
};

// wg_sw is where 16-byte chunk c of row r of a tile of R rows lies: the
// tile is 64-element column blocks of R rows of 128 bytes each, and a
// row's eight chunks are permuted by the row's low three bits (the
// 128-byte swizzle; a block starts on 1 KiB).
__device__ __forceinline__ unsigned wg_sw(int R, int r, int c) {
	return (unsigned)((c >> 3) * R * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}
// wg_desc is a shared-memory matrix descriptor: start address, the
// leading and stride byte offsets, the 128-byte swizzle.
__device__ __forceinline__ unsigned long long wg_desc(unsigned addr, unsigned lbo, unsigned sbo) {
	return (unsigned long long)((addr & 0x3ffff) >> 4) | (unsigned long long)(lbo >> 4) << 16 |
	       (unsigned long long)(sbo >> 4) << 32 | 1ull << 62;
}
// The asynchronous proxy (wgmma) reads shared memory that cp.async wrote
// through the generic one: each writer fences before the barrier.
__device__ __forceinline__ void wg_proxy_fence() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// wg_wait<N> waits until at most N of the warpgroup's committed groups
// run (they end in order).
template <int N> __device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// wg_keep pins N accumulators after a wait: their uses cannot move above
// it.
template <int N> __device__ __forceinline__ void wg_keep(float* d) {
#pragma unroll
	for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}

// Wg<T, N>: one m64nNk16 step on a warpgroup's accumulators d (N/2 a
// thread, mma.sync's m16n8 layout for the warp's 16 rows); acc 0 writes d
// instead of adding. ss: A and B K-major in shared memory; rs: A from
// registers (mma.sync's A fragment), B N-major (transposed) in shared
// memory.
template <class T, int N> struct Wg;
#define FA_WG_D8(b) "+f"(d[b]), "+f"(d[b + 1]), "+f"(d[b + 2]), "+f"(d[b + 3]), "+f"(d[b + 4]), "+f"(d[b + 5]), "+f"(d[b + 6]), "+f"(d[b + 7])
#define FA_WG_D32 FA_WG_D8(0), FA_WG_D8(8), FA_WG_D8(16), FA_WG_D8(24)
#define FA_WG_D64 FA_WG_D32, FA_WG_D8(32), FA_WG_D8(40), FA_WG_D8(48), FA_WG_D8(56)
#define FA_WG_R32                                                                                            \
	"{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
	"%23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define FA_WG_R64                                                                                              \
	"{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "   \
	"%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, " \
	"%45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define FA_WG(T, TY, N, R, D, I0, I1, I2, I3, I4, I5)                                                                \
	template <> struct Wg<T, N> {                                                                                   \
		static __device__ __forceinline__ void ss(float* d, unsigned long long a, unsigned long long b, int acc) {   \
			asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" I2 ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N          \
			             "k16.f32." TY "." TY " " R ", %" I0 ", %" I1 ", p, 1, 1, 0, 0;\n}\n"                            \
			             : D                                                                                        \
			             : "l"(a), "l"(b), "r"(acc));                                                               \
		}                                                                                                           \
		static __device__ __forceinline__ void rs(float* d, const unsigned* a, unsigned long long b, int acc) {      \
			asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" I5 ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N          \
			             "k16.f32." TY "." TY " " R ", {%" I0 ", %" I1 ", %" I2 ", %" I3 "}, %" I4 ", p, 1, 1, 1;\n}\n"  \
			             : D                                                                                        \
			             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(acc));                           \
		}                                                                                                           \
	};
FA_WG(f16, "f16", 64, FA_WG_R32, FA_WG_D32, "32", "33", "34", "35", "36", "37")
FA_WG(f16, "f16", 128, FA_WG_R64, FA_WG_D64, "64", "65", "66", "67", "68", "69")
FA_WG(bf16, "bf16", 64, FA_WG_R32, FA_WG_D32, "32", "33", "34", "35", "36", "37")
FA_WG(bf16, "bf16", 128, FA_WG_R64, FA_WG_D64, "64", "65", "66", "67", "68", "69")

// wg_tile queues the copy of BN rows (from row n0 of sk) of a K or V head
// into the swizzled tile at dst; rows past the sequence are zeros.
template <class T, int DMAX> __device__ __forceinline__ void wg_tile(unsigned dst, const T* base, i64 rs, int n0, int sk, int tid) {
	typedef WgTiles<DMAX> Ti;
	const int CPR = DMAX / 8;
#pragma unroll
	for (int it = 0; it < Ti::BN * CPR / Ti::THREADS; it++) {
		const int x = it * Ti::THREADS + tid, row = x / CPR, c = x % CPR, j = n0 + row;
		const bool ok = j < sk;
		cp16(dst + wg_sw(Ti::BN, row, c), base + (ok ? (i64)j * rs : 0) + c * 8, ok ? 16 : 0);
	}
}

template <class T, int DMAX> __device__ __forceinline__ void attn_wgmma(const Params& p) {
	typedef WgTiles<DMAX> Ti;
	const int BN = Ti::BN, BM = Ti::BM, NT = Ti::THREADS;
	const int NK = DMAX / 16; // k steps of q·kᵀ
	const int NS = BN / 8;    // n tiles of a score tile
	const int NO = DMAX / 8;  // n tiles of the output
	const int CPR = DMAX / 8; // 16-byte chunks a row
	const unsigned TB = Ti::TBYTES;
	extern __shared__ uint4 fa_smem[];
	const unsigned qs = (smem_addr(fa_smem) + 1023u) & ~1023u, ks = qs + Ti::QBYTES, vs = ks + 2 * TB;

	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
	const int gq = lane >> 2, tq = lane & 3;
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

	// This thread's rows: gq and gq + 8 of its warp's 16 (a warpgroup's
	// four warps hold its 64 rows in order).
	int ri[2], rh[2], rlo[2], rhi[2];
	bool rv[2];
	float slope[2];
#pragma unroll
	for (int rr = 0; rr < 2; rr++) {
		const int r = m0 + warp * 16 + gq + rr * 8, i = r / G, h = hk * G + r % G;
		ri[rr] = i;
		rh[rr] = h;
		rv[rr] = i < s.sq;
		rlo[rr] = left >= 0 ? i + off - left : 0;
		rhi[rr] = right >= 0 ? min(s.sk - 1, i + off + right) : s.sk - 1;
		slope[rr] = alibi_slope(p, h);
	}

	float o[NO][4];
#pragma unroll
	for (int jn = 0; jn < NO; jn++) o[jn][0] = o[jn][1] = o[jn][2] = o[jn][3] = 0.0f;
	float mrow[2] = {neg_inf(), neg_inf()}, lrow[2] = {0.0f, 0.0f};
	const bool plain = !(p.softcap > 0.0f) && !(p.flags & FA_ALIBI) && p.scale > 0.0f;
	const float sl = plain ? p.scale * FA_LOG2E : 1.0f;

	// q's rows, zeros past the sequence; they arrive with K(ta).
	for (int x = tid; x < BM * CPR; x += NT) {
		const int row = x / CPR, c = x % CPR, r = m0 + row, i = r / G, h = hk * G + r % G;
		const bool ok = i < s.sq;
		const T* qp = (const T*)p.q + s.qbase + (i64)min(i, s.sq - 1) * p.qs[1] + (i64)h * p.qs[2];
		cp16(qs + wg_sw(BM, row, c), ok ? qp + c * 8 : qp, ok ? 16 : 0);
	}
	const T* kbase = (const T*)p.k + s.kbase + (i64)p.ks[2] * hk;
	const T* vbase = (const T*)p.v + s.vbase + (i64)p.vs[2] * hk;
	if (ta < tb) {
		wg_tile<T, DMAX>(ks, kbase, p.ks[1], ta * BN, s.sk, tid);
		cp_commit();
		wg_tile<T, DMAX>(vs, vbase, p.vs[1], ta * BN, s.sk, tid);
		cp_commit();
	}
	// The warpgroup's 64 rows of q: k step kc is 32 bytes into column
	// block kc / 4; 8-row groups 1 KiB apart.
	const unsigned qw = qs + wg * 64 * 128;
	for (int t = ta; t < tb; t++) {
		const int n0 = t * BN;
		const unsigned so = ((t - ta) & 1) * TB; // this tile's stage
		cp_wait<1>();
		wg_proxy_fence();
		__syncthreads(); // K(t) is in; every warpgroup is done with tile t-1
		if (t + 1 < tb) {
			wg_tile<T, DMAX>(ks + (TB - so), kbase, p.ks[1], n0 + BN, s.sk, tid);
			cp_commit();
			wg_tile<T, DMAX>(vs + (TB - so), vbase, p.vs[1], n0 + BN, s.sk, tid);
			cp_commit();
		}

		float sacc[NS][4];
		wg_fence();
#pragma unroll
		for (int kc = 0; kc < NK; kc++) {
			const unsigned long long qd = wg_desc(qw + (kc >> 2) * BM * 128 + (kc & 3) * 32, 16, 1024);
			const unsigned long long kd = wg_desc(ks + so + (kc >> 2) * BN * 128 + (kc & 3) * 32, 16, 1024);
			Wg<T, BN>::ss(&sacc[0][0], qd, kd, kc > 0);
		}
		wg_commit();
		wg_wait<0>();
		wg_keep<NS * 4>(&sacc[0][0]);

		const bool masked = n0 + BN > s.sk || (right >= 0 && n0 + BN - 1 > ilo + off + right) ||
		                    (left >= 0 && n0 < ihi + off - left);
		if (!plain) {
#pragma unroll
			for (int jn = 0; jn < NS; jn++)
#pragma unroll
				for (int c = 0; c < 4; c++) {
					const int rr = c >> 1, j = n0 + jn * 8 + tq * 2 + (c & 1);
					float x = sacc[jn][c] * p.scale;
					if (p.softcap > 0.0f) x = p.softcap * tanhf(x / p.softcap);
					sacc[jn][c] = (x - slope[rr] * fabsf((float)(ri[rr] + off - j))) * FA_LOG2E;
				}
		}
		if (masked) {
#pragma unroll
			for (int jn = 0; jn < NS; jn++)
#pragma unroll
				for (int c = 0; c < 4; c++) {
					const int rr = c >> 1, j = n0 + jn * 8 + tq * 2 + (c & 1);
					if (j < rlo[rr] || j > rhi[rr]) sacc[jn][c] = neg_inf();
				}
		}
		float alpha[2];
#pragma unroll
		for (int rr = 0; rr < 2; rr++) {
			float mx = neg_inf();
#pragma unroll
			for (int jn = 0; jn < NS; jn++) mx = fmaxf(mx, fmaxf(sacc[jn][2 * rr], sacc[jn][2 * rr + 1]));
			mx = fmaxf(mx, __shfl_xor(mx, 1));
			mx = fmaxf(mx, __shfl_xor(mx, 2));
			const float mn = fmaxf(mrow[rr], mx * sl);
			const float ms = mn == neg_inf() ? 0.0f : mn;
			alpha[rr] = exp2_ftz(mrow[rr] - ms);
			mrow[rr] = mn;
			float sum = 0.0f;
#pragma unroll
			for (int jn = 0; jn < NS; jn++) {
				sacc[jn][2 * rr] = exp2_ftz(fmaf(sacc[jn][2 * rr], sl, -ms));
				sacc[jn][2 * rr + 1] = exp2_ftz(fmaf(sacc[jn][2 * rr + 1], sl, -ms));
				sum += sacc[jn][2 * rr] + sacc[jn][2 * rr + 1];
			}
			lrow[rr] = lrow[rr] * alpha[rr] + sum;
		}
		if (__any(alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
			for (int jn = 0; jn < NO; jn++) {
				o[jn][0] *= alpha[0];
				o[jn][1] *= alpha[0];
				o[jn][2] *= alpha[1];
				o[jn][3] *= alpha[1];
			}
		}
		// P's A fragments: rows gq, gq+8 × keys 2tq, 2tq+1 and +8 of each
		// 16 keys.
		unsigned pa[BN / 16][4];
#pragma unroll
		for (int kc = 0; kc < BN / 16; kc++) {
			pa[kc][0] = Mma<T>::pack(sacc[2 * kc][0], sacc[2 * kc][1]);
			pa[kc][1] = Mma<T>::pack(sacc[2 * kc][2], sacc[2 * kc][3]);
			pa[kc][2] = Mma<T>::pack(sacc[2 * kc + 1][0], sacc[2 * kc + 1][1]);
			pa[kc][3] = Mma<T>::pack(sacc[2 * kc + 1][2], sacc[2 * kc + 1][3]);
		}

		if (t + 1 < tb)
			cp_wait<2>();
		else
			cp_wait<0>();
		wg_proxy_fence();
		__syncthreads(); // V(t) is in
		// V is N-major (head dims contiguous): 16 keys a k step, 2 KiB;
		// column blocks of 64 head dims BN rows apart.
		wg_fence();
#pragma unroll
		for (int kc = 0; kc < BN / 16; kc++) Wg<T, DMAX>::rs(&o[0][0], pa[kc], wg_desc(vs + so + kc * 2048, BN * 128, 1024), 1);
		wg_commit();
		wg_wait<0>();
		wg_keep<NO * 4>(&o[0][0]);
	}

	if (ta >= tb) cp_wait_all(); // q's copies, with no tile to wait for them
#pragma unroll
	for (int rr = 0; rr < 2; rr++) {
		float l = lrow[rr];
		l += __shfl_xor(l, 1);
		l += __shfl_xor(l, 2);
		if (!rv[rr]) continue;
		const int i = ri[rr], h = rh[rr];
		const float inv = l > 0.0f ? 1.0f / l : 0.0f;
		const float lse = l > 0.0f ? (mrow[rr] + log2f(l)) * FA_LN2 : neg_inf();
		if (p.splits > 1) {
			const i64 row = ((i64)split * p.h_q + h) * total_rows(p) + s.row0 + i;
			float* op = p.opart + row * p.d;
#pragma unroll
			for (int jn = 0; jn < NO; jn++) {
				const int c = jn * 8 + tq * 2;
				*(float2*)(op + c) = make_float2(o[jn][2 * rr] * inv, o[jn][2 * rr + 1] * inv);
			}
			if (tq == 0) p.lsepart[row] = lse;
			continue;
		}
		T* op = (T*)p.o + s.obase + (i64)i * p.os[1] + (i64)h * p.os[2];
#pragma unroll
		for (int jn = 0; jn < NO; jn++) {
			const int c = jn * 8 + tq * 2;
			*(unsigned*)(op + c) = Mma<T>::pack(o[jn][2 * rr] * inv, o[jn][2 * rr + 1] * inv);
		}
		if ((p.flags & FA_LSE) && tq == 0) p.lse[lse_index(p, b, h, i, s.row0)] = lse;
	}
}

// attn_wgmma_<dt>_d<DMAX>: head dim DMAX itself, 64 or 128.
#define FA_WGMMA(T, D)                                                                                          \
	extern "C" __global__ __launch_bounds__(WgTiles<D>::THREADS, 1) void attn_wgmma_##T##_d##D(Params p) {       \
		FA_GRID_WAIT(); attn_wgmma<T, D>(p);                                                                 \
	}
FA_WGMMA(f16, 64) FA_WGMMA(f16, 128)
FA_WGMMA(bf16, 64) FA_WGMMA(bf16, 128)
#endif // sm_90a
#endif // NVIDIA sm_80+
