// Indexed reads and writes along one dim, for IndexSelect and Gather
// (take), Scatter (put), ScatterAdd and IndexAdd (put_add). Operand 0 is
// the indexed tensor with the dim's stride zeroed (the kernel adds index ×
// stride), operand 1 the indices, operand 2 the source of a put. An index
// out of [0, size) reads 0 and writes nothing: a kernel cannot stop.
// Kernel names: take_<index dtype>_b<size>, take_rows_<index dtype>_b<size>,
// put_<index dtype>_b<size>, put_rows_<index dtype>_b<size> (IndexAssign's
// rows), put_add_<index dtype>_<dtype>.
#include "common.h"

template <class I> __device__ __forceinline__ i64 index_value(I v) { return (i64)v; }

template <class I, class T>
__device__ __forceinline__ void take(const Index& ix, u64 n, const I* ids, const T* src, T* out, i64 size, i64 stride) {
	for (u64 i = gstart(); i < n; i += gstep()) {
		i64 id = index_value(ids[offset(ix, 1, i)]);
		out[i] = id >= 0 && id < size ? src[offset(ix, 0, i) + id * stride] : T(0);
	}
}

template <class I, class T>
__device__ __forceinline__ void put(const Index& ix, u64 n, const I* ids, const T* src, T* dst, i64 size, i64 stride) {
	for (u64 i = gstart(); i < n; i += gstep()) {
		i64 id = index_value(ids[offset(ix, 1, i)]);
		if (id >= 0 && id < size) dst[offset(ix, 0, i) + id * stride] = src[offset(ix, 2, i)];
	}
}

// take_rows is take for a tensor whose elements after the indexed dim are
// contiguous: each output row (rowlen elements) copies one source row.
// rows walks the rows: operand 0 the source with the indexed dim's stride
// zeroed, operand 1 the indices; flags bit 0: every row start is 16-byte
// aligned. A bad index gives a row of zeros.
template <class I, class T>
__device__ __forceinline__ void take_rows(const Index& rows, u64 nrows, u64 rowlen, const I* ids, const T* src, T* out, i64 size,
                                          i64 stride) {
	for (u64 r = blockIdx.x; r < nrows; r += gridDim.x) {
		i64 id = index_value(ids[offset(rows, 1, r)]);
		T* d = out + r * rowlen;
		if (id < 0 || id >= size) {
			for (u64 k = threadIdx.x; k < rowlen; k += blockDim.x) d[k] = T(0);
			continue;
		}
		copy_row(src + offset(rows, 0, r) + id * stride, d, rowlen, rows.flags & 1);
	}
}

// put_rows writes whole rows in place (IndexAssign): rows walks the rows
// with operand 0 the destination (the indexed dim's stride zeroed), 1 the
// indices, 2 the source; each row's rowlen elements are contiguous in both.
// flags bit 0: every row start is 16-byte aligned. A bad index writes
// nothing.
template <class I, class T>
__device__ __forceinline__ void put_rows(const Index& rows, u64 nrows, u64 rowlen, const I* ids, const T* src, T* dst, i64 size,
                                         i64 stride) {
	for (u64 r = blockIdx.x; r < nrows; r += gridDim.x) {
		i64 id = index_value(ids[offset(rows, 1, r)]);
		if (id < 0 || id >= size) continue;
		copy_row(src + offset(rows, 2, r), dst + offset(rows, 0, r) + id * stride, rowlen, rows.flags & 1);
	}
}

// Atomic adds for every dtype: native where there is one, else a
// compare-and-swap loop on the aligned 32-bit word that holds the element.
__device__ __forceinline__ void atomic_add(f32* p, f32 v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(f64* p, f64 v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(u32* p, u32 v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(i64* p, i64 v) { atomicAdd((unsigned long long*)p, (unsigned long long)v); }
template <class T>
__device__ __forceinline__ void atomic_add_narrow(T* p, T v) {
	u32* w = (u32*)((u64)p & ~(u64)3);
	const u32 shift = (u32)((u64)p & 3) * 8, mask = ((1u << (8 * sizeof(T))) - 1) << shift;
	u32 old = *w, assumed;
	do {
		assumed = old;
		u32 bits = (assumed & mask) >> shift;
		T cur = *(T*)&bits; // the low bytes, little-endian
		T sum = Traits<T>::store(Traits<T>::load(cur) + Traits<T>::load(v));
		u32 nb = 0;
		*(T*)&nb = sum;
		old = atomicCAS(w, assumed, (assumed & ~mask) | ((nb << shift) & mask));
	} while (assumed != old);
}
__device__ __forceinline__ void atomic_add(f16* p, f16 v) { atomic_add_narrow(p, v); }
__device__ __forceinline__ void atomic_add(bf16* p, bf16 v) { atomic_add_narrow(p, v); }
__device__ __forceinline__ void atomic_add(u8* p, u8 v) { atomic_add_narrow(p, v); }

template <class I, class T>
__device__ __forceinline__ void put_add(const Index& ix, u64 n, const I* ids, const T* src, T* dst, i64 size, i64 stride) {
	for (u64 i = gstart(); i < n; i += gstep()) {
		i64 id = index_value(ids[offset(ix, 1, i)]);
		if (id >= 0 && id < size) atomic_add(&dst[offset(ix, 0, i) + id * stride], src[offset(ix, 2, i)]);
	}
}

#define RG_TAKE_PUT(iname, I, name, N)                                                                        \
	RG_KERNEL take_rows_##iname##_##name(const Index rows, u64 nrows, u64 rowlen, const I* ids,                   \
	                                     const Bytes<N>::T* src, Bytes<N>::T* out, i64 size, i64 stride) { RG_GRID_WAIT(); \
		take_rows(rows, nrows, rowlen, ids, src, out, size, stride);                                               \
	}                                                                                                         \
	RG_KERNEL take_##iname##_##name(const Index ix, u64 n, const I* ids, const Bytes<N>::T* src,             \
	                                Bytes<N>::T* out, i64 size, i64 stride) { RG_GRID_WAIT();                 \
		take(ix, n, ids, src, out, size, stride);                                                             \
	}                                                                                                         \
	RG_KERNEL put_##iname##_##name(const Index ix, u64 n, const I* ids, const Bytes<N>::T* src,              \
	                               Bytes<N>::T* dst, i64 size, i64 stride) { RG_GRID_WAIT();                  \
		put(ix, n, ids, src, dst, size, stride);                                                              \
	}                                                                                                         \
	RG_KERNEL put_rows_##iname##_##name(const Index rows, u64 nrows, u64 rowlen, const I* ids,                    \
	                                    const Bytes<N>::T* src, Bytes<N>::T* dst, i64 size, i64 stride) { RG_GRID_WAIT(); \
		put_rows(rows, nrows, rowlen, ids, src, dst, size, stride);                                                \
	}
#define RG_TAKE_PUT_SIZES(iname, I) \
	RG_TAKE_PUT(iname, I, b1, 1) RG_TAKE_PUT(iname, I, b2, 2) RG_TAKE_PUT(iname, I, b4, 4) RG_TAKE_PUT(iname, I, b8, 8)
RG_INDEX_TYPES(RG_TAKE_PUT_SIZES)

#define RG_PUT_ADD(iname, I, tname, T)                                                                        \
	RG_KERNEL put_add_##iname##_##tname(const Index ix, u64 n, const I* ids, const T* src, T* dst, i64 size, \
	                                    i64 stride) { RG_GRID_WAIT();                                         \
		put_add(ix, n, ids, src, dst, size, stride);                                                          \
	}
#define RG_PUT_ADD_TYPES(iname, I)                                                                            \
	RG_PUT_ADD(iname, I, f32, f32) RG_PUT_ADD(iname, I, f16, f16) RG_PUT_ADD(iname, I, bf16, bf16)            \
	RG_PUT_ADD(iname, I, f64, f64) RG_PUT_ADD(iname, I, u8, u8) RG_PUT_ADD(iname, I, u32, u32)                \
	RG_PUT_ADD(iname, I, i64, i64)
RG_INDEX_TYPES(RG_PUT_ADD_TYPES)
