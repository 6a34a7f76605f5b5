// Package models is what the architectures under it share: Open finds
// what a model path holds (a Hugging Face folder, a GGUF file, one
// safetensors file, a diffusers pipeline), opens it once and returns a
// Checkpoint: the config, the tokenizer and the weights (candle.Weights),
// with one Close. An architecture (candle/models/llama) builds its model
// from a Checkpoint; a worker opens the path only through Open.
//
// Runner runs an architecture's forward pass (a PassFunc) over a paged KV
// cache: it sizes the cache, checks each batch, stages the inputs, commits
// a step once its pass succeeds and replays decode steps as captured
// graphs on a HIP device. Pass threads a forward pass's first error
// through its ops. An architecture file holds only the architecture.
// TPRunner runs a model split over a device group: a Runner per device,
// one goroutine each.
//
//	c, err := models.Open("/models/Llama-3.2-1B-Instruct-Q4_K_M.gguf")
//	defer c.Close()
//	tok, err := c.Tokenizer()
//	m, err := llama.New(c, dev, candle.BF16, llama.Options{})
package models

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/gguf"
	"github.com/rocm-go/rocm/candle/nn"
	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/tokenizer"
)

// pkg makes this package's errors.
const pkg errs.Package = "models"

// Format is the kind of checkpoint a path holds.
type Format int

// The formats Detect tells apart.
const (
	// HuggingFace is a transformers model folder: config.json, the
	// weights in safetensors files (model.safetensors, a sharded model's
	// index, or *.safetensors) and, for a language model, tokenizer.json.
	HuggingFace Format = iota + 1
	// GGUF is one llama.cpp file: the config and the tokenizer in its
	// metadata, the weights quantized or not.
	GGUF
	// Safetensors is one .safetensors file on its own, no config beside
	// it: the single-file checkpoints of Stable Diffusion (the original
	// LDM key names that AUTOMATIC1111 and ComfyUI users hold), whose
	// config an architecture reads from the tensors' names and shapes.
	Safetensors
	// Diffusers is a diffusers pipeline folder: model_index.json and a
	// folder for each component (unet, vae, text_encoder, tokenizer,
	// scheduler).
	Diffusers
)

// String says what the format is, in words: "a GGUF file".
func (f Format) String() string {
	switch f {
	case HuggingFace:
		return "a Hugging Face model folder"
	case GGUF:
		return "a GGUF file"
	case Safetensors:
		return "a single safetensors file"
	case Diffusers:
		return "a diffusers pipeline folder"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Checkpoint is a model path opened once: the config, the tokenizer and
// the weights. Close it when the model is loaded; the tensors loaded
// from it stay valid.
type Checkpoint struct {
	// Path is the path Open was given.
	Path string
	// Format is what the path holds.
	Format Format
	// Architecture is the model's kind as its files name it: config.json's
	// model_type (or, without one, architectures[0]) in a Hugging Face
	// folder, general.architecture in a GGUF file; "" where the files do
	// not say (a single safetensors file).
	Architecture string
	// Config is config.json's bytes, for the architecture to read (a
	// Hugging Face folder); nil otherwise.
	Config []byte
	// GGUF is the file of a GGUF checkpoint, whose metadata is the config;
	// nil otherwise. It is also the Weights.
	GGUF *gguf.File
	// Weights are the checkpoint's tensors: safetensors files or the GGUF
	// file, mapped, loading through candle's pipelined pinned upload.
	Weights candle.Weights

	tokOnce sync.Once
	tok     *tokenizer.Tokenizer
	tokErr  error
}

// Open opens the model at path once: a folder with config.json (a Hugging
// Face model), a GGUF file, or one safetensors file. A diffusers pipeline
// folder is recognised and refused with errs.ErrUnsupported. opts say how
// the weights move to a HIP device (candle.WithTransfer). Files are told
// apart by their first bytes, not their names.
func Open(path string, opts ...candle.LoadOption) (*Checkpoint, error) {
	const op = "Open"
	st, err := os.Stat(path)
	if err != nil {
		return nil, notFound(op, path, err)
	}
	if st.IsDir() {
		return openDir(path, opts)
	}
	m, err := candle.MapFile(path, opts...)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	c := &Checkpoint{Path: path}
	switch c.Format, err = formatOf(m.Bytes(), path); c.Format {
	case GGUF:
		if c.GGUF, err = gguf.OpenMapped(m); err == nil {
			c.Weights, c.Architecture = c.GGUF, c.GGUF.Architecture()
		}
	case Safetensors:
		c.Weights, err = safetensors.OpenMapped(m)
	}
	if err != nil {
		m.Close()
		return nil, pkg.Wrap(op, err)
	}
	return c, nil
}

// openDir opens a model folder.
func openDir(dir string, opts []candle.LoadOption) (*Checkpoint, error) {
	const op = "Open"
	f, err := Detect(dir)
	if err != nil {
		return nil, err
	}
	if f == Diffusers {
		return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrUnsupported, Path: dir,
			Detail: "a diffusers pipeline (model_index.json): this package opens language models (a Hugging Face folder with config.json, or a GGUF file) and single safetensors files; candle/models/sd.Open opens a Stable Diffusion pipeline"}
	}
	cfgPath := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	var head struct {
		ModelType     string   `json:"model_type"`
		Architectures []string `json:"architectures"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: cfgPath, Detail: fmt.Sprintf("not a JSON object: %v", err)}
	}
	c := &Checkpoint{Path: dir, Format: HuggingFace, Config: b, Architecture: head.ModelType}
	if c.Architecture == "" && len(head.Architectures) > 0 {
		c.Architecture = head.Architectures[0]
	}
	w, err := safetensors.Open(dir, opts...)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	c.Weights = w
	return c, nil
}

// Detect says what path holds without opening its weights: a folder by
// the files in it (model_index.json: Diffusers; config.json:
// HuggingFace), a file by its first bytes (GGUF's magic, or a safetensors
// header). Anything else is an error that says what Open takes.
func Detect(path string) (Format, error) {
	const op = "Detect"
	st, err := os.Stat(path)
	if err != nil {
		return 0, notFound(op, path, err)
	}
	if st.IsDir() {
		for _, f := range []struct {
			name   string
			format Format
		}{{"model_index.json", Diffusers}, {"config.json", HuggingFace}} {
			if _, err := os.Stat(filepath.Join(path, f.name)); err == nil {
				return f.format, nil
			}
		}
		return 0, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrNotFound, Path: path,
			Detail: "the folder holds neither config.json (a Hugging Face model) nor model_index.json (a diffusers pipeline)"}
	}
	fd, err := os.Open(path)
	if err != nil {
		return 0, pkg.Wrap(op, err)
	}
	defer fd.Close()
	head := make([]byte, 9)
	n, err := io.ReadFull(fd, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return 0, pkg.Wrap(op, err)
	}
	return formatOf(head[:n], path)
}

// formatOf tells a file's format from its first bytes: GGUF's magic, or
// a safetensors header (a little-endian length, then a JSON object).
func formatOf(b []byte, path string) (Format, error) {
	switch {
	case len(b) >= 4 && string(b[:4]) == "GGUF":
		return GGUF, nil
	case len(b) >= 9 && b[8] == '{' && binary.LittleEndian.Uint64(b) < uint64(1)<<40:
		return Safetensors, nil
	}
	return 0, &errs.Error{Pkg: string(pkg), Op: "Open", Kind: errs.ErrFormat, Path: path,
		Detail: "neither a GGUF file nor a safetensors file: give a .gguf file, a .safetensors file or a model folder (config.json and its weights)"}
}

// notFound is the error of a path that is not there (errs.ErrNotFound),
// or of one that cannot be read.
func notFound(op, path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrNotFound, Path: path, Detail: "no such file or folder", Err: err}
	}
	return pkg.Wrap(op, err)
}

// Tokenizer is the model's tokenizer, read on the first call (a program
// can read it while the weights load): tokenizer.json and
// tokenizer_config.json in a Hugging Face folder, the vocabulary in a
// GGUF file's metadata. It is nil, with no error, for a checkpoint that
// holds none (a folder without tokenizer.json, a GGUF file without
// tokenizer.ggml.model, a single safetensors file).
func (c *Checkpoint) Tokenizer() (*tokenizer.Tokenizer, error) {
	c.tokOnce.Do(func() {
		switch c.Format {
		case HuggingFace:
			if _, err := os.Stat(filepath.Join(c.Path, "tokenizer.json")); err != nil {
				return
			}
			c.tok, c.tokErr = tokenizer.LoadDir(c.Path)
		case GGUF:
			if _, ok := c.GGUF.Get("tokenizer.ggml.model"); !ok {
				return
			}
			c.tok, c.tokErr = ggufTokenizer(c.GGUF)
		}
		c.tokErr = pkg.Wrap("Checkpoint.Tokenizer", c.tokErr)
	})
	return c.tok, c.tokErr
}

// Close unmaps the weights; the tensors loaded from them stay valid.
// Closing twice does nothing.
func (c *Checkpoint) Close() error {
	if c.Weights == nil {
		return nil
	}
	return pkg.Wrap("Checkpoint.Close", c.Weights.Close())
}

// VarBuilder checks a model constructor's arguments and makes the
// VarBuilder it loads its weights with: weights and a device given, and a
// float dtype a model computes in (F32, F16 or BF16).
func VarBuilder(w candle.Weights, dev candle.Device, dtype candle.DType) (*nn.VarBuilder, error) {
	const op = "VarBuilder"
	if dev == nil {
		return nil, pkg.Errorf(op, errs.ErrDevice, "nil device")
	}
	if w == nil {
		return nil, pkg.Errorf(op, errs.ErrArgument, "no weights")
	}
	if dtype != candle.F32 && dtype != candle.F16 && dtype != candle.BF16 {
		return nil, pkg.Errorf(op, errs.ErrDType, "%s: models compute in f32, f16 or bf16", dtype)
	}
	vb, err := nn.NewVarBuilder(w, dev, dtype)
	return vb, pkg.Wrap(op, err)
}
