package main

import (
	"context"

	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/candle/models/generate/grammar"
	"github.com/rocm-go/rocm/tokenizer"
)

// The worker's HTTP layer sees the model only through Backend, which
// speaks the LLM packages' own types (tokenizer.Message, generate.Request,
// generate.Event) and errors, so that backend.go, the adapter to the real
// packages, holds no mapping.

// Backend is a loaded model with its tokenizer and generation engine.
// Every method is safe for concurrent use.
type Backend interface {
	// ContextLength is the most tokens a sequence may hold: prompt and
	// completion together.
	ContextLength() int
	// VocabSize bounds the token ids a prompt may carry.
	VocabSize() int
	// EOS is every end-of-sequence id; the worker stops on each of them.
	EOS() []int32
	// Encode tokenizes text, adding the BOS token when addSpecial is set.
	Encode(text string, addSpecial bool) ([]int32, error)
	// Decode is the text of token ids (special tokens left out when
	// skipSpecial is set; ids that are no token left out).
	Decode(ids []int32, skipSpecial bool) string
	// TokenBytes are the bytes of one token decoded on its own, for
	// log-probabilities: part of a character only, for some tokens.
	TokenBytes(id int32) []byte
	// ApplyChatTemplate renders a conversation with the model's chat
	// template, ending with the assistant's header when
	// addGenerationPrompt is set. The text already holds the special
	// tokens the template writes (BOS included): encode it without adding
	// them again.
	ApplyChatTemplate(msgs []tokenizer.Message, addGenerationPrompt bool) (string, error)
	// ChatTemplate is the model's chat template, for requests with tools:
	// it renders them, and its source says how the model writes its
	// calls. The error says why there is none.
	ChatTemplate() (*tokenizer.ChatTemplate, error)
	// Generate queues a request and returns its events, as
	// generate.Engine.Submit does: the channel ends with one event whose
	// Done is set, and is then closed; when ctx is cancelled the
	// generation stops soon, releases its KV cache and ends with
	// FinishReason "cancelled". Its errors are the engine's:
	// generate.Check's (errs.ErrArgument, generate.ErrContextLength: the
	// client gets 400), generate.ErrQueueFull (429 and Retry-After) and
	// errs.ErrClosed (503: the engine no longer takes work).
	Generate(ctx context.Context, r generate.Request) (<-chan generate.Event, error)
	// Constrain makes a request's constraint to grammar g over the
	// tokenizer's vocabulary (its token trie built on first use), allowing
	// the stop tokens once the output is complete.
	Constrain(g *grammar.Grammar, stop []int32) (generate.Constraint, error)
	// Info describes the loaded model for logs, /health and heartbeats.
	Info() BackendInfo
	// Stats is the model's use of the device now, for /metrics. It may
	// wait for the engine's step under way (the KV cache is the
	// engine's while it steps).
	Stats() BackendStats
	// Close stops the engine and frees the model.
	Close() error
}

// BackendInfo describes a loaded model.
type BackendInfo struct {
	Device       string // as candle names it: "cpu", "hip:0"; the devices of a split model, "hip:0,hip:1"
	Devices      int    // how many devices the model is split over (tensor parallelism), 1 for one
	DType        string // the weights' dtype: "bf16", "f16", "f32"
	Weights      string // the matrices' types in the files, most bytes first: "BF16", "Q4_K, Q6_K"
	CacheTokens  int    // KV cache capacity in tokens (free at start)
	DeviceMemory int64  // bytes the device's tensors hold after loading (host memory on the CPU device)
}

// BackendStats is a loaded model's use of its device at one moment.
type BackendStats struct {
	KVCacheUsage       float64 // the fraction of the KV cache's tokens that sequences hold, 0 to 1
	DeviceMemoryInUse  int64   // bytes the device's tensors hold (weights, KV cache, activations)
	DeviceMemoryCached int64   // bytes the device's memory pool keeps for reuse
}

// LoadOptions is what the flags ask of the model loader.
type LoadOptions struct {
	Dir    string // the Hugging Face model folder
	Device string // "auto", "cpu" or "hip:N"
	// TensorParallel is how many devices the model is split over: the
	// GPUs from Device's ordinal on, or as many CPU ranks; 0 and 1: one.
	TensorParallel int
	DType          string // "auto", "f32", "f16" or "bf16"
	MaxBatch       int    // sequences per decode step; 0: the engine chooses
	MaxQueue       int    // requests waiting for a slot; 0: the engine chooses
	// MaxModelLen caps a sequence's tokens (0: the model's context);
	// CacheBytes sizes the KV cache (0: chosen); MemoryFraction is the
	// share of a GPU's memory the worker may hold, weights and cache
	// together (0: the cache takes 80% of what the weights left free).
	MaxModelLen    int
	CacheBytes     int64
	MemoryFraction float64
	// NoPrefixCaching turns off the KV cache's automatic prefix caching
	// (-prefix-caching=false): every prompt is prefilled whole.
	NoPrefixCaching bool
	// SpeculativeTokens turns on prompt-lookup speculative decoding of
	// greedy requests, up to this many drafted tokens a step
	// (-speculative-tokens; generate.Config.SpeculativeTokens); 0 is off.
	SpeculativeTokens int
	// Progress is called as weights load with the bytes done so far and
	// the total; it is safe to call from several goroutines.
	Progress func(done, total int64)
}

// OpenFunc loads a model and starts its engine.
type OpenFunc func(o LoadOptions) (Backend, error)
