/*
 * rocm_go_fmha.h: the C ABI between package flashattn of rocm-go and a
 * shim library, librocm_go_fmha.so, that runs Composable Kernel's ck_tile
 * FMHA forward (fmha_fwd of example/ck_tile/01_fmha) on AMD GPUs.
 *
 * flashattn loads the shim at run time with dlopen (nothing links against
 * it) and asks it, per call, whether it covers the case; when it does not,
 * flashattn runs its own kernels. scripts/build-ck-shim.sh builds the shim
 * from a Composable Kernel checkout with hipcc.
 *
 * The ABI is plain C with fixed-width fields, so that the Go side and the
 * shim agree whatever compiler built either. It changes only with
 * ROCM_GO_FMHA_ABI_VERSION, which the shim reports and flashattn checks
 * before any other call; the args struct also carries its own size.
 *
 * Layout and semantics are flashattn's (its Params godoc):
 *   - q, out: (batch, seqlen_q, nhead_q, head_dim); k, v: (batch,
 *     seqlen_k, nhead_k, head_dim): BSHD, the head dim contiguous, the
 *     other strides given in elements. nhead_q is a multiple of nhead_k
 *     (GQA/MQA).
 *   - Variable length (ROCM_GO_FMHA_VARLEN): batch 1 tensors, sequence b
 *     being rows cu_seqlens_q[b] .. cu_seqlens_q[b+1] of q and out and
 *     cu_seqlens_k[b] .. cu_seqlens_k[b+1] of k and v (int32, on the
 *     device, batch+1 entries each); seqlen_q and seqlen_k are then the
 *     packed row counts and the batch strides are unused.
 *   - A logit is scale * q.k, soft-capped to softcap * tanh(x / softcap)
 *     when softcap > 0, minus slope_h * |i + s_k - s_q - j| with ALiBi,
 *     and -inf where the window hides key j from query i: query i sees
 *     key j when i + s_k - s_q - window_left <= j <= i + s_k - s_q +
 *     window_right (aligned to the bottom right, as FlashAttention-2); a
 *     negative side is unbounded, so causal is (-1, 0) and no mask (-1,
 *     -1). A query that sees no key gets a zero output and a log-sum-exp
 *     of -inf.
 *   - lse (ROCM_GO_FMHA_LSE): float32 natural log-sum-exp of each row's
 *     logits, contiguous (batch, nhead_q, seqlen_q), or (nhead_q, total
 *     rows) when variable-length.
 *
 * Threads and devices: flashattn makes the stream's device current on the
 * calling thread before each call, in the same C call. Every entry point is
 * safe to call from several threads at once.
 *
 * Both calls fill msg (msg_size bytes, NUL-terminated, may be NULL) with
 * the reason of any status other than ROCM_GO_FMHA_OK.
 */
#ifndef ROCM_GO_FMHA_H
#define ROCM_GO_FMHA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI's version: the shim and flashattn must agree exactly. */
#define ROCM_GO_FMHA_ABI_VERSION 1

/* The library's file name, and the file flashattn looks for. */
#define ROCM_GO_FMHA_SONAME "librocm_go_fmha.so"

/* Status codes. */
enum {
	ROCM_GO_FMHA_OK = 0,
	/* The shim does not cover the case (a dtype, head dim, feature, arch or
	 * layout it was not built for): nothing was queued; run another
	 * kernel. */
	ROCM_GO_FMHA_UNSUPPORTED = 1,
	/* The arguments are inconsistent (a nil pointer, negative lengths, a
	 * struct of another size or version): a bug of the caller. */
	ROCM_GO_FMHA_INVALID_ARGUMENT = 2,
	/* HIP failed while queueing the work: msg holds HIP's error. */
	ROCM_GO_FMHA_HIP_ERROR = 3,
	/* Anything else (an exception inside the shim). */
	ROCM_GO_FMHA_INTERNAL_ERROR = 4
};

/* Element types: flashattn.DType's values. */
enum {
	ROCM_GO_FMHA_F16 = 1,
	ROCM_GO_FMHA_BF16 = 2,
	ROCM_GO_FMHA_F32 = 3
};

/* flags. */
enum {
	ROCM_GO_FMHA_VARLEN = 1, /* cu_seqlens_q and cu_seqlens_k are set */
	ROCM_GO_FMHA_LSE = 2,    /* lse is set */
	ROCM_GO_FMHA_ALIBI = 4   /* alibi_slopes is set */
};

/* The arguments of a forward call. Tensors are given by device address;
 * strides are in elements: [0] batch, [1] sequence, [2] head (the
 * head dim's stride is 1). Fields not used by the flags are zero. */
typedef struct rocm_go_fmha_fwd_args {
	uint32_t size;        /* sizeof(rocm_go_fmha_fwd_args) */
	uint32_t abi_version; /* ROCM_GO_FMHA_ABI_VERSION */
	int32_t dtype;        /* ROCM_GO_FMHA_F16, _BF16 or _F32 */
	uint32_t flags;       /* ROCM_GO_FMHA_VARLEN | _LSE | _ALIBI */
	int32_t device;       /* the HIP device ordinal, current on the thread */
	int32_t reserved;     /* zero */
	char arch[64];        /* the device's gcnArchName: "gfx942:sramecc+:xnack-" */

	/* Device addresses, as integers: they are not host pointers. */
	uint64_t q;
	uint64_t k;
	uint64_t v;
	uint64_t out;
	uint64_t lse;          /* ROCM_GO_FMHA_LSE: float32 */
	uint64_t cu_seqlens_q; /* ROCM_GO_FMHA_VARLEN: int32, batch+1 */
	uint64_t cu_seqlens_k; /* ROCM_GO_FMHA_VARLEN: int32, batch+1 */
	uint64_t alibi_slopes; /* ROCM_GO_FMHA_ALIBI: float32, one per query head */
	void* stream;          /* the hipStream_t to queue on */

	int64_t q_stride[3];
	int64_t k_stride[3];
	int64_t v_stride[3];
	int64_t out_stride[3];

	int32_t batch;
	int32_t seqlen_q;     /* per sequence; varlen: the packed rows of q */
	int32_t seqlen_k;     /* per sequence; varlen: the packed rows of k */
	int32_t max_seqlen_q; /* the longest sequence of q */
	int32_t max_seqlen_k; /* the longest sequence of k */
	int32_t nhead_q;
	int32_t nhead_k;
	int32_t head_dim;
	int32_t window_left;  /* -1: unbounded */
	int32_t window_right; /* -1: unbounded; 0 with left -1: causal */
	float scale;          /* multiplies q.k */
	float softcap;        /* > 0: soft-capping; 0: none */
} rocm_go_fmha_fwd_args;

/* The layout is fixed: every compiler that builds either side checks it. */
#if defined(__cplusplus)
static_assert(sizeof(rocm_go_fmha_fwd_args) == 304, "rocm_go_fmha_fwd_args is 304 bytes");
static_assert(offsetof(rocm_go_fmha_fwd_args, q) == 88, "the device addresses start at byte 88");
static_assert(offsetof(rocm_go_fmha_fwd_args, q_stride) == 160, "the strides start at byte 160");
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(rocm_go_fmha_fwd_args) == 304, "rocm_go_fmha_fwd_args is 304 bytes");
_Static_assert(offsetof(rocm_go_fmha_fwd_args, q) == 88, "the device addresses start at byte 88");
_Static_assert(offsetof(rocm_go_fmha_fwd_args, q_stride) == 160, "the strides start at byte 160");
#endif

/* rocm_go_fmha_abi_version returns ROCM_GO_FMHA_ABI_VERSION of the shim. */
int32_t rocm_go_fmha_abi_version(void);

/* rocm_go_fmha_build_info describes the build: Composable Kernel's
 * revision, the GPU targets, the compiler. A static string. */
const char* rocm_go_fmha_build_info(void);

/* rocm_go_fmha_fwd_supports returns ROCM_GO_FMHA_OK when
 * rocm_go_fmha_fwd would run the case, ROCM_GO_FMHA_UNSUPPORTED (msg says
 * why) when it would not, ROCM_GO_FMHA_INVALID_ARGUMENT for inconsistent
 * arguments. It queues nothing and reads no device memory. */
int32_t rocm_go_fmha_fwd_supports(const rocm_go_fmha_fwd_args* args, char* msg, size_t msg_size);

/* rocm_go_fmha_fwd queues the attention forward on args->stream. It
 * returns without waiting for the GPU. ROCM_GO_FMHA_UNSUPPORTED means
 * that nothing was queued. */
int32_t rocm_go_fmha_fwd(const rocm_go_fmha_fwd_args* args, char* msg, size_t msg_size);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_GO_FMHA_H */
