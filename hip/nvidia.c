// The NVIDIA platform of package hip: every function of the generated table,
// translated to the CUDA runtime and driver, which are opened with dlopen.
// No CUDA header is needed: cgen.spec declares the CUDA functions called
// (with the exported, versioned symbol names of CUDA 12 and 13), and the
// generated table resolves them.
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

// CUDA's own handle types are all pointers; CUdeviceptr is 64 bits.
typedef unsigned long long nv_devptr;

// NV(name, args...) calls a CUDA function of the generated table (cgen.spec)
// and yields its status as a HIP status.
#define NV(name, ...) nv_status(RG_HIP_CUDA(name, __VA_ARGS__))

// nv_status translates a CUDA runtime or driver status to HIP's. Most
// numbers agree; 911 and 912 mean different things, and CUDA-only codes
// map to their nearest HIP code or hipErrorUnknown.
static hipError_t nv_status(int e) {
	switch (e) {
	case RG_CUDA_MISSING: return RG_HIP_CUDA_MISSING;
	case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 8: case 9: case 12: case 13: case 17:
	case 21: case 35: case 52: case 53: case 98: case 100: case 101: case 200: case 201: case 202: case 205:
	case 206: case 207: case 208: case 209: case 210: case 211: case 212: case 213: case 214: case 215:
	case 216: case 217: case 218: case 219: case 300: case 301: case 302: case 303: case 304: case 400:
	case 401: case 500: case 600: case 700: case 701: case 702: case 704: case 705: case 708: case 709:
	case 710: case 712: case 713: case 719: case 720: case 801: case 900: case 901: case 902: case 903:
	case 904: case 905: case 906: case 907: case 908: case 910: case 999:
		return (hipError_t)e;
	case 16: return hipErrorInvalidValue;                 // cudaErrorInvalidHostPointer
	case 18: return hipErrorInvalidTexture;               // cudaErrorInvalidTexture
	case 20: return hipErrorInvalidChannelDescriptor;     // cudaErrorInvalidChannelDescriptor
	case 34: case 36: return hipErrorInsufficientDriver;  // stub library, call requires a newer driver
	case 222: return hipErrorInvalidKernelFile;           // unsupported PTX version
	case 714: case 715: case 716: case 717: case 718: return hipErrorLaunchFailure; // kernel faults
	case 913: return hipErrorInvalidDeviceFunction;       // function not loaded
	}
	return hipErrorUnknown;
}

// nv_cuda_status is the reverse, for hipGetErrorName and hipGetErrorString.
static int nv_cuda_status(hipError_t e) {
	switch ((int)e) {
	case hipErrorInvalidTexture: return 18;
	case hipErrorInvalidChannelDescriptor: return 20;
	}
	return nv_status((int)e) == e ? (int)e : 999;
}

// The driver API needs cuInit once; the runtime initializes itself.
static pthread_once_t nv_init_once = PTHREAD_ONCE_INIT;
static int nv_init_status;
static void nv_init(void) {
	nv_init_status = RG_HIP_CUDA(cuInit, 0);
}
static hipError_t nv_driver(void) {
	pthread_once(&nv_init_once, nv_init);
	return nv_status(nv_init_status);
}

static const char* rgnv_hipGetErrorName(hipError_t e) {
	rg_hip_cu_fn_cudaGetErrorName f = RG_HIP_CU(cudaGetErrorName);
	return f != NULL ? f(nv_cuda_status(e)) : NULL;
}
static const char* rgnv_hipGetErrorString(hipError_t e) {
	rg_hip_cu_fn_cudaGetErrorString f = RG_HIP_CU(cudaGetErrorString);
	return f != NULL ? f(nv_cuda_status(e)) : NULL;
}
static hipError_t rgnv_hipGetLastError(void) { return NV(cudaGetLastError); }
static hipError_t rgnv_hipDriverGetVersion(int* v) { return NV(cudaDriverGetVersion, v); }
static hipError_t rgnv_hipRuntimeGetVersion(int* v) { return NV(cudaRuntimeGetVersion, v); }
static hipError_t rgnv_hipInit(unsigned flags) {
	(void)flags;
	return nv_driver();
}

static hipError_t rgnv_hipGetDeviceCount(int* n) { return NV(cudaGetDeviceCount, n); }
static hipError_t rgnv_hipSetDevice(int d) { return NV(cudaSetDevice, d); }
static hipError_t rgnv_hipGetDevice(int* d) { return NV(cudaGetDevice, d); }
static hipError_t rgnv_hipDeviceGetPCIBusId(char* id, int len, int d) { return NV(cudaDeviceGetPCIBusId, id, len, d); }
static hipError_t rgnv_hipDeviceSynchronize(void) { return NV(cudaDeviceSynchronize); }
static hipError_t rgnv_hipMemGetInfo(size_t* f, size_t* t) { return NV(cudaMemGetInfo, f, t); }
static hipError_t rgnv_hipDeviceGetStreamPriorityRange(int* l, int* g) { return NV(cudaDeviceGetStreamPriorityRange, l, g); }

// nv_attribute maps a HIP device attribute to CUDA's number; -1 when CUDA
// has none.
static int nv_attribute(hipDeviceAttribute_t a) {
	switch (a) {
	case hipDeviceAttributeMaxThreadsPerBlock: return 1;
	case hipDeviceAttributeMaxBlockDimX: return 2;
	case hipDeviceAttributeMaxBlockDimY: return 3;
	case hipDeviceAttributeMaxBlockDimZ: return 4;
	case hipDeviceAttributeMaxGridDimX: return 5;
	case hipDeviceAttributeMaxGridDimY: return 6;
	case hipDeviceAttributeMaxGridDimZ: return 7;
	case hipDeviceAttributeMaxSharedMemoryPerBlock: return 8;
	case hipDeviceAttributeTotalConstantMemory: return 9;
	case hipDeviceAttributeWarpSize: return 10;
	case hipDeviceAttributeMaxPitch: return 11;
	case hipDeviceAttributeMaxRegistersPerBlock: return 12;
	case hipDeviceAttributeClockRate: return 13;
	case hipDeviceAttributeTextureAlignment: return 14;
	case hipDeviceAttributeDeviceOverlap: return 15;
	case hipDeviceAttributeMultiprocessorCount: return 16;
	case hipDeviceAttributeKernelExecTimeout: return 17;
	case hipDeviceAttributeIntegrated: return 18;
	case hipDeviceAttributeCanMapHostMemory: return 19;
	case hipDeviceAttributeComputeMode: return 20;
	case hipDeviceAttributeMaxTexture1DWidth: return 21;
	case hipDeviceAttributeMaxTexture2DWidth: return 22;
	case hipDeviceAttributeMaxTexture2DHeight: return 23;
	case hipDeviceAttributeMaxTexture3DWidth: return 24;
	case hipDeviceAttributeMaxTexture3DHeight: return 25;
	case hipDeviceAttributeMaxTexture3DDepth: return 26;
	case hipDeviceAttributeSurfaceAlignment: return 30;
	case hipDeviceAttributeConcurrentKernels: return 31;
	case hipDeviceAttributeEccEnabled: return 32;
	case hipDeviceAttributePciBusId: return 33;
	case hipDeviceAttributePciDeviceId: return 34;
	case hipDeviceAttributeTccDriver: return 35;
	case hipDeviceAttributeMemoryClockRate: return 36;
	case hipDeviceAttributeMemoryBusWidth: return 37;
	case hipDeviceAttributeL2CacheSize: return 38;
	case hipDeviceAttributeMaxThreadsPerMultiProcessor: return 39;
	case hipDeviceAttributeAsyncEngineCount: return 40;
	case hipDeviceAttributeUnifiedAddressing: return 41;
	case hipDeviceAttributePciDomainID: return 50;
	case hipDeviceAttributeTexturePitchAlignment: return 51;
	case hipDeviceAttributeMaxTextureCubemap: return 52;
	case hipDeviceAttributeMaxSurface1D: return 55;
	case hipDeviceAttributeMaxTexture1DLinear: return 69;
	case hipDeviceAttributeComputeCapabilityMajor: return 75;
	case hipDeviceAttributeComputeCapabilityMinor: return 76;
	case hipDeviceAttributeMaxTexture1DMipmap: return 77;
	case hipDeviceAttributeStreamPrioritiesSupported: return 78;
	case hipDeviceAttributeGlobalL1CacheSupported: return 79;
	case hipDeviceAttributeLocalL1CacheSupported: return 80;
	case hipDeviceAttributeSharedMemPerMultiprocessor: return 81;
	case hipDeviceAttributeMaxSharedMemoryPerMultiprocessor: return 81;
	case hipDeviceAttributeMaxRegistersPerMultiprocessor: return 82;
	case hipDeviceAttributeManagedMemory: return 83;
	case hipDeviceAttributeIsMultiGpuBoard: return 84;
	case hipDeviceAttributeMultiGpuBoardGroupID: return 85;
	case hipDeviceAttributeHostNativeAtomicSupported: return 86;
	case hipDeviceAttributeSingleToDoublePrecisionPerfRatio: return 87;
	case hipDeviceAttributePageableMemoryAccess: return 88;
	case hipDeviceAttributeConcurrentManagedAccess: return 89;
	case hipDeviceAttributeComputePreemptionSupported: return 90;
	case hipDeviceAttributeCanUseHostPointerForRegisteredMem: return 91;
	case hipDeviceAttributeCanUseStreamWaitValue: return 92;
	case hipDeviceAttributeCooperativeLaunch: return 95;
	case hipDeviceAttributeCooperativeMultiDeviceLaunch: return 96;
	case hipDeviceAttributeSharedMemPerBlockOptin: return 97;
	case hipDeviceAttributeHostRegisterSupported: return 99;
	case hipDeviceAttributePageableMemoryAccessUsesHostPageTables: return 100;
	case hipDeviceAttributeDirectManagedMemAccessFromHost: return 101;
	case hipDeviceAttributeVirtualMemoryManagementSupported: return 102;
	case hipDeviceAttributeMaxBlocksPerMultiProcessor: return 106;
	case hipDeviceAttributePersistingL2CacheMaxSize: return 108;
	case hipDeviceAttributeAccessPolicyMaxWindowSize: return 109;
	case hipDeviceAttributeReservedSharedMemPerBlock: return 111;
	case hipDeviceAttributeMemoryPoolsSupported: return 115;
	case hipDeviceAttributeMemoryPoolSupportedHandleTypes: return 119;
	default: return -1;
	}
}

// Driver attribute numbers equal the runtime's, and cuDeviceGetAttribute
// also answers those the runtime reserves (102).
static hipError_t rgnv_hipDeviceGetAttribute(int* v, hipDeviceAttribute_t a, int d) {
	int ca = nv_attribute(a);
	if (ca < 0) return hipErrorInvalidValue;
	hipError_t e = nv_driver();
	if (e != hipSuccess) return e;
	return NV(cuDeviceGetAttribute, v, ca, d);
}

static int nv_attr(int ca, int d) {
	int v = 0;
	if (RG_HIP_CUDA(cuDeviceGetAttribute, &v, ca, d) != 0) return 0;
	return v;
}

// rgnv_hipGetDevicePropertiesR0600 fills HIP's struct from the driver's
// name, memory and UUID and from device attributes, never from
// cudaDeviceProp, whose layout changes between CUDA versions.
static hipError_t rgnv_hipGetDevicePropertiesR0600(hipDeviceProp_tR0600* p, int d) {
	hipError_t e = nv_driver();
	if (e != hipSuccess) return e;
	int n = 0;
	if ((e = NV(cudaGetDeviceCount, &n)) != hipSuccess) return e;
	if (d < 0 || d >= n) return hipErrorInvalidDevice;
	memset(p, 0, sizeof *p);
	if ((e = NV(cuDeviceGetName, p->name, (int)sizeof p->name, d)) != hipSuccess) return e;
	if ((e = NV(cuDeviceTotalMem_v2, &p->totalGlobalMem, d)) != hipSuccess) return e;
	NV(cuDeviceGetUuid_v2, p->uuid.bytes, d);
	p->sharedMemPerBlock = (size_t)nv_attr(8, d);
	p->regsPerBlock = nv_attr(12, d);
	p->warpSize = nv_attr(10, d);
	p->memPitch = (size_t)nv_attr(11, d);
	p->maxThreadsPerBlock = nv_attr(1, d);
	for (int i = 0; i < 3; i++) {
		p->maxThreadsDim[i] = nv_attr(2 + i, d);
		p->maxGridSize[i] = nv_attr(5 + i, d);
	}
	p->clockRate = nv_attr(13, d);
	p->totalConstMem = (size_t)nv_attr(9, d);
	p->major = nv_attr(75, d);
	p->minor = nv_attr(76, d);
	p->textureAlignment = (size_t)nv_attr(14, d);
	p->texturePitchAlignment = (size_t)nv_attr(51, d);
	p->deviceOverlap = nv_attr(15, d);
	p->multiProcessorCount = nv_attr(16, d);
	p->kernelExecTimeoutEnabled = nv_attr(17, d);
	p->integrated = nv_attr(18, d);
	p->canMapHostMemory = nv_attr(19, d);
	p->computeMode = nv_attr(20, d);
	p->maxTexture1D = nv_attr(21, d);
	p->maxTexture2D[0] = nv_attr(22, d);
	p->maxTexture2D[1] = nv_attr(23, d);
	p->maxTexture3D[0] = nv_attr(24, d);
	p->maxTexture3D[1] = nv_attr(25, d);
	p->maxTexture3D[2] = nv_attr(26, d);
	p->surfaceAlignment = (size_t)nv_attr(30, d);
	p->concurrentKernels = nv_attr(31, d);
	p->ECCEnabled = nv_attr(32, d);
	p->pciBusID = nv_attr(33, d);
	p->pciDeviceID = nv_attr(34, d);
	p->pciDomainID = nv_attr(50, d);
	p->tccDriver = nv_attr(35, d);
	p->asyncEngineCount = nv_attr(40, d);
	p->unifiedAddressing = nv_attr(41, d);
	p->memoryClockRate = nv_attr(36, d);
	p->memoryBusWidth = nv_attr(37, d);
	p->l2CacheSize = nv_attr(38, d);
	p->persistingL2CacheMaxSize = nv_attr(108, d);
	p->maxThreadsPerMultiProcessor = nv_attr(39, d);
	p->streamPrioritiesSupported = nv_attr(78, d);
	p->globalL1CacheSupported = nv_attr(79, d);
	p->localL1CacheSupported = nv_attr(80, d);
	p->sharedMemPerMultiprocessor = (size_t)nv_attr(81, d);
	p->maxSharedMemoryPerMultiProcessor = p->sharedMemPerMultiprocessor;
	p->regsPerMultiprocessor = nv_attr(82, d);
	p->managedMemory = nv_attr(83, d);
	p->isMultiGpuBoard = nv_attr(84, d);
	p->multiGpuBoardGroupID = nv_attr(85, d);
	p->hostNativeAtomicSupported = nv_attr(86, d);
	p->singleToDoublePrecisionPerfRatio = nv_attr(87, d);
	p->pageableMemoryAccess = nv_attr(88, d);
	p->concurrentManagedAccess = nv_attr(89, d);
	p->computePreemptionSupported = nv_attr(90, d);
	p->canUseHostPointerForRegisteredMem = nv_attr(91, d);
	p->cooperativeLaunch = nv_attr(95, d);
	p->cooperativeMultiDeviceLaunch = nv_attr(96, d);
	p->sharedMemPerBlockOptin = (size_t)nv_attr(97, d);
	p->hostRegisterSupported = nv_attr(99, d);
	p->pageableMemoryAccessUsesHostPageTables = nv_attr(100, d);
	p->directManagedMemAccessFromHost = nv_attr(101, d);
	p->maxBlocksPerMultiProcessor = nv_attr(106, d);
	p->accessPolicyMaxWindowSize = nv_attr(109, d);
	p->reservedSharedMemPerBlock = (size_t)nv_attr(111, d);
	p->sparseHipArraySupported = nv_attr(112, d);
	p->hostRegisterReadOnlySupported = nv_attr(113, d);
	p->timelineSemaphoreInteropSupported = nv_attr(114, d);
	p->memoryPoolsSupported = nv_attr(115, d);
	p->gpuDirectRDMASupported = nv_attr(116, d);
	p->gpuDirectRDMAFlushWritesOptions = (unsigned)nv_attr(117, d);
	p->gpuDirectRDMAWritesOrdering = nv_attr(118, d);
	p->memoryPoolSupportedHandleTypes = (unsigned)nv_attr(119, d);
	p->deferredMappingHipArraySupported = nv_attr(121, d);
	p->ipcEventSupported = nv_attr(125, d);
	p->clusterLaunch = nv_attr(120, d);
	p->clockInstructionRate = p->clockRate;
	// HIP's gcnArchName is the compiler target: sm_XY on NVIDIA.
	snprintf(p->gcnArchName, sizeof p->gcnArchName, "sm_%d%d", p->major, p->minor);
	return hipSuccess;
}

static hipError_t rgnv_hipMalloc(void** p, size_t n) { return NV(cudaMalloc, p, n); }
static hipError_t rgnv_hipFree(void* p) { return NV(cudaFree, p); }
static hipError_t rgnv_hipMallocAsync(void** p, size_t n, hipStream_t s) { return NV(cudaMallocAsync, p, n, s); }
static hipError_t rgnv_hipFreeAsync(void* p, hipStream_t s) { return NV(cudaFreeAsync, p, s); }
// AMD-only flags (NumaUser, Coherent, NonCoherent) have no CUDA meaning.
static hipError_t rgnv_hipHostMalloc(void** p, size_t n, unsigned flags) {
	return NV(cudaHostAlloc, p, n, flags & (hipHostMallocPortable | hipHostMallocMapped | hipHostMallocWriteCombined));
}
static hipError_t rgnv_hipHostFree(void* p) { return NV(cudaFreeHost, p); }
// hipHostRegister's flags are CUDA's cudaHostRegister ones, bit for bit
// (Portable 1, Mapped 2, IoMemory 4, ReadOnly 8); AMD-only bits are dropped.
static hipError_t rgnv_hipHostRegister(void* p, size_t n, unsigned flags) {
	return NV(cudaHostRegister, p, n, flags & (hipHostRegisterPortable | hipHostRegisterMapped | hipHostRegisterIoMemory | hipHostRegisterReadOnly));
}
static hipError_t rgnv_hipHostUnregister(void* p) { return NV(cudaHostUnregister, p); }

// hipMemcpyKind 0-4 equal CUDA's; AMD's DeviceToDeviceNoCU is a plain device copy.
static int nv_kind(hipMemcpyKind k) { return k == hipMemcpyDeviceToDeviceNoCU ? 3 : (int)k; }
// hipMemcpy returns when the copy is done. cudaMemcpy may return earlier: a
// copy from pageable host memory once it is staged, a device-to-device copy
// once it is queued on the null stream; wait for the null stream then.
static hipError_t rgnv_hipMemcpy(void* d, const void* s, size_t n, hipMemcpyKind k) {
	hipError_t e = NV(cudaMemcpy, d, s, n, nv_kind(k));
	if (e == hipSuccess && k != hipMemcpyDeviceToHost && k != hipMemcpyHostToHost) e = NV(cudaStreamSynchronize, NULL);
	return e;
}
static hipError_t rgnv_hipMemcpyAsync(void* d, const void* s, size_t n, hipMemcpyKind k, hipStream_t st) {
	return NV(cudaMemcpyAsync, d, s, n, nv_kind(k), st);
}
// hipMemset, like hipMemcpy, returns when done; CUDA's memsets return
// once queued on the null stream.
static hipError_t rgnv_hipMemset(void* d, int v, size_t n) {
	hipError_t e = NV(cudaMemset, d, v, n);
	return e == hipSuccess ? NV(cudaStreamSynchronize, NULL) : e;
}
static hipError_t rgnv_hipMemsetAsync(void* d, int v, size_t n, hipStream_t s) { return NV(cudaMemsetAsync, d, v, n, s); }
static hipError_t rgnv_hipMemsetD32(hipDeviceptr_t d, int v, size_t n) {
	hipError_t e = NV(cuMemsetD32_v2, (nv_devptr)(size_t)d, (unsigned)v, n);
	return e == hipSuccess ? NV(cudaStreamSynchronize, NULL) : e;
}
static hipError_t rgnv_hipMemsetD32Async(hipDeviceptr_t d, int v, size_t n, hipStream_t s) {
	return NV(cuMemsetD32Async, (nv_devptr)(size_t)d, (unsigned)v, n, s);
}

static hipError_t rgnv_hipStreamCreateWithPriority(hipStream_t* s, unsigned flags, int prio) {
	return NV(cudaStreamCreateWithPriority, (void**)s, flags, prio);
}
static hipError_t rgnv_hipStreamDestroy(hipStream_t s) { return NV(cudaStreamDestroy, s); }
static hipError_t rgnv_hipStreamSynchronize(hipStream_t s) { return NV(cudaStreamSynchronize, s); }
static hipError_t rgnv_hipStreamQuery(hipStream_t s) { return NV(cudaStreamQuery, s); }
static hipError_t rgnv_hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned flags) { return NV(cudaStreamWaitEvent, s, e, flags); }
static hipError_t rgnv_hipStreamGetFlags(hipStream_t s, unsigned* f) { return NV(cudaStreamGetFlags, s, f); }
static hipError_t rgnv_hipStreamGetPriority(hipStream_t s, int* p) { return NV(cudaStreamGetPriority, s, p); }
// Event flags 0-4 equal CUDA's; the AMD-only release and fence flags have none.
static hipError_t rgnv_hipEventCreateWithFlags(hipEvent_t* e, unsigned flags) {
	return NV(cudaEventCreateWithFlags, (void**)e, flags & (hipEventBlockingSync | hipEventDisableTiming | hipEventInterprocess));
}
static hipError_t rgnv_hipEventDestroy(hipEvent_t e) { return NV(cudaEventDestroy, e); }
static hipError_t rgnv_hipEventRecord(hipEvent_t e, hipStream_t s) { return NV(cudaEventRecord, e, s); }
static hipError_t rgnv_hipEventSynchronize(hipEvent_t e) { return NV(cudaEventSynchronize, e); }
static hipError_t rgnv_hipEventQuery(hipEvent_t e) { return NV(cudaEventQuery, e); }
static hipError_t rgnv_hipEventElapsedTime(float* ms, hipEvent_t a, hipEvent_t b) { return NV(cudaEventElapsedTime, ms, a, b); }

static hipError_t rgnv_hipModuleLoadData(hipModule_t* m, const void* image) { return NV(cuModuleLoadData, (void**)m, image); }
static hipError_t rgnv_hipModuleUnload(hipModule_t m) { return NV(cuModuleUnload, m); }
static hipError_t rgnv_hipModuleGetFunction(hipFunction_t* f, hipModule_t m, const char* name) {
	return NV(cuModuleGetFunction, (void**)f, m, name);
}
static hipError_t rgnv_hipModuleGetGlobal(hipDeviceptr_t* p, size_t* n, hipModule_t m, const char* name) {
	nv_devptr d = 0;
	size_t size = 0;
	hipError_t e = NV(cuModuleGetGlobal_v2, &d, &size, m, name);
	if (e == hipSuccess) {
		if (p != NULL) *p = (hipDeviceptr_t)(size_t)d;
		if (n != NULL) *n = size;
	}
	return e;
}

// HIP_LAUNCH_PARAM_END is 3; CUDA's CU_LAUNCH_PARAM_END is 0. The pointer
// and size keys (1, 2) agree.
static hipError_t rgnv_hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                             unsigned by, unsigned bz, unsigned shared, hipStream_t s, void** params,
                                             void** extra) {
	void* cu_extra[16];
	void** ce = NULL;
	if (extra != NULL) {
		int i = 0;
		for (; i < 15 && extra[i] != RG_HIP_LAUNCH_PARAM_END; i++) cu_extra[i] = extra[i];
		if (i == 15) return hipErrorInvalidValue;
		cu_extra[i] = NULL;
		ce = cu_extra;
	}
	return NV(cuLaunchKernel, f, gx, gy, gz, bx, by, bz, shared, s, params, ce);
}

// CUDA's CUlaunchAttribute and CUlaunchConfig (cuda.h, CUDA 12.0 on): an
// attribute is its id padded to 8 bytes and a 64-byte value.
typedef struct {
	int id;
	char pad[4];
	union {
		char bytes[64];
		unsigned long long align;
		int programmatic_stream_serialization_allowed;
	} value;
} nv_launch_attribute;

typedef struct {
	unsigned gx, gy, gz, bx, by, bz, shared;
	void* stream;
	nv_launch_attribute* attrs;
	unsigned num_attrs;
} nv_launch_config;

enum { NV_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 };

hipError_t rg_hip_nvidia_launch_early(int dev, hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                      unsigned by, unsigned bz, unsigned shared, hipStream_t s, void* args,
                                      size_t size) {
	if (RG_HIP_CU(cuLaunchKernelEx) == NULL) return RG_HIP_MISSING; // a driver before CUDA 12
	if (rg_hip_setdev == NULL) return RG_HIP_NODEVICE;
	int st = rg_hip_setdev(dev);
	if (st != 0) return (hipError_t)st;
	nv_launch_attribute a;
	memset(&a, 0, sizeof a);
	a.id = NV_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
	a.value.programmatic_stream_serialization_allowed = 1;
	nv_launch_config c = {gx, gy, gz, bx, by, bz, shared, s, &a, 1};
	void* extra[5] = {RG_HIP_LAUNCH_PARAM_BUFFER_POINTER, args, RG_HIP_LAUNCH_PARAM_BUFFER_SIZE, &size, NULL};
	return NV(cuLaunchKernelEx, &c, f, NULL, size == 0 ? NULL : extra);
}

// HIP_FUNC_ATTRIBUTE_* and CU_FUNC_ATTRIBUTE_* agree from 0 to 9.
static hipError_t rgnv_hipFuncGetAttribute(int* v, hipFunction_attribute a, hipFunction_t f) {
	if ((int)a < 0 || (int)a > 9) return hipErrorInvalidValue;
	return NV(cuFuncGetAttribute, v, (int)a, f);
}
// CUDA asks a kernel to opt in to more than 48 KiB of dynamic shared
// memory (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 8).
hipError_t rg_hip_nvidia_max_dynamic_shared(hipFunction_t f, int bytes) {
	return NV(cuFuncSetAttribute, f, 8, bytes);
}
static hipError_t rgnv_hipModuleOccupancyMaxPotentialBlockSize(int* grid, int* block, hipFunction_t f, size_t shared, int limit) {
	return NV(cuOccupancyMaxPotentialBlockSize, grid, block, f, NULL, shared, limit);
}

static hipError_t rgnv_hipStreamBeginCapture(hipStream_t s, hipStreamCaptureMode m) { return NV(cudaStreamBeginCapture, s, (int)m); }
static hipError_t rgnv_hipStreamEndCapture(hipStream_t s, hipGraph_t* g) { return NV(cudaStreamEndCapture, s, (void**)g); }
static hipError_t rgnv_hipStreamIsCapturing(hipStream_t s, hipStreamCaptureStatus* st) {
	int v = 0;
	hipError_t e = NV(cudaStreamIsCapturing, s, &v);
	*st = (hipStreamCaptureStatus)v;
	return e;
}
// CUDA 12 and 13 instantiate with three arguments; the error node and log
// of HIP's five-argument form are left untouched.
static hipError_t rgnv_hipGraphInstantiate(hipGraphExec_t* ex, hipGraph_t g, hipGraphNode_t* node, char* log, size_t n) {
	(void)node;
	(void)log;
	(void)n;
	return NV(cudaGraphInstantiate, (void**)ex, g, 0ull);
}
static hipError_t rgnv_hipGraphLaunch(hipGraphExec_t ex, hipStream_t s) { return NV(cudaGraphLaunch, ex, s); }
static hipError_t rgnv_hipGraphGetNodes(hipGraph_t g, hipGraphNode_t* nodes, size_t* n) { return NV(cudaGraphGetNodes, g, (void**)nodes, n); }
static hipError_t rgnv_hipGraphExecDestroy(hipGraphExec_t ex) { return NV(cudaGraphExecDestroy, ex); }
static hipError_t rgnv_hipGraphDestroy(hipGraph_t g) { return NV(cudaGraphDestroy, g); }

static hipError_t rgnv_hipDeviceCanAccessPeer(int* v, int d, int p) { return NV(cudaDeviceCanAccessPeer, v, d, p); }
static hipError_t rgnv_hipDeviceEnablePeerAccess(int p, unsigned flags) { return NV(cudaDeviceEnablePeerAccess, p, flags); }
static hipError_t rgnv_hipDeviceDisablePeerAccess(int p) { return NV(cudaDeviceDisablePeerAccess, p); }
static hipError_t rgnv_hipMemcpyPeerAsync(void* d, int dd, const void* s, int sd, size_t n, hipStream_t st) {
	return NV(cudaMemcpyPeerAsync, d, dd, s, sd, n, st);
}

// rg_hip_install_nvidia points the table at the translations above. The
// functions without one stay empty: calling them reports a missing symbol.
void rg_hip_install_nvidia(void* cudart, void* cuda) {
	rg_hip_unbind();
	rg_hip_cu_bind(rg_hip_cu_lib_cudart, cudart);
	rg_hip_cu_bind(rg_hip_cu_lib_cuda, cuda);
#define SET(name) rg_hip_set(rg_hip_idx_##name, (void*)rgnv_##name)
	SET(hipGetErrorName);
	SET(hipGetErrorString);
	SET(hipGetLastError);
	SET(hipDriverGetVersion);
	SET(hipRuntimeGetVersion);
	SET(hipInit);
	SET(hipGetDeviceCount);
	SET(hipSetDevice);
	SET(hipGetDevice);
	SET(hipGetDevicePropertiesR0600);
	SET(hipDeviceGetAttribute);
	SET(hipDeviceGetPCIBusId);
	SET(hipDeviceSynchronize);
	SET(hipMemGetInfo);
	SET(hipDeviceGetStreamPriorityRange);
	SET(hipMalloc);
	SET(hipFree);
	SET(hipMallocAsync);
	SET(hipFreeAsync);
	SET(hipHostMalloc);
	SET(hipHostFree);
	SET(hipHostRegister);
	SET(hipHostUnregister);
	SET(hipMemcpy);
	SET(hipMemcpyAsync);
	SET(hipMemset);
	SET(hipMemsetAsync);
	SET(hipMemsetD32);
	SET(hipMemsetD32Async);
	SET(hipStreamCreateWithPriority);
	SET(hipStreamDestroy);
	SET(hipStreamSynchronize);
	SET(hipStreamQuery);
	SET(hipStreamWaitEvent);
	SET(hipStreamGetFlags);
	SET(hipStreamGetPriority);
	SET(hipEventCreateWithFlags);
	SET(hipEventDestroy);
	SET(hipEventRecord);
	SET(hipEventSynchronize);
	SET(hipEventQuery);
	SET(hipEventElapsedTime);
	SET(hipModuleLoadData);
	SET(hipModuleUnload);
	SET(hipModuleGetFunction);
	SET(hipModuleGetGlobal);
	SET(hipModuleLaunchKernel);
	SET(hipFuncGetAttribute);
	SET(hipModuleOccupancyMaxPotentialBlockSize);
	SET(hipStreamBeginCapture);
	SET(hipStreamEndCapture);
	SET(hipStreamIsCapturing);
	SET(hipGraphInstantiate);
	SET(hipGraphLaunch);
	SET(hipGraphGetNodes);
	SET(hipGraphExecDestroy);
	SET(hipGraphDestroy);
	SET(hipDeviceCanAccessPeer);
	SET(hipDeviceEnablePeerAccess);
	SET(hipDeviceDisablePeerAccess);
	SET(hipMemcpyPeerAsync);
#undef SET
}

// rg_hip_nvidia_status exposes the status translation to the tests.
int rg_hip_nvidia_status(int cuda_status) { return (int)nv_status(cuda_status); }
int rg_hip_nvidia_cuda_status(int hip_status) { return nv_cuda_status((hipError_t)hip_status); }
