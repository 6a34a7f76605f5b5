package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/gguf"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/models/llama"
	"github.com/rocm-go/rocm/internal/mkmodel"
)

// LLMQuantFigures are a GGUF model's figures: its weights' bytes, the
// roofline they give batch-1 decode, prefill and decode rates by batch.
type LLMQuantFigures struct {
	Type         string             `json:"type"`
	WeightBytes  int64              `json:"weight_bytes"`
	RooflineTokS float64            `json:"roofline_tok_s"`
	Prefill      map[string]float64 `json:"prefill_tok_s"`
	Decode       map[string]float64 `json:"decode_tok_s"`
}

// PrepareGGUF writes the spec's model as a GGUF file of typ at path,
// unless the file there already holds it (as PrepareLLMModel reuses a
// folder); a file of another model or type is refused, never overwritten.
func PrepareGGUF(path string, spec mkmodel.Spec, typ candle.GGMLType, w io.Writer) error {
	if _, err := os.Stat(path); err == nil {
		ck, err := models.Open(path)
		if err == nil && ck.Format != models.GGUF {
			ck.Close()
			err = fmt.Errorf("%s", ck.Format)
		}
		if err != nil {
			return fmt.Errorf("llm bench: %s does not read as GGUF (%v): remove it", path, err)
		}
		defer ck.Close()
		c, err := llama.ConfigOf(ck)
		hasType := slices.ContainsFunc(ck.GGUF.Tensors(), func(t gguf.TensorInfo) bool { return t.Type == typ })
		if err != nil || !specShaped(c, spec) || !hasType {
			return fmt.Errorf("llm bench: %s holds another model or type than the spec's in %s: remove it", path, typ)
		}
		fmt.Fprintf(w, "reusing %s\n", path)
		return nil
	}
	start := time.Now()
	if err := mkmodel.WriteGGUF(path, spec, typ, nil); err != nil {
		os.Remove(path) // a partial file would be refused next time
		return fmt.Errorf("llm bench: writing %s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s (%s) in %.1f s\n", path, humanize.IBytes(uint64(st.Size())), time.Since(start).Seconds())
	return nil
}

// RunLLMQuant loads a GGUF model computing in BF16 and measures prefill
// and greedy decode (graphs on) at each batch, against the roofline of its
// weights' bytes at copyGBps.
func RunLLMQuant(dev *candle.HIPDevice, path string, s LLMSettings, copyGBps float64, w io.Writer) (*LLMQuantFigures, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ck, err := models.Open(path)
	if err != nil {
		return nil, err
	}
	if ck.Format != models.GGUF {
		ck.Close()
		return nil, fmt.Errorf("llm bench: %s is %s, not a GGUF file", path, ck.Format)
	}
	q := &LLMQuantFigures{Prefill: map[string]float64{}, Decode: map[string]float64{}}
	for _, t := range ck.GGUF.Tensors() {
		q.WeightBytes += int64(t.Bytes)
		if t.Name == "blk.0.attn_q.weight" {
			q.Type = t.Type.String()
		}
	}
	q.RooflineTokS = Roofline(q.WeightBytes, copyGBps)
	m, err := llama.New(ck, dev, candle.BF16, llama.Options{CacheTokens: s.CacheTokens(models.DefaultPageSize), PageSize: models.DefaultPageSize, MaxBatch: s.maxBatch()})
	ck.Close()
	if err != nil {
		return nil, fmt.Errorf("llm bench: loading %s: %w", path, err)
	}
	defer m.Close()
	fmt.Fprintf(w, "%s: %s of weights, batch-1 decode roofline %.0f tok/s\n", q.Type, humanize.IBytes(uint64(q.WeightBytes)), q.RooflineTokS)
	r := &llmRun{m: m, dev: dev, s: s, rng: rand.New(rand.NewPCG(s.Seed, 7)), vocab: m.VocabSize()}
	for _, b := range s.Batches {
		d, err := Median(s.Reps, func() (time.Duration, error) { return r.prefill(b) })
		if err != nil {
			return nil, err
		}
		q.Prefill[key(b)] = float64(b*s.Prompt) / d.Seconds()
		d, err = Median(s.decodeReps(), func() (time.Duration, error) { return r.decode(b) })
		if err != nil {
			return nil, err
		}
		q.Decode[key(b)] = float64(b*(s.Steps-1)) / d.Seconds()
		fmt.Fprintf(w, "%s: batch %d: prefill %.0f tok/s, greedy decode %.1f tok/s (%s a step)\n", q.Type, b, q.Prefill[key(b)], q.Decode[key(b)],
			msf(d/time.Duration(s.Steps-1)))
	}
	return q, nil
}

// LLMQuantRows are the quantized models' rows: decode against their
// weights' roofline and against the BF16 model's decode.
func LLMQuantRows(s LLMSettings, bf16 *LLMFigures, qs []*LLMQuantFigures) []Row {
	var rows []Row
	for _, q := range qs {
		for _, b := range s.Batches {
			r := Row{Name: fmt.Sprintf("%s model, greedy decode, batch %d (reference: the BF16 model)", q.Type, b),
				Ours: fmt.Sprintf("%.1f tok/s", q.Decode[key(b)])}
			if bf16 != nil && bf16.Decode[key(b)] > 0 {
				r.Theirs = fmt.Sprintf("%.1f tok/s", bf16.Decode[key(b)])
				r.Ratio = q.Decode[key(b)] / bf16.Decode[key(b)]
			}
			if b == 1 {
				frac := q.Decode[key(b)] / q.RooflineTokS
				r.Ours += fmt.Sprintf(", %.2f of its roofline (%.0f tok/s)", frac, q.RooflineTokS)
				if q.Type == "Q4_K" {
					r.Target = "≥ 0.6 of the roofline"
					r.Met = Met(frac >= 0.6)
				} else {
					r.Target = "reported"
				}
			} else {
				r.Target = "reported"
			}
			rows = append(rows, r)
			if b == s.Batches[0] {
				rows = append(rows, Row{Name: fmt.Sprintf("%s model, prefill of %d tokens, batch %d", q.Type, s.Prompt, b),
					Ours: fmt.Sprintf("%.0f tok/s", q.Prefill[key(b)]), Target: "reported"})
				if bf16 != nil && bf16.Prefill[key(b)] > 0 {
					last := &rows[len(rows)-1]
					last.Theirs = fmt.Sprintf("%.0f tok/s", bf16.Prefill[key(b)])
					last.Ratio = q.Prefill[key(b)] / bf16.Prefill[key(b)]
				}
			}
		}
	}
	return rows
}
