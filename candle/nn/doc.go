// Package nn is the layers of neural networks on package candle, and the
// loading of their weights: safetensors files (one, or a sharded model's
// index) memory-mapped and copied to the device once, through a
// VarBuilder that checks each parameter's name, shape and dtype. On a HIP
// device goroutines read the file into pinned buffers a chunk at a time,
// ahead of the copies, and tensors go from them by DMA (Transfer says how,
// and falls back to staging where reading fails). The buffers stay for
// the next load; ReservePinnedBuffers makes them before a process's first
// load, while the program does something else.
//
//	vb, err := nn.OpenVarBuilder("/models/Llama-3.2-1B", dev, candle.BF16)
//	defer vb.Close()
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
