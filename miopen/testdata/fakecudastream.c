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
// time passes only while a plan runs, each run adding its time to
// $ROCM_GO_FAKE_MS; an event holds that total when recorded.
static double fake_total(void) {
	const char* v = getenv("ROCM_GO_FAKE_MS");
	return v != NULL ? strtod(v, NULL) : 0;
}
int cudaEventCreate(void** e) {
	*e = calloc(1, sizeof(double));
	return 0;
}
int cudaEventRecord(void* e, void* s) {
	if (e == NULL) return 400;
	*(double*)e = fake_total();
	return 0;
}
int cudaEventSynchronize(void* e) { return e != NULL ? 0 : 400; }
int cudaEventElapsedTime(float* ms, void* start, void* end) {
	*ms = (float)(*(double*)end - *(double*)start);
	return 0;
}
