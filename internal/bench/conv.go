package bench

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/miopen"
)

// ConvShape is a 2-D convolution of the benchmarks: an N x C x H x W input
// by K filters of C x R x S, with square padding and stride.
type ConvShape struct {
	Name        string
	N, C, H, W  int
	K, R, S     int
	Pad, Stride int
}

// UNetShapes are the half-precision convolutions of a Stable-Diffusion
// UNet at 512x512 (latents 64x64), batch 8: the 3x3 convolutions of its
// three widest levels and the 1x1 projection of its first transformer.
var UNetShapes = []ConvShape{
	{Name: "3x3 8x320x64x64, 320 filters", N: 8, C: 320, H: 64, W: 64, K: 320, R: 3, S: 3, Pad: 1, Stride: 1},
	{Name: "3x3 8x640x32x32, 640 filters", N: 8, C: 640, H: 32, W: 32, K: 640, R: 3, S: 3, Pad: 1, Stride: 1},
	{Name: "3x3 8x1280x16x16, 1280 filters", N: 8, C: 1280, H: 16, W: 16, K: 1280, R: 3, S: 3, Pad: 1, Stride: 1},
	{Name: "1x1 8x320x64x64, 320 filters", N: 8, C: 320, H: 64, W: 64, K: 320, R: 1, S: 1, Pad: 0, Stride: 1},
}

// Out is the output's height and width.
func (s ConvShape) Out() (p, q int) {
	return (s.H+2*s.Pad-s.R)/s.Stride + 1, (s.W+2*s.Pad-s.S)/s.Stride + 1
}

// FLOPs counts the multiply-adds of the convolution twice.
func (s ConvShape) FLOPs() float64 {
	p, q := s.Out()
	return 2 * float64(s.N) * float64(s.K) * float64(p) * float64(q) * float64(s.C) * float64(s.R) * float64(s.S)
}

// TFLOPs is the rate of one convolution that took d.
func (s ConvShape) TFLOPs(d time.Duration) float64 { return s.FLOPs() / d.Seconds() / 1e12 }

// ConvEnv is a device with a stream and a MIOpen handle on it.
type ConvEnv struct {
	*Env
	Handle *miopen.Handle
}

// OpenConv opens device 0 (as Open does) and a handle on its stream.
func OpenConv() (*ConvEnv, error) {
	e, err := Open()
	if err != nil {
		return nil, err
	}
	h, err := miopen.NewHandle(e.Stream)
	if err != nil {
		e.Close()
		return nil, err
	}
	return &ConvEnv{Env: e, Handle: h}, nil
}

// Close frees the handle, then the stream and module.
func (e *ConvEnv) Close() error { return errors.Join(e.Handle.Close(), e.Env.Close()) }

// convSets is how many input and output buffers a benchmark rotates
// among, so that a timed run does not find its inputs in the L2 cache
// (PyTorch's side does the same).
const convSets = 3

// ConvBench is one convolution, ready to time: half-precision random data
// in NCHW or NHWC, the algorithm of an exhaustive Find.
type ConvBench struct {
	Shape ConvShape
	NHWC  bool
	// Algo is the fastest algorithm the Find returned; FindTime is how
	// long the Find of a new problem took (the first call of a new shape).
	Algo     miopen.ConvAlgoPerf
	Algos    []miopen.ConvAlgoPerf
	FindTime time.Duration

	e       *ConvEnv
	conv    *miopen.ConvolutionDescriptor
	x, y    [convSets]miopen.Tensor
	w       miopen.Tensor
	ws      *hip.Buffer
	hx, hw  []hip.Half // the first input set and the weights, for Check
	descs   []*miopen.TensorDescriptor
	buffers []*hip.Buffer
	next    int
}

// NewConvBench allocates and fills the operands and runs the Find.
func (e *ConvEnv) NewConvBench(s ConvShape, nhwc bool) (b *ConvBench, err error) {
	b = &ConvBench{Shape: s, NHWC: nhwc, e: e}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	b.conv, err = miopen.NewConvolutionDescriptor(miopen.ConvolutionParams{Pad: []int{s.Pad, s.Pad}, Stride: []int{s.Stride, s.Stride}})
	if err != nil {
		return nil, err
	}
	p, q := s.Out()
	layout := miopen.LayoutNCHW
	if nhwc {
		layout = miopen.LayoutNHWC
	}
	for i := range convSets {
		var hx []hip.Half
		if b.x[i], hx, err = b.tensor(layout, []int{s.N, s.C, s.H, s.W}, true); err != nil {
			return nil, err
		}
		if i == 0 {
			b.hx = hx // what Check compares with
		}
		if b.y[i], _, err = b.tensor(layout, []int{s.N, s.K, p, q}, false); err != nil {
			return nil, err
		}
	}
	if b.w, b.hw, err = b.tensor(layout, []int{s.K, s.C, s.R, s.S}, true); err != nil {
		return nil, err
	}
	// The Find of a new problem, timed, then the same Find from the
	// handle's cache.
	start := time.Now()
	b.Algos, err = e.Handle.FindConvolutionForward(b.conv, b.x[0], b.w, b.y[0], miopen.Exhaustive(), miopen.NoCache())
	if err != nil {
		return nil, err
	}
	b.FindTime = time.Since(start)
	b.Algo = b.Algos[0]
	if b.Algo.Workspace > 0 {
		if b.ws, err = e.Dev.Malloc(b.Algo.Workspace); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// tensor makes a descriptor and a buffer of random halves in [-1, 1),
// distributed as PyTorch's (torchUniform), or zeroed, for outputs, which
// the convolution writes.
func (b *ConvBench) tensor(layout miopen.Layout, dims []int, fill bool) (miopen.Tensor, []hip.Half, error) {
	d, err := miopen.NewTensorLayout(miopen.DataTypeHalf, layout, dims)
	if err != nil {
		return miopen.Tensor{}, nil, err
	}
	b.descs = append(b.descs, d)
	buf, err := b.e.Dev.Malloc(d.Bytes())
	if err != nil {
		return miopen.Tensor{}, nil, err
	}
	b.buffers = append(b.buffers, buf)
	if !fill {
		return miopen.Tensor{Desc: d, Data: buf}, nil, buf.Memset(0xFF)
	}
	h := make([]hip.Half, d.Elements())
	for i := range h {
		h[i] = hip.HalfFromFloat32(torchUniform(rand.Float32(), "f16"))
	}
	return miopen.Tensor{Desc: d, Data: buf}, h, buf.CopyFromHost(hip.AsBytes(h))
}

// Run queues one convolution, on the next input and output set.
func (b *ConvBench) Run() error {
	i := b.next
	b.next = (b.next + 1) % convSets
	return b.e.Handle.ConvolutionForward(b.conv, b.x[i], b.w, b.y[i], miopen.WithAlgorithm(b.Algo), miopen.WithWorkspace(b.ws))
}

// Time is the device time per convolution over iters of them, between
// two events on the stream.
func (b *ConvBench) Time(iters int) (time.Duration, error) {
	d, err := b.e.Timed(func() error {
		for range iters {
			if err := b.Run(); err != nil {
				return err
			}
		}
		return nil
	})
	return d / time.Duration(iters), err
}

// Check compares samples outputs of the first set with a float64 dot
// product on the CPU and returns the largest error relative to the
// output's RMS (half precision gives about 1e-3).
func (b *ConvBench) Check(samples int) (float64, error) {
	b.next = 0
	if err := b.Run(); err != nil {
		return 0, err
	}
	if err := b.e.Stream.Synchronize(); err != nil {
		return 0, err
	}
	y := b.y[0]
	raw := make([]hip.Half, y.Desc.Bytes()/2)
	if err := y.Data.CopyToHost(hip.AsBytes(raw)); err != nil {
		return 0, err
	}
	s := b.Shape
	p, q := s.Out()
	xs, ws, ys := b.x[0].Desc.Strides(), b.w.Desc.Strides(), y.Desc.Strides()
	var sumSq float64
	for i := 0; i < len(raw); i += max(len(raw)/4096, 1) {
		v := float64(raw[i].Float32())
		sumSq += v * v
	}
	rms := math.Sqrt(sumSq / float64(len(raw)/max(len(raw)/4096, 1)))
	worst := 0.0
	for range samples {
		n, k, oh, ow := rand.IntN(s.N), rand.IntN(s.K), rand.IntN(p), rand.IntN(q)
		var want float64
		for c := range s.C {
			for r := range s.R {
				for t := range s.S {
					ih, iw := oh*s.Stride-s.Pad+r, ow*s.Stride-s.Pad+t
					if ih < 0 || ih >= s.H || iw < 0 || iw >= s.W {
						continue
					}
					xv := b.hx[n*xs[0]+c*xs[1]+ih*xs[2]+iw*xs[3]].Float32()
					wv := b.hw[k*ws[0]+c*ws[1]+r*ws[2]+t*ws[3]].Float32()
					want += float64(xv) * float64(wv)
				}
			}
		}
		got := float64(raw[n*ys[0]+k*ys[1]+oh*ys[2]+ow*ys[3]].Float32())
		if math.IsNaN(got) {
			return math.Inf(1), fmt.Errorf("bench: output (%d, %d, %d, %d) was not written", n, k, oh, ow)
		}
		worst = max(worst, math.Abs(got-want)/rms)
	}
	return worst, nil
}

// Close frees the operands and descriptors.
func (b *ConvBench) Close() error {
	var errs []error
	for _, buf := range b.buffers {
		errs = append(errs, buf.Close())
	}
	for _, d := range b.descs {
		errs = append(errs, d.Close())
	}
	errs = append(errs, b.ws.Close(), b.conv.Close())
	return errors.Join(errs...)
}
