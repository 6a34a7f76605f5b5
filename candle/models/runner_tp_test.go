package models

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/nn"
)

// tpToys are the toy's passes on the ranks of a CPU group: each rank's
// toy logits over n, summed over the ranks (an all-reduce), which is the
// toy's logits.
func tpToys(t *testing.T, n int) (*TPRunner, []*toy, *candle.Group) {
	t.Helper()
	g, err := candle.NewCPUGroup(n)
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	toys := make([]*toy, n)
	passes := make([]PassFunc, n)
	for r, d := range g.Devices() {
		toys[r] = newToy(t, d)
		m, err := g.Member(r)
		require.NoError(t, err)
		passes[r] = func(step *nn.PagedStep, all bool) (*candle.Tensor, error) {
			x, err := toys[r].pass(step, all)
			if err != nil {
				return nil, err
			}
			defer x.Close()
			part, err := x.Affine(1/float64(n), 0)
			if err != nil {
				return nil, err
			}
			defer part.Close()
			return m.AllReduce(part, candle.ReduceSum)
		}
	}
	tp, err := NewTPRunner(g, candle.F32, toyShape, Options{}, passes)
	require.NoError(t, err)
	t.Cleanup(func() { tp.Close() })
	return tp, toys, g
}

func TestTPRunnerForward(t *testing.T) {
	tp, _, _ := tpToys(t, 3)
	assert.Len(t, tp.Ranks(), 3)
	assert.Equal(t, "cpu/rank0", tp.Device().String())
	assert.Equal(t, toyVocab, tp.VocabSize())
	free := tp.CacheTokensFree()
	for _, r := range tp.Ranks() {
		assert.Equal(t, free, r.CacheTokensFree(), "every rank's cache holds the same pages")
	}
	x, err := tp.Forward([]uint64{1, 2}, [][]int32{{3, 4}, {5}})
	require.NoError(t, err)
	assert.Equal(t, [][]float32{wantRow(4, 1), wantRow(5, 0)}, logitRows(t, x))
	x, err = tp.Forward([]uint64{1}, [][]int32{{6}})
	require.NoError(t, err)
	assert.Equal(t, [][]float32{wantRow(6, 2)}, logitRows(t, x))
	for _, r := range tp.Ranks() {
		n, ok := r.SequenceLen(1)
		assert.True(t, ok)
		assert.Equal(t, 3, n)
	}
	x, err = tp.Logits([]int32{1, 2})
	require.NoError(t, err)
	assert.Equal(t, [][]float32{wantRow(1, 0), wantRow(2, 1)}, logitRows(t, x))
	tp.Release(1)
	_, ok := tp.SequenceLen(1)
	assert.False(t, ok)

	// A batch every rank refuses before its pass changes nothing.
	_, err = tp.Forward([]uint64{2}, [][]int32{{toyVocab}})
	assert.ErrorIs(t, err, candle.ErrArgument)
	require.NoError(t, tp.Err())
}

// TestTPRunnerRankFails: a rank whose pass fails while the others wait
// for it in their all-reduce: every rank's goroutine returns, the error
// is reported, and the runner is broken from then on.
func TestTPRunnerRankFails(t *testing.T) {
	tp, toys, g := tpToys(t, 3)
	x, err := tp.Forward([]uint64{1}, [][]int32{{3}})
	require.NoError(t, err)
	x.Close()
	broken := errors.New("the device fell off the bus")
	toys[1].fail = broken
	done := make(chan error, 1)
	go func() {
		_, err := tp.Forward([]uint64{1}, [][]int32{{4}})
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a rank's failure hung the step")
	}
	assert.ErrorIs(t, err, broken)
	assert.ErrorContains(t, err, "rank 1")
	assert.ErrorIs(t, tp.Err(), candle.ErrClosed)
	_, err = tp.Forward([]uint64{2}, [][]int32{{1}})
	assert.ErrorIs(t, err, candle.ErrClosed)
	assert.ErrorContains(t, err, "a rank failed, and the group was aborted")
	// The group is aborted: its collectives fail too.
	m, err := g.Member(0)
	if err == nil {
		_, err = m.AllReduce(nil, candle.ReduceSum)
	}
	assert.Error(t, err)
}

func TestNewTPRunnerErrors(t *testing.T) {
	_, err := NewTPRunner(nil, candle.F32, toyShape, Options{}, nil)
	assert.ErrorContains(t, err, "nil group")
	g, err := candle.NewCPUGroup(2)
	require.NoError(t, err)
	defer g.Close()
	_, err = NewTPRunner(g, candle.F32, toyShape, Options{}, []PassFunc{newToy(t, candle.CPU()).pass})
	assert.ErrorContains(t, err, "1 passes for a group of 2 ranks")
	_, err = NewTPRunner(g, candle.F32, toyShape, Options{}, []PassFunc{newToy(t, candle.CPU()).pass, nil})
	assert.ErrorContains(t, err, "rank 1 has no forward pass")
}
