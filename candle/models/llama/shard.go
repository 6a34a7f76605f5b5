package llama

import (
	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/errs"
)

// shard is one rank's part of a model split over the ranks of a group
// (Megatron-style tensor parallelism): its query heads, its KV heads, its
// rows of the MLP's intermediate and of the vocabulary. A model on one
// device is the one shard of a group of one, with no member.
type shard struct {
	rank, size int
	member     *candle.Member // nil on one device

	heads, headStart  int // query heads [headStart, headStart+heads)
	kvHeads, kvStart  int // KV heads [kvStart, kvStart+kvHeads): replicated when fewer than the ranks
	inter, interStart int
	// vocab rows of the embedding and the LM head from vocabStart; the
	// last ranks' rows past the vocabulary are zeros (vocabReal real
	// rows), so that every rank's logits have one shape to gather.
	vocab, vocabStart, vocabReal int
}

// whole is the shard of a model on one device.
func whole(c *Config) shard {
	return shard{size: 1, heads: c.Heads, kvHeads: c.KVHeads, inter: c.IntermediateSize, vocab: c.VocabSize, vocabReal: c.VocabSize}
}

// CheckTensorParallel says whether a model of config c splits over n
// ranks: n divides the attention heads and the intermediate size, and
// either n divides the KV heads or the KV heads divide n (each then
// replicated on n/KVHeads ranks, as vLLM does). A vocabulary n does not
// divide is padded, not refused: each rank holds ⌈vocab/n⌉ rows.
func CheckTensorParallel(c *Config, n int) error {
	const op = "CheckTensorParallel"
	switch {
	case n < 1:
		return pkg.Errorf(op, errs.ErrArgument, "%d ranks: want at least one", n)
	case c.Heads%n != 0:
		return pkg.Errorf(op, errs.ErrArgument, "%d attention heads over %d devices: the devices must divide the heads", c.Heads, n)
	case c.KVHeads%n != 0 && n%c.KVHeads != 0:
		return pkg.Errorf(op, errs.ErrArgument, "%d KV heads over %d devices: the devices must divide the KV heads, or the KV heads the devices (each then on %d/KV heads devices)", c.KVHeads, n, n)
	case c.IntermediateSize%n != 0:
		return pkg.Errorf(op, errs.ErrArgument, "intermediate size %d over %d devices: the devices must divide it (it is not padded)", c.IntermediateSize, n)
	case shardOf(c, n-1, n, nil).vocabReal == 0:
		return pkg.Errorf(op, errs.ErrArgument, "a vocabulary of %d over %d devices leaves the last none of it", c.VocabSize, n)
	}
	return nil
}

// shardOf is rank r's shard of a model of config c over n ranks, checked
// by CheckTensorParallel.
func shardOf(c *Config, r, n int, member *candle.Member) shard {
	s := shard{rank: r, size: n, member: member, heads: c.Heads / n, inter: c.IntermediateSize / n}
	s.headStart, s.interStart = r*s.heads, r*s.inter
	if c.KVHeads >= n {
		s.kvHeads = c.KVHeads / n
		s.kvStart = r * s.kvHeads
	} else { // replicated: rank r's query heads all share KV head r·KVHeads/n
		s.kvHeads, s.kvStart = 1, r*c.KVHeads/n
	}
	s.vocab = (c.VocabSize + n - 1) / n
	s.vocabStart = r * s.vocab
	s.vocabReal = max(0, min(s.vocab, c.VocabSize-s.vocabStart))
	return s
}

// split reports whether the model is split over several ranks.
func (s *shard) split() bool { return s.member != nil }

// cut is the part of a weight a rank loads: elements [start, start+n) of
// dim d; n == 0 is the whole weight.
type cut struct{ d, start, n int }

// rowsCut and colsCut are the rank's rows or columns [start, start+n).
func rowsCut(start, n int) cut { return cut{0, start, n} }
func colsCut(start, n int) cut { return cut{1, start, n} }

// of is the shape of the part of a weight of shape full.
func (k cut) of(full []int) []int {
	out := append([]int(nil), full...)
	if k.n > 0 {
		out[k.d] = k.n
	}
	return out
}

// all reports whether the cut is the whole of a weight of shape full.
func (k cut) all(full []int) bool { return k.n == 0 || k.start == 0 && k.n == full[k.d] }

// padRows pads t (rows, ...) with zero rows to rows; it takes t.
func padRows(t *candle.Tensor, rows int) (*candle.Tensor, error) {
	shape := t.Shape()
	if shape[0] == rows {
		return t, nil
	}
	defer t.Close()
	shape[0] = rows - shape[0]
	z, err := candle.Zeros(t.Device(), t.DType(), shape...)
	if err != nil {
		return nil, err
	}
	defer z.Close()
	return candle.Cat([]*candle.Tensor{t, z}, 0)
}

// embedRows is the hidden states of the step's tokens (T) from the
// rank's rows of the embedding table: the rows of the tokens in the
// rank's part of the vocabulary, zeros for the others, summed over the
// ranks (vocabulary-parallel embedding). The masking runs on the device,
// from the step's tokens, so a decode graph replays it.
func (m *Model) embedRows(f *models.Pass, ids *candle.Tensor) *candle.Tensor {
	s := &m.sh
	lookup := func(ids *candle.Tensor) *candle.Tensor {
		if m.embedQ != nil {
			return f.T(m.embedQ.Rows(ids, m.dtype))
		}
		return f.T(m.embed.IndexSelect(ids, 0))
	}
	if !s.split() {
		return lookup(ids)
	}
	// F32 holds every token id exactly (vocabularies are far below 2²⁴).
	local := f.T(f.T(ids.ToDType(candle.F32)).Affine(1, -float64(s.vocabStart)))
	clamped := f.T(local.Clamp(0, float64(s.vocab-1)))
	mask := f.T(f.T(local.Eq(clamped)).ToDType(m.dtype)) // 1 where the token is the rank's
	rows := lookup(f.T(clamped.ToDType(candle.U32)))     // (T, hidden)
	if f.Err != nil {
		return nil
	}
	shape := rows.Shape()
	mask = f.T(f.T(mask.Reshape(shape[0], 1)).BroadcastAs(shape...))
	return m.allReduce(f, f.T(rows.Mul(mask)))
}

// allReduce is the sum of x over the ranks (row-parallel products'
// partial sums); x itself on one device.
func (m *Model) allReduce(f *models.Pass, x *candle.Tensor) *candle.Tensor {
	if f.Err != nil || !m.sh.split() {
		return x
	}
	return f.Own(m.sh.member.AllReduce(x, candle.ReduceSum))
}

// gatherLogits is every rank's logits (T, vocab part) side by side, the
// padding past the vocabulary cut off: (T, vocab). On one device, x.
func (m *Model) gatherLogits(f *models.Pass, x *candle.Tensor) *candle.Tensor {
	if f.Err != nil || !m.sh.split() {
		return x
	}
	all := f.Own(m.sh.member.AllGather(x, 1))
	if v := m.cfg.VocabSize; f.Err == nil && all.Shape()[1] != v {
		all = f.T(all.Narrow(1, 0, v))
	}
	return all
}
