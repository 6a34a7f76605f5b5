// The C surface of package hiprtc: the generated zhiprtc.h, and what is
// written by hand (nvidia.c).
#ifndef RG_HIPRTC_HELPERS_H
#define RG_HIPRTC_HELPERS_H

#include "zhiprtc.h"

// rg_hiprtc_install_nvidia fills the table with the translations to NVRTC
// (nvidia.c).
void rg_hiprtc_install_nvidia(void* nvrtc);

#endif
