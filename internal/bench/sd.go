package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/sd"
	"github.com/rocm-go/rocm/candle/models/sd/scheduler"
	"github.com/rocm-go/rocm/candle/models/sd/unet"
	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/internal/mkmodel"
)

// SDPrompt is the prompt of every run, on both sides (torch_sd.py's
// PROMPT).
const SDPrompt = "a photograph of an astronaut riding a horse"

// SDBench is one run of the Stable Diffusion benchmark (cmd/sdbench): a
// diffusers folder of random weights in a real model's shape, diffusers on
// it (torch_sd.py: it writes the folder when absent, the reference outputs,
// and its own figures), then this SDK on the same folder.
type SDBench struct {
	Model  string // the folder
	Shape  string // torch_sd.py's shape: "sd15" or "sdxl"; "tiny" writes mkmodel.TinySD and runs no Python
	Python string // "" runs no Python: the folder must exist, and nothing is compared
	Script string // "" for the embedded torch_sd.py
	// Modes are diffusers' runs: "eager" (float16, SDPA), "compile" (the
	// UNet torch.compile'd).
	Modes   []string
	Size    int // the images' width and height; 0 for the shape's own
	Steps   int // the sampler's steps (Euler)
	Batches []int
	Reps    int
	// Check compares the text encoders, one UNet prediction, one VAE
	// decode and a whole run at RefSize in RefSteps with diffusers'
	// float32 outputs, in F32 and F16.
	Check             bool
	RefSize, RefSteps int
	Device            candle.Device // nil for HIP device 0
	// Graphs replays the UNet from a captured graph (sd.Options.Graphs).
	Graphs bool
}

// SDFigures are one side's figures at one batch size.
type SDFigures struct {
	SPerImage float64 `json:"s_per_image"` // end to end: text encoding, the UNet loop, VAE decode, the images
	ItS       float64 `json:"it_s"`        // UNet loop iterations a second
	Peak      int64   `json:"peak_bytes"`  // peak device memory, weights included
	Warmup    float64 `json:"warmup_s"`    // the first run's seconds (compiles, Finds)
}

// DiffusersSD is what torch_sd.py reports.
type DiffusersSD struct {
	Torch     string                `json:"torch"`
	Diffusers string                `json:"diffusers"`
	GPU       string                `json:"gpu"`
	Runs      map[string]*SDFigures `json:"runs"` // by "mode/batch"
}

// SDCheck is one comparison with diffusers' float32 reference.
type SDCheck struct {
	Name   string  `json:"name"`
	DType  string  `json:"dtype"`
	Figure float64 `json:"figure"` // relative L2 error, or PSNR in dB for an image
	Limit  float64 `json:"limit"`
	PSNR   bool    `json:"psnr,omitempty"`
	Met    bool    `json:"met"`
}

// SDReport is a run's result.
type SDReport struct {
	Shape  string                `json:"shape"`
	Size   int                   `json:"size"`
	Steps  int                   `json:"steps"`
	Ours   map[string]*SDFigures `json:"ours"` // by batch
	Theirs *DiffusersSD          `json:"diffusers,omitempty"`
	Checks []SDCheck             `json:"checks,omitempty"`
	Rows   []Row                 `json:"rows"`
}

// sdSizes are the shapes' own image sizes.
var sdSizes = map[string]int{"sd15": 512, "sdxl": 1024, "tiny": 16}

// RunSDBench runs the benchmark, printing progress and the table to w.
func RunSDBench(c SDBench, w io.Writer) (*SDReport, error) {
	if _, ok := sdSizes[c.Shape]; !ok {
		return nil, fmt.Errorf("sd bench: shape %q: want sd15, sdxl or tiny", c.Shape)
	}
	if c.Size == 0 {
		c.Size = sdSizes[c.Shape]
	}
	switch {
	case c.Size%8 != 0 || c.Size < 8:
		return nil, fmt.Errorf("sd bench: size %d: want a positive multiple of 8 (64 for SD's models)", c.Size)
	case c.Steps < 2 || c.Reps < 1 || len(c.Batches) == 0:
		return nil, fmt.Errorf("sd bench: %d steps, %d repeats, batches %v: want 2 steps or more, a repeat, a batch", c.Steps, c.Reps, c.Batches)
	case c.Shape == "tiny" && (c.Python != "" || c.Check):
		return nil, fmt.Errorf("sd bench: the tiny shape runs no diffusers: leave -python empty and -check off")
	}
	c.Batches = slices.Sorted(slices.Values(c.Batches)) // the peak only grows: the smaller batch first
	rep := &SDReport{Shape: c.Shape, Size: c.Size, Steps: c.Steps, Ours: map[string]*SDFigures{}}
	ref := ""
	if c.Shape == "tiny" {
		if _, err := os.Stat(filepath.Join(c.Model, "model_index.json")); err != nil {
			fmt.Fprintf(w, "model: writing mkmodel's tiny SD folder into %s\n", c.Model)
			if err := mkmodel.WriteSD(c.Model, mkmodel.TinySD(), nil); err != nil {
				return nil, err
			}
		}
	}
	if c.Python != "" {
		args := []string{"--model", c.Model, "--shape", c.Shape, "--make", "--size", strconv.Itoa(c.Size), "--steps", strconv.Itoa(c.Steps),
			"--reps", strconv.Itoa(c.Reps), "--batches", joinInts(c.Batches), "--modes", strings.Join(c.Modes, ",")}
		if c.Check {
			ref = filepath.Join(c.Model, "reference.safetensors")
			args = append(args, "--ref", ref, "--ref-size", strconv.Itoa(c.RefSize), "--ref-steps", strconv.Itoa(c.RefSteps))
		}
		fmt.Fprintf(w, "diffusers: %s %v\n", c.Python, args)
		start := time.Now()
		rep.Theirs = &DiffusersSD{}
		if err := RunScript(c.Python, c.Script, "torch_sd.py", args, rep.Theirs); err != nil {
			return nil, fmt.Errorf("sd bench: diffusers: %w", err)
		}
		fmt.Fprintf(w, "diffusers %s, torch %s on %s: done in %.1f s\n", rep.Theirs.Diffusers, rep.Theirs.Torch, rep.Theirs.GPU, time.Since(start).Seconds())
	}
	dev := c.Device
	if dev == nil {
		h, err := candle.HIP(0)
		if err != nil {
			return nil, fmt.Errorf("sd bench: %w", err)
		}
		dev = h
	}
	// The figures first, while only the F16 pipeline is on the device.
	if err := sdOurs(c, dev, rep, w); err != nil {
		return nil, err
	}
	if ref != "" {
		for _, dt := range []candle.DType{candle.F32, candle.F16} {
			checks, err := sdCheck(c, dev, dt, ref, w)
			if err != nil {
				return nil, err
			}
			rep.Checks = append(rep.Checks, checks...)
		}
	}
	rep.Rows = sdRows(c, rep)
	PrintTable(w, "diffusers", rep.Rows)
	return rep, nil
}

// sdOurs measures this SDK's pipeline in F16 (F32 on the CPU) at each
// batch size.
func sdOurs(c SDBench, dev candle.Device, rep *SDReport, w io.Writer) error {
	base := dev.MemoryStats().InUse
	start := time.Now()
	dt := candle.F16
	if _, ok := dev.(*candle.HIPDevice); !ok {
		dt = candle.F32
	}
	p, err := sd.OpenWith(c.Model, dev, dt, sd.Options{Graphs: c.Graphs})
	if err != nil {
		return fmt.Errorf("sd bench: %w", err)
	}
	defer p.Close()
	fmt.Fprintf(w, "ours: loaded %s in %s in %.2f s (%s on the device)\n", c.Model, dt, time.Since(start).Seconds(),
		humanize.IBytes(uint64(dev.MemoryStats().InUse-base)))
	for _, b := range c.Batches {
		var marks []time.Time
		var syncErr error
		req := sd.Request{Prompt: SDPrompt, Width: c.Size, Height: c.Size, Steps: c.Steps, Sampler: scheduler.Euler, Guidance: 7.5,
			Seed: 1, Batch: b, Progress: func(sd.Progress) {
				if err := dev.Synchronize(); err != nil && syncErr == nil {
					syncErr = err
				}
				marks = append(marks, time.Now())
			}}
		once := func() (float64, float64, error) {
			marks = marks[:0]
			if err := dev.Synchronize(); err != nil {
				return 0, 0, err
			}
			t0 := time.Now()
			if _, err := p.Generate(context.Background(), req); err != nil {
				return 0, 0, err
			}
			if syncErr != nil {
				return 0, 0, syncErr
			}
			d := time.Since(t0).Seconds()
			return d / float64(b), float64(len(marks)-1) / marks[len(marks)-1].Sub(marks[0]).Seconds(), nil
		}
		t0 := time.Now()
		if _, _, err := once(); err != nil {
			return fmt.Errorf("sd bench: batch %d: %w", b, err)
		}
		f := &SDFigures{Warmup: time.Since(t0).Seconds()}
		// The peak from here on, as diffusers' after its warm-up.
		dev.ResetPeak()
		var secs, rates []float64
		for range c.Reps {
			s, r, err := once()
			if err != nil {
				return fmt.Errorf("sd bench: batch %d: %w", b, err)
			}
			secs, rates = append(secs, s), append(rates, r)
		}
		f.SPerImage, f.ItS = medianOf(secs), medianOf(rates)
		f.Peak = dev.MemoryStats().Peak - base
		rep.Ours[key(b)] = f
		fmt.Fprintf(w, "ours: batch %d, %d², %d steps: %.2f it/s, %.3f s an image, peak %s (first run %.1f s)\n", b, c.Size, c.Steps,
			f.ItS, f.SPerImage, humanize.IBytes(uint64(f.Peak)), f.Warmup)
	}
	return nil
}

// sdCheck compares the pipeline in dt with diffusers' float32 outputs.
func sdCheck(c SDBench, dev candle.Device, dt candle.DType, refPath string, w io.Writer) ([]SDCheck, error) {
	ref, err := safetensors.OpenFile(refPath)
	if err != nil {
		return nil, err
	}
	defer ref.Close()
	get := func(name string) ([]float32, []int, error) {
		t, err := ref.Load(name, candle.CPU())
		if err != nil {
			return nil, nil, err
		}
		defer t.Close()
		v, err := candle.ToSlice[float32](t)
		return v, t.Shape(), err
	}
	load := func(name string) (*candle.Tensor, error) {
		v, shape, err := get(name)
		if err != nil {
			return nil, err
		}
		t, err := candle.FromSlice(dev, v, shape...)
		if err != nil || dt == candle.F32 {
			return t, err
		}
		defer t.Close()
		return t.ToDType(dt)
	}
	p, err := sd.Open(c.Model, dev, dt)
	if err != nil {
		return nil, fmt.Errorf("sd bench: %w", err)
	}
	defer p.Close()
	limit := map[candle.DType]float64{candle.F32: 1e-4, candle.F16: 2e-2}[dt]
	var out []SDCheck
	note := func(name string, got *candle.Tensor, want string) error {
		defer got.Close()
		wv, _, err := get(want)
		if err != nil {
			return err
		}
		g32, err := got.ToDType(candle.F32)
		if err != nil {
			return err
		}
		defer g32.Close()
		gv, err := candle.ToSlice[float32](g32)
		if err != nil {
			return err
		}
		if len(gv) != len(wv) {
			return fmt.Errorf("sd bench: %s: %d values against the reference's %d", name, len(gv), len(wv))
		}
		e := relL2(gv, wv)
		out = append(out, SDCheck{Name: name, DType: dt.String(), Figure: e, Limit: limit, Met: e <= limit})
		fmt.Fprintf(w, "check %s %s: relative error %.2e (limit %.0e)\n", dt, name, e, limit)
		return nil
	}
	for k, enc := range p.TextEncoders() {
		ids, _, err := get(fmt.Sprintf("clip%d.ids", k))
		if err != nil {
			return nil, err
		}
		win, err := p.Tokenizers()[k].EncodeWindows(SDPrompt, enc.Config().MaxPositions)
		if err != nil {
			return nil, err
		}
		for i, id := range win[0] {
			if float32(id) != ids[i] {
				return nil, fmt.Errorf("sd bench: tokenizer %d: token %d is %d here and %v in transformers", k, i, id, ids[i])
			}
		}
		o, err := enc.Forward(win[:1])
		if err != nil {
			return nil, err
		}
		last, pen, proj := o.Last, o.Penultimate, o.Projected
		o.Last, o.Penultimate, o.Projected = nil, nil, nil
		o.Close()
		for _, x := range []struct {
			name string
			t    *candle.Tensor
		}{{"last", last}, {"penultimate", pen}, {"projected", proj}} {
			if x.t == nil {
				continue
			}
			if err := note(fmt.Sprintf("text encoder %d %s", k+1, x.name), x.t, fmt.Sprintf("clip%d.%s", k, x.name)); err != nil {
				return nil, err
			}
		}
	}
	x, err := load("unet.x")
	if err != nil {
		return nil, err
	}
	defer x.Close()
	text, err := load("unet.text")
	if err != nil {
		return nil, err
	}
	defer text.Close()
	cond := unet.Cond{Text: text}
	if _, ok := ref.Info("unet.text_embeds"); ok {
		if cond.TextEmbeds, err = load("unet.text_embeds"); err != nil {
			return nil, err
		}
		defer cond.TextEmbeds.Close()
		ids, _, err := get("unet.time_ids")
		if err != nil {
			return nil, err
		}
		for i := 0; i+6 <= len(ids); i += 6 {
			var r [6]float64
			for j := range r {
				r[j] = float64(ids[i+j])
			}
			cond.TimeIDs = append(cond.TimeIDs, r)
		}
	}
	e, err := p.UNet().Forward(x, 500, cond)
	if err != nil {
		return nil, err
	}
	if err := note("UNet prediction", e, "unet.out"); err != nil {
		return nil, err
	}
	z, err := load("vae.z")
	if err != nil {
		return nil, err
	}
	defer z.Close()
	if vdt := p.VAE().DType(); vdt != z.DType() {
		z2, err := z.ToDType(vdt)
		if err != nil {
			return nil, err
		}
		defer z2.Close()
		z = z2
	}
	img, err := p.VAE().Decode(z)
	if err != nil {
		return nil, err
	}
	if err := note("VAE decode", img, "vae.out"); err != nil {
		return nil, err
	}
	lat, _, err := get("pipe.latents")
	if err != nil {
		return nil, err
	}
	want, _, err := get("pipe.image")
	if err != nil {
		return nil, err
	}
	imgs, err := p.Generate(context.Background(), sd.Request{Prompt: SDPrompt, Width: c.RefSize, Height: c.RefSize,
		Steps: c.RefSteps, Sampler: scheduler.Euler, Guidance: 7.5, Noise: lat})
	if err != nil {
		return nil, err
	}
	var got []float32
	for y := range c.RefSize {
		for x := range c.RefSize {
			px := imgs[0].RGBAAt(x, y)
			got = append(got, float32(px.R), float32(px.G), float32(px.B))
		}
	}
	if len(got) != len(want) {
		return nil, fmt.Errorf("sd bench: the image has %d values and diffusers' %d", len(got), len(want))
	}
	db := PSNR(got, want, 255)
	out = append(out, SDCheck{Name: fmt.Sprintf("txt2img %d², %d steps", c.RefSize, c.RefSteps), DType: dt.String(), Figure: db, Limit: 35, PSNR: true, Met: db >= 35})
	fmt.Fprintf(w, "check %s txt2img %d² in %d steps: PSNR %.1f dB against diffusers' image (goal ≥ 35 dB)\n", dt, c.RefSize, c.RefSteps, db)
	return out, nil
}

// relL2 is ‖a − b‖ / ‖b‖.
func relL2(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

// PSNR is the peak signal-to-noise ratio of a against b in dB, for values
// up to peak; +Inf when they are equal.
func PSNR(a, b []float32, peak float64) float64 {
	var se float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		se += d * d
	}
	if se == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(peak*peak/(se/float64(len(a))))
}

// sdRows are the table: for each batch, it/s, seconds an image and peak
// memory against each diffusers mode that ran, then the checks.
func sdRows(c SDBench, rep *SDReport) []Row {
	var rows []Row
	what := fmt.Sprintf("%s %d², %d steps", map[string]string{"sd15": "SD 1.5", "sdxl": "SDXL", "tiny": "tiny SD"}[c.Shape], c.Size, c.Steps)
	for _, b := range c.Batches {
		ours := rep.Ours[key(b)]
		if ours == nil {
			continue
		}
		if rep.Theirs == nil || len(rep.Theirs.Runs) == 0 {
			rows = append(rows, Row{Name: fmt.Sprintf("UNet loop, %s, batch %d", what, b), Ours: fmt.Sprintf("%.2f it/s", ours.ItS)},
				Row{Name: fmt.Sprintf("end to end, %s, batch %d", what, b), Ours: fmt.Sprintf("%.3f s/image", ours.SPerImage)},
				Row{Name: fmt.Sprintf("peak device memory, %s, batch %d", what, b), Ours: gib(float64(ours.Peak))})
			continue
		}
		for _, mode := range c.Modes {
			t := rep.Theirs.Runs[fmt.Sprintf("%s/%d", mode, b)]
			if t == nil {
				continue
			}
			goal := map[string]float64{"eager": 1.5, "compile": 1.0}[mode]
			r := ours.ItS / t.ItS
			rows = append(rows, Row{Name: fmt.Sprintf("UNet loop, %s, batch %d, against %s", what, b, mode),
				Ours: fmt.Sprintf("%.2f it/s", ours.ItS), Theirs: fmt.Sprintf("%.2f it/s", t.ItS), Ratio: r,
				Target: fmt.Sprintf("≥ %.1f×", goal), Met: Met(r >= goal)})
			r = t.SPerImage / ours.SPerImage
			rows = append(rows, Row{Name: fmt.Sprintf("end to end, %s, batch %d, against %s", what, b, mode),
				Ours: fmt.Sprintf("%.3f s/image", ours.SPerImage), Theirs: fmt.Sprintf("%.3f s/image", t.SPerImage), Ratio: r,
				Target: fmt.Sprintf("≥ %.1f×", goal), Met: Met(r >= goal)})
			r = float64(ours.Peak) / float64(t.Peak)
			rows = append(rows, Row{Name: fmt.Sprintf("peak device memory, %s, batch %d, against %s (ratio: ours / theirs)", what, b, mode),
				Ours: gib(float64(ours.Peak)), Theirs: gib(float64(t.Peak)), Ratio: r, Target: "≤ 1.0", Met: Met(r <= 1)})
		}
	}
	for _, k := range rep.Checks {
		r := Row{Name: fmt.Sprintf("%s, %s, against diffusers' float32", k.Name, k.DType), Met: Met(k.Met)}
		if k.PSNR {
			r.Ours, r.Target = fmt.Sprintf("%.1f dB PSNR", k.Figure), fmt.Sprintf("≥ %.0f dB", k.Limit)
		} else {
			r.Ours, r.Target = fmt.Sprintf("%.2e relative", k.Figure), fmt.Sprintf("≤ %.0e", k.Limit)
		}
		rows = append(rows, r)
	}
	return rows
}
