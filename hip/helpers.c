#include "helpers.h"

static int rg_hip_setdev_self(int device) { return (int)rg_hipSetDevice(device); }

void rg_hip_install_setdev(void) { rg_hip_set_setdev(rg_hip_setdev_self); }

void* rg_hip_setdev_func(void) { return (void*)rg_hip_setdev_self; }
