package candle

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/errs"
)

// TestQTensorBlocks reads a quantized tensor's blocks back, moves its
// rows with tensor ops (the halves of each of two heads swapped) and
// makes a QTensor of them again, whose values are the rows moved.
func TestQTensorBlocks(t *testing.T) {
	cpu := CPU()
	const rows, k = 8, 64
	vals := make([]float32, rows*k)
	for i := range vals {
		vals[i] = float32(i%23) - 11
	}
	blocks, err := QuantizeBlocks(GGMLQ8_0, vals)
	require.NoError(t, err)
	q, err := NewQTensor(cpu, GGMLQ8_0, blocks, rows, k)
	require.NoError(t, err)
	b, err := q.Blocks()
	require.NoError(t, err)
	assert.Equal(t, Shape{rows, len(blocks) / rows}, b.Shape())
	got, err := ToBytes(b)
	require.NoError(t, err)
	assert.Equal(t, blocks, got)

	// Rows (head, half, i) → (head, i, half)... as a transpose of a view.
	v, err := b.Reshape(2, 2, rows/4, len(blocks)/rows)
	require.NoError(t, err)
	tv, err := v.Transpose(1, 2)
	require.NoError(t, err)
	moved, err := QTensorFromBlocks(tv, GGMLQ8_0, rows, k)
	require.NoError(t, err, "a strided view is copied")
	d, err := moved.Dequantize(F32)
	require.NoError(t, err)
	out, err := ToSlice[float32](d)
	require.NoError(t, err)
	want, err := DequantizeBlocks(nil, GGMLQ8_0, blocks)
	require.NoError(t, err)
	order := []int{0, 2, 1, 3, 4, 6, 5, 7}
	for r, src := range order {
		assert.Equal(t, want[src*k:(src+1)*k], out[r*k:(r+1)*k], "row %d is row %d of the original", r, src)
	}

	// Whole contiguous blocks are shared: the original may close.
	same, err := QTensorFromBlocks(b, GGMLQ8_0, rows, k)
	require.NoError(t, err)
	require.NoError(t, q.Close())
	require.NoError(t, b.Close())
	sd, err := same.Dequantize(F32)
	require.NoError(t, err)
	sv, err := ToSlice[float32](sd)
	require.NoError(t, err)
	assert.Equal(t, want, sv)

	// Bad input.
	_, err = q.Blocks()
	assert.ErrorIs(t, err, errs.ErrClosed)
	_, err = QTensorFromBlocks(d, GGMLQ8_0, rows, k)
	assert.ErrorIs(t, err, errs.ErrDType)
	half, err := v.Narrow(0, 0, 1)
	require.NoError(t, err)
	_, err = QTensorFromBlocks(half, GGMLQ8_0, rows, k)
	assert.ErrorIs(t, err, errs.ErrShape)
	_, err = QTensorFromBlocks(half, GGMLQ8_0, rows/2, k-1)
	assert.ErrorIs(t, err, ErrShape, "not a whole number of blocks")
	for _, c := range []interface{ Close() error }{v, tv, moved, d, same, sd, half} {
		c.Close()
	}
}

func TestWeightInfoBytes(t *testing.T) {
	assert.Equal(t, 24, WeightInfo{Shape: Shape{2, 3}, Dense: true, DType: F32}.Bytes())
	assert.Equal(t, 4, WeightInfo{Shape: Shape{}, Dense: true, DType: F32}.Bytes(), "a scalar")
	assert.Equal(t, 2*144, WeightInfo{Shape: Shape{2, 256}, Quantized: true, Quant: GGMLQ4_K}.Bytes())
	assert.Zero(t, WeightInfo{Shape: Shape{0, 256}, Quantized: true, Quant: GGMLQ4_K}.Bytes())
	assert.Zero(t, WeightInfo{Shape: Shape{5}, Type: "I32"}.Bytes(), "a type candle does not hold")
}
