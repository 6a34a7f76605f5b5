package gguf_test

import (
	"bytes"
	"fmt"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/gguf"
)

// Write a GGUF file with one quantized weight, read it back and put the
// weight on a device, still quantized.
func Example() {
	vals := make([]float32, 2*64)
	for i := range vals {
		vals[i] = float32(i%9) - 4
	}
	blocks, err := candle.QuantizeBlocks(candle.GGMLQ8_0, vals)
	if err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	w, err := gguf.NewWriter(&buf, []gguf.KV{{Key: "general.architecture", Value: "llama"}, {Key: "llama.block_count", Value: uint32(1)}},
		[]gguf.TensorSpec{{Name: "w", Dims: []int{2, 64}, Type: candle.GGMLQ8_0}})
	if err != nil {
		panic(err)
	}
	if err := w.WriteTensor("w", blocks); err != nil {
		panic(err)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}

	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		panic(err)
	}
	layers, _ := f.ArchUint("block_count")
	info, _ := f.Tensor("w")
	fmt.Println(f.Architecture(), layers, info.Name, info.Dims, info.Type, info.Bytes)
	q, err := f.LoadQ("w", candle.CPU())
	if err != nil {
		panic(err)
	}
	defer q.Close()
	fmt.Println(q.Type(), q.Shape())
	// Output:
	// llama 1 w [2 64] Q8_0 136
	// Q8_0 [2 64]
}
