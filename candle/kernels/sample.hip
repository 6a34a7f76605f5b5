// Sampling: one token id per row of logits (package candle's sample.go
// describes the processors and the random numbers). A row is cut into
// spans, a block a span, so that even one row keeps many compute units
// busy; the last block of a row to finish a phase (a counter per row and
// phase) combines the row's partial results. The phases, one launch each:
//
//   sample_prev       rows with a list of previous tokens only: the bitmap
//                     of the penalised tokens, which the phases read.
//   sample_bias       rows with a bias only, before the others: the terms
//                     added to an F32 copy of the logits.
//   sample_max_<dt>   the largest value and its index. Greedy rows end
//                     here, and so do rows with a temperature and no
//                     filter: their blocks draw in the same pass (the draw
//                     needs no threshold).
//   sample_hist_<dt>  rows with top-k or top-p: a histogram of the values
//                     by their key's top 12 bits (counts for top-k,
//                     probability masses for top-p), from which the last
//                     block finds the bin of the threshold.
//   sample_draw_<dt>  every row still open: the blocks draw among the
//                     values above the threshold's bin and gather those in
//                     it (the candidates, SAMPLE_CAND at most a row); the
//                     last block finds the threshold among the candidates
//                     (a radix select of their low 20 bits, two 10-bit
//                     digits in shared memory), draws among those it keeps
//                     and writes the token.
//
// With both top-k and top-p, the candidates are every value from top-k's
// bin up, and the last block finds both thresholds among them. A row with
// more candidates than fit walks its whole row in the last block instead
// (the same selection, slower; many equal logits make that happen).
// Every sum is exact (counts, and masses in 40-bit fixed point), and every
// maximum a total order (the key, then the lowest index), so the result
// does not depend on the order in which blocks or threads finish.
//
// The token drawn joins the row's history (a bitmap on the device) when
// it has one, in the same launch: the next step's penalty sees it without
// a copy from the host.
#include "common.h"

#define SAMPLE_BLOCK 512
#define SAMPLE_BINS 4096  // the first digit: a key's top 12 bits
#define SAMPLE_CAND 8192  // candidates a row gathers for its last block
#define SAMPLE_KERNEL extern "C" __global__ __launch_bounds__(SAMPLE_BLOCK) void

// SampleRow is a row's settings (package candle's sampleRow): filters that
// are off are top_k 0, top_p 0, min_p 0; temperature 0 is greedy; penalty
// applies to the tokens whose bit is set in bits (null: none). prev lists
// the previous tokens sample_prev puts in bits; record is the history the
// drawn token joins (null: none).
struct SampleRow {
	float temperature, top_p, min_p, penalty;
	u32 top_k, prev_count;
	u64 prev_offset, seed, step;
	u32* bits;
	u32* record;
};
static_assert(sizeof(SampleRow) == 64, "SampleRow is package candle's sampleRow, byte for byte");

// The modes of a row's last draw (SampleState::mode).
#define MODE_KEEP 0   // the threshold is known: keys ≥ keep stay, no candidates
#define MODE_K 1      // top-k's threshold is in bin: `need` more values of it
#define MODE_P 2      // top-p's threshold is in bin: `need` more mass of it
#define MODE_KP 3     // top-k's threshold in bin, then top-p's among what it leaves
#define MODE_KP_ALL 4 // top-k keeps every number (fewer than k), then top-p

// SampleState is a row's working state, zeroed by the host with the
// settings' copy (package candle's sampleStateSize). Zero is MODE_KEEP
// with keep 0: every number stays.
struct SampleState {
	u32 arrived[3]; // blocks done, per phase (max, hist, draw)
	u32 done;       // the token is written
	u64 best;       // the largest value: its key and index, packed (pack)
	u64 win;        // the draw so far: its score's key and index, packed
	float m;        // the largest value
	u32 first;      // its index
	u32 ncand;      // candidates gathered (may pass SAMPLE_CAND)
	u32 mode;       // MODE_*
	u32 cand_lo;    // the candidates are the numbers with keys in [cand_lo, keep)
	u32 bin;        // the threshold's first digit (MODE_K, MODE_P, MODE_KP)
	u64 keep;       // the blocks draw among keys ≥ keep (2³² for none)
	u64 need;       // what the threshold's select still needs in bin
};
static_assert(sizeof(SampleState) == 72, "SampleState is package candle's sampleStateSize bytes");

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

// pack puts a key and an index in one u64 whose maximum is the largest
// key, the lowest index among equal ones; 0 is below every packed value.
__device__ __forceinline__ u64 pack(u32 key, u64 i) { return ((u64)key << 32) | (0xffffffffu - (u32)i); }
__device__ __forceinline__ u32 packed_index(u64 p) { return 0xffffffffu - (u32)p; }

// mass is a probability exp(z - m) ∈ [0, 1] in 40-bit fixed point, as
// top-p weighs it (sample.go's sampleMass).
__device__ __forceinline__ u64 mass(float z, float m) { return (u64)(expf(z - m) * 0x1p40f); }

// score is a value's Gumbel-max score with Philox word r: z - log(E), E
// the exponential variate of the uniform (r + ½)·2⁻³² (below 1).
__device__ __forceinline__ float score(float z, u32 r) {
	const float u = fminf(((float)r + 0.5f) * 0x1p-32f, 0x1.fffffep-1f);
	return z - logf(-log1pf(-u));
}

// draw_words are the Philox words of group g (tokens 4g .. 4g+3) of a row.
__device__ __forceinline__ void draw_words(u32 c[4], u64 g, const SampleRow& p) {
	c[0] = (u32)g, c[1] = (u32)p.step, c[2] = (u32)(p.step >> 32), c[3] = SAMPLE_TAG;
	philox(c, (u32)p.seed, (u32)(p.seed >> 32));
}

__device__ __forceinline__ u64 umax64(u64 a, u64 b) { return a > b ? a : b; }
__device__ __forceinline__ u64 shfl_xor64(u64 v, int m) { return (u64)__shfl_xor((long long)v, m); }
__device__ __forceinline__ u64 shfl_up64(u64 v, int d) { return (u64)__shfl_up((long long)v, d); }

// SampleSmall is the shared memory of the block reductions.
struct SampleSmall {
	u64 part[SAMPLE_BLOCK / 16];
	u64 total, above;
	int sel;
	u32 flag; // last_block's answer
	u32 n;    // the row's candidates
};

// SampleShared adds a histogram: counts or fixed-point masses.
struct SampleShared : SampleSmall {
	u64 h[SAMPLE_BINS];
};

// block_max combines a u64 over the block by its maximum; every thread gets
// it. Any warp size.
__device__ __forceinline__ u64 block_max(SampleSmall& s, u64 v) {
	for (int m = RG_WARP / 2; m > 0; m >>= 1) v = umax64(v, shfl_xor64(v, m));
	const int lane = threadIdx.x % RG_WARP, w = threadIdx.x / RG_WARP, nw = blockDim.x / RG_WARP;
	__syncthreads(); // s.part is reused
	if (lane == 0) s.part[w] = v;
	__syncthreads();
	v = 0;
	for (int i = lane; i < nw; i += RG_WARP) v = umax64(v, s.part[i]);
	for (int m = RG_WARP / 2; m > 0; m >>= 1) v = umax64(v, shfl_xor64(v, m));
	return v;
}

// block_scan returns the sum of v over the threads before this one, and
// leaves the block's total in s.total. Any warp size; at most warpSize
// warps.
__device__ __forceinline__ u64 block_scan(SampleSmall& s, u64 v) {
	const int lane = threadIdx.x % RG_WARP, w = threadIdx.x / RG_WARP, nw = blockDim.x / RG_WARP;
	u64 inc = v;
	for (int o = 1; o < RG_WARP; o <<= 1) {
		const u64 n = shfl_up64(inc, o);
		if (lane >= o) inc += n;
	}
	__syncthreads(); // s.part is reused
	if (lane == RG_WARP - 1) s.part[w] = inc;
	__syncthreads();
	if (w == 0) {
		const u64 p = lane < nw ? s.part[lane] : 0;
		u64 pi = p;
		for (int o = 1; o < RG_WARP; o <<= 1) {
			const u64 n = shfl_up64(pi, o);
			if (lane >= o) pi += n;
		}
		if (lane < nw) s.part[lane] = pi - p;
		if (lane == RG_WARP - 1) s.total = pi;
	}
	__syncthreads();
	return s.part[w] + inc - v;
}

// last_block reports, to every thread of the block, whether it is the last
// of a row's parts to pass counter: the others' writes (fenced before
// their count) are then visible to it. Every thread calls it.
__device__ __forceinline__ bool last_block(SampleSmall& s, u32* counter, u32 parts) {
	__threadfence(); // this thread's writes before the count
	__syncthreads();
	if (threadIdx.x == 0) s.flag = atomicAdd(counter, 1u) == parts - 1;
	__syncthreads();
	const bool last = s.flag != 0;
	if (last) __threadfence(); // the others' writes after their count
	return last;
}

// select_bin finds the bin d of the histogram's nb where the running sum
// from the top bin down reaches need: above(d) < need ≤ above(d) + h[d],
// above(d) the sum of the bins over d. A need of 0 asks for frac of the
// total (rounded up). It returns d, with above(d) and the need in s.above
// and s.total, or -1 when the total falls short.
__device__ __forceinline__ int select_bin(SampleShared& s, int nb, u64 need, float frac) {
	const int per = (nb + (int)blockDim.x - 1) / (int)blockDim.x;
	const int top = nb - 1 - (int)threadIdx.x * per; // this thread's bins: top, top-1, ...
	u64 sum = 0;
	for (int j = 0; j < per; j++)
		if (top - j >= 0) sum += s.h[top - j];
	u64 run = block_scan(s, sum);
	if (need == 0) need = (u64)ceil((double)frac * (double)s.total);
	__syncthreads(); // everyone has read s.total
	if (threadIdx.x == 0) s.sel = -1, s.total = need;
	__syncthreads();
	for (int j = 0; j < per; j++) {
		const int d = top - j;
		if (d < 0) break;
		const u64 v = s.h[d];
		if (run < need && need <= run + v) s.sel = d, s.above = run;
		run += v;
	}
	__syncthreads();
	return s.sel;
}

// SRow reads a row's values: the logit, penalised when its bit is set,
// divided by the temperature when scaled.
template <class T> struct SRow {
	const T* x;
	u64 cols;
	const u32* bits; // null: no penalty
	float penalty, temperature;
	bool scaled, vec; // vec: x is aligned for loads of four

	__device__ __forceinline__ float adjust(float v, u32 bit) const {
		if (bit) v = v < 0.0f ? v * penalty : __fdiv_rn(v, penalty);
		return scaled ? __fdiv_rn(v, temperature) : v;
	}
	__device__ __forceinline__ float z(u64 i) const {
		return adjust(Traits<T>::load(x[i]), bits != nullptr ? (bits[i >> 5] >> (i & 31)) & 1u : 0u);
	}
	// group reads values 4g .. 4g+3, in[e] telling which are in the row.
	__device__ __forceinline__ void group(u64 g, float (&v)[4], bool (&in)[4]) const {
		const u64 i0 = 4 * g;
		if (vec && i0 + 4 <= cols) {
			const Chunk<T, 4> c = ((const Chunk<T, 4>*)x)[g];
#pragma unroll
			for (int e = 0; e < 4; e++) v[e] = Traits<T>::load(c.v[e]), in[e] = true;
		} else {
#pragma unroll
			for (int e = 0; e < 4; e++) {
				in[e] = i0 + e < cols;
				v[e] = in[e] ? Traits<T>::load(x[i0 + e]) : 0.0f;
			}
		}
		// Four tokens share a word of the bitmap (4g is a multiple of 4).
		const u32 w = bits != nullptr ? bits[i0 >> 5] >> (i0 & 31) : 0u;
#pragma unroll
		for (int e = 0; e < 4; e++) v[e] = adjust(v[e], (w >> e) & 1u);
	}
};

template <class T>
__device__ __forceinline__ SRow<T> sample_row(const T* logits, u64 r, u64 cols, const SampleRow& p, bool scaled) {
	SRow<T> row = {logits + r * cols, cols, p.bits, p.penalty, p.temperature, scaled, false};
	row.vec = ((u64)row.x & (4 * sizeof(T) - 1)) == 0;
	return row;
}

// finish writes a row's token and adds it to the row's history.
__device__ __forceinline__ void finish(const SampleRow& p, SampleState* st, u32* out, u64 r, u32 id) {
	out[r] = id;
	st->done = 1;
	if (p.record != nullptr) atomicOr(&p.record[id >> 5], 1u << (id & 31));
}

// A unit is a row's part: blocks walk the units of the grid, part j of row
// r covering the groups of four tokens [j·span/4, (j+1)·span/4).
struct Unit {
	u64 r, g0, g1;
	u32 j;
	__device__ __forceinline__ Unit(u64 u, u32 parts, u64 span, u64 cols) {
		r = u / parts, j = (u32)(u % parts);
		g0 = (u64)j * (span / 4);
		g1 = g0 + span / 4;
		const u64 groups = (cols + 3) / 4;
		if (g1 > groups) g1 = groups;
	}
};

// 1. The largest value; the whole draw of rows without a filter.
template <class T>
__device__ __forceinline__ void sample_max(u64 rows, u64 cols, u64 span, u32 parts, const T* logits, const SampleRow* params,
                                           SampleState* state, u64* hist, u32* out) {
	__shared__ SampleSmall s;
	for (u64 u = blockIdx.x; u < rows * parts; u += gridDim.x) {
		const Unit un(u, parts, span, cols);
		const SampleRow p = params[un.r];
		SampleState* st = state + un.r;
		const bool greedy = p.temperature == 0.0f, thresholds = p.top_k > 0 || p.top_p > 0.0f;
		const bool direct = !greedy && !thresholds && !(p.min_p > 0.0f); // drawn here
		if (!greedy && thresholds) // the histogram of the next phase starts at zero
			for (u64 d = (u64)un.j * blockDim.x + threadIdx.x; d < SAMPLE_BINS; d += (u64)parts * blockDim.x) hist[un.r * SAMPLE_BINS + d] = 0;
		const SRow<T> row = sample_row(logits, un.r, cols, p, !greedy);
		u64 best = 0, win = 0;
		for (u64 g = un.g0 + threadIdx.x; g < un.g1; g += blockDim.x) {
			float z[4];
			bool in[4], any = false;
			row.group(g, z, in);
#pragma unroll
			for (int e = 0; e < 4; e++) {
				if (!in[e]) continue;
				// NaN is the largest when greedy (as Argmax), the smallest when
				// drawing.
				const bool nan = z[e] != z[e];
				best = umax64(best, pack(!greedy && nan ? 0u : fkey(z[e]), 4 * g + e));
				any |= !nan;
			}
			if (!direct || !any) continue;
			u32 c[4];
			draw_words(c, g, p);
#pragma unroll
			for (int e = 0; e < 4; e++)
				if (in[e] && z[e] == z[e]) win = umax64(win, pack(fkey(score(z[e], c[e])), 4 * g + e));
		}
		best = block_max(s, best);
		if (direct) win = block_max(s, win);
		if (threadIdx.x == 0) {
			atomicMax((unsigned long long*)&st->best, (unsigned long long)best);
			if (direct) atomicMax((unsigned long long*)&st->win, (unsigned long long)win);
		}
		if (last_block(s, &st->arrived[0], parts) && threadIdx.x == 0) {
			// Read back through the atomics: coherent whatever the caches hold.
			const u64 b = atomicMax((unsigned long long*)&st->best, 0ull);
			const u32 first = packed_index(b);
			const float m = key_float((u32)(b >> 32));
			// A row whose largest is infinite, or that has no number, gives its
			// first largest.
			if (greedy || !(m == m && fabsf(m) != __int_as_float(0x7f800000))) {
				finish(p, st, out, un.r, first);
			} else if (direct) {
				const u64 w = atomicMax((unsigned long long*)&st->win, 0ull);
				finish(p, st, out, un.r, w == 0 ? first : packed_index(w));
			} else {
				st->m = m, st->first = first;
			}
		}
		__syncthreads(); // s is reused
	}
}

// 2. The histogram of the values' first digits: counts for top-k, masses
// for top-p (when there is no top-k); the last block finds the threshold's
// bin and sets the row's mode for the draw.
template <class T>
__device__ __forceinline__ void sample_hist(u64 rows, u64 cols, u64 span, u32 parts, const T* logits, const SampleRow* params,
                                            SampleState* state, u64* hist) {
	__shared__ SampleShared s;
	for (u64 u = blockIdx.x; u < rows * parts; u += gridDim.x) {
		const Unit un(u, parts, span, cols);
		const SampleRow p = params[un.r];
		SampleState* st = state + un.r;
		if (p.temperature == 0.0f || (p.top_k == 0 && !(p.top_p > 0.0f)) || st->done) continue; // the same for the whole block
		const bool count = p.top_k > 0;
		const float m = st->m;
		u64* gh = hist + un.r * SAMPLE_BINS;
		const SRow<T> row = sample_row(logits, un.r, cols, p, true);
		for (int d = threadIdx.x; d < SAMPLE_BINS; d += blockDim.x) s.h[d] = 0;
		__syncthreads();
		for (u64 g = un.g0 + threadIdx.x; g < un.g1; g += blockDim.x) {
			float z[4];
			bool in[4];
			row.group(g, z, in);
#pragma unroll
			for (int e = 0; e < 4; e++) {
				if (!in[e] || z[e] != z[e]) continue;
				const u64 w = count ? 1 : mass(z[e], m);
				if (w != 0) atomicAdd((unsigned long long*)&s.h[fkey(z[e]) >> 20], (unsigned long long)w);
			}
		}
		__syncthreads();
		for (int d = threadIdx.x; d < SAMPLE_BINS; d += blockDim.x)
			if (s.h[d] != 0) atomicAdd((unsigned long long*)&gh[d], (unsigned long long)s.h[d]);
		if (last_block(s, &st->arrived[1], parts)) {
			for (int d = threadIdx.x; d < SAMPLE_BINS; d += blockDim.x) s.h[d] = atomicAdd((unsigned long long*)&gh[d], 0ull);
			__syncthreads();
			const int d = select_bin(s, SAMPLE_BINS, count ? p.top_k : 0, p.top_p);
			if (threadIdx.x == 0) {
				const u64 rest = d >= 0 ? s.total - s.above : 0; // wanted of bin d
				u32 mode = MODE_KEEP;
				u64 keep = 0;
				if (count && p.top_p > 0.0f) {
					// Both: every value from top-k's bin up is a candidate.
					mode = d >= 0 ? MODE_KP : MODE_KP_ALL;
					keep = 1ull << 32;
				} else if (d >= 0 && count && rest == s.h[d]) {
					keep = (u64)d << 20; // top-k takes the whole bin
				} else if (d >= 0) {
					mode = count ? MODE_K : MODE_P;
					keep = (u64)(d + 1) << 20;
				}
				st->mode = mode, st->keep = keep, st->need = rest;
				st->bin = d >= 0 ? (u32)d : 0;
				st->cand_lo = mode == MODE_KEEP ? 0u : d >= 0 ? (u32)d << 20 : 0u;
			}
		}
		__syncthreads(); // s is reused
	}
}

// gather appends the candidates (key, index) of a warp to a row's list:
// one atomic a warp. Every lane of the warp calls it.
__device__ __forceinline__ void gather(bool c, u32 key, u64 i, u64* list, u32* count) {
	const u64 mask = (u64)__ballot(c);
	if (mask == 0) return; // the same in every lane
	const int lane = threadIdx.x % RG_WARP, leader = __ffsll((long long)mask) - 1;
	u32 base = 0;
	if (lane == leader) base = atomicAdd(count, (u32)__popcll(mask));
	base = __shfl(base, leader);
	if (c) {
		const u32 pos = base + (u32)__popcll(mask & ((1ull << lane) - 1));
		if (pos < SAMPLE_CAND) list[pos] = ((u64)key << 32) | (u32)i;
	}
}

// Cands are a row's candidates for its last block: the gathered list, or,
// when more were found than it holds, the row itself, filtered.
template <class T> struct Cands {
	const u64* list;
	u32 n;
	bool walk; // the list overflowed: walk the row
	SRow<T> row;
	u32 lo;
	u64 hi; // the candidates' keys are in [lo, hi)

	// each calls f(key, index) for every candidate, each from one thread.
	template <class F> __device__ __forceinline__ void each(F f) const {
		if (!walk) {
			for (u32 j = threadIdx.x; j < n; j += blockDim.x) {
				const u64 c = list[j];
				f((u32)(c >> 32), (u32)c);
			}
			return;
		}
		for (u64 i = threadIdx.x; i < row.cols; i += blockDim.x) {
			const float z = row.z(i);
			const u32 k = fkey(z);
			if (z == z && k >= lo && k < hi) f(k, (u32)i);
		}
	}
};

// cand_select returns the key where the running count (Mass: probability
// mass relative to m) of the candidates with keys ≥ floor, from the
// largest down, reaches need (or frac of their total when need is 0): the
// smallest key whose larger keys alone fall short of it; 0 when the total
// falls short (everything stays). It works digit by digit from `level`
// (0: the first 12 bits; 1 and 2: the two 10-bit digits below), the
// digits above it being prefix.
template <class T, bool Mass>
__device__ __forceinline__ u32 cand_select(SampleShared& s, const Cands<T>& c, u32 floor, u64 need, float frac, float m, int level, u32 prefix) {
	for (; level < 3; level++) {
		const int shift = level == 0 ? 20 : level == 1 ? 10 : 0, width = level == 0 ? 12 : 10, nb = 1 << width;
		__syncthreads(); // everyone is done with the last histogram and its selection
		for (int d = threadIdx.x; d < nb; d += blockDim.x) s.h[d] = 0;
		__syncthreads();
		c.each([&](u32 k, u32) {
			if (k < floor || (level > 0 && (k >> (shift + width)) != prefix)) return;
			const u64 w = Mass ? mass(key_float(k), m) : 1;
			if (w != 0) atomicAdd((unsigned long long*)&s.h[(k >> shift) & (u32)(nb - 1)], (unsigned long long)w);
		});
		__syncthreads();
		const int d = select_bin(s, nb, need, frac);
		if (d < 0) return 0;
		const u64 in_bin = s.h[d];
		need = s.total - s.above;
		prefix = (prefix << width) | (u32)d;
		// A count that takes the whole bin needs no finer digit.
		if (!Mass && in_bin == need) return prefix << shift;
	}
	return prefix;
}

// 3. The draw.
template <class T>
__device__ __forceinline__ void sample_draw(u64 rows, u64 cols, u64 span, u32 parts, const T* logits, const SampleRow* params,
                                            SampleState* state, u64* cand, u32* out) {
	__shared__ SampleShared s;
	for (u64 u = blockIdx.x; u < rows * parts; u += gridDim.x) {
		const Unit un(u, parts, span, cols);
		const SampleRow p = params[un.r];
		SampleState* st = state + un.r;
		if (st->done) continue; // the same for the whole block
		const u32 mode = st->mode, lo = st->cand_lo;
		const u64 keep = st->keep;
		const float m = st->m;
		u64* list = cand + un.r * SAMPLE_CAND;
		const SRow<T> row = sample_row(logits, un.r, cols, p, true);
		// kept reports whether value z passes the filters that need no
		// threshold: the prune and min-p.
		auto kept = [&](float z) { return z >= m - SAMPLE_PRUNE && (!(p.min_p > 0.0f) || expf(z - m) >= p.min_p); };
		u64 win = 0;
		// Every thread takes the same number of steps: gather's ballots need
		// the whole warp.
		for (u64 g0 = un.g0; g0 < un.g1; g0 += blockDim.x) {
			const u64 g = g0 + threadIdx.x;
			float z[4] = {0.0f, 0.0f, 0.0f, 0.0f};
			bool in[4] = {false, false, false, false}, take[4], any = false;
			u32 k[4];
			if (g < un.g1) row.group(g, z, in);
#pragma unroll
			for (int e = 0; e < 4; e++) {
				k[e] = fkey(z[e]);
				in[e] = in[e] && z[e] == z[e]; // the numbers
				take[e] = in[e] && k[e] >= keep && kept(z[e]);
				any |= take[e];
			}
			if (any) {
				u32 c[4];
				draw_words(c, g, p);
#pragma unroll
				for (int e = 0; e < 4; e++)
					if (take[e]) win = umax64(win, pack(fkey(score(z[e], c[e])), 4 * g + e));
			}
			if (mode != MODE_KEEP)
#pragma unroll
				for (int e = 0; e < 4; e++) gather(in[e] && k[e] >= lo && k[e] < keep, k[e], 4 * g + e, list, &st->ncand);
		}
		win = block_max(s, win);
		if (threadIdx.x == 0) atomicMax((unsigned long long*)&st->win, (unsigned long long)win);
		if (last_block(s, &st->arrived[2], parts)) {
			win = 0;
			if (mode != MODE_KEEP) {
				if (threadIdx.x == 0) s.n = atomicAdd(&st->ncand, 0u);
				__syncthreads();
				const u32 n = s.n;
				const Cands<T> c = {list, n, n > SAMPLE_CAND, row, lo, keep};
				u32 tau = 0;
				if (mode == MODE_K) {
					tau = cand_select<T, false>(s, c, 0, st->need, 0.0f, m, 1, st->bin);
				} else if (mode == MODE_P) {
					tau = cand_select<T, true>(s, c, 0, st->need, 0.0f, m, 1, st->bin);
				} else {
					const u32 tk = mode == MODE_KP ? cand_select<T, false>(s, c, 0, st->need, 0.0f, m, 1, st->bin) : 0u;
					const u32 tp = cand_select<T, true>(s, c, tk, 0, p.top_p, m, 0, 0);
					tau = tk > tp ? tk : tp;
				}
				c.each([&](u32 key, u32 i) {
					const float z = key_float(key);
					if (key < tau || !kept(z)) return;
					u32 w[4];
					draw_words(w, i >> 2, p);
					win = umax64(win, pack(fkey(score(z, w[i & 3])), i));
				});
				win = block_max(s, win);
			}
			if (threadIdx.x == 0) {
				win = umax64(win, atomicMax((unsigned long long*)&st->win, 0ull));
				finish(p, st, out, un.r, win == 0 ? st->first : packed_index(win));
			}
		}
		__syncthreads(); // s is reused
	}
}

// sample_prev fills each row's bitmap of previous tokens, a block a row.
SAMPLE_KERNEL sample_prev(u64 rows, u64 words, const SampleRow* params, const int* prev) { RG_GRID_WAIT();
	for (u64 r = blockIdx.x; r < rows; r += gridDim.x) {
		const SampleRow p = params[r];
		if (p.prev_count == 0 || p.bits == nullptr) continue; // the same for the whole block
		for (u64 j = threadIdx.x; j < words; j += blockDim.x) p.bits[j] = 0;
		__syncthreads();
		for (u32 j = threadIdx.x; j < p.prev_count; j += blockDim.x) {
			const u32 id = (u32)prev[p.prev_offset + j];
			atomicOr(&p.bits[id >> 5], 1u << (id & 31));
		}
		__syncthreads();
	}
}

// sample_bias adds n terms to their logits, x[at[i]] += add[i], in place
// on an F32 copy of the logits (the host sums a row's terms for one token,
// so that no two threads write one value).
SAMPLE_KERNEL sample_bias(u64 n, const u64* at, const float* add, float* x) { RG_GRID_WAIT();
	for (u64 i = gstart(); i < n; i += gstep()) x[at[i]] += add[i];
}

// sample_scale applies each row's repetition penalty (its bit set in bits)
// and temperature (> 0) to an F32 copy of the logits in place, as the
// draws read them (SRow::adjust): package candle's ProcessLogits.
SAMPLE_KERNEL sample_scale(u64 rows, u64 cols, const SampleRow* params, float* x) { RG_GRID_WAIT();
	const u64 n = rows * cols;
	for (u64 i = gstart(); i < n; i += gstep()) {
		const u64 r = i / cols, c = i - r * cols;
		const SampleRow& p = params[r];
		float v = x[i];
		if (p.bits != nullptr && ((p.bits[c >> 5] >> (c & 31)) & 1u)) v = v < 0.0f ? v * p.penalty : __fdiv_rn(v, p.penalty);
		x[i] = __fdiv_rn(v, p.temperature);
	}
}

#define RG_SAMPLE(name, T)                                                                                                 \
	SAMPLE_KERNEL sample_max_##name(u64 rows, u64 cols, u64 span, u32 parts, const T* logits, const SampleRow* params,     \
	                                SampleState* state, u64* hist, u64* cand, u32* out) { RG_GRID_WAIT();                  \
		sample_max<T>(rows, cols, span, parts, logits, params, state, hist, out);                                          \
	}                                                                                                                      \
	SAMPLE_KERNEL sample_hist_##name(u64 rows, u64 cols, u64 span, u32 parts, const T* logits, const SampleRow* params,    \
	                                 SampleState* state, u64* hist, u64* cand, u32* out) { RG_GRID_WAIT();                 \
		sample_hist<T>(rows, cols, span, parts, logits, params, state, hist);                                              \
	}                                                                                                                      \
	SAMPLE_KERNEL sample_draw_##name(u64 rows, u64 cols, u64 span, u32 parts, const T* logits, const SampleRow* params,    \
	                                 SampleState* state, u64* hist, u64* cand, u32* out) { RG_GRID_WAIT();                 \
		sample_draw<T>(rows, cols, span, parts, logits, params, state, cand, out);                                         \
	}
RG_SAMPLE(f32, f32)
RG_SAMPLE(f16, f16)
RG_SAMPLE(bf16, bf16)

// token_mask_<dt>: constrained decoding's mask on contiguous logits (rows,
// cols): y = x where bit c%32 of mask[r*words + c/32] is set, -inf where it
// is clear (the token may not come next), before the draw.
template <class T> __device__ __forceinline__ void token_mask(u64 rows, u64 cols, u64 words, const T* x, const u32* mask, T* y) {
	const u64 n = rows * cols;
	for (u64 k = gstart(); k < n; k += gstep()) {
		const u64 r = k / cols, c = k - r * cols;
		const bool keep = (mask[r * words + (c >> 5)] >> (c & 31)) & 1u;
		y[k] = keep ? x[k] : Traits<T>::store(__int_as_float(0xff800000));
	}
}
#define RG_TOKEN_MASK(name, T)                                                                                             \
	SAMPLE_KERNEL token_mask_##name(u64 rows, u64 cols, u64 words, const T* x, const u32* mask, T* y) { RG_GRID_WAIT();  \
		token_mask<T>(rows, cols, words, x, mask, y);                                                                      \
	}
RG_TOKEN_MASK(f32, f32)
RG_TOKEN_MASK(f16, f16)
RG_TOKEN_MASK(bf16, bf16)
