/* libtrace.so: a kernel timeline of a process on an NVIDIA GPU, for
 * machines without Nsight Systems. Preloaded (LD_PRELOAD) into any
 * program, it turns on CUPTI's activity records of kernels (graph nodes
 * included) and copies, and a thread appends them every 100 ms to
 * $TRACE_OUT, one a line: "start end stream blocks name" (ns, GPU clock;
 * blocks is the grid's size, or a copy's bytes with name "memcpy").
 * $CUPTI_LIB names the machine's libcupti.so (CUDA's
 * targets/x86_64-linux/lib). The program must live 100 ms past its last
 * kernel: records still buffered when it exits are lost. Without both
 * variables it does nothing. scripts/trace/build.sh builds it;
 * scripts/trace/steps.py reads the file. */
#define _GNU_SOURCE
#include <cupti_activity.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef CUptiResult (*register_fn)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
typedef CUptiResult (*enable_fn)(CUpti_ActivityKind);
typedef CUptiResult (*flush_fn)(uint32_t);
typedef CUptiResult (*next_fn)(uint8_t*, size_t, CUpti_Activity**);

static flush_fn flush_all;
static next_fn next_record;
static FILE* out;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

enum { buffer_bytes = 8 << 20 };

static void CUPTIAPI requested(uint8_t** buf, size_t* size, size_t* max_records) {
	*buf = aligned_alloc(8, buffer_bytes);
	*size = *buf ? buffer_bytes : 0;
	*max_records = 0;
}

/* The records' leading fields (kind to name, graphNodeId aside) are the
 * same in every version of the kernel and copy records. */
static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t* buf, size_t size, size_t valid) {
	CUpti_Activity* r = NULL;
	pthread_mutex_lock(&mu);
	while (valid > 0 && next_record(buf, valid, &r) == CUPTI_SUCCESS) {
		if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
			const CUpti_ActivityKernel9* k = (const CUpti_ActivityKernel9*)r;
			fprintf(out, "%llu %llu %u %lld %s\n", (unsigned long long)k->start, (unsigned long long)k->end, k->streamId,
			        (long long)k->gridX * k->gridY * k->gridZ, k->name ? k->name : "?");
		} else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
			const CUpti_ActivityMemcpy5* m = (const CUpti_ActivityMemcpy5*)r;
			fprintf(out, "%llu %llu %u %llu memcpy\n", (unsigned long long)m->start, (unsigned long long)m->end, m->streamId,
			        (unsigned long long)m->bytes);
		}
	}
	fflush(out);
	pthread_mutex_unlock(&mu);
	free(buf);
}

static void* flusher(void* arg) {
	(void)arg;
	for (;;) {
		usleep(100000);
		flush_all(0);
	}
	return NULL;
}

__attribute__((constructor)) static void start(void) {
	const char* path = getenv("TRACE_OUT");
	const char* lib = getenv("CUPTI_LIB");
	if (!path || !lib) return;
	void* h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		fprintf(stderr, "trace: %s\n", dlerror());
		return;
	}
	register_fn reg = (register_fn)dlsym(h, "cuptiActivityRegisterCallbacks");
	enable_fn enable = (enable_fn)dlsym(h, "cuptiActivityEnable");
	flush_all = (flush_fn)dlsym(h, "cuptiActivityFlushAll");
	next_record = (next_fn)dlsym(h, "cuptiActivityGetNextRecord");
	if (!reg || !enable || !flush_all || !next_record) {
		fprintf(stderr, "trace: %s lacks CUPTI's activity API\n", lib);
		return;
	}
	if (!(out = fopen(path, "w"))) {
		perror("trace: TRACE_OUT");
		return;
	}
	CUptiResult e = reg(requested, completed);
	if (e == CUPTI_SUCCESS) e = enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	if (e == CUPTI_SUCCESS) e = enable(CUPTI_ACTIVITY_KIND_MEMCPY);
	if (e != CUPTI_SUCCESS) {
		fprintf(stderr, "trace: CUPTI status %d\n", (int)e);
		return;
	}
	pthread_t t;
	pthread_create(&t, NULL, flusher, NULL);
}
