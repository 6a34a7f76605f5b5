// Command llmbench measures candle/models/llama on a Llama-3.2-1B-shaped
// (or -shape llama-3.1-8b) model with random BF16 weights (written by
// mkmodel into -model, or reused from there) and, in the same run,
// transformers on the same folder (torch_llm.py: eager and sdpa attention,
// and compiled: a static KV cache and torch.compile): prefill of a 512-token prompt
// at batch 1 and 8, time to first token, greedy decode at batch 1 and 8
// (direct, and through generate.Engine), peak device memory against the
// weights and the KV cache, and prefix caching: the time to first token
// of a prompt of a 4,000-token prefix and 32 tokens of its own, the prefix
// uncached, then cached (-prefix, -prefix-suffix); and with -speculative,
// prompt-lookup speculative decoding against plain greedy decoding. The batch-1 decode roofline is the device's
// copy bandwidth, measured in the run, over the weights' bytes. It prints
// a table of the figures, their ratios and the goals against transformers
// eager, and one against transformers compiled.
//
//	llmbench -model /tmp/llm1b [-steps 128] [-json out.json]
//	llmbench -model /tmp/llm8b -shape llama-3.1-8b -batches 1,8,32
//	llmbench -quick            # a tiny model in a temporary folder, in seconds
//	llmbench -model /tmp/llm1b -gguf q4_k -bf16=false -batches 1
//	                           # the quantized model alone, no BF16 model or transformers
//	llmbench -tensor-parallel 1,2,4
//	                           # Llama 3.1 8B's shape, random BF16 weights made on the GPUs
//	                           # (no file), over 1, 2 and 4 GPUs: prefill and decode, and the
//	                           # speed-ups against one GPU
//
// Decode is counted after the first token on both sides: b·(steps−1) new
// tokens over their time (transformers: generate of steps tokens less
// generate of one).
package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/internal/bench"
	"github.com/rocm-go/rocm/internal/mkmodel"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: 2 for bad flags, 1 when the run failed, else 0.
func run(args []string, stdout, stderr io.Writer) int {
	cli := bench.NewCLI("llmbench", "usage: llmbench -model DIR [flags] | llmbench -quick [flags]\n\n"+
		"Measures candle/models/llama against transformers on a Llama-3.2-1B-shaped random model.", stderr)
	fs, fail := cli.Flags, cli.Fail
	model := fs.String("model", "", "the model folder: written if empty or absent, reused if it holds the model (required unless -quick)")
	shape := fs.String("shape", "llama-3.2-1b", "the model's shape: llama-3.2-1b (2.5 GB in BF16) or llama-3.1-8b (16 GB)")
	quick := fs.Bool("quick", false, "a tiny model (mkmodel's tiny preset in BF16), a short prompt and few steps: a check in seconds")
	steps := fs.Int("steps", 0, "new tokens of each decode run (default 128; -quick 16)")
	prompt := fs.Int("prompt", 0, "prompt tokens (default 512; -quick 64)")
	batches := fs.String("batches", "1,8", "batch sizes, comma-separated")
	reps := fs.Int("reps", 0, "repeats of prefill and time to first token, the median reported; decode runs half as many (default 5; -quick 2)")
	python := fs.String("python", "python3", "Python with PyTorch and transformers (\"\" skips transformers)")
	script := fs.String("torch", "", "PyTorch reference script (default: the embedded torch_llm.py)")
	peers := fs.String("peers", strings.Join(bench.Peers, ","), "transformers' runs: eager, sdpa, compiled (sdpa with a static cache and torch.compile)")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	quant := fs.String("gguf", "", "GGUF types to measure too, comma-separated (q4_0,q4_k,q8_0): the model written as GGUF files beside -model")
	constrain := fs.String("constrain", "", "also decode through the engine with every request constrained to JSON: \"schema\" (the benchmark's schema), \"json_object\", or @FILE (a JSON schema); the token trie of a synthetic vocabulary of the model's size")
	tp := fs.String("tensor-parallel", "", "GPU counts, comma-separated (1,2,4): measure an 8B-shaped model split over that many GPUs instead (random BF16 weights made on the GPUs; -model is not used)")
	bf16 := fs.Bool("bf16", true, "measure the BF16 model and transformers (false: only the -gguf models, in minutes less)")
	prefix := fs.Int("prefix", -1, "prefix caching: the time to first token of a prompt of this many shared tokens and -prefix-suffix of its own, uncached and cached (default 4000; -quick 256; 0 skips)")
	suffix := fs.Int("prefix-suffix", 32, "the tokens after -prefix that each request has of its own")
	specTokens := fs.Int("speculative", 0, "prompt-lookup speculative decoding: greedy decode of a repetitive prompt (-prompt tokens: a text, then its first half again) at batch 1 through generate.Engine, without and with this many drafted tokens a step (0 skips; 5 is a start)")
	if code, ok := cli.Parse(args); !ok {
		return code
	}
	spec, ok := map[string]func() mkmodel.Spec{"llama-3.2-1b": mkmodel.Llama32_1B, "llama-3.1-8b": mkmodel.Llama31_8B}[*shape]
	if !ok {
		return fail(2, "-shape %q: llama-3.2-1b or llama-3.1-8b", *shape)
	}
	c := bench.LLMBench{Model: *model, Python: *python, Script: *script, Spec: spec(),
		Settings: bench.LLMSettings{Prompt: 512, Steps: 128, Reps: 5, Seed: 1}}
	if *quick {
		c.Spec = mkmodel.Tiny()
		c.Spec.DType = candle.BF16
		c.Settings = bench.LLMSettings{Prompt: 64, Steps: 16, Reps: 2, Seed: 1}
		c.CopyBytes = 64 << 20
	}
	if *steps != 0 {
		c.Settings.Steps = *steps
	}
	if *prompt != 0 {
		c.Settings.Prompt = *prompt
	}
	if *reps != 0 {
		c.Settings.Reps = *reps
	}
	switch {
	case *constrain == "schema":
		c.Settings.Constraint = bench.BenchSchema
	case *constrain == "json_object", *constrain == "":
		c.Settings.Constraint = *constrain
	case strings.HasPrefix(*constrain, "@"):
		data, err := os.ReadFile((*constrain)[1:])
		if err != nil {
			return fail(2, "-constrain: %v", err)
		}
		c.Settings.Constraint = string(data)
	default:
		return fail(2, "-constrain %q: want schema, json_object or @FILE", *constrain)
	}
	c.Prefix = bench.LLMPrefixSettings{Prefix: 4000, Suffix: *suffix, Reps: c.Settings.Reps, Seed: 1}
	if *quick {
		c.Prefix.Prefix = 256
	}
	if *prefix >= 0 {
		c.Prefix.Prefix = *prefix
	}
	if c.Prefix.Prefix > 0 && c.Prefix.Suffix < 1 {
		return fail(2, "-prefix-suffix %d: want at least 1", c.Prefix.Suffix)
	}
	if *specTokens < 0 {
		return fail(2, "-speculative %d: want 0 (skip) or more drafted tokens", *specTokens)
	}
	c.Speculative = bench.LLMSpecSettings{Tokens: *specTokens, Prompt: c.Settings.Prompt, Steps: c.Settings.Steps, Batch: 1, Reps: max(1, c.Settings.Reps/2), Seed: 1}
	var err error
	if c.Settings.Batches, err = bench.ParseCounts("batches", *batches, 64); err != nil {
		return fail(2, "%v", err)
	}
	for _, name := range strings.Split(*quant, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		typ, err := candle.ParseGGMLType(name)
		if err != nil {
			return fail(2, "-gguf: %v", err)
		}
		c.Quant = append(c.Quant, typ)
	}
	for _, p := range strings.Split(*peers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			if !slices.Contains(bench.Peers, p) {
				return fail(2, "-peers: %q is none of %s", p, strings.Join(bench.Peers, ", "))
			}
			c.Peers = append(c.Peers, p)
		}
	}
	if *tp != "" {
		return runTP(*tp, *quick, c.Settings, stdout, *jsonOut, fail)
	}
	c.QuantOnly = !*bf16
	if c.QuantOnly && len(c.Quant) == 0 {
		return fail(2, "-bf16=false measures only the -gguf models: name one (-gguf q4_k)")
	}
	if c.Model == "" {
		if !*quick {
			return fail(2, "-model is required (a folder for the 2.5 GB model, kept for the next run); -quick needs none")
		}
		dir, err := os.MkdirTemp("", "llmbench-tiny")
		if err != nil {
			return fail(1, "%v", err)
		}
		defer os.RemoveAll(dir)
		c.Model = dir + "/model"
	}
	start := time.Now()
	rep, err := bench.RunLLMBench(c, stdout)
	if err != nil {
		return fail(1, "%v", err)
	}
	fmt.Fprintf(stdout, "\nllmbench: done in %.1f s\n", time.Since(start).Seconds())
	if err := bench.WriteJSON(*jsonOut, map[string]any{"report": rep}); err != nil {
		return fail(1, "%v", err)
	}
	return 0
}

// runTP is llmbench -tensor-parallel: the 8B shape (-quick: the tiny
// model's) over each count of GPUs.
func runTP(counts string, quick bool, s bench.LLMSettings, stdout io.Writer, jsonOut string, fail func(int, string, ...any) int) int {
	ranks, err := bench.ParseCounts("tensor-parallel", counts, 8)
	if err != nil {
		return fail(2, "%v", err)
	}
	l := bench.LLMTP{Spec: mkmodel.Llama31_8B(), Ranks: ranks, Settings: s}
	if quick {
		l.Spec = mkmodel.Tiny()
		l.Spec.DType, l.Spec.Vocab = candle.BF16, 512
	}
	start := time.Now()
	runs, err := bench.RunLLMTP(l, stdout)
	if err != nil {
		return fail(1, "%v", err)
	}
	fmt.Fprintf(stdout, "\nllmbench: done in %.1f s\n", time.Since(start).Seconds())
	if err := bench.WriteJSON(jsonOut, map[string]any{"tensor_parallel": runs}); err != nil {
		return fail(1, "%v", err)
	}
	return 0
}
