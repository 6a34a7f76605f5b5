package candle_test

import (
	"fmt"
	"math"

	"github.com/rocm-go/rocm/candle"
)

// A sampler's report of its draws (OpenAI's logprobs): the logits as the
// draw sees them (here a bias that bans token 0), the draw, then the drawn
// token's log-probability and the two most likely tokens, all on the
// logits' device; only those values come back to the host.
func ExampleTensor_TokenLogProbs() {
	logits, err := candle.FromSlice(candle.CPU(), []float32{4, 1, 3, 2}, 1, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer logits.Close()
	opts := []candle.SampleOptions{{Bias: []candle.TokenBias{{ID: 0, Add: -100}}}} // greedy
	processed, err := logits.ProcessLogits(opts)                                   // before Sample, which extends histories
	if err != nil {
		fmt.Println(err)
		return
	}
	defer processed.Close()
	ids, err := logits.Sample(opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ids.Close()
	chosen, top, topIDs, err := processed.TokenLogProbs(ids, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer chosen.Close()
	defer top.Close()
	defer topIDs.Close()
	id, _ := candle.ToSlice[uint32](ids)
	lp, _ := candle.ToSlice[float32](chosen)
	tv, _ := candle.ToSlice[float32](top)
	ti, _ := candle.ToSlice[uint32](topIDs)
	fmt.Printf("drew %d, p %.3f; top %v with p %.3f, %.3f\n", id[0], math.Exp(float64(lp[0])), ti, math.Exp(float64(tv[0])), math.Exp(float64(tv[1])))
	// Output: drew 2, p 0.665; top [2 3] with p 0.665, 0.245
}
