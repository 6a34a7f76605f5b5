package candle

// QuantizeBlocks quantizes vals (a whole number of typ's blocks) into
// typ's blocks, as llama.cpp's reference quantizers do.
func QuantizeBlocks(typ GGMLType, vals []float32) ([]byte, error) {
	return nil, errorf("QuantizeBlocks", ErrDType, "%s: not yet", typ)
}

// DequantizeBlocks expands typ's blocks into float32 values, appended to
// dst.
func DequantizeBlocks(dst []float32, typ GGMLType, blocks []byte) ([]float32, error) {
	return nil, errorf("DequantizeBlocks", ErrDType, "%s: not yet", typ)
}
