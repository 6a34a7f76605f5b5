// ck_request.h: what rocm_go_fmha.cpp (the ABI: checks, coverage, layout)
// hands to rocm_go_fmha_ck.cpp (the one file that includes Composable
// Kernel): the call in CK's own terms, every check already done. Internal
// to the shim; not part of the ABI.
#ifndef ROCM_GO_FMHA_CK_REQUEST_H
#define ROCM_GO_FMHA_CK_REQUEST_H

#include <stddef.h>
#include <stdint.h>

// The masks of CK's fmha_fwd: which kernel family (traits) and how the
// kernel builds its mask from the window (args).
enum rocm_go_fmha_ck_mask {
	// No mask: every key is seen.
	RG_CK_MASK_NONE = 0,
	// Only keys right of the diagonal band are hidden (CK's "causal"
	// kernels, mask_bottom_right): window_left is -1, window_right >= 0.
	RG_CK_MASK_RIGHT = 1,
	// A band bounded on the left, and on the right or not (CK's
	// window_generic kernels, their window aligned to the bottom right).
	RG_CK_MASK_WINDOW = 2
};

struct rocm_go_fmha_ck_request {
	int32_t bf16;  // else f16
	int32_t group; // variable length: CK's group mode
	int32_t mask;  // rocm_go_fmha_ck_mask
	int32_t lse;
	int32_t alibi;

	const void* q;
	const void* k;
	const void* v;
	void* o;
	void* lse_ptr;
	const void* seqstart_q;
	const void* seqstart_k;
	const void* alibi_slopes;
	void* stream;

	int32_t batch;
	int32_t seqlen_q; // batch mode; group mode: unused by CK
	int32_t seqlen_k;
	int32_t max_seqlen_q;
	int32_t hdim;
	int32_t nhead_q;
	int32_t nhead_k;
	int32_t window_left;
	int32_t window_right;
	float scale;

	// Strides in elements, all within int32 (CK's index_t).
	int32_t stride_q, stride_k, stride_v, stride_o;                     // a row (token)
	int32_t nhead_stride_q, nhead_stride_k, nhead_stride_v, nhead_stride_o; // a head
	int32_t batch_stride_q, batch_stride_k, batch_stride_v, batch_stride_o; // batch mode
	int32_t nhead_stride_lse, batch_stride_lse;
};

#ifdef __cplusplus
extern "C" {
#endif

// rg_fmha_ck_run queues the request with CK's fmha_fwd; it returns a
// ROCM_GO_FMHA_ status and fills msg as the ABI's calls do.
int32_t rg_fmha_ck_run(const struct rocm_go_fmha_ck_request* r, char* msg, size_t msg_size);

// rg_fmha_ck_info describes the Composable Kernel build (revision,
// targets, compiler); a static string.
const char* rg_fmha_ck_info(void);

#ifdef __cplusplus
}
#endif

#endif
