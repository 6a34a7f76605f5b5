package candle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
	"github.com/rocm-go/rocm/rocblas"
)

// Tier 2: every op × dtype × layout on the HIP device against the CPU
// device, on random inputs (never zeros), with poisoned outputs (every new
// GPU storage starts as 0xFF bytes), at odd sizes and empty.

func gpu(t *testing.T) *HIPDevice {
	t.Helper()
	var d *HIPDevice
	n, err := hip.DeviceCount()
	if err == nil && n == 0 {
		err = fmt.Errorf("no GPU")
	}
	if err == nil {
		d, err = HIP(0)
	}
	testenv.Need(t, 2, "a GPU", err)
	poisonAllocs.Store(true)
	t.Cleanup(func() { poisonAllocs.Store(false) })
	return d
}

// tolerance is a dtype's relative tolerance for the GPU against the CPU
// (which computes in float64 and rounds once): a few units in the last
// place of the compute type, 2 of the storage type for 16-bit floats.
func tolerance(dt DType) float64 {
	switch dt {
	case F32:
		return 2e-5
	case F16:
		return 2e-3
	case BF16:
		return 1.6e-2
	case F64:
		return 1e-12
	}
	return 0
}

// layouts are the views an op is tested on.
var layouts = []string{"contiguous", "transposed", "narrowed", "broadcast"}

// operand builds the same view of the same random data on both devices:
// shape is the view's; the storage under it is larger for the strided
// layouts. gen draws a value.
type operand struct{ cpu, gpu *Tensor }

func makeOperand(t *testing.T, d *HIPDevice, dt DType, shape Shape, layout string, gen func() float64) operand {
	t.Helper()
	ok := keep(t)
	store := shape.Clone()
	switch layout {
	case "transposed":
		if len(store) >= 2 {
			store[len(store)-1], store[len(store)-2] = store[len(store)-2], store[len(store)-1]
		}
	case "narrowed":
		if len(store) > 0 {
			store[0] += 3
		}
	case "broadcast":
		if len(store) > 0 {
			store[0] = 1
		}
	}
	data := make([]float64, store.Elems())
	for i := range data {
		data[i] = gen()
	}
	var out [2]*Tensor
	for k, dev := range []Device{CPU(), d} {
		x := tensorOf(t, dev, dt, data, store...)
		switch layout {
		case "transposed":
			if len(store) >= 2 {
				x = ok(x.T())
			}
		case "narrowed":
			if len(store) > 0 {
				x = ok(x.Narrow(0, 2, shape[0]))
			}
		case "broadcast":
			if len(store) > 0 {
				x = ok(x.BroadcastAs(shape...))
			}
		}
		require.Equal(t, shape, x.Shape())
		out[k] = x
	}
	return operand{out[0], out[1]}
}

// generators draw values an op takes: never zero.
func values01(r *rand.Rand) func() float64 {
	return func() float64 {
		v := 0.05 + 1.95*r.Float64()
		if r.IntN(2) == 0 {
			return -v
		}
		return v
	}
}

func positive(r *rand.Rand) func() float64 { return func() float64 { return 0.05 + 3*r.Float64() } }

func ints(r *rand.Rand, dt DType) func() float64 {
	return func() float64 {
		switch dt {
		case U8:
			return float64(1 + r.IntN(200))
		case U32:
			return float64(1 + r.IntN(1<<31))
		}
		return float64(r.IntN(1<<40) - 1<<39)
	}
}

func genFor(r *rand.Rand, dt DType) func() float64 {
	if dt.IsInt() {
		return ints(r, dt)
	}
	return values01(r)
}

// same compares a GPU result with the CPU's.
func same(t *testing.T, cpu, gpu *Tensor, tol float64, what string) {
	t.Helper()
	require.Equal(t, cpu.Shape(), gpu.Shape(), what)
	require.Equal(t, cpu.DType(), gpu.DType(), what)
	near(t, values(t, cpu), values(t, gpu), tol, what)
}

var sizes = []Shape{{1}, {7}, {1000}, {4097}, {0}, {7, 33}, {3, 5, 129}}

func TestGPUUnary(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(1, 2))
	ops := []struct {
		op     unaryOp
		p      [2]float64
		domain func(*rand.Rand) func() float64
	}{
		{opNeg, [2]float64{}, values01}, {opRecip, [2]float64{}, values01}, {opExp, [2]float64{}, values01},
		{opLog, [2]float64{}, positive}, {opSin, [2]float64{}, values01}, {opCos, [2]float64{}, values01},
		{opTanh, [2]float64{}, values01}, {opErf, [2]float64{}, values01}, {opCeil, [2]float64{}, values01},
		{opFloor, [2]float64{}, values01}, {opRound, [2]float64{}, values01}, {opAbs, [2]float64{}, values01},
		{opSqr, [2]float64{}, values01}, {opSqrt, [2]float64{}, positive}, {opGelu, [2]float64{}, values01},
		{opGeluErf, [2]float64{}, values01}, {opRelu, [2]float64{}, values01}, {opSilu, [2]float64{}, values01},
		{opSigmoid, [2]float64{}, values01}, {opSign, [2]float64{}, values01}, {opNormCDF, [2]float64{}, values01},
		{opElu, [2]float64{0.7, 0}, values01}, {opPowf, [2]float64{1.7, 0}, positive},
		{opClamp, [2]float64{-0.5, 0.8}, values01}, {opAffine, [2]float64{1.5, -0.25}, values01},
	}
	for _, o := range ops {
		for _, dt := range DTypes() {
			if !o.op.takes(dt) {
				continue
			}
			gen := o.domain(r)
			if dt.IsInt() {
				gen = ints(r, dt)
				if dt == I64 && (o.op == opSqr || o.op == opAffine) {
					gen = func() float64 { return float64(r.IntN(1<<20) - 1<<19) }
				}
			}
			for _, shape := range sizes {
				for _, l := range layouts {
					name := fmt.Sprintf("%s/%s/%v/%s", o.op, dt, shape, l)
					x := makeOperand(t, d, dt, shape, l, gen)
					method := "Tensor." + unaryNames[o.op]
					c, err := x.cpu.unary(method, o.op, o.p[0], o.p[1])
					require.NoError(t, err, name)
					g, err := x.gpu.unary(method, o.op, o.p[0], o.p[1])
					require.NoError(t, err, name)
					tol := tolerance(dt)
					if dt == F32 && (o.op == opPowf || o.op == opGelu || o.op == opGeluErf) {
						tol = 1e-4 // powf and the GELUs lose a few more bits in float32
					}
					same(t, c, g, tol, name)
					c.Close()
					g.Close()
				}
			}
		}
	}
}

func TestGPUBinary(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(3, 4))
	pairs := [][2]string{{"contiguous", "contiguous"}, {"transposed", "contiguous"}, {"narrowed", "broadcast"}, {"broadcast", "transposed"}}
	for op := range numBinary {
		for _, dt := range DTypes() {
			for _, shape := range sizes {
				for _, p := range pairs {
					name := fmt.Sprintf("%s/%s/%v/%s+%s", op, dt, shape, p[0], p[1])
					gen := genFor(r, dt)
					switch {
					case op.isCmp():
						// Few values, so that some pairs are equal.
						gen = func() float64 { return []float64{-1, 0.5, 2, 3}[r.IntN(4)] }
						if dt.IsInt() {
							gen = func() float64 { return float64(1 + r.IntN(3)) }
						}
					case dt.IsInt() && op == opMul:
						gen = func() float64 { return float64(1 + r.IntN(1000)) }
					}
					a := makeOperand(t, d, dt, shape, p[0], gen)
					b := makeOperand(t, d, dt, shape, p[1], gen)
					c, err := a.cpu.binary(op.String(), op, b.cpu)
					require.NoError(t, err, name)
					g, err := a.gpu.binary(op.String(), op, b.gpu)
					require.NoError(t, err, name)
					tol := tolerance(dt)
					if op.isCmp() {
						tol = 0
					}
					same(t, c, g, tol, name)
					c.Close()
					g.Close()
				}
			}
		}
	}
	// Broadcasting across shapes: [2,3,4] with [3,1] and [4].
	a := makeOperand(t, d, F32, Shape{2, 3, 4}, "contiguous", values01(r))
	for _, s := range []Shape{{3, 1}, {4}, {1, 1, 4}, {}} {
		b := makeOperand(t, d, F32, s, "contiguous", values01(r))
		same(t, keep(t)(a.cpu.Mul(b.cpu)), keep(t)(a.gpu.Mul(b.gpu)), 0, fmt.Sprintf("mul by %v", s))
	}
}

func TestGPUCast(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(5, 6))
	for _, from := range DTypes() {
		for _, to := range DTypes() {
			for _, shape := range []Shape{{7}, {4097}, {0}, {7, 33}} {
				for _, l := range []string{"contiguous", "transposed"} {
					name := fmt.Sprintf("%s→%s/%v/%s", from, to, shape, l)
					gen := genFor(r, from)
					if from.IsFloat() {
						// Out of every integer range, fractions, and NaN.
						gen = func() float64 {
							switch r.IntN(8) {
							case 0:
								return math.NaN()
							case 1:
								return -300.5
							case 2:
								return 70000.25
							}
							return (r.Float64()*2 - 1) * 300
						}
					}
					x := makeOperand(t, d, from, shape, l, gen)
					same(t, keep(t)(x.cpu.ToDType(to)), keep(t)(x.gpu.ToDType(to)), 0, name)
				}
			}
		}
	}
}

func TestGPUFillAndRandom(t *testing.T) {
	d := gpu(t)
	ok := keep(t)
	for _, dt := range DTypes() {
		for _, shape := range sizes {
			name := fmt.Sprintf("%s/%v", dt, shape)
			same(t, ok(Full(CPU(), dt, -2.5, shape...)), ok(Full(d, dt, -2.5, shape...)), 0, "full "+name)
			same(t, ok(Zeros(CPU(), dt, shape...)), ok(Zeros(d, dt, shape...)), 0, "zeros "+name)
			same(t, ok(Ones(CPU(), dt, shape...)), ok(Ones(d, dt, shape...)), 0, "ones "+name)
		}
		same(t, ok(Arange(CPU(), dt, 3, 4100, 1)), ok(Arange(d, dt, 3, 4100, 1)), 0, "arange "+dt.String())
		if dt.IsFloat() {
			same(t, ok(Arange(CPU(), dt, -1, 1, 0.001)), ok(Arange(d, dt, -1, 1, 0.001)), 0, "arange by 0.001 "+dt.String())
			for _, seed := range []uint64{0, 42, 1 << 60} {
				CPU().SetSeed(seed)
				d.SetSeed(seed)
				for range 2 { // the streams go on alike
					same(t, ok(RandUniform(CPU(), dt, -3, 5, 4097)), ok(RandUniform(d, dt, -3, 5, 4097)), 0, "uniform "+dt.String())
					// Normal numbers go through log, sqrt and cos, whose last
					// bits may differ between libraries.
					same(t, ok(RandNormal(CPU(), dt, 1, 2, 1001)), ok(RandNormal(d, dt, 1, 2, 1001)), math.Max(1e-12, tolerance(dt)), "normal "+dt.String())
				}
			}
		}
	}
}

func TestGPUCopies(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(7, 8))
	ok := keep(t)
	for _, dt := range DTypes() {
		gen := genFor(r, dt)
		for _, shape := range []Shape{{1}, {4097}, {0}, {7, 33}, {3, 5, 129}, {64, 65}, {2, 100, 37}} {
			for _, l := range layouts {
				x := makeOperand(t, d, dt, shape, l, gen)
				same(t, ok(x.cpu.Copy()), ok(x.gpu.Copy()), 0, fmt.Sprintf("copy %s/%v/%s", dt, shape, l))
			}
		}
		// Transposes of every kind the tiled kernel takes, and some it
		// does not.
		for _, shape := range []Shape{{33, 65}, {8, 8}, {4, 7, 130}, {1000, 3}} {
			x := makeOperand(t, d, dt, shape, "contiguous", gen)
			same(t, ok(ok(x.cpu.T()).Contiguous()), ok(ok(x.gpu.T()).Contiguous()), 0, fmt.Sprintf("transpose %s/%v", dt, shape))
		}
		x := makeOperand(t, d, dt, Shape{2, 3, 4, 5}, "contiguous", gen)
		same(t, ok(ok(x.cpu.Permute(0, 2, 1, 3)).Contiguous()), ok(ok(x.gpu.Permute(0, 2, 1, 3)).Contiguous()), 0, "permute "+dt.String())
		// Cat along each dim, of strided parts.
		a := makeOperand(t, d, dt, Shape{5, 6}, "transposed", gen)
		b := makeOperand(t, d, dt, Shape{5, 6}, "narrowed", gen)
		for dim := range 2 {
			same(t, ok(Cat([]*Tensor{a.cpu, b.cpu, a.cpu}, dim)), ok(Cat([]*Tensor{a.gpu, b.gpu, a.gpu}, dim)), 0, fmt.Sprintf("cat %s dim %d", dt, dim))
		}
		// Slice assignment, as a KV cache grows.
		cacheC, cacheG := ok(Zeros(CPU(), dt, 2, 16, 8)), ok(Zeros(d, dt, 2, 16, 8))
		for pos := 0; pos < 16; pos += 3 {
			n := min(3, 16-pos)
			s := makeOperand(t, d, dt, Shape{2, n, 8}, "transposed", gen)
			require.NoError(t, cacheC.SliceAssign(s.cpu, 1, pos))
			require.NoError(t, cacheG.SliceAssign(s.gpu, 1, pos))
		}
		same(t, cacheC, cacheG, 0, "slice assignment "+dt.String())
		// Across devices, both ways.
		back := ok(ok(cacheG.ToDevice(CPU())).ToDevice(d))
		same(t, cacheC, back, 0, "a round trip "+dt.String())
	}
}

// TestGPUTransfers moves bytes both ways through the staging ring: sizes
// around a staging buffer and beyond the ring (it wraps), reads at an
// offset, and a read queued behind writes still in flight.
func TestGPUTransfers(t *testing.T) {
	d := gpu(t)
	rng := rand.New(rand.NewPCG(7, 8))
	var pending []*Tensor
	var want [][]byte
	for _, n := range []int{1, 4097, stagingSize - 1, stagingSize, stagingSize + 3, stagingSlots*stagingSize + 5, 3*stagingSlots*stagingSize/2 + 1} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		x, err := FromBytes(d, U8, src, n)
		require.NoError(t, err, n)
		pending, want = append(pending, x), append(want, src)
	}
	for i, x := range pending {
		got, err := ToBytes(x)
		require.NoError(t, err)
		require.True(t, string(want[i]) == string(got), "%d bytes came back different", len(want[i]))
		if n := x.Elems(); n > 10 {
			tail, err := x.Narrow(0, 3, n-10)
			require.NoError(t, err)
			got, err := ToBytes(tail)
			require.NoError(t, err)
			require.True(t, string(want[i][3:n-7]) == string(got), "%d bytes from offset 3 came back different", n-10)
			tail.Close()
		}
		x.Close()
	}
}

// TestGPURowCopies covers the kernels that copy whole rows (rows of 64
// elements and more): Cat, SliceAssign, Copy2D and IndexSelect, with row
// starts 16-byte aligned (vector loads) and not.
func TestGPURowCopies(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(21, 22))
	ok := keep(t)
	for _, dt := range DTypes() {
		gen := genFor(r, dt)
		// 16384: aligned rows long enough for copy_row's four-deep loop.
		for _, cols := range [][2]int{{128, 64}, {100, 77}, {1027, 129}, {16384, 64}} {
			a := makeOperand(t, d, dt, Shape{3, cols[0]}, "contiguous", gen)
			b := makeOperand(t, d, dt, Shape{3, cols[1]}, "contiguous", gen)
			name := fmt.Sprintf("%s/%v", dt, cols)
			same(t, ok(Cat([]*Tensor{a.cpu, b.cpu}, 1)), ok(Cat([]*Tensor{a.gpu, b.gpu}, 1)), 0, "cat rows "+name)
			nb := makeOperand(t, d, dt, Shape{3, cols[1]}, "narrowed", gen)
			same(t, ok(Cat([]*Tensor{nb.cpu, a.cpu}, 1)), ok(Cat([]*Tensor{nb.gpu, a.gpu}, 1)), 0, "cat narrowed rows "+name)

			cacheC, cacheG := ok(Zeros(CPU(), dt, 2, 9, cols[0])), ok(Zeros(d, dt, 2, 9, cols[0]))
			for pos := 0; pos < 9; pos += 4 {
				n := min(4, 9-pos)
				s := makeOperand(t, d, dt, Shape{2, n, cols[0]}, "contiguous", gen)
				require.NoError(t, cacheC.SliceAssign(s.cpu, 1, pos))
				require.NoError(t, cacheG.SliceAssign(s.gpu, 1, pos))
			}
			same(t, cacheC, cacheG, 0, "slice assignment rows "+name)

			// Copy2D: a block of b's rows into a's storage, at an offset
			// that keeps the rows aligned and at one that does not.
			for _, off := range []int{0, 1} {
				var out [2]*Tensor
				for k, pair := range [2][2]*Tensor{{b.cpu, a.cpu}, {b.gpu, a.gpu}} {
					// Storages of their own, as a worker's KV cache has.
					srcSt, dstSt := ok(pair[0].Copy()).detach(), ok(pair[1].Copy()).detach()
					require.NoError(t, srcSt.Copy2D(dstSt, 2, cols[1]-1, cols[1], cols[0], 1, off), name)
					out[k] = ok(FromStorage(dstSt, Shape{3, cols[0]}))
					srcSt.Close()
					dstSt.Close()
				}
				same(t, out[0], out[1], 0, fmt.Sprintf("copy2d %s offset %d", name, off))
			}

			// IndexSelect of whole rows, with an index out of range on the
			// GPU (a row of zeros).
			table := makeOperand(t, d, dt, Shape{20, cols[0]}, "narrowed", gen)
			idsv := make([]int64, 13)
			for i := range idsv {
				idsv[i] = int64(r.IntN(20))
			}
			same(t, ok(table.cpu.IndexSelect(ok(FromSlice(CPU(), idsv)), 0)), ok(table.gpu.IndexSelect(ok(FromSlice(d, idsv)), 0)), 0, "index_select rows "+name)
			idsv[5] = 20
			sel := values(t, ok(table.gpu.IndexSelect(ok(FromSlice(d, idsv)), 0)))
			assert.Equal(t, make([]float64, cols[0]), sel[5*cols[0]:6*cols[0]], "a bad index gives a row of zeros "+name)
		}
	}
}

func TestGPUWhere(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(9, 10))
	ok := keep(t)
	for _, cdt := range []DType{U8, U32, I64} {
		for _, dt := range DTypes() {
			for _, shape := range sizes {
				cond := makeOperand(t, d, cdt, shape, "transposed", func() float64 { return float64(r.IntN(2) * (1 + r.IntN(3))) })
				a := makeOperand(t, d, dt, shape, "narrowed", genFor(r, dt))
				b := makeOperand(t, d, dt, shape, "broadcast", genFor(r, dt))
				same(t, ok(Where(cond.cpu, a.cpu, b.cpu)), ok(Where(cond.gpu, a.gpu, b.gpu)), 0, fmt.Sprintf("where %s/%s/%v", cdt, dt, shape))
			}
		}
	}
}

func TestGPUIndexing(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(11, 12))
	ok := keep(t)
	for _, idt := range []DType{U8, U32, I64} {
		for _, dt := range DTypes() {
			x := makeOperand(t, d, dt, Shape{9, 7, 5}, "transposed", genFor(r, dt))
			for dim := range 3 {
				n := x.cpu.Dim(dim)
				name := fmt.Sprintf("%s/%s/dim %d", idt, dt, dim)
				ids := makeOperand(t, d, idt, Shape{11}, "narrowed", func() float64 { return float64(r.IntN(n)) })
				same(t, ok(x.cpu.IndexSelect(ids.cpu, dim)), ok(x.gpu.IndexSelect(ids.gpu, dim)), 0, "index_select "+name)

				gshape := x.cpu.Shape()
				gshape[dim] = 4
				gids := makeOperand(t, d, idt, gshape, "contiguous", func() float64 { return float64(r.IntN(n)) })
				same(t, ok(x.cpu.Gather(gids.cpu, dim)), ok(x.gpu.Gather(gids.gpu, dim)), 0, "gather "+name)

				// Scatter with distinct indices along dim (no write races).
				sshape := x.cpu.Shape()
				sshape[dim] = 2
				src := makeOperand(t, d, dt, sshape, "contiguous", genFor(r, dt))
				perm := r.Perm(n)
				inner := Shape(sshape[dim+1:]).Elems()
				k := 0
				sids := makeOperand(t, d, idt, sshape, "contiguous", func() float64 {
					j := k / inner % 2 // the element's coordinate along dim
					k++
					return float64(perm[j])
				})
				same(t, ok(x.cpu.Scatter(sids.cpu, src.cpu, dim)), ok(x.gpu.Scatter(sids.gpu, src.gpu, dim)), 0, "scatter "+name)

				// Adds with repeated indices: floats add in another order.
				tol := tolerance(dt)
				if dt == F16 || dt == BF16 {
					tol *= 2
				}
				rids := makeOperand(t, d, idt, sshape, "contiguous", func() float64 { return float64(r.IntN(min(n, 3))) })
				same(t, ok(x.cpu.ScatterAdd(rids.cpu, src.cpu, dim)), ok(x.gpu.ScatterAdd(rids.gpu, src.gpu, dim)), tol, "scatter_add "+name)
				aids := makeOperand(t, d, idt, Shape{2}, "contiguous", func() float64 { return float64(r.IntN(min(n, 2))) })
				same(t, ok(x.cpu.IndexAdd(aids.cpu, src.cpu, dim)), ok(x.gpu.IndexAdd(aids.gpu, src.gpu, dim)), tol, "index_add "+name)
			}
		}
	}
	// Out-of-range indices: an error on the CPU; on the GPU, 0 read and
	// no write.
	x := makeOperand(t, d, F32, Shape{3, 2}, "contiguous", values01(r))
	badG := ok(FromSlice(d, []int64{1, 7, -1}))
	_, err := x.cpu.IndexSelect(ok(FromSlice(CPU(), []int64{1, 7, -1})), 0)
	assert.ErrorIs(t, err, ErrIndex)
	sel := values(t, ok(x.gpu.IndexSelect(badG, 0)))
	xv := values(t, x.cpu)
	assert.Equal(t, []float64{xv[2], xv[3], 0, 0, 0, 0}, sel)
	add := values(t, ok(x.gpu.IndexAdd(badG, ok(Ones(d, F32, 3, 2)), 0)))
	plus1 := func(v float64) float64 { return float64(float32(v) + 1) }
	assert.Equal(t, []float64{xv[0], xv[1], plus1(xv[2]), plus1(xv[3]), xv[4], xv[5]}, add)
}

func TestGPUReductions(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(13, 14))
	ok := keep(t)
	for op := range numReduce {
		for _, dt := range DTypes() {
			for _, shape := range []Shape{{1}, {7}, {4097}, {7, 33}, {3, 5, 129}, {5, 1000}, {2, 9001}, {64, 3}} {
				for _, l := range layouts {
					gen := genFor(r, dt)
					if op == opSum && dt.IsInt() {
						gen = func() float64 { return float64(r.IntN(100)) }
					}
					if op.isArg() && !dt.IsInt() {
						// Distinct values, so that the first extreme is one
						// element whatever the rounding.
						k := 0
						perm := r.Perm(shape.Elems() * 4)
						gen = func() float64 { k++; return float64(perm[k-1]) / 16 }
					}
					x := makeOperand(t, d, dt, shape, l, gen)
					var dimSets [][]int
					for i := range shape {
						dimSets = append(dimSets, []int{i})
					}
					dimSets = append(dimSets, nil)
					if len(shape) == 3 {
						dimSets = append(dimSets, []int{0, 2})
					}
					for _, dims := range dimSets {
						for _, kd := range []bool{false, true} {
							name := fmt.Sprintf("%s/%s/%v/%s/dims %v keepdim %v", op, dt, shape, l, dims, kd)
							c, err := x.cpu.reduce("reduce", op, kd, dims, false)
							require.NoError(t, err, name)
							g, err := x.gpu.reduce("reduce", op, kd, dims, false)
							require.NoError(t, err, name)
							tol := 0.0
							if op == opSum && dt.IsFloat() {
								// Sums add in another order: the error grows
								// with the count.
								tol = tolerance(dt) * math.Sqrt(float64(x.cpu.Elems())) * 4
							}
							same(t, c, g, tol, name)
							c.Close()
							g.Close()
						}
					}
					if dt.IsFloat() && op == opSum {
						same(t, ok(x.cpu.Mean(false, -1)), ok(x.gpu.Mean(false, -1)), tolerance(dt)*8, "mean "+dt.String())
					}
				}
			}
		}
	}
	// NaN, the first one, wins max and argmax.
	nan := []float64{1, math.NaN(), 7, math.NaN(), 3}
	c, g := tensorOf(t, CPU(), F32, nan), tensorOf(t, d, F32, nan)
	same(t, ok(c.Argmax(false)), ok(g.Argmax(false)), 0, "argmax with NaN")
	assert.True(t, math.IsNaN(values(t, ok(g.Max(false)))[0]))
	// Empty reductions.
	e := ok(Zeros(d, F32, 3, 0))
	assert.Equal(t, []float64{0, 0, 0}, values(t, ok(e.Sum(false, 1))))
}

// TestGPUMemoryStaysFlat runs 10 000 forward-like sequences on the GPU,
// each in a scope: the pool hands the same blocks back, and the device's
// memory in use returns to where it started.
func TestGPUMemoryStaysFlat(t *testing.T) {
	d := gpu(t)
	poisonAllocs.Store(false)
	free0, _, err := d.dev.MemInfo()
	require.NoError(t, err)
	start := time.Now()
	memoryStaysFlat(t, d, 10000)
	free1, _, err := d.dev.MemInfo()
	require.NoError(t, err)
	t.Logf("in %v; device memory free before %d, after %d", time.Since(start).Round(time.Millisecond), free0, free1)
	assert.InDelta(t, float64(free0), float64(free1), 64<<20, "the device's free memory stays flat")
}

func TestGPUErrorsBeforeLaunch(t *testing.T) {
	d := gpu(t)
	ok := keep(t)
	x := ok(Zeros(d, F32, 2, 3))
	y := ok(Zeros(CPU(), F32, 2, 3))
	_, err := x.Add(y)
	assert.ErrorIs(t, err, ErrDevice)
	assert.ErrorContains(t, err, "operands on hip:0 and cpu: move them to one device first (ToDevice)")
	_, err = x.Add(ok(Zeros(d, F32, 4)))
	assert.ErrorIs(t, err, ErrShape)
	_, err = x.Exp()
	require.NoError(t, err)
	require.NoError(t, x.Close())
	_, err = x.Exp()
	assert.ErrorIs(t, err, ErrClosed)
	_, err = HIP(1 << 20)
	assert.ErrorIs(t, err, ErrDevice)
	assert.ErrorContains(t, err, "the machine has")
	same, err := NewDevice("hip:0")
	require.NoError(t, err)
	assert.Same(t, d, same, "one device per ordinal")
	auto, err := NewDevice("auto")
	require.NoError(t, err)
	assert.Same(t, d, auto)
}

func TestGPUOutOfMemory(t *testing.T) {
	d := gpu(t)
	_, total, err := d.dev.MemInfo()
	require.NoError(t, err)
	_, err = Zeros(d, F32, int(total/2), 3)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrOutOfMemory)
	assert.ErrorIs(t, err, hip.ErrOutOfMemory)
	assert.ErrorContains(t, err, "asked on hip:0")
	assert.ErrorContains(t, err, "the pool gave back")
	t.Log(err)
}

// TestGPULibraryHandles: the device's rocBLAS and MIOpen handles are made
// once, on its stream, and work on its storages in order with its ops.
func TestGPULibraryHandles(t *testing.T) {
	d := gpu(t)
	ok := keep(t)
	h, err := d.BLAS()
	require.NoError(t, err)
	again, err := d.BLAS()
	require.NoError(t, err)
	assert.Same(t, h, again, "one handle per device")
	assert.Same(t, d.Stream(), h.Stream(), "bound to the device's stream")

	xs := make([]float64, 1000)
	for i := range xs {
		xs[i] = float64(i%17) - 8
	}
	x := tensorOf(t, d, F32, xs)
	sq := ok(x.Sqr()) // queued on the stream before the product reads it
	got, err := rocblas.Dot(h, rocblas.Vector[float32]{Buf: sq.st.mem.(*block).buf, N: 1000, Inc: 1},
		rocblas.Vector[float32]{Buf: x.st.mem.(*block).buf, N: 1000, Inc: 1})
	require.NoError(t, err)
	want := 0.0
	for _, v := range xs {
		want += v * v * v
	}
	assert.InDelta(t, want, float64(got), 1e-3)

	dnn, err := d.MIOpen()
	require.NoError(t, err)
	dnnAgain, err := d.MIOpen()
	require.NoError(t, err)
	assert.Same(t, dnn, dnnAgain)
	assert.Same(t, d.Stream(), dnn.Stream())
}

// TestGPUEdgeValues checks the values where C, Go and the GPU part ways:
// integer division by 0 and -1, NaN in maximum and minimum, and the signs
// of zero and NaN through the unary ops.
func TestGPUEdgeValues(t *testing.T) {
	d := gpu(t)
	ok := keep(t)
	ints := map[DType][2][]float64{
		I64: {{7, -7, 0, math.MinInt64, 5, -9}, {0, 0, 0, -1, -1, 2}},
		U32: {{7, 0, math.MaxUint32, 5, 9, 1}, {0, 0, 1, 5, 2, math.MaxUint32}},
		U8:  {{7, 0, 255, 5, 9, 1}, {0, 0, 1, 5, 2, 255}},
	}
	for dt, ab := range ints {
		for _, op := range []binaryOp{opDiv, opMaximum, opMinimum, opSub, opMul} {
			name := fmt.Sprintf("%v %s", op, dt)
			c, err := tensorOf(t, CPU(), dt, ab[0]).binary("edge", op, tensorOf(t, CPU(), dt, ab[1]))
			require.NoError(t, err, name)
			g, err := tensorOf(t, d, dt, ab[0]).binary("edge", op, tensorOf(t, d, dt, ab[1]))
			require.NoError(t, err, name)
			same(t, ok(c, nil), ok(g, nil), 0, name)
		}
	}
	nan := math.NaN()
	a := []float64{nan, 1, nan, 0, math.Copysign(0, -1), math.Inf(-1), 3}
	b := []float64{1, nan, nan, math.Copysign(0, -1), 0, 2, math.Inf(1)}
	for _, dt := range []DType{F32, F16, BF16, F64} {
		for _, op := range []binaryOp{opMaximum, opMinimum, opDiv, opEq, opNe, opLt, opGe} {
			name := fmt.Sprintf("%v %s", op, dt)
			c, err := tensorOf(t, CPU(), dt, a).binary("edge", op, tensorOf(t, CPU(), dt, b))
			require.NoError(t, err, name)
			g, err := tensorOf(t, d, dt, a).binary("edge", op, tensorOf(t, d, dt, b))
			require.NoError(t, err, name)
			same(t, ok(c, nil), ok(g, nil), 0, name)
		}
		for _, op := range []unaryOp{opRelu, opAbs, opSign, opNeg, opSqrt, opRecip, opExp, opLog, opRound, opSilu, opGelu, opSigmoid} {
			name := fmt.Sprintf("%v %s", op, dt)
			c, err := tensorOf(t, CPU(), dt, a).unary("edge", op, 0, 0)
			require.NoError(t, err, name)
			g, err := tensorOf(t, d, dt, a).unary("edge", op, 0, 0)
			require.NoError(t, err, name)
			same(t, ok(c, nil), ok(g, nil), tolerance(dt), name)
		}
	}
}

// WarmEach reports every module once, in order of readiness, counting up.
func TestGPUWarmEach(t *testing.T) {
	d := gpu(t)
	kc, err := NewKernelCache(d.KernelCache().Dir())
	require.NoError(t, err)
	defer kc.Close()
	var got []ModuleReady
	require.NoError(t, kc.WarmEach(d, func(m ModuleReady) { got = append(got, m) }))
	require.Len(t, got, len(kc.Modules()))
	for _, m := range got {
		t.Logf("%s ready after %v", m.Name, m.Took.Round(time.Millisecond))
	}
	var names []string
	for i, m := range got {
		assert.Equal(t, i+1, m.Done)
		assert.Equal(t, len(got), m.Total)
		if i > 0 {
			assert.GreaterOrEqual(t, m.Took, got[i-1].Took)
		}
		names = append(names, m.Name)
	}
	assert.ElementsMatch(t, kc.Modules(), names)
}
