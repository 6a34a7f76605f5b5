package candle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maskCase makes random logits (rows, cols) and a random mask, some rows
// allowing everything.
func maskCase(r *rand.Rand, rows, cols int) ([]float32, []uint32) {
	words := (cols + 31) / 32
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 3)
	}
	m := make([]uint32, rows*words)
	for i := range m {
		if (i/words)%3 == 2 {
			m[i] = ^uint32(0)
		} else {
			m[i] = r.Uint32() & r.Uint32()
		}
	}
	return x, m
}

func TestMaskTokens(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rows, cols := 4, 70
	x, m := maskCase(r, rows, cols)
	lt, err := FromSlice(CPU(), x, rows, cols)
	require.NoError(t, err)
	mt, err := FromSlice(CPU(), m, rows, 3)
	require.NoError(t, err)
	out, err := lt.MaskTokens(mt)
	require.NoError(t, err)
	got, err := ToSlice[float32](out)
	require.NoError(t, err)
	for rr := range rows {
		for c := range cols {
			k := rr*cols + c
			if m[rr*3+c/32]>>(c%32)&1 == 1 {
				assert.Equal(t, x[k], got[k], "row %d token %d kept", rr, c)
			} else {
				assert.True(t, math.IsInf(float64(got[k]), -1), "row %d token %d masked", rr, c)
			}
		}
	}
	// Greedy sampling never picks a masked token.
	ids, err := out.Sample(make([]SampleOptions, rows))
	require.NoError(t, err)
	drawn, err := ToSlice[uint32](ids)
	require.NoError(t, err)
	for rr, id := range drawn {
		assert.Equal(t, uint32(1), m[rr*3+int(id)/32]>>(id%32)&1, "row %d drew %d", rr, id)
	}

	// A transposed (strided) mask of the right shape is read as its values.
	mT, err := FromSlice(CPU(), m, 3, rows)
	require.NoError(t, err)
	tr, err := mT.T()
	require.NoError(t, err)
	_, err = lt.MaskTokens(tr)
	require.NoError(t, err)

	short, err := FromSlice(CPU(), m[:rows*2], rows, 2)
	require.NoError(t, err)
	_, err = lt.MaskTokens(short)
	assert.ErrorIs(t, err, ErrShape)
	floats, err := FromSlice(CPU(), make([]float32, rows*3), rows, 3)
	require.NoError(t, err)
	_, err = lt.MaskTokens(floats)
	assert.ErrorIs(t, err, ErrDType)
	ids8, err := FromSlice(CPU(), make([]uint32, 3), 3)
	require.NoError(t, err)
	_, err = ids8.MaskTokens(mt)
	assert.ErrorIs(t, err, ErrDType)
}

// TestGPUMaskTokens compares the device's mask with the CPU's for each
// float dtype, at a real vocabulary's size and odd ones.
func TestGPUMaskTokens(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, dt := range []DType{F32, F16, BF16} {
		for _, cols := range []int{1, 33, 4099, 128256} {
			rows := 8
			x, m := maskCase(r, rows, cols)
			words := (cols + 31) / 32
			name := fmt.Sprintf("%s × %d", dt, cols)
			run := func(dev Device) []float32 {
				lt, err := FromSlice(dev, x, rows, cols)
				require.NoError(t, err, name)
				lt, err = lt.ToDType(dt)
				require.NoError(t, err, name)
				mt, err := FromSlice(dev, m, rows, words)
				require.NoError(t, err, name)
				out, err := lt.MaskTokens(mt)
				require.NoError(t, err, name)
				out, err = out.ToDType(F32)
				require.NoError(t, err, name)
				v, err := ToSlice[float32](out)
				require.NoError(t, err, name)
				return v
			}
			want, got := run(CPU()), run(d)
			require.Equal(t, len(want), len(got), name)
			for i := range want {
				if want[i] != got[i] {
					require.Failf(t, "mismatch", "%s: element %d: GPU %v, CPU %v", name, i, got[i], want[i])
				}
			}
		}
	}
}
