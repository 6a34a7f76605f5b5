// rocm-go's kernels for the primitives legacy cuDNN lacks (package miopen
// runs them on the NVIDIA platform) and for MIOpen's power activation
// gradient, which MIOpen 6.4 computes without dy. One source for hipRTC and
// NVRTC. Semantics are MIOpen's (MIOpen's test references); arithmetic is
// in float for 16- and 32-bit data, in double for double.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bf16.h>

// Shape describes up to four tensors of the same dimensions with their own
// strides, in elements; package miopen fills it (kernelShape).
struct Shape {
	long long n; // elements
	int rank;
	long long dims[8];
	long long strides[4][8];
};

__device__ __forceinline__ long long offset_of(const Shape& s, int t, long long i) {
	long long off = 0;
	for (int d = s.rank - 1; d >= 0; d--) {
		long long c = i % s.dims[d];
		i /= s.dims[d];
		off += c * s.strides[t][d];
	}
	return off;
}

__device__ __forceinline__ float load(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load(const __hip_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ double load(const double* p) { return *p; }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half(v); }
__device__ __forceinline__ void store(__hip_bfloat16* p, float v) { *p = __float2bfloat16(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(double* p, double v) { *p = v; }

template <class T> struct acc { typedef float type; };
template <> struct acc<double> { typedef double type; };

__device__ __forceinline__ float rg_exp(float x) { return expf(x); }
__device__ __forceinline__ double rg_exp(double x) { return exp(x); }
__device__ __forceinline__ float rg_expm1(float x) { return expm1f(x); }
__device__ __forceinline__ double rg_expm1(double x) { return expm1(x); }
__device__ __forceinline__ float rg_log1p(float x) { return log1pf(x); }
__device__ __forceinline__ double rg_log1p(double x) { return log1p(x); }
__device__ __forceinline__ float rg_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double rg_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float rg_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double rg_pow(double x, double y) { return pow(x, y); }
__device__ __forceinline__ float rg_eps(float) { return 1.1920929e-7f; }
__device__ __forceinline__ double rg_eps(double) { return 2.220446049250313e-16; }

// MIOpen's activation modes (miopenActivationMode_t).
enum { RG_PASTHRU = 0, RG_LOGISTIC, RG_TANH, RG_RELU, RG_SOFTRELU, RG_ABS, RG_POWER, RG_CLIPPEDRELU, RG_LEAKYRELU, RG_ELU };

template <class A>
__device__ A activate(int mode, A a, A b, A g, A x) {
	switch (mode) {
	case RG_PASTHRU: return x;
	case RG_LOGISTIC: return A(1) / (A(1) + rg_exp(-x));
	case RG_TANH: return b * rg_tanh(a * x);
	case RG_RELU: return x > A(0) ? x : A(0);
	case RG_SOFTRELU: return x > A(40) ? x : rg_log1p(rg_exp(x));
	case RG_ABS: return x < A(0) ? -x : x;
	case RG_POWER: {
		A v = a + b * x;
		return v <= rg_eps(v) ? A(0) : rg_pow(v, g);
	}
	case RG_CLIPPEDRELU: return x <= A(0) ? A(0) : (x > a ? a : x);
	case RG_LEAKYRELU: return x > A(0) ? x : x * a;
	case RG_ELU: return x > A(0) ? x : a * rg_expm1(x);
	}
	return x;
}

// The gradient, from dy, x and y = f(x).
template <class A>
__device__ A activate_grad(int mode, A a, A b, A g, A dy, A x, A y) {
	switch (mode) {
	case RG_PASTHRU: return dy;
	case RG_LOGISTIC: return dy * y * (A(1) - y);
	case RG_TANH: return dy * a * (b - y * y / b);
	case RG_RELU: return x > A(0) ? dy : A(0);
	case RG_SOFTRELU: {
		A e = rg_exp(x < A(50) ? x : A(50));
		return dy * e / (e + A(1));
	}
	case RG_ABS: return x > A(0) ? dy : -dy;
	case RG_POWER: {
		A v = a + b * x;
		return v <= rg_eps(v) ? A(0) : dy * g * b * y / v;
	}
	case RG_CLIPPEDRELU: return x > A(0) && x <= a ? dy : A(0);
	case RG_LEAKYRELU: return x > A(0) ? dy : dy * a;
	case RG_ELU: return x > A(0) ? dy : dy * (y + a);
	}
	return dy;
}

// Tensor 0 is x, 1 is y.
template <class T>
__device__ void activation_fwd(const Shape& s, int mode, double a, double b, double g, const T* x, T* y) {
	typedef typename acc<T>::type A;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < s.n; i += (long long)gridDim.x * blockDim.x) {
		A v = load(x + offset_of(s, 0, i));
		store(y + offset_of(s, 1, i), activate<A>(mode, (A)a, (A)b, (A)g, v));
	}
}

// Tensors 0 to 3 are x, y, dy, dx.
template <class T>
__device__ void activation_bwd(const Shape& s, int mode, double a, double b, double g, const T* x, const T* y, const T* dy,
                               T* dx) {
	typedef typename acc<T>::type A;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < s.n; i += (long long)gridDim.x * blockDim.x) {
		A xv = load(x + offset_of(s, 0, i)), yv = load(y + offset_of(s, 1, i)), dyv = load(dy + offset_of(s, 2, i));
		store(dx + offset_of(s, 3, i), activate_grad<A>(mode, (A)a, (A)b, (A)g, dyv, xv, yv));
	}
}

// Within-channel LRN over a 4-D N, C, H, W tensor: the window is n x n
// around each element, cut at the borders; scale = k + alpha/(n*n) * sum of
// x^2 over it; y = x * scale^-beta. Tensor 0 is x, 1 is y.
template <class T>
__device__ typename acc<T>::type lrn_scale(const Shape& s, const T* x, long long b, long long c, long long h, long long w, int n,
                                           double alpha, double k) {
	typedef typename acc<T>::type A;
	const long long H = s.dims[2], W = s.dims[3];
	const int r = (n - 1) / 2;
	A sum = 0;
	for (long long j = h - r < 0 ? 0 : h - r; j <= h + r && j < H; j++) {
		for (long long i = w - r < 0 ? 0 : w - r; i <= w + r && i < W; i++) {
			A v = load(x + b * s.strides[0][0] + c * s.strides[0][1] + j * s.strides[0][2] + i * s.strides[0][3]);
			sum += v * v;
		}
	}
	return (A)k + (A)alpha / (A)(n * n) * sum;
}

template <class T>
__device__ void lrn_within_fwd(const Shape& s, int n, double alpha, double beta, double k, const T* x, T* y) {
	typedef typename acc<T>::type A;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < s.n; i += (long long)gridDim.x * blockDim.x) {
		long long w = i % s.dims[3], h = i / s.dims[3] % s.dims[2], c = i / (s.dims[3] * s.dims[2]) % s.dims[1],
		          b = i / (s.dims[3] * s.dims[2] * s.dims[1]);
		A scale = lrn_scale(s, x, b, c, h, w, n, alpha, k);
		A xv = load(x + b * s.strides[0][0] + c * s.strides[0][1] + h * s.strides[0][2] + w * s.strides[0][3]);
		store(y + b * s.strides[1][0] + c * s.strides[1][1] + h * s.strides[1][2] + w * s.strides[1][3], xv * rg_pow(scale, (A)-beta));
	}
}

// The gradient: dx = scale^-beta * dy - 2*alpha*beta/(n*n) * x * sum over the
// window of y*dy/scale. Tensors 0 to 3 are x, y, dy, dx.
template <class T>
__device__ void lrn_within_bwd(const Shape& s, int n, double alpha, double beta, double k, const T* x, const T* y, const T* dy,
                               T* dx) {
	typedef typename acc<T>::type A;
	const long long H = s.dims[2], W = s.dims[3];
	const int r = (n - 1) / 2;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < s.n; i += (long long)gridDim.x * blockDim.x) {
		long long w = i % s.dims[3], h = i / s.dims[3] % s.dims[2], c = i / (s.dims[3] * s.dims[2]) % s.dims[1],
		          b = i / (s.dims[3] * s.dims[2] * s.dims[1]);
		A sum = 0;
		for (long long jj = h - r < 0 ? 0 : h - r; jj <= h + r && jj < H; jj++) {
			for (long long ii = w - r < 0 ? 0 : w - r; ii <= w + r && ii < W; ii++) {
				A yv = load(y + b * s.strides[1][0] + c * s.strides[1][1] + jj * s.strides[1][2] + ii * s.strides[1][3]);
				A dyv = load(dy + b * s.strides[2][0] + c * s.strides[2][1] + jj * s.strides[2][2] + ii * s.strides[2][3]);
				sum += yv * dyv / lrn_scale(s, x, b, c, jj, ii, n, alpha, k);
			}
		}
		A xv = load(x + b * s.strides[0][0] + c * s.strides[0][1] + h * s.strides[0][2] + w * s.strides[0][3]);
		A dyv = load(dy + b * s.strides[2][0] + c * s.strides[2][1] + h * s.strides[2][2] + w * s.strides[2][3]);
		A scale = lrn_scale(s, x, b, c, h, w, n, alpha, k);
		A v = rg_pow(scale, (A)-beta) * dyv - (A)(2 * alpha * beta) / (A)(n * n) * xv * sum;
		store(dx + b * s.strides[3][0] + c * s.strides[3][1] + h * s.strides[3][2] + w * s.strides[3][3], v);
	}
}

// The kernels, one per element type: <name>_f16, _bf16, _f32, _f64.
#define RG_KERNELS(sfx, T)                                                                                                      \
	extern "C" __global__ void activation_fwd_##sfx(Shape s, int mode, double a, double b, double g, const T* x, T* y) {     \
		activation_fwd<T>(s, mode, a, b, g, x, y);                                                                           \
	}                                                                                                                        \
	extern "C" __global__ void activation_bwd_##sfx(Shape s, int mode, double a, double b, double g, const T* x, const T* y, \
	                                                const T* dy, T* dx) {                                                    \
		activation_bwd<T>(s, mode, a, b, g, x, y, dy, dx);                                                                   \
	}                                                                                                                        \
	extern "C" __global__ void lrn_within_fwd_##sfx(Shape s, int n, double alpha, double beta, double k, const T* x, T* y) { \
		lrn_within_fwd<T>(s, n, alpha, beta, k, x, y);                                                                       \
	}                                                                                                                        \
	extern "C" __global__ void lrn_within_bwd_##sfx(Shape s, int n, double alpha, double beta, double k, const T* x,         \
	                                                const T* y, const T* dy, T* dx) {                                        \
		lrn_within_bwd<T>(s, n, alpha, beta, k, x, y, dy, dx);                                                               \
	}

RG_KERNELS(f16, __half)
RG_KERNELS(bf16, __hip_bfloat16)
RG_KERNELS(f32, float)
RG_KERNELS(f64, double)
