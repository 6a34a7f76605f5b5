// What every kernel family of package candle shares. One source for hipRTC
// (AMD) and NVRTC (NVIDIA, through package hiprtc's prelude). No fixed warp
// size anywhere: warpSize is 64 on CDNA, 32 on RDNA and NVIDIA.
#pragma once
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bf16.h>

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef float f32;
typedef double f64;
typedef __half f16;
typedef __hip_bfloat16 bf16;

#define RG_BLOCK 256
// RG_WARP is the warp size, a constant where the platform has one: on
// NVIDIA, 32, where CUDA's warpSize is a value the compiler does not
// know (its loops over lanes stay loops, its divisions divisions); AMD's
// compiler knows warpSize for the arch (64 on CDNA, 32 on RDNA). On an
// H200, with qx_quant's one division a chunk, the Q4_K 1B model's decode
// step took 651.5 µs of GPU time against 681.8 (candle/kernels/NOTES.md).
#if defined(__HIP_PLATFORM_NVIDIA__)
#define RG_WARP 32
#else
#define RG_WARP warpSize
#endif
#define RG_MAX_RANK 8
#define RG_KERNEL extern "C" __global__ __launch_bounds__(RG_BLOCK) void

// RG_GRID_WAIT is every kernel's first statement. candle launches its
// kernels early (hip.LaunchConfig.EarlyLaunch): on sm_90 and later a
// kernel may start while the previous kernel of the stream still runs,
// and waits here until that one has ended and its writes are visible;
// then it lets the next kernel launch. Nothing on other devices.
__device__ __forceinline__ void rg_grid_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory");
#endif
}
#define RG_GRID_WAIT() rg_grid_wait()
// RG_WAITS_INSIDE, a kernel's first statement instead, says that its
// device function calls RG_GRID_WAIT itself after reading memory no
// kernel writes (a model's weights: their loads overlap the previous
// kernel's end).
#define RG_WAITS_INSIDE() \
	do {              \
	} while (0)

// Index is how a kernel walks up to four operands of one shape, passed by
// value (package candle's kIndex): rank 0 means every operand is
// contiguous (element i is at i); else element i (row-major over dims) of
// operand t is at sum(coordinate[d] * strides[t][d]). flags bit 0: the
// contiguous operands are 16-byte aligned, for vector loads.
struct Index {
	int rank;
	int flags;
	i64 dims[RG_MAX_RANK];
	i64 strides[4][RG_MAX_RANK];
};
static_assert(sizeof(Index) == 8 + 5 * 8 * RG_MAX_RANK, "Index is package candle's kIndex, byte for byte");

// offset is operand t's offset of element i; I is u32 when the element
// count fits, for cheaper division.
template <class I>
__device__ __forceinline__ i64 offset(const Index& ix, int t, I i) {
	i64 off = 0;
	for (int d = ix.rank - 1; d >= 0; d--) {
		I n = (I)ix.dims[d];
		I c = i % n;
		i /= n;
		off += (i64)c * ix.strides[t][d];
	}
	return off;
}

// The grid-stride loop's start and step.
__device__ __forceinline__ u64 gstart() { return (u64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ u64 gstep() { return (u64)gridDim.x * blockDim.x; }

// Traits of a storage type: its compute type C (float for the 16- and
// 32-bit floats, double for f64, i64 for i64, u64 for the unsigned types),
// and the conversions to and from it.
template <class T> struct Traits;
template <> struct Traits<f32> {
	typedef float C;
	static __device__ __forceinline__ float load(f32 x) { return x; }
	static __device__ __forceinline__ f32 store(float c) { return c; }
};
template <> struct Traits<f16> {
	typedef float C;
	static __device__ __forceinline__ float load(f16 x) { return __half2float(x); }
	static __device__ __forceinline__ f16 store(float c) { return __float2half(c); }
};
template <> struct Traits<bf16> {
	typedef float C;
	static __device__ __forceinline__ float load(bf16 x) { return __bfloat162float(x); }
	static __device__ __forceinline__ bf16 store(float c) { return __float2bfloat16(c); }
};
template <> struct Traits<f64> {
	typedef double C;
	static __device__ __forceinline__ double load(f64 x) { return x; }
	static __device__ __forceinline__ f64 store(double c) { return c; }
};
template <> struct Traits<u8> {
	typedef u64 C;
	static __device__ __forceinline__ u64 load(u8 x) { return x; }
	static __device__ __forceinline__ u8 store(u64 c) { return (u8)c; }
};
template <> struct Traits<u32> {
	typedef u64 C;
	static __device__ __forceinline__ u64 load(u32 x) { return x; }
	static __device__ __forceinline__ u32 store(u64 c) { return (u32)c; }
};
template <> struct Traits<i64> {
	typedef i64 C;
	static __device__ __forceinline__ i64 load(i64 x) { return x; }
	static __device__ __forceinline__ i64 store(i64 c) { return c; }
};

template <class T> struct IsFloat { static const bool value = false; };
template <> struct IsFloat<f32> { static const bool value = true; };
template <> struct IsFloat<f16> { static const bool value = true; };
template <> struct IsFloat<bf16> { static const bool value = true; };
template <> struct IsFloat<f64> { static const bool value = true; };

// Saturating float to integer conversions: truncate toward zero, clamp to
// the range, NaN to 0 (package candle's saturate).
__device__ __forceinline__ double sat_trunc(double v) { return v != v ? 0.0 : trunc(v); }
template <class T> __device__ __forceinline__ T saturate(double v);
template <> __device__ __forceinline__ u8 saturate<u8>(double v) {
	v = sat_trunc(v);
	return v <= 0.0 ? (u8)0 : v >= 255.0 ? (u8)255 : (u8)v;
}
template <> __device__ __forceinline__ u32 saturate<u32>(double v) {
	v = sat_trunc(v);
	return v <= 0.0 ? 0u : v >= 4294967295.0 ? 4294967295u : (u32)v;
}
template <> __device__ __forceinline__ i64 saturate<i64>(double v) {
	v = sat_trunc(v);
	if (v <= -9223372036854775808.0) return (i64)0x8000000000000000ULL;
	if (v >= 9223372036854775808.0) return (i64)0x7fffffffffffffffULL;
	return (i64)v;
}

// to_double and from_double convert through float64 as package candle
// does on the CPU: floats round through float32, integers saturate.
template <class T> __device__ __forceinline__ double to_double(T x) { return (double)Traits<T>::load(x); }
template <class T> __device__ __forceinline__ T from_double(double v) { return Traits<T>::store((typename Traits<T>::C)v); }
template <> __device__ __forceinline__ u8 from_double<u8>(double v) { return saturate<u8>(v); }
template <> __device__ __forceinline__ u32 from_double<u32>(double v) { return saturate<u32>(v); }
template <> __device__ __forceinline__ i64 from_double<i64>(double v) { return saturate<i64>(v); }
template <> __device__ __forceinline__ f16 from_double<f16>(double v) { return __float2half((float)v); }
template <> __device__ __forceinline__ bf16 from_double<bf16>(double v) { return __float2bfloat16((float)v); }

// NaN of a compute type (integers have none).
template <class C> __device__ __forceinline__ bool isnan_(C x) { return x != x; }

// Vec is 16 bytes of T, for aligned vector loads and stores.
template <class T> struct alignas(16) Vec {
	T v[16 / sizeof(T)];
};

// Chunk is N elements of T aligned as a whole, for vector loads of
// operands of different sizes (a cast's, a where's condition).
template <class T, int N> struct alignas(N * sizeof(T)) Chunk {
	T v[N];
};

// copy_row copies n contiguous elements; aligned: both 16-byte aligned.
// The block's threads share the work.
template <class T>
__device__ __forceinline__ void copy_row(const T* s, T* d, u64 n, bool aligned) {
	if (aligned) {
		const int N = 16 / sizeof(T);
		const u64 nv = n / N;
		const Vec<T>* vs = (const Vec<T>*)s;
		Vec<T>* vd = (Vec<T>*)d;
		u64 k = threadIdx.x;
		// Four loads in flight before their stores.
		for (; k + 3 * blockDim.x < nv; k += 4 * blockDim.x) {
			Vec<T> x[4];
#pragma unroll
			for (int u = 0; u < 4; u++) x[u] = vs[k + u * blockDim.x];
#pragma unroll
			for (int u = 0; u < 4; u++) vd[k + u * blockDim.x] = x[u];
		}
		for (; k < nv; k += blockDim.x) vd[k] = vs[k];
		for (k = nv * N + threadIdx.x; k < n; k += blockDim.x) d[k] = s[k];
	} else {
		for (u64 k = threadIdx.x; k < n; k += blockDim.x) d[k] = s[k];
	}
}

// Element types by size, for kernels that only move bytes.
template <int N> struct Bytes;
template <> struct Bytes<1> { typedef u8 T; };
template <> struct Bytes<2> { typedef u16 T; };
template <> struct Bytes<4> { typedef u32 T; };
template <> struct Bytes<8> { typedef u64 T; };

// The instantiation lists: X(name, storage type).
#define RG_FLOAT_TYPES(X) X(f32, f32) X(f16, f16) X(bf16, bf16) X(f64, f64)
#define RG_INT_TYPES(X) X(u8, u8) X(u32, u32) X(i64, i64)
#define RG_ALL_TYPES(X) RG_FLOAT_TYPES(X) RG_INT_TYPES(X)
#define RG_SIZES(X) X(b1, 1) X(b2, 2) X(b4, 4) X(b8, 8)
#define RG_INDEX_TYPES(X) X(u8, u8) X(u32, u32) X(i64, i64)

// philox is Philox4x32-10 (Salmon et al., SC11): counter c becomes four
// random words under key (k0, k1). Package candle's philox is the CPU's.
__device__ __forceinline__ void philox(u32 c[4], u32 k0, u32 k1) {
	for (int r = 0; r < 10; r++) {
		u64 p0 = (u64)0xD2511F53u * c[0], p1 = (u64)0xCD9E8D57u * c[2];
		u32 n0 = (u32)(p1 >> 32) ^ c[1] ^ k0, n2 = (u32)(p0 >> 32) ^ c[3] ^ k1;
		c[0] = n0, c[1] = (u32)p1, c[2] = n2, c[3] = (u32)p0;
		k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
	}
}
