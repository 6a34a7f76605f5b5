// Package nn is the layers of neural networks on package candle, and the
// loading of their weights: a VarBuilder maps a model's weights
// (candle.Weights: safetensors files from candle/safetensors, a GGUF file
// from candle/gguf, or TensorWeights in memory) onto named parameters,
// checking each one's name, shape and dtype. Files reach a HIP device
// through candle's pipelined pinned upload (candle.Transfer).
//
//	w, err := safetensors.Open("/models/Llama-3.2-1B")
//	defer w.Close()
//	vb, err := nn.NewVarBuilder(w, dev, candle.BF16)
//	proj, err := nn.NewLinear(vb.Prefix("model.layers.0.self_attn"), "q_proj", 2048, 2048, false)
//	y, err := proj.Forward(x)
//
// Layers: Linear, Embedding, RMSNorm, LayerNorm, Conv1d, Conv2d, the
// activations of model configs (Activation), a KVCache that grows in
// place, and a PagedKVCache that many sequences share in pages (its
// PagedStep writes each forward pass's keys and values into their pages
// and runs attention over them). Their forward passes are candle ops (Matmul on rocBLAS, the
// fused norms), so they run on every device candle has.
//
// Errors are *errs.Error (candle.Error) with errs' kinds, which errors.Is
// matches through candle's names (candle.ErrShape, candle.ErrOutOfMemory,
// ...), and ErrCacheFull, this package's own.
package nn

import "github.com/rocm-go/rocm/errs"

// pkg makes this package's errors.
const pkg errs.Package = "nn"
