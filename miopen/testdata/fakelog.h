// The log of the fake libraries: each call that matters appends a line to
// the file named by $ROCM_GO_FAKE_LOG, which the tests read (package
// miopen's, and package rccl's fake RCCL).
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void logf_(const char* fmt, ...) {
	const char* path = getenv("ROCM_GO_FAKE_LOG");
	if (path == NULL) return;
	FILE* f = fopen(path, "a");
	if (f == NULL) return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}
