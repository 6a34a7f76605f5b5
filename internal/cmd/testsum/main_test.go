package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const run = `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: tier 1: ran with the ROCm runtime\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"pass","Package":"p","Test":"TestB"}
{"Action":"run","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:3: tier 2: needs a GPU\n"}
{"Action":"skip","Package":"p","Test":"TestC"}
{"Action":"pass","Package":"p","Elapsed":0.5}
`

func summarize(t *testing.T, input string, tier int) (string, bool) {
	var progress, out bytes.Buffer
	s, err := read(strings.NewReader(input), &progress)
	require.NoError(t, err)
	ok := s.report(&out, tier, 0)
	return progress.String() + out.String(), ok
}

func TestCounts(t *testing.T) {
	out, ok := summarize(t, run, 0)
	assert.True(t, ok)
	assert.Contains(t, out, "ok   p (0.5s)")
	assert.Contains(t, out, "tier 0: 2 tests passed, 1 skipped, 0 failed in 1 packages")
	assert.Contains(t, out, "skipped: 1 tier 2: needs a GPU")

	out, ok = summarize(t, run, 1)
	assert.True(t, ok)
	assert.Contains(t, out, "tier 1: 1 tests ran at tier 1 and passed; 2 passed in all")
}

func TestNothingRanAtTheTierFails(t *testing.T) {
	out, ok := summarize(t, run, 2)
	assert.False(t, ok)
	assert.Contains(t, out, "no test ran at tier 2")
}

func TestFailuresAreShown(t *testing.T) {
	in := run + `{"Action":"run","Package":"q","Test":"TestD"}
{"Action":"output","Package":"q","Test":"TestD","Output":"    d_test.go:5: boom\n"}
{"Action":"fail","Package":"q","Test":"TestD"}
{"Action":"fail","Package":"q","Elapsed":0.1}
`
	out, ok := summarize(t, in, 0)
	assert.False(t, ok)
	assert.Contains(t, out, "--- FAIL: q TestD\n    d_test.go:5: boom")
	assert.Contains(t, out, "FAIL q")
	assert.Contains(t, out, "1 failed")
}

func TestBuildFailureFails(t *testing.T) {
	out, ok := summarize(t, "# example.com/x\nx.go:1: syntax error\nFAIL\texample.com/x [build failed]\n", 0)
	assert.False(t, ok)
	assert.Contains(t, out, "syntax error")
}
