// fakeck.cpp stands in for the Composable Kernel side of the shim
// (ckshim/rocm_go_fmha_ck.cpp) in tier 0: linked with the real ABI code
// (ckshim/rocm_go_fmha.cpp), it appends each request it gets to the file
// named by $ROCM_GO_FAKE_LOG, and returns the status in
// $ROCM_GO_FAKE_CK_STATUS (0 when unset). Under package hip's fake
// runtime device memory is host memory, so it logs the ALiBi slopes too.
#include "ck_request.h"
#include "rocm_go_fmha.h"

#include <cstdio>
#include <cstdlib>

extern "C" const char* rg_fmha_ck_info(void) { return "fake CK for rocm-go's tests; targets " ROCM_GO_FMHA_ARCHS; }

extern "C" int32_t rg_fmha_ck_run(const rocm_go_fmha_ck_request* r, char* msg, size_t n) {
	const char* path = std::getenv("ROCM_GO_FAKE_LOG");
	if (path != nullptr) {
		FILE* f = std::fopen(path, "a");
		if (f != nullptr) {
			std::fprintf(f,
				"ck_run bf16=%d group=%d mask=%d lse=%d alibi=%d q=%#lx k=%#lx v=%#lx o=%#lx lse_ptr=%#lx seqstart=%#lx,%#lx stream=%p "
				"batch=%d seqlen=%d,%d max_q=%d hdim=%d heads=%d,%d window=%d,%d scale=%g "
				"stride=%d,%d,%d,%d nhead_stride=%d,%d,%d,%d batch_stride=%d,%d,%d,%d lse_stride=%d,%d",
				r->bf16, r->group, r->mask, r->lse, r->alibi, (unsigned long)(uintptr_t)r->q, (unsigned long)(uintptr_t)r->k,
				(unsigned long)(uintptr_t)r->v, (unsigned long)(uintptr_t)r->o, (unsigned long)(uintptr_t)r->lse_ptr,
				(unsigned long)(uintptr_t)r->seqstart_q, (unsigned long)(uintptr_t)r->seqstart_k, r->stream,
				r->batch, r->seqlen_q, r->seqlen_k, r->max_seqlen_q, r->hdim, r->nhead_q, r->nhead_k,
				r->window_left, r->window_right, r->scale,
				r->stride_q, r->stride_k, r->stride_v, r->stride_o,
				r->nhead_stride_q, r->nhead_stride_k, r->nhead_stride_v, r->nhead_stride_o,
				r->batch_stride_q, r->batch_stride_k, r->batch_stride_v, r->batch_stride_o,
				r->nhead_stride_lse, r->batch_stride_lse);
			if (r->alibi) {
				const float* s = static_cast<const float*>(r->alibi_slopes);
				std::fprintf(f, " slopes=");
				for (int h = 0; h < r->nhead_q; h++) std::fprintf(f, "%s%g", h ? "," : "", s[h]);
			}
			std::fprintf(f, "\n");
			std::fclose(f);
		}
	}
	const char* st = std::getenv("ROCM_GO_FAKE_CK_STATUS");
	int32_t status = st != nullptr ? std::atoi(st) : 0;
	if (status != ROCM_GO_FMHA_OK && msg != nullptr && n > 0) {
		std::snprintf(msg, n, "fake CK: status %d", status);
	}
	return status;
}
