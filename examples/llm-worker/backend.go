package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/candle/models/generate/grammar"
	"github.com/rocm-go/rocm/candle/models/llama"
	"github.com/rocm-go/rocm/tokenizer"
)

// modelBackend adapts the tokenizer, a llama.Model and its generate.Engine
// to Backend.
type modelBackend struct {
	tok    *tokenizer.Tokenizer
	model  *llama.Model
	engine *generate.Engine
	dev    candle.Device
	info   BackendInfo

	// vocab is the tokenizer's token trie for constrained decoding, built
	// on first use.
	vocab func() (*grammar.Vocab, error)
}

// openBackend loads the model folder o.Dir on o.Device and starts its
// generation engine.
func openBackend(o LoadOptions) (Backend, error) {
	dev, err := candle.NewDevice(o.Device)
	if err != nil {
		return nil, err
	}
	tok, m, dt, weights, err := loadModel(o, dev)
	if err != nil {
		return nil, err
	}
	eng, err := generate.NewEngine(m, generate.Config{MaxBatch: o.MaxBatch, MaxQueue: o.MaxQueue, SpeculativeTokens: o.SpeculativeTokens,
		Decoder: func() generate.StreamDecoder { return tok.NewStreamDecoder(true) }})
	if err != nil {
		m.Close()
		return nil, err
	}
	b := &modelBackend{tok: tok, model: m, engine: eng, dev: dev, vocab: sync.OnceValues(func() (*grammar.Vocab, error) { return grammar.FromTokenizer(tok) }), info: BackendInfo{
		Device: deviceName(dev), DType: dt.String(), Weights: weights, CacheTokens: m.CacheTokensFree(), DeviceMemory: dev.MemoryStats().InUse}}
	return b, nil
}

// loadModel opens the model path once (a Hugging Face folder or a GGUF
// file, through candle/models) and loads its tokenizer and its model.
func loadModel(o LoadOptions, dev candle.Device) (*tokenizer.Tokenizer, *llama.Model, candle.DType, string, error) {
	// Loading's pinned buffers are allocated while the tokenizer loads,
	// so that the weights do not wait for them (ReservePinnedBuffers).
	// Without them the load allocates its own, more slowly.
	reserved := make(chan struct{})
	go func() {
		defer close(reserved)
		if hd, ok := dev.(*candle.HIPDevice); ok {
			candle.ReservePinnedBuffers(hd, candle.Transfer{}) // on failure the load allocates its own
		}
	}()
	defer func() { <-reserved }() // an early return waits for it too
	c, err := models.Open(o.Dir)
	if err != nil {
		return nil, nil, 0, "", err
	}
	defer c.Close() // the weights are on the device once New returns
	cfg, err := llama.ConfigOf(c)
	if err != nil {
		return nil, nil, 0, "", err
	}
	tok, err := c.Tokenizer()
	if err != nil {
		return nil, nil, 0, "", err
	}
	if tok == nil {
		return nil, nil, 0, "", fmt.Errorf("%s holds no tokenizer (tokenizer.json, or a GGUF file's vocabulary): the worker needs one", o.Dir)
	}
	dt, err := chooseDType(o.DType, dev, cfg)
	if err != nil {
		return nil, nil, 0, "", err
	}
	<-reserved
	m, err := llama.New(c, dev, dt, llama.Options{MaxBatch: o.MaxBatch, Progress: o.Progress,
		MaxModelLen: o.MaxModelLen, CacheBytes: o.CacheBytes, MemoryFraction: o.MemoryFraction, NoPrefixCaching: o.NoPrefixCaching})
	return tok, m, dt, weightTypes(c.Weights), err
}

// weightTypes names the types of a checkpoint's matrices as its files
// hold them, the most elements first ("Q4_K, Q6_K", "BF16"): a quantized
// model runs in f32, f16 or bf16, and that alone would hide its weights'.
func weightTypes(w candle.Weights) string {
	elems := map[string]int64{}
	for _, name := range w.Names() {
		if info, ok := w.Info(name); ok && len(info.Shape) == 2 {
			elems[info.Type] += int64(info.Shape.Elems())
		}
	}
	types := slices.Collect(maps.Keys(elems))
	slices.SortFunc(types, func(a, b string) int { return cmp.Or(cmp.Compare(elems[b], elems[a]), strings.Compare(a, b)) })
	return strings.Join(types, ", ")
}

// chooseDType resolves -dtype: "auto" is the checkpoint's own dtype on a
// GPU and f32 on the CPU (whose half-precision math is slow).
func chooseDType(name string, dev candle.Device, cfg *llama.Config) (candle.DType, error) {
	if name != "" && name != "auto" {
		dt, err := candle.ParseDType(name)
		if err != nil {
			return 0, err
		}
		if dt != candle.F32 && dt != candle.F16 && dt != candle.BF16 {
			return 0, fmt.Errorf("-dtype %s: the model runs in f32, f16 or bf16", name)
		}
		return dt, nil
	}
	if _, ok := dev.(*candle.HIPDevice); !ok {
		return candle.F32, nil
	}
	switch cfg.DType {
	case candle.F16, candle.BF16:
		return cfg.DType, nil
	}
	return candle.BF16, nil
}

func deviceName(dev candle.Device) string {
	if d, ok := dev.(*candle.HIPDevice); ok {
		return fmt.Sprintf("hip:%d", d.Ordinal())
	}
	return "cpu"
}

func (b *modelBackend) ContextLength() int { return b.model.ContextLength() }
func (b *modelBackend) VocabSize() int     { return b.model.VocabSize() }
func (b *modelBackend) EOS() []int32       { return b.tok.EOS() }
func (b *modelBackend) Info() BackendInfo  { return b.info }

// Stats reads the KV cache's free pages (under the runner's lock: a
// forward pass under way finishes first) against its size at load, when
// every page was free, and the device's memory counters.
func (b *modelBackend) Stats() BackendStats {
	var st BackendStats
	if total := b.info.CacheTokens; total > 0 {
		st.KVCacheUsage = min(max(1-float64(b.model.CacheTokensFree())/float64(total), 0), 1)
	}
	m := b.dev.MemoryStats()
	st.DeviceMemoryInUse, st.DeviceMemoryCached = m.InUse, m.Cached
	return st
}

func (b *modelBackend) Encode(text string, addSpecial bool) ([]int32, error) {
	return b.tok.Encode(text, addSpecial)
}

func (b *modelBackend) Decode(ids []int32, skipSpecial bool) string {
	return b.tok.Decode(ids, skipSpecial)
}

func (b *modelBackend) TokenBytes(id int32) []byte { return b.tok.TokenBytes(id) }

func (b *modelBackend) ApplyChatTemplate(msgs []tokenizer.Message, addGenerationPrompt bool) (string, error) {
	return b.tok.ApplyChatTemplate(msgs, addGenerationPrompt)
}

func (b *modelBackend) ChatTemplate() (*tokenizer.ChatTemplate, error) {
	return b.tok.ChatTemplate()
}

func (b *modelBackend) Generate(ctx context.Context, r generate.Request) (<-chan generate.Event, error) {
	return b.engine.Submit(ctx, r)
}

// Constrain matches g against the tokenizer's vocabulary, whose token
// trie is built on the first call.
func (b *modelBackend) Constrain(g *grammar.Grammar, stop []int32) (generate.Constraint, error) {
	v, err := b.vocab()
	if err != nil {
		return nil, err
	}
	return grammar.NewMatcher(g, v, stop)
}

// Close stops the engine (every open request gets its final event), then
// frees the model.
func (b *modelBackend) Close() error {
	return errors.Join(b.engine.Close(), b.model.Close())
}
