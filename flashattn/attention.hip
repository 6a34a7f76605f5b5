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

// Flags of Params.flags.
#define FA_VARLEN 1   // cu_q, cu_k give each sequence's rows
#define FA_PAGED 2    // K and V are pages: block_table, seqlens_k
#define FA_ALIGNED 4  // q, k, v, o and their row strides are 16-byte aligned
#define FA_ALIBI 8    // alibi holds a slope per query head
#define FA_LSE 16     // write the log-sum-exp of each row

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
};
static_assert(sizeof(Params) == 1280, "Params is package flashattn's kParams, byte for byte");

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float qnan() { return __int_as_float(0x7fc00000); }
// nanmax is fmaxf that keeps a NaN: a NaN score (NaN data, or a page
// outside the cache) makes its row NaN instead of vanishing.
__device__ __forceinline__ float nanmax(float a, float b) { return a != a ? a : b != b ? b : fmaxf(a, b); }
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
// dense and paged q, (h_q, total rows) for variable-length q.
__device__ __forceinline__ i64 lse_index(const Params& p, int b, int h, int i, int row0) {
	if (p.flags & FA_VARLEN) return (i64)h * p.s_q + row0 + i;
	return ((i64)b * p.h_q + h) * p.s_q + i;
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
// lse) where lse is the log-sum-exp over the splits. A thread takes one
// element of the output.
template <class T> __device__ __forceinline__ void attn_combine(const Params& p) {
	const i64 rows = total_rows(p), n = rows * p.h_q * p.d;
	for (i64 x = (i64)blockIdx.x * blockDim.x + threadIdx.x; x < n; x += (i64)gridDim.x * blockDim.x) {
		const int c = (int)(x % p.d);
		const i64 rh = x / p.d;
		const int h = (int)(rh % p.h_q);
		const i64 row = rh / p.h_q;
		float mx = neg_inf();
		for (int sp = 0; sp < p.splits; sp++) mx = nanmax(mx, p.lsepart[((i64)sp * p.h_q + h) * rows + row]);
		float val = 0.0f, lse = neg_inf();
		if (mx != neg_inf()) {
			float sum = 0.0f, acc = 0.0f;
			for (int sp = 0; sp < p.splits; sp++) {
				const i64 pr = ((i64)sp * p.h_q + h) * rows + row;
				const float w = expf(p.lsepart[pr] - mx);
				sum += w;
				acc += w * p.opart[pr * p.d + c];
			}
			val = acc / sum;
			lse = mx + logf(sum);
		}
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
		((T*)p.o)[oo + (i64)h * p.os[2] + c] = Tr<T>::store(val);
		if ((p.flags & FA_LSE) && c == 0) p.lse[lse_index(p, b, h, i, 0)] = lse;
	}
}

#define FA_FWD(T, D) \
	FA_KERNEL attn_fwd_##T##_d##D(Params p) { attn_fwd<T, D>(p); }
#define FA_TYPE(T)                                                       \
	FA_FWD(T, 32) FA_FWD(T, 64) FA_FWD(T, 128) FA_FWD(T, 256)           \
	FA_KERNEL attn_combine_##T(Params p) { attn_combine<T>(p); }

FA_TYPE(f16)
FA_TYPE(bf16)
FA_TYPE(f32)
