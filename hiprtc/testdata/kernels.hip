// A small kernel set for the compile tests: plain, templated and with
// shared memory and warp shuffles, written once for AMD and NVIDIA.
#include <hip/hip_runtime.h>

template <typename T>
__global__ void axpy(T a, const T* __restrict__ x, T* __restrict__ y, size_t n) {
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (size_t)gridDim.x * blockDim.x) y[i] += a * x[i];
}

template <typename T>
__global__ void fill(T* out, T v, size_t n) {
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) out[i] = v;
}

// One block per row: a warp-shuffle reduction that does not assume the
// warp size.
extern "C" __global__ void row_sum_f32(const float* in, float* out, int cols) {
	extern __shared__ float partial[];
	const float* row = in + (size_t)blockIdx.x * cols;
	float s = 0;
	for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
	for (int off = warpSize / 2; off > 0; off /= 2) s += __shfl_xor(s, off);
	int warp = threadIdx.x / warpSize, lane = threadIdx.x % warpSize;
	if (lane == 0) partial[warp] = s;
	__syncthreads();
	if (threadIdx.x == 0) {
		float t = 0;
		for (int w = 0; w < (blockDim.x + warpSize - 1) / warpSize; w++) t += partial[w];
		out[blockIdx.x] = t * SCALE;
	}
}

extern "C" __global__ void empty() {}
