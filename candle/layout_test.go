package candle

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
)

func TestDTypes(t *testing.T) {
	for _, dt := range DTypes() {
		p, err := ParseDType(dt.String())
		require.NoError(t, err)
		assert.Equal(t, dt, p)
		assert.NotZero(t, dt.Size())
		assert.NotEqual(t, dt.IsFloat(), dt.IsInt(), dt)
	}
	for in, want := range map[string]DType{"float32": F32, " BFloat16 ": BF16, "half": F16, "double": F64, "int64": I64} {
		got, err := ParseDType(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got)
	}
	_, err := ParseDType("f8")
	assert.ErrorIs(t, err, ErrDType)
	assert.ErrorContains(t, err, `"f8" is not a dtype: want one of f32, f16, bf16, f64, u8, u32, i64`)
	assert.Equal(t, []int{4, 2, 2, 8, 1, 4, 8}, []int{F32.Size(), F16.Size(), BF16.Size(), F64.Size(), U8.Size(), U32.Size(), I64.Size()})
	assert.Equal(t, BF16, DTypeOf[hip.BFloat16]())
	assert.Equal(t, "DType(9)", DType(9).String())
}

func TestShapes(t *testing.T) {
	assert.Equal(t, 1, Shape{}.Elems(), "a scalar has one element")
	assert.Equal(t, 0, Shape{3, 0, 2}.Elems())
	assert.Equal(t, "[2 3]", Shape{2, 3}.String())
	for _, c := range []struct {
		a, b, want Shape
	}{
		{Shape{2, 3}, Shape{3}, Shape{2, 3}},
		{Shape{2, 1, 4}, Shape{3, 1}, Shape{2, 3, 4}},
		{Shape{}, Shape{5}, Shape{5}},
		{Shape{1}, Shape{0}, Shape{0}},
		{Shape{8, 1, 6, 1}, Shape{7, 1, 5}, Shape{8, 7, 6, 5}},
	} {
		got, err := BroadcastShapes(c.a, c.b)
		require.NoError(t, err)
		assert.Equal(t, c.want, got, "%v %v", c.a, c.b)
	}
	_, err := BroadcastShapes(Shape{2, 3}, Shape{4})
	assert.ErrorIs(t, err, ErrShape)
	assert.ErrorContains(t, err, "shapes [2 3] and [4] do not broadcast: dim -1 is 3 against 4")
	assert.ErrorIs(t, Shape{2, -1}.check("x"), ErrShape)
	assert.ErrorContains(t, Shape{1, 1, 1, 1, 1, 1, 1, 1, 1}.check("x"), "at most 8")
	assert.ErrorContains(t, Shape{1 << 40, 1 << 40}.check("x"), "too many elements")
}

func TestLayouts(t *testing.T) {
	l := ContiguousLayout(Shape{2, 3, 4})
	assert.Equal(t, []int{12, 4, 1}, l.Stride)
	assert.True(t, l.IsContiguous())

	tr, err := l.Transpose(0, -1)
	require.NoError(t, err)
	assert.Equal(t, Shape{4, 3, 2}, tr.Shape)
	assert.Equal(t, []int{1, 4, 12}, tr.Stride)
	assert.False(t, tr.IsContiguous())
	assert.Equal(t, Shape{2, 3, 4}, l.Shape, "views copy the slices")

	p, err := l.Permute(1, 2, 0)
	require.NoError(t, err)
	assert.Equal(t, Shape{3, 4, 2}, p.Shape)
	assert.Equal(t, []int{4, 1, 12}, p.Stride)
	_, err = l.Permute(0, 0, 1)
	assert.ErrorContains(t, err, "appears twice")
	_, err = l.Permute(0, 1)
	assert.ErrorIs(t, err, ErrShape)

	n, err := l.Narrow(1, 1, 2)
	require.NoError(t, err)
	assert.Equal(t, Shape{2, 2, 4}, n.Shape)
	assert.Equal(t, 4, n.Offset)
	assert.False(t, n.IsContiguous())
	_, err = l.Narrow(1, 2, 2)
	assert.ErrorContains(t, err, "[2, 4) is not inside dim 1 of size 3")
	e, err := l.Narrow(2, 4, 0)
	require.NoError(t, err)
	assert.Equal(t, 0, e.Shape.Elems(), "an empty view")

	b, err := ContiguousLayout(Shape{3, 1}).BroadcastAs(Shape{2, 3, 4})
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 0}, b.Stride)
	_, err = ContiguousLayout(Shape{3, 2}).BroadcastAs(Shape{3, 4})
	assert.ErrorContains(t, err, "dim 1 is 2, not 1 or 4")
	_, err = ContiguousLayout(Shape{3, 2}).BroadcastAs(Shape{2})
	assert.ErrorContains(t, err, "fewer dims")

	r, err := l.Reshape(Shape{6, 4})
	require.NoError(t, err)
	assert.Equal(t, []int{4, 1}, r.Stride)
	_, err = tr.Reshape(Shape{24})
	assert.ErrorContains(t, err, "cannot be reshaped in place")
	_, err = l.Reshape(Shape{5, 5})
	assert.ErrorContains(t, err, "cannot reshape [2 3 4] (24 elements) to [5 5] (25 elements)")

	u, err := l.Unsqueeze(1)
	require.NoError(t, err)
	assert.Equal(t, Shape{2, 1, 3, 4}, u.Shape)
	assert.True(t, u.IsContiguous())
	u, err = l.Unsqueeze(-1)
	require.NoError(t, err)
	assert.Equal(t, Shape{2, 3, 4, 1}, u.Shape)
	s, err := u.Squeeze(3)
	require.NoError(t, err)
	assert.Equal(t, Shape{2, 3, 4}, s.Shape)
	_, err = l.Squeeze(0)
	assert.ErrorContains(t, err, "has size 2, not 1")
	_, err = l.Transpose(0, 3)
	assert.ErrorContains(t, err, "dim 3 is out of range for 3 dims")
}

func TestMakeIndexCoalesces(t *testing.T) {
	c := ContiguousLayout(Shape{2, 3, 4})
	assert.Equal(t, int32(0), makeIndex(c.Shape, false, c).Rank, "contiguous: rank 0")
	ix := makeIndex(c.Shape, true, c)
	assert.Equal(t, int32(1), ix.Rank, "forced strided: one merged dim")
	assert.Equal(t, int64(24), ix.Dims[0])

	tr, _ := c.Transpose(1, 2) // [2 4 3] strides [12 1 4]
	ix = makeIndex(tr.Shape, false, tr)
	assert.Equal(t, int32(3), ix.Rank)
	assert.Equal(t, [MaxRank]int64{2, 4, 3}, ix.Dims)
	assert.Equal(t, [MaxRank]int64{12, 1, 4}, ix.Strides[0])

	b, _ := ContiguousLayout(Shape{4}).BroadcastAs(Shape{2, 3, 4}) // [0 0 1]
	ix = makeIndex(b.Shape, false, c, b)
	assert.Equal(t, int32(2), ix.Rank, "the two outer dims merge: both operands walk them as one")
	assert.Equal(t, [MaxRank]int64{6, 4}, ix.Dims)
	assert.Equal(t, [MaxRank]int64{4, 1}, ix.Strides[0])
	assert.Equal(t, [MaxRank]int64{0, 1}, ix.Strides[1])

	one := ContiguousLayout(Shape{1, 1})
	assert.Equal(t, int32(0), makeIndex(one.Shape, true, one).Rank, "one element needs no walk")
}
