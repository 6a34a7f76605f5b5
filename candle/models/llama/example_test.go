package llama_test

import (
	"fmt"
	"os"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/models/llama"
	"github.com/rocm-go/rocm/internal/mkmodel"
)

// A prompt, then decode steps of two sequences in one batch, on the CPU
// with a tiny random model.
func Example() {
	dir, _ := os.MkdirTemp("", "llama-example")
	defer os.RemoveAll(dir)
	if err := mkmodel.Write(dir, mkmodel.Tiny(), nil); err != nil {
		fmt.Println(err)
		return
	}
	c, err := models.Open(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg, _ := llama.ConfigOf(c)
	m, err := llama.New(c, candle.CPU(), cfg.DType, llama.Options{CacheTokens: 256})
	c.Close() // the weights are on the device
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	logits, _ := m.Forward([]uint64{1, 2}, [][]int32{{496, 72, 101, 108}, {496, 84}})
	next, _ := logits.Argmax(false, 1)
	ids, _ := candle.ToSlice[uint32](next)
	logits.Close()
	next.Close()
	logits, err = m.Forward([]uint64{1, 2}, [][]int32{{int32(ids[0])}, {int32(ids[1])}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer logits.Close()
	fmt.Println(cfg.Family, logits.Shape(), logits.DType(), m.CacheTokensFree())
	m.Release(1)
	fmt.Println(m.CacheTokensFree())
	// Output:
	// llama [2 512] f32 224
	// 240
}
