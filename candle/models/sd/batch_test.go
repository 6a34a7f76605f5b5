package sd

import (
	"context"
	"fmt"
	"image"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/sd/scheduler"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/testenv"
)

// batchRequests are three guided requests that share what a batch shares
// and differ in everything else: prompts, seeds, guidance scales and
// image counts; the second has no negative prompt (XL's zeros). Ancestral
// sampling draws fresh noise at each step, so each request's stream is
// drawn from the whole way.
func batchRequests(width, height, steps int) []Request {
	rs := []Request{
		{Prompt: "a photo of a cat", NegativePrompt: "blurry", Seed: 1},
		{Prompt: "a red cube on a table", Seed: 2, Guidance: 3, Batch: 2},
		{Prompt: "a dog on the grass", NegativePrompt: "a cat", Seed: 3, Guidance: 5.5, Batch: 1},
	}
	for i := range rs {
		rs[i].Width, rs[i].Height, rs[i].Steps, rs[i].Sampler = width, height, steps, scheduler.EulerAncestral
	}
	return rs
}

// checkBatch runs rs as one batch and each alone on p: each request's rows
// of the batch's VAE output are its output alone, to within tol (largest
// difference over the largest magnitude).
func checkBatch(t *testing.T, p *Pipeline, rs []Request, tol float64, name string) {
	t.Helper()
	g, err := p.batch(rs)
	require.NoError(t, err)
	x, err := p.generate(context.Background(), g)
	require.NoError(t, err, name)
	defer x.Close()
	require.Equal(t, candle.Shape{g.rows(), 3, rs[0].Height, rs[0].Width}, x.Shape())
	off := 0
	for i, r := range g {
		alone, err := p.generate(context.Background(), group{r})
		require.NoError(t, err, name)
		mine, err := x.Narrow(0, off, r.Batch)
		require.NoError(t, err)
		d := maxRelDiff(toF64(t, mine), toF64(t, alone))
		mine.Close()
		alone.Close()
		t.Logf("%s: request %d (batch %d) in the batch against alone, max relative error %.2g", name, i, r.Batch, d)
		assert.LessOrEqual(t, d, tol, "%s request %d", name, i)
		off += r.Batch
	}
}

// TestGenerateBatchIsAlone runs three guided requests as one batch, SD
// 1.x's and XL's, and each alone: each gets its images alone. On the CPU
// in F32 they were the same bits (relative error 0: its ops compute a row
// alike whatever the batch); 1e-5 leaves room for kernels that sum a
// larger batch in another order.
func TestGenerateBatchIsAlone(t *testing.T) {
	if testenv.Race {
		t.Skip("the loop is one goroutine's, and batch against alone is arithmetic, ten times slower under -race: it runs without -race")
	}
	for _, folder := range []string{"tiny-sd", "tiny-sdxl"} {
		p := openFolder(t, folder, candle.CPU(), candle.F32)
		checkBatch(t, p, batchRequests(8, 8, 2), 1e-5, folder)
	}
}

// TestGPUGenerateBatch runs the requests of TestGenerateBatchIsAlone as
// one batch and each alone on the GPU, SD 1.x's and XL's, in F32 and F16,
// and in F32 with the UNet replayed from a graph captured at the batch's
// first step (Options.Graphs): each request's images in the batch are its
// images alone, to the reference tests' tolerances (kernels may sum a
// larger batch in another order).
func TestGPUGenerateBatch(t *testing.T) {
	dev, err := candle.HIP(0)
	testenv.Need(t, 2, "a GPU", err)
	for _, c := range []struct {
		dt     candle.DType
		graphs bool
		tol    float64
	}{{candle.F32, false, 1e-4}, {candle.F16, false, 2e-2}, {candle.F32, true, 1e-4}} {
		for _, folder := range []string{"tiny-sd", "tiny-sdxl"} {
			p, err := OpenWith(filepath.Join("testdata", folder), dev, c.dt, Options{Graphs: c.graphs})
			require.NoError(t, err)
			assert.Equal(t, c.graphs, p.graphs)
			checkBatch(t, p, batchRequests(16, 8, 3), c.tol, fmt.Sprintf("%s %s graphs %v", folder, c.dt, c.graphs))
			require.NoError(t, p.Close())
		}
	}
}

// TestGenerateBatchUnguided runs unguided requests (Guidance 1 and under)
// as one batch: each gets the images Generate gives it.
func TestGenerateBatchUnguided(t *testing.T) {
	if testenv.Race {
		t.Skip("batch against alone is arithmetic, ten times slower under -race: it runs without -race")
	}
	p := openTiny(t, candle.CPU(), candle.F32)
	rs := []Request{
		{Prompt: "a photo of a cat", Width: 8, Height: 8, Steps: 2, Guidance: 1, Seed: 4, Batch: 2},
		{Prompt: "a red cube", Width: 8, Height: 8, Steps: 2, Guidance: 0.5, Seed: 5},
	}
	got, err := p.GenerateBatch(context.Background(), rs)
	require.NoError(t, err)
	require.Len(t, got, 2)
	for i, r := range rs {
		want, err := p.Generate(context.Background(), r)
		require.NoError(t, err)
		require.Len(t, got[i], len(want))
		for j := range want {
			assert.Equal(t, image.Rect(0, 0, 8, 8), got[i][j].Bounds())
			d := levelDiff(want[j].Pix, got[i][j].Pix)
			t.Logf("request %d image %d: largest 8-bit difference from Generate's %d", i, j, d)
			assert.LessOrEqual(t, d, 1, "request %d image %d", i, j)
		}
	}
	assert.NotEqual(t, got[0][0].Pix, got[0][1].Pix, "a request's images have noise of their own")
	assert.NotEqual(t, got[0][0].Pix, got[1][0].Pix)
}

// levelDiff is the largest difference of two images' 8-bit values.
func levelDiff(a, b []uint8) int {
	d := 0
	for i := range a {
		d = max(d, int(a[i])-int(b[i]), int(b[i])-int(a[i]))
	}
	return d
}

// TestGenerateBatchRefusals: requests that cannot be one batch are
// refused with errs.ErrArgument, the error naming the field and the
// requests.
func TestGenerateBatchRefusals(t *testing.T) {
	p := openTiny(t, candle.CPU(), candle.F32)
	base := Request{Prompt: "a cat", Width: 16, Height: 8, Steps: 2}
	with := func(f func(r *Request)) Request {
		r := base
		f(&r)
		return r
	}
	img := image.NewRGBA(image.Rect(0, 0, 16, 8))
	for _, c := range []struct {
		rs          []Request
		field, text string
	}{
		{nil, "", "no requests"},
		{[]Request{base, with(func(r *Request) { r.Width = 8 })}, "Width", "requests 0 and 1 differ (16 and 8)"},
		{[]Request{base, base, with(func(r *Request) { r.Height = 16 })}, "Height", "requests 0 and 2 differ (8 and 16)"},
		{[]Request{base, with(func(r *Request) { r.Steps = 3 })}, "Steps", "requests 0 and 1 differ (2 and 3)"},
		{[]Request{base, with(func(r *Request) { r.Sampler = scheduler.DDIM })}, "Sampler", "requests 0 and 1 differ (euler and ddim)"},
		{[]Request{base, with(func(r *Request) { r.Guidance = 1 })}, "Guidance", "requests 0 and 1 differ (guided and unguided)"},
		{[]Request{base, with(func(r *Request) { r.Preview = PreviewApprox })}, "Preview", "requests 0 and 1 differ (none and approx)"},
		{[]Request{base, with(func(r *Request) { r.TileVAE = true })}, "TileVAE", "requests 0 and 1 differ (false and true)"},
		{[]Request{base, with(func(r *Request) { r.Init, r.Strength = img, 0.5 })}, "Init", "request 1 sets it"},
		{[]Request{with(func(r *Request) { r.Mask = img })}, "Mask", "request 0 sets it"},
		{[]Request{base, base, with(func(r *Request) { r.Noise = make([]float32, 32) })}, "Noise", "request 2 sets it"},
		// What Generate refuses in a request, GenerateBatch refuses naming it.
		{[]Request{with(func(r *Request) { r.Width = 10 }), with(func(r *Request) { r.Width = 10 })}, "Width", "request 0: 10×8, batch 1"},
		{[]Request{base, with(func(r *Request) { r.Batch = -1 })}, "Width", "request 1: 16×8, batch -1"},
	} {
		_, err := p.GenerateBatch(context.Background(), c.rs)
		require.ErrorIs(t, err, errs.ErrArgument, c.text)
		var e *errs.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, c.field, e.Field, c.text)
		assert.Equal(t, "GenerateBatch", e.Op, c.text)
		assert.ErrorContains(t, err, c.text)
	}
	require.NoError(t, p.Close())
	_, err := p.GenerateBatch(context.Background(), []Request{base})
	assert.ErrorIs(t, err, errs.ErrClosed)
}

// TestBatchKey: the key is the shared fields with Generate's defaults, so
// requests of one key make a batch GenerateBatch takes.
func TestBatchKey(t *testing.T) {
	p := openTiny(t, candle.CPU(), candle.F32)
	r := Request{Prompt: "a cat", Width: 16, Height: 8}
	key, ok := p.BatchKey(r)
	require.True(t, ok)
	assert.Equal(t, "Width=16 Height=8 Steps=30 Sampler=euler Guidance=guided Preview=none TileVAE=false", key)
	same := Request{Prompt: "a dog", NegativePrompt: "a cat", Width: 16, Height: 8, Steps: 30, Sampler: scheduler.Euler,
		Guidance: 3, Seed: 9, Batch: 4, Progress: func(Progress) {}}
	k, ok := p.BatchKey(same)
	assert.True(t, ok)
	assert.Equal(t, key, k, "defaults, prompts, seeds, guidance scales and batches do not part requests")
	_, err := p.batch([]Request{r, same})
	assert.NoError(t, err)
	for _, other := range []Request{
		{Width: 8, Height: 8}, {Width: 16, Height: 16}, {Width: 16, Height: 8, Steps: 29},
		{Width: 16, Height: 8, Sampler: scheduler.DPMPP2M}, {Width: 16, Height: 8, Guidance: 1},
		{Width: 16, Height: 8, Preview: PreviewFull}, {Width: 16, Height: 8, TileVAE: true},
	} {
		k, ok := p.BatchKey(other)
		assert.True(t, ok)
		assert.NotEqual(t, key, k, "%+v", other)
		_, err := p.batch([]Request{r, other})
		assert.ErrorIs(t, err, errs.ErrArgument, "%+v", other)
	}
	img := image.NewRGBA(image.Rect(0, 0, 16, 8))
	for _, alone := range []Request{{Width: 16, Height: 8, Init: img}, {Width: 16, Height: 8, Init: img, Mask: img}, {Width: 16, Height: 8, Noise: make([]float32, 32)}} {
		k, ok := p.BatchKey(alone)
		assert.False(t, ok)
		assert.Empty(t, k)
	}
}

// TestGenerateBatchProgress: each request that listens hears each step in
// order, with the previews of its own images, and a batch leaves the
// device's memory as it found it.
func TestGenerateBatchProgress(t *testing.T) {
	if testenv.Race {
		t.Skip("five seconds under -race for a loop of one goroutine, whose callbacks TestGenerateBatchCanceled runs there: it runs without -race")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // a tensor left to the collector shows
	p := openTiny(t, candle.CPU(), candle.F32)
	var heard [2][]Progress
	rs := []Request{
		{Prompt: "a photo of a cat", Batch: 2, Seed: 1, Progress: func(pr Progress) { heard[0] = append(heard[0], pr) }},
		{Prompt: "a red cube", Seed: 2, Guidance: 4, Progress: func(pr Progress) { heard[1] = append(heard[1], pr) }},
		{Prompt: "a dog", Seed: 3},
	}
	const steps = 3
	for i := range rs {
		rs[i].Width, rs[i].Height, rs[i].Steps, rs[i].Preview = 8, 8, steps, PreviewApprox
	}
	dev := candle.CPU()
	before := dev.MemoryStats().InUse
	imgs, err := p.GenerateBatch(context.Background(), rs)
	require.NoError(t, err)
	// At most: a tensor an earlier test left to the collector may be freed
	// meanwhile (a cleanup runs whenever it runs), as in unet's
	// TestForwardFreesWhatItMakes.
	assert.LessOrEqual(t, dev.MemoryStats().InUse, before, "the batch frees what it makes")
	require.Len(t, imgs, 3)
	for i, pr := range heard {
		require.Len(t, pr, steps, "request %d", i)
		for s, got := range pr {
			assert.Equal(t, [2]int{s + 1, steps}, [2]int{got.Step, got.Steps}, "request %d", i)
			require.Len(t, got.Preview, max(rs[i].Batch, 1), "request %d step %d", i, s+1)
			assert.Equal(t, image.Rect(0, 0, 4, 4), got.Preview[0].Bounds(), "the latents' size (the tiny VAE halves)")
		}
	}
	// The second request's previews are those it hears alone.
	var alone []Progress
	r := rs[1]
	r.Progress = func(pr Progress) { alone = append(alone, pr) }
	_, err = p.Generate(context.Background(), r)
	require.NoError(t, err)
	require.Len(t, alone, steps)
	for s := range alone {
		assert.LessOrEqual(t, levelDiff(alone[s].Preview[0].Pix, heard[1][s].Preview[0].Pix), 1, "step %d", s+1)
		assert.NotEqual(t, heard[0][s].Preview[0].Pix, heard[1][s].Preview[0].Pix, "step %d", s+1)
	}
}

// TestGenerateBatchCanceled: a canceled context stops the whole batch
// between steps, and what the batch made is freed.
func TestGenerateBatchCanceled(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	p := openTiny(t, candle.CPU(), candle.F32)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rs := batchRequests(8, 8, 3)
	steps := 0
	rs[0].Progress = func(Progress) { steps++ }
	rs[2].Progress = func(pr Progress) {
		if pr.Step == 1 {
			cancel()
		}
	}
	dev := candle.CPU()
	before := dev.MemoryStats().InUse
	_, err := p.GenerateBatch(ctx, rs)
	assert.ErrorIs(t, err, errs.ErrCanceled)
	assert.ErrorContains(t, err, "GenerateBatch: after 1 of 3 steps")
	assert.Equal(t, 1, steps)
	assert.LessOrEqual(t, dev.MemoryStats().InUse, before, "a canceled batch frees what it made")
}
