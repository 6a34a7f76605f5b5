package candle

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCPUIndexAssign(t *testing.T) {
	ok := keep(t)
	cpu := CPU()
	// A (3, 2) tensor, rows 2 and 0 written.
	x := ok(tensorOf(t, cpu, F32, []float64{1, 2, 3, 4, 5, 6}, 3, 2).Copy())
	v := ok(x.Narrow(0, 0, 3)) // a view sees the write
	src := tensorOf(t, cpu, F32, []float64{10, 20, 30, 40}, 2, 2)
	require.NoError(t, x.IndexAssign(tensorOf(t, cpu, U32, []float64{2, 0}), src, 0))
	assert.Equal(t, []float64{30, 40, 3, 4, 10, 20}, values(t, x))
	assert.Equal(t, []float64{30, 40, 3, 4, 10, 20}, values(t, v))

	// Along dim 1, into a transposed view: the view's layout is honoured.
	y := ok(tensorOf(t, cpu, F32, []float64{1, 2, 3, 4, 5, 6}, 2, 3).Copy())
	yt := ok(y.T()) // (3, 2): yt[i][j] = y[j][i]
	col := tensorOf(t, cpu, F32, []float64{7, 8, 9}, 3, 1)
	require.NoError(t, yt.IndexAssign(tensorOf(t, cpu, I64, []float64{1}), col, 1))
	assert.Equal(t, []float64{1, 2, 3, 7, 8, 9}, values(t, y))

	// Every dtype moves its bits.
	for _, dt := range DTypes() {
		z := ok(Zeros(cpu, dt, 4, 3))
		s := tensorOf(t, cpu, dt, []float64{1, 2, 3, 4, 5, 6}, 2, 3)
		require.NoError(t, z.IndexAssign(tensorOf(t, cpu, U8, []float64{3, 1}), s, 0), "%s", dt)
		assert.Equal(t, []float64{0, 0, 0, 4, 5, 6, 0, 0, 0, 1, 2, 3}, values(t, z), "%s", dt)
	}

	// Errors, and nothing written before them.
	before := values(t, x)
	err := x.IndexAssign(tensorOf(t, cpu, I64, []float64{1, 3}), src, 0)
	assert.ErrorIs(t, err, ErrIndex)
	err = x.IndexAssign(tensorOf(t, cpu, I64, []float64{-1, 0}), src, 0)
	assert.ErrorIs(t, err, ErrIndex)
	assert.Equal(t, before, values(t, x), "an index out of range writes nothing")
	assert.ErrorIs(t, x.IndexAssign(tensorOf(t, cpu, I64, []float64{1}), src, 0), ErrShape)
	assert.ErrorIs(t, x.IndexAssign(tensorOf(t, cpu, I64, []float64{1, 1}, 1, 2), src, 0), ErrShape)
	assert.ErrorIs(t, x.IndexAssign(tensorOf(t, cpu, I64, []float64{1, 1}), tensorOf(t, cpu, F32, []float64{1, 2, 3, 4, 5, 6}, 2, 3), 0), ErrShape)
	assert.ErrorIs(t, x.IndexAssign(tensorOf(t, cpu, I64, []float64{1, 1}), tensorOf(t, cpu, F64, []float64{1, 2, 3, 4}, 2, 2), 0), ErrDType)
	assert.ErrorIs(t, x.IndexAssign(tensorOf(t, cpu, F32, []float64{1, 1}), src, 0), ErrDType)
	assert.ErrorIs(t, x.IndexAssign(tensorOf(t, cpu, I64, []float64{1, 1}), src, 2), ErrShape)
	bc := ok(ok(Zeros(cpu, F32, 1, 2)).BroadcastAs(3, 2))
	assert.ErrorIs(t, bc.IndexAssign(tensorOf(t, cpu, I64, []float64{1, 1}), src, 0), ErrArgument)
	closed := ok(x.Copy())
	closed.Close()
	assert.ErrorIs(t, closed.IndexAssign(tensorOf(t, cpu, I64, []float64{1, 1}), src, 0), ErrClosed)
	// No rows to write: nothing to do, even into an empty dim.
	require.NoError(t, x.IndexAssign(tensorOf(t, cpu, I64, nil, 0), ok(Zeros(cpu, F32, 0, 2)), 0))
}

// TestGPUIndexAssign writes rows into pages as a paged KV cache does
// (whole rows, vector copies), element by element (short or strided
// rows), for each index and element dtype, and checks that the rest of the
// destination is untouched.
func TestGPUIndexAssign(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(21, 22))
	ok := keep(t)
	for _, idt := range []DType{U8, U32, I64} {
		for _, dt := range DTypes() {
			for _, c := range []struct {
				dst    Shape
				n, dim int
				layout string // the source's
			}{
				{Shape{40, 2, 64}, 9, 0, "contiguous"}, // rows of 128: the row kernel
				{Shape{40, 4, 32}, 9, 0, "narrowed"},   // rows of 128, strided source rows
				{Shape{40, 2, 3}, 9, 0, "contiguous"},  // rows of 6: element by element
				{Shape{5, 40, 7}, 6, 1, "transposed"},  // along dim 1, strided source
				{Shape{3, 5, 70}, 3, 2, "contiguous"},  // along the last dim
			} {
				name := fmt.Sprintf("%s/%s/%v dim %d %s", idt, dt, c.dst, c.dim, c.layout)
				dst := makeOperand(t, d, dt, c.dst, "contiguous", genFor(r, dt))
				dstC, dstG := ok(dst.cpu.Copy()), ok(dst.gpu.Copy())
				sshape := c.dst.Clone()
				sshape[c.dim] = c.n
				src := makeOperand(t, d, dt, sshape, c.layout, genFor(r, dt))
				perm := r.Perm(min(c.dst[c.dim], 256))
				ids := makeOperand(t, d, idt, Shape{c.n}, "contiguous", func() float64 {
					v := perm[0]
					perm = perm[1:]
					return float64(v)
				})
				require.NoError(t, dstC.IndexAssign(ids.cpu, src.cpu, c.dim), name)
				require.NoError(t, dstG.IndexAssign(ids.gpu, src.gpu, c.dim), name)
				same(t, dstC, dstG, 0, name)
			}
		}
	}
	// Into a view at an offset (a layer's pool inside a larger storage),
	// and an index out of range, which writes nothing on the GPU.
	base := makeOperand(t, d, F32, Shape{6, 128}, "contiguous", values01(r))
	bc, bg := ok(base.cpu.Copy()), ok(base.gpu.Copy())
	vc, vg := ok(bc.Narrow(0, 2, 4)), ok(bg.Narrow(0, 2, 4))
	src := makeOperand(t, d, F32, Shape{2, 128}, "contiguous", values01(r))
	require.NoError(t, vc.IndexAssign(ok(FromSlice(CPU(), []uint32{3, 0})), src.cpu, 0))
	require.NoError(t, vg.IndexAssign(ok(FromSlice(d, []uint32{3, 0})), src.gpu, 0))
	same(t, bc, bg, 0, "into a view at an offset")
	require.NoError(t, vg.IndexAssign(ok(FromSlice(d, []uint32{9, 1})), src.gpu, 0))
	want := values(t, bc)
	sv := values(t, src.cpu)
	copy(want[3*128:4*128], sv[128:])
	near(t, want, values(t, bg), 0, "a bad index writes nothing, the good one its row")
}
