package candle

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
)

// tensorOf makes a tensor of dtype dt from float64 values (converted as
// ToDType converts).
func tensorOf(t testing.TB, dev Device, dt DType, values []float64, shape ...int) *Tensor {
	t.Helper()
	if shape == nil {
		shape = []int{len(values)}
	}
	var x *Tensor
	var err error
	switch dt {
	case F32:
		x, err = FromSlice(dev, mapTo(values, func(v float64) float32 { return float32(v) }), shape...)
	case F16:
		x, err = FromSlice(dev, mapTo(values, func(v float64) hip.Half { return hip.HalfFromFloat32(float32(v)) }), shape...)
	case BF16:
		x, err = FromSlice(dev, mapTo(values, func(v float64) hip.BFloat16 { return hip.BFloat16FromFloat32(float32(v)) }), shape...)
	case F64:
		x, err = FromSlice(dev, values, shape...)
	case U8:
		x, err = FromSlice(dev, mapTo(values, func(v float64) uint8 { return uint8(saturate(U8, v)) }), shape...)
	case U32:
		x, err = FromSlice(dev, mapTo(values, func(v float64) uint32 { return uint32(saturate(U32, v)) }), shape...)
	case I64:
		x, err = FromSlice(dev, mapTo(values, func(v float64) int64 { return saturate(I64, v) }), shape...)
	}
	require.NoError(t, err)
	t.Cleanup(func() { x.Close() })
	return x
}

func mapTo[T any](vs []float64, f func(float64) T) []T {
	out := make([]T, len(vs))
	for i, v := range vs {
		out[i] = f(v)
	}
	return out
}

// values reads any tensor as float64 values, row-major.
func values(t testing.TB, x *Tensor) []float64 {
	t.Helper()
	var out []float64
	switch x.DType() {
	case F32:
		v, err := ToSlice[float32](x)
		require.NoError(t, err)
		out = mapFrom(v, func(e float32) float64 { return float64(e) })
	case F16:
		v, err := ToSlice[hip.Half](x)
		require.NoError(t, err)
		out = mapFrom(v, func(e hip.Half) float64 { return float64(e.Float32()) })
	case BF16:
		v, err := ToSlice[hip.BFloat16](x)
		require.NoError(t, err)
		out = mapFrom(v, func(e hip.BFloat16) float64 { return float64(e.Float32()) })
	case F64:
		v, err := ToSlice[float64](x)
		require.NoError(t, err)
		out = v
	case U8:
		v, err := ToSlice[uint8](x)
		require.NoError(t, err)
		out = mapFrom(v, func(e uint8) float64 { return float64(e) })
	case U32:
		v, err := ToSlice[uint32](x)
		require.NoError(t, err)
		out = mapFrom(v, func(e uint32) float64 { return float64(e) })
	case I64:
		v, err := ToSlice[int64](x)
		require.NoError(t, err)
		out = mapFrom(v, func(e int64) float64 { return float64(e) })
	}
	return out
}

func mapFrom[T any](vs []T, f func(T) float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = f(v)
	}
	return out
}

// keep returns a function that fails the test on an op's error and
// closes the result when the test ends: ok := keep(t); y := ok(x.Exp()).
func keep(t testing.TB) func(*Tensor, error) *Tensor {
	return func(x *Tensor, err error) *Tensor {
		t.Helper()
		require.NoError(t, err)
		t.Cleanup(func() { x.Close() })
		return x
	}
}

// near compares values with a relative tolerance (and an absolute one of
// the same size near zero); NaN matches NaN.
func near(t testing.TB, want, got []float64, tol float64, msg ...any) {
	t.Helper()
	require.Len(t, got, len(want), msg...)
	for i := range want {
		w, g := want[i], got[i]
		if math.IsNaN(w) && math.IsNaN(g) || w == g {
			continue
		}
		if math.IsInf(w, 0) || math.IsNaN(w) || math.IsNaN(g) || math.Abs(w-g) > tol*math.Max(1, math.Abs(w)) {
			require.Failf(t, "values differ", "element %d: want %v, got %v (tolerance %g) %v", i, w, g, tol, msg)
		}
	}
}
