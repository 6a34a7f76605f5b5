package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/flashattn"
)

// pagedStep is one step of a paged-cache scenario: sequences and how many
// tokens each adds.
type pagedStep struct {
	seqs   []uint64
	counts []int
}

// pagedScenario mixes prefills, single-token decodes and multi-token
// continuations in one batch, across several steps, with a release and a
// reuse of pages between them.
var pagedScenario = []pagedStep{
	{[]uint64{1, 2}, []int{5, 3}},
	{[]uint64{2, 1, 3}, []int{4, 1, 6}},
	{[]uint64{1, 2, 3}, []int{1, 1, 1}},
	{[]uint64{3, 1}, []int{2, 9}},
	{[]uint64{4, 2}, []int{7, 1}}, // 4 reuses the pages of released 1? (1 is released before this step)
}

// runPaged drives a cache through pagedScenario with random q, k, v
// (the same on every device for one seed) and returns each step's
// attention output and the history of keys and values per sequence as
// float64 host tensors, for a reference.
type pagedRun struct {
	outs [][][]float32          // per step, per layer: (T, hq, d) in packed order
	rows [][][2]int             // per step, per input sequence: packed start and count
	k, v map[uint64][][]float64 // per sequence, per token: (hkv·d)
	qs   [][][][]float64        // per step, per input sequence, per token: (hq·d)
	lens []map[uint64]int       // per step: each sequence's cached length after the step
}

func runPaged(t *testing.T, dev candle.Device, dt candle.DType, cfg PagedKVConfig, hq int, p flashattn.Params, seed uint64) pagedRun {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed+1))
	c, err := NewPagedKVCache(dev, dt, cfg)
	require.NoError(t, err)
	defer c.Close()
	hkv, d := cfg.KVHeads, cfg.HeadDim
	run := pagedRun{k: map[uint64][][]float64{}, v: map[uint64][][]float64{}}
	round := func(x float64) float64 { // the values as dt holds them
		switch dt {
		case candle.BF16:
			return float64(float32FromBF16(x))
		case candle.F16:
			return float64(float32FromF16(x))
		}
		return float64(float32(x))
	}
	gen := func(n int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = round(r.NormFloat64())
		}
		return out
	}
	everyLast := 0 // steps whose every row is a last row
	for si, st := range pagedScenario {
		if si == 4 {
			c.Release(1)
			_, ok := c.Len(1)
			assert.False(t, ok)
		}
		tokens := make([][]int32, len(st.seqs))
		for i, n := range st.counts {
			tokens[i] = make([]int32, n)
			for j := range tokens[i] {
				tokens[i][j] = int32(100*si + 10*i + j)
			}
		}
		step, err := c.Begin(st.seqs, tokens)
		require.NoError(t, err)
		T := step.Len()
		// Host data in input order, packed into rows.
		qh, kh, vh := make([]float64, T*hq*d), make([]float64, T*hkv*d), make([]float64, T*hkv*d)
		var qsStep [][][]float64
		var rows [][2]int
		for i, id := range st.seqs {
			r0, n := step.Rows(i)
			rows = append(rows, [2]int{r0, n})
			var qseq [][]float64
			for j := range n {
				qv, kv, vv := gen(hq*d), gen(hkv*d), gen(hkv*d)
				copy(qh[(r0+j)*hq*d:], qv)
				copy(kh[(r0+j)*hkv*d:], kv)
				copy(vh[(r0+j)*hkv*d:], vv)
				qseq = append(qseq, qv)
				run.k[id] = append(run.k[id], kv)
				run.v[id] = append(run.v[id], vv)
			}
			qsStep = append(qsStep, qseq)
		}
		toks, err := candle.ToSlice[uint32](step.Tokens())
		require.NoError(t, err)
		pos, err := candle.ToSlice[uint32](step.Positions())
		require.NoError(t, err)
		last, err := candle.ToSlice[uint32](step.LastRows())
		require.NoError(t, err)
		every := T == len(st.seqs)
		for i := range st.seqs {
			every = every && last[i] == uint32(i)
		}
		assert.Equal(t, every, step.EveryRowLast(), "step %d: LastRows %v", si, last)
		if every {
			everyLast++
		}
		for i := range st.seqs {
			r0, n := step.Rows(i)
			assert.Equal(t, uint32(r0+n-1), last[i])
			for j := range n {
				assert.Equal(t, uint32(tokens[i][j]), toks[r0+j])
				assert.Equal(t, uint32(step.Start(i)+j), pos[r0+j])
			}
		}
		mk := func(v []float64, shape ...int) *candle.Tensor {
			x, err := candle.FromSlice(dev, v, shape...)
			require.NoError(t, err)
			defer x.Close()
			y, err := x.ToDType(dt)
			require.NoError(t, err)
			t.Cleanup(func() { y.Close() })
			return y
		}
		q, k, v := mk(qh, T, hq, d), mk(kh, T, hkv, d), mk(vh, T, hkv, d)
		var outs [][]float32
		for layer := range cfg.Layers {
			// Layer l attends over keys scaled by l+1: the layers' pools
			// must stay apart.
			kl, err := k.Affine(float64(layer+1), 0)
			require.NoError(t, err)
			o, err := step.Attention(layer, q, kl, v, p)
			kl.Close()
			require.NoError(t, err)
			require.Equal(t, candle.Shape{T, hq, d}, o.Shape())
			outs = append(outs, values(t, o))
			o.Close()
		}
		step.Commit()
		require.NoError(t, step.Close())
		lens := map[uint64]int{}
		for _, id := range st.seqs {
			n, ok := c.Len(id)
			require.True(t, ok)
			lens[id] = n
			assert.Equal(t, len(run.k[id]), n)
		}
		run.outs = append(run.outs, outs)
		run.rows = append(run.rows, rows)
		run.qs = append(run.qs, qsStep)
		run.lens = append(run.lens, lens)
	}
	assert.Equal(t, 1, everyLast, "steps whose rows are all last rows: the scenario's decode step")
	return run
}

func float32FromBF16(x float64) float32 {
	b := math.Float32bits(float32(x))
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}

func float32FromF16(x float64) float32 {
	// Round to 11 significant bits (normal range only: the tests' values
	// are normal).
	m, e := math.Frexp(x)
	return float32(math.Ldexp(math.RoundToEven(m*2048)/2048, e))
}

// checkPaged compares a run's outputs with flashattn's float64 reference
// over each sequence's whole history, for every layer (layer l's keys
// scaled by l+1: a layer that read another's pool would differ).
func checkPaged(t *testing.T, run pagedRun, layers, hq, hkv, d int, p flashattn.Params, tol float64) {
	t.Helper()
	p.Causal = true
	for si, st := range pagedScenario {
		require.Len(t, run.outs[si], layers, "step %d", si)
		for i, id := range st.seqs {
			L := run.lens[si][id]
			n := run.rows[si][i][1]
			q := flashattn.NewHostTensor(1, n, hq, d)
			for j := range n {
				copy(q.Data[j*hq*d:], run.qs[si][i][j])
			}
			v := flashattn.NewHostTensor(1, L, hkv, d)
			for j := range L {
				copy(v.Data[j*hkv*d:], run.v[id][j])
			}
			for layer := range layers {
				k := flashattn.NewHostTensor(1, L, hkv, d)
				for j := range L {
					for c, x := range run.k[id][j] {
						k.Data[j*hkv*d+c] = x * float64(layer+1)
					}
				}
				want, _, err := flashattn.Reference(q, k, v, p)
				require.NoError(t, err)
				r0 := run.rows[si][i][0]
				got := run.outs[si][layer][r0*hq*d : (r0+n)*hq*d]
				for e, w := range want.Data {
					if math.Abs(float64(got[e])-w) > tol*math.Max(1, math.Abs(w)) {
						require.Failf(t, "attention differs", "step %d, layer %d, sequence %d, element %d: want %v, got %v", si, layer, id, e, w, got[e])
					}
				}
			}
		}
	}
}

// pagedCase is a cache's shape, the query heads and a window, for
// runPaged and checkPaged.
type pagedCase struct {
	name   string
	cfg    PagedKVConfig
	hq     int
	window *flashattn.Window
}

// check runs the scenario on dev in dt and checks every output to tol.
func (c pagedCase) check(t *testing.T, dev candle.Device, dt candle.DType, seed uint64, tol float64) {
	t.Helper()
	p := flashattn.Params{Window: c.window}
	run := runPaged(t, dev, dt, c.cfg, c.hq, p, seed)
	checkPaged(t, run, c.cfg.Layers, c.hq, c.cfg.KVHeads, c.cfg.HeadDim, p, tol)
}

func TestPagedKVCacheCPU(t *testing.T) {
	for _, c := range []pagedCase{
		{"gqa, pages of 4", PagedKVConfig{Layers: 2, Pages: 16, PageSize: 4, KVHeads: 2, HeadDim: 8}, 4, nil},
		{"mha, pages of 1", PagedKVConfig{Layers: 1, Pages: 40, PageSize: 1, KVHeads: 2, HeadDim: 16}, 2, nil},
		{"window of 3", PagedKVConfig{Layers: 2, Pages: 8, PageSize: 8, KVHeads: 1, HeadDim: 8}, 3, &flashattn.Window{Left: 2, Right: -1}},
	} {
		t.Run(c.name, func(t *testing.T) { c.check(t, candle.CPU(), candle.F32, 7, 1e-5) })
	}
}

func TestPagedKVCacheBookkeeping(t *testing.T) {
	cpu := candle.CPU()
	c, err := NewPagedKVCache(cpu, candle.F32, PagedKVConfig{Layers: 1, Pages: 4, PageSize: 4, KVHeads: 1, HeadDim: 8})
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, 16, c.FreeTokens())
	toks := func(n int) []int32 { return make([]int32, n) }

	// Two pages for 5 tokens; a step that is closed without Commit gives
	// its pages back and leaves no sequence behind.
	s, err := c.Begin([]uint64{7}, [][]int32{toks(5)})
	require.NoError(t, err)
	assert.Equal(t, 2, c.FreePages())
	_, err = c.Begin([]uint64{8}, [][]int32{toks(1)})
	assert.ErrorIs(t, err, candle.ErrArgument, "one step at a time")
	require.NoError(t, s.Close())
	assert.Equal(t, 4, c.FreePages())
	_, ok := c.Len(7)
	assert.False(t, ok)

	s, err = c.Begin([]uint64{7}, [][]int32{toks(5)})
	require.NoError(t, err)
	s.Commit()
	require.NoError(t, s.Close())
	n, ok := c.Len(7)
	assert.True(t, ok)
	assert.Equal(t, 5, n)
	assert.Equal(t, 2, c.FreePages())

	// Three more tokens fit in the second page; nine need three pages.
	s, err = c.Begin([]uint64{7}, [][]int32{toks(3)})
	require.NoError(t, err)
	assert.Equal(t, 2, c.FreePages())
	s.Commit()
	s.Close()
	_, err = c.Begin([]uint64{7, 9}, [][]int32{toks(1), toks(9)})
	assert.ErrorIs(t, err, ErrCacheFull)
	assert.ErrorContains(t, err, "needs 4 pages")
	assert.Equal(t, 2, c.FreePages(), "a refused step reserves nothing")
	_, err = c.Begin([]uint64{9}, [][]int32{toks(17)})
	assert.ErrorIs(t, err, ErrCacheFull)

	// Bad batches.
	for _, b := range []struct {
		seqs []uint64
		toks [][]int32
		msg  string
	}{
		{nil, nil, "0 sequences"},
		{[]uint64{1}, nil, "1 sequences and 0 token lists"},
		{[]uint64{1, 1}, [][]int32{toks(1), toks(1)}, "both entry 0 and entry 1"},
		{[]uint64{1}, [][]int32{{}}, "no new tokens"},
	} {
		_, err := c.Begin(b.seqs, b.toks)
		assert.ErrorIs(t, err, candle.ErrArgument, b.msg)
		assert.ErrorContains(t, err, b.msg)
	}

	c.Release(7)
	c.Release(12345) // unknown: a no-op
	assert.Equal(t, 4, c.FreePages())
	assert.Equal(t, 0, c.Sequences())

	// Attention's checks.
	s, err = c.Begin([]uint64{1}, [][]int32{toks(2)})
	require.NoError(t, err)
	defer s.Close()
	q, _ := candle.Zeros(cpu, candle.F32, 2, 2, 8)
	k, _ := candle.Zeros(cpu, candle.F32, 2, 1, 8)
	defer q.Close()
	defer k.Close()
	_, err = s.Attention(1, q, k, k, flashattn.Params{})
	assert.ErrorIs(t, err, candle.ErrArgument)
	_, err = s.Attention(0, k, k, k, flashattn.Params{})
	assert.NoError(t, err, "one query head per KV head is fine")
	_, err = s.Attention(0, q, q, k, flashattn.Params{})
	assert.ErrorIs(t, err, candle.ErrShape)
	_, err = s.Attention(0, q, k, k, flashattn.Params{LSE: 4})
	assert.ErrorIs(t, err, candle.ErrArgument)
	kb, _ := k.ToDType(candle.BF16)
	defer kb.Close()
	_, err = s.Attention(0, q, kb, k, flashattn.Params{})
	assert.ErrorIs(t, err, candle.ErrDType)

	// Bad configs.
	for _, cfg := range []PagedKVConfig{
		{Layers: 0, Pages: 1, PageSize: 1, KVHeads: 1, HeadDim: 8},
		{Layers: 1, Pages: 1, PageSize: 1, KVHeads: 1, HeadDim: 12},
		{Layers: 1, Pages: 1, PageSize: 0, KVHeads: 1, HeadDim: 8},
	} {
		_, err := NewPagedKVCache(cpu, candle.F32, cfg)
		assert.ErrorIs(t, err, candle.ErrArgument, "%+v", cfg)
	}
	_, err = NewPagedKVCache(cpu, candle.U32, PagedKVConfig{Layers: 1, Pages: 1, PageSize: 1, KVHeads: 1, HeadDim: 8})
	assert.ErrorIs(t, err, candle.ErrDType)
	assert.Equal(t, 2*3*4*8*2, PagedKVBytesPerToken(candle.BF16, 3, 4, 8))
}

// TestGPUPagedKVCache runs the scenario on the GPU (flashattn's varlen
// prefill and paged decode, the row scatter into pages) against the
// float64 reference, for each dtype, with rows that take the row kernel
// (KV heads × head dim ≥ 64) and rows that do not, and a sliding window.
func TestGPUPagedKVCache(t *testing.T) {
	dev := hipDevice(t)
	for _, dt := range []candle.DType{candle.F32, candle.BF16, candle.F16} {
		for _, c := range []pagedCase{
			{"gqa d64, pages of 16", PagedKVConfig{Layers: 2, Pages: 12, PageSize: 16, KVHeads: 2, HeadDim: 64}, 8, nil},
			{"d16, pages of 4", PagedKVConfig{Layers: 2, Pages: 24, PageSize: 4, KVHeads: 1, HeadDim: 16}, 2, nil},
			{"d128 window 5, pages of 3", PagedKVConfig{Layers: 1, Pages: 40, PageSize: 3, KVHeads: 2, HeadDim: 128}, 4, &flashattn.Window{Left: 4, Right: -1}},
		} {
			t.Run(fmt.Sprintf("%s %s", dt, c.name), func(t *testing.T) {
				tol := map[candle.DType]float64{candle.F32: 1e-4, candle.BF16: 2e-2, candle.F16: 4e-3}[dt]
				c.check(t, dev, dt, 11, tol)
			})
		}
	}
}

// checkAttentionQKV runs two caches in step: one through AttentionQKV (a
// fused projection's heads and the angles), the other through Attention
// of the same heads rotated by RoPETHD; the outputs agree, prefill steps,
// decode steps (on a GPU: RoPECache's kernel) and steps of several new
// tokens of cached sequences alike.
func checkAttentionQKV(t *testing.T, dev candle.Device, dt candle.DType) {
	cfg := PagedKVConfig{Layers: 2, KVHeads: 2, HeadDim: 16, PageSize: 4, Pages: 16}
	const hq = 4
	r := rand.New(rand.NewPCG(11, 12))
	a, err := NewPagedKVCache(dev, dt, cfg)
	require.NoError(t, err)
	defer a.Close()
	b, err := NewPagedKVCache(dev, dt, cfg)
	require.NoError(t, err)
	defer b.Close()
	mk := func(shape ...int) *candle.Tensor {
		y, err := randTensor(t, dev, r, shape...).ToDType(dt)
		require.NoError(t, err)
		t.Cleanup(func() { y.Close() })
		return y
	}
	for si, st := range []struct {
		seqs   []uint64
		counts []int
	}{{[]uint64{1, 2}, []int{5, 3}}, {[]uint64{1, 2}, []int{1, 1}}, {[]uint64{1}, []int{1}}, {[]uint64{2, 1}, []int{2, 1}}} {
		tokens := make([][]int32, len(st.seqs))
		for i, n := range st.counts {
			tokens[i] = make([]int32, n)
		}
		sa, err := a.Begin(st.seqs, tokens)
		require.NoError(t, err)
		sb, err := b.Begin(st.seqs, tokens)
		require.NoError(t, err)
		T, hd, hkv := sa.Len(), cfg.HeadDim, cfg.KVHeads
		qkv, cos, sin := mk(T, hq+2*hkv, hd), mk(T, hd/2), mk(T, hd/2)
		for layer := range cfg.Layers {
			got, err := sa.AttentionQKV(layer, qkv, cos, sin, flashattn.Params{})
			require.NoError(t, err, "step %d", si)
			sc := candle.NewScope()
			x, err := sc.Adopt(qkv)
			require.NoError(t, err)
			qk, err := x.Narrow(1, 0, hq+hkv)
			require.NoError(t, err)
			qk, err = qk.Reshape(1, T, hq+hkv, hd)
			require.NoError(t, err)
			qk, err = qk.RoPETHD(cos, sin)
			require.NoError(t, err)
			qk, err = qk.Reshape(T, hq+hkv, hd)
			require.NoError(t, err)
			q, err := qk.Narrow(1, 0, hq)
			require.NoError(t, err)
			k, err := qk.Narrow(1, hq, hkv)
			require.NoError(t, err)
			v, err := x.Narrow(1, hq+hkv, hkv)
			require.NoError(t, err)
			want, err := sb.Attention(layer, q, k, v, flashattn.Params{})
			require.NoError(t, err)
			gv, wv := values(t, got), values(t, want)
			for i := range wv {
				require.InDelta(t, wv[i], gv[i], 1e-6+1e-3*math.Abs(float64(wv[i])), "step %d layer %d element %d", si, layer, i)
			}
			got.Close()
			want.Close()
			sc.Close()
		}
		sa.Commit()
		sb.Commit()
		require.NoError(t, sa.Close())
		require.NoError(t, sb.Close())
	}
}

func TestAttentionQKVCPU(t *testing.T) { checkAttentionQKV(t, candle.CPU(), candle.F32) }

func TestGPUAttentionQKV(t *testing.T) {
	d := hipDevice(t)
	for _, dt := range []candle.DType{candle.F16, candle.BF16} {
		t.Run(dt.String(), func(t *testing.T) { checkAttentionQKV(t, d, dt) })
	}
}
