// Command rocm-go-mkmodel writes a Llama-architecture model folder with
// random weights: config.json, model.safetensors, generation_config.json,
// and a byte-level BPE tokenizer (tokenizer.json, tokenizer_config.json
// with a Llama 3 chat template) learnt from a built-in English text. The
// same seed writes the same files. No network: the project's demos, tests
// and benchmarks run on models it makes itself.
//
//	go run ./cmd/rocm-go-mkmodel -out /tmp/tiny                         # a tiny model, fast on the CPU
//	go run ./cmd/rocm-go-mkmodel -preset llama-3.2-1b -out /tmp/llama1b # Llama 3.2 1B's shape, BF16
//	go run ./cmd/rocm-go-mkmodel -hidden 256 -layers 2 -dtype bf16 -out /tmp/m
//
// Shape flags override the preset's values.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/internal/mkmodel"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "rocm-go-mkmodel:", err)
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// parse reads the flags into a spec and the output folder.
// options are what the flags ask beyond the spec.
type options struct {
	out  string
	sd   string          // -sd: a Stable Diffusion preset instead of a Llama model
	gguf candle.GGMLType // the type of -gguf's one file
	set  bool            // -gguf was given (its zero, F32, is a type too)
}

func parse(args []string, stderr io.Writer) (mkmodel.Spec, options, error) {
	fs := flag.NewFlagSet("rocm-go-mkmodel", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var names []string
	for n := range mkmodel.Presets {
		names = append(names, n)
	}
	slices.Sort(names)
	preset := fs.String("preset", "tiny", "the shape to start from: "+strings.Join(names, ", "))
	out := fs.String("out", "", "the folder to write, or the file with -gguf: made, with the folders above it, if need be (required)")
	ggufType := fs.String("gguf", "", "write one GGUF file (llama.cpp's format) with the matrices in this type: f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, ...")
	dtype := fs.String("dtype", "", "f32, f16 or bf16 (default: the preset's)")
	family := fs.String("family", "", "llama, mistral or qwen2 (default: the preset's)")
	seed := fs.Uint64("seed", 0, "the random seed (default: the preset's)")
	hidden := fs.Int("hidden", 0, "hidden size")
	inter := fs.Int("intermediate", 0, "MLP intermediate size")
	layers := fs.Int("layers", 0, "layers")
	heads := fs.Int("heads", 0, "attention heads")
	kvHeads := fs.Int("kv-heads", 0, "KV heads (fewer than heads: GQA)")
	headDim := fs.Int("head-dim", 0, "head dim (default hidden / heads)")
	vocab := fs.Int("vocab", 0, "vocabulary size (default: the preset's, or the tokenizer's size)")
	ctx := fs.Int("context", 0, "max_position_embeddings")
	window := fs.Int("sliding-window", 0, "sliding window (mistral, qwen2)")
	untied := fs.Bool("untied", false, "a separate lm_head instead of the embedding table")
	sdPreset := fs.String("sd", "", "write a Stable Diffusion 1.x folder (diffusers' layout) instead: tiny (fast on the CPU) or sd-1.5 (its shape, F16)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rocm-go-mkmodel -out DIR|FILE.gguf [-gguf TYPE] [-preset tiny|llama-3.2-1b] [-dtype f32|f16|bf16] [shape flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return mkmodel.Spec{}, options{}, err
	}
	if fs.NArg() > 0 {
		return mkmodel.Spec{}, options{}, fmt.Errorf("unexpected arguments %q (flags come first)", fs.Args())
	}
	if *out == "" {
		fs.Usage()
		return mkmodel.Spec{}, options{}, fmt.Errorf("-out is required: %w", flag.ErrHelp)
	}
	mk, ok := mkmodel.Presets[*preset]
	if !ok {
		return mkmodel.Spec{}, options{}, fmt.Errorf("-preset %q: want one of %s", *preset, strings.Join(names, ", "))
	}
	s := mk()
	if *dtype != "" {
		dt, err := candle.ParseDType(*dtype)
		if err != nil || (dt != candle.F32 && dt != candle.F16 && dt != candle.BF16) {
			return s, options{}, fmt.Errorf("-dtype %q: want f32, f16 or bf16", *dtype)
		}
		s.DType = dt
	}
	if *family != "" {
		s.Family = *family
	}
	if *seed != 0 {
		s.Seed = *seed
	}
	for _, f := range []struct {
		name string
		v    int
		dst  *int
	}{{"hidden", *hidden, &s.Hidden}, {"intermediate", *inter, &s.Intermediate}, {"layers", *layers, &s.Layers},
		{"heads", *heads, &s.Heads}, {"kv-heads", *kvHeads, &s.KVHeads}, {"head-dim", *headDim, &s.HeadDim},
		{"vocab", *vocab, &s.Vocab}, {"context", *ctx, &s.MaxPositions}, {"sliding-window", *window, &s.SlidingWindow}} {
		if f.v < 0 {
			return s, options{}, fmt.Errorf("-%s %d: want a positive number", f.name, f.v)
		}
		if f.v > 0 {
			*f.dst = f.v
		}
	}
	if *heads > 0 && *kvHeads == 0 && s.Heads%s.KVHeads != 0 {
		s.KVHeads = s.Heads
	}
	if *untied {
		s.TieEmbeddings = false
	}
	o := options{out: *out, sd: *sdPreset}
	if o.sd != "" && o.sd != "tiny" && o.sd != "sd-1.5" {
		return s, o, fmt.Errorf("-sd %q: want tiny or sd-1.5", o.sd)
	}
	if *ggufType != "" {
		typ, err := candle.ParseGGMLType(*ggufType)
		if err != nil {
			return s, o, fmt.Errorf("-gguf: %w", err)
		}
		o.gguf, o.set = typ, true
	}
	return s, o, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	s, o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	out := o.out
	if o.sd != "" {
		return writeSD(out, o.sd, stdout)
	}
	size, err := s.Bytes()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rocm-go-mkmodel: a %s model, hidden %d, %d layers, %d heads (%d KV), %s, %s of weights, into %s\n",
		s.Family, s.Hidden, s.Layers, s.Heads, s.KVHeads, s.DType, humanize.IBytes(uint64(size)), out)
	start := time.Now()
	last := time.Time{}
	write := func(progress func(mkmodel.Progress)) error { return mkmodel.Write(out, s, progress) }
	if o.set {
		fmt.Fprintf(stdout, "  as one GGUF file, matrices in %s\n", o.gguf)
		write = func(progress func(mkmodel.Progress)) error { return mkmodel.WriteGGUF(out, s, o.gguf, progress) }
	}
	err = write(func(p mkmodel.Progress) {
		switch p.Stage {
		case "weights":
			if time.Since(last) < 500*time.Millisecond && p.Done < p.Total {
				return
			}
			last = time.Now()
			fmt.Fprintf(stdout, "  weights: %s of %s (%.0f%%)\n", humanize.IBytes(uint64(p.Done)), humanize.IBytes(uint64(p.Total)), 100*float64(p.Done)/float64(max(p.Total, 1)))
		case "save":
			if p.Done == 0 {
				fmt.Fprintf(stdout, "  writing model.safetensors (%s)\n", humanize.IBytes(uint64(p.Total)))
			}
		case "tokenizer":
			fmt.Fprintln(stdout, "  writing the tokenizer")
		}
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rocm-go-mkmodel: wrote %s in %v\n", out, time.Since(start).Round(time.Millisecond))
	return nil
}

// writeSD writes a Stable Diffusion folder of the preset.
func writeSD(out, preset string, stdout io.Writer) error {
	spec := mkmodel.TinySD()
	if preset == "sd-1.5" {
		spec = mkmodel.SD15()
	}
	fmt.Fprintf(stdout, "rocm-go-mkmodel: a Stable Diffusion 1.x folder (%s), UNet channels %v, %s, into %s\n", preset, spec.UNetChannels, spec.DType, out)
	start := time.Now()
	last := time.Time{}
	err := mkmodel.WriteSD(out, spec, func(p mkmodel.Progress) {
		if p.Stage != "weights" || time.Since(last) < 500*time.Millisecond && p.Done < p.Total {
			return
		}
		last = time.Now()
		fmt.Fprintf(stdout, "  weights: %s of %s (%.0f%%)\n", humanize.IBytes(uint64(p.Done)), humanize.IBytes(uint64(p.Total)), 100*float64(p.Done)/float64(max(p.Total, 1)))
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rocm-go-mkmodel: wrote %s in %v\n", out, time.Since(start).Round(time.Millisecond))
	return nil
}
