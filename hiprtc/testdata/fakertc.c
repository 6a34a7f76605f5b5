// A fake compiler library for package hiprtc's tier-0 tests. Built twice:
// with -DFAKE_NVRTC it exports NVRTC's names (for the NVIDIA translation),
// else hipRTC's. The "code" it produces is a text that records what it was
// given: the source name, the options, the header names and the source.
#include <stdlib.h>
#include <string.h>

struct prog {
	char* src;
	char* name;
	char headers[512];
	char opts[2048];
	char lowered[4][128];
	int nexpr;
	char code[16384];
	char log[256];
};

#ifdef FAKE_NVRTC
#define P(x) nvrtc##x
#else
#define P(x) hiprtc##x
#endif

const char* P(GetErrorString)(int r) { return r == 6 ? "COMPILATION" : "OTHER"; }
int P(Version)(int* major, int* minor) {
#ifdef FAKE_NVRTC
	*major = 13, *minor = 0;
#else
	*major = 6, *minor = 4;
#endif
	return 0;
}

int P(CreateProgram)(void** out, const char* src, const char* name, int n, const char* const* headers,
                     const char* const* names) {
	struct prog* p = calloc(1, sizeof *p);
	p->src = strdup(src);
	p->name = strdup(name);
	for (int i = 0; i < n; i++) {
		strcat(p->headers, names[i]);
		strcat(p->headers, " ");
		if (strstr(headers[i], "#pragma") == NULL && strlen(headers[i]) < 2) return 3; // headers must have content
	}
	*out = p;
	return 0;
}

int P(DestroyProgram)(void** pp) {
	struct prog* p = *pp;
	free(p->src);
	free(p->name);
	free(p);
	*pp = NULL;
	return 0;
}

int P(AddNameExpression)(void* pp, const char* e) {
	struct prog* p = pp;
	if (p->nexpr == 4) return 3;
	strcpy(p->lowered[p->nexpr], "_Z_");
	strcat(p->lowered[p->nexpr++], e);
	return 0;
}

int P(CompileProgram)(void* pp, int n, const char* const* opts) {
	struct prog* p = pp;
	for (int i = 0; i < n; i++) {
		if (strcmp(opts[i], "--bad-option") == 0) return 5;
		strcat(p->opts, opts[i]);
		strcat(p->opts, " ");
	}
	if (strstr(p->src, "#error") != NULL) {
		strcpy(p->log, "kernel.hip:3: error: #error reached\n");
		return 6;
	}
	/* NVRTC without CUDA's headers: no folder of them among the options. */
	if (strstr(p->src, "<cuda_fp16.h>") != NULL && strstr(p->opts, "-I") == NULL) {
		strcpy(p->log, "kernel.hip(1): catastrophic error: cannot open source file \"cuda_fp16.h\"\n");
		return 6;
	}
	strcpy(p->log, "warning: fake compiler\n");
	strcpy(p->code, "FAKE name=");
	strcat(p->code, p->name);
	strcat(p->code, "\nopts=");
	strcat(p->code, p->opts);
	strcat(p->code, "\nheaders=");
	strcat(p->code, p->headers);
	strcat(p->code, "\nsrc=");
	strncat(p->code, p->src, sizeof p->code - strlen(p->code) - 1);
	return 0;
}

int P(GetProgramLogSize)(void* pp, size_t* n) {
	*n = strlen(((struct prog*)pp)->log) + 1;
	return 0;
}
int P(GetProgramLog)(void* pp, char* log) {
	strcpy(log, ((struct prog*)pp)->log);
	return 0;
}

int P(GetLoweredName)(void* pp, const char* e, const char** lowered) {
	struct prog* p = pp;
	for (int i = 0; i < p->nexpr; i++) {
		if (strcmp(p->lowered[i] + 3, e) == 0) {
			*lowered = p->lowered[i];
			return 0;
		}
	}
	return 10;
}

#ifdef FAKE_NVRTC
// A virtual arch (compute_XY) gives no CUBIN, only PTX.
static int virtual_arch(struct prog* p) { return strstr(p->opts, "compute_") != NULL; }
int nvrtcGetCUBINSize(void* pp, size_t* n) {
	struct prog* p = pp;
	*n = virtual_arch(p) ? 0 : strlen(p->code);
	return 0;
}
int nvrtcGetCUBIN(void* pp, char* c) {
	memcpy(c, ((struct prog*)pp)->code, strlen(((struct prog*)pp)->code));
	return 0;
}
int nvrtcGetPTXSize(void* pp, size_t* n) {
	*n = strlen(((struct prog*)pp)->code) + 1;
	return 0;
}
int nvrtcGetPTX(void* pp, char* c) {
	strcpy(c, ((struct prog*)pp)->code);
	return 0;
}
#else
int hiprtcGetCodeSize(void* pp, size_t* n) {
	*n = strlen(((struct prog*)pp)->code);
	return 0;
}
int hiprtcGetCode(void* pp, char* c) {
	memcpy(c, ((struct prog*)pp)->code, strlen(((struct prog*)pp)->code));
	return 0;
}
#endif
