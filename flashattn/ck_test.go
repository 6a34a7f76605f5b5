package flashattn

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/dl"
	"github.com/rocm-go/rocm/internal/testenv"

	"github.com/rocm-go/rocm/errs"
)

// The tests in this file run in tier 0 against the shim's real ABI code
// (ckshim/rocm_go_fmha.cpp) linked with testdata/fakeck.cpp in place of
// Composable Kernel, built with the C++ compiler, and package hip's fake
// runtime: loading, the version check, what the shim accepts and what
// falls back, the arguments as CK gets them, and errors.

var ckFakes struct {
	once sync.Once
	dir  string
	err  error
}

// buildCKFakes builds, once, dir/librocm_go_fmha.so (for gfx90a and
// gfx942), dir/old/librocm_go_fmha.so (ABI version 0) and
// dir/libamdhip64.so.6 (package hip's fake runtime).
func buildCKFakes(t *testing.T) string {
	t.Helper()
	ckFakes.once.Do(func() {
		dir, err := os.MkdirTemp("", "rocm-go-fakeck")
		if err != nil {
			ckFakes.err = err
			return
		}
		if err := os.Mkdir(filepath.Join(dir, "old"), 0o755); err != nil {
			ckFakes.err = err
			return
		}
		for _, b := range [][]string{
			{"c++", "-std=c++17", "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-Ickshim", `-DROCM_GO_FMHA_ARCHS="gfx90a;gfx942"`,
				"-o", filepath.Join(dir, "librocm_go_fmha.so"), "ckshim/rocm_go_fmha.cpp", "testdata/fakeck.cpp"},
			{"cc", "-shared", "-fPIC", "-o", filepath.Join(dir, "old", "librocm_go_fmha.so"), "testdata/fakeck_old.c"},
			{"cc", "-shared", "-fPIC", "-O1", "-w", "-o", filepath.Join(dir, "libamdhip64.so.6"), "../hip/testdata/fakehip.c"},
		} {
			if out, err := exec.Command(b[0], b[1:]...).CombinedOutput(); err != nil {
				ckFakes.err = fmt.Errorf("%s: %v\n%s", strings.Join(b, " "), err, out)
				return
			}
		}
		ckFakes.dir = dir
	})
	if ckFakes.err != nil {
		if _, err := exec.LookPath("c++"); err != nil {
			t.Skip("tier 0: needs a C++ compiler (c++) to build the CK shim's ABI code")
		}
		testenv.FakeBuildFailed(t, "the CK shim with a stand-in for CK", ckFakes.err)
	}
	return ckFakes.dir
}

func TestCKLoad(t *testing.T) {
	dir := buildCKFakes(t)
	ckState.Reset()
	t.Cleanup(ckState.Reset)

	require.NoError(t, LoadCK(dir))
	info, err := CKInfo()
	require.NoError(t, err)
	assert.Contains(t, info, filepath.Join(dir, ckSoname))
	assert.Contains(t, info, "fake CK for rocm-go's tests; targets gfx90a;gfx942")
	require.NoError(t, LoadCK(filepath.Join(dir, ckSoname)), "a second Load is counted")
	require.NoError(t, UnloadCK())
	require.NoError(t, UnloadCK())
	assert.ErrorContains(t, UnloadCK(), "UnloadCK: Unload without a matching Load")

	err = LoadCK(filepath.Join(dir, "old"))
	assert.ErrorIs(t, err, errs.ErrDevice)
	assert.ErrorContains(t, err, "has ABI version 0 and this flashattn 1: rebuild the shim")

	missing := filepath.Join(t.TempDir(), "nothing-here.so")
	err = LoadCK(missing)
	assert.ErrorIs(t, err, dl.ErrLibraryNotFound)
	assert.ErrorContains(t, err, missing)
	assert.ErrorContains(t, err, "scripts/build-ck-shim.sh")
	assert.ErrorContains(t, err, CKLibraryEnv)

	// A library without the probe symbol is not the shim.
	err = LoadCK(filepath.Join(dir, "libamdhip64.so.6"))
	assert.ErrorIs(t, err, dl.ErrSymbolNotFound)
	assert.ErrorContains(t, err, "rocm_go_fmha_abi_version")
}

func TestCKLibraryEnv(t *testing.T) {
	dir := buildCKFakes(t)
	ckState.Reset()
	t.Cleanup(ckState.Reset)

	t.Setenv(CKLibraryEnv, dir)
	info, err := CKInfo()
	require.NoError(t, err, "loaded on first use from the folder the variable names")
	assert.Contains(t, info, dir)
	ckState.Reset()

	t.Setenv(CKLibraryEnv, filepath.Join(dir, "old", ckSoname))
	require.NoError(t, LoadCK(dir), "explicit paths come first")
	require.NoError(t, UnloadCK())
	ckState.Reset()

	t.Setenv(CKLibraryEnv, "off")
	_, err = CKInfo()
	assert.ErrorContains(t, err, "the Composable Kernel shim is off (ROCM_GO_FMHA_LIBRARY=off)")
	assert.ErrorContains(t, LoadCK(), "off")
	assert.Nil(t, loadedCK(), "no HIP platform, no shim")
}

// ckEnv is package hip's fake runtime with the fake shim loaded: a handle
// on device 0 (gfx942) and one on device 1 (gfx1100), and the log of the
// requests that reached the stand-in for CK.
type ckEnv struct {
	h, h1 *Handle
	log   string
}

func useFakeCK(t *testing.T) *ckEnv {
	t.Helper()
	dir := buildCKFakes(t)
	if hip.LoadedPlatform() != hip.PlatformNone {
		t.Skip("tier 0: HIP is loaded already: the fakes need a process where it is not")
	}
	e := &ckEnv{log: filepath.Join(t.TempDir(), "ck.log")}
	t.Setenv("ROCM_GO_FAKE_LOG", e.log)
	t.Setenv(CKLibraryEnv, dir)
	ckState.Reset()
	t.Cleanup(ckState.Reset)
	require.NoError(t, hip.Load(hip.WithPlatform(hip.PlatformAMD), hip.WithLibraryPaths(filepath.Join(dir, "libamdhip64.so.6"))))
	t.Cleanup(func() { assert.NoError(t, hip.Unload()) })
	for i, h := range []**Handle{&e.h, &e.h1} {
		dev, err := hip.GetDevice(i)
		require.NoError(t, err)
		*h = handleOn(t, dev)
	}
	return e
}

// requests returns the requests CK got since the last call.
func (e *ckEnv) requests(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(e.log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	require.NoError(t, os.Remove(e.log))
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// field returns the value of key=value in a request line.
func field(t *testing.T, line, key string) string {
	t.Helper()
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s in %q", key, line)
	return ""
}

// planned is a dense call of h planned as Handle.Forward plans it, for
// tryCK.
func planned(t *testing.T, h *Handle, q, k, v, out Tensor, p *Params) (problem, plan) {
	t.Helper()
	pr, err := forwardProblem("F", q, k, v, out)
	require.NoError(t, err)
	pl, err := newPlan("F", &pr, p, h.target)
	require.NoError(t, err)
	return pr, pl
}

func hexPtr(p hip.DevicePtr) string { return fmt.Sprintf("%#x", uint64(p)) }

func TestCKRunsWhatItCovers(t *testing.T) {
	e := useFakeCK(t)
	// A dense batch: q (2, 33, 8, 64), k and v (2, 40, 2, 64), causal,
	// with the LSE.
	q, k, v, out := operands(2, 33, 40, 8, 2, 64)
	b, err := e.h.Forward(q, k, v, out, Params{Causal: true, LSE: dev + 5<<30})
	require.NoError(t, err)
	assert.Equal(t, CK, b)
	assert.Equal(t, "ck", b.String())
	reqs := e.requests(t)
	require.Len(t, reqs, 1)
	r := reqs[0]
	for key, want := range map[string]string{
		"bf16": "0", "group": "0", "mask": "1", "lse": "1", "alibi": "0",
		"q": hexPtr(q.Ptr), "k": hexPtr(k.Ptr), "v": hexPtr(v.Ptr), "o": hexPtr(out.Ptr), "lse_ptr": hexPtr(dev + 5<<30),
		"seqstart": "0,0", "batch": "2", "seqlen": "33,40", "max_q": "33", "hdim": "64", "heads": "8,2",
		"window": "-1,0", "scale": "0.125",
		"stride": "512,128,128,512", "nhead_stride": "64,64,64,64",
		"batch_stride": fmt.Sprintf("%d,%d,%d,%d", 33*512, 40*128, 40*128, 33*512), "lse_stride": fmt.Sprintf("33,%d", 8*33),
	} {
		assert.Equal(t, want, field(t, r, key), key)
	}
	assert.NotEqual(t, "(nil)", field(t, r, "stream"))

	// Windows: bounded on the left is CK's local mask; a window wider
	// than every sequence is no mask.
	for _, c := range []struct {
		p            Params
		mask, window string
	}{
		{Params{Window: &Window{Left: 16, Right: 0}}, "2", "16,0"},
		{Params{Window: &Window{Left: 16, Right: -1}}, "2", "16,-1"},
		{Params{Window: &Window{Left: -1, Right: 3}}, "1", "-1,3"},
		{Params{Window: &Window{Left: 1000, Right: 1000}}, "0", "-1,-1"},
		{Params{Window: &Window{Left: 4, Right: 9}, Causal: true}, "2", "4,0"},
		{Params{Scale: 0.5}, "0", "-1,-1"},
	} {
		b, err := e.h.Forward(q, k, v, out, c.p)
		require.NoError(t, err)
		require.Equal(t, CK, b)
		r := e.requests(t)[0]
		assert.Equal(t, c.mask, field(t, r, "mask"), "%+v", c.p)
		assert.Equal(t, c.window, field(t, r, "window"), "%+v", c.p)
		assert.Equal(t, "0", field(t, r, "lse"))
	}
	assert.Equal(t, "0.5", field(t, func() string {
		_, err := e.h.Forward(q, k, v, out, Params{Scale: 0.5})
		require.NoError(t, err)
		return e.requests(t)[0]
	}(), "scale"))

	// q, k and v sliced out of one fused (b, s, 3, h, d) projection of BF16:
	// their row strides are the fused row's.
	const s, h, d = 24, 4, 128
	row := 3 * h * d
	fused := func(i int) Tensor {
		return Tensor{Ptr: dev + hip.DevicePtr(i*h*d*2), DType: BF16, Shape: [4]int{2, s, h, d}, Stride: [4]int{s * row, row, d, 1}}
	}
	o := Contiguous(dev+3<<30, BF16, 2, s, h, d)
	b, err = e.h.Forward(fused(0), fused(1), fused(2), o, Params{})
	require.NoError(t, err)
	require.Equal(t, CK, b)
	r = e.requests(t)[0]
	assert.Equal(t, "1", field(t, r, "bf16"))
	assert.Equal(t, fmt.Sprintf("%d,%d,%d,%d", row, row, row, h*d), field(t, r, "stride"))
	assert.Equal(t, fmt.Sprintf("%d,%d,%d,%d", s*row, s*row, s*row, s*h*d), field(t, r, "batch_stride"))
	assert.Equal(t, hexPtr(dev+hip.DevicePtr(h*d*2)), field(t, r, "k"))

	// A call the shim runs allocates nothing of its own.
	var p Params
	pr, pl := planned(t, e.h, q, k, v, out, &p)
	assert.Zero(t, testing.AllocsPerRun(10, func() {
		if ran, _, err := e.h.tryCK("F", &pr, &p, &pl); !ran || err != nil {
			t.Errorf("tryCK: ran %v, %v", ran, err)
		}
	}))
	assert.Len(t, e.requests(t), 11)
}

func TestCKVarlen(t *testing.T) {
	e := useFakeCK(t)
	q, k, v, out := operands(1, 30, 50, 4, 4, 96)
	cuq, cuk := dev+6<<30, dev+7<<30
	vl := Varlen{CuSeqlensQ: []int32{0, 7, 7, 30}, CuSeqlensK: []int32{0, 20, 21, 50}, DevCuSeqlensQ: cuq, DevCuSeqlensK: cuk}
	b, err := e.h.ForwardVarlen(q, k, v, out, vl, Params{Causal: true, LSE: dev + 5<<30})
	require.NoError(t, err)
	assert.Equal(t, CK, b)
	r := e.requests(t)[0]
	for key, want := range map[string]string{
		"group": "1", "seqstart": hexPtr(cuq) + "," + hexPtr(cuk), "batch": "3", "seqlen": "30,50", "max_q": "23",
		"hdim": "96", "heads": "4,4", "batch_stride": "0,0,0,0", "lse_stride": "30,0", "mask": "1",
		"stride": "384,384,384,384",
	} {
		assert.Equal(t, want, field(t, r, key), key)
	}
}

func TestCKAlibi(t *testing.T) {
	e := useFakeCK(t)
	q, k, v, out := operands(1, 16, 16, 4, 2, 64)
	slopes := []float32{0.5, 0.25, 0.125, 0.0625}
	free0, _, err := e.h.Device().MemInfo()
	require.NoError(t, err)
	for range 2 {
		b, err := e.h.Forward(q, k, v, out, Params{AlibiSlopes: slopes})
		require.NoError(t, err)
		require.Equal(t, CK, b)
		r := e.requests(t)[0]
		assert.Equal(t, "1", field(t, r, "alibi"))
		assert.Equal(t, "0.5,0.25,0.125,0.0625", field(t, r, "slopes"), "the slopes on the device, as CK reads them")
	}
	// Causal with s_q = s_k and no LSE: CK's ALiBi is the same up to a
	// constant per row.
	b, err := e.h.Forward(q, k, v, out, Params{AlibiSlopes: slopes, Causal: true})
	require.NoError(t, err)
	require.Equal(t, CK, b)
	e.requests(t)
	assert.Len(t, e.h.alibi.bufs, 1, "one device copy per set of slopes")
	free1, _, err := e.h.Device().MemInfo()
	require.NoError(t, err)
	assert.Less(t, free1, free0)
	require.NoError(t, e.h.Close())
	free2, _, err := e.h.Device().MemInfo()
	require.NoError(t, err)
	assert.Equal(t, free0, free2, "Close frees the slopes")
}

// TestCKAlibiSets checks the bound on the sets of slopes a handle keeps:
// past maxSlopeSets a new set runs on the other backends, a kept set still
// runs on CK and allocates nothing more.
func TestCKAlibiSets(t *testing.T) {
	e := useFakeCK(t)
	q, k, v, out := operands(1, 16, 16, 4, 2, 64)
	set := func(i int) []float32 { return []float32{float32(i), 0.25, 0.125, 0.0625} }
	for i := range maxSlopeSets {
		b, err := e.h.Forward(q, k, v, out, Params{AlibiSlopes: set(i)})
		require.NoError(t, err)
		require.Equal(t, CK, b, "set %d", i)
		assert.Equal(t, fmt.Sprintf("%d,0.25,0.125,0.0625", i), field(t, e.requests(t)[0], "slopes"))
	}
	assert.Len(t, e.h.alibi.bufs, maxSlopeSets)

	p := Params{AlibiSlopes: set(maxSlopeSets)}
	pr, pl := planned(t, e.h, q, k, v, out, &p)
	ran, why, err := e.h.tryCK("F", &pr, &p, &pl)
	require.NoError(t, err)
	assert.False(t, ran)
	assert.Equal(t, "too many sets of ALiBi slopes on the handle", why)
	assert.Empty(t, e.requests(t))

	kept := set(3)
	ptr, err := e.h.alibi.device(e.h.Device(), kept)
	require.NoError(t, err)
	assert.NotZero(t, ptr)
	assert.Zero(t, testing.AllocsPerRun(10, func() {
		got, _ := e.h.alibi.device(e.h.Device(), kept)
		if got != ptr {
			t.Errorf("set 3 moved from %#x to %#x", uint64(ptr), uint64(got))
		}
	}), "a kept set allocates nothing")
	assert.Len(t, e.h.alibi.bufs, maxSlopeSets)
}

// TestCKFallsBack checks what the shim declines, and that nothing reached
// CK then: the handle runs its own kernels (runCK reports false).
func TestCKFallsBack(t *testing.T) {
	e := useFakeCK(t)
	for _, c := range []struct {
		name string
		h    func() *Handle
		edit func(q, k, v, out *Tensor, p *Params)
		why  string
	}{
		{"f32", nil, func(q, k, v, out *Tensor, p *Params) {
			q.DType, k.DType, v.DType, out.DType = F32, F32, F32, F32
		}, "dtype f32: CK's fmha_fwd takes f16 and bf16"},
		{"soft-capping", nil, func(q, k, v, out *Tensor, p *Params) { p.SoftCap = 30 }, "logit soft-capping"},
		{"unaligned head stride", nil, func(q, k, v, out *Tensor, p *Params) {
			q.Stride = [4]int{33 * 8 * 68, 8 * 68, 68, 1}
		}, "a stride is not a multiple of 16 bytes"},
		{"unaligned pointer", nil, func(q, k, v, out *Tensor, p *Params) { k.Ptr += 2 }, "an operand does not start on 16 bytes"},
		{"alibi causal, s_q != s_k", nil, func(q, k, v, out *Tensor, p *Params) {
			p.AlibiSlopes, p.Causal = make([]float32, 8), true
		}, "ALiBi with a causal mask"},
		{"arch without kernels (gfx1100)", func() *Handle { return e.h1 }, func(q, k, v, out *Tensor, p *Params) {},
			"the shim's kernels are built for gfx90a;gfx942, not for gfx1100"},
		{"offsets beyond int32", nil, func(q, k, v, out *Tensor, p *Params) {
			q.Stride = [4]int{1 << 40, 1 << 28, 64, 1}
		}, "offsets beyond CK's int32 index"},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, k, v, out := operands(2, 33, 40, 8, 2, 64)
			var p Params
			c.edit(&q, &k, &v, &out, &p)
			h := e.h
			if c.h != nil {
				h = c.h()
			}
			pr, pl := planned(t, h, q, k, v, out, &p)
			ran, why, err := h.tryCK("F", &pr, &p, &pl)
			require.NoError(t, err)
			assert.False(t, ran)
			assert.Contains(t, why, c.why)
			assert.Empty(t, e.requests(t))
		})
	}

	// Decode steps and paged caches never go to the shim.
	q, k, v, out := operands(2, 1, 40, 8, 2, 64)
	pr, pl := planned(t, e.h, q, k, v, out, &Params{})
	require.Equal(t, FlashDecoding, pl.backend)
	ran, why, err := e.h.tryCK("F", &pr, &Params{}, &pl)
	require.NoError(t, err)
	assert.False(t, ran)
	assert.Equal(t, "a decode step runs on FlashDecoding", why)
	q, _, _, out = operands(2, 33, 40, 8, 2, 64)
	kc := Contiguous(dev+1<<30, F16, 10, 16, 2, 64)
	vc := Contiguous(dev+2<<30, F16, 10, 16, 2, 64)
	kv := PagedKV{K: kc, V: vc, BlockTable: dev + 4096, BlockTableStride: 4, SeqLens: []int32{17, 64}, DevSeqLens: dev + 8192}
	pr, err = pagedProblem("D", q, &kv, out)
	require.NoError(t, err)
	pl, err = newPlan("D", &pr, &Params{}, e.h.target)
	require.NoError(t, err)
	ran, why, err = e.h.tryCK("D", &pr, &Params{}, &pl)
	require.NoError(t, err)
	assert.False(t, ran)
	assert.Equal(t, "paged caches run on rocm-go's kernels", why)
	assert.Empty(t, e.requests(t))

	// CK's dispatcher finding no instance is a fallback too.
	t.Setenv("ROCM_GO_FAKE_CK_STATUS", "1")
	q, k, v, out = operands(2, 33, 40, 8, 2, 64)
	pr, pl = planned(t, e.h, q, k, v, out, &Params{})
	ran, why, err = e.h.tryCK("F", &pr, &Params{}, &pl)
	require.NoError(t, err)
	assert.False(t, ran)
	assert.Equal(t, "fake CK: status 1", why)
	assert.Len(t, e.requests(t), 1)
}

func TestCKErrors(t *testing.T) {
	e := useFakeCK(t)
	q, k, v, out := operands(2, 33, 40, 8, 2, 64)
	for status, c := range map[string]struct {
		kind error
		msg  string
	}{
		"2": {errs.ErrArgument, "invalid arguments: fake CK: status 2"},
		"3": {errs.ErrDevice, "HIP error: fake CK: status 3"},
		"4": {errs.ErrDevice, "internal error: fake CK: status 4"},
		"9": {errs.ErrDevice, "status 9: fake CK: status 9"},
	} {
		t.Setenv("ROCM_GO_FAKE_CK_STATUS", status)
		b, err := e.h.Forward(q, k, v, out, Params{})
		assert.Equal(t, CK, b, "the backend that failed")
		assert.ErrorIs(t, err, c.kind)
		assert.ErrorContains(t, err, "flashattn: Handle.Forward: Composable Kernel shim ("+filepath.Join(buildCKFakes(t), ckSoname)+"): "+c.msg)
		e.requests(t)
	}
}
