package candle

// Weights is a checkpoint's tensors by name, whichever its file format:
// what a model's parameters load from (candle/nn's VarBuilder, the
// architectures of candle/models). candle/safetensors (a file, or a
// sharded model's files) and candle/gguf implement it, their files mapped
// (MappedFile) so that each tensor reaches a HIP device through the
// pipelined upload (Transfer). Its methods are safe for many goroutines.
type Weights interface {
	// Names lists the tensors, sorted.
	Names() []string
	// Info describes a tensor; false when there is none of the name.
	Info(name string) (WeightInfo, bool)
	// Load puts a tensor that is not quantized on dev in its own dtype
	// (WeightInfo.DType). A quantized tensor is an error of kind
	// errs.ErrDType: LoadQ it, or Dequantize what LoadQ gives.
	Load(name string, dev Device) (*Tensor, error)
	// LoadQ puts a quantized tensor on dev as its blocks
	// (WeightInfo.Quant); a tensor that is not quantized is an error of
	// kind errs.ErrDType.
	LoadQ(name string, dev Device) (*QTensor, error)
	// TransferStats says how the tensors loaded so far reached HIP
	// devices.
	TransferStats() TransferStats
	// Close waits for the copies still reading the files and unmaps them;
	// the tensors loaded stay valid.
	Close() error
}

// WeightInfo describes one tensor of a checkpoint: its shape, and the
// type its file gives it, which says how it loads.
type WeightInfo struct {
	// Shape is in candle's order, the slowest-varying dim first. It is
	// the file's: read it, do not change it.
	Shape Shape
	// Type is the element type as the file names it: "BF16", "F32",
	// "Q4_K", "I32".
	Type string
	// Dense: Load takes the tensor, of DType. Quantized: LoadQ takes
	// it, of Quant. Neither: a type candle does not hold (I32, an IQ
	// quantization), which neither loads.
	Dense, Quantized bool
	DType            DType
	Quant            GGMLType
}

// Bytes is the size of the tensor's data in its file (0 for a type
// candle does not hold).
func (w WeightInfo) Bytes() int {
	switch {
	case w.Dense:
		return w.Shape.Elems() * w.DType.Size()
	case w.Quantized && len(w.Shape) > 0:
		k := w.Shape[len(w.Shape)-1]
		row, err := w.Quant.RowBytes(k)
		if err != nil || k == 0 {
			return 0
		}
		return w.Shape.Elems() / k * row
	}
	return 0
}
