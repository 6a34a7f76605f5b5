package sd

import (
	"context"
	"encoding/json"
	"image"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/sd/scheduler"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/testenv"
)

// testdata/tiny-sd is a tiny random SD 1.x folder and golden.json a
// txt2img run of it by the reference components in diffusers' loop
// (testdata/make.py).
type pipelineGolden struct {
	Prompt   string
	Guidance float64
	Steps    int
	Noise    [][][][]float64
	Image    [][][][]float64
}

func flat4(x [][][][]float64) []float64 {
	var v []float64
	for _, a := range x {
		for _, b := range a {
			for _, c := range b {
				v = append(v, c...)
			}
		}
	}
	return v
}

func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// toF64 is a tensor's values in float64.
func toF64(t *testing.T, x *candle.Tensor) []float64 {
	t.Helper()
	f, err := x.ToDType(candle.F64)
	require.NoError(t, err)
	defer f.Close()
	v, err := candle.ToSlice[float64](f)
	require.NoError(t, err)
	return v
}

// readJSON reads testdata/name into a T.
func readJSON[T any](t *testing.T, name string) T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	var v T
	require.NoError(t, json.Unmarshal(b, &v))
	return v
}

func openTiny(t *testing.T, dev candle.Device, dt candle.DType) *Pipeline {
	return openFolder(t, "tiny-sd", dev, dt)
}

func openFolder(t *testing.T, name string, dev candle.Device, dt candle.DType) *Pipeline {
	t.Helper()
	p, err := Open(filepath.Join("testdata", name), dev, dt)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// readGolden reads a golden run and its noise in F32.
func readGolden(t *testing.T, golden string) (pipelineGolden, []float32) {
	t.Helper()
	g := readJSON[pipelineGolden](t, golden)
	return g, f32s(flat4(g.Noise))
}

func checkPipeline(t *testing.T, dev candle.Device, dt candle.DType, tol float64) {
	for folder, golden := range map[string]string{"tiny-sd": "golden.json", "tiny-sdxl": "golden-xl.json"} {
		checkFolder(t, folder, golden, dev, dt, tol)
	}
}

func checkFolder(t *testing.T, folder, golden string, dev candle.Device, dt candle.DType, tol float64) {
	g, noise := readGolden(t, golden)
	p := openFolder(t, folder, dev, dt)
	var steps []int
	x, err := p.generate(context.Background(), group{{Prompt: g.Prompt, Width: 16, Height: 12, Steps: g.Steps,
		Guidance: g.Guidance, Batch: 2, Noise: noise, Progress: func(pr Progress) { steps = append(steps, pr.Step*10+pr.Steps) }}})
	require.NoError(t, err)
	defer x.Close()
	assert.Equal(t, []int{14, 24, 34, 44}, steps, "progress after each of 4 steps")
	require.Equal(t, candle.Shape{2, 3, 12, 16}, x.Shape())
	worst := relErr(t, x, g.Image)
	t.Logf("%s %s: txt2img against the reference loop, max relative error %.2g", folder, dt, worst)
	assert.LessOrEqual(t, worst, tol)
}

// relErr is the largest difference of x from want over want's largest
// magnitude.
func relErr(t *testing.T, x *candle.Tensor, want4 [][][][]float64) float64 {
	t.Helper()
	got := toF64(t, x)
	want := flat4(want4)
	require.Len(t, got, len(want))
	return maxRelDiff(got, want)
}

// maxRelDiff is the largest difference of got from want over want's
// largest magnitude.
func maxRelDiff(got, want []float64) float64 {
	scale, worst := 0.0, 0.0
	for _, v := range want {
		scale = max(scale, math.Abs(v))
	}
	for i := range want {
		worst = max(worst, math.Abs(got[i]-want[i])/scale)
	}
	return worst
}

// TestPipelineAgainstReference runs txt2img with guidance on the CPU, SD
// 1.x's and XL's, and compares the decoded images with diffusers' loops
// over the reference components.
func TestPipelineAgainstReference(t *testing.T) { checkPipeline(t, candle.CPU(), candle.F32, 1e-5) }

func TestGPUPipelineAgainstReference(t *testing.T) {
	dev, err := candle.HIP(0)
	testenv.Need(t, 2, "a GPU", err)
	checkPipeline(t, dev, candle.F32, 1e-4)
	checkPipeline(t, dev, candle.F16, 2e-2)
}

// TestGPUGraphs runs txt2img (guided, batch 2) and inpainting with the
// UNet replayed from a graph (Options.Graphs) and op by op: the images
// agree.
func TestGPUGraphs(t *testing.T) {
	dev, err := candle.HIP(0)
	testenv.Need(t, 2, "a GPU", err)
	mask := image.NewGray(image.Rect(0, 0, 16, 8))
	for i := range mask.Pix {
		mask.Pix[i] = uint8(255 * (i % 2))
	}
	for _, folder := range []string{"tiny-sd", "tiny-sdxl", "tiny-sd-inpaint"} {
		var out [2]*candle.Tensor
		for i, graphs := range []bool{true, false} {
			p, err := OpenWith(filepath.Join("testdata", folder), dev, candle.F32, Options{Graphs: graphs})
			require.NoError(t, err)
			assert.Equal(t, graphs, p.graphs)
			r := Request{Prompt: "a cat", NegativePrompt: "a dog", Width: 16, Height: 8, Steps: 4, Batch: 2, Seed: 3}
			if folder == "tiny-sd-inpaint" {
				r.Init, r.Mask = image.NewRGBA(image.Rect(0, 0, 16, 8)), mask
			}
			out[i], err = p.generate(context.Background(), group{r})
			require.NoError(t, err, folder)
			defer out[i].Close()
			require.NoError(t, p.Close())
		}
		a, b := toF64(t, out[0]), toF64(t, out[1])
		require.Len(t, a, len(b))
		d := maxRelDiff(a, b)
		t.Logf("%s: replayed against op by op, max relative error %.2g", folder, d)
		assert.LessOrEqual(t, d, 1e-6, folder)
	}
}

func TestGenerate(t *testing.T) {
	p := openTiny(t, candle.CPU(), candle.F32)
	r := Request{Prompt: "a photo of a cat", NegativePrompt: "a dog", Width: 16, Height: 8, Steps: 3, Seed: 7}
	a, err := p.Generate(context.Background(), r)
	require.NoError(t, err)
	require.Len(t, a, 1)
	assert.Equal(t, image.Rect(0, 0, 16, 8), a[0].Bounds())
	again, err := p.Generate(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, a[0].Pix, again[0].Pix, "a seed gives the same image")
	r.Seed = 8
	other, err := p.Generate(context.Background(), r)
	require.NoError(t, err)
	assert.NotEqual(t, a[0].Pix, other[0].Pix)

	// Every sampler runs, guided or not.
	for _, k := range scheduler.Kinds() {
		imgs, err := p.Generate(context.Background(), Request{Prompt: "a cat", Width: 8, Height: 8, Steps: 2, Sampler: k, Guidance: 1, Batch: 2})
		require.NoError(t, err, k)
		assert.Len(t, imgs, 2)
	}
	// SDXL, with and without a negative prompt, guided or not.
	xl := openFolder(t, "tiny-sdxl", candle.CPU(), candle.F32)
	for _, r := range []Request{{Prompt: "a cat", Width: 8, Height: 8, Steps: 2}, {Prompt: "a cat", NegativePrompt: "a dog", Width: 8, Height: 8, Steps: 2, Batch: 2}, {Prompt: "a cat", Width: 8, Height: 8, Steps: 2, Guidance: 1}} {
		imgs, err := xl.Generate(context.Background(), r)
		require.NoError(t, err, "%+v", r)
		assert.Len(t, imgs, max(r.Batch, 1))
	}
	// img2img from the first image.
	imgs, err := p.Generate(context.Background(), Request{Prompt: "a cat", Width: 16, Height: 8, Steps: 4, Init: a[0], Strength: 0.5})
	require.NoError(t, err)
	assert.Equal(t, image.Rect(0, 0, 16, 8), imgs[0].Bounds())

	ctx, cancel := context.WithCancel(context.Background())
	_, err = p.Generate(ctx, Request{Prompt: "a cat", Width: 8, Height: 8, Steps: 3, Progress: func(pr Progress) {
		if pr.Step == 1 {
			cancel()
		}
	}})
	assert.ErrorIs(t, err, errs.ErrCanceled)
	assert.ErrorContains(t, err, "after 1 of 3 steps")
	assert.ErrorIs(t, err, context.Canceled, "the context's error is the cause")

	for _, c := range []struct {
		r    Request
		kind error
		text string
	}{
		{Request{Width: 10, Height: 8}, errs.ErrArgument, "multiples of 4"},
		{Request{Width: 8, Height: 8, Noise: make([]float32, 3)}, errs.ErrShape, "3 values: want 64"},
		{Request{Width: 8, Height: 8, Init: a[0], Strength: 0.5}, errs.ErrShape, "the init image is 16×8"},
		{Request{Width: 16, Height: 8, Init: a[0], Strength: 2}, errs.ErrArgument, "strength 2"},
		{Request{Width: 8, Height: 8, Sampler: "heun"}, errs.ErrUnsupported, "heun"},
	} {
		_, err := p.Generate(context.Background(), c.r)
		require.ErrorIs(t, err, c.kind, "%+v", c.r)
		assert.ErrorContains(t, err, c.text)
	}
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	_, err = p.Generate(context.Background(), r)
	assert.ErrorIs(t, err, errs.ErrClosed)
}

func TestOpenErrors(t *testing.T) {
	_, err := Open(t.TempDir(), candle.CPU(), candle.F32)
	assert.ErrorIs(t, err, errs.ErrNotFound)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model_index.json"), []byte(`{"_class_name": "StableDiffusion3Pipeline"}`), 0o644))
	_, err = Open(dir, candle.CPU(), candle.F32)
	assert.ErrorIs(t, err, errs.ErrUnsupported)
	assert.ErrorContains(t, err, "StableDiffusion3Pipeline")
}
