// where(cond, t, f) on operands broadcast to one shape: operand 0 is the
// condition, 1 and 2 the choices. Kernel names: where_<cond dtype>_b<size>.
#include "common.h"

template <class C, class T>
__device__ __forceinline__ void where(const Index& ix, u64 n, const C* cond, const T* t, const T* f, T* out) {
	u64 i = gstart(), step = gstep();
	if (ix.rank == 0 && (ix.flags & 1)) {
		// 16 bytes of each choice per step, and as many conditions.
		constexpr int N = 16 / sizeof(T);
		const u64 nv = n / N;
		for (u64 j = i; j < nv; j += step) {
			Chunk<C, N> c = ((const Chunk<C, N>*)cond)[j];
			Vec<T> a = ((const Vec<T>*)t)[j], b = ((const Vec<T>*)f)[j], y;
#pragma unroll
			for (int k = 0; k < N; k++) y.v[k] = c.v[k] != 0 ? a.v[k] : b.v[k];
			((Vec<T>*)out)[j] = y;
		}
		for (u64 j = nv * N + i; j < n; j += step) out[j] = cond[j] != 0 ? t[j] : f[j];
	} else if (ix.rank == 0) {
		for (; i < n; i += step) out[i] = cond[i] != 0 ? t[i] : f[i];
	} else if (n <= 0xffffffffull) {
		for (; i < n; i += step) {
			u32 k = (u32)i;
			out[i] = cond[offset(ix, 0, k)] != 0 ? t[offset(ix, 1, k)] : f[offset(ix, 2, k)];
		}
	} else {
		for (; i < n; i += step) out[i] = cond[offset(ix, 0, i)] != 0 ? t[offset(ix, 1, i)] : f[offset(ix, 2, i)];
	}
}
#define RG_WHERE(cname, C, name, N)                                                                      \
	RG_KERNEL where_##cname##_##name(const Index ix, u64 n, const C* cond, const Bytes<N>::T* t,        \
	                                 const Bytes<N>::T* f, Bytes<N>::T* out) { RG_GRID_WAIT();           \
		where(ix, n, cond, t, f, out);                                                                   \
	}
#define RG_WHERE_SIZES(cname, C) RG_WHERE(cname, C, b1, 1) RG_WHERE(cname, C, b2, 2) RG_WHERE(cname, C, b4, 4) RG_WHERE(cname, C, b8, 8)
RG_INDEX_TYPES(RG_WHERE_SIZES)
