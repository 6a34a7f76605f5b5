// Conversions between every pair of dtypes, as package candle's CPU device
// does them: through double (floats rounding through float), floats to
// integers truncated and saturated, integers to integers wrapping. Kernel
// names: cast_<from>_<to>.
#include "common.h"

template <class S, class D> __device__ __forceinline__ D convert(S x) {
	if constexpr (!IsFloat<S>::value && !IsFloat<D>::value) {
		return (D)Traits<S>::load(x);
	} else {
		return from_double<D>(to_double(x));
	}
}

template <class S, class D>
__device__ __forceinline__ void cast(const Index& ix, u64 n, const S* in, D* out) {
	u64 i = gstart(), step = gstep();
	if (ix.rank == 0 && (ix.flags & 1)) {
		// 16 bytes of the wider type per step; both sides aligned to their
		// chunk.
		constexpr int N = 16 / (sizeof(S) > sizeof(D) ? sizeof(S) : sizeof(D));
		const u64 nv = n / N;
		for (u64 j = i; j < nv; j += step) {
			Chunk<S, N> x = ((const Chunk<S, N>*)in)[j];
			Chunk<D, N> y;
#pragma unroll
			for (int k = 0; k < N; k++) y.v[k] = convert<S, D>(x.v[k]);
			((Chunk<D, N>*)out)[j] = y;
		}
		for (u64 j = nv * N + i; j < n; j += step) out[j] = convert<S, D>(in[j]);
	} else if (ix.rank == 0) {
		for (; i < n; i += step) out[i] = convert<S, D>(in[i]);
	} else if (n <= 0xffffffffull) {
		for (; i < n; i += step) out[i] = convert<S, D>(in[offset(ix, 0, (u32)i)]);
	} else {
		for (; i < n; i += step) out[i] = convert<S, D>(in[offset(ix, 0, i)]);
	}
}

#define RG_CAST(sname, S, dname, D) \
	RG_KERNEL cast_##sname##_##dname(const Index ix, u64 n, const S* in, D* out) { RG_GRID_WAIT(); cast<S, D>(ix, n, in, out); }
#define RG_CAST_FROM(sname, S)                                                                              \
	RG_CAST(sname, S, f32, f32) RG_CAST(sname, S, f16, f16) RG_CAST(sname, S, bf16, bf16)                   \
	RG_CAST(sname, S, f64, f64) RG_CAST(sname, S, u8, u8) RG_CAST(sname, S, u32, u32) RG_CAST(sname, S, i64, i64)
RG_ALL_TYPES(RG_CAST_FROM)
