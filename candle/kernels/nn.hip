// The fused kernels of neural networks, each one pass over memory, on
// contiguous rows, math in float for f32, f16 and bf16:
//   softmax_<dt>     softmax or log-softmax over the last dim
//   softmax_full_<dt> softmax of rows that fill the block exactly (the host checks)
//   rms_norm_<dt>    x / sqrt(mean(x²) + eps) · alpha
//   layer_norm_<dt>  (x - mean) / sqrt(var + eps) · alpha + beta (beta may be null)
//   group_norm_<dt>  layer_norm of each (n, group) row of an (N, C, spatial...)
//                    tensor, the affine index the channel of the column, then
//                    optionally silu (x · sigmoid(x)) in the same write
//   group_stats_<dt>, group_apply_<dt>  group_norm of rows longer than a block
//                    holds: each chunk's mean and squared deviations, then
//                    the output, both a block a chunk (see group_stats)
//   rope_<dt>        rotary embeddings, half-split or interleaved, (b, h, t, d) or (b, t, h, d)
//   rope_cache_<dt>  a decoder layer's rope of q and k and its writes of k and v into a KV cache
//   silu_mul_<dt>    silu(a) · b
//   geglu_<dt>       x[..., :n] · gelu_erf(x[..., n:]) of rows of 2n
// A block takes a row. The host sizes the block to the row (PER elements a
// thread, up to 256 threads; group_norm's long rows up to 1024 threads of 8),
// so that a row of up to 8192 elements stays in registers between the
// passes (one read of memory); a longer row is read again for each pass.
// Many elements a thread and small blocks, one row each, measured fastest
// on an H100 (softmax of 16384x4096 f16: 512 threads of 8 elements that
// load their next row while they reduce, 260 us; 128 threads of 32, one
// row a block, 94 us, the speed of a copy): each thread has four 16-byte
// loads in flight, and the many small blocks of an SM hide each other's
// barriers.
#include "common.h"

#define NN_PER 32
#define NN_BLOCK 256
#define NN_KERNEL extern "C" __global__ __launch_bounds__(NN_BLOCK) void
// softmax_full, rms_norm and layer_norm of 2-byte types with at least four
// blocks an SM on NVIDIA (64 registers on sm_90), for the loads in flight
// that an H200 needs: unbounded, layer_norm_f16 of 16384x4096 took 124
// registers and ran at 0.62 of a copy there, 0.89 so; rms_norm_f16 80
// registers and 0.955, 0.98 so. (A float row needs its registers. On AMD
// the second bound counts waves an execution unit, and gfx942 spilled
// under it.)
#if defined(__HIP_PLATFORM_NVIDIA__)
#define NN16_KERNEL(T) extern "C" __global__ __launch_bounds__(NN_BLOCK, sizeof(T) == 2 ? 4 : 1) void
#else
#define NN16_KERNEL(T) NN_KERNEL
#endif
#define GN_PER 8
#define GN_BLOCK 1024
#define GN_KERNEL extern "C" __global__ __launch_bounds__(GN_BLOCK) void

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
// nanmax is fmaxf that keeps a NaN, as softmax of a row with one must.
// (Selects, not branches: a branch around each element serialised the
// row's loads.)
__device__ __forceinline__ float nanmax(float a, float b) {
	const float m = fmaxf(a, b);
	return (a != a) | (b != b) ? a + b : m;
}

// silu_f is x · sigmoid(x) (silu_mul, group_norm's act).
__device__ __forceinline__ float silu_f(float v) { return v / (1.0f + expf(-v)); }

// RowExp is exp(v - m) for a row whose maximum is m. For 2-byte types it
// is one fma and one exp2: expf's accurate sequence made softmax_f16 of
// 16384x4096 compute-bound on an H200 (0.76 of a copy with two expf an
// element; 0.94 with one exp2 an element, kept in registers for the
// output), and the two differ by 4e-6, far below a half's rounding.
// Float rows keep expf. (A NaN or infinite m gives NaN either way.)
template <class T> struct RowExp {
	float m, ml;
	__device__ __forceinline__ explicit RowExp(float max) : m(max), ml(max * 1.4426950408889634f) {}
	__device__ __forceinline__ float operator()(float v) const {
		return sizeof(T) == 2 ? exp2f(fmaf(v, 1.4426950408889634f, -ml)) : expf(v - m);
	}
};

// The statistics that rows reduce to: sums, and maxima that keep a NaN.
// (One reduction of softmax's max with its sum of exponentials, combined
// online, and one of Welford's moments for layer_norm, both measured
// slower on an H100 than two reductions of plain floats: the expf and the
// divisions of their combinations cost more than a pair of barriers.)
__device__ __forceinline__ float combine(float a, float b) { return a + b; }
__device__ __forceinline__ float shfl(float a, int m) { return __shfl_xor(a, m); }

struct Max {
	float v;
};
__device__ __forceinline__ Max combine(Max a, Max b) { return {nanmax(a.v, b.v)}; }
__device__ __forceinline__ Max shfl(Max a, int m) { return {__shfl_xor(a.v, m)}; }

// block_reduce combines a value over the block; every thread gets the
// result. Any warp size: each warp combines its lanes, then every warp
// combines the warps' partials in part, a shared buffer of GN_BLOCK/16. The
// caller makes sure no thread still reads part from an earlier call (a
// barrier between calls that share it).
// TH is the block's size when the kernel knows it (0: blockDim.x).
template <class V, int TH = 0> __device__ __forceinline__ V block_reduce(V v, V identity, V* part) {
	for (int m = RG_WARP / 2; m > 0; m >>= 1) v = combine(v, shfl(v, m));
	const int lane = threadIdx.x % RG_WARP, w = threadIdx.x / RG_WARP, nw = ((TH ? TH : blockDim.x) + RG_WARP - 1) / RG_WARP;
	if (lane == 0) part[w] = v;
	__syncthreads();
	v = identity;
	for (int i = lane; i < nw; i += RG_WARP) v = combine(v, part[i]);
	for (int m = RG_WARP / 2; m > 0; m >>= 1) v = combine(v, shfl(v, m));
	return v;
}
template <int TH = 0> __device__ __forceinline__ float block_sum(float v, float* part) { return block_reduce<float, TH>(v, 0.0f, part); }
template <int TH = 0> __device__ __forceinline__ float block_max(float v, float* part) {
	return block_reduce<Max, TH>(Max{v}, Max{neg_inf()}, (Max*)part).v;
}

// A row in registers, packed: each thread holds its chunks of the row as
// loaded (16-byte vectors of T), converted to float in each pass, so a row
// of f16 or bf16 takes half the registers of a float row. (Held as floats,
// layer_norm_f16 took 113 registers and ran at 0.78 of a copy on an H100;
// packed, 80 registers and 0.98.) Slot j of a thread is element col(j),
// valid when bit j of mask is set. Only vector rows (16-byte aligned, cols
// a multiple of N) are held: chunk c of a thread is the N elements from
// (c·blockDim.x + thread)·N. Rows held here are shorter than 2³²: 32-bit
// index math, and the valid slots known once per kernel. (An element-wise
// path for other rows, in the same kernel, made the compiler keep its
// addresses across rows: 146 registers a thread instead of 64 for
// softmax_f16 on gfx942, 113 on sm_90, and a third of the occupancy; other
// rows take the loop instead.)
template <class T, int PER, bool Full = false, int TH = 0> struct Row {
	static_assert(PER <= 32, "one bit of mask a slot");
	static const int N = 16 / sizeof(T), C = PER / N;
	Vec<T> x[C];
	u32 mask;

	__device__ __forceinline__ u32 col(int j) const { return ((u32)(j / N) * (TH ? TH : blockDim.x) + threadIdx.x) * N + j % N; }
	// Full: the row fills every slot of the block (the common case, which
	// runs without the masks: softmax_f16 of 16384x4096 took 1.37x as long
	// with them on an H100).
	__device__ __forceinline__ bool ok(int j) const { return Full || ((mask >> j) & 1); }
	__device__ __forceinline__ void init(u32 cols) {
		mask = 0;
#pragma unroll
		for (int j = 0; j < PER; j++)
			if (col(j) < cols) mask |= 1u << j;
	}
	// at is chunk c's column, or 0 for a chunk past the row's end, so that
	// the loads need no branch around them (a branch around each made the
	// compiler wait for each load in turn); the padding is chosen after.
	__device__ __forceinline__ u32 at(int c) const { return ok(c * N) ? col(c * N) : 0; }
	__device__ __forceinline__ void load(const T* p) {
#pragma unroll
		for (int c = 0; c < C; c++) x[c] = *(const Vec<T>*)(p + at(c));
	}
	// get is slot j as a float, pad past the row's end.
	__device__ __forceinline__ float get(int j, float pad) const { return ok(j) ? Traits<T>::load(x[j / N].v[j % N]) : pad; }
	// The kernels write their outputs in loops of their own: lambdas
	// passed here made the H100's softmax and layer_norm 1.3-1.7x slower
	// (as if the row had left the registers).
};

__device__ __forceinline__ bool aligned16(const void* p) { return ((u64)p & 15) == 0; }

template <class T> __device__ __forceinline__ bool vec_rows(u64 cols, const void* a, const void* b, const void* c, const void* d) {
	return cols % (16 / sizeof(T)) == 0 && aligned16(a) && aligned16(b) && aligned16(c) && aligned16(d);
}

// softmax_full_rows is softmax of rows that fill the block's slots, held
// packed; TH is the block's size where the kernel knows it (0: blockDim.x).
template <class T, int TH>
__device__ __forceinline__ void softmax_full_rows(u64 rows, u64 cols, const T* x, T* y, float* pm, float* ps) {
	typedef Row<T, NN_PER, true, TH> R;
	R r;
	for (u64 i = blockIdx.x; i < rows; i += gridDim.x) {
		r.load(x + i * cols);
		float m = neg_inf();
#pragma unroll
		for (int j = 0; j < NN_PER; j++) m = nanmax(m, r.get(j, 0.0f));
		const RowExp<T> ex(block_max<TH>(m, pm));
		float e[NN_PER], s = 0;
#pragma unroll
		for (int j = 0; j < NN_PER; j++) {
			e[j] = ex(r.get(j, 0.0f));
			s += e[j];
		}
		const float inv = 1.0f / block_sum<TH>(s, ps);
#pragma unroll
		for (int c = 0; c < R::C; c++) {
			Vec<T> o;
#pragma unroll
			for (int k = 0; k < R::N; k++) o.v[k] = Traits<T>::store(e[c * R::N + k] * inv);
			*(Vec<T>*)(y + i * cols + r.col(c * R::N)) = o;
		}
		if (i + gridDim.x < rows) __syncthreads(); // pm and ps are read no more
	}
}

// softmax_rows is softmax or log-softmax of vector rows no longer than the
// block's slots, converted to floats as they load (the exponentials kept
// for the output): held packed, with the masks of rows that fill part of
// the slots, they ran 1.14x as long on an H100, 1.27x at 3072 columns.
template <class T>
__device__ __forceinline__ void softmax_rows(u64 rows, u64 cols, bool Log, const T* x, T* y, float* pm, float* ps) {
	typedef Row<T, NN_PER> R;
	R r;
	r.init((u32)cols);
	for (u64 i = blockIdx.x; i < rows; i += gridDim.x) {
		r.load(x + i * cols);
		float v[NN_PER];
#pragma unroll
		for (int j = 0; j < NN_PER; j++) v[j] = r.get(j, neg_inf()); // exp(pad - m) is 0
		float m = neg_inf();
#pragma unroll
		for (int j = 0; j < NN_PER; j++) m = nanmax(m, v[j]);
		const RowExp<T> ex(block_max<>(m, pm));
		float s = 0;
#pragma unroll
		for (int j = 0; j < NN_PER; j++) {
			const float e = ex(v[j]);
			s += e;
			v[j] = Log ? v[j] - ex.m : e;
		}
		s = block_sum<>(s, ps);
		const float ls = logf(s), inv = 1.0f / s;
#pragma unroll
		for (int c = 0; c < R::C; c++)
			if (r.ok(c * R::N)) {
				Vec<T> o;
#pragma unroll
				for (int e = 0; e < R::N; e++) {
					const float w = v[c * R::N + e];
					o.v[e] = Traits<T>::store(Log ? w - ls : w * inv);
				}
				*(Vec<T>*)(y + i * cols + r.col(c * R::N)) = o;
			}
		if (i + gridDim.x < rows) __syncthreads(); // pm and ps are read no more
	}
}


// softmax_full is softmax of rows that fill the block's slots exactly, of
// vectors (the host checks): the common case, in a kernel of its own, its
// rows packed, and the block of 128 threads (4096 columns) known to the
// compiler. Among softmax's other paths it ran 1.14x as long on an H100;
// with the block size from blockDim, 1.11x.
template <class T> __device__ __forceinline__ void softmax_full(u64 rows, u64 cols, const T* x, T* y) {
	__shared__ float pm[GN_BLOCK / 16], ps[GN_BLOCK / 16];
	if (blockDim.x == 128) softmax_full_rows<T, 128>(rows, cols, x, y, pm, ps);
	else softmax_full_rows<T, 0>(rows, cols, x, y, pm, ps);
}

template <class T> __device__ __forceinline__ void softmax(u64 rows, u64 cols, int log_, const T* x, T* y) {
	__shared__ float pm[GN_BLOCK / 16], ps[GN_BLOCK / 16];
	if (cols <= (u64)blockDim.x * NN_PER && vec_rows<T>(cols, x, y, x, y)) {
		softmax_rows<T>(rows, cols, log_ != 0, x, y, pm, ps);
		return;
	}
	for (u64 i = blockIdx.x; i < rows; i += gridDim.x) {
		const T* xr = x + i * cols;
		T* yr = y + i * cols;
		float m = neg_inf();
		for (u64 k = threadIdx.x; k < cols; k += blockDim.x) m = nanmax(m, Traits<T>::load(xr[k]));
		const RowExp<T> ex(block_max<>(m, pm));
		float s = 0;
		for (u64 k = threadIdx.x; k < cols; k += blockDim.x) s += ex(Traits<T>::load(xr[k]));
		s = block_sum<>(s, ps);
		const float ls = logf(s), inv = 1.0f / s;
		for (u64 k = threadIdx.x; k < cols; k += blockDim.x) {
			const float v = Traits<T>::load(xr[k]);
			yr[k] = Traits<T>::store(log_ ? v - ex.m - ls : ex(v) * inv);
		}
		__syncthreads(); // pm and ps are read no more
	}
}

// norm_rows is norm's loop over rows held in registers (vector rows no
// longer than the block's slots), with what the loop tests made constant.
template <class T, int PER, bool Layer, bool Group, bool Full, bool Beta>
__device__ __forceinline__ void norm_rows(u64 rows, u64 cols, float eps, const T* x, const T* alpha, const T* beta, T* y,
                                          u64 groups, u64 spatial, bool act, float* p1, float* p2) {
	const float n = (float)cols;
	// group_norm's alpha and beta are a group's, gathered for each row
	// into registers. The others are vectors like the row's, read from
	// the cache for each row: rms_norm's with the row (before its one
	// reduction), layer_norm's after its two (with the row's and its
	// beta's registers, loading them early cost a third of the
	// occupancy and 15% of the speed on an H100).
	typedef Row<T, PER, Full> R;
	R r;
	r.init((u32)cols);
	for (u64 i = blockIdx.x; i < rows; i += gridDim.x) {
		r.load(x + i * cols);
		float ga[Group ? PER : 1], gb[Group ? PER : 1];
		Vec<T> av[R::C], bv[R::C];
		if (Group) {
			const u32 c0 = (u32)(i % groups) * (u32)(cols / spatial), sp = (u32)spatial;
#pragma unroll
			for (int j = 0; j < PER; j++)
				if (r.ok(j)) {
					const u32 c = c0 + r.col(j) / sp;
					ga[j] = Traits<T>::load(alpha[c]);
					gb[j] = Beta ? Traits<T>::load(beta[c]) : 0.0f;
				}
		} else if (!Layer) {
#pragma unroll
			for (int c = 0; c < R::C; c++) av[c] = *(const Vec<T>*)(alpha + r.at(c));
		}
		float mean = 0;
		if (Layer) {
			float s = 0;
#pragma unroll
			for (int j = 0; j < PER; j++) s += r.get(j, 0.0f);
			mean = block_sum<>(s, p1) / n;
		}
		float ss = 0;
#pragma unroll
		for (int j = 0; j < PER; j++) {
			const float d = r.get(j, 0.0f) - mean;
			ss += r.ok(j) ? d * d : 0.0f;
		}
		const float rs = rsqrtf(block_sum<>(ss, p2) / n + eps);
		if (Layer && !Group) {
#pragma unroll
			for (int c = 0; c < R::C; c++) {
				av[c] = *(const Vec<T>*)(alpha + r.at(c));
				if (Beta) bv[c] = *(const Vec<T>*)(beta + r.at(c));
			}
		}
#pragma unroll
		for (int c = 0; c < R::C; c++)
			if (r.ok(c * R::N)) {
				Vec<T> o;
#pragma unroll
				for (int e = 0; e < R::N; e++) {
					const int j = c * R::N + e;
					float v = (r.get(j, 0.0f) - mean) * rs;
					if (Group) {
						v = v * ga[j] + gb[j];
						if (act) v = silu_f(v);
					} else {
						v *= Traits<T>::load(av[c].v[e]);
						if (Layer && Beta) v += Traits<T>::load(bv[c].v[e]);
					}
					o.v[e] = Traits<T>::store(v);
				}
				*(Vec<T>*)(y + i * cols + r.col(c * R::N)) = o;
			}
		if (i + gridDim.x < rows) __syncthreads(); // p1 and p2 are read no more
	}
}

// norm is rms_norm (layer = false), layer_norm, and group_norm (Group):
// there row i is group i % groups, whose columns are its channels of
// `spatial` elements each, so column k takes the affine parameters of
// channel (i % groups) · cols / spatial + k / spatial; act applies silu to
// group_norm's output.
template <class T, bool Layer, bool Group = false>
__device__ __forceinline__ void norm(u64 rows, u64 cols, float eps, const T* x, const T* alpha, const T* beta, T* y,
                                     u64 groups = 1, u64 spatial = 1, bool act = false) {
	__shared__ float p1[GN_BLOCK / 16], p2[GN_BLOCK / 16];
	const float n = (float)cols;
	const int PER = Group ? GN_PER : NN_PER;
	if (cols <= (u64)blockDim.x * PER &&
	    (Group ? vec_rows<T>(cols, x, y, x, y) : vec_rows<T>(cols, x, y, alpha, beta ? beta : alpha))) {
		const bool full = cols == (u64)blockDim.x * PER;
#define NORM_ROWS(F, B) norm_rows<T, PER, Layer, Group, F, B>(rows, cols, eps, x, alpha, beta, y, groups, spatial, act, p1, p2)
		if (Layer && beta) {
			if (full) NORM_ROWS(true, true);
			else NORM_ROWS(false, true);
		} else {
			if (full) NORM_ROWS(true, false);
			else NORM_ROWS(false, false);
		}
#undef NORM_ROWS
		return;
	}
	for (u64 i = blockIdx.x; i < rows; i += gridDim.x) {
		const T* xr = x + i * cols;
		T* yr = y + i * cols;
		float mean = 0;
		if (Layer) {
			float s = 0;
			for (u64 k = threadIdx.x; k < cols; k += blockDim.x) s += Traits<T>::load(xr[k]);
			mean = block_sum<>(s, p1) / n;
		}
		float ss = 0;
		for (u64 k = threadIdx.x; k < cols; k += blockDim.x) {
			float v = Traits<T>::load(xr[k]) - mean;
			ss += v * v;
		}
		const float rs = rsqrtf(block_sum<>(ss, p2) / n + eps);
		// group_norm's rows are shorter than 2³² (the host checks): 32-bit
		// division.
		const u64 c0 = Group ? (i % groups) * (cols / spatial) : 0;
		for (u64 k = threadIdx.x; k < cols; k += blockDim.x) {
			const u64 c = Group ? c0 + (u32)k / (u32)spatial : k;
			float v = (Traits<T>::load(xr[k]) - mean) * rs * Traits<T>::load(alpha[c]);
			if (Layer && beta) v += Traits<T>::load(beta[c]);
			if (Group && act) v = silu_f(v);
			yr[k] = Traits<T>::store(v);
		}
		__syncthreads(); // p1 and p2 are read no more
	}
}

// rope rotates pairs: half-split (x[i], x[i + d/2]) or interleaved
// (x[2i], x[2i + 1]) by the angle of position t and pair i, cos and sin
// (t, d/2) per batch entry csb elements apart (0: shared). thd: x is
// (b, t, h, d), else (b, h, t, d). A thread takes G consecutive pairs:
// vectors of x (and of cos and sin) when the rows allow, else G = 1. I is
// the index type: 32-bit divisions where the sizes allow (a 64-bit one
// costs tens of instructions, and rope is a handful of them a byte).
template <class T, int G, class I>
__device__ __forceinline__ void rope_pairs(I p, I h, I t, I d, bool interleaved, bool thd, I csb, const T* x, const T* cs,
                                           const T* sn, T* y) {
	const I half = d / 2, i = p % half, r = p / half;
	const I ti = thd ? (r / h) % t : r % t, bi = csb ? r / (h * t) : 0;
	const I c = bi * csb + ti * half + i;
	Chunk<T, G> co = *(const Chunk<T, G>*)(cs + c), si = *(const Chunk<T, G>*)(sn + c);
	if (interleaved) {
		const I at = r * d + 2 * i;
		Chunk<T, 2 * G> v = *(const Chunk<T, 2 * G>*)(x + at), o;
#pragma unroll
		for (int e = 0; e < G; e++) {
			const float x1 = Traits<T>::load(v.v[2 * e]), x2 = Traits<T>::load(v.v[2 * e + 1]);
			const float cf = Traits<T>::load(co.v[e]), sf = Traits<T>::load(si.v[e]);
			o.v[2 * e] = Traits<T>::store(x1 * cf - x2 * sf);
			o.v[2 * e + 1] = Traits<T>::store(x1 * sf + x2 * cf);
		}
		*(Chunk<T, 2 * G>*)(y + at) = o;
	} else {
		const I at = r * d + i;
		Chunk<T, G> v1 = *(const Chunk<T, G>*)(x + at), v2 = *(const Chunk<T, G>*)(x + at + half), o1, o2;
#pragma unroll
		for (int e = 0; e < G; e++) {
			const float x1 = Traits<T>::load(v1.v[e]), x2 = Traits<T>::load(v2.v[e]);
			const float cf = Traits<T>::load(co.v[e]), sf = Traits<T>::load(si.v[e]);
			o1.v[e] = Traits<T>::store(x1 * cf - x2 * sf);
			o2.v[e] = Traits<T>::store(x1 * sf + x2 * cf);
		}
		*(Chunk<T, G>*)(y + at) = o1;
		*(Chunk<T, G>*)(y + at + half) = o2;
	}
}

template <class T, class I>
__device__ __forceinline__ void rope_all(I b, I h, I t, I d, bool interleaved, bool thd, I csb, const T* x, const T* cs, const T* sn, T* y) {
	// G pairs: 16 bytes of x per load when half-split, 16 of x and 8 of
	// cos and sin when interleaved.
	const int G = interleaved ? 8 / sizeof(T) : 16 / sizeof(T);
	const I half = d / 2, pairs = b * h * t * half;
	const u64 ca = G * sizeof(T);
	const bool vec = half % G == 0 && aligned16(x) && aligned16(y) && ((u64)cs % ca) == 0 && ((u64)sn % ca) == 0;
	if (vec) {
		for (u64 g = gstart(); g < pairs / G; g += gstep()) {
			if (interleaved) rope_pairs<T, 8 / sizeof(T), I>((I)g * G, h, t, d, true, thd, csb, x, cs, sn, y);
			else rope_pairs<T, 16 / sizeof(T), I>((I)g * G, h, t, d, false, thd, csb, x, cs, sn, y);
		}
		return;
	}
	for (u64 p = gstart(); p < pairs; p += gstep()) rope_pairs<T, 1, I>((I)p, h, t, d, interleaved, thd, csb, x, cs, sn, y);
}

template <class T>
__device__ __forceinline__ void rope(u64 b, u64 h, u64 t, u64 d, int interleaved, int thd, u64 csb, const T* x, const T* cs, const T* sn, T* y) {
	// 32-bit indices when every element index, and every cos/sin index, fits.
	const u64 pairs = b * h * t * (d / 2);
	if (pairs < (1ull << 30) && csb < (1ull << 31) && b * csb + t * d < (1ull << 31))
		rope_all<T, u32>((u32)b, (u32)h, (u32)t, (u32)d, interleaved, thd, (u32)csb, x, cs, sn, y);
	else
		rope_all<T, u64>(b, h, t, d, interleaved, thd, csb, x, cs, sn, y);
}

// rope_cache is package candle's Tensor.RoPECache: qkv (n, hq + 2·hkv, d)
// contiguous, a thread a pair (i, i + d/2) of a token's head: query heads
// rotated into q (n, hq, d), key heads rotated into row slots[t] of kc and
// value heads copied into that of vc ((rows, hkv, d) each); cos and sin
// (n, d/2). A slot out of range writes nothing (as IndexAssign's kernels).
template <class T>
__device__ __forceinline__ void rope_cache(u64 n, u64 hq, u64 hkv, u64 d, u64 rows, const T* qkv, const T* cs, const T* sn, const u32* slots,
                                           T* kc, T* vc, T* q) {
	const u64 half = d / 2, h = hq + 2 * hkv, pairs = n * h * half;
	for (u64 p = gstart(); p < pairs; p += gstep()) {
		const u64 i = p % half, r = p / half, hd = r % h, t = r / h;
		const T* x = qkv + r * d;
		T* y;
		if (hd < hq) {
			y = q + (t * hq + hd) * d;
		} else {
			const u64 s = slots[t];
			if (s >= rows) continue;
			if (hd >= hq + hkv) { // a value head: copied
				y = vc + (s * hkv + hd - hq - hkv) * d;
				y[i] = x[i];
				y[i + half] = x[i + half];
				continue;
			}
			y = kc + (s * hkv + hd - hq) * d;
		}
		const float x1 = Traits<T>::load(x[i]), x2 = Traits<T>::load(x[i + half]);
		const float c = Traits<T>::load(cs[t * half + i]), sv = Traits<T>::load(sn[t * half + i]);
		y[i] = Traits<T>::store(x1 * c - x2 * sv);
		y[i + half] = Traits<T>::store(x1 * sv + x2 * c);
	}
}

template <class T> __device__ __forceinline__ void silu_mul(u64 n, const T* a, const T* b, T* y) {
	const int N = 16 / sizeof(T);
	u64 done = 0;
	if (aligned16(a) && aligned16(b) && aligned16(y)) {
		const u64 nv = n / N;
		for (u64 v = gstart(); v < nv; v += gstep()) {
			Vec<T> xa = ((const Vec<T>*)a)[v], xb = ((const Vec<T>*)b)[v], o;
#pragma unroll
			for (int e = 0; e < N; e++) {
				o.v[e] = Traits<T>::store(silu_f(Traits<T>::load(xa.v[e])) * Traits<T>::load(xb.v[e]));
			}
			((Vec<T>*)y)[v] = o;
		}
		done = nv * N;
	}
	for (u64 k = done + gstart(); k < n; k += gstep()) {
		y[k] = Traits<T>::store(silu_f(Traits<T>::load(a[k])) * Traits<T>::load(b[k]));
	}
}

// group_norm of long rows in two kernels, so that a row is spread over
// many blocks (Stable Diffusion's VAE has 32 rows of 4M elements; its UNet
// 64 of 40960: a block a row, as group_norm_<dt>, leaves most of a GPU
// idle and reads each row three times). The row is cut into chunks of
// GS_CHUNK elements, a block a chunk (GS_THREADS threads of GS_PER
// elements, held in registers):
//   group_stats_<dt>  each chunk's mean and sum of squared deviations from
//                     it (part[2b], part[2b + 1] for chunk b = row·splits +
//                     chunk), exact in float within the chunk;
//   group_apply_<dt>  each chunk's block combines its row's partials
//                     (Chan et al.: mean = Σ nᵢ·meanᵢ / n, M2 = Σ M2ᵢ +
//                     nᵢ·(meanᵢ - mean)²) and writes its chunk,
//                     (x - mean)·(alpha·rs) + beta, silu applied when act
//                     is set.
// x is read twice (the second read mostly from the L2 cache for the
// UNet's tensors) and y written once. Rows are shorter than 2³² (the host
// checks): 32-bit indices within a row.
#define GS_THREADS 256
#define GS_PER 16
#define GS_CHUNK (GS_THREADS * GS_PER)
#define GS_KERNEL extern "C" __global__ __launch_bounds__(GS_THREADS) void

// GChunk is a thread's GS_PER elements of a chunk, as floats: vectors of
// 16 bytes (chunk c of a thread at (c·GS_THREADS + thread)·N) when the rows
// allow, else single elements (slot j at j·GS_THREADS + thread).
template <class T> struct GChunk {
	static const int N = 16 / sizeof(T), V = GS_PER / N;
	float v[GS_PER];

	__device__ __forceinline__ static u32 vpos(int c) { return ((u32)c * GS_THREADS + threadIdx.x) * N; }
	__device__ __forceinline__ static u32 spos(int j) { return (u32)j * GS_THREADS + threadIdx.x; }
	__device__ __forceinline__ static bool ok(bool vec, int j, u32 n) { return (vec ? vpos(j / N) + j % N : spos(j)) < n; }
	// load reads the chunk's n elements from p, 0 past them. (Past the
	// end a vector load reads the chunk's first: no branch around the
	// loads, which would make each wait for the one before.)
	__device__ __forceinline__ void load(const T* p, u32 n, bool vec) {
		if (vec) {
			Vec<T> w[V];
#pragma unroll
			for (int c = 0; c < V; c++) w[c] = *(const Vec<T>*)(p + (vpos(c) < n ? vpos(c) : 0));
#pragma unroll
			for (int c = 0; c < V; c++)
#pragma unroll
				for (int e = 0; e < N; e++) v[c * N + e] = vpos(c) < n ? Traits<T>::load(w[c].v[e]) : 0.0f;
		} else {
#pragma unroll
			for (int j = 0; j < GS_PER; j++) v[j] = spos(j) < n ? Traits<T>::load(p[spos(j)]) : 0.0f;
		}
	}
};

template <class T> __device__ __forceinline__ bool gs_vec(u64 cols, const T* x, const T* y) {
	return cols % (16 / sizeof(T)) == 0 && aligned16(x) && aligned16(y);
}

template <class T> __device__ __forceinline__ void group_stats(u64 rows, u64 cols, u64 splits, const T* x, float* part) {
	__shared__ float p1[GN_BLOCK / 16], p2[GN_BLOCK / 16];
	const bool vec = gs_vec<T>(cols, x, x);
	GChunk<T> g;
	for (u64 b = blockIdx.x; b < rows * splits; b += gridDim.x) {
		const u64 row = b / splits;
		const u32 k0 = (u32)(b - row * splits) * GS_CHUNK, n = (u32)cols - k0 < GS_CHUNK ? (u32)cols - k0 : GS_CHUNK;
		g.load(x + row * cols + k0, n, vec);
		float s = 0;
#pragma unroll
		for (int j = 0; j < GS_PER; j++) s += g.v[j];
		const float mean = block_sum<GS_THREADS>(s, p1) / (float)n;
		float ss = 0;
#pragma unroll
		for (int j = 0; j < GS_PER; j++) {
			const float d = g.v[j] - mean;
			ss += GChunk<T>::ok(vec, j, n) ? d * d : 0.0f;
		}
		ss = block_sum<GS_THREADS>(ss, p2);
		if (threadIdx.x == 0) {
			part[2 * b] = mean;
			part[2 * b + 1] = ss;
		}
		if (b + gridDim.x < rows * splits) __syncthreads(); // p1 and p2 are read no more
	}
}

// gs_scale is channel ch's scale and shift: y = (x - mean)·a + s,
// a = alpha·rs, s = beta.
template <class T>
__device__ __forceinline__ void gs_scale(const T* alpha, const T* beta, u32 ch, float rs, float& a, float& s) {
	a = Traits<T>::load(alpha[ch]) * rs;
	s = beta ? Traits<T>::load(beta[ch]) : 0.0f;
}

template <class T>
__device__ __forceinline__ void group_apply(u64 rows, u64 cols, u64 splits, float eps, u64 groups, u64 spatial, int act,
                                            const float* part, const T* x, const T* alpha, const T* beta, T* y) {
	__shared__ float p1[GN_BLOCK / 16], p2[GN_BLOCK / 16];
	typedef GChunk<T> G;
	const bool vec = gs_vec<T>(cols, x, y);
	const u32 sp = (u32)spatial, ns = (u32)splits;
	// A vector's elements share a channel when the channels are whole
	// vectors: one division and one scale and shift a vector.
	const bool whole = sp % G::N == 0;
	G g;
	for (u64 b = blockIdx.x; b < rows * splits; b += gridDim.x) {
		const u64 row = b / splits;
		const u32 k0 = (u32)(b - row * splits) * GS_CHUNK, n = (u32)cols - k0 < GS_CHUNK ? (u32)cols - k0 : GS_CHUNK;
		g.load(x + row * cols + k0, n, vec); // in flight during the reductions
		const float* pr = part + 2 * row * splits;
		const u32 last = (u32)cols - (ns - 1) * GS_CHUNK; // the last chunk's elements
		float sm = 0;
		for (u32 i = threadIdx.x; i < ns; i += GS_THREADS) sm += (i + 1 < ns ? (float)GS_CHUNK : (float)last) * pr[2 * i];
		const float mean = block_sum<GS_THREADS>(sm, p1) / (float)cols;
		float m2 = 0;
		for (u32 i = threadIdx.x; i < ns; i += GS_THREADS) {
			const float d = pr[2 * i] - mean;
			m2 += pr[2 * i + 1] + (i + 1 < ns ? (float)GS_CHUNK : (float)last) * d * d;
		}
		const float rs = rsqrtf(block_sum<GS_THREADS>(m2, p2) / (float)cols + eps);
		const u32 c0 = (u32)(row % groups) * ((u32)cols / sp);
		T* yr = y + row * cols + k0;
		if (vec) {
#pragma unroll
			for (int c = 0; c < G::V; c++) {
				const u32 p = G::vpos(c);
				if (p >= n) continue;
				Vec<T> o;
				float a, s;
				if (whole) gs_scale(alpha, beta, c0 + (k0 + p) / sp, rs, a, s);
#pragma unroll
				for (int e = 0; e < G::N; e++) {
					if (!whole) gs_scale(alpha, beta, c0 + (k0 + p + e) / sp, rs, a, s);
					float v = fmaf(g.v[c * G::N + e] - mean, a, s);
					if (act) v = silu_f(v);
					o.v[e] = Traits<T>::store(v);
				}
				*(Vec<T>*)(yr + p) = o;
			}
		} else {
#pragma unroll
			for (int j = 0; j < GS_PER; j++) {
				const u32 p = G::spos(j);
				if (p >= n) continue;
				float a, s;
				gs_scale(alpha, beta, c0 + (k0 + p) / sp, rs, a, s);
				float v = fmaf(g.v[j] - mean, a, s);
				if (act) v = silu_f(v);
				yr[p] = Traits<T>::store(v);
			}
		}
		if (b + gridDim.x < rows * splits) __syncthreads(); // p1 and p2 are read no more
	}
}

// gelu_erf_f is unary.hip's gelu_erf: 0.5 · g · (1 + erf(g / √2)).
__device__ __forceinline__ float gelu_erf_f(float g) { return 0.5f * g * (1.0f + erff(g * 0.7071067811865476f)); }

// geglu is diffusers' GEGLU on contiguous rows of 2n: y[r, i] = x[r, i] ·
// gelu_erf(x[r, n + i]), y (rows, n). A thread takes a vector of each half
// when n is a multiple of the vector and the pointers are aligned. I is the
// index type: 32-bit divisions where the sizes allow.
template <class T, class I> __device__ __forceinline__ void geglu_all(I rows, I n, const T* x, T* y) {
	const int N = 16 / sizeof(T);
	if (n % N == 0 && aligned16(x) && aligned16(y)) {
		const I nv = n / N, total = rows * nv;
		for (u64 k = gstart(); k < (u64)total; k += gstep()) {
			const I v = (I)k, r = v / nv, i = (v - r * nv) * N;
			const Vec<T> h = *(const Vec<T>*)(x + (u64)r * 2 * n + i), gt = *(const Vec<T>*)(x + (u64)r * 2 * n + n + i);
			Vec<T> o;
#pragma unroll
			for (int e = 0; e < N; e++) o.v[e] = Traits<T>::store(Traits<T>::load(h.v[e]) * gelu_erf_f(Traits<T>::load(gt.v[e])));
			*(Vec<T>*)(y + (u64)v * N) = o;
		}
		return;
	}
	const I total = rows * n;
	for (u64 k = gstart(); k < (u64)total; k += gstep()) {
		const I v = (I)k, r = v / n, i = v - r * n;
		y[k] = Traits<T>::store(Traits<T>::load(x[(u64)r * 2 * n + i]) * gelu_erf_f(Traits<T>::load(x[(u64)r * 2 * n + n + i])));
	}
}

template <class T> __device__ __forceinline__ void geglu(u64 rows, u64 n, const T* x, T* y) {
	if (rows * n * 2 < (1ull << 32)) geglu_all<T, u32>((u32)rows, (u32)n, x, y);
	else geglu_all<T, u64>(rows, n, x, y);
}

#define RG_NN(T)                                                                                                          \
	NN_KERNEL softmax_##T(u64 rows, u64 cols, int log_, const T* x, T* y) { RG_GRID_WAIT(); softmax<T>(rows, cols, log_, x, y); } \
	NN16_KERNEL(T) softmax_full_##T(u64 rows, u64 cols, const T* x, T* y) { RG_GRID_WAIT(); softmax_full<T>(rows, cols, x, y); } \
	NN16_KERNEL(T) rms_norm_##T(u64 rows, u64 cols, float eps, const T* x, const T* alpha, T* y) { RG_GRID_WAIT();        \
		norm<T, false>(rows, cols, eps, x, alpha, nullptr, y);                                                            \
	}                                                                                                                     \
	NN16_KERNEL(T) layer_norm_##T(u64 rows, u64 cols, float eps, const T* x, const T* alpha, const T* beta, T* y) { RG_GRID_WAIT(); \
		norm<T, true>(rows, cols, eps, x, alpha, beta, y);                                                                \
	}                                                                                                                     \
	GN_KERNEL group_norm_##T(u64 rows, u64 cols, float eps, u64 groups, u64 spatial, int act, const T* x, const T* alpha, \
	                         const T* beta, T* y) { RG_GRID_WAIT();                                                       \
		norm<T, true, true>(rows, cols, eps, x, alpha, beta, y, groups, spatial, act != 0);                               \
	}                                                                                                                     \
	GS_KERNEL group_stats_##T(u64 rows, u64 cols, u64 splits, const T* x, float* part) { RG_GRID_WAIT();                  \
		group_stats<T>(rows, cols, splits, x, part);                                                                      \
	}                                                                                                                     \
	GS_KERNEL group_apply_##T(u64 rows, u64 cols, u64 splits, float eps, u64 groups, u64 spatial, int act,                \
	                          const float* part, const T* x, const T* alpha, const T* beta, T* y) { RG_GRID_WAIT();       \
		group_apply<T>(rows, cols, splits, eps, groups, spatial, act, part, x, alpha, beta, y);                          \
	}                                                                                                                     \
	RG_KERNEL rope_##T(u64 b, u64 h, u64 t, u64 d, int interleaved, int thd, u64 csb, const T* x, const T* cs,            \
	                   const T* sn, T* y) { RG_GRID_WAIT();                                                               \
		rope<T>(b, h, t, d, interleaved, thd, csb, x, cs, sn, y);                                                         \
	}                                                                                                                     \
	RG_KERNEL rope_cache_##T(u64 n, u64 hq, u64 hkv, u64 d, u64 rows, const T* qkv, const T* cs, const T* sn,                \
	                         const u32* slots, T* kc, T* vc, T* q) { RG_GRID_WAIT();                                      \
		rope_cache<T>(n, hq, hkv, d, rows, qkv, cs, sn, slots, kc, vc, q);                                                \
	}                                                                                                                     \
	RG_KERNEL silu_mul_##T(u64 n, const T* a, const T* b, T* y) { RG_GRID_WAIT(); silu_mul<T>(n, a, b, y); }          \
	RG_KERNEL geglu_##T(u64 rows, u64 n, const T* x, T* y) { RG_GRID_WAIT(); geglu<T>(rows, n, x, y); }

RG_NN(f32)
RG_NN(f16)
RG_NN(bf16)

// Upsampling of images, PyTorch's semantics exactly (upsample_nearest2d and
// upsample_bilinear2d with output sizes given), on contiguous NCHW or NHWC
// images, a thread per output element:
//   upsample_nearest_<dt>   y[oy, ox] = x[min(floor(oy·sh), ih-1), min(floor(ox·sw), iw-1)]
//   upsample_bilinear_<dt>  bilinear interpolation between the four neighbours
// The host computes the scales sh, sw in float as PyTorch does (in/out, or
// (in-1)/(out-1) with align_corners); the source coordinates are computed in
// float without contraction (so that the rows and columns chosen are
// PyTorch's and the CPU device's), the interpolation in the compute type.

// up_bilinear_src is PyTorch's area_pixel_compute_source_index.
__device__ __forceinline__ float up_bilinear_src(float scale, u64 o, int align) {
	if (align) return __fmul_rn(scale, (float)o);
	return fmaxf(__fadd_rn(__fmul_rn(scale, __fadd_rn((float)o, 0.5f)), -0.5f), 0.0f);
}

template <class T, class I, bool BILINEAR>
__device__ __forceinline__ void upsample(I n, I c, I ih, I iw, I oh, I ow, int nhwc, int align, float sh, float sw, const T* x, T* y) {
	typedef typename Traits<T>::C C;
	for (u64 k = gstart(); k < (u64)n; k += gstep()) {
		const I i = (I)k;
		// b is the image (NHWC) or the plane (NCHW) of the element.
		I ox, oy, b, ch = 0;
		if (nhwc) {
			ch = i % c;
			const I r = i / c;
			ox = r % ow;
			oy = (r / ow) % oh;
			b = r / ow / oh;
		} else {
			ox = i % ow;
			oy = (i / ow) % oh;
			b = i / ow / oh;
		}
		// Element (yy, xx) of the image or plane.
		const T* img = x + (u64)b * ih * iw * (nhwc ? c : 1) + ch;
		const I step = nhwc ? c : 1;
		if (!BILINEAR) {
			const I iy = (I)floorf(__fmul_rn((float)oy, sh)), ix = (I)floorf(__fmul_rn((float)ox, sw));
			y[k] = img[((u64)(iy < ih ? iy : ih - 1) * iw + (ix < iw ? ix : iw - 1)) * step];
			continue;
		}
		const float ry = up_bilinear_src(sh, oy, align), rx = up_bilinear_src(sw, ox, align);
		const I y0 = (I)ry, x0 = (I)rx;
		const I dy = y0 < ih - 1 ? iw * step : 0, dx = x0 < iw - 1 ? step : 0;
		const C ly1 = (C)(ry - (float)y0), lx1 = (C)(rx - (float)x0);
		const C ly0 = (C)1 - ly1, lx0 = (C)1 - lx1;
		const T* p = img + ((u64)y0 * iw + x0) * step;
		const C v = ly0 * (lx0 * Traits<T>::load(p[0]) + lx1 * Traits<T>::load(p[dx])) +
		            ly1 * (lx0 * Traits<T>::load(p[dy]) + lx1 * Traits<T>::load(p[dy + dx]));
		y[k] = Traits<T>::store(v);
	}
}

// 32-bit index arithmetic when the counts fit (cheaper division).
template <class T, bool BILINEAR>
__device__ __forceinline__ void upsample_any(u64 n, u64 c, u64 ih, u64 iw, u64 oh, u64 ow, int nhwc, int align, float sh, float sw, const T* x, T* y) {
	const u64 in = n / (oh * ow) * ih * iw; // the input's elements: n = images·channels·oh·ow
	if (n <= 0xffffffffull && in <= 0xffffffffull)
		upsample<T, u32, BILINEAR>((u32)n, (u32)c, (u32)ih, (u32)iw, (u32)oh, (u32)ow, nhwc, align, sh, sw, x, y);
	else
		upsample<T, u64, BILINEAR>(n, c, ih, iw, oh, ow, nhwc, align, sh, sw, x, y);
}

#define RG_UPSAMPLE(T)                                                                                                  \
	RG_KERNEL upsample_nearest_##T(u64 n, u64 c, u64 ih, u64 iw, u64 oh, u64 ow, int nhwc, int align, float sh, float sw, \
	                               const T* x, T* y) { RG_GRID_WAIT();                                                  \
		upsample_any<T, false>(n, c, ih, iw, oh, ow, nhwc, align, sh, sw, x, y);                                        \
	}                                                                                                                   \
	RG_KERNEL upsample_bilinear_##T(u64 n, u64 c, u64 ih, u64 iw, u64 oh, u64 ow, int nhwc, int align, float sh, float sw, \
	                                const T* x, T* y) { RG_GRID_WAIT();                                                 \
		upsample_any<T, true>(n, c, ih, iw, oh, ow, nhwc, align, sh, sw, x, y);                                         \
	}

RG_UPSAMPLE(f32)
RG_UPSAMPLE(f16)
RG_UPSAMPLE(bf16)
RG_UPSAMPLE(f64)
