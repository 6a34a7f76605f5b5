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

// sampleSettings are the settings the GPU tests compare.
var sampleSettings = []SampleOptions{
	{},
	{Temperature: 1},
	{Temperature: 0.7},
	{Temperature: 1.5, TopK: 50},
	{Temperature: 1, TopK: 1000},
	{Temperature: 1, TopP: 0.9},
	{Temperature: 0.6, TopP: 0.5},
	{Temperature: 1, MinP: 0.05},
	{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.02},
	{Temperature: 1, TopK: 100, TopP: 0.8, RepetitionPenalty: 1.3},
	{RepetitionPenalty: 1.5},
	{Temperature: 1.2, RepetitionPenalty: 0.8},
}

func TestGPUSample(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(11, 12))
	for _, dt := range []DType{F32, F16, BF16} {
		for _, cols := range []int{1, 7, 1000, 4099, 32000, 128256} {
			rows := 8
			logits := make([][]float64, rows)
			for i := range logits {
				logits[i] = make([]float64, cols)
				for j := range logits[i] {
					logits[i][j] = 3 * r.NormFloat64()
				}
			}
			for si, s := range sampleSettings {
				opts := make([]SampleOptions, rows)
				for i := range opts {
					opts[i] = s
					opts[i].Seed, opts[i].Step = uint64(si*100+i), uint64(i)
					if s.RepetitionPenalty != 0 {
						for range 1 + r.IntN(200) {
							opts[i].Previous = append(opts[i].Previous, int32(r.IntN(cols)))
						}
					}
				}
				name := fmt.Sprintf("%s × %d, %+v", dt, cols, s)
				c := sampleIDs(t, CPU(), dt, logits, opts)
				g := sampleIDs(t, d, dt, logits, opts)
				// Identical, but where a boundary is within rounding: at most
				// one row of the eight.
				diff := 0
				for i := range c {
					if c[i] != g[i] {
						diff++
						t.Logf("%s row %d: cpu %d, gpu %d", name, i, c[i], g[i])
					}
				}
				assert.LessOrEqual(t, diff, 1, name)
				assert.Equal(t, g, sampleIDs(t, d, dt, logits, opts), "%s: the GPU draws the same again", name)
			}
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

// TestGPUSampleSpeed prints the time of a step (sample, read the ids) for
// 1 and 32 rows of a 128256-token vocabulary.
func TestGPUSampleSpeed(t *testing.T) {
	d := gpu(t)
	poisonAllocs.Store(false)
	const cols = 128256
	r := rand.New(rand.NewPCG(17, 18))
	prev := make([]int32, 512)
	for i := range prev {
		prev[i] = int32(r.IntN(cols))
	}
	for _, rows := range []int{1, 32} {
		vals := make([]float32, rows*cols)
		for i := range vals {
			vals[i] = float32(3 * r.NormFloat64())
		}
		x, err := FromSlice(d, vals, rows, cols)
		require.NoError(t, err)
		for _, c := range []struct {
			name string
			o    SampleOptions
		}{
			{"greedy", SampleOptions{}},
			{"temperature 0.8", SampleOptions{Temperature: 0.8}},
			{"top-k 50, top-p 0.9", SampleOptions{Temperature: 0.8, TopK: 50, TopP: 0.9}},
			{"top-p 0.95", SampleOptions{Temperature: 1, TopP: 0.95}},
			{"min-p 0.05", SampleOptions{Temperature: 1, MinP: 0.05}},
			{"all, penalty of 512 tokens", SampleOptions{Temperature: 0.8, TopK: 50, TopP: 0.9, MinP: 0.02, RepetitionPenalty: 1.1, Previous: prev}},
		} {
			opts := make([]SampleOptions, rows)
			for i := range opts {
				opts[i] = c.o
			}
			const steps = 100
			var start time.Time
			for s := -5; s < steps; s++ {
				if s == 0 {
					start = time.Now()
				}
				for i := range opts {
					opts[i].Step = uint64(s + 5)
				}
				ids, err := x.Sample(opts)
				require.NoError(t, err)
				_, err = ToSlice[uint32](ids)
				require.NoError(t, err)
				ids.Close()
			}
			t.Logf("%2d × %d, %-28s %7.1f µs a step", rows, cols, c.name, float64(time.Since(start).Microseconds())/steps)
		}
		x.Close()
	}
}
