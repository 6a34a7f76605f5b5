// rocm_go_fmha_ck.cpp: the Composable Kernel side of the shim. It turns a
// checked rocm_go_fmha_ck_request into fmha_fwd's traits and arguments
// (example/ck_tile/01_fmha/fmha_fwd.hpp of a Composable Kernel checkout)
// and queues the kernel that fmha_fwd's generated dispatcher picks.
//
// Written against the fmha_fwd API of Composable Kernel's develop branch of
// late 2024 (the one ROCm 6.3 and 6.4 ship): fields are set by name on a
// value-initialised struct, so fields that later versions add keep their
// defaults. scripts/build-ck-shim.sh compiles it with hipcc, beside the
// generated kernel instances and their dispatcher.
//
// ROCM_GO_FMHA_CK_REVISION and ROCM_GO_FMHA_ARCHS come from the build
// script, for rocm_go_fmha_build_info.

#include "ck_request.h"
#include "rocm_go_fmha.h"

#include "fmha_fwd.hpp"

#include <hip/hip_runtime.h>

#include <cstdarg>
#include <cstdio>
#include <stdexcept>
#include <utility>

#ifndef ROCM_GO_FMHA_CK_REVISION
#define ROCM_GO_FMHA_CK_REVISION "unknown"
#endif

#define RG_STR2(x) #x
#define RG_STR(x) RG_STR2(x)

namespace {

// say fills the caller's message buffer, which may be absent.
void say(char* msg, size_t n, const char* format, ...) {
	if (msg == nullptr || n == 0) {
		return;
	}
	va_list ap;
	va_start(ap, format);
	std::vsnprintf(msg, n, format, ap);
	va_end(ap);
}

} // namespace

extern "C" const char* rg_fmha_ck_info(void) {
	return "Composable Kernel " ROCM_GO_FMHA_CK_REVISION " ck_tile fmha_fwd; targets " ROCM_GO_FMHA_ARCHS
	       "; clang " __clang_version__ "; HIP " RG_STR(HIP_VERSION_MAJOR) "." RG_STR(HIP_VERSION_MINOR);
}

extern "C" int32_t rg_fmha_ck_run(const rocm_go_fmha_ck_request* r, char* msg, size_t n) {
	fmha_fwd_traits t{};
	t.hdim_q = r->hdim;
	t.hdim_v = r->hdim;
	t.data_type = r->bf16 ? "bf16" : "fp16";
	t.is_group_mode = r->group != 0;
	t.is_v_rowmajor = true; // V is (seq, head dim), like K
	switch (r->mask) {
	case RG_CK_MASK_NONE:
		t.mask_type = mask_enum::no_mask;
		break;
	case RG_CK_MASK_RIGHT:
		// The "causal" kernels hide only what lies right of the band.
		t.mask_type = mask_enum::mask_bottom_right;
		break;
	default:
		// A left side too: the local ("generic") kernels.
		t.mask_type = mask_enum::window_generic;
		break;
	}
	t.bias_type = r->alibi ? bias_enum::alibi : bias_enum::no_bias;
	t.has_lse = r->lse != 0;
	t.has_dropout = false;
	t.do_fp8_static_quant = false;

	fmha_fwd_args a{};
	a.q_ptr = r->q;
	a.k_ptr = r->k;
	a.v_ptr = r->v;
	a.bias_ptr = r->alibi_slopes;
	a.rand_val_ptr = nullptr;
	a.lse_ptr = r->lse_ptr;
	a.o_ptr = r->o;
	a.seqstart_q_ptr = r->seqstart_q;
	a.seqstart_k_ptr = r->seqstart_k;
	a.seqlen_k_ptr = nullptr; // key lengths from seqstart_k
	a.seqlen_q = r->seqlen_q;
	a.seqlen_k = r->seqlen_k;
	a.batch = r->batch;
	a.max_seqlen_q = r->max_seqlen_q;
	a.hdim_q = r->hdim;
	a.hdim_v = r->hdim;
	a.nhead_q = r->nhead_q;
	a.nhead_k = r->nhead_k;
	a.scale_s = r->scale;
	a.scale_p = 1.0f;
	a.scale_o = 1.0f;
	a.stride_q = r->stride_q;
	a.stride_k = r->stride_k;
	a.stride_v = r->stride_v;
	a.stride_bias = 0; // ALiBi: one slope per head, shared by the batch
	a.stride_randval = 0;
	a.stride_o = r->stride_o;
	a.nhead_stride_q = r->nhead_stride_q;
	a.nhead_stride_k = r->nhead_stride_k;
	a.nhead_stride_v = r->nhead_stride_v;
	a.nhead_stride_bias = 0;
	a.nhead_stride_randval = 0;
	a.nhead_stride_lse = r->nhead_stride_lse;
	a.nhead_stride_o = r->nhead_stride_o;
	a.batch_stride_q = r->batch_stride_q;
	a.batch_stride_k = r->batch_stride_k;
	a.batch_stride_v = r->batch_stride_v;
	a.batch_stride_bias = 0;
	a.batch_stride_randval = 0;
	a.batch_stride_lse = r->batch_stride_lse;
	a.batch_stride_o = r->batch_stride_o;
	// CK's windows are FlashAttention's: -1 unbounded, aligned to the
	// bottom right (GenericAttentionMaskEnum::MASK_FROM_BOTTOM_RIGHT).
	a.window_size_left = r->window_left;
	a.window_size_right = r->window_right;
	a.mask_type = r->mask == RG_CK_MASK_NONE ? 0 : 2;
	a.p_drop = 0.0f;
	a.s_randval = false;
	a.drop_seed_offset = std::make_pair(uint64_t(0), uint64_t(0));

	ck_tile::stream_config s{};
	s.stream_id_ = static_cast<hipStream_t>(r->stream);
	s.time_kernel_ = false;
	s.log_level_ = 0;

	// A sticky error of an earlier call on this thread is not ours.
	(void)hipGetLastError();
	// fmha_fwd returns a negative time when no instance matches, having
	// launched nothing; launch failures throw (HIP_CHECK_ERROR).
	float ran;
	try {
		ran = fmha_fwd(t, a, s);
	} catch (const std::runtime_error& e) {
		say(msg, n, "%s", e.what());
		return ROCM_GO_FMHA_HIP_ERROR;
	}
	if (ran < 0) {
		say(msg, n, "no kernel of this build takes %s, head dim %d, %s mode, mask %d, %s, %s",
			r->bf16 ? "bf16" : "f16", r->hdim, r->group ? "group" : "batch", r->mask,
			r->alibi ? "ALiBi" : "no bias", r->lse ? "LSE" : "no LSE");
		return ROCM_GO_FMHA_UNSUPPORTED;
	}
	hipError_t e = hipGetLastError();
	if (e != hipSuccess) {
		say(msg, n, "launching fmha_fwd: %s", hipGetErrorString(e));
		return ROCM_GO_FMHA_HIP_ERROR;
	}
	return ROCM_GO_FMHA_OK;
}
