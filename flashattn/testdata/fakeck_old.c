/* fakeck_old.c is a shim of another ABI version, for the loader's check. */
#include <stdint.h>

int32_t rocm_go_fmha_abi_version(void) { return 0; }
