// rocm_go_fmha.cpp: the ABI of rocm_go_fmha.h. It checks the arguments,
// decides what Composable Kernel's fmha_fwd covers, and translates
// flashattn's layout and window into CK's terms (a rocm_go_fmha_ck_request)
// for rocm_go_fmha_ck.cpp, the one file that includes CK. It includes no CK
// and no HIP header, so that it builds with any C++17 compiler: flashattn's
// tests build it with g++ beside a recording stand-in for the CK side.
//
// ROCM_GO_FMHA_ARCHS, set by scripts/build-ck-shim.sh, lists the GPU
// targets the CK kernels were compiled for ("gfx90a;gfx942").

#include "rocm_go_fmha.h"
#include "ck_request.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#ifndef ROCM_GO_FMHA_ARCHS
#error "define ROCM_GO_FMHA_ARCHS: the GPU targets the CK kernels are compiled for (scripts/build-ck-shim.sh does)"
#endif

namespace {

int32_t report(char* msg, size_t n, int32_t status, const char* format, ...) {
	if (msg != nullptr && n > 0) {
		va_list ap;
		va_start(ap, format);
		std::vsnprintf(msg, n, format, ap);
		va_end(ap);
	}
	return status;
}

const char* dtype_name(int32_t dt) {
	switch (dt) {
	case ROCM_GO_FMHA_F16:
		return "f16";
	case ROCM_GO_FMHA_BF16:
		return "bf16";
	case ROCM_GO_FMHA_F32:
		return "f32";
	}
	return "unknown";
}

// arch_built reports whether the device's arch ("gfx942:sramecc+:xnack-")
// is one of ROCM_GO_FMHA_ARCHS: a code object built without target
// features runs with either setting of them.
bool arch_built(const char* arch) {
	std::string a(arch, strnlen(arch, 64));
	a = a.substr(0, a.find(':'));
	if (a.empty()) {
		return false;
	}
	std::string list = ROCM_GO_FMHA_ARCHS;
	size_t start = 0;
	while (start <= list.size()) {
		size_t end = list.find(';', start);
		if (end == std::string::npos) {
			end = list.size();
		}
		if (list.compare(start, end - start, a) == 0) {
			return true;
		}
		start = end + 1;
	}
	return false;
}

// device is a device address as the pointer CK takes.
void* device(uint64_t p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

// fits32 reports whether every element offset within one (batch entry,
// head) of a tensor of rows rows fits CK's int32 index.
bool fits32(const int64_t st[3], int64_t rows, int64_t heads, int64_t d) {
	const int64_t lim = INT32_MAX;
	for (int i = 0; i < 3; i++) {
		if (st[i] < 0 || st[i] > lim) {
			return false;
		}
	}
	int64_t span = (rows > 0 ? rows - 1 : 0) * st[1] + (heads > 0 ? heads - 1 : 0) * st[2] + d;
	return span <= lim;
}

// check returns ROCM_GO_FMHA_OK with the request filled, or the status
// (and message) of an argument that cannot be taken or a case CK does not
// cover.
int32_t check(const rocm_go_fmha_fwd_args* a, rocm_go_fmha_ck_request* r, char* msg, size_t n) {
	if (a == nullptr) {
		return report(msg, n, ROCM_GO_FMHA_INVALID_ARGUMENT, "nil arguments");
	}
	if (a->size != sizeof(rocm_go_fmha_fwd_args) || a->abi_version != ROCM_GO_FMHA_ABI_VERSION) {
		return report(msg, n, ROCM_GO_FMHA_INVALID_ARGUMENT,
			"arguments of ABI version %u and %u bytes; this shim has ABI version %d and %zu bytes: rebuild it from this rocm-go",
			a->abi_version, a->size, ROCM_GO_FMHA_ABI_VERSION, sizeof(rocm_go_fmha_fwd_args));
	}
	const bool varlen = (a->flags & ROCM_GO_FMHA_VARLEN) != 0;
	const bool lse = (a->flags & ROCM_GO_FMHA_LSE) != 0;
	const bool alibi = (a->flags & ROCM_GO_FMHA_ALIBI) != 0;
	if ((a->flags & ~uint32_t(ROCM_GO_FMHA_VARLEN | ROCM_GO_FMHA_LSE | ROCM_GO_FMHA_ALIBI)) != 0) {
		return report(msg, n, ROCM_GO_FMHA_INVALID_ARGUMENT, "unknown flags %#x", a->flags);
	}
	if (a->q == 0 || a->k == 0 || a->v == 0 || a->out == 0) {
		return report(msg, n, ROCM_GO_FMHA_INVALID_ARGUMENT, "q, k, v and out must be set");
	}
	if ((lse && a->lse == 0) || (varlen && (a->cu_seqlens_q == 0 || a->cu_seqlens_k == 0)) || (alibi && a->alibi_slopes == 0)) {
		return report(msg, n, ROCM_GO_FMHA_INVALID_ARGUMENT, "a flag is set without its pointer");
	}
	if (a->batch < 0 || a->seqlen_q < 0 || a->seqlen_k < 0 || a->max_seqlen_q < 0 || a->max_seqlen_k < 0 ||
	    a->nhead_q <= 0 || a->nhead_k <= 0 || a->nhead_q % a->nhead_k != 0 || a->head_dim <= 0) {
		return report(msg, n, ROCM_GO_FMHA_INVALID_ARGUMENT,
			"batch %d, seqlen_q %d, seqlen_k %d, max %d/%d, heads %d/%d, head dim %d: lengths are non-negative and nhead_q a positive multiple of nhead_k",
			a->batch, a->seqlen_q, a->seqlen_k, a->max_seqlen_q, a->max_seqlen_k, a->nhead_q, a->nhead_k, a->head_dim);
	}
	if (!(std::isfinite(a->scale)) || !(std::isfinite(a->softcap)) || a->softcap < 0) {
		return report(msg, n, ROCM_GO_FMHA_INVALID_ARGUMENT, "scale %g and softcap %g: want finite values, softcap >= 0", a->scale, a->softcap);
	}

	// What the CK kernels cover.
	if (!arch_built(a->arch)) {
		return report(msg, n, ROCM_GO_FMHA_UNSUPPORTED, "the shim's kernels are built for %s, not for %.64s", ROCM_GO_FMHA_ARCHS, a->arch);
	}
	if (a->dtype != ROCM_GO_FMHA_F16 && a->dtype != ROCM_GO_FMHA_BF16) {
		return report(msg, n, ROCM_GO_FMHA_UNSUPPORTED, "dtype %s: CK's fmha_fwd takes f16 and bf16", dtype_name(a->dtype));
	}
	if (a->head_dim % 8 != 0 || a->head_dim > 256) {
		return report(msg, n, ROCM_GO_FMHA_UNSUPPORTED, "head dim %d: CK's instances take multiples of 8 up to 256", a->head_dim);
	}
	if (a->softcap > 0) {
		return report(msg, n, ROCM_GO_FMHA_UNSUPPORTED, "logit soft-capping: not in this Composable Kernel's fmha_fwd");
	}
	const bool causal = a->window_left < 0 && a->window_right == 0;
	if (alibi && causal && (varlen || a->seqlen_q != a->seqlen_k || lse)) {
		// With a plain causal mask CK measures ALiBi distances from the
		// top of the key range, which shifts each row's logits by a
		// constant: the same softmax when s_q = s_k, but another LSE, and
		// other outputs when s_q != s_k.
		return report(msg, n, ROCM_GO_FMHA_UNSUPPORTED,
			"ALiBi with a causal mask: CK matches only for equal, fixed sequence lengths and no LSE");
	}
	// 16-byte vector loads: aligned rows and heads everywhere.
	const int64_t esize = 2;
	const uint64_t ptrs[] = {a->q, a->k, a->v, a->out};
	const int64_t* strides[] = {a->q_stride, a->k_stride, a->v_stride, a->out_stride};
	for (int t = 0; t < 4; t++) {
		if (ptrs[t] % 16 != 0) {
			return report(msg, n, ROCM_GO_FMHA_UNSUPPORTED, "an operand does not start on 16 bytes");
		}
		for (int i = 0; i < 3; i++) {
			if (strides[t][i] * esize % 16 != 0) {
				return report(msg, n, ROCM_GO_FMHA_UNSUPPORTED, "a stride is not a multiple of 16 bytes");
			}
		}
	}
	const int64_t rows_q = varlen ? a->max_seqlen_q : a->seqlen_q;
	const int64_t rows_k = varlen ? a->max_seqlen_k : a->seqlen_k;
	if (!fits32(a->q_stride, rows_q, a->nhead_q, a->head_dim) || !fits32(a->out_stride, rows_q, a->nhead_q, a->head_dim) ||
	    !fits32(a->k_stride, rows_k, a->nhead_k, a->head_dim) || !fits32(a->v_stride, rows_k, a->nhead_k, a->head_dim) ||
	    (lse && int64_t(a->nhead_q) * a->seqlen_q > INT32_MAX)) {
		return report(msg, n, ROCM_GO_FMHA_UNSUPPORTED, "offsets beyond CK's int32 index");
	}

	std::memset(r, 0, sizeof(*r));
	r->bf16 = a->dtype == ROCM_GO_FMHA_BF16;
	r->group = varlen;
	r->lse = lse;
	r->alibi = alibi;
	if (a->window_left < 0 && a->window_right < 0) {
		r->mask = RG_CK_MASK_NONE;
	} else if (a->window_left < 0) {
		r->mask = RG_CK_MASK_RIGHT;
	} else {
		r->mask = RG_CK_MASK_WINDOW;
	}
	r->window_left = a->window_left < 0 ? -1 : a->window_left;
	r->window_right = a->window_right < 0 ? -1 : a->window_right;
	r->q = device(a->q);
	r->k = device(a->k);
	r->v = device(a->v);
	r->o = device(a->out);
	r->lse_ptr = lse ? device(a->lse) : nullptr;
	r->seqstart_q = varlen ? device(a->cu_seqlens_q) : nullptr;
	r->seqstart_k = varlen ? device(a->cu_seqlens_k) : nullptr;
	r->alibi_slopes = alibi ? device(a->alibi_slopes) : nullptr;
	r->stream = a->stream;
	r->batch = a->batch;
	r->seqlen_q = a->seqlen_q;
	r->seqlen_k = a->seqlen_k;
	r->max_seqlen_q = a->max_seqlen_q;
	r->hdim = a->head_dim;
	r->nhead_q = a->nhead_q;
	r->nhead_k = a->nhead_k;
	r->scale = a->scale;
	r->stride_q = int32_t(a->q_stride[1]);
	r->stride_k = int32_t(a->k_stride[1]);
	r->stride_v = int32_t(a->v_stride[1]);
	r->stride_o = int32_t(a->out_stride[1]);
	r->nhead_stride_q = int32_t(a->q_stride[2]);
	r->nhead_stride_k = int32_t(a->k_stride[2]);
	r->nhead_stride_v = int32_t(a->v_stride[2]);
	r->nhead_stride_o = int32_t(a->out_stride[2]);
	if (!varlen) {
		r->batch_stride_q = int32_t(a->q_stride[0]);
		r->batch_stride_k = int32_t(a->k_stride[0]);
		r->batch_stride_v = int32_t(a->v_stride[0]);
		r->batch_stride_o = int32_t(a->out_stride[0]);
	}
	if (lse) {
		// flashattn's LSE: (batch, h_q, s_q), or (h_q, total rows) when
		// variable-length, which is CK's group mode layout: the kernel
		// adds each sequence's first row.
		r->nhead_stride_lse = a->seqlen_q;
		r->batch_stride_lse = varlen ? 0 : a->nhead_q * a->seqlen_q;
	}
	return ROCM_GO_FMHA_OK;
}

} // namespace

extern "C" {

int32_t rocm_go_fmha_abi_version(void) { return ROCM_GO_FMHA_ABI_VERSION; }

const char* rocm_go_fmha_build_info(void) { return rg_fmha_ck_info(); }

int32_t rocm_go_fmha_fwd_supports(const rocm_go_fmha_fwd_args* args, char* msg, size_t msg_size) {
	rocm_go_fmha_ck_request r;
	return check(args, &r, msg, msg_size);
}

int32_t rocm_go_fmha_fwd(const rocm_go_fmha_fwd_args* args, char* msg, size_t msg_size) {
	rocm_go_fmha_ck_request r;
	int32_t st = check(args, &r, msg, msg_size);
	if (st != ROCM_GO_FMHA_OK) {
		return st;
	}
	if (r.batch == 0 || r.max_seqlen_q == 0) {
		return ROCM_GO_FMHA_OK; // nothing to compute
	}
	// No exception crosses the C ABI.
	try {
		return rg_fmha_ck_run(&r, msg, msg_size);
	} catch (const std::exception& e) {
		return report(msg, msg_size, ROCM_GO_FMHA_INTERNAL_ERROR, "%s", e.what());
	} catch (...) {
		return report(msg, msg_size, ROCM_GO_FMHA_INTERNAL_ERROR, "an unknown C++ exception");
	}
}

} // extern "C"
