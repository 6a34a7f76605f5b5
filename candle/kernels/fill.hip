// Filling: a value into a (strided) view, arange, and random numbers from
// Philox4x32-10, as package candle's CPU device computes them. Kernel
// names: fill_b<size> (the value's bits), arange_<dtype>,
// rand_uniform_<dtype>, rand_normal_<dtype>.
#include "common.h"

template <class T>
__device__ __forceinline__ void fill(const Index& ix, u64 n, T* out, T v) {
	u64 i = gstart(), step = gstep();
	if (ix.rank == 0) {
		for (; i < n; i += step) out[i] = v;
	} else if (n <= 0xffffffffull) {
		for (; i < n; i += step) out[offset(ix, 0, (u32)i)] = v;
	} else {
		for (; i < n; i += step) out[offset(ix, 0, i)] = v;
	}
}
#define RG_FILL(name, N) \
	RG_KERNEL fill_##name(const Index ix, u64 n, Bytes<N>::T* out, u64 bits) { RG_GRID_WAIT(); fill(ix, n, out, (Bytes<N>::T)bits); }
RG_SIZES(RG_FILL)

#define RG_ARANGE(name, T)                                                 \
	RG_KERNEL arange_##name(u64 n, T* out, double start, double step) { RG_GRID_WAIT(); \
		for (u64 i = gstart(); i < n; i += gstep()) out[i] = from_double<T>(__dadd_rn(start, __dmul_rn((double)i, step))); \
	}
RG_ALL_TYPES(RG_ARANGE)

// random is element counter of seed's stream: uniform in [a, b), or normal
// (Box-Muller) with mean a and deviation b, in double.
template <bool Double>
__device__ __forceinline__ double random(bool normal, double a, double b, u64 seed, u64 counter) {
	u32 c[4] = {(u32)counter, (u32)(counter >> 32), 0, 0};
	philox(c, (u32)seed, (u32)(seed >> 32));
	double u1, u2;
	if (Double) {
		u1 = (double)((((u64)c[0] << 32) | c[1]) >> 11) * 0x1p-53;
		u2 = (double)((((u64)c[2] << 32) | c[3]) >> 11) * 0x1p-53;
	} else {
		u1 = (double)(c[0] >> 8) * 0x1p-24;
		u2 = (double)(c[1] >> 8) * 0x1p-24;
	}
	// Every step rounds (no fused multiply-adds), as on the CPU.
	if (!normal) return __dadd_rn(a, __dmul_rn(b - a, u1));
	u1 += Double ? 0x1p-53 : 0x1p-24;
	double r = sqrt(__dmul_rn(-2.0, log(u1)));
	return __dadd_rn(a, __dmul_rn(__dmul_rn(b, r), cos(__dmul_rn(6.283185307179586, u2))));
}

#define RG_RAND(name, T, dbl)                                                                            \
	RG_KERNEL rand_uniform_##name(u64 n, T* out, double a, double b, u64 seed, u64 off) { RG_GRID_WAIT(); \
		for (u64 i = gstart(); i < n; i += gstep()) out[i] = from_double<T>(random<dbl>(false, a, b, seed, off + i)); \
	}                                                                                                    \
	RG_KERNEL rand_normal_##name(u64 n, T* out, double a, double b, u64 seed, u64 off) { RG_GRID_WAIT();  \
		for (u64 i = gstart(); i < n; i += gstep()) out[i] = from_double<T>(random<dbl>(true, a, b, seed, off + i)); \
	}
RG_RAND(f32, f32, false)
RG_RAND(f16, f16, false)
RG_RAND(bf16, bf16, false)
RG_RAND(f64, f64, true)
