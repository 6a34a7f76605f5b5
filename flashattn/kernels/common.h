// What flashattn's kernel families share: the types, Params (package
// flashattn's kParams), the flags, the grid wait and the small helpers.
#pragma once
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bf16.h>

typedef long long i64;
typedef float f32;
typedef __half f16;
typedef __hip_bfloat16 bf16;

#define FA_THREADS 256
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
