// The NVIDIA platform of package rccl: every function of the generated
// table, translated to NCCL (libnccl.so.2), opened with dlopen. No NCCL
// header is needed: cgen.spec declares the functions called, and the
// generated table resolves them.
//
// RCCL keeps NCCL's API, so the translation is thin:
//   - The stream: a hipStream_t of the NVIDIA platform is the CUDA stream
//     itself (package hip's translation creates cudaStream_t handles), and
//     device ordinals are CUDA's.
//   - ncclDataType_t and ncclRedOp_t have the same values in both (0 to 11
//     and 0 to 4): they pass as they are.
//   - Statuses by name; a status NCCL adds later becomes an internal error.
#include "helpers.h"

// nv_status translates an NCCL status to RCCL's.
static ncclResult_t nv_status(int s) {
	switch (s) {
	case RG_CUDA_MISSING: return RG_RCCL_CUDA_MISSING;
	case 0: return ncclSuccess;            // ncclSuccess
	case 1: return ncclUnhandledCudaError; // ncclUnhandledCudaError
	case 2: return ncclSystemError;        // ncclSystemError
	case 3: return ncclInternalError;      // ncclInternalError
	case 4: return ncclInvalidArgument;    // ncclInvalidArgument
	case 5: return ncclInvalidUsage;       // ncclInvalidUsage
	case 6: return ncclRemoteError;        // ncclRemoteError
	case 7: return ncclInProgress;         // ncclInProgress
	}
	return ncclInternalError;
}

// NV(name, args...) calls an NCCL function of the generated table and
// yields its status as RCCL's.
#define NV(name, ...) nv_status(RG_RCCL_CUDA(name, __VA_ARGS__))

static const char* rgnv_ncclGetErrorString(ncclResult_t r) {
	rg_rccl_cu_fn_ncclGetErrorString f = RG_RCCL_CU(ncclGetErrorString);
	return f != NULL ? f((int)r) : NULL;
}
static const char* rgnv_ncclGetLastError(ncclComm_t c) {
	rg_rccl_cu_fn_ncclGetLastError f = RG_RCCL_CU(ncclGetLastError);
	return f != NULL ? f(c) : NULL;
}
static ncclResult_t rgnv_ncclGetVersion(int* v) { return NV(ncclGetVersion, v); }
static ncclResult_t rgnv_ncclGetUniqueId(ncclUniqueId* id) { return NV(ncclGetUniqueId, id); }
static ncclResult_t rgnv_ncclCommInitRank(ncclComm_t* c, int n, ncclUniqueId id, int rank) {
	return NV(ncclCommInitRank, (void**)c, n, id, rank);
}
static ncclResult_t rgnv_ncclCommInitAll(ncclComm_t* c, int n, const int* devs) { return NV(ncclCommInitAll, (void**)c, n, devs); }
static ncclResult_t rgnv_ncclCommSplit(ncclComm_t c, int color, int key, ncclComm_t* out, ncclConfig_t* config) {
	return NV(ncclCommSplit, c, color, key, (void**)out, config);
}
static ncclResult_t rgnv_ncclCommFinalize(ncclComm_t c) { return NV(ncclCommFinalize, c); }
static ncclResult_t rgnv_ncclCommDestroy(ncclComm_t c) { return NV(ncclCommDestroy, c); }
static ncclResult_t rgnv_ncclCommAbort(ncclComm_t c) { return NV(ncclCommAbort, c); }
static ncclResult_t rgnv_ncclCommGetAsyncError(ncclComm_t c, ncclResult_t* e) {
	int s = 0;
	ncclResult_t r = NV(ncclCommGetAsyncError, c, &s);
	*e = r == ncclSuccess ? nv_status(s) : ncclSuccess;
	return r;
}
static ncclResult_t rgnv_ncclCommCount(const ncclComm_t c, int* n) { return NV(ncclCommCount, c, n); }
static ncclResult_t rgnv_ncclCommCuDevice(const ncclComm_t c, int* d) { return NV(ncclCommCuDevice, c, d); }
static ncclResult_t rgnv_ncclCommUserRank(const ncclComm_t c, int* r) { return NV(ncclCommUserRank, c, r); }
static ncclResult_t rgnv_ncclAllReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                                       hipStream_t st) {
	return NV(ncclAllReduce, s, r, n, (int)t, (int)op, c, st);
}
static ncclResult_t rgnv_ncclAllGather(const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c, hipStream_t st) {
	return NV(ncclAllGather, s, r, n, (int)t, c, st);
}
static ncclResult_t rgnv_ncclReduceScatter(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                                           hipStream_t st) {
	return NV(ncclReduceScatter, s, r, n, (int)t, (int)op, c, st);
}
static ncclResult_t rgnv_ncclBroadcast(const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c,
                                       hipStream_t st) {
	return NV(ncclBroadcast, s, r, n, (int)t, root, c, st);
}
static ncclResult_t rgnv_ncclReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, int root,
                                    ncclComm_t c, hipStream_t st) {
	return NV(ncclReduce, s, r, n, (int)t, (int)op, root, c, st);
}
static ncclResult_t rgnv_ncclSend(const void* s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, hipStream_t st) {
	return NV(ncclSend, s, n, (int)t, peer, c, st);
}
static ncclResult_t rgnv_ncclRecv(void* r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, hipStream_t st) {
	return NV(ncclRecv, r, n, (int)t, peer, c, st);
}
static ncclResult_t rgnv_ncclGroupStart(void) { return NV(ncclGroupStart); }
static ncclResult_t rgnv_ncclGroupEnd(void) { return NV(ncclGroupEnd); }

// rg_rccl_install_nvidia points the table at the translations above.
void rg_rccl_install_nvidia(void* nccl) {
	rg_rccl_unbind();
	rg_rccl_cu_bind(rg_rccl_cu_lib_nccl, nccl);
#define SET(name) rg_rccl_set(rg_rccl_idx_##name, (void*)rgnv_##name);
	SET(ncclGetErrorString)
	SET(ncclGetLastError)
	SET(ncclGetVersion)
	SET(ncclGetUniqueId)
	SET(ncclCommInitRank)
	SET(ncclCommInitAll)
	SET(ncclCommSplit)
	SET(ncclCommFinalize)
	SET(ncclCommDestroy)
	SET(ncclCommAbort)
	SET(ncclCommGetAsyncError)
	SET(ncclCommCount)
	SET(ncclCommCuDevice)
	SET(ncclCommUserRank)
	SET(ncclAllReduce)
	SET(ncclAllGather)
	SET(ncclReduceScatter)
	SET(ncclBroadcast)
	SET(ncclReduce)
	SET(ncclSend)
	SET(ncclRecv)
	SET(ncclGroupStart)
	SET(ncclGroupEnd)
#undef SET
}

// rg_rccl_nvidia_status translates an NCCL status as the NVIDIA platform
// does (for tests).
int rg_rccl_nvidia_status(int nccl_status) { return (int)nv_status(nccl_status); }
