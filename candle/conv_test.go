package candle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The references of the image ops: direct loops in float64 over NCHW
// arrays, written apart from the CPU device's (the transposed convolution
// scatters here where the device gathers).

// at4 is the row-major offset of (a, b, c, d) in dims.
func at4(dims [4]int, a, b, c, d int) int { return ((a*dims[1]+b)*dims[2]+c)*dims[3] + d }

type convRef struct {
	stride, pad, dil, outPad [2]int
	groups                   int
}

func refConv(x []float64, xd [4]int, w []float64, wd [4]int, p convRef) ([]float64, [4]int) {
	var yd [4]int
	yd[0], yd[1] = xd[0], wd[0]
	for i := range 2 {
		yd[2+i] = (xd[2+i]+2*p.pad[i]-p.dil[i]*(wd[2+i]-1)-1)/p.stride[i] + 1
	}
	y := make([]float64, yd[0]*yd[1]*yd[2]*yd[3])
	cg, kg := xd[1]/p.groups, wd[0]/p.groups
	for n := range yd[0] {
		for k := range yd[1] {
			g := k / kg
			for oy := range yd[2] {
				for ox := range yd[3] {
					sum := 0.0
					for c := range cg {
						for r := range wd[2] {
							for s := range wd[3] {
								iy, ix := oy*p.stride[0]-p.pad[0]+r*p.dil[0], ox*p.stride[1]-p.pad[1]+s*p.dil[1]
								if iy < 0 || iy >= xd[2] || ix < 0 || ix >= xd[3] {
									continue
								}
								sum += x[at4(xd, n, g*cg+c, iy, ix)] * w[at4(wd, k, c, r, s)]
							}
						}
					}
					y[at4(yd, n, k, oy, ox)] = sum
				}
			}
		}
	}
	return y, yd
}

// refConvTranspose scatters each input element through the kernel.
func refConvTranspose(x []float64, xd [4]int, w []float64, wd [4]int, p convRef) ([]float64, [4]int) {
	var yd [4]int
	yd[0], yd[1] = xd[0], wd[1]*p.groups
	for i := range 2 {
		yd[2+i] = (xd[2+i]-1)*p.stride[i] - 2*p.pad[i] + p.dil[i]*(wd[2+i]-1) + 1 + p.outPad[i]
	}
	y := make([]float64, yd[0]*yd[1]*yd[2]*yd[3])
	cg, kg := xd[1]/p.groups, wd[1]
	for n := range xd[0] {
		for c := range xd[1] {
			g := c / cg
			for iy := range xd[2] {
				for ix := range xd[3] {
					v := x[at4(xd, n, c, iy, ix)]
					for k := range kg {
						for r := range wd[2] {
							for s := range wd[3] {
								oy, ox := iy*p.stride[0]-p.pad[0]+r*p.dil[0], ix*p.stride[1]-p.pad[1]+s*p.dil[1]
								if oy < 0 || oy >= yd[2] || ox < 0 || ox >= yd[3] {
									continue
								}
								y[at4(yd, n, g*kg+k, oy, ox)] += v * w[at4(wd, c, k, r, s)]
							}
						}
					}
				}
			}
		}
	}
	return y, yd
}

func refPool(x []float64, xd [4]int, kernel, stride, pad [2]int, isMax, exclude bool) ([]float64, [4]int) {
	yd := xd
	for i := range 2 {
		yd[2+i] = (xd[2+i]+2*pad[i]-kernel[i])/stride[i] + 1
	}
	y := make([]float64, yd[0]*yd[1]*yd[2]*yd[3])
	for n := range yd[0] {
		for c := range yd[1] {
			for oy := range yd[2] {
				for ox := range yd[3] {
					best, sum, count := math.Inf(-1), 0.0, 0
					for r := range kernel[0] {
						for s := range kernel[1] {
							iy, ix := oy*stride[0]-pad[0]+r, ox*stride[1]-pad[1]+s
							if iy < 0 || iy >= xd[2] || ix < 0 || ix >= xd[3] {
								continue
							}
							v := x[at4(xd, n, c, iy, ix)]
							best = math.Max(best, v)
							sum += v
							count++
						}
					}
					switch {
					case isMax:
						y[at4(yd, n, c, oy, ox)] = best
					case exclude:
						y[at4(yd, n, c, oy, ox)] = sum / float64(count)
					default:
						y[at4(yd, n, c, oy, ox)] = sum / float64(kernel[0]*kernel[1])
					}
				}
			}
		}
	}
	return y, yd
}

// refUpsample is PyTorch's upsample_nearest2d and upsample_bilinear2d
// (sizes given, no scales), their source coordinates in float32.
func refUpsample(x []float64, xd [4]int, oh, ow int, bilinear, align bool) []float64 {
	yd := [4]int{xd[0], xd[1], oh, ow}
	scale := func(in, out int) float32 {
		if bilinear && align {
			if out == 1 {
				return 0
			}
			return float32(in-1) / float32(out-1)
		}
		return float32(in) / float32(out)
	}
	src := func(o, in, out int) (int, int, float64) {
		sc := scale(in, out)
		if !bilinear {
			i := int(math.Floor(float64(float32(float32(o) * sc))))
			return min(i, in-1), 0, 0
		}
		var r float32
		if align {
			r = float32(sc * float32(o))
		} else {
			r = float32(float32(sc*(float32(o)+0.5)) - 0.5)
			if r < 0 {
				r = 0
			}
		}
		i := int(r)
		next := i + 1
		if next > in-1 {
			next = in - 1
		}
		return i, next, float64(r) - float64(i)
	}
	y := make([]float64, xd[0]*xd[1]*oh*ow)
	for n := range xd[0] {
		for c := range xd[1] {
			for oy := range oh {
				y0, y1, fy := src(oy, xd[2], oh)
				for ox := range ow {
					x0, x1, fx := src(ox, xd[3], ow)
					v := (1-fy)*((1-fx)*x[at4(xd, n, c, y0, x0)]+fx*x[at4(xd, n, c, y0, x1)]) +
						fy*((1-fx)*x[at4(xd, n, c, y1, x0)]+fx*x[at4(xd, n, c, y1, x1)])
					y[at4(yd, n, c, oy, ox)] = v
				}
			}
		}
	}
	return y
}

func randValues(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = 2*r.Float64() - 1
	}
	return v
}

// quantized is values as dtype dt holds them.
func quantized(t *testing.T, dt DType, v []float64) []float64 {
	return values(t, tensorOf(t, CPU(), dt, v))
}

// cpuTolerance is the CPU device's error against a float64 reference on
// the same (quantized) inputs: one rounding to the dtype, plus float64
// summation.
func cpuTolerance(dt DType) float64 {
	switch dt {
	case F32:
		return 1e-6
	case F16:
		return 1e-3
	case BF16:
		return 8e-3
	}
	return 1e-12
}

// toNHWC is a contiguous channels-last copy of an NCHW (or NCL) tensor.
func toNHWC(t *testing.T, x *Tensor) *Tensor {
	order := []int{0, 2, 3, 1}
	if x.Rank() == 3 {
		order = []int{0, 2, 1}
	}
	return keep(t)(keep(t)(x.Permute(order...)).Contiguous())
}

// fromNHWC views a channels-last result in NCHW (or NCL) order.
func fromNHWC(t *testing.T, x *Tensor) *Tensor {
	order := []int{0, 3, 1, 2}
	if x.Rank() == 3 {
		order = []int{0, 2, 1}
	}
	return keep(t)(x.Permute(order...))
}

type convCase struct {
	name       string
	x, w       []int // NCHW (or NCL) dims
	p          convRef
	transposed bool
}

var convCases = []convCase{
	{name: "3x3 pad 1", x: []int{2, 3, 7, 6}, w: []int{4, 3, 3, 3}, p: convRef{pad: [2]int{1, 1}}},
	{name: "odd: stride 2x1, pad 1x0, dilation 1x2, 3x2 kernel", x: []int{2, 3, 9, 7}, w: []int{5, 3, 3, 2},
		p: convRef{stride: [2]int{2, 1}, pad: [2]int{1, 0}, dil: [2]int{1, 2}}},
	{name: "dilation 2, pad 2", x: []int{1, 2, 8, 8}, w: []int{3, 2, 3, 3}, p: convRef{pad: [2]int{2, 2}, dil: [2]int{2, 2}}},
	{name: "2 groups", x: []int{2, 4, 6, 5}, w: []int{6, 2, 3, 3}, p: convRef{pad: [2]int{1, 1}, groups: 2}},
	{name: "depthwise stride 2", x: []int{2, 3, 7, 7}, w: []int{3, 1, 3, 3}, p: convRef{pad: [2]int{1, 1}, stride: [2]int{2, 2}, groups: 3}},
	{name: "1x1", x: []int{1, 5, 4, 3}, w: []int{7, 5, 1, 1}},
	{name: "kernel as large as the input", x: []int{1, 2, 3, 4}, w: []int{2, 2, 3, 4}},
	{name: "1-D stride 2 pad 1 dilation 2", x: []int{2, 3, 11}, w: []int{4, 3, 3}, p: convRef{stride: [2]int{1, 2}, pad: [2]int{0, 1}, dil: [2]int{1, 2}}},
	{name: "1-D 3 groups", x: []int{1, 6, 9}, w: []int{3, 2, 4}, p: convRef{groups: 3}},
	{name: "transposed stride 2 pad 1 output padding 1", x: []int{2, 4, 3, 5}, w: []int{4, 3, 3, 3}, transposed: true,
		p: convRef{stride: [2]int{2, 2}, pad: [2]int{1, 1}, outPad: [2]int{1, 1}}},
	{name: "transposed 2 groups, stride 2x3, output padding 1x2", x: []int{1, 4, 4, 3}, w: []int{4, 2, 3, 2}, transposed: true,
		p: convRef{stride: [2]int{2, 3}, pad: [2]int{0, 1}, outPad: [2]int{1, 2}, groups: 2}},
	{name: "transposed dilation 2", x: []int{1, 2, 3, 3}, w: []int{2, 3, 2, 2}, transposed: true, p: convRef{dil: [2]int{2, 2}, outPad: [2]int{1, 0}}},
	{name: "transposed 1-D stride 3", x: []int{2, 3, 5}, w: []int{3, 2, 4}, transposed: true, p: convRef{stride: [2]int{1, 3}, pad: [2]int{0, 1}, outPad: [2]int{0, 2}}},
}

// norm fills in the defaults of a case's parameters.
func (c convCase) norm() convRef {
	p := c.p
	for i := range 2 {
		p.stride[i], p.dil[i] = orOne(p.stride[i]), orOne(p.dil[i])
	}
	p.groups = orOne(p.groups)
	return p
}

func dims4(s []int) [4]int {
	if len(s) == 3 {
		return [4]int{s[0], s[1], 1, s[2]}
	}
	return [4]int{s[0], s[1], s[2], s[3]}
}

// run applies the case's op to x and w (in the format's order) with bias.
func (c convCase) run(x, w, bias *Tensor, f Format) (*Tensor, error) {
	p := c.p
	switch {
	case len(c.x) == 3 && c.transposed:
		return x.ConvTranspose1d(w, bias, ConvTranspose1dParams{Stride: p.stride[1], Padding: p.pad[1], OutputPadding: p.outPad[1], Dilation: p.dil[1], Groups: p.groups, Format: f})
	case len(c.x) == 3:
		return x.Conv1d(w, bias, Conv1dParams{Stride: p.stride[1], Padding: p.pad[1], Dilation: p.dil[1], Groups: p.groups, Format: f})
	case c.transposed:
		return x.ConvTranspose2d(w, bias, ConvTranspose2dParams{Stride: p.stride, Padding: p.pad, OutputPadding: p.outPad, Dilation: p.dil, Groups: p.groups, Format: f})
	}
	return x.Conv2d(w, bias, Conv2dParams{Stride: p.stride, Padding: p.pad, Dilation: p.dil, Groups: p.groups, Format: f})
}

// want is the reference output of the case (NCHW or NCL order) on the
// inputs' values, plus bias.
func (c convCase) want(xv, wv, bv []float64) ([]float64, []int) {
	ref := refConv
	if c.transposed {
		ref = refConvTranspose
	}
	y, yd := ref(xv, dims4(c.x), wv, dims4(c.w), c.norm())
	for i := range y {
		if bv != nil {
			y[i] += bv[(i/(yd[2]*yd[3]))%yd[1]]
		}
	}
	if len(c.x) == 3 {
		return y, []int{yd[0], yd[1], yd[3]}
	}
	return y, yd[:]
}

func TestConvCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	ok := keep(t)
	for _, c := range convCases {
		for _, dt := range []DType{F64, F32, F16, BF16} {
			name := fmt.Sprintf("%s/%s", c.name, dt)
			xv := quantized(t, dt, randValues(r, Shape(c.x).Elems()))
			wv := quantized(t, dt, randValues(r, Shape(c.w).Elems()))
			x, w := tensorOf(t, CPU(), dt, xv, c.x...), tensorOf(t, CPU(), dt, wv, c.w...)
			want, shape := c.want(xv, wv, nil)

			y := ok(c.run(x, w, nil, NCHW))
			require.Equal(t, Shape(shape), y.Shape(), name)
			assert.Equal(t, dt, y.DType(), name)
			near(t, want, values(t, y), cpuTolerance(dt), name)

			// NHWC: the same convolution, channels last.
			yn := ok(c.run(toNHWC(t, x), toNHWC(t, w), nil, NHWC))
			near(t, values(t, y), values(t, fromNHWC(t, yn)), 0, name+" NHWC")

			// A bias, and a strided input (the same values through a
			// transposed view).
			k := shape[1]
			bv := quantized(t, dt, randValues(r, k))
			b := tensorOf(t, CPU(), dt, bv)
			wantB, _ := c.want(xv, wv, bv)
			xt := ok(ok(x.Transpose(-1, -2)).Contiguous())
			xs := ok(xt.Transpose(-1, -2))
			require.False(t, xs.IsContiguous())
			yb := ok(c.run(xs, w, b, NCHW))
			near(t, wantB, values(t, yb), 2*cpuTolerance(dt), name+" bias, strided")
			ybn := ok(c.run(toNHWC(t, x), toNHWC(t, w), b, NHWC))
			near(t, values(t, yb), values(t, fromNHWC(t, ybn)), 0, name+" bias NHWC")
		}
	}
}

// TestConvKnownValues checks small convolutions against values worked by
// hand (and by PyTorch).
func TestConvKnownValues(t *testing.T) {
	ok := keep(t)
	cpu := CPU()
	x := tensorOf(t, cpu, F32, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9}, 1, 1, 3, 3)
	w := tensorOf(t, cpu, F32, []float64{1, 0, 0, -1}, 1, 1, 2, 2)
	assert.Equal(t, []float64{-4, -4, -4, -4}, values(t, ok(x.Conv2d(w, nil, Conv2dParams{}))), "x[i,j] - x[i+1,j+1]")
	assert.Equal(t, []float64{-1, -2, -3, 0, -4, -4, -4, 3, -7, -4, -4, 6, 0, 7, 8, 9}, values(t, ok(x.Conv2d(w, nil, Conv2dParams{Padding: [2]int{1, 1}}))))
	// A transposed convolution of stride 2 spreads each input over a 2x2
	// block: [[1, 2]] by [[1, 10], [100, 1000]].
	xt := tensorOf(t, cpu, F32, []float64{1, 2}, 1, 1, 1, 2)
	wt := tensorOf(t, cpu, F32, []float64{1, 10, 100, 1000}, 1, 1, 2, 2)
	y := ok(xt.ConvTranspose2d(wt, nil, ConvTranspose2dParams{Stride: [2]int{2, 2}}))
	assert.Equal(t, Shape{1, 1, 2, 4}, y.Shape())
	assert.Equal(t, []float64{1, 10, 2, 20, 100, 1000, 200, 2000}, values(t, y))
	// 1-D, with a bias.
	x1 := tensorOf(t, cpu, F64, []float64{1, 2, 3, 4, 5}, 1, 1, 5)
	w1 := tensorOf(t, cpu, F64, []float64{1, 1, 1}, 1, 1, 3)
	b1 := tensorOf(t, cpu, F64, []float64{0.5})
	assert.Equal(t, []float64{3.5, 6.5, 9.5, 12.5, 9.5}, values(t, ok(x1.Conv1d(w1, b1, Conv1dParams{Padding: 1}))))
	assert.Equal(t, []float64{6.5, 12.5}, values(t, ok(x1.Conv1d(w1, b1, Conv1dParams{Stride: 2}))))
}

func TestConvEmpty(t *testing.T) {
	ok := keep(t)
	x := tensorOf(t, CPU(), F32, nil, 0, 3, 5, 5)
	w := tensorOf(t, CPU(), F32, make([]float64, 4*3*9), 4, 3, 3, 3)
	y := ok(x.Conv2d(w, nil, Conv2dParams{Padding: [2]int{1, 1}}))
	assert.Equal(t, Shape{0, 4, 5, 5}, y.Shape())
	w0 := tensorOf(t, CPU(), F32, nil, 0, 3, 3, 3)
	x1 := tensorOf(t, CPU(), F32, make([]float64, 75), 1, 3, 5, 5)
	assert.Equal(t, Shape{1, 0, 3, 3}, ok(x1.Conv2d(w0, nil, Conv2dParams{})).Shape())
}

func TestConvErrors(t *testing.T) {
	cpu := CPU()
	x := tensorOf(t, cpu, F32, make([]float64, 2*4*5*5), 2, 4, 5, 5)
	w := tensorOf(t, cpu, F32, make([]float64, 6*4*3*3), 6, 4, 3, 3)
	other := &CPUDevice{}
	wOther, err := FromSlice(other, make([]float32, 6*4*9), 6, 4, 3, 3)
	require.NoError(t, err)
	defer wOther.Close()
	closed := tensorOf(t, cpu, F32, make([]float64, 6*4*9), 6, 4, 3, 3)
	closed.Close()
	cases := []struct {
		name string
		run  func() (*Tensor, error)
		kind error
		msg  string
	}{
		{"channels", func() (*Tensor, error) {
			return x.Conv2d(tensorOf(t, cpu, F32, make([]float64, 6*3*9), 6, 3, 3, 3), nil, Conv2dParams{})
		}, ErrShape, "x [2 4 5 5] has 4 channels; the weights [6 3 3 3] take 3 per group × 1 groups = 3"},
		{"groups do not divide the input", func() (*Tensor, error) { return x.Conv2d(w, nil, Conv2dParams{Groups: 3}) }, ErrArgument, "3 groups do not divide the 4 input channels"},
		{"groups do not divide the output", func() (*Tensor, error) {
			return x.Conv2d(tensorOf(t, cpu, F32, make([]float64, 5*2*9), 5, 2, 3, 3), nil, Conv2dParams{Groups: 2})
		}, ErrArgument, "2 groups do not divide the 5 output channels"},
		{"empty output", func() (*Tensor, error) { return x.Conv2d(w, nil, Conv2dParams{Dilation: [2]int{3, 1}}) }, ErrShape, "the output height would be 0"},
		{"empty transposed output", func() (*Tensor, error) {
			return x.ConvTranspose2d(tensorOf(t, cpu, F32, make([]float64, 4*2*9), 4, 2, 3, 3), nil, ConvTranspose2dParams{Padding: [2]int{0, 4}})
		}, ErrShape, "the output width would be -1"},
		{"rank", func() (*Tensor, error) { return x.Conv1d(w, nil, Conv1dParams{}) }, ErrShape, "x is [2 4 5 5]: want rank 3, (N, C, L) in NCHW"},
		{"weights rank", func() (*Tensor, error) {
			return x.Conv2d(tensorOf(t, cpu, F32, make([]float64, 6*4*3), 6, 4, 3), nil, Conv2dParams{})
		}, ErrShape, "w is [6 4 3]: want rank 4, as x"},
		{"dtypes", func() (*Tensor, error) {
			return x.Conv2d(tensorOf(t, cpu, F16, make([]float64, 6*4*9), 6, 4, 3, 3), nil, Conv2dParams{})
		}, ErrDType, "f32 input and f16 weights"},
		{"integers", func() (*Tensor, error) {
			xi := tensorOf(t, cpu, I64, make([]float64, 2*4*25), 2, 4, 5, 5)
			return xi.Conv2d(w, nil, Conv2dParams{})
		}, ErrDType, "x is i64"},
		{"devices", func() (*Tensor, error) { return x.Conv2d(wOther, nil, Conv2dParams{}) }, ErrDevice, "operands on cpu and cpu"},
		{"closed", func() (*Tensor, error) { return x.Conv2d(closed, nil, Conv2dParams{}) }, ErrClosed, "closed tensor"},
		{"nil weights", func() (*Tensor, error) { return x.Conv2d(nil, nil, Conv2dParams{}) }, ErrArgument, "nil tensor"},
		{"bias shape", func() (*Tensor, error) {
			return x.Conv2d(w, tensorOf(t, cpu, F32, make([]float64, 4)), Conv2dParams{})
		}, ErrShape, "the bias is [4]; want [6]"},
		{"bias dtype", func() (*Tensor, error) {
			return x.Conv2d(w, tensorOf(t, cpu, F64, make([]float64, 6)), Conv2dParams{})
		}, ErrDType, "f32 input and f64 bias"},
		{"negative stride", func() (*Tensor, error) { return x.Conv2d(w, nil, Conv2dParams{Stride: [2]int{-1, 1}}) }, ErrArgument, "none may be negative"},
		{"negative groups", func() (*Tensor, error) { return x.Conv2d(w, nil, Conv2dParams{Groups: -2}) }, ErrArgument, "-2 groups"},
		{"output padding", func() (*Tensor, error) {
			return x.ConvTranspose2d(tensorOf(t, cpu, F32, make([]float64, 4*2*9), 4, 2, 3, 3), nil, ConvTranspose2dParams{Stride: [2]int{2, 2}, OutputPadding: [2]int{2, 0}})
		}, ErrArgument, "output padding [2 0]: each value is less than its stride"},
		{"transposed channels", func() (*Tensor, error) { return x.ConvTranspose2d(w, nil, ConvTranspose2dParams{}) }, ErrShape, "x [2 4 5 5] has 4 channels; the weights [6 4 3 3] are for 6"},
		{"format", func() (*Tensor, error) { return x.Conv2d(w, nil, Conv2dParams{Format: 7}) }, ErrArgument, "Format(7): the format is NCHW or NHWC"},
		{"zero channels", func() (*Tensor, error) {
			x0 := tensorOf(t, cpu, F32, nil, 2, 0, 5, 5)
			return x0.Conv2d(tensorOf(t, cpu, F32, nil, 6, 0, 3, 3), nil, Conv2dParams{})
		}, ErrShape, "at least one input channel"},
	}
	for _, c := range cases {
		y, err := c.run()
		assert.Nil(t, y, c.name)
		require.Error(t, err, c.name)
		assert.ErrorIs(t, err, c.kind, c.name)
		assert.ErrorContains(t, err, c.msg, c.name)
	}
}

type poolCase struct {
	x                       []int
	kernel, stride, padding [2]int
}

var poolCases = []poolCase{
	{x: []int{2, 3, 9, 8}, kernel: [2]int{3, 3}, stride: [2]int{2, 2}, padding: [2]int{1, 1}},
	{x: []int{1, 2, 7, 6}, kernel: [2]int{2, 3}},
	{x: []int{2, 5, 5, 7}, kernel: [2]int{3, 2}, stride: [2]int{1, 2}, padding: [2]int{1, 1}},
	{x: []int{1, 1, 4, 4}, kernel: [2]int{4, 4}, padding: [2]int{2, 2}},
	{x: []int{3, 2, 6, 5}, kernel: [2]int{1, 1}, stride: [2]int{2, 3}},
}

func (c poolCase) params(exclude bool, f Format) Pool2dParams {
	return Pool2dParams{Kernel: c.kernel, Stride: c.stride, Padding: c.padding, ExcludePadding: exclude, Format: f}
}

func TestPoolCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	ok := keep(t)
	for _, c := range poolCases {
		stride := c.stride
		for i := range 2 {
			if stride[i] == 0 {
				stride[i] = c.kernel[i]
			}
		}
		for _, dt := range []DType{F64, F32, F16, BF16} {
			xv := quantized(t, dt, randValues(r, Shape(c.x).Elems()))
			x := tensorOf(t, CPU(), dt, xv, c.x...)
			for _, mode := range []string{"max", "avg", "avg excluding padding"} {
				name := fmt.Sprintf("%v %v/%s/%s", c.x, c.kernel, mode, dt)
				p := c.params(mode == "avg excluding padding", NCHW)
				pool := x.AvgPool2d
				if mode == "max" {
					pool = x.MaxPool2d
				}
				want, yd := refPool(xv, dims4(c.x), c.kernel, stride, c.padding, mode == "max", p.ExcludePadding)
				y := ok(pool(p))
				require.Equal(t, Shape(yd[:]), y.Shape(), name)
				near(t, want, values(t, y), cpuTolerance(dt), name)
				xn := toNHWC(t, x)
				pn := xn.AvgPool2d
				if mode == "max" {
					pn = xn.MaxPool2d
				}
				near(t, values(t, y), values(t, fromNHWC(t, ok(pn(c.params(p.ExcludePadding, NHWC))))), 0, name+" NHWC")
			}
		}
	}
	// Known values: 2x2 windows of [[1 2 3] [4 5 6] [7 8 9]], padded by 1.
	x := tensorOf(t, CPU(), F32, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9}, 1, 1, 3, 3)
	p := Pool2dParams{Kernel: [2]int{2, 2}, Padding: [2]int{1, 1}}
	assert.Equal(t, []float64{1, 3, 7, 9}, values(t, ok(x.MaxPool2d(p))))
	assert.Equal(t, []float64{0.25, 1.25, 2.75, 7}, values(t, ok(x.AvgPool2d(p))), "the padding counts")
	p.ExcludePadding = true
	assert.Equal(t, []float64{1, 2.5, 5.5, 7}, values(t, ok(x.AvgPool2d(p))))
	// A NaN wins a max window.
	xn := tensorOf(t, CPU(), F32, []float64{1, math.NaN(), 3, 4}, 1, 1, 2, 2)
	assert.True(t, math.IsNaN(values(t, ok(xn.MaxPool2d(Pool2dParams{Kernel: [2]int{2, 2}})))[0]))
}

func TestPoolErrors(t *testing.T) {
	x := tensorOf(t, CPU(), F32, make([]float64, 2*3*5*5), 2, 3, 5, 5)
	for _, c := range []struct {
		name string
		p    Pool2dParams
		kind error
		msg  string
	}{
		{"kernel 0", Pool2dParams{Kernel: [2]int{0, 2}}, ErrArgument, "the window and the stride are at least 1"},
		{"negative padding", Pool2dParams{Kernel: [2]int{2, 2}, Padding: [2]int{-1, 0}}, ErrArgument, "the padding at least 0"},
		{"padding over half", Pool2dParams{Kernel: [2]int{3, 3}, Padding: [2]int{2, 0}}, ErrArgument, "at most half the window"},
		{"window too large", Pool2dParams{Kernel: [2]int{6, 2}}, ErrShape, "the window [6 2] is larger than the padded input (5)"},
		{"format", Pool2dParams{Kernel: [2]int{2, 2}, Format: 3}, ErrArgument, "the format is NCHW or NHWC"},
	} {
		y, err := x.MaxPool2d(c.p)
		assert.Nil(t, y, c.name)
		assert.ErrorIs(t, err, c.kind, c.name)
		assert.ErrorContains(t, err, c.msg, c.name)
	}
	x3 := tensorOf(t, CPU(), F32, make([]float64, 6), 1, 2, 3)
	_, err := x3.AvgPool2d(Pool2dParams{Kernel: [2]int{1, 1}})
	assert.ErrorIs(t, err, ErrShape)
	assert.ErrorContains(t, err, "want rank 4, (N, C, H, W) in NCHW")
	xi := tensorOf(t, CPU(), U8, make([]float64, 8), 1, 2, 2, 2)
	_, err = xi.MaxPool2d(Pool2dParams{Kernel: [2]int{1, 1}})
	assert.ErrorIs(t, err, ErrDType)
}

func TestUpsampleCPU(t *testing.T) {
	ok := keep(t)
	cpu := CPU()
	x := tensorOf(t, cpu, F32, []float64{1, 2, 3, 4}, 1, 1, 2, 2)
	// PyTorch's F.interpolate of [[1 2] [3 4]].
	assert.Equal(t, []float64{1, 1, 1, 2, 2, 1, 1, 1, 2, 2, 3, 3, 3, 4, 4}, values(t, ok(x.UpsampleNearest2d(3, 5, NCHW))))
	near(t, []float64{1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4},
		values(t, ok(x.UpsampleBilinear2d(4, 4, false, NCHW))), 1e-7, "bilinear")
	third := 1.0 / 3
	near(t, []float64{1, 1 + third, 2 - third, 2, 2 - third, 2, 2 + third, 3 - third, 2 + third, 3 - third, 3, 3 + third, 3, 3 + third, 4 - third, 4},
		values(t, ok(x.UpsampleBilinear2d(4, 4, true, NCHW))), 1e-6, "bilinear, corners aligned")
	row := tensorOf(t, cpu, F32, []float64{0, 1, 2, 3}, 1, 1, 1, 4)
	assert.Equal(t, []float64{0.5, 2.5}, values(t, ok(row.UpsampleBilinear2d(1, 2, false, NCHW))), "downsampling averages pairs")
	assert.Equal(t, []float64{0, 2}, values(t, ok(row.UpsampleNearest2d(1, 2, NCHW))))
	assert.Equal(t, []float64{0, 3}, values(t, ok(row.UpsampleBilinear2d(1, 2, true, NCHW))))
	assert.Equal(t, []float64{0}, values(t, ok(row.UpsampleBilinear2d(1, 1, true, NCHW))), "one pixel: the first, corners aligned")

	r := rand.New(rand.NewPCG(15, 16))
	for _, s := range [][4]int{{2, 3, 5, 7}, {1, 2, 8, 3}, {1, 1, 1, 1}, {2, 2, 6, 6}} {
		for _, out := range [][2]int{{11, 13}, {2, 3}, {5, 7}, {1, 1}, {16, 9}} {
			for _, dt := range []DType{F64, F32, BF16} {
				xv := quantized(t, dt, randValues(r, s[0]*s[1]*s[2]*s[3]))
				x := tensorOf(t, cpu, dt, xv, s[:]...)
				for _, mode := range []string{"nearest", "bilinear", "bilinear aligned"} {
					name := fmt.Sprintf("%v→%v/%s/%s", s, out, mode, dt)
					up := func(x *Tensor, f Format) *Tensor {
						if mode == "nearest" {
							return ok(x.UpsampleNearest2d(out[0], out[1], f))
						}
						return ok(x.UpsampleBilinear2d(out[0], out[1], mode == "bilinear aligned", f))
					}
					y := up(x, NCHW)
					require.Equal(t, Shape{s[0], s[1], out[0], out[1]}, y.Shape(), name)
					want := refUpsample(xv, s, out[0], out[1], mode != "nearest", mode == "bilinear aligned")
					near(t, want, values(t, y), cpuTolerance(dt), name)
					near(t, values(t, y), values(t, fromNHWC(t, up(toNHWC(t, x), NHWC))), 0, name+" NHWC")
				}
			}
		}
	}
	// PyTorch's float32 index: 5 rows to 3 read rows 0, 1 and 3.
	col := tensorOf(t, cpu, F32, []float64{0, 1, 2, 3, 4}, 1, 1, 5, 1)
	assert.Equal(t, []float64{0, 1, 3}, values(t, ok(col.UpsampleNearest2d(3, 1, NCHW))))
}

func TestUpsampleErrors(t *testing.T) {
	x := tensorOf(t, CPU(), F32, make([]float64, 12), 1, 3, 2, 2)
	_, err := x.UpsampleNearest2d(0, 4, NCHW)
	assert.ErrorIs(t, err, ErrArgument)
	assert.ErrorContains(t, err, "output size 0 × 4")
	_, err = x.UpsampleBilinear2d(4, -1, false, NHWC)
	assert.ErrorIs(t, err, ErrArgument)
	e := tensorOf(t, CPU(), F32, nil, 1, 3, 0, 2)
	_, err = e.UpsampleNearest2d(4, 4, NCHW)
	assert.ErrorIs(t, err, ErrShape)
	assert.ErrorContains(t, err, "height and width are 1 to 2²⁴")
	_, err = x.UpsampleNearest2d(4, 4, Format(2))
	assert.ErrorIs(t, err, ErrArgument)
	x1 := tensorOf(t, CPU(), F32, make([]float64, 4), 4)
	_, err = x1.UpsampleNearest2d(4, 4, NCHW)
	assert.ErrorIs(t, err, ErrShape)
	// An empty batch is an empty result.
	e0 := tensorOf(t, CPU(), F32, nil, 0, 3, 2, 2)
	y, err := e0.UpsampleBilinear2d(4, 5, false, NCHW)
	require.NoError(t, err)
	assert.Equal(t, Shape{0, 3, 4, 5}, y.Shape())
	y.Close()
}
