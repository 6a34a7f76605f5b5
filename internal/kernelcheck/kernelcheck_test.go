package kernelcheck

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNotWaiting(t *testing.T) {
	src := `#define K extern "C" __global__ void
#define K2(T) extern "C" __global__ __launch_bounds__(256) void
// K comment(x) { no }
K good(int n) { W(); body(n); }
K bad(int n) { body(n); }
K2(float) good2(int n) {
	W();
}
#define DEF(T) \
	extern "C" __global__ void def_##T(int n) { \
		W(); body(n);                            \
	}                                            \
	extern "C" __global__ void undef_##T(int n) { body(n); }
extern "C" __global__ void plain(int n) { body(n); }
`
	kernels, missing := NotWaiting(src, []string{"W();"})
	assert.Equal(t, 6, kernels, "good, bad, good2, def_, undef_, plain")
	assert.Equal(t, []string{
		"K bad(int n)",
		`__global__ void undef_##T(int n)`,
		`__global__ void plain(int n)`,
	}, missing)
	// A kernel macro of an included header.
	kernels, missing = NotWaiting("H good() { W(); }\nH bad(int n) { x(); }\nH later() { L(); }\n", []string{"W();", "L();"}, "#define H extern \"C\" __global__ void\n")
	assert.Equal(t, 3, kernels)
	assert.Equal(t, []string{"H bad(int n)"}, missing)
}

func TestNotWaitingInside(t *testing.T) {
	src := `template <class T> __device__ __forceinline__ void waits(int n) {
	if (n) { load(); }
	W();
}
__device__ void idle(int n) { body(n); }
K good(int n) { L(); waits<float>(n); }
K bad(int n) { L(); idle(n); }
K unknown(int n) { L(); elsewhere(n); }
`
	marked, missing := NotWaitingInside(src, "L();", "W();")
	assert.Equal(t, 3, marked)
	assert.Equal(t, []string{"line 7: idle", "line 8: elsewhere"}, missing)
}

func TestIncludes(t *testing.T) {
	headers := map[string]string{
		"common.h": "#pragma once\n#include <hip/hip_runtime.h>\n",
		"a.hip":    "#pragma once\n#include \"common.h\"\n",
		"b.hip":    "  #  include \"a.hip\"\n#include \"gone.h\"\n// #include \"commented.h\"\n",
		"stray.h":  "",
	}
	reached, missing := Includes("#include \"b.hip\"\n#include \"common.h\"\n#include \"nowhere.h\"\n", headers)
	assert.Equal(t, []string{"a.hip", "b.hip", "common.h"}, reached, "stray.h is never included; system headers are not followed")
	assert.Equal(t, []string{": nowhere.h", "b.hip: gone.h"}, missing)
	reached, missing = Includes("", nil)
	assert.Empty(t, reached)
	assert.Empty(t, missing)
}
