// A fake CUDA runtime and driver in one library, for tier-0 tests of the
// NVIDIA translation layer (nvidia.c). One "sm_90" device; device memory is
// host memory. cuLaunchKernel checks that the launch's extra array ends with
// CUDA's CU_LAUNCH_PARAM_END (0), not HIP's (3), and copies the argument
// buffer to its first argument, like fakehip's echo kernel (cuLaunchKernelEx
// as well, and the launch's attribute after it).
#include <stdlib.h>
#include <string.h>

typedef unsigned long long devptr;
static __thread int current = -1;

int cudaRuntimeGetVersion(int* v) { *v = 13000; return 0; }
int cudaDriverGetVersion(int* v) { *v = 13000; return 0; }
int cudaGetDeviceCount(int* n) { *n = 1; return 0; }
int cudaSetDevice(int d) {
	if (d != 0) return 101;
	current = d;
	return 0;
}
int cudaGetDevice(int* d) { *d = current; return 0; }
const char* cudaGetErrorName(int e) {
	switch (e) {
	case 2: return "cudaErrorMemoryAllocation";
	case 18: return "cudaErrorInvalidTexture";
	}
	return "cudaErrorUnknown";
}
int cudaMalloc(void** p, size_t n) {
	if (current != 0) return 201; // the context was not made current
	if (n > ((size_t)1 << 40)) return 2;
	*p = malloc(n);
	return 0;
}
int cudaFree(void* p) { free(p); return 0; }
// CUDA refuses flags it does not know, as HIP's AMD-only ones would be.
int cudaHostAlloc(void** p, size_t n, unsigned flags) {
	if (flags & ~7u) return 1;
	*p = malloc(n);
	return 0;
}
int cudaFreeHost(void* p) { free(p); return 0; }
// Registration knows CUDA's four flags only (AMD-only bits must not reach
// it) and needs the device made current.
static void* registered;
int cudaHostRegister(void* p, size_t n, unsigned flags) {
	if (current != 0) return 201;
	if (flags & ~15u || p == NULL || n == 0) return 1;
	if (registered != NULL) return 712;
	registered = p;
	return 0;
}
int cudaHostUnregister(void* p) {
	if (p == NULL || p != registered) return 713;
	registered = NULL;
	return 0;
}
int cudaMemcpy(void* d, const void* s, size_t n, int kind) {
	if (kind < 0 || kind > 4) return 21;
	memmove(d, s, n);
	return 0;
}
int cudaMemcpyAsync(void* d, const void* s, size_t n, int kind, void* st) { return cudaMemcpy(d, s, n, kind); }
int cudaMemGetInfo(size_t* f, size_t* t) { *f = 1; *t = 2; return 0; }
int cudaStreamSynchronize(void* s) { return 0; }
int cudaDeviceSynchronize(void) { return 0; }
int cudaEventCreateWithFlags(void** e, unsigned flags) {
	if (flags & ~0xFu) return 1;
	*e = malloc(1);
	return 0;
}
int cudaEventDestroy(void* e) { free(e); return 0; }
// A CUDA-only status, to test the translation: cudaErrorInvalidTexture.
int cudaEventQuery(void* e) { return 18; }
int cudaDeviceGetStreamPriorityRange(int* l, int* g) { *l = 0; *g = -5; return 0; }

int cuInit(unsigned flags) { return 0; }
int cuDeviceGetName(char* name, int len, int d) {
	strncpy(name, "Fake H200", (size_t)len);
	return 0;
}
int cuDeviceTotalMem_v2(size_t* n, int d) { *n = (size_t)141 << 30; return 0; }
int cuDeviceGetUuid_v2(char* uuid, int d) { memset(uuid, 7, 16); return 0; }
int cuDeviceGetAttribute(int* v, int a, int d) {
	switch (a) {
	case 1: *v = 1024; return 0;  // max threads per block
	case 10: *v = 32; return 0;   // warp size
	case 16: *v = 132; return 0;  // multiprocessors
	case 75: *v = 9; return 0;    // compute capability
	case 76: *v = 0; return 0;
	case 38: *v = 60 << 20; return 0; // L2
	case 99: *v = 1; return 0;    // host register supported
	case 113: *v = 1; return 0;   // read-only host register supported
	}
	return 1;
}
int cuModuleLoadData(void** m, const void* image) {
	if (memcmp(image, "FAKE", 4) != 0) return 200;
	*m = malloc(1);
	return 0;
}
int cuModuleUnload(void* m) { free(m); return 0; }
int cuModuleGetFunction(void** f, void* m, const char* name) {
	if (strcmp(name, "echo") != 0) return 500;
	*f = m;
	return 0;
}
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* stream, void** params, void** extra) {
	if (current != 0) return 201;
	if (extra == NULL) return 0;
	if (extra[0] != (void*)1 || extra[2] != (void*)2 || extra[4] != (void*)0) return 1;
	char* buf = extra[1];
	size_t size = *(size_t*)extra[3];
	void* out;
	memcpy(&out, buf, sizeof out);
	memcpy(out, &size, sizeof size);
	memcpy((char*)out + 8, buf, size);
	return 0;
}
// cuLaunchKernelEx echoes as cuLaunchKernel does, then writes the launch's
// one attribute after the echo: its id and its value's first int.
typedef struct {
	int id;
	char pad[4];
	union {
		char bytes[64];
		int i;
	} value;
} attr;
typedef struct {
	unsigned gx, gy, gz, bx, by, bz, shared;
	void* stream;
	attr* attrs;
	unsigned num_attrs;
} config;
int cuLaunchKernelEx(const config* c, void* f, void** params, void** extra) {
	int st = cuLaunchKernel(f, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->shared, c->stream, params, extra);
	if (st != 0 || extra == NULL) return st;
	if (c->num_attrs != 1) return 1;
	char* buf = extra[1];
	size_t size = *(size_t*)extra[3];
	char* out;
	memcpy(&out, buf, sizeof out);
	int got[2] = {c->attrs[0].id, c->attrs[0].value.i};
	memcpy(out + 8 + size, got, sizeof got);
	return 0;
}
int cuMemsetD32_v2(devptr d, unsigned v, size_t n) {
	for (size_t i = 0; i < n; i++) ((unsigned*)(size_t)d)[i] = v;
	return 0;
}
