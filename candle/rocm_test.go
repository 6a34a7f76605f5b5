package candle

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
	"github.com/rocm-go/rocm/internal/testenv"
)

// rocmTargets are the architectures tier 1 compiles every kernel for.
var rocmTargets = []string{"gfx90a", "gfx942", "gfx1100", "gfx1201"}

// TestROCmCompilesEveryKernel compiles every module with the real hipRTC
// for each target, in a fresh cache, and checks that each code object
// holds exactly the kernels the Go side can launch.
func TestROCmCompilesEveryKernel(t *testing.T) {
	err := hiprtc.Load(hiprtc.WithPlatform(hip.PlatformAMD))
	testenv.Need(t, 1, "ROCm's hipRTC (libhiprtc)", err)
	defer hiprtc.Unload()
	compileEveryKernel(t, rocmTargets, func(m *hiprtc.Kernels, arch string, image []byte, syms []string) {
		if m.Name == "quant.hip" {
			checkDotProducts(t, arch, image, syms)
		}
	})
}

// compileEveryKernel compiles every module for each of archs with the
// loaded compiler, in a fresh cache, and checks that each code object
// holds exactly the kernels the Go side can launch (launchable); check,
// when set, looks further at each.
func compileEveryKernel(t *testing.T, archs []string, check func(m *hiprtc.Kernels, arch string, image []byte, syms []string)) {
	t.Helper()
	c, err := hiprtc.NewCache(t.TempDir())
	require.NoError(t, err)
	modules := KernelModules(c)
	want := map[string][]string{}
	for _, k := range launchable {
		name := modules[k.fam].Name
		want[name] = append(want[name], k.name)
	}
	start := time.Now()
	for _, m := range modules {
		require.NotEmpty(t, want[m.Name], m.Name)
		for _, arch := range archs {
			begin := time.Now()
			code, err := m.Compile(arch)
			require.NoError(t, err, "%s for %s", m.Name, arch)
			t.Logf("%s for %s: %v, %d bytes", m.Name, arch, time.Since(begin).Round(time.Millisecond), len(code.Image))
			syms, err := hiprtc.KernelSymbols(code.Image)
			require.NoError(t, err)
			assert.ElementsMatch(t, want[m.Name], syms, "%s for %s: the kernels are exactly those the Go side can launch", m.Name, arch)
			if check != nil {
				check(m, arch, code.Image, syms)
			}
		}
	}
	t.Logf("%d modules for %d targets in %v", len(modules), len(archs), time.Since(start).Round(time.Millisecond))
}

// checkDotProducts checks that the 8-bit matrix-vector kernels (qmatvec8_,
// qmatvec8w_, qmatvec8s_, and qmatvec8k4's four) multiply on the arch's 4-byte dot product instruction, not
// the portable fallback, and that the float ones (qmatvec_) have none: gfx90a and
// gfx942 run __builtin_amdgcn_sdot4 as v_dot4c_i32_i8 (VOP2, opcode 0x39:
// the accumulator in place), gfx11 and gfx12 __builtin_amdgcn_sudot4 as
// v_dot4_i32_iu8 (VOP3P, 0xcc and opcode 0x16 in the top bytes). A scan of
// the function's dwords, not a disassembly (tier 1 has no llvm-objdump):
// the float kernels' having none checks it.
func checkDotProducts(t *testing.T, arch string, image []byte, syms []string) {
	t.Helper()
	isDot := func(w uint32) bool {
		if arch[:4] == "gfx9" {
			return w>>31 == 0 && w>>25&0x3f == 0x39
		}
		return w>>24 == 0xcc && w>>16&0x7f == 0x16
	}
	f, err := elf.NewFile(bytes.NewReader(image))
	require.NoError(t, err)
	funcs, err := f.Symbols()
	require.NoError(t, err)
	checked := 0
	for _, s := range funcs {
		i8, float := strings.HasPrefix(s.Name, "qmatvec8"), strings.HasPrefix(s.Name, "qmatvec_")
		if (!i8 && !float) || elf.ST_TYPE(s.Info) != elf.STT_FUNC || int(s.Section) >= len(f.Sections) {
			continue
		}
		sec := f.Sections[s.Section]
		data, err := sec.Data()
		require.NoError(t, err)
		lo := s.Value - sec.Addr
		require.LessOrEqual(t, lo+s.Size, uint64(len(data)), "%s %s: code outside %s", arch, s.Name, sec.Name)
		dots := 0
		for x := lo; x+4 <= lo+s.Size; x += 4 {
			if isDot(binary.LittleEndian.Uint32(data[x:])) {
				dots++
			}
		}
		if i8 {
			// Eight a chunk for each of the four rows (the wide kernel's
			// eight), the loop unrolled twice.
			want := 64
			switch {
			case strings.HasPrefix(s.Name, "qmatvec8w_"):
				want = 128
			case strings.HasPrefix(s.Name, "qmatvec8s_"):
				want = 16 // a chunk at a time, the loop unrolled twice
			case strings.HasPrefix(s.Name, "qmatvec8k4_"), strings.HasPrefix(s.Name, "qmatvec8k4q_"):
				want = 16 // qmatvec8k4: sixteen a pair of chunks, a row a warp
			case strings.HasPrefix(s.Name, "qmatvec8k4x2_"), strings.HasPrefix(s.Name, "qmatvec8k4qx2_"):
				want = 32
			}
			assert.GreaterOrEqual(t, dots, want, "%s %s: dot product instructions", arch, s.Name)
		} else {
			assert.Zero(t, dots, "%s %s: a float kernel with dot product instructions", arch, s.Name)
		}
		checked++
	}
	assert.Equal(t, len(slices.DeleteFunc(slices.Clone(syms), func(n string) bool {
		return !strings.HasPrefix(n, "qmatvec8") && !strings.HasPrefix(n, "qmatvec_")
	})), checked, "%s: every matrix-vector kernel checked", arch)
}
