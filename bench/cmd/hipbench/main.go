// Command hipbench measures rocm-go's HIP layer and, in the same run,
// PyTorch doing the same work (torch_ref.py), and prints a table of ratios
// against the targets. Run it on a GPU machine:
//
//	hipbench [-torch internal/bench/torch_ref.py] [-json results.json]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
	"github.com/rocm-go/rocm/internal/bench"
)

func main() {
	script := flag.String("torch", "", "PyTorch reference script (default: the embedded torch_ref.py)")
	python := flag.String("python", "python3", "Python with PyTorch")
	jsonOut := flag.String("json", "", "also write the results as JSON to this file")
	small := flag.Int("small", 1024, "elements of the small elementwise add")
	ops := flag.Int("ops", 20000, "launches per timing of the launch and small-add measurements")
	copyBytes := flag.Int("copy", 256<<20, "bytes of the pinned copies")
	d2dBytes := flag.Int("d2d", 1<<30, "bytes of the device-to-device copy")
	reps := flag.Int("reps", 15, "repeats; the median is reported")
	flag.Parse()
	if err := run(*script, *python, *jsonOut, *small, *ops, *copyBytes, *d2dBytes, *reps); err != nil {
		fmt.Fprintln(os.Stderr, "hipbench:", err)
		os.Exit(1)
	}
}

func run(script, python, jsonOut string, small, ops, copyBytes, d2dBytes, reps int) error {
	e, err := bench.Open()
	if err != nil {
		return err
	}
	defer e.Close()
	rt, _ := hip.RuntimeVersion()
	drv, _ := hip.DriverVersion()
	cv, _ := hiprtc.Version()
	fmt.Printf("device: %s (%s), %s platform, runtime %s, driver %s, compiler %s\n",
		e.Props.Name, e.Props.ArchName, hip.LoadedPlatform(), rt, drv, cv)

	med := func(f func() (time.Duration, error)) time.Duration {
		d, err := bench.Median(reps, f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "hipbench:", err)
			os.Exit(1)
		}
		return d
	}
	goLaunch, cLaunch, launchRatio, err := bench.Paired(reps,
		func() (time.Duration, error) { return e.LaunchGo(ops) },
		func() (time.Duration, error) { return e.LaunchC(ops) })
	if err != nil {
		return err
	}
	so, err := e.NewSmallOps(small)
	if err != nil {
		return err
	}
	defer so.Close()
	smallAdd := med(func() (time.Duration, error) { return e.SmallAdd(so, ops) })
	cp, err := e.NewCopies(max(copyBytes, d2dBytes))
	if err != nil {
		return err
	}
	defer cp.Close()
	h2dBuf, err := subCopies(cp, copyBytes)
	if err != nil {
		return err
	}
	h2d := med(func() (time.Duration, error) { return e.HostToDevice(h2dBuf) })
	d2h := med(func() (time.Duration, error) { return e.DeviceToHost(h2dBuf) })
	d2dBuf, err := subCopies(cp, d2dBytes)
	if err != nil {
		return err
	}
	d2d := med(func() (time.Duration, error) { return e.DeviceToDevice(d2dBuf) })

	var torch map[string]any
	torchErr := bench.RunScript(python, script, "torch_ref.py", []string{fmt.Sprint("--small=", small), fmt.Sprint("--ops=", ops),
		fmt.Sprint("--copy=", copyBytes), fmt.Sprint("--d2d=", d2dBytes), fmt.Sprint("--reps=", reps)}, &torch)
	if torchErr != nil {
		fmt.Fprintln(os.Stderr, "hipbench: no PyTorch reference:", torchErr)
	} else {
		fmt.Printf("PyTorch %v (%v) on %v\n", torch["torch"], torch["cuda"], torch["gpu"])
	}
	tf := func(k string) float64 { f, _ := torch[k].(float64); return f }
	met := bench.Met

	rows := []bench.Row{{
		Name: "empty kernel launch, Go vs C in the same binary (per launch)", Ours: us(goLaunch), Theirs: us(cLaunch) + " (C)",
		Ratio: launchRatio, Target: "≤ 1.05",
	}}
	rows[0].Met = met(rows[0].Ratio <= 1.05)
	if torchErr == nil {
		torchAdd := min(tf("tiny_add_s"), tf("tiny_add_out_s"))
		r := bench.Row{Name: fmt.Sprintf("small add of %d f32, end to end per op", small), Ours: us(smallAdd),
			Theirs: fmt.Sprintf("%s (a+b %s, out= %s)", usf(torchAdd), usf(tf("tiny_add_s")), usf(tf("tiny_add_out_s"))),
			Ratio:  ratio(smallAdd.Seconds(), torchAdd), Target: "≤ 0.7"}
		r.Met = met(r.Ratio <= 0.7)
		rows = append(rows, r)
		for _, c := range []struct {
			name  string
			ours  time.Duration
			key   string
			bytes int
		}{
			{fmt.Sprintf("pinned host→device copy, %d MiB", copyBytes>>20), h2d, "h2d_s", copyBytes},
			{fmt.Sprintf("device→pinned host copy, %d MiB", copyBytes>>20), d2h, "d2h_s", copyBytes},
			{fmt.Sprintf("device→device copy, %d MiB (read+write)", d2dBytes>>20), d2d, "d2d_s", d2dBytes},
		} {
			n := c.bytes
			if strings.HasPrefix(c.name, "device→device") {
				n *= 2
			}
			ours, theirs := bench.GBps(n, c.ours), float64(n)/tf(c.key)/1e9
			r := bench.Row{Name: c.name, Ours: fmt.Sprintf("%.1f GB/s", ours), Theirs: fmt.Sprintf("%.1f GB/s", theirs),
				Ratio: ratio(ours, theirs), Target: "≥ 0.95"}
			r.Met = met(r.Ratio >= 0.95)
			rows = append(rows, r)
		}
	}
	rows = append(rows,
		bench.Row{Name: "hipRTC/NVRTC compile of a small kernel", Ours: ms(e.CompileTime), Theirs: "—", Target: "reported"},
		bench.Row{Name: "module load", Ours: ms(e.LoadTime), Theirs: "—", Target: "reported"})

	bench.PrintTable(os.Stdout, "reference", rows)
	if jsonOut != "" {
		b, _ := json.MarshalIndent(map[string]any{"device": e.Props.Name, "arch": e.Props.ArchName, "platform": hip.LoadedPlatform().String(),
			"runtime": rt.String(), "driver": drv.String(), "torch": torch, "rows": rows}, "", "  ")
		return os.WriteFile(jsonOut, b, 0o644)
	}
	return nil
}

// subCopies views the first n bytes of the copy buffers.
func subCopies(c *bench.Copies, n int) (*bench.Copies, error) {
	p, err := c.Pinned.Slice(0, n)
	if err != nil {
		return nil, err
	}
	d, err := c.Dev.Slice(0, n)
	if err != nil {
		return nil, err
	}
	d2, err := c.Dev2.Slice(0, n)
	if err != nil {
		return nil, err
	}
	return &bench.Copies{Pinned: p, Dev: d, Dev2: d2, Size: n}, nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func us(d time.Duration) string { return bench.Micros(d) }
func usf(s float64) string      { return fmt.Sprintf("%.2f µs", s*1e6) }
func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", d.Seconds()*1e3) }
