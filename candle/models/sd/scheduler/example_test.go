package scheduler_test

import (
	"fmt"

	"github.com/rocm-go/rocm/candle/models/sd/scheduler"
)

// A DPM++ 2M Karras schedule of 20 steps for a model trained with SD's
// noise schedule (a diffusers folder's scheduler/scheduler_config.json,
// read by LoadConfig, gives the same), and its loop in float64 with a
// stand-in for the UNet.
func Example() {
	cfg := scheduler.SD()
	cfg.KarrasSigmas = true
	s, err := scheduler.New(scheduler.DPMPP2M, cfg, 20)
	if err != nil {
		fmt.Println(err)
		return
	}
	first, last := s.Steps[0], s.Steps[len(s.Steps)-1]
	fmt.Printf("%d steps, timesteps %.0f to %.0f, sigma %.3f to %.3f\n", len(s.Steps), first.Timestep, last.Timestep, first.Sigma, last.Sigma)

	noise := scheduler.NewNoise(1234)
	x := noise.Float64s(4)
	for i := range x {
		x[i] *= s.InitNoiseSigma
	}
	unet := func(i int, t float64, in []float64) []float64 { return in } // a stand-in: its input as the noise
	out := s.Sample(x, unet, nil)
	fmt.Printf("%.3f\n", out)
	// Output:
	// 20 steps, timesteps 999 to 0, sigma 14.615 to 0.029
	// [0.391 0.282 -0.131 -0.057]
}
