// A reference BLAS on host memory for the fake rocBLAS and the fake cuBLAS
// of package rocblas's tier-0 tests: the fakes' "device" memory is host
// memory, so they compute the real results, and the tests that run on a GPU
// in tier 2 run against them too. Everything is computed in double (or
// double complex) and rounded once when stored.
//
// Enums are abstract here: trans 0 N, 1 T, 2 C; uplo 0 lower, 1 upper;
// diag 0 non-unit, 1 unit; side 0 left, 1 right. Each fake translates its
// API's values. Increments follow reference BLAS: a negative increment
// walks the same elements backwards.
#ifndef RG_REFBLAS_H
#define RG_REFBLAS_H

#include <complex.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef double _Complex zc;

// note appends a line to the file ROCM_GO_FAKE_BLAS_LOG names, if any: the
// fakes' record of what they were called with.
static void note(const char* fmt, ...) {
	const char* path = getenv("ROCM_GO_FAKE_BLAS_LOG");
	if (path == NULL || *path == 0) return;
	FILE* f = fopen(path, "a");
	if (f == NULL) return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}

enum { REF_N = 0, REF_T = 1, REF_C = 2 };
enum { REF_LOWER = 0, REF_UPPER = 1 };
enum { REF_NONUNIT = 0, REF_UNIT = 1 };
enum { REF_LEFT = 0, REF_RIGHT = 1 };

// Element types, by code: s, d, c, z, h, bf16, i8, i32.
enum { REF_S, REF_D, REF_CPLX, REF_Z, REF_H, REF_BF, REF_I8, REF_I32 };

static float ref_half_to_float(uint16_t h) {
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
	if (exp == 0x1f) {
		bits = sign | 0x7f800000 | man << 13;
	} else if (exp != 0) {
		bits = sign | (exp - 15 + 127) << 23 | man << 13;
	} else if (man == 0) {
		bits = sign;
	} else {
		uint32_t e = 127 - 15 + 1;
		while ((man & 0x400) == 0) man <<= 1, e--;
		bits = sign | e << 23 | (man & 0x3ff) << 13;
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

// ref_float_to_half rounds to nearest even (normal and subnormal ranges).
static uint16_t ref_float_to_half(float f) {
	uint32_t b;
	memcpy(&b, &f, 4);
	uint16_t sign = (b >> 16) & 0x8000;
	int exp = (int)((b >> 23) & 0xff) - 127;
	uint32_t man = b & 0x7fffff;
	if (exp == 128) return sign | (man ? 0x7e00 : 0x7c00);
	if (exp > 15) return sign | 0x7c00;
	if (exp >= -14) {
		uint32_t h = (uint32_t)(exp + 15) << 10 | man >> 13, rest = man & 0x1fff;
		if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
		return sign | (uint16_t)h;
	}
	if (exp >= -25) {
		uint32_t m = man | 0x800000, shift = (uint32_t)(-exp - 14 + 13), h = m >> shift, rest = m & ((1u << shift) - 1),
		         half = 1u << (shift - 1);
		if (rest > half || (rest == half && (h & 1))) h++;
		return sign | (uint16_t)h;
	}
	return sign;
}

static float ref_bf16_to_float(uint16_t v) {
	uint32_t b = (uint32_t)v << 16;
	float f;
	memcpy(&f, &b, 4);
	return f;
}

static uint16_t ref_float_to_bf16(float f) {
	uint32_t b;
	memcpy(&b, &f, 4);
	if ((b & 0x7fffffff) > 0x7f800000) return (uint16_t)(b >> 16 | 0x40);
	b += 0x7fff + ((b >> 16) & 1);
	return (uint16_t)(b >> 16);
}

static size_t ref_size(int t) {
	static const size_t sizes[] = {4, 8, 8, 16, 2, 2, 1, 4};
	return sizes[t];
}

// ref_load reads element i of a typed array as a double complex.
static zc ref_load(int t, const void* p, long i) {
	switch (t) {
	case REF_S: return ((const float*)p)[i];
	case REF_D: return ((const double*)p)[i];
	case REF_CPLX: return ((const float _Complex*)p)[i];
	case REF_Z: return ((const double _Complex*)p)[i];
	case REF_H: return ref_half_to_float(((const uint16_t*)p)[i]);
	case REF_BF: return ref_bf16_to_float(((const uint16_t*)p)[i]);
	case REF_I8: return ((const int8_t*)p)[i];
	case REF_I32: return ((const int32_t*)p)[i];
	}
	return 0;
}

// ref_store writes v as element i, rounding once (integers saturate).
static void ref_store(int t, void* p, long i, zc v) {
	switch (t) {
	case REF_S: ((float*)p)[i] = (float)creal(v); break;
	case REF_D: ((double*)p)[i] = creal(v); break;
	case REF_CPLX: ((float _Complex*)p)[i] = (float _Complex)v; break;
	case REF_Z: ((double _Complex*)p)[i] = v; break;
	case REF_H: ((uint16_t*)p)[i] = ref_float_to_half((float)creal(v)); break;
	case REF_BF: ((uint16_t*)p)[i] = ref_float_to_bf16((float)creal(v)); break;
	case REF_I8: ((int8_t*)p)[i] = (int8_t)creal(v); break;
	case REF_I32: ((int32_t*)p)[i] = (int32_t)creal(v); break;
	}
}

static int ref_cplx(int t) { return t == REF_CPLX || t == REF_Z; }

// ref_ix is the offset of element i of a vector of n with increment inc.
static long ref_ix(long i, long n, long inc) { return inc > 0 ? i * inc : (n - 1 - i) * -inc; }

// ---- Level 1 ----

static void ref_axpy(int t, int n, const void* alpha, const void* x, int incx, void* y, int incy) {
	zc a = ref_load(t, alpha, 0);
	for (long i = 0; i < n; i++) {
		long ix = ref_ix(i, n, incx), iy = ref_ix(i, n, incy);
		ref_store(t, y, iy, a * ref_load(t, x, ix) + ref_load(t, y, iy));
	}
}

static void ref_dot(int t, int conj_x, int n, const void* x, int incx, const void* y, int incy, void* r) {
	zc s = 0;
	for (long i = 0; i < n; i++) {
		zc xv = ref_load(t, x, ref_ix(i, n, incx));
		s += (conj_x ? conj(xv) : xv) * ref_load(t, y, ref_ix(i, n, incy));
	}
	ref_store(t, r, 0, s);
}

// The real type of t: the result type of nrm2 and asum.
static int ref_real(int t) { return t == REF_CPLX ? REF_S : t == REF_Z ? REF_D : t; }

static void ref_nrm2(int t, int n, const void* x, int incx, void* r) {
	double s = 0;
	for (long i = 0; i < n; i++) {
		zc v = ref_load(t, x, ref_ix(i, n, incx));
		s += creal(v) * creal(v) + cimag(v) * cimag(v);
	}
	ref_store(ref_real(t), r, 0, sqrt(s));
}

static double ref_mag(zc v) { return fabs(creal(v)) + fabs(cimag(v)); }

static void ref_asum(int t, int n, const void* x, int incx, void* r) {
	double s = 0;
	for (long i = 0; i < n; i++) s += ref_mag(ref_load(t, x, ref_ix(i, n, incx)));
	ref_store(ref_real(t), r, 0, s);
}

// ref_iamax returns the 1-based index of the first largest (or, with min,
// smallest) magnitude; 0 for no elements. BLAS's iamax takes elements in
// storage order from x (a negative increment gives 0 here as in BLAS).
static void ref_iamax(int t, int min, int n, const void* x, int incx, int32_t* r) {
	*r = 0;
	if (n < 1 || incx <= 0) return;
	double best = 0;
	for (long i = 0; i < n; i++) {
		double m = ref_mag(ref_load(t, x, i * incx));
		if (i == 0 || (min ? m < best : m > best)) best = m, *r = (int32_t)(i + 1);
	}
}

static void ref_scal(int t, int n, const void* alpha, void* x, int incx) {
	zc a = ref_load(t, alpha, 0);
	for (long i = 0; i < n; i++) {
		long ix = ref_ix(i, n, incx);
		ref_store(t, x, ix, a * ref_load(t, x, ix));
	}
}

static void ref_copy(int t, int swap, int n, void* x, int incx, void* y, int incy) {
	for (long i = 0; i < n; i++) {
		long ix = ref_ix(i, n, incx), iy = ref_ix(i, n, incy);
		zc xv = ref_load(t, x, ix), yv = ref_load(t, y, iy);
		ref_store(t, y, iy, xv);
		if (swap) ref_store(t, x, ix, yv);
	}
}

// ref_rot: c real (of the real type), s of type ts.
static void ref_rot(int t, int n, void* x, int incx, void* y, int incy, const void* c, const void* s, int ts) {
	double cv = creal(ref_load(ref_real(t), c, 0));
	zc sv = ref_load(ts, s, 0);
	for (long i = 0; i < n; i++) {
		long ix = ref_ix(i, n, incx), iy = ref_ix(i, n, incy);
		zc xv = ref_load(t, x, ix), yv = ref_load(t, y, iy);
		ref_store(t, x, ix, cv * xv + sv * yv);
		ref_store(t, y, iy, cv * yv - conj(sv) * xv);
	}
}

// ---- Level 2 and 3 ----

// ref_op returns op(A)(i, j) of a column-major A.
static zc ref_op(int t, int trans, const void* a, int lda, long i, long j) {
	if (trans == REF_N) return ref_load(t, a, i + j * lda);
	zc v = ref_load(t, a, j + i * lda);
	return trans == REF_C ? conj(v) : v;
}

// ref_update stores alpha*s + beta*old, not reading old when beta is 0.
static void ref_update(int t, void* c, long i, zc alpha, zc s, zc beta) {
	zc v = alpha * s;
	if (beta != 0) v += beta * ref_load(t, c, i);
	ref_store(t, c, i, v);
}

static void ref_gemv(int t, int trans, int m, int n, const void* alpha, const void* a, int lda, const void* x, int incx,
                     const void* beta, void* y, int incy) {
	int rows = trans == REF_N ? m : n, cols = trans == REF_N ? n : m;
	zc al = ref_load(t, alpha, 0), be = ref_load(t, beta, 0);
	for (long i = 0; i < rows; i++) {
		zc s = 0;
		for (long j = 0; j < cols; j++) s += ref_op(t, trans, a, lda, i, j) * ref_load(t, x, ref_ix(j, cols, incx));
		ref_update(t, y, ref_ix(i, rows, incy), al, s, be);
	}
}

static void ref_ger(int t, int conj_y, int m, int n, const void* alpha, const void* x, int incx, const void* y, int incy,
                    void* a, int lda) {
	zc al = ref_load(t, alpha, 0);
	for (long j = 0; j < n; j++) {
		zc yv = ref_load(t, y, ref_ix(j, n, incy));
		if (conj_y) yv = conj(yv);
		for (long i = 0; i < m; i++) {
			long k = i + j * lda;
			ref_store(t, a, k, ref_load(t, a, k) + al * ref_load(t, x, ref_ix(i, m, incx)) * yv);
		}
	}
}

// ref_sym returns A(i, j) of a symmetric A stored in its uplo triangle.
static zc ref_sym(int t, int uplo, const void* a, int lda, long i, long j) {
	if ((uplo == REF_UPPER) == (i <= j)) return ref_load(t, a, i + j * lda);
	return ref_load(t, a, j + i * lda);
}

static void ref_symv(int t, int uplo, int n, const void* alpha, const void* a, int lda, const void* x, int incx,
                     const void* beta, void* y, int incy) {
	zc al = ref_load(t, alpha, 0), be = ref_load(t, beta, 0);
	for (long i = 0; i < n; i++) {
		zc s = 0;
		for (long j = 0; j < n; j++) s += ref_sym(t, uplo, a, lda, i, j) * ref_load(t, x, ref_ix(j, n, incx));
		ref_update(t, y, ref_ix(i, n, incy), al, s, be);
	}
}

// ref_tri returns a dense n×n op(A) of a triangular A (row-major, i*n+j).
static zc* ref_tri(int t, int uplo, int trans, int diag, int n, const void* a, int lda) {
	zc* d = calloc((size_t)n * n, sizeof(zc));
	for (long i = 0; i < n; i++) {
		for (long j = 0; j < n; j++) {
			// Element (i, j) of op(A) is element (r, c) of A.
			long r = trans == REF_N ? i : j, c = trans == REF_N ? j : i;
			int in = uplo == REF_UPPER ? r <= c : r >= c;
			if (!in) continue;
			zc v = r == c && diag == REF_UNIT ? 1 : ref_load(t, a, r + c * lda);
			d[i * n + j] = trans == REF_C ? conj(v) : v;
		}
	}
	return d;
}

static void ref_trmv(int t, int uplo, int trans, int diag, int n, const void* a, int lda, void* x, int incx) {
	zc* d = ref_tri(t, uplo, trans, diag, n, a, lda);
	zc* out = calloc((size_t)n, sizeof(zc));
	for (long i = 0; i < n; i++)
		for (long j = 0; j < n; j++) out[i] += d[i * n + j] * ref_load(t, x, ref_ix(j, n, incx));
	for (long i = 0; i < n; i++) ref_store(t, x, ref_ix(i, n, incx), out[i]);
	free(d), free(out);
}

// ref_solve solves the triangular n×n system d*x = b in place (b of n).
static void ref_solve(const zc* d, int n, zc* b) {
	int lower = 1;
	for (long i = 0; i < n && lower; i++)
		for (long j = i + 1; j < n; j++)
			if (d[i * n + j] != 0) lower = 0;
	if (lower) {
		for (long i = 0; i < n; i++) {
			zc s = b[i];
			for (long j = 0; j < i; j++) s -= d[i * n + j] * b[j];
			b[i] = s / d[i * n + i];
		}
	} else {
		for (long i = n - 1; i >= 0; i--) {
			zc s = b[i];
			for (long j = i + 1; j < n; j++) s -= d[i * n + j] * b[j];
			b[i] = s / d[i * n + i];
		}
	}
}

static void ref_trsv(int t, int uplo, int trans, int diag, int n, const void* a, int lda, void* x, int incx) {
	zc* d = ref_tri(t, uplo, trans, diag, n, a, lda);
	zc* b = calloc((size_t)n, sizeof(zc));
	for (long i = 0; i < n; i++) b[i] = ref_load(t, x, ref_ix(i, n, incx));
	ref_solve(d, n, b);
	for (long i = 0; i < n; i++) ref_store(t, x, ref_ix(i, n, incx), b[i]);
	free(d), free(b);
}

// ref_gemm_typed computes C = alpha*op(A)*op(B) + beta*C with A and B of
// type ta, C of type tc and the scalars of type ts.
static void ref_gemm_typed(int ta, int tc, int ts, int transa, int transb, int m, int n, int k, const void* alpha,
                           const void* a, int lda, const void* b, int ldb, const void* beta, const void* c, int ldc,
                           void* d, int ldd) {
	zc al = ref_load(ts, alpha, 0), be = ref_load(ts, beta, 0);
	for (long j = 0; j < n; j++) {
		for (long i = 0; i < m; i++) {
			zc s = 0;
			for (long l = 0; l < k; l++) s += ref_op(ta, transa, a, lda, i, l) * ref_op(ta, transb, b, ldb, l, j);
			zc v = al * s;
			if (be != 0) v += be * ref_load(tc, c, i + j * ldc);
			ref_store(tc, d, i + j * ldd, v);
		}
	}
}

static void ref_gemm(int t, int transa, int transb, int m, int n, int k, const void* alpha, const void* a, int lda,
                     const void* b, int ldb, const void* beta, void* c, int ldc) {
	ref_gemm_typed(t, t, t, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, c, ldc);
}

static void ref_trsm(int t, int side, int uplo, int trans, int diag, int m, int n, const void* alpha, const void* a,
                     int lda, void* b, int ldb) {
	int k = side == REF_LEFT ? m : n;
	zc* d = ref_tri(t, uplo, trans, diag, k, a, lda);
	zc al = ref_load(t, alpha, 0);
	if (side == REF_LEFT) {
		// op(A)*X = alpha*B, column by column.
		zc* col = calloc((size_t)m, sizeof(zc));
		for (long j = 0; j < n; j++) {
			for (long i = 0; i < m; i++) col[i] = al * ref_load(t, b, i + j * ldb);
			ref_solve(d, m, col);
			for (long i = 0; i < m; i++) ref_store(t, b, i + j * ldb, col[i]);
		}
		free(col);
	} else {
		// X*op(A) = alpha*B: row by row, op(A)ᵀ*xᵀ = alpha*bᵀ.
		zc* dt = calloc((size_t)n * n, sizeof(zc));
		for (long i = 0; i < n; i++)
			for (long j = 0; j < n; j++) dt[i * n + j] = d[j * n + i];
		zc* row = calloc((size_t)n, sizeof(zc));
		for (long i = 0; i < m; i++) {
			for (long j = 0; j < n; j++) row[j] = al * ref_load(t, b, i + j * ldb);
			ref_solve(dt, n, row);
			for (long j = 0; j < n; j++) ref_store(t, b, i + j * ldb, row[j]);
		}
		free(dt), free(row);
	}
	free(d);
}

static void ref_trmm(int t, int side, int uplo, int trans, int diag, int m, int n, const void* alpha, const void* a,
                     int lda, const void* b, int ldb, void* c, int ldc) {
	int k = side == REF_LEFT ? m : n;
	zc* d = ref_tri(t, uplo, trans, diag, k, a, lda);
	zc al = ref_load(t, alpha, 0);
	zc* out = calloc((size_t)m * n, sizeof(zc));
	for (long j = 0; j < n; j++) {
		for (long i = 0; i < m; i++) {
			zc s = 0;
			if (side == REF_LEFT) {
				for (long l = 0; l < m; l++) s += d[i * m + l] * ref_load(t, b, l + j * ldb);
			} else {
				for (long l = 0; l < n; l++) s += ref_load(t, b, i + l * ldb) * d[l * n + j];
			}
			out[i + j * m] = al * s;
		}
	}
	for (long j = 0; j < n; j++)
		for (long i = 0; i < m; i++) ref_store(t, c, i + j * ldc, out[i + j * m]);
	free(d), free(out);
}

static void ref_syrk(int t, int uplo, int trans, int n, int k, const void* alpha, const void* a, int lda,
                     const void* beta, void* c, int ldc) {
	zc al = ref_load(t, alpha, 0), be = ref_load(t, beta, 0);
	int tr = trans == REF_N ? REF_N : REF_T; // symmetric: no conjugation
	for (long j = 0; j < n; j++) {
		for (long i = 0; i < n; i++) {
			if (uplo == REF_UPPER ? i > j : i < j) continue;
			zc s = 0;
			for (long l = 0; l < k; l++) s += ref_op(t, tr, a, lda, i, l) * ref_op(t, tr, a, lda, j, l);
			ref_update(t, c, i + j * ldc, al, s, be);
		}
	}
}

static void ref_symm(int t, int side, int uplo, int m, int n, const void* alpha, const void* a, int lda, const void* b,
                     int ldb, const void* beta, void* c, int ldc) {
	zc al = ref_load(t, alpha, 0), be = ref_load(t, beta, 0);
	for (long j = 0; j < n; j++) {
		for (long i = 0; i < m; i++) {
			zc s = 0;
			if (side == REF_LEFT) {
				for (long l = 0; l < m; l++) s += ref_sym(t, uplo, a, lda, i, l) * ref_load(t, b, l + j * ldb);
			} else {
				for (long l = 0; l < n; l++) s += ref_load(t, b, i + l * ldb) * ref_sym(t, uplo, a, lda, l, j);
			}
			ref_update(t, c, i + j * ldc, al, s, be);
		}
	}
}

static void ref_geam(int t, int transa, int transb, int m, int n, const void* alpha, const void* a, int lda,
                     const void* beta, const void* b, int ldb, void* c, int ldc) {
	zc al = ref_load(t, alpha, 0), be = ref_load(t, beta, 0);
	zc* out = calloc((size_t)m * n, sizeof(zc));
	for (long j = 0; j < n; j++)
		for (long i = 0; i < m; i++) {
			zc v = 0;
			if (al != 0) v += al * ref_op(t, transa, a, lda, i, j);
			if (be != 0) v += be * ref_op(t, transb, b, ldb, i, j);
			out[i + j * m] = v;
		}
	for (long j = 0; j < n; j++)
		for (long i = 0; i < m; i++) ref_store(t, c, i + j * ldc, out[i + j * m]);
	free(out);
}

#endif
