// Command tensorbench measures candle's tensor ops on a GPU and, in the
// same run, PyTorch doing the same work (torch_tensor.py), and prints a
// table of ratios (rocm-go / PyTorch, in speed) and each op's fraction of
// the roofline: the device-to-device copy rate measured in the same run.
//
//	tensorbench [-torch internal/bench/torch_tensor.py] [-json results.json]
//	tensorbench -load   # the loading rows alone, without PyTorch: ~30 s
//
// Loading is measured every way candle.Transfer offers on the same 2.47 GB
// checkpoint: the default (the file read in chunks into pinned buffers by
// goroutines, ahead of the copies), other chunk sizes and goroutine
// counts, the mapping registered with the device, candle's staging path,
// and the parts (registering alone, the pinned copy rate, the host's
// copy from the page cache).
//
// Its rows include attention (package flashattn through candle/nn) against
// PyTorch's scaled_dot_product_attention, and against candle's unfused
// attention for time and peak device memory.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/bench"
)

func main() {
	script := flag.String("torch", "", "PyTorch reference script (default: the embedded torch_tensor.py)")
	python := flag.String("python", "python3", "Python with PyTorch")
	jsonOut := flag.String("json", "", "also write the results as JSON to this file")
	reps := flag.Int("reps", 15, "repeats; the median is reported")
	tinyOps := flag.Int("ops", 20000, "ops per timing of the small end-to-end add")
	scale := flag.Int("scale", 1, "divide the big sizes by this (for a quick try)")
	loadOnly := flag.Bool("load", false, "only the loading rows (the checkpoint, its strategies and their parts), without PyTorch: a quick run")
	first := flag.String("first-load", "", "load this checkpoint (written by tensorbench at -scale) once and print the times as JSON: "+
		"how tensorbench measures a fresh process's first load")
	reserve := flag.Bool("reserve", false, "with -first-load: candle.ReservePinnedBuffers before the load")
	flag.Parse()
	var err error
	if *first != "" {
		err = runFirstLoad(*first, *scale, *reserve)
	} else if *loadOnly {
		err = runLoad(*scale)
	} else {
		err = run(*script, *python, *jsonOut, *reps, *tinyOps, *scale)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tensorbench:", err)
		os.Exit(1)
	}
}

func run(script, python, jsonOut string, reps, tinyOps, scale int) error {
	b, err := bench.OpenTensors()
	if err != nil {
		return err
	}
	defer b.Close()
	props := b.Dev.Properties()
	rt, _ := hip.RuntimeVersion()
	fmt.Printf("device: %s (%s), %s platform, runtime %s\n", props.Name, props.ArchName, hip.LoadedPlatform(), rt)

	cold, warm, modules, err := b.FirstUse()
	if err != nil {
		return err
	}
	for _, m := range modules {
		fmt.Printf("cold compile: %s ready after %.1f s (%d of %d)\n", m.Name, m.Took.Seconds(), m.Done, m.Total)
	}
	if err := b.Dev.Warm(); err != nil {
		return err
	}
	roof, err := b.CopyRate(1 << 30)
	if err != nil {
		return err
	}
	ops, err := b.Ops(scale)
	if err != nil {
		return err
	}
	ours := map[string]time.Duration{}
	copies := map[string]time.Duration{} // the fused ops' same-bytes copies
	hosts := map[string]time.Duration{}  // the host time of a call, where reported
	for _, op := range ops {
		d, err := bench.Median(reps, func() (time.Duration, error) { return b.DeviceTime(op) })
		if err != nil {
			return err
		}
		ours[op.Name] = d
		if op.Host {
			if hosts[op.Name], err = bench.Median(5, func() (time.Duration, error) { return b.HostTime(op, 20) }); err != nil {
				return err
			}
		}
		op.Close()
		if op.Fused {
			if copies[op.Name], err = b.CopyTime(op.Bytes, reps); err != nil {
				return err
			}
		}
	}
	attn, err := b.AttentionOps(scale)
	if err != nil {
		return err
	}
	for _, op := range attn {
		d, err := bench.Median(reps, func() (time.Duration, error) { return b.DeviceTime(op) })
		if err != nil {
			return err
		}
		ours[op.Name] = d
		op.Close()
	}
	unf, err := b.UnfusedAttention(scale)
	if err != nil {
		return err
	}
	var unfTime, flashTime time.Duration
	var unfPeak, flashPeak int64
	for _, x := range []struct {
		op   *bench.TensorOp
		d    *time.Duration
		peak *int64
	}{{unf.Unfused, &unfTime, &unfPeak}, {unf.Flash, &flashTime, &flashPeak}} {
		if *x.d, err = bench.Median(reps, func() (time.Duration, error) { return b.DeviceTime(x.op) }); err != nil {
			unf.Close()
			return err
		}
		*x.peak = unf.Peak()
	}
	unf.Close()
	tiny, err := b.TinyAdd(1024)
	if err != nil {
		return err
	}
	tinyTime, err := bench.Median(reps, func() (time.Duration, error) { return b.WallPerOp(tiny, tinyOps) })
	if err != nil {
		return err
	}
	tiny.Close()

	dir, err := os.MkdirTemp("", "rocm-go-bench-load")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ld, err := measureLoad(b, dir, scale)
	if err != nil {
		return err
	}
	ckpt := ld.ckpt

	var torch map[string]any
	torchErr := bench.RunScript(python, script, "torch_tensor.py", []string{fmt.Sprint("--reps=", reps), fmt.Sprint("--ops=", tinyOps),
		fmt.Sprint("--scale=", scale), "--checkpoint=" + ckpt.Path, "--convs=" + bench.TorchConvSpec(scale),
		"--attention=" + bench.TorchAttentionSpec(scale)}, &torch)
	if torchErr != nil {
		fmt.Fprintln(os.Stderr, "tensorbench: no PyTorch reference:", torchErr)
	} else {
		fmt.Printf("PyTorch %v (%v) on %v\n", torch["torch"], torch["cuda"], torch["gpu"])
	}
	tf := func(k string) float64 { f, _ := torch[k].(float64); return f }

	fmt.Printf("roofline: device-to-device copy at %.0f GB/s (read + write), this run\n", roof)
	var rows []bench.Row
	for _, op := range ops {
		d := ours[op.Name]
		if op.Flops > 0 {
			r := flopsRow(op, d, torchErr == nil, tf(op.Name))
			if h, ok := hosts[op.Name]; ok {
				r.Ours = strings.TrimSuffix(r.Ours, ")") + fmt.Sprintf("; the call takes %s of host time)", us(h))
			}
			rows = append(rows, r)
			continue
		}
		gbps := float64(op.Bytes) / d.Seconds() / 1e9
		r := bench.Row{Name: op.Name, Ours: fmt.Sprintf("%s (%.0f GB/s, %.2f of roofline)", us(d), gbps, gbps/roof), Target: "≥ 1.0, or ≥ 0.85 of roofline"}
		var ofCopy float64
		if op.Fused {
			c := copies[op.Name]
			ofCopy = c.Seconds() / d.Seconds()
			r.Ours = fmt.Sprintf("%s (%.0f GB/s, %.2f of roofline, %.2f of a copy of its bytes: %s)", us(d), gbps, gbps/roof, ofCopy, us(c))
			r.Target = "≥ 1.0 and ≥ 0.85 of a copy of its bytes"
		}
		if torchErr == nil {
			t := tf(op.Name)
			tg := float64(op.Bytes) / t / 1e9
			r.Theirs = fmt.Sprintf("%s (%.0f GB/s, %.2f)", usf(t), tg, tg/roof)
			if op.Fused {
				r.Theirs = fmt.Sprintf("%s (%.0f GB/s, %.2f; %.2f of the copy)", usf(t), tg, tg/roof, copies[op.Name].Seconds()/t)
			}
			r.Ratio = t / d.Seconds()
			// PyTorch below the roofline target: ours must reach it.
			r.Met = bench.Met(r.Ratio >= 1.0 || gbps/roof >= 0.85)
			if op.Fused {
				r.Met = bench.Met(r.Ratio >= 1.0 && ofCopy >= 0.85)
			}
		}
		rows = append(rows, r)
	}
	for _, op := range attn {
		d := ours[op.Name]
		if op.Flops > 0 {
			rows = append(rows, flopsRow(op, d, torchErr == nil, tf(op.Name)))
			continue
		}
		gbps := float64(op.Bytes) / d.Seconds() / 1e9
		r := bench.Row{Name: op.Name + " (K and V read once), vs scaled_dot_product_attention", Ours: fmt.Sprintf("%s (%.0f GB/s)", us(d), gbps),
			Target: fmt.Sprintf("≥ %.2f of PyTorch's bandwidth", op.Target)}
		if torchErr == nil {
			t := tf(op.Name)
			r.Theirs = fmt.Sprintf("%s (%.0f GB/s)", usf(t), float64(op.Bytes)/t/1e9)
			r.Ratio = t / d.Seconds()
			r.Met = bench.Met(r.Ratio >= op.Target)
		}
		rows = append(rows, r)
	}
	tflops := func(d time.Duration) float64 { return float64(unf.Flops) / d.Seconds() / 1e12 }
	rows = append(rows, bench.Row{Name: unf.Name + ": time (reference column: candle unfused)",
		Ours: fmt.Sprintf("%s (%.1f TFLOP/s)", us(flashTime), tflops(flashTime)), Theirs: fmt.Sprintf("%s (%.1f TFLOP/s)", us(unfTime), tflops(unfTime)),
		Ratio: unfTime.Seconds() / flashTime.Seconds(), Target: "≥ 3 (times faster)", Met: bench.Met(unfTime >= 3*flashTime)})
	mib := func(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
	peakOurs, peakTheirs := unf.Inputs+flashPeak, unf.Inputs+unfPeak
	rows = append(rows, bench.Row{Name: unf.Name + ": peak device memory, inputs included (candle's MemoryStats; reference column: candle unfused)",
		Ours: fmt.Sprintf("%s (%s beyond the inputs)", mib(peakOurs), mib(flashPeak)), Theirs: fmt.Sprintf("%s (%s beyond the inputs)", mib(peakTheirs), mib(unfPeak)),
		Ratio: float64(peakOurs) / float64(peakTheirs), Target: "≤ 0.25 (75% less)", Met: bench.Met(4*peakOurs <= peakTheirs)})
	// Like for like: PyTorch's x + y allocates its output too (from its
	// caching allocator). Its torch.add(out=) allocates nothing; that row
	// is reported for comparison.
	r := bench.Row{Name: "Tensor.Add of 1024 f32, end to end (allocation included), against x + y", Ours: us(tinyTime), Target: "≤ 0.7 of PyTorch's time"}
	out := bench.Row{Name: "the same, against torch.add(x, y, out=z) (no allocation)", Ours: us(tinyTime), Target: "reported"}
	if torchErr == nil {
		r.Theirs, r.Ratio = usf(tf("tiny_add_s")), tinyTime.Seconds()/tf("tiny_add_s")
		r.Met = bench.Met(r.Ratio <= 0.7)
		out.Theirs, out.Ratio = usf(tf("tiny_add_out_s")), tinyTime.Seconds()/tf("tiny_add_out_s")
	}
	rows = append(rows, r, out)
	rows = append(rows, ld.rows(func(key string) float64 {
		if torchErr != nil {
			return 0
		}
		return tf(key)
	})...)
	rows = append(rows,
		bench.Row{Name: "first use: cold compile of every kernel module, loaded", Ours: ms(cold), Theirs: "—", Target: "reported"},
		bench.Row{Name: "first use: warm start from the disk cache, loaded", Ours: ms(warm), Theirs: "—", Target: "≤ 100 ms", Met: bench.Met(warm <= 100*time.Millisecond)})
	bench.PrintTable(os.Stdout, "PyTorch", rows)
	if jsonOut != "" {
		out, _ := json.MarshalIndent(map[string]any{"device": props.Name, "arch": props.ArchName, "platform": hip.LoadedPlatform().String(),
			"runtime": rt.String(), "roofline_gbps": roof, "torch": torch, "rows": rows}, "", "  ")
		return os.WriteFile(jsonOut, out, 0o644)
	}
	return nil
}

// flopsRow is the row of a product or a convolution: TFLOP/s on both
// sides, at least the op's target of PyTorch's speed (0.97 by default).
func flopsRow(op *bench.TensorOp, d time.Duration, haveTorch bool, theirs float64) bench.Row {
	target := op.Target
	if target == 0 {
		target = 0.97
	}
	tflops := func(s float64) float64 { return float64(op.Flops) / s / 1e12 }
	r := bench.Row{Name: op.Name, Ours: fmt.Sprintf("%s (%.1f TFLOP/s)", us(d), tflops(d.Seconds())), Target: fmt.Sprintf("≥ %.2f", target)}
	if haveTorch {
		r.Theirs = fmt.Sprintf("%s (%.1f TFLOP/s)", usf(theirs), tflops(theirs))
		r.Ratio = theirs / d.Seconds()
		r.Met = bench.Met(r.Ratio >= target)
	}
	return r
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", d.Seconds()*1e6) }
func usf(s float64) string      { return fmt.Sprintf("%.1f µs", s*1e6) }
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", d.Seconds()*1e3) }
