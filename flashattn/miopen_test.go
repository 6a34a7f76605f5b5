package flashattn

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
	"github.com/rocm-go/rocm/miopen"
)

// The tests in this file run in tier 0 against package hip's fake runtime
// and package miopen's stand-in for MIOpen, which finds
// $ROCM_GO_FAKE_MHA_SOLUTIONS solutions for an attention problem and logs
// the operands it is run on: which calls reach MIOpen's attention, as
// what problem, and which stay on rocm-go's kernels.

// useFakeMIOpen loads the fakes with the CK shim off and returns a handle
// on device 0 (gfx942) and the log of the stand-in.
func useFakeMIOpen(t *testing.T, solutions string) (*Handle, *ckEnv) {
	t.Helper()
	dir := buildCKFakes(t)
	lib := filepath.Join(t.TempDir(), "libMIOpen.so.1")
	if out, err := exec.Command("cc", "-shared", "-fPIC", "-O1", "-w", "-o", lib, "../miopen/testdata/fakemiopen.c").CombinedOutput(); err != nil {
		testenv.FakeBuildFailed(t, "package miopen's stand-in for MIOpen", &exec.ExitError{Stderr: out})
	}
	if hip.LoadedPlatform() != hip.PlatformNone {
		t.Skip("tier 0: HIP is loaded already: the fakes need a process where it is not")
	}
	e := &ckEnv{log: filepath.Join(t.TempDir(), "miopen.log")}
	t.Setenv("ROCM_GO_FAKE_LOG", e.log)
	t.Setenv("ROCM_GO_FAKE_MHA_SOLUTIONS", solutions)
	t.Setenv(CKLibraryEnv, "off")
	if _, set := os.LookupEnv(MIOpenMHAEnv); !set {
		t.Setenv(MIOpenMHAEnv, "on")
	}
	ckState.Reset()
	t.Cleanup(ckState.Reset)
	require.NoError(t, hip.Load(hip.WithPlatform(hip.PlatformAMD), hip.WithLibraryPaths(filepath.Join(dir, "libamdhip64.so.6"))))
	t.Cleanup(func() { assert.NoError(t, hip.Unload()) })
	require.NoError(t, miopen.Load(miopen.WithLibraryPaths(lib)))
	t.Cleanup(func() { assert.NoError(t, miopen.Unload()) })
	d, err := hip.GetDevice(0)
	require.NoError(t, err)
	return handleOn(t, d), e
}

func TestMIOpenRunsWhatItCovers(t *testing.T) {
	h, e := useFakeMIOpen(t, "1")
	// q, k, v and out (2, 40, 8, 64), f16, dense.
	q, k, v, out := operands(2, 40, 40, 8, 8, 64)
	b, err := h.Forward(q, k, v, out, Params{})
	require.NoError(t, err)
	assert.Equal(t, MIOpen, b)
	assert.Equal(t, "miopen", b.String())
	log := e.requests(t)
	// BSHD as MIOpen's N x H x S x D: the strides of the same memory.
	assert.Equal(t, []string{
		"miopenSetProblemTensorDescriptor Q type=0 dims=2x8x40x64 strides=20480,64,512,1",
		"miopenSetProblemTensorDescriptor K type=0 dims=2x8x40x64 strides=20480,64,512,1",
		"miopenSetProblemTensorDescriptor V type=0 dims=2x8x40x64 strides=20480,64,512,1",
		"miopenSetProblemTensorDescriptor O type=0 dims=2x8x40x64 strides=20480,64,512,1",
	}, testenv.Logged(log, "miopenSetProblemTensorDescriptor"))
	require.Len(t, testenv.Logged(log, "miopenFindSolutions"), 1)
	run := testenv.Logged(log, "miopenRunSolution")
	require.Len(t, run, 1)
	assert.Equal(t, "0.125", field(t, run[0], "scale"), "1/sqrt(64)")
	for name, x := range map[string]Tensor{"q": q, "k": k, "v": v, "o": out} {
		assert.Equal(t, hexPtr(x.Ptr), field(t, run[0], name), name)
	}
	assert.Equal(t, "0", field(t, run[0], "mask"))

	// The same shape again: the problem is kept, MIOpen runs at once.
	b, err = h.Forward(q, k, v, out, Params{})
	require.NoError(t, err)
	assert.Equal(t, MIOpen, b)
	log = e.requests(t)
	assert.Empty(t, testenv.Logged(log, "miopenFindSolutions"))
	assert.Len(t, testenv.Logged(log, "miopenRunSolution"), 1)

	// Causal with as many queries as keys (top-left is bottom-right),
	// BF16, another scale, q strided: a problem of its own.
	q, k, v, out = operands(1, 40, 40, 4, 4, 128)
	for _, x := range []*Tensor{&q, &k, &v, &out} {
		x.DType = BF16
	}
	q.Stride = [4]int{40 * 4 * 256, 4 * 256, 256, 1}
	b, err = h.Forward(q, k, v, out, Params{Causal: true, Scale: 0.5})
	require.NoError(t, err)
	assert.Equal(t, MIOpen, b)
	log = e.requests(t)
	assert.Contains(t, log, "miopenSetProblemTensorDescriptor Q type=5 dims=1x4x40x128 strides=40960,256,1024,1")
	run = testenv.Logged(log, "miopenRunSolution")
	require.Len(t, run, 1)
	assert.Equal(t, "1", field(t, run[0], "mask"))
	assert.Equal(t, "0.5", field(t, run[0], "scale"))
}

func TestMIOpenDeclines(t *testing.T) {
	h, e := useFakeMIOpen(t, "1")
	q, k, v, out := operands(2, 40, 40, 8, 8, 64)
	for _, c := range []struct {
		name string
		edit func(q, k, v, out *Tensor, p *Params)
		why  string
	}{
		{"GQA", func(q, k, v, out *Tensor, p *Params) { k.Shape[2], v.Shape[2] = 2, 2 }, "as many KV heads as query heads"},
		{"a window", func(q, k, v, out *Tensor, p *Params) { p.Window = &Window{Left: 8, Right: 0} }, "a window"},
		{"a right window", func(q, k, v, out *Tensor, p *Params) { p.Window = &Window{Left: -1, Right: 3} }, "a window"},
		{"ALiBi", func(q, k, v, out *Tensor, p *Params) { p.AlibiSlopes = make([]float32, 8) }, "ALiBi"},
		{"soft-capping", func(q, k, v, out *Tensor, p *Params) { p.SoftCap = 30 }, "soft-capping"},
		{"log-sum-exp", func(q, k, v, out *Tensor, p *Params) { p.LSE = dev + 7<<30 }, "log-sum-exp"},
		{"fewer queries than keys", func(q, k, v, out *Tensor, p *Params) { q.Shape[1], out.Shape[1] = 33, 33 }, "as many queries as keys"},
		{"causal, fewer queries than keys", func(q, k, v, out *Tensor, p *Params) { q.Shape[1], out.Shape[1], p.Causal = 33, 33, true }, "as many queries as keys"},
		{"F32", func(q, k, v, out *Tensor, p *Params) {
			for _, x := range []*Tensor{q, k, v, out} {
				x.DType = F32
			}
		}, "F16 and BF16"},
		{"a decode step", func(q, k, v, out *Tensor, p *Params) { q.Shape[1], out.Shape[1] = 1, 1 }, "FlashDecoding"},
	} {
		q, k, v, out := q, k, v, out
		var p Params
		c.edit(&q, &k, &v, &out, &p)
		pr, pl := planned(t, h, q, k, v, out, &p)
		assert.Contains(t, declined(t, h, pr, pl), c.why, c.name)
	}
	assert.Empty(t, e.requests(t), "nothing reached MIOpen")

	// Paged caches stay on rocm-go's kernels.
	kc := Contiguous(dev+1<<30, F16, 16, 16, 8, 64)
	pq, _, _, pout := operands(2, 3, 0, 8, 8, 64)
	pr, err := pagedProblem("D", pq, &PagedKV{K: kc, V: kc, BlockTable: dev + 4096, BlockTableStride: 4, SeqLens: []int32{5, 9}, DevSeqLens: dev + 8192}, pout)
	require.NoError(t, err)
	pl, err := newPlan("D", &pr, &Params{}, h.target)
	require.NoError(t, err)
	assert.Contains(t, declined(t, h, pr, pl), "FlashDecoding", "a paged decode step")
}

// mhaCall is a dense MHA call that MIOpen's attention covers, planned for
// h: q, k, v and out (2, 40, 8, 64), F16.
func mhaCall(t *testing.T, h *Handle) (problem, plan) {
	t.Helper()
	q, k, v, out := operands(2, 40, 40, 8, 8, 64)
	return planned(t, h, q, k, v, out, &Params{})
}

// declined offers a planned call to MIOpen, which must decline it, and
// returns why.
func declined(t *testing.T, h *Handle, pr problem, pl plan) string {
	t.Helper()
	ran, why, err := h.tryMIOpen("F", &pr, &pl)
	require.NoError(t, err)
	assert.False(t, ran)
	return why
}

func TestMIOpenWithoutSolutions(t *testing.T) {
	h, e := useFakeMIOpen(t, "")
	pr, pl := mhaCall(t, h)
	assert.Equal(t, "MIOpen has no solution for it on this GPU", declined(t, h, pr, pl))
	assert.Len(t, testenv.Logged(e.requests(t), "miopenFindSolutions"), 1)
	assert.Equal(t, "MIOpen has no solution for it on this GPU", declined(t, h, pr, pl), "remembered")
	assert.Empty(t, e.requests(t), "no second Find for the shape")
}

func TestMIOpenOffByDefault(t *testing.T) {
	for _, v := range []string{"", "off", "1"} {
		t.Run(v, func(t *testing.T) {
			t.Setenv(MIOpenMHAEnv, v)
			h, e := useFakeMIOpen(t, "1")
			pr, pl := mhaCall(t, h)
			assert.Contains(t, declined(t, h, pr, pl), MIOpenMHAEnv+" is not on")
			assert.Empty(t, e.requests(t))
		})
	}
}

func TestMIOpenNotWhileCapturing(t *testing.T) {
	h, e := useFakeMIOpen(t, "1")
	pr, pl := mhaCall(t, h)
	ran, _, err := h.tryMIOpen("F", &pr, &pl)
	require.NoError(t, err)
	require.True(t, ran, "found and run before the capture")
	e.requests(t)
	t.Setenv("ROCM_GO_FAKE_CAPTURING", "1")
	assert.Contains(t, declined(t, h, pr, pl), "captures a graph", "a captured call takes rocm-go's kernels, found or not")
	assert.Empty(t, e.requests(t))
}

func TestMIOpenBoundedShapes(t *testing.T) {
	h, e := useFakeMIOpen(t, "1")
	for n := 1; n <= mhaMaxProblems+1; n++ {
		q, k, v, out := operands(1, 16+n, 16+n, 2, 2, 64) // prefill: more rows than a decode step
		pr, pl := planned(t, h, q, k, v, out, &Params{})
		ran, why, err := h.tryMIOpen("F", &pr, &pl)
		require.NoError(t, err)
		if n <= mhaMaxProblems {
			assert.True(t, ran, "shape %d", n)
			continue
		}
		assert.False(t, ran)
		assert.Contains(t, why, "problems of 64 shapes already")
	}
	assert.Len(t, testenv.Logged(e.requests(t), "miopenFindSolutions"), mhaMaxProblems)
}
