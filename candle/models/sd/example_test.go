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
