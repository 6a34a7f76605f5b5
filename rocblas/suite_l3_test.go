package rocblas

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
)

// Level 3 of the suite (suite_test.go).

// mnk are the gemm shapes: non-square, odd, with 1 and the large size in
// each place.
func mnk(e *env) [][3]int {
	return [][3]int{{1, 1, 1}, {e.small, e.mid, 1}, {e.mid, 1, e.small}, {1, e.small, e.large}, {e.small, e.small, e.large}, {e.large, e.small, e.mid}, {e.mid, e.mid, e.small}}
}

// stored returns the stored rows and columns of a matrix whose op is
// rows×cols.
func stored(t Operation, rows, cols int) (int, int) { return opDims(t, rows, cols) }

func gemmRef(ta, tb Operation, k int, alpha complex128, a, b acc, beta complex128, c acc) func(i, j int) complex128 {
	return func(i, j int) complex128 {
		var s complex128
		for l := 0; l < k; l++ {
			s += opAt(ta, a, i, l) * opAt(tb, b, l, j)
		}
		if beta == 0 {
			return alpha * s
		}
		return alpha*s + beta*c(i, j)
	}
}

func gemmOps[T GemmElem]() []Operation {
	k, _, _ := kind[T]()
	if k == kindC || k == kindZ {
		return []Operation{OperationNone, OperationTranspose, OperationConjugateTranspose}
	}
	return []Operation{OperationNone, OperationTranspose}
}

func testGemm[T GemmElem](t *testing.T, e *env) {
	tol := tolerance[T]()
	for _, s := range mnk(e) {
		m, n, k := s[0], s[1], s[2]
		var zero T
		if _, half := any(zero).(hip.Half); half && k > e.mid {
			continue // half-precision accumulation over the large size is not what hgemm is for
		}
		for _, ta := range gemmOps[T]() {
			for _, tb := range gemmOps[T]() {
				t.Run(fmt.Sprintf("%dx%dx%d_%s_%s", m, n, k, ta, tb), func(t *testing.T) {
					alpha, beta := random[T](e.rng), random[T](e.rng)
					ar, ac := stored(ta, m, k)
					br, bc := stored(tb, k, n)
					a, b, c := newMat[T](t, e, ar, ac, 2), newMat[T](t, e, br, bc, 1), newMat[T](t, e, m, n, 3)
					a.fix()
					b.fix()
					c.fix()
					require.NoError(t, Gemm(e.h, ta, tb, alpha, a.m, b.m, beta, c.m))
					checker[T]{t, "Gemm", tol}.check(c.host, c.read(t), matWant(c.m, gemmRef(ta, tb, k, toC(alpha), a.at, b.at, toC(beta), c.at), nil))
					a.unchanged(t, "A is not written")

					// beta 0: C is not read, so poison is overwritten.
					c.poison(t)
					require.NoError(t, Gemm(e.h, ta, tb, alpha, a.m, b.m, 0, c.m))
					checker[T]{t, "Gemm beta 0", tol}.check(c.host, c.read(t), matWant(c.m, gemmRef(ta, tb, k, toC(alpha), a.at, b.at, 0, nil), nil))
					if m*n*k > 200_000 {
						return
					}

					as, bs, cs := matBatch[T](t, e, ar, ac, 1), matBatch[T](t, e, br, bc, 2), matBatch[T](t, e, m, n, 1)
					require.NoError(t, GemmBatched(e.h, ta, tb, alpha, matsOfBatch(as), matsOfBatch(bs), beta, matsOfBatch(cs)))
					for i := range cs {
						checker[T]{t, fmt.Sprintf("GemmBatched[%d]", i), tol}.check(cs[i].host, cs[i].read(t),
							matWant(cs[i].m, gemmRef(ta, tb, k, toC(alpha), as[i].at, bs[i].at, toC(beta), cs[i].at), nil))
					}

					sa, sb, sc := newStridedMat[T](t, e, ar, ac, 1), newStridedMat[T](t, e, br, bc, 0), newStridedMat[T](t, e, m, n, 2)
					sc.poison(t)
					require.NoError(t, GemmStridedBatched(e.h, ta, tb, alpha, sa.sm, sb.sm, 0, sc.sm, batch))
					checkStrided(t, "GemmStridedBatched", sc, tol, func(i int) func(r, c int) complex128 {
						return gemmRef(ta, tb, k, toC(alpha), sa.entry(i).at, sb.entry(i).at, 0, nil)
					})
				})
			}
		}
	}
}

// checkStrided compares each entry of a strided output with want(entry).
func checkStrided[T Numeric](t *testing.T, what string, s smat[T], tol float64, want func(entry int) func(i, j int) complex128) {
	t.Helper()
	var w expect
	for b := 0; b < batch; b++ {
		addMat(&w, s.entry(b).m, want(b), nil)
	}
	checker[T]{t, what, tol}.check(s.host, s.read(t), w)
}

// testGemmEx runs GemmEx and GemmStridedBatchedEx for every pair of types.
func testGemmEx(t *testing.T, e *env) {
	t.Run("f16-f16", func(t *testing.T) { testGemmExTypes[hip.Half, hip.Half](t, e, 2e-3) })
	t.Run("f16-f32", func(t *testing.T) { testGemmExTypes[hip.Half, float32](t, e, 1e-4) })
	t.Run("bf16-bf16", func(t *testing.T) { testGemmExTypes[hip.BFloat16, hip.BFloat16](t, e, 1e-2) })
	t.Run("bf16-f32", func(t *testing.T) { testGemmExTypes[hip.BFloat16, float32](t, e, 1e-4) })
	t.Run("f32-f32", func(t *testing.T) { testGemmExTypes[float32, float32](t, e, 1e-4) })
	t.Run("f64-f64", func(t *testing.T) { testGemmExTypes[float64, float64](t, e, 1e-11) })
	t.Run("i8-i32", func(t *testing.T) { testGemmExTypes[int8, int32](t, e, 0) })
}

func testGemmExTypes[A ExIn, C ExOut](t *testing.T, e *env, tol float64) {
	_, at, _ := kind[A]()
	shapes := [][3]int{{1, 1, 1}, {e.small, e.mid, e.small}, {e.mid, e.small, e.large}}
	alpha, beta := 1.25, -0.75
	if at == DatatypeI8R {
		// int8: sizes, leading dimensions, offsets and strides in multiples
		// of 4 (cuBLAS's int8 kernels want them), and whole scalars.
		shapes = [][3]int{{4, 8, 4}, {8, 4 * (e.mid / 4), 16}, {4 * (e.mid / 4), 8, 4 * (e.large / 4)}}
		alpha, beta = 2, -3
		aligned := *e
		aligned.align = 4
		e = &aligned
	}
	for _, s := range shapes {
		m, n, k := s[0], s[1], s[2]
		for _, ta := range []Operation{OperationNone, OperationTranspose} {
			for _, tb := range []Operation{OperationNone, OperationTranspose} {
				t.Run(fmt.Sprintf("%dx%dx%d_%s_%s", m, n, k, ta, tb), func(t *testing.T) {
					ar, ac := stored(ta, m, k)
					br, bc := stored(tb, k, n)
					a, b := newMat[A](t, e, ar, ac, 1), newMat[A](t, e, br, bc, 2)
					c, d := newMat[C](t, e, m, n, 1), newMat[C](t, e, m, n, 3)
					a.fix()
					b.fix()
					c.fix()
					d.fix()
					d.poison(t)
					want := tabulate(m, n, gemmRef(ta, tb, k, complex(alpha, 0), a.at, b.at, complex(beta, 0), c.at))
					require.NoError(t, GemmEx(e.h, ta, tb, alpha, a.m, b.m, beta, c.m, d.m))
					checker[C]{t, "GemmEx D", tol}.check(d.host, d.read(t), matWant(d.m, want, nil))
					c.unchanged(t, "C is not written when D is another matrix")

					// In place: D is C.
					require.NoError(t, GemmEx(e.h, ta, tb, alpha, a.m, b.m, beta, c.m, c.m))
					checker[C]{t, "GemmEx in place", tol}.check(c.host, c.read(t), matWant(c.m, want, nil))

					sa, sb := newStridedMat[A](t, e, ar, ac, 0), newStridedMat[A](t, e, br, bc, 1)
					sc, sd := newStridedMat[C](t, e, m, n, 2), newStridedMat[C](t, e, m, n, 0)
					sd.poison(t)
					require.NoError(t, GemmStridedBatchedEx(e.h, ta, tb, alpha, sa.sm, sb.sm, beta, sc.sm, sd.sm, batch))
					checkStrided(t, "GemmStridedBatchedEx", sd, tol, func(i int) func(r, c int) complex128 {
						return gemmRef(ta, tb, k, complex(alpha, 0), sa.entry(i).at, sb.entry(i).at, complex(beta, 0), sc.entry(i).at)
					})
					require.NoError(t, GemmStridedBatchedEx(e.h, ta, tb, alpha, sa.sm, sb.sm, beta, sc.sm, sc.sm, batch))
					checkStrided(t, "GemmStridedBatchedEx in place", sc, tol, func(i int) func(r, c int) complex128 {
						return gemmRef(ta, tb, k, complex(alpha, 0), sa.entry(i).at, sb.entry(i).at, complex(beta, 0), sc.entry(i).at)
					})
				})
			}
		}
	}
}

// solveTri solves the triangular system op*x = b (op n×n, triangular).
func solveTri(op acc, n int, b []complex128, lower bool) []complex128 {
	x := append([]complex128(nil), b...)
	if lower {
		for i := 0; i < n; i++ {
			for j := 0; j < i; j++ {
				x[i] -= op(i, j) * x[j]
			}
			x[i] /= op(i, i)
		}
		return x
	}
	for i := n - 1; i >= 0; i-- {
		for j := i + 1; j < n; j++ {
			x[i] -= op(i, j) * x[j]
		}
		x[i] /= op(i, i)
	}
	return x
}

// sideShapes are the m×n shapes of B for trsm, trmm and symm.
func sideShapes(e *env) [][2]int {
	return [][2]int{{1, 1}, {e.small, e.mid}, {e.mid, e.small}, {e.large, e.small}, {e.small, e.large}}
}

// triangularCases runs f for every shape of B and every side, fill,
// transpose and diagonal of a triangular A.
func triangularCases[T Elem](t *testing.T, e *env, f func(t *testing.T, m, n int, side Side, uplo Fill, trans Operation, diag Diagonal)) {
	for _, s := range sideShapes(e) {
		m, n := s[0], s[1]
		for _, side := range []Side{SideLeft, SideRight} {
			for _, uplo := range []Fill{FillUpper, FillLower} {
				for _, trans := range ops[T]() {
					for _, diag := range []Diagonal{DiagonalNonUnit, DiagonalUnit} {
						// Large: left-upper-non-unit and right-lower-unit.
						if e.reduced(m, n) && ((side == SideLeft) != (uplo == FillUpper) || (uplo == FillUpper) != (diag == DiagonalNonUnit)) {
							continue
						}
						t.Run(fmt.Sprintf("%dx%d_%s_%s_%s_%s", m, n, side, uplo, trans, diag), func(t *testing.T) {
							f(t, m, n, side, uplo, trans, diag)
						})
					}
				}
			}
		}
	}
}

func testTrsm[T Elem](t *testing.T, e *env) {
	tol := tolerance[T]()
	triangularCases[T](t, e, func(t *testing.T, m, n int, side Side, uplo Fill, trans Operation, diag Diagonal) {
		ka := sideOrder(side, m, n)
		a := newTri[T](t, e, ka, uplo)
		b := newMat[T](t, e, m, n, 2)
		b.fix()
		alpha := random[T](e.rng)
		op := tabulate(ka, ka, func(i, j int) complex128 { return triAt(uplo, trans, diag, a.at, i, j) })
		lower := (uplo == FillLower) == (trans == OperationNone)
		x := make([]complex128, m*n)
		if side == SideLeft {
			for j := 0; j < n; j++ {
				col := make([]complex128, m)
				for i := range col {
					col[i] = toC(alpha) * b.at(i, j)
				}
				for i, v := range solveTri(op, m, col, lower) {
					x[i+j*m] = v
				}
			}
		} else {
			// X*op(A) = alpha*B: op(A)ᵀ*xᵀ = alpha*bᵀ, row by row.
			opT := func(i, j int) complex128 { return op(j, i) }
			for i := 0; i < m; i++ {
				row := make([]complex128, n)
				for j := range row {
					row[j] = toC(alpha) * b.at(i, j)
				}
				for j, v := range solveTri(opT, n, row, !lower) {
					x[i+j*m] = v
				}
			}
		}
		require.NoError(t, Trsm(e.h, side, uplo, trans, diag, alpha, a.m, b.m))
		checker[T]{t, "Trsm", tol}.check(b.host, b.read(t), matWant(b.m, func(i, j int) complex128 { return x[i+j*m] }, nil))
	})
}

func trmmRef(side Side, op acc, m, n int, alpha complex128, b acc) func(i, j int) complex128 {
	return func(i, j int) complex128 {
		var s complex128
		if side == SideLeft {
			for l := 0; l < m; l++ {
				s += op(i, l) * b(l, j)
			}
		} else {
			for l := 0; l < n; l++ {
				s += b(i, l) * op(l, j)
			}
		}
		return alpha * s
	}
}

func testTrmm[T Elem](t *testing.T, e *env) {
	tol := tolerance[T]()
	triangularCases[T](t, e, func(t *testing.T, m, n int, side Side, uplo Fill, trans Operation, diag Diagonal) {
		a := newTri[T](t, e, sideOrder(side, m, n), uplo)
		b, c := newMat[T](t, e, m, n, 1), newMat[T](t, e, m, n, 2)
		b.fix()
		c.fix()
		c.poison(t)
		alpha := random[T](e.rng)
		ka := sideOrder(side, m, n)
		op := tabulate(ka, ka, func(i, j int) complex128 { return triAt(uplo, trans, diag, a.at, i, j) })
		want := tabulate(m, n, trmmRef(side, op, m, n, toC(alpha), b.at))
		require.NoError(t, Trmm(e.h, side, uplo, trans, diag, alpha, a.m, b.m, c.m))
		checker[T]{t, "Trmm", tol}.check(c.host, c.read(t), matWant(c.m, want, nil))
		b.unchanged(t, "B is not written")
		require.NoError(t, Trmm(e.h, side, uplo, trans, diag, alpha, a.m, b.m, b.m))
		checker[T]{t, "Trmm in place", tol}.check(b.host, b.read(t), matWant(b.m, want, nil))
	})
}

func testSyrk[T Elem](t *testing.T, e *env) {
	tol := tolerance[T]()
	for _, s := range [][2]int{{1, 1}, {e.small, e.mid}, {e.mid, e.small}, {e.small, e.large}, {e.large, e.small}} {
		n, k := s[0], s[1]
		for _, uplo := range []Fill{FillUpper, FillLower} {
			for _, trans := range []Operation{OperationNone, OperationTranspose} {
				if e.reduced(n, k) && (uplo == FillUpper) != (trans == OperationNone) {
					continue
				}
				t.Run(fmt.Sprintf("n%d_k%d_%s_%s", n, k, uplo, trans), func(t *testing.T) {
					ar, ac := stored(trans, n, k)
					a, c := newMat[T](t, e, ar, ac, 1), newMat[T](t, e, n, n, 2)
					a.fix()
					c.fix()
					alpha, beta := random[T](e.rng), random[T](e.rng)
					require.NoError(t, Syrk(e.h, uplo, trans, alpha, a.m, beta, c.m))
					// op(A)*op(A)ᵀ: symmetric, never conjugated.
					want := func(i, j int) complex128 {
						var s complex128
						for l := 0; l < k; l++ {
							s += opAt(trans, a.at, i, l) * opAt(trans, a.at, j, l)
						}
						return toC(alpha)*s + toC(beta)*c.at(i, j)
					}
					inTriangle := func(i, j int) bool { return (uplo == FillUpper) == (i <= j) || i == j }
					checker[T]{t, "Syrk", tol}.check(c.host, c.read(t), matWant(c.m, want, inTriangle))
				})
			}
		}
	}
}

func testSymm[T Elem](t *testing.T, e *env) {
	tol := tolerance[T]()
	for _, s := range sideShapes(e) {
		m, n := s[0], s[1]
		for _, side := range []Side{SideLeft, SideRight} {
			for _, uplo := range []Fill{FillUpper, FillLower} {
				if e.reduced(m, n) && (side == SideLeft) != (uplo == FillUpper) {
					continue
				}
				t.Run(fmt.Sprintf("%dx%d_%s_%s", m, n, side, uplo), func(t *testing.T) {
					ka := sideOrder(side, m, n)
					a, b, c := newMat[T](t, e, ka, ka, 1), newMat[T](t, e, m, n, 2), newMat[T](t, e, m, n, 1)
					a.fix()
					b.fix()
					c.fix()
					alpha, beta := random[T](e.rng), random[T](e.rng)
					sym := tabulate(ka, ka, func(i, j int) complex128 { return symAt(uplo, a.at, i, j) })
					want := func(i, j int) complex128 {
						var s complex128
						if side == SideLeft {
							for l := 0; l < m; l++ {
								s += sym(i, l) * b.at(l, j)
							}
						} else {
							for l := 0; l < n; l++ {
								s += b.at(i, l) * sym(l, j)
							}
						}
						return toC(alpha)*s + toC(beta)*c.at(i, j)
					}
					require.NoError(t, Symm(e.h, side, uplo, alpha, a.m, b.m, beta, c.m))
					checker[T]{t, "Symm", tol}.check(c.host, c.read(t), matWant(c.m, want, nil))
				})
			}
		}
	}
}

func testGeam[T Elem](t *testing.T, e *env) {
	tol := tolerance[T]()
	for _, s := range mn(e) {
		m, n := s[0], s[1]
		for _, ta := range ops[T]() {
			for _, tb := range ops[T]() {
				t.Run(fmt.Sprintf("%dx%d_%s_%s", m, n, ta, tb), func(t *testing.T) {
					ar, ac := stored(ta, m, n)
					br, bc := stored(tb, m, n)
					a, b, c := newMat[T](t, e, ar, ac, 2), newMat[T](t, e, br, bc, 1), newMat[T](t, e, m, n, 1)
					a.fix()
					b.fix()
					c.fix()
					c.poison(t)
					alpha, beta := random[T](e.rng), random[T](e.rng)
					want := func(i, j int) complex128 {
						return toC(alpha)*opAt(ta, a.at, i, j) + toC(beta)*opAt(tb, b.at, i, j)
					}
					require.NoError(t, Geam(e.h, ta, tb, alpha, a.m, beta, b.m, c.m))
					checker[T]{t, "Geam", tol}.check(c.host, c.read(t), matWant(c.m, want, nil))
					if tb == OperationNone && b.m.Rows == c.m.Rows {
						// In place on B.
						require.NoError(t, Geam(e.h, ta, tb, alpha, a.m, beta, b.m, b.m))
						checker[T]{t, "Geam in place", tol}.check(b.host, b.read(t), matWant(b.m, want, nil))
					}
				})
			}
		}
	}
}
