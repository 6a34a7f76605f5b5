// The NVIDIA platform of package hiprtc: the generated table translated to
// NVRTC, opened with dlopen. HIP-style kernel source compiles unchanged: a
// prelude stands in for hip/hip_runtime.h, and hip/hip_fp16.h and
// hip/hip_bf16.h map to CUDA's headers.
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

// NVRTC results 0-11 equal hipRTC's; NVRTC's newer ones (12-17) have no
// hipRTC name.
static hiprtcResult nv_status(int e) {
	if (e == RG_CUDA_MISSING) return RG_HIPRTC_CUDA_MISSING;
	return e >= 0 && e <= 11 ? (hiprtcResult)e : HIPRTC_ERROR_INTERNAL_ERROR;
}

// NV(name, args...) calls an NVRTC function of the generated table
// (cgen.spec) and yields its status as hipRTC's.
#define NV(name, ...) nv_status(RG_HIPRTC_CUDA(name, __VA_ARGS__))

static const char nv_prelude[] =
	"#pragma once\n"
	"// rocm-go's hip/hip_runtime.h for NVRTC.\n"
	"#define __HIP_PLATFORM_NVIDIA__ 1\n"
	"#define __HIP_PLATFORM_NVCC__ 1\n"
	"#define __HIPCC_RTC__ 1\n"
	"#define hipThreadIdx_x threadIdx.x\n#define hipThreadIdx_y threadIdx.y\n#define hipThreadIdx_z threadIdx.z\n"
	"#define hipBlockIdx_x blockIdx.x\n#define hipBlockIdx_y blockIdx.y\n#define hipBlockIdx_z blockIdx.z\n"
	"#define hipBlockDim_x blockDim.x\n#define hipBlockDim_y blockDim.y\n#define hipBlockDim_z blockDim.z\n"
	"#define hipGridDim_x gridDim.x\n#define hipGridDim_y gridDim.y\n#define hipGridDim_z gridDim.z\n"
	"#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];\n"
	"typedef signed char int8_t;\ntypedef unsigned char uint8_t;\ntypedef short int16_t;\n"
	"typedef unsigned short uint16_t;\ntypedef int int32_t;\ntypedef unsigned int uint32_t;\n"
	"typedef long int64_t;\ntypedef unsigned long uint64_t;\n"
	"typedef decltype(sizeof(0)) size_t;\ntypedef decltype((char*)0 - (char*)0) ptrdiff_t;\n"
	"// HIP's warp shuffles and votes take no mask. CUDA's headers declare\n"
	"// deprecated mask-less ones (a 32-bit __ballot among them): macros route\n"
	"// the HIP spellings to the _sync forms, with HIP's types.\n"
	"template <class T> __device__ __forceinline__ T rocm_go_shfl(T v, int lane, int width = warpSize) {\n"
	"  return __shfl_sync(0xffffffffu, v, lane, width); }\n"
	"template <class T> __device__ __forceinline__ T rocm_go_shfl_xor(T v, int mask, int width = warpSize) {\n"
	"  return __shfl_xor_sync(0xffffffffu, v, mask, width); }\n"
	"template <class T> __device__ __forceinline__ T rocm_go_shfl_down(T v, unsigned d, int width = warpSize) {\n"
	"  return __shfl_down_sync(0xffffffffu, v, d, width); }\n"
	"template <class T> __device__ __forceinline__ T rocm_go_shfl_up(T v, unsigned d, int width = warpSize) {\n"
	"  return __shfl_up_sync(0xffffffffu, v, d, width); }\n"
	"__device__ __forceinline__ unsigned long long rocm_go_ballot(int p) { return __ballot_sync(0xffffffffu, p); }\n"
	"#define __shfl(...) rocm_go_shfl(__VA_ARGS__)\n"
	"#define __shfl_xor(...) rocm_go_shfl_xor(__VA_ARGS__)\n"
	"#define __shfl_down(...) rocm_go_shfl_down(__VA_ARGS__)\n"
	"#define __shfl_up(...) rocm_go_shfl_up(__VA_ARGS__)\n"
	"#define __ballot(p) rocm_go_ballot(p)\n"
	"#define __any(p) __any_sync(0xffffffffu, (p))\n"
	"#define __all(p) __all_sync(0xffffffffu, (p))\n";

static const char nv_fp16[] = "#pragma once\n#include <cuda_fp16.h>\n";
static const char nv_bf16[] =
	"#pragma once\n#include <cuda_bf16.h>\n"
	"typedef __nv_bfloat16 __hip_bfloat16;\ntypedef __nv_bfloat162 __hip_bfloat162;\n";

// The sources given to NVRTC, kept until their program is destroyed.
struct nv_source {
	void* prog;
	char* text;
	struct nv_source* next;
};
static struct nv_source* nv_sources;
static pthread_mutex_t nv_sources_mu = PTHREAD_MUTEX_INITIALIZER;

static hiprtcResult rgnv_hiprtcCreateProgram(hiprtcProgram* prog, const char* src, const char* name, int n,
                                             const char** headers, const char** names) {
	if (prog == NULL || src == NULL || n < 0) return HIPRTC_ERROR_INVALID_INPUT;
	const char* first = "#include <hip/hip_runtime.h>\n#line 1 \"";
	const char* nm = name != NULL ? name : "kernel.hip";
	size_t len = strlen(first) + strlen(nm) + 3 + strlen(src) + 1;
	char* text = malloc(len);
	if (text == NULL) return HIPRTC_ERROR_OUT_OF_MEMORY;
	strcpy(text, first);
	strcat(text, nm);
	strcat(text, "\"\n");
	strcat(text, src);
	const char** hs = malloc(sizeof(char*) * (size_t)(n + 3));
	const char** ns = malloc(sizeof(char*) * (size_t)(n + 3));
	if (hs == NULL || ns == NULL) {
		free(text);
		free(hs);
		free(ns);
		return HIPRTC_ERROR_OUT_OF_MEMORY;
	}
	for (int i = 0; i < n; i++) {
		hs[i] = headers[i];
		ns[i] = names[i];
	}
	hs[n] = nv_prelude, ns[n] = "hip/hip_runtime.h";
	hs[n + 1] = nv_fp16, ns[n + 1] = "hip/hip_fp16.h";
	hs[n + 2] = nv_bf16, ns[n + 2] = "hip/hip_bf16.h";
	hiprtcResult r = NV(nvrtcCreateProgram, (void**)prog, text, nm, n + 3, hs, ns);
	free(hs);
	free(ns);
	struct nv_source* s = r == HIPRTC_SUCCESS ? malloc(sizeof *s) : NULL;
	if (s == NULL) {
		free(text);
		return r;
	}
	s->prog = *prog;
	s->text = text;
	pthread_mutex_lock(&nv_sources_mu);
	s->next = nv_sources;
	nv_sources = s;
	pthread_mutex_unlock(&nv_sources_mu);
	return r;
}

static hiprtcResult rgnv_hiprtcDestroyProgram(hiprtcProgram* prog) {
	if (prog == NULL) return HIPRTC_ERROR_INVALID_INPUT;
	void* p = *prog;
	hiprtcResult r = NV(nvrtcDestroyProgram, (void**)prog);
	pthread_mutex_lock(&nv_sources_mu);
	for (struct nv_source** s = &nv_sources; *s != NULL; s = &(*s)->next) {
		if ((*s)->prog == p) {
			struct nv_source* dead = *s;
			*s = dead->next;
			free(dead->text);
			free(dead);
			break;
		}
	}
	pthread_mutex_unlock(&nv_sources_mu);
	return r;
}

// nv_option translates one hipRTC option to NVRTC; NULL drops it.
static const char* nv_option(const char* o, char* buf, size_t n) {
	if (strcmp(o, "-O0") == 0 || strcmp(o, "-O1") == 0 || strcmp(o, "-O2") == 0 || strcmp(o, "-O3") == 0) return NULL;
	if (strcmp(o, "-ffast-math") == 0) return "--use_fast_math";
	if (strcmp(o, "-fgpu-rdc") == 0) return "-rdc=true";
	const char* arch = "--offload-arch=";
	if (strncmp(o, arch, strlen(arch)) == 0) {
		strcpy(buf, "--gpu-architecture=");
		strncat(buf, o + strlen(arch), n - strlen(buf) - 1);
		return buf;
	}
	return o;
}

static hiprtcResult rgnv_hiprtcCompileProgram(hiprtcProgram prog, int n, const char** options) {
	if (n < 0) return HIPRTC_ERROR_INVALID_INPUT;
	const char** opts = malloc(sizeof(char*) * (size_t)(n + 1));
	char (*bufs)[256] = malloc(sizeof *bufs * (size_t)(n + 1));
	if (opts == NULL || bufs == NULL) {
		free(opts);
		free(bufs);
		return HIPRTC_ERROR_OUT_OF_MEMORY;
	}
	int m = 0;
	for (int i = 0; i < n; i++) {
		const char* o = nv_option(options[i], bufs[i], sizeof bufs[i]);
		if (o != NULL) opts[m++] = o;
	}
	hiprtcResult r = NV(nvrtcCompileProgram, prog, m, opts);
	free(opts);
	free(bufs);
	return r;
}

static const char* rgnv_hiprtcGetErrorString(hiprtcResult r) {
	if (r == HIPRTC_ERROR_LINKING) return "HIPRTC_ERROR_LINKING";
	rg_hiprtc_cu_fn_nvrtcGetErrorString f = RG_HIPRTC_CU(nvrtcGetErrorString);
	return f != NULL ? f((int)r) : NULL;
}
static hiprtcResult rgnv_hiprtcVersion(int* major, int* minor) { return NV(nvrtcVersion, major, minor); }
static hiprtcResult rgnv_hiprtcAddNameExpression(hiprtcProgram p, const char* e) { return NV(nvrtcAddNameExpression, p, e); }
static hiprtcResult rgnv_hiprtcGetProgramLogSize(hiprtcProgram p, size_t* n) { return NV(nvrtcGetProgramLogSize, p, n); }
static hiprtcResult rgnv_hiprtcGetProgramLog(hiprtcProgram p, char* log) { return NV(nvrtcGetProgramLog, p, log); }
static hiprtcResult rgnv_hiprtcGetLoweredName(hiprtcProgram p, const char* e, const char** lowered) {
	return NV(nvrtcGetLoweredName, p, e, lowered);
}
// The code is the CUBIN for a real arch (sm_XY); for a virtual one
// (compute_XY) there is none, and the PTX is the code.
static hiprtcResult rgnv_hiprtcGetCodeSize(hiprtcProgram p, size_t* n) {
	hiprtcResult r = NV(nvrtcGetCUBINSize, p, n);
	if (r == HIPRTC_SUCCESS && *n == 0) r = NV(nvrtcGetPTXSize, p, n);
	return r;
}
static hiprtcResult rgnv_hiprtcGetCode(hiprtcProgram p, char* code) {
	size_t n = 0;
	hiprtcResult r = NV(nvrtcGetCUBINSize, p, &n);
	if (r != HIPRTC_SUCCESS) return r;
	return n > 0 ? NV(nvrtcGetCUBIN, p, code) : NV(nvrtcGetPTX, p, code);
}
// Bitcode: NVRTC's LTO IR, produced when compiled with -dlto.
static hiprtcResult rgnv_hiprtcGetBitcodeSize(hiprtcProgram p, size_t* n) { return NV(nvrtcGetLTOIRSize, p, n); }
static hiprtcResult rgnv_hiprtcGetBitcode(hiprtcProgram p, char* code) { return NV(nvrtcGetLTOIR, p, code); }

void rg_hiprtc_install_nvidia(void* nvrtc) {
	rg_hiprtc_unbind();
	rg_hiprtc_cu_bind(rg_hiprtc_cu_lib_nvrtc, nvrtc);
#define SET(name) rg_hiprtc_set(rg_hiprtc_idx_##name, (void*)rgnv_##name)
	SET(hiprtcGetErrorString);
	SET(hiprtcVersion);
	SET(hiprtcCreateProgram);
	SET(hiprtcDestroyProgram);
	SET(hiprtcAddNameExpression);
	SET(hiprtcCompileProgram);
	SET(hiprtcGetProgramLogSize);
	SET(hiprtcGetProgramLog);
	SET(hiprtcGetCodeSize);
	SET(hiprtcGetCode);
	SET(hiprtcGetLoweredName);
	SET(hiprtcGetBitcodeSize);
	SET(hiprtcGetBitcode);
#undef SET
}
