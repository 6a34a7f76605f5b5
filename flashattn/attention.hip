// flashattn's portable attention kernels: FlashAttention-2's forward
// algorithm (a block keeps its query rows' output, running maximum and sum
// in registers while K and V pass through shared memory one tile at a
// time; no s_q × s_kv buffer exists anywhere), in plain float arithmetic
// that compiles for any architecture and any warp size. One source for
// hipRTC (AMD) and NVRTC (NVIDIA, through package hiprtc's prelude).
//
//   attn_fwd_<dt>_d<DMAX>  the forward pass for head dims up to DMAX (32,
//                          64, 128, 256): dense, variable-length or paged
//                          K/V, with split-KV partials when splits > 1
//   attn_combine_<dt>      merges the split-KV partials into the output
//   attn_decode_<dt>_d<DMAX>_r<RM>  flash-decoding: the keys spread over a
//                          block's threads, for the few rows of a decode
//                          step (RM 1 or 4 rows a block)
//   attn_decode_<dt>_d<DMAX>_paged  the same, four rows, F16/BF16, for
//                          an LLM's decode step: paged, nothing masked
//   attn_mma_<dt>_d<DMAX>  F16/BF16 on matrix cores where the arch has
//                          them (NVIDIA sm_80+: mma.sync); absent elsewhere
//   attn_wgmma_<dt>_d<DMAX>  the same on Hopper's warpgroup instructions
//                          (sm_90a only: wgmma.mma_async), head dims 64
//                          and 128
//   attn_mmadec_<dt>_d<DMAX>  the same for a decode step's few rows: four
//                          warps over each tile's keys, split-KV (NVIDIA
//                          sm_80+, head dims up to 128), merging its own
//                          splits where that is small (FA_FUSE)
//   attn_mfma_<dt>_d<DMAX>, attn_wmma_<dt>_d<DMAX>  the same on AMD CDNA
//                          (gfx90a, gfx942, gfx950) and RDNA3/4 (gfx11,
//                          gfx12); absent elsewhere
//
// Layout of the work: a block takes BM rows of one (batch entry, KV head).
// A row is one query position of one query head; the G = h_q / h_kv query
// heads that share a KV head are neighbouring rows, so that a K/V tile in
// shared memory serves the whole group (GQA/MQA, and decode, where s_q is
// 1 and the rows are the group's heads). TPR = DMAX/16 neighbouring
// threads share a row, each holding 16 of its head dims of q and of the
// output; a score is their partial dot products summed by xor shuffles
// within the group (TPR divides every warp size: 32 and 64).
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bf16.h>

typedef long long i64;
typedef float f32;
typedef __half f16;
typedef __hip_bfloat16 bf16;

#define FA_THREADS 256
#define FA_DPT 16 // head dims per thread
#define FA_MAX_ALIBI 256
#define FA_KERNEL extern "C" __global__ __launch_bounds__(FA_THREADS) void

// FA_GRID_WAIT is every kernel's first statement: the kernels launch
// early (hip.LaunchConfig.EarlyLaunch), and on sm_90 and later one may
// start while the stream's previous kernel still runs. It waits here
// until that kernel has ended and its writes are visible, then lets the
// next kernel launch. Nothing on other devices.
__device__ __forceinline__ void fa_grid_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory");
#endif
}
#define FA_GRID_WAIT() fa_grid_wait()

// Flags of Params.flags.
#define FA_VARLEN 1   // cu_q, cu_k give each sequence's rows
#define FA_PAGED 2    // K and V are pages: block_table, seqlens_k
#define FA_ALIGNED 4  // q, k, v, o and their row strides are 16-byte aligned
#define FA_ALIBI 8    // alibi holds a slope per query head
#define FA_LSE 16     // write the log-sum-exp of each row
#define FA_FUSE 32    // attn_mmadec merges its own splits (Params.counters)
#define FA_ROTARY 64  // attn_decode_paged rotates q and the new keys and writes the new keys and values

// Params is package flashattn's kParams, byte for byte (a static_assert
// here, a compile-time check there).
struct Params {
	const void* q;
	const void* k;
	const void* v;
	void* o;
	float* lse;
	float* opart;   // split-KV partial outputs: (splits, h_q, rows, d)
	float* lsepart; // and their log-sum-exps: (splits, h_q, rows)
	const int* cu_q;
	const int* cu_k;
	const int* seqlens_k;
	const int* block_table;
	// Strides in elements of (batch, seq, head); paged K and V: (page,
	// row in page, head). Varlen: the batch stride is unused.
	i64 qs[3], ks[3], vs[3], os[3];
	i64 bt_stride; // block table row stride
	int batch, s_q, s_k, h_q, h_kv, d;
	int max_s_q;   // the longest sequence of q (the grid covers it)
	int page_size, num_pages, splits;
	int window_left, window_right; // -1: unbounded
	int flags;
	float scale;   // softmax scale
	float softcap; // 0: none
	float alibi[FA_MAX_ALIBI];
	unsigned* counters; // FA_FUSE: one a (batch entry, KV head, row block), zero between launches
	// FA_ROTARY: each batch entry's new key (before rotation) and value,
	// strides in elements of (batch, head), and its cos and sin (d/2 each,
	// rows cs_stride apart).
	const void* new_k;
	const void* new_v;
	const void* cos;
	const void* sin;
	i64 nks[2], nvs[2];
	i64 cs_stride;
};
static_assert(sizeof(Params) == 1360, "Params is package flashattn's kParams, byte for byte");

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float qnan() { return __int_as_float(0x7fc00000); }
// nanmax is fmaxf that keeps a NaN: a NaN score (NaN data, or a page
// outside the cache) makes its row NaN instead of vanishing.
__device__ __forceinline__ float nanmax(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
	float y; // one instruction where the arch has it
	asm("max.NaN.f32 %0, %1, %2;\n" : "=f"(y) : "f"(a), "f"(b));
	return y;
#else
	return a != a ? a : b != b ? b : fmaxf(a, b);
#endif
}
// exp2_ftz is 2^x with results below 2^-126 flushed to zero: one
// instruction on NVIDIA (exp2f adds a denormal's scaling around it).
__device__ __forceinline__ float exp2_ftz(float x) {
#if defined(__CUDA_ARCH__)
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
	return y;
#else
	return exp2f(x);
#endif
}
#define FA_LOG2E 1.4426950408889634f
#define FA_LN2 0.6931471805599453f

template <class T> struct Tr;
template <> struct Tr<f32> {
	static __device__ __forceinline__ float load(f32 x) { return x; }
	static __device__ __forceinline__ f32 store(float c) { return c; }
};
template <> struct Tr<f16> {
	static __device__ __forceinline__ float load(f16 x) { return __half2float(x); }
	static __device__ __forceinline__ f16 store(float c) { return __float2half(c); }
};
template <> struct Tr<bf16> {
	static __device__ __forceinline__ float load(bf16 x) { return __bfloat162float(x); }
	static __device__ __forceinline__ bf16 store(float c) { return __float2bfloat16(c); }
};

// Pack8 is eight elements, loaded and stored at once where aligned.
template <class T> struct alignas(16) Pack8 {
	T v[8];
};

template <class T> __device__ __forceinline__ Pack8<T> load8(const T* p, bool aligned) {
	if (aligned) return *(const Pack8<T>*)p;
	Pack8<T> x;
#pragma unroll
	for (int e = 0; e < 8; e++) x.v[e] = p[e];
	return x;
}

template <class T> __device__ __forceinline__ void store8(T* p, const Pack8<T>& x, bool aligned) {
	if (aligned) {
		*(Pack8<T>*)p = x;
		return;
	}
#pragma unroll
	for (int e = 0; e < 8; e++) p[e] = x.v[e];
}

template <class T> __device__ __forceinline__ Pack8<T> fill8(float f) {
	Pack8<T> x;
#pragma unroll
	for (int e = 0; e < 8; e++) x.v[e] = Tr<T>::store(f);
	return x;
}

// The tile sizes of a head-dim bucket: TPR threads per row, BM rows per
// block, BN keys per tile (K and V tiles of BN × DMAX take 32 KiB of
// shared memory together at most).
template <class T, int DMAX> struct Tiles {
	static const int TPR = DMAX / FA_DPT;
	static const int BM = FA_THREADS / TPR;
	static const int BN0 = 16384 / (DMAX * (int)sizeof(T));
	static const int BN = BN0 > 64 ? 64 : BN0;
};

// Seq is what a block knows of its batch entry: lengths, the offsets of
// its sequences, and the first of its rows among all rows of q.
struct Seq {
	int sq, sk;
	i64 qbase, kbase, vbase, obase;
	int row0;
};

__device__ __forceinline__ Seq seq_of(const Params& p, int b) {
	Seq s;
	if (p.flags & FA_VARLEN) {
		const int q0 = p.cu_q[b], k0 = p.cu_k[b];
		s.sq = p.cu_q[b + 1] - q0;
		s.sk = p.cu_k[b + 1] - k0;
		s.qbase = (i64)q0 * p.qs[1];
		s.obase = (i64)q0 * p.os[1];
		s.kbase = (i64)k0 * p.ks[1];
		s.vbase = (i64)k0 * p.vs[1];
		s.row0 = q0;
	} else {
		s.sq = p.s_q;
		s.sk = (p.flags & FA_PAGED) ? p.seqlens_k[b] : p.s_k;
		s.qbase = (i64)b * p.qs[0];
		s.obase = (i64)b * p.os[0];
		s.kbase = (p.flags & FA_PAGED) ? 0 : (i64)b * p.ks[0];
		s.vbase = (p.flags & FA_PAGED) ? 0 : (i64)b * p.vs[0];
		s.row0 = b * p.s_q;
	}
	return s;
}

// The rows of all batch entries: the LSE's and the partials' row count.
__device__ __forceinline__ int total_rows(const Params& p) { return (p.flags & FA_VARLEN) ? p.s_q : p.batch * p.s_q; }

// lse_index is where a row's log-sum-exp goes: (batch, h_q, s_q) for
// dense and paged q, (h_q, total rows) for variable-length q; lse_at is
// the same from the values, for code without Params (fa_merge).
__device__ __forceinline__ i64 lse_at(bool varlen, int s_q, int h_q, int b, int h, int i, int row0) {
	if (varlen) return (i64)h * s_q + row0 + i;
	return ((i64)b * h_q + h) * s_q + i;
}
__device__ __forceinline__ i64 lse_index(const Params& p, int b, int h, int i, int row0) {
	return lse_at((p.flags & FA_VARLEN) != 0, p.s_q, p.h_q, b, h, i, row0);
}

// alibi_slope is query head h's ALiBi slope, 0 without ALiBi.
__device__ __forceinline__ float alibi_slope(const Params& p, int h) {
	float slope = 0.0f;
	if (p.flags & FA_ALIBI) {
#if defined(__HIP_PLATFORM_NVIDIA__)
		// By static indices: a dynamic index into a kernel argument would
		// make NVIDIA's compiler copy the arguments to local memory.
#pragma unroll
		for (int x = 0; x < FA_MAX_ALIBI; x++)
			if (x == h) slope = p.alibi[x];
#else
		slope = p.alibi[h]; // AMD's kernel arguments are memory
#endif
	}
	return slope;
}

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

// ---------------------------------------------------------------------
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

// ---------------------------------------------------------------------
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
#endif // sm_90a
#endif // NVIDIA sm_80+

// ---------------------------------------------------------------------
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
#endif // AMD matrix cores


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
#define FA_FWD(T, D)                                                                                 \
	FA_KERNEL attn_fwd_##T##_d##D(Params p) { FA_GRID_WAIT(); attn_fwd<T, D>(p); }                   \
	FA_DECODE_KERNEL(T, 4) attn_decode_##T##_d##D##_r1(Params p) { FA_GRID_WAIT(); attn_decode_any<T, D, 1, 2>(p); } \
	FA_DECODE_KERNEL(T, 2) attn_decode_##T##_d##D##_r4(Params p) { FA_GRID_WAIT(); attn_decode_any<T, D, 4, 2>(p); }
#define FA_TYPE(T)                                                       \
	FA_FWD(T, 32) FA_FWD(T, 64) FA_FWD(T, 128) FA_FWD(T, 256)           \
	FA_KERNEL attn_combine_##T(Params p) { FA_GRID_WAIT(); attn_combine<T>(p); }
#define FA_PAGED_DECODE(T, D) \
	FA_DECODE_KERNEL(T, 2) attn_decode_##T##_d##D##_paged(Params p) { FA_GRID_WAIT(); attn_decode_paged<T, D>(p); }
#define FA_PAGED_TYPE(T) FA_PAGED_DECODE(T, 32) FA_PAGED_DECODE(T, 64) FA_PAGED_DECODE(T, 128) FA_PAGED_DECODE(T, 256)

FA_TYPE(f16)
FA_TYPE(bf16)
FA_TYPE(f32)
FA_PAGED_TYPE(f16)
FA_PAGED_TYPE(bf16)

#if FA_NV_MMA
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
#endif
#if FA_NV_WGMMA
// attn_wgmma_<dt>_d<DMAX>: head dim DMAX itself, 64 or 128.
#define FA_WGMMA(T, D)                                                                                          \
	extern "C" __global__ __launch_bounds__(WgTiles<D>::THREADS, 1) void attn_wgmma_##T##_d##D(Params p) {       \
		FA_GRID_WAIT(); attn_wgmma<T, D>(p);                                                                 \
	}
FA_WGMMA(f16, 64) FA_WGMMA(f16, 128)
FA_WGMMA(bf16, 64) FA_WGMMA(bf16, 128)
#endif

#if FA_AMD_MFMA || FA_AMD_WMMA
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
#endif
