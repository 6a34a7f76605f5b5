package rocblas

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
)

// The tests in this file (named to run before gpu_test.go's, which load
// the real HIP) check what the NVIDIA translation (nvidia.c)
// hands cuBLAS, in tier 0: the fake cuBLAS logs the arguments it receives
// as cuBLAS numbers. (The suite checks the results.)

func TestNVIDIAEnums(t *testing.T) {
	e := useFake(t, fakeNVIDIA)
	calls := callLog(t)
	m := func(rows, cols int) Matrix[float32] {
		return Mat[float32](newMat[float32](t, e, rows, cols, 0).b, rows, cols)
	}
	v := func(n int) Vector[float32] { return Vec[float32](newVec[float32](t, e, n, 1).b, n) }
	c := func(rows, cols int) Matrix[complex64] {
		return Mat[complex64](newMat[complex64](t, e, rows, cols, 0).b, rows, cols)
	}
	calls()

	// Operations 111/112/113 are CUBLAS_OP_N/T/C 0/1/2.
	require.NoError(t, Gemm(e.h, OperationTranspose, OperationConjugateTranspose, complex64(1), c(3, 2), c(4, 3), 0, c(2, 4)))
	require.NoError(t, Gemm(e.h, OperationNone, OperationTranspose, 1, m(2, 3), m(4, 3), 0, m(2, 4)))
	// Fill upper 121 → 1, lower 122 → 0; diagonal unit 132 → 1; side right 142 → 1.
	require.NoError(t, Trsm(e.h, SideRight, FillUpper, OperationTranspose, DiagonalUnit, 1, m(3, 3), m(2, 3)))
	require.NoError(t, Trmm(e.h, SideLeft, FillLower, OperationNone, DiagonalNonUnit, 1, m(2, 2), m(2, 3), m(2, 3)))
	require.NoError(t, Symv(e.h, FillLower, 1, m(3, 3), v(3), 0, v(3)))
	require.NoError(t, Syrk(e.h, FillUpper, OperationTranspose, 1, m(4, 3), 0, m(3, 3)))
	require.NoError(t, Symm(e.h, SideRight, FillLower, 1, m(3, 3), m(2, 3), 0, m(2, 3)))
	require.NoError(t, Trsv(e.h, FillUpper, OperationConjugateTranspose, DiagonalNonUnit, m(3, 3), v(3)))
	require.NoError(t, Geam(e.h, OperationTranspose, OperationNone, 1, m(3, 2), 1, m(2, 3), m(2, 3)))
	require.NoError(t, Gemv(e.h, OperationTranspose, 1, m(3, 2), v(3), 0, v(2)))
	lines := calls()
	assert.Equal(t, []string{
		"cublasCgemm_v2 ta=1 tb=2 m=2 n=4 k=3 lda=3 ldb=4 ldc=2 mode=0",
		"cublasSgemm_v2 ta=0 tb=1 m=2 n=4 k=3 lda=2 ldb=4 ldc=2 mode=0",
		"cublasStrsm_v2 side=1 uplo=1 trans=1 diag=1 m=2 n=3",
		"cublasStrmm_v2 side=0 uplo=0 trans=0 diag=0 m=2 n=3",
		"cublasSsymv_v2 uplo=0 n=3",
		"cublasSsyrk_v2 uplo=1 trans=1 n=3 k=4",
		"cublasSsymm_v2 side=1 uplo=0 m=2 n=3",
		"cublasStrsv_v2 uplo=1 trans=2 diag=0 n=3",
		"cublasSgeam ta=1 tb=0 m=2 n=3",
		"cublasSgemv_v2 trans=1 m=3 n=2 lda=3",
	}, lines)
}

// GemmEx: data types per cudaDataType, compute types per cuBLAS, the
// scalars of the compute type (a wrong scalar type would log a wrong
// value), the default algorithm, and D other than C filled from C first.
func TestNVIDIAGemmEx(t *testing.T) {
	e := useFake(t, fakeNVIDIA)
	calls := callLog(t)
	h16 := Mat[hip.Half](newMat[hip.Half](t, e, 4, 4, 0).b, 4, 4)
	b16 := Mat[hip.BFloat16](newMat[hip.BFloat16](t, e, 4, 4, 0).b, 4, 4)
	f32 := func() Matrix[float32] { return Mat[float32](newMat[float32](t, e, 4, 4, 0).b, 4, 4) }
	i8 := Mat[int8](newMat[int8](t, e, 4, 4, 0).b, 4, 4)
	f64 := Mat[float64](newMat[float64](t, e, 4, 4, 0).b, 4, 4)
	i32 := Mat[int32](newMat[int32](t, e, 4, 4, 0).b, 4, 4)
	c, d := f32(), f32()
	calls()

	require.NoError(t, GemmEx(e.h, OperationNone, OperationNone, 1.5, h16, h16, 0.25, h16, h16))
	require.NoError(t, GemmEx(e.h, OperationTranspose, OperationNone, 1.5, b16, b16, 0.25, c, c))
	require.NoError(t, GemmEx(e.h, OperationNone, OperationNone, 2, i8, i8, -3, i32, i32))
	require.NoError(t, GemmEx(e.h, OperationNone, OperationTranspose, -1, c, c, 0.5, d, d, WithGemmAlgo(GemmAlgoSolutionIndex, 3)))
	require.NoError(t, GemmEx(e.h, OperationNone, OperationNone, 0.125, f64, f64, 2, f64, f64))
	assert.Equal(t, []string{
		"cublasGemmEx ta=0 tb=0 m=4 n=4 k=4 Atype=2 Btype=2 Ctype=2 ldc=4 compute=68 algo=-1 alpha=1.5 beta=0.25 batch=1",
		"cublasGemmEx ta=1 tb=0 m=4 n=4 k=4 Atype=14 Btype=14 Ctype=0 ldc=4 compute=68 algo=-1 alpha=1.5 beta=0.25 batch=1",
		"cublasGemmEx ta=0 tb=0 m=4 n=4 k=4 Atype=3 Btype=3 Ctype=10 ldc=4 compute=72 algo=-1 alpha=2 beta=-3 batch=1",
		"cublasGemmEx ta=0 tb=1 m=4 n=4 k=4 Atype=0 Btype=0 Ctype=0 ldc=4 compute=68 algo=-1 alpha=-1 beta=0.5 batch=1",
		"cublasGemmEx ta=0 tb=0 m=4 n=4 k=4 Atype=1 Btype=1 Ctype=1 ldc=4 compute=70 algo=-1 alpha=0.125 beta=2 batch=1",
	}, testenv.Logged(calls(), "cublasGemmEx"))

	// D other than C: a copy of C into D first (4 rows of 4 bytes, pitches
	// of each ld), then cuBLAS on D; with beta 0, C is not read: no copy.
	d2 := Matrix[float32]{Buf: newMat[float32](t, e, 6, 4, 0).b, Rows: 4, Cols: 4, Ld: 6}
	require.NoError(t, GemmEx(e.h, OperationNone, OperationNone, 1, c, c, 1, c, d2))
	lines := calls()
	assert.Equal(t, []string{"cudaMemcpy2DAsync dpitch=24 spitch=16 width=16 height=4"}, testenv.Logged(lines, "cudaMemcpy2DAsync"))
	assert.Contains(t, testenv.Logged(lines, "cublasGemmEx")[0], "ldc=6")
	require.NoError(t, GemmEx(e.h, OperationNone, OperationNone, 1, c, c, 0, c, d2))
	assert.Empty(t, testenv.Logged(calls(), "cudaMemcpy2DAsync"))

	// Strided batches: packed ones copy in one go, others entry by entry.
	sc := StridedMatrix[float32]{Matrix: Mat[float32](newMat[float32](t, e, 4, 12, 0).b, 4, 4), Stride: 16}
	sd := StridedMatrix[float32]{Matrix: Mat[float32](newMat[float32](t, e, 4, 12, 0).b, 4, 4), Stride: 16}
	sdGaps := StridedMatrix[float32]{Matrix: Mat[float32](newMat[float32](t, e, 4, 16, 0).b, 4, 4), Stride: 20}
	require.NoError(t, GemmStridedBatchedEx(e.h, OperationNone, OperationNone, 1, sc, sc, 1, sc, sd, 3))
	require.NoError(t, GemmStridedBatchedEx(e.h, OperationNone, OperationNone, 1, sc, sc, 1, sc, sdGaps, 3))
	lines = calls()
	assert.Equal(t, []string{
		"cudaMemcpy2DAsync dpitch=16 spitch=16 width=16 height=12",
		"cudaMemcpy2DAsync dpitch=16 spitch=16 width=16 height=4",
		"cudaMemcpy2DAsync dpitch=16 spitch=16 width=16 height=4",
		"cudaMemcpy2DAsync dpitch=16 spitch=16 width=16 height=4",
	}, testenv.Logged(lines, "cudaMemcpy2DAsync"))
	assert.Len(t, testenv.Logged(lines, "cublasGemmStridedBatchedEx"), 2)
	assert.Contains(t, testenv.Logged(lines, "cublasGemmStridedBatchedEx")[0], "batch=3")
}

// Level-1 batched forms, which cuBLAS lacks, loop over the batch.
func TestNVIDIABatchLoops(t *testing.T) {
	e := useFake(t, fakeNVIDIA)
	calls := callLog(t)
	vs := func() []Vector[float32] {
		out := make([]Vector[float32], 3)
		for i := range out {
			out[i] = Vec[float32](newVec[float32](t, e, 5, 1).b, 5)
		}
		return out
	}
	x, y := vs(), vs()
	sx := StridedVector[float32]{Vector: Vec[float32](newVec[float32](t, e, 30, 1).b, 5), Stride: 8}
	calls()
	require.NoError(t, AxpyBatched(e.h, 2, x, y))
	_, err := DotStridedBatched(e.h, sx, sx, 3)
	require.NoError(t, err)
	_, err = IamaxBatched(e.h, x)
	require.NoError(t, err)
	require.NoError(t, GemmBatched(e.h, OperationNone, OperationNone, 1, []Matrix[float32]{Mat[float32](x[0].Buf, 2, 2)}, []Matrix[float32]{Mat[float32](x[1].Buf, 2, 2)}, 0, []Matrix[float32]{Mat[float32](y[0].Buf, 2, 2)}))
	lines := calls()
	assert.Len(t, testenv.Logged(lines, "cublasSaxpy_v2 n=5"), 3)
	assert.Len(t, testenv.Logged(lines, "cublasSdot_v2 n=5 incx=1 incy=1 mode=0"), 3)
	assert.Len(t, testenv.Logged(lines, "cublasIsamax_v2 n=5"), 3)
	assert.Equal(t, []string{"cublasSgemmBatched ta=0 tb=0 m=2 n=2 k=2 batch=1"}, testenv.Logged(lines, "cublasSgemm"), "gemm has cuBLAS's own batched form")
}

func TestNVIDIAModesAndWorkspace(t *testing.T) {
	e := useFake(t, fakeNVIDIA)
	calls := callLog(t)
	x := Vec[float32](newVec[float32](t, e, 4, 1).b, 4)
	res := Vec[float32](newVec[float32](t, e, 1, 1).b, 1)
	calls()

	require.NoError(t, DotTo(e.h, x, x, res))
	_, err := Dot(e.h, x, x)
	require.NoError(t, err)
	assert.Equal(t, []string{"cublasSetPointerMode_v2 mode=1", "cublasSdot_v2 n=4 incx=1 incy=1 mode=1", "cublasSetPointerMode_v2 mode=0", "cublasSdot_v2 n=4 incx=1 incy=1 mode=0"}, calls())

	require.NoError(t, e.h.SetMathMode(Xf32XdlMathOp))
	mm, err := e.h.MathMode()
	require.NoError(t, err)
	assert.Equal(t, Xf32XdlMathOp, mm)
	require.NoError(t, e.h.SetMathMode(DefaultMath))
	require.NoError(t, e.h.SetAtomicsMode(AtomicsNotAllowed))
	require.NoError(t, e.h.SetAtomicsMode(AtomicsAllowed))
	am, err := e.h.AtomicsMode()
	require.NoError(t, err)
	assert.Equal(t, AtomicsAllowed, am)
	assert.Equal(t, []string{"cublasSetMathMode mode=3", "cublasSetMathMode mode=0", "cublasSetAtomicsMode mode=0", "cublasSetAtomicsMode mode=1"}, calls())

	// cuBLAS forgets a workspace when its stream is set: the translation
	// gives it back.
	n, err := e.h.WorkspaceSize()
	require.NoError(t, err)
	assert.Zero(t, n, "cuBLAS's own workspace reports 0")
	require.NoError(t, e.h.SetWorkspaceSize(1<<20))
	n, _ = e.h.WorkspaceSize()
	assert.Equal(t, 1<<20, n)
	s2, err := e.dev.NewStream()
	require.NoError(t, err)
	defer s2.Close()
	require.NoError(t, e.h.SetStream(s2))
	require.NoError(t, e.h.SetWorkspace(nil))
	managed, err := e.h.ManagesWorkspace()
	require.NoError(t, err)
	assert.True(t, managed)
	assert.Equal(t, []string{
		"cublasSetWorkspace_v2 size=1048576",
		"cublasSetStream_v2", "cublasSetWorkspace_v2 size=1048576",
		"cublasSetStream_v2",
	}, calls())
	require.NoError(t, e.h.SetStream(e.stream))
}
