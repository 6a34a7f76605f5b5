package sd

import (
	"context"
	"image"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/internal/mkmodel"
)

// TestMkmodelFolder opens the SD folder mkmodel writes and generates from
// it: every name and shape mkmodel writes is one the pipeline loads.
func TestMkmodelFolder(t *testing.T) {
	dir := t.TempDir()
	var last mkmodel.Progress
	require.NoError(t, mkmodel.WriteSD(dir, mkmodel.TinySD(), func(p mkmodel.Progress) { last = p }))
	assert.Equal(t, "done", last.Stage)
	assert.Equal(t, last.Total, last.Done)
	p, err := Open(dir, candle.CPU(), candle.F32)
	require.NoError(t, err)
	defer p.Close()
	imgs, err := p.Generate(context.Background(), Request{Prompt: "a red cube on a table", Width: 16, Height: 8, Steps: 2, Seed: 1})
	require.NoError(t, err)
	require.Len(t, imgs, 1)
	assert.Equal(t, image.Rect(0, 0, 16, 8), imgs[0].Bounds())
}
