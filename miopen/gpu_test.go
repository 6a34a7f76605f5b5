package miopen_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
	"github.com/rocm-go/rocm/miopen"
)

// Tier 2: every operation on a GPU (MIOpen on AMD, cuDNN and rocm-go's
// kernels on NVIDIA) against a float64 reference on the CPU, on random
// inputs, with outputs poisoned (NaN) before each call.

type gpuEnv struct {
	t      *testing.T
	dev    *hip.Device
	stream *hip.Stream
	h      *miopen.Handle
}

func gpu(t *testing.T) *gpuEnv {
	t.Helper()
	dev, err := hip.GetDevice(0)
	if err == nil {
		err = miopen.LoadError()
	}
	testenv.Need(t, 2, "a GPU with MIOpen or cuDNN 9", err)
	s, err := dev.NewStream()
	require.NoError(t, err)
	h, err := miopen.NewHandle(s)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, h.Close())
		assert.NoError(t, s.Close())
	})
	return &gpuEnv{t: t, dev: dev, stream: s, h: h}
}

// sub is the environment for a subtest.
func (g *gpuEnv) sub(t *testing.T) *gpuEnv {
	return &gpuEnv{t: t, dev: g.dev, stream: g.stream, h: g.h}
}

// workspace allocates a workspace of the size a query returned; nil for
// none.
func (g *gpuEnv) workspace(n int, err error) *hip.Buffer {
	g.t.Helper()
	require.NoError(g.t, err)
	if n == 0 {
		return nil
	}
	b, err := g.dev.Malloc(n)
	require.NoError(g.t, err)
	g.t.Cleanup(func() { b.Close() })
	return b
}

func (g *gpuEnv) desc(dt miopen.DataType, dims []int, strides []int) *miopen.TensorDescriptor {
	g.t.Helper()
	d, err := miopen.NewTensorDescriptor(dt, dims, strides)
	require.NoError(g.t, err)
	g.t.Cleanup(func() { d.Close() })
	return d
}

func (g *gpuEnv) layout(dt miopen.DataType, nhwc bool, dims []int) *miopen.TensorDescriptor {
	g.t.Helper()
	l := miopen.LayoutNCHW
	if nhwc {
		l = miopen.LayoutNHWC
	}
	d, err := miopen.NewTensorLayout(dt, l, dims)
	require.NoError(g.t, err)
	g.t.Cleanup(func() { d.Close() })
	return d
}

// alloc allocates a buffer for d, every byte 0xFF (NaN in every floating
// type).
func (g *gpuEnv) alloc(d *miopen.TensorDescriptor) miopen.Tensor {
	g.t.Helper()
	b, err := g.dev.Malloc(d.Bytes())
	require.NoError(g.t, err)
	g.t.Cleanup(func() { b.Close() })
	require.NoError(g.t, b.Memset(0xFF))
	return miopen.Tensor{Desc: d, Data: b}
}

// put uploads values (row-major over the dimensions) into a poisoned
// buffer for d, and returns them as the type holds them.
func (g *gpuEnv) put(d *miopen.TensorDescriptor, vals []float64) (miopen.Tensor, []float64) {
	g.t.Helper()
	t := g.alloc(d)
	size := d.DataType().Size()
	host := make([]byte, d.Bytes())
	for i := range host {
		host[i] = 0xFF
	}
	for i, off := range offsets(d) {
		encode(d.DataType(), host[off*size:], vals[i])
	}
	require.NoError(g.t, t.Data.CopyFromHost(host))
	return t, quantize(d.DataType(), vals)
}

// rand uploads random values in [lo, hi).
func (g *gpuEnv) rand(d *miopen.TensorDescriptor, lo, hi float64) (miopen.Tensor, []float64) {
	return g.put(d, random(d.Elements(), lo, hi))
}

// get waits for the stream and downloads a tensor, row-major.
func (g *gpuEnv) get(t miopen.Tensor) []float64 {
	g.t.Helper()
	require.NoError(g.t, g.stream.Synchronize())
	host := make([]byte, t.Desc.Bytes())
	require.NoError(g.t, t.Data.CopyToHost(host))
	size := t.Desc.DataType().Size()
	out := make([]float64, t.Desc.Elements())
	for i, off := range offsets(t.Desc) {
		out[i] = decode(t.Desc.DataType(), host[off*size:])
	}
	return out
}

// unsupported skips a case the platform's library does not implement, on
// AMD only: on NVIDIA every case runs.
func unsupported(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil && errors.Is(err, miopen.ErrNotImplemented) && miopen.LoadedPlatform() == hip.PlatformAMD {
		t.Skipf("MIOpen does not implement %s: %v", what, err)
	}
}

type convCase struct {
	name    string
	dt      miopen.DataType
	nhwc    bool
	x, w    []int
	p       miopen.ConvolutionParams
	strided bool // x with padded rows, forward only
}

var convCases = []convCase{
	{name: "3x3 pad 1", dt: miopen.DataTypeFloat, x: []int{2, 8, 9, 9}, w: []int{12, 8, 3, 3}, p: miopen.ConvolutionParams{Pad: []int{1, 1}}},
	{name: "odd shape, stride 2, 3x2 kernel", dt: miopen.DataTypeFloat, x: []int{3, 5, 11, 7}, w: []int{6, 5, 3, 2}, p: miopen.ConvolutionParams{Stride: []int{2, 2}}},
	{name: "dilation 2", dt: miopen.DataTypeFloat, x: []int{2, 4, 10, 10}, w: []int{6, 4, 3, 3}, p: miopen.ConvolutionParams{Pad: []int{2, 2}, Dilation: []int{2, 2}}},
	{name: "2 groups", dt: miopen.DataTypeFloat, x: []int{2, 8, 7, 7}, w: []int{12, 4, 3, 3}, p: miopen.ConvolutionParams{Pad: []int{1, 1}, Groups: 2}},
	{name: "depthwise", dt: miopen.DataTypeFloat, x: []int{2, 6, 8, 8}, w: []int{6, 1, 3, 3}, p: miopen.ConvolutionParams{Pad: []int{1, 1}, Groups: 6}},
	{name: "1x1", dt: miopen.DataTypeFloat, x: []int{2, 16, 5, 5}, w: []int{8, 16, 1, 1}},
	{name: "transposed, stride 2, output padding", dt: miopen.DataTypeFloat, x: []int{2, 6, 5, 5}, w: []int{6, 4, 3, 3},
		p: miopen.ConvolutionParams{Pad: []int{1, 1}, Stride: []int{2, 2}, Transposed: true, OutputPad: []int{1, 1}}},
	{name: "transposed, 3 groups", dt: miopen.DataTypeFloat, x: []int{2, 6, 4, 4}, w: []int{6, 2, 3, 3},
		p: miopen.ConvolutionParams{Stride: []int{2, 2}, Groups: 3, Transposed: true}},
	{name: "strided input", dt: miopen.DataTypeFloat, x: []int{2, 4, 6, 6}, w: []int{5, 4, 3, 3}, p: miopen.ConvolutionParams{Pad: []int{1, 1}}, strided: true},
	{name: "3-D", dt: miopen.DataTypeFloat, x: []int{2, 3, 5, 6, 5}, w: []int{4, 3, 3, 3, 3}, p: miopen.ConvolutionParams{Pad: []int{1, 1, 1}, Stride: []int{1, 2, 1}}},
	{name: "double", dt: miopen.DataTypeDouble, x: []int{2, 4, 6, 6}, w: []int{5, 4, 3, 3}, p: miopen.ConvolutionParams{Pad: []int{1, 1}}},
	{name: "half", dt: miopen.DataTypeHalf, x: []int{2, 16, 9, 9}, w: []int{16, 16, 3, 3}, p: miopen.ConvolutionParams{Pad: []int{1, 1}}},
	{name: "half NHWC", dt: miopen.DataTypeHalf, nhwc: true, x: []int{2, 16, 9, 9}, w: []int{32, 16, 3, 3}, p: miopen.ConvolutionParams{Pad: []int{1, 1}}},
	{name: "bfloat16", dt: miopen.DataTypeBFloat16, x: []int{2, 16, 9, 9}, w: []int{16, 16, 3, 3}, p: miopen.ConvolutionParams{Pad: []int{1, 1}}},
	{name: "bfloat16 NHWC, stride 2", dt: miopen.DataTypeBFloat16, nhwc: true, x: []int{2, 16, 10, 10}, w: []int{16, 16, 3, 3},
		p: miopen.ConvolutionParams{Pad: []int{1, 1}, Stride: []int{2, 2}}},
}

func TestGPUConvolutions(t *testing.T) {
	g := gpu(t)
	for _, c := range convCases {
		t.Run(c.name, func(t *testing.T) {
			g := g.sub(t)
			conv, err := miopen.NewConvolutionDescriptor(c.p)
			require.NoError(t, err)
			defer conv.Close()
			yd, err := c.p.OutputDims(c.x, c.w)
			require.NoError(t, err)
			cp := refParams(c.p, len(c.x)-2)

			var xDesc *miopen.TensorDescriptor
			if c.strided {
				st := slices.Clone(c.x)
				st[len(st)-1] += 3
				xDesc = g.desc(c.dt, c.x, []int{st[1] * st[2] * st[3], st[2] * st[3], st[3], 1})
			} else {
				xDesc = g.layout(c.dt, c.nhwc, c.x)
			}
			x, xv := g.rand(xDesc, -1, 1)
			w, wv := g.rand(g.layout(c.dt, c.nhwc, c.w), -1, 1)
			y := g.alloc(g.layout(c.dt, c.nhwc, yd))
			out, err := conv.OutputShape(x.Desc, w.Desc)
			require.NoError(t, err)
			require.Equal(t, yd, out)

			perfs, err := g.h.FindConvolutionForward(conv, x, w, y)
			unsupported(t, err, c.name)
			require.NoError(t, err)
			require.NotEmpty(t, perfs)
			t.Logf("forward: %s", perfs[0])
			require.NoError(t, y.Data.Memset(0xFF)) // the Find wrote it
			require.NoError(t, g.h.ConvolutionForward(conv, x, w, y))
			want := gather(xv, c.x, wv, c.w, cp, yd)
			if c.p.Transposed {
				want = scatter(xv, c.x, wv, c.w, cp, yd)
			}
			expectClose(t, "forward", c.dt, true, g.get(y), want)
			if c.strided {
				return
			}

			dy, dyv := g.rand(g.layout(c.dt, c.nhwc, yd), -1, 1)
			dx := g.alloc(g.layout(c.dt, c.nhwc, c.x))
			require.NoError(t, g.h.ConvolutionBackwardData(conv, dy, w, dx))
			want = scatter(dyv, yd, wv, c.w, cp, c.x)
			if c.p.Transposed {
				want = gather(dyv, yd, wv, c.w, cp, c.x)
			}
			expectClose(t, "backward data", c.dt, true, g.get(dx), want)

			dw := g.alloc(g.layout(c.dt, c.nhwc, c.w))
			require.NoError(t, g.h.ConvolutionBackwardWeights(conv, dy, x, dw))
			want = wgrad(xv, c.x, dyv, yd, cp, c.w)
			if c.p.Transposed {
				want = wgrad(dyv, yd, xv, c.x, cp, c.w)
			}
			expectClose(t, "backward weights", c.dt, true, g.get(dw), want)
		})
	}
}

// TestGPUEveryEngine runs every algorithm a Find returns (on NVIDIA the
// graph API's engines beside the legacy algorithms and cuBLAS), in each
// direction, for each floating-point type in NCHW and NHWC, against the
// float64 reference. On NVIDIA each Find must offer the graph API's
// engines: were they to fail silently, the legacy algorithms would hide it.
func TestGPUEveryEngine(t *testing.T) {
	g := gpu(t)
	nvidia := miopen.LoadedPlatform() == hip.PlatformNVIDIA
	type problem struct {
		name string
		x, w []int
		p    miopen.ConvolutionParams
	}
	problems := []problem{
		{"3x3 pad 1", []int{2, 16, 9, 9}, []int{32, 16, 3, 3}, miopen.ConvolutionParams{Pad: []int{1, 1}}},
		{"transposed, stride 2", []int{2, 16, 5, 5}, []int{16, 8, 3, 3},
			miopen.ConvolutionParams{Pad: []int{1, 1}, Stride: []int{2, 2}, Transposed: true, OutputPad: []int{1, 1}}},
	}
	for _, pr := range problems {
		for _, dt := range []miopen.DataType{miopen.DataTypeHalf, miopen.DataTypeBFloat16, miopen.DataTypeFloat} {
			for _, nhwc := range []bool{false, true} {
				name := fmt.Sprintf("%s %v NHWC=%v", pr.name, dt, nhwc)
				t.Run(name, func(t *testing.T) {
					g := g.sub(t)
					conv, err := miopen.NewConvolutionDescriptor(pr.p)
					require.NoError(t, err)
					defer conv.Close()
					yd, err := pr.p.OutputDims(pr.x, pr.w)
					require.NoError(t, err)
					cp := refParams(pr.p, 2)
					x, xv := g.rand(g.layout(dt, nhwc, pr.x), -1, 1)
					w, wv := g.rand(g.layout(dt, nhwc, pr.w), -1, 1)
					dy, dyv := g.rand(g.layout(dt, nhwc, yd), -1, 1)
					y, dx, dw := g.alloc(g.layout(dt, nhwc, yd)), g.alloc(g.layout(dt, nhwc, pr.x)), g.alloc(g.layout(dt, nhwc, pr.w))
					fwd, data, weights := gather(xv, pr.x, wv, pr.w, cp, yd), scatter(dyv, yd, wv, pr.w, cp, pr.x), wgrad(xv, pr.x, dyv, yd, cp, pr.w)
					if pr.p.Transposed {
						fwd, data, weights = scatter(xv, pr.x, wv, pr.w, cp, yd), gather(dyv, yd, wv, pr.w, cp, pr.x), wgrad(dyv, yd, xv, pr.x, cp, pr.w)
					}
					for _, dir := range []struct {
						d    miopen.ConvDirection
						out  miopen.Tensor
						want []float64
						find func() ([]miopen.ConvAlgoPerf, error)
						run  func(p miopen.ConvAlgoPerf) error
					}{
						{miopen.ConvForward, y, fwd, func() ([]miopen.ConvAlgoPerf, error) { return g.h.FindConvolutionForward(conv, x, w, y) },
							func(p miopen.ConvAlgoPerf) error {
								return g.h.ConvolutionForward(conv, x, w, y, miopen.WithAlgorithm(p))
							}},
						{miopen.ConvBackwardData, dx, data, func() ([]miopen.ConvAlgoPerf, error) { return g.h.FindConvolutionBackwardData(conv, dy, w, dx) },
							func(p miopen.ConvAlgoPerf) error {
								return g.h.ConvolutionBackwardData(conv, dy, w, dx, miopen.WithAlgorithm(p))
							}},
						{miopen.ConvBackwardWeights, dw, weights, func() ([]miopen.ConvAlgoPerf, error) { return g.h.FindConvolutionBackwardWeights(conv, dy, x, dw) },
							func(p miopen.ConvAlgoPerf) error {
								return g.h.ConvolutionBackwardWeights(conv, dy, x, dw, miopen.WithAlgorithm(p))
							}},
					} {
						perfs, err := dir.find()
						unsupported(t, err, name)
						require.NoError(t, err, "%s", dir.d)
						graph := 0
						for _, p := range perfs {
							t.Logf("%s", p)
							if strings.HasPrefix(p.Engine, "cuDNN engine ") {
								graph++
							}
							require.NoError(t, dir.out.Data.Memset(0xFF))
							require.NoError(t, dir.run(p), "%s", p)
							expectClose(t, fmt.Sprintf("%s with %s", dir.d, p.Engine), dt, true, g.get(dir.out), dir.want)
						}
						if nvidia {
							assert.Positive(t, graph, "%s: the Find offered no engine of cuDNN's graph API", dir.d)
						}
					}
				})
			}
		}
	}
}

func TestGPUBias(t *testing.T) {
	g := gpu(t)
	for _, dt := range []miopen.DataType{miopen.DataTypeFloat, miopen.DataTypeHalf} {
		y, yv := g.rand(g.desc(dt, []int{2, 5, 4, 3}, nil), -1, 1)
		b, bv := g.rand(g.desc(dt, []int{1, 5, 1, 1}, nil), -1, 1)
		require.NoError(t, g.h.ConvolutionForwardBias(b, y))
		want := make([]float64, len(yv))
		nd([]int{2, 5, 4, 3}, func(c []int) { want[at([]int{2, 5, 4, 3}, c)] = yv[at([]int{2, 5, 4, 3}, c)] + bv[c[1]] })
		expectClose(t, "bias", dt, false, g.get(y), want)

		dy, dyv := g.rand(g.desc(dt, []int{2, 5, 4, 3}, nil), -1, 1)
		db := g.alloc(g.desc(dt, []int{1, 5, 1, 1}, nil))
		require.NoError(t, g.h.ConvolutionBackwardBias(dy, db))
		sums := make([]float64, 5)
		nd([]int{2, 5, 4, 3}, func(c []int) { sums[c[1]] += dyv[at([]int{2, 5, 4, 3}, c)] })
		expectClose(t, "bias gradient", dt, true, g.get(db), sums)
	}
}

func TestGPUActivations(t *testing.T) {
	g := gpu(t)
	type act struct {
		mode    miopen.ActivationMode
		a, b, c float64
		dts     []miopen.DataType
	}
	f := miopen.DataTypeFloat
	for _, c := range []act{
		{miopen.ActivationPassThrough, 0, 0, 0, []miopen.DataType{f}},
		{miopen.ActivationLogistic, 0, 0, 0, []miopen.DataType{f, miopen.DataTypeBFloat16}},
		{miopen.ActivationTanh, 1, 1, 0, []miopen.DataType{f, miopen.DataTypeHalf}},
		{miopen.ActivationTanh, 1.5, 0.5, 0, []miopen.DataType{f}},
		{miopen.ActivationReLU, 0, 0, 0, []miopen.DataType{f, miopen.DataTypeHalf, miopen.DataTypeDouble}},
		{miopen.ActivationSoftReLU, 0, 0, 0, []miopen.DataType{f, miopen.DataTypeBFloat16}},
		{miopen.ActivationAbs, 0, 0, 0, []miopen.DataType{f, miopen.DataTypeDouble}},
		{miopen.ActivationPower, 0.2, 1, 2, []miopen.DataType{f, miopen.DataTypeHalf}},
		{miopen.ActivationClippedReLU, 0.5, 0, 0, []miopen.DataType{f, miopen.DataTypeDouble}},
		{miopen.ActivationLeakyReLU, 0.1, 0, 0, []miopen.DataType{f, miopen.DataTypeHalf}},
		{miopen.ActivationELU, 0.7, 0, 0, []miopen.DataType{f, miopen.DataTypeHalf}},
	} {
		for _, dt := range c.dts {
			t.Run(fmt.Sprintf("%v %v,%v,%v %v", c.mode, c.a, c.b, c.c, dt), func(t *testing.T) {
				g := g.sub(t)
				dims := []int{2, 3, 7, 5}
				a, err := miopen.NewActivationDescriptor(c.mode, c.a, c.b, c.c)
				require.NoError(t, err)
				defer a.Close()
				x, xv := g.rand(g.desc(dt, dims, nil), -2, 2)
				y := g.alloc(g.desc(dt, dims, nil))
				err = g.h.ActivationForward(a, x, y)
				unsupported(t, err, fmt.Sprint(c.mode, dt))
				require.NoError(t, err)
				yv := g.get(y)
				want := make([]float64, len(xv))
				for i, v := range xv {
					want[i] = activation(c.mode, c.a, c.b, c.c, v)
				}
				expectClose(t, "forward", dt, false, yv, want)

				dy, dyv := g.rand(g.desc(dt, dims, nil), -1, 1)
				dx := g.alloc(g.desc(dt, dims, nil))
				require.NoError(t, g.h.ActivationBackward(a, y, dy, x, dx))
				for i := range want {
					want[i] = activationGrad(c.mode, c.a, c.b, c.c, dyv[i], xv[i], yv[i])
				}
				expectClose(t, "backward", dt, false, g.get(dx), want)
			})
		}
	}
	t.Run("strides differ", func(t *testing.T) {
		g := g.sub(t)
		a, err := miopen.NewActivationDescriptor(miopen.ActivationLeakyReLU, 0.2, 0, 0)
		require.NoError(t, err)
		defer a.Close()
		x, xv := g.rand(g.layout(f, false, []int{2, 3, 4, 5}), -1, 1)
		y := g.alloc(g.layout(f, true, []int{2, 3, 4, 5}))
		err = g.h.ActivationForward(a, x, y)
		unsupported(t, err, "an NCHW to NHWC activation")
		require.NoError(t, err)
		want := make([]float64, len(xv))
		for i, v := range xv {
			want[i] = activation(miopen.ActivationLeakyReLU, 0.2, 0, 0, v)
		}
		expectClose(t, "NCHW to NHWC", f, false, g.get(y), want)
	})
}

func TestGPUSoftmax(t *testing.T) {
	g := gpu(t)
	dims := []int{2, 5, 3, 4}
	for _, dt := range []miopen.DataType{miopen.DataTypeFloat, miopen.DataTypeHalf} {
		for _, algo := range []miopen.SoftmaxAlgorithm{miopen.SoftmaxAlgorithmFast, miopen.SoftmaxAlgorithmAccurate, miopen.SoftmaxAlgorithmLog} {
			for _, mode := range []miopen.SoftmaxMode{miopen.SoftmaxModeInstance, miopen.SoftmaxModeChannel} {
				name := fmt.Sprintf("%v %v %v", dt, algo, mode)
				x, xv := g.rand(g.desc(dt, dims, nil), -3, 3)
				y := g.alloc(g.desc(dt, dims, nil))
				require.NoError(t, g.h.SoftmaxForward(algo, mode, x, y), name)
				yv := g.get(y)
				expectClose(t, name, dt, true, yv, softmaxRef(xv, dims, algo, mode))
				dy, dyv := g.rand(g.desc(dt, dims, nil), -1, 1)
				dx := g.alloc(g.desc(dt, dims, nil))
				require.NoError(t, g.h.SoftmaxBackward(algo, mode, y, dy, dx), name)
				expectClose(t, name+" backward", dt, true, g.get(dx), softmaxGradRef(yv, dyv, dims, algo, mode))
			}
		}
	}
}

func TestGPUPooling(t *testing.T) {
	g := gpu(t)
	for _, c := range []struct {
		dt miopen.DataType
		x  []int
		p  miopen.PoolingParams
	}{
		{miopen.DataTypeFloat, []int{2, 3, 9, 8}, miopen.PoolingParams{Mode: miopen.PoolingModeMax, Window: []int{3, 3}, Pad: []int{1, 1}, Stride: []int{2, 2}}},
		{miopen.DataTypeFloat, []int{2, 3, 9, 8}, miopen.PoolingParams{Mode: miopen.PoolingModeAverage, Window: []int{3, 3}, Pad: []int{1, 1}, Stride: []int{2, 2}}},
		{miopen.DataTypeFloat, []int{2, 3, 9, 8}, miopen.PoolingParams{Mode: miopen.PoolingModeAverageInclusive, Window: []int{3, 3}, Pad: []int{1, 1}, Stride: []int{2, 2}}},
		{miopen.DataTypeFloat, []int{2, 3, 7, 6}, miopen.PoolingParams{Mode: miopen.PoolingModeAverage, Window: []int{2, 3}}},
		{miopen.DataTypeHalf, []int{2, 4, 8, 8}, miopen.PoolingParams{Mode: miopen.PoolingModeMax, Window: []int{2, 2}}},
		{miopen.DataTypeFloat, []int{2, 2, 5, 6, 6}, miopen.PoolingParams{Mode: miopen.PoolingModeMax, Window: []int{2, 2, 2}, Stride: []int{1, 2, 2}}},
		{miopen.DataTypeFloat, []int{2, 2, 5, 6, 6}, miopen.PoolingParams{Mode: miopen.PoolingModeAverage, Window: []int{3, 3, 3}, Pad: []int{1, 1, 1}, Stride: []int{2, 2, 2}}},
	} {
		t.Run(fmt.Sprintf("%v %v %+v", c.dt, c.x, c.p), func(t *testing.T) {
			g := g.sub(t)
			p, err := miopen.NewPoolingDescriptor(c.p)
			require.NoError(t, err)
			defer p.Close()
			params := p.Params()
			yd, err := p.OutputShape(g.desc(c.dt, c.x, nil))
			require.NoError(t, err)
			x, xv := g.rand(g.desc(c.dt, c.x, nil), -1, 1)
			y := g.alloc(g.desc(c.dt, yd, nil))
			ws := g.workspace(p.WorkspaceSize(y.Desc))
			err = g.h.PoolingForward(p, x, y, ws)
			unsupported(t, err, "this pooling")
			require.NoError(t, err)
			dy, dyv := g.rand(g.desc(c.dt, yd, nil), -1, 1)
			wantY, wantDX := poolRef(xv, c.x, params, yd, dyv)
			expectClose(t, "forward", c.dt, false, g.get(y), wantY)
			dx := g.alloc(g.desc(c.dt, c.x, nil))
			require.NoError(t, g.h.PoolingBackward(p, y, dy, x, dx, ws))
			expectClose(t, "backward", c.dt, false, g.get(dx), wantDX)
		})
	}
}

func TestGPULRN(t *testing.T) {
	g := gpu(t)
	dims := []int{2, 7, 6, 5}
	for _, c := range []struct {
		dt miopen.DataType
		p  miopen.LRNParams
	}{
		{miopen.DataTypeFloat, miopen.LRNParams{Mode: miopen.LRNModeCrossChannel, N: 5, Alpha: 0.5, Beta: 0.75, K: 1}},
		{miopen.DataTypeFloat, miopen.LRNParams{Mode: miopen.LRNModeCrossChannel, N: 3, Alpha: 1, Beta: 0.5, K: 2}},
		{miopen.DataTypeFloat, miopen.LRNParams{Mode: miopen.LRNModeWithinChannel, N: 3, Alpha: 0.5, Beta: 0.75, K: 1}},
		{miopen.DataTypeHalf, miopen.LRNParams{Mode: miopen.LRNModeWithinChannel, N: 5, Alpha: 1, Beta: 0.75, K: 2}},
		{miopen.DataTypeDouble, miopen.LRNParams{Mode: miopen.LRNModeWithinChannel, N: 3, Alpha: 0.25, Beta: 1, K: 1}},
	} {
		t.Run(fmt.Sprintf("%v %+v", c.dt, c.p), func(t *testing.T) {
			g := g.sub(t)
			l, err := miopen.NewLRNDescriptor(c.p)
			require.NoError(t, err)
			defer l.Close()
			x, xv := g.rand(g.desc(c.dt, dims, nil), -1, 1)
			y := g.alloc(g.desc(c.dt, dims, nil))
			ws := g.workspace(l.WorkspaceSize(y.Desc))
			err = g.h.LRNForward(l, x, y, ws)
			unsupported(t, err, fmt.Sprint("LRN of ", c.dt))
			require.NoError(t, err)
			yv := g.get(y)
			dy, dyv := g.rand(g.desc(c.dt, dims, nil), -1, 1)
			wantY, wantDX := lrnRef(xv, dims, c.p, yv, dyv)
			expectClose(t, "forward", c.dt, false, yv, wantY)
			dx := g.alloc(g.desc(c.dt, dims, nil))
			require.NoError(t, g.h.LRNBackward(l, y, dy, x, dx, ws))
			expectClose(t, "backward", c.dt, true, g.get(dx), wantDX)
		})
	}
}

func TestGPUBatchNorm(t *testing.T) {
	g := gpu(t)
	dims := []int{4, 3, 5, 6}
	const eps, factor = 1e-5, 0.1
	for _, dt := range []miopen.DataType{miopen.DataTypeFloat, miopen.DataTypeHalf} {
		for _, mode := range []miopen.BatchNormMode{miopen.BatchNormModeSpatial, miopen.BatchNormModePerActivation} {
			t.Run(fmt.Sprintf("%v %v", dt, mode), func(t *testing.T) {
				g := g.sub(t)
				x, xv := g.rand(g.desc(dt, dims, nil), -2, 3)
				xd := x.Desc
				bn, err := miopen.DeriveBatchNormDescriptor(xd, mode)
				require.NoError(t, err)
				defer bn.Close()
				groups := bnGroups(dims, mode)
				stat := func(lo, hi float64) (*hip.Buffer, []float64) {
					b, v := g.rand(bn, lo, hi)
					return b.Data, v
				}
				scale, sv := stat(0.5, 1.5)
				bias, bv := stat(-1, 1)
				p := miopen.BatchNormParams{Mode: mode, Desc: bn, Scale: scale, Bias: bias, Epsilon: eps}

				// Inference with given statistics.
				mean, mv := stat(-0.5, 0.5)
				variance, vv := stat(0.5, 2)
				y := g.alloc(g.desc(dt, dims, nil))
				require.NoError(t, g.h.BatchNormForwardInference(p, x, y, mean, variance))
				want := make([]float64, len(xv))
				for c, grp := range groups {
					for _, i := range grp {
						want[i] = sv[c]*(xv[i]-mv[c])/math.Sqrt(vv[c]+eps) + bv[c]
					}
				}
				expectClose(t, "inference", dt, false, g.get(y), want)

				// Training: the batch's statistics, running averages updated.
				runMean, rmv := stat(-0.5, 0.5)
				runVar, rvv := stat(0.5, 2)
				saveMean, saveInv := g.alloc(bn).Data, g.alloc(bn).Data
				require.NoError(t, g.h.BatchNormForwardTraining(p, x, y, miopen.BatchNormTraining{Factor: factor,
					RunningMean: runMean, RunningVariance: runVar, SavedMean: saveMean, SavedInvVariance: saveInv}))
				wantMean, wantInv, wantRM, wantRV := make([]float64, len(groups)), make([]float64, len(groups)), make([]float64, len(groups)), make([]float64, len(groups))
				for c, grp := range groups {
					m, v := meanVar(xv, grp)
					wantMean[c], wantInv[c] = m, 1/math.Sqrt(v+eps)
					n := float64(len(grp))
					wantRM[c] = (1-factor)*rmv[c] + factor*m
					wantRV[c] = (1-factor)*rvv[c] + factor*v*n/(n-1)
					for _, i := range grp {
						want[i] = sv[c]*(xv[i]-m)*wantInv[c] + bv[c]
					}
				}
				f := miopen.DataTypeFloat
				expectClose(t, "training", dt, true, g.get(y), want)
				expectClose(t, "saved mean", f, true, g.get(miopen.Tensor{Desc: bn, Data: saveMean}), wantMean)
				expectClose(t, "saved inverse variance", f, true, g.get(miopen.Tensor{Desc: bn, Data: saveInv}), wantInv)
				expectClose(t, "running mean", f, true, g.get(miopen.Tensor{Desc: bn, Data: runMean}), wantRM)
				expectClose(t, "running variance", f, true, g.get(miopen.Tensor{Desc: bn, Data: runVar}), wantRV)

				// Backward from the saved statistics.
				dy, dyv := g.rand(g.desc(dt, dims, nil), -1, 1)
				dx := g.alloc(g.desc(dt, dims, nil))
				dScale, dBias := g.alloc(bn).Data, g.alloc(bn).Data
				require.NoError(t, g.h.BatchNormBackward(p, x, dy, dx, miopen.BatchNormGradients{Scale: dScale, Bias: dBias}, saveMean, saveInv))
				want, wantDS, wantDB := bnBackwardRef(xv, dyv, groups, sv, wantMean, wantInv)
				expectClose(t, "backward", dt, true, g.get(dx), want)
				expectClose(t, "scale gradient", f, true, g.get(miopen.Tensor{Desc: bn, Data: dScale}), wantDS)
				expectClose(t, "bias gradient", f, true, g.get(miopen.Tensor{Desc: bn, Data: dBias}), wantDB)
			})
		}
	}
}

func TestGPUOpTensor(t *testing.T) {
	g := gpu(t)
	dims, bdims := []int{2, 3, 4, 5}, []int{1, 3, 1, 5}
	for _, dt := range []miopen.DataType{miopen.DataTypeFloat, miopen.DataTypeHalf} {
		for _, op := range []miopen.TensorOp{miopen.TensorOpAdd, miopen.TensorOpMul, miopen.TensorOpMin, miopen.TensorOpMax} {
			a, av := g.rand(g.desc(dt, dims, nil), -1, 1)
			b, bv := g.rand(g.desc(dt, bdims, nil), -1, 1)
			c, cv := g.rand(g.desc(dt, dims, nil), -1, 1)
			const a1, a2, beta = 1.5, -0.5, 0.25
			require.NoError(t, g.h.OpTensor(op, a1, a, a2, b, beta, c))
			want := make([]float64, len(av))
			nd(dims, func(i []int) {
				k := at(dims, i)
				x, y := a1*av[k], a2*bv[at(bdims, []int{0, i[1], 0, i[3]})]
				var r float64
				switch op {
				case miopen.TensorOpAdd:
					r = x + y
				case miopen.TensorOpMul:
					r = x * y
				case miopen.TensorOpMin:
					r = math.Min(x, y)
				default:
					r = math.Max(x, y)
				}
				want[k] = r + beta*cv[k]
			})
			expectClose(t, fmt.Sprint(op), dt, false, g.get(c), want)
		}
	}
}

func TestGPUFindCacheAndConcurrency(t *testing.T) {
	g := gpu(t)
	conv, err := miopen.NewConvolutionDescriptor(miopen.ConvolutionParams{Pad: []int{1, 1}})
	require.NoError(t, err)
	defer conv.Close()
	x, xv := g.rand(g.desc(miopen.DataTypeFloat, []int{2, 8, 12, 12}, nil), -1, 1)
	w, wv := g.rand(g.desc(miopen.DataTypeFloat, []int{8, 8, 3, 3}, nil), -1, 1)
	g.h.ClearFindCache()
	before := g.h.FindCacheStats()
	perfs, err := g.h.FindConvolutionForward(conv, x, w, g.alloc(g.desc(miopen.DataTypeFloat, []int{2, 8, 12, 12}, nil)))
	require.NoError(t, err)
	for i, p := range perfs {
		assert.Positive(t, p.Time, "%s", p)
		assert.GreaterOrEqual(t, p.Workspace, 0)
		assert.NotEmpty(t, p.Engine)
		if i > 0 {
			assert.GreaterOrEqual(t, p.Time, perfs[i-1].Time, "fastest first")
		}
		t.Logf("%s", p)
	}
	// Eight goroutines share the handle: its calls are serialized, the
	// Find is not run again, and every output is right.
	want := gather(xv, []int{2, 8, 12, 12}, wv, []int{8, 8, 3, 3}, refParams(conv.Params(), 2), []int{2, 8, 12, 12})
	ys := make([]miopen.Tensor, 8)
	for i := range ys {
		ys[i] = g.alloc(g.desc(miopen.DataTypeFloat, []int{2, 8, 12, 12}, nil))
	}
	var wg sync.WaitGroup
	for i := range ys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, g.h.ConvolutionForward(conv, x, w, ys[i]))
		}()
	}
	wg.Wait()
	for i := range ys {
		expectClose(t, fmt.Sprint("goroutine ", i), miopen.DataTypeFloat, true, g.get(ys[i]), want)
	}
	st := g.h.FindCacheStats()
	assert.Equal(t, before.Misses+1, st.Misses, "one Find for the problem")
	assert.Equal(t, 1, st.Entries)
}

func TestGPUMultiHeadAttention(t *testing.T) {
	g := gpu(t)
	n, h, s, d := 2, 2, 64, 32
	q := g.desc(miopen.DataTypeHalf, []int{n, h, s, d}, nil)
	m, err := miopen.NewMHAForward(q, q, q, q, miopen.MHAParams{Scale: float32(1 / math.Sqrt(float64(d)))})
	if miopen.LoadedPlatform() == hip.PlatformNVIDIA {
		require.ErrorIs(t, err, miopen.ErrNotImplemented, "legacy cuDNN has no multi-head attention")
		require.ErrorContains(t, err, "no legacy-cuDNN equivalent")
		return
	}
	require.NoError(t, err)
	defer m.Close()
	qt, qv := g.rand(q, -1, 1)
	kt, kv := g.rand(q, -1, 1)
	vt, vv := g.rand(q, -1, 1)
	o := g.alloc(q)
	sols, err := m.Find(g.h)
	if errors.Is(err, miopen.ErrNotImplemented) {
		t.Skipf("MIOpen has no MHA solution on this GPU (CDNA only): %v", err)
	}
	require.NoError(t, err)
	t.Logf("%d solutions, fastest %v", len(sols), sols[0].Time)
	require.NoError(t, m.Run(g.h, qt, kt, vt, o))
	want := make([]float64, len(qv))
	scale := 1 / math.Sqrt(float64(d))
	for b := range n * h {
		base := b * s * d
		for i := range s {
			scores := make([]float64, s)
			mx := math.Inf(-1)
			for j := range s {
				for k := range d {
					scores[j] += qv[base+i*d+k] * kv[base+j*d+k]
				}
				scores[j] *= scale
				mx = math.Max(mx, scores[j])
			}
			var sum float64
			for j := range scores {
				scores[j] = math.Exp(scores[j] - mx)
				sum += scores[j]
			}
			for k := range d {
				var acc float64
				for j := range s {
					acc += scores[j] / sum * vv[base+j*d+k]
				}
				want[base+i*d+k] = acc
			}
		}
	}
	expectClose(t, "attention", miopen.DataTypeHalf, true, g.get(o), want)
}

// A handle with nothing in memory, as a new process has, reads the Find
// of a problem another handle ran from the disk cache: it runs the same
// algorithm, with the same output, without the Find's time.
func TestGPUFindCacheOnDisk(t *testing.T) {
	g := gpu(t)
	dir := t.TempDir()
	t.Setenv(miopen.FindCacheEnv, dir)
	conv, err := miopen.NewConvolutionDescriptor(miopen.ConvolutionParams{Pad: []int{1, 1}})
	require.NoError(t, err)
	defer conv.Close()
	xd, wd, yd := []int{4, 64, 32, 32}, []int{64, 64, 3, 3}, []int{4, 64, 32, 32}
	x, xv := g.rand(g.layout(miopen.DataTypeHalf, true, xd), -1, 1)
	w, wv := g.rand(g.layout(miopen.DataTypeHalf, true, wd), -1, 1)
	y := g.alloc(g.layout(miopen.DataTypeHalf, true, yd))
	want := gather(xv, xd, wv, wd, refParams(conv.Params(), 2), yd)

	start := time.Now()
	perfs, err := g.h.FindConvolutionForward(conv, x, w, y)
	require.NoError(t, err)
	require.NoError(t, g.h.ConvolutionForward(conv, x, w, y))
	fresh := g.get(y)
	findTime := time.Since(start)
	expectClose(t, "a fresh Find", miopen.DataTypeHalf, true, fresh, want)
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, files, 1)

	h, err := miopen.NewHandle(g.stream)
	require.NoError(t, err)
	defer h.Close()
	require.NoError(t, y.Data.Memset(0xFF))
	start = time.Now()
	require.NoError(t, h.ConvolutionForward(conv, x, w, y))
	warm := g.get(y)
	warmTime := time.Since(start)
	t.Logf("with a Find (%s): %v; from the disk cache: %v", perfs[0].Engine, findTime, warmTime)
	assert.Equal(t, miopen.CacheStats{Entries: 1, Misses: 1, DiskHits: 1}, h.FindCacheStats(), "no Find")
	again, err := h.FindConvolutionForward(conv, x, w, y)
	require.NoError(t, err)
	assert.Equal(t, perfs[0].Engine, again[0].Engine)
	assert.Equal(t, fresh, warm, "the same algorithm: the same output")
	assert.Less(t, warmTime, findTime/2, "no Find's time")
}
