// The C surface of package rccl: the generated zrccl.h and the NVIDIA
// platform (nvidia.c).
#ifndef RG_RCCL_HELPERS_H
#define RG_RCCL_HELPERS_H

#include <stdint.h>
#include <string.h>

#include "zrccl.h"

// rg_rccl_install_nvidia fills the table with the translations to NCCL;
// the status translation is exposed for the tests.
void rg_rccl_install_nvidia(void* nccl);
int rg_rccl_nvidia_status(int nccl_status);

// rg_rccl_id copies 128 bytes into an ncclUniqueId, which the calls take
// by value.
static inline ncclUniqueId rg_rccl_id(const void* bytes) {
	ncclUniqueId id;
	memcpy(&id, bytes, sizeof id);
	return id;
}

// rg_rccl_ptr turns a device address, kept by Go as an integer, into the
// pointer the calls take.
static inline void* rg_rccl_ptr(uintptr_t p) { return (void*)p; }

#endif
