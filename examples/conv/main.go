// Command conv runs one 2-D convolution on the first GPU through package
// miopen (MIOpen on AMD, cuDNN on NVIDIA): it runs the Find, prints every
// algorithm found with its time and workspace, checks the result against
// the CPU on random data, and prints the throughput of the fastest.
//
//	go run ./examples/conv [-n 8 -c 320 -h 64 -w 64 -k 320 -r 3 -s 3 -pad 1 -stride 1
//	                        -dilation 1 -groups 1 -dtype half -layout NHWC]
//
// With no GPU it says so in one line and exits with status 1.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/miopen"
)

type config struct {
	n, c, h, w, k, r, s           int
	pad, stride, dilation, groups int
	dtype                         miopen.DataType
	layout                        miopen.Layout
	iters, samples                int
}

func main() {
	var cfg config
	flag.IntVar(&cfg.n, "n", 8, "batch size N")
	flag.IntVar(&cfg.c, "c", 320, "input channels C")
	flag.IntVar(&cfg.h, "h", 64, "input height H")
	flag.IntVar(&cfg.w, "w", 64, "input width W")
	flag.IntVar(&cfg.k, "k", 320, "output channels K (filters)")
	flag.IntVar(&cfg.r, "r", 3, "filter height R")
	flag.IntVar(&cfg.s, "s", 3, "filter width S")
	flag.IntVar(&cfg.pad, "pad", 1, "zero padding, both sides, both dimensions")
	flag.IntVar(&cfg.stride, "stride", 1, "stride in both dimensions")
	flag.IntVar(&cfg.dilation, "dilation", 1, "dilation of the filter in both dimensions")
	flag.IntVar(&cfg.groups, "groups", 1, "groups: C and K are divided among them (C groups: depthwise)")
	dtype := flag.String("dtype", "half", "element type: half, bf16, float or double")
	layout := flag.String("layout", "NHWC", "memory layout of the input, filters and output: NCHW or NHWC")
	flag.IntVar(&cfg.iters, "iters", 50, "timed convolutions (after the Find and a warm-up)")
	flag.IntVar(&cfg.samples, "samples", 512, "outputs checked against a float64 computation on the CPU")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: conv [flags]\n\n"+
			"Runs the convolution of a random N x C x H x W input by K random filters of\n"+
			"C/groups x R x S on the first GPU (MIOpen on AMD, cuDNN on NVIDIA): the Find,\n"+
			"every algorithm it found, a check against the CPU, and the throughput.\n"+
			"-h is the height; run with -help for this text.\n\nflags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := cfg.parse(*dtype, *layout); err != nil {
		fmt.Fprintln(os.Stderr, "conv:", err)
		flag.Usage()
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "conv:", err)
		os.Exit(1)
	}
}

func (cfg *config) parse(dtype, layout string) error {
	switch strings.ToLower(dtype) {
	case "half", "f16", "fp16":
		cfg.dtype = miopen.DataTypeHalf
	case "bf16", "bfloat16":
		cfg.dtype = miopen.DataTypeBFloat16
	case "float", "f32", "fp32":
		cfg.dtype = miopen.DataTypeFloat
	case "double", "f64", "fp64":
		cfg.dtype = miopen.DataTypeDouble
	default:
		return fmt.Errorf("-dtype %q: half, bf16, float or double", dtype)
	}
	switch strings.ToUpper(layout) {
	case "NCHW":
		cfg.layout = miopen.LayoutNCHW
	case "NHWC":
		cfg.layout = miopen.LayoutNHWC
	default:
		return fmt.Errorf("-layout %q: NCHW or NHWC", layout)
	}
	if cfg.iters < 1 || cfg.samples < 1 {
		return errors.New("-iters and -samples must be positive")
	}
	if cfg.groups < 1 || cfg.c%cfg.groups != 0 || cfg.k%cfg.groups != 0 {
		return fmt.Errorf("-groups %d must divide -c %d and -k %d", cfg.groups, cfg.c, cfg.k)
	}
	return nil
}

func run(cfg config) error {
	dev, err := hip.GetDevice(0)
	if err != nil {
		return fmt.Errorf("no GPU: %s", firstLine(err))
	}
	if err := miopen.LoadError(); err != nil {
		return fmt.Errorf("no MIOpen or cuDNN: %s", firstLine(err))
	}
	props, err := dev.Properties()
	if err != nil {
		return err
	}
	v, _ := miopen.Version()
	lib := map[hip.Platform]string{hip.PlatformAMD: "MIOpen", hip.PlatformNVIDIA: "cuDNN"}[miopen.LoadedPlatform()]
	fmt.Printf("device: %s (%s, %s platform), %s %s\n", props.Name, props.ArchName, hip.LoadedPlatform(), lib, v)

	stream, err := dev.NewStream(hip.WithStreamFlags(hip.StreamNonBlocking))
	if err != nil {
		return err
	}
	defer stream.Close()
	h, err := miopen.NewHandle(stream)
	if err != nil {
		return err
	}
	defer h.Close()

	p := miopen.ConvolutionParams{Pad: []int{cfg.pad, cfg.pad}, Stride: []int{cfg.stride, cfg.stride},
		Dilation: []int{cfg.dilation, cfg.dilation}, Groups: cfg.groups}
	conv, err := miopen.NewConvolutionDescriptor(p)
	if err != nil {
		return err
	}
	defer conv.Close()
	xDims, wDims := []int{cfg.n, cfg.c, cfg.h, cfg.w}, []int{cfg.k, cfg.c / cfg.groups, cfg.r, cfg.s}
	yDims, err := p.OutputDims(xDims, wDims)
	if err != nil {
		return err
	}
	x, xv, err := tensor(dev, cfg, xDims, true)
	if err != nil {
		return err
	}
	defer free(x)
	w, wv, err := tensor(dev, cfg, wDims, true)
	if err != nil {
		return err
	}
	defer free(w)
	y, _, err := tensor(dev, cfg, yDims, false)
	if err != nil {
		return err
	}
	defer free(y)
	flops := 2 * float64(prod(yDims)) * float64(prod(wDims[1:]))
	fmt.Printf("convolution: x %v by w %v (%v, %s) into y %v, pad %d, stride %d, dilation %d, %d groups: %.3g GFLOP\n",
		xDims, wDims, cfg.dtype, cfg.layout, yDims, cfg.pad, cfg.stride, cfg.dilation, cfg.groups, flops/1e9)

	start := time.Now()
	perfs, err := h.FindConvolutionForward(conv, x, w, y, miopen.Exhaustive())
	if err != nil {
		return err
	}
	fmt.Printf("\nFind: %d algorithms in %v\n", len(perfs), time.Since(start).Round(time.Millisecond))
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  algorithm\ttime\tTFLOP/s\tworkspace\timplementation")
	for _, pf := range perfs {
		fmt.Fprintf(tw, "  %s\t%v\t%.1f\t%s\t%s\n", pf.Algorithm, pf.Time.Round(time.Microsecond), flops/pf.Time.Seconds()/1e12, humanize.IBytes(uint64(pf.Workspace)), pf.Engine)
	}
	tw.Flush()

	// The fastest, checked against the CPU.
	if err := y.Data.Memset(0xFF); err != nil {
		return err
	}
	if err := h.ConvolutionForward(conv, x, w, y); err != nil {
		return err
	}
	if err := stream.Synchronize(); err != nil {
		return err
	}
	worst, err := check(cfg, y, xv, wv, xDims, wDims, yDims)
	if err != nil {
		return err
	}
	tol := map[miopen.DataType]float64{miopen.DataTypeHalf: 1e-2, miopen.DataTypeBFloat16: 5e-2, miopen.DataTypeFloat: 1e-4, miopen.DataTypeDouble: 1e-10}[cfg.dtype]
	status := "ok"
	if worst > tol {
		status = fmt.Sprintf("WRONG (over %.0e)", tol)
	}
	fmt.Printf("\ncheck: %d outputs against float64 on the CPU: largest error %.2g of the output's RMS: %s\n", cfg.samples, worst, status)

	d, err := timeIt(dev, stream, cfg.iters, func() error { return h.ConvolutionForward(conv, x, w, y) })
	if err != nil {
		return err
	}
	fmt.Printf("time: %v per convolution (%s, median of 5 runs of %d): %.1f TFLOP/s\n", d, perfs[0].Engine, cfg.iters, flops/d.Seconds()/1e12)
	if status != "ok" {
		return errors.New("the result is wrong")
	}
	return nil
}

// tensor allocates a tensor of the layout and, for inputs, fills it with
// random values in [-1, 1), returned as the type holds them.
func tensor(dev *hip.Device, cfg config, dims []int, fill bool) (miopen.Tensor, []float64, error) {
	d, err := miopen.NewTensorLayout(cfg.dtype, cfg.layout, dims)
	if err != nil {
		return miopen.Tensor{}, nil, err
	}
	b, err := dev.Malloc(d.Bytes())
	if err != nil {
		d.Close()
		return miopen.Tensor{}, nil, err
	}
	t := miopen.Tensor{Desc: d, Data: b}
	if !fill {
		return t, nil, nil
	}
	size := cfg.dtype.Size()
	host := make([]byte, d.Bytes())
	vals := make([]float64, d.Elements())
	strides := d.Strides()
	for i := range vals {
		off, rest := 0, i
		for k := len(dims) - 1; k >= 0; k-- {
			off += rest % dims[k] * strides[k]
			rest /= dims[k]
		}
		vals[i] = put(cfg.dtype, host[off*size:], rand.Float64()*2-1)
	}
	return t, vals, b.CopyFromHost(host)
}

func free(t miopen.Tensor) {
	t.Data.Close()
	t.Desc.Close()
}

// put stores v as an element of the type and returns the value stored.
func put(dt miopen.DataType, b []byte, v float64) float64 {
	switch dt {
	case miopen.DataTypeHalf:
		h := hip.HalfFromFloat32(float32(v))
		binary.LittleEndian.PutUint16(b, uint16(h))
		return float64(h.Float32())
	case miopen.DataTypeBFloat16:
		h := hip.BFloat16FromFloat32(float32(v))
		binary.LittleEndian.PutUint16(b, uint16(h))
		return float64(h.Float32())
	case miopen.DataTypeFloat:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
		return float64(float32(v))
	}
	binary.LittleEndian.PutUint64(b, math.Float64bits(v))
	return v
}

func get(dt miopen.DataType, b []byte) float64 {
	switch dt {
	case miopen.DataTypeHalf:
		return float64(hip.Half(binary.LittleEndian.Uint16(b)).Float32())
	case miopen.DataTypeBFloat16:
		return float64(hip.BFloat16(binary.LittleEndian.Uint16(b)).Float32())
	case miopen.DataTypeFloat:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}

// check compares sampled outputs with float64 sums over the inputs as
// stored, and returns the largest error relative to the outputs' RMS.
func check(cfg config, y miopen.Tensor, xv, wv []float64, xd, wd, yd []int) (float64, error) {
	host := make([]byte, y.Desc.Bytes())
	if err := y.Data.CopyToHost(host); err != nil {
		return 0, err
	}
	ys, size := y.Desc.Strides(), cfg.dtype.Size()
	cg, kg := wd[1], wd[0]/cfg.groups
	var worst, sumSq float64
	for range cfg.samples {
		n, k, oh, ow := rand.IntN(yd[0]), rand.IntN(yd[1]), rand.IntN(yd[2]), rand.IntN(yd[3])
		g := k / kg
		var want float64
		for c := range cg {
			for r := range wd[2] {
				for s := range wd[3] {
					ih, iw := oh*cfg.stride-cfg.pad+r*cfg.dilation, ow*cfg.stride-cfg.pad+s*cfg.dilation
					if ih < 0 || ih >= xd[2] || iw < 0 || iw >= xd[3] {
						continue
					}
					want += xv[((n*xd[1]+g*cg+c)*xd[2]+ih)*xd[3]+iw] * wv[((k*wd[1]+c)*wd[2]+r)*wd[3]+s]
				}
			}
		}
		got := get(cfg.dtype, host[(n*ys[0]+k*ys[1]+oh*ys[2]+ow*ys[3])*size:])
		if math.IsNaN(got) {
			return 0, fmt.Errorf("output (%d, %d, %d, %d) was not written", n, k, oh, ow)
		}
		worst = max(worst, math.Abs(got-want))
		sumSq += want * want
	}
	rms := math.Sqrt(sumSq / float64(cfg.samples))
	if rms == 0 {
		return worst, nil
	}
	return worst / rms, nil
}

// timeIt is the median device time of f over 5 runs of iters calls,
// between events, after a warm-up.
func timeIt(dev *hip.Device, s *hip.Stream, iters int, f func() error) (time.Duration, error) {
	start, err := dev.NewEvent(hip.EventDefault)
	if err != nil {
		return 0, err
	}
	defer start.Close()
	end, err := dev.NewEvent(hip.EventDefault)
	if err != nil {
		return 0, err
	}
	defer end.Close()
	var times []time.Duration
	for i := range 6 {
		if err := start.Record(s); err != nil {
			return 0, err
		}
		for range iters {
			if err := f(); err != nil {
				return 0, err
			}
		}
		if err := end.Record(s); err != nil {
			return 0, err
		}
		if err := end.Synchronize(); err != nil {
			return 0, err
		}
		d, err := hip.ElapsedTime(start, end)
		if err != nil {
			return 0, err
		}
		if i > 0 { // the first is the warm-up
			times = append(times, d/time.Duration(iters))
		}
	}
	for i := range times {
		for j := i + 1; j < len(times); j++ {
			if times[j] < times[i] {
				times[i], times[j] = times[j], times[i]
			}
		}
	}
	return times[len(times)/2], nil
}

func prod(v []int) int {
	n := 1
	for _, x := range v {
		n *= x
	}
	return n
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
