// Flash-decoding: attn_decode_<dt>_d<DMAX>_r<RM> and
// attn_decode_<dt>_d<DMAX>_paged, for the few query rows of a decode step.
#pragma once
#include "common.h"

// rotate_half turns a lane's 8 values x of a head (dims 8g to 8g + 7 of
// TPK lanes' d) by the angles' cos c and sin s of those dims modulo d/2:
// (x_i, x_{i+d/2}) to (x_i·c - x_{i+d/2}·s, x_{i+d/2}·c + x_i·s), the
// partner lane g ^ TPK/2 of the same group holding the other half. Every
// lane of the warp calls it.
template <int TPK> __device__ __forceinline__ void rotate_half(float* x, const float* c, const float* s, int g) {
	const bool hi = g >= TPK / 2;
#pragma unroll
	for (int e = 0; e < 8; e++) {
		const float o = __shfl_xor(x[e], TPK / 2);
		x[e] = hi ? x[e] * c[e] + o * s[e] : x[e] * c[e] - o * s[e];
	}
}

// Flash-decoding: attn_decode_<dt>_d<DMAX>_r<RM> serves the few query rows
// of a decode step (s_q·G at most 8 for a KV head): a block takes RM rows
// of one (batch entry, KV head, split) and spreads the keys, not the rows,
// over its threads. TPK = DMAX/8 neighbouring threads hold one key (8 head
// dims each: one 16-byte load of K and one of V), the block's NG groups
// take neighbouring keys, U keys a group in flight at once, so that a
// block streams NG·U keys a step at the memory's bandwidth. Each group
// keeps an online softmax of its own; the groups of 32 neighbouring lanes
// merge by shuffles at the end, those lane sets in shared memory, and the
// splits (blocks along z) in attn_combine.
template <class T, int DMAX, int RM, int U, int LAYOUT, bool LLM>
__device__ __forceinline__ void attn_decode(const Params& p, float* sm_m, float* sm_l, float* sm_o) {
	const int TPK = DMAX / 8, NG = FA_THREADS / TPK, STEP = NG * U;
	// LAYOUT >= 0 fixes the launch's FA_PAGED and FA_ALIGNED at compile
	// time; -1 reads them from p.flags. LLM: the caller knows that the
	// launch is an LLM's decode step (attn_decode_paged): a paged, aligned
	// cache of power-of-two pages, d == DMAX, and no window, soft-capping
	// or ALiBi; its exponentials flush results below 2^-126 to zero.
	const int flags = LAYOUT >= 0 ? (p.flags & ~(FA_PAGED | FA_ALIGNED)) | LAYOUT : p.flags;
	auto pow2 = [](float x) { return LLM ? exp2_ftz(x) : exp2f(x); };

	const int tid = threadIdx.x, g = tid % TPK, grp = tid / TPK;
	const int hk = blockIdx.y, b = blockIdx.z / p.splits, split = blockIdx.z % p.splits;
	const int G = p.h_q / p.h_kv;
	const int m0 = blockIdx.x * RM, c0 = g * 8;
	uint4 qr[RM];
	if constexpr (LLM) {
		// Every row's q in flight at once, while the length loads (a
		// dense q's rows need no length: the grid covers s_q·G), as raw
		// bytes: unpacked in a branch, each load would wait for the one
		// before. One division for the rows' positions and heads.
		const int nq = min(RM, p.s_q * G - m0);
		int i = m0 / G, hr = m0 % G;
#pragma unroll
		for (int rr = 0; rr < RM; rr++) {
			const T* qp = (const T*)p.q + (i64)b * p.qs[0] + (i64)i * p.qs[1] + (i64)(hk * G + hr) * p.qs[2];
			qr[rr] = *(const uint4*)(qp + c0);
			if (rr < nq - 1 && ++hr == G) { // past the block's rows: a copy of its last
				hr = 0;
				i++;
			}
		}
	}
	Seq s = seq_of(p, b);
	// A paged length is read from device memory: one past what the block
	// table's row holds (a stale length) reads only the pages it names.
	const bool paged = (flags & FA_PAGED) != 0;
	if (paged) {
		const i64 cap = p.bt_stride * (i64)p.page_size;
		if ((i64)s.sk > cap) s.sk = (int)cap;
	}
	if (m0 >= s.sq * G) return;
	const int nr = min(RM, s.sq * G - m0); // the block's rows: the same for every thread
	const bool aligned = (flags & FA_ALIGNED) != 0;
	const int off = s.sk - s.sq, left = LLM ? -1 : p.window_left, right = LLM ? -1 : p.window_right;
	// plain: no window, soft-capping or ALiBi; a key is visible when it is
	// one of the split's.
	const bool plain = LLM || (left < 0 && right < 0 && !(p.softcap > 0.0f) && !(p.flags & FA_ALIBI));
	const bool cin = LLM || c0 < p.d;

	// The keys any row of the block may see, and this split's share of
	// them in whole steps of STEP keys: a short sequence in a launch sized
	// for long ones takes fewer splits, each full, and attn_combine has
	// fewer to merge (a cache of 520 keys took 9 splits of 64 keys
	// instead of 17 of 32 out of 30).
	const int ilo = m0 / G, ihi = (m0 + nr - 1) / G;
	int lo = 0, hi = s.sk;
	if (left >= 0) lo = max(0, ilo + off - left);
	if (right >= 0) hi = min(s.sk, ihi + off + right + 1);
	const int n = max(hi - lo, 0);
	const int per = ((n + p.splits - 1) / p.splits + STEP - 1) / STEP * STEP;
	const int ja = min(hi, lo + split * per), jb = min(hi, ja + per);
	// A split with no keys (past a short sequence's end, when the launch
	// is sized for longer ones) only says so, before reading q (the LLM
	// copy's loads of it are in flight already): attn_combine skips a
	// log-sum-exp of -inf without reading the partial output.
	if (p.splits > 1 && ja >= jb) {
		for (int rr = tid; rr < nr; rr += FA_THREADS) {
			const int r = m0 + rr, i = r / G, h = hk * G + r % G;
			p.lsepart[((i64)split * p.h_q + h) * total_rows(p) + s.row0 + i] = neg_inf();
		}
		return;
	}

	// ri and slope serve the masks, which the LLM copy has none of.
	int ri[RM];
	float slope[RM], q[RM][8], m[RM], l[RM], o[RM][8];
	// FA_ROTARY (the LLM copy): the step's new token is key s.sk - 1 of
	// each entry; q and its key turn by the entry's cos and sin here, pairs
	// (i, i + d/2) across the two halves of a group's lanes, and the
	// rotated key (rounded to T) and the value are read from new_k and
	// new_v instead of the pages, which the first row block writes.
	const bool rot = LLM && (p.flags & FA_ROTARY);
	const int knew = rot ? s.sk - 1 : -1;
	uint4 nkq = make_uint4(0, 0, 0, 0), nvq = nkq;
	if constexpr (LLM) {
		float rc[8], rsn[8];
		if (rot) {
			const int ci = c0 % (DMAX / 2);
			const Pack8<T> cv = __builtin_bit_cast(Pack8<T>, *(const uint4*)((const T*)p.cos + (i64)b * p.cs_stride + ci));
			const Pack8<T> sv = __builtin_bit_cast(Pack8<T>, *(const uint4*)((const T*)p.sin + (i64)b * p.cs_stride + ci));
			const Pack8<T> kv = __builtin_bit_cast(Pack8<T>, *(const uint4*)((const T*)p.new_k + (i64)b * p.nks[0] + (i64)hk * p.nks[1] + c0));
			nvq = *(const uint4*)((const T*)p.new_v + (i64)b * p.nvs[0] + (i64)hk * p.nvs[1] + c0);
			float kf[8];
#pragma unroll
			for (int e = 0; e < 8; e++) {
				rc[e] = Tr<T>::load(cv.v[e]);
				rsn[e] = Tr<T>::load(sv.v[e]);
				kf[e] = Tr<T>::load(kv.v[e]);
			}
			rotate_half<TPK>(kf, rc, rsn, g);
			Pack8<T> kr;
#pragma unroll
			for (int e = 0; e < 8; e++) kr.v[e] = Tr<T>::store(kf[e]);
			nkq = __builtin_bit_cast(uint4, kr);
		}
#pragma unroll
		for (int rr = 0; rr < RM; rr++) {
			const Pack8<T> x = __builtin_bit_cast(Pack8<T>, qr[rr]);
#pragma unroll
			for (int e = 0; e < 8; e++) q[rr][e] = Tr<T>::load(x.v[e]) * p.scale;
			if (rot) rotate_half<TPK>(q[rr], rc, rsn, g);
		}
	} else {
#pragma unroll
		for (int rr = 0; rr < RM; rr++) {
			const int r = m0 + min(rr, nr - 1), i = r / G, h = hk * G + r % G;
			ri[rr] = i;
			slope[rr] = alibi_slope(p, h);
			const T* qp = (const T*)p.q + s.qbase + (i64)i * p.qs[1] + (i64)h * p.qs[2];
			const Pack8<T> x = cin ? load8(qp + c0, aligned) : fill8<T>(0.0f);
#pragma unroll
			for (int e = 0; e < 8; e++) q[rr][e] = Tr<T>::load(x.v[e]) * p.scale;
		}
	}
#pragma unroll
	for (int rr = 0; rr < RM; rr++) {
#pragma unroll
		for (int e = 0; e < 8; e++) o[rr][e] = 0.0f;
		m[rr] = neg_inf();
		l[rr] = 0.0f;
	}
	const int pshift = LLM ? __ffs(p.page_size) - 1 : 0;

	const T* kg = (const T*)p.k + (i64)hk * p.ks[2] + c0;
	const T* vg = (const T*)p.v + (i64)hk * p.vs[2] + c0;
	for (int j0 = ja; j0 < jb; j0 += STEP) {
		// Every load of the step first: U keys in flight.
		Pack8<T> kx[U], vx[U];
		if constexpr (LLM) {
			// The pages of the U keys, then their K and V as raw bytes,
			// selected without branches, so that no load waits for
			// another's unpacking.
			int pg[U];
#pragma unroll
			for (int u = 0; u < U; u++) {
				const int j = j0 + u * NG + grp;
				pg[u] = j < jb ? p.block_table[(i64)b * p.bt_stride + (j >> pshift)] : 0;
			}
#pragma unroll
			for (int u = 0; u < U; u++) {
				const int j = j0 + u * NG + grp, pj = j & (p.page_size - 1);
				const bool in = j < jb, ok = in && pg[u] >= 0 && pg[u] < p.num_pages;
				uint4 kr = make_uint4(0, 0, 0, 0), vr = kr;
				const i64 ko = (i64)pg[u] * p.ks[0] + (i64)pj * p.ks[1], vo = (i64)pg[u] * p.vs[0] + (i64)pj * p.vs[1];
				if (ok && j == knew) { // the step's new key (FA_ROTARY)
					kr = nkq, vr = nvq;
					if (blockIdx.x == 0) {
						*(uint4*)((T*)kg + ko) = nkq;
						*(uint4*)((T*)vg + vo) = nvq;
					}
				} else if (ok) {
					kr = *(const uint4*)(kg + ko);
					vr = *(const uint4*)(vg + vo);
				}
				if (in && !ok) kr = vr = __builtin_bit_cast(uint4, fill8<T>(qnan())); // a page outside the cache: NaN
				kx[u] = __builtin_bit_cast(Pack8<T>, kr);
				vx[u] = __builtin_bit_cast(Pack8<T>, vr);
			}
		} else {
#pragma unroll
			for (int u = 0; u < U; u++) {
				const int j = j0 + u * NG + grp;
				kx[u] = vx[u] = fill8<T>(0.0f);
				if (j < jb && cin) {
					i64 ko, vo;
					bool ok = true;
					if (paged) {
						const int pg = p.block_table[(i64)b * p.bt_stride + j / p.page_size];
						ok = pg >= 0 && pg < p.num_pages;
						ko = (i64)pg * p.ks[0] + (i64)(j % p.page_size) * p.ks[1];
						vo = (i64)pg * p.vs[0] + (i64)(j % p.page_size) * p.vs[1];
					} else {
						ko = s.kbase + (i64)j * p.ks[1];
						vo = s.vbase + (i64)j * p.vs[1];
					}
					if (ok) {
						kx[u] = load8(kg + ko, aligned);
						vx[u] = load8(vg + vo, aligned);
					} else {
						kx[u] = vx[u] = fill8<T>(qnan()); // a page outside the cache: NaN
					}
				}
			}
		}
		float sc[RM][U];
#pragma unroll
		for (int rr = 0; rr < RM; rr++) {
			if (rr >= nr) break; // uniform: every thread has the block's rows
#pragma unroll
			for (int u = 0; u < U; u++) {
				float a = 0.0f;
#pragma unroll
				for (int e = 0; e < 8; e++) a += q[rr][e] * Tr<T>::load(kx[u].v[e]);
				for (int x = 1; x < TPK; x <<= 1) a += __shfl_xor(a, x);
				const int j = j0 + u * NG + grp;
				bool vis = j < jb;
				if (!plain) {
					const int i = ri[rr];
					vis = vis && (left < 0 || j >= i + off - left) && (right < 0 || j <= i + off + right);
					if (p.softcap > 0.0f) a = p.softcap * tanhf(a / p.softcap);
					a -= slope[rr] * fabsf((float)(i + off - j));
				}
				sc[rr][u] = vis ? a * FA_LOG2E : neg_inf();
			}
		}
#pragma unroll
		for (int rr = 0; rr < RM; rr++) {
			if (rr >= nr) break;
			float mt = neg_inf();
#pragma unroll
			for (int u = 0; u < U; u++) mt = nanmax(mt, sc[rr][u]);
			const float mn = nanmax(m[rr], mt);
			if (mn == neg_inf()) continue; // nothing visible yet
			if (mn != m[rr]) {
				const float alpha = pow2(m[rr] - mn);
				l[rr] *= alpha;
#pragma unroll
				for (int e = 0; e < 8; e++) o[rr][e] *= alpha;
			}
#pragma unroll
			for (int u = 0; u < U; u++) {
				// A hidden key's value is never read; in a plain launch
				// that is a key past the split, whose value is zeros.
				if (!LLM && sc[rr][u] == neg_inf()) continue;
				const float pc = pow2(sc[rr][u] - mn);
				l[rr] += pc;
#pragma unroll
				for (int e = 0; e < 8; e++) o[rr][e] += pc * Tr<T>::load(vx[u].v[e]);
			}
			m[rr] = mn;
		}
	}

	// Merge the groups: weights 2^(m_g - M), where m_g == M weighs 1 (two
	// groups that saw nothing stay zeros; a NaN stays NaN). The LLM copy
	// first merges the groups of each 32 neighbouring lanes by xor
	// shuffles (TPK divides 32, and 32 lanes are a warp or half of one),
	// which leaves NS sets of lanes to merge in shared memory instead of
	// NG groups; the others keep the shuffles' registers for the loop.
	const int NS = FA_THREADS / 32, SETS = LLM ? NS : NG;
	if constexpr (LLM) {
#pragma unroll
		for (int x = TPK; x < 32; x <<= 1) {
#pragma unroll
			for (int rr = 0; rr < RM; rr++) {
				if (rr >= nr) break;
				const float m2 = __shfl_xor(m[rr], x), l2 = __shfl_xor(l[rr], x);
				const float M = nanmax(m[rr], m2);
				const float wa = pow2(m[rr] == M ? 0.0f : m[rr] - M), wb = pow2(m2 == M ? 0.0f : m2 - M);
				l[rr] = l[rr] * wa + l2 * wb;
#pragma unroll
				for (int e = 0; e < 8; e++) o[rr][e] = o[rr][e] * wa + __shfl_xor(o[rr][e], x) * wb;
				m[rr] = M;
			}
		}
	}
	const int set = LLM ? tid / 32 : grp;
	if (!LLM || tid % 32 < TPK) {
#pragma unroll
		for (int rr = 0; rr < RM; rr++) {
			if (g == 0) {
				sm_m[set * RM + rr] = m[rr];
				sm_l[set * RM + rr] = l[rr];
			}
#pragma unroll
			for (int e = 0; e < 8; e++) sm_o[(set * RM + rr) * DMAX + c0 + e] = o[rr][e];
		}
	}
	__syncthreads();
	for (int x = tid; x < nr * DMAX; x += FA_THREADS) {
		const int rr = x / DMAX, c = x % DMAX;
		if (c >= p.d) continue;
		// fmaxf drops NaNs: a set's NaN makes M NaN after the loop.
		float M = neg_inf();
		bool nan = false;
#pragma unroll
		for (int si = 0; si < SETS; si++) {
			const float ms = sm_m[si * RM + rr];
			M = fmaxf(M, ms);
			nan = nan || ms != ms;
		}
		if (nan) M = qnan();
		// A row that sees no key gets zeros and a log-sum-exp of -inf; a
		// NaN stays NaN.
		const bool any = M != neg_inf();
		float L = 0.0f, O = 0.0f;
		if (any) {
#pragma unroll
			for (int si = 0; si < SETS; si++) {
				const float ms = sm_m[si * RM + rr], w = pow2(ms == M ? 0.0f : ms - M);
				L += sm_l[si * RM + rr] * w;
				O += sm_o[(si * RM + rr) * DMAX + c] * w;
			}
		}
		const float val = any ? O / L : 0.0f;
		const float lse = any ? (M + log2f(L)) * FA_LN2 : neg_inf();
		const int r = m0 + rr, i = r / G, h = hk * G + r % G;
		if (p.splits > 1) {
			const i64 row = ((i64)split * p.h_q + h) * total_rows(p) + s.row0 + i;
			p.opart[row * p.d + c] = val;
			if (c == 0) p.lsepart[row] = lse;
		} else {
			((T*)p.o)[s.obase + (i64)i * p.os[1] + (i64)h * p.os[2] + c] = Tr<T>::store(val);
			if ((p.flags & FA_LSE) && c == 0) p.lse[lse_index(p, b, h, i, s.row0)] = lse;
		}
	}
}

// attn_decode_any runs attn_decode. On NVIDIA the one-row kernels of the
// 2-byte types take a copy of it for each layout (dense or paged, aligned
// or not), whose registers are its own: with one body for every layout,
// the unaligned loads' and the block table's addressing cost the dense
// loop registers it spilled, and b8 h32 kv4096 f16 ran 15% slower. The
// four-row kernels keep one body: their copies ran GQA b8 h32/8 17%
// slower. The shared memory is the kernel's, declared once.
template <class T, int DMAX, int RM, int U> __device__ __forceinline__ void attn_decode_any(const Params& p) {
	const int NG = FA_THREADS / (DMAX / 8);
	__shared__ float sm_m[NG * RM], sm_l[NG * RM];
	__shared__ float sm_o[NG * RM * DMAX];
#if defined(__HIP_PLATFORM_NVIDIA__)
	if constexpr (sizeof(T) == 2 && RM == 1) {
		switch (p.flags & (FA_PAGED | FA_ALIGNED)) {
		case FA_ALIGNED: attn_decode<T, DMAX, RM, U, FA_ALIGNED, false>(p, sm_m, sm_l, sm_o); return;
		case FA_PAGED | FA_ALIGNED: attn_decode<T, DMAX, RM, U, FA_PAGED | FA_ALIGNED, false>(p, sm_m, sm_l, sm_o); return;
		case FA_PAGED: attn_decode<T, DMAX, RM, U, FA_PAGED, false>(p, sm_m, sm_l, sm_o); return;
		default: attn_decode<T, DMAX, RM, U, 0, false>(p, sm_m, sm_l, sm_o); return;
		}
	}
#endif
	attn_decode<T, DMAX, RM, U, -1, false>(p, sm_m, sm_l, sm_o);
}

// attn_decode_<dt>_d<DMAX>_paged is the four-row kernel for an LLM's
// decode step, which package flashattn launches when it is one: a paged,
// aligned cache of power-of-two pages, head dim DMAX, no window (a decode
// step's causal mask hides nothing), soft-capping or ALiBi. A kernel of its
// own, so that its registers and instructions are not the general body's:
// as a copy inside attn_decode_r4 it made that kernel's code half again as
// long.
template <class T, int DMAX> __device__ __forceinline__ void attn_decode_paged(const Params& p) {
	const int NS = FA_THREADS / 32;
	__shared__ float sm_m[NS * 4], sm_l[NS * 4];
	__shared__ float sm_o[NS * 4 * DMAX];
	attn_decode<T, DMAX, 4, 2, FA_PAGED | FA_ALIGNED, true>(p, sm_m, sm_l, sm_o);
}

// Decode on NVIDIA bounds the registers of the 2-byte types: r1 to four
// blocks an SM (64 registers a thread), r4, whose four rows hold four
// times the state, to two (128); both keep two keys a group in flight.
// Unbounded, nvcc gave attn_decode_f16_d128_r1 191 registers, one block an
// SM, and the cache streamed at half the memory's bandwidth. HIP's second
// argument means waves per EU, not blocks: AMD keeps FA_KERNEL.
#if defined(__HIP_PLATFORM_NVIDIA__)
#define FA_DECODE_KERNEL(T, B) extern "C" __global__ __launch_bounds__(FA_THREADS, sizeof(T) == 2 ? B : 1) void
#else
#define FA_DECODE_KERNEL(T, B) FA_KERNEL
#endif
#define FA_DECODE(T, D) \
	FA_DECODE_KERNEL(T, 4) attn_decode_##T##_d##D##_r1(Params p) { FA_GRID_WAIT(); attn_decode_any<T, D, 1, 2>(p); } \
	FA_DECODE_KERNEL(T, 2) attn_decode_##T##_d##D##_r4(Params p) { FA_GRID_WAIT(); attn_decode_any<T, D, 4, 2>(p); }
#define FA_DECODE_TYPE(T) FA_DECODE(T, 32) FA_DECODE(T, 64) FA_DECODE(T, 128) FA_DECODE(T, 256)
#define FA_PAGED_DECODE(T, D) \
	FA_DECODE_KERNEL(T, 2) attn_decode_##T##_d##D##_paged(Params p) { FA_GRID_WAIT(); attn_decode_paged<T, D>(p); }
#define FA_PAGED_TYPE(T) FA_PAGED_DECODE(T, 32) FA_PAGED_DECODE(T, 64) FA_PAGED_DECODE(T, 128) FA_PAGED_DECODE(T, 256)

FA_DECODE_TYPE(f16)
FA_DECODE_TYPE(bf16)
FA_DECODE_TYPE(f32)
FA_PAGED_TYPE(f16)
FA_PAGED_TYPE(bf16)
