// Sorting along the last dim, on contiguous rows:
//   argsort_<dt>  each row's indices (u32) in sorted order, ascending or
//                 descending; equal keys keep their index order (stable),
//                 NaN sorts as the largest value, -0 equals +0.
//   topk_<dt>     a stage of the indices of each row's k largest, in that
//                 order (ties: the lower index first), for k ≤ TOPK_MAX.
// A least-significant-digit radix sort, 8 bits a pass, on keys that order
// as unsigned integers (Radix below; descending flips every bit). A block
// takes a row. Each pass ranks a tile of the row (SORT_BLOCK threads ×
// ITEMS keys) by its digit in shared memory, stably, and writes the tile
// out in digit order:
//   - a row that fits in one tile stays in shared memory for every pass
//     and is read and written once;
//   - a longer row first counts the digits of every pass (one read), then
//     each pass streams the row's tiles in order into the digits' places
//     in global scratch (ping-pong between two buffers per block, the last
//     pass into the output), skipping passes whose digit is the same for
//     the whole row.
// One launch, any row length, shared memory under 48 KB (AMD's LDS is
// 64 KB; CUDA's static limit is 48 KB).
#include "common.h"

#define SORT_BLOCK 512
#define SORT_MAX_WARPS (SORT_BLOCK / 32)
#define SORT_KERNEL extern "C" __global__ __launch_bounds__(SORT_BLOCK, 2) void

// Radix<T> turns an element's bits (Raw) into a key K whose unsigned order
// is the sort order, BITS wide: floats flip their negatives, every NaN is
// the largest key, -0 is +0; i64 flips its sign bit.
template <class T> struct Radix;
template <> struct Radix<f32> {
	typedef u32 Raw;
	typedef u32 K;
	static const int BITS = 32;
	static __device__ __forceinline__ K key(Raw u) {
		if ((u & 0x7fffffffu) > 0x7f800000u) return 0xffffffffu;
		if (u == 0x80000000u) u = 0;
		return (u & 0x80000000u) ? ~u : u | 0x80000000u;
	}
};
template <u32 Inf> __device__ __forceinline__ u32 half_key(u16 h) {
	u32 u = h;
	if ((u & 0x7fffu) > Inf) return 0xffffu;
	if (u == 0x8000u) u = 0;
	return (u & 0x8000u) ? (~u & 0xffffu) : u | 0x8000u;
}
template <> struct Radix<f16> {
	typedef u16 Raw;
	typedef u32 K;
	static const int BITS = 16;
	static __device__ __forceinline__ K key(Raw u) { return half_key<0x7c00u>(u); }
};
template <> struct Radix<bf16> {
	typedef u16 Raw;
	typedef u32 K;
	static const int BITS = 16;
	static __device__ __forceinline__ K key(Raw u) { return half_key<0x7f80u>(u); }
};
template <> struct Radix<f64> {
	typedef u64 Raw;
	typedef u64 K;
	static const int BITS = 64;
	static __device__ __forceinline__ K key(Raw u) {
		const u64 sign = 0x8000000000000000ull;
		if ((u & ~sign) > 0x7ff0000000000000ull) return ~0ull;
		if (u == sign) u = 0;
		return (u & sign) ? ~u : u | sign;
	}
};
template <> struct Radix<u8> {
	typedef u8 Raw;
	typedef u32 K;
	static const int BITS = 8;
	static __device__ __forceinline__ K key(Raw u) { return u; }
};
template <> struct Radix<u32> {
	typedef u32 Raw;
	typedef u32 K;
	static const int BITS = 32;
	static __device__ __forceinline__ K key(Raw u) { return u; }
};
template <> struct Radix<i64> {
	typedef u64 Raw;
	typedef u64 K;
	static const int BITS = 64;
	static __device__ __forceinline__ K key(Raw u) { return u ^ 0x8000000000000000ull; }
};

// The keys a thread ranks at once: a tile of SORT_BLOCK × Items<K> keys
// and their indices fits in 32 KB (u32 keys) or 24 KB (u64 keys).
template <class K> struct Items { static const int N = 8; };
template <> struct Items<u64> { static const int N = 4; };

// SortShared is a sort block's shared memory. The tile in digit order
// (x) and the warps' digit counters (cnt) are never live together.
template <class K, int PASSES> struct SortShared {
	struct Tile {
		K k[SORT_BLOCK * Items<K>::N];
		u32 i[SORT_BLOCK * Items<K>::N];
	};
	union {
		Tile x;
		u32 cnt[SORT_MAX_WARPS * 256];
	};
	u32 count[256]; // the tile's keys of each digit
	u32 start[256]; // where the tile's keys of each digit start, in the tile
	u32 run[256];   // where the row's next keys of each digit go (long rows)
	u32 hist[PASSES][256];
	u32 skip[PASSES];
};

template <class K> __device__ __forceinline__ u32 digit(K k, int shift) { return (u32)(k >> shift) & 0xffu; }

// scan256 writes the exclusive prefix sums of in[256] to out; one whole
// warp calls it, each lane summing 256 / warpSize consecutive digits.
__device__ __forceinline__ void scan256(const u32* in, u32* out) {
	const int ws = RG_WARP, lane = threadIdx.x % ws, per = 256 / ws;
	u32 sum = 0;
	for (int j = 0; j < per; j++) sum += in[lane * per + j];
	u32 inc = sum;
	for (int o = 1; o < ws; o <<= 1) {
		const u32 v = __shfl_up(inc, o);
		if (lane >= o) inc += v;
	}
	u32 run = inc - sum;
	for (int j = 0; j < per; j++) {
		const u32 c = in[lane * per + j];
		out[lane * per + j] = run;
		run += c;
	}
}

// rank_tile sorts the block's tile stably by the digit at shift into s.x:
// key k[i] of lane l of warp w is at tile position w·warpSize·N + i·warpSize
// + l (each warp a run of the tile, each step of i a warp-wide row of it).
// Within a warp the lanes with one digit find each other with a ballot per
// bit and count themselves in the warp's counter of the digit, in position
// order; a scan over the counters, digit-major and warp-minor, places
// every warp's run of each digit. It also leaves the tile's count and
// start of each digit. Everyone must be done reading s.x before the call.
template <class K, int PASSES>
__device__ __forceinline__ void rank_tile(SortShared<K, PASSES>& s, K (&k)[Items<K>::N], u32 (&ix)[Items<K>::N], int shift) {
	const int N = Items<K>::N;
	const int ws = RG_WARP, lane = threadIdx.x % ws, w = threadIdx.x / ws, nw = blockDim.x / ws;
	for (u32 j = threadIdx.x; j < (u32)nw * 256; j += blockDim.x) s.cnt[j] = 0;
	__syncthreads();
	const u64 below = (1ull << lane) - 1;
	u32 dg[N], rank[N];
#pragma unroll
	for (int i = 0; i < N; i++) {
		dg[i] = digit(k[i], shift);
		u64 peers = __ballot(1);
#pragma unroll
		for (int b = 0; b < 8; b++) {
			const u64 m = __ballot((dg[i] >> b) & 1);
			peers &= ((dg[i] >> b) & 1) ? m : ~m;
		}
		const int leader = __popcll((peers & (0 - peers)) - 1);
		u32 old = 0;
		// An atomic, so that the lanes of the next step, whatever their
		// leader, see this step's counts.
		if (lane == leader) old = atomicAdd(&s.cnt[w * 256 + dg[i]], (u32)__popcll(peers));
		rank[i] = __shfl(old, leader) + (u32)__popcll(peers & below);
	}
	__syncthreads();
	for (u32 d = threadIdx.x; d < 256; d += blockDim.x) {
		u32 total = 0;
		for (int v = 0; v < nw; v++) {
			const u32 c = s.cnt[v * 256 + d];
			s.cnt[v * 256 + d] = total;
			total += c;
		}
		s.count[d] = total;
	}
	__syncthreads();
	if (w == 0) scan256(s.count, s.start);
	__syncthreads();
#pragma unroll
	for (int i = 0; i < N; i++) rank[i] += s.cnt[w * 256 + dg[i]] + s.start[dg[i]];
	__syncthreads();
#pragma unroll
	for (int i = 0; i < N; i++) {
		s.x.k[rank[i]] = k[i];
		s.x.i[rank[i]] = ix[i];
	}
	__syncthreads();
}

// argsort sorts rows of cols elements of T (read as their bits); desc:
// descending. scratch, for rows longer than a tile (else unused): a row
// counter (zero at launch: blocks take the next row from it, so that
// blocks that start late share the rows evenly) in its first 256 bytes,
// then two buffers of keys and two of indices, each gridDim.x · cols long.
template <class T>
__device__ __forceinline__ void argsort(u64 rows, u64 cols, int desc, const typename Radix<T>::Raw* x, u32* out, void* scratch) {
	typedef Radix<T> R;
	typedef typename R::K K;
	const int N = Items<K>::N, PASSES = R::BITS / 8;
	__shared__ SortShared<K, PASSES> s;
	__shared__ u64 next_row;
	const K ones = (K)(~0ull >> (64 - R::BITS));
	const K flip = desc ? ones : 0;
	const u32 tile = blockDim.x * N;
	const int ws = RG_WARP;
	const u32 at = threadIdx.x / ws * ws * N + threadIdx.x % ws; // item i's tile position: at + i·ws
	K k[N];
	u32 ix[N];
	if (cols <= tile) {
		for (u64 row = blockIdx.x; row < rows; row += gridDim.x) {
			// The row in shared memory: past its end, keys larger than any
			// (all ones) whose positions come last.
			const typename R::Raw* xr = x + row * cols;
#pragma unroll
			for (int i = 0; i < N; i++) {
				const u32 p = at + i * ws;
				k[i] = p < cols ? R::key(xr[p]) ^ flip : ones;
				ix[i] = p;
			}
			for (int pass = 0; pass < PASSES; pass++) {
				rank_tile(s, k, ix, pass * 8);
				if (pass + 1 < PASSES) {
#pragma unroll
					for (int i = 0; i < N; i++) {
						k[i] = s.x.k[at + i * ws];
						ix[i] = s.x.i[at + i * ws];
					}
					__syncthreads();
				}
			}
			for (u32 j = threadIdx.x; j < cols; j += blockDim.x) out[row * cols + j] = s.x.i[j];
			__syncthreads();
		}
		return;
	}
	u64* counter = (u64*)scratch;
	K* scratch_keys = (K*)((char*)scratch + 256);
	const u64 slot = (u64)blockIdx.x * cols, all = (u64)gridDim.x * cols;
	K* keys[2] = {scratch_keys + slot, scratch_keys + all + slot};
	u32* ids[2] = {(u32*)(scratch_keys + 2 * all) + slot, (u32*)(scratch_keys + 2 * all) + all + slot};
	for (;;) {
		if (threadIdx.x == 0) next_row = atomicAdd((unsigned long long*)counter, 1ull);
		__syncthreads();
		const u64 row = next_row;
		if (row >= rows) return;
		const typename R::Raw* xr = x + row * cols;
		u32* outr = out + row * cols;
		// The digits of every pass, in one read.
		for (u32 j = threadIdx.x; j < PASSES * 256; j += blockDim.x) s.hist[j / 256][j % 256] = 0;
		if (threadIdx.x < PASSES) s.skip[threadIdx.x] = 0;
		__syncthreads();
		for (u64 p = threadIdx.x; p < cols; p += blockDim.x) {
			const K key = R::key(xr[p]) ^ flip;
#pragma unroll
			for (int pass = 0; pass < PASSES; pass++) atomicAdd(&s.hist[pass][digit(key, pass * 8)], 1u);
		}
		__syncthreads();
		// A pass is skipped when one digit holds the whole row.
		for (u32 j = threadIdx.x; j < PASSES * 256; j += blockDim.x)
			if (s.hist[j / 256][j % 256] == cols) s.skip[j / 256] = 1;
		__syncthreads();
		int active = 0;
		for (int pass = 0; pass < PASSES; pass++) active += !s.skip[pass];
		if (active == 0)
			for (u64 p = threadIdx.x; p < cols; p += blockDim.x) outr[p] = (u32)p;
		int done = 0;
		for (int pass = 0; pass < PASSES; pass++) {
			if (s.skip[pass]) continue;
			const int shift = pass * 8;
			const bool first = done == 0, last = done == active - 1;
			const K* sk = keys[(done + 1) % 2];
			const u32* si = ids[(done + 1) % 2];
			K* dk = keys[done % 2];
			u32* di = last ? outr : ids[done % 2];
			if (threadIdx.x < ws) scan256(s.hist[pass], s.run);
			__syncthreads();
			for (u64 base = 0; base < cols; base += tile) {
#pragma unroll
				for (int i = 0; i < N; i++) {
					const u64 p = base + at + i * ws;
					if (p < cols) {
						k[i] = first ? R::key(xr[p]) ^ flip : sk[p];
						ix[i] = first ? (u32)p : si[p];
					} else {
						k[i] = ones;
						ix[i] = 0;
					}
				}
				rank_tile(s, k, ix, shift);
				// The tile in digit order, each digit's run to its place:
				// consecutive threads, consecutive addresses.
				const u32 n = cols - base < tile ? (u32)(cols - base) : tile;
				for (u32 j = threadIdx.x; j < n; j += blockDim.x) {
					const K key = s.x.k[j];
					const u32 d = digit(key, shift);
					const u32 to = s.run[d] + j - s.start[d];
					if (!last) dk[to] = key;
					di[to] = s.x.i[j];
				}
				__syncthreads();
				for (u32 d = threadIdx.x; d < 256; d += blockDim.x) s.run[d] += s.count[d];
				__syncthreads();
			}
			done++;
		}
		// Everyone is done with next_row and s.skip.
		__syncthreads();
	}
}

// ordered_prefix counts the flags of the block's tile before each one, in
// tile order (rank_tile's).
template <int N> __device__ __forceinline__ void ordered_prefix(const bool (&f)[N], u32 (&pre)[N], u32* warps) {
	const int ws = RG_WARP, lane = threadIdx.x % ws, w = threadIdx.x / ws;
	const u64 below = (1ull << lane) - 1;
	u32 run = 0;
#pragma unroll
	for (int i = 0; i < N; i++) {
		const u64 m = __ballot(f[i]);
		pre[i] = run + (u32)__popcll(m & below);
		run += (u32)__popcll(m);
	}
	if (lane == 0) warps[w] = run;
	__syncthreads();
	u32 base = 0;
	for (int v = 0; v < w; v++) base += warps[v];
#pragma unroll
	for (int i = 0; i < N; i++) pre[i] += base;
	__syncthreads();
}

#define TOPK_MAX 256

template <class K> struct TopkShared {
	u32 hist[256], start[256], warps[SORT_MAX_WARPS], sel;
	K k[TOPK_MAX];
	u32 i[TOPK_MAX];
};

// topk is a stage of the k smallest keys of each row (the largest
// elements: the keys are flipped), equal keys by position. Each block
// takes a tile of a row (a chunk) and selects its k smallest by radix
// select, most significant digit first: the digit of the k-th key among
// the keys that share the digits found so far, until the k-th key T is
// known; then the keys below T and the first of those equal to T, in
// tile order. The first stage reads x, later ones the candidates of the
// previous (ck, ci); a chunk's candidates keep their order, so that the
// order of a row's candidates is the order of their indices. A stage
// whose rows are one chunk is the last: it ranks the k keys by counting
// (key, then position) and writes their indices to out; otherwise it
// writes k candidates a chunk to ok, oi (the last chunk of a row may have
// fewer keys than k: keys larger than any, at the end of the row).
template <class T>
__device__ __forceinline__ void topk(u64 rows, u64 cols, u32 k, const typename Radix<T>::Raw* x, const typename Radix<T>::K* ck,
                                     const u32* ci, typename Radix<T>::K* ok, u32* oi, u32* out) {
	typedef Radix<T> R;
	typedef typename R::K K;
	const int N = Items<K>::N, PASSES = R::BITS / 8;
	__shared__ TopkShared<K> s;
	const K ones = (K)(~0ull >> (64 - R::BITS));
	const u32 tile = blockDim.x * N;
	const u64 chunks = (cols + tile - 1) / tile;
	const int ws = RG_WARP;
	const u32 at = threadIdx.x / ws * ws * N + threadIdx.x % ws;
	for (u64 b = blockIdx.x; b < rows * chunks; b += gridDim.x) {
		const u64 row = b / chunks, base = b % chunks * tile;
		const u32 n = cols - base < tile ? (u32)(cols - base) : tile, kk = k < n ? k : n;
		K key[N];
		u32 ix[N];
		bool valid[N];
#pragma unroll
		for (int i = 0; i < N; i++) {
			const u32 p = at + i * ws;
			valid[i] = p < n;
			const u64 q = row * cols + base + p;
			key[i] = !valid[i] ? ones : x ? R::key(x[q]) ^ ones : ck[q];
			ix[i] = !valid[i] ? 0 : x ? (u32)(base + p) : ci[q];
		}
		K prefix = 0;
		u32 need = kk;
		for (int pass = PASSES - 1; pass >= 0; pass--) {
			const int shift = pass * 8;
			for (u32 d = threadIdx.x; d < 256; d += blockDim.x) s.hist[d] = 0;
			__syncthreads();
#pragma unroll
			for (int i = 0; i < N; i++)
				if (valid[i] && (pass == PASSES - 1 || ((key[i] ^ prefix) >> (shift + 8)) == 0))
					atomicAdd(&s.hist[digit(key[i], shift)], 1u);
			__syncthreads();
			if (threadIdx.x < ws) scan256(s.hist, s.start);
			__syncthreads();
			for (u32 d = threadIdx.x; d < 256; d += blockDim.x)
				if (s.start[d] < need && need <= s.start[d] + s.hist[d]) s.sel = d;
			__syncthreads();
			need -= s.start[s.sel];
			prefix |= (K)s.sel << shift;
			__syncthreads();
		}
		// prefix is the k-th key; the first `need` keys equal to it go.
		bool eq[N], take[N];
		u32 pre[N];
#pragma unroll
		for (int i = 0; i < N; i++) eq[i] = valid[i] && key[i] == prefix;
		ordered_prefix(eq, pre, s.warps);
#pragma unroll
		for (int i = 0; i < N; i++) take[i] = valid[i] && (key[i] < prefix || (eq[i] && pre[i] < need));
		ordered_prefix(take, pre, s.warps);
		if (chunks > 1) {
			const u64 o = b * k;
#pragma unroll
			for (int i = 0; i < N; i++)
				if (take[i]) {
					ok[o + pre[i]] = key[i];
					oi[o + pre[i]] = ix[i];
				}
			for (u32 j = kk + threadIdx.x; j < k; j += blockDim.x) {
				ok[o + j] = ones;
				oi[o + j] = 0xffffffffu;
			}
			continue;
		}
#pragma unroll
		for (int i = 0; i < N; i++)
			if (take[i]) {
				s.k[pre[i]] = key[i];
				s.i[pre[i]] = ix[i];
			}
		__syncthreads();
		for (u32 j = threadIdx.x; j < kk; j += blockDim.x) {
			const K kj = s.k[j];
			u32 r = 0;
			for (u32 m = 0; m < kk; m++) r += s.k[m] < kj || (s.k[m] == kj && m < j);
			out[row * k + r] = s.i[j];
		}
		__syncthreads();
	}
}

#define RG_SORT(name, T)                                                                                                  \
	SORT_KERNEL argsort_##name(u64 rows, u64 cols, int desc, const void* x, u32* out, void* scratch) { RG_GRID_WAIT();  \
		argsort<T>(rows, cols, desc, (const typename Radix<T>::Raw*)x, out, scratch);                                     \
	}                                                                                                                     \
	SORT_KERNEL topk_##name(u64 rows, u64 cols, u32 k, const void* x, const void* ck, const u32* ci, void* ok, u32* oi,  \
	                        u32* out) { RG_GRID_WAIT();                                                                   \
		typedef typename Radix<T>::K K;                                                                                   \
		topk<T>(rows, cols, k, (const typename Radix<T>::Raw*)x, (const K*)ck, ci, (K*)ok, oi, out);                      \
	}
RG_ALL_TYPES(RG_SORT)
