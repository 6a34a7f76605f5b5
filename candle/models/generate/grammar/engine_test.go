package grammar_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/candle/models/generate/grammar"
	"github.com/rocm-go/rocm/candle/models/llama"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/mkmodel"
	"github.com/rocm-go/rocm/internal/testenv"
)

// TestEngineConstrained generates from a random tiny llama model on the
// CPU under every test schema and json_object, with several seeds, all
// in one engine beside unconstrained requests: a random model draws junk,
// so every token comes from the mask. Every output that ends "stop"
// validates against its schema, and every other is a prefix the grammar
// takes.
func TestEngineConstrained(t *testing.T) {
	if testenv.Race || testing.Short() {
		t.Skip("a tiny model's hundreds of steps on the CPU, arithmetic ten times slower under -race: it runs in full runs without -race (tier 1)")
	}
	testEngineConstrained(t, candle.CPU())
}

// TestGPUEngineConstrained is the same on the GPU, where the masks go to
// the device and MaskTokens runs there before the batched Sample.
func TestGPUEngineConstrained(t *testing.T) {
	n, err := hip.DeviceCount()
	if err == nil && n == 0 {
		err = candle.ErrDevice
	}
	var d *candle.HIPDevice
	if err == nil {
		d, err = candle.HIP(0)
	}
	testenv.Need(t, 2, "a GPU", err)
	testEngineConstrained(t, d)
}

func testEngineConstrained(t *testing.T, dev candle.Device) {
	pieces := testPieces()
	dir := t.TempDir()
	require.NoError(t, mkmodel.Write(dir, mkmodel.Spec{Family: "llama", Hidden: 64, Intermediate: 96, Layers: 2, Heads: 4, KVHeads: 2,
		Vocab: len(pieces), MaxPositions: 1024, TieEmbeddings: true, Seed: 5, NoTokenizer: true}, nil))
	m, err := llama.Load(dir, dev, candle.F32, llama.Options{CacheTokens: 16 * 1024, PageSize: 16})
	require.NoError(t, err)
	defer m.Close()
	e, err := generate.NewEngine(m, generate.Config{MaxBatch: 16})
	require.NoError(t, err)
	defer e.Close()
	v := vocab(t)

	type run struct {
		name string
		ch   <-chan generate.Event
		g    *grammar.Grammar
		val  func(string)
	}
	var runs []run
	cases := append([]string{""}, func() []string {
		var s []string
		for _, c := range schemas {
			s = append(s, c.schema)
		}
		return s
	}()...)
	for i, schema := range cases {
		g := grammar.JSONObject()
		val := validator(t, `{"type":"object"}`)
		if schema != "" {
			g, err = grammar.CompileSchema([]byte(schema))
			require.NoError(t, err)
			val = validator(t, schema)
		}
		for seed := range 4 {
			name := fmt.Sprintf("case %d seed %d", i, seed)
			c, err := grammar.NewMatcher(g, v, []int32{0})
			require.NoError(t, err)
			ch, err := e.Submit(context.Background(), generate.Request{Prompt: []int32{int32(1 + seed), 7, 9}, MaxTokens: 400,
				StopTokens: []int32{0}, Constraint: c, Sampling: generate.Sampling{Temperature: 1, Seed: uint64(100*i + seed + 1)}})
			require.NoError(t, err)
			runs = append(runs, run{name, ch, g, func(s string) { validate(t, val, s, name) }})
		}
		free, err := e.Submit(context.Background(), generate.Request{Prompt: []int32{3, 4}, MaxTokens: 20, Sampling: generate.Sampling{Temperature: 1, Seed: 9}})
		require.NoError(t, err)
		runs = append(runs, run{name: fmt.Sprintf("unconstrained %d", i), ch: free})
	}
	stopped := 0
	for _, r := range runs {
		var out []byte
		var last generate.Event
		for ev := range r.ch {
			for _, id := range ev.Tokens {
				out = append(out, pieces[id]...)
			}
			last = ev
		}
		require.NoError(t, last.Err, r.name)
		if r.g == nil {
			assert.Equal(t, "length", last.FinishReason, r.name)
			assert.Equal(t, 20, last.CompletionTokens, r.name)
			continue
		}
		if last.FinishReason == "stop" {
			stopped++
			r.val(string(out))
			continue
		}
		assert.Equal(t, "length", last.FinishReason, r.name)
		m, err := grammar.NewMatcher(r.g, v, nil)
		require.NoError(t, err)
		assert.NoError(t, m.AcceptString(string(out)), "%s: a prefix the grammar takes", r.name)
	}
	assert.GreaterOrEqual(t, stopped, len(cases)*4*2/3, "most constrained outputs end")
}
