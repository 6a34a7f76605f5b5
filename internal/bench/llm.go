package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/candle/models/llama"
	"github.com/rocm-go/rocm/candle/nn"
	"github.com/rocm-go/rocm/internal/mkmodel"
)

// LLMSettings size the LLM benchmark (cmd/llmbench): the prompt's length,
// the decode steps, the batch sizes and the repeats whose median is taken.
type LLMSettings struct {
	Prompt  int   `json:"prompt"`  // prompt tokens of every sequence
	Steps   int   `json:"steps"`   // new tokens of every decode run
	Batches []int `json:"batches"` // the batch sizes, e.g. 1 and 8
	Reps    int   `json:"reps"`    // repeats of prefill and TTFT (decode: half, at least 1)
	Seed    uint64
	// Constraint, when set, also runs the engine's decode with every
	// request constrained to this JSON schema ("json_object": any object;
	// BenchSchema is the default of llmbench's -constrain).
	Constraint string `json:"constraint,omitempty"`
}

// check validates the settings.
func (s LLMSettings) check() error {
	switch {
	case s.Prompt < 1:
		return fmt.Errorf("llm bench: a prompt of %d tokens: want at least 1", s.Prompt)
	case s.Steps < 2:
		return fmt.Errorf("llm bench: %d decode steps: want at least 2", s.Steps)
	case len(s.Batches) == 0:
		return errors.New("llm bench: no batch sizes")
	case s.Reps < 1:
		return fmt.Errorf("llm bench: %d repeats: want at least 1", s.Reps)
	}
	for _, b := range s.Batches {
		if b < 1 || b > models.DefaultMaxBatch {
			return fmt.Errorf("llm bench: batch %d: want 1 to %d", b, models.DefaultMaxBatch)
		}
	}
	return nil
}

func (s LLMSettings) maxBatch() int {
	m := 0
	for _, b := range s.Batches {
		m = max(m, b)
	}
	return m
}

// decodeReps is the repeats of the decode runs, which take longer.
func (s LLMSettings) decodeReps() int { return max(1, s.Reps/2) }

// CacheTokens is the KV cache the benchmark loads the model with: room for
// the largest batch's prompts and new tokens, each sequence rounded up to
// whole pages (and one spare page each).
func (s LLMSettings) CacheTokens(pageSize int) int {
	perSeq := (s.Prompt+s.Steps+pageSize-1)/pageSize*pageSize + pageSize
	return s.maxBatch() * perSeq
}

// KVCacheBytes is the size of the paged KV cache llama.Load allocates for
// tokens (whole pages): keys and values of every layer.
func KVCacheBytes(c *llama.Config, dt candle.DType, tokens, pageSize int) int64 {
	pages := int64((tokens + pageSize - 1) / pageSize)
	return pages * int64(pageSize) * int64(nn.PagedKVBytesPerToken(dt, c.Layers, c.KVHeads, c.HeadDim))
}

// Roofline is the batch-1 decode roofline in tokens/s: a decode step reads
// every weight once, so the device's copy bandwidth (bytes read + written
// per second, GB/s) over the weights' bytes.
func Roofline(weightBytes int64, copyGBps float64) float64 {
	if weightBytes <= 0 {
		return 0
	}
	return copyGBps * 1e9 / float64(weightBytes)
}

// PrepareLLMModel writes a random-weight model of spec into dir with
// mkmodel, or reuses the one already there when its config has the spec's
// shape; a folder that holds another model is an error. It prints its
// progress and time to w, and returns whether it reused the folder.
func PrepareLLMModel(dir string, spec mkmodel.Spec, w io.Writer) (reused bool, err error) {
	want, err := spec.Bytes()
	if err != nil {
		return false, err
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		c, err := readConfig(dir)
		if err != nil {
			return false, fmt.Errorf("llm bench: %s holds a model whose config does not read (%v): give -model an empty or new folder", dir, err)
		}
		st, serr := os.Stat(filepath.Join(dir, "model.safetensors"))
		if specShaped(c, spec) && serr == nil && st.Size() >= want {
			fmt.Fprintf(w, "model: reusing %s (%s of weights)\n", dir, humanize.IBytes(uint64(st.Size())))
			return true, nil
		}
		return false, fmt.Errorf("llm bench: %s holds another model (hidden %d, %d layers, vocab %d) or an incomplete one: give -model an empty or new folder, or remove it",
			dir, c.HiddenSize, c.Layers, c.VocabSize)
	}
	fmt.Fprintf(w, "model: writing %s of random %s weights (hidden %d, %d layers, %d heads, %d KV heads) into %s\n",
		humanize.IBytes(uint64(want)), spec.DType, spec.Hidden, spec.Layers, spec.Heads, spec.KVHeads, dir)
	start := time.Now()
	lastTenth := int64(-1)
	err = mkmodel.Write(dir, spec, func(p mkmodel.Progress) {
		switch p.Stage {
		case "weights":
			if tenth := p.Done * 10 / max(p.Total, 1); tenth != lastTenth {
				lastTenth = tenth
				fmt.Fprintf(w, "  weights made: %s of %s (%.1f s)\n", humanize.IBytes(uint64(p.Done)), humanize.IBytes(uint64(p.Total)), time.Since(start).Seconds())
			}
		case "save":
			if p.Done == 0 {
				fmt.Fprintf(w, "  saving model.safetensors (%.1f s)\n", time.Since(start).Seconds())
			}
		}
	})
	if err != nil {
		// A half-written folder would be refused next time: remove what
		// this run wrote.
		os.Remove(filepath.Join(dir, "config.json"))
		return false, fmt.Errorf("llm bench: writing the model: %w", err)
	}
	d := time.Since(start)
	fmt.Fprintf(w, "model: written in %.1f s (%s/s)\n", d.Seconds(), humanize.IBytes(uint64(float64(want)/d.Seconds())))
	return false, nil
}

// specShaped reports whether a model's config has the spec's shape.
func specShaped(c *llama.Config, spec mkmodel.Spec) bool {
	return c.HiddenSize == spec.Hidden && c.Layers == spec.Layers && c.Heads == spec.Heads && c.KVHeads == spec.KVHeads &&
		c.IntermediateSize == spec.Intermediate && (spec.Vocab == 0 || c.VocabSize == spec.Vocab)
}

// LLMFigures are one implementation's measurements; maps are keyed by the
// batch size (as a string, for JSON).
type LLMFigures struct {
	Prefill map[string]float64 `json:"prefill_tok_s"` // prompt tokens/s of one forward pass of the batch's prompts
	Decode  map[string]float64 `json:"decode_tok_s"`  // new tokens/s after the first: b·(steps−1) / their time
	// Ours: the same decode with each step run op by op instead of
	// replayed as a HIP graph (llama.Model.SetGraphs(false)).
	DecodeEager map[string]float64 `json:"decode_eager_tok_s,omitempty"`
	Engine      map[string]float64 `json:"engine_tok_s,omitempty"`
	// Ours, with Settings.Constraint: the engine's decode with every
	// request constrained, and the mean CPU time of one request's mask a
	// step (the rows' masks run in parallel, beside the forward pass).
	Constrained map[string]float64 `json:"constrained_tok_s,omitempty"`
	MaskMs      map[string]float64 `json:"mask_ms,omitempty"`
	TTFT        float64            `json:"ttft_s"` // a prompt's forward pass and one greedy token read on the host
	Peak        int64              `json:"peak_bytes"`
	// Ours: the private memory the decode graphs keep beside the peak of
	// live tensors (candle.MemoryStats.Graphs), at the end of the run.
	Graphs int64 `json:"graph_bytes,omitempty"`
	// Ours: the weights and KV cache the peak is held against.
	Weights int64 `json:"weights_bytes,omitempty"`
	KV      int64 `json:"kv_bytes,omitempty"`
	// Transformers: the attention implementation.
	Attention string `json:"attention,omitempty"`
	// Transformers compiled: the seconds each shape's first call took
	// (compilation), by "prefill/b" and "decode/b"; not in the figures.
	Compile map[string]float64 `json:"compile_s,omitempty"`
}

func key(b int) string { return strconv.Itoa(b) }

// llmRun is the state of our side of the benchmark.
type llmRun struct {
	m     generate.PagedModel // a llama.Model, or a llama.TPModel over several GPUs
	dev   *candle.HIPDevice   // where m's logits are
	s     LLMSettings
	rng   *rand.Rand
	next  uint64
	vocab int
}

// prompts are b random prompts of the settings' length.
func (r *llmRun) prompts(b int) [][]int32 {
	out := make([][]int32, b)
	for i := range out {
		out[i] = make([]int32, r.s.Prompt)
		for j := range out[i] {
			out[i][j] = int32(r.rng.IntN(r.vocab))
		}
	}
	return out
}

// seqs are b fresh sequence ids.
func (r *llmRun) seqs(b int) []uint64 {
	ids := make([]uint64, b)
	for i := range ids {
		r.next++
		ids[i] = r.next
	}
	return ids
}

func (r *llmRun) release(ids []uint64) {
	for _, id := range ids {
		r.m.Release(id)
	}
}

// greedy samples one token per row of logits greedily and reads them on
// the host, as the engine does each step.
func greedy(logits *candle.Tensor, rows int) ([]uint32, error) {
	out, err := logits.Sample(make([]candle.SampleOptions, rows))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	return candle.ToSlice[uint32](out)
}

// prefill is the time of one forward pass of b prompts, synchronised.
func (r *llmRun) prefill(b int) (time.Duration, error) {
	ids, toks := r.seqs(b), r.prompts(b)
	defer r.release(ids)
	if err := r.dev.Synchronize(); err != nil {
		return 0, err
	}
	start := time.Now()
	x, err := r.m.Forward(ids, toks)
	if err != nil {
		return 0, fmt.Errorf("prefill of batch %d: %w", b, err)
	}
	err = r.dev.Synchronize()
	d := time.Since(start)
	x.Close()
	return d, err
}

// ttft is the time from a prompt to its first greedy token on the host.
func (r *llmRun) ttft() (time.Duration, error) {
	ids, toks := r.seqs(1), r.prompts(1)
	defer r.release(ids)
	if err := r.dev.Synchronize(); err != nil {
		return 0, err
	}
	start := time.Now()
	x, err := r.m.Forward(ids, toks)
	if err != nil {
		return 0, fmt.Errorf("time to first token: %w", err)
	}
	defer x.Close()
	if _, err := greedy(x, 1); err != nil {
		return 0, fmt.Errorf("time to first token: %w", err)
	}
	return time.Since(start), nil
}

// decode prefills b prompts, draws their first tokens, then times steps−1
// decode steps: Forward of one token each, a batched greedy Sample read
// on the host and fed back.
func (r *llmRun) decode(b int) (time.Duration, error) {
	ids, toks := r.seqs(b), r.prompts(b)
	defer r.release(ids)
	x, err := r.m.Forward(ids, toks)
	if err != nil {
		return 0, fmt.Errorf("decode batch %d, prompt: %w", b, err)
	}
	next, err := greedy(x, b)
	x.Close()
	if err != nil {
		return 0, fmt.Errorf("decode batch %d: %w", b, err)
	}
	step := make([][]int32, b)
	for i := range step {
		step[i] = make([]int32, 1)
	}
	start := time.Now()
	for n := 1; n < r.s.Steps; n++ {
		for i, t := range next {
			step[i][0] = int32(t)
		}
		x, err := r.m.Forward(ids, step)
		if err != nil {
			return 0, fmt.Errorf("decode batch %d, step %d: %w", b, n, err)
		}
		next, err = greedy(x, b)
		x.Close()
		if err != nil {
			return 0, fmt.Errorf("decode batch %d, step %d: %w", b, n, err)
		}
	}
	return time.Since(start), nil
}

// engine runs b greedy requests submitted together through a
// generate.Engine and returns the new tokens after each request's first
// and the time from the first first token to the last request's end.
// With c, every request is constrained by it (and may end "stop" when
// its JSON is complete).
func (r *llmRun) engine(b int, c *constrainedRun) (int, time.Duration, error) {
	e, err := generate.NewEngine(r.m, generate.Config{MaxBatch: b, PrefillChunk: b * r.s.Prompt})
	if err != nil {
		return 0, 0, err
	}
	defer e.Close()
	n, d, _, err := engineRun(e, r.prompts(b), r.s.Steps, c)
	if err != nil {
		return 0, 0, fmt.Errorf("engine batch %d: %w", b, err)
	}
	return n, d, nil
}

// engineRun submits greedy requests of maxTokens for prompts together to
// e and returns the new tokens after each request's first, the time from
// the first first token to the last request's end, and each request's
// tokens. With c, every request is constrained by it (and may end
// "stop" when its JSON is complete).
func engineRun(e *generate.Engine, prompts [][]int32, maxTokens int, c *constrainedRun) (int, time.Duration, [][]int32, error) {
	type result struct {
		first, done time.Time
		tokens      []int32
		err         error
	}
	results := make([]chan result, len(prompts))
	for i, p := range prompts {
		req := generate.Request{Prompt: p, MaxTokens: maxTokens}
		if c != nil {
			req.StopTokens = c.stop
			var err error
			if req.Constraint, err = c.constraint(); err != nil {
				return 0, 0, nil, err
			}
		}
		ch, err := e.Submit(context.Background(), req)
		if err != nil {
			return 0, 0, nil, err
		}
		results[i] = make(chan result, 1)
		go func() {
			var res result
			for ev := range ch {
				if res.first.IsZero() && len(ev.Tokens) > 0 {
					res.first = time.Now()
				}
				res.tokens = append(res.tokens, ev.Tokens...)
				if ev.Done {
					res.done = time.Now()
					if ev.Err != nil || (ev.FinishReason != "length" && (c == nil || ev.FinishReason != "stop")) {
						res.err = fmt.Errorf("a request ended with %q: %v", ev.FinishReason, ev.Err)
					}
				}
			}
			results[i] <- res
		}()
	}
	var first, last time.Time
	tokens := 0
	outs := make([][]int32, len(prompts))
	var errs []error
	for i, ch := range results {
		res := <-ch
		if res.err == nil && res.first.IsZero() {
			res.err = errors.New("a request streamed no token")
		}
		if res.err != nil {
			errs = append(errs, res.err)
			continue
		}
		if first.IsZero() || res.first.Before(first) {
			first = res.first
		}
		if res.done.After(last) {
			last = res.done
		}
		tokens += len(res.tokens) - 1
		outs[i] = res.tokens
	}
	if err := errors.Join(errs...); err != nil {
		return 0, 0, nil, err
	}
	return tokens, last.Sub(first), outs, nil
}

// RunLLMOurs loads the model folder on dev in BF16 with a KV cache sized
// by the settings and measures it: prefill and direct greedy decode at
// each batch, time to first token, decode through generate.Engine, and the
// peak device memory against the weights and the KV cache. It prints each
// figure to w as it comes.
func RunLLMOurs(dev *candle.HIPDevice, dir string, s LLMSettings, w io.Writer) (*LLMFigures, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	const dt = candle.BF16
	cacheTokens := s.CacheTokens(models.DefaultPageSize)
	base := dev.MemoryStats().InUse
	start := time.Now()
	ckpt, err := models.Open(dir)
	if err != nil {
		return nil, err
	}
	cfg, err := llama.ConfigOf(ckpt)
	if err != nil {
		ckpt.Close()
		return nil, err
	}
	lastTenth := int64(-1)
	m, err := llama.New(ckpt, dev, dt, llama.Options{CacheTokens: cacheTokens, PageSize: models.DefaultPageSize, MaxBatch: s.maxBatch(),
		Progress: func(done, total int64) {
			if tenth := done * 10 / max(total, 1); tenth != lastTenth {
				lastTenth = tenth
				fmt.Fprintf(w, "  loading: %s of %s\n", humanize.IBytes(uint64(done)), humanize.IBytes(uint64(total)))
			}
		}})
	ckpt.Close() // what Load did before returning: the chunks released, the files unmapped
	if err != nil {
		return nil, fmt.Errorf("llm bench: loading %s: %w", dir, err)
	}
	defer m.Close()
	if err := dev.Synchronize(); err != nil {
		return nil, err
	}
	f := &LLMFigures{Prefill: map[string]float64{}, Decode: map[string]float64{}, DecodeEager: map[string]float64{}, Engine: map[string]float64{},
		Weights: cfg.Parameters() * int64(dt.Size()), KV: KVCacheBytes(cfg, dt, cacheTokens, models.DefaultPageSize)}
	fmt.Fprintf(w, "ours: loaded in %.2f s: %s of weights, a KV cache of %d tokens (%s)\n", time.Since(start).Seconds(),
		humanize.IBytes(uint64(f.Weights)), cacheTokens, humanize.IBytes(uint64(f.KV)))
	r := &llmRun{m: m, dev: dev, s: s, rng: rand.New(rand.NewPCG(s.Seed, 7)), vocab: m.VocabSize()}

	for _, b := range s.Batches {
		d, err := Median(s.Reps, func() (time.Duration, error) { return r.prefill(b) })
		if err != nil {
			return nil, err
		}
		f.Prefill[key(b)] = float64(b*s.Prompt) / d.Seconds()
		fmt.Fprintf(w, "ours: prefill of %d×%d tokens: %s (%.0f tok/s)\n", b, s.Prompt, msf(d), f.Prefill[key(b)])
	}
	d, err := Median(s.Reps, r.ttft)
	if err != nil {
		return nil, err
	}
	f.TTFT = d.Seconds()
	fmt.Fprintf(w, "ours: time to first token of a %d-token prompt: %s\n", s.Prompt, msf(d))
	for _, b := range s.Batches {
		d, err := Median(s.decodeReps(), func() (time.Duration, error) { return r.decode(b) })
		if err != nil {
			return nil, err
		}
		f.Decode[key(b)] = float64(b*(s.Steps-1)) / d.Seconds()
		fmt.Fprintf(w, "ours: greedy decode, batch %d, %d steps: %s (%.1f tok/s, %s a step)\n", b, s.Steps-1, msf(d), f.Decode[key(b)],
			msf(d/time.Duration(s.Steps-1)))
	}
	// The same without graphs: what replaying each step saves.
	m.SetGraphs(false)
	for _, b := range s.Batches {
		d, err := Median(s.decodeReps(), func() (time.Duration, error) { return r.decode(b) })
		if err != nil {
			m.SetGraphs(true)
			return nil, err
		}
		f.DecodeEager[key(b)] = float64(b*(s.Steps-1)) / d.Seconds()
		fmt.Fprintf(w, "ours: greedy decode op by op (no graphs), batch %d: %.1f tok/s, %s a step (graphs: %.2f×)\n", b, f.DecodeEager[key(b)],
			msf(d/time.Duration(s.Steps-1)), f.Decode[key(b)]/f.DecodeEager[key(b)])
	}
	m.SetGraphs(true)
	for _, b := range s.Batches {
		var rates []float64
		for i := range s.decodeReps() + 1 {
			n, d, err := r.engine(b, nil)
			if err != nil {
				return nil, err
			}
			if i > 0 { // the first warms up
				rates = append(rates, float64(n)/d.Seconds())
			}
		}
		f.Engine[key(b)] = medianOf(rates)
		fmt.Fprintf(w, "ours: generate.Engine decode, batch %d: %.1f tok/s\n", b, f.Engine[key(b)])
	}
	if s.Constraint != "" {
		c, err := newConstrainedRun(s.Constraint, r.vocab, w)
		if err != nil {
			return nil, err
		}
		f.Constrained, f.MaskMs = map[string]float64{}, map[string]float64{}
		for _, b := range s.Batches {
			var rates, masks []float64
			for i := range s.decodeReps() + 1 {
				n, d, err := r.engine(b, c)
				if err != nil {
					return nil, err
				}
				mt := c.maskTime()
				if i > 0 { // the first warms up (and fills the grammar's mask cache)
					rates = append(rates, float64(n)/d.Seconds())
					masks = append(masks, mt.Seconds()*1e3)
				}
			}
			f.Constrained[key(b)], f.MaskMs[key(b)] = medianOf(rates), medianOf(masks)
			fmt.Fprintf(w, "ours: generate.Engine decode constrained to JSON, batch %d: %.1f tok/s (%.3f of unconstrained), a mask %.3f ms of CPU\n",
				b, f.Constrained[key(b)], f.Constrained[key(b)]/f.Engine[key(b)], f.MaskMs[key(b)])
		}
	}
	f.Peak = dev.MemoryStats().Peak - base
	f.Graphs = dev.MemoryStats().Graphs
	fmt.Fprintf(w, "ours: peak device memory %s (weights %s + KV cache %s = %s); the decode graphs %v keep %s more\n", humanize.IBytes(uint64(f.Peak)),
		humanize.IBytes(uint64(f.Weights)), humanize.IBytes(uint64(f.KV)), humanize.IBytes(uint64(f.Weights+f.KV)), m.DecodeGraphs(), humanize.IBytes(uint64(f.Graphs)))
	return f, nil
}

// TransformersLLM is what torch_llm.py reports: its versions and device,
// and the figures of each attention implementation it ran.
type TransformersLLM struct {
	Torch        string                 `json:"torch"`
	Transformers string                 `json:"transformers"`
	GPU          string                 `json:"gpu"`
	Runs         map[string]*LLMFigures `json:"runs"` // by attention implementation: "eager", "sdpa", and "compiled" (sdpa, static cache, torch.compile)
	Skipped      map[string]string      `json:"skipped,omitempty"`
}

// Peers are transformers' runs llmbench makes by default: eager and sdpa
// attention, and sdpa compiled (static cache, torch.compile).
var Peers = []string{"eager", "sdpa", "compiled"}

func orPeers(p []string) []string {
	if len(p) == 0 {
		return Peers
	}
	return p
}

// RunLLMTransformers runs torch_llm.py (script, or the embedded one)
// with python on the model folder and the settings: the peers' runs
// (default Peers).
func RunLLMTransformers(python, script, dir string, s LLMSettings, peers []string) (*TransformersLLM, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var out TransformersLLM
	err := RunScript(python, script, "torch_llm.py", []string{"--model=" + dir, fmt.Sprint("--prompt=", s.Prompt), fmt.Sprint("--steps=", s.Steps),
		"--batches=" + joinInts(s.Batches), fmt.Sprint("--reps=", s.Reps), fmt.Sprint("--decode-reps=", s.decodeReps()),
		"--attention=" + strings.Join(orPeers(peers), ",")}, &out)
	if err != nil {
		return nil, err
	}
	if len(out.Runs) == 0 {
		return nil, fmt.Errorf("torch_llm.py ran no attention implementation: %v", out.Skipped)
	}
	return &out, nil
}

// LLMGoals are the targets for the LLM benchmark.
var LLMGoals = struct {
	DecodeB1, DecodeBatched, Prefill, Roofline float64
	TTFT                                       time.Duration
	Memory                                     float64
}{DecodeB1: 10, DecodeBatched: 5, Prefill: 1, Roofline: 0.7, TTFT: 20 * time.Millisecond, Memory: 1.10}

// CompiledGoals are the targets against transformers compiled (static KV
// cache and torch.compile, gpt-fast's recipe on transformers):
// decode at every batch ≥ Decode×, prefill ≥ Prefill×, and batch-1 decode
// ≥ Roofline of the memory roofline.
var CompiledGoals = struct{ Decode, Prefill, Roofline float64 }{Decode: 1.2, Prefill: 1.0, Roofline: 0.75}

// CompiledRows makes the table against transformers' "compiled" run: the
// prefill, time-to-first-token and decode rows with CompiledGoals, and
// what compiling cost it. Nil when there is no compiled run.
func CompiledRows(s LLMSettings, ours *LLMFigures, tf *TransformersLLM, roof float64) []Row {
	if tf == nil || tf.Runs["compiled"] == nil || ours == nil {
		return nil
	}
	c := tf.Runs["compiled"]
	rate := func(v float64) string { return fmt.Sprintf("%.0f tok/s", v) }
	row := func(name string, ours, theirs, goal float64) Row {
		r := Row{Name: name, Ours: rate(ours), Theirs: rate(theirs), Target: fmt.Sprintf("≥ %.2g×", goal)}
		if ours > 0 && theirs > 0 {
			r.Ratio = ours / theirs
			r.Met = Met(r.Ratio >= goal)
		}
		return r
	}
	var rows []Row
	for _, b := range s.Batches {
		rows = append(rows, row(fmt.Sprintf("prefill of %d tokens, batch %d", s.Prompt, b), ours.Prefill[key(b)], c.Prefill[key(b)], CompiledGoals.Prefill))
	}
	if ours.TTFT > 0 && c.TTFT > 0 {
		rows = append(rows, Row{Name: fmt.Sprintf("time to first token, a %d-token prompt (ratio: theirs / ours)", s.Prompt),
			Ours: fmt.Sprintf("%.1f ms", ours.TTFT*1e3), Theirs: fmt.Sprintf("%.1f ms", c.TTFT*1e3), Ratio: c.TTFT / ours.TTFT, Target: "reported"})
	}
	for _, b := range s.Batches {
		v := ours.Decode[key(b)]
		r := row(fmt.Sprintf("greedy decode, batch %d (tok/s after the first)", b), v, c.Decode[key(b)], CompiledGoals.Decode)
		if b == 1 && roof > 0 && v > 0 {
			r.Ours += fmt.Sprintf(", %.2f of the roofline", v/roof)
			r.Target += fmt.Sprintf(" and ≥ %.2f of the roofline (%.0f tok/s)", CompiledGoals.Roofline, roof)
			r.Met = Met(r.Met != nil && *r.Met && v/roof >= CompiledGoals.Roofline)
		}
		rows = append(rows, r)
	}
	var compile float64
	for _, v := range c.Compile {
		compile += v
	}
	if compile > 0 {
		rows = append(rows, Row{Name: "transformers' compilation and CUDA-graph warm-up (all shapes)", Ours: "—",
			Theirs: fmt.Sprintf("%.1f s", compile), Target: "reported"})
	}
	return rows
}

// LLMRows makes the benchmark's table: ours against transformers' run of
// the attention ref (eager) where there is one, the other implementations'
// figures beside it, and the roofline (tokens/s, 0 if unknown).
func LLMRows(s LLMSettings, ours *LLMFigures, tf *TransformersLLM, ref string, roof float64) []Row {
	var theirs *LLMFigures
	var others []string
	if tf != nil {
		theirs = tf.Runs[ref]
		for name := range tf.Runs {
			if name != ref {
				others = append(others, name)
			}
		}
		sort.Strings(others)
	}
	rate := func(v float64) string {
		if v >= 1e4 {
			return fmt.Sprintf("%.1f k tok/s", v/1e3)
		}
		return fmt.Sprintf("%.1f tok/s", v)
	}
	// theirsCell is the reference's figure, the others' in brackets.
	theirsCell := func(get func(*LLMFigures) (float64, bool), show func(float64) string) (string, float64) {
		if theirs == nil {
			return "—", 0
		}
		v, ok := get(theirs)
		if !ok {
			return "—", 0
		}
		cell := show(v)
		for _, o := range others {
			if ov, ok := get(tf.Runs[o]); ok {
				cell += fmt.Sprintf(" (%s: %s)", o, show(ov))
			}
		}
		return cell, v
	}
	var rows []Row
	for _, b := range s.Batches {
		get := func(f *LLMFigures) (float64, bool) { v, ok := f.Prefill[key(b)]; return v, ok && v > 0 }
		r := Row{Name: fmt.Sprintf("prefill of %d tokens, batch %d", s.Prompt, b), Ours: rate(ours.Prefill[key(b)]),
			Target: fmt.Sprintf("≥ %.1f×", LLMGoals.Prefill)}
		var t float64
		if r.Theirs, t = theirsCell(get, rate); t > 0 {
			r.Ratio = ours.Prefill[key(b)] / t
			r.Met = Met(r.Ratio >= LLMGoals.Prefill)
		}
		rows = append(rows, r)
	}
	ms := func(v float64) string { return fmt.Sprintf("%.1f ms", v*1e3) }
	r := Row{Name: fmt.Sprintf("time to first token, a %d-token prompt (ratio: theirs / ours)", s.Prompt), Ours: ms(ours.TTFT),
		Target: fmt.Sprintf("≤ %v", LLMGoals.TTFT), Met: Met(ours.TTFT <= LLMGoals.TTFT.Seconds())}
	var t float64
	if r.Theirs, t = theirsCell(func(f *LLMFigures) (float64, bool) { return f.TTFT, f.TTFT > 0 }, ms); t > 0 {
		r.Ratio = t / ours.TTFT
	}
	rows = append(rows, r)
	for _, b := range s.Batches {
		get := func(f *LLMFigures) (float64, bool) { v, ok := f.Decode[key(b)]; return v, ok && v > 0 }
		v := ours.Decode[key(b)]
		goal := LLMGoals.DecodeBatched
		r := Row{Name: fmt.Sprintf("greedy decode, batch %d, %d new tokens (tok/s after the first)", b, s.Steps), Ours: rate(v)}
		if b == 1 && roof > 0 {
			goal = LLMGoals.DecodeB1
			r.Ours += fmt.Sprintf(", %.2f of the roofline", v/roof)
			r.Target = fmt.Sprintf("≥ %.0f×, toward %.1f of the roofline (%.0f tok/s)", goal, LLMGoals.Roofline, roof)
		} else {
			if b == 1 {
				goal = LLMGoals.DecodeB1
			}
			r.Target = fmt.Sprintf("≥ %.0f×", goal)
		}
		if r.Theirs, t = theirsCell(get, rate); t > 0 {
			r.Ratio = v / t
			r.Met = Met(r.Ratio >= goal)
		}
		rows = append(rows, r)
	}
	for _, b := range s.Batches {
		v, graphs := ours.DecodeEager[key(b)], ours.Decode[key(b)]
		if v == 0 {
			continue
		}
		r := Row{Name: fmt.Sprintf("the same op by op (no graphs), batch %d", b), Ours: rate(v), Theirs: "—", Target: "reported"}
		if graphs > 0 {
			r.Ours += fmt.Sprintf(" (graphs: %.2f×)", graphs/v)
		}
		rows = append(rows, r)
	}
	for _, b := range s.Batches {
		v, direct := ours.Engine[key(b)], ours.Decode[key(b)]
		if v == 0 {
			continue
		}
		r := Row{Name: fmt.Sprintf("the same through generate.Engine, batch %d", b), Ours: rate(v), Target: "reported"}
		if direct > 0 {
			r.Ours += fmt.Sprintf(" (%.2f of the direct loop)", v/direct)
		}
		if r.Theirs, t = theirsCell(func(f *LLMFigures) (float64, bool) { v, ok := f.Decode[key(b)]; return v, ok && v > 0 }, rate); t > 0 {
			r.Ratio = v / t
		}
		rows = append(rows, r)
	}
	for _, b := range s.Batches {
		v, free := ours.Constrained[key(b)], ours.Engine[key(b)]
		if v == 0 || free == 0 {
			continue
		}
		rows = append(rows, Row{Name: fmt.Sprintf("generate.Engine constrained to JSON, batch %d (a mask %.3f ms of CPU)", b, ours.MaskMs[key(b)]),
			Ours: rate(v), Theirs: rate(free) + " unconstrained", Ratio: v / free, Target: "≥ 0.9× unconstrained", Met: Met(v >= 0.9*free)})
	}
	budget := ours.Weights + ours.KV
	r = Row{Name: "peak device memory (ratio: ours / (weights + KV cache))",
		Ours:   fmt.Sprintf("%s (weights %s + KV %s)", gib(float64(ours.Peak)), gib(float64(ours.Weights)), gib(float64(ours.KV))),
		Target: fmt.Sprintf("≤ %.2f", LLMGoals.Memory)}
	if budget > 0 {
		r.Ratio = float64(ours.Peak) / float64(budget)
		r.Met = Met(r.Ratio <= LLMGoals.Memory)
	}
	r.Theirs, _ = theirsCell(func(f *LLMFigures) (float64, bool) { return float64(f.Peak), f.Peak > 0 }, gib)
	rows = append(rows, r)
	return rows
}

// LLMBench is a whole run of the LLM benchmark (cmd/llmbench).
type LLMBench struct {
	Model    string // the model folder: written if need be, reused if it holds the spec's model
	Spec     mkmodel.Spec
	Settings LLMSettings
	// Python runs torch_llm.py (Script, or the embedded one); an empty Python skips transformers.
	Python, Script string
	Peers          []string // transformers' runs (default Peers)
	CopyBytes      int      // the device-to-device copy of the roofline (default 1 GiB)
	// Quant lists GGUF types to measure too: the spec's model written as
	// GGUF files beside Model (Model-q4_k.gguf, ...), prefill and decode.
	Quant []candle.GGMLType
	// QuantOnly measures the Quant models alone: the BF16 model is neither
	// written nor run, and transformers does not run (a quick run of the
	// quantized kernels).
	QuantOnly bool
	// Prefix, when its Prefix is set, measures prefix caching on the BF16
	// model too (RunLLMPrefix): one more row.
	Prefix LLMPrefixSettings
	// Speculative, when its Tokens is set, measures prompt-lookup
	// speculative decoding on the BF16 model too (RunLLMSpeculative): one
	// more row.
	Speculative LLMSpecSettings
}

// LLMReport is a run's result, as cmd/llmbench writes it with -json.
type LLMReport struct {
	Device       string           `json:"device"`
	Model        string           `json:"model"`
	Settings     LLMSettings      `json:"settings"`
	CopyGBps     float64          `json:"copy_gbps"`      // device-to-device, bytes read + written
	RooflineTokS float64          `json:"roofline_tok_s"` // batch-1 decode: CopyGBps / weights
	Ours         *LLMFigures      `json:"ours"`
	Transformers *TransformersLLM `json:"transformers,omitempty"`
	NoReference  string           `json:"no_transformers,omitempty"` // why transformers did not run
	Rows         []Row            `json:"rows"`
	// CompiledRows: ours against transformers compiled (CompiledGoals).
	CompiledRows []Row `json:"compiled_rows,omitempty"`
	// Quant: the GGUF models' figures, and their rows.
	Quant     []*LLMQuantFigures `json:"quant,omitempty"`
	QuantRows []Row              `json:"quant_rows,omitempty"`
	// Prefix: the prefix cache's time to first token (LLMBench.Prefix).
	Prefix *LLMPrefixFigures `json:"prefix,omitempty"`
	// Speculative: prompt-lookup decoding's rates (LLMBench.Speculative).
	Speculative *LLMSpecFigures `json:"speculative,omitempty"`
}

// lastChars keeps the end of a long message (a Python traceback's end
// says what went wrong).
func lastChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// RunLLMBench runs the benchmark on HIP device 0, printing its progress
// and the table to w.
func RunLLMBench(c LLMBench, w io.Writer) (*LLMReport, error) {
	if err := c.Settings.check(); err != nil {
		return nil, err
	}
	if c.CopyBytes == 0 {
		c.CopyBytes = 1 << 30
	}
	if c.QuantOnly && len(c.Quant) == 0 {
		return nil, fmt.Errorf("llm bench: only the GGUF models, and no GGUF type to measure: name one (q4_k)")
	}
	b, err := OpenTensors()
	if err != nil {
		return nil, err
	}
	defer b.Close()
	props := b.Dev.Properties()
	rep := &LLMReport{Device: fmt.Sprintf("%s (%s)", props.Name, props.ArchName), Model: c.Model, Settings: c.Settings}
	fmt.Fprintf(w, "device: %s; prompt %d tokens, %d new tokens, batches %v, %d repeats\n", rep.Device, c.Settings.Prompt, c.Settings.Steps,
		c.Settings.Batches, c.Settings.Reps)
	if rep.CopyGBps, err = b.CopyRate(c.CopyBytes); err != nil {
		return nil, fmt.Errorf("llm bench: the copy roofline: %w", err)
	}
	if !c.QuantOnly {
		if _, err := PrepareLLMModel(c.Model, c.Spec, w); err != nil {
			return nil, err
		}
		cfg, err := readConfig(c.Model)
		if err != nil {
			return nil, err
		}
		weights := cfg.Parameters() * int64(candle.BF16.Size())
		rep.RooflineTokS = Roofline(weights, rep.CopyGBps)
		fmt.Fprintf(w, "roofline: device-to-device copy at %.0f GB/s (read + write); %s of BF16 weights → batch-1 decode ≤ %.0f tok/s\n",
			rep.CopyGBps, humanize.IBytes(uint64(weights)), rep.RooflineTokS)
		if rep.Ours, err = RunLLMOurs(b.Dev, c.Model, c.Settings, w); err != nil {
			return nil, err
		}
		if c.Prefix.Prefix > 0 {
			b.Dev.ReleaseCache()
			if rep.Prefix, err = RunLLMPrefix(b.Dev, candle.BF16, c.Model, c.Prefix, w); err != nil {
				return nil, err
			}
		}
		if c.Speculative.Tokens > 0 {
			b.Dev.ReleaseCache()
			if rep.Speculative, err = RunLLMSpeculative(b.Dev, candle.BF16, c.Model, c.Speculative, w); err != nil {
				return nil, err
			}
		}
	}
	for _, typ := range c.Quant {
		b.Dev.ReleaseCache()
		path := fmt.Sprintf("%s-%s.gguf", filepath.Clean(c.Model), strings.ToLower(typ.String()))
		if err := PrepareGGUF(path, c.Spec, typ, w); err != nil {
			return nil, err
		}
		q, err := RunLLMQuant(b.Dev, path, c.Settings, rep.CopyGBps, w)
		if err != nil {
			return nil, err
		}
		rep.Quant = append(rep.Quant, q)
	}
	if len(rep.Quant) > 0 {
		rep.QuantRows = LLMQuantRows(c.Settings, rep.Ours, rep.Quant)
	}
	// The model is closed: give its memory back to the device for PyTorch.
	b.Dev.ReleaseCache()
	switch {
	case c.QuantOnly:
		rep.NoReference = "only the GGUF models were measured"
	case c.Python == "":
		rep.NoReference = "not asked for"
	default:
		if err := checkTransformers(c.Python); err != nil {
			rep.NoReference = err.Error()
			break
		}
		fmt.Fprintf(w, "transformers: running torch_llm.py (%s; compiled: sdpa, static cache and torch.compile)…\n", strings.Join(orPeers(c.Peers), ", "))
		start := time.Now()
		tf, err := RunLLMTransformers(c.Python, c.Script, c.Model, c.Settings, c.Peers)
		if err != nil {
			rep.NoReference = lastChars(err.Error(), 3000)
			break
		}
		rep.Transformers = tf
		fmt.Fprintf(w, "transformers %s, PyTorch %s on %s: %.1f s\n", tf.Transformers, tf.Torch, tf.GPU, time.Since(start).Seconds())
		for name, why := range tf.Skipped {
			fmt.Fprintf(w, "transformers: no %s attention: %s\n", name, why)
		}
	}
	if rep.NoReference != "" {
		fmt.Fprintf(w, "transformers: SKIPPED: %s\n", rep.NoReference)
	}
	ref := "eager"
	if rep.Transformers != nil && rep.Transformers.Runs[ref] == nil {
		for name := range rep.Transformers.Runs {
			ref = name
		}
	}
	if rep.Ours != nil {
		rep.Rows = LLMRows(c.Settings, rep.Ours, rep.Transformers, ref, rep.RooflineTokS)
		if rep.Prefix != nil {
			rep.Rows = append(rep.Rows, rep.Prefix.Row())
		}
		if rep.Speculative != nil {
			rep.Rows = append(rep.Rows, rep.Speculative.Row())
		}
		PrintTable(w, "transformers ("+ref+" attention)", rep.Rows)
		if rep.CompiledRows = CompiledRows(c.Settings, rep.Ours, rep.Transformers, rep.RooflineTokS); rep.CompiledRows != nil {
			PrintTable(w, "transformers compiled (static cache, torch.compile)", rep.CompiledRows)
		}
	}
	if len(rep.QuantRows) > 0 {
		bf16Ref := "the BF16 model"
		if c.QuantOnly {
			bf16Ref += " (not run)"
		}
		PrintTable(w, bf16Ref, rep.QuantRows)
	}
	return rep, nil
}

// checkTransformers reports, in one line, why python cannot run the
// transformers side: no python, no torch or transformers, no GPU.
func checkTransformers(python string) error {
	if _, err := exec.LookPath(python); err != nil {
		return fmt.Errorf("no %s: %v", python, err)
	}
	out, err := exec.Command(python, "-c", "import sys, torch, transformers\n"+
		"sys.exit(0 if torch.cuda.is_available() else 'torch sees no GPU (torch.cuda.is_available() is False)')").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s cannot run transformers on a GPU: %s", python, lastChars(strings.TrimSpace(string(out)), 300))
	}
	return nil
}

// readConfig reads the config.json of a model folder.
func readConfig(dir string) (*llama.Config, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	return llama.ParseConfig(b)
}
