package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/bench"
)

// loadStrategies are the transfers compared with the default on the same
// checkpoint: other chunk sizes and goroutine counts for reading, and
// registering the mapping (the default before) in the ways that measured
// best.
var loadStrategies = []struct {
	name string
	t    candle.Transfer
}{
	{"read, 2 MiB chunks by 16 goroutines, 48 ahead", candle.Transfer{Chunk: 2 << 20, Workers: 16, Ahead: 48}},
	{"read, 4 MiB chunks by 8 goroutines, 8 ahead", candle.Transfer{Chunk: 4 << 20, Workers: 8, Ahead: 8}},
	{"read, 4 MiB chunks by 12 goroutines, 24 ahead (the default before)", candle.Transfer{Chunk: 4 << 20, Workers: 12, Ahead: 24}},
	{"read, 4 MiB chunks by 16 goroutines, 16 ahead", candle.Transfer{Chunk: 4 << 20, Workers: 16, Ahead: 16}},
	{"read, 4 MiB chunks by 16 goroutines, 32 ahead", candle.Transfer{Chunk: 4 << 20, Workers: 16, Ahead: 32}},
	{"read, 8 MiB chunks by 14 goroutines, 12 ahead", candle.Transfer{Chunk: 8 << 20, Workers: 14, Ahead: 12}},
	{"registered, 128 MiB chunks by 2 goroutines, 4 ahead (the default before)", candle.Transfer{Register: true}},
	{"registered, 32 MiB chunks by 2 goroutines, 8 ahead", candle.Transfer{Register: true, Chunk: 32 << 20, Workers: 2, Ahead: 8}},
	{"registered, 128 MiB chunks by 2 goroutines, 4 ahead, kept until Close", candle.Transfer{Register: true, Chunk: 128 << 20, Workers: 2, Ahead: 4, Keep: true}},
}

// loadResults is the loading section of the report.
type loadResults struct {
	ckpt        *bench.Checkpoint
	pinned      float64 // GB/s
	first, def  bench.Load
	fresh       bench.Load // a fresh process's first load
	reserved    bench.Load // the same after ReservePinnedBuffers
	reserve     time.Duration
	staging     bench.Load
	strategies  []bench.Load
	regs        []bench.Registration
	whole       bench.Registration
	regErr      error
	hostRates   [2][]string // mapped, pread: by goroutines
	regThreads  []int
	hostThreads []int
}

// measureLoad writes the checkpoint into dir and measures every way of
// loading it, and the parts of loading.
func measureLoad(b *bench.Tensors, dir string, scale int) (*loadResults, error) {
	r := &loadResults{regThreads: []int{1, 2, 4, 8}, hostThreads: []int{1, 8, 16}}
	var err error
	if r.ckpt, err = b.WriteCheckpoint(dir, scale); err != nil {
		return nil, err
	}
	if r.pinned, err = b.PinnedRate(256 << 20); err != nil {
		return nil, err
	}
	if r.first, r.def, err = b.MedianLoad(r.ckpt, candle.Transfer{}, 3); err != nil {
		return nil, err
	}
	if r.fresh, _, err = freshLoads(r.ckpt, scale, false, 3); err != nil {
		return nil, err
	}
	if r.reserved, r.reserve, err = freshLoads(r.ckpt, scale, true, 3); err != nil {
		return nil, err
	}
	if _, r.staging, err = b.MedianLoad(r.ckpt, candle.Transfer{Staging: true}, 3); err != nil {
		return nil, err
	}
	for _, s := range loadStrategies {
		_, l, err := b.MedianLoad(r.ckpt, s.t, 3)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		r.strategies = append(r.strategies, l)
	}
	for _, n := range r.regThreads {
		g, err := b.RegisterRate(r.ckpt, 32<<20, n)
		if err != nil {
			r.regErr = err
			break
		}
		r.regs = append(r.regs, g)
	}
	if r.regErr == nil {
		r.whole, r.regErr = b.RegisterRate(r.ckpt, int(r.ckpt.Bytes)+1<<20, 1)
	}
	for _, n := range r.hostThreads {
		m, p, err := b.HostRates(r.ckpt, n)
		if err != nil {
			return nil, err
		}
		r.hostRates[0], r.hostRates[1] = append(r.hostRates[0], fmt.Sprintf("%.1f", m)), append(r.hostRates[1], fmt.Sprintf("%.1f", p))
	}
	return r, nil
}

// rows are the loading rows; torch gives PyTorch's figures by key (0:
// none).
func (r *loadResults) rows(torch func(string) float64) []bench.Row {
	gb := float64(r.ckpt.Bytes) / 1e9
	rate := func(d time.Duration) float64 { return gb / d.Seconds() }
	desc := func(l bench.Load) string {
		return fmt.Sprintf("%s to closed (%.1f GB/s, %.2f of pinned host→device); on the device at %s", ms(l.Closed), rate(l.Closed),
			rate(l.Closed)/r.pinned, ms(l.OnDevice))
	}
	target := fmt.Sprintf("≥ 0.8 of pinned host→device (%.1f GB/s)", r.pinned)
	var rows []bench.Row
	for i, l := range []bench.Load{r.first, r.def} {
		name := fmt.Sprintf("load a %.2f GB BF16 safetensors checkpoint (Llama-3.2-1B shapes) from the page cache to the GPU, "+
			"open to VarBuilder closed: %s (the default), this process's first load (its device memory from the pool that "+
			"writing the checkpoint filled)", gb, candle.Transfer{})
		key := "load_first_s"
		if i == 1 {
			name, key = "the same, loaded again (device memory from the pool; median of 3)", "load_s"
		}
		row := bench.Row{Name: name, Ours: desc(l), Target: target, Met: bench.Met(rate(l.Closed) >= 0.8*r.pinned)}
		if t := torch(key); t > 0 {
			row.Theirs, row.Ratio = fmt.Sprintf("%.1f ms (%.1f GB/s), safetensors' load_file", t*1e3, gb/t), t/l.Closed.Seconds()
		}
		rows = append(rows, row)
	}
	rows = append(rows,
		bench.Row{Name: "the same as a fresh process's first load: the device opened, then the load, which allocates its pinned buffers " +
			"and device memory (median of 3 processes)",
			Ours: desc(r.fresh), Theirs: "—", Target: target, Met: bench.Met(rate(r.fresh.Closed) >= 0.8*r.pinned)},
		bench.Row{Name: fmt.Sprintf("the same as a fresh process's first load after ReservePinnedBuffers (the pinned buffers allocated before "+
			"the load, as llm-worker does while its tokenizer loads; reserving took %s; median of 3 processes)", ms(r.reserve)),
			Ours: desc(r.reserved), Theirs: "—", Target: target, Met: bench.Met(rate(r.reserved.Closed) >= 0.8*r.pinned)})
	st := r.def.Stats
	how := fmt.Sprintf("%.2f GB read in %d chunks, %.2f GB staged; reading %s (summed over goroutines)",
		float64(st.Read)/1e9, st.Chunks, float64(st.Staged)/1e9, ms(st.ReadTime))
	if st.Fallback != nil {
		how += "; reading failed, so the load staged: " + st.Fallback.Error()
	}
	rows = append(rows, bench.Row{Name: "how the default load's bytes went (TransferStats)", Ours: how, Theirs: "—", Target: "nothing staged"})
	rows = append(rows, bench.Row{Name: "the same load through candle's staging ring (Transfer{Staging: true}), median of 3",
		Ours: desc(r.staging), Theirs: "—", Ratio: r.staging.Closed.Seconds() / r.def.Closed.Seconds(), Target: "reported (ratio: its time over the default's)"})
	for i, l := range r.strategies {
		rows = append(rows, bench.Row{Name: "strategy: " + loadStrategies[i].name + ", median of 3", Ours: desc(l), Theirs: "—",
			Ratio: l.Closed.Seconds() / r.def.Closed.Seconds(), Target: "reported (ratio: its time over the default's)"})
	}
	reg := bench.Row{Name: fmt.Sprintf("registering alone (no copies): a fresh read-only mapping in 32 MiB chunks by %s goroutines, then unregistering",
		slashed(r.regThreads)), Theirs: "—", Target: "reported"}
	whole := bench.Row{Name: "registering alone: the whole file in one call, then unregistering", Theirs: "—", Target: "reported"}
	if r.regErr != nil {
		reg.Ours = "refused: " + r.regErr.Error()
		whole.Ours = reg.Ours
	} else {
		var in, out []string
		for _, g := range r.regs {
			in, out = append(in, fmt.Sprintf("%.1f", g.Register)), append(out, fmt.Sprintf("%.1f", g.Unregister))
		}
		reg.Ours = fmt.Sprintf("register %s GB/s; unregister %s GB/s", strings.Join(in, "/"), strings.Join(out, "/"))
		whole.Ours = fmt.Sprintf("register %.1f GB/s (%s); unregister %.1f GB/s (%s)", r.whole.Register, ms(secs(gb/r.whole.Register)),
			r.whole.Unregister, ms(secs(gb/r.whole.Unregister)))
	}
	rows = append(rows, reg, whole,
		bench.Row{Name: "pinned host→device copy rate (256 MiB from MallocHost's memory): the ceiling", Ours: fmt.Sprintf("%.1f GB/s", r.pinned), Theirs: "—", Target: "reported"},
		bench.Row{Name: "page cache → pinned memory (the staging path's host half) with " + slashed(r.hostThreads) + " goroutines", Theirs: "—", Target: "reported",
			Ours: fmt.Sprintf("mapped file: %s GB/s; pread: %s GB/s", strings.Join(r.hostRates[0], "/"), strings.Join(r.hostRates[1], "/"))})
	return rows
}

// slashed spells counts as 1/2/4.
func slashed(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, "/")
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// firstLoad is what tensorbench -first-load prints: a fresh process's
// first load (bench.FirstLoad).
type firstLoad struct {
	OnDevice, Closed, Reserve time.Duration
}

// runFirstLoad is tensorbench -first-load: one load in this process,
// printed as JSON for the process that started it (freshLoads).
func runFirstLoad(path string, scale int, reserve bool) error {
	c, err := bench.OpenCheckpoint(path, scale)
	if err != nil {
		return err
	}
	l, took, err := bench.FirstLoad(c, reserve)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(firstLoad{OnDevice: l.OnDevice, Closed: l.Closed, Reserve: took})
}

// freshLoads runs this program's -first-load in n fresh processes, one
// after another, and returns the load of median Closed time and the
// median time of reserving.
func freshLoads(c *bench.Checkpoint, scale int, reserve bool, n int) (bench.Load, time.Duration, error) {
	exe, err := os.Executable()
	if err != nil {
		return bench.Load{}, 0, err
	}
	ls := make([]firstLoad, n)
	for i := range ls {
		args := []string{"-first-load", c.Path, fmt.Sprint("-scale=", scale), fmt.Sprint("-reserve=", reserve)}
		if err := bench.RunJSON(exe, args, &ls[i]); err != nil {
			return bench.Load{}, 0, fmt.Errorf("a fresh process's first load: %w", err)
		}
		if err := ls[i].check(); err != nil {
			return bench.Load{}, 0, err
		}
	}
	slices.SortFunc(ls, func(x, y firstLoad) int { return cmp.Compare(x.Reserve, y.Reserve) })
	took := ls[n/2].Reserve
	slices.SortFunc(ls, func(x, y firstLoad) int { return cmp.Compare(x.Closed, y.Closed) })
	return bench.Load{OnDevice: ls[n/2].OnDevice, Closed: ls[n/2].Closed}, took, nil
}

// check says whether the times are those of a load.
func (l firstLoad) check() error {
	if l.Closed <= 0 || l.OnDevice <= 0 || l.Closed < l.OnDevice {
		return fmt.Errorf("a fresh process's first load printed %+v: want 0 < OnDevice <= Closed", l)
	}
	return nil
}

// runLoad is tensorbench -load: the loading rows alone.
func runLoad(scale int) error {
	b, err := bench.OpenTensors()
	if err != nil {
		return err
	}
	defer b.Close()
	props := b.Dev.Properties()
	rt, _ := hip.RuntimeVersion()
	fmt.Printf("device: %s (%s), %s platform, runtime %s; host register supported %v, read-only %v\n", props.Name, props.ArchName,
		hip.LoadedPlatform(), rt, props.HostRegisterSupported, props.HostRegisterReadOnlySupported)
	dir, err := os.MkdirTemp("", "rocm-go-bench-load")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	r, err := measureLoad(b, dir, scale)
	if err != nil {
		return err
	}
	bench.PrintTable(os.Stdout, "PyTorch (not run with -load)", r.rows(func(string) float64 { return 0 }))
	return nil
}
