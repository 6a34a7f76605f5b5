// The quantized ops on GGML blocks (package candle's quant_cpu.go lays out
// each type): a block is decoded 32 values at a time, a chunk (a K type's
// block of 256 is eight chunks), the unit every kernel here works in.
//   dequant_<q>_<dt>   chunks to dt, a thread a chunk
//   qrows_<q>_<dt>     the rows ids name (i64; out of range: zeros), a thread a chunk
//   qmatvec_<q>_<dt>   y (m, n) = x (m, k) · wᵀ for m ≤ QMV_ROWS: a warp a row of w,
//                      its lanes over the row's chunks, each chunk read once for the
//                      m rows of x; warp sums through shuffles (any warp size). For
//                      f32 x, and f16 and bf16 x of Q2_K, Q3_K and Q8_K: the other
//                      types multiply 2-byte x in qmatvec8.
//   qx_<dt>            x (m, k) to 8 bits a chunk of 32, as llama.cpp's q8_1, once a
//                      product; it fuses x's RMSNorm or a gated MLP's silu(a)·b
//   qmatvec8_<q>_<dt>  qmatvec of qx's x: a chunk's product is eight 4-byte integer
//                      dot products (dp4a, sdot4) and one scaling; it adds a
//                      residual to y
//   qmatvec8w_<q>_<dt> qmatvec8 of up to QMV_WIDE rows (decode batches of 5 to 8),
//                      in a kernel of its own: twice the accumulators would cost
//                      the common one row registers
//   qmatvec8s_q6_k_<dt> qmatvec8 of Q6_K and one row of x, each row of w first copied
//                      into shared memory in 16-byte loads (rows that keep the alignment)
//   qmatvec8k4_<dt>    qmatvec8 of Q4_K and one row of x (decode at batch 1) in
//                      16-byte loads, x in shared memory; qmatvec8k4x2_<dt> two
//                      rows of w a warp, for large n; qmatvec8k4q_<dt> and
//                      qmatvec8k4qx2_<dt> quantize x themselves (qx in the kernel)
// (More rows run on BLAS over slices of w that dequant_ expands: quant_hip.go.)
// Blocks are read with 2-byte loads (every block size is even, and the f16
// fields sit at even offsets), 16-byte ones where a type's block keeps
// them aligned (Q4_K, Q5_K).
#include "common.h"

#define QMV_ROWS 4
#define QMV_WIDE 8
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

// ---- 8-bit dot products ----

// dp4a is the sum of the four signed byte products of a and b, plus c.
__device__ __forceinline__ int dp4a(int a, int b, int c) {
#if defined(__HIP_PLATFORM_NVIDIA__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 610
	return __dp4a(a, b, c);
#elif defined(__gfx906__) || defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx942__) || defined(__gfx950__)
	return __builtin_amdgcn_sdot4(a, b, c, false);
#elif defined(__GFX11__) || defined(__GFX12__)
	return __builtin_amdgcn_sudot4(true, a, true, b, c, false);
#else
	for (int e = 0; e < 32; e += 8) c += (int)(signed char)(a >> e) * (int)(signed char)(b >> e);
	return c;
#endif
}

// qchunk<Q> gives chunk c of a block of the 8-bit path's types (Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K) as 32 integers q (8 words of
// 4 bytes, values in -128..127) and the affine map to its values: value
// i = a0·q[i] + b0 for i < 16, a1·q[i] + b1 above. Against x ≈ dx·xq, the
// chunk's product is dx·(a0·Σ₀ q·xq + a1·Σ₁ q·xq + b0·Σ₀ xq + b1·Σ₁ xq)
// over the halves.
template <int Q> __device__ __forceinline__ void qchunk(const u8* b, int c, int* q, float& a0, float& a1, float& b0, float& b1);

// nibbles: q[t] the low nibbles of 4-byte word t of qs, q[4 + t] the high
// ones (Q4_0's and Q5_0's element j in byte j's low nibble, j + 16 in its
// high one).
__device__ __forceinline__ void nibbles(const u8* qs, int* q) {
#pragma unroll
	for (int t = 0; t < 4; t++) {
		const u32 w = u32at(qs + 4 * t);
		q[t] = (int)(w & 0x0F0F0F0Fu);
		q[4 + t] = (int)(w >> 4 & 0x0F0F0F0Fu);
	}
}

// bit4 moves bits 0-3 of v to bit 4 of bytes 0-3 (Q5's fifth bits).
__device__ __forceinline__ int bit4(u32 v) {
	return (int)((v << 4 & 0x10u) | (v << 11 & 0x1000u) | (v << 18 & 0x100000u) | (v << 25 & 0x10000000u));
}

template <> __device__ __forceinline__ void qchunk<GGML_Q4_0>(const u8* b, int c, int* q, float& a0, float& a1, float& b0, float& b1) {
	nibbles(b + 2, q);
	a0 = a1 = h2f(b);
	b0 = b1 = -8.0f * a0;
}

template <> __device__ __forceinline__ void qchunk<GGML_Q4_1>(const u8* b, int c, int* q, float& a0, float& a1, float& b0, float& b1) {
	nibbles(b + 4, q);
	a0 = a1 = h2f(b);
	b0 = b1 = h2f(b + 2);
}

template <int Q> __device__ __forceinline__ void qchunk_q5(const u8* b, int* q, float& a0, float& a1, float& b0, float& b1) {
	const bool one = Q == GGML_Q5_1;
	const int off = one ? 4 : 2;
	const u32 qh = u32at(b + off);
	nibbles(b + off + 4, q);
#pragma unroll
	for (int t = 0; t < 4; t++) {
		q[t] |= bit4(qh >> (4 * t));
		q[4 + t] |= bit4(qh >> (16 + 4 * t));
	}
	a0 = a1 = h2f(b);
	b0 = b1 = one ? h2f(b + 2) : -16.0f * a0;
}
template <> __device__ __forceinline__ void qchunk<GGML_Q5_0>(const u8* b, int c, int* q, float& a0, float& a1, float& b0, float& b1) {
	qchunk_q5<GGML_Q5_0>(b, q, a0, a1, b0, b1);
}
template <> __device__ __forceinline__ void qchunk<GGML_Q5_1>(const u8* b, int c, int* q, float& a0, float& a1, float& b0, float& b1) {
	qchunk_q5<GGML_Q5_1>(b, q, a0, a1, b0, b1);
}

template <> __device__ __forceinline__ void qchunk<GGML_Q8_0>(const u8* b, int c, int* q, float& a0, float& a1, float& b0, float& b1) {
#pragma unroll
	for (int t = 0; t < 8; t++) q[t] = (int)u32at(b + 2 + 4 * t);
	a0 = a1 = h2f(b);
	b0 = b1 = 0.0f;
}

template <int Q> __device__ __forceinline__ void qchunk_k45(const u8* b, int c, int* q, float& a0, float& a1, float& b0, float& b1) {
	const bool five = Q == GGML_Q5_K;
	float sc, mn;
	scale_min_k4(c, b + 4, sc, mn);
	const u8* qs = b + (five ? 48 : 16) + 32 * (c / 2);
	const uint4 q0 = *(const uint4*)qs, q1 = *(const uint4*)(qs + 16);
	const u32 qw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
	const int shift = 4 * (c % 2);
#pragma unroll
	for (int t = 0; t < 8; t++) q[t] = (int)(qw[t] >> shift & 0x0F0F0F0Fu);
	if (five) {
		const uint4 h0 = *(const uint4*)(b + 16), h1 = *(const uint4*)(b + 32);
		const u32 hw[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
		for (int t = 0; t < 8; t++) q[t] |= (int)((hw[t] >> c & 0x01010101u) << 4);
	}
	a0 = a1 = h2f(b) * sc;
	b0 = b1 = -h2f(b + 2) * mn;
}
template <> __device__ __forceinline__ void qchunk<GGML_Q4_K>(const u8* b, int c, int* q, float& a0, float& a1, float& b0, float& b1) {
	qchunk_k45<GGML_Q4_K>(b, c, q, a0, a1, b0, b1);
}
template <> __device__ __forceinline__ void qchunk<GGML_Q5_K>(const u8* b, int c, int* q, float& a0, float& a1, float& b0, float& b1) {
	qchunk_k45<GGML_Q5_K>(b, c, q, a0, a1, b0, b1);
}

template <> __device__ __forceinline__ void qchunk<GGML_Q6_K>(const u8* b, int c, int* q, float& a0, float& a1, float& b0, float& b1) {
	const float d = h2f(b + 208);
	const int n = c / 4, k = c % 4;
	const u8* ql = b + 64 * n + 32 * (k % 2);
	const u8* qh = b + 128 + 32 * n;
#pragma unroll
	for (int t = 0; t < 8; t++) {
		const u32 l = u32at(ql + 4 * t), h = u32at(qh + 4 * t);
		q[t] = (int)((l >> (4 * (k / 2)) & 0x0F0F0F0Fu) | (h >> (2 * k) & 0x03030303u) << 4);
	}
	a0 = d * (float)(signed char)b[192 + 8 * n + 2 * k];
	a1 = d * (float)(signed char)b[192 + 8 * n + 2 * k + 1];
	b0 = -32.0f * a0;
	b1 = -32.0f * a1;
}

// QFuse is what qx fuses into x before quantizing it (package candle's
// Tensor.QMatmulWith): x's rows hold 2k values and the product takes
// silu(first half) · second half (gated); or x is RMSNorm'd with gain
// alpha (not null) and eps.
template <class T> struct QFuse {
	int gated;
	float eps;
	const T* alpha;
};

// load8 is 8 values of T as floats, one 16-byte load when vec (2-byte T,
// aligned).
template <class T> __device__ __forceinline__ void load8(const T* __restrict__ p, bool vec, float* out) {
	if (vec) {
		const Vec<T> in = *(const Vec<T>*)p;
#pragma unroll
		for (int e = 0; e < 8; e++) out[e] = Traits<T>::load(in.v[e]);
	} else {
#pragma unroll
		for (int e = 0; e < 8; e++) out[e] = Traits<T>::load(p[e]);
	}
}

// qx_quant quantizes a chunk (see qx) from a thread's 8 values v: four
// neighbouring threads take a chunk, and the shuffles stay within them
// (any warp size). Every lane calls it. q: the thread's values in 8 bits,
// h: the sum of its half of the chunk's (two threads), d: the chunk's
// scale (NaN for a NaN or an infinity in the chunk).
__device__ __forceinline__ void qx_quant(const float* v, int* q, int& h, float& d) {
	float amax = 0.0f;
	int bad = 0;
#pragma unroll
	for (int j = 0; j < 8; j++) {
		amax = fmaxf(amax, fabsf(v[j]));
		bad |= v[j] - v[j] != 0.0f;
	}
	for (int o = 1; o < 4; o <<= 1) {
		amax = fmaxf(amax, __shfl_xor(amax, o));
		bad |= __shfl_xor(bad, o);
	}
	// v · (127 / amax): one division a chunk where the factor is finite;
	// v / amax for chunks of tinier values, whose factor would overflow.
	float s[8];
	if (amax >= 1e-36f) {
		const float id = 127.0f / amax;
#pragma unroll
		for (int j = 0; j < 8; j++) s[j] = v[j] * id;
	} else {
#pragma unroll
		for (int j = 0; j < 8; j++) s[j] = 127.0f * (v[j] / amax);
	}
	h = 0;
#pragma unroll
	for (int j = 0; j < 2; j++) {
		q[j] = 0;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			const int qi = !bad && amax > 0.0f ? __float2int_rn(s[4 * j + i]) : 0;
			q[j] |= (qi & 0xff) << (8 * i);
			h += qi;
		}
	}
	h += __shfl_xor(h, 1);
	d = bad ? __int_as_float(0x7fc00000) : amax / 127.0f;
}

// block_inv_rms is 1 / RMS of a row of k values from each thread's sum
// of squares ss: a block reduction through red (a float a warp). Every
// thread of the block calls it.
__device__ __forceinline__ float block_inv_rms(float ss, u64 k, float eps, float* red) {
	const int lane = threadIdx.x % RG_WARP, wib = threadIdx.x / RG_WARP, wpb = blockDim.x / RG_WARP;
	for (int o = RG_WARP / 2; o > 0; o >>= 1) ss += __shfl_xor(ss, o);
	if (lane == 0) red[wib] = ss;
	__syncthreads();
	ss = 0.0f;
	for (int i = 0; i < wpb; i++) ss += red[i];
	return 1.0f / sqrtf(ss / (float)k + eps);
}

// qx_chunk stores qx_quant's chunk c (sub: which 8 of it the thread has);
// live says whether the thread has values.
__device__ __forceinline__ void qx_chunk(const float* v, int sub, u64 c, bool live, int* __restrict__ xq, float* __restrict__ xd,
                                         int* __restrict__ xs) {
	int q[2], h;
	float d;
	qx_quant(v, q, h, d);
	if (live) {
		((int2*)xq)[c * 4 + sub] = make_int2(q[0], q[1]);
		if (sub == 0) xd[c] = d;
		if (sub % 2 == 0) xs[2 * c + sub / 2] = h;
	}
}

// qx quantizes x's m rows (k values each, f applied) for qmatvec8, as
// llama.cpp's q8_1: each chunk of 32 values as 8-bit integers (xq: m·k
// bytes), its scale max|x| / 127 (xd: m·k/32 floats) and the integer sums
// of its halves (xs: m·k/16 ints). A NaN or an infinity in a chunk makes
// its scale NaN: the products it meets are NaN, as with float products.
// Grid (blocks, m), for row blockIdx.y:
//   - without a norm, a thread a value, 32 lanes a chunk (shuffles within
//     32 lanes: any warp size), as many blocks as the row fills (eight
//     values a thread, in a block for 2048 of them, measured 0.3-0.7 µs
//     slower on an H200 for decode's rows: fewer blocks);
//   - with one, one block: a thread takes 8 values (one 16-byte load),
//     four threads a chunk (qx_chunk), and one pass: scaling a row leaves
//     its 8-bit values as they are and scales its chunks' scales alike, so
//     the chunks of x · alpha are quantized while the row's squares are
//     summed, and their scales then multiplied by the row's 1 / RMS. A
//     norm summed first in each of eight blocks of a row, then applied in
//     a second read, cost 4.3-4.6 µs on an H200 for a row of 2048 (2.3
//     without the norm).
template <class T>
__device__ __forceinline__ void qx(u64 k, const T* __restrict__ x, const QFuse<T>& f, int* __restrict__ xq, float* __restrict__ xd, int* __restrict__ xs) {
	const int r = blockIdx.y;
	const T* row = x + (u64)r * (f.gated ? 2 * k : k);
	const u64 c0 = (u64)r * (k / 32); // the row's first chunk
	if (!f.alpha) {
		const int l32 = threadIdx.x % 32;
		// k is a multiple of 32: whole chunks a pass, every lane of a chunk in it.
		for (u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x; e < k; e += (u64)gridDim.x * blockDim.x) {
			float v = Traits<T>::load(row[e]);
			if (f.gated) v = v / (1.0f + expf(-v)) * Traits<T>::load(row[k + e]);
			float amax = fabsf(v);
			int bad = v - v != 0.0f;
			for (int o = 16; o > 0; o >>= 1) {
				amax = fmaxf(amax, __shfl_xor(amax, o));
				bad |= __shfl_xor(bad, o);
			}
			const int q = !bad && amax > 0.0f ? __float2int_rn(127.0f * (v / amax)) : 0;
			int h = q;
			for (int o = 8; o > 0; o >>= 1) h += __shfl_xor(h, o);
			const u64 c = c0 + e / 32;
			((signed char*)xq)[c * 32 + l32] = (signed char)q;
			if (l32 == 0) xd[c] = bad ? __int_as_float(0x7fc00000) : amax / 127.0f;
			if (l32 % 16 == 0) xs[2 * c + l32 / 16] = h;
		}
		return;
	}
	const bool vec = sizeof(T) == 2 && aligned16(x) && aligned16(f.alpha);
	const u64 groups = k / 8;
	const int sub = threadIdx.x % 4;
	float ss = 0.0f;
	// The loop's bounds are the block's: every lane shuffles (a chunk's
	// four threads are live or not together: k is a multiple of 32).
	for (u64 base = 0; base < groups; base += blockDim.x) {
		const u64 e8 = base + threadIdx.x;
		const bool live = e8 < groups;
		const u64 e = live ? e8 * 8 : 0;
		float v[8], a[8];
		load8<T>(row + e, vec, v);
		load8<T>(f.alpha + e, vec, a);
#pragma unroll
		for (int j = 0; j < 8; j++) {
			ss += live ? v[j] * v[j] : 0.0f;
			v[j] *= a[j];
		}
		qx_chunk(v, sub, c0 + e8 / 4, live, xq, xd, xs);
	}
	__shared__ float red[1024 / 32];
	const float rs = block_inv_rms(ss, k, f.eps, red);
	// The scales this thread stored, times the 1 / RMS.
	for (u64 e8 = threadIdx.x; sub == 0 && e8 < groups; e8 += blockDim.x) xd[c0 + e8 / 4] *= rs;
}

// qmatvec8 is qmatvec on 8-bit dot products against x as qx left it: a
// row of w to split warps of the block (each over every split-th chunk
// of the row: small n still fills the device), the block's rows in
// passes over w; res (not null, like y) is added to y. R rows of
// accumulators (m <= R).
template <int Q, class T, int R>
__device__ __forceinline__ void qmatvec8(int m, int split, u64 n, u64 k, const int* __restrict__ xq, const float* __restrict__ xd,
                                         const int* __restrict__ xs, const u8* __restrict__ w, T* __restrict__ y, const T* __restrict__ res) {
	__shared__ float part[R][1024 / 32]; // the warps' sums, when split
	const int lane = threadIdx.x % RG_WARP, wib = threadIdx.x / RG_WARP, wpb = blockDim.x / RG_WARP;
	const int rpb = wpb / split, wr = wib / split, ws = wib % split;
	const u64 per = k / 32, rb = k / QT<Q>::BLOCK * QT<Q>::SIZE;
	// The loop's bounds are the block's, not the warp's: its barriers.
	for (u64 base = (u64)blockIdx.x * rpb; base < n; base += (u64)gridDim.x * rpb) {
		const u64 j = base + wr;
		const bool live = j < n;
		const u8* row = w + j * rb;
		float acc[R];
#pragma unroll
		for (int r = 0; r < R; r++) acc[r] = 0.0f;
		if (live) {
#pragma unroll 2
			for (u64 i = ws * RG_WARP + lane; i < per; i += split * RG_WARP) {
				int c;
				const u8* b = chunk_at<Q>(row, i, c);
				int q[8];
				float a0, a1, b0, b1;
				qchunk<Q>(b, c, q, a0, a1, b0, b1);
#pragma unroll
				for (int r = 0; r < R; r++) {
					if (r < m) {
						const u64 g = r * per + i;
						const int4* xv = (const int4*)(xq + g * 8);
						const int4 x0 = xv[0], x1 = xv[1];
						const int d0 = dp4a(q[3], x0.w, dp4a(q[2], x0.z, dp4a(q[1], x0.y, dp4a(q[0], x0.x, 0))));
						const int d1 = dp4a(q[7], x1.w, dp4a(q[6], x1.z, dp4a(q[5], x1.y, dp4a(q[4], x1.x, 0))));
						acc[r] += xd[g] * (a0 * (float)d0 + a1 * (float)d1 + b0 * (float)xs[2 * g] + b1 * (float)xs[2 * g + 1]);
					}
				}
			}
		}
		// (Loops over r to R: acc stays in registers.)
#pragma unroll
		for (int r = 0; r < R; r++) {
			float s = acc[r];
			for (int o = RG_WARP / 2; o > 0; o >>= 1) s += __shfl_xor(s, o);
			acc[r] = s;
		}
		if (split > 1) {
			if (lane == 0) {
#pragma unroll
				for (int r = 0; r < R; r++) part[r][wib] = acc[r];
			}
			__syncthreads();
			if (ws == 0) {
#pragma unroll
				for (int r = 0; r < R; r++) {
					float s = 0.0f;
					for (int p = 0; p < split; p++) s += part[r][wib + p];
					acc[r] = s;
				}
			}
			__syncthreads();
		}
		if (live && ws == 0 && lane == 0) {
#pragma unroll
			for (int r = 0; r < R; r++) {
				if (r < m) y[r * n + j] = Traits<T>::store(acc[r] + (res ? Traits<T>::load(res[r * n + j]) : 0.0f));
			}
		}
	}
}

// qmatvec8s is qmatvec8 of one row of x (m = 1) for weights whose rows
// keep 16-byte alignment (quant_hip.go checks): each warp first copies a
// row of w into shared memory in 16-byte loads, all in flight at once,
// every byte of a line used; then its lanes take the row's chunks from
// there as qmatvec8 does, and x (qx's output, staged once a block).
// Dynamic shared memory: k·11/8 bytes of x, then a row of w for each warp.
// For Q6_K, whose 210-byte blocks qmatvec8 reads in 2-byte and byte loads
// straight from global memory: on an H200 (BF16 x, qx included, µs)
// 128256×2048 117.7 against 143.8, 16384×2048 15.5 against 22.2,
// 3072×2048 5.9 against 7.0. Q8_0's, Q4_0's and Q5_K's LM heads ran
// 110→134, 77→92 and 94→98 µs so: the copy and the products of a row
// take turns, where qmatvec8 overlaps them across a warp's loads.
template <int Q, class T>
__device__ __forceinline__ void qmatvec8s(u64 n, u64 k, const int* __restrict__ xq, const float* __restrict__ xd,
                                          const int* __restrict__ xs, const u8* __restrict__ w, T* __restrict__ y,
                                          const T* __restrict__ res) {
	extern __shared__ int4 q8s[];
	const int lane = threadIdx.x % RG_WARP, wib = threadIdx.x / RG_WARP, wpb = blockDim.x / RG_WARP;
	const u64 per = k / 32, rb = k / QT<Q>::BLOCK * QT<Q>::SIZE, r16 = rb / 16;
	int4* const sq = q8s;                         // x's quants: k bytes
	float* const sd = (float*)(q8s + k / 16);     // its scales: per floats
	int* const ss = (int*)(sd + per);             // its half sums: 2·per ints
	int4* const sw = q8s + k / 16 + per * 12 / 16 + wib * r16; // this warp's row of w
	for (u64 g = threadIdx.x; g < k / 16; g += blockDim.x) sq[g] = ((const int4*)xq)[g];
	for (u64 g = threadIdx.x; g < per; g += blockDim.x) sd[g] = xd[g];
	for (u64 g = threadIdx.x; g < 2 * per; g += blockDim.x) ss[g] = xs[g];
	// The loop's bounds are the block's, not the warp's: its barriers.
	for (u64 base = (u64)blockIdx.x * wpb; base < n; base += (u64)gridDim.x * wpb) {
		const u64 j = base + wib;
		const bool live = j < n;
		if (live) {
			const int4* src = (const int4*)(w + j * rb);
#pragma unroll 4
			for (u64 g = lane; g < r16; g += RG_WARP) sw[g] = src[g];
		}
		__syncthreads(); // the rows (and, the first time, x) are in
		float acc = 0.0f;
		if (live) {
			const u8* row = (const u8*)sw;
#pragma unroll 2
			for (u64 i = lane; i < per; i += RG_WARP) {
				int c;
				const u8* b = chunk_at<Q>(row, i, c);
				int q[8];
				float a0, a1, b0, b1;
				qchunk<Q>(b, c, q, a0, a1, b0, b1);
				const int4 x0 = sq[2 * i], x1 = sq[2 * i + 1];
				const int d0 = dp4a(q[3], x0.w, dp4a(q[2], x0.z, dp4a(q[1], x0.y, dp4a(q[0], x0.x, 0))));
				const int d1 = dp4a(q[7], x1.w, dp4a(q[6], x1.z, dp4a(q[5], x1.y, dp4a(q[4], x1.x, 0))));
				acc += sd[i] * (a0 * (float)d0 + a1 * (float)d1 + b0 * (float)ss[2 * i] + b1 * (float)ss[2 * i + 1]);
			}
		}
		for (int o = RG_WARP / 2; o > 0; o >>= 1) acc += __shfl_xor(acc, o);
		if (live && lane == 0) y[j] = Traits<T>::store(acc + (res ? Traits<T>::load(res[j]) : 0.0f));
		__syncthreads(); // every warp is done with its row
	}
}

// k4x is what a lane of qmatvec8k4 takes of x for a pair of chunks 2p,
// 2p + 1: their 64 8-bit values, scales and half sums.
struct k4x {
	int4 q[4];
	float2 d;
	int4 s;
};

// k4pair is the product of x with chunks 2t and 2t + 1 of a Q4_K block
// whose first 16 bytes (d, dmin, the 12 scale bytes) are h and whose quant
// bytes of those chunks are q0, q1 (chunk 2t in the low nibbles, 2t + 1 in
// the high ones): scale_min_k4's unpacking on the head's words.
__device__ __forceinline__ float k4pair(uint4 h, uint4 q0, uint4 q1, int t, const k4x& x) {
	const float d = __half2float(__ushort_as_half((unsigned short)(h.x & 0xFFFFu)));
	const float dmin = __half2float(__ushort_as_half((unsigned short)(h.x >> 16)));
	const u32 qw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
	float out = 0.0f;
#pragma unroll
	for (int e = 0; e < 2; e++) {
		const int sh = 8 * ((2 * t + e) & 3);
		const u32 ys = h.y >> sh, zs = h.z >> sh, ws = h.w >> sh;
		const float sc = (float)(t < 2 ? ys & 63u : (ws & 15u) | (ys >> 2 & 0x30u));
		const float mn = (float)(t < 2 ? zs & 63u : (ws >> 4 & 15u) | (zs >> 2 & 0x30u));
		int dot = 0;
#pragma unroll
		for (int i = 0; i < 8; i++) {
			const int q = (int)(qw[i] >> (4 * e) & 0x0F0F0F0Fu);
			const int4 xv = x.q[2 * e + i / 4];
			dot = dp4a(q, i % 4 == 0 ? xv.x : i % 4 == 1 ? xv.y : i % 4 == 2 ? xv.z : xv.w, dot);
		}
		const int hs = e == 0 ? x.s.x + x.s.y : x.s.z + x.s.w;
		out += (e == 0 ? x.d.x : x.d.y) * (d * sc * (float)dot - dmin * mn * (float)hs);
	}
	return out;
}

// qmatvec8k4 is qmatvec8 for Q4_K weights and one row of x. A lane takes a
// pair of chunks of a block at a time: the 32 quant bytes they share (one's
// values in the low nibbles, the other's in the high ones) and the block's
// 16-byte head, three 16-byte loads for 64 values where qmatvec8 makes a
// dozen loads a chunk of 32. x waits in shared memory (dynamic: 88 bytes a
// pair, quant_hip.go's k4Shared), staged once a block: xq in four planes
// (plane i holds 16-byte word i of each pair: a warp's reads of a plane
// are consecutive), then the half sums and the scales. RW rows a warp,
// their loads in flight together; split warps a row as in qmatvec8. On an
// H200 (Q4_K, BF16 x, µs, against qmatvec8): 128256×2048 40.5 with two rows
// a warp (48.1 with one, 82.6); 16384×2048 6.75 (7.8, 11.8); 3072×2048 3.14
// with one (3.27 with two, 3.61); 2048×8192 4.75 (6.0).
//
// With a row a warp, a warp's first loads of w come first, before the
// kernel waits for the previous one (RG_GRID_WAIT: launched early, it
// starts while that one ends) and before x: on an H200 the Q4_K decode
// step of the 1B model took 704-717 µs against 737-745 with the wait
// first, 755-772 launched as usual.
//
// FX: the block quantizes x itself (f applied, qx's way: a thread 8
// values, four threads a chunk) instead of copying qx's output. For rows
// of x a block quantizes in one pass (quant_hip.go): qx's launch costs
// more there (q, k and v with the norm 5.07 µs against 5.70; o 3.69
// against 4.52; the LM head 41.3 against 42.7), but a gated 2 × 8192 row
// in four passes made down 10.6 µs against 6.5.
template <class T, int RW, bool FX>
__device__ __forceinline__ void qmatvec8k4(int split, u64 n, u64 k, const T* __restrict__ x, const QFuse<T> f,
                                           const int* __restrict__ xq, const float* __restrict__ xd,
                                           const int* __restrict__ xs, const u8* __restrict__ w, T* __restrict__ y,
                                           const T* __restrict__ res) {
	__shared__ float part[RW][1024 / 32]; // the warps' sums: a row's splits; with FX x's squares
	extern __shared__ int4 k4s[];
	const int lane = threadIdx.x % RG_WARP, wib = threadIdx.x / RG_WARP, wpb = blockDim.x / RG_WARP;
	const int rpb = wpb / split * RW, wr = wib / split, ws = wib % split;
	const u64 pairs = k / 64, rb = k / 256 * 144, p0 = (u64)ws * RG_WARP + lane, stride = (u64)split * RG_WARP;
	const u64 base0 = (u64)blockIdx.x * rpb;
	float2* const d2 = (float2*)(k4s + 5 * pairs);
	// The first pair's loads, before x's and before the previous kernel
	// has ended (RG_GRID_WAIT below: the weights are no kernel's output),
	// a row a warp (with two, the registers they hold meanwhile spill).
	const bool early = RW == 1 && base0 < n && p0 < pairs;
	uint4 h0[RW], a0[RW], b0[RW];
	if (early) {
#pragma unroll
		for (int r = 0; r < RW; r++) {
			const u8* b = w + min(base0 + (u64)wr * RW + r, n - 1) * rb + p0 / 4 * 144;
			const int t = (int)(p0 % 4);
			h0[r] = *(const uint4*)b;
			a0[r] = *(const uint4*)(b + 16 + 32 * t);
			b0[r] = *(const uint4*)(b + 32 + 32 * t);
		}
	}
	RG_GRID_WAIT();
	if (FX) {
		float* const sd = (float*)d2;              // chunk c's scale
		int* const sh = (int*)(k4s + 4 * pairs);    // its half sums at 2c, 2c + 1
		const int sub = threadIdx.x % 4;
		const bool vec = aligned16(x) && (!f.alpha || aligned16(f.alpha));
		const u64 groups = k / 8;
		float ss = 0.0f;
		for (u64 g0 = 0; g0 < groups; g0 += blockDim.x) {
			const u64 e8 = g0 + threadIdx.x;
			const bool live = e8 < groups;
			const u64 e = live ? e8 * 8 : 0;
			float v[8];
			load8<T>(x + e, vec, v);
			if (f.gated) {
				float u[8];
				load8<T>(x + k + e, vec, u);
#pragma unroll
				for (int j = 0; j < 8; j++) v[j] = v[j] / (1.0f + expf(-v[j])) * u[j];
			}
			if (f.alpha) {
				float a[8];
				load8<T>(f.alpha + e, vec, a);
#pragma unroll
				for (int j = 0; j < 8; j++) {
					ss += live ? v[j] * v[j] : 0.0f;
					v[j] *= a[j];
				}
			}
			int q[2], h;
			float d;
			qx_quant(v, q, h, d);
			if (live) {
				const u64 c = e8 / 4;
				((int2*)(k4s + (2 * (c % 2) + sub / 2) * pairs + c / 2))[sub % 2] = make_int2(q[0], q[1]);
				if (sub == 0) sd[c] = d;
				if (sub % 2 == 0) sh[2 * c + sub / 2] = h;
			}
		}
		if (f.alpha) {
			const float rs = block_inv_rms(ss, k, f.eps, part[0]);
			// The scales this thread stored, times the 1 / RMS.
			for (u64 e8 = threadIdx.x; sub == 0 && e8 < groups; e8 += blockDim.x) sd[e8 / 4] *= rs;
		}
	} else {
		const int4* q4 = (const int4*)xq;
		for (u64 g = threadIdx.x; g < 4 * pairs; g += blockDim.x) k4s[g % 4 * pairs + g / 4] = q4[g];
		for (u64 g = threadIdx.x; g < pairs; g += blockDim.x) k4s[4 * pairs + g] = ((const int4*)xs)[g];
		for (u64 g = threadIdx.x; g < pairs; g += blockDim.x) d2[g] = ((const float2*)xd)[g];
	}
	__syncthreads();
	// The loop's bounds are the block's, not the warp's: its barriers.
	for (u64 base = base0; base < n; base += (u64)gridDim.x * rpb) {
		const u64 j0 = base + (u64)wr * RW;
		float acc[RW];
#pragma unroll
		for (int r = 0; r < RW; r++) acc[r] = 0.0f;
		for (u64 p = p0; p < pairs; p += stride) {
			const int t = (int)(p % 4);
			const u64 off = p / 4 * 144;
			uint4 h[RW], q0[RW], q1[RW];
			if (early && base == base0 && p == p0) {
#pragma unroll
				for (int r = 0; r < RW; r++) h[r] = h0[r], q0[r] = a0[r], q1[r] = b0[r];
			} else {
#pragma unroll
				for (int r = 0; r < RW; r++) {
					const u8* b = w + min(j0 + r, n - 1) * rb + off; // a row past n reads row n - 1, unused
					h[r] = *(const uint4*)b;
					q0[r] = *(const uint4*)(b + 16 + 32 * t);
					q1[r] = *(const uint4*)(b + 32 + 32 * t);
				}
			}
			k4x xv;
#pragma unroll
			for (int i = 0; i < 4; i++) xv.q[i] = k4s[i * pairs + p];
			xv.s = k4s[4 * pairs + p];
			xv.d = d2[p];
#pragma unroll
			for (int r = 0; r < RW; r++) acc[r] += k4pair(h[r], q0[r], q1[r], t, xv);
		}
#pragma unroll
		for (int r = 0; r < RW; r++) {
			float s = acc[r];
			for (int o = RG_WARP / 2; o > 0; o >>= 1) s += __shfl_xor(s, o);
			acc[r] = s;
		}
		if (split > 1) {
			if (lane == 0) {
#pragma unroll
				for (int r = 0; r < RW; r++) part[r][wib] = acc[r];
			}
			__syncthreads();
			if (ws == 0) {
#pragma unroll
				for (int r = 0; r < RW; r++) {
					float s = 0.0f;
					for (int i = 0; i < split; i++) s += part[r][wib + i];
					acc[r] = s;
				}
			}
			__syncthreads();
		}
		if (ws == 0 && lane == 0) {
#pragma unroll
			for (int r = 0; r < RW; r++) {
				const u64 j = j0 + r;
				if (j < n) y[j] = Traits<T>::store(acc[r] + (res ? Traits<T>::load(res[j]) : 0.0f));
			}
		}
	}
}

// qmatvec: a warp a row j of w; lane l takes the row's chunks l, l + warp,
// ...; each chunk meets the m rows of x.
template <int Q, class T>
__device__ __forceinline__ void qmatvec(int m, u64 n, u64 k, const T* __restrict__ x, const u8* __restrict__ w, T* __restrict__ y) {
	const int lane = threadIdx.x % RG_WARP, wib = threadIdx.x / RG_WARP, wpb = blockDim.x / RG_WARP;
	const u64 per = k / 32, rb = k / QT<Q>::BLOCK * QT<Q>::SIZE;
	const bool vec = aligned16(x); // with k a multiple of 32, every chunk of x is then aligned
	for (u64 j = (u64)blockIdx.x * wpb + wib; j < n; j += (u64)gridDim.x * wpb) {
		const u8* row = w + j * rb;
		float acc[QMV_ROWS];
#pragma unroll
		for (int r = 0; r < QMV_ROWS; r++) acc[r] = 0.0f;
#pragma unroll 2
		for (u64 i = lane; i < per; i += RG_WARP) {
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
				for (int o = RG_WARP / 2; o > 0; o >>= 1) s += __shfl_xor(s, o);
				if (lane == 0) y[r * n + j] = Traits<T>::store(s);
			}
		}
	}
}

#define Q_KERNELS(QN, Q, TN, T)                                                                                      \
	Q_KERNEL dequant_##QN##_##TN(u64 chunks, const u8* w, T* y) { RG_GRID_WAIT(); dequant<Q, T>(chunks, w, y); }       \
	Q_KERNEL qrows_##QN##_##TN(u64 nids, u64 k, u64 rows, const i64* ids, const u8* w, T* y) { RG_GRID_WAIT();         \
		qrows<Q, T>(nids, k, rows, ids, w, y);                                                                       \
	}
#define QMV_KERNEL(QN, Q, TN, T)                                                                                     \
	Q_KERNEL qmatvec_##QN##_##TN(int m, u64 n, u64 k, const T* x, const u8* w, T* y) { RG_GRID_WAIT(); qmatvec<Q, T>(m, n, k, x, w, y); }

// The 8-bit path, for 2-byte x.
#define Q8_KERNEL(QN, Q, TN, T)                                                                                      \
	Q_KERNEL qmatvec8_##QN##_##TN(int m, int split, u64 n, u64 k, const int* xq, const float* xd, const int* xs,        \
	                              const u8* w, T* y, const T* res) { RG_GRID_WAIT();                                   \
		qmatvec8<Q, T, QMV_ROWS>(m, split, n, k, xq, xd, xs, w, y, res);                                             \
	}                                                                                                                \
	Q_KERNEL qmatvec8w_##QN##_##TN(int m, int split, u64 n, u64 k, const int* xq, const float* xd, const int* xs,       \
	                               const u8* w, T* y, const T* res) { RG_GRID_WAIT();                                  \
		qmatvec8<Q, T, QMV_WIDE>(m, split, n, k, xq, xd, xs, w, y, res);                                             \
	}
// Q4_K against one row of x: a warp a row, and two rows a warp (x2); qx's
// output staged, or x quantized in the kernel (q).
#define K4_KERNELS(TN, T)                                                                                            \
	Q_KERNEL qmatvec8k4_##TN(int split, u64 n, u64 k, const int* xq, const float* xd, const int* xs, const u8* w, T* y,   \
	                         const T* res) { RG_WAITS_INSIDE();                                                      \
		qmatvec8k4<T, 1, false>(split, n, k, nullptr, QFuse<T>{}, xq, xd, xs, w, y, res);                            \
	}                                                                                                                \
	Q_KERNEL qmatvec8k4x2_##TN(int split, u64 n, u64 k, const int* xq, const float* xd, const int* xs, const u8* w,       \
	                           T* y, const T* res) { RG_WAITS_INSIDE();                                              \
		qmatvec8k4<T, 2, false>(split, n, k, nullptr, QFuse<T>{}, xq, xd, xs, w, y, res);                            \
	}                                                                                                                \
	Q_KERNEL qmatvec8k4q_##TN(int split, u64 n, u64 k, const T* x, int gated, float eps, const T* alpha, const u8* w,    \
	                          T* y, const T* res) { RG_WAITS_INSIDE();                                               \
		qmatvec8k4<T, 1, true>(split, n, k, x, QFuse<T>{gated, eps, alpha}, nullptr, nullptr, nullptr, w, y, res);   \
	}                                                                                                                \
	Q_KERNEL qmatvec8k4qx2_##TN(int split, u64 n, u64 k, const T* x, int gated, float eps, const T* alpha, const u8* w,  \
	                            T* y, const T* res) { RG_WAITS_INSIDE();                                             \
		qmatvec8k4<T, 2, true>(split, n, k, x, QFuse<T>{gated, eps, alpha}, nullptr, nullptr, nullptr, w, y, res);   \
	}
K4_KERNELS(f16, f16)
K4_KERNELS(bf16, bf16)
// Q6_K's products of one row through shared memory (qmatvec8s).
#define Q8S_KERNEL(QN, Q, TN, T)                                                                                     \
	Q_KERNEL qmatvec8s_##QN##_##TN(u64 n, u64 k, const int* xq, const float* xd, const int* xs, const u8* w, T* y,      \
	                               const T* res) { RG_GRID_WAIT();                                                     \
		qmatvec8s<Q, T>(n, k, xq, xd, xs, w, y, res);                                                                \
	}
Q8S_KERNEL(q6_k, GGML_Q6_K, f16, f16)
Q8S_KERNEL(q6_k, GGML_Q6_K, bf16, bf16)

#define QX_KERNEL(TN, T)                                                                                             \
	Q_KERNEL qx_##TN(u64 k, const T* x, int gated, float eps, const T* alpha, int* xq, float* xd, int* xs) { RG_GRID_WAIT(); \
		const QFuse<T> f = {gated, eps, alpha};                                                                      \
		qx<T>(k, x, f, xq, xd, xs);                                                                                  \
	}
QX_KERNEL(f16, f16)
QX_KERNEL(bf16, bf16)

// Every type's kernels for f32, f16 and bf16; the products of 2-byte x on
// 8-bit dot products (Q_I8) where a type has them (quant_hip.go's
// qmatvecI8), in floats (Q_FLOAT) where not.
#define Q_ALL(QN, Q) Q_KERNELS(QN, Q, f32, f32) Q_KERNELS(QN, Q, f16, f16) Q_KERNELS(QN, Q, bf16, bf16) QMV_KERNEL(QN, Q, f32, f32)
#define Q_I8(QN, Q) Q_ALL(QN, Q) Q8_KERNEL(QN, Q, f16, f16) Q8_KERNEL(QN, Q, bf16, bf16)
#define Q_FLOAT(QN, Q) Q_ALL(QN, Q) QMV_KERNEL(QN, Q, f16, f16) QMV_KERNEL(QN, Q, bf16, bf16)

Q_I8(q4_0, GGML_Q4_0)
Q_I8(q4_1, GGML_Q4_1)
Q_I8(q5_0, GGML_Q5_0)
Q_I8(q5_1, GGML_Q5_1)
Q_I8(q8_0, GGML_Q8_0)
Q_FLOAT(q2_k, GGML_Q2_K)
Q_FLOAT(q3_k, GGML_Q3_K)
Q_I8(q4_k, GGML_Q4_K)
Q_I8(q5_k, GGML_Q5_K)
Q_I8(q6_k, GGML_Q6_K)
Q_FLOAT(q8_k, GGML_Q8_K)
