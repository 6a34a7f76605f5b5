// A fake "fix" library: some of the functions of fix_api.h, so that the
// generated table can be tested against a real dlopen'ed library.
#include <stddef.h>

static int current = -1;

int fixGetCount(int* count) { *count = 3; return 0; }
int fixSetDevice(int device) {
	if (device < 0 || device >= 3) return 1;
	current = device;
	return 0;
}
int fixMalloc(void** ptr, size_t size) {
	// Encodes the current device in the result, so that the caller can see
	// that the device trampoline made it current in the same call.
	*ptr = (void*)(size_t)(0x1000 * (current + 1) + size);
	return 0;
}
int fixVersion(void) { return 640; }

// The NVIDIA platform's side: a CUDA function of the table, and one that
// the table names but this library lacks (cuFixB).
int cuFixA(void* p, size_t (*f)(int), int n) { return p == NULL ? 7 : (int)f(n); }
