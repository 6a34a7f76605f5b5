// 16-bit floats through HIP's headers: hip_fp16.h and hip_bf16.h come from
// ROCm on AMD and map to CUDA's cuda_fp16.h and cuda_bf16.h on NVIDIA.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bf16.h>

extern "C" __global__ void halves(const float* in, __half* h, __hip_bfloat16* b, float* back, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		h[i] = __float2half(in[i]);
		b[i] = __float2bfloat16(in[i]);
		back[i] = __half2float(h[i]) + __bfloat162float(b[i]);
	}
}
