// The C surface of package miopen: the generated zmiopen.h, and what is
// written by hand (nvidia*.c).
#ifndef RG_MIOPEN_HELPERS_H
#define RG_MIOPEN_HELPERS_H

#include <stdint.h>
#include <stdlib.h>

#include "zmiopen.h"

// rg_miopen_ptr turns a device address held by Go as an integer back into
// the pointer the library takes.
static inline void* rg_miopen_ptr(uintptr_t p) { return (void*)p; }

// The NVIDIA platform (nvidia*.c): rg_miopen_install_nvidia fills the table
// with the translations to cuDNN (and with graph set, Find also times the
// engines of cuDNN's graph API); the rest serves messages and tests.
void rg_miopen_install_nvidia(void* cudnn, void* cublas, void* cudart, int graph);
int rg_miopen_nvidia_status(int cudnn_status);
const char* rg_miopen_nvidia_status_name(int cudnn_status);
int rg_miopen_nvidia_last(miopenHandle_t handle, const char** function);
const char* rg_miopen_nvidia_algo_name(int kind, unsigned raw);
unsigned long long rg_miopen_nvidia_graph_fallbacks(miopenHandle_t handle);
// What rg_miopen_install_nvidia found: cuBLAS (with cudart) for 1x1
// convolutions, and the graph API (asked for, with cudart).
extern int rg_miopen_nv_cublas_ok, rg_miopen_nv_graph_ok;

// The kinds of cuDNN convolution algorithm an encoded algorithm names.
enum { RG_NV_ALGO_FWD = 0, RG_NV_ALGO_BWD_DATA = 1, RG_NV_ALGO_BWD_FILTER = 2 };

#endif
