// Reductions over the trailing dims of a view: each output reduces `inner`
// elements. `outer` walks the outputs (operand 0: the input's offset of an
// output's first element); `red` walks the elements of one output (operand
// 0: their offsets from it; rank 0 when they are contiguous, flags bit 0
// when every row is then 16-byte aligned). Mode 0: a
// block per output (large inner); mode 1: a thread per output. Sums of
// 16- and 32-bit floats accumulate in float, of f64 in double, of integers
// in their compute type (wrapping); min and max propagate NaN; argmin and
// argmax keep the first extreme (or NaN). Kernel names: <op>_<dtype> for
// sum, min, max, argmin and argmax.
#include "common.h"

// Val is a running result: a value in the compute type, and for the arg
// ops the index within the output's elements.
template <class C> struct Val {
	C v;
	u32 i;
};

template <class C> __device__ __forceinline__ C lowest_(C) { return -__int_as_float(0x7f800000); }
__device__ __forceinline__ double lowest_(double) { return -__longlong_as_double(0x7ff0000000000000LL); }
__device__ __forceinline__ i64 lowest_(i64) { return (i64)0x8000000000000000ULL; }
__device__ __forceinline__ u64 lowest_(u64) { return 0; }
template <class C> __device__ __forceinline__ C highest_(C) { return __int_as_float(0x7f800000); }
__device__ __forceinline__ double highest_(double) { return __longlong_as_double(0x7ff0000000000000LL); }
__device__ __forceinline__ i64 highest_(i64) { return (i64)0x7fffffffffffffffULL; }
__device__ __forceinline__ u64 highest_(u64) { return ~0ULL; }

// The ops: an identity and a combination, which for min, max and the arg
// ops keeps the earlier of two equal values (and the first NaN); and step,
// the combination with an element that comes after every one in a, as a
// thread's own elements do (fewer tests in the loops over memory).
struct Sum {
	template <class C> static __device__ __forceinline__ Val<C> identity() { return {C(0), 0}; }
	template <class C> static __device__ __forceinline__ Val<C> combine(Val<C> a, Val<C> b) { return {a.v + b.v, 0}; }
	template <class C> static __device__ __forceinline__ void step(Val<C>& a, C x, u32) { a.v += x; }
};
template <bool Max> struct Extreme {
	template <class C> static __device__ __forceinline__ Val<C> identity() {
		return {Max ? lowest_(C()) : highest_(C()), 0xffffffffu};
	}
	template <class C> static __device__ __forceinline__ Val<C> combine(Val<C> a, Val<C> b) {
		if (b.i == 0xffffffffu) return a; // b is the identity
		if (a.i == 0xffffffffu) return b;
		bool an = isnan_(a.v), bn = isnan_(b.v);
		if (an || bn) return an && (!bn || a.i < b.i) ? a : b;
		if (a.v == b.v) return a.i < b.i ? a : b;
		return (Max ? a.v > b.v : a.v < b.v) ? a : b;
	}
	template <class C> static __device__ __forceinline__ void step(Val<C>& a, C x, u32 i) {
		const bool take = (a.i == 0xffffffffu) | (!isnan_(a.v) & (isnan_(x) | (Max ? x > a.v : x < a.v)));
		a.v = take ? x : a.v;
		a.i = take ? i : a.i;
	}
};

template <class C> __device__ __forceinline__ C shfl_xor_(C v, int m) { return __shfl_xor(v, m); }
__device__ __forceinline__ u64 shfl_xor_(u64 v, int m) { return (u64)__shfl_xor((long long)v, m); }
__device__ __forceinline__ i64 shfl_xor_(i64 v, int m) { return (i64)__shfl_xor((long long)v, m); }
__device__ __forceinline__ u32 shfl_xor_(u32 v, int m) { return (u32)__shfl_xor((int)v, m); }

template <class Op, class C> __device__ __forceinline__ Val<C> warp_reduce(Val<C> a) {
	for (int m = RG_WARP / 2; m > 0; m >>= 1) {
		Val<C> b = {shfl_xor_(a.v, m), shfl_xor_(a.i, m)};
		a = Op::combine(a, b);
	}
	return a;
}

// block_reduce combines the block's values; thread 0 gets the result.
template <class Op, class C> __device__ __forceinline__ Val<C> block_reduce(Val<C> a) {
	__shared__ C vs[RG_BLOCK / 16]; // enough for warps of 16 and up
	__shared__ u32 is[RG_BLOCK / 16];
	a = warp_reduce<Op>(a);
	const int lane = threadIdx.x % RG_WARP, w = threadIdx.x / RG_WARP, nw = (blockDim.x + RG_WARP - 1) / RG_WARP;
	__syncthreads(); // the shared buffer is reused for the next output
	if (lane == 0) vs[w] = a.v, is[w] = a.i;
	__syncthreads();
	if (w == 0) {
		a = lane < nw ? Val<C>{vs[lane], is[lane]} : Op::template identity<C>();
		a = warp_reduce<Op>(a);
	}
	return a;
}

template <class T, class Op, bool Arg>
__device__ __forceinline__ void reduce(const Index& outer, const Index& red, u64 nout, u64 inner, int mode, double scale,
                                       const T* in, void* out) {
	typedef typename Traits<T>::C C;
	if (mode == 0) {
		for (u64 j = blockIdx.x; j < nout; j += gridDim.x) {
			const T* row = in + offset(outer, 0, j);
			Val<C> acc = Op::template identity<C>();
			if (red.rank == 0 && (red.flags & 1)) {
				// A contiguous, aligned row: 16-byte vector loads.
				const int N = 16 / sizeof(T);
				const u64 nv = inner / N;
				for (u64 v = threadIdx.x; v < nv; v += blockDim.x) {
					Vec<T> x = ((const Vec<T>*)row)[v];
#pragma unroll
					for (int k = 0; k < N; k++) Op::step(acc, Traits<T>::load(x.v[k]), (u32)(v * N + k));
				}
				for (u64 k = nv * N + threadIdx.x; k < inner; k += blockDim.x) Op::step(acc, Traits<T>::load(row[k]), (u32)k);
			} else if (red.rank == 0) {
				for (u64 k = threadIdx.x; k < inner; k += blockDim.x) Op::step(acc, Traits<T>::load(row[k]), (u32)k);
			} else {
				for (u64 k = threadIdx.x; k < inner; k += blockDim.x) Op::step(acc, Traits<T>::load(row[offset(red, 0, k)]), (u32)k);
			}
			acc = block_reduce<Op>(acc);
			if (threadIdx.x == 0) {
				if (Arg) ((u32*)out)[j] = acc.i;
				else if (IsFloat<T>::value) ((T*)out)[j] = Traits<T>::store(acc.v * (C)scale);
				else ((T*)out)[j] = Traits<T>::store(acc.v);
			}
		}
	} else {
		for (u64 j = gstart(); j < nout; j += gstep()) {
			const T* row = in + offset(outer, 0, j);
			Val<C> acc = Op::template identity<C>();
			for (u64 k = 0; k < inner; k++) {
				i64 o = red.rank == 0 ? (i64)k : offset(red, 0, k);
				Op::step(acc, Traits<T>::load(row[o]), (u32)k);
			}
			if (Arg) ((u32*)out)[j] = acc.i;
			else if (IsFloat<T>::value) ((T*)out)[j] = Traits<T>::store(acc.v * (C)scale);
			else ((T*)out)[j] = Traits<T>::store(acc.v);
		}
	}
}

#define RG_REDUCE(name, Op, arg, tname, T)                                                                  \
	RG_KERNEL name##_##tname(const Index outer, const Index red, u64 nout, u64 inner, int mode, double scale, \
	                         const T* in, void* out) { RG_GRID_WAIT();                                       \
		reduce<T, Op, arg>(outer, red, nout, inner, mode, scale, in, out);                                   \
	}
#define RG_REDUCE_TYPES(name, Op, arg)                                                                      \
	RG_REDUCE(name, Op, arg, f32, f32) RG_REDUCE(name, Op, arg, f16, f16) RG_REDUCE(name, Op, arg, bf16, bf16) \
	RG_REDUCE(name, Op, arg, f64, f64) RG_REDUCE(name, Op, arg, u8, u8) RG_REDUCE(name, Op, arg, u32, u32)    \
	RG_REDUCE(name, Op, arg, i64, i64)
RG_REDUCE_TYPES(sum, Sum, false)
RG_REDUCE_TYPES(min, Extreme<false>, false)
RG_REDUCE_TYPES(max, Extreme<true>, false)
RG_REDUCE_TYPES(argmin, Extreme<false>, true)
RG_REDUCE_TYPES(argmax, Extreme<true>, true)
