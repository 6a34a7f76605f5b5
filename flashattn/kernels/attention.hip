// flashattn's attention kernels, one module: this file includes each
// family's file, and every family includes common.h, what they all share
// (Params, the flags, the grid wait, the small helpers). One source for
// hipRTC (AMD) and NVRTC (NVIDIA, through package hiprtc's prelude); the
// matrix-core families compile only for the archs that have them (their
// arch macros guard them), so one module serves every device.
//
//   fwd.hip      attn_fwd_<dt>_d<DMAX>: the portable forward pass for head
//                dims up to DMAX (32, 64, 128, 256): dense,
//                variable-length or paged K/V, with split-KV partials
//                when splits > 1
//   combine.hip  attn_combine_<dt>: merges the split-KV partials into the
//                output
//   decode.hip   attn_decode_<dt>_d<DMAX>_r<RM>: flash-decoding, the keys
//                spread over a block's threads, for the few rows of a
//                decode step (RM 1 or 4 rows a block);
//                attn_decode_<dt>_d<DMAX>_paged: the same, four rows,
//                F16/BF16, for an LLM's decode step: paged, nothing masked
//   mma.hip      attn_mma_<dt>_d<DMAX>: F16/BF16 on matrix cores where the
//                arch has them (NVIDIA sm_80+: mma.sync); absent elsewhere;
//                attn_mmadec_<dt>_d<DMAX>: the same for a decode step's few
//                rows: four warps over each tile's keys, split-KV (head
//                dims up to 128), merging its own splits where that is
//                small (FA_FUSE)
//   wgmma.hip    attn_wgmma_<dt>_d<DMAX>: attn_mma on Hopper's warpgroup
//                instructions (sm_90a only: wgmma.mma_async), head dims 64
//                and 128
//   amd.hip      attn_mfma_<dt>_d<DMAX>, attn_wmma_<dt>_d<DMAX>: the same
//                on AMD CDNA (gfx90a, gfx942, gfx950) and RDNA3/4 (gfx11,
//                gfx12); absent elsewhere
#include "fwd.hip"
#include "combine.hip"
#include "decode.hip"
#include "mma.hip"
#include "wgmma.hip"
#include "amd.hip"
