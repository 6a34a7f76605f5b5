package candle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sampleIDs draws from logits rows on dev.
func sampleIDs(t testing.TB, dev Device, dt DType, logits [][]float64, opts []SampleOptions) []uint32 {
	t.Helper()
	var flat []float64
	for _, r := range logits {
		flat = append(flat, r...)
	}
	x := tensorOf(t, dev, dt, flat, len(logits), len(logits[0]))
	ids, err := x.Sample(opts)
	require.NoError(t, err)
	defer ids.Close()
	require.Equal(t, Shape{len(logits)}, ids.Shape())
	out, err := ToSlice[uint32](ids)
	require.NoError(t, err)
	return out
}

// drawSet draws n times (steps 0..n-1, one batch) from one row and
// returns how often each token came.
func drawSet(t testing.TB, dev Device, row []float64, o SampleOptions, n int) map[uint32]int {
	t.Helper()
	rows := make([][]float64, n)
	opts := make([]SampleOptions, n)
	for i := range rows {
		rows[i] = row
		opts[i] = o
		opts[i].Step = uint64(i)
	}
	count := map[uint32]int{}
	for _, id := range sampleIDs(t, dev, F32, rows, opts) {
		count[id]++
	}
	return count
}

func logs(ps ...float64) []float64 { return mapFrom(ps, math.Log) }

func TestSampleProcessorsOnCPU(t *testing.T) {
	cpu := CPU()
	// Greedy: the lowest of equal largest; the penalty before it.
	assert.Equal(t, []uint32{1}, sampleIDs(t, cpu, F32, [][]float64{{1, 3, 3, 2}}, []SampleOptions{{}}))
	assert.Equal(t, []uint32{2}, sampleIDs(t, cpu, F32, [][]float64{{1, 3, 2.5, 2}}, []SampleOptions{{RepetitionPenalty: 2, Previous: []int32{1}}}),
		"3/2 = 1.5 < 2.5")
	assert.Equal(t, []uint32{0}, sampleIDs(t, cpu, F32, [][]float64{{-1, -0.6}}, []SampleOptions{{RepetitionPenalty: 2, Previous: []int32{1, 1, 1}}}),
		"-0.6·2 = -1.2 < -1, penalised once however often listed")
	assert.Equal(t, []uint32{1}, sampleIDs(t, cpu, F32, [][]float64{{1, 3, 3, 2}}, []SampleOptions{{Temperature: 5, TopK: 1}}), "top-k 1 is greedy")
	assert.Equal(t, []uint32{1, 2}, sampleIDs(t, cpu, F32, [][]float64{{0, math.NaN(), 1, 0.5}, {0, math.NaN(), 1, 0.5}},
		[]SampleOptions{{Temperature: 1, TopK: 1}, {Temperature: 1, MinP: 1}}),
		"greedy follows Argmax (NaN the largest); a draw never takes NaN")

	const n = 4000
	probs := []float64{0.4, 0.3, 0.2, 0.1}
	for _, c := range []struct {
		name string
		o    SampleOptions
		kept []uint32
	}{
		{"top-k 2", SampleOptions{Temperature: 1, TopK: 2}, []uint32{0, 1}},
		{"top-p 0.5", SampleOptions{Temperature: 1, TopP: 0.5}, []uint32{0, 1}},
		{"top-p 0.75", SampleOptions{Temperature: 1, TopP: 0.75}, []uint32{0, 1, 2}},
		{"top-k 2 then top-p 0.5 of what is left", SampleOptions{Temperature: 1, TopK: 2, TopP: 0.5}, []uint32{0}},
		{"min-p 0.45", SampleOptions{Temperature: 1, MinP: 0.45}, []uint32{0, 1, 2}},
		{"min-p 0.6", SampleOptions{Temperature: 1, MinP: 0.6}, []uint32{0, 1}},
		{"top-p 0.75 then min-p 0.6", SampleOptions{Temperature: 1, TopP: 0.75, MinP: 0.6}, []uint32{0, 1}},
		{"no filter", SampleOptions{Temperature: 1, TopK: 4, TopP: 1}, []uint32{0, 1, 2, 3}},
		{"penalty then top-k 1 of the rest", SampleOptions{Temperature: 1, TopK: 2, RepetitionPenalty: 100, Previous: []int32{0, 1}}, []uint32{2, 3}},
	} {
		count := drawSet(t, cpu, logs(probs...), c.o, n)
		got := make([]uint32, 0, len(count))
		for id := range count {
			got = append(got, id)
		}
		slices.Sort(got)
		assert.Equal(t, c.kept, got, c.name)
	}
	// Temperature: logits 0 and 1 at temperature 0.5 are 0 and 2.
	count := drawSet(t, cpu, []float64{0, 1}, SampleOptions{Temperature: 0.5, Seed: 3}, 20000)
	assert.InDelta(t, 1/(1+math.Exp(2)), float64(count[0])/20000, 0.01)
	// Ties at a threshold stay: top-k 2 of 3, 2, 2 keeps all three.
	count = drawSet(t, cpu, []float64{3, 2, 2, 1}, SampleOptions{Temperature: 1, TopK: 2}, 2000)
	assert.Len(t, count, 3)
	assert.Zero(t, count[3])
}

// filtered is the distribution the processors leave, computed in float64
// by sorting (the reference the draws must follow).
func filtered(logits []float64, o SampleOptions) []float64 {
	z := slices.Clone(logits)
	for _, id := range o.Previous {
		if v := logits[id]; v < 0 {
			z[id] = v * float64(o.RepetitionPenalty)
		} else {
			z[id] = v / float64(o.RepetitionPenalty)
		}
	}
	for i := range z {
		z[i] /= float64(o.Temperature)
	}
	order := make([]int, len(z))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return z[order[a]] > z[order[b]] })
	keep := len(z)
	if o.TopK > 0 && o.TopK < keep {
		keep = o.TopK
	}
	m := z[order[0]]
	var s float64
	for _, i := range order[:keep] {
		s += math.Exp(z[i] - m)
	}
	if o.TopP > 0 && o.TopP < 1 {
		var acc float64
		for j, i := range order[:keep] {
			if acc >= float64(o.TopP)*s {
				keep = j
				break
			}
			acc += math.Exp(z[i] - m)
		}
	}
	p := make([]float64, len(z))
	var total float64
	for _, i := range order[:keep] {
		if e := math.Exp(z[i] - m); e >= float64(o.MinP) {
			p[i] = e
			total += e
		}
	}
	for i := range p {
		p[i] /= total
	}
	return p
}

// chiSquareLimit is the 0.999 quantile of χ² with df degrees of freedom
// (Wilson-Hilferty).
func chiSquareLimit(df int) float64 {
	d := float64(df)
	c := 1 - 2/(9*d) + 3.09*math.Sqrt(2/(9*d))
	return d * c * c * c
}

func TestSampleFrequenciesOnCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	logits := make([]float64, 64)
	for i := range logits {
		logits[i] = 2 * r.NormFloat64()
	}
	const n = 30000
	for _, o := range []SampleOptions{
		{Temperature: 1},
		{Temperature: 0.7, TopK: 20},
		{Temperature: 1.3, TopP: 0.9},
		{Temperature: 1, MinP: 0.05},
		{Temperature: 0.8, TopK: 30, TopP: 0.95, MinP: 0.01, RepetitionPenalty: 1.3, Previous: []int32{0, 5, 9, 9, 40}},
	} {
		o.Seed = 42
		want := filtered(logits, o)
		count := drawSet(t, CPU(), logits, o, n)
		chi, df := 0.0, -1
		for i, p := range want {
			if p == 0 {
				assert.Zero(t, count[uint32(i)], "%+v: token %d is filtered out", o, i)
				continue
			}
			e := p * n
			d := float64(count[uint32(i)]) - e
			chi += d * d / e
			df++
		}
		if df > 0 {
			assert.Less(t, chi, chiSquareLimit(df), "%+v: χ² of %d degrees of freedom", o, df)
		}
	}
}

func TestSampleReproducibleAndBatchIndependent(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	rows := make([][]float64, 6)
	for i := range rows {
		rows[i] = make([]float64, 300)
		for j := range rows[i] {
			rows[i][j] = r.NormFloat64()
		}
	}
	opts := []SampleOptions{
		{Temperature: 1, Seed: 1},
		{Temperature: 0.5, TopK: 40, Seed: 2, Step: 7},
		{},
		{Temperature: 1, TopP: 0.8, Seed: 1 << 40, Step: 1 << 33},
		{Temperature: 2, MinP: 0.1, RepetitionPenalty: 1.5, Previous: []int32{1, 2, 3}, Seed: 5},
		{Temperature: 1, Seed: 1, Step: 1},
	}
	batch := sampleIDs(t, CPU(), F32, rows, opts)
	assert.Equal(t, batch, sampleIDs(t, CPU(), F32, rows, opts), "the same inputs draw the same tokens")
	for i := range rows {
		alone := sampleIDs(t, CPU(), F32, rows[i:i+1], opts[i:i+1])
		assert.Equal(t, batch[i], alone[0], "row %d alone", i)
	}
	// Reversed, each row still draws its token.
	rr, ro := slices.Clone(rows), slices.Clone(opts)
	slices.Reverse(rr)
	slices.Reverse(ro)
	rev := sampleIDs(t, CPU(), F32, rr, ro)
	slices.Reverse(rev)
	assert.Equal(t, batch, rev)
	// Different seeds and steps draw differently.
	distinct := map[uint32]bool{}
	for s := range 20 {
		distinct[sampleIDs(t, CPU(), F32, rows[:1], []SampleOptions{{Temperature: 1, Seed: uint64(s)}})[0]] = true
	}
	assert.Greater(t, len(distinct), 5)
}

func TestSampleEdgesOnCPU(t *testing.T) {
	cpu := CPU()
	inf := math.Inf(1)
	assert.Equal(t, []uint32{1, 0, 2, 0}, sampleIDs(t, cpu, F32,
		[][]float64{{0, inf, inf}, {math.NaN(), math.NaN(), math.NaN()}, {-inf, -inf, 3}, {-inf, -inf, -inf}},
		[]SampleOptions{{Temperature: 1}, {Temperature: 1}, {Temperature: 1, TopP: 0.5}, {Temperature: 1}}))
	// NaN is never drawn.
	count := drawSet(t, cpu, []float64{math.NaN(), 0, 0}, SampleOptions{Temperature: 1}, 500)
	assert.Zero(t, count[0])
	// One token; F16 and BF16 logits; a strided view.
	assert.Equal(t, []uint32{0}, sampleIDs(t, cpu, F32, [][]float64{{5}}, []SampleOptions{{Temperature: 1, TopK: 3, TopP: 0.1}}))
	for _, dt := range []DType{F16, BF16} {
		assert.Equal(t, []uint32{2}, sampleIDs(t, cpu, dt, [][]float64{{1, 2, 3}}, []SampleOptions{{}}))
	}
	x := tensorOf(t, cpu, F32, []float64{1, 9, 5, 2, 3, 0}, 3, 2)
	xt, err := x.Transpose(0, 1)
	require.NoError(t, err)
	ids, err := xt.Sample([]SampleOptions{{}, {}})
	require.NoError(t, err)
	got, err := ToSlice[uint32](ids)
	require.NoError(t, err)
	assert.Equal(t, []uint32{1, 0}, got)
	// No rows.
	empty, err := Zeros(cpu, F32, 0, 5)
	require.NoError(t, err)
	ids, err = empty.Sample(nil)
	require.NoError(t, err)
	assert.Equal(t, Shape{0}, ids.Shape())
}

func TestSampleGreedyIsArgmaxOnCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	rows, cols := 5, 1000
	vals := make([]float64, rows*cols)
	for i := range vals {
		vals[i] = float64(r.IntN(50)) // many ties
	}
	greedyIsArgmax(t, tensorOf(t, CPU(), F32, vals, rows, cols), "the CPU's")
}

// greedyIsArgmax checks that greedy options (the zero value) draw each
// row's Argmax from logits x (rows, vocab).
func greedyIsArgmax(t *testing.T, x *Tensor, what string) {
	t.Helper()
	ok := keep(t)
	want, err := ToSlice[uint32](ok(x.Argmax(false, 1)))
	require.NoError(t, err)
	got, err := ToSlice[uint32](ok(x.Sample(make([]SampleOptions, x.Dim(0)))))
	require.NoError(t, err)
	assert.Equal(t, want, got, what)
}

func TestSampleErrors(t *testing.T) {
	cpu := CPU()
	x := tensorOf(t, cpu, F32, []float64{1, 2, 3, 4, 5, 6}, 2, 3)
	two := func(o SampleOptions) []SampleOptions { return []SampleOptions{{}, o} }
	for _, c := range []struct {
		x    *Tensor
		opts []SampleOptions
		kind error
		msg  string
	}{
		{tensorOf(t, cpu, F64, []float64{1, 2}, 1, 2), []SampleOptions{{}}, ErrDType, "f64 logits"},
		{tensorOf(t, cpu, F32, []float64{1, 2}, 2), []SampleOptions{{}}, ErrShape, "want (rows, vocab)"},
		{x, []SampleOptions{{}}, ErrArgument, "1 options for 2 rows"},
		{x, two(SampleOptions{Temperature: -1}), ErrArgument, "row 1: temperature -1"},
		{x, two(SampleOptions{Temperature: float32(math.NaN())}), ErrArgument, "temperature NaN"},
		{x, two(SampleOptions{TopK: -2}), ErrArgument, "top-k -2"},
		{x, two(SampleOptions{TopP: 1.5}), ErrArgument, "top-p 1.5"},
		{x, two(SampleOptions{MinP: -0.1}), ErrArgument, "min-p -0.1"},
		{x, two(SampleOptions{RepetitionPenalty: -1}), ErrArgument, "repetition penalty -1"},
		{x, two(SampleOptions{RepetitionPenalty: 1.2, Previous: []int32{3}}), ErrIndex, "previous token 3: want 0 to 2"},
		{tensorOf(t, cpu, F32, []float64{}, 2, 0), []SampleOptions{{}, {}}, ErrShape, "a vocabulary of 0"},
	} {
		_, err := c.x.Sample(c.opts)
		require.Error(t, err, c.msg)
		assert.ErrorIs(t, err, c.kind, c.msg)
		assert.Contains(t, err.Error(), c.msg)
		assert.Contains(t, err.Error(), "Tensor.Sample")
	}
	closed := tensorOf(t, cpu, F32, []float64{1}, 1, 1)
	closed.Close()
	_, err := closed.Sample([]SampleOptions{{}})
	assert.ErrorIs(t, err, ErrClosed)
}

func TestTokenHistoryOnCPU(t *testing.T) {
	cpu := CPU()
	h, err := NewTokenHistory(cpu, 3, 70)
	require.NoError(t, err)
	defer h.Close()
	assert.Equal(t, 3, h.Slots())
	assert.Equal(t, 70, h.Vocab())
	assert.Equal(t, Device(cpu), h.Device())
	got, err := h.Tokens(1)
	require.NoError(t, err)
	assert.Empty(t, got, "a new slot is empty")
	require.NoError(t, h.Set(1, []int32{69, 3, 3, 31, 32, 0}))
	got, err = h.Tokens(1)
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 3, 31, 32, 69}, got, "once each, in order")
	for _, s := range []int{0, 2} {
		got, err = h.Tokens(s)
		require.NoError(t, err)
		assert.Empty(t, got, "slot %d is untouched", s)
	}
	require.NoError(t, h.Set(1, nil))
	got, err = h.Tokens(1)
	require.NoError(t, err)
	assert.Empty(t, got, "Set replaces")

	for _, c := range []struct {
		err  error
		kind error
		msg  string
	}{
		{h.Set(3, nil), ErrIndex, "slot 3: want 0 to 2"},
		{h.Set(-1, nil), ErrIndex, "slot -1"},
		{h.Set(0, []int32{70}), ErrIndex, "token 70: want 0 to 69"},
		{h.Set(0, []int32{-1}), ErrIndex, "token -1"},
		{func() error { _, err := NewTokenHistory(cpu, 0, 5); return err }(), ErrArgument, "0 slots"},
		{func() error { _, err := NewTokenHistory(cpu, 2, 0); return err }(), ErrArgument, "a vocabulary of 0"},
		{func() error { _, err := NewTokenHistory(nil, 2, 5); return err }(), ErrDevice, "nil device"},
	} {
		require.Error(t, c.err, c.msg)
		assert.ErrorIs(t, c.err, c.kind, c.msg)
		assert.Contains(t, c.err.Error(), c.msg)
	}
	require.NoError(t, h.Close())
	require.NoError(t, h.Close(), "closing twice")
	assert.ErrorIs(t, h.Set(0, nil), ErrClosed)
	_, err = h.Tokens(0)
	assert.ErrorIs(t, err, ErrClosed)
}

// randomLogits are rows × cols logits of scale·N(0, 1).
func randomLogits(r *rand.Rand, rows, cols int, scale float64) [][]float64 {
	out := make([][]float64, rows)
	for i := range out {
		out[i] = make([]float64, cols)
		for j := range out[i] {
			out[i][j] = scale * r.NormFloat64()
		}
	}
	return out
}

// historyLoop runs steps of a generation loop on dev: each row's logits
// are its base row shifted by the step, and its previous tokens are its
// prompt and its draws, given through a history (hist) or as lists. It
// returns each row's tokens.
func historyLoop(t *testing.T, dev Device, dt DType, base [][]float64, opts []SampleOptions, prompts [][]int32, steps int, hist bool) [][]int32 {
	t.Helper()
	rows, cols := len(base), len(base[0])
	var h *TokenHistory
	if hist {
		var err error
		h, err = NewTokenHistory(dev, rows+2, cols)
		require.NoError(t, err)
		defer h.Close()
	}
	seqs := make([][]int32, rows)
	for i := range seqs {
		seqs[i] = slices.Clone(prompts[i])
		if hist {
			require.NoError(t, h.Set(rows+1-i, prompts[i])) // slots out of row order
		}
	}
	logits := make([][]float64, rows)
	for step := range steps {
		o := slices.Clone(opts)
		for i := range o {
			o[i].Step = uint64(step)
			if hist {
				o[i].History, o[i].HistorySlot = h, rows+1-i
			} else {
				o[i].Previous = seqs[i]
			}
			logits[i] = make([]float64, cols)
			for j := range logits[i] {
				logits[i][j] = base[i][(j+step)%cols]
			}
		}
		for i, id := range sampleIDs(t, dev, dt, logits, o) {
			seqs[i] = append(seqs[i], int32(id))
		}
	}
	if hist {
		for i := range seqs {
			got, err := h.Tokens(rows + 1 - i)
			require.NoError(t, err)
			want := slices.Clone(seqs[i])
			slices.Sort(want)
			assert.Equal(t, slices.Compact(want), got, "row %d: the history holds the prompt and the draws", i)
		}
	}
	return seqs
}

func TestSampleHistoryOnCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	base := randomLogits(r, 6, 50, 2)
	opts := []SampleOptions{
		{RepetitionPenalty: 1.5},
		{Temperature: 0.8, RepetitionPenalty: 1.3, Seed: 1},
		{Temperature: 1, TopK: 5, RepetitionPenalty: 2, Seed: 2},
		{Temperature: 0.9, TopP: 0.8, MinP: 0.05, RepetitionPenalty: 0.7, Seed: 3},
		{Temperature: 1, Seed: 4}, // no penalty: the history only records
		{TopK: 1, RepetitionPenalty: 100, Seed: 5},
	}
	prompts := [][]int32{{1, 2, 3}, {}, {49, 49}, {0}, {7}, {10, 11, 12, 13}}
	withHist := historyLoop(t, CPU(), F32, base, opts, prompts, 30, true)
	withLists := historyLoop(t, CPU(), F32, base, opts, prompts, 30, false)
	assert.Equal(t, withLists, withHist, "a history draws what the lists draw")
	// A strong penalty, greedy: no token comes twice.
	seen := map[int32]bool{}
	for _, id := range withHist[5] {
		assert.False(t, seen[id], "token %d repeated in %v", id, withHist[5])
		seen[id] = true
	}
}

func TestSampleHistoryErrors(t *testing.T) {
	cpu := CPU()
	x := tensorOf(t, cpu, F32, []float64{1, 2, 3, 4, 5, 6}, 2, 3)
	h, err := NewTokenHistory(cpu, 2, 3)
	require.NoError(t, err)
	defer h.Close()
	other, err := NewTokenHistory(cpu, 2, 4)
	require.NoError(t, err)
	defer other.Close()
	closed, err := NewTokenHistory(cpu, 2, 3)
	require.NoError(t, err)
	closed.Close()
	for _, c := range []struct {
		opts []SampleOptions
		kind error
		msg  string
	}{
		{[]SampleOptions{{}, {History: h, HistorySlot: 2}}, ErrIndex, "row 1: slot 2: want 0 to 1"},
		{[]SampleOptions{{History: h}, {History: h}}, ErrArgument, "rows 0 and 1 name history slot 0"},
		{[]SampleOptions{{History: h, Previous: []int32{1}, RepetitionPenalty: 2}, {}}, ErrArgument, "row 0: both Previous and History"},
		{[]SampleOptions{{History: other}, {}}, ErrShape, "a token history of a vocabulary of 4 for logits of 3"},
		{[]SampleOptions{{}, {History: closed}}, ErrClosed, "row 1: use of a closed token history"},
	} {
		_, err := x.Sample(c.opts)
		require.Error(t, err, c.msg)
		assert.ErrorIs(t, err, c.kind, c.msg)
		assert.Contains(t, err.Error(), c.msg)
		assert.Contains(t, err.Error(), "Tensor.Sample")
	}
	// Two histories may share a slot number.
	h2, err := NewTokenHistory(cpu, 1, 3)
	require.NoError(t, err)
	defer h2.Close()
	_, err = x.Sample([]SampleOptions{{History: h}, {History: h2}})
	assert.NoError(t, err)
}

// sampleCombo is a setting the GPU tests compare, with its penalty's
// previous tokens given through a history (pen 1) or a list (pen 2).
type sampleCombo struct {
	o   SampleOptions
	pen int
}

// sampleCombos is every combination of greedy and a few temperatures,
// top-k, top-p, min-p and penalties.
func sampleCombos() []sampleCombo {
	var out []sampleCombo
	for _, temp := range []float32{0, 0.7, 1.3} {
		for _, k := range []int{0, 1, 50, 1000} {
			for _, p := range []float32{0, 0.5, 0.9} {
				for _, mp := range []float32{0, 0.05} {
					for pen, rp := range []float32{1, 1.3, 0.8} {
						out = append(out, sampleCombo{SampleOptions{Temperature: temp, TopK: k, TopP: p, MinP: mp, RepetitionPenalty: rp}, pen})
					}
				}
			}
		}
	}
	return out
}

// compareSample draws from rows of logits with one combination a row, on
// the CPU and on the GPU d, and checks that they agree: the same tokens,
// but for draws decided within float rounding (a few rows), the same
// histories after, and the GPU the same again.
func compareSample(t *testing.T, d Device, dt DType, logits [][]float64, combos []sampleCombo, r *rand.Rand, name string) {
	t.Helper()
	rows, cols := len(logits), len(logits[0])
	var flat []float64
	for _, row := range logits {
		flat = append(flat, row...)
	}
	hc, err := NewTokenHistory(CPU(), rows, cols)
	require.NoError(t, err)
	defer hc.Close()
	hg, err := NewTokenHistory(d, rows, cols)
	require.NoError(t, err)
	defer hg.Close()
	opts := make([]SampleOptions, rows)
	prompts := make([][]int32, rows)
	for i := range opts {
		c := combos[i%len(combos)]
		opts[i] = c.o
		opts[i].Seed, opts[i].Step = r.Uint64(), r.Uint64N(1000)
		if c.pen != 0 {
			for range 1 + r.IntN(300) {
				prompts[i] = append(prompts[i], int32(r.IntN(cols)))
			}
		}
		switch c.pen {
		case 1:
			opts[i].HistorySlot = rows - 1 - i
			require.NoError(t, hc.Set(rows-1-i, prompts[i]))
			require.NoError(t, hg.Set(rows-1-i, prompts[i]))
		case 2:
			opts[i].Previous = prompts[i]
		}
	}
	run := func(dev Device, h *TokenHistory) []uint32 {
		o := slices.Clone(opts)
		for i := range o {
			if combos[i%len(combos)].pen == 1 {
				o[i].History = h
			}
		}
		x := tensorOf(t, dev, dt, flat, rows, cols)
		defer x.Close()
		ids, err := x.Sample(o)
		require.NoError(t, err, name)
		defer ids.Close()
		out, err := ToSlice[uint32](ids)
		require.NoError(t, err)
		return out
	}
	c := run(CPU(), hc)
	g := run(d, hg)
	diff := 0
	for i := range c {
		if c[i] != g[i] {
			diff++
			t.Logf("%s row %d (%+v): cpu %d, gpu %d", name, i, combos[i%len(combos)], c[i], g[i])
			continue
		}
		if combos[i%len(combos)].pen == 1 {
			a, err := hc.Tokens(rows - 1 - i)
			require.NoError(t, err)
			b, err := hg.Tokens(rows - 1 - i)
			require.NoError(t, err)
			assert.Equal(t, a, b, "%s row %d: the histories after the draw", name, i)
			assert.Contains(t, b, int32(g[i]), "%s row %d: the draw joined the history", name, i)
		}
	}
	assert.LessOrEqual(t, diff, max(1, rows/16), "%s: rows that differ", name)
	for i := range opts {
		if combos[i%len(combos)].pen == 1 {
			require.NoError(t, hg.Set(rows-1-i, prompts[i]))
		}
	}
	assert.Equal(t, g, run(d, hg), "%s: the GPU draws the same again", name)
}

// TestGPUSample compares the GPU's draws with the CPU's for every
// combination of settings, vocabularies from 1 to 152064 tokens, batches of
// one row and of 64, each dtype.
func TestGPUSample(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(11, 12))
	combos := sampleCombos()
	for _, dt := range []DType{F32, F16, BF16} {
		for _, cols := range []int{1, 7, 1000, 4099, 32000, 128256, 152064} {
			// Spread logits, and peaked ones (a few tokens far above the rest,
			// as a language model's).
			peaked := func(n int) [][]float64 {
				l := randomLogits(r, n, cols, 2)
				for i := range l {
					for range 1 + r.IntN(5) {
						l[i][r.IntN(cols)] += 8 + 4*r.Float64()
					}
				}
				return l
			}
			for start := 0; start < len(combos); start += 64 {
				cs := combos[start:min(start+64, len(combos))]
				compareSample(t, d, dt, randomLogits(r, len(cs), cols, 3), cs, r, fmt.Sprintf("%s × %d, 64 rows from %d", dt, cols, start))
				compareSample(t, d, dt, peaked(len(cs)), cs, r, fmt.Sprintf("%s × %d, peaked, 64 rows from %d", dt, cols, start))
			}
			for k := 0; k < len(combos); k += 11 {
				compareSample(t, d, dt, randomLogits(r, 1, cols, 3), combos[k:k+1], r, fmt.Sprintf("%s × %d, one row, %+v", dt, cols, combos[k]))
			}
		}
	}
}

// TestGPUSampleExtremes compares the GPU's draws with the CPU's on logits
// the filters find hard: ties (whole bins of equal values, more than the
// kernels gather), infinities, NaN, the largest and the smallest floats.
func TestGPUSampleExtremes(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(31, 32))
	inf, nan := math.Inf(1), math.NaN()
	patterns := []struct {
		name string
		f    func(j, cols int) float64
	}{
		{"all equal", func(int, int) float64 { return 1.5 }},
		{"five values", func(int, int) float64 { return float64(r.IntN(5)) }},
		{"a +Inf", func(j, cols int) float64 { return cond(j == cols/2, inf, r.NormFloat64()) }},
		{"-Inf but one", func(j, cols int) float64 { return cond(j == cols-1, 0.5, -inf) }},
		{"all -Inf", func(int, int) float64 { return -inf }},
		{"NaN sprinkled", func(int, int) float64 { return cond(r.IntN(3) == 0, nan, 3*r.NormFloat64()) }},
		{"all NaN", func(int, int) float64 { return nan }},
		{"±3e38", func(int, int) float64 { return cond(r.IntN(2) == 0, 3e38, -3e38) * r.Float64() }},
		{"1e30 apart", func(int, int) float64 { return 1e30 * r.NormFloat64() }},
		{"subnormal", func(int, int) float64 { return 1e-40 * r.NormFloat64() }},
		{"±0", func(int, int) float64 { return cond(r.IntN(2) == 0, 0.0, math.Copysign(0, -1)) }},
		{"a huge gap", func(j, _ int) float64 { return cond(j%1000 == 7, 50+r.Float64(), r.NormFloat64()) }},
	}
	combos := sampleCombos()
	for _, dt := range []DType{F32, BF16} {
		for _, cols := range []int{7, 4099, 128256} {
			for _, p := range patterns {
				rows := 16
				logits := make([][]float64, rows)
				for i := range logits {
					logits[i] = make([]float64, cols)
					for j := range logits[i] {
						logits[i][j] = p.f(j, cols)
					}
				}
				start := r.IntN(len(combos) - rows)
				compareSample(t, d, dt, logits, combos[start:start+rows], r, fmt.Sprintf("%s × %d, %s", dt, cols, p.name))
			}
		}
	}
}

func cond(c bool, a, b float64) float64 {
	if c {
		return a
	}
	return b
}

// TestGPUSampleHistory runs a generation loop on the GPU and on the CPU
// with histories, and with lists: the same tokens (a row may part where a
// draw is decided within rounding) and the same histories.
func TestGPUSampleHistory(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(33, 34))
	opts := []SampleOptions{
		{RepetitionPenalty: 1.5},
		{Temperature: 0.8, RepetitionPenalty: 1.3, Seed: 1},
		{Temperature: 1, TopK: 50, RepetitionPenalty: 2, Seed: 2},
		{Temperature: 0.9, TopP: 0.9, MinP: 0.05, RepetitionPenalty: 0.7, Seed: 3},
		{Temperature: 1, Seed: 4},
		{TopK: 1, RepetitionPenalty: 100, Seed: 5},
		{Temperature: 0.7, TopK: 40, TopP: 0.95, RepetitionPenalty: 1.1, Seed: 6},
		{Temperature: 1.2, MinP: 0.1, RepetitionPenalty: 1.2, Seed: 7},
	}
	for _, cols := range []int{100, 32000, 128256} {
		base := randomLogits(r, len(opts), cols, 3)
		prompts := make([][]int32, len(opts))
		for i := range prompts {
			for range r.IntN(100) {
				prompts[i] = append(prompts[i], int32(r.IntN(cols)))
			}
		}
		cpu := historyLoop(t, CPU(), F32, base, opts, prompts, 40, true)
		for _, hist := range []bool{true, false} {
			g := historyLoop(t, d, F32, base, opts, prompts, 40, hist)
			same := 0
			for i := range g {
				if slices.Equal(cpu[i], g[i]) {
					same++
				} else {
					t.Logf("%d tokens, history %v, row %d: cpu %v, gpu %v", cols, hist, i, cpu[i], g[i])
				}
			}
			assert.GreaterOrEqual(t, same, len(opts)-1, "%d tokens, history %v: rows drawn alike", cols, hist)
		}
	}
}

func TestGPUSampleFrequencies(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(13, 14))
	logits := make([]float64, 64)
	for i := range logits {
		logits[i] = 2 * r.NormFloat64()
	}
	const n = 30000
	for _, o := range []SampleOptions{{Temperature: 1}, {Temperature: 0.8, TopK: 30, TopP: 0.95, MinP: 0.01, RepetitionPenalty: 1.3, Previous: []int32{0, 5, 9}}} {
		o.Seed = 7
		want := filtered(logits, o)
		count := drawSet(t, d, logits, o, n)
		cpuCount := drawSet(t, CPU(), logits, o, n)
		chi, df := 0.0, -1
		for i, p := range want {
			if p == 0 {
				assert.Zero(t, count[uint32(i)])
				continue
			}
			e := p * n
			dd := float64(count[uint32(i)]) - e
			chi += dd * dd / e
			df++
		}
		assert.Less(t, chi, chiSquareLimit(df), "%+v", o)
		assert.InDeltaMapValues(t, cpuCount, count, 3, "%+v: the same draws as the CPU's, but a few", o)
	}
}

func TestGPUSampleGreedyIsArgmax(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(15, 16))
	for _, cols := range []int{3, 1000, 128256} {
		rows := 32
		vals := make([]float64, rows*cols)
		for i := range vals {
			vals[i] = float64(r.IntN(200)) / 8 // ties
		}
		for _, dt := range []DType{F32, F16, BF16} {
			greedyIsArgmax(t, tensorOf(t, d, dt, vals, rows, cols), fmt.Sprintf("%s × %d", dt, cols))
		}
	}
}

// TestGPUSampleSpeed prints the time of a decoding step's sampling (the
// draw and the read of the ids) for 1, 8 and 64 rows of a 128256-token
// vocabulary, and the time of a draw queued behind others (the device's
// time, with a wait every 100 draws).
func TestGPUSampleSpeed(t *testing.T) {
	d := gpu(t)
	poisonAllocs.Store(false)
	const cols = 128256
	r := rand.New(rand.NewPCG(17, 18))
	prev := make([]int32, 512)
	for i := range prev {
		prev[i] = int32(r.IntN(cols))
	}
	for _, rows := range []int{1, 8, 64} {
		vals := make([]float32, rows*cols)
		for i := range vals {
			vals[i] = float32(3 * r.NormFloat64())
		}
		x, err := FromSlice(d, vals, rows, cols)
		require.NoError(t, err)
		h, err := NewTokenHistory(d, rows, cols)
		require.NoError(t, err)
		for i := range rows {
			require.NoError(t, h.Set(i, prev))
		}
		for _, c := range []struct {
			name string
			o    SampleOptions
			hist bool
		}{
			{"greedy", SampleOptions{}, false},
			{"temperature 0.8", SampleOptions{Temperature: 0.8}, false},
			{"top-k 50", SampleOptions{Temperature: 0.8, TopK: 50}, false},
			{"top-p 0.9", SampleOptions{Temperature: 1, TopP: 0.9}, false},
			{"min-p 0.05", SampleOptions{Temperature: 1, MinP: 0.05}, false},
			{"penalty 1.1, history", SampleOptions{Temperature: 0.8, RepetitionPenalty: 1.1}, true},
			{"penalty 1.1, 512 previous", SampleOptions{Temperature: 0.8, RepetitionPenalty: 1.1, Previous: prev}, false},
			{"top-k 50, top-p 0.9", SampleOptions{Temperature: 0.8, TopK: 50, TopP: 0.9}, false},
			{"all, history", SampleOptions{Temperature: 0.8, TopK: 50, TopP: 0.9, MinP: 0.02, RepetitionPenalty: 1.1}, true},
		} {
			opts := make([]SampleOptions, rows)
			for i := range opts {
				opts[i] = c.o
				if c.hist {
					opts[i].History, opts[i].HistorySlot = h, i
				}
			}
			step := func(s int, read bool) {
				for i := range opts {
					opts[i].Step = uint64(s)
				}
				ids, err := x.Sample(opts)
				require.NoError(t, err)
				if read {
					_, err = ToSlice[uint32](ids)
					require.NoError(t, err)
				}
				ids.Close()
			}
			const steps = 100
			for s := range 5 {
				step(s, true)
			}
			start := time.Now()
			for s := range steps {
				step(s, true)
			}
			perStep := float64(time.Since(start).Microseconds()) / steps
			require.NoError(t, d.Synchronize())
			start = time.Now()
			for s := range steps {
				step(s, false)
			}
			require.NoError(t, d.Synchronize())
			queued := float64(time.Since(start).Microseconds()) / steps
			t.Logf("%2d × %d, %-28s %7.1f µs a step, %7.1f µs queued", rows, cols, c.name, perStep, queued)
		}
		h.Close()
		x.Close()
	}
}
