// A fake RCCL (or, built with -DFAKE_NVIDIA, a fake NCCL) for package
// rccl's tier-0 tests, in one file with package hip's fake HIP runtime
// (fake CUDA runtime and driver): device memory is host memory, so the
// collectives compute real results, for every data type and op.
//
// Ranks of one communicator (a clique) record their calls in order; the
// n-th collective runs once every rank has made its n-th call, whichever
// threads made them, so that both one goroutine per rank and one goroutine
// inside a group work. Outside a group a call waits for the other ranks'
// (ncclCommInitRank does in NCCL, and a first collective that connects the
// ranks), up to a second. What real NCCL would hang on or refuse is
// refused with ncclInvalidUsage and a text in ncclGetLastError: a call
// whose peers do not come (one thread driving two ranks outside a group),
// a group ended on a thread that did not start one (groups are per
// thread), a call while the current device is not the communicator's, a
// GPU twice in one communicator, ranks whose n-th calls differ. Each call is
// appended to $ROCM_GO_FAKE_LOG when that is set.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../miopen/testdata/fakelog.h"

#ifdef FAKE_NVIDIA
#include "../../hip/testdata/fakecuda.c"
int cudaStreamCreateWithPriority(void** s, unsigned flags, int priority) {
	*s = malloc(16);
	return 0;
}
int cudaStreamDestroy(void* s) {
	free(s);
	return 0;
}
int cudaMemset(void* d, int v, size_t n) {
	memset(d, v, n);
	return 0;
}
#define FAKE_NDEV 1
#define FAKE_VERSION 22807
#else
#include "../../hip/testdata/fakehip.c"
#define FAKE_NDEV 2
#define FAKE_VERSION 22707
#endif

typedef int ncclResult_t;
enum { ok = 0, cudaErr = 1, sysErr = 2, internalErr = 3, badArg = 4, badUse = 5, remoteErr = 6 };
typedef struct { char internal[128]; } ncclUniqueId;

#define MAXR 8
#define MAXOPS 64

enum kind { K_ALLREDUCE, K_ALLGATHER, K_REDUCESCATTER, K_BROADCAST, K_REDUCE };

struct op {
	int kind, dtype, redop, root;
	const void* send;
	void* recv;
	size_t count;
};

struct clique {
	int n, joined;
	char id[128];
	struct fcomm* ranks[MAXR];
	// The calls in flight, a ring of MAXOPS: seq's are at seq % MAXOPS;
	// ran[slot] is the last seq that ran there.
	struct op ops[MAXOPS][MAXR];
	int arrived[MAXOPS], ran[MAXOPS];
	int seqs[MAXR];
	// Split: the colors and keys of the ranks' current split.
	int splitColor[MAXR], splitKey[MAXR], splitArrived;
	struct fcomm* splitOut[MAXR];
};

struct fcomm {
	struct clique* q;
	int rank, dev;
	int pending; // a split's result before every rank has split
	int finalized;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static __thread int depth;
// Inside a group NCCL writes a split's new handle at the outermost
// ncclGroupEnd (2.28 does): the fake too, so that a binding that reads it
// before then sees NULL.
static __thread struct { struct fcomm** out; struct fcomm* value; } deferred[64];
static __thread int ndeferred;
static char lastError[256];
static struct clique* byID[16];
static int nIDs;
static int idCounter;

static ncclResult_t fail(ncclResult_t r, const char* text) {
	snprintf(lastError, sizeof lastError, "%s", text);
	return r;
}

static int thisDevice(void) { return current; }

// waitFor waits, holding mu, until done(q, arg) holds, for up to a second;
// it reports whether it did.
static int waitFor(int (*done)(struct clique*, int), struct clique* q, int arg) {
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	while (!done(q, arg))
		if (pthread_cond_timedwait(&changed, &mu, &until) != 0) return done(q, arg);
	return 1;
}

static int allJoined(struct clique* q, int unused) { return q->joined == q->n; }
static int hasRun(struct clique* q, int seq) { return q->ran[seq % MAXOPS] == seq; }

// ---- Values: every data type read as double and written back rounded.

static float halfToFloat(uint16_t h) {
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
	if (exp == 0) {
		if (man == 0) {
			bits = sign;
		} else {
			int e = -1;
			do {
				e++;
				man <<= 1;
			} while ((man & 0x400) == 0);
			bits = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
		}
	} else if (exp == 31) {
		bits = sign | 0x7f800000 | man << 13;
	} else {
		bits = sign | (exp + 127 - 15) << 23 | man << 13;
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

// floatToHalf rounds to nearest even; the tests' values are exact in f16.
static uint16_t floatToHalf(float f) {
	uint32_t b;
	memcpy(&b, &f, 4);
	uint32_t sign = (b >> 16) & 0x8000;
	int exp = (int)((b >> 23) & 0xff) - 127 + 15;
	uint32_t man = b & 0x7fffff;
	if (((b >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
	if (exp >= 31) return (uint16_t)(sign | 0x7c00);
	if (exp <= 0) {
		if (exp < -10) return (uint16_t)sign;
		man |= 0x800000;
		uint32_t shift = (uint32_t)(14 - exp), half = 1u << (shift - 1);
		uint32_t v = man >> shift, rest = man & ((1u << shift) - 1);
		if (rest > half || (rest == half && (v & 1))) v++;
		return (uint16_t)(sign | v);
	}
	uint32_t v = (uint32_t)exp << 10 | man >> 13, rest = man & 0x1fff;
	if (rest > 0x1000 || (rest == 0x1000 && (v & 1))) v++;
	return (uint16_t)(sign | v);
}

static float bf16ToFloat(uint16_t h) {
	uint32_t bits = (uint32_t)h << 16;
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

static uint16_t floatToBF16(float f) {
	uint32_t b;
	memcpy(&b, &f, 4);
	b += 0x7fff + ((b >> 16) & 1);
	return (uint16_t)(b >> 16);
}

static size_t typeSize(int t) {
	static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
	return t >= 0 && t < 12 ? sizes[t] : 0;
}

static int isInt(int t) { return t <= 5; }

static double get(int t, const void* p, size_t i) {
	switch (t) {
	case 0: return ((const int8_t*)p)[i];
	case 1: return ((const uint8_t*)p)[i];
	case 2: return ((const int32_t*)p)[i];
	case 3: return ((const uint32_t*)p)[i];
	case 4: return (double)((const int64_t*)p)[i];
	case 5: return (double)((const uint64_t*)p)[i];
	case 6: return halfToFloat(((const uint16_t*)p)[i]);
	case 7: return ((const float*)p)[i];
	case 8: return ((const double*)p)[i];
	case 9: return bf16ToFloat(((const uint16_t*)p)[i]);
	}
	return 0;
}

static void put(int t, void* p, size_t i, double v) {
	switch (t) {
	case 0: ((int8_t*)p)[i] = (int8_t)v; break;
	case 1: ((uint8_t*)p)[i] = (uint8_t)v; break;
	case 2: ((int32_t*)p)[i] = (int32_t)v; break;
	case 3: ((uint32_t*)p)[i] = (uint32_t)v; break;
	case 4: ((int64_t*)p)[i] = (int64_t)v; break;
	case 5: ((uint64_t*)p)[i] = (uint64_t)v; break;
	case 6: ((uint16_t*)p)[i] = floatToHalf((float)v); break;
	case 7: ((float*)p)[i] = (float)v; break;
	case 8: ((double*)p)[i] = v; break;
	case 9: ((uint16_t*)p)[i] = floatToBF16((float)v); break;
	}
}

// reduce combines element i of every rank's buffer at byte offset off
// (the tests' values are exact in double, int64 and uint64 included).
static double reduce(struct op* ops, int n, int t, int redop, size_t off, size_t i) {
	double acc = get(t, (const char*)ops[0].send + off, i);
	for (int r = 1; r < n; r++) {
		double v = get(t, (const char*)ops[r].send + off, i);
		switch (redop) {
		case 0: case 4: acc += v; break;
		case 1: acc *= v; break;
		case 2: acc = v > acc ? v : acc; break;
		case 3: acc = v < acc ? v : acc; break;
		}
	}
	if (redop == 4) {
		acc /= n;
		if (isInt(t)) acc = (double)(long long)acc; // NCCL divides integers after the sum
	}
	return acc;
}

// run executes the collective in a clique's slot, every rank's call in.
static void run(struct clique* q, int slot) {
	struct op* ops = q->ops[slot];
	int n = q->n, t = ops[0].dtype;
	size_t c = ops[0].count, es = typeSize(t);
	switch (ops[0].kind) {
	case K_ALLREDUCE: {
		double* out = malloc(c * sizeof(double) + 1);
		for (size_t i = 0; i < c; i++) out[i] = reduce(ops, n, t, ops[0].redop, 0, i);
		for (int r = 0; r < n; r++)
			for (size_t i = 0; i < c; i++) put(t, ops[r].recv, i, out[i]);
		free(out);
		break;
	}
	case K_REDUCE: {
		int root = ops[0].root;
		double* out = malloc(c * sizeof(double) + 1);
		for (size_t i = 0; i < c; i++) out[i] = reduce(ops, n, t, ops[0].redop, 0, i);
		for (size_t i = 0; i < c; i++) put(t, ops[root].recv, i, out[i]);
		free(out);
		break;
	}
	case K_ALLGATHER: {
		char* tmp = malloc(c * es * n + 1);
		for (int r = 0; r < n; r++) memcpy(tmp + r * c * es, ops[r].send, c * es);
		for (int r = 0; r < n; r++) memcpy(ops[r].recv, tmp, c * es * n);
		free(tmp);
		break;
	}
	case K_REDUCESCATTER: {
		double* out = malloc(c * n * sizeof(double) + 1);
		for (size_t i = 0; i < c * n; i++) out[i] = reduce(ops, n, t, ops[0].redop, 0, i);
		for (int r = 0; r < n; r++)
			for (size_t i = 0; i < c; i++) put(t, ops[r].recv, i, out[r * c + i]);
		free(out);
		break;
	}
	case K_BROADCAST: {
		char* tmp = malloc(c * es + 1);
		memcpy(tmp, ops[ops[0].root].send, c * es);
		for (int r = 0; r < n; r++) memcpy(ops[r].recv, tmp, c * es);
		free(tmp);
		break;
	}
	}
}

// checkComm checks a communicator and that its device is current.
static ncclResult_t checkComm(struct fcomm* c, const char* fn) {
	if (c == NULL) return fail(badArg, "NULL communicator");
	if (c->pending) return fail(badUse, "the communicator's split is not complete");
	if (thisDevice() != c->dev) {
		snprintf(lastError, sizeof lastError, "%s: the current device is %d, the communicator's %d", fn, thisDevice(), c->dev);
		return badUse;
	}
	return ok;
}

// enqueue records a rank's collective and runs it once every rank is in.
static ncclResult_t enqueue(struct fcomm* c, struct op o, const char* fn) {
	ncclResult_t r = checkComm(c, fn);
	if (r != ok) return r;
	size_t es = typeSize(o.dtype);
	if (es == 0 || o.dtype > 9) return fail(badArg, "invalid data type");
	if (o.kind != K_ALLGATHER && o.kind != K_BROADCAST && (o.redop < 0 || o.redop > 4)) return fail(badArg, "invalid op");
	if ((o.kind == K_BROADCAST || o.kind == K_REDUCE) && (o.root < 0 || o.root >= c->q->n)) return fail(badArg, "invalid root");
	pthread_mutex_lock(&mu);
	struct clique* q = c->q;
	int seq = q->seqs[c->rank], slot = seq % MAXOPS;
	for (int r = 0; r < q->n; r++) {
		if (q->seqs[r] <= seq - MAXOPS) {
			pthread_mutex_unlock(&mu);
			return fail(internalErr, "a rank is too far ahead of another for the fake");
		}
	}
	if (q->arrived[slot] > 0) {
		struct op* first = NULL;
		for (int r = 0; r < q->n && first == NULL; r++)
			if (q->seqs[r] > seq) first = &q->ops[slot][r];
		if (first != NULL && (first->kind != o.kind || first->count != o.count || first->dtype != o.dtype || first->redop != o.redop || first->root != o.root)) {
			pthread_mutex_unlock(&mu);
			return fail(badUse, "the ranks' calls differ: NCCL would hang or corrupt memory");
		}
	}
	q->ops[slot][c->rank] = o;
	q->seqs[c->rank]++;
	if (++q->arrived[slot] == q->n) {
		run(q, slot);
		q->arrived[slot] = 0;
		q->ran[slot] = seq;
		pthread_cond_broadcast(&changed);
	} else if (depth == 0 && !waitFor(hasRun, q, seq)) {
		q->seqs[c->rank]--;
		q->arrived[slot]--;
		pthread_mutex_unlock(&mu);
		return fail(badUse, "the other ranks did not call within a second: NCCL would hang (one thread driving two ranks outside a group?)");
	}
	pthread_mutex_unlock(&mu);
	return ok;
}

// ---- The API.

const char* ncclGetErrorString(ncclResult_t r) {
	switch (r) {
	case 0: return "no error";
	case 1: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
	case 2: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
	case 3: return "internal error - please report this issue to the NCCL developers";
	case 4: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
	case 5: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
	case 6: return "remote process exited or there was a network error";
	case 7: return "NCCL operation in progress";
	}
	return "unknown result code";
}

const char* ncclGetLastError(void* comm) { return lastError; }

ncclResult_t ncclGetVersion(int* v) {
	if (v == NULL) return badArg;
	*v = FAKE_VERSION;
	return ok;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
	if (getenv("ROCM_GO_FAKE_NODEVICE")) return fail(cudaErr, "no device");
	memset(id, 0, sizeof *id);
	pthread_mutex_lock(&mu);
	snprintf(id->internal, sizeof id->internal, "fake-nccl-id-%d", ++idCounter);
	id->internal[127] = (char)0xa5;
	pthread_mutex_unlock(&mu);
	logf_("ncclGetUniqueId %s", id->internal);
	return ok;
}

// newClique is an empty clique of n ranks.
static struct clique* newClique(int n) {
	struct clique* q = calloc(1, sizeof *q);
	q->n = n;
	for (int i = 0; i < MAXOPS; i++) q->ran[i] = -1;
	return q;
}

static struct fcomm* newRank(struct clique* q, int rank, int dev) {
	struct fcomm* c = calloc(1, sizeof *c);
	c->q = q;
	c->rank = rank;
	c->dev = dev;
	q->ranks[rank] = c;
	return c;
}

ncclResult_t ncclCommInitRank(struct fcomm** out, int n, ncclUniqueId id, int rank) {
	if (n < 1 || n > MAXR || rank < 0 || rank >= n) return fail(badArg, "invalid rank or count");
	if (thisDevice() < 0 || thisDevice() >= FAKE_NDEV) return fail(cudaErr, "no current device");
	pthread_mutex_lock(&mu);
	struct clique* q = NULL;
	for (int i = 0; i < nIDs; i++)
		if (memcmp(byID[i]->id, id.internal, 128) == 0) q = byID[i];
	if (q == NULL) {
		if (nIDs == 16) {
			pthread_mutex_unlock(&mu);
			return fail(internalErr, "too many communicators for the fake");
		}
		q = newClique(n);
		memcpy(q->id, id.internal, 128);
		byID[nIDs++] = q;
	} else if (q->n != n || q->ranks[rank] != NULL) {
		pthread_mutex_unlock(&mu);
		return fail(badUse, "the ranks disagree on the count, or a rank joined twice");
	}
	for (int r = 0; r < n; r++) {
		if (q->ranks[r] != NULL && q->ranks[r]->dev == thisDevice()) {
			pthread_mutex_unlock(&mu);
			return fail(badUse, "Duplicate GPU detected");
		}
	}
	q->joined++;
	struct fcomm* c = newRank(q, rank, thisDevice());
	pthread_cond_broadcast(&changed);
	if (depth == 0 && !waitFor(allJoined, q, 0)) {
		q->ranks[rank] = NULL;
		q->joined--;
		free(c);
		pthread_mutex_unlock(&mu);
		return fail(badUse, "the other ranks did not join within a second: NCCL would hang (one thread initializing two ranks outside a group?)");
	}
	*out = c;
	pthread_mutex_unlock(&mu);
	logf_("ncclCommInitRank rank=%d n=%d dev=%d", rank, n, thisDevice());
	return ok;
}

ncclResult_t ncclCommInitAll(struct fcomm** out, int n, const int* devs) {
	if (n < 1 || n > FAKE_NDEV) return fail(badArg, "invalid device count");
	for (int i = 0; i < n; i++) {
		int d = devs != NULL ? devs[i] : i;
		if (d < 0 || d >= FAKE_NDEV) return fail(badArg, "invalid device");
		for (int j = 0; j < i; j++)
			if (devs != NULL && devs[j] == d) return fail(badUse, "Duplicate GPU detected");
	}
	struct clique* q = newClique(n);
	q->joined = n;
	for (int i = 0; i < n; i++) out[i] = newRank(q, i, devs != NULL ? devs[i] : i);
	logf_("ncclCommInitAll n=%d", n);
	return ok;
}

ncclResult_t ncclCommSplit(struct fcomm* c, int color, int key, struct fcomm** out, void* config) {
	ncclResult_t r = checkComm(c, "ncclCommSplit");
	if (r != ok) return r;
	pthread_mutex_lock(&mu);
	struct clique* q = c->q;
	q->splitColor[c->rank] = color;
	q->splitKey[c->rank] = key;
	struct fcomm* nc = NULL;
	if (color >= 0) {
		nc = calloc(1, sizeof *nc);
		nc->pending = 1;
		nc->dev = c->dev;
	}
	q->splitOut[c->rank] = nc;
	if (depth > 0 && ndeferred < 64) {
		*out = NULL;
		deferred[ndeferred].out = out;
		deferred[ndeferred].value = nc;
		ndeferred++;
	} else {
		*out = nc;
	}
	if (++q->splitArrived == q->n) {
		q->splitArrived = 0;
		for (int r = 0; r < q->n; r++) {
			struct fcomm* m = q->splitOut[r];
			if (m == NULL || !m->pending) continue;
			// The ranks of r's color, ordered by key then old rank.
			int members[MAXR], k = 0;
			for (int s = 0; s < q->n; s++)
				if (q->splitOut[s] != NULL && q->splitColor[s] == q->splitColor[r]) members[k++] = s;
			for (int i = 1; i < k; i++)
				for (int j = i; j > 0 && q->splitKey[members[j]] < q->splitKey[members[j - 1]]; j--) {
					int t = members[j];
					members[j] = members[j - 1];
					members[j - 1] = t;
				}
			struct clique* nq = newClique(k);
			nq->joined = k;
			for (int i = 0; i < k; i++) {
				struct fcomm* x = q->splitOut[members[i]];
				x->q = nq;
				x->rank = i;
				x->pending = 0;
				nq->ranks[i] = x;
			}
		}
	}
	pthread_mutex_unlock(&mu);
	logf_("ncclCommSplit rank=%d color=%d key=%d", c->rank, color, key);
	return ok;
}

ncclResult_t ncclCommFinalize(struct fcomm* c) {
	ncclResult_t r = checkComm(c, "ncclCommFinalize");
	if (r != ok) return r;
	c->finalized = 1;
	logf_("ncclCommFinalize rank=%d ingroup=%d", c->rank, depth > 0);
	return ok;
}

ncclResult_t ncclCommDestroy(struct fcomm* c) {
	if (c == NULL) return fail(badArg, "NULL communicator");
	if (thisDevice() != c->dev) return fail(badUse, "ncclCommDestroy: the current device is not the communicator's");
	logf_("ncclCommDestroy rank=%d finalized=%d", c->rank, c->finalized);
	free(c);
	return ok;
}

ncclResult_t ncclCommAbort(struct fcomm* c) {
	if (c == NULL) return fail(badArg, "NULL communicator");
	logf_("ncclCommAbort rank=%d", c->rank);
	free(c);
	return ok;
}

// $ROCM_GO_FAKE_ASYNC is the status ncclCommGetAsyncError reports.
ncclResult_t ncclCommGetAsyncError(struct fcomm* c, ncclResult_t* e) {
	if (c == NULL) return badArg;
	const char* v = getenv("ROCM_GO_FAKE_ASYNC");
	*e = v != NULL ? atoi(v) : ok;
	return ok;
}

ncclResult_t ncclCommCount(const struct fcomm* c, int* n) {
	if (c == NULL || c->pending) return fail(badArg, "NULL or pending communicator");
	*n = c->q->n;
	return ok;
}

ncclResult_t ncclCommCuDevice(const struct fcomm* c, int* d) {
	if (c == NULL) return badArg;
	*d = c->dev;
	return ok;
}

ncclResult_t ncclCommUserRank(const struct fcomm* c, int* r) {
	if (c == NULL || c->pending) return fail(badArg, "NULL or pending communicator");
	*r = c->rank;
	return ok;
}

ncclResult_t ncclAllReduce(const void* s, void* r, size_t n, int t, int op, struct fcomm* c, void* stream) {
	logf_("ncclAllReduce count=%zu type=%d op=%d", n, t, op);
	return enqueue(c, (struct op){.kind = K_ALLREDUCE, .send = s, .recv = r, .count = n, .dtype = t, .redop = op}, "ncclAllReduce");
}

ncclResult_t ncclAllGather(const void* s, void* r, size_t n, int t, struct fcomm* c, void* stream) {
	logf_("ncclAllGather count=%zu type=%d", n, t);
	return enqueue(c, (struct op){.kind = K_ALLGATHER, .send = s, .recv = r, .count = n, .dtype = t}, "ncclAllGather");
}

ncclResult_t ncclReduceScatter(const void* s, void* r, size_t n, int t, int op, struct fcomm* c, void* stream) {
	logf_("ncclReduceScatter count=%zu type=%d op=%d", n, t, op);
	return enqueue(c, (struct op){.kind = K_REDUCESCATTER, .send = s, .recv = r, .count = n, .dtype = t, .redop = op}, "ncclReduceScatter");
}

ncclResult_t ncclBroadcast(const void* s, void* r, size_t n, int t, int root, struct fcomm* c, void* stream) {
	logf_("ncclBroadcast count=%zu type=%d root=%d", n, t, root);
	return enqueue(c, (struct op){.kind = K_BROADCAST, .send = s, .recv = r, .count = n, .dtype = t, .root = root}, "ncclBroadcast");
}

ncclResult_t ncclReduce(const void* s, void* r, size_t n, int t, int op, int root, struct fcomm* c, void* stream) {
	logf_("ncclReduce count=%zu type=%d op=%d root=%d", n, t, op, root);
	return enqueue(c, (struct op){.kind = K_REDUCE, .send = s, .recv = r, .count = n, .dtype = t, .redop = op, .root = root}, "ncclReduce");
}

// Point to point: a send waits in its pair's queue for the receive (or
// the other way round), then the bytes move.
struct p2p {
	struct clique* q;
	int from, to, isSend;
	void* buf;
	size_t bytes;
	struct p2p* next;
};
static struct p2p* pendingP2P;

static ncclResult_t p2p(struct fcomm* c, void* buf, size_t n, int t, int peer, int isSend, const char* fn) {
	ncclResult_t r = checkComm(c, fn);
	if (r != ok) return r;
	if (peer < 0 || peer >= c->q->n) return fail(badArg, "invalid peer");
	if (typeSize(t) == 0) return fail(badArg, "invalid data type");
	size_t bytes = n * typeSize(t);
	int from = isSend ? c->rank : peer, to = isSend ? peer : c->rank;
	pthread_mutex_lock(&mu);
	for (struct p2p** p = &pendingP2P; *p != NULL; p = &(*p)->next) {
		struct p2p* m = *p;
		if (m->q == c->q && m->from == from && m->to == to && m->isSend != isSend) {
			if (m->bytes != bytes) {
				pthread_mutex_unlock(&mu);
				return fail(badUse, "a send and its receive differ in size");
			}
			memcpy(isSend ? m->buf : buf, isSend ? buf : m->buf, bytes);
			*p = m->next;
			free(m);
			pthread_mutex_unlock(&mu);
			return ok;
		}
	}
	struct p2p* m = calloc(1, sizeof *m);
	*m = (struct p2p){.q = c->q, .from = from, .to = to, .isSend = isSend, .buf = buf, .bytes = bytes, .next = NULL};
	struct p2p** tail = &pendingP2P;
	while (*tail != NULL) tail = &(*tail)->next;
	*tail = m;
	pthread_mutex_unlock(&mu);
	return ok;
}

ncclResult_t ncclSend(const void* s, size_t n, int t, int peer, struct fcomm* c, void* stream) {
	logf_("ncclSend count=%zu type=%d peer=%d", n, t, peer);
	return p2p(c, (void*)s, n, t, peer, 1, "ncclSend");
}

ncclResult_t ncclRecv(void* r, size_t n, int t, int peer, struct fcomm* c, void* stream) {
	logf_("ncclRecv count=%zu type=%d peer=%d", n, t, peer);
	return p2p(c, r, n, t, peer, 0, "ncclRecv");
}

ncclResult_t ncclGroupStart(void) {
	depth++;
	logf_("ncclGroupStart depth=%d", depth);
	return ok;
}

ncclResult_t ncclGroupEnd(void) {
	if (depth == 0) return fail(badUse, "ncclGroupEnd without ncclGroupStart on this thread");
	depth--;
	if (depth == 0) {
		for (int i = 0; i < ndeferred; i++) *deferred[i].out = deferred[i].value;
		ndeferred = 0;
	}
	logf_("ncclGroupEnd depth=%d", depth);
	return ok;
}
