package models

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/nn"
	"github.com/rocm-go/rocm/internal/testenv"
)

// toy is a decoder whose logits say what the runner gave its pass: the
// logits of a token t at position p are (p+1) at t and 0 elsewhere.
type toy struct {
	eye   *candle.Tensor // (vocab, vocab) identity, F32
	fail  error          // the pass's error, when set
	calls int
}

const toyVocab = 11

var toyShape = Shape{Layers: 2, KVHeads: 1, HeadDim: 8, VocabSize: toyVocab, MaxPositions: 40}

func newToy(t *testing.T, dev candle.Device) *toy {
	t.Helper()
	v := make([]float32, toyVocab*toyVocab)
	for i := range toyVocab {
		v[i*toyVocab+i] = 1
	}
	eye, err := candle.FromSlice(dev, v, toyVocab, toyVocab)
	require.NoError(t, err)
	t.Cleanup(func() { eye.Close() })
	return &toy{eye: eye}
}

func (d *toy) pass(step *nn.PagedStep, all bool) (*candle.Tensor, error) {
	d.calls++
	if d.fail != nil {
		return nil, d.fail
	}
	p := NewPass()
	defer p.Close()
	rows := p.T(d.eye.IndexSelect(p.In(step.Tokens()), 0)) // (T, vocab)
	pos := p.T(p.T(p.In(step.Positions()).ToDType(candle.F32)).Affine(1, 1))
	x := p.T(rows.Mul(p.T(pos.Reshape(step.Len(), 1))))
	if !all && !step.EveryRowLast() {
		x = p.T(x.IndexSelect(p.In(step.LastRows()), 0))
	}
	return p.Keep(x), p.Err
}

// wantRow is the toy's logits of token tok at position pos.
func wantRow(tok int32, pos int) []float32 {
	r := make([]float32, toyVocab)
	r[tok] = float32(pos + 1)
	return r
}

func logitRows(t *testing.T, x *candle.Tensor) [][]float32 {
	t.Helper()
	defer x.Close()
	v, err := candle.ToSlice[float32](x)
	require.NoError(t, err)
	require.Equal(t, candle.Shape{len(v) / toyVocab, toyVocab}, x.Shape())
	out := make([][]float32, len(v)/toyVocab)
	for i := range out {
		out[i] = v[i*toyVocab : (i+1)*toyVocab]
	}
	return out
}

func newRunner(t *testing.T, dev candle.Device, opts Options) (*Runner, *toy) {
	t.Helper()
	d := newToy(t, dev)
	r, err := NewRunner(dev, candle.F32, toyShape, opts, d.pass)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r, d
}

func TestRunnerForward(t *testing.T) {
	r, _ := newRunner(t, candle.CPU(), Options{CacheTokens: 64, PageSize: 4, MaxBatch: 3})
	assert.Equal(t, 40, r.ContextLength())
	assert.Equal(t, 4, r.CachePageSize())
	assert.Equal(t, 64, r.CacheTokensFree())
	assert.Equal(t, toyVocab, r.VocabSize())
	assert.Equal(t, candle.F32, r.DType())
	assert.Equal(t, candle.CPU(), r.Device())

	// A prefill of two sequences: each one's last token, at its position.
	x, err := r.Forward([]uint64{7, 9}, [][]int32{{1, 2, 3}, {4, 5, 6, 7, 8}})
	require.NoError(t, err)
	assert.Equal(t, [][]float32{wantRow(3, 2), wantRow(8, 4)}, logitRows(t, x))
	n, ok := r.SequenceLen(9)
	assert.True(t, ok)
	assert.Equal(t, 5, n)
	assert.Equal(t, 64-4-8, r.CacheTokensFree())
	// A mixed step: a decode step, a continuation and a new sequence.
	x, err = r.Forward([]uint64{7, 9, 2}, [][]int32{{10}, {0, 1}, {5}})
	require.NoError(t, err)
	assert.Equal(t, [][]float32{wantRow(10, 3), wantRow(1, 6), wantRow(5, 0)}, logitRows(t, x))

	// Logits: every position of a fresh sequence, nothing cached.
	free := r.CacheTokensFree()
	x, err = r.Logits([]int32{4, 4, 2})
	require.NoError(t, err)
	assert.Equal(t, [][]float32{wantRow(4, 0), wantRow(4, 1), wantRow(2, 2)}, logitRows(t, x))
	assert.Equal(t, free, r.CacheTokensFree())

	r.Release(9)
	r.Release(12345) // unknown: a no-op
	_, ok = r.SequenceLen(9)
	assert.False(t, ok)
	assert.Equal(t, free+8, r.CacheTokensFree())
}

func TestRunnerRefusesBadBatches(t *testing.T) {
	r, d := newRunner(t, candle.CPU(), Options{CacheTokens: 16, PageSize: 4, MaxBatch: 2})
	x, err := r.Forward([]uint64{1}, [][]int32{{1, 2, 3, 4, 5}})
	require.NoError(t, err)
	x.Close()
	calls := d.calls
	for _, c := range []struct {
		seqs   []uint64
		tokens [][]int32
		kind   error
		text   string
	}{
		{nil, nil, candle.ErrArgument, "0 sequences and 0 token lists"},
		{[]uint64{1, 2}, [][]int32{{1}}, candle.ErrArgument, "2 sequences and 1 token lists"},
		{[]uint64{1, 2, 3}, [][]int32{{1}, {1}, {1}}, candle.ErrArgument, "at most 2 (Options.MaxBatch)"},
		{[]uint64{2, 2}, [][]int32{{1}, {1}}, candle.ErrArgument, "both entry 0 and entry 1"},
		{[]uint64{2}, [][]int32{{}}, candle.ErrArgument, "has no new tokens"},
		{[]uint64{2}, [][]int32{{1, toyVocab}}, candle.ErrArgument, "token 11 at 1 is not in the vocabulary of 11"},
		{[]uint64{2}, [][]int32{{-1}}, candle.ErrArgument, "token -1 at 0"},
		{[]uint64{2}, [][]int32{make([]int32, 17)}, candle.ErrArgument, "the context length is 16"},
		{[]uint64{2}, [][]int32{make([]int32, 12)}, nn.ErrCacheFull, ""},
	} {
		_, err := r.Forward(c.seqs, c.tokens)
		require.ErrorIs(t, err, c.kind, "%v %v", c.seqs, c.tokens)
		assert.ErrorContains(t, err, c.text)
	}
	assert.Equal(t, calls, d.calls, "no refused batch reaches the pass")
	n, _ := r.SequenceLen(1)
	assert.Equal(t, 5, n, "a refused batch changes nothing")
	assert.Equal(t, 8, r.CacheTokensFree())

	// A pass that fails commits nothing, and its error reaches the caller
	// whole.
	d.fail = candle.ErrOutOfMemory
	_, err = r.Forward([]uint64{1, 2}, [][]int32{{1}, {1, 2}})
	require.ErrorIs(t, err, candle.ErrOutOfMemory)
	n, _ = r.SequenceLen(1)
	assert.Equal(t, 5, n)
	_, ok := r.SequenceLen(2)
	assert.False(t, ok)
	assert.Equal(t, 8, r.CacheTokensFree())
	d.fail = nil

	require.NoError(t, r.Close())
	require.NoError(t, r.Close(), "closing twice does nothing")
	_, err = r.Forward([]uint64{1}, [][]int32{{1}})
	assert.ErrorIs(t, err, candle.ErrClosed)
	_, err = r.Logits([]int32{1})
	assert.ErrorIs(t, err, candle.ErrClosed)
	assert.Zero(t, r.CacheTokensFree())
	r.Release(1)
	_, ok = r.SequenceLen(1)
	assert.False(t, ok)
}

func TestNewRunnerErrors(t *testing.T) {
	d := newToy(t, candle.CPU())
	for _, c := range []struct {
		dev   candle.Device
		shape Shape
		opts  Options
		pass  PassFunc
		kind  error
		text  string
	}{
		{nil, toyShape, Options{}, d.pass, candle.ErrDevice, "nil device"},
		{candle.CPU(), toyShape, Options{}, nil, candle.ErrArgument, "no forward pass"},
		{candle.CPU(), Shape{Layers: 1}, Options{}, d.pass, candle.ErrArgument, "every size must be positive"},
		{candle.CPU(), toyShape, Options{PageSize: -1}, d.pass, candle.ErrArgument, "none may be negative"},
		{candle.CPU(), toyShape, Options{MaxGraphs: -1}, d.pass, candle.ErrArgument, "Options.MaxGraphs -1"},
		// 1 GiB of cache on the CPU holds fewer tokens than a page.
		{candle.CPU(), Shape{Layers: 1 << 20, KVHeads: 64, HeadDim: 128, VocabSize: 2, MaxPositions: 8}, Options{}, d.pass, candle.ErrOutOfMemory, "set Options.CacheTokens"},
	} {
		r, err := NewRunner(c.dev, candle.F32, c.shape, c.opts, c.pass)
		assert.Nil(t, r)
		require.ErrorIs(t, err, c.kind)
		assert.ErrorContains(t, err, c.text)
	}
}

func TestRunnerDefaultCache(t *testing.T) {
	// On the CPU, four contexts of 40 positions of 2 layers × 1 head × 8 ×
	// 2 × 4 bytes: far below the CPU's 1 GiB bound.
	r, _ := newRunner(t, candle.CPU(), Options{})
	assert.Equal(t, 40*4, r.CacheTokensFree())
	assert.Equal(t, DefaultPageSize, r.CachePageSize())
	assert.Equal(t, 40, r.ContextLength())
	// A longer context than a small cache holds: the cache bounds it.
	s, _ := newRunner(t, candle.CPU(), Options{CacheTokens: 30, PageSize: 8})
	assert.Equal(t, 32, s.ContextLength())
}

func TestRunnerGraphOptions(t *testing.T) {
	// The CPU device runs decode steps op by op: no graphs.
	r, _ := newRunner(t, candle.CPU(), Options{CacheTokens: 64, PageSize: 4})
	for _, toks := range [][]int32{{1, 2, 3}, {4}, {5}} {
		x, err := r.Forward([]uint64{1}, [][]int32{toks})
		require.NoError(t, err)
		x.Close()
	}
	assert.Empty(t, r.DecodeGraphs())
	assert.True(t, r.graphsOn, "graphs are on by default")
	r.SetGraphs(false)
	assert.False(t, r.graphsOn)
	r.SetGraphs(true)
	assert.True(t, r.graphsOn)
	assert.Equal(t, DefaultMaxGraphs, r.maxGraphs)
	// Options.NoGraphs starts with them off.
	n, _ := newRunner(t, candle.CPU(), Options{CacheTokens: 64, PageSize: 4, NoGraphs: true})
	assert.False(t, n.graphsOn)
}

func TestLeastRecentGraph(t *testing.T) {
	_, ok := leastRecent(map[int]*decodeGraph{})
	assert.False(t, ok)
	b, ok := leastRecent(map[int]*decodeGraph{1: {used: 5}, 3: {used: 2}, 8: {used: 9}})
	assert.True(t, ok)
	assert.Equal(t, 3, b)
}

// Tier 2: decode graphs on a GPU.

// TestGPURunnerGraphs runs decode steps of three batch sizes as graphs,
// with at most two kept: each step's logits are the toy's, the third batch
// size replaces the least recently used, a graph's replay runs no pass, a
// pass's failure during a capture reaches the caller and commits nothing,
// and closing frees every graph's private memory.
func TestGPURunnerGraphs(t *testing.T) {
	dev, err := candle.HIP(0)
	testenv.Need(t, 2, "a GPU", err)
	r, d := newRunner(t, dev, Options{CacheTokens: 256, PageSize: 4, MaxGraphs: 2})
	seqs := []uint64{1, 2, 3}
	x, err := r.Forward(seqs, [][]int32{{1, 2}, {3}, {4, 5, 6}})
	require.NoError(t, err)
	x.Close()
	lens := map[uint64]int{1: 2, 2: 1, 3: 3}
	step := func(batch int, tok int32) {
		t.Helper()
		toks := make([][]int32, batch)
		var want [][]float32
		for i := range batch {
			toks[i] = []int32{tok}
			want = append(want, wantRow(tok, lens[seqs[i]]))
			lens[seqs[i]]++
		}
		x, err := r.Forward(seqs[:batch], toks)
		require.NoError(t, err)
		assert.Equal(t, want, logitRows(t, x), "batch %d, token %d", batch, tok)
	}
	for i, b := range []int{1, 2, 1, 3} {
		calls := d.calls
		step(b, int32(i+1))
		if b == 1 && i == 2 {
			assert.Equal(t, calls, d.calls, "a captured graph replays without the pass")
		}
	}
	// 1 and 3 are kept; 2 was used last longest ago.
	assert.Equal(t, []int{1, 3}, r.DecodeGraphs())
	assert.Positive(t, dev.MemoryStats().Graphs)
	// Op by op with graphs off: the same logits.
	r.SetGraphs(false)
	step(3, 9)
	r.SetGraphs(true)
	// A capture whose pass fails: nothing is committed.
	d.fail = candle.ErrOutOfMemory
	_, err = r.Forward(seqs[:2], [][]int32{{1}, {1}})
	require.ErrorIs(t, err, candle.ErrOutOfMemory)
	assert.ErrorContains(t, err, "Options.NoGraphs runs it op by op")
	for _, id := range seqs[:2] {
		n, _ := r.SequenceLen(id)
		assert.Equal(t, lens[id], n)
	}
	d.fail = nil
	step(2, 7)
	require.NoError(t, r.Close())
	assert.Zero(t, dev.MemoryStats().Graphs, "Close frees the graphs' private memory")
}

// TestCacheSizing: what each option makes of the KV cache on the CPU, and
// the options refused.
func TestCacheSizing(t *testing.T) {
	perToken := nn.PagedKVBytesPerToken(candle.F32, toyShape.Layers, toyShape.KVHeads, toyShape.HeadDim)
	for _, c := range []struct {
		name            string
		opts            Options
		tokens, context int
	}{
		{"the default: four contexts", Options{PageSize: 4, MaxBatch: 64}, 4 * toyShape.MaxPositions, toyShape.MaxPositions},
		{"fewer sequences than four", Options{PageSize: 4, MaxBatch: 2}, 2 * toyShape.MaxPositions, toyShape.MaxPositions},
		{"MaxModelLen caps the context and the cache", Options{PageSize: 4, MaxBatch: 64, MaxModelLen: 12}, 4 * 12, 12},
		{"CacheBytes: whole pages within them", Options{PageSize: 4, CacheBytes: int64(30 * perToken)}, 28, 28},
		{"CacheTokens over CacheBytes", Options{PageSize: 4, CacheTokens: 8, CacheBytes: 1 << 30}, 8, 8},
	} {
		r, _ := newRunner(t, candle.CPU(), c.opts)
		assert.Equal(t, c.tokens, r.CacheTokensFree(), c.name)
		assert.Equal(t, c.context, r.ContextLength(), c.name)
	}
	for _, bad := range []Options{{CacheBytes: -1}, {MaxModelLen: -1}, {MemoryFraction: 1.5}, {MemoryFraction: -0.1}} {
		assert.ErrorIs(t, bad.Check(), candle.ErrArgument, "%+v", bad)
	}
	_, err := NewRunner(candle.CPU(), candle.F32, toyShape, Options{PageSize: 16, CacheBytes: int64(perToken)}, newToy(t, candle.CPU()).pass)
	assert.ErrorIs(t, err, candle.ErrOutOfMemory)
	assert.ErrorContains(t, err, "Options.CacheBytes")
}

func TestRunnerAttachPrefix(t *testing.T) {
	r, _ := newRunner(t, candle.CPU(), Options{CacheTokens: 64, PageSize: 4})
	prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	x, err := r.Forward([]uint64{1}, [][]int32{prompt})
	require.NoError(t, err)
	x.Close()
	// Two whole pages are cached: the rest is forwarded from position 8.
	n, err := r.AttachPrefix(2, []int32{1, 2, 3, 4, 5, 6, 7, 8, 3, 4})
	require.NoError(t, err)
	assert.Equal(t, 8, n)
	x, err = r.Forward([]uint64{2}, [][]int32{{3, 4}})
	require.NoError(t, err)
	assert.Equal(t, [][]float32{wantRow(4, 9)}, logitRows(t, x))
	got, _ := r.SequenceLen(2)
	assert.Equal(t, 10, got)
	assert.Equal(t, 64-12-4, r.CacheTokensFree(), "the shared pages count once")
	r.Release(1)
	r.Release(2)
	assert.Equal(t, 64, r.CacheTokensFree(), "cached pages count as free")
	q, h := r.PrefixCacheStats()
	assert.Equal(t, []int64{10, 8}, []int64{q, h})
	_, err = r.AttachPrefix(3, prompt)
	require.NoError(t, err)
	_, err = r.AttachPrefix(3, prompt)
	assert.ErrorIs(t, err, candle.ErrArgument)

	// Off: nothing is cached.
	off, _ := newRunner(t, candle.CPU(), Options{CacheTokens: 64, PageSize: 4, NoPrefixCaching: true})
	x, err = off.Forward([]uint64{1}, [][]int32{prompt})
	require.NoError(t, err)
	x.Close()
	n, err = off.AttachPrefix(2, prompt)
	require.NoError(t, err)
	assert.Zero(t, n)
	require.NoError(t, off.Close())
	_, err = off.AttachPrefix(2, prompt)
	assert.ErrorIs(t, err, candle.ErrClosed)
	q, h = off.PrefixCacheStats()
	assert.Zero(t, q+h)
}

func TestRunnerForwardAllAndTruncate(t *testing.T) {
	r, _ := newRunner(t, candle.CPU(), Options{CacheTokens: 64, PageSize: 4, MaxBatch: 3})
	x, err := r.Forward([]uint64{1}, [][]int32{{1, 2, 3}})
	require.NoError(t, err)
	x.Close()
	// Packed, 2 (fresh) comes before 1: the rows come back in seqs' order.
	x, err = r.ForwardAll([]uint64{1, 2}, [][]int32{{4, 5, 6}, {7, 8}})
	require.NoError(t, err)
	assert.Equal(t, [][]float32{wantRow(4, 3), wantRow(5, 4), wantRow(6, 5), wantRow(7, 0), wantRow(8, 1)}, logitRows(t, x))
	// Two of 1's new tokens rejected: it goes on from position 4.
	require.NoError(t, r.Truncate(1, 4))
	x, err = r.Forward([]uint64{1}, [][]int32{{9}})
	require.NoError(t, err)
	assert.Equal(t, [][]float32{wantRow(9, 4)}, logitRows(t, x))
	assert.ErrorIs(t, r.Truncate(1, 0), candle.ErrArgument)
	_, err = r.ForwardAll([]uint64{1}, [][]int32{{toyVocab}})
	assert.ErrorIs(t, err, candle.ErrArgument)
	require.NoError(t, r.Close())
	assert.ErrorIs(t, r.Truncate(1, 1), candle.ErrClosed)
}
