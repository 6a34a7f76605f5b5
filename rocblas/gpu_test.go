package rocblas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
)

// The tests in this file run in tier 2: on a GPU, AMD (rocBLAS) or NVIDIA
// (cuBLAS through the translation).

// gpuEnv returns a handle on a stream of device 0, and fresh random inputs
// (the seed is logged). ROCM_GO_BLAS_TIER2_ON_FAKE=amd or nv runs these
// tests against a fake library instead, with the GPU's sizes: a check of
// the tests themselves on a machine without a GPU.
func gpuEnv(t *testing.T) *env {
	t.Helper()
	if fake := os.Getenv("ROCM_GO_BLAS_TIER2_ON_FAKE"); fake != "" {
		e := useFake(t, fake)
		e.small, e.mid, e.large = 7, 129, 1000
		return e
	}
	dev, err := hip.GetDevice(0)
	testenv.Need(t, 2, "a GPU", err)
	s, err := dev.NewStream(hip.WithStreamFlags(hip.StreamNonBlocking))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	h, err := NewHandle(s)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, h.Close()) })
	seed := rand.Uint64()
	t.Logf("random seed %#x", seed)
	return &env{dev: dev, stream: s, h: h, small: 7, mid: 129, large: 1000, rng: rand.New(rand.NewPCG(seed, 1))}
}

func TestGPULibrary(t *testing.T) {
	gpuEnv(t)
	assert.Equal(t, hip.LoadedPlatform(), LoadedPlatform())
	assert.Empty(t, untranslated(), "every bound function is callable")
	v, err := Version()
	require.NoError(t, err)
	t.Logf("%s from %s on the %s platform", v, LibraryPaths()[0], LoadedPlatform())
	for _, s := range statusValues {
		text, err := StatusString(s)
		require.NoError(t, err)
		assert.Equal(t, s.String(), text)
	}
}

// TestGPUSuite runs every bound function against the CPU reference: all
// transposes, sizes 1, 7, 129 and 1000, non-square shapes, leading
// dimensions and increments larger than needed, batched forms.
func TestGPUSuite(t *testing.T) { runSuite(t, gpuEnv(t)) }

func TestGPUHandleModesAndWorkspace(t *testing.T) {
	e := gpuEnv(t)
	h := e.h
	gemm := func(what string, tol float64) {
		t.Helper()
		a, b, c := newMat[float32](t, e, 129, 33, 1), newMat[float32](t, e, 33, 65, 0), newMat[float32](t, e, 129, 65, 2)
		a.fix()
		b.fix()
		c.fix()
		c.poison(t)
		require.NoError(t, Gemm(h, OperationNone, OperationNone, 1.5, a.m, b.m, 0, c.m))
		checker[float32]{t, what, tol}.check(c.host, c.read(t), matWant(c.m, gemmRef(OperationNone, OperationNone, 33, 1.5, a.at, b.at, 0, nil), nil))
	}

	n, err := h.WorkspaceSize()
	require.NoError(t, err)
	t.Logf("the library's workspace: %d bytes", n)
	require.NoError(t, h.SetWorkspaceSize(32<<20))
	n, err = h.WorkspaceSize()
	require.NoError(t, err)
	assert.Equal(t, 32<<20, n)
	managed, err := h.ManagesWorkspace()
	require.NoError(t, err)
	assert.False(t, managed)
	gemm("with a workspace the handle owns", 1e-5)
	ws, err := e.dev.Malloc(16 << 20)
	require.NoError(t, err)
	defer ws.Close()
	require.NoError(t, h.SetWorkspace(ws))
	gemm("with the user's workspace", 1e-5)
	require.NoError(t, h.SetWorkspace(nil))
	managed, err = h.ManagesWorkspace()
	require.NoError(t, err)
	assert.True(t, managed)

	// Another stream of the device.
	s2, err := e.dev.NewStream()
	require.NoError(t, err)
	defer s2.Close()
	require.NoError(t, h.SetStream(s2))
	gemm("on a second stream", 1e-5)
	require.NoError(t, h.SetStream(e.stream))

	// Modes.
	for _, m := range []AtomicsMode{AtomicsNotAllowed, AtomicsAllowed} {
		require.NoError(t, h.SetAtomicsMode(m))
		got, err := h.AtomicsMode()
		require.NoError(t, err)
		assert.Equal(t, m, got)
		gemm(fmt.Sprintf("with %s", m), 1e-5)
	}
	require.NoError(t, h.SetMathMode(Xf32XdlMathOp))
	mm, err := h.MathMode()
	require.NoError(t, err)
	assert.Equal(t, Xf32XdlMathOp, mm)
	gemm("in xf32/tf32 math", 1e-2)
	require.NoError(t, h.SetMathMode(DefaultMath))
	gemm("in default math", 1e-5)

	// Raw access, in the mode SetPointerMode chose.
	require.NoError(t, h.SetPointerMode(PointerModeDevice))
	require.NoError(t, h.Raw(func(handle unsafe.Pointer, device int) error {
		assert.NotNil(t, handle)
		assert.Equal(t, e.dev.Ordinal(), device)
		return nil
	}))
	gemm("after Raw in device pointer mode", 1e-5)
}

// TestGPUConcurrentUse shares one handle between goroutines (its calls are
// serialized) and gives others a handle each, on their own streams.
func TestGPUConcurrentUse(t *testing.T) {
	e := gpuEnv(t)
	const workers, rounds, n = 8, 10, 64
	var wg sync.WaitGroup
	errs := make([]error, 2*workers)
	results := make([][]float32, 2*workers)
	inputs := make([][]float32, 2*workers)
	for w := range 2 * workers {
		inputs[w] = randoms[float32](rand.New(rand.NewPCG(uint64(w), 9)), n*n)
	}
	run := func(w int, h *Handle, s *hip.Stream) error {
		a, err := e.dev.Malloc(4 * n * n)
		if err != nil {
			return err
		}
		defer a.Close()
		c, err := e.dev.Malloc(4 * n * n)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := a.CopyFromHost(hip.AsBytes(inputs[w])); err != nil {
			return err
		}
		if err := c.CopyFromHost(hip.AsBytes(inputs[w])); err != nil {
			return err
		}
		// c = 0.5*a*a + 0.5*c, rounds times, queued on the handle's stream.
		for range rounds {
			if err := Gemm(h, OperationNone, OperationNone, 0.5, Mat[float32](a, n, n), Mat[float32](a, n, n), 0.5, Mat[float32](c, n, n)); err != nil {
				return err
			}
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		results[w] = make([]float32, n*n)
		return c.CopyToHost(hip.AsBytes(results[w]))
	}
	for w := range workers {
		wg.Add(2)
		go func() { defer wg.Done(); errs[w] = run(w, e.h, e.stream) }()
		go func() {
			defer wg.Done()
			s, err := e.dev.NewStream(hip.WithStreamFlags(hip.StreamNonBlocking))
			if err != nil {
				errs[workers+w] = err
				return
			}
			defer s.Close()
			h, err := NewHandle(s)
			if err != nil {
				errs[workers+w] = err
				return
			}
			defer h.Close()
			errs[workers+w] = run(workers+w, h, s)
		}()
	}
	wg.Wait()
	for w := range 2 * workers {
		require.NoError(t, errs[w], "worker %d", w)
		// The same recurrence on the CPU.
		a := toCs(inputs[w])
		c := append([]complex128(nil), a...)
		aa := make([]complex128, n*n)
		for j := range n {
			for l := range n {
				for i := range n {
					aa[i+j*n] += a[i+l*n] * a[l+j*n]
				}
			}
		}
		for range rounds {
			for i := range c {
				c[i] = 0.5*aa[i] + 0.5*c[i]
			}
		}
		var num, den float64
		for i, v := range toCs(results[w]) {
			d := v - c[i]
			num += real(d) * real(d)
			den += real(c[i]) * real(c[i])
		}
		assert.Less(t, math.Sqrt(num/den), 1e-5, "worker %d", w)
	}
}

// TestGPULargeGemmEx checks the kind of products the benchmarks time
// (A·Bᵀ, as PyTorch's linear layers) at 1024³ in f16, bf16 and f32 with
// f32 accumulation, and strided batches of 128³ in f16, on sampled entries
// against the CPU.
func TestGPULargeGemmEx(t *testing.T) {
	e := gpuEnv(t)
	t.Run("f16", func(t *testing.T) { largeGemmEx[hip.Half, hip.Half](t, e, 1024, false, 2e-3) })
	t.Run("bf16", func(t *testing.T) { largeGemmEx[hip.BFloat16, hip.BFloat16](t, e, 1024, false, 1e-2) })
	t.Run("f32", func(t *testing.T) { largeGemmEx[float32, float32](t, e, 1024, false, 1e-4) })
	t.Run("f16 strided batch", func(t *testing.T) { largeGemmEx[hip.Half, hip.Half](t, e, 128, true, 2e-3) })
}

func largeGemmEx[A ExIn, C ExOut](t *testing.T, e *env, n int, strided bool, tol float64) {
	var a, b smat[A]
	var cm smat[C]
	entries := 1
	if strided {
		a, b, cm, entries = newStridedMat[A](t, e, n, n, 0), newStridedMat[A](t, e, n, n, 0), newStridedMat[C](t, e, n, n, 0), batch
		cm.poison(t)
		require.NoError(t, GemmStridedBatchedEx(e.h, OperationNone, OperationTranspose, 1, a.sm, b.sm, 0, cm.sm, cm.sm, batch))
	} else {
		one := func(d dmat[A]) smat[A] { d.fix(); return smat[A]{buf: d.buf, sm: StridedMatrix[A]{Matrix: d.m}} }
		a, b = one(newMat[A](t, e, n, n, 0)), one(newMat[A](t, e, n, n, 0))
		d := newMat[C](t, e, n, n, 0)
		d.fix()
		d.poison(t)
		cm = smat[C]{buf: d.buf, sm: StridedMatrix[C]{Matrix: d.m}}
		require.NoError(t, GemmEx(e.h, OperationNone, OperationTranspose, 1, a.sm.Matrix, b.sm.Matrix, 0, cm.sm.Matrix, cm.sm.Matrix))
	}
	got := toCs(cm.read(t))
	var num, den float64
	for range 256 {
		bi, i, j := e.rng.IntN(entries), e.rng.IntN(n), e.rng.IntN(n)
		ab, bb := a.entry(bi), b.entry(bi)
		var want complex128
		for l := range n {
			want += ab.at(i, l) * bb.at(j, l)
		}
		d := got[cm.entry(bi).m.Offset+i+j*n] - want
		num += real(d) * real(d)
		den += real(want) * real(want)
	}
	assert.Less(t, math.Sqrt(num/den), tol)
}
