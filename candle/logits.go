package candle

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
)

// The logits' processors on their own, for what a sampler reports besides
// its draws (OpenAI's logprobs): the bias of SampleOptions.Bias, the
// repetition penalty and the temperature applied to a copy of the logits
// (ProcessLogits), and the log-probabilities of the drawn tokens and of
// each row's most likely ones (TokenLogProbs), all on the logits' device,
// so that only k values a row come back to the host.

// TokenBias is an additive term on one token's logit, applied before every
// other processor of Tensor.Sample: OpenAI's logit_bias, and its presence
// and frequency penalties (a negative term on each token the completion
// holds).
type TokenBias struct {
	ID  int32
	Add float32
}

// biasTerms checks the rows' biases and returns them as flat indices into
// the (rows, cols) logits with their terms, a row's terms for one token
// summed, so that no two terms write one logit; nil when no row has any.
func biasTerms(op string, opts []SampleOptions, cols int) ([]uint64, []float32, error) {
	n := 0
	for i := range opts {
		n += len(opts[i].Bias)
	}
	if n == 0 {
		return nil, nil, nil
	}
	at, add := make([]uint64, 0, n), make([]float32, 0, n)
	for r := range opts {
		bs := opts[r].Bias
		for _, b := range bs {
			if b.ID < 0 || int(b.ID) >= cols {
				return nil, nil, pkg.Errorf(op, ErrIndex, "row %d: a bias for token %d: want 0 to %d (the vocabulary)", r, b.ID, cols-1)
			}
			if math.IsNaN(float64(b.Add)) || math.IsInf(float64(b.Add), 0) {
				return nil, nil, pkg.Errorf(op, ErrArgument, "row %d: a bias of %v for token %d: want a finite value", r, b.Add, b.ID)
			}
		}
		sorted := slices.SortedStableFunc(slices.Values(bs), func(a, b TokenBias) int { return cmp.Compare(a.ID, b.ID) })
		for j, b := range sorted {
			if j > 0 && sorted[j-1].ID == b.ID {
				add[len(add)-1] += b.Add
				continue
			}
			at, add = append(at, uint64(r*cols)+uint64(b.ID)), append(add, b.Add)
		}
	}
	return at, add, nil
}

// logitsF32 returns a fresh contiguous F32 copy of logits, with the rows'
// biases added when at lists any.
func (t *Tensor) logitsF32(op string, at []uint64, add []float32) (*Tensor, error) {
	var x *Tensor
	var err error
	if t.DType() == F32 {
		x, err = t.Copy()
	} else {
		x, err = t.ToDType(F32)
	}
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	if len(at) > 0 {
		if err := t.st.dev.backend().addBias(x.st, at, add); err != nil {
			x.Close()
			return nil, pkg.Wrap(op, err)
		}
	}
	return x, nil
}

// ProcessLogits returns the logits (rows, vocab) of F32, F16 or BF16 as
// Tensor.Sample draws from them, before its filters: a fresh F32 tensor
// (rows, vocab) with each row's Bias added, its repetition penalty applied
// (from Previous, or from its History slot, which is read and not
// extended) and divided by its temperature (a greedy row's is taken as 1).
// Top-k, top-p and min-p are not applied: they would leave -Inf for most
// tokens, where a caller asking for log-probabilities wants the whole
// distribution the filters cut from (vLLM's "processed" logprobs less its
// truncation). Call it before the Sample that extends the rows' histories.
func (t *Tensor) ProcessLogits(opts []SampleOptions) (*Tensor, error) {
	const op = "Tensor.ProcessLogits"
	in, err := t.logitsInput(op, opts)
	if err != nil {
		return nil, err
	}
	rows, cols, ps := in.rows, in.cols, in.ps
	x, err := t.logitsF32(op, in.at, in.add)
	if err != nil || rows == 0 {
		return x, err
	}
	for i := range ps {
		if ps[i].Temperature == 0 {
			ps[i].Temperature = 1
		}
	}
	if err := t.st.dev.backend().scaleLogits(x.st, rows, cols, ps, in.prev, in.hist); err != nil {
		x.Close()
		return nil, pkg.Wrap(op, err)
	}
	return x, nil
}

// logitsInput is what Sample and ProcessLogits make of their logits and
// options: the shape, the rows' settings as the kernels read them, the
// previous tokens, the histories and the bias terms (biasTerms).
type logitsInput struct {
	rows, cols int
	ps         []sampleRow
	prev       []int32
	hist       []sampleHist
	at         []uint64
	add        []float32
}

// logitsInput checks the logits and the options.
func (t *Tensor) logitsInput(op string, opts []SampleOptions) (in logitsInput, err error) {
	if in.rows, in.cols, err = t.checkLogits(op, len(opts)); err != nil {
		return in, err
	}
	if in.ps, in.prev, in.hist, err = sampleParams(op, t.st.dev, opts, in.cols); err != nil {
		return in, err
	}
	in.at, in.add, err = biasTerms(op, opts, in.cols)
	return in, err
}

// checkLogits checks that t is alive (rows, vocab) logits of a float dtype
// with n rows, as Sample and ProcessLogits take them.
func (t *Tensor) checkLogits(op string, n int) (rows, cols int, err error) {
	if err := t.alive(op); err != nil {
		return 0, 0, err
	}
	if dt := t.DType(); dt != F32 && dt != F16 && dt != BF16 {
		return 0, 0, pkg.Errorf(op, ErrDType, "%s logits: want f32, f16 or bf16 (convert with ToDType)", dt)
	}
	if len(t.layout.Shape) != 2 {
		return 0, 0, pkg.Errorf(op, ErrShape, "logits of shape %v: want (rows, vocab)", t.layout.Shape)
	}
	rows, cols = t.layout.Shape[0], t.layout.Shape[1]
	if n != rows {
		return 0, 0, pkg.Errorf(op, ErrArgument, "%d options for %d rows of logits: want one per row", n, rows)
	}
	if rows > 0 && (cols < 1 || cols > sampleMaxCols) {
		return 0, 0, pkg.Errorf(op, ErrShape, "a vocabulary of %d: want 1 to %d", cols, sampleMaxCols)
	}
	return rows, cols, nil
}

// TokenLogProbs takes logits (rows, vocab) — those ProcessLogits returns,
// so that the log-probabilities are of the distribution the tokens were
// drawn from — and returns, on their device, the log-probability of each
// row's token ids[r] (ids: U32 (rows), as Sample returns them) as F32
// (rows), and for k > 0 the k largest log-probabilities of each row,
// largest first (ties by lower id), F32 (rows, k), with their token ids,
// U32 (rows, k); top and topIDs are nil for k 0. The work is a
// log-softmax, a gather and a top-k selection: no row is sorted, and only
// the k+1 values a row need come back when the caller reads them.
func (t *Tensor) TokenLogProbs(ids *Tensor, k int) (chosen, top, topIDs *Tensor, err error) {
	const op = "Tensor.TokenLogProbs"
	if err := t.alive(op); err != nil {
		return nil, nil, nil, err
	}
	if err := ids.alive(op); err != nil {
		return nil, nil, nil, err
	}
	if len(t.layout.Shape) != 2 || t.layout.Shape[1] < 1 {
		return nil, nil, nil, pkg.Errorf(op, ErrShape, "logits of shape %v: want (rows, vocab)", t.layout.Shape)
	}
	rows, cols := t.layout.Shape[0], t.layout.Shape[1]
	if ids.DType() != U32 || !slices.Equal(ids.Shape(), Shape{rows}) {
		return nil, nil, nil, pkg.Errorf(op, ErrShape, "token ids of %s %v for %d rows: want u32 (%d)", ids.DType(), ids.Shape(), rows, rows)
	}
	if k < 0 || k > cols {
		return nil, nil, nil, pkg.Errorf(op, ErrArgument, "k = %d: want 0 to %d, the vocabulary", k, cols)
	}
	lp, err := t.LogSoftmaxLastDim()
	if err != nil {
		return nil, nil, nil, pkg.Wrap(op, err)
	}
	defer lp.Close()
	col, err := ids.Reshape(rows, 1)
	if err != nil {
		return nil, nil, nil, pkg.Wrap(op, err)
	}
	defer col.Close()
	g, err := lp.Gather(col, 1)
	if err != nil {
		return nil, nil, nil, pkg.Wrap(op, err)
	}
	defer g.Close()
	if chosen, err = g.Reshape(rows); err != nil {
		return nil, nil, nil, pkg.Wrap(op, err)
	}
	if k == 0 {
		return chosen, nil, nil, nil
	}
	if top, topIDs, err = lp.TopK(k); err != nil {
		chosen.Close()
		return nil, nil, nil, pkg.Wrap(op, err)
	}
	return chosen, top, topIDs, nil
}

// The CPU's processors.

func (c *cpuBackend) addBias(x *Storage, at []uint64, add []float32) error {
	z := dataOf(x)
	for i, j := range at {
		z.setF(int(j), float64(float32(z.f(int(j)))+add[i]))
	}
	return nil
}

func (c *cpuBackend) scaleLogits(x *Storage, rows, cols int, ps []sampleRow, prev []int32, hist []sampleHist) error {
	d := dataOf(x)
	words := historyWords(cols)
	var seen []uint32 // a row's Previous as a bitmap: a token listed twice is penalised once
	for r := range rows {
		p := &ps[r]
		base := r * cols
		penalise := func(id int) {
			v := float32(d.f(base + id))
			if v < 0 {
				v *= p.Penalty
			} else {
				v /= p.Penalty
			}
			d.setF(base+id, float64(v))
		}
		if p.Penalty != 1 {
			if hist != nil && hist[r].st != nil {
				for w, v := range hist[r].cpuWords(words) {
					for ; v != 0; v &= v - 1 {
						penalise(w*32 + bits.TrailingZeros32(v))
					}
				}
			} else if p.PrevCount > 0 {
				if seen == nil {
					seen = make([]uint32, words)
				}
				clear(seen)
				for _, id := range prev[p.PrevOffset : p.PrevOffset+uint64(p.PrevCount)] {
					if seen[id>>5]&(1<<(id&31)) == 0 {
						seen[id>>5] |= 1 << (id & 31)
						penalise(int(id))
					}
				}
			}
		}
		if p.Temperature != 1 {
			for i := base; i < base+cols; i++ {
				d.setF(i, float64(float32(d.f(i))/p.Temperature))
			}
		}
	}
	return nil
}

// The GPU's processors (kernels/sample.hip: sample_bias, sample_scale).

func (b *hipBackend) addBias(x *Storage, at []uint64, add []float32) error {
	n := len(at)
	buf := make([]byte, 12*n)
	copy(buf, hip.AsBytes(at))
	copy(buf[8*n:], hip.AsBytes(add))
	blk, err := b.upload(buf)
	if err != nil {
		return err
	}
	defer blk.release()
	terms := blk.buf.Ptr()
	grid := hip.Dim3{X: uint32(min((n+sampleBlock-1)/sampleBlock, sampleMaxGrid))}
	return b.launch(kernelNames.sampleBias, grid, hip.Dim3{X: sampleBlock}, func(a *hip.Args) {
		a.Uint64(uint64(n)).Ptr(terms).Ptr(terms.Add(8 * n)).Ptr(storagePtr(x))
	})
}

func (b *hipBackend) scaleLogits(x *Storage, rows, cols int, ps []sampleRow, prev []int32, hist []sampleHist) error {
	bm, err := b.penaltyBits(cols, ps, prev, hist, false) // nothing is drawn: the histories stay as they are
	if err != nil {
		return err
	}
	if bm != nil {
		defer bm.release()
	}
	pb := len(ps) * int(unsafe.Sizeof(sampleRow{}))
	buf := make([]byte, pb+4*len(prev))
	copy(buf, unsafe.Slice((*byte)(unsafe.Pointer(&ps[0])), pb))
	copy(buf[pb:], hip.AsBytes(prev))
	blk, err := b.upload(buf)
	if err != nil {
		return err
	}
	defer blk.release()
	params := blk.buf.Ptr()
	if err := b.fillPrev(rows, cols, prev, params, params.Add(pb)); err != nil {
		return err
	}
	n := rows * cols
	grid := hip.Dim3{X: uint32(min((n+sampleBlock-1)/sampleBlock, sampleMaxGrid))}
	return b.launch(kernelNames.sampleScale, grid, hip.Dim3{X: sampleBlock}, func(a *hip.Args) {
		a.Uint64(uint64(rows)).Uint64(uint64(cols)).Ptr(params).Ptr(storagePtr(x))
	})
}

// upload copies host bytes to a new block of the pool, ordered on the
// stream; the caller releases it after the work that reads it is queued.
func (b *hipBackend) upload(buf []byte) (*block, error) {
	blk, err := b.pool.get(len(buf))
	if err != nil {
		return nil, err
	}
	if err := b.staging.write(blk.buf, 0, buf); err != nil {
		blk.release()
		return nil, err
	}
	return blk, nil
}
