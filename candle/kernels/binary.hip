// Elementwise binary ops on operands broadcast to one shape: arithmetic in
// the compute type, comparisons to u8. Kernel names: <op>_<dtype>.
#include "common.h"

__device__ __forceinline__ float b_div(float a, float b) { return a / b; }
__device__ __forceinline__ double b_div(double a, double b) { return a / b; }
__device__ __forceinline__ u64 b_div(u64 a, u64 b) { return b == 0 ? 0 : a / b; }
__device__ __forceinline__ i64 b_div(i64 a, i64 b) { return b == 0 ? 0 : b == -1 ? (i64)(0ull - (u64)a) : a / b; }
template <class C> __device__ __forceinline__ C b_max(C a, C b) {
	if (isnan_(a) || isnan_(b)) return a + b; // NaN propagates
	return a > b ? a : b;
}
template <class C> __device__ __forceinline__ C b_min(C a, C b) {
	if (isnan_(a) || isnan_(b)) return a + b;
	return a < b ? a : b;
}

#define RG_OP(Name, R, expr) \
	struct Name { template <class C> __device__ __forceinline__ R operator()(C a, C b) const { return expr; } };
RG_OP(OpAdd, C, a + b)
RG_OP(OpSub, C, a - b)
RG_OP(OpMul, C, a * b)
RG_OP(OpDiv, C, b_div(a, b))
RG_OP(OpMaximum, C, b_max(a, b))
RG_OP(OpMinimum, C, b_min(a, b))
RG_OP(OpEq, bool, a == b)
RG_OP(OpNe, bool, a != b)
RG_OP(OpLt, bool, a < b)
RG_OP(OpLe, bool, a <= b)
RG_OP(OpGt, bool, a > b)
RG_OP(OpGe, bool, a >= b)

template <class T> __device__ __forceinline__ T out_of(typename Traits<T>::C c, T*) { return Traits<T>::store(c); }
__device__ __forceinline__ u8 out_of(bool c, u8*) { return c ? 1 : 0; }

template <class T, class O, class Op>
__device__ __forceinline__ void binary(const Index& ix, u64 n, const T* a, const T* b, O* out) {
	typedef Traits<T> Tr;
	Op op;
	u64 i = gstart(), step = gstep();
	if (ix.rank == 0 && (ix.flags & 1) && sizeof(O) == sizeof(T)) {
		// Two 16-byte vectors of each operand per thread and step.
		const int N = 16 / sizeof(T);
		const u64 nv = n / N, half = (nv + 1) / 2;
		for (u64 j = i; j < half; j += step) {
			const u64 j2 = j + half;
			const bool two = j2 < nv;
			Vec<T> x = ((const Vec<T>*)a)[j], y = ((const Vec<T>*)b)[j], x2, y2;
			if (two) x2 = ((const Vec<T>*)a)[j2], y2 = ((const Vec<T>*)b)[j2];
			Vec<O> z, z2;
#pragma unroll
			for (int k = 0; k < N; k++) z.v[k] = out_of(op(Tr::load(x.v[k]), Tr::load(y.v[k])), (O*)0);
			((Vec<O>*)out)[j] = z;
			if (two) {
#pragma unroll
				for (int k = 0; k < N; k++) z2.v[k] = out_of(op(Tr::load(x2.v[k]), Tr::load(y2.v[k])), (O*)0);
				((Vec<O>*)out)[j2] = z2;
			}
		}
		for (u64 j = nv * N + i; j < n; j += step) out[j] = out_of(op(Tr::load(a[j]), Tr::load(b[j])), (O*)0);
	} else if (ix.rank == 0) {
		for (; i < n; i += step) out[i] = out_of(op(Tr::load(a[i]), Tr::load(b[i])), (O*)0);
	} else if (n <= 0xffffffffull) {
		for (; i < n; i += step) out[i] = out_of(op(Tr::load(a[offset(ix, 0, (u32)i)]), Tr::load(b[offset(ix, 1, (u32)i)])), (O*)0);
	} else {
		for (; i < n; i += step) out[i] = out_of(op(Tr::load(a[offset(ix, 0, i)]), Tr::load(b[offset(ix, 1, i)])), (O*)0);
	}
}

#define RG_BINARY(name, Op, O, tname, T) \
	RG_KERNEL name##_##tname(const Index ix, u64 n, const T* a, const T* b, O* out) { RG_GRID_WAIT(); binary<T, O, Op>(ix, n, a, b, out); }
#define RG_ARITH(name, Op)                                                                                    \
	RG_BINARY(name, Op, f32, f32, f32) RG_BINARY(name, Op, f16, f16, f16) RG_BINARY(name, Op, bf16, bf16, bf16)  \
	RG_BINARY(name, Op, f64, f64, f64) RG_BINARY(name, Op, u8, u8, u8) RG_BINARY(name, Op, u32, u32, u32)        \
	RG_BINARY(name, Op, i64, i64, i64)
#define RG_CMP(name, Op)                                                                                      \
	RG_BINARY(name, Op, u8, f32, f32) RG_BINARY(name, Op, u8, f16, f16) RG_BINARY(name, Op, u8, bf16, bf16)       \
	RG_BINARY(name, Op, u8, f64, f64) RG_BINARY(name, Op, u8, u8, u8) RG_BINARY(name, Op, u8, u32, u32)           \
	RG_BINARY(name, Op, u8, i64, i64)

RG_ARITH(add, OpAdd)
RG_ARITH(sub, OpSub)
RG_ARITH(mul, OpMul)
RG_ARITH(div, OpDiv)
RG_ARITH(maximum, OpMaximum)
RG_ARITH(minimum, OpMinimum)
RG_CMP(eq, OpEq)
RG_CMP(ne, OpNe)
RG_CMP(lt, OpLt)
RG_CMP(le, OpLe)
RG_CMP(gt, OpGt)
RG_CMP(ge, OpGe)
