package candle

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
)

// Sampling: one token id per row of a language model's logits, on the
// device, so that only the ids come back to the host. The processors run
// in the order of Hugging Face transformers' logits processors, after an
// additive bias:
//
//  0. bias (SampleOptions.Bias): a term added to a token's logit (OpenAI's
//     logit_bias, presence and frequency penalties);
//  1. repetition penalty (CTRL): a previous token's logit is divided by
//     the penalty when positive, multiplied by it when negative;
//  2. temperature: the logits are divided by it (0 is greedy: the
//     penalised row's argmax, ties to the lowest id, as Argmax);
//  3. top-k: the values below the k-th largest go;
//  4. top-p: the values go whose larger values alone hold a mass of at
//     least p of the distribution left by top-k (the smallest set of mass
//     ≥ p stays, and always the largest value);
//  5. min-p: the values go whose probability is below min-p times the
//     largest probability;
//  6. a draw from what is left, in proportion to exp(logit).
//
// Every filter keeps a value's ties: a filter is a threshold on the
// value, so that no order among equal values is needed. The draw is the
// Gumbel-max trick: the kept token with the largest z - log(E), where E is
// an exponential variate of the token from Philox4x32-10, keyed by the
// row's seed and counted by the row's step and the token id. A row's draw
// thus depends only on its own logits, settings, seed and step, never on
// the other rows of the batch, and the CPU and the GPU draw the same token
// (up to float rounding where two candidates are within an ulp). NaN
// logits are never drawn (greedy follows Argmax, to which NaN is the
// largest); a row whose largest logit is infinite, or that has no number,
// gives its first largest.
//
// On the GPU (kernels/sample.hip) each row is cut into spans, a block a
// span, so that one row of a large vocabulary keeps dozens of compute
// units busy, and the last block of a row to finish a pass combines the
// row: a pass for the maximum (where greedy rows and rows with only a
// temperature end, their blocks drawing in the same pass), for top-k and
// top-p a pass for a histogram of the values' top 12 bits, and a pass for
// the draw, whose last block finds the thresholds among the values of
// their bins (a radix select; top-p weighs each value by its probability
// in 40-bit fixed point, so that the sums are exact and the result
// deterministic). No row is sorted; at most four launches a call.
//
// The repetition penalty reads the previous tokens either from a list per
// call (SampleOptions.Previous, uploaded each time) or from a TokenHistory
// on the device, which the draw extends (SampleOptions.History): with it,
// a step of a generation loop uploads only its rows' settings.

// SampleOptions are one row's settings for Tensor.Sample. The zero value
// is greedy decoding.
type SampleOptions struct {
	// Temperature divides the logits; 0 is greedy (argmax).
	Temperature float32
	// TopK keeps the k largest logits (and their ties); 0 (or ≥ the
	// vocabulary) is off, 1 is greedy.
	TopK int
	// TopP keeps the smallest set of largest logits whose probability
	// reaches it, in (0, 1); 0 and 1 are off.
	TopP float32
	// MinP drops the tokens whose probability is below MinP times the
	// largest, in [0, 1]; 0 is off.
	MinP float32
	// RepetitionPenalty penalises the Previous tokens, or those of the
	// History slot (> 0; 0 and 1 are off).
	RepetitionPenalty float32
	// Previous are the token ids the penalty applies to (a token listed
	// twice is penalised once).
	Previous []int32
	// History, when set, holds the row's previous tokens on the device in
	// place of Previous (a row takes one or the other): the penalty
	// applies to the tokens of its slot HistorySlot, and the token drawn
	// joins the slot (whether or not the penalty is on), so that the next
	// call sees it. The rows of one call name distinct slots.
	History     *TokenHistory
	HistorySlot int
	// Bias are terms added to the logits of their tokens before the other
	// processors (terms for one token add up); they apply to this call
	// only. A row with a bias draws from an F32 copy of its logits.
	Bias []TokenBias
	// Seed keys the row's random numbers and Step counts its draws: the
	// same seed, step, settings and logits draw the same token.
	Seed, Step uint64
}

// greedy reports whether the options choose the argmax.
func (o *SampleOptions) greedy() bool { return o.Temperature == 0 || o.TopK == 1 }

// sampleRow is one row's settings as the kernel reads them (sample.hip's
// SampleRow), with the filters that are off normalised away: topK 0, topP
// 0, minP 0, penalty 1 with no previous tokens. Bits and Record are device
// addresses the GPU's backend sets: the penalised tokens' bitmap and the
// history slot the draw joins (0 for none).
type sampleRow struct {
	Temperature, TopP, MinP, Penalty float32
	TopK, PrevCount                  uint32
	PrevOffset, Seed, Step           uint64
	Bits, Record                     uint64
}

// sampleRow is sample.hip's SampleRow byte for byte (a static_assert there).
var (
	_ [unsafe.Sizeof(sampleRow{}) - 64]struct{}
	_ [64 - unsafe.Sizeof(sampleRow{})]struct{}
)

// sampleMaxCols bounds the vocabulary: top-p's 40-bit fixed-point masses
// of a row sum to less than 2⁶⁴.
const sampleMaxCols = 1 << 24

// Sample draws one token id from each row of logits (rows, vocab) of
// F32, F16 or BF16, with each row's options (len(opts) == rows), and
// returns them as a U32 tensor (rows) on the logits' device. See the
// package's notes on sampling above for the order of the processors and
// the random numbers.
func (t *Tensor) Sample(opts []SampleOptions) (*Tensor, error) {
	const op = "Tensor.Sample"
	in, err := t.logitsInput(op, opts)
	if err != nil {
		return nil, err
	}
	rows, cols := in.rows, in.cols
	out, err := newOutput(op, t.st.dev, U32, Shape{rows}, t)
	if err != nil || rows == 0 {
		return out, err
	}
	x := t
	switch {
	case len(in.at) > 0:
		// The biased logits are a copy: the caller's stay as they are.
		x, err = t.logitsF32(op, in.at, in.add)
	case !t.layout.IsContiguous():
		x, err = t.Copy()
	}
	if err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	if x != t {
		defer x.Close()
	}
	if err := t.st.dev.backend().sample(x.v(), out.st, rows, cols, in.ps, in.prev, in.hist); err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return out, nil
}

// sampleParams checks the options and returns them as the kernel reads
// them, with every row's previous tokens in one slice, and each row's
// history (nil when no row has one).
func sampleParams(op string, dev Device, opts []SampleOptions, cols int) ([]sampleRow, []int32, []sampleHist, error) {
	ps := make([]sampleRow, len(opts))
	n := 0
	for i := range opts {
		n += len(opts[i].Previous)
	}
	var prev []int32
	var hist []sampleHist
	var slots map[sampleHist]int // the row of each history slot in use
	for i := range opts {
		o := &opts[i]
		finite := func(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }
		switch {
		case !finite(o.Temperature) || o.Temperature < 0:
			return nil, nil, nil, pkg.Errorf(op, ErrArgument, "row %d: temperature %v: want a finite value ≥ 0 (0 is greedy)", i, o.Temperature)
		case o.TopK < 0:
			return nil, nil, nil, pkg.Errorf(op, ErrArgument, "row %d: top-k %d: want ≥ 0 (0 is off)", i, o.TopK)
		case !(o.TopP >= 0 && o.TopP <= 1):
			return nil, nil, nil, pkg.Errorf(op, ErrArgument, "row %d: top-p %v: want 0 to 1 (0 and 1 are off)", i, o.TopP)
		case !(o.MinP >= 0 && o.MinP <= 1):
			return nil, nil, nil, pkg.Errorf(op, ErrArgument, "row %d: min-p %v: want 0 to 1 (0 is off)", i, o.MinP)
		case !finite(o.RepetitionPenalty) || o.RepetitionPenalty < 0:
			return nil, nil, nil, pkg.Errorf(op, ErrArgument, "row %d: repetition penalty %v: want a finite value > 0 (0 and 1 are off)", i, o.RepetitionPenalty)
		}
		p := sampleRow{Temperature: o.Temperature, TopP: o.TopP, MinP: o.MinP, Penalty: 1, Seed: o.Seed, Step: o.Step}
		if o.greedy() {
			p.Temperature = 0
		}
		if o.TopK > 0 && o.TopK < cols {
			p.TopK = uint32(o.TopK)
		}
		if p.TopP >= 1 {
			p.TopP = 0
		}
		penalty := o.RepetitionPenalty != 0 && o.RepetitionPenalty != 1
		if h := o.History; h != nil {
			if err := h.check(op, o.HistorySlot); err != nil {
				e := err.(*Error)
				e.Detail = fmt.Sprintf("row %d: %s", i, e.Detail)
				return nil, nil, nil, e
			}
			switch {
			case len(o.Previous) > 0:
				return nil, nil, nil, pkg.Errorf(op, ErrArgument, "row %d: both Previous and History: give the previous tokens one way", i)
			case h.st.dev != dev:
				return nil, nil, nil, pkg.Errorf(op, ErrDevice, "row %d: a token history on %s for logits on %s: make it on the logits' device", i, h.st.dev, dev)
			case h.vocab != cols:
				return nil, nil, nil, pkg.Errorf(op, ErrShape, "row %d: a token history of a vocabulary of %d for logits of %d", i, h.vocab, cols)
			}
			r := sampleHist{h.st, o.HistorySlot * historyWords(cols)}
			if slots == nil {
				slots = map[sampleHist]int{}
				hist = make([]sampleHist, len(opts))
			}
			if j, dup := slots[r]; dup {
				return nil, nil, nil, pkg.Errorf(op, ErrArgument, "rows %d and %d name history slot %d: each row draws into its own slot", j, i, o.HistorySlot)
			}
			slots[r], hist[i] = i, r
			if penalty {
				p.Penalty = o.RepetitionPenalty
			}
		} else if penalty && len(o.Previous) > 0 {
			for _, id := range o.Previous {
				if id < 0 || int(id) >= cols {
					return nil, nil, nil, pkg.Errorf(op, ErrIndex, "row %d: previous token %d: want 0 to %d (the vocabulary)", i, id, cols-1)
				}
			}
			if prev == nil {
				prev = make([]int32, 0, n)
			}
			p.Penalty = o.RepetitionPenalty
			p.PrevOffset, p.PrevCount = uint64(len(prev)), uint32(len(o.Previous))
			prev = append(prev, o.Previous...)
		}
		ps[i] = p
	}
	return ps, prev, hist, nil
}

// The row's random numbers and keys, shared by both devices.

// sampleTag is the fourth word of the Philox counter of a draw, so that
// sampling's stream differs from RandUniform's of the same seed.
const sampleTag = 0x73616d70 // "samp"

// sampleUniform is the uniform variate in (0, 1) of a draw's Philox word,
// computed in float32 as the kernel does: (r + ½)·2⁻³², below 1.
func sampleUniform(r uint32) float32 {
	v := (float32(r) + 0.5) * 0x1p-32
	return min(v, 0x1.fffffep-1)
}

// samplePrune: a value more than this below the row's largest cannot win
// the draw (a Gumbel variate lies in [-2.82, 22.88] for the uniforms of
// sampleUniform), so it needs no random number.
const samplePrune = 26

// fkey maps a float32 to a key whose unsigned order is the numbers' (-0
// is +0, NaN above +Inf).
func fkey(f float32) uint32 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return 0xffffffff
	}
	if u == 0x80000000 {
		u = 0
	}
	if u&0x80000000 != 0 {
		return ^u
	}
	return u | 0x80000000
}

// sampleMass is a probability exp(z - m) ∈ [0, 1] in 40-bit fixed point,
// as top-p weighs it.
func sampleMass(z, m float32) uint64 {
	e := float32(math.Exp(float64(z - m)))
	return uint64(e * 0x1p40)
}

// The CPU's sampling: the same steps as the kernel's, with a sort in place
// of the radix selects.

// sampleScratch is a row's working memory on the CPU, reused.
type sampleScratch struct {
	z    []float32
	keys []uint32
	idx  []int32
}

var sampleScratchPool = sync.Pool{New: func() any { return new(sampleScratch) }}

func (c *cpuBackend) sample(x view, dst *Storage, rows, cols int, ps []sampleRow, prev []int32, hist []sampleHist) error {
	s := sampleScratchPool.Get().(*sampleScratch)
	defer sampleScratchPool.Put(s)
	if cap(s.z) < cols {
		s.z, s.keys, s.idx = make([]float32, cols), make([]uint32, cols), make([]int32, cols)
	}
	z, keys, idx := s.z[:cols], s.keys[:cols], s.idx[:cols]
	in, out := dataOf(x.st), dataOf(dst)
	words := historyWords(cols)
	for r := range rows {
		p := &ps[r]
		base := x.l.Offset + r*cols
		for i := range z {
			z[i] = float32(in.f(base + i))
		}
		penalise := func(id int) {
			if v := z[id]; v < 0 {
				z[id] = v * p.Penalty
			} else {
				z[id] = v / p.Penalty
			}
		}
		var slot []uint32
		if hist != nil && hist[r].st != nil {
			slot = hist[r].cpuWords(words)
			if p.Penalty != 1 {
				for w, v := range slot {
					for ; v != 0; v &= v - 1 {
						penalise(w*32 + bits.TrailingZeros32(v))
					}
				}
			}
		} else {
			for _, id := range prev[p.PrevOffset : p.PrevOffset+uint64(p.PrevCount)] {
				z[id] = float32(in.f(base + int(id))) // from the logit, so that a repeated id is penalised once
				penalise(int(id))
			}
		}
		id := cpuSampleRow(p, z, keys, idx)
		out.setI(r, int64(id))
		if slot != nil {
			slot[id>>5] |= 1 << (id & 31)
		}
	}
	return nil
}

// cpuSampleRow draws from one row of penalised logits z (overwritten).
func cpuSampleRow(p *sampleRow, z []float32, keys []uint32, idx []int32) int {
	greedy := p.Temperature == 0
	if !greedy {
		for i := range z {
			z[i] /= p.Temperature
		}
	}
	// The largest: NaN the largest when greedy (as Argmax), the smallest
	// when drawing (never drawn).
	best, bestKey := 0, uint32(0)
	for i, v := range z {
		k := fkey(v)
		if !greedy && v != v {
			k = 0
		}
		if k > bestKey || i == 0 {
			best, bestKey = i, k
		}
	}
	m := z[best]
	if greedy || math.IsInf(float64(m), 0) || m != m {
		return best
	}
	// Top-k: the k-th largest key of the numbers.
	tauK := uint32(0)
	n := 0
	for _, v := range z {
		if v == v {
			keys[n] = fkey(v)
			n++
		}
	}
	if p.TopK > 0 && int(p.TopK) <= n {
		ks := keys[:n]
		slices.SortFunc(ks, func(a, b uint32) int { return cmp.Compare(b, a) })
		tauK = ks[p.TopK-1]
	}
	// Top-p: the largest value whose larger values hold less than p of the
	// mass of what top-k left.
	tauP := uint32(0)
	if p.TopP > 0 {
		n = 0
		var total uint64
		for i, v := range z {
			if v == v && fkey(v) >= tauK {
				idx[n] = int32(i)
				n++
				total += sampleMass(v, m)
			}
		}
		kept := idx[:n]
		slices.SortFunc(kept, func(a, b int32) int { return cmp.Compare(fkey(z[b]), fkey(z[a])) })
		target := uint64(math.Ceil(float64(p.TopP) * float64(total)))
		var above uint64
		for j := 0; j < len(kept); {
			k := fkey(z[kept[j]])
			var mass uint64
			for ; j < len(kept) && fkey(z[kept[j]]) == k; j++ {
				mass += sampleMass(z[kept[j]], m)
			}
			if above < target && target <= above+mass {
				tauP = k
				break
			}
			above += mass
		}
	}
	tau := max(tauK, tauP)
	// The draw: the kept token of the largest z - log(E).
	draw, drawScore := best, math.Inf(-1)
	for i, v := range z {
		if v != v || fkey(v) < tau || v < m-samplePrune || (p.MinP > 0 && float32(math.Exp(float64(v-m))) < p.MinP) {
			continue
		}
		r := philox([4]uint32{uint32(i >> 2), uint32(p.Step), uint32(p.Step >> 32), sampleTag}, [2]uint32{uint32(p.Seed), uint32(p.Seed >> 32)})
		u := sampleUniform(r[i&3])
		score := float64(v) - math.Log(-math.Log1p(-float64(u)))
		if score > drawScore {
			draw, drawScore = i, score
		}
	}
	return draw
}

// The GPU's sampling (kernels/sample.hip).

// The sizes of sample.hip: SAMPLE_BLOCK, SampleState, SAMPLE_BINS and
// SAMPLE_CAND.
const (
	sampleBlock     = 512
	sampleStateSize = 72
	sampleBins      = 4096
	sampleCand      = 8192
)

// sampleMaxGrid bounds a sampling grid's blocks (AMD refuses grids of 2³²
// threads or more); the kernels loop over the units a grid does not cover.
const sampleMaxGrid = 1<<32/sampleBlock - 1

func (b *hipBackend) sample(x view, dst *Storage, rows, cols int, ps []sampleRow, prev []int32, hist []sampleHist) error {
	// Which passes the rows need: the histogram for top-k and top-p, the
	// draw for any filter (greedy rows and rows with only a temperature
	// are done after the first).
	hists, draws := false, false
	for i := range ps {
		if p := &ps[i]; p.Temperature > 0 {
			hists = hists || p.TopK > 0 || p.TopP > 0
			draws = draws || p.TopK > 0 || p.TopP > 0 || p.MinP > 0
		}
	}
	var scratch hip.DevicePtr
	if hists {
		// Each row's histogram and candidates.
		sc, err := b.pool.get(rows * (sampleBins + sampleCand) * 8)
		if err != nil {
			return err
		}
		defer sc.release()
		scratch = sc.buf.Ptr()
	}
	bm, err := b.penaltyBits(cols, ps, prev, hist, true)
	if err != nil {
		return err
	}
	if bm != nil {
		defer bm.release()
	}
	// One copy to the device: the settings, the rows' states (zeros) and
	// the previous tokens.
	pb, sb := len(ps)*int(unsafe.Sizeof(sampleRow{})), rows*sampleStateSize
	buf := make([]byte, pb+sb+4*len(prev))
	copy(buf, unsafe.Slice((*byte)(unsafe.Pointer(&ps[0])), pb))
	copy(buf[pb+sb:], hip.AsBytes(prev))
	blk, err := b.upload(buf)
	if err != nil {
		return err
	}
	defer blk.release()
	params := blk.buf.Ptr()
	state, prevPtr := params.Add(pb), params.Add(pb+sb)
	var hist0, cand hip.DevicePtr
	if hists {
		hist0, cand = scratch, scratch.Add(rows*sampleBins*8)
	}
	blockDim := hip.Dim3{X: sampleBlock}
	if err := b.fillPrev(rows, cols, prev, params, prevPtr); err != nil {
		return err
	}
	span, parts := b.sampleSpan(rows, cols)
	grid := hip.Dim3{X: uint32(min(rows*parts, sampleMaxGrid))}
	in, out := ptr(x), storagePtr(dst)
	args := func(a *hip.Args) {
		a.Uint64(uint64(rows)).Uint64(uint64(cols)).Uint64(uint64(span)).Uint32(uint32(parts))
		a.Ptr(in).Ptr(params).Ptr(state).Ptr(hist0).Ptr(cand).Ptr(out)
	}
	dt := x.st.dtype
	if err := b.launch(kernelNames.sampleMax[dt], grid, blockDim, args); err != nil {
		return err
	}
	if hists {
		if err := b.launch(kernelNames.sampleHist[dt], grid, blockDim, args); err != nil {
			return err
		}
	}
	if draws {
		return b.launch(kernelNames.sampleDraw[dt], grid, blockDim, args)
	}
	return nil
}

// penaltyBits points each row at the bitmap of its penalised tokens: its
// history slot, or a bitmap of the returned block (nil when no row has a
// list of previous tokens), which sample_prev fills from the list. With
// record, a row with a history also records its draw in the slot. The
// caller releases the block after the launches that read it.
func (b *hipBackend) penaltyBits(cols int, ps []sampleRow, prev []int32, hist []sampleHist, record bool) (*block, error) {
	words := historyWords(cols)
	var bm *block
	if len(prev) > 0 {
		var err error
		if bm, err = b.pool.get(len(ps) * words * 4); err != nil {
			return nil, err
		}
	}
	for i := range ps {
		p := &ps[i]
		if hist != nil && hist[i].st != nil {
			slot := uint64(storagePtr(hist[i].st).Add(4 * hist[i].word))
			if record {
				p.Record = slot
			}
			if p.Penalty != 1 {
				p.Bits = slot
			}
		} else if p.PrevCount > 0 {
			p.Bits = uint64(bm.buf.Ptr().Add(4 * i * words))
		}
	}
	return bm, nil
}

// fillPrev launches sample_prev, which fills the bitmaps of the rows with
// a list of previous tokens, when any has one.
func (b *hipBackend) fillPrev(rows, cols int, prev []int32, params, prevPtr hip.DevicePtr) error {
	if len(prev) == 0 {
		return nil
	}
	return b.launch(kernelNames.samplePrev, hip.Dim3{X: uint32(min(rows, sampleMaxGrid))}, hip.Dim3{X: sampleBlock}, func(a *hip.Args) {
		a.Uint64(uint64(rows)).Uint64(uint64(historyWords(cols))).Ptr(params).Ptr(prevPtr)
	})
}

// sampleSpan chooses the logits a block takes (a multiple of four) and so
// the blocks a row has: 2048, four a thread, so that one row of a large
// vocabulary spreads over dozens of compute units, and longer spans when
// the rows alone would make several blocks for each of the device's
// slots, so that the fixed costs of a block (a histogram's) stay small.
func (b *hipBackend) sampleSpan(rows, cols int) (span, parts int) {
	slots := max(b.props.MultiProcessorCount, 1) * 8
	span = 2048
	for span < 1<<16 && rows*((cols+span-1)/span) > slots {
		span *= 2
	}
	return span, (cols + span - 1) / span
}
