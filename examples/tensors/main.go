// Command tensors is a tour of package candle: it builds tensors on a
// device, runs a few ops of each family (elementwise, broadcasting,
// reductions, copies, indexing, casts), prints a glimpse of each result
// with its time, and on a GPU checks every result against the CPU device.
//
//	go run ./examples/tensors [-device auto|cpu|hip:N] [-n rows] [-seed s]
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/candle"
)

func main() {
	device := flag.String("device", "auto", "device: auto (the GPU when there is one), cpu, or hip:N")
	n := flag.Int("n", 4096, "rows of the 2-D tensors (each has 1024 columns)")
	seed := flag.Uint64("seed", 42, "random seed (the same numbers on every device)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: tensors [-device auto|cpu|hip:N] [-n rows] [-seed s]\n\n"+
			"Runs a few tensor ops of each family on a device, prints a glimpse of the\n"+
			"results and their times, and on a GPU checks them against the CPU.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(os.Stdout, *device, *n, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "tensors:", err)
		os.Exit(1)
	}
}

const cols = 1024

// step is one op of the tour: it makes its result from the inputs.
type step struct {
	name string
	op   func(in inputs) (*candle.Tensor, error)
}

type inputs struct{ x, y, bias, ids *candle.Tensor }

var steps = []step{
	{"x + y", func(in inputs) (*candle.Tensor, error) { return in.x.Add(in.y) }},
	{"x · bias (broadcast row)", func(in inputs) (*candle.Tensor, error) { return in.x.Mul(in.bias) }},
	{"gelu(x)", func(in inputs) (*candle.Tensor, error) { return in.x.Gelu() }},
	{"silu(x)·0.5 + 1", func(in inputs) (*candle.Tensor, error) {
		s, err := in.x.Silu()
		if err != nil {
			return nil, err
		}
		defer s.Close()
		return s.Affine(0.5, 1)
	}},
	{"sum over rows", func(in inputs) (*candle.Tensor, error) { return in.x.Sum(false, 1) }},
	{"argmax over rows", func(in inputs) (*candle.Tensor, error) { return in.x.Argmax(false, 1) }},
	{"max over columns", func(in inputs) (*candle.Tensor, error) { return in.x.Max(false, 0) }},
	{"xᵀ made contiguous", func(in inputs) (*candle.Tensor, error) {
		t, err := in.x.T() // a view: it shares x's storage, and closes like any tensor
		if err != nil {
			return nil, err
		}
		defer t.Close()
		return t.Contiguous()
	}},
	{"cat(x, y) along columns", func(in inputs) (*candle.Tensor, error) { return candle.Cat([]*candle.Tensor{in.x, in.y}, 1) }},
	{"index_select rows", func(in inputs) (*candle.Tensor, error) { return in.x.IndexSelect(in.ids, 0) }},
	{"where(x > y, x, y)", func(in inputs) (*candle.Tensor, error) {
		c, err := in.x.Gt(in.y)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		return candle.Where(c, in.x, in.y)
	}},
	{"cast to bf16", func(in inputs) (*candle.Tensor, error) { return in.x.ToDType(candle.BF16) }},
	{"x · y[:256]ᵀ (matmul)", func(in inputs) (*candle.Tensor, error) {
		w, err := in.y.Narrow(0, 0, min(in.y.Dim(0), 256))
		if err != nil {
			return nil, err
		}
		defer w.Close()
		wt, err := w.T() // read transposed in place: a BLAS flag on the GPU
		if err != nil {
			return nil, err
		}
		defer wt.Close()
		return in.x.Matmul(wt)
	}},
	{"softmax over rows", func(in inputs) (*candle.Tensor, error) { return in.x.SoftmaxLastDim() }},
	{"rms_norm(x) · bias", func(in inputs) (*candle.Tensor, error) {
		gain, err := in.bias.Reshape(cols)
		if err != nil {
			return nil, err
		}
		defer gain.Close()
		return in.x.RMSNorm(gain, 1e-6)
	}},
}

func run(w io.Writer, name string, n int, seed uint64) error {
	if n <= 0 {
		return fmt.Errorf("-n %d: want at least 1 row", n)
	}
	dev, err := candle.NewDevice(name)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "device: %s", dev)
	gpu, onGPU := dev.(*candle.HIPDevice)
	if onGPU {
		p := gpu.Properties()
		fmt.Fprintf(w, " (%s, %s, %s)", p.Name, p.ArchName, humanize.IBytes(uint64(p.TotalMemory)))
		start := time.Now()
		if err := gpu.Warm(); err != nil {
			return err
		}
		fmt.Fprintf(w, "\nkernels: %d modules loaded in %v (cache %s)", len(gpu.KernelCache().Modules()),
			time.Since(start).Round(time.Millisecond), gpu.KernelCache().Dir())
	}
	fmt.Fprintf(w, "\ninputs: x, y %d×%d f32 (normal), bias 1×%d, %d row indices; %s each\n\n",
		n, cols, cols, min(n, 512), humanize.IBytes(uint64(n*cols*4)))

	in, err := makeInputs(dev, n, seed)
	if err != nil {
		return err
	}
	defer in.close()
	// On a GPU, the same inputs on the CPU check every result.
	var ref inputs
	if onGPU {
		if ref, err = in.to(candle.CPU()); err != nil {
			return err
		}
		defer ref.close()
	}

	row := func(cells ...any) {
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("%-26s %-16s %10s  %-44s %s", cells...), " "))
	}
	row("op", "result", "time", "first values", check(onGPU))
	for _, s := range steps {
		out, took, err := timed(dev, s, in)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		head, err := glimpse(out)
		if err != nil {
			out.Close()
			return err
		}
		verdict := ""
		if onGPU {
			if verdict, err = compare(s, ref, out); err != nil {
				out.Close()
				return err
			}
		}
		row(s.name, shapeOf(out), took.Round(time.Microsecond), head, verdict)
		out.Close()
	}
	st := dev.MemoryStats()
	fmt.Fprintf(w, "\nmemory: %s in use, %s peak, %s cached for reuse\n",
		humanize.IBytes(uint64(st.InUse)), humanize.IBytes(uint64(st.Peak)), humanize.IBytes(uint64(st.Cached)))
	return nil
}

func check(onGPU bool) string {
	if onGPU {
		return "against the CPU"
	}
	return ""
}

func makeInputs(dev candle.Device, n int, seed uint64) (in inputs, err error) {
	dev.SetSeed(seed)
	if in.x, err = candle.RandNormal(dev, candle.F32, 0, 1, n, cols); err != nil {
		return in, err
	}
	if in.y, err = candle.RandNormal(dev, candle.F32, 0, 1, n, cols); err != nil {
		in.close()
		return in, err
	}
	if in.bias, err = candle.RandUniform(dev, candle.F32, -1, 1, 1, cols); err != nil {
		in.close()
		return in, err
	}
	ids := make([]uint32, min(n, 512))
	for i := range ids {
		ids[i] = uint32((i * 7919) % n)
	}
	if in.ids, err = candle.FromSlice(dev, ids); err != nil {
		in.close()
	}
	return in, err
}

func (in inputs) close() {
	for _, t := range []*candle.Tensor{in.x, in.y, in.bias, in.ids} {
		if t != nil {
			t.Close()
		}
	}
}

// to copies the inputs to another device.
func (in inputs) to(dev candle.Device) (out inputs, err error) {
	src := []*candle.Tensor{in.x, in.y, in.bias, in.ids}
	dst := []**candle.Tensor{&out.x, &out.y, &out.bias, &out.ids}
	for i, t := range src {
		if *dst[i], err = t.ToDevice(dev); err != nil {
			out.close()
			return out, err
		}
	}
	return out, nil
}

// timed runs a step once to warm up, then times a second run to the end
// of its work on the device.
func timed(dev candle.Device, s step, in inputs) (*candle.Tensor, time.Duration, error) {
	warm, err := s.op(in)
	if err != nil {
		return nil, 0, err
	}
	warm.Close()
	if err := dev.Synchronize(); err != nil {
		return nil, 0, err
	}
	start := time.Now()
	out, err := s.op(in)
	if err != nil {
		return nil, 0, err
	}
	if err := dev.Synchronize(); err != nil {
		out.Close()
		return nil, 0, err
	}
	return out, time.Since(start), nil
}

func shapeOf(t *candle.Tensor) string {
	dims := make([]string, t.Rank())
	for i, d := range t.Shape() {
		dims[i] = fmt.Sprint(d)
	}
	return strings.Join(dims, "×") + " " + t.DType().String()
}

// glimpse is the first four values of a result, as float64.
func glimpse(t *candle.Tensor) (string, error) {
	v, err := values(t)
	if err != nil {
		return "", err
	}
	parts := make([]string, 0, 4)
	for _, x := range v[:min(4, len(v))] {
		parts = append(parts, fmt.Sprintf("%.4g", x))
	}
	return "[" + strings.Join(parts, " ") + " …]", nil
}

// values reads a result as float64, through an f64 copy on its device.
func values(t *candle.Tensor) ([]float64, error) {
	f, err := t.ToDType(candle.F64)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return candle.ToSlice[float64](f)
}

// compare runs the step on the CPU and reports the largest difference,
// relative to the values' size.
func compare(s step, ref inputs, got *candle.Tensor) (string, error) {
	want, err := s.op(ref)
	if err != nil {
		return "", err
	}
	defer want.Close()
	w, err := values(want)
	if err != nil {
		return "", err
	}
	g, err := values(got)
	if err != nil {
		return "", err
	}
	if len(w) != len(g) {
		return "", fmt.Errorf("%s: %d values on the GPU, %d on the CPU", s.name, len(g), len(w))
	}
	worst := 0.0
	for i := range w {
		worst = max(worst, relDiff(w[i], g[i]))
	}
	if worst > 1e-2 {
		return "", fmt.Errorf("%s: the GPU differs from the CPU by %.3g", s.name, worst)
	}
	if worst == 0 {
		return "exact", nil
	}
	return fmt.Sprintf("max rel. diff %.1e", worst), nil
}

// relDiff is |want-got| relative to want's size (absolute below 1); a NaN
// on one side only is an infinite difference.
func relDiff(want, got float64) float64 {
	if math.IsNaN(want) || math.IsNaN(got) {
		if math.IsNaN(want) && math.IsNaN(got) {
			return 0
		}
		return math.Inf(1)
	}
	if want == got {
		return 0
	}
	return math.Abs(want-got) / max(1, math.Abs(want))
}
