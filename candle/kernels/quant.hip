// The quantized ops on GGML blocks (package candle's quant_cpu.go lays out
// each type): a block is decoded 32 values at a time, a chunk (a K type's
// block of 256 is eight chunks), the unit every kernel here works in.
//   dequant_<q>_<dt>   chunks to dt, a thread a chunk
//   qrows_<q>_<dt>     the rows ids name (i64; out of range: zeros), a thread a chunk
//   qmatvec_<q>_<dt>   y (m, n) = x (m, k) · wᵀ for m ≤ QMV_ROWS: a warp a row of w,
//                      its lanes over the row's chunks, each chunk read once for the
//                      m rows of x; warp sums through shuffles (any warp size)
// (m > QMV_ROWS runs on BLAS over slices of w that dequant_ expands: quant_hip.go.)
// Blocks are read with 2-byte loads (every block size is even, and the f16
// fields sit at even offsets), 16-byte ones where a type's block keeps
// them aligned (Q4_K, Q5_K).
#include "common.h"

#define QMV_ROWS 4
#define Q_BLOCK 256
// At least four blocks an SM (64 registers on sm_90): qmatvec read Q4_K at
// 680 GB/s with the 100 registers it took unbounded, 950 GB/s so.
#define Q_KERNEL extern "C" __global__ __launch_bounds__(Q_BLOCK, 4) void

__device__ __forceinline__ float h2f(const u8* p) { return __half2float(*(const f16*)p); }
__device__ __forceinline__ u32 u16at(const u8* p) { return *(const u16*)p; }
__device__ __forceinline__ u32 u32at(const u8* p) { return u16at(p) | u16at(p + 2) << 16; }

// Type ids are GGML's.
#define GGML_Q4_0 2
#define GGML_Q4_1 3
#define GGML_Q5_0 6
#define GGML_Q5_1 7
#define GGML_Q8_0 8
#define GGML_Q2_K 10
#define GGML_Q3_K 11
#define GGML_Q4_K 12
#define GGML_Q5_K 13
#define GGML_Q6_K 14
#define GGML_Q8_K 15

template <int Q> struct QT;
template <> struct QT<GGML_Q4_0> { static const int BLOCK = 32, SIZE = 18; };
template <> struct QT<GGML_Q4_1> { static const int BLOCK = 32, SIZE = 20; };
template <> struct QT<GGML_Q5_0> { static const int BLOCK = 32, SIZE = 22; };
template <> struct QT<GGML_Q5_1> { static const int BLOCK = 32, SIZE = 24; };
template <> struct QT<GGML_Q8_0> { static const int BLOCK = 32, SIZE = 34; };
template <> struct QT<GGML_Q2_K> { static const int BLOCK = 256, SIZE = 84; };
template <> struct QT<GGML_Q3_K> { static const int BLOCK = 256, SIZE = 110; };
template <> struct QT<GGML_Q4_K> { static const int BLOCK = 256, SIZE = 144; };
template <> struct QT<GGML_Q5_K> { static const int BLOCK = 256, SIZE = 176; };
template <> struct QT<GGML_Q6_K> { static const int BLOCK = 256, SIZE = 210; };
template <> struct QT<GGML_Q8_K> { static const int BLOCK = 256, SIZE = 292; };

// decode writes the 32 values of chunk c of the block at b.
template <int Q> __device__ __forceinline__ void decode(const u8* b, int c, float* y);

template <> __device__ __forceinline__ void decode<GGML_Q4_0>(const u8* b, int c, float* y) {
	const float d = h2f(b);
#pragma unroll
	for (int j = 0; j < 16; j += 2) {
		const u32 q = u16at(b + 2 + j);
		y[j] = d * (float)((int)(q & 15) - 8);
		y[j + 1] = d * (float)((int)(q >> 8 & 15) - 8);
		y[j + 16] = d * (float)((int)(q >> 4 & 15) - 8);
		y[j + 17] = d * (float)((int)(q >> 12) - 8);
	}
}

template <> __device__ __forceinline__ void decode<GGML_Q4_1>(const u8* b, int c, float* y) {
	const float d = h2f(b), m = h2f(b + 2);
#pragma unroll
	for (int j = 0; j < 16; j += 2) {
		const u32 q = u16at(b + 4 + j);
		y[j] = d * (float)(q & 15) + m;
		y[j + 1] = d * (float)(q >> 8 & 15) + m;
		y[j + 16] = d * (float)(q >> 4 & 15) + m;
		y[j + 17] = d * (float)(q >> 12) + m;
	}
}

template <int Q> __device__ __forceinline__ void decode_q5(const u8* b, float* y) {
	const bool one = Q == GGML_Q5_1;
	const float d = h2f(b), m = one ? h2f(b + 2) : 0.0f;
	const int off = one ? 4 : 2;
	const u32 qh = u32at(b + off);
	const u8* qs = b + off + 4;
#pragma unroll
	for (int j = 0; j < 16; j += 2) {
		const u32 q = u16at(qs + j);
#pragma unroll
		for (int e = 0; e < 2; e++) {
			const u32 byte = q >> (8 * e) & 255;
			const int lo = (int)((byte & 15) | (qh >> (j + e) & 1) << 4);
			const int hi = (int)((byte >> 4) | (qh >> (j + e + 16) & 1) << 4);
			y[j + e] = one ? d * (float)lo + m : d * (float)(lo - 16);
			y[j + e + 16] = one ? d * (float)hi + m : d * (float)(hi - 16);
		}
	}
}
template <> __device__ __forceinline__ void decode<GGML_Q5_0>(const u8* b, int c, float* y) { decode_q5<GGML_Q5_0>(b, y); }
template <> __device__ __forceinline__ void decode<GGML_Q5_1>(const u8* b, int c, float* y) { decode_q5<GGML_Q5_1>(b, y); }

template <> __device__ __forceinline__ void decode<GGML_Q8_0>(const u8* b, int c, float* y) {
	const float d = h2f(b);
#pragma unroll
	for (int j = 0; j < 32; j += 2) {
		const u32 q = u16at(b + 2 + j);
		y[j] = d * (float)(signed char)(q & 255);
		y[j + 1] = d * (float)(signed char)(q >> 8);
	}
}

template <> __device__ __forceinline__ void decode<GGML_Q2_K>(const u8* b, int c, float* y) {
	const float d = h2f(b + 80), dmin = h2f(b + 82);
	const int n = c / 4, j = c % 4;
#pragma unroll
	for (int h = 0; h < 2; h++) {
		const u32 s = b[8 * n + 2 * j + h];
		const float dl = d * (float)(s & 15), ml = dmin * (float)(s >> 4);
#pragma unroll
		for (int i = 0; i < 16; i += 2) {
			const u32 q = u16at(b + 16 + 32 * n + 16 * h + i);
			y[16 * h + i] = dl * (float)(q >> (2 * j) & 3) - ml;
			y[16 * h + i + 1] = dl * (float)(q >> (8 + 2 * j) & 3) - ml;
		}
	}
}

template <> __device__ __forceinline__ void decode<GGML_Q3_K>(const u8* b, int c, float* y) {
	const float d = h2f(b + 108);
	const int n = c / 4, j = c % 4;
	const u32 bit = 1u << (4 * n + j);
#pragma unroll
	for (int h = 0; h < 2; h++) {
		const int g = 8 * n + 2 * j + h;
		const int lo = b[96 + g % 8] >> (4 * (g / 8)) & 15, hi = b[104 + g % 4] >> (2 * (g / 4)) & 3;
		const float dl = d * (float)((lo | hi << 4) - 32);
#pragma unroll
		for (int i = 0; i < 16; i += 2) {
			const u32 q = u16at(b + 32 + 32 * n + 16 * h + i), m = u16at(b + 16 * h + i);
#pragma unroll
			for (int e = 0; e < 2; e++) {
				int v = (int)(q >> (8 * e + 2 * j) & 3);
				if (((m >> (8 * e)) & bit) == 0) v -= 4;
				y[16 * h + i + e] = dl * (float)v;
			}
		}
	}
}

// scale_min_k4 unpacks Q4_K's and Q5_K's j-th 6-bit scale and min.
__device__ __forceinline__ void scale_min_k4(int j, const u8* q, float& sc, float& mn) {
	if (j < 4) {
		sc = (float)(q[j] & 63);
		mn = (float)(q[j + 4] & 63);
	} else {
		sc = (float)((q[j + 4] & 15) | (q[j - 4] >> 6) << 4);
		mn = (float)((q[j + 4] >> 4) | (q[j] >> 6) << 4);
	}
}

// Q4_K and Q5_K blocks (144 and 176 bytes) keep 16-byte alignment: their
// quants load as two 16-byte vectors.
template <int Q> __device__ __forceinline__ void decode_k45(const u8* b, int c, float* y) {
	const bool five = Q == GGML_Q5_K;
	float sc, mn;
	scale_min_k4(c, b + 4, sc, mn);
	const float ds = h2f(b) * sc, ms = h2f(b + 2) * mn;
	const u8* qs = b + (five ? 48 : 16) + 32 * (c / 2);
	const uint4 q0 = *(const uint4*)qs, q1 = *(const uint4*)(qs + 16);
	const u32 qw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
	uint4 h0 = {0, 0, 0, 0}, h1 = {0, 0, 0, 0};
	if (five) {
		h0 = *(const uint4*)(b + 16);
		h1 = *(const uint4*)(b + 32);
	}
	const u32 hw[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
	const int shift = 4 * (c % 2);
#pragma unroll
	for (int i = 0; i < 32; i++) {
		u32 q = qw[i / 4] >> (8 * (i % 4) + shift) & 15;
		if (five) q |= (hw[i / 4] >> (8 * (i % 4) + c) & 1) << 4;
		y[i] = ds * (float)q - ms;
	}
}
template <> __device__ __forceinline__ void decode<GGML_Q4_K>(const u8* b, int c, float* y) { decode_k45<GGML_Q4_K>(b, c, y); }
template <> __device__ __forceinline__ void decode<GGML_Q5_K>(const u8* b, int c, float* y) { decode_k45<GGML_Q5_K>(b, c, y); }

template <> __device__ __forceinline__ void decode<GGML_Q6_K>(const u8* b, int c, float* y) {
	const float d = h2f(b + 208);
	const int n = c / 4, k = c % 4;
	const u8* ql = b + 64 * n + 32 * (k % 2);
	const u8* qh = b + 128 + 32 * n;
#pragma unroll
	for (int h = 0; h < 2; h++) {
		const float dl = d * (float)(signed char)b[192 + 8 * n + h + 2 * k];
#pragma unroll
		for (int i = 0; i < 16; i += 2) {
			const u32 l = u16at(ql + 16 * h + i), hh = u16at(qh + 16 * h + i);
#pragma unroll
			for (int e = 0; e < 2; e++) {
				const u32 lo = l >> (8 * e + 4 * (k / 2)) & 15, hi = hh >> (8 * e + 2 * k) & 3;
				y[16 * h + i + e] = dl * (float)((int)(lo | hi << 4) - 32);
			}
		}
	}
}

template <> __device__ __forceinline__ void decode<GGML_Q8_K>(const u8* b, int c, float* y) {
	const float d = *(const float*)b;
#pragma unroll
	for (int j = 0; j < 32; j += 2) {
		const u32 q = u16at(b + 4 + 32 * c + j);
		y[j] = d * (float)(signed char)(q & 255);
		y[j + 1] = d * (float)(signed char)(q >> 8);
	}
}

// chunk_at is the block holding chunk i of a row of blocks, and the
// chunk's index in it.
template <int Q> __device__ __forceinline__ const u8* chunk_at(const u8* row, u64 i, int& c) {
	const int per = QT<Q>::BLOCK / 32;
	c = (int)(i % per);
	return row + (i / per) * QT<Q>::SIZE;
}

// store32 writes 32 values, in 16-byte stores when y is aligned (the
// scalar stores of a thread's 64 or 128 bytes made dequant_ a third as
// fast as a copy).
template <int Q, class T> __device__ __forceinline__ void store32(T* y, const float* v, bool vec) {
	if (vec) {
		const int N = 16 / sizeof(T);
#pragma unroll
		for (int c = 0; c < 32 / N; c++) {
			Vec<T> o;
#pragma unroll
			for (int e = 0; e < N; e++) o.v[e] = Traits<T>::store(v[c * N + e]);
			((Vec<T>*)y)[c] = o;
		}
		return;
	}
#pragma unroll
	for (int i = 0; i < 32; i++) y[i] = Traits<T>::store(v[i]);
}

__device__ __forceinline__ bool aligned16(const void* p) { return ((u64)p & 15) == 0; }

// dot32 is 32 values of x times v, x read 16 bytes at a time when aligned
// and multiplied as it comes (a register array of x's 32 values cut
// qmatvec's occupancy).
template <class T> __device__ __forceinline__ float dot32(const T* __restrict__ x, const float* v, bool vec) {
	float s = 0.0f;
	if (vec) {
		const int N = 16 / sizeof(T);
#pragma unroll
		for (int c = 0; c < 32 / N; c++) {
			const Vec<T> in = ((const Vec<T>*)x)[c];
#pragma unroll
			for (int e = 0; e < N; e++) s += v[c * N + e] * Traits<T>::load(in.v[e]);
		}
		return s;
	}
#pragma unroll
	for (int e = 0; e < 32; e++) s += v[e] * Traits<T>::load(x[e]);
	return s;
}

template <int Q, class T> __device__ __forceinline__ void dequant(u64 chunks, const u8* __restrict__ w, T* __restrict__ y) {
	const bool vec = aligned16(y);
	float v[32];
	for (u64 i = gstart(); i < chunks; i += gstep()) {
		int c;
		const u8* b = chunk_at<Q>(w, i, c);
		decode<Q>(b, c, v);
		store32<Q>(y + i * 32, v, vec);
	}
}

// qrows: row ids[r] of w (k elements, row bytes rb), chunk by chunk.
template <int Q, class T> __device__ __forceinline__ void qrows(u64 nids, u64 k, u64 rows, const i64* ids, const u8* w, T* y) {
	const u64 per = k / 32, rb = k / QT<Q>::BLOCK * QT<Q>::SIZE;
	float v[32];
	for (u64 i = gstart(); i < nids * per; i += gstep()) {
		const u64 r = i / per, ch = i % per;
		const i64 id = ids[r];
		if (id < 0 || (u64)id >= rows) {
#pragma unroll
			for (int e = 0; e < 32; e++) v[e] = 0.0f;
		} else {
			int c;
			const u8* b = chunk_at<Q>(w + (u64)id * rb, ch, c);
			decode<Q>(b, c, v);
		}
		store32<Q>(y + r * k + ch * 32, v, aligned16(y));
	}
}

// qmatvec: a warp a row j of w; lane l takes the row's chunks l, l + warp,
// ...; each chunk meets the m rows of x.
template <int Q, class T>
__device__ __forceinline__ void qmatvec(int m, u64 n, u64 k, const T* __restrict__ x, const u8* __restrict__ w, T* __restrict__ y) {
	const int lane = threadIdx.x % warpSize, wib = threadIdx.x / warpSize, wpb = blockDim.x / warpSize;
	const u64 per = k / 32, rb = k / QT<Q>::BLOCK * QT<Q>::SIZE;
	const bool vec = aligned16(x); // with k a multiple of 32, every chunk of x is then aligned
	for (u64 j = (u64)blockIdx.x * wpb + wib; j < n; j += (u64)gridDim.x * wpb) {
		const u8* row = w + j * rb;
		float acc[QMV_ROWS];
#pragma unroll
		for (int r = 0; r < QMV_ROWS; r++) acc[r] = 0.0f;
#pragma unroll 2
		for (u64 i = lane; i < per; i += warpSize) {
			int c;
			const u8* b = chunk_at<Q>(row, i, c);
			float v[32];
			decode<Q>(b, c, v);
#pragma unroll
			for (int r = 0; r < QMV_ROWS; r++) {
				if (r < m) acc[r] += dot32<T>(x + r * k + i * 32, v, vec);
			}
		}
#pragma unroll
		for (int r = 0; r < QMV_ROWS; r++) {
			if (r < m) {
				float s = acc[r];
				for (int o = warpSize / 2; o > 0; o >>= 1) s += __shfl_xor(s, o);
				if (lane == 0) y[r * n + j] = Traits<T>::store(s);
			}
		}
	}
}

#define Q_KERNELS(QN, Q, TN, T)                                                                                      \
	Q_KERNEL dequant_##QN##_##TN(u64 chunks, const u8* w, T* y) { dequant<Q, T>(chunks, w, y); }                       \
	Q_KERNEL qrows_##QN##_##TN(u64 nids, u64 k, u64 rows, const i64* ids, const u8* w, T* y) {                         \
		qrows<Q, T>(nids, k, rows, ids, w, y);                                                                       \
	}                                                                                                                  \
	Q_KERNEL qmatvec_##QN##_##TN(int m, u64 n, u64 k, const T* x, const u8* w, T* y) { qmatvec<Q, T>(m, n, k, x, w, y); }

#define Q_DTYPES(QN, Q) Q_KERNELS(QN, Q, f32, f32) Q_KERNELS(QN, Q, f16, f16) Q_KERNELS(QN, Q, bf16, bf16)

Q_DTYPES(q4_0, GGML_Q4_0)
Q_DTYPES(q4_1, GGML_Q4_1)
Q_DTYPES(q5_0, GGML_Q5_0)
Q_DTYPES(q5_1, GGML_Q5_1)
Q_DTYPES(q8_0, GGML_Q8_0)
Q_DTYPES(q2_k, GGML_Q2_K)
Q_DTYPES(q3_k, GGML_Q3_K)
Q_DTYPES(q4_k, GGML_Q4_K)
Q_DTYPES(q5_k, GGML_Q5_K)
Q_DTYPES(q6_k, GGML_Q6_K)
Q_DTYPES(q8_k, GGML_Q8_K)
