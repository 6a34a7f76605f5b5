package mkmodel

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/rocm-go/rocm/candle"
)

// OnDevice is a checkpoint of a spec with no file: its config.json, and
// weights each made on the device that loads it, as random numbers of the
// spec's scales (candle.RandNormal), the whole tensor or only the part a
// rank of a tensor-parallel model loads. It is for benchmarks of models
// too large to write and read in a run: two loads of a tensor give
// different numbers, and the spec's Seed is not used. Vocab must be set
// (there is no tokenizer). A models.Checkpoint of Format HuggingFace
// holding both is what an architecture builds its model from.
func OnDevice(s Spec) (config []byte, weights candle.SlicedWeights, err error) {
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	if s.Vocab < 1 {
		return nil, nil, fmt.Errorf("mkmodel: OnDevice needs the spec's Vocab: it makes no tokenizer")
	}
	cfg, err := json.Marshal(s.config())
	if err != nil {
		return nil, nil, fmt.Errorf("mkmodel: %w", err)
	}
	w := deviceWeights{dtype: s.DType, specs: map[string]tensorSpec{}}
	for _, t := range s.tensors() {
		w.specs[t.name] = t
	}
	return cfg, w, nil
}

// deviceWeights are OnDevice's weights.
type deviceWeights struct {
	dtype candle.DType
	specs map[string]tensorSpec
}

var _ candle.SlicedWeights = deviceWeights{}

func (w deviceWeights) Names() []string {
	names := make([]string, 0, len(w.specs))
	for n := range w.specs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (w deviceWeights) Info(name string) (candle.WeightInfo, bool) {
	t, ok := w.specs[name]
	if !ok {
		return candle.WeightInfo{}, false
	}
	return candle.WeightInfo{Shape: slices.Clone(t.shape), Type: w.dtype.String(), Dense: true, DType: w.dtype}, true
}

func (w deviceWeights) Load(name string, dev candle.Device) (*candle.Tensor, error) {
	t, ok := w.specs[name]
	if !ok {
		return nil, fmt.Errorf("mkmodel: no tensor %q", name)
	}
	return candle.RandNormal(dev, w.dtype, t.mean, t.std, t.shape...)
}

func (w deviceWeights) LoadSlice(name string, dev candle.Device, d, start, n int) (*candle.Tensor, error) {
	t, ok := w.specs[name]
	switch {
	case !ok:
		return nil, fmt.Errorf("mkmodel: no tensor %q", name)
	case d < 0 || d >= len(t.shape) || start < 0 || n < 1 || start+n > t.shape[d]:
		return nil, fmt.Errorf("mkmodel: tensor %q %v: no elements [%d, %d) of dim %d", name, t.shape, start, start+n, d)
	}
	shape := slices.Clone(t.shape)
	shape[d] = n
	return candle.RandNormal(dev, w.dtype, t.mean, t.std, shape...)
}

func (w deviceWeights) LoadQ(name string, dev candle.Device) (*candle.QTensor, error) {
	return nil, fmt.Errorf("mkmodel: tensor %q is %s, not quantized", name, w.dtype)
}

func (w deviceWeights) LoadQSlice(name string, dev candle.Device, d, start, n int) (*candle.QTensor, error) {
	return w.LoadQ(name, dev)
}

func (deviceWeights) TransferStats() candle.TransferStats { return candle.TransferStats{} }
func (deviceWeights) Close() error                        { return nil }
