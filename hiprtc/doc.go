// Package hiprtc compiles HIP C++ source at run time into a code object for
// a GPU: an AMDGPU code object with ROCm's hipRTC, a CUBIN with NVIDIA's
// NVRTC on the NVIDIA platform, from the same source.
//
//	code, err := hiprtc.Compile(src, hiprtc.Options{Arch: "gfx942", NameExpressions: []string{"scale<float>"}})
//	mod, err := dev.LoadModule(code.Image)
//	fn, err := mod.Function(code.Symbol("scale<float>"))
//
// Options carry the target, defines, include paths, in-memory headers, the
// language standard and extra flags. A failed compile returns a
// *CompileError with the compiler's log, the options and the source name.
//
// Under NVRTC a small prelude stands in for hip/hip_runtime.h (thread and
// block index macros, fixed-width integer types, HIP's non-sync warp
// shuffles), hip/hip_fp16.h and hip/hip_bf16.h map to CUDA's headers, whose
// directory is found automatically; kernels use warpSize rather than
// assuming 32 or 64.
//
// The library loads on first use, following the HIP platform (package hip):
// libhiprtc.so.7 or .6 on AMD, libnvrtc.so.13 or .12 on NVIDIA.
package hiprtc
