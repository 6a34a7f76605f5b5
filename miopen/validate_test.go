package miopen

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bad arguments are refused in Go, before any C call: these run with no
// library loaded at all.

func TestValidationBeforeAnyCall(t *testing.T) {
	badParm := func(name string, err error) {
		t.Helper()
		assert.ErrorIs(t, err, ErrBadParm, name)
	}
	_, err := NewTensorDescriptor(DataType(42), []int{1}, nil)
	badParm("unknown type", err)
	_, err = NewTensorDescriptor(DataTypeFloat, nil, nil)
	badParm("no dims", err)
	_, err = NewTensorDescriptor(DataTypeFloat, make([]int, 9), nil)
	badParm("9 dims", err)
	_, err = NewTensorDescriptor(DataTypeFloat, []int{2, 0, 3}, nil)
	badParm("zero dim", err)
	_, err = NewTensorDescriptor(DataTypeFloat, []int{2, -1}, nil)
	badParm("negative dim", err)
	_, err = NewTensorDescriptor(DataTypeFloat, []int{2, 3}, []int{3})
	badParm("strides length", err)
	_, err = NewTensorDescriptor(DataTypeFloat, []int{2, 3}, []int{3, 0})
	badParm("zero stride", err)
	_, err = NewTensorDescriptor(DataTypeHalf, []int{1 << 16, 1 << 16}, nil)
	badParm("2^32 elements", err)
	assert.ErrorContains(t, err, "32-bit")
	_, err = NewTensor4D(DataTypeFloat, 1, 2, 0, 4)
	badParm("4-D zero", err)
	_, err = NewTensorLayout(DataTypeFloat, LayoutNHWC, []int{2, 3, 4})
	badParm("3-D layout", err)
	_, err = NewTensorLayout(DataTypeFloat, Layout(7), []int{2, 3, 4, 5})
	badParm("unknown layout", err)

	for name, p := range map[string]ConvolutionParams{
		"negative pad":        {Pad: []int{-1, 0}},
		"zero stride":         {Stride: []int{0, 1}},
		"zero dilation":       {Dilation: []int{1, 0}},
		"mismatched lengths":  {Pad: []int{1, 1}, Stride: []int{1, 1, 1}},
		"1-D":                 {Pad: []int{1}},
		"4-D":                 {Pad: []int{1, 1, 1, 1}},
		"output pad, forward": {OutputPad: []int{1, 0}},
		"output pad too big":  {Transposed: true, Stride: []int{2, 2}, OutputPad: []int{2, 0}},
		"negative groups":     {Groups: -2},
	} {
		_, err := NewConvolutionDescriptor(p)
		badParm(name, err)
	}
	for name, c := range map[string]struct {
		p    ConvolutionParams
		x, w []int
	}{
		"channels":             {ConvolutionParams{}, []int{1, 3, 8, 8}, []int{4, 4, 3, 3}},
		"groups split outputs": {ConvolutionParams{Groups: 2}, []int{1, 4, 8, 8}, []int{3, 2, 3, 3}},
		"kernel too large":     {ConvolutionParams{Dilation: []int{3, 1}}, []int{1, 2, 5, 5}, []int{2, 2, 3, 3}},
		"rank":                 {ConvolutionParams{}, []int{1, 2, 5, 5, 5}, []int{2, 2, 3, 3, 3}},
		"transposed channels":  {ConvolutionParams{Transposed: true}, []int{1, 4, 5, 5}, []int{3, 2, 3, 3}},
		"empty transposed":     {ConvolutionParams{Transposed: true, Pad: []int{3, 3}}, []int{1, 4, 1, 1}, []int{4, 2, 3, 3}},
		"zero dimension":       {ConvolutionParams{}, []int{0, 4, 5, 5}, []int{4, 4, 3, 3}},
	} {
		_, err := c.p.OutputDims(c.x, c.w)
		badParm(name, err)
	}
	for name, p := range map[string]PoolingParams{
		"1-D":          {Window: []int{2}},
		"zero window":  {Window: []int{0, 2}},
		"pad >= win":   {Window: []int{2, 2}, Pad: []int{2, 0}},
		"unknown mode": {Mode: PoolingMode(9), Window: []int{2, 2}},
		"zero stride":  {Window: []int{2, 2}, Stride: []int{0, 1}},
	} {
		_, err := NewPoolingDescriptor(p)
		badParm(name, err)
	}
	_, err = PoolingParams{Window: []int{5, 5}}.OutputDims([]int{1, 1, 4, 8})
	badParm("window larger than input", err)
	_, err = PoolingParams{Window: []int{2, 2}}.OutputDims([]int{1, -1, 4, 8})
	badParm("negative dimension", err)

	_, err = NewActivationDescriptor(ActivationMode(42), 0, 0, 0)
	badParm("unknown activation", err)
	_, err = NewActivationDescriptor(ActivationELU, math.NaN(), 0, 0)
	badParm("NaN alpha", err)
	_, err = NewActivationDescriptor(ActivationClippedReLU, 0, 0, 0)
	badParm("clipped at 0", err)
	_, err = NewLRNDescriptor(LRNParams{Mode: LRNModeCrossChannel, N: 4, Alpha: 1, Beta: 1, K: 1})
	badParm("even LRN window", err)
	_, err = NewLRNDescriptor(LRNParams{Mode: LRNModeCrossChannel, N: 5, Alpha: 1, Beta: 1, K: 0})
	badParm("K = 0", err)
	_, err = NewLRNDescriptor(LRNParams{Mode: LRNMode(3), N: 5, K: 1})
	badParm("unknown LRN mode", err)
	_, err = DeriveBatchNormDescriptor(nil, BatchNormModeSpatial)
	badParm("nil x", err)
	_, err = NewHandle(nil)
	badParm("nil stream", err)
	var h *Handle
	badParm("nil handle", h.ActivationForward(nil, Tensor{}, Tensor{}))
	assert.NoError(t, h.Close())
	_, err = NewMHAForward(nil, nil, nil, nil, MHAParams{Scale: 1})
	badParm("nil MHA tensors", err)

	// Nil descriptors close quietly.
	for _, c := range []interface{ Close() error }{(*TensorDescriptor)(nil), (*ConvolutionDescriptor)(nil), (*PoolingDescriptor)(nil),
		(*ActivationDescriptor)(nil), (*LRNDescriptor)(nil), (*MHAForward)(nil)} {
		assert.NoError(t, c.Close())
	}
}

func TestOutputDimsFormulas(t *testing.T) {
	out, err := ConvolutionParams{Pad: []int{1, 0}, Stride: []int{2, 1}, Dilation: []int{1, 2}, Groups: 2}.OutputDims([]int{3, 4, 9, 10}, []int{6, 2, 3, 3})
	require.NoError(t, err)
	assert.Equal(t, []int{3, 6, 5, 6}, out) // (9+2-3)/2+1, (10-4-1)/1+1
	out, err = ConvolutionParams{Pad: []int{1, 0}, Stride: []int{2, 3}, Dilation: []int{1, 2}, Transposed: true, OutputPad: []int{1, 2}}.
		OutputDims([]int{2, 4, 5, 6}, []int{4, 3, 3, 3})
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3, 10, 22}, out, "MIOpen 6.4 gives the same (tier 1 checks it)")
	out, err = PoolingParams{Window: []int{2, 3, 3}, Pad: []int{0, 1, 1}, Stride: []int{2, 2, 1}}.OutputDims([]int{3, 4, 9, 10, 11})
	require.NoError(t, err)
	assert.Equal(t, []int{3, 4, 4, 5, 11}, out)
}

func TestStringsAndStatuses(t *testing.T) {
	for _, s := range statusValues {
		assert.NotEmpty(t, s.String())
		assert.NotEmpty(t, s.Description())
		if s != StatusSuccess {
			err := statusError("miopenX", s)
			assert.ErrorIs(t, err, &Error{Status: s})
			assert.ErrorContains(t, err, s.String())
		}
	}
	assert.Equal(t, "miopenStatusBadParm", StatusBadParm.String())
	e := &Error{Op: "miopenConvolutionForward", Status: StatusNotImplemented, Detail: "more"}
	assert.Equal(t, "miopen: miopenConvolutionForward: miopenStatusNotImplemented (Use of unimplemented feature.): more", e.Error())
	assert.ErrorIs(t, e, ErrNotImplemented)
	assert.NotErrorIs(t, e, ErrBadParm)
	assert.ErrorIs(t, statusError("miopenX", statusNoDevice), ErrNotInitialized)
	assert.Equal(t, "leaky ReLU", ActivationLeakyReLU.String())
	assert.Equal(t, "implicit GEMM", ConvAlgoImplicitGEMM.String())
	assert.Equal(t, "backward weights", ConvBackwardWeights.String())
	assert.Equal(t, "NHWC", LayoutNHWC.String())
	assert.Equal(t, 2, DataTypeBFloat16.Size())
	assert.Equal(t, 0, DataType(42).Size())
	assert.True(t, DataTypeHalf.IsFloat())
	assert.False(t, DataTypeInt32.IsFloat())
}

func TestFindCacheIsBounded(t *testing.T) {
	c := newFindCache(2)
	runs := 0
	find := func() ([]ConvAlgoPerf, error) { runs++; return []ConvAlgoPerf{{Workspace: runs}}, nil }
	for _, k := range []string{"a", "b", "a", "c", "b"} {
		_, err := c.get(k, false, find)
		require.NoError(t, err)
	}
	// a, b run; a hits; c evicts b; b runs again.
	assert.Equal(t, 4, runs)
	assert.Equal(t, 2, c.lru.Len())
	assert.Equal(t, 1, c.hits)
	p, err := c.get("c", false, find)
	require.NoError(t, err)
	p[0].Workspace = -1 // callers get copies
	p, _ = c.get("c", false, find)
	assert.Equal(t, 3, p[0].Workspace)
}

func TestBatchNormShapes(t *testing.T) {
	x := &TensorDescriptor{dtype: DataTypeDouble, dims: []int{2, 3, 4, 5}, strides: packedStrides([]int{2, 3, 4, 5})}
	_, _, err := batchNormShape("op", x, BatchNormModeSpatial)
	assert.ErrorIs(t, err, ErrNotImplemented, "MIOpen's statistics are float: no double batch norm")
	x.dtype = DataTypeBFloat16
	dims, dt, err := batchNormShape("op", x, BatchNormModePerActivation)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 3, 4, 5}, dims)
	assert.Equal(t, DataTypeFloat, dt)
	_, _, err = batchNormShape("op", x, BatchNormMode(2))
	assert.ErrorIs(t, err, ErrBadParm)
}
