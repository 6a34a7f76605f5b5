// Copies between views of one shape: the general strided copy (contiguous,
// cat, slice assignment), and a tiled transpose for the views whose two
// last dims are swapped. Kernels move bytes: copy_b<size>,
// transpose_b<size>.
#include "common.h"

// copy: operand 0 is the source, 1 the destination.
template <class T>
__device__ __forceinline__ void copy(const Index& ix, u64 n, const T* src, T* dst) {
	u64 i = gstart(), step = gstep();
	if (ix.rank == 0 && (ix.flags & 1)) {
		const int N = 16 / sizeof(T);
		const u64 nv = n / N;
		for (u64 j = i; j < nv; j += step) ((Vec<T>*)dst)[j] = ((const Vec<T>*)src)[j];
		for (u64 j = nv * N + i; j < n; j += step) dst[j] = src[j];
	} else if (ix.rank == 0) {
		for (; i < n; i += step) dst[i] = src[i];
	} else if (n <= 0xffffffffull) {
		for (; i < n; i += step) dst[offset(ix, 1, (u32)i)] = src[offset(ix, 0, (u32)i)];
	} else {
		for (; i < n; i += step) dst[offset(ix, 1, i)] = src[offset(ix, 0, i)];
	}
}
#define RG_COPY(name, N) \
	RG_KERNEL copy_##name(const Index ix, u64 n, const Bytes<N>::T* src, Bytes<N>::T* dst) { RG_GRID_WAIT(); copy(ix, n, src, dst); }
RG_SIZES(RG_COPY)

// copy_rows copies nrows rows of rowlen contiguous elements, a block per
// row: the rows' starts walk `rows` (operand 0 the source, 1 the
// destination); flags bit 0: every row start is 16-byte aligned on both
// sides. Cat and slice assignment write such rows.
template <class T>
__device__ __forceinline__ void copy_rows(const Index& rows, u64 nrows, u64 rowlen, const T* src, T* dst) {
	for (u64 r = blockIdx.x; r < nrows; r += gridDim.x) {
		copy_row(src + offset(rows, 0, r), dst + offset(rows, 1, r), rowlen, rows.flags & 1);
	}
}
#define RG_COPY_ROWS(name, N)                                                                                  \
	RG_KERNEL copy_rows_##name(const Index rows, u64 nrows, u64 rowlen, const Bytes<N>::T* src, Bytes<N>::T* dst) { RG_GRID_WAIT(); \
		copy_rows(rows, nrows, rowlen, src, dst);                                                              \
	}
RG_SIZES(RG_COPY_ROWS)

// transpose writes a batch of contiguous rows×cols matrices from a source
// whose rows are strided by srow and whose columns are contiguous... in the
// other order: dst[b][r][c] = src[b*sbatch + c*scol + r], the source read
// along r (its contiguous dim) and the destination written along c, both
// coalesced, through a tile in shared memory. Grid: (cols/32, rows/32,
// batch), block 32×8.
#define RG_TILE 32
template <class T>
__device__ __forceinline__ void transpose(u64 rows, u64 cols, i64 sbatch, i64 scol, const T* src, T* dst) {
	__shared__ T tile[RG_TILE][RG_TILE + 1];
	const u64 b = blockIdx.z;
	src += b * sbatch;
	dst += b * rows * cols;
	const u64 c0 = (u64)blockIdx.x * RG_TILE, r0 = (u64)blockIdx.y * RG_TILE;
	// Read: threads along r (contiguous in src), rows of the tile along c.
	for (int j = threadIdx.y; j < RG_TILE; j += blockDim.y) {
		u64 c = c0 + j, r = r0 + threadIdx.x;
		if (c < cols && r < rows) tile[j][threadIdx.x] = src[c * scol + r];
	}
	__syncthreads();
	// Write: threads along c (contiguous in dst).
	for (int j = threadIdx.y; j < RG_TILE; j += blockDim.y) {
		u64 r = r0 + j, c = c0 + threadIdx.x;
		if (c < cols && r < rows) dst[r * cols + c] = tile[threadIdx.x][j];
	}
}
#define RG_TRANSPOSE(name, N)                                                                                        \
	RG_KERNEL transpose_##name(u64 rows, u64 cols, i64 sbatch, i64 scol, const Bytes<N>::T* src, Bytes<N>::T* dst) { RG_GRID_WAIT(); \
		transpose(rows, cols, sbatch, scol, src, dst);                                                                 \
	}
RG_SIZES(RG_TRANSPOSE)
