// The C surface of package hip: the generated zhip.h, and what is written
// by hand (helpers.c, nvidia.c).
#ifndef RG_HIP_HELPERS_H
#define RG_HIP_HELPERS_H

#include <stdint.h>
#include <stdlib.h>

#include "zhip.h"

// HIP's launch parameter keys (macros with pointer casts in hip_runtime_api.h).
#define RG_HIP_LAUNCH_PARAM_BUFFER_POINTER ((void*)0x01)
#define RG_HIP_LAUNCH_PARAM_BUFFER_SIZE ((void*)0x02)
#define RG_HIP_LAUNCH_PARAM_END ((void*)0x03)

// rg_hip_setdev_func is the set-device function package hip publishes for
// every package's device trampolines: hipSetDevice through the table.
void* rg_hip_setdev_func(void);

// The NVIDIA platform (nvidia.c): rg_hip_install_nvidia fills the table
// with the translations to CUDA; the status translations are exposed for
// the tests.
void rg_hip_install_nvidia(void* cudart, void* cuda);
int rg_hip_nvidia_status(int cuda_status);
int rg_hip_nvidia_cuda_status(int hip_status);
hipError_t rg_hip_nvidia_max_dynamic_shared(hipFunction_t f, int bytes);
hipError_t rg_hip_nvidia_launch_early(int dev, hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                      unsigned by, unsigned bz, unsigned shared, hipStream_t s, void* args,
                                      size_t size);

// rg_hip_ptr is a device address as the pointer the runtime calls take
// (Device.BufferAt): converted in C, where an integer from Go may become
// a pointer.
static inline void* rg_hip_ptr(uintptr_t p) { return (void*)p; }

// rg_hip_launch launches f with its arguments packed in one buffer, which
// the runtime copies before returning; the device is made current in the
// same call. Handles and the buffer come as integers: the launch is the
// hottest call, and pointer arguments cost cgo a check each (the caller
// keeps the buffer, heap memory, alive across the call). early launches
// through CUDA's cuLaunchKernelEx with programmatic stream serialization
// (the caller checked the device has it), or as usual where the driver
// lacks that call.
static inline hipError_t rg_hip_launch(int dev, uintptr_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                       unsigned by, unsigned bz, unsigned shared, uintptr_t stream, uintptr_t args,
                                       size_t size, int early) {
	if (early) {
		hipError_t e = rg_hip_nvidia_launch_early(dev, (hipFunction_t)f, gx, gy, gz, bx, by, bz, shared,
		                                          (hipStream_t)stream, (void*)args, size);
		if (e != RG_HIP_MISSING) return e;
	}
	if (size == 0) {
		return rg_hipModuleLaunchKernel_on(dev, (hipFunction_t)f, gx, gy, gz, bx, by, bz, shared, (hipStream_t)stream,
		                                   NULL, NULL);
	}
	void* extra[5] = {RG_HIP_LAUNCH_PARAM_BUFFER_POINTER, (void*)args, RG_HIP_LAUNCH_PARAM_BUFFER_SIZE, &size,
	                  RG_HIP_LAUNCH_PARAM_END};
	return rg_hipModuleLaunchKernel_on(dev, (hipFunction_t)f, gx, gy, gz, bx, by, bz, shared, (hipStream_t)stream,
	                                   NULL, extra);
}

#endif
