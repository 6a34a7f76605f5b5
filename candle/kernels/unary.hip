// Elementwise unary ops: out[i] = op(in[i]) in the compute type (float for
// 16- and 32-bit floats, double for f64, the integer itself for integers;
// clamp and affine on integers compute in double and saturate back).
// Kernel names: <op>_<dtype>.
#include "common.h"

#define RG_MATH1(name, f32fn, f64fn)                                             \
	__device__ __forceinline__ float name(float x) { return f32fn(x); }      \
	__device__ __forceinline__ double name(double x) { return f64fn(x); }
RG_MATH1(m_exp, expf, exp)
RG_MATH1(m_expm1, expm1f, expm1)
RG_MATH1(m_log, logf, log)
RG_MATH1(m_sin, sinf, sin)
RG_MATH1(m_cos, cosf, cos)
RG_MATH1(m_tanh, tanhf, tanh)
RG_MATH1(m_erf, erff, erf)
RG_MATH1(m_ceil, ceilf, ceil)
RG_MATH1(m_floor, floorf, floor)
RG_MATH1(m_round, roundf, round)
RG_MATH1(m_abs, fabsf, fabs)
RG_MATH1(m_sqrt, sqrtf, sqrt)
__device__ __forceinline__ float m_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double m_pow(double x, double y) { return pow(x, y); }
__device__ __forceinline__ i64 m_abs(i64 x) { return x < 0 ? (i64)(0ull - (u64)x) : x; }
// Integers: ceil, floor and round leave them as they are.
__device__ __forceinline__ i64 m_ceil(i64 x) { return x; }
__device__ __forceinline__ u64 m_ceil(u64 x) { return x; }
__device__ __forceinline__ i64 m_floor(i64 x) { return x; }
__device__ __forceinline__ u64 m_floor(u64 x) { return x; }
__device__ __forceinline__ i64 m_round(i64 x) { return x; }
__device__ __forceinline__ u64 m_round(u64 x) { return x; }

// The ops: a functor of the compute type C and the two parameters.
#define RG_OP(Name, expr) \
	struct Name { template <class C> __device__ __forceinline__ C operator()(C x, C p0, C p1) const { return expr; } };
RG_OP(OpNeg, -x)
RG_OP(OpRecip, C(1) / x)
RG_OP(OpExp, m_exp(x))
RG_OP(OpLog, m_log(x))
RG_OP(OpSin, m_sin(x))
RG_OP(OpCos, m_cos(x))
RG_OP(OpTanh, m_tanh(x))
RG_OP(OpErf, m_erf(x))
RG_OP(OpCeil, m_ceil(x))
RG_OP(OpFloor, m_floor(x))
RG_OP(OpRound, m_round(x))
RG_OP(OpAbs, m_abs(x))
RG_OP(OpSqr, x * x)
RG_OP(OpSqrt, m_sqrt(x))
RG_OP(OpGelu, C(0.5) * x * (C(1) + m_tanh(C(0.7978845608028654) * (x + C(0.044715) * x * x * x))))
RG_OP(OpGeluErf, C(0.5) * x * (C(1) + m_erf(x * C(0.7071067811865476))))
RG_OP(OpRelu, x > C(0) ? x : C(0))
RG_OP(OpSilu, x / (C(1) + m_exp(-x)))
RG_OP(OpSigmoid, C(1) / (C(1) + m_exp(-x)))
RG_OP(OpSign, C(x > C(0)) - C(x < C(0)))
RG_OP(OpNormCDF, C(0.5) * (C(1) + m_erf(x * C(0.7071067811865476))))
RG_OP(OpElu, x >= C(0) ? x : p0 * m_expm1(x))
RG_OP(OpPowf, m_pow(x, p0))
RG_OP(OpClamp, x < p0 ? p0 : (x > p1 ? p1 : x))
RG_OP(OpAffine, x * p0 + p1)

// Compute is how T computes op Op: in its compute type, or (clamp and
// affine on integers) in double, saturating back.
template <class T, class Op, bool ViaDouble> struct Compute {
	typedef typename Traits<T>::C C;
	C p0, p1;
	__device__ Compute(double a, double b) : p0((C)a), p1((C)b) {}
	__device__ __forceinline__ T operator()(T x) const { return Traits<T>::store(Op()(Traits<T>::load(x), p0, p1)); }
};
template <class T, class Op> struct Compute<T, Op, true> {
	double p0, p1;
	__device__ Compute(double a, double b) : p0(a), p1(b) {}
	__device__ __forceinline__ T operator()(T x) const { return from_double<T>(Op()(to_double(x), p0, p1)); }
};

template <class T, class Op, bool ViaDouble>
__device__ __forceinline__ void unary(const Index& ix, u64 n, const T* in, T* out, double p0, double p1) {
	const Compute<T, Op, ViaDouble> f(p0, p1);
	u64 i = gstart(), step = gstep();
	if (ix.rank == 0 && (ix.flags & 1)) {
		// Two 16-byte vectors per thread and step, both loads in flight.
		const int N = 16 / sizeof(T);
		const u64 nv = n / N, half = (nv + 1) / 2;
		for (u64 j = i; j < half; j += step) {
			const u64 j2 = j + half;
			Vec<T> x = ((const Vec<T>*)in)[j], x2, y, y2;
			if (j2 < nv) x2 = ((const Vec<T>*)in)[j2];
#pragma unroll
			for (int k = 0; k < N; k++) y.v[k] = f(x.v[k]);
			((Vec<T>*)out)[j] = y;
			if (j2 < nv) {
#pragma unroll
				for (int k = 0; k < N; k++) y2.v[k] = f(x2.v[k]);
				((Vec<T>*)out)[j2] = y2;
			}
		}
		for (u64 j = nv * N + i; j < n; j += step) out[j] = f(in[j]);
	} else if (ix.rank == 0) {
		for (; i < n; i += step) out[i] = f(in[i]);
	} else if (n <= 0xffffffffull) {
		for (; i < n; i += step) out[i] = f(in[offset(ix, 0, (u32)i)]);
	} else {
		for (; i < n; i += step) out[i] = f(in[offset(ix, 0, i)]);
	}
}

#define RG_UNARY(name, Op, tname, T, via)                                                               \
	RG_KERNEL name##_##tname(const Index ix, u64 n, const T* in, T* out, double p0, double p1) { RG_GRID_WAIT(); \
		unary<T, Op, via>(ix, n, in, out, p0, p1);                                                  \
	}
#define RG_FLOAT_OP(name, Op) \
	RG_UNARY(name, Op, f32, f32, false) RG_UNARY(name, Op, f16, f16, false) RG_UNARY(name, Op, bf16, bf16, false) RG_UNARY(name, Op, f64, f64, false)
#define RG_ANY_OP(name, Op)                                                                                  \
	RG_FLOAT_OP(name, Op) RG_UNARY(name, Op, u8, u8, false) RG_UNARY(name, Op, u32, u32, false)          \
	RG_UNARY(name, Op, i64, i64, false)
#define RG_DOUBLE_OP(name, Op)                                                                               \
	RG_FLOAT_OP(name, Op) RG_UNARY(name, Op, u8, u8, true) RG_UNARY(name, Op, u32, u32, true)            \
	RG_UNARY(name, Op, i64, i64, true)
#define RG_SIGNED_OP(name, Op) RG_FLOAT_OP(name, Op) RG_UNARY(name, Op, i64, i64, false)

RG_SIGNED_OP(neg, OpNeg)
RG_FLOAT_OP(recip, OpRecip)
RG_FLOAT_OP(exp, OpExp)
RG_FLOAT_OP(log, OpLog)
RG_FLOAT_OP(sin, OpSin)
RG_FLOAT_OP(cos, OpCos)
RG_FLOAT_OP(tanh, OpTanh)
RG_FLOAT_OP(erf, OpErf)
RG_ANY_OP(ceil, OpCeil)
RG_ANY_OP(floor, OpFloor)
RG_ANY_OP(round, OpRound)
RG_SIGNED_OP(abs, OpAbs)
RG_ANY_OP(sqr, OpSqr)
RG_FLOAT_OP(sqrt, OpSqrt)
RG_FLOAT_OP(gelu, OpGelu)
RG_FLOAT_OP(gelu_erf, OpGeluErf)
RG_ANY_OP(relu, OpRelu)
RG_FLOAT_OP(silu, OpSilu)
RG_FLOAT_OP(sigmoid, OpSigmoid)
RG_SIGNED_OP(sign, OpSign)
RG_FLOAT_OP(normcdf, OpNormCDF)
RG_FLOAT_OP(elu, OpElu)
RG_FLOAT_OP(powf, OpPowf)
RG_DOUBLE_OP(clamp, OpClamp)
RG_DOUBLE_OP(affine, OpAffine)
