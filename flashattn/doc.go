// Package flashattn is fused attention forward on device buffers:
// softmax(q·kᵀ·scale + masks)·v in one pass over K and V, FlashAttention-2's
// algorithm, without ever materialising the s_q × s_kv score matrix.
//
// Operands are BSHD: q (batch, s_q, h_q, d), k and v (batch, s_kv, h_kv,
// d), out like q, the head dim contiguous and every other stride free
// (Tensor). Elements are F16 or BF16 (or F32), with float32 arithmetic
// inside. Params selects the softmax scale, causal masking (aligned to the
// bottom right when s_q ≠ s_kv, as FlashAttention-2), a sliding window,
// ALiBi slopes, logit soft-capping, the log-sum-exp output and split-KV.
// GQA and MQA follow from h_q being a multiple of h_kv.
//
// A Handle queues the work on a stream:
//
//	h, err := flashattn.NewHandle(stream)
//	q := flashattn.Contiguous(qBuf.Ptr(), flashattn.F16, b, sq, hq, d)
//	...
//	backend, err := h.Forward(q, k, v, out, flashattn.Params{Causal: true})
//
// Three entry points: Forward (dense batches), ForwardVarlen (sequences of
// different lengths packed along the seq dim, with cumulative lengths) and
// Decode (a paged KV cache read through a block table, with split-KV
// across the cache for the few query rows of a decode step).
//
// # Backends
//
// Every call reports the kernel that ran (Backend); Backend's godoc states
// the rule that chooses. All are HIP C++ of kernels/ (a file a kernel family), compiled at run
// time with hipRTC (NVRTC on NVIDIA) for the device's exact architecture,
// through package hiprtc's Kernels and Cache (the mechanism package
// candle's KernelCache and package miopen's kernels use), kept on disk
// under ROCM_GO_CACHE_DIR. Each kernel waits for the kernel before it first
// thing and is launched early (hip.LaunchConfig.EarlyLaunch: on NVIDIA
// sm_90 and later its launch overlaps the end of the one before, a split
// decode's merge with its splits' kernel). The backends:
//
//   - MatrixCore: FlashAttention-2 with q·kᵀ and p·v on the matrix cores
//     of NVIDIA sm_80 and later (mma.sync m16n8k16 with float32
//     accumulation, ldmatrix, cp.async), F16 and BF16, every head dim and
//     feature, dense or variable-length. On Hopper (sm_90, whose kernels
//     compile for sm_90a where NVRTC is 12 or later) head dim 128, and 64
//     over 2048 keys or more, run on the warpgroup instructions instead
//     (wgmma.mma_async: q and K read straight from shared memory in
//     128-byte swizzled tiles, two warpgroups of 64 rows, 128 keys a
//     tile): 1.35× mma.sync's speed at head dim 128 and 4096 keys,
//     0.61-0.64 of PyTorch's cuDNN attention on an H200. A decode step's
//     few rows (at most 16 a KV head, head dims up to 128) run a kernel of
//     four warps over each 64-key tile, the keys split over blocks only as
//     far as the device needs to stay busy: the rows of a GQA group share
//     each K and V tile on the matrix cores (an MHA step at 0.95 of
//     PyTorch's bandwidth on an H200). Where a block's
//     merge is small (an MHA row of head dim 128 or less, at most 8
//     splits) the last of its splits to end merges them, without a second
//     kernel (the handle's counters, NewHandle).
//   - MFMA and WMMA: the same on AMD's matrix cores, MFMA on CDNA
//     (gfx90a, gfx942, gfx950: v_mfma 32×32×8 and 16×16×16, wave64) and
//     WMMA on RDNA3 and RDNA4 (gfx11xx, gfx12xx: v_wmma 16×16×16, wave32).
//     They compile with hipRTC for those archs and their lane arithmetic
//     is checked by emulation on the host, but no AMD GPU has run them
//     yet.
//   - FlashDecoding: for a decode step's few query rows, the keys spread
//     over a block's threads and split across the device, each K and V row
//     read once with 16-byte loads; any dtype and arch, paged caches too
//     (on NVIDIA, the decode steps that MatrixCore does not take). An
//     LLM's step (F16 or BF16, a paged cache of power-of-two pages,
//     aligned rows, nothing masked) has a kernel of its own, which also
//     takes the step's rotary embeddings and cache writes (Params.Rotary:
//     q and the new keys turned, the new rows written, in the same
//     kernel).
//   - Portable: plain float FMAs, correct on any architecture and warp
//     size; everything the others do not take (F32 prefill, paged caches
//     with many rows, layouts not aligned to 16 bytes, archs without
//     matrix-core kernels).
//
// On the AMD platform a fourth backend, CK, runs Composable Kernel's
// ck_tile FMHA forward through librocm_go_fmha.so, a small shim built from
// a Composable Kernel checkout by scripts/build-ck-shim.sh (C ABI:
// ckshim/rocm_go_fmha.h). It is loaded with dlopen on first use (or by
// LoadCK) from ROCM_GO_FMHA_LIBRARY, ROCM_PATH/lib, /opt/rocm/lib or the
// system loader path, and asked per call whether it covers the case;
// where it is absent, declines or is turned off (ROCM_GO_FMHA_LIBRARY=off),
// the kernels above run. The shim has been built here for gfx942 with
// hipcc against Composable Kernel, but never run: no AMD GPU was at hand.
// A fifth, MIOpen, is opt-in (ROCM_GO_MIOPEN_MHA=on): the calls the shim
// did not take run on MIOpen's fused attention (package miopen's
// MHAForward) where MIOpen has a solution: dense F16 and BF16 batches of as
// many queries as keys and as many KV heads as query heads, without a
// window, ALiBi, soft-capping or a log-sum-exp output, never while the
// stream captures a graph. Off by default: MIOpen's solver besides
// Composable Kernel's takes an S x S workspace, and which calls MIOpen
// runs faster has not been measured (MIOpen's godoc); it is tested against
// a stand-in for MIOpen only.
//
// Reference computes the same attention in float64 on the host, with every
// feature: the oracle of the tests, and the CPU path of candle/nn.
//
// Every argument is checked before any work is queued; a bad one is an
// *Error naming the call, the argument and what to do, matching errs.ErrShape,
// errs.ErrDType or errs.ErrArgument. Device pointers cannot be read on the host, so
// the lengths that size the launch (cumulative sequence lengths, cache
// lengths) are passed twice: on the host, where they are checked, and on
// the device, where the kernel reads them.
package flashattn
