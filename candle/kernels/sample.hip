// Sampling: one token id per row of logits (package candle's sample.go
// describes the processors and the random numbers):
//   sample_<dt>  a block a row of contiguous logits of f32, f16 or bf16;
//                writes the row's token id (u32).
// The passes over the row, each a read of it (from L2 after the first):
//   1. the largest value and its index (greedy rows stop here);
//   2. top-k: a radix select of the k-th largest value's key;
//   3. top-p: a radix select of the value at which the mass of the larger
//      values reaches p of what top-k left, each value weighed by its
//      probability relative to the largest in 40-bit fixed point (exact,
//      order-independent sums: the same result every run);
//   4. the draw: the kept value of the largest z - log(E), E an exponential
//      variate of the token from Philox4x32-10.
// A radix select is three passes of 11, 11 and 10 bits of the key, each a
// histogram of the keys that share the digits chosen so far, in shared
// memory; a scan of the histogram finds the digit where the running count
// (or mass) from the top reaches what is wanted. The repetition penalty
// reads a bitmap of the row's previous tokens that the block builds in
// scratch memory first.
#include "common.h"

#define SAMPLE_BLOCK 1024
#define SAMPLE_BINS 2048
#define SAMPLE_KERNEL extern "C" __global__ __launch_bounds__(SAMPLE_BLOCK) void

// SampleRow is a row's settings (package candle's sampleRow): filters that
// are off are top_k 0, top_p 0, min_p 0; temperature 0 is greedy; penalty
// applies to prev[prev_offset, prev_offset + prev_count).
struct SampleRow {
	float temperature, top_p, min_p, penalty;
	u32 top_k, prev_count;
	u64 prev_offset, seed, step;
};
static_assert(sizeof(SampleRow) == 48, "SampleRow is package candle's sampleRow, byte for byte");

#define SAMPLE_TAG 0x73616d70u
// A value this far below the largest cannot win the draw (sample.go's
// samplePrune).
#define SAMPLE_PRUNE 26.0f

// fkey maps a float to a key whose unsigned order is the numbers' (-0 is
// +0, NaN above +Inf); key_float inverts it for numbers.
__device__ __forceinline__ u32 fkey(float f) {
	u32 u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return 0xffffffffu;
	if (u == 0x80000000u) u = 0;
	return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}
__device__ __forceinline__ float key_float(u32 k) { return __uint_as_float((k & 0x80000000u) ? k & 0x7fffffffu : ~k); }

// sphilox is Philox4x32-10 (Salmon et al., SC11), as fill.hip's.
__device__ __forceinline__ void sphilox(u32 c[4], u32 k0, u32 k1) {
	for (int r = 0; r < 10; r++) {
		u64 p0 = (u64)0xD2511F53u * c[0], p1 = (u64)0xCD9E8D57u * c[2];
		u32 n0 = (u32)(p1 >> 32) ^ c[1] ^ k0, n2 = (u32)(p0 >> 32) ^ c[3] ^ k1;
		c[0] = n0, c[1] = (u32)p1, c[2] = n2, c[3] = (u32)p0;
		k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
	}
}

// SampleShared is a block's shared memory.
struct SampleShared {
	u64 h[SAMPLE_BINS]; // a histogram: counts or fixed-point masses
	u64 part[SAMPLE_BLOCK / 16];
	u64 total, above;
	int sel;
};

__device__ __forceinline__ u64 umax64(u64 a, u64 b) { return a > b ? a : b; }
__device__ __forceinline__ u64 shfl_xor64(u64 v, int m) { return (u64)__shfl_xor((long long)v, m); }
__device__ __forceinline__ u64 shfl_up64(u64 v, int d) { return (u64)__shfl_up((long long)v, d); }

// block_max combines a u64 over the block by its maximum; every thread gets
// it. Any warp size.
__device__ __forceinline__ u64 block_max(SampleShared& s, u64 v) {
	for (int m = warpSize / 2; m > 0; m >>= 1) v = umax64(v, shfl_xor64(v, m));
	const int lane = threadIdx.x % warpSize, w = threadIdx.x / warpSize, nw = blockDim.x / warpSize;
	__syncthreads(); // s.part is reused
	if (lane == 0) s.part[w] = v;
	__syncthreads();
	v = 0;
	for (int i = lane; i < nw; i += warpSize) v = umax64(v, s.part[i]);
	for (int m = warpSize / 2; m > 0; m >>= 1) v = umax64(v, shfl_xor64(v, m));
	return v;
}

// block_scan returns the sum of v over the threads before this one, and
// leaves the block's total in s.total.
__device__ __forceinline__ u64 block_scan(SampleShared& s, u64 v) {
	const int lane = threadIdx.x % warpSize, w = threadIdx.x / warpSize, nw = blockDim.x / warpSize;
	u64 inc = v;
	for (int o = 1; o < warpSize; o <<= 1) {
		const u64 n = shfl_up64(inc, o);
		if (lane >= o) inc += n;
	}
	__syncthreads(); // s.part is reused
	if (lane == warpSize - 1) s.part[w] = inc;
	__syncthreads();
	if (w == 0) {
		// nw ≤ warpSize: 1024 threads are at most 32 warps of 32.
		const u64 p = lane < nw ? s.part[lane] : 0;
		u64 pi = p;
		for (int o = 1; o < warpSize; o <<= 1) {
			const u64 n = shfl_up64(pi, o);
			if (lane >= o) pi += n;
		}
		if (lane < nw) s.part[lane] = pi - p;
		if (lane == warpSize - 1) s.total = pi;
	}
	__syncthreads();
	return s.part[w] + inc - v;
}

// select_bin finds the bin d of the histogram's nb where the running sum
// from the top bin down reaches need: above(d) < need ≤ above(d) + h[d],
// above(d) the sum of the bins over d. A need of 0 asks for frac of the
// total (rounded up). It returns d, with above(d) and the need in s.above
// and s.total, or -1 when the total falls short.
__device__ __forceinline__ int select_bin(SampleShared& s, int nb, u64 need, float frac) {
	const int per = SAMPLE_BINS / SAMPLE_BLOCK;
	u64 v[per], sum = 0;
#pragma unroll
	for (int j = 0; j < per; j++) {
		const int d = nb - 1 - (int)(threadIdx.x * per + j);
		v[j] = d >= 0 ? s.h[d] : 0;
		sum += v[j];
	}
	u64 run = block_scan(s, sum);
	if (need == 0) need = (u64)ceil((double)frac * (double)s.total);
	__syncthreads(); // everyone has read s.total
	if (threadIdx.x == 0) s.sel = -1, s.total = need;
	__syncthreads();
#pragma unroll
	for (int j = 0; j < per; j++) {
		const int d = nb - 1 - (int)(threadIdx.x * per + j);
		if (d >= 0 && run < need && need <= run + v[j]) s.sel = d, s.above = run;
		run += v[j];
	}
	__syncthreads();
	return s.sel;
}

// SRow reads a row's values: the logit, penalised when its bit is set,
// divided by the temperature when scaled.
template <class T> struct SRow {
	const T* x;
	u64 cols;
	u32* bits; // null: no penalty
	float penalty, temperature;
	bool scaled;

	__device__ __forceinline__ float raw(u64 i) const {
		float v = Traits<T>::load(x[i]);
		if (bits != nullptr && ((bits[i >> 5] >> (i & 31)) & 1u)) v = v < 0.0f ? v * penalty : __fdiv_rn(v, penalty);
		return v;
	}
	__device__ __forceinline__ float z(u64 i) const { return scaled ? __fdiv_rn(raw(i), temperature) : raw(i); }
};

// radix_select returns the key where the running count (Mass: probability
// mass relative to m) of the row's numbers with keys ≥ floor, from the
// largest down, reaches need (or frac of the total when need is 0): the
// smallest key whose larger keys alone fall short of it. 0 when the total
// falls short (everything stays).
template <class T, bool Mass>
__device__ __forceinline__ u32 radix_select(SampleShared& s, const SRow<T>& row, u32 floor, u64 need, float frac, float m) {
	const int shifts[3] = {21, 10, 0}, widths[3] = {11, 11, 10};
	u32 prefix = 0;
#pragma unroll
	for (int level = 0; level < 3; level++) {
		const int shift = shifts[level], nb = 1 << widths[level];
		__syncthreads(); // everyone is done with the last histogram and its selection
		for (int d = threadIdx.x; d < nb; d += blockDim.x) s.h[d] = 0;
		__syncthreads();
		for (u64 i = threadIdx.x; i < row.cols; i += blockDim.x) {
			const float z = row.z(i);
			const u32 k = fkey(z);
			if (z != z || k < floor || (level > 0 && (k >> (shift + widths[level])) != prefix)) continue;
			const u64 w = Mass ? (u64)(expf(z - m) * 0x1p40f) : 1;
			if (w != 0) atomicAdd((unsigned long long*)&s.h[(k >> shift) & (nb - 1)], (unsigned long long)w);
		}
		__syncthreads();
		const int d = select_bin(s, nb, need, frac);
		if (d < 0) return 0;
		const u64 wanted = s.total - s.above, in_bin = s.h[d];
		need = wanted;
		prefix = (prefix << widths[level]) | (u32)d;
		// A count that takes the whole bin needs no finer digit.
		if (!Mass && in_bin == wanted) return prefix << shift;
	}
	return prefix;
}

template <class T>
__device__ __forceinline__ void sample_rows(u64 rows, u64 cols, const T* logits, const SampleRow* params, const int* prev, u32* bitmap, u32* out) {
	__shared__ SampleShared s;
	const u64 words = (cols + 31) / 32;
	for (u64 r = blockIdx.x; r < rows; r += gridDim.x) {
		const SampleRow p = params[r];
		SRow<T> row = {logits + r * cols, cols, nullptr, p.penalty, p.temperature, false};
		if (p.prev_count > 0) {
			row.bits = bitmap + r * words;
			for (u64 j = threadIdx.x; j < words; j += blockDim.x) row.bits[j] = 0;
			__syncthreads();
			for (u32 j = threadIdx.x; j < p.prev_count; j += blockDim.x) {
				const u32 id = (u32)prev[p.prev_offset + j];
				atomicOr(&row.bits[id >> 5], 1u << (id & 31));
			}
			__syncthreads();
		}
		const bool greedy = p.temperature == 0.0f;
		row.scaled = !greedy;
		// 1. The largest, the lowest index of equal ones: NaN is the
		// largest when greedy (as Argmax), the smallest when drawing.
		u64 best = 0;
		for (u64 i = threadIdx.x; i < cols; i += blockDim.x) {
			const float z = row.z(i);
			const u32 k = (!greedy && z != z) ? 0u : fkey(z);
			best = umax64(best, ((u64)k << 32) | (0xffffffffu - (u32)i));
		}
		best = block_max(s, best);
		const u32 first = 0xffffffffu - (u32)best;
		const float m = key_float((u32)(best >> 32));
		if (greedy || !(m == m && fabsf(m) != __int_as_float(0x7f800000))) {
			if (threadIdx.x == 0) out[r] = first;
			__syncthreads();
			continue;
		}
		// 2, 3. The thresholds of top-k and top-p.
		u32 tau = 0;
		if (p.top_k > 0) tau = radix_select<T, false>(s, row, 0, p.top_k, 0.0f, m);
		if (p.top_p > 0.0f) tau = (u32)umax64(tau, radix_select<T, true>(s, row, tau, 0, p.top_p, m));
		// 4. The draw, four tokens to a Philox block.
		u64 win = 0;
		for (u64 g = threadIdx.x; g * 4 < cols; g += blockDim.x) {
			float z[4];
			bool keep[4], any = false;
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const u64 i = g * 4 + e;
				keep[e] = false;
				if (i >= cols) continue;
				z[e] = row.z(i);
				keep[e] = z[e] == z[e] && fkey(z[e]) >= tau && z[e] >= m - SAMPLE_PRUNE &&
				          (p.min_p <= 0.0f || expf(z[e] - m) >= p.min_p);
				any |= keep[e];
			}
			if (!any) continue;
			u32 c[4] = {(u32)g, (u32)p.step, (u32)(p.step >> 32), SAMPLE_TAG};
			sphilox(c, (u32)p.seed, (u32)(p.seed >> 32));
#pragma unroll
			for (int e = 0; e < 4; e++) {
				if (!keep[e]) continue;
				const float u = fminf(((float)c[e] + 0.5f) * 0x1p-32f, 0x1.fffffep-1f);
				const float score = z[e] - logf(-log1pf(-u));
				win = umax64(win, ((u64)fkey(score) << 32) | (0xffffffffu - (u32)(g * 4 + e)));
			}
		}
		win = block_max(s, win);
		if (threadIdx.x == 0) out[r] = win == 0 ? first : 0xffffffffu - (u32)win;
		__syncthreads();
	}
}

#define RG_SAMPLE(name, T)                                                                                           \
	SAMPLE_KERNEL sample_##name(u64 rows, u64 cols, const T* logits, const SampleRow* params, const int* prev, u32* bitmap, \
	                            u32* out) {                                                                                \
		sample_rows<T>(rows, cols, logits, params, prev, bitmap, out);                                                      \
	}
RG_SAMPLE(f32, f32)
RG_SAMPLE(f16, f16)
RG_SAMPLE(bf16, bf16)
