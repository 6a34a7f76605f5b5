/* The few CUDA driver types that CUPTI's activity headers name, declared
 * here so that the tracer builds without CUDA's headers (rocm-go ships no
 * CUDA header). Opaque handles stay incomplete; CUuuid is the one struct
 * the headers hold by value. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#define CUDA_VERSION 12040
typedef int CUresult;
typedef int CUdevice;
typedef int CUdevice_attribute;
typedef int CUgraphNodeType;
typedef int CUstreamAttrID;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUfunc_st* CUfunction;
typedef struct CUmod_st* CUmodule;
typedef struct CUlib_st* CUlibrary;
typedef struct CUkern_st* CUkernel;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphNode_st* CUgraphNode;
typedef struct CUgraphExec_st* CUgraphExec;
typedef union CUstreamAttrValue_u CUstreamAttrValue;
typedef struct CUaccessPolicyWindow_st CUaccessPolicyWindow;
typedef struct CUuuid_st {
	char bytes[16];
} CUuuid;
