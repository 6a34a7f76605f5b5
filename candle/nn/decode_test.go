package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/flashattn"
)

// decodeAgainstBegin runs the same decode steps through Begin on one cache
// and BeginDecode on another (same config, same prefills, the same random
// q, k and v): sequences of different lengths that cross page boundaries,
// and a sequence released and replaced between steps. It checks the
// steps' indices, the attention outputs (within tol of the largest |out|)
// and the caches' free pages, and returns the worst relative difference.
func decodeAgainstBegin(t *testing.T, dev candle.Device, dt candle.DType, p flashattn.Params, tol float64) float64 {
	t.Helper()
	cfg := PagedKVConfig{Layers: 2, Pages: 40, PageSize: 4, KVHeads: 2, HeadDim: 16}
	const hq = 4
	r := rand.New(rand.NewPCG(11, 12))
	classic, err := NewPagedKVCache(dev, dt, cfg)
	require.NoError(t, err)
	defer classic.Close()
	fixed, err := NewPagedKVCache(dev, dt, cfg)
	require.NoError(t, err)
	defer fixed.Close()
	const maxLen = 50
	in, err := fixed.NewDecodeInputs(3, maxLen)
	require.NoError(t, err)
	defer in.Close()
	assert.Equal(t, 3, in.Batch())
	assert.Equal(t, maxLen, in.MaxLen())

	random := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	tensor := func(v []float32, shape ...int) *candle.Tensor {
		x, err := candle.FromSlice(dev, v, shape...)
		require.NoError(t, err)
		y, err := x.ToDType(dt)
		require.NoError(t, err)
		x.Close()
		t.Cleanup(func() { y.Close() })
		return y
	}
	// attend runs every layer of a step with the given q, k, v and
	// returns the outputs as float64.
	attend := func(step *PagedStep, qs, ks, vs [][]float32) [][]float64 {
		T := step.Len()
		var out [][]float64
		for l := range cfg.Layers {
			q := tensor(qs[l], T, hq, cfg.HeadDim)
			k := tensor(ks[l], T, cfg.KVHeads, cfg.HeadDim)
			v := tensor(vs[l], T, cfg.KVHeads, cfg.HeadDim)
			o, err := step.Attention(l, q, k, v, p)
			require.NoError(t, err)
			o32, err := o.ToDType(candle.F32)
			require.NoError(t, err)
			o.Close()
			vals, err := candle.ToSlice[float32](o32)
			require.NoError(t, err)
			o32.Close()
			row := make([]float64, len(vals))
			for i, x := range vals {
				row[i] = float64(x)
			}
			out = append(out, row)
		}
		return out
	}
	layerData := func(T int) (qs, ks, vs [][]float32) {
		for range cfg.Layers {
			qs = append(qs, random(T*hq*cfg.HeadDim))
			ks = append(ks, random(T*cfg.KVHeads*cfg.HeadDim))
			vs = append(vs, random(T*cfg.KVHeads*cfg.HeadDim))
		}
		return qs, ks, vs
	}
	// prefill puts the same prompt of n tokens into both caches.
	prefill := func(id uint64, n int) {
		toks := make([]int32, n)
		qs, ks, vs := layerData(n)
		for _, c := range []*PagedKVCache{classic, fixed} {
			step, err := c.Begin([]uint64{id}, [][]int32{toks})
			require.NoError(t, err)
			attend(step, qs, ks, vs)
			step.Commit()
			require.NoError(t, step.Close())
		}
	}
	prefill(1, 5)
	prefill(2, 16)
	prefill(3, 31)
	seqs := []uint64{1, 2, 3}
	worst := 0.0
	for n := range 12 {
		if n == 6 {
			// Sequence 2 finishes; 4 takes its place in the batch.
			classic.Release(2)
			fixed.Release(2)
			prefill(4, 9)
			seqs = []uint64{1, 4, 3}
		}
		toks := []int32{int32(10 * n), int32(10*n + 1), int32(10*n + 2)}
		qs, ks, vs := layerData(3)
		a, err := classic.Begin(seqs, [][]int32{toks[:1], toks[1:2], toks[2:]})
		require.NoError(t, err)
		b, err := fixed.BeginDecode(seqs, toks, in)
		require.NoError(t, err)
		for _, x := range []struct {
			name string
			a, b *candle.Tensor
		}{{"tokens", a.Tokens(), b.Tokens()}, {"positions", a.Positions(), b.Positions()}, {"last rows", a.LastRows(), b.LastRows()}} {
			av, err := candle.ToSlice[uint32](x.a)
			require.NoError(t, err)
			bv, err := candle.ToSlice[uint32](x.b)
			require.NoError(t, err)
			assert.Equal(t, av, bv, "step %d: %s", n, x.name)
		}
		assert.True(t, a.EveryRowLast(), "step %d: a decode step's logits need no gather", n)
		assert.True(t, b.EveryRowLast(), "step %d: BeginDecode's", n)
		lens, err := candle.ToSlice[uint32](in.seqLens)
		require.NoError(t, err)
		table, err := candle.ToSlice[uint32](in.table)
		require.NoError(t, err)
		for i, id := range seqs {
			held, _ := fixed.Len(id)
			assert.Equal(t, uint32(held+1), lens[i], "step %d: the length of sequence %d", n, id)
			hp, added := b.pages(i)
			for k := range len(hp) + len(added) {
				assert.Equal(t, uint32(pageAt(hp, added, k)), table[i*in.width+k], "step %d: page %d of sequence %d", n, k, id)
			}
		}
		oa, ob := attend(a, qs, ks, vs), attend(b, qs, ks, vs)
		for l := range oa {
			scale, e := 0.0, 0.0
			for i := range oa[l] {
				scale = math.Max(scale, math.Abs(oa[l][i]))
				e = math.Max(e, math.Abs(oa[l][i]-ob[l][i]))
			}
			worst = math.Max(worst, e/scale)
			require.LessOrEqual(t, e/scale, tol, "step %d, layer %d: BeginDecode against Begin", n, l)
		}
		a.Commit()
		b.Commit()
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
		assert.Equal(t, classic.FreePages(), fixed.FreePages(), "step %d", n)
		for _, id := range seqs {
			la, _ := classic.Len(id)
			lb, _ := fixed.Len(id)
			assert.Equal(t, la, lb, "step %d: sequence %d", n, id)
		}
	}
	return worst
}

// TestBeginDecode checks decode steps through DecodeInputs against Begin
// on the CPU device (where the attention is the same reference).
func TestBeginDecode(t *testing.T) {
	for _, p := range []flashattn.Params{{}, {Window: &flashattn.Window{Left: 6, Right: -1}}} {
		assert.Zero(t, decodeAgainstBegin(t, candle.CPU(), candle.F32, p, 0))
	}
}

func TestBeginDecodeErrors(t *testing.T) {
	cfg := PagedKVConfig{Layers: 1, Pages: 6, PageSize: 4, KVHeads: 1, HeadDim: 8}
	c, err := NewPagedKVCache(candle.CPU(), candle.F32, cfg)
	require.NoError(t, err)
	defer c.Close()
	other, err := NewPagedKVCache(candle.CPU(), candle.F32, cfg)
	require.NoError(t, err)
	defer other.Close()
	_, err = c.NewDecodeInputs(0, 8)
	require.ErrorIs(t, err, candle.ErrArgument)
	_, err = c.NewDecodeInputs(2, 25)
	require.ErrorIs(t, err, candle.ErrArgument, "more tokens than the cache holds")
	in, err := c.NewDecodeInputs(2, 8)
	require.NoError(t, err)
	defer in.Close()
	oin, err := other.NewDecodeInputs(2, 8)
	require.NoError(t, err)
	defer oin.Close()

	step, err := c.Begin([]uint64{1, 2}, [][]int32{{1, 2, 3, 4}, {5, 6, 7, 8, 9, 10, 11, 12}})
	require.NoError(t, err)
	step.Commit()
	require.NoError(t, step.Close())
	free := c.FreePages()
	for _, x := range []struct {
		name   string
		seqs   []uint64
		tokens []int32
		in     *DecodeInputs
		msg    string
	}{
		{"batch", []uint64{1}, []int32{1}, in, "1 sequences and 1 tokens for inputs of batch 2"},
		{"tokens", []uint64{1, 2}, []int32{1}, in, "2 sequences and 1 tokens"},
		{"duplicate", []uint64{1, 1}, []int32{1, 2}, in, "both entry 0 and entry 1"},
		{"new", []uint64{1, 3}, []int32{1, 2}, in, "sequence 3 (entry 1) is not in the cache"},
		{"too long", []uint64{2, 1}, []int32{1, 2}, in, "sequence 2 (entry 0) would hold 9 tokens; the inputs take up to 8"},
		{"other cache", []uint64{1, 2}, []int32{1, 2}, oin, "inputs of another cache"},
		{"nil", []uint64{1, 2}, []int32{1, 2}, nil, "inputs of another cache"},
	} {
		_, err := c.BeginDecode(x.seqs, x.tokens, x.in)
		require.ErrorIs(t, err, candle.ErrArgument, x.name)
		assert.ErrorContains(t, err, x.msg, x.name)
		assert.Equal(t, free, c.FreePages(), "%s: nothing reserved", x.name)
	}
	// A step in flight, then the cache full, then a closed input.
	s1, err := c.Begin([]uint64{1}, [][]int32{{1}})
	require.NoError(t, err)
	_, err = c.BeginDecode([]uint64{1, 2}, []int32{1, 2}, in)
	require.ErrorIs(t, err, candle.ErrArgument)
	assert.ErrorContains(t, err, "a step is in flight")
	require.NoError(t, s1.Close())

	small, err := NewPagedKVCache(candle.CPU(), candle.F32, PagedKVConfig{Layers: 1, Pages: 2, PageSize: 4, KVHeads: 1, HeadDim: 8})
	require.NoError(t, err)
	defer small.Close()
	s2, err := small.Begin([]uint64{1, 2}, [][]int32{{1, 2, 3, 4}, {5, 6, 7, 8}})
	require.NoError(t, err)
	s2.Commit()
	require.NoError(t, s2.Close())
	sin, err := small.NewDecodeInputs(2, 8)
	require.NoError(t, err)
	_, err = small.BeginDecode([]uint64{1, 2}, []int32{1, 2}, sin)
	require.ErrorIs(t, err, ErrCacheFull)
	require.NoError(t, sin.Close())
	require.NoError(t, sin.Close())
	_, err = small.BeginDecode([]uint64{1, 2}, []int32{1, 2}, sin)
	require.ErrorIs(t, err, candle.ErrClosed)
}

// TestGPUBeginDecode checks BeginDecode's fixed launch on the GPU against
// Begin's (whose split-KV follows each step's lengths), in F32 and BF16,
// with and without a sliding window.
func TestGPUBeginDecode(t *testing.T) {
	dev := hipDevice(t)
	for _, dt := range []candle.DType{candle.F32, candle.BF16} {
		for _, p := range []flashattn.Params{{}, {Window: &flashattn.Window{Left: 6, Right: -1}}} {
			tol := 1e-5
			if dt == candle.BF16 {
				tol = 1e-2 // each output rounds to BF16 after another order of sums
			}
			e := decodeAgainstBegin(t, dev, dt, p, tol)
			t.Logf("%v, window %v: max relative difference %.3g", dt, p.Window, e)
		}
	}
}
