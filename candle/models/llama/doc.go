// Package llama is the Llama family of decoder-only language models on
// package candle: Llama 2 and 3.x (with Llama 3.1's "llama3" RoPE
// scaling), Mistral (sliding-window attention) and Qwen2/2.5 (QKV biases,
// tied embeddings), from a Hugging Face model folder (config.json and
// safetensors weights, single or sharded) or a GGUF file (quantized
// matrices kept quantized), opened once by candle/models, in F32, F16 or
// BF16, on a HIP device or the CPU.
//
// A Model serves many sequences at once from one paged KV cache
// (nn.PagedKVCache): Forward takes a batch that mixes prompts and decode
// steps, appends each sequence's new tokens to its cache and returns the
// logits of each sequence's last token; Release frees a finished
// sequence's pages. These come from the models.Runner a Model embeds,
// which also replays each decode step as a captured graph on a HIP device;
// this package is the architecture: its config, its weights and its
// forward pass.
//
//	c, err := models.Open(path) // a folder or a .gguf file
//	cfg, err := llama.ConfigOf(c)
//	m, err := llama.New(c, dev, cfg.DType, llama.Options{})
//	c.Close()
//	defer m.Close()
//	logits, err := m.Forward([]uint64{1, 2}, [][]int32{prompt, {next}})
//	defer logits.Close() // F32 (2, vocab)
//	...
//	m.Release(1)
//
// A TPModel (NewTP, LoadTP) is the same model split over the devices of
// a candle.Group, one goroutine per device (Megatron-style tensor
// parallelism): each device loads only its heads, its KV heads (replicated
// when fewer than the devices), its rows of the MLP and of the
// vocabulary, and holds a KV cache of its heads; Forward returns the first
// device's logits. On GPUs the group is candle.NewHIPGroup's (RCCL, NCCL
// on NVIDIA); candle.NewCPUGroup's runs the same code on the CPU.
//
//	g, err := candle.NewHIPGroup(gpu0, gpu1)
//	m, err := llama.NewTP(c, g, candle.BF16, llama.Options{})
//
// On a HIP device attention is package flashattn's: one variable-length
// call for the sequences whose prompts start in the batch, one paged
// decode call for all the sequences that add one token, split across the
// device. On the CPU device each sequence's pages are gathered and
// attended in float64: the reference the GPU is tested against, and a
// path that runs anywhere.
//
// Errors are *errs.Error (candle.Error) with errs' kinds, matched through
// candle's names (candle.ErrArgument, candle.ErrOutOfMemory, ...), and
// nn.ErrCacheFull for a Forward whose new tokens need more KV-cache pages
// than are free.
package llama

import "github.com/rocm-go/rocm/errs"

// pkg makes this package's errors.
const pkg errs.Package = "llama"
