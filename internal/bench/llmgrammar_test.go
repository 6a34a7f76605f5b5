package bench

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSyntheticPieces(t *testing.T) {
	p := SyntheticPieces(128256, 256, 1)
	require.Len(t, p, 128256)
	seen := map[string]bool{}
	for i, b := range p {
		if i >= 128000 {
			assert.Nil(t, b, "special token %d", i)
			continue
		}
		require.NotEmpty(t, b, "token %d", i)
		require.False(t, seen[string(b)], "token %d repeats %q", i, b)
		seen[string(b)] = true
	}
	assert.Equal(t, []byte{'{'}, p['{'])
}

// TestConstrainedMaskCost walks random tokens through the benchmark's
// schema over a vocabulary of Llama 3's size, as the engine does, and
// reports a mask's mean time: each step after the first few should find
// its mask in the grammar's cache.
func TestConstrainedMaskCost(t *testing.T) {
	c, err := newConstrainedRun(BenchSchema, 128256, t.Output())
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(1, 2))
	words := make([]uint32, c.v.MaskWords())
	for run := range 2 {
		m, err := c.constraint()
		require.NoError(t, err)
		steps, start := 0, time.Now()
		for ; steps < 300 && !m.Done(); steps++ {
			n, err := m.Mask(words)
			require.NoError(t, err)
			require.Positive(t, n)
			k := r.IntN(n)
			for id := range len(words) * 32 {
				if words[id/32]>>(id%32)&1 == 1 {
					if k == 0 {
						require.NoError(t, m.Accept(int32(id)))
						break
					}
					k--
				}
			}
		}
		t.Logf("run %d: %d steps, %s a step (with the draw's scan), a mask %s", run, steps, time.Since(start)/time.Duration(steps), c.maskTime())
	}
}

// TestConstrainedRows: a row a batch compares the constrained decode with
// the unconstrained one, against the 0.9 target.
func TestConstrainedRows(t *testing.T) {
	s := LLMSettings{Prompt: 64, Steps: 16, Batches: []int{1, 8}, Reps: 1, Constraint: BenchSchema}
	ours, _ := figures()
	ours.Engine = map[string]float64{"1": 100, "8": 700}
	ours.Constrained = map[string]float64{"1": 95, "8": 560}
	ours.MaskMs = map[string]float64{"1": 0.02, "8": 0.05}
	var got []Row
	for _, r := range LLMRows(s, ours, nil, "eager", 0) {
		if strings.HasPrefix(r.Name, "generate.Engine constrained") {
			got = append(got, r)
		}
	}
	require.Len(t, got, 2)
	assert.InDelta(t, 0.95, got[0].Ratio, 1e-9)
	assert.True(t, *got[0].Met)
	assert.Contains(t, got[0].Name, "0.020 ms")
	assert.InDelta(t, 0.8, got[1].Ratio, 1e-9)
	assert.False(t, *got[1].Met)
	assert.Equal(t, "700.0 tok/s unconstrained", got[1].Theirs)
}
