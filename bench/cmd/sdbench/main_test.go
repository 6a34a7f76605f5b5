package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuick(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "report.json")
	var stdout, stderr bytes.Buffer
	code := run([]string{"-quick", "-model", filepath.Join(dir, "tiny"), "-steps", "2", "-reps", "1", "-batches", "1", "-json", out}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Contains(t, stdout.String(), "| UNet loop, tiny SD 16², 2 steps, batch 1 |")
	assert.Contains(t, stdout.String(), "| peak device memory, tiny SD 16², 2 steps, batch 1 |")
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var rep struct {
		Report struct {
			Ours map[string]struct {
				SPerImage float64 `json:"s_per_image"`
				ItS       float64 `json:"it_s"`
			} `json:"ours"`
		} `json:"report"`
	}
	require.NoError(t, json.Unmarshal(b, &rep))
	f := rep.Report.Ours["1"]
	assert.Greater(t, f.SPerImage, 0.0)
	assert.Greater(t, f.ItS, 0.0)
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},                          // no -model
		{"-quick", "-modes", "jit"}, // unknown mode
		{"-quick", "-batches", "0"},
		{"-quick", "-ref-size", "100"},
		{"-quick", "extra"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, run(args, &stdout, &stderr), "%v", args)
		assert.NotEmpty(t, stderr.String(), "%v says why", args)
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, run([]string{"-quick", "-size", "100"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "multiple of 8")
}
