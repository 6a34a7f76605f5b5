// The stream functions that package hip's fake CUDA (hip/testdata/fakecuda.c)
// leaves out on purpose; package miopen's tests link both into one fake
// libcudart and libcuda.
#include <stdlib.h>

int cudaStreamCreateWithPriority(void** s, unsigned flags, int priority) {
	*s = malloc(16);
	return 0;
}
int cudaStreamDestroy(void* s) {
	free(s);
	return 0;
}
int cudaDeviceSynchronize(void) { return 0; }
