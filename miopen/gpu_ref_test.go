package miopen_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/miopen"
)

// Host-side helpers and float64 references of the tier-2 tests.

// encode writes values as elements of a data type.
func encode(dt miopen.DataType, b []byte, v float64) {
	switch dt {
	case miopen.DataTypeHalf:
		binary.LittleEndian.PutUint16(b, uint16(hip.HalfFromFloat32(float32(v))))
	case miopen.DataTypeBFloat16:
		binary.LittleEndian.PutUint16(b, uint16(hip.BFloat16FromFloat32(float32(v))))
	case miopen.DataTypeFloat:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
	case miopen.DataTypeDouble:
		binary.LittleEndian.PutUint64(b, math.Float64bits(v))
	default:
		panic("encode: " + dt.String())
	}
}

func decode(dt miopen.DataType, b []byte) float64 {
	switch dt {
	case miopen.DataTypeHalf:
		return float64(hip.Half(binary.LittleEndian.Uint16(b)).Float32())
	case miopen.DataTypeBFloat16:
		return float64(hip.BFloat16(binary.LittleEndian.Uint16(b)).Float32())
	case miopen.DataTypeFloat:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case miopen.DataTypeDouble:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	panic("decode: " + dt.String())
}

// quantize rounds values to what a data type holds.
func quantize(dt miopen.DataType, v []float64) []float64 {
	b := make([]byte, 8)
	out := make([]float64, len(v))
	for i, x := range v {
		encode(dt, b, x)
		out[i] = decode(dt, b)
	}
	return out
}

// offsets lists the element offsets of a descriptor's elements in
// row-major order of its dimensions.
func offsets(d *miopen.TensorDescriptor) []int {
	dims, strides := d.Dims(), d.Strides()
	out := make([]int, d.Elements())
	coord := make([]int, len(dims))
	for i := range out {
		off := 0
		for k := range dims {
			off += coord[k] * strides[k]
		}
		out[i] = off
		for k := len(dims) - 1; k >= 0; k-- {
			if coord[k]++; coord[k] < dims[k] {
				break
			}
			coord[k] = 0
		}
	}
	return out
}

func prod(v []int) int {
	n := 1
	for _, x := range v {
		n *= x
	}
	return n
}

// random returns n values uniform in [lo, hi).
func random(n int, lo, hi float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = lo + (hi-lo)*rand.Float64()
	}
	return v
}

// relErr is the relative Frobenius error ||got-want|| / ||want||.
func relErr(got, want []float64) float64 {
	var num, den float64
	for i := range want {
		d := got[i] - want[i]
		num += d * d
		den += want[i] * want[i]
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

// tolerance is the relative Frobenius error allowed for results of a data
// type after work of the given depth (elementwise 1, reductions more).
func tolerance(dt miopen.DataType, reduction bool) float64 {
	switch dt {
	case miopen.DataTypeHalf:
		return map[bool]float64{false: 2e-3, true: 5e-3}[reduction]
	case miopen.DataTypeBFloat16:
		return map[bool]float64{false: 1.5e-2, true: 3e-2}[reduction]
	case miopen.DataTypeFloat:
		return map[bool]float64{false: 1e-6, true: 1e-4}[reduction]
	}
	return 1e-12
}

// expectClose fails the test when got is not within tolerance of want.
func expectClose(t *testing.T, what string, dt miopen.DataType, reduction bool, got, want []float64) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i, g := range got {
		if math.IsNaN(g) || math.IsInf(g, 0) {
			t.Fatalf("%s: element %d is %v (the poisoned output was not written?), want %v", what, i, g, want[i])
		}
	}
	e := relErr(got, want)
	if tol := tolerance(dt, reduction); e > tol {
		i := worst(got, want)
		t.Fatalf("%s (%v): relative error %.3g > %.3g; worst element %d: %v, want %v", what, dt, e, tol, i, got[i], want[i])
	}
	t.Logf("%s (%v): relative error %.2g", what, dt, e)
}

func worst(got, want []float64) int {
	w, wi := -1.0, 0
	for i := range got {
		if d := math.Abs(got[i] - want[i]); d > w {
			w, wi = d, i
		}
	}
	return wi
}

// nd iterates over the coordinates of dims in row-major order.
func nd(dims []int, f func(c []int)) {
	c := make([]int, len(dims))
	for range prod(dims) {
		f(c)
		for k := len(dims) - 1; k >= 0; k-- {
			if c[k]++; c[k] < dims[k] {
				break
			}
			c[k] = 0
		}
	}
}

// at is the row-major index of coordinates.
func at(dims, c []int) int {
	i := 0
	for k, d := range dims {
		i = i*d + c[k]
	}
	return i
}

// convParams fills in ConvolutionParams' defaults for the references.
type convParams struct {
	pad, stride, dil []int
	groups           int
}

func refParams(p miopen.ConvolutionParams, spatial int) convParams {
	fill := func(v []int, d int) []int {
		if v == nil {
			v = make([]int, spatial)
			for i := range v {
				v[i] = d
			}
		}
		return v
	}
	g := p.Groups
	if g == 0 {
		g = 1
	}
	return convParams{fill(p.Pad, 0), fill(p.Stride, 1), fill(p.Dilation, 1), g}
}

// windowAt maps an output position and a kernel offset to the input
// position, false when it falls in the padding.
func windowAt(o, r, in []int, p convParams) ([]int, bool) {
	pos := make([]int, len(o))
	for i := range o {
		pos[i] = o[i]*p.stride[i] - p.pad[i] + r[i]*p.dil[i]
		if pos[i] < 0 || pos[i] >= in[i] {
			return nil, false
		}
	}
	return pos, true
}

// gather is a grouped cross-correlation: out[n, k, o] = sum over the k's
// group's input channels c and the kernel r of in[n, c, o*s-p+r*d] *
// w[k, c', r]. It is a forward convolution, and the data gradient of a
// transposed one.
func gather(in []float64, ind []int, w []float64, wd []int, p convParams, outd []int) []float64 {
	out := make([]float64, prod(outd))
	kPerG, cPerG := wd[0]/p.groups, wd[1]
	nd(outd, func(oc []int) {
		n, k, o := oc[0], oc[1], oc[2:]
		g := k / kPerG
		var s float64
		nd(wd[2:], func(r []int) {
			pos, ok := windowAt(o, r, ind[2:], p)
			if !ok {
				return
			}
			for c := range cPerG {
				xi := at(ind, append([]int{n, g*cPerG + c}, pos...))
				wi := at(wd, append([]int{k, c}, r...))
				s += in[xi] * w[wi]
			}
		})
		out[at(outd, oc)] = s
	})
	return out
}

// scatter is gather's transpose: every in[n, k, o] spreads over
// out[n, c, o*s-p+r*d] with w[k, c', r]. It is the data gradient of a
// forward convolution and a transposed convolution's forward.
func scatter(in []float64, ind []int, w []float64, wd []int, p convParams, outd []int) []float64 {
	out := make([]float64, prod(outd))
	kPerG, cPerG := wd[0]/p.groups, wd[1]
	nd(ind, func(ic []int) {
		n, k, o := ic[0], ic[1], ic[2:]
		g := k / kPerG
		v := in[at(ind, ic)]
		nd(wd[2:], func(r []int) {
			pos, ok := windowAt(o, r, outd[2:], p)
			if !ok {
				return
			}
			for c := range cPerG {
				out[at(outd, append([]int{n, g*cPerG + c}, pos...))] += v * w[at(wd, append([]int{k, c}, r...))]
			}
		})
	})
	return out
}

// wgrad is the weights gradient of gather: dw[k, c', r] = sum over n and
// o of dy[n, k, o] * x[n, c, o*s-p+r*d].
func wgrad(x []float64, xd []int, dy []float64, dyd []int, p convParams, wd []int) []float64 {
	dw := make([]float64, prod(wd))
	kPerG, cPerG := wd[0]/p.groups, wd[1]
	nd(dyd, func(oc []int) {
		n, k, o := oc[0], oc[1], oc[2:]
		g := k / kPerG
		v := dy[at(dyd, oc)]
		nd(wd[2:], func(r []int) {
			pos, ok := windowAt(o, r, xd[2:], p)
			if !ok {
				return
			}
			for c := range cPerG {
				dw[at(wd, append([]int{k, c}, r...))] += v * x[at(xd, append([]int{n, g*cPerG + c}, pos...))]
			}
		})
	})
	return dw
}

// activation is MIOpen's definition of each mode and its gradient (its
// test reference), in float64.
func activation(mode miopen.ActivationMode, a, b, g, x float64) float64 {
	switch mode {
	case miopen.ActivationPassThrough:
		return x
	case miopen.ActivationLogistic:
		return 1 / (1 + math.Exp(-x))
	case miopen.ActivationTanh:
		return b * math.Tanh(a*x)
	case miopen.ActivationReLU:
		return math.Max(x, 0)
	case miopen.ActivationSoftReLU:
		return math.Log1p(math.Exp(x))
	case miopen.ActivationAbs:
		return math.Abs(x)
	case miopen.ActivationPower:
		if v := a + b*x; v > 0x1p-52 {
			return math.Pow(v, g)
		}
		return 0
	case miopen.ActivationClippedReLU:
		return math.Min(math.Max(x, 0), a)
	case miopen.ActivationLeakyReLU:
		if x > 0 {
			return x
		}
		return a * x
	case miopen.ActivationELU:
		if x > 0 {
			return x
		}
		return a * math.Expm1(x)
	}
	panic(mode.String())
}

func activationGrad(mode miopen.ActivationMode, a, b, g, dy, x, y float64) float64 {
	switch mode {
	case miopen.ActivationPassThrough:
		return dy
	case miopen.ActivationLogistic:
		return dy * y * (1 - y)
	case miopen.ActivationTanh:
		return dy * a * (b - y*y/b)
	case miopen.ActivationReLU:
		return map[bool]float64{true: dy, false: 0}[x > 0]
	case miopen.ActivationSoftReLU:
		e := math.Exp(x)
		return dy * e / (e + 1)
	case miopen.ActivationAbs:
		return map[bool]float64{true: dy, false: -dy}[x > 0]
	case miopen.ActivationPower:
		if v := a + b*x; v > 0x1p-52 {
			return dy * g * b * y / v // the true gradient; MIOpen 6.4's leaves dy out
		}
		return 0
	case miopen.ActivationClippedReLU:
		return map[bool]float64{true: dy, false: 0}[x > 0 && x <= a]
	case miopen.ActivationLeakyReLU:
		return map[bool]float64{true: dy, false: a * dy}[x > 0]
	case miopen.ActivationELU:
		return map[bool]float64{true: dy, false: dy * (y + a)}[x > 0]
	}
	panic(mode.String())
}

// groupsOf lists, for a softmax mode over N x C x H x W, the index sets
// one softmax runs over.
func softmaxGroups(dims []int, mode miopen.SoftmaxMode) [][]int {
	n, c, hw := dims[0], dims[1], prod(dims[2:])
	var out [][]int
	if mode == miopen.SoftmaxModeInstance {
		for i := range n {
			var g []int
			for j := range c * hw {
				g = append(g, i*c*hw+j)
			}
			out = append(out, g)
		}
		return out
	}
	for i := range n {
		for p := range hw {
			var g []int
			for j := range c {
				g = append(g, (i*c+j)*hw+p)
			}
			out = append(out, g)
		}
	}
	return out
}

func softmaxRef(x []float64, dims []int, algo miopen.SoftmaxAlgorithm, mode miopen.SoftmaxMode) []float64 {
	y := make([]float64, len(x))
	for _, g := range softmaxGroups(dims, mode) {
		m := math.Inf(-1)
		for _, i := range g {
			m = math.Max(m, x[i])
		}
		var s float64
		for _, i := range g {
			s += math.Exp(x[i] - m)
		}
		for _, i := range g {
			if algo == miopen.SoftmaxAlgorithmLog {
				y[i] = x[i] - m - math.Log(s)
			} else {
				y[i] = math.Exp(x[i]-m) / s
			}
		}
	}
	return y
}

func softmaxGradRef(y, dy []float64, dims []int, algo miopen.SoftmaxAlgorithm, mode miopen.SoftmaxMode) []float64 {
	dx := make([]float64, len(y))
	for _, g := range softmaxGroups(dims, mode) {
		var s float64
		for _, i := range g {
			if algo == miopen.SoftmaxAlgorithmLog {
				s += dy[i]
			} else {
				s += dy[i] * y[i]
			}
		}
		for _, i := range g {
			if algo == miopen.SoftmaxAlgorithmLog {
				dx[i] = dy[i] - math.Exp(y[i])*s
			} else {
				dx[i] = y[i] * (dy[i] - s)
			}
		}
	}
	return dx
}

// poolRef pools x (N x C x spatial) and returns y and dx for dy.
func poolRef(x []float64, xd []int, p miopen.PoolingParams, yd []int, dy []float64) (y, dx []float64) {
	y, dx = make([]float64, prod(yd)), make([]float64, len(x))
	cp := convParams{pad: p.Pad, stride: p.Stride, dil: slices.Repeat([]int{1}, len(p.Window))}
	nd(yd, func(oc []int) {
		n, c, o := oc[0], oc[1], oc[2:]
		var inWin []int
		nd(p.Window, func(r []int) {
			if pos, ok := windowAt(o, r, xd[2:], cp); ok {
				inWin = append(inWin, at(xd, append([]int{n, c}, pos...)))
			}
		})
		yi := at(yd, oc)
		switch p.Mode {
		case miopen.PoolingModeMax:
			best := inWin[0]
			for _, i := range inWin {
				if x[i] > x[best] {
					best = i
				}
			}
			y[yi] = x[best]
			dx[best] += dy[yi]
		default:
			count := float64(len(inWin))
			if p.Mode == miopen.PoolingModeAverageInclusive {
				count = float64(prod(p.Window))
			}
			for _, i := range inWin {
				y[yi] += x[i] / count
				dx[i] += dy[yi] / count
			}
		}
	})
	return y, dx
}

// lrnScale is K + alpha/area * the sum of squares over the window of
// element (b, c, h, w); lrnRef the forward pass and gradient, MIOpen's
// test reference in float64.
func lrnScale(x []float64, d []int, l miopen.LRNParams, b, c, h, w int) float64 {
	r := (l.N - 1) / 2
	var s float64
	if l.Mode == miopen.LRNModeCrossChannel {
		for k := max(c-r, 0); k <= min(c+r, d[1]-1); k++ {
			v := x[at(d, []int{b, k, h, w})]
			s += v * v
		}
		return l.K + l.Alpha/float64(l.N)*s
	}
	for j := max(h-r, 0); j <= min(h+r, d[2]-1); j++ {
		for i := max(w-r, 0); i <= min(w+r, d[3]-1); i++ {
			v := x[at(d, []int{b, c, j, i})]
			s += v * v
		}
	}
	return l.K + l.Alpha/float64(l.N*l.N)*s
}

func lrnRef(x []float64, d []int, l miopen.LRNParams, y, dy []float64) (yRef, dxRef []float64) {
	yRef, dxRef = make([]float64, len(x)), make([]float64, len(x))
	r := (l.N - 1) / 2
	area := float64(l.N)
	if l.Mode == miopen.LRNModeWithinChannel {
		area *= area
	}
	nd(d, func(c []int) {
		b, ch, h, w := c[0], c[1], c[2], c[3]
		i := at(d, c)
		scale := lrnScale(x, d, l, b, ch, h, w)
		yRef[i] = x[i] * math.Pow(scale, -l.Beta)
		var s float64
		add := func(k, j, ii int) {
			o := at(d, []int{b, k, j, ii})
			s += y[o] * dy[o] / lrnScale(x, d, l, b, k, j, ii)
		}
		if l.Mode == miopen.LRNModeCrossChannel {
			for k := max(ch-r, 0); k <= min(ch+r, d[1]-1); k++ {
				add(k, h, w)
			}
		} else {
			for j := max(h-r, 0); j <= min(h+r, d[2]-1); j++ {
				for ii := max(w-r, 0); ii <= min(w+r, d[3]-1); ii++ {
					add(ch, j, ii)
				}
			}
		}
		dxRef[i] = math.Pow(scale, -l.Beta)*dy[i] - 2*l.Alpha*l.Beta/area*x[i]*s
	})
	return yRef, dxRef
}

// bnGroups lists, per statistic of a batch normalization of N x C x ...,
// the indices it is computed over.
func bnGroups(dims []int, mode miopen.BatchNormMode) [][]int {
	n, c, rest := dims[0], dims[1], prod(dims[2:])
	var out [][]int
	if mode == miopen.BatchNormModeSpatial {
		for ch := range c {
			var g []int
			for b := range n {
				for p := range rest {
					g = append(g, (b*c+ch)*rest+p)
				}
			}
			out = append(out, g)
		}
		return out
	}
	for ch := range c * rest {
		var g []int
		for b := range n {
			g = append(g, b*c*rest+ch)
		}
		out = append(out, g)
	}
	return out
}

func meanVar(x []float64, g []int) (mean, variance float64) {
	for _, i := range g {
		mean += x[i]
	}
	mean /= float64(len(g))
	for _, i := range g {
		variance += (x[i] - mean) * (x[i] - mean)
	}
	return mean, variance / float64(len(g))
}

// bnBackwardRef is the gradient of a training batch normalization:
// dx = scale*inv/n * (n*dy - sum(dy) - xhat*sum(dy*xhat)), with the
// gradients of the scale (sum(dy*xhat)) and the bias (sum(dy)).
func bnBackwardRef(x, dy []float64, groups [][]int, scale, mean, inv []float64) (dx, dScale, dBias []float64) {
	dx, dScale, dBias = make([]float64, len(x)), make([]float64, len(groups)), make([]float64, len(groups))
	for c, g := range groups {
		n := float64(len(g))
		for _, i := range g {
			dBias[c] += dy[i]
			dScale[c] += dy[i] * (x[i] - mean[c]) * inv[c]
		}
		for _, i := range g {
			xhat := (x[i] - mean[c]) * inv[c]
			dx[i] = scale[c] * inv[c] / n * (n*dy[i] - dBias[c] - xhat*dScale[c])
		}
	}
	return dx, dScale, dBias
}
