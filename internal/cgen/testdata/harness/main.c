// Drives the generated table and trampolines of zfix.h against fakefix.so.
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "zfix.h"

static int failures;
#define CHECK(cond) do { if (!(cond)) { printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

static int setdev(int d) { return (int)rg_fixSetDevice(d); }
static size_t twice(int n) { return (size_t)(2 * n); }

int main(int argc, char** argv) {
	// Nothing bound: every trampoline reports the missing function.
	int n = 0;
	CHECK(rg_fixGetCount(&n) == RG_FIX_MISSING);
	CHECK(rg_fixVersion() == 0);
	rg_fixReset(); // a void function that is missing does nothing
	CHECK(!rg_fix_has(rg_fix_idx_fixGetCount));

	void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) { printf("FAIL dlopen: %s\n", dlerror()); return 1; }
	rg_fix_bind(lib);
	CHECK(rg_fixGetCount(&n) == fixSuccess && n == 3);
	CHECK(rg_fixVersion() == 640);
	CHECK(rg_fix_has(rg_fix_idx_fixMalloc));
	// Present in the header, absent from the library: an error, no crash.
	CHECK(rg_fixInit(0) == RG_FIX_MISSING);
	CHECK(rg_fixGetErrorName(fixSuccess) == NULL);
	CHECK(!rg_fix_has(rg_fix_idx_fixInit));

	// Device trampolines: no setdev yet, then a real one.
	void* p = NULL;
	CHECK(rg_fixMalloc_on(1, &p, 16) == RG_FIX_NODEVICE);
	rg_fix_set_setdev(setdev);
	CHECK(rg_fixMalloc_on(2, &p, 16) == fixSuccess && p == (void*)(0x3000 + 16));
	CHECK(rg_fixMalloc_on(0, &p, 8) == fixSuccess && p == (void*)(0x1000 + 8));
	CHECK(rg_fixMalloc_on(7, &p, 8) == fixErrorInvalidValue); // the set-device status, passed through

	// Names and indices.
	CHECK(strcmp(rg_fix_name(rg_fix_idx_fixLaunch), "fixLaunch") == 0);
	CHECK(rg_fix_index("fixVersion") == rg_fix_idx_fixVersion);
	CHECK(rg_fix_index("nope") == -1 && rg_fix_name(-1) == NULL && rg_fix_name(rg_fix_count) == NULL);

	// Filling by hand, as a translating platform does, and unbinding.
	rg_fix_set(rg_fix_idx_fixInit, (void*)setdev);
	CHECK(rg_fixInit(1) == fixSuccess);
	rg_fix_unbind();
	CHECK(rg_fixGetCount(&n) == RG_FIX_MISSING && rg_fixInit(1) == RG_FIX_MISSING);

	// The CUDA table: nothing bound, then one library bound; a function
	// its library lacks is RG_CUDA_MISSING, never a crash.
	CHECK(RG_FIX_CU(cuFixA) == NULL);
	CHECK(RG_FIX_CUDA(cuFixA, (void*)1, twice, 21) == RG_CUDA_MISSING);
	rg_fix_cu_bind(rg_fix_cu_lib_cufix, lib);
	CHECK(RG_FIX_CUDA(cuFixA, (void*)1, twice, 21) == 42);
	CHECK(RG_FIX_CUDA(cuFixA, NULL, twice, 21) == 7);
	CHECK(RG_FIX_CUDA(cuFixB, (void*)1, twice, 21) == RG_CUDA_MISSING);
	CHECK(RG_FIX_CU(cudaGetErrorName) == NULL); // its library (cudart) is not bound
	rg_fix_cu_bind(rg_fix_cu_lib_cufix, NULL);
	CHECK(RG_FIX_CUDA(cuFixA, (void*)1, twice, 21) == RG_CUDA_MISSING);
	rg_fix_cu_bind(rg_fix_cu_lib_cufix, lib);
	CHECK(RG_FIX_CU(cuFixA) != NULL);
	rg_fix_unbind(); // the main table's unbind empties the CUDA table too
	CHECK(RG_FIX_CU(cuFixA) == NULL);
	CHECK(RG_FIX_CUDA_MISSING != RG_FIX_MISSING && RG_FIX_CUDA_MISSING != RG_FIX_NODEVICE);

	printf("%s: %d failures\n", failures ? "FAIL" : "ok", failures);
	return failures != 0;
}
