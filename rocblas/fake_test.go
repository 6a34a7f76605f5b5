package rocblas

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/testenv"

	"github.com/rocm-go/rocm/hip"
)

// The tests in this file run in tier 0 against fake libraries built from
// testdata with the C compiler: testdata/fakerocblas.c is HIP and rocBLAS
// in one file, testdata/fakecublas.c the CUDA runtime, driver and cuBLAS.
// Both compute real results (testdata/refblas.h) on host memory, so the
// whole suite of suite_test.go runs against them: on AMD through the
// package's dispatch, on NVIDIA through its cuBLAS translation as well.

var fakes struct {
	once sync.Once
	dir  string
	err  error
}

// fake library kinds.
const (
	fakeAMD    = "amd"
	fakeAMDOld = "amdold"
	fakeNVIDIA = "nv"
)

func buildFakes(t *testing.T) string {
	t.Helper()
	fakes.once.Do(func() {
		dir, err := os.MkdirTemp("", "rocm-go-fakeblas")
		if err != nil {
			fakes.err = err
			return
		}
		for _, b := range []struct{ sub, out, src, def string }{
			{fakeAMD, "librocblas.so.4", "fakerocblas.c", "-DFAKE_FULL"},
			{fakeAMDOld, "librocblas.so.4", "fakerocblas.c", "-DFAKE_OLD"},
			{fakeNVIDIA, "libcublas.so.13", "fakecublas.c", "-DFAKE_FULL"},
		} {
			if err := os.MkdirAll(filepath.Join(dir, b.sub), 0o755); err != nil {
				fakes.err = err
				return
			}
			out, err := exec.Command("cc", "-shared", "-fPIC", "-O2", b.def, "-o", filepath.Join(dir, b.sub, b.out), filepath.Join("testdata", b.src), "-lm").CombinedOutput()
			if err != nil {
				fakes.err = errors.New(string(out))
				return
			}
		}
		// One fake file stands in for cuBLAS, the CUDA runtime and the driver.
		for _, link := range []string{"libcudart.so.13", "libcuda.so.1"} {
			if err := os.Symlink("libcublas.so.13", filepath.Join(dir, fakeNVIDIA, link)); err != nil {
				fakes.err = err
				return
			}
		}
		fakes.dir = dir
	})
	if fakes.err != nil {
		testenv.FakeBuildFailed(t, "the fake libraries", fakes.err)
	}
	return fakes.dir
}

// useFake loads HIP and the BLAS library from a fake and returns a handle
// on device 0; everything is closed and unloaded when the test ends.
func useFake(t *testing.T, which string) *env {
	t.Helper()
	dir := buildFakes(t)
	platform, path := hip.PlatformAMD, filepath.Join(dir, which, "librocblas.so.4")
	if which == fakeNVIDIA {
		platform, path = hip.PlatformNVIDIA, filepath.Join(dir, which)
	}
	library.Reset()
	if p := hip.LoadedPlatform(); p != hip.PlatformNone {
		t.Skipf("tier 0: HIP is loaded already (%s, %v): the fakes need a process where it is not", p, hip.LibraryPaths())
	}
	require.NoError(t, hip.Load(hip.WithPlatform(platform), hip.WithLibraryPaths(path)))
	t.Cleanup(func() {
		// Unload, not Reset: HIP and rocBLAS may be one fake file, and
		// Reset would close HIP's reference too.
		if err := Unload(); err != nil {
			library.Reset()
		}
		assert.NoError(t, hip.Unload())
	})
	require.Contains(t, hip.LibraryPaths()[0], dir, "HIP was loaded from the fake")
	require.NoError(t, Load(WithPlatform(platform), WithLibraryPaths(path)))
	dev, err := hip.GetDevice(0)
	require.NoError(t, err)
	s, err := dev.NewStream()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	h, err := NewHandle(s)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, h.Close()) })
	return &env{dev: dev, stream: s, h: h, small: 7, mid: 17, large: 33, rng: rand.New(rand.NewPCG(1, 2))}
}

// callLog makes the fakes log their calls to a file and returns a function
// that reads the lines logged since the last read.
func callLog(t *testing.T) func() []string { return testenv.FakeLog(t, "ROCM_GO_FAKE_BLAS_LOG") }

// names is the first word of each line.
func names(lines []string) []string {
	var out []string
	for _, l := range lines {
		out = append(out, strings.Fields(l + " ")[0])
	}
	return out
}

func TestFakeSuiteAMD(t *testing.T) { runSuite(t, useFake(t, fakeAMD)) }

func TestFakeSuiteNVIDIA(t *testing.T) { runSuite(t, useFake(t, fakeNVIDIA)) }

func TestFakeLibraryAMD(t *testing.T) {
	useFake(t, fakeAMD)
	assert.Equal(t, hip.PlatformAMD, LoadedPlatform())
	assert.Contains(t, LibraryPaths()[0], "librocblas.so.4")
	assert.Empty(t, untranslated(), "the fake exports every bound function")
	v, err := Version()
	require.NoError(t, err)
	assert.Equal(t, hip.Version{Major: 4, Minor: 4, Patch: 1}, v, "4.4.1.fake")
	for _, s := range statusValues {
		text, err := StatusString(s)
		require.NoError(t, err)
		assert.Equal(t, s.String(), text)
	}
	p, err := Symbol("rocblas_sgemm")
	require.NoError(t, err)
	assert.NotNil(t, p)
	_, err = Symbol("rocblas_no_such_function")
	assert.ErrorIs(t, err, ErrSymbolNotFound)
}

func TestFakeLibraryNVIDIA(t *testing.T) {
	useFake(t, fakeNVIDIA)
	assert.Equal(t, hip.PlatformNVIDIA, LoadedPlatform())
	assert.Contains(t, LibraryPaths()[0], fakes.dir, "one fake file is cuBLAS, the CUDA runtime and the driver")
	assert.Empty(t, untranslated(), "every bound function has a cuBLAS translation")
	v, err := Version()
	require.NoError(t, err)
	assert.Equal(t, hip.Version{Major: 13, Minor: 1}, v)
	for _, s := range statusValues {
		text, err := StatusString(s)
		require.NoError(t, err)
		assert.Equal(t, s.String(), text, "the translation names statuses as rocBLAS does")
	}
	text, err := StatusString(Status(99))
	require.NoError(t, err)
	assert.Equal(t, "<undefined rocblas_status>", text)
	_, err = Symbol("rocblas_no_such_function")
	assert.ErrorIs(t, err, ErrSymbolNotFound)
	assert.ErrorContains(t, err, "does not translate it to cuBLAS")
}

// TestNVIDIAStatusTranslation: cuBLAS statuses by name, not by number.
func TestNVIDIAStatusTranslation(t *testing.T) {
	for cublas, want := range map[int]Status{
		0: StatusSuccess, 1: StatusInvalidHandle, 3: StatusMemoryError, 7: StatusInvalidValue,
		8: StatusArchMismatch, 11: StatusMemoryError, 13: StatusInternalError, 14: StatusInternalError,
		15: StatusNotImplemented, 16: StatusInternalError, 2: StatusInternalError, 12345: StatusInternalError,
	} {
		assert.Equal(t, want, nvidiaStatus(cublas), "cuBLAS status %d", cublas)
	}
}

func TestFakeDispatch(t *testing.T) {
	e := useFake(t, fakeAMD)
	calls := callLog(t)
	f32 := newVec[float32](t, e, 4, 1)
	f32.v.Buf = f32.b
	c64 := newVec[complex64](t, e, 4, 1)
	c64.v.Buf = c64.b
	mat := func(n int) Matrix[float32] { return Mat[float32](newMat[float32](t, e, n, n, 0).b, n, n) }
	calls()

	_, err := Dot(e.h, f32.v, f32.v)
	require.NoError(t, err)
	_, err = Dotc(e.h, f32.v, f32.v)
	require.NoError(t, err)
	_, err = Dot(e.h, c64.v, c64.v)
	require.NoError(t, err)
	_, err = Dotc(e.h, c64.v, c64.v)
	require.NoError(t, err)
	assert.Equal(t, []string{"rocblas_sdot mode=0", "rocblas_sdot mode=0", "rocblas_cdotu mode=0", "rocblas_cdotc mode=0"}, calls())

	// A device result switches the pointer mode, and a host one back.
	res := newVec[complex64](t, e, 2, 1)
	res.v.Buf = res.b
	require.NoError(t, DotcTo(e.h, c64.v, c64.v, res.v))
	_, err = Nrm2(e.h, c64.v)
	require.NoError(t, err)
	assert.Equal(t, []string{"rocblas_set_pointer_mode mode=0", "rocblas_cdotc mode=1", "rocblas_set_pointer_mode mode=1", "rocblas_scnrm2 mode=0"}, calls())

	a := mat(3)
	require.NoError(t, Gemm(e.h, OperationNone, OperationNone, 1, a, a, 0, a))
	h16 := Mat[hip.Half](newMat[hip.Half](t, e, 3, 3, 0).b, 3, 3)
	require.NoError(t, Gemm(e.h, OperationNone, OperationNone, hip.HalfFromFloat32(1), h16, h16, 0, h16))
	z := Mat[complex128](newMat[complex128](t, e, 3, 3, 0).b, 3, 3)
	require.NoError(t, GemmBatched(e.h, OperationTranspose, OperationNone, 1, []Matrix[complex128]{z, z}, []Matrix[complex128]{z, z}, 0, []Matrix[complex128]{z, z}))
	require.NoError(t, Ger(e.h, complex64(1), c64.v, c64.v, Mat[complex64](newMat[complex64](t, e, 4, 4, 0).b, 4, 4)))
	require.NoError(t, Gerc(e.h, complex64(1), c64.v, c64.v, Mat[complex64](newMat[complex64](t, e, 4, 4, 0).b, 4, 4)))
	require.NoError(t, Trsv(e.h, FillLower, OperationNone, DiagonalUnit, mat(4), f32.v))
	assert.Equal(t, []string{"rocblas_sgemm", "rocblas_hgemm", "rocblas_zgemm_batched", "rocblas_cgeru", "rocblas_cgerc", "rocblas_strsv"}, names(calls()))

	// GemmEx passes its types, algorithm and flags through.
	b16 := Mat[hip.BFloat16](newMat[hip.BFloat16](t, e, 3, 3, 0).b, 3, 3)
	require.NoError(t, GemmEx(e.h, OperationNone, OperationNone, 1, b16, b16, 0, a, a, WithGemmAlgo(GemmAlgoSolutionIndex, 7), WithGemmFlags(GemmFlagsFp16AltImpl)))
	assert.Equal(t, []string{"rocblas_gemm_ex mode=0", "gemm_ex a=168 c=151 compute=151 algo=1 solution=7 flags=4 inplace=1"}, calls())
}

// A handle on the second device: the fake checks in every call that the
// handle's device is current, and makes another current after it.
func TestFakeSecondDevice(t *testing.T) {
	e := useFake(t, fakeAMD)
	d1, err := hip.GetDevice(1)
	require.NoError(t, err)
	s1, err := d1.NewStream()
	require.NoError(t, err)
	defer s1.Close()
	h1, err := NewHandle(s1)
	require.NoError(t, err)
	defer h1.Close()
	e1 := &env{dev: d1, stream: s1, h: h1, small: 3, mid: 5, large: 9, rng: rand.New(rand.NewPCG(3, 4))}
	t.Run("Gemm", of(testGemm[float32], e1))
	t.Run("Dot", of(testDot[complex64], e1))
	t.Run("GemvBatched", of(testGemv[float64], e1))

	// Operands on device 0 are refused before any call.
	x := newVec[float32](t, e, 3, 1)
	x.v.Buf = x.b
	err = Scal(h1, 2, x.v)
	assert.ErrorIs(t, err, ErrInvalidValue)
	assert.ErrorContains(t, err, "x.Buf is on device 0, the handle on device 1")
	assert.ErrorContains(t, h1.SetStream(e.stream), "the stream is on device 0, the handle on device 1")

	// A device that cannot be made current.
	bad := &Handle{c: h1.c, dev: h1.dev, ord: 9, stream: s1, mem: h1.mem, libMode: PointerModeHost}
	err = Scal(bad, 2, Vec[float32](newVec[float32](t, e1, 3, 1).b, 3))
	assert.ErrorIs(t, err, hip.ErrInvalidDevice)
	assert.ErrorContains(t, err, "could not make the device current")
}

func TestFakeHandleLifetime(t *testing.T) {
	e := useFake(t, fakeAMD)
	calls := callLog(t)
	x := Vec[float32](newVec[float32](t, e, 3, 1).b, 3)
	base, _, err := e.dev.MemInfo()
	require.NoError(t, err)

	h, err := NewHandle(e.stream)
	require.NoError(t, err)
	assert.Same(t, e.stream, h.Stream())
	assert.Same(t, e.dev, h.Device())
	assert.Contains(t, h.String(), "device 0")

	// Modes.
	m, err := h.PointerMode()
	require.NoError(t, err)
	assert.Equal(t, PointerModeHost, m)
	require.NoError(t, h.SetPointerMode(PointerModeDevice))
	assert.ErrorIs(t, h.SetPointerMode(PointerMode(7)), ErrInvalidValue)
	require.NoError(t, h.SetAtomicsMode(AtomicsNotAllowed))
	am, err := h.AtomicsMode()
	require.NoError(t, err)
	assert.Equal(t, AtomicsNotAllowed, am)
	assert.ErrorIs(t, h.SetAtomicsMode(AtomicsMode(5)), ErrInvalidValue)
	require.NoError(t, h.SetMathMode(Xf32XdlMathOp))
	mm, err := h.MathMode()
	require.NoError(t, err)
	assert.Equal(t, Xf32XdlMathOp, mm)
	assert.ErrorIs(t, h.SetMathMode(MathMode(9)), ErrInvalidValue)

	// Raw runs in the chosen pointer mode, under the lock.
	var rawDev int
	require.NoError(t, h.Raw(func(p unsafe.Pointer, dev int) error { rawDev = dev; return nil }))
	assert.Equal(t, 0, rawDev)
	lines := calls()
	assert.Contains(t, lines, "rocblas_set_pointer_mode mode=0", "Raw switched the library to device mode")
	assert.Contains(t, lines, "rocblas_get_pointer_mode mode=1", "and asked what it left")
	assert.ErrorIs(t, h.Raw(nil), ErrInvalidValue)
	sentinel := errors.New("mine")
	assert.Same(t, sentinel, h.Raw(func(unsafe.Pointer, int) error { return sentinel }))

	// Workspaces: the library's, one the handle allocates, the user's.
	n, err := h.WorkspaceSize()
	require.NoError(t, err)
	assert.Equal(t, 1<<20, n)
	managed, err := h.ManagesWorkspace()
	require.NoError(t, err)
	assert.True(t, managed)
	require.NoError(t, h.SetWorkspaceSize(4096))
	n, _ = h.WorkspaceSize()
	assert.Equal(t, 4096, n)
	managed, _ = h.ManagesWorkspace()
	assert.False(t, managed)
	ws, err := e.dev.Malloc(8192)
	require.NoError(t, err)
	require.NoError(t, h.SetWorkspace(ws))
	n, _ = h.WorkspaceSize()
	assert.Equal(t, 8192, n)
	require.NoError(t, h.SetWorkspace(nil))
	managed, _ = h.ManagesWorkspace()
	assert.True(t, managed)
	require.NoError(t, ws.Close())
	assert.ErrorIs(t, h.SetWorkspace(ws), hip.ErrClosed)
	assert.ErrorIs(t, h.SetWorkspaceSize(-1), ErrInvalidSize)

	// Streams.
	s2, err := e.dev.NewStream()
	require.NoError(t, err)
	require.NoError(t, h.SetStream(s2))
	assert.Same(t, s2, h.Stream())
	require.NoError(t, s2.Close())
	err = Scal(h, 2, x)
	assert.ErrorIs(t, err, ErrInvalidHandle)
	assert.ErrorIs(t, err, hip.ErrClosed)
	assert.ErrorContains(t, err, "stream was closed")
	require.NoError(t, h.SetStream(e.stream))
	require.NoError(t, Scal(h, 2, x))
	assert.ErrorIs(t, h.SetStream(nil), ErrInvalidValue)
	assert.ErrorIs(t, h.SetStream(s2), hip.ErrClosed)

	// Batched calls allocate their scratch once, and Close frees it.
	for range 2 * scratchSlots {
		require.NoError(t, ScalBatched(h, 2, []Vector[float32]{x, x}))
	}
	require.NoError(t, h.Close())
	require.NoError(t, h.Close(), "closing twice does nothing")
	after, _, err := e.dev.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, base, after, "the handle, its scratch memory and events, and its workspace are freed")

	// Use after Close.
	for name, call := range map[string]func() error{
		"Scal":           func() error { return Scal(h, 2, x) },
		"Dot":            func() error { _, err := Dot(h, x, x); return err },
		"SetPointerMode": func() error { return h.SetPointerMode(PointerModeHost) },
		"SetStream":      func() error { return h.SetStream(e.stream) },
		"WorkspaceSize":  func() error { _, err := h.WorkspaceSize(); return err },
	} {
		err := call()
		assert.ErrorIs(t, err, ErrClosed, name)
		assert.ErrorIs(t, err, ErrInvalidHandle, name)
		assert.ErrorContains(t, err, "use of a closed handle", name)
	}

	// Nil and zero handles.
	var nilH *Handle
	assert.ErrorIs(t, Scal(nilH, 2, x), ErrInvalidHandle)
	assert.ErrorIs(t, Scal(&Handle{}, 2, x), ErrInvalidHandle)
	assert.NoError(t, nilH.Close())
	assert.Nil(t, nilH.Device())
	assert.Equal(t, "rocblas.Handle(nil)", nilH.String())

	// NewHandle refuses bad streams.
	_, err = NewHandle(nil)
	assert.ErrorIs(t, err, ErrInvalidValue)
	_, err = NewHandle(s2)
	assert.ErrorIs(t, err, hip.ErrClosed)
	_, err = NewHandle(&hip.Stream{})
	assert.ErrorIs(t, err, ErrInvalidValue)
}

// TestFakeValidation: every kind of bad argument is refused in Go with a
// clear error naming it, before any C call.
func TestFakeValidation(t *testing.T) {
	e := useFake(t, fakeAMD)
	calls := callLog(t)
	f32 := func(n int) *hip.Buffer {
		b, err := e.dev.Malloc(4 * n)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		return b
	}
	m := func(rows, cols int) Matrix[float32] { return Mat[float32](f32(rows*cols), rows, cols) }
	v := func(n int) Vector[float32] { return Vec[float32](f32(n), n) }
	closed := f32(16)
	require.NoError(t, closed.Close())
	d1, err := hip.GetDevice(1)
	require.NoError(t, err)
	other, err := d1.Malloc(64)
	require.NoError(t, err)
	defer other.Close()
	misaligned, err := f32(8).Slice(2, 16)
	require.NoError(t, err)
	cm := func(rows, cols int) Matrix[complex64] {
		b, err := e.dev.Malloc(8 * rows * cols)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		return Mat[complex64](b, rows, cols)
	}
	h16 := func(rows, cols int) Matrix[hip.Half] {
		b, err := e.dev.Malloc(2 * rows * cols)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		return Mat[hip.Half](b, rows, cols)
	}
	i8 := func(rows, cols int) Matrix[int8] {
		b, err := e.dev.Malloc(rows * cols)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		return Mat[int8](b, rows, cols)
	}
	i32 := func(rows, cols int) Matrix[int32] {
		b, err := e.dev.Malloc(4 * rows * cols)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		return Mat[int32](b, rows, cols)
	}
	const N, T, C = OperationNone, OperationTranspose, OperationConjugateTranspose
	h := e.h
	calls()

	for _, c := range []struct {
		name   string
		call   func() error
		status error
		detail string
	}{
		{"nil buffer", func() error { return Gemm(h, N, N, 1, Matrix[float32]{Rows: 2, Cols: 2}, m(2, 2), 0, m(2, 2)) }, ErrInvalidPointer, "A.Buf is nil"},
		{"closed buffer", func() error { return Scal(h, 2, Vec[float32](closed, 4)) }, ErrInvalidPointer, "x.Buf is closed"},
		{"other device", func() error { return Axpy(h, 1, v(4), Vec[float32](other, 4)) }, ErrInvalidValue, "y.Buf is on device 1, the handle on device 0"},
		{"buffer too small", func() error { return Gemm(h, N, N, 1, m(3, 4), Mat[float32](f32(11), 4, 3), 0, m(3, 3)) }, ErrInvalidSize, "B needs elements [0, 12) of its buffer, which holds 11 float32 (44 bytes)"},
		{"offset past the end", func() error { return Scal(h, 2, Vector[float32]{Buf: f32(4), Offset: 2, N: 3}) }, ErrInvalidSize, "x needs elements [2, 5)"},
		{"ld and padding", func() error {
			return Gemv(h, N, 1, Matrix[float32]{Buf: f32(20), Rows: 4, Cols: 5, Ld: 5}, v(5), 0, v(4))
		}, ErrInvalidSize, "A needs elements [0, 24)"},
		{"negative offset", func() error { return Copy(h, Vector[float32]{Buf: f32(4), Offset: -1, N: 2}, v(2)) }, ErrInvalidSize, "x.Offset -1 is negative"},
		{"ld < rows", func() error {
			return Gemm(h, N, N, 1, Matrix[float32]{Buf: f32(35), Rows: 7, Cols: 5, Ld: 5}, m(5, 2), 0, m(7, 2))
		}, ErrInvalidSize, "A.Ld 5 < A.Rows 7"},
		{"zero rows", func() error { return Gemm(h, N, N, 1, Matrix[float32]{Buf: f32(4), Cols: 2}, m(2, 2), 0, m(2, 2)) }, ErrInvalidSize, "A is 0×2: a matrix has at least one row and one column"},
		{"32-bit sizes", func() error { return Scal(h, 2, Vector[float32]{Buf: f32(4), N: 1 << 31}) }, ErrInvalidSize, "rocBLAS's sizes are 32-bit"},
		{"negative inc", func() error { _, err := Iamax(h, Vector[float32]{Buf: f32(4), N: 2, Inc: -1}); return err }, ErrInvalidSize, "x.Inc -1: this operation takes a positive increment"},
		{"empty vector", func() error { _, err := Nrm2(h, Vector[float32]{Buf: f32(4)}); return err }, ErrInvalidSize, "x.N is 0"},
		{"misaligned", func() error { return Scal(h, 2, Vec[float32](misaligned, 2)) }, ErrInvalidPointer, "not aligned to 4 bytes"},
		{"gemm inner", func() error { return Gemm(h, T, N, 1, m(3, 4), m(2, 5), 0, m(4, 5)) }, ErrInvalidSize, "Aᵀ is 4×3 and B is 2×5: the inner dimensions differ"},
		{"gemm rows of C", func() error { return Gemm(h, N, N, 1, m(3, 4), m(4, 5), 0, m(4, 5)) }, ErrInvalidSize, "A is 3×4, but C has 4 rows"},
		{"gemm cols of C", func() error { return Gemm(h, N, C, 1, m(4, 4), m(6, 4), 0, m(4, 5)) }, ErrInvalidSize, "Bᴴ is 4×6, but C has 5 columns"},
		{"bad transpose", func() error { return Gemm(h, Operation(7), N, 1, m(2, 2), m(2, 2), 0, m(2, 2)) }, ErrInvalidValue, "transA is Operation(7)"},
		{"bad fill", func() error { return Symv(h, FillFull, 1, m(2, 2), v(2), 0, v(2)) }, ErrInvalidValue, "uplo is rocblas_fill_full"},
		{"bad side", func() error { return Trsm(h, SideBoth, FillUpper, N, DiagonalUnit, 1, m(2, 2), m(2, 2)) }, ErrInvalidValue, "side is rocblas_side_both"},
		{"bad diag", func() error { return Trmv(h, FillUpper, N, Diagonal(1), m(2, 2), v(2)) }, ErrInvalidValue, "diag is Diagonal(1)"},
		{"vector length", func() error { return Axpy(h, 1, v(3), v(4)) }, ErrInvalidSize, "y.N 4 ≠ 3, the length of x"},
		{"gemv x", func() error { return Gemv(h, T, 1, m(3, 4), v(4), 0, v(4)) }, ErrInvalidSize, "x.N 4 ≠ 3, the columns of Aᵀ"},
		{"ger", func() error { return Ger(h, 1, v(3), v(2), m(3, 4)) }, ErrInvalidSize, "y.N 2 ≠ 4, the columns of A"},
		{"symv square", func() error { return Symv(h, FillLower, 1, m(3, 4), v(3), 0, v(3)) }, ErrInvalidSize, "A is 3×4, but symmetry makes it 3×3"},
		{"trsm square", func() error { return Trsm(h, SideRight, FillUpper, N, DiagonalUnit, 1, m(3, 3), m(4, 5)) }, ErrInvalidSize, "A is 3×3, but side rocblas_side_right with B 4×5 makes it 5×5"},
		{"trmm C", func() error { return Trmm(h, SideLeft, FillUpper, N, DiagonalUnit, 1, m(3, 3), m(3, 2), m(2, 3)) }, ErrInvalidSize, "C is 2×3 and B 3×2"},
		{"syrk complex conj", func() error { return Syrk(h, FillUpper, C, complex64(1), cm(3, 3), 0, cm(3, 3)) }, ErrInvalidValue, "ConjugateTranspose with complex matrices"},
		{"syrk shape", func() error { return Syrk(h, FillUpper, T, 1, m(3, 4), 0, m(3, 3)) }, ErrInvalidSize, "Aᵀ is 4×3, but C is 3×3"},
		{"geam in place", func() error { a := m(3, 3); return Geam(h, T, N, 1, a, 1, m(3, 3), a) }, ErrInvalidValue, "C is A: in place"},
		{"batch size", func() error {
			return GemmStridedBatched(h, N, N, 1, Strided(m(2, 2)), Strided(m(2, 2)), 0, Strided(m(2, 2)), 0)
		}, ErrInvalidSize, "batch 0"},
		{"batch strides overlap", func() error {
			bcast := StridedMatrix[float32]{Matrix: m(2, 2)} // stride 0: one input for every entry
			return GemmStridedBatched(h, N, N, 1, bcast, bcast, 0, StridedMatrix[float32]{Matrix: Matrix[float32]{Buf: f32(16), Rows: 2, Cols: 2}, Stride: 3}, 2)
		}, ErrInvalidSize, "C.Stride 3 < 4"},
		{"batch buffer", func() error {
			return GemmStridedBatched(h, N, N, 1, Strided(m(2, 2)), Strided(m(2, 2)), 0, Strided(m(2, 2)), 2)
		}, ErrInvalidSize, "A needs elements [0, 8)"},
		{"empty batch", func() error { return GemmBatched[float32](h, N, N, 1, nil, nil, 0, nil) }, ErrInvalidSize, "A is empty"},
		{"batches differ", func() error {
			return GemmBatched(h, N, N, 1, []Matrix[float32]{m(2, 2)}, []Matrix[float32]{m(2, 2), m(2, 2)}, 0, []Matrix[float32]{m(2, 2)})
		}, ErrInvalidSize, "B has 2 entries and A 1"},
		{"batch shapes", func() error { return AxpyBatched(h, 1, []Vector[float32]{v(3), v(4)}, []Vector[float32]{v(3), v(3)}) }, ErrInvalidSize, "x[1] has N 4 and Inc 1, but x[0] has N 3 and Inc 1"},
		{"batch matrix shapes", func() error {
			return GemvBatched(h, N, 1, []Matrix[float32]{m(2, 2), m(2, 3)}, []Vector[float32]{v(2), v(2)}, 0, []Vector[float32]{v(2), v(2)})
		}, ErrInvalidSize, "A[1] is 2×3 with ld 2, but A[0] is 2×2 with ld 2"},
		{"result type", func() error { return Nrm2To(h, Vec[complex64](cm(4, 1).Buf, 4), Vec[float64](f32(4), 1)) }, ErrInvalidValue, "result is a Vector[float64]; this reduction writes float32"},
		{"result inc", func() error {
			return DotBatchedTo(h, []Vector[float32]{v(2), v(2)}, []Vector[float32]{v(2), v(2)}, Vector[float32]{Buf: f32(8), N: 2, Inc: 2})
		}, ErrInvalidSize, "result.Inc is 2"},
		{"result length", func() error {
			x := StridedVector[float32]{Vector: Vector[float32]{Buf: f32(6), N: 2}, Stride: 2}
			return DotStridedBatchedTo(h, x, x, 3, v(2))
		}, ErrInvalidSize, "result.N 2 < 3"},
		{"ex types", func() error { return GemmEx(h, N, N, 1, h16(2, 2), h16(2, 2), 0, i32(2, 2), i32(2, 2)) }, ErrInvalidValue, "A and B of hip.Half with C and D of int32"},
		{"ex int scalar", func() error { return GemmEx(h, N, N, 1.5, i8(4, 4), i8(4, 4), 0, i32(4, 4), i32(4, 4)) }, ErrInvalidValue, "alpha 1.5: int8 products take a whole int32 scalar"},
		{"ex D shape", func() error { return GemmEx(h, N, N, 1, h16(2, 2), h16(2, 2), 0, h16(2, 2), h16(2, 3)) }, ErrInvalidSize, "D is 2×3 and C 2×2"},
		{"ex in place ld", func() error {
			c := Matrix[hip.Half]{Buf: h16(4, 2).Buf, Rows: 2, Cols: 2, Ld: 2}
			d := c
			d.Ld = 3
			return GemmEx(h, N, N, 1, h16(2, 2), h16(2, 2), 0, c, d)
		}, ErrInvalidSize, "D is C (in place) with ld 3 ≠ C's 2"},
	} {
		err := c.call()
		if assert.Error(t, err, c.name) {
			assert.ErrorIs(t, err, c.status, "%s: %v", c.name, err)
			assert.ErrorContains(t, err, c.detail, c.name)
			var e *Error
			if assert.True(t, errors.As(err, &e), c.name) {
				assert.True(t, strings.HasPrefix(err.Error(), "rocblas: "+e.Op+": "), "%s: %v", c.name, err)
				assert.NotContains(t, e.Op, "rocblas_", "%s: refused in Go, not by the library", c.name)
			}
		}
	}
	assert.Empty(t, calls(), "no refused call reached the library")
}

// TestFakeLibraryErrors: a status the library returns becomes an *Error
// naming the rocBLAS function.
func TestFakeLibraryErrors(t *testing.T) {
	e := useFake(t, fakeAMD)
	a := Mat[float32](newMat[float32](t, e, 2, 2, 0).b, 2, 2)
	err := GemmEx(e.h, OperationNone, OperationNone, 1, a, a, 0, a, a,
		WithGemmAlgo(GemmAlgoSolutionIndex, -5), WithGemmFlags(GemmFlagsCheckSolutionIndex))
	var be *Error
	require.True(t, errors.As(err, &be), "%v", err)
	assert.Equal(t, "rocblas_gemm_ex", be.Op)
	assert.Equal(t, StatusInvalidValue, be.Status)
	assert.ErrorIs(t, err, ErrInvalidValue)
	assert.EqualError(t, err, "rocblas: rocblas_gemm_ex: rocblas_status_invalid_value (Passed argument not valid)")
}

// TestFakeMissingSymbols: an older library without some functions; calls
// to them fail with ErrSymbolNotFound, the others work.
func TestFakeMissingSymbols(t *testing.T) {
	e := useFake(t, fakeAMDOld)
	assert.ElementsMatch(t, []string{"rocblas_get_math_mode", "rocblas_is_managing_device_memory", "rocblas_gemm_strided_batched_ex"}, untranslated())
	_, err := e.h.MathMode()
	assert.ErrorIs(t, err, ErrSymbolNotFound)
	assert.ErrorContains(t, err, "rocblas_get_math_mode")
	_, err = e.h.ManagesWorkspace()
	assert.ErrorIs(t, err, ErrSymbolNotFound)
	s := Strided(Mat[float32](newMat[float32](t, e, 2, 2, 0).b, 2, 2))
	err = GemmStridedBatchedEx(e.h, OperationNone, OperationNone, 1, s, s, 0, s, s, 1)
	assert.ErrorIs(t, err, ErrSymbolNotFound)
	assert.ErrorContains(t, err, "rocblas_gemm_strided_batched_ex")
	assert.ErrorContains(t, err, "an older rocBLAS?")
	require.NoError(t, GemmEx(e.h, OperationNone, OperationNone, 1, s.Matrix, s.Matrix, 0, s.Matrix, s.Matrix))
}

func TestErrorsAndStatuses(t *testing.T) {
	assert.Len(t, statusValues, 16, "rocblas_status has 16 values")
	for _, s := range statusValues {
		assert.NotContains(t, s.String(), "Status(", s)
		assert.NotEmpty(t, s.Description(), s)
	}
	assert.Equal(t, "rocblas_status_invalid_size", StatusInvalidSize.String())
	assert.Equal(t, "Status(99)", Status(99).String())
	err := statusError("rocblas_sgemm", StatusMemoryError)
	assert.EqualError(t, err, "rocblas: rocblas_sgemm: rocblas_status_memory_error (Failed internal memory allocation, copy or dealloc)")
	assert.ErrorIs(t, err, ErrMemoryError)
	assert.ErrorIs(t, err, errs.ErrOutOfMemory)
	assert.NotErrorIs(t, err, ErrInvalidSize)
	assert.NotErrorIs(t, statusError("rocblas_sgemm", StatusInvalidSize), errs.ErrOutOfMemory)
	assert.ErrorIs(t, statusError("rocblas_sgemm", statusMissing), ErrSymbolNotFound)
	assert.ErrorIs(t, statusError("rocblas_sgemm", statusCUDAMissing), ErrSymbolNotFound)
	noDev := statusError("rocblas_sgemm", statusNoDevice)
	assert.ErrorIs(t, noDev, ErrInvalidValue)
	assert.ErrorContains(t, noDev, "could not make the device current")
	assert.NoError(t, check("x", Status(0)))
	assert.Nil(t, check("x", Status(0)), "nil, never a typed nil")
	v := invalidSize("Gemm", "lda %d < rows of op(A) %d", 5, 7)
	assert.EqualError(t, v, "rocblas: Gemm: rocblas_status_invalid_size (Invalid size argument): lda 5 < rows of op(A) 7")
}

// TestFakeGemmAllocatesNothing: the Go side of a plain call costs no
// allocation (the overhead benchmark compares it with C).
func TestFakeGemmAllocatesNothing(t *testing.T) {
	e := useFake(t, fakeAMD)
	a := Mat[float32](newMat[float32](t, e, 2, 2, 0).b, 2, 2)
	x := Vec[float32](a.Buf, 4)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = Gemm(e.h, OperationNone, OperationNone, 1, a, a, 0, a) }), "Gemm")
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = Axpy(e.h, 1, x, x) }), "Axpy")
}
