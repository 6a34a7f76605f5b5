// attn_combine_<dt>: the merge of split-KV partials.
#pragma once
#include "common.h"

// attn_combine merges the splits of each (row, head): weights exp(lse_s -
// lse) where lse is the log-sum-exp over the splits. A block takes one
// (row, head) at a time: the splits' log-sum-exps and weights come into
// shared memory once, and every 32 lanes reduce their maximum and sum with
// shuffles; the block's threads make FA_THREADS / d groups of d, a thread
// a head dim, each group over every group-th split with eight partials'
// loads in flight, and the groups' sums meet in shared memory. A split
// whose log-sum-exp is -inf saw no key (a split past a short sequence's
// end, in a launch sized for longer ones): its weight is 0 and its
// partial output, which may be unwritten, is never read. (A thread a head
// dim over every split, one load at a time, took 8 µs on an H200 for 30
// splits of 32 heads of 64; the reductions one split at a time and four
// loads in flight cost a Q4_K decode step of the 1B model 16-20 µs.)
template <class T> __device__ __forceinline__ void attn_combine(const Params& p) {
	__shared__ float sl[FA_THREADS]; // the splits' log-sum-exps (splits <= FA_THREADS)
	__shared__ float sw[FA_THREADS]; // their weights
	__shared__ float sa[FA_THREADS]; // the groups' sums
	const int tid = threadIdx.x, d = p.d, ng = FA_THREADS / d, grp = tid / d, c = tid % d;
	const i64 rows = total_rows(p), pairs = rows * p.h_q;
	for (i64 x = blockIdx.x; x < pairs; x += gridDim.x) {
		const int h = (int)(x % p.h_q);
		const i64 row = x / p.h_q;
		if (tid < p.splits) sl[tid] = p.lsepart[((i64)tid * p.h_q + h) * rows + row];
		__syncthreads();
		// Every 32 lanes reduce the splits by shuffles, not one by one.
		float mx = neg_inf();
		for (int sp = tid & 31; sp < p.splits; sp += 32) mx = nanmax(mx, sl[sp]);
		for (int m = 1; m < 32; m <<= 1) mx = nanmax(mx, __shfl_xor(mx, m));
		if (tid < p.splits) sw[tid] = sl[tid] == neg_inf() ? 0.0f : expf(sl[tid] - mx);
		__syncthreads();
		float acc = 0.0f;
		if (mx != neg_inf() && grp < ng) {
			const float* op = p.opart + ((i64)h * rows + row) * d + c;
			const i64 step = (i64)p.h_q * rows * d; // a split's partials
			for (int s0 = grp; s0 < p.splits; s0 += 8 * ng) {
				float v[8];
#pragma unroll
				for (int u = 0; u < 8; u++) {
					const int sp = s0 + u * ng;
					v[u] = sp < p.splits && sl[sp] != neg_inf() ? op[sp * step] : 0.0f;
				}
#pragma unroll
				for (int u = 0; u < 8; u++) {
					const int sp = s0 + u * ng;
					if (sp < p.splits) acc += sw[sp] * v[u];
				}
			}
		}
		float sum = 0.0f;
		for (int sp = tid & 31; sp < p.splits; sp += 32) sum += sw[sp];
		for (int m = 1; m < 32; m <<= 1) sum += __shfl_xor(sum, m);
		if (ng > 1) {
			sa[tid] = acc;
			__syncthreads();
		}
		if (tid < d) {
			int b, i;
			i64 oo;
			if (p.flags & FA_VARLEN) {
				b = 0;
				i = (int)row;
				oo = row * p.os[1];
			} else {
				b = (int)(row / p.s_q);
				i = (int)(row % p.s_q);
				oo = (i64)b * p.os[0] + (i64)i * p.os[1];
			}
			float val = 0.0f, lse = neg_inf();
			if (mx != neg_inf()) {
				for (int gi = 1; gi < ng; gi++) acc += sa[gi * d + c];
				val = acc / sum;
				lse = mx + logf(sum);
			}
			((T*)p.o)[oo + (i64)h * p.os[2] + c] = Tr<T>::store(val);
			if ((p.flags & FA_LSE) && c == 0) p.lse[lse_index(p, b, h, i, 0)] = lse;
		}
		__syncthreads(); // every thread is done with sl, sw and sa
	}
}

#define FA_COMBINE(T) \
	FA_KERNEL attn_combine_##T(Params p) { FA_GRID_WAIT(); attn_combine<T>(p); }
FA_COMBINE(f16)
FA_COMBINE(bf16)
FA_COMBINE(f32)
