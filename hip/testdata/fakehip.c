// A fake HIP runtime for package hip's tier-0 tests: "device" memory is host
// memory, streams and events are counters, and one kernel, "echo", copies
// its packed argument buffer to the address of its first argument. Some
// functions are left out on purpose, to test missing symbols.
#include <stdlib.h>
#include <string.h>

#include "../zhip.h"

static __thread int current = 0;
static int count = 2;
static long live_allocs;

hipError_t hipRuntimeGetVersion(int* v) { *v = 60443484; return hipSuccess; }
hipError_t hipDriverGetVersion(int* v) { *v = 60443484; return hipSuccess; }
hipError_t hipGetDeviceCount(int* n) { *n = count; return hipSuccess; }
hipError_t hipSetDevice(int d) {
	if (d < 0 || d >= count) return hipErrorInvalidDevice;
	current = d;
	return hipSuccess;
}
hipError_t hipGetDevice(int* d) { *d = current; return hipSuccess; }
const char* hipGetErrorName(hipError_t e) { return e == hipErrorOutOfMemory ? "hipErrorOutOfMemory" : "other"; }

hipError_t hipGetDevicePropertiesR0600(hipDeviceProp_tR0600* p, int d) {
	if (d < 0 || d >= count) return hipErrorInvalidDevice;
	memset(p, 0, sizeof *p);
	strcpy(p->name, "Fake GPU");
	strcpy(p->gcnArchName, d == 0 ? "gfx942:sramecc+:xnack-" : "gfx1100");
	p->totalGlobalMem = (size_t)192 << 30;
	p->warpSize = d == 0 ? 64 : 32;
	p->multiProcessorCount = 304;
	p->maxThreadsPerBlock = 1024;
	p->maxThreadsDim[0] = 1024; p->maxThreadsDim[1] = 1024; p->maxThreadsDim[2] = 1024;
	p->maxGridSize[0] = 2147483647; p->maxGridSize[1] = 65536; p->maxGridSize[2] = 65536;
	p->l2CacheSize = 4 << 20;
	p->sharedMemPerBlock = 64 << 10;
	p->major = 9; p->minor = 4;
	p->pciBusID = 0xc1 + d;
	p->uuid.bytes[0] = 0x42;
	p->isLargeBar = 1;
	p->hostRegisterSupported = 1;
	return hipSuccess;
}

hipError_t hipDeviceGetAttribute(int* v, hipDeviceAttribute_t a, int d) {
	if (d < 0 || d >= count) return hipErrorInvalidDevice;
	switch (a) {
	case hipDeviceAttributeWarpSize: *v = d == 0 ? 64 : 32; return hipSuccess;
	case hipDeviceAttributeMultiprocessorCount: *v = 304; return hipSuccess;
	default: return hipErrorInvalidValue;
	}
}

hipError_t hipDeviceSynchronize(void) { return hipSuccess; }
// Free memory counts live objects, so that tests can see that Close frees.
hipError_t hipMemGetInfo(size_t* f, size_t* t) { *t = (size_t)2 << 30; *f = *t - (size_t)live_allocs; return hipSuccess; }

hipError_t hipMalloc(void** p, size_t n) {
	if (n > ((size_t)1 << 40)) return hipErrorOutOfMemory;
	*p = malloc(n);
	live_allocs++;
	return hipSuccess;
}
hipError_t hipFree(void* p) { free(p); live_allocs--; return hipSuccess; }
hipError_t hipMallocAsync(void** p, size_t n, hipStream_t s) { return hipMalloc(p, n); }
hipError_t hipFreeAsync(void* p, hipStream_t s) { return hipFree(p); }
hipError_t hipHostMalloc(void** p, size_t n, unsigned flags) { return hipMalloc(p, n); }
hipError_t hipHostFree(void* p) { return hipFree(p); }
// Registrations are remembered, so that overlapping ones and unknown
// pointers are refused as HIP refuses them; I/O memory is not supported.
static struct { char* p; size_t n; } regs[64];
hipError_t hipHostRegister(void* p, size_t n, unsigned flags) {
	if (p == NULL || n == 0) return hipErrorInvalidValue;
	if (flags & hipHostRegisterIoMemory) return hipErrorNotSupported;
	int slot = -1;
	for (int i = 0; i < 64; i++) {
		if (regs[i].p == NULL) {
			if (slot < 0) slot = i;
		} else if ((char*)p < regs[i].p + regs[i].n && regs[i].p < (char*)p + n) {
			return hipErrorHostMemoryAlreadyRegistered;
		}
	}
	if (slot < 0) return hipErrorOutOfMemory;
	regs[slot].p = p;
	regs[slot].n = n;
	live_allocs++;
	return hipSuccess;
}
hipError_t hipHostUnregister(void* p) {
	for (int i = 0; i < 64; i++) {
		if (p != NULL && regs[i].p == p) {
			regs[i].p = NULL;
			live_allocs--;
			return hipSuccess;
		}
	}
	return hipErrorHostMemoryNotRegistered;
}
hipError_t hipMemcpy(void* d, const void* s, size_t n, hipMemcpyKind k) { memmove(d, s, n); return hipSuccess; }
hipError_t hipMemcpyAsync(void* d, const void* s, size_t n, hipMemcpyKind k, hipStream_t st) { memmove(d, s, n); return hipSuccess; }
hipError_t hipMemset(void* d, int v, size_t n) { memset(d, v, n); return hipSuccess; }
hipError_t hipMemsetAsync(void* d, int v, size_t n, hipStream_t s) { memset(d, v, n); return hipSuccess; }
hipError_t hipMemsetD32(hipDeviceptr_t d, int v, size_t n) {
	for (size_t i = 0; i < n; i++) ((int*)d)[i] = v;
	return hipSuccess;
}
hipError_t hipMemsetD32Async(hipDeviceptr_t d, int v, size_t n, hipStream_t s) { return hipMemsetD32(d, v, n); }

struct ihipStream_t { unsigned flags; int priority; };
hipError_t hipStreamCreateWithPriority(hipStream_t* s, unsigned flags, int prio) {
	*s = malloc(sizeof **s);
	(*s)->flags = flags;
	(*s)->priority = prio;
	live_allocs++;
	return hipSuccess;
}
hipError_t hipStreamDestroy(hipStream_t s) { free(s); live_allocs--; return hipSuccess; }
hipError_t hipStreamSynchronize(hipStream_t s) { return hipSuccess; }
// A stream captures when $ROCM_GO_FAKE_CAPTURING is set.
hipError_t hipStreamIsCapturing(hipStream_t s, hipStreamCaptureStatus* st) {
	*st = getenv("ROCM_GO_FAKE_CAPTURING") ? hipStreamCaptureStatusActive : hipStreamCaptureStatusNone;
	return hipSuccess;
}
hipError_t hipStreamQuery(hipStream_t s) { return hipSuccess; }
hipError_t hipStreamGetFlags(hipStream_t s, unsigned* f) { *f = s->flags; return hipSuccess; }
hipError_t hipStreamGetPriority(hipStream_t s, int* p) { *p = s->priority; return hipSuccess; }
hipError_t hipDeviceGetStreamPriorityRange(int* l, int* g) { *l = 0; *g = -1; return hipSuccess; }

struct ihipEvent_t { int recorded; };
hipError_t hipEventCreateWithFlags(hipEvent_t* e, unsigned flags) {
	*e = calloc(1, sizeof **e);
	live_allocs++;
	return hipSuccess;
}
hipError_t hipEventDestroy(hipEvent_t e) { free(e); live_allocs--; return hipSuccess; }
hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned flags) { return hipSuccess; }
hipError_t hipEventRecord(hipEvent_t e, hipStream_t s) { e->recorded++; return hipSuccess; }
hipError_t hipEventSynchronize(hipEvent_t e) { return hipSuccess; }
hipError_t hipEventQuery(hipEvent_t e) { return e->recorded ? hipSuccess : hipErrorNotReady; }
hipError_t hipEventElapsedTime(float* ms, hipEvent_t a, hipEvent_t b) {
	if (!a->recorded || !b->recorded) return hipErrorNotReady;
	*ms = 1.5f;
	return hipSuccess;
}

// Modules: the "image" must start with "FAKE"; it holds one kernel, echo.
struct ihipModule_t { int unused; };
hipError_t hipModuleLoadData(hipModule_t* m, const void* image) {
	if (memcmp(image, "FAKE", 4) != 0) return hipErrorInvalidImage;
	*m = malloc(sizeof **m);
	live_allocs++;
	return hipSuccess;
}
hipError_t hipModuleUnload(hipModule_t m) { free(m); live_allocs--; return hipSuccess; }
hipError_t hipModuleGetFunction(hipFunction_t* f, hipModule_t m, const char* name) {
	if (strcmp(name, "echo") != 0) return hipErrorNotFound;
	*f = (hipFunction_t)m;
	return hipSuccess;
}
hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned shared, hipStream_t s, void** params, void** extra) {
	if (gx * gy * gz == 0 || bx * by * bz == 0 || bx * by * bz > 1024) return hipErrorInvalidConfiguration;
	if (extra == NULL) return hipSuccess;
	// extra = {BUFFER_POINTER, buf, BUFFER_SIZE, &size, END}
	if (extra[0] != (void*)1 || extra[2] != (void*)2 || extra[4] != (void*)3) return hipErrorInvalidValue;
	char* buf = extra[1];
	size_t size = *(size_t*)extra[3];
	void* out;
	memcpy(&out, buf, sizeof out);
	memcpy(out, &size, sizeof size);
	memcpy((char*)out + 8, buf, size);
	return hipSuccess;
}
