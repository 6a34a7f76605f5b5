package candle

import (
	"errors"
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

// refProcess is ProcessLogits in plain Go: bias (a token's terms summed),
// the repetition penalty once per distinct previous token, the
// temperature (1 when greedy), in float32 as the devices compute it.
func refProcess(row []float64, o SampleOptions, previous []int32) []float64 {
	z := make([]float32, len(row))
	for i, v := range row {
		z[i] = float32(v)
	}
	bias := map[int32]float32{}
	for _, b := range o.Bias {
		bias[b.ID] += b.Add
	}
	for id, a := range bias {
		z[id] += a
	}
	if o.RepetitionPenalty != 0 && o.RepetitionPenalty != 1 {
		seen := map[int32]bool{}
		for _, id := range previous {
			if seen[id] {
				continue
			}
			seen[id] = true
			if z[id] < 0 {
				z[id] *= o.RepetitionPenalty
			} else {
				z[id] /= o.RepetitionPenalty
			}
		}
	}
	temp := o.Temperature
	if o.greedy() {
		temp = 1
	}
	out := make([]float64, len(z))
	for i := range z {
		out[i] = float64(z[i] / temp)
	}
	return out
}

// refLogSoftmax is the log-softmax of a row in float64.
func refLogSoftmax(z []float64) []float64 {
	m := slices.Max(z)
	var sum float64
	for _, v := range z {
		sum += math.Exp(v - m)
	}
	out := make([]float64, len(z))
	for i, v := range z {
		out[i] = v - m - math.Log(sum)
	}
	return out
}

// processCase is a batch of logits and options for ProcessLogits, with
// every kind of row: bias (repeated ids), the penalty from a list (with
// repeats) and from a history, temperatures, greedy.
type processCase struct {
	logits   [][]float64
	opts     []SampleOptions
	previous [][]int32 // each row's penalised tokens, whichever way given
	slots    []int     // the history slot of a row, -1 for none
}

func newProcessCase(r *rand.Rand, cols int) processCase {
	var c processCase
	kinds := []SampleOptions{
		{},
		{Temperature: 0.7},
		{Temperature: 1.3, RepetitionPenalty: 1.5},
		{Temperature: 0.9, RepetitionPenalty: 1.2},
		{Temperature: 1, Bias: []TokenBias{{3, 5}, {3, 2.5}, {int32(cols - 1), -100}}},
		{Temperature: 0.5, TopK: 5, TopP: 0.9, RepetitionPenalty: 2, Bias: []TokenBias{{1, -3}}},
		{TopK: 1, Temperature: 0.3, Bias: []TokenBias{{0, 7}}},
	}
	for i, o := range kinds {
		c.logits = append(c.logits, randomLogits(r, 1, cols, 3)[0])
		var prev []int32
		if o.RepetitionPenalty != 0 {
			for range 1 + r.IntN(40) {
				prev = append(prev, int32(r.IntN(cols)))
			}
			prev = append(prev, prev[0]) // a repeat is penalised once
		}
		slot := -1
		if i == 3 || i == 5 {
			slot = i
		} else {
			o.Previous = prev
		}
		c.opts, c.previous, c.slots = append(c.opts, o), append(c.previous, prev), append(c.slots, slot)
	}
	return c
}

// run processes the case on dev, the history rows through a new history.
func (c processCase) run(t *testing.T, dev Device, dt DType) []float64 {
	t.Helper()
	rows, cols := len(c.logits), len(c.logits[0])
	h, err := NewTokenHistory(dev, rows, cols)
	require.NoError(t, err)
	defer h.Close()
	opts := slices.Clone(c.opts)
	for i, s := range c.slots {
		if s >= 0 {
			require.NoError(t, h.Set(s, c.previous[i]))
			opts[i].History, opts[i].HistorySlot = h, s
		}
	}
	x := tensorOf(t, dev, dt, slices.Concat(c.logits...), rows, cols)
	p, err := x.ProcessLogits(opts)
	require.NoError(t, err)
	defer p.Close()
	assert.Equal(t, F32, p.DType())
	assert.Equal(t, Shape{rows, cols}, p.Shape())
	for i, s := range c.slots {
		if s >= 0 {
			got, err := h.Tokens(s)
			require.NoError(t, err)
			want := slices.Clone(c.previous[i])
			slices.Sort(want)
			assert.Equal(t, slices.Compact(want), got, "ProcessLogits leaves the history as it was")
		}
	}
	return values(t, p)
}

func TestProcessLogitsOnCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, cols := range []int{8, 100, 1000} {
		c := newProcessCase(r, cols)
		got := c.run(t, CPU(), F32)
		for i, row := range c.logits {
			want := refProcess(row, c.opts[i], c.previous[i])
			assert.Equal(t, want, got[i*cols:(i+1)*cols], "%d columns, row %d (%+v)", cols, i, c.opts[i])
		}
	}
	// The input is untouched, strided input is read as it lies.
	x := tensorOf(t, CPU(), F32, []float64{1, 2, 3, 4, 5, 6}, 3, 2)
	xt := keep(t)(x.T())
	p := keep(t)(xt.ProcessLogits([]SampleOptions{{Temperature: 2, Bias: []TokenBias{{0, 1}}}, {}}))
	assert.Equal(t, []float64{1, 1.5, 2.5, 2, 4, 6}, values(t, p))
	assert.Equal(t, []float64{1, 2, 3, 4, 5, 6}, values(t, x))
}

func TestTokenLogProbsOnCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	rows, cols := 5, 300
	logits := randomLogits(r, rows, cols, 4)
	logits[2][7], logits[2][9] = 20, 20 // a tie at the top: lower id first
	x := tensorOf(t, CPU(), F32, slices.Concat(logits...), rows, cols)
	chosenIDs := []uint32{0, 299, 9, 150, 42}
	ids := keep(t)(FromSlice(CPU(), chosenIDs, rows))
	for _, k := range []int{0, 1, 5, 20} {
		chosen, top, topIDs, err := x.TokenLogProbs(ids, k)
		require.NoError(t, err)
		got := values(t, chosen)
		chosen.Close()
		for i := range rows {
			want := refLogSoftmax(logits[i])
			near(t, []float64{want[chosenIDs[i]]}, got[i:i+1], 1e-5, "row %d's chosen token", i)
			if k == 0 {
				assert.Nil(t, top)
				assert.Nil(t, topIDs)
				continue
			}
			order := make([]int, cols)
			for j := range order {
				order[j] = j
			}
			sort.SliceStable(order, func(a, b int) bool { return want[order[a]] > want[order[b]] })
			tv, tid := values(t, top), values(t, topIDs)
			for j := range k {
				assert.Equal(t, float64(order[j]), tid[i*k+j], "row %d, rank %d", i, j)
				near(t, []float64{want[order[j]]}, tv[i*k+j:i*k+j+1], 1e-5, "row %d, rank %d", i, j)
			}
		}
		if top != nil {
			assert.Equal(t, Shape{rows, k}, top.Shape())
			assert.Equal(t, U32, topIDs.DType())
			top.Close()
			topIDs.Close()
		}
	}
}

func TestSampleBiasOnCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	cols := 64
	row := randomLogits(r, 1, cols, 2)[0]
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	other := (best + 1) % cols
	// Greedy follows the bias: +100 makes a token win, -100 makes the
	// argmax lose.
	got := sampleIDs(t, CPU(), F32, [][]float64{row, row, row}, []SampleOptions{
		{Bias: []TokenBias{{int32(other), 100}}},
		{Bias: []TokenBias{{int32(best), -100}}},
		{},
	})
	assert.Equal(t, uint32(other), got[0])
	assert.NotEqual(t, uint32(best), got[1])
	assert.Equal(t, uint32(best), got[2])
	// A draw with a bias is the draw from the biased logits.
	biased := slices.Clone(row)
	biased[5] += 3
	biased[9] -= 2
	for step := range 50 {
		o := SampleOptions{Temperature: 1, TopP: 0.95, Seed: 7, Step: uint64(step)}
		ob := o
		ob.Bias = []TokenBias{{5, 1}, {9, -2}, {5, 2}}
		got := sampleIDs(t, CPU(), F32, [][]float64{row, biased}, []SampleOptions{ob, o})
		assert.Equal(t, got[1], got[0], "step %d", step)
	}
	// -100 on every token but one leaves that one.
	var all []TokenBias
	for i := range cols {
		if i != 17 {
			all = append(all, TokenBias{int32(i), -100})
		}
	}
	for step := range 20 {
		got := sampleIDs(t, CPU(), BF16, [][]float64{row}, []SampleOptions{{Temperature: 1, Seed: 3, Step: uint64(step), Bias: all}})
		assert.Equal(t, uint32(17), got[0])
	}
}

func TestLogitsErrors(t *testing.T) {
	x := tensorOf(t, CPU(), F32, make([]float64, 20), 2, 10)
	for _, c := range []struct {
		opts []SampleOptions
		kind error
	}{
		{[]SampleOptions{{Bias: []TokenBias{{10, 1}}}, {}}, ErrIndex},
		{[]SampleOptions{{}, {Bias: []TokenBias{{-1, 1}}}}, ErrIndex},
		{[]SampleOptions{{Bias: []TokenBias{{1, float32(math.NaN())}}}, {}}, ErrArgument},
		{[]SampleOptions{{Bias: []TokenBias{{1, float32(math.Inf(1))}}}, {}}, ErrArgument},
		{[]SampleOptions{{}}, ErrArgument},
		{[]SampleOptions{{Temperature: -1}, {}}, ErrArgument},
	} {
		_, err := x.Sample(c.opts)
		assert.ErrorIs(t, err, c.kind, "Sample %+v", c.opts)
		_, err = x.ProcessLogits(c.opts)
		assert.ErrorIs(t, err, c.kind, "ProcessLogits %+v", c.opts)
	}
	i64 := tensorOf(t, CPU(), I64, make([]float64, 20), 2, 10)
	_, err := i64.ProcessLogits(make([]SampleOptions, 2))
	assert.ErrorIs(t, err, ErrDType)
	ids := keep(t)(FromSlice(CPU(), []uint32{1, 2}, 2))
	_, _, _, err = x.TokenLogProbs(ids, 11)
	assert.ErrorIs(t, err, ErrArgument)
	_, _, _, err = x.TokenLogProbs(ids, -1)
	assert.ErrorIs(t, err, ErrArgument)
	beyond := keep(t)(FromSlice(CPU(), []uint32{1, 5000}, 2))
	_, _, _, err = x.TokenLogProbs(beyond, 1)
	assert.ErrorIs(t, err, ErrIndex, "a token id beyond the vocabulary")
	wrong := keep(t)(FromSlice(CPU(), []uint32{1, 2, 3}, 3))
	_, _, _, err = x.TokenLogProbs(wrong, 1)
	assert.ErrorIs(t, err, ErrShape)
	wrongType := tensorOf(t, CPU(), I64, []float64{1, 2}, 2)
	_, _, _, err = x.TokenLogProbs(wrongType, 1)
	assert.ErrorIs(t, err, ErrShape)
	closed := tensorOf(t, CPU(), F32, make([]float64, 20), 2, 10)
	closed.Close()
	_, err = closed.ProcessLogits(make([]SampleOptions, 2))
	assert.True(t, errors.Is(err, ErrClosed))
}

// TestGPUProcessLogits compares the GPU's processed logits, their
// log-probabilities and the biased draws with the CPU's.
func TestGPUProcessLogits(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(47, 48))
	for _, dt := range []DType{F32, F16, BF16} {
		for _, cols := range []int{7, 1000, 32000, 128256} {
			name := fmt.Sprintf("%s × %d", dt, cols)
			c := newProcessCase(r, cols)
			want, got := c.run(t, CPU(), dt), c.run(t, d, dt)
			near(t, want, got, 1e-6, name)
			rows := len(c.logits)
			ids := make([]uint32, rows)
			for i := range ids {
				ids[i] = uint32(r.IntN(cols))
			}
			k := min(cols, 20)
			lp := func(dev Device) (chosen, top, topIDs []float64) {
				x := keep(t)(FromSlice(dev, mapTo(want, func(v float64) float32 { return float32(v) }), rows, cols))
				idt := keep(t)(FromSlice(dev, ids, rows))
				ch, tp, ti, err := x.TokenLogProbs(idt, k)
				require.NoError(t, err, name)
				defer ch.Close()
				defer tp.Close()
				defer ti.Close()
				return values(t, ch), values(t, tp), values(t, ti)
			}
			cc, ct, ci := lp(CPU())
			gc, gt, gi := lp(d)
			near(t, cc, gc, 1e-5, name, "chosen")
			near(t, ct, gt, 1e-5, name, "top")
			assert.Equal(t, ci, gi, name, "top ids")
			// Biased draws: the same tokens on both devices.
			opts := make([]SampleOptions, 16)
			logits := make([][]float64, len(opts))
			for i := range opts {
				logits[i] = randomLogits(r, 1, cols, 3)[0]
				opts[i] = SampleOptions{Temperature: 0.8, TopP: 0.9, Seed: r.Uint64(), Step: uint64(i)}
				for range 1 + r.IntN(30) {
					opts[i].Bias = append(opts[i].Bias, TokenBias{int32(r.IntN(cols)), float32(8 * r.NormFloat64())})
				}
			}
			assert.Equal(t, sampleIDs(t, CPU(), dt, logits, opts), sampleIDs(t, d, dt, logits, opts), name, "biased draws")
		}
	}
}

// TestGPULogProbsSpeed logs what a step of a generation loop pays on a
// GPU for a bias (OpenAI's logit_bias and penalties: the draw reads a
// biased copy) and for log-probabilities (the processors once more, a
// log-softmax and a top-k, k+1 values a row read back), against a plain
// draw, at Llama 3's vocabulary.
func TestGPULogProbsSpeed(t *testing.T) {
	d := gpu(t)
	poisonAllocs.Store(false)
	const cols = 128256
	r := rand.New(rand.NewPCG(49, 50))
	for _, rows := range []int{1, 8, 64} {
		vals := make([]float32, rows*cols)
		for i := range vals {
			vals[i] = float32(3 * r.NormFloat64())
		}
		x, err := FromSlice(d, vals, rows, cols)
		require.NoError(t, err)
		var bias []TokenBias
		for range 256 {
			bias = append(bias, TokenBias{int32(r.IntN(cols)), float32(-r.Float64())})
		}
		for _, c := range []struct {
			name string
			bias bool
			k    int // -1: no log-probabilities
		}{
			{"draw", false, -1},
			{"draw, 256 biased tokens", true, -1},
			{"draw, logprobs", false, 0},
			{"draw, logprobs, top 5", false, 5},
			{"draw, bias, logprobs, top 20", true, 20},
		} {
			opts := make([]SampleOptions, rows)
			for i := range opts {
				opts[i] = SampleOptions{Temperature: 0.8, TopP: 0.9, Seed: uint64(i)}
				if c.bias {
					opts[i].Bias = bias
				}
			}
			step := func(s int) {
				for i := range opts {
					opts[i].Step = uint64(s)
				}
				var p *Tensor
				if c.k >= 0 {
					p, err = x.ProcessLogits(opts)
					require.NoError(t, err)
					defer p.Close()
				}
				ids, err := x.Sample(opts)
				require.NoError(t, err)
				defer ids.Close()
				if _, err = ToSlice[uint32](ids); err != nil || p == nil {
					require.NoError(t, err)
					return
				}
				chosen, top, topIDs, err := p.TokenLogProbs(ids, c.k)
				require.NoError(t, err)
				defer chosen.Close()
				_, err = ToSlice[float32](chosen)
				require.NoError(t, err)
				if top != nil {
					defer top.Close()
					defer topIDs.Close()
					_, err = ToSlice[float32](top)
					require.NoError(t, err)
					_, err = ToSlice[uint32](topIDs)
					require.NoError(t, err)
				}
			}
			const steps = 100
			for s := range 5 {
				step(s)
			}
			start := time.Now()
			for s := range steps {
				step(s)
			}
			t.Logf("%2d × %d, %-30s %7.1f µs a step", rows, cols, c.name, float64(time.Since(start).Microseconds())/steps)
		}
		x.Close()
	}
}

func TestLogitsEmptyOnCPU(t *testing.T) {
	x := keep(t)(Zeros(CPU(), BF16, 0, 5))
	p := keep(t)(x.ProcessLogits(nil))
	assert.Equal(t, Shape{0, 5}, p.Shape())
	assert.Equal(t, F32, p.DType())
	ids := keep(t)(Zeros(CPU(), U32, 0))
	chosen, top, topIDs, err := p.TokenLogProbs(ids, 2)
	require.NoError(t, err)
	defer chosen.Close()
	defer top.Close()
	defer topIDs.Close()
	assert.Equal(t, Shape{0}, chosen.Shape())
	assert.Equal(t, Shape{0, 2}, top.Shape())
	assert.Equal(t, Shape{0, 2}, topIDs.Shape())
}
