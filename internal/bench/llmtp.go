package bench

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/candle/models/llama"
	"github.com/rocm-go/rocm/internal/mkmodel"
)

// LLMTP is the tensor-parallel benchmark (llmbench -tensor-parallel): a
// model of Spec with random weights made on the GPUs (mkmodel.OnDevice, no
// file), split over each of Ranks GPUs in turn (1: llama.New on one GPU),
// its prefill and greedy decode measured as RunLLMOurs measures them.
type LLMTP struct {
	Spec     mkmodel.Spec
	Ranks    []int // GPUs per run, e.g. 1, 2, 4; those past the machine's are skipped
	Settings LLMSettings
}

// LLMTPFigures are one run's: prefill and decode tokens/s by batch size.
type LLMTPFigures struct {
	Ranks   int                `json:"ranks"`
	Prefill map[string]float64 `json:"prefill_tok_s"`
	Decode  map[string]float64 `json:"decode_tok_s"`
	Load    float64            `json:"load_s"`
}

// The goals for tensor-parallel decode at batch 1 against one GPU.
var tpGoals = map[int]float64{2: 1.7, 4: 2.8}

// RunLLMTP runs l on the machine's GPUs (hip:0 on), printing each figure
// to w as it comes, then a table of the speed-ups against one GPU.
func RunLLMTP(l LLMTP, w io.Writer) ([]*LLMTPFigures, error) {
	if err := l.Settings.check(); err != nil {
		return nil, err
	}
	if len(l.Ranks) == 0 {
		return nil, errors.New("llm bench: no tensor-parallel sizes")
	}
	// NVLink multicast stays off unless the environment says otherwise:
	// on shared machines it can take GPUs out of service.
	if _, ok := os.LookupEnv("NCCL_NVLS_ENABLE"); !ok {
		os.Setenv("NCCL_NVLS_ENABLE", "0")
	}
	var out []*LLMTPFigures
	for _, n := range l.Ranks {
		f, err := runTP(l, n, w)
		if errors.Is(err, errTooFewGPUs) {
			fmt.Fprintf(w, "tp %d: skipped: %v\n", n, err)
			continue
		}
		if err != nil {
			return out, fmt.Errorf("llm bench: %d GPUs: %w", n, err)
		}
		out = append(out, f)
	}
	PrintTable(w, "1 GPU", LLMTPRows(l.Settings, out))
	return out, nil
}

var errTooFewGPUs = errors.New("the machine has too few GPUs")

// runTP measures the model over the first n GPUs.
func runTP(l LLMTP, n int, w io.Writer) (*LLMTPFigures, error) {
	devs := make([]*candle.HIPDevice, n)
	for i := range devs {
		d, err := candle.HIP(i)
		if err != nil {
			if i > 0 {
				return nil, fmt.Errorf("%w: hip:%d: %v", errTooFewGPUs, i, err)
			}
			return nil, err
		}
		devs[i] = d
	}
	s := l.Settings
	cfg, weights, err := mkmodel.OnDevice(l.Spec)
	if err != nil {
		return nil, err
	}
	ckpt := &models.Checkpoint{Path: "(random weights made on the GPUs)", Format: models.HuggingFace, Config: cfg, Weights: weights}
	opts := llama.Options{CacheTokens: s.CacheTokens(models.DefaultPageSize), PageSize: models.DefaultPageSize, MaxBatch: s.maxBatch()}
	start := time.Now()
	var m interface {
		generate.PagedModel
		Close() error
	}
	if n == 1 {
		m, err = llama.New(ckpt, devs[0], l.Spec.DType, opts)
	} else {
		g, gerr := candle.NewHIPGroup(devs...)
		if gerr != nil {
			return nil, gerr
		}
		defer g.Close()
		m, err = llama.NewTP(ckpt, g, l.Spec.DType, opts)
	}
	if err != nil {
		return nil, err
	}
	defer m.Close()
	for _, d := range devs {
		if err := d.Synchronize(); err != nil {
			return nil, err
		}
	}
	f := &LLMTPFigures{Ranks: n, Prefill: map[string]float64{}, Decode: map[string]float64{}, Load: time.Since(start).Seconds()}
	bytes, _ := l.Spec.Bytes()
	fmt.Fprintf(w, "tp %d: made %s of random weights on %d GPU(s) in %.1f s\n", n, humanize.IBytes(uint64(bytes)), n, f.Load)
	r := &llmRun{m: m, dev: devs[0], s: s, rng: rand.New(rand.NewPCG(s.Seed, 7)), vocab: m.VocabSize()}
	for _, b := range s.Batches {
		d, err := Median(s.Reps, func() (time.Duration, error) { return r.prefill(b) })
		if err != nil {
			return nil, err
		}
		f.Prefill[key(b)] = float64(b*s.Prompt) / d.Seconds()
		fmt.Fprintf(w, "tp %d: prefill of %d×%d tokens: %s (%.0f tok/s)\n", n, b, s.Prompt, msf(d), f.Prefill[key(b)])
	}
	for _, b := range s.Batches {
		d, err := Median(s.decodeReps(), func() (time.Duration, error) { return r.decode(b) })
		if err != nil {
			return nil, err
		}
		f.Decode[key(b)] = float64(b*(s.Steps-1)) / d.Seconds()
		fmt.Fprintf(w, "tp %d: greedy decode, batch %d: %.1f tok/s, %s a step\n", n, b, f.Decode[key(b)], msf(d/time.Duration(s.Steps-1)))
	}
	return f, nil
}

// LLMTPRows are the table of a tensor-parallel run: each size's prefill
// and decode against one GPU's, with the goals at decode batch 1.
func LLMTPRows(s LLMSettings, runs []*LLMTPFigures) []Row {
	var one *LLMTPFigures
	for _, f := range runs {
		if f.Ranks == 1 {
			one = f
		}
	}
	var rows []Row
	for _, f := range runs {
		add := func(what string, ours, ref float64, b int) {
			r := Row{Name: fmt.Sprintf("TP %d: %s", f.Ranks, what), Ours: fmt.Sprintf("%.1f tok/s", ours)}
			if one != nil && ref > 0 {
				r.Theirs, r.Ratio = fmt.Sprintf("%.1f tok/s", ref), ours/ref
			}
			if goal, ok := tpGoals[f.Ranks]; ok && b == 1 && what == "decode, batch 1" && r.Ratio > 0 {
				r.Target, r.Met = fmt.Sprintf("≥ %.1f×", goal), Met(r.Ratio >= goal)
			}
			rows = append(rows, r)
		}
		for _, b := range s.Batches {
			ref := 0.0
			if one != nil {
				ref = one.Prefill[key(b)]
			}
			add(fmt.Sprintf("prefill %d×%d", b, s.Prompt), f.Prefill[key(b)], ref, b)
		}
		for _, b := range s.Batches {
			ref := 0.0
			if one != nil {
				ref = one.Decode[key(b)]
			}
			add(fmt.Sprintf("decode, batch %d", b), f.Decode[key(b)], ref, b)
		}
	}
	return rows
}
