#include "helpers.h"

static int rg_hip_set_device(int device) { return (int)rg_hipSetDevice(device); }

void* rg_hip_setdev_func(void) { return (void*)rg_hip_set_device; }
