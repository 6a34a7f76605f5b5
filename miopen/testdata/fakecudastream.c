// The stream and event functions that package hip's fake CUDA
// (hip/testdata/fakecuda.c) leaves out; package miopen's tests link both
// into one fake libcudart and libcuda.
#include <stdlib.h>

int cudaStreamCreateWithPriority(void** s, unsigned flags, int priority) {
	*s = malloc(16);
	return 0;
}
int cudaStreamDestroy(void* s) {
	free(s);
	return 0;
}

// Events that time the fake cuDNN's graph-API plans (fakecudnngraph.c):
// the elapsed time is what the last plan run left in $ROCM_GO_FAKE_MS.
int cudaEventCreate(void** e) {
	*e = malloc(1);
	return 0;
}
int cudaEventRecord(void* e, void* s) { return e != NULL ? 0 : 400; }
int cudaEventSynchronize(void* e) { return e != NULL ? 0 : 400; }
int cudaEventElapsedTime(float* ms, void* start, void* end) {
	const char* v = getenv("ROCM_GO_FAKE_MS");
	*ms = v != NULL ? strtof(v, NULL) : 1.0f;
	return 0;
}
