// Command convbench measures rocm-go's half-precision convolutions (package
// miopen: MIOpen on AMD, cuDNN on NVIDIA) on Stable-Diffusion UNet shapes,
// NCHW and NHWC, and in the same run PyTorch doing the same work
// (torch_conv.py, cudnn.benchmark on), and prints a table of throughputs
// and ratios against the target (≥ 0.95 of PyTorch's), then the time the
// Find of a new shape takes. Run it on a GPU machine:
//
//	convbench [-torch internal/bench/torch_conv.py] [-json results.json] [-only 1x1]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/bench"
	"github.com/rocm-go/rocm/miopen"
)

type row struct {
	Name      string  `json:"name"`
	Layout    string  `json:"layout"`
	Seconds   float64 `json:"s"`
	TFLOPs    float64 `json:"tflops"`
	Torch     float64 `json:"torch_tflops,omitempty"`
	Ratio     float64 `json:"ratio,omitempty"`
	Met       *bool   `json:"met,omitempty"`
	Engine    string  `json:"engine"`
	Workspace int     `json:"workspace"`
	FindS     float64 `json:"find_s"`
	TorchFind float64 `json:"torch_find_s,omitempty"`
	Error     float64 `json:"check_error"`
	// Candidates is what the Find returned, fastest first: the figures
	// behind the pick, to tell a Find that misranked from a slow engine.
	Candidates []candidate `json:"candidates"`
}

// candidate is one algorithm of a Find: its engine, the time the Find
// measured and the workspace it needs.
type candidate struct {
	Engine    string  `json:"engine"`
	FindS     float64 `json:"find_s"`
	Workspace int     `json:"workspace"`
}

// target is the throughput the issue asks for, as a fraction of PyTorch's.
const target = 0.95

func main() {
	script := flag.String("torch", "", "PyTorch reference script (default: the embedded torch_conv.py)")
	python := flag.String("python", "python3", "Python with PyTorch")
	jsonOut := flag.String("json", "", "also write the results as JSON to this file")
	iters := flag.Int("iters", 20, "convolutions per timing")
	reps := flag.Int("reps", 15, "timings; the median is reported")
	layouts := flag.String("layouts", "NCHW,NHWC", "layouts to measure")
	only := flag.String("only", "", "measure only the shapes whose name contains this")
	flag.Parse()
	if err := run(*script, *python, *jsonOut, *iters, *reps, *layouts, *only); err != nil {
		fmt.Fprintln(os.Stderr, "convbench:", err)
		os.Exit(1)
	}
}

func run(script, python, jsonOut string, iters, reps int, layouts, only string) error {
	if iters <= 0 || reps <= 0 {
		return errors.New("-iters and -reps must be positive")
	}
	var shapes []bench.ConvShape
	for _, s := range bench.UNetShapes {
		if strings.Contains(s.Name, only) {
			shapes = append(shapes, s)
		}
	}
	e, err := bench.OpenConv()
	if err != nil {
		return err
	}
	defer e.Close()
	lv, _ := miopen.Version()
	lib := map[hip.Platform]string{hip.PlatformAMD: "MIOpen", hip.PlatformNVIDIA: "cuDNN"}[miopen.LoadedPlatform()]
	fmt.Printf("device: %s (%s), %s platform, %s %s (%s)\n", e.Props.Name, e.Props.ArchName, hip.LoadedPlatform(), lib, lv, miopen.LibraryPaths()[0])

	var rows []row
	for _, s := range shapes {
		for _, layout := range strings.Split(layouts, ",") {
			r, err := measure(e, s, layout == "NHWC", iters, reps)
			if err != nil {
				return fmt.Errorf("%s %s: %w", s.Name, layout, err)
			}
			rows = append(rows, r)
			fmt.Fprintf(os.Stderr, "convbench: %s %s: %.1f TFLOP/s with %s\n", s.Name, layout, r.TFLOPs, r.Engine)
		}
	}

	torch, torchErr := runTorch(script, python, shapes, layouts, iters, reps)
	if torchErr != nil {
		fmt.Fprintln(os.Stderr, "convbench: no PyTorch reference:", torchErr)
	} else {
		fmt.Printf("PyTorch %v (CUDA %v, cuDNN %v) on %v, cudnn.benchmark on\n", torch.Torch, torch.CUDA, torch.CuDNN, torch.GPU)
		for i := range rows {
			for _, t := range torch.Results {
				if t.Name == rows[i].Name && t.Layout == rows[i].Layout {
					rows[i].Torch = shapeOf(shapes, t.Name).FLOPs() / t.S / 1e12
					rows[i].TorchFind = t.FindS
					rows[i].Ratio = rows[i].TFLOPs / rows[i].Torch
					met := rows[i].Ratio >= target
					rows[i].Met = &met
				}
			}
		}
	}

	fmt.Printf("\n| half-precision convolution | layout | rocm-go | PyTorch | ratio | target | met | rocm-go's algorithm |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		theirs, ratio, met := "—", "—", ""
		if r.Met != nil {
			theirs, ratio = fmt.Sprintf("%.1f TFLOP/s", r.Torch), fmt.Sprintf("%.3f", r.Ratio)
			met = map[bool]string{true: "yes", false: "**no**"}[*r.Met]
		}
		fmt.Printf("| %s | %s | %.1f TFLOP/s (%.3f ms) | %s | %s | ≥ %.2f | %s | %s, %s workspace |\n",
			r.Name, r.Layout, r.TFLOPs, r.Seconds*1e3, theirs, ratio, target, met, r.Engine, mib(r.Workspace))
	}
	fmt.Printf("\n| Find of a new shape (first call) | layout | rocm-go (exhaustive Find) | PyTorch (first call, cudnn.benchmark) |\n|---|---|---|---|\n")
	for _, r := range rows {
		theirs := "—"
		if r.TorchFind > 0 {
			theirs = fmt.Sprintf("%.0f ms", r.TorchFind*1e3)
		}
		fmt.Printf("| %s | %s | %.0f ms | %s |\n", r.Name, r.Layout, r.FindS*1e3, theirs)
	}
	if jsonOut != "" {
		b, _ := json.MarshalIndent(map[string]any{"device": e.Props.Name, "arch": e.Props.ArchName, "platform": hip.LoadedPlatform().String(),
			"library": lib + " " + lv.String(), "torch": torch, "rows": rows}, "", "  ")
		return os.WriteFile(jsonOut, b, 0o644)
	}
	return nil
}

// measure runs the Find, checks the result on the CPU, and times one
// shape in one layout.
func measure(e *bench.ConvEnv, s bench.ConvShape, nhwc bool, iters, reps int) (row, error) {
	cb, err := e.NewConvBench(s, nhwc)
	if err != nil {
		return row{}, err
	}
	defer cb.Close()
	worst, err := cb.Check(24)
	if err != nil {
		return row{}, err
	}
	if worst > 2e-2 {
		return row{}, fmt.Errorf("wrong result: an error of %.3g of the output's RMS on the CPU's check", worst)
	}
	d, err := bench.Median(reps, func() (time.Duration, error) { return cb.Time(iters) })
	if err != nil {
		return row{}, err
	}
	var cands []candidate
	for _, a := range cb.Algos {
		cands = append(cands, candidate{Engine: a.Engine, FindS: a.Time.Seconds(), Workspace: a.Workspace})
	}
	return row{Name: s.Name, Layout: map[bool]string{false: "NCHW", true: "NHWC"}[nhwc], Seconds: d.Seconds(), TFLOPs: s.TFLOPs(d),
		Engine: cb.Algo.Engine, Workspace: cb.Algo.Workspace, FindS: cb.FindTime.Seconds(), Error: worst, Candidates: cands}, nil
}

func shapeOf(shapes []bench.ConvShape, name string) bench.ConvShape {
	for _, s := range shapes {
		if s.Name == name {
			return s
		}
	}
	return bench.ConvShape{}
}

func mib(n int) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

type torchResults struct {
	GPU     string `json:"gpu"`
	Torch   string `json:"torch"`
	CUDA    any    `json:"cuda"`
	CuDNN   any    `json:"cudnn"`
	Results []struct {
		Name   string  `json:"name"`
		Layout string  `json:"layout"`
		S      float64 `json:"s"`
		FindS  float64 `json:"find_s"`
	} `json:"results"`
}

func runTorch(script, python string, shapes []bench.ConvShape, layouts string, iters, reps int) (*torchResults, error) {
	var js []map[string]any
	for _, s := range shapes {
		js = append(js, map[string]any{"name": s.Name, "n": s.N, "c": s.C, "h": s.H, "w": s.W, "k": s.K, "r": s.R, "s": s.S, "pad": s.Pad, "stride": s.Stride})
	}
	spec, _ := json.Marshal(js)
	var res torchResults
	err := bench.RunScript(python, script, "torch_conv.py", []string{"--shapes", string(spec), "--layouts", layouts,
		fmt.Sprint("--iters=", iters), fmt.Sprint("--reps=", reps)}, &res)
	if err != nil {
		return nil, err
	}
	return &res, nil
}
