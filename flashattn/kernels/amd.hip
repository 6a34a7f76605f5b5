// Matrix cores on AMD: attn_mfma_<dt>_d<DMAX> on CDNA (gfx90a, gfx942,
// gfx950: v_mfma, wave64) and attn_wmma_<dt>_d<DMAX> on RDNA3 (gfx11:
// v_wmma ..._w32) and RDNA4 (gfx12: v_wmma ..._w32_gfx12), F16 and BF16
// with f32 accumulators, the features and Params of attn_mma. Written
// without an AMD GPU: tier 1 compiles them, TestAMDFragments emulates
// their lane arithmetic against each instruction's documented layout; no
// AMD GPU has run them yet.
//
// Both products run transposed, so that a lane owns one query row:
// Sᵀ = K·Qᵀ (A: a tile of K, keys × dims; B: Qᵀ, dims × rows) and
// Oᵀ += Vᵀ·Pᵀ (A: Vᵀ, dims × keys; B: Pᵀ, keys × rows). In every
// instruction here a lane holds column lane % M of C, so the row max and
// sum of the online softmax are a lane's own values reduced over the
// lanes that share its column (xor shuffles by M, 2M, ... below the wave
// size), and the rescale of O by a row's alpha is a lane's own.
//
// The layouts (AMD's matrix instruction calculator; g = lane / M; A[i][k]
// and B[k][j] have the same form with i and j swapped):
//   mfma_f32_16x16x16 f16/bf16_1k, wave64, M 16, K 16, 4 A/B elements and
//     4 C floats a lane: A[i][k] in lane i + 16·(k/4), element k % 4;
//     C[i][j] in lane j + 16·(i/4), element i % 4.
//   mfma_f32_32x32x8 f16/bf16_1k, wave64, M 32, K 8, 4 A/B elements and
//     16 C floats: A[i][k] in lane i + 32·(k/4), element k % 4; C[i][j] in
//     lane j + 32·((i/4) % 2), element 4·(i/8) + i % 4.
//   wmma_f32_16x16x16 f16/bf16 (gfx11), wave32, M 16, K 16, 16 A/B
//     elements and 8 C floats: A[i][k] in lanes i and i+16 (both must
//     hold it), element k; C[i][j] in lane j + 16·(i % 2), element i / 2.
//   wmma_f32_16x16x16 f16/bf16 (gfx12), wave32, M 16, K 16, 8 A/B
//     elements and 8 C floats: A[i][k] in lane i + 16·((k/4) % 2),
//     element 4·(k/8) + k % 4; C[i][j] in lane j + 16·(i/8), element i % 8.
// A contraction may take its k in any order as long as A and B agree, and
// A and B share one lane-to-k form: so a lane's NA elements are NA
// consecutive dims (q·kᵀ) or keys (p·v) from kofs(lane) in each chunk of
// K, one vector read from shared memory, whatever order the instruction
// gives k. The keys of p·v are chosen so that, except on gfx11, a lane's
// P values in Sᵀ's C fragments are exactly its B elements of Pᵀ (flat C
// element c·NA + e is key c·K + kofs + e); gfx11's lanes hold half of the
// keys they need, and take the other half from lane ^ 16.
//
// A block is 4 waves of M query rows; K tiles as they are and V tiles
// transposed (dims × keys) pass through shared memory, rows padded by 16
// bytes; the q fragments stay in registers, or in shared memory where
// registers would not hold them with O's (gfx11/gfx12 at head dim 256).
#pragma once
#include "common.h"
#if defined(__gfx90a__) || defined(__gfx942__) || defined(__gfx950__)
#define FA_AMD_MFMA 1
#elif defined(__GFX11__) || defined(__GFX12__)
#define FA_AMD_WMMA 1
#endif
#if FA_AMD_MFMA || FA_AMD_WMMA
#define FA_AMD_WAVES 4

typedef short fa_s4 __attribute__((ext_vector_type(4)));
typedef short fa_s8 __attribute__((ext_vector_type(8)));
typedef short fa_s16 __attribute__((ext_vector_type(16)));
typedef _Float16 fa_h4 __attribute__((ext_vector_type(4)));
typedef _Float16 fa_h8 __attribute__((ext_vector_type(8)));
typedef _Float16 fa_h16 __attribute__((ext_vector_type(16)));
typedef float fa_f4 __attribute__((ext_vector_type(4)));
typedef float fa_f8 __attribute__((ext_vector_type(8)));
typedef float fa_f16 __attribute__((ext_vector_type(16)));

template <class T> struct IsF16 {
	static const bool v = false;
};
template <> struct IsF16<f16> {
	static const bool v = true;
};

// bits16 is x rounded to T, as the 16 bits the instructions take.
template <class T> __device__ __forceinline__ short bits16(float x) { return __builtin_bit_cast(short, Tr<T>::store(x)); }

// The fragment traits: W lanes, M×M C tiles, K deep; NA elements of A
// (and of B) and NC floats of C a lane; AB and C their vector types.
// kofs(lane) is the first of a lane's NA consecutive k in a chunk; crow
// (lane, r) the row of C element r (its column is lane % M); mma(c, a, b)
// c += a·b; pfrag(s, c, lane) P's B fragment for keys c·K... of a tile,
// from the tile's C fragments s (scores already exponentiated).
#if FA_AMD_MFMA
template <class T> struct Mfma16 {
	static const int W = 64, M = 16, K = 16, NA = 4, NC = 4;
	typedef fa_s4 AB;
	typedef fa_f4 C;
	static __device__ __forceinline__ int kofs(int lane) { return 4 * (lane >> 4); }
	static __device__ __forceinline__ int crow(int lane, int r) { return 4 * (lane >> 4) + r; }
	static __device__ __forceinline__ void mma(C& c, const AB& a, const AB& b) {
		if constexpr (IsF16<T>::v)
			c = __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(fa_h4, a), __builtin_bit_cast(fa_h4, b), c, 0, 0, 0);
		else
			c = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, 0, 0, 0);
	}
	static __device__ __forceinline__ AB pfrag(const C* s, int c, int lane) {
		AB b;
#pragma unroll
		for (int e = 0; e < NA; e++) b[e] = bits16<T>(s[(c * NA + e) / NC][(c * NA + e) % NC]);
		return b;
	}
};

template <class T> struct Mfma32 {
	static const int W = 64, M = 32, K = 8, NA = 4, NC = 16;
	typedef fa_s4 AB;
	typedef fa_f16 C;
	static __device__ __forceinline__ int kofs(int lane) { return 4 * (lane >> 5); }
	static __device__ __forceinline__ int crow(int lane, int r) { return 8 * (r >> 2) + 4 * (lane >> 5) + (r & 3); }
	static __device__ __forceinline__ void mma(C& c, const AB& a, const AB& b) {
		if constexpr (IsF16<T>::v)
			c = __builtin_amdgcn_mfma_f32_32x32x8f16(__builtin_bit_cast(fa_h4, a), __builtin_bit_cast(fa_h4, b), c, 0, 0, 0);
		else
			c = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, c, 0, 0, 0);
	}
	static __device__ __forceinline__ AB pfrag(const C* s, int c, int lane) {
		AB b;
#pragma unroll
		for (int e = 0; e < NA; e++) b[e] = bits16<T>(s[(c * NA + e) / NC][(c * NA + e) % NC]);
		return b;
	}
};

// Frag: 32×32×8 where its 16 C floats a lane fit beside O's (head dims up
// to 128), 16×16×16 at 256.
template <class T, int DMAX> struct Frag {
	typedef Mfma32<T> F;
};
template <class T> struct Frag<T, 256> {
	typedef Mfma16<T> F;
};
#elif defined(__GFX11__)
template <class T> struct Wmma11 {
	static const int W = 32, M = 16, K = 16, NA = 16, NC = 8;
	typedef fa_s16 AB;
	typedef fa_f8 C;
	static __device__ __forceinline__ int kofs(int) { return 0; } // lanes i and i+16 hold the same
	static __device__ __forceinline__ int crow(int lane, int r) { return 2 * r + (lane >> 4); }
	static __device__ __forceinline__ void mma(C& c, const AB& a, const AB& b) {
		if constexpr (IsF16<T>::v)
			c = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(__builtin_bit_cast(fa_h16, a), __builtin_bit_cast(fa_h16, b), c);
		else
			c = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(a, b, c);
	}
	// Key 2r + g of the chunk is element r of the lanes of group g: each
	// lane takes the other group's from lane ^ 16.
	static __device__ __forceinline__ AB pfrag(const C* s, int c, int lane) {
		const bool hi = (lane >> 4) != 0;
		AB b;
#pragma unroll
		for (int r = 0; r < NC; r++) {
			const float own = s[c][r], oth = __shfl_xor(own, 16);
			b[2 * r] = bits16<T>(hi ? oth : own);
			b[2 * r + 1] = bits16<T>(hi ? own : oth);
		}
		return b;
	}
};
template <class T, int DMAX> struct Frag {
	typedef Wmma11<T> F;
};
#else
template <class T> struct Wmma12 {
	static const int W = 32, M = 16, K = 16, NA = 8, NC = 8;
	typedef fa_s8 AB;
	typedef fa_f8 C;
	static __device__ __forceinline__ int kofs(int lane) { return 8 * (lane >> 4); }
	static __device__ __forceinline__ int crow(int lane, int r) { return 8 * (lane >> 4) + r; }
	static __device__ __forceinline__ void mma(C& c, const AB& a, const AB& b) {
		if constexpr (IsF16<T>::v)
			c = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(__builtin_bit_cast(fa_h8, a), __builtin_bit_cast(fa_h8, b), c);
		else
			c = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32_gfx12(a, b, c);
	}
	static __device__ __forceinline__ AB pfrag(const C* s, int c, int lane) {
		AB b;
#pragma unroll
		for (int e = 0; e < NA; e++) b[e] = bits16<T>(s[(c * NA + e) / NC][(c * NA + e) % NC]);
		return b;
	}
};
template <class T, int DMAX> struct Frag {
	typedef Wmma12<T> F;
};
#endif

// AmdTiles: BN keys a tile, the most of 64, 32, 16 whose K and Vᵀ tiles
// fit in 32 KiB (package flashattn's amdTiles); QLDS where q's fragments
// and O's would take more than 160 registers a lane.
template <int DMAX, class F> struct AmdTiles {
	static const int BM = FA_AMD_WAVES * F::M, THREADS = FA_AMD_WAVES * F::W;
	static const int LDK = DMAX + 8;
	static constexpr int bytes(int bn) { return 2 * (bn * (DMAX + 8) + DMAX * (bn + 8)); }
	static const int BN = bytes(64) <= 32768 ? 64 : bytes(32) <= 32768 ? 32 : 16;
	static const int LDV = BN + 8;
	static const bool QLDS = DMAX * F::NA / (2 * F::K) + DMAX * F::NC / F::M > 160;
	static_assert(BN % F::M == 0 && BN % F::K == 0, "a tile is whole fragments");
};

// ldfrag reads N consecutive 16-bit elements, 8-byte aligned.
template <class AB, int N> __device__ __forceinline__ AB ldfrag(const void* p) {
	AB x;
#pragma unroll
	for (int u = 0; u < N / 4; u++) {
		const fa_s4 y = ((const fa_s4*)p)[u];
#pragma unroll
		for (int e = 0; e < 4; e++) x[4 * u + e] = y[e];
	}
	return x;
}

template <class T, int DMAX> __device__ __forceinline__ void attn_amd(const Params& p) {
	typedef typename Frag<T, DMAX>::F F;
	typedef AmdTiles<DMAX, F> Ti;
	typedef typename F::AB AB;
	typedef typename F::C C;
	const int BN = Ti::BN, BM = Ti::BM, LDK = Ti::LDK, LDV = Ti::LDV, M = F::M, K = F::K, NA = F::NA, NC = F::NC;
	const int NKC = DMAX / K; // k chunks of K·qᵀ
	const int NS = BN / M;    // C fragments of a score tile
	const int NPC = BN / K;   // k chunks of vᵀ·pᵀ
	const int NO = DMAX / M;  // C fragments of the output
	__shared__ Pack8<T> kbuf[BN * LDK / 8];
	__shared__ Pack8<T> vbuf[DMAX * LDV / 8];
	__shared__ Pack8<T> qbuf[Ti::QLDS ? BM * LDK / 8 : 1];
	T* const kt = (T*)kbuf;
	T* const vt = (T*)vbuf;
	T* const qt = (T*)qbuf;

	const int tid = threadIdx.x, lane = tid % F::W, wave = tid / F::W, col = lane % M;
	const int kofs = F::kofs(lane);
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

	// The lane's row (column col of its wave's M): position, head, the
	// keys it sees.
	const int r = m0 + wave * M + col, i = r / G, h = hk * G + r % G;
	const bool valid = i < s.sq;
	const int rlo = left >= 0 ? i + off - left : 0;
	const int rhi = right >= 0 ? min(s.sk - 1, i + off + right) : s.sk - 1;
	const float slope = alibi_slope(p, h);

	// q's B fragments: dims kc·K + kofs... of the lane's row, zeros past
	// d and in rows past the sequence.
	AB qf[Ti::QLDS ? 1 : NKC];
	if constexpr (Ti::QLDS) {
		for (int c = tid; c < BM * DMAX / 8; c += Ti::THREADS) {
			const int row = c / (DMAX / 8), c8 = (c % (DMAX / 8)) * 8;
			const int rq = m0 + row, iq = rq / G, hq = hk * G + rq % G;
			Pack8<T> x = fill8<T>(0.0f);
			if (iq < s.sq && c8 < p.d) x = load8((const T*)p.q + s.qbase + (i64)iq * p.qs[1] + (i64)hq * p.qs[2] + c8, true);
			qbuf[(row * LDK + c8) / 8] = x;
		}
	} else {
		const T* qp = (const T*)p.q + s.qbase + (i64)min(i, s.sq - 1) * p.qs[1] + (i64)h * p.qs[2];
#pragma unroll
		for (int kc = 0; kc < NKC; kc++) {
#pragma unroll
			for (int u = 0; u < NA / 4; u++) {
				const int c = kc * K + kofs + 4 * u;
				const fa_s4 y = valid && c < p.d ? *(const fa_s4*)(qp + c) : fa_s4{0, 0, 0, 0};
#pragma unroll
				for (int e = 0; e < 4; e++) qf[kc][4 * u + e] = y[e];
			}
		}
	}

	C o[NO];
#pragma unroll
	for (int dn = 0; dn < NO; dn++) o[dn] = C{};
	float mrow = neg_inf(), lrow = 0.0f;
	const float sl2 = p.scale * FA_LOG2E;
	const bool plain = !(p.softcap > 0.0f) && !(p.flags & FA_ALIBI);
	const T* kg = (const T*)p.k + s.kbase + (i64)p.ks[2] * hk;
	const T* vg = (const T*)p.v + s.vbase + (i64)p.vs[2] * hk;

	for (int t = ta; t < tb; t++) {
		const int n0 = t * BN;
		__syncthreads(); // every wave is done with the previous tile (and q is in)
		// K as it is, V transposed; zeros past the keys and past d.
		for (int c = tid; c < BN * DMAX / 8; c += Ti::THREADS) {
			const int row = c / (DMAX / 8), c8 = (c % (DMAX / 8)) * 8, j = n0 + row;
			Pack8<T> kx = fill8<T>(0.0f), vx = kx;
			if (j < s.sk && c8 < p.d) {
				kx = load8(kg + (i64)j * p.ks[1] + c8, true);
				vx = load8(vg + (i64)j * p.vs[1] + c8, true);
			}
			kbuf[(row * LDK + c8) / 8] = kx;
#pragma unroll
			for (int e = 0; e < 8; e++) vt[(c8 + e) * LDV + row] = vx.v[e];
		}
		__syncthreads();

		// Sᵀ = K·qᵀ: C fragment jn holds keys jn·M + crow × the lane's row.
		C sacc[NS];
#pragma unroll
		for (int jn = 0; jn < NS; jn++) sacc[jn] = C{};
#pragma unroll
		for (int kc = 0; kc < NKC; kc++) {
			if (kc * K < p.d) {
				AB qb;
				if constexpr (Ti::QLDS)
					qb = ldfrag<AB, NA>(qt + (wave * M + col) * LDK + kc * K + kofs);
				else
					qb = qf[kc];
#pragma unroll
				for (int jn = 0; jn < NS; jn++) F::mma(sacc[jn], ldfrag<AB, NA>(kt + (jn * M + col) * LDK + kc * K + kofs), qb);
			}
		}

		// Logits in log2 units; masks only where some row sees part of
		// the tile.
		const bool masked = n0 + BN > s.sk || (right >= 0 && n0 + BN - 1 > ilo + off + right) ||
		                    (left >= 0 && n0 < ihi + off - left);
		float mx = neg_inf();
#pragma unroll
		for (int jn = 0; jn < NS; jn++) {
#pragma unroll
			for (int e = 0; e < NC; e++) {
				const int j = n0 + jn * M + F::crow(lane, e);
				float x = sacc[jn][e];
				if (plain) {
					x *= sl2;
				} else {
					x *= p.scale;
					if (p.softcap > 0.0f) x = p.softcap * tanhf(x / p.softcap);
					x = (x - slope * fabsf((float)(i + off - j))) * FA_LOG2E;
				}
				if (masked && (j < rlo || j > rhi)) x = neg_inf();
				sacc[jn][e] = x;
				mx = fmaxf(mx, x);
			}
		}
		// The online softmax of the lane's row: its other keys are in the
		// lanes of the same column.
#pragma unroll
		for (int x = M; x < F::W; x <<= 1) mx = fmaxf(mx, __shfl_xor(mx, x));
		const float mn = fmaxf(mrow, mx);
		const float ms = mn == neg_inf() ? 0.0f : mn; // nothing seen yet: every p is 0
		const float alpha = exp2f(mrow - ms);
		mrow = mn;
		float sum = 0.0f;
#pragma unroll
		for (int jn = 0; jn < NS; jn++) {
#pragma unroll
			for (int e = 0; e < NC; e++) {
				sacc[jn][e] = exp2f(sacc[jn][e] - ms);
				sum += sacc[jn][e];
			}
		}
		lrow = lrow * alpha + sum;
#pragma unroll
		for (int dn = 0; dn < NO; dn++) o[dn] *= alpha;

		// Oᵀ += Vᵀ·Pᵀ over chunks of K keys.
#pragma unroll
		for (int c = 0; c < NPC; c++) {
			const AB pb = F::pfrag(sacc, c, lane);
#pragma unroll
			for (int dn = 0; dn < NO; dn++)
				if (dn * M < p.d) F::mma(o[dn], ldfrag<AB, NA>(vt + (dn * M + col) * LDV + c * K + kofs), pb);
		}
	}

	float l = lrow;
#pragma unroll
	for (int x = M; x < F::W; x <<= 1) l += __shfl_xor(l, x);
	if (!valid) return;
	// A row that sees no key gets zeros and a log-sum-exp of -inf.
	const float inv = l > 0.0f ? 1.0f / l : 0.0f;
	const float lse = l > 0.0f ? (mrow + log2f(l)) * FA_LN2 : neg_inf();
	if (p.splits > 1) {
		const i64 row = ((i64)split * p.h_q + h) * total_rows(p) + s.row0 + i;
		float* op = p.opart + row * p.d;
#pragma unroll
		for (int dn = 0; dn < NO; dn++) {
#pragma unroll
			for (int e = 0; e < NC; e++) {
				const int c = dn * M + F::crow(lane, e);
				if (c < p.d) op[c] = o[dn][e] * inv;
			}
		}
		if (lane < M) p.lsepart[row] = lse;
		return;
	}
	T* op = (T*)p.o + s.obase + (i64)i * p.os[1] + (i64)h * p.os[2];
#pragma unroll
	for (int dn = 0; dn < NO; dn++) {
#pragma unroll
		for (int e = 0; e < NC; e++) {
			const int c = dn * M + F::crow(lane, e);
			if (c < p.d) op[c] = Tr<T>::store(o[dn][e] * inv);
		}
	}
	if ((p.flags & FA_LSE) && lane < M) p.lse[lse_index(p, b, h, i, s.row0)] = lse;
}

#define FA_AMD(T, D, KIND)                                                                                      \
	extern "C" __global__ __launch_bounds__((AmdTiles<D, Frag<T, D>::F>::THREADS)) void attn_##KIND##_##T##_d##D( \
	    Params p) {                                                                                             \
		FA_GRID_WAIT(); attn_amd<T, D>(p);                                                                      \
	}
#if FA_AMD_MFMA
#define FA_AMD_TYPE(T) FA_AMD(T, 32, mfma) FA_AMD(T, 64, mfma) FA_AMD(T, 128, mfma) FA_AMD(T, 256, mfma)
#else
#define FA_AMD_TYPE(T) FA_AMD(T, 32, wmma) FA_AMD(T, 64, wmma) FA_AMD(T, 128, wmma) FA_AMD(T, 256, wmma)
#endif
FA_AMD_TYPE(f16)
FA_AMD_TYPE(bf16)
#endif // AMD matrix cores
