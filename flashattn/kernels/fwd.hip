// attn_fwd_<dt>_d<DMAX>, the portable forward pass: FlashAttention-2's
// forward algorithm (a block keeps its query rows' output, running
// maximum and sum in registers while K and V pass through shared memory
// one tile at a time; no s_q × s_kv buffer exists anywhere), in plain
// float arithmetic that compiles for any architecture and any warp size.
//
// Layout of the work: a block takes BM rows of one (batch entry, KV head).
// A row is one query position of one query head; the G = h_q / h_kv query
// heads that share a KV head are neighbouring rows, so that a K/V tile in
// shared memory serves the whole group (GQA/MQA, and decode, where s_q is
// 1 and the rows are the group's heads). TPR = DMAX/16 neighbouring
// threads share a row, each holding 16 of its head dims of q and of the
// output; a score is their partial dot products summed by xor shuffles
// within the group (TPR divides every warp size: 32 and 64).
#pragma once
#include "common.h"

#define FA_DPT 16 // head dims per thread

// The tile sizes of a head-dim bucket: TPR threads per row, BM rows per
// block, BN keys per tile (K and V tiles of BN × DMAX take 32 KiB of
// shared memory together at most).
template <class T, int DMAX> struct Tiles {
	static const int TPR = DMAX / FA_DPT;
	static const int BM = FA_THREADS / TPR;
	static const int BN0 = 16384 / (DMAX * (int)sizeof(T));
	static const int BN = BN0 > 64 ? 64 : BN0;
};

template <class T, int DMAX> __device__ __forceinline__ void attn_fwd(const Params& p) {
	typedef Tiles<T, DMAX> Ti;
	const int TPR = Ti::TPR, BM = Ti::BM, BN = Ti::BN;
	__shared__ Pack8<T> kt[BN * DMAX / 8];
	__shared__ Pack8<T> vt[BN * DMAX / 8];

	const int tid = threadIdx.x, g = tid % TPR, lr = tid / TPR;
	const int hk = blockIdx.y, b = blockIdx.z / p.splits, split = blockIdx.z % p.splits;
	const int G = p.h_q / p.h_kv;
	const Seq s = seq_of(p, b);
	const int m0 = blockIdx.x * BM;
	if (m0 >= s.sq * G) return; // the whole block: a shorter sequence of a varlen batch
	const bool aligned = (p.flags & FA_ALIGNED) != 0;
	const int r = m0 + lr, i = r / G, h = hk * G + r % G;
	const bool valid = i < s.sq;
	const int off = s.sk - s.sq; // causal and windows align bottom-right
	const int left = p.window_left, right = p.window_right;
	const float slope = alibi_slope(p, h);

	// The keys any row of the block may see, in whole tiles, and this
	// split's share of them.
	const int ilo = m0 / G, ihi = min((m0 + BM - 1) / G, s.sq - 1);
	int lo = 0, hi = s.sk;
	if (left >= 0) lo = max(0, ilo + off - left);
	if (right >= 0) hi = min(s.sk, ihi + off + right + 1);
	const int t0 = lo / BN, t1 = hi > lo ? (hi + BN - 1) / BN : t0;
	const int per = (t1 - t0 + p.splits - 1) / p.splits;
	const int ta = min(t1, t0 + split * per), tb = min(t1, ta + per);

	// This thread's 16 dims of q, scaled.
	float q[FA_DPT], o[FA_DPT];
	{
		const T* qp = (const T*)p.q + s.qbase + (i64)min(i, s.sq - 1) * p.qs[1] + (i64)h * p.qs[2];
#pragma unroll
		for (int u = 0; u < FA_DPT / 8; u++) {
			const int c = g * FA_DPT + u * 8;
			Pack8<T> x = valid && c < p.d ? load8(qp + c, aligned) : fill8<T>(0.0f);
#pragma unroll
			for (int e = 0; e < 8; e++) q[u * 8 + e] = Tr<T>::load(x.v[e]) * p.scale;
		}
	}
#pragma unroll
	for (int e = 0; e < FA_DPT; e++) o[e] = 0.0f;
	float m = neg_inf(), l = 0.0f; // in log2 units: scores are multiplied by log2(e)

	const T* kg = (const T*)p.k;
	const T* vg = (const T*)p.v;
	for (int t = ta; t < tb; t++) {
		const int n0 = t * BN;
		__syncthreads(); // the previous tile is read
		for (int c = tid; c < BN * DMAX / 8; c += FA_THREADS) {
			const int row = c / (DMAX / 8), col = (c % (DMAX / 8)) * 8, j = n0 + row;
			Pack8<T> kx = fill8<T>(0.0f), vx = kx;
			if (j < s.sk && col < p.d) {
				i64 ko = s.kbase, vo = s.vbase;
				bool ok = true;
				if (p.flags & FA_PAGED) {
					const int pg = p.block_table[(i64)b * p.bt_stride + j / p.page_size];
					ok = pg >= 0 && pg < p.num_pages;
					ko = (i64)pg * p.ks[0] + (i64)(j % p.page_size) * p.ks[1];
					vo = (i64)pg * p.vs[0] + (i64)(j % p.page_size) * p.vs[1];
				} else {
					ko += (i64)j * p.ks[1];
					vo += (i64)j * p.vs[1];
				}
				if (ok) {
					kx = load8(kg + ko + (i64)hk * p.ks[2] + col, aligned);
					vx = load8(vg + vo + (i64)hk * p.vs[2] + col, aligned);
				} else {
					// A page index outside the cache: NaN, loudly, in
					// the rows that read it.
					kx = vx = fill8<T>(qnan());
				}
			}
			kt[c] = kx;
			vt[c] = vx;
		}
		__syncthreads();

		float sc[BN];
		float mt = neg_inf();
#pragma unroll
		for (int c = 0; c < BN; c++) {
			float a = 0.0f;
#pragma unroll
			for (int u = 0; u < FA_DPT / 8; u++) {
				const Pack8<T> kx = kt[(c * DMAX + g * FA_DPT) / 8 + u];
#pragma unroll
				for (int e = 0; e < 8; e++) a += q[u * 8 + e] * Tr<T>::load(kx.v[e]);
			}
			for (int x = 1; x < TPR; x <<= 1) a += __shfl_xor(a, x);
			const int j = n0 + c;
			const bool vis = valid && j < s.sk && (left < 0 || j >= i + off - left) && (right < 0 || j <= i + off + right);
			if (p.softcap > 0.0f) a = p.softcap * tanhf(a / p.softcap);
			a -= slope * fabsf((float)(i + off - j));
			sc[c] = vis ? a * FA_LOG2E : neg_inf();
			mt = nanmax(mt, sc[c]);
		}
		const float mn = nanmax(m, mt);
		if (mn == neg_inf()) continue; // nothing visible yet
		const float alpha = exp2f(m - mn);
		l *= alpha;
#pragma unroll
		for (int e = 0; e < FA_DPT; e++) o[e] *= alpha;
#pragma unroll
		for (int c = 0; c < BN; c++) {
			// A hidden key's value is never read (0 · inf would be NaN).
			if (sc[c] == neg_inf()) continue;
			const float pc = exp2f(sc[c] - mn);
			l += pc;
#pragma unroll
			for (int u = 0; u < FA_DPT / 8; u++) {
				const Pack8<T> vx = vt[(c * DMAX + g * FA_DPT) / 8 + u];
#pragma unroll
				for (int e = 0; e < 8; e++) o[u * 8 + e] += pc * Tr<T>::load(vx.v[e]);
			}
		}
		m = mn;
	}
	if (!valid) return;

	// A row that sees no key gets zeros and a log-sum-exp of -inf.
	const float inv = l > 0.0f ? 1.0f / l : 0.0f;
	const float lse = l > 0.0f ? (m + log2f(l)) * FA_LN2 : neg_inf();
	if (p.splits > 1) {
		const i64 row = ((i64)split * p.h_q + h) * total_rows(p) + s.row0 + i;
		float* op = p.opart + row * p.d;
#pragma unroll
		for (int e = 0; e < FA_DPT; e++) {
			const int c = g * FA_DPT + e;
			if (c < p.d) op[c] = o[e] * inv;
		}
		if (g == 0) p.lsepart[row] = lse;
		return;
	}
	T* op = (T*)p.o + s.obase + (i64)i * p.os[1] + (i64)h * p.os[2];
#pragma unroll
	for (int u = 0; u < FA_DPT / 8; u++) {
		const int c = g * FA_DPT + u * 8;
		if (c < p.d) {
			Pack8<T> x;
#pragma unroll
			for (int e = 0; e < 8; e++) x.v[e] = Tr<T>::store(o[u * 8 + e] * inv);
			store8(op + c, x, aligned);
		}
	}
	if ((p.flags & FA_LSE) && g == 0) p.lse[lse_index(p, b, h, i, s.row0)] = lse;
}

#define FA_FWD(T, D) \
	FA_KERNEL attn_fwd_##T##_d##D(Params p) { FA_GRID_WAIT(); attn_fwd<T, D>(p); }
#define FA_FWD_TYPE(T) FA_FWD(T, 32) FA_FWD(T, 64) FA_FWD(T, 128) FA_FWD(T, 256)
FA_FWD_TYPE(f16)
FA_FWD_TYPE(bf16)
FA_FWD_TYPE(f32)
