package candle

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/internal/kernelcheck"
)

// Every kernel launches early (hip.LaunchConfig.EarlyLaunch), so every
// kernel must wait for the previous one before it touches memory (or,
// RG_WAITS_INSIDE, before it touches memory a kernel may write).
func TestEveryKernelWaitsFirst(t *testing.T) {
	files, err := fs.Glob(kernelFiles, "kernels/*.hip")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	common, err := fs.ReadFile(kernelFiles, "kernels/common.h")
	require.NoError(t, err)
	kernels, marked := 0, 0
	for _, f := range files {
		src, err := fs.ReadFile(kernelFiles, f)
		require.NoError(t, err)
		n, missing := kernelcheck.NotWaiting(string(src), []string{"RG_GRID_WAIT();", "RG_WAITS_INSIDE();"}, string(common))
		assert.Positive(t, n, "%s: no kernel found", f)
		assert.Empty(t, missing, "%s: kernels whose first statement is neither RG_GRID_WAIT() nor RG_WAITS_INSIDE()", f)
		m, missing := kernelcheck.NotWaitingInside(string(src), "RG_WAITS_INSIDE();", "RG_GRID_WAIT();")
		assert.Empty(t, missing, "%s: kernels marked RG_WAITS_INSIDE whose device function never calls RG_GRID_WAIT", f)
		kernels, marked = kernels+n, marked+m
	}
	assert.GreaterOrEqual(t, kernels, 44, "kernel definitions found in the sources")
	assert.Equal(t, 4, marked, "qmatvec8k4's four kernels wait inside")
}

// The kernels count a warp's lanes in RG_WARP (common.h), a constant on
// NVIDIA, not in warpSize, which NVRTC does not know: a loop over lanes
// in warpSize stays a loop there, a division by it a division.
func TestKernelsUseRGWarp(t *testing.T) {
	files, err := fs.Glob(kernelFiles, "kernels/*")
	require.NoError(t, err)
	require.Contains(t, files, "kernels/common.h")
	require.Greater(t, len(files), 10, "the kernel sources")
	word := regexp.MustCompile(`\bwarpSize\b`)
	defined := false
	for _, f := range files {
		src, err := fs.ReadFile(kernelFiles, f)
		require.NoError(t, err)
		for i, line := range strings.Split(string(src), "\n") {
			code, _, _ := strings.Cut(line, "//")
			definition := f == "kernels/common.h" && strings.HasPrefix(strings.TrimSpace(code), "#define RG_WARP")
			defined = defined || definition
			if word.MatchString(code) && !definition {
				t.Errorf("%s:%d: warpSize outside RG_WARP's definition: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
	assert.True(t, defined, "common.h defines RG_WARP")
}

// The table holds each kernel once, as many a module as its source
// instantiates (the tier-1 tests check the names against the code
// objects).
func TestKernelTable(t *testing.T) {
	count := map[family]int{}
	seen := map[string]bool{}
	for _, k := range launchable {
		assert.NotEmpty(t, k.name)
		assert.False(t, seen[k.name], "%s twice", k.name)
		seen[k.name] = true
		count[k.fam]++
	}
	assert.Equal(t, map[family]int{famUnary: 124, famBinary: 84, famCast: 49, famFill: 19, famCopy: 12, famWhere: 12,
		famIndex: 69, famReduce: 35, famNN: 41, famSort: 14, famSample: 15, famQuant: 127}, count)
	assert.Equal(t, kernel{famSample, "sample_prev"}, kernelNames.samplePrev)
	assert.Equal(t, kernel{famSample, "sample_bias"}, kernelNames.sampleBias)
	assert.Equal(t, kernel{famSample, "sample_scale"}, kernelNames.sampleScale)
	assert.Equal(t, kernel{famQuant, "qmatvec8_q4_k_bf16"}, quantKernel(qMatvec8, GGMLQ4_K, BF16))
	assert.Zero(t, quantKernel(qMatvec, GGMLQ4_K, BF16), "the 8-bit product serves Q4_K with BF16 x")
	assert.Zero(t, kernelNames.unary[opExp][I64], "exp takes floats")
}

// A launch takes a kernel, and only newKernelTable makes one (the zero
// kernel aside), recording it in launchable: so launchable is every
// kernel an op can launch, and the tier-1 check of the code objects
// against it covers every launch.
func TestOnlyTheTableMakesKernels(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	if len(files) == 0 {
		t.Skip("tier 0: reads candle's Go files (this binary runs away from them)")
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		checked++
		for _, d := range f.Decls {
			fn, _ := d.(*ast.FuncDecl)
			ast.Inspect(d, func(n ast.Node) bool {
				lit, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				if id, ok := lit.Type.(*ast.Ident); ok && id.Name == "kernel" && len(lit.Elts) > 0 &&
					(fn == nil || fn.Name.Name != "newKernelTable") {
					t.Errorf("%s: a kernel made outside newKernelTable: launchable would not list it", fset.Position(lit.Pos()))
				}
				return true
			})
		}
	}
	assert.Greater(t, checked, 30, "candle's Go files")
}
