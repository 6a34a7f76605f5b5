// A minimal fake HIP runtime for package rocblas's tier-0 tests, compiled
// into the fake rocBLAS library (one file stands in for libamdhip64 and
// librocblas): "device" memory is host memory, streams and events are
// structs, copies happen at once. Two devices; the current one is per
// thread, as HIP's, so that the fake rocBLAS can check that every call made
// its handle's device current in the same C call.
#ifndef RG_FAKEHIP_H
#define RG_FAKEHIP_H

#include <stdlib.h>
#include <string.h>

typedef int hipError_t;
static __thread int fake_current = 0;
static long fake_live;

hipError_t hipRuntimeGetVersion(int* v) { *v = 60443484; return 0; }
hipError_t hipDriverGetVersion(int* v) { *v = 60443484; return 0; }
hipError_t hipInit(unsigned flags) { (void)flags; return 0; }
hipError_t hipGetDeviceCount(int* n) { *n = 2; return 0; }
hipError_t hipSetDevice(int d) {
	if (d < 0 || d >= 2) return 101; // hipErrorInvalidDevice
	fake_current = d;
	return 0;
}
hipError_t hipGetDevice(int* d) { *d = fake_current; return 0; }
const char* hipGetErrorName(hipError_t e) { return e == 0 ? "hipSuccess" : "hipErrorFake"; }
const char* hipGetErrorString(hipError_t e) { return e == 0 ? "no error" : "fake error"; }
// The properties the benchmarks read, at their offsets in
// hipDeviceProp_tR0600 (1472 bytes; zhip.h asserts the layout).
hipError_t hipGetDevicePropertiesR0600(char* p, int d) {
	if (d < 0 || d >= 2) return 101;
	memset(p, 0, 1472);
	strcpy(p, "Fake GPU");
	*(int*)(p + 616) = 4 << 20; // l2CacheSize
	strcpy(p + 1160, "gfx942");  // gcnArchName
	return 0;
}
hipError_t hipDeviceSynchronize(void) { return 0; }
hipError_t hipMemGetInfo(size_t* f, size_t* t) { *t = (size_t)1 << 30; *f = *t - (size_t)fake_live; return 0; }

hipError_t hipMalloc(void** p, size_t n) {
	*p = calloc(1, n);
	fake_live++;
	return *p == NULL ? 2 : 0;
}
hipError_t hipFree(void* p) { free(p); fake_live--; return 0; }
hipError_t hipMallocAsync(void** p, size_t n, void* s) { (void)s; return hipMalloc(p, n); }
hipError_t hipFreeAsync(void* p, void* s) { (void)s; return hipFree(p); }
hipError_t hipHostMalloc(void** p, size_t n, unsigned flags) { (void)flags; return hipMalloc(p, n); }
hipError_t hipHostFree(void* p) { return hipFree(p); }
hipError_t hipMemcpy(void* d, const void* s, size_t n, int k) { (void)k; memmove(d, s, n); return 0; }
hipError_t hipMemcpyAsync(void* d, const void* s, size_t n, int k, void* st) { (void)k, (void)st; memmove(d, s, n); return 0; }
hipError_t hipMemset(void* d, int v, size_t n) { memset(d, v, n); return 0; }
hipError_t hipMemsetAsync(void* d, int v, size_t n, void* s) { (void)s; memset(d, v, n); return 0; }
hipError_t hipMemsetD32(void* d, int v, size_t n) {
	for (size_t i = 0; i < n; i++) ((int*)d)[i] = v;
	return 0;
}
hipError_t hipMemsetD32Async(void* d, int v, size_t n, void* s) { (void)s; return hipMemsetD32(d, v, n); }

struct ihipStream_t { int device; };
hipError_t hipStreamCreateWithPriority(struct ihipStream_t** s, unsigned flags, int prio) {
	(void)flags, (void)prio;
	*s = calloc(1, sizeof **s);
	(*s)->device = fake_current;
	fake_live++;
	return 0;
}
hipError_t hipStreamDestroy(struct ihipStream_t* s) { free(s); fake_live--; return 0; }
hipError_t hipStreamSynchronize(void* s) { (void)s; return 0; }
hipError_t hipStreamQuery(void* s) { (void)s; return 0; }

struct ihipEvent_t { int recorded; };
hipError_t hipEventCreateWithFlags(struct ihipEvent_t** e, unsigned flags) {
	(void)flags;
	*e = calloc(1, sizeof **e);
	fake_live++;
	return 0;
}
hipError_t hipEventDestroy(struct ihipEvent_t* e) { free(e); fake_live--; return 0; }
hipError_t hipEventRecord(struct ihipEvent_t* e, void* s) { (void)s; e->recorded++; return 0; }
hipError_t hipEventSynchronize(void* e) { (void)e; return 0; }
hipError_t hipEventQuery(void* e) { (void)e; return 0; }
hipError_t hipEventElapsedTime(float* ms, void* a, void* b) { (void)a, (void)b; *ms = 1; return 0; }

#endif
