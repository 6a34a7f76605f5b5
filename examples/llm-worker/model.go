package main

import (
	"context"
	"errors"
)

// The worker's HTTP layer sees the model only through Backend. Its types
// mirror the contract of the LLM packages (tokenizer, candle/models/llama,
// candle/models/generate) field for field, so that backend.go, the adapter
// to the real packages, is a plain mapping.

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
	// ApplyChatTemplate renders a conversation with the model's chat
	// template, ending with the assistant's header when
	// addGenerationPrompt is set. The text already holds the special
	// tokens the template writes (BOS included): encode it without adding
	// them again.
	ApplyChatTemplate(msgs []ChatMessage, addGenerationPrompt bool) (string, error)
	// Generate queues a request and returns its events. The channel ends
	// with one event whose Done is set, and is then closed. When ctx is
	// cancelled the generation stops soon, releases its KV cache and ends
	// with FinishReason "cancelled". A full queue is an error that wraps
	// ErrQueueFull; a backend that no longer takes work returns an error
	// that wraps ErrUnavailable.
	Generate(ctx context.Context, r GenRequest) (<-chan GenEvent, error)
	// Info describes the loaded model for logs, /health and heartbeats.
	Info() BackendInfo
	// Close stops the engine and frees the model.
	Close() error
}

// ChatMessage is one turn of a conversation (tokenizer.Message).
type ChatMessage struct{ Role, Content string }

// Sampling mirrors generate.Sampling: zero values mean off, and a zero
// Seed a random one.
type Sampling struct {
	Temperature       float32 // 0: greedy
	TopK              int
	TopP              float32
	MinP              float32
	RepetitionPenalty float32
	Seed              uint64
}

// GenRequest mirrors generate.Request.
type GenRequest struct {
	Prompt      []int32
	MaxTokens   int
	Sampling    Sampling
	StopTokens  []int32
	StopStrings []string
}

// GenEvent mirrors generate.Event: the text and token ids that became
// complete, and on the last event Done with the finish reason ("stop",
// "length", "cancelled", "error") and the token counts.
type GenEvent struct {
	Text                           string
	Tokens                         []int32
	Done                           bool
	FinishReason                   string
	PromptTokens, CompletionTokens int
	Err                            error
}

// BackendInfo describes a loaded model.
type BackendInfo struct {
	Device       string // as candle names it: "cpu", "hip:0"
	DType        string // the weights' dtype: "bf16", "f16", "f32"
	CacheTokens  int    // KV cache capacity in tokens (free at start)
	DeviceMemory int64  // bytes of device memory in use after loading
}

// LoadOptions is what the flags ask of the model loader.
type LoadOptions struct {
	Dir      string // the Hugging Face model folder
	Device   string // "auto", "cpu" or "hip:N"
	DType    string // "auto", "f32", "f16" or "bf16"
	MaxBatch int    // sequences per decode step; 0: the engine chooses
	MaxQueue int    // requests waiting for a slot; 0: the engine chooses
	// Progress is called as weights load with the bytes done so far and
	// the total; it is safe to call from several goroutines.
	Progress func(done, total int64)
}

// OpenFunc loads a model and starts its engine.
type OpenFunc func(o LoadOptions) (Backend, error)

var (
	// ErrQueueFull is what Generate's error wraps when the engine's queue
	// is full (generate.ErrQueueFull): the client gets 429 and Retry-After.
	ErrQueueFull = errors.New("the request queue is full")
	// ErrUnavailable is what Generate's error wraps when the engine is
	// closed or closing: the client gets 503.
	ErrUnavailable = errors.New("the model is not serving")
	// ErrBadRequest is what Generate's error wraps when the engine refuses
	// the request itself (candle.ErrArgument): the client gets 400.
	ErrBadRequest = errors.New("the engine refused the request")
)
