// The NVIDIA platform of package miopen: convolutions through cuDNN's graph
// (backend) API, beside the legacy API of nvidia_conv.c (see nvidia.h).
// Each problem becomes an operation graph of one convolution node (tensor
// descriptors with the caller's strides, so NCHW and NHWC alike), whose
// engine configurations come from heuristics mode A and then the fallback
// list, filtered as PyTorch does (no down-converted inputs; no tensor cores
// for float, which MIOpen computes in float). A handle keeps the finalized
// plans by problem, least recently used out first.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvidia.h"

int nv_graph_ok;

// The engine configurations read from one heuristics query, at most.
#define NVG_MAX_CFGS 64

// Short names for the graph API's calls.
#define BE_SET(d, attr, type, n, v) NV(cudnnBackendSetAttribute, (d), (attr), (type), (long long)(n), (v))
#define BE_GET(d, attr, type, n, got, v) NV(cudnnBackendGetAttribute, (d), (attr), (type), (long long)(n), (got), (v))

static void be_destroy(void* d) {
	if (d != NULL) NV(cudnnBackendDestroyDescriptor, d);
}

// nvg_align is the byte alignment of an address that cuDNN may rely on, at
// most 16 (PyTorch's rule); NULL stands for an allocation (16).
static int nvg_align(const void* p) {
	uintptr_t a = (uintptr_t)p;
	int al = 1;
	if (a == 0) return 16;
	while (al < 16 && a % (uintptr_t)(al * 2) == 0) al *= 2;
	return al;
}

// nvg_supported says whether the graph API is tried for a problem: the
// floating-point types, one type throughout, tensors of the convolution's
// rank.
static int nvg_supported(const struct rgnv_tensor* in, const struct rgnv_tensor* w, const struct rgnv_conv* c,
                         const struct rgnv_tensor* out) {
	switch (in->dtype) {
	case miopenHalf: case miopenBFloat16: case miopenFloat: case miopenDouble: break;
	default: return 0;
	}
	return w->dtype == in->dtype && out->dtype == in->dtype && in->nb == c->spatial + 2 && w->nb == in->nb && out->nb == in->nb;
}

static void nvg_make_key(struct nvg_key* k, int kind, const struct rgnv_tensor* t[3], const void* p[3], const struct rgnv_conv* c,
                         float alpha, float beta) {
	memset(k, 0, sizeof *k); // compared with memcmp
	k->kind = kind;
	k->dtype = t[0]->dtype;
	k->nb = t[0]->nb;
	k->spatial = c->spatial;
	for (int i = 0; i < 3; i++) {
		memcpy(k->dims[i], t[i]->dims, sizeof(int) * (size_t)t[i]->nb);
		memcpy(k->strides[i], t[i]->strides, sizeof(int) * (size_t)t[i]->nb);
		k->align[i] = nvg_align(p[i]);
	}
	memcpy(k->pad, c->pad, sizeof k->pad);
	memcpy(k->stride, c->stride, sizeof k->stride);
	memcpy(k->dil, c->dil, sizeof k->dil);
	k->alpha = alpha;
	k->beta = beta;
}

static void nvg_entry_free(struct nvg_entry* e) {
	for (int i = 0; i < e->n; i++) {
		be_destroy(e->plans[i].pack);
		be_destroy(e->plans[i].plan);
		be_destroy(e->plans[i].cfg);
	}
	for (int i = 5; i >= 0; i--) be_destroy(e->desc[i]);
	free(e);
}

// nvg_tensor makes a finalized tensor descriptor with unique id uid.
static int nvg_tensor(const struct rgnv_tensor* t, int64_t uid, int align, void** out) {
	int64_t dims[NV_MAXDIM], strides[NV_MAXDIM], al = align;
	int dt = nv_dtype(t->dtype);
	for (int i = 0; i < t->nb; i++) {
		dims[i] = t->dims[i];
		strides[i] = t->strides[i];
	}
	int st = NV(cudnnBackendCreateDescriptor, CUDNN_BACKEND_TENSOR_DESCRIPTOR, out);
	if (st != CUDNN_STATUS_SUCCESS) return st;
	if ((st = BE_SET(*out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid)) != 0 ||
	    (st = BE_SET(*out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt)) != 0 ||
	    (st = BE_SET(*out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &al)) != 0 ||
	    (st = BE_SET(*out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, t->nb, dims)) != 0 ||
	    (st = BE_SET(*out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, t->nb, strides)) != 0)
		return st;
	return NV(cudnnBackendFinalize, *out);
}

// The unique ids of in, w and out in every graph and variant pack.
static const int64_t nvg_uids[3] = {1, 2, 3};

// nvg_graph builds the entry's operation graph: the tensors, the
// convolution (a cross-correlation, accumulating as the legacy
// convolutions do: nv_compute) and one convolution node of the entry's
// kind.
static int nvg_graph(struct rgnv_handle* h, struct nvg_entry* e, const struct rgnv_tensor* t[3]) {
	const struct nvg_key* k = &e->key;
	int st;
	for (int i = 0; i < 3; i++) {
		if ((st = nvg_tensor(t[i], nvg_uids[i], k->align[i], &e->desc[i])) != CUDNN_STATUS_SUCCESS) return st;
	}
	int64_t pad[3], stride[3], dil[3], n = k->spatial;
	for (int i = 0; i < k->spatial; i++) {
		pad[i] = k->pad[i];
		stride[i] = k->stride[i];
		dil[i] = k->dil[i];
	}
	int comp = nv_compute(k->dtype), mode = CUDNN_CROSS_CORRELATION;
	void** conv = &e->desc[3];
	if ((st = NV(cudnnBackendCreateDescriptor, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, conv)) != 0 ||
	    (st = BE_SET(*conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp)) != 0 ||
	    (st = BE_SET(*conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)) != 0 ||
	    (st = BE_SET(*conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &n)) != 0 ||
	    (st = BE_SET(*conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, n, dil)) != 0 ||
	    (st = BE_SET(*conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, n, stride)) != 0 ||
	    (st = BE_SET(*conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, n, pad)) != 0 ||
	    (st = BE_SET(*conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, n, pad)) != 0 ||
	    (st = NV(cudnnBackendFinalize, *conv)) != 0)
		return st;
	// Each kind's attributes: ALPHA, BETA, CONV_DESC, then its three
	// tensors; the slot of in, w and out among those three.
	int type, first, slot[3];
	switch (k->kind) {
	case RG_NV_ALGO_FWD: // W, X, Y
		type = CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, first = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA;
		slot[0] = 1, slot[1] = 0, slot[2] = 2;
		break;
	case RG_NV_ALGO_BWD_DATA: // W, DX, DY; in is dy, out dx
		type = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, first = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA;
		slot[0] = 2, slot[1] = 0, slot[2] = 1;
		break;
	default: // DW, X, DY; in is x, w dw, out dy
		type = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, first = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA;
		slot[0] = 1, slot[1] = 0, slot[2] = 2;
	}
	void** op = &e->desc[4];
	if ((st = NV(cudnnBackendCreateDescriptor, type, op)) != 0) return st;
	// The scaling factors, of the type the legacy calls take (nv_scale).
	nv_scalar a, b;
	int scale = k->dtype == miopenDouble ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT;
	if ((st = BE_SET(*op, first, scale, 1, nv_value(k->alpha, t[0], &a))) != 0 ||
	    (st = BE_SET(*op, first + 1, scale, 1, nv_value(k->beta, t[0], &b))) != 0 ||
	    (st = BE_SET(*op, first + 2, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, conv)) != 0)
		return st;
	for (int i = 0; i < 3; i++) {
		if ((st = BE_SET(*op, first + 3 + slot[i], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &e->desc[i])) != 0) return st;
	}
	if ((st = NV(cudnnBackendFinalize, *op)) != 0) return st;
	void** g = &e->desc[5];
	if ((st = NV(cudnnBackendCreateDescriptor, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, g)) != 0 ||
	    (st = BE_SET(*g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h->cudnn)) != 0 ||
	    (st = BE_SET(*g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, op)) != 0)
		return st;
	return NV(cudnnBackendFinalize, *g);
}

// nvg_engine reads the global index and numerical notes of a
// configuration's engine.
static int nvg_engine(void* cfg, int* engine, unsigned* notes) {
	void* eng = NULL;
	long long got = 0;
	int64_t idx = -1;
	int list[32];
	int st = NV(cudnnBackendCreateDescriptor, CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng);
	if (st == 0) st = BE_GET(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &eng);
	if (st == 0) st = BE_GET(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, &idx);
	if (st == 0) st = BE_GET(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, 32, &got, list);
	be_destroy(eng);
	if (st != 0) return st;
	*engine = idx < 0 || idx > NV_GRAPH_MAX_ENGINE ? -1 : (int)idx;
	*notes = 0;
	for (long long i = 0; i < got && i < 32; i++) {
		if (list[i] >= 0 && list[i] < 32) *notes |= 1u << list[i];
	}
	return 0;
}

// nvg_has says whether the entry has the plan of an id; its slot.
static int nvg_has(const struct nvg_entry* e, int id) {
	for (int i = 0; i < e->n; i++) {
		if (e->plans[i].id == id) return i;
	}
	return -1;
}

// nvg_missing says whether the heuristics gave no configuration of the id
// when asked for it.
static int nvg_missing(const struct nvg_entry* e, int id) {
	for (int i = 0; i < e->nmissing; i++) {
		if (e->missing[i] == id) return 1;
	}
	return 0;
}

// nvg_configs asks the heuristics of a mode for the graph's engine
// configurations and finalizes plans of those that pass the filter, in the
// heuristics' order, until the entry has want plans (or, with id >= 0, the
// plan of that id). A configuration's id counts the configurations of its
// engine before it in the list, whether they passed or not, so that the
// same query finds it again (another handle, a Find result kept on disk).
static void nvg_configs(struct rgnv_handle* h, struct nvg_entry* e, int mode, int want, int id) {
	void* heur = NULL;
	void* cfgs[NVG_MAX_CFGS];
	long long n = 0;
	int st = NV(cudnnBackendCreateDescriptor, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur);
	if (st == 0) st = BE_SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &e->desc[5]);
	if (st == 0) st = BE_SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
	if (st == 0) st = NV(cudnnBackendFinalize, heur);
	if (st == 0) st = BE_GET(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, NULL);
	if (st != 0 || n <= 0) {
		be_destroy(heur);
		return;
	}
	if (n > NVG_MAX_CFGS) n = NVG_MAX_CFGS;
	int made = 0;
	for (; made < n; made++) {
		if (NV(cudnnBackendCreateDescriptor, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[made]) != 0) break;
	}
	long long got = 0;
	if (made == 0 || BE_GET(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, made, &got, cfgs) != 0) got = 0;
	be_destroy(heur);
	int engines[NVG_MAX_CFGS]; // the engine of each configuration read so far
	for (int i = 0; i < made; i++) {
		void* cfg = cfgs[i];
		cfgs[i] = NULL;
		// Once done, done for the rest of the list.
		int done = id >= 0 ? nvg_has(e, id) >= 0 : e->n >= want;
		int eng = -1, nth = 0;
		unsigned notes = 0;
		if (!done && i < got && nvg_engine(cfg, &eng, &notes) != 0) eng = -1;
		engines[i] = eng;
		for (int j = 0; j < i; j++) nth += eng >= 0 && engines[j] == eng;
		int cid = NVG_ID(eng, nth);
		if (done || eng < 0 || nth > NV_GRAPH_MAX_NTH || e->n >= NVG_SLOTS || nvg_has(e, cid) >= 0 || (id >= 0 && cid != id) ||
		    (notes & 1u << CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) ||
		    (e->key.dtype == miopenFloat && (notes & 1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE))) {
			be_destroy(cfg);
			continue;
		}
		void* plan = NULL;
		int64_t ws = 0;
		long long one = 0;
		st = NV(cudnnBackendCreateDescriptor, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
		if (st == 0) st = BE_SET(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h->cudnn);
		if (st == 0) st = BE_SET(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
		if (st == 0) st = NV(cudnnBackendFinalize, plan);
		if (st == 0) st = BE_GET(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &one, &ws);
		if (st != 0 || ws < 0) {
			be_destroy(plan);
			be_destroy(cfg);
			continue;
		}
		e->plans[e->n++] = (struct nvg_plan){.plan = plan, .cfg = cfg, .id = cid, .notes = notes, .ws = (size_t)ws};
	}
}

// nvg_evict frees the least recently used entry of a full cache, after the
// stream's work, which may still run its plans.
static void nvg_evict(struct rgnv_handle* h) {
	struct nvg_cache* c = h->graph;
	int old = 0;
	for (int i = 1; i < c->n; i++) {
		if (c->e[i]->used < c->e[old]->used) old = i;
	}
	NV(cudaStreamSynchronize, h->stream);
	nvg_entry_free(c->e[old]);
	c->e[old] = c->e[--c->n];
}

struct nvg_entry* nv_graph_plans(struct rgnv_handle* h, int kind, const struct rgnv_tensor* in, const void* inp, const struct rgnv_tensor* w,
                                 const void* wp, const struct rgnv_conv* c, const struct rgnv_tensor* out, const void* outp, float alpha,
                                 float beta, int id, int* slot) {
	if (!nv_graph_ok || !nvg_supported(in, w, c, out)) return NULL;
	if (h->graph == NULL && (h->graph = calloc(1, sizeof *h->graph)) == NULL) return NULL;
	struct nvg_cache* cache = h->graph;
	const struct rgnv_tensor* t[3] = {in, w, out};
	const void* p[3] = {inp, wp, outp};
	struct nvg_key k;
	nvg_make_key(&k, kind, t, p, c, alpha, beta);
	struct nvg_entry* e = NULL;
	for (int i = 0; i < cache->n; i++) {
		if (memcmp(&cache->e[i]->key, &k, sizeof k) == 0) {
			e = cache->e[i];
			break;
		}
	}
	if (e == NULL) {
		if ((e = calloc(1, sizeof *e)) == NULL) return NULL;
		e->key = k;
		if (nvg_graph(h, e, t) != CUDNN_STATUS_SUCCESS) {
			nvg_entry_free(e);
			return NULL;
		}
		if (cache->n == NVG_ENTRIES) nvg_evict(h);
		cache->e[cache->n++] = e;
	}
	e->used = ++cache->clock;
	if (id < 0) {
		// Once a problem: an entry without plans stays, so that the
		// heuristics of a problem no engine takes run once.
		if (!e->searched) {
			e->searched = 1;
			nvg_configs(h, e, CUDNN_HEUR_MODE_A, NVG_MAX_PLANS, -1);
			nvg_configs(h, e, CUDNN_HEUR_MODE_FALLBACK, e->n + NVG_FALLBACK_PLANS, -1);
		}
		return e->n > 0 ? e : NULL;
	}
	if (nvg_has(e, id) < 0 && !nvg_missing(e, id)) {
		nvg_configs(h, e, CUDNN_HEUR_MODE_A, 0, id);
		if (nvg_has(e, id) < 0) nvg_configs(h, e, CUDNN_HEUR_MODE_FALLBACK, 0, id);
		if (nvg_has(e, id) < 0 && e->nmissing < NVG_SLOTS) e->missing[e->nmissing++] = id;
	}
	return (*slot = nvg_has(e, id)) < 0 ? NULL : e;
}

int nv_graph_exec(struct rgnv_handle* h, struct nvg_entry* e, int i, const void* inp, const void* wp, const void* outp, void* ws) {
	struct nvg_plan* p = &e->plans[i];
	const void* ptrs[4] = {inp, wp, outp, ws};
	if (p->pack == NULL || memcmp(p->packed, ptrs, sizeof ptrs) != 0) {
		// cuDNN reads a pack when a plan is enqueued: the old one can go.
		be_destroy(p->pack);
		p->pack = NULL;
		void* vp = NULL;
		int st = NV(cudnnBackendCreateDescriptor, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
		if (st == 0) st = BE_SET(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, nvg_uids);
		if (st == 0) st = BE_SET(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
		if (st == 0) st = BE_SET(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
		if (st == 0) st = NV(cudnnBackendFinalize, vp);
		if (st != 0) {
			be_destroy(vp);
			return st;
		}
		p->pack = vp;
		memcpy(p->packed, ptrs, sizeof ptrs);
	}
	return NV(cudnnBackendExecute, h->cudnn, p->plan, p->pack);
}

void nv_graph_free(struct rgnv_handle* h) {
	struct nvg_cache* c = h->graph;
	if (c == NULL) return;
	if (c->n > 0) NV(cudaStreamSynchronize, h->stream);
	for (int i = 0; i < c->n; i++) nvg_entry_free(c->e[i]);
	free(c);
	h->graph = NULL;
}
