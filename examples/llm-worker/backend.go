package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/candle/models/generate/grammar"
	"github.com/rocm-go/rocm/candle/models/llama"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/tokenizer"
)

// modelBackend adapts the tokenizer, a llama.Model (or a llama.TPModel
// over several devices) and its generate.Engine to Backend.
type modelBackend struct {
	tok     *tokenizer.Tokenizer
	model   servedModel
	watched *watchedModel // model, as the engine runs it
	engine  *generate.Engine
	devs    []candle.Device // the model's, one per rank
	group   *candle.Group   // of a split model, closed after it; nil on one device
	info    BackendInfo

	// vocab is the tokenizer's token trie for constrained decoding, built
	// on first use.
	vocab func() (*grammar.Vocab, error)
}

// servedModel is what the worker serves: a model on one device or split
// over several.
type servedModel interface {
	generate.PrefixModel
	generate.SpeculativeModel
	Close() error
}

// openBackend loads the model folder o.Dir on o.Device (and the devices
// after it, o.TensorParallel of them) and starts its generation engine.
func openBackend(o LoadOptions) (Backend, error) {
	dev, err := candle.NewDevice(o.Device)
	if err != nil {
		return nil, err
	}
	devs, group, err := openDevices(dev, o.TensorParallel)
	if err != nil {
		return nil, err
	}
	tok, m, dt, weights, err := loadModel(o, dev, group)
	if err != nil {
		group.Close()
		return nil, err
	}
	watched := &watchedModel{servedModel: m}
	eng, err := generate.NewEngine(watched, generate.Config{MaxBatch: o.MaxBatch, MaxQueue: o.MaxQueue, SpeculativeTokens: o.SpeculativeTokens,
		Decoder: func() generate.StreamDecoder { return tok.NewStreamDecoder(true) }})
	if err != nil {
		m.Close()
		group.Close()
		return nil, err
	}
	b := &modelBackend{tok: tok, model: m, watched: watched, engine: eng, devs: devs, group: group,
		vocab: sync.OnceValues(func() (*grammar.Vocab, error) { return grammar.FromTokenizer(tok) })}
	names := make([]string, len(devs))
	for i, d := range devs {
		names[i] = deviceName(d)
	}
	b.info = BackendInfo{Device: strings.Join(names, ","), Devices: len(devs), DType: dt.String(), Weights: weights,
		CacheTokens: m.CacheTokensFree(), DeviceMemory: b.memory().InUse}
	return b, nil
}

// watchedModel is the model as the engine runs it: a Forward that fails
// because the model broke (a rank of a split model failed: its Err is
// set) is reported once to the function OnBroken gave, so that the worker
// reports itself failed rather than keep taking requests it cannot serve.
type watchedModel struct {
	servedModel
	broken atomic.Pointer[func(error)]
	once   sync.Once
}

func (w *watchedModel) Forward(seqs []uint64, tokens [][]int32) (*candle.Tensor, error) {
	return w.watch(w.servedModel.Forward(seqs, tokens))
}

func (w *watchedModel) ForwardAll(seqs []uint64, tokens [][]int32) (*candle.Tensor, error) {
	return w.watch(w.servedModel.ForwardAll(seqs, tokens))
}

// watch passes a pass's result on, and reports a broken model once.
func (w *watchedModel) watch(x *candle.Tensor, err error) (*candle.Tensor, error) {
	if err == nil {
		return x, nil
	}
	if b, ok := w.servedModel.(interface{ Err() error }); ok {
		if cause := b.Err(); cause != nil {
			w.once.Do(func() {
				if f := w.broken.Load(); f != nil {
					(*f)(cause)
				}
			})
		}
	}
	return x, err
}

// OnBroken sets what hears, once, that the model broke (a device of a
// split model failed): from then on every generation fails.
func (b *modelBackend) OnBroken(f func(error)) { b.watched.broken.Store(&f) }

// openDevices is the devices of a model split over n (n ≤ 1: dev alone,
// no group): n CPU ranks when dev is the CPU, else the GPUs from dev's
// ordinal on, each able to reach every other's memory (peer access).
func openDevices(dev candle.Device, n int) ([]candle.Device, *candle.Group, error) {
	if n <= 1 {
		return []candle.Device{dev}, nil, nil
	}
	hd, ok := dev.(*candle.HIPDevice)
	if !ok {
		g, err := candle.NewCPUGroup(n)
		if err != nil {
			return nil, nil, err
		}
		return g.Devices(), g, nil
	}
	count, err := hip.DeviceCount()
	if err != nil {
		return nil, nil, err
	}
	if hd.Ordinal()+n > count {
		return nil, nil, fmt.Errorf("-tensor-parallel %d from hip:%d: the machine has %d GPUs (hip:0 to hip:%d)", n, hd.Ordinal(), count, count-1)
	}
	gpus := make([]*candle.HIPDevice, n)
	for i := range gpus {
		if gpus[i], err = candle.HIP(hd.Ordinal() + i); err != nil {
			return nil, nil, err
		}
	}
	for _, a := range gpus {
		for _, b := range gpus {
			if a == b {
				continue
			}
			ok, err := a.HIP().CanAccessPeer(b.HIP())
			if err != nil {
				return nil, nil, err
			}
			if !ok {
				return nil, nil, fmt.Errorf("%s cannot reach %s's memory (no peer access): a model split over GPUs needs GPUs that reach each other", a, b)
			}
		}
	}
	// NVLink multicast stays off unless the environment says otherwise:
	// on shared machines it can take GPUs out of service.
	if _, ok := os.LookupEnv("NCCL_NVLS_ENABLE"); !ok {
		os.Setenv("NCCL_NVLS_ENABLE", "0")
	}
	g, err := candle.NewHIPGroup(gpus...)
	if err != nil {
		return nil, nil, err
	}
	return g.Devices(), g, nil
}

// memory is the model's devices' memory counters, summed over distinct
// GPUs (CPU ranks share one host's).
func (b *modelBackend) memory() candle.MemoryStats {
	if _, ok := b.devs[0].(*candle.HIPDevice); !ok {
		return b.devs[0].MemoryStats()
	}
	var sum candle.MemoryStats
	for _, d := range b.devs {
		m := d.MemoryStats()
		sum.InUse, sum.Cached = sum.InUse+m.InUse, sum.Cached+m.Cached
	}
	return sum
}

// loadModel opens the model path once (a Hugging Face folder or a GGUF
// file, through candle/models) and loads its tokenizer and its model.
func loadModel(o LoadOptions, dev candle.Device, group *candle.Group) (*tokenizer.Tokenizer, servedModel, candle.DType, string, error) {
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
	opts := llama.Options{MaxBatch: o.MaxBatch, Progress: o.Progress,
		MaxModelLen: o.MaxModelLen, CacheBytes: o.CacheBytes, MemoryFraction: o.MemoryFraction, NoPrefixCaching: o.NoPrefixCaching}
	if group != nil {
		m, err := llama.NewTP(c, group, dt, opts)
		if err != nil {
			return nil, nil, 0, "", err
		}
		return tok, m, dt, weightTypes(c.Weights), nil
	}
	m, err := llama.New(c, dev, dt, opts)
	if err != nil {
		return nil, nil, 0, "", err
	}
	return tok, m, dt, weightTypes(c.Weights), nil
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
	return dev.String() // "cpu", or a CPU rank's "cpu/rank1"
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
	m := b.memory()
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
	return errors.Join(b.engine.Close(), b.model.Close(), b.group.Close())
}
