// Command sdbench measures the Stable Diffusion pipeline of
// candle/models/sd against diffusers on the same folder of random weights
// in a real model's shape, in one run: diffusers (torch_sd.py, embedded)
// writes the folder when it is absent and measures its pipeline in float16
// with SDPA attention, eager and with its UNet torch.compile'd; then this
// SDK runs the same requests in F16. Both sides use Euler and guidance 7.5.
// The figures: it/s of the UNet loop, seconds an image end to end (text
// encoding and VAE decode included) and peak device memory, at each batch
// size. -check first compares the text encoders, one UNet prediction, one
// VAE decode and a whole txt2img run from the same latents with diffusers'
// float32 outputs, in F32 and F16.
//
//	sdbench -model /tmp/sd15 -shape sd15 -batches 1,4 -check
//	sdbench -model /tmp/sdxl -shape sdxl -modes eager
//	sdbench -quick            # the tiny model on the CPU, no diffusers: a check in seconds
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/internal/bench"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: 2 for bad flags, 1 when the run failed, else 0.
func run(args []string, stdout, stderr io.Writer) int {
	cli := bench.NewCLI("sdbench", "usage: sdbench -model DIR [flags] | sdbench -quick\n\n"+
		"Measures candle/models/sd against diffusers on a random Stable Diffusion model.", stderr)
	fs, fail := cli.Flags, cli.Fail
	model := fs.String("model", "", "the diffusers folder: written by diffusers if absent, reused if present (required unless -quick)")
	shape := fs.String("shape", "sd15", "the model's shape when written: sd15 (SD 1.5) or sdxl (SDXL base 1.0)")
	quick := fs.Bool("quick", false, "mkmodel's tiny SD model on the CPU device, without diffusers: a check of the runner in seconds")
	size := fs.Int("size", 0, "image width and height (default: 512 for sd15, 1024 for sdxl)")
	steps := fs.Int("steps", 30, "sampler steps")
	batches := fs.String("batches", "1", "batch sizes, comma-separated")
	reps := fs.Int("reps", 3, "timed runs of each batch after a warm-up, the median reported")
	modes := fs.String("modes", "eager,compile", "diffusers' runs: eager (fp16, SDPA) and compile (the UNet torch.compile'd)")
	check := fs.Bool("check", false, "compare with diffusers' float32 outputs first (text encoders, a UNet prediction, a VAE decode, a whole run)")
	refSize := fs.Int("ref-size", 512, "-check: the whole run's image size")
	refSteps := fs.Int("ref-steps", 20, "-check: the whole run's steps")
	python := fs.String("python", "python3", "Python with PyTorch and diffusers on its path (\"\" runs no diffusers)")
	script := fs.String("torch", "", "diffusers' script (default: the embedded torch_sd.py)")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	graphs := fs.Bool("graphs", false, "replay our UNet from a captured graph (sd.Options.Graphs)")
	if code, ok := cli.Parse(args); !ok {
		return code
	}
	c := bench.SDBench{Model: *model, Shape: *shape, Python: *python, Script: *script, Size: *size, Steps: *steps, Reps: *reps,
		Check: *check, RefSize: *refSize, RefSteps: *refSteps, Graphs: *graphs}
	for _, m := range strings.Split(*modes, ",") {
		switch m = strings.TrimSpace(m); m {
		case "":
		case "eager", "compile":
			c.Modes = append(c.Modes, m)
		default:
			return fail(2, "-modes: %q: want eager and/or compile", m)
		}
	}
	var err error
	if c.Batches, err = bench.ParseCounts("batches", *batches, 16); err != nil {
		return fail(2, "%v", err)
	}
	if *quick {
		c.Shape, c.Python, c.Check, c.Device = "tiny", "", false, candle.CPU()
		if c.Model == "" {
			dir, err := os.MkdirTemp("", "sdbench-tiny")
			if err != nil {
				return fail(1, "%v", err)
			}
			defer os.RemoveAll(dir)
			c.Model = dir
		}
	}
	if c.Model == "" {
		return fail(2, "-model is required (a folder for the model, kept for the next run); -quick needs none")
	}
	if *refSize%64 != 0 || *refSize < 64 || *refSteps < 1 {
		return fail(2, "-ref-size %d, -ref-steps %d: want a positive multiple of 64 and a step or more", *refSize, *refSteps)
	}
	start := time.Now()
	rep, err := bench.RunSDBench(c, stdout)
	if err != nil {
		return fail(1, "%v", err)
	}
	fmt.Fprintf(stdout, "\nsdbench: done in %.1f s\n", time.Since(start).Seconds())
	if err := bench.WriteJSON(*jsonOut, map[string]any{"report": rep}); err != nil {
		return fail(1, "%v", err)
	}
	return 0
}
