package sd_test

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"image/draw"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/sd"
)

// Inpainting repaints the white region of a mask over an init image,
// here with an inpainting UNet, and cheap previews after each step.
func ExamplePipeline_Generate_inpaint() {
	p, err := sd.Open("testdata/tiny-sd-inpaint", candle.CPU(), candle.F32)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	init := image.NewRGBA(image.Rect(0, 0, 32, 16))
	draw.Draw(init, init.Bounds(), image.NewUniform(color.RGBA{40, 120, 200, 255}), image.Point{}, draw.Src)
	mask := image.NewGray(init.Bounds())
	draw.Draw(mask, image.Rect(16, 0, 32, 16), image.White, image.Point{}, draw.Src) // repaint the right half
	imgs, err := p.Generate(context.Background(), sd.Request{
		Prompt: "a photo of a cat", Width: 32, Height: 16, Steps: 3, Seed: 1,
		Init: init, Mask: mask, Preview: sd.PreviewApprox,
		Progress: func(pr sd.Progress) {
			fmt.Printf("step %d of %d, preview %v\n", pr.Step, pr.Steps, pr.Preview[0].Bounds().Size())
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(imgs[0].Bounds().Size())
	// Output:
	// step 1 of 3, preview (16,8)
	// step 2 of 3, preview (16,8)
	// step 3 of 3, preview (16,8)
	// (32,16)
}

// An image server groups its clients' requests by BatchKey and runs each
// group as one UNet batch: here two requests with their own prompts,
// seeds, guidance scales and image counts.
func ExamplePipeline_GenerateBatch() {
	p, err := sd.Open("testdata/tiny-sd", candle.CPU(), candle.F32)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	rs := []sd.Request{
		{Prompt: "a photo of a cat", Width: 8, Height: 8, Steps: 2, Seed: 1},
		{Prompt: "a red cube", NegativePrompt: "blurry", Width: 8, Height: 8, Steps: 2, Seed: 2, Guidance: 5, Batch: 2},
	}
	var keys []string
	groups := map[string][]sd.Request{}
	for _, r := range rs {
		k, ok := p.BatchKey(r)
		if !ok {
			continue // img2img, inpainting or given noise: Generate runs it alone
		}
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
	}
	for _, k := range keys {
		fmt.Println(k)
		imgs, err := p.GenerateBatch(context.Background(), groups[k])
		if err != nil {
			fmt.Println(err)
			return
		}
		for i, mine := range imgs {
			fmt.Printf("request %d: %d × %v\n", i, len(mine), mine[0].Bounds().Size())
		}
	}
	// Output:
	// Width=8 Height=8 Steps=2 Sampler=euler Guidance=guided Preview=none TileVAE=false
	// request 0: 1 × (8,8)
	// request 1: 2 × (8,8)
}
