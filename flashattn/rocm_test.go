package flashattn

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
	"github.com/rocm-go/rocm/internal/testenv"
)

// rocmTargets are the architectures tier 1 compiles the kernels for.
var rocmTargets = []string{"gfx90a", "gfx942", "gfx1100", "gfx1201"}

// TestROCmCompilesEveryKernel compiles the kernels with the real hipRTC
// for each target, in a fresh cache, and checks that the code object holds
// exactly the kernels the Go side launches: attn_mfma on gfx90a and
// gfx942, attn_wmma on gfx1100 and gfx1201, and that those, and no other
// kernel, hold the matrix instructions of their arch (matrixOps).
func TestROCmCompilesEveryKernel(t *testing.T) {
	err := hiprtc.Load(hiprtc.WithPlatform(hip.PlatformAMD))
	testenv.Need(t, 1, "ROCm's hipRTC (libhiprtc)", err)
	defer hiprtc.Unload()
	c, err := hiprtc.NewCache(t.TempDir())
	require.NoError(t, err)
	m := newModule(c)
	for _, arch := range rocmTargets {
		start := time.Now()
		code, err := m.Compile(arch)
		require.NoError(t, err, arch)
		t.Logf("%s for %s: %v, %d bytes", moduleName, arch, time.Since(start).Round(time.Millisecond), len(code.Image))
		if code.Log != "" {
			t.Logf("compiler log: %s", code.Log)
		}
		syms, err := hiprtc.KernelSymbols(code.Image)
		require.NoError(t, err)
		assert.ElementsMatch(t, kernelNames(arch), syms, "%s: the kernels are exactly those the Go side names", arch)
		mc := matrixBackend(arch)
		require.NotZero(t, mc, arch)
		for _, name := range syms {
			ops, err := matrixOps(code.Image, arch, name)
			require.NoError(t, err)
			if !strings.HasPrefix(name, "attn_mfma_") && !strings.HasPrefix(name, "attn_wmma_") {
				assert.Empty(t, ops, "%s %s: a kernel without matrix cores", arch, name)
				continue
			}
			// MFMA 32×32×8 up to head dim 128, 16×16×16 at 256; WMMA
			// 16×16×16; of the kernel's dtype.
			want := map[Backend]string{MFMA: "v_mfma_f32_32x32x8", WMMA: "v_wmma_f32_16x16x16"}[mc]
			if mc == MFMA && strings.HasSuffix(name, "_d256") {
				want = "v_mfma_f32_16x16x16"
			}
			want += "_" + strings.Split(name, "_")[2]
			assert.NotZero(t, ops[want], "%s %s: %s in %v", arch, name, want, ops)
			assert.Len(t, ops, 1, "%s %s: one kind of matrix instruction: %v", arch, name, ops)
			if strings.HasSuffix(name, "_d128") {
				t.Logf("%s %s: %v", arch, name, ops)
			}
		}
	}
}

// matrixOpcodes are the matrix instructions of the kernels by arch, as
// the bytes 2 and 3 of their first dword (LLVM's AMDGPU MC encodings:
// VOP3P-MAI 0xd3 on gfx9 with the opcode in byte 2, VOP3P 0xcc on gfx11
// and gfx12).
var matrixOpcodes = map[string]map[[2]byte]string{
	"gfx90a": {{0xcc, 0xd3}: "v_mfma_f32_32x32x8_f16", {0xcd, 0xd3}: "v_mfma_f32_16x16x16_f16",
		{0xe6, 0xd3}: "v_mfma_f32_32x32x8_bf16", {0xe7, 0xd3}: "v_mfma_f32_16x16x16_bf16"},
	"gfx942": {{0xcc, 0xd3}: "v_mfma_f32_32x32x8_f16", {0xcd, 0xd3}: "v_mfma_f32_16x16x16_f16",
		{0xe0, 0xd3}: "v_mfma_f32_32x32x8_bf16", {0xe1, 0xd3}: "v_mfma_f32_16x16x16_bf16"},
	"gfx1100": {{0x40, 0xcc}: "v_wmma_f32_16x16x16_f16", {0x41, 0xcc}: "v_wmma_f32_16x16x16_bf16"},
	"gfx1201": {{0x40, 0xcc}: "v_wmma_f32_16x16x16_f16", {0x41, 0xcc}: "v_wmma_f32_16x16x16_bf16"},
}

// matrixOps counts the matrix instructions of arch in kernel's code in a
// code object: each dword of the function whose top bytes match
// matrixOpcodes (a scan, not a disassembly: tier 1 has no llvm-objdump;
// the kernels without matrix cores having none checks it).
func matrixOps(image []byte, arch, kernel string) (map[string]int, error) {
	ops, ok := matrixOpcodes[arch]
	if !ok {
		return nil, fmt.Errorf("no opcodes for %s", arch)
	}
	f, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		return nil, err
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, err
	}
	for _, s := range syms {
		if s.Name != kernel || elf.ST_TYPE(s.Info) != elf.STT_FUNC {
			continue
		}
		if int(s.Section) >= len(f.Sections) {
			return nil, fmt.Errorf("%s: section %d", kernel, s.Section)
		}
		sec := f.Sections[s.Section]
		data, err := sec.Data()
		if err != nil {
			return nil, err
		}
		lo := s.Value - sec.Addr
		if lo+s.Size > uint64(len(data)) || s.Size%4 != 0 {
			return nil, fmt.Errorf("%s: code at %#x+%d outside %s", kernel, s.Value, s.Size, sec.Name)
		}
		found := map[string]int{}
		code := data[lo : lo+s.Size]
		for x := 0; x+4 <= len(code); x += 4 {
			w := binary.LittleEndian.Uint32(code[x:])
			if name, ok := ops[[2]byte{byte(w >> 16), byte(w >> 24)}]; ok {
				found[name]++
			}
		}
		return found, nil
	}
	return nil, fmt.Errorf("no function symbol %s", kernel)
}

// TestROCmTypeChecksNVIDIAKernels compiles the NVIDIA-only families
// (mma.hip's attn_mma and attn_mmadec under the sm_80 guard, wgmma.hip's
// attn_wgmma under sm_90a's) with hipRTC for gfx942, their inline PTX
// taken out: this checks their C++ (types, templates, every
// instantiation) with ROCm's compiler, as TestNVRTCCompilesEveryKernel
// does with NVRTC. The source gets static_asserts of the Go side's tiles
// (tileAsserts), so that a shared-memory size the launch passes and the
// kernel's own cannot part: a launch with less than the kernel uses reads
// and writes past it.
func TestROCmTypeChecksNVIDIAKernels(t *testing.T) {
	err := hiprtc.Load(hiprtc.WithPlatform(hip.PlatformAMD))
	testenv.Need(t, 1, "ROCm's hipRTC (libhiprtc)", err)
	defer hiprtc.Unload()
	m := newModule(nil)
	const guard = "#if defined(__HIP_PLATFORM_NVIDIA__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800"
	require.Contains(t, m.Options.Headers["mma.hip"], guard)
	const wgmmaGuard = "#if defined(__CUDA_ARCH_FEAT_SM90_ALL)"
	require.Contains(t, m.Options.Headers["wgmma.hip"], wgmmaGuard)
	asm := regexp.MustCompile(`(?s)asm( volatile)?\(".*?\);`)
	headers := map[string]string{}
	for name, src := range m.Options.Headers {
		src = strings.Replace(src, guard, "#if 1", 1)
		src = strings.Replace(src, wgmmaGuard, "#if 1", 1)
		headers[name] = asm.ReplaceAllString(src, ";")
	}
	// The other families are compiled by TestROCmCompilesEveryKernel.
	src := "#include \"mma.hip\"\n#include \"wgmma.hip\"\n" + tileAsserts()
	code, err := hiprtc.Compile(src, hiprtc.Options{Arch: "gfx942", Std: "c++17", Name: "attention-nvidia.hip", Headers: headers})
	require.NoError(t, err)
	syms, err := hiprtc.KernelSymbols(code.Image)
	require.NoError(t, err)
	var want []string
	for _, s := range kernelNames("sm_90a") {
		if strings.HasPrefix(s, "attn_mma_") || strings.HasPrefix(s, "attn_mmadec_") || strings.HasPrefix(s, "attn_wgmma_") {
			want = append(want, s)
		}
	}
	assert.Len(t, want, 2*(8+6+2), "attn_mma and _pad, attn_mmadec and _pad, attn_wgmma; f16 and bf16")
	assert.ElementsMatch(t, want, syms)
}

// tileAsserts is C++ that fails to compile unless the tiles that package
// flashattn sizes the NVIDIA kernels' launches by (block, keys a tile,
// threads, dynamic shared memory) are the kernels': MmaTiles for
// attn_mma and attn_mmadec, WgTiles for attn_wgmma; and unless the
// launches that attn_mmadec merges itself (fuseSplits, fuseOutputs) fit
// what its merge holds (FA_MERGE_SPLITS, FA_MERGE_OUT a lane of a warp).
func tileAsserts() string {
	var b strings.Builder
	fmt.Fprintf(&b, "static_assert(FA_MERGE_SPLITS == %[1]d && FA_MERGE_OUT * 32 == %[2]d, \"fuseSplits %[1]d, fuseOutputs %[2]d\");\n", fuseSplits, fuseOutputs)
	fmt.Fprintf(&b, "static_assert(FA_DEC_WARPS == %[1]d, \"mmaDecWarps %[1]d\");\n", mmaDecWarps)
	check := func(tiles, fn string, d, bm, bn, nthreads, smem int) {
		fmt.Fprintf(&b, "static_assert(%[1]s::BM == %[2]d && %[1]s::BN == %[3]d && %[1]s::THREADS == %[4]d && %[1]s::SMEM == %[5]d, \"%[6]s(%[7]d): BM %[2]d, BN %[3]d, THREADS %[4]d, SMEM %[5]d\");\n",
			tiles, bm, bn, nthreads, smem, fn, d)
	}
	for _, d := range buckets {
		bm, bn, nt, smem := mmaTiles(d)
		check(fmt.Sprintf("MmaTiles<%d>", d), "mmaTiles", d, bm, bn, nt, smem)
		if d <= mmaDecMaxD {
			bm, bn, nt, smem := mmaDecTiles(d)
			check(fmt.Sprintf("MmaTiles<%d, %d>", d, mmaDecWarps), "mmaDecTiles", d, bm, bn, nt, smem)
		}
		if wgmmaDim(d) {
			bm, bn, nt, smem := wgmmaTiles(d)
			check(fmt.Sprintf("WgTiles<%d>", d), "wgmmaTiles", d, bm, bn, nt, smem)
		}
	}
	return b.String()
}
