// The graph (backend) API of the fake cuDNN 9 (fakecudnn.c), for the
// tier-0 tests of package miopen's nvidia_graph.c. Descriptors carry their
// cudnnBackendDescriptorType_t; each attribute is checked against the type
// cudnn_graph.h gives it and the descriptor type it belongs to, and each
// Finalize against what the descriptor needs: a convolution node's tensors
// must have the shapes its kind implies (y = conv(x, w), for the backward
// kinds too), so a tensor in the wrong slot fails. Calls append what they
// were given to $ROCM_GO_FAKE_LOG.
//
// The engines: heuristics mode A returns engines 7 (tensor cores), 3
// (tensor cores, Winograd), 1 (down-converts its inputs), 0 and 5 (tensor
// cores, the fastest, and wrong); the fallback list 0 again, 9 (whose plan
// fails to finalize) and 11 (FFT). A plan of engine e needs the workspace
// nvg_ws[e]; running it "takes" nvg_ms[e] ms, which it adds to
// $ROCM_GO_FAKE_MS (the fake cudart's clock), and writes 1 into every
// element of its output, as the legacy convolutions do, but engine 5
// writes 3 into the last quarter of it (so that for an output it compares
// in full, a relative distance of 1 from the legacy result).
//
// With $ROCM_GO_FAKE_KNOBS=N, mode A lists N configurations of engine 7
// first (knobs 0 to N-1; knob k takes 0.25 - k/64 ms, exact in a float:
// the last the fastest), then 3, 1, 0 and 5; logs name a knob above 0.
//
// Triggers: a tensor with a batch of 15 makes the heuristics fail; with
// $ROCM_GO_FAKE_EXEC_FAIL set, cudnnBackendExecute fails.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakefill.h"
#include "fakelog.h"

#define BACKEND 100 // the kind of a backend descriptor, beside fakecudnn.c's
#define BAD_KIND 2012  // CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE
#define BAD_TYPE 2010  // CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE
#define BAD 2000       // CUDNN_STATUS_BAD_PARAM
#define NOT_FINAL 2004 // CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED
#define NOT_SUPPORTED 3000

// cudnnBackendDescriptorType_t
enum { CONV = 1, ENGINE = 2, ENGINECFG = 3, HEUR = 4, PLAN = 5, OP_FWD = 10, OP_BWD_FILTER = 11, OP_BWD_DATA = 12, GRAPH = 15, PACK = 16,
       TENSOR = 17 };
// cudnnBackendAttributeType_t
enum { T_HANDLE = 0, T_DATA_TYPE = 1, T_INT64 = 3, T_FLOAT = 4, T_DOUBLE = 5, T_VOID_PTR = 6, T_CONV_MODE = 7, T_HEUR_MODE = 8,
       T_NOTE = 11, T_DESC = 15 };

struct bd {
	int kind, type, final;
	// tensor
	int64_t uid, align, nb, dims[8], strides[8];
	int dtype, has;
	// convolution
	int comp, mode;
	int64_t spatial, pre[3], post[3], stride[3], dil[3];
	// operation: the descriptors of ALPHA + 2 .. + 5 (CONV_DESC, then the
	// kind's three tensors), its scaling factors and their type
	struct bd* arg[4];
	double alpha, beta;
	int scale;
	// graph, heuristics, plan
	void* handle;
	struct bd *op, *graph, *cfg;
	int heur;
	// engine configuration and engine
	int engine, knob;
	// variant pack
	int64_t uids[3];
	void* ptrs[3];
	void* ws;
	int nptr, has_ws;
};

static const char* i64s(const int64_t* v, int64_t n) {
	static __thread char buf[8][160];
	static __thread int next;
	char* b = buf[next++ % 8];
	b[0] = 0;
	for (int64_t i = 0; i < n; i++) sprintf(b + strlen(b), i ? ",%lld" : "%lld", (long long)v[i]);
	return b;
}

static int isb(const void* d, int type) { return d != NULL && ((const struct bd*)d)->kind == BACKEND && ((const struct bd*)d)->type == type; }

int cudnnBackendCreateDescriptor(int type, void** out) {
	struct bd* d = calloc(1, sizeof *d);
	d->kind = BACKEND, d->type = type;
	*out = d;
	logf_("bcreate %d", type);
	return 0;
}

int cudnnBackendDestroyDescriptor(void* p) {
	struct bd* d = p;
	if (d == NULL || d->kind != BACKEND) return BAD_KIND;
	logf_("bdestroy %d", d->type);
	free(d);
	return 0;
}

// The engines the heuristics know: their numerical notes (bits of
// cudnnBackendNumericalNote_t), workspaces and times.
static const unsigned nvg_notes[12] = {[7] = 1u << 0, [3] = 1u << 0 | 1u << 5, [1] = 1u << 1, [11] = 1u << 3, [5] = 1u << 0};
static const int64_t nvg_ws[12] = {[7] = 3000, [3] = 1000, [11] = 9000, [5] = 500};
static const char* const nvg_ms[12] = {[0] = "0.875", [3] = "0.3", [7] = "0.25", [11] = "0.6", [5] = "0.125"};
static const int mode_a[] = {7, 3, 1, 0, 5}, fallback[] = {0, 9, 11};

// knobs is $ROCM_GO_FAKE_KNOBS: how many configurations of engine 7 mode A
// lists (1 without it).
static int knobs(void) {
	const char* k = getenv("ROCM_GO_FAKE_KNOBS");
	int n = k != NULL ? atoi(k) : 1;
	return n < 1 ? 1 : n > 40 ? 40 : n;
}

// knob_tag names a configuration's knob in the log: "" for knob 0.
static const char* knob_tag(const struct bd* cfg) {
	static char buf[32];
	buf[0] = 0;
	if (cfg->knob > 0) snprintf(buf, sizeof buf, " knob=%d", cfg->knob);
	return buf;
}

// set checks the attribute's type and count; v holds n elements.
#define WANT(t, cnt)                                          \
	do {                                                      \
		if (type != (t)) return BAD_TYPE;                     \
		if ((cnt) >= 0 && n != (cnt)) return BAD;             \
	} while (0)

int cudnnBackendSetAttribute(void* p, int attr, int type, int64_t n, const void* v) {
	struct bd* d = p;
	if (d == NULL || d->kind != BACKEND) return BAD_KIND;
	if (d->final) return BAD; // finalized descriptors are read-only
	const int64_t* iv = v;
	switch (d->type) {
	case TENSOR:
		switch (attr) {
		case 906: WANT(T_INT64, 1); d->uid = iv[0]; d->has |= 1; return 0;
		case 901: WANT(T_DATA_TYPE, 1); d->dtype = *(const int*)v; d->has |= 2; return 0;
		case 900: WANT(T_INT64, 1); d->align = iv[0]; d->has |= 4; return 0;
		case 902: WANT(T_INT64, -1); if (n < 3 || n > 8) return BAD; d->nb = n; memcpy(d->dims, v, 8 * (size_t)n); d->has |= 8; return 0;
		case 903: WANT(T_INT64, -1); if (n != d->nb) return BAD; memcpy(d->strides, v, 8 * (size_t)n); d->has |= 16; return 0;
		}
		return BAD;
	case CONV:
		switch (attr) {
		case 100: WANT(T_DATA_TYPE, 1); d->comp = *(const int*)v; d->has |= 1; return 0;
		case 101: WANT(T_CONV_MODE, 1); d->mode = *(const int*)v; d->has |= 2; return 0;
		case 106: WANT(T_INT64, 1); if (iv[0] < 1 || iv[0] > 3) return BAD; d->spatial = iv[0]; d->has |= 4; return 0;
		case 102: WANT(T_INT64, d->spatial); memcpy(d->dil, v, 8 * (size_t)n); d->has |= 8; return 0;
		case 103: WANT(T_INT64, d->spatial); memcpy(d->stride, v, 8 * (size_t)n); d->has |= 16; return 0;
		case 104: WANT(T_INT64, d->spatial); memcpy(d->post, v, 8 * (size_t)n); d->has |= 32; return 0;
		case 105: WANT(T_INT64, d->spatial); memcpy(d->pre, v, 8 * (size_t)n); d->has |= 64; return 0;
		}
		return BAD;
	case OP_FWD: case OP_BWD_DATA: case OP_BWD_FILTER: {
		int first = d->type == OP_FWD ? 700 : d->type == OP_BWD_DATA ? 706 : 712;
		if (attr == first || attr == first + 1) {
			if (n != 1 || (type != T_FLOAT && type != T_DOUBLE)) return BAD_TYPE;
			double x = type == T_FLOAT ? *(const float*)v : *(const double*)v;
			if (attr == first) d->alpha = x; else d->beta = x;
			d->scale = type;
			return 0;
		}
		if (attr < first + 2 || attr > first + 5) return BAD;
		WANT(T_DESC, 1);
		struct bd* arg = *(struct bd* const*)v;
		if (!isb(arg, attr == first + 2 ? CONV : TENSOR) || !arg->final) return BAD_KIND;
		d->arg[attr - first - 2] = arg;
		return 0;
	}
	case GRAPH:
		if (attr == 800) { WANT(T_HANDLE, 1); d->handle = *(void* const*)v; return 0; }
		if (attr == 801) {
			WANT(T_DESC, 1);
			struct bd* op = *(struct bd* const*)v;
			if (op == NULL || op->kind != BACKEND || op->type < OP_FWD || op->type > OP_BWD_DATA || !op->final) return BAD_KIND;
			d->op = op;
			return 0;
		}
		return BAD;
	case HEUR:
		if (attr == 201) { WANT(T_DESC, 1); if (!isb(*(void* const*)v, GRAPH)) return BAD_KIND; d->graph = *(struct bd* const*)v; return 0; }
		if (attr == 200) { WANT(T_HEUR_MODE, 1); d->heur = *(const int*)v; return 0; }
		return BAD;
	case PLAN:
		if (attr == 400) { WANT(T_HANDLE, 1); d->handle = *(void* const*)v; return 0; }
		if (attr == 401) { WANT(T_DESC, 1); if (!isb(*(void* const*)v, ENGINECFG)) return BAD_KIND; d->cfg = *(struct bd* const*)v; return 0; }
		return BAD;
	case PACK:
		switch (attr) {
		case 1000: WANT(T_INT64, 3); memcpy(d->uids, v, sizeof d->uids); return 0;
		case 1001: WANT(T_VOID_PTR, 3); memcpy(d->ptrs, v, sizeof d->ptrs); d->nptr = 3; return 0;
		case 1003: WANT(T_VOID_PTR, 1); d->ws = *(void* const*)v; d->has_ws = 1; return 0;
		}
		return BAD;
	}
	return BAD;
}

// out is the output size of a cross-correlation of x by w, dimension i.
static int64_t out_dim(const struct bd* x, const struct bd* w, const struct bd* c, int i) {
	if (i == 0) return x->dims[0];
	if (i == 1) return w->dims[0];
	int s = i - 2;
	return (x->dims[i] + c->pre[s] + c->post[s] - c->dil[s] * (w->dims[i] - 1) - 1) / c->stride[s] + 1;
}

static int finalize_op(struct bd* d) {
	for (int i = 0; i < 4; i++) {
		if (d->arg[i] == NULL) return BAD;
	}
	if (d->scale == 0) return BAD;
	// Every kind's tensors come in the order of y = conv(x, w): forward W,
	// X, Y; data gradient W, DX, DY; weights gradient DW, X, DY.
	struct bd *c = d->arg[0], *w = d->arg[1], *x = d->arg[2], *y = d->arg[3];
	const char* kind = d->type == OP_FWD ? "fwd" : d->type == OP_BWD_DATA ? "data" : "filter";
	// Double data takes double scaling factors, the rest float.
	if ((d->scale == T_DOUBLE) != (x->dtype == 1)) return BAD_TYPE;
	if (x->nb != c->spatial + 2 || w->nb != x->nb || y->nb != x->nb || x->dims[1] % w->dims[1] != 0) return 2008;
	for (int i = 0; i < x->nb; i++) {
		if (y->dims[i] != out_dim(x, w, c, i)) return 2008; // CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH
	}
	if (x->uid == w->uid || x->uid == y->uid || w->uid == y->uid) return 2009;
	logf_("cudnnBackendFinalize op=%s x=%s w=%s y=%s alpha=%g beta=%g", kind, i64s(x->dims, x->nb), i64s(w->dims, w->nb), i64s(y->dims, y->nb),
	      d->alpha, d->beta);
	return 0;
}

// The batch of a graph's first tensor, for the triggers.
static int64_t batch(const struct bd* g) { return g->op->arg[2]->dims[0]; }

int cudnnBackendFinalize(void* p) {
	struct bd* d = p;
	if (d == NULL || d->kind != BACKEND) return BAD_KIND;
	int st = 0;
	switch (d->type) {
	case TENSOR:
		if (d->has != 31) return BAD;
		logf_("cudnnBackendFinalize tensor uid=%lld type=%d dims=%s strides=%s align=%lld", (long long)d->uid, d->dtype, i64s(d->dims, d->nb),
		      i64s(d->strides, d->nb), (long long)d->align);
		break;
	case CONV:
		if (d->has != 127) return BAD;
		logf_("cudnnBackendFinalize conv comp=%d mode=%d pad=%s,%s stride=%s dil=%s", d->comp, d->mode, i64s(d->pre, d->spatial),
		      i64s(d->post, d->spatial), i64s(d->stride, d->spatial), i64s(d->dil, d->spatial));
		break;
	case OP_FWD: case OP_BWD_DATA: case OP_BWD_FILTER:
		st = finalize_op(d);
		break;
	case GRAPH:
		if (d->handle == NULL || d->op == NULL) return BAD;
		break;
	case HEUR:
		if (d->graph == NULL || !d->graph->final || (d->heur != 3 && d->heur != 2)) return BAD;
		if (batch(d->graph) == 15) return 3001; // CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN
		logf_("cudnnBackendFinalize heur mode=%d", d->heur);
		break;
	case PLAN:
		if (d->handle == NULL || d->cfg == NULL || !d->cfg->final) return BAD;
		if (d->cfg->engine == 9) return NOT_SUPPORTED;
		logf_("cudnnBackendFinalize plan engine=%d%s ws=%lld", d->cfg->engine, knob_tag(d->cfg), (long long)nvg_ws[d->cfg->engine]);
		break;
	case PACK:
		if (d->nptr != 3 || !d->has_ws) return BAD;
		break;
	default:
		return BAD;
	}
	if (st == 0) d->final = 1;
	return st;
}

int cudnnBackendGetAttribute(void* p, int attr, int type, int64_t n, int64_t* got, void* v) {
	struct bd* d = p;
	if (d == NULL || d->kind != BACKEND) return BAD_KIND;
	if (!d->final) return NOT_FINAL;
	if (d->type == HEUR && attr == 202) {
		if (type != T_DESC) return BAD_TYPE;
		// Mode A: engine 7's configurations, then the rest of mode_a.
		int k7 = d->heur == 3 ? knobs() : 0;
		const int* list = d->heur == 3 ? mode_a : fallback;
		int count = d->heur == 3 ? k7 + 4 : 3;
		*got = n < count ? n : count;
		if (n == 0) *got = count;
		for (int64_t i = 0; i < n && i < count; i++) {
			struct bd* cfg = ((struct bd**)v)[i];
			if (!isb(cfg, ENGINECFG)) return BAD_KIND;
			cfg->engine = i < k7 ? 7 : d->heur == 3 ? list[i - k7 + 1] : list[i];
			cfg->knob = i < k7 ? (int)i : 0;
			cfg->graph = d->graph;
			cfg->final = 1;
		}
		return 0;
	}
	if (d->type == ENGINECFG && attr == 300) {
		if (type != T_DESC || n != 1) return BAD_TYPE;
		struct bd* eng = *(struct bd**)v;
		if (!isb(eng, ENGINE)) return BAD_KIND;
		eng->engine = d->engine;
		eng->final = 1;
		*got = 1;
		return 0;
	}
	if (d->type == ENGINE && attr == 1301) {
		if (type != T_INT64 || n < 1) return BAD_TYPE;
		*(int64_t*)v = d->engine;
		*got = 1;
		return 0;
	}
	if (d->type == ENGINE && attr == 1303) {
		if (type != T_NOTE) return BAD_TYPE;
		int k = 0;
		for (int b = 0; b < 10; b++) {
			if ((nvg_notes[d->engine] & 1u << b) && k < n) ((int*)v)[k++] = b;
		}
		*got = k;
		return 0;
	}
	if (d->type == PLAN && attr == 402) {
		if (type != T_INT64 || n < 1) return BAD_TYPE;
		*(int64_t*)v = nvg_ws[d->cfg->engine];
		*got = 1;
		return 0;
	}
	return BAD;
}

int cudnnBackendExecute(void* h, void* plan, void* pack) {
	struct bd *p = plan, *vp = pack;
	if (h == NULL || !isb(p, PLAN) || !isb(vp, PACK) || !p->final || !vp->final) return BAD_KIND;
	for (int i = 0; i < 3; i++) {
		if (vp->uids[i] != i + 1 || vp->ptrs[i] == NULL) return BAD; // in, w, out are 1, 2, 3
	}
	int64_t ws = nvg_ws[p->cfg->engine];
	if (ws > 0 && vp->ws == NULL) return 2006; // CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT
	if (getenv("ROCM_GO_FAKE_EXEC_FAIL") != NULL) return 5000;
	char ms[32];
	const char* total = getenv("ROCM_GO_FAKE_MS");
	snprintf(ms, sizeof ms, "%.17g", (total != NULL ? atof(total) : 0) + atof(nvg_ms[p->cfg->engine]) - p->cfg->knob / 64.0);
	setenv("ROCM_GO_FAKE_MS", ms, 1);
	// The output: Y of a forward node, DX of a data gradient, DW of a
	// weights gradient (the attributes ALPHA + 5, + 4 and + 3), whose unique
	// id says which data pointer is its.
	const struct bd* op = p->cfg->graph->op;
	const struct bd* out = op->arg[op->type == OP_FWD ? 3 : op->type == OP_BWD_DATA ? 2 : 1];
	size_t n = 1;
	for (int i = 0; i < out->nb; i++) n += (size_t)(out->dims[i] - 1) * (size_t)out->strides[i];
	// Engine 5 is wrong only in the last quarter of its output: a check
	// that compares the whole output (or its end) sees it, one that
	// compares only the start or the middle does not.
	size_t right = p->cfg->engine == 5 ? n - n / 4 : n;
	fake_fill_range(vp->ptrs[out->uid - 1], out->dtype, 0, right, 1);
	fake_fill_range(vp->ptrs[out->uid - 1], out->dtype, right, n, 3);
	logf_("cudnnBackendExecute engine=%d%s ws=%s", p->cfg->engine, knob_tag(p->cfg), vp->ws != NULL ? "set" : "none");
	return 0;
}
