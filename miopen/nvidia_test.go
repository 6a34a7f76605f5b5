package miopen

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/hip"
)

// Tier 0: the NVIDIA translation layer (nvidia.c) against the fake cuDNN,
// which checks the kinds of the descriptors it is given and logs the
// translated arguments.

func TestNVIDIATranslatesEveryFunction(t *testing.T) {
	useFake(t, hip.PlatformNVIDIA)
	assert.Equal(t, hip.PlatformNVIDIA, LoadedPlatform())
	assert.Empty(t, untranslated(), "every bound MIOpen function has a cuDNN translation")
	assert.Contains(t, LibraryPaths()[0], "libcudnn.so.9")
	v, err := Version()
	require.NoError(t, err)
	assert.Equal(t, hip.Version{Major: 9, Minor: 14}, v, "cudnnGetVersion's 91400")
	s, err := StatusString(StatusNotImplemented)
	require.NoError(t, err)
	assert.Equal(t, "miopenStatusNotImplemented", s)
}

func TestNVIDIAStatusesByName(t *testing.T) {
	for cudnn, want := range map[int]Status{
		0: StatusSuccess, 1001: StatusNotInitialized, 1002: StatusVersionMismatch, 1005: StatusNotInitialized,
		1008: StatusNotInitialized, 2000: StatusBadParm, 2001: StatusInvalidValue, 2002: StatusBadParm, 2008: StatusBadParm,
		3000: StatusNotImplemented, 3002: StatusNotImplemented, 3007: StatusNotImplemented, 4000: StatusInternalError,
		4003: StatusAllocFailed, 4004: StatusAllocFailed, 5000: StatusInternalError, 5003: StatusInternalError,
		1006: StatusUnknownError, 12345: StatusUnknownError, 6: StatusUnknownError, -1: statusCUDAMissing,
	} {
		assert.Equal(t, want, cudnnStatus(cudnn), "cuDNN status %d", cudnn)
	}
	assert.Equal(t, "CUDNN_STATUS_NOT_SUPPORTED_SHAPE", cudnnStatusName(3002))
	assert.Equal(t, "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED", cudnnStatusName(4003), "cuDNN 9's CUDNN_STATUS_ALLOC_FAILED")
	assert.Equal(t, "CUDNN_STATUS_UNKNOWN", cudnnStatusName(7))
}

func TestNVIDIATensorDescriptors(t *testing.T) {
	e := useFake(t, hip.PlatformNVIDIA)
	e.lines()
	d, err := NewTensorLayout(DataTypeHalf, LayoutNHWC, []int{2, 3, 5, 7})
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, []string{"cudnnSetTensorNdDescriptor type=2 dims=2,3,5,7 strides=105,1,21,3"}, e.grep("cudnnSet"),
		"miopenHalf (0) is CUDNN_DATA_HALF (2); NHWC is strides over N, C, H, W")
	_, dims, strides, err := d.Query()
	require.NoError(t, err)
	assert.Equal(t, [][]int{{2, 3, 5, 7}, {105, 1, 21, 3}}, [][]int{dims, strides})

	for dt, cudnn := range map[DataType]string{DataTypeFloat: "0", DataTypeDouble: "1", DataTypeInt8: "3", DataTypeInt32: "4", DataTypeBFloat16: "9"} {
		d := e.desc(dt, 5, 3)
		assert.Equal(t, []string{"cudnnSetTensorNdDescriptor type=" + cudnn + " dims=5,3,1,1 strides=3,1,1,1"}, e.grep("cudnnSet"),
			"%v; cuDNN gets four dimensions at least", dt)
		n, err := d.NumBytes()
		require.NoError(t, err)
		assert.Equal(t, d.Bytes(), n)
	}
	// Legacy cuDNN has no int64 tensors; the descriptor still describes.
	i64, err := NewTensor4D(DataTypeInt64, 1, 1, 1, 1)
	require.NoError(t, err)
	dt, _, _, err := i64.Query()
	require.NoError(t, err)
	assert.Equal(t, DataTypeInt64, dt)
	require.NoError(t, i64.Close())
}

func TestNVIDIAConvolutionForward(t *testing.T) {
	e := useFake(t, hip.PlatformNVIDIA)
	conv, x, w, y := convFixture(e, DataTypeHalf)
	e.lines()
	n, err := e.h.ConvolutionForwardWorkspace(conv, x, w, y)
	require.NoError(t, err)
	assert.Equal(t, 8000, n, "the largest workspace of cuDNN's forward algorithms")
	e.lines()

	perfs, err := e.h.FindConvolutionForward(conv, x, w, y)
	require.NoError(t, err)
	lines := e.grep("cudnn")
	require.Greater(t, len(lines), 5)
	assert.Equal(t, []string{
		"cudnnSetFilterNdDescriptor type=2 format=0 dims=8,4,3,3",
		"cudnnSetConvolutionNdDescriptor n=2 pad=1,1 stride=1,1 dil=1,1 mode=1 compute=0",
		"cudnnSetConvolutionGroupCount 1",
		"cudnnSetConvolutionMathType 1",
		"cudnnFindConvolutionForwardAlgorithmEx x=2,4,8,8 w=8,4,3,3 y=2,8,8,8 ws=8000",
	}, lines[len(lines)-5:], "after the workspace queries: the weights as a filter, CUDNN_CROSS_CORRELATION, float accumulation, tensor cores for half")
	require.Len(t, perfs, 2, "the algorithm that failed is left out")
	assert.Equal(t, ConvAlgorithm(ConvAlgoImplicitGEMM), perfs[0].Algorithm)
	assert.Equal(t, "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM with CUDNN_TENSOR_OP_MATH", perfs[0].Engine)
	assert.Equal(t, 500*time.Microsecond, perfs[0].Time)
	assert.Equal(t, 2048, perfs[0].Workspace)
	assert.Equal(t, ConvAlgoWinograd, perfs[1].Algorithm)
	assert.Equal(t, "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD with CUDNN_DEFAULT_MATH", perfs[1].Engine)

	require.NoError(t, e.h.ConvolutionForward(conv, x, w, y))
	lines = e.grep("cudnn")
	assert.Equal(t, "cudnnSetConvolutionMathType 1", lines[len(lines)-2])
	assert.Equal(t, "cudnnConvolutionForward x=2,4,8,8 w=8,4,3,3 y=2,8,8,8 algo=1 ws=2048 alpha=1 beta=0", lines[len(lines)-1],
		"cuDNN's order: algo, workspace, then beta and y")
	require.NoError(t, e.h.ConvolutionForward(conv, x, w, y, WithAlgorithm(perfs[1])))
	lines = e.grep("cudnn")
	assert.Equal(t, "cudnnSetConvolutionMathType 0", lines[len(lines)-2], "the math type the Find measured")
	assert.Equal(t, "cudnnConvolutionForward x=2,4,8,8 w=8,4,3,3 y=2,8,8,8 algo=6 ws=4096 alpha=1 beta=0", lines[len(lines)-1])

	// Float runs on FMA (no TF32: MIOpen's float is float); double gets
	// double scaling factors and accumulation.
	cf, xf, wf, yf := convFixture(e, DataTypeFloat)
	_, err = e.h.FindConvolutionForward(cf, xf, wf, yf)
	require.NoError(t, err)
	assert.Contains(t, e.lines(), "cudnnSetConvolutionMathType 3")
	cd, xd, wd, yd := convFixture(e, DataTypeDouble)
	require.NoError(t, e.h.ConvolutionForward(cd, xd, wd, yd))
	lines = e.lines()
	assert.Contains(t, lines, "cudnnSetConvolutionNdDescriptor n=2 pad=1,1 stride=1,1 dil=1,1 mode=1 compute=1")
	assert.Contains(t, lines, "cudnnConvolutionForward x=2,4,8,8 w=8,4,3,3 y=2,8,8,8 algo=1 ws=4096 alpha=1 beta=0", "alpha and beta read as doubles; the handle's workspace as it grew")

	// Groups, strides, dilations; NHWC weights are a KRSC filter.
	g := e.conv(ConvolutionParams{Pad: []int{0, 2}, Stride: []int{2, 1}, Dilation: []int{1, 2}, Groups: 2})
	xn, err := NewTensorLayout(DataTypeHalf, LayoutNHWC, []int{2, 4, 9, 9})
	require.NoError(t, err)
	defer xn.Close()
	wn, err := NewTensorLayout(DataTypeHalf, LayoutNHWC, []int{6, 2, 3, 3})
	require.NoError(t, err)
	defer wn.Close()
	yn, err := NewTensorLayout(DataTypeHalf, LayoutNHWC, []int{2, 6, 4, 9})
	require.NoError(t, err)
	defer yn.Close()
	e.lines()
	_, err = e.h.FindConvolutionForward(g, e.tensorOf(xn), e.tensorOf(wn), e.tensorOf(yn))
	require.NoError(t, err)
	lines = e.grep("cudnnSet")
	assert.Contains(t, lines, "cudnnSetFilterNdDescriptor type=2 format=1 dims=6,2,3,3", "CUDNN_TENSOR_NHWC, dimensions still K, C, R, S")
	assert.Contains(t, lines, "cudnnSetConvolutionNdDescriptor n=2 pad=0,2 stride=2,1 dil=1,2 mode=1 compute=0")
	assert.Contains(t, lines, "cudnnSetConvolutionGroupCount 2")

	// Weights cuDNN cannot take.
	ws := e.tensorOf(mustTensor(t, DataTypeHalf, []int{8, 4, 3, 3}, []int{72, 18, 6, 2}))
	_, err = e.h.FindConvolutionForward(conv, x, ws, y)
	assert.ErrorIs(t, err, ErrNotImplemented)
	assert.ErrorContains(t, err, "packed NCHW or NHWC weights")
}

func TestNVIDIATransposedConvolution(t *testing.T) {
	e := useFake(t, hip.PlatformNVIDIA)
	conv := e.conv(ConvolutionParams{Pad: []int{1, 1}, Stride: []int{2, 2}, Transposed: true, OutputPad: []int{1, 1}})
	x, w, y := e.tensor(DataTypeFloat, 2, 8, 5, 5), e.tensor(DataTypeFloat, 8, 3, 3, 3), e.tensor(DataTypeFloat, 2, 3, 10, 10)
	out, err := conv.OutputShape(x.Desc, w.Desc)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3, 10, 10}, out)
	e.lines()

	// The forward pass is cuDNN's data gradient: x plays dy, y plays dx.
	perfs, err := e.h.FindConvolutionForward(conv, x, w, y)
	require.NoError(t, err)
	assert.Equal(t, []string{"cudnnFindConvolutionBackwardDataAlgorithmEx w=8,3,3,3 dy=2,8,5,5 dx=2,3,10,10 ws=6000"}, e.grep("cudnnFind"))
	assert.Equal(t, "CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 with CUDNN_TENSOR_OP_MATH", perfs[0].Engine)
	assert.Equal(t, ConvAlgoImplicitGEMM, perfs[0].Algorithm)
	assert.Equal(t, ConvForward, perfs[0].Direction)
	require.NoError(t, e.h.ConvolutionForward(conv, x, w, y))
	assert.Equal(t, []string{"cudnnConvolutionBackwardData w=8,3,3,3 dy=2,8,5,5 dx=2,3,10,10 algo=1 ws=2048 alpha=1 beta=0"}, e.grep("cudnnConvolution"))

	// Its data gradient is cuDNN's forward, from dy (y's shape) to dx (x's).
	dy, dx := e.tensor(DataTypeFloat, 2, 3, 10, 10), e.tensor(DataTypeFloat, 2, 8, 5, 5)
	e.lines()
	perfs, err = e.h.FindConvolutionBackwardData(conv, dy, w, dx)
	require.NoError(t, err)
	assert.Equal(t, "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM with CUDNN_TENSOR_OP_MATH", perfs[0].Engine)
	require.NoError(t, e.h.ConvolutionBackwardData(conv, dy, w, dx))
	assert.Equal(t, []string{"cudnnFindConvolutionForwardAlgorithmEx x=2,3,10,10 w=8,3,3,3 y=2,8,5,5 ws=8000",
		"cudnnConvolutionForward x=2,3,10,10 w=8,3,3,3 y=2,8,5,5 algo=1 ws=2048 alpha=1 beta=0"}, filter(e.lines(), "cudnnFind", "cudnnConvolution"))

	// Its weights gradient correlates dy (as x) with x (as dy).
	dw := e.tensor(DataTypeFloat, 8, 3, 3, 3)
	e.lines()
	require.NoError(t, e.h.ConvolutionBackwardWeights(conv, dy, x, dw))
	assert.Equal(t, []string{
		"cudnnFindConvolutionBackwardFilterAlgorithmEx x=2,3,10,10 dy=2,8,5,5 dw=8,3,3,3 ws=7000",
		"cudnnConvolutionBackwardFilter x=2,3,10,10 dy=2,8,5,5 dw=8,3,3,3 algo=1 ws=2048 alpha=1 beta=0",
	}, filter(e.lines(), "cudnnFind", "cudnnConvolution"))
}

// filter keeps the lines that start with one of the prefixes.
func filter(lines []string, prefixes ...string) []string {
	var out []string
	for _, l := range lines {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

func TestNVIDIABackwardAndBias(t *testing.T) {
	e := useFake(t, hip.PlatformNVIDIA)
	conv, x, w, y := convFixture(e, DataTypeFloat)
	e.lines()
	require.NoError(t, e.h.ConvolutionBackwardData(conv, y, w, x))
	assert.Equal(t, []string{
		"cudnnFindConvolutionBackwardDataAlgorithmEx w=8,4,3,3 dy=2,8,8,8 dx=2,4,8,8 ws=6000",
		"cudnnConvolutionBackwardData w=8,4,3,3 dy=2,8,8,8 dx=2,4,8,8 algo=1 ws=2048 alpha=1 beta=0",
	}, filter(e.lines(), "cudnnFind", "cudnnConvolution"))
	perfs, err := e.h.FindConvolutionBackwardWeights(conv, y, x, w)
	require.NoError(t, err)
	assert.Equal(t, "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 with CUDNN_TENSOR_OP_MATH", perfs[0].Engine)
	assert.Equal(t, "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING with CUDNN_FMA_MATH", perfs[1].Engine)
	assert.Equal(t, ConvAlgoFFT, perfs[1].Algorithm)
	require.NoError(t, e.h.ConvolutionBackwardWeights(conv, y, x, w, WithAlgorithm(perfs[1])))
	lines := e.lines()
	assert.Contains(t, lines, "cudnnSetFilterNdDescriptor type=0 format=0 dims=8,4,3,3", "dw is a filter")
	assert.Equal(t, []string{
		"cudnnFindConvolutionBackwardFilterAlgorithmEx x=2,4,8,8 dy=2,8,8,8 dw=8,4,3,3 ws=7000",
		"cudnnConvolutionBackwardFilter x=2,4,8,8 dy=2,8,8,8 dw=8,4,3,3 algo=6 ws=4096 alpha=1 beta=0",
	}, filter(lines, "cudnnFind", "cudnnConvolution"))

	// MIOpen adds a bias as y = alpha*y + alpha*b + beta*y: cuDNN's
	// AddTensor gets beta 1.
	b := e.tensor(DataTypeFloat, 1, 8, 1, 1)
	require.NoError(t, e.h.ConvolutionForwardBias(b, y))
	require.NoError(t, e.h.ConvolutionBackwardBias(y, b))
	assert.Equal(t, []string{"cudnnAddTensor a=1,8,1,1 c=2,8,8,8 alpha=1 beta=1", "cudnnConvolutionBackwardBias dy=2,8,8,8 db=1,8,1,1 alpha=1 beta=0"},
		filter(e.lines(), "cudnnAdd", "cudnnConvolution"))
}

func TestNVIDIAErrorsNameTheCUDNNStatus(t *testing.T) {
	e := useFake(t, hip.PlatformNVIDIA)
	conv := e.conv(ConvolutionParams{Pad: []int{1, 1}})
	w := e.tensor(DataTypeFloat, 8, 4, 3, 3)
	_, err := e.h.FindConvolutionForward(conv, e.tensor(DataTypeFloat, 13, 4, 8, 8), w, e.tensor(DataTypeFloat, 13, 8, 8, 8))
	assert.ErrorIs(t, err, ErrNotImplemented)
	assert.ErrorContains(t, err, "cuDNN: cudnnFindConvolutionForwardAlgorithmEx returned CUDNN_STATUS_NOT_SUPPORTED_SHAPE (3002)")
	_, err = e.h.FindConvolutionForward(conv, e.tensor(DataTypeFloat, 14, 4, 8, 8), w, e.tensor(DataTypeFloat, 14, 8, 8, 8))
	assert.ErrorIs(t, err, ErrAllocFailed)
	assert.ErrorIs(t, err, errs.ErrOutOfMemory, "cuDNN's allocation failure, translated")
	assert.ErrorContains(t, err, "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED (4004)")
}

func TestNVIDIAPrimitives(t *testing.T) {
	e := useFake(t, hip.PlatformNVIDIA)
	x, y := e.tensor(DataTypeHalf, 2, 3, 6, 6), e.tensor(DataTypeHalf, 2, 3, 6, 6)
	dx, dy := e.tensor(DataTypeHalf, 2, 3, 6, 6), e.tensor(DataTypeHalf, 2, 3, 6, 6)
	e.lines()

	// Activation modes cuDNN has.
	for _, c := range []struct {
		mode        ActivationMode
		alpha, beta float64
		want        string
	}{
		{ActivationLogistic, 0, 0, "mode=0 nan=1 coef=0"},
		{ActivationReLU, 0, 0, "mode=1 nan=1 coef=0"},
		{ActivationTanh, 1, 1, "mode=2 nan=1 coef=0"},
		{ActivationClippedReLU, 6, 0, "mode=3 nan=1 coef=6"},
		{ActivationELU, 0.5, 0, "mode=4 nan=1 coef=0.5"},
	} {
		a, err := NewActivationDescriptor(c.mode, c.alpha, c.beta, 0)
		require.NoError(t, err)
		require.NoError(t, e.h.ActivationForward(a, x, y))
		require.NoError(t, e.h.ActivationBackward(a, y, dy, x, dx))
		assert.Equal(t, []string{"cudnnSetActivationDescriptor " + c.want, "cudnnActivationForward alpha=1 beta=0", "cudnnActivationBackward"},
			filter(e.lines(), "cudnnSetActivation", "cudnnActivation"), "%v", c.mode)
		require.NoError(t, a.Close())
	}
	// And those it lacks: rocm-go's kernels (which need a GPU to load
	// their module on; the fakes have none).
	for _, c := range []struct {
		mode               ActivationMode
		alpha, beta, gamma float64
	}{
		{ActivationPassThrough, 0, 0, 0}, {ActivationSoftReLU, 0, 0, 0}, {ActivationAbs, 0, 0, 0},
		{ActivationPower, 1, 2, 3}, {ActivationLeakyReLU, 0.01, 0, 0}, {ActivationTanh, 2, 0.5, 0},
	} {
		a, err := NewActivationDescriptor(c.mode, c.alpha, c.beta, c.gamma)
		require.NoError(t, err)
		assert.ErrorContains(t, e.h.ActivationForward(a, x, y), "rocm-go's kernels", "%v", c.mode)
		assert.ErrorContains(t, e.h.ActivationBackward(a, y, dy, x, dx), "rocm-go's kernels", "%v", c.mode)
		assert.Empty(t, filter(e.lines(), "cudnnSetActivation", "cudnnActivation"), "%v does not reach cuDNN", c.mode)
		require.NoError(t, a.Close())
	}

	// Softmax: algorithm and mode first, same values.
	require.NoError(t, e.h.SoftmaxForward(SoftmaxAlgorithmAccurate, SoftmaxModeInstance, x, y))
	require.NoError(t, e.h.SoftmaxBackward(SoftmaxAlgorithmLog, SoftmaxModeChannel, y, dy, dx))
	assert.Equal(t, []string{"cudnnSoftmaxForward algo=1 mode=0 x=2,3,6,6", "cudnnSoftmaxBackward algo=2 mode=1"}, filter(e.lines(), "cudnnSoftmax"))

	// Pooling modes: MIOpen's exclusive average is cuDNN's 2, its inclusive 1.
	py, pdy := e.tensor(DataTypeHalf, 2, 3, 3, 3), e.tensor(DataTypeHalf, 2, 3, 3, 3)
	for mode, want := range map[PoolingMode]string{PoolingModeMax: "mode=0", PoolingModeAverage: "mode=2", PoolingModeAverageInclusive: "mode=1"} {
		p, err := NewPoolingDescriptor(PoolingParams{Mode: mode, Window: []int{3, 3}, Pad: []int{1, 1}, Stride: []int{2, 2}})
		require.NoError(t, err)
		n, err := p.WorkspaceSize(py.Desc)
		require.NoError(t, err)
		assert.Zero(t, n, "cuDNN recomputes the maxima")
		require.NoError(t, e.h.PoolingForward(p, x, py, nil))
		require.NoError(t, e.h.PoolingBackward(p, py, pdy, x, dx, nil))
		assert.Equal(t, []string{"cudnnSetPoolingNdDescriptor " + want + " nan=1 win=3,3 pad=1,1 stride=2,2",
			"cudnnPoolingForward x=2,3,6,6 y=2,3,3,3", "cudnnPoolingBackward y=2,3,3,3 x=2,3,6,6"}, filter(e.lines(), "cudnnSetPooling", "cudnnPooling"), "%v", mode)
		require.NoError(t, p.Close())
	}

	// LRN: cuDNN's cross-channel one; the within-channel one is rocm-go's.
	cross, err := NewLRNDescriptor(LRNParams{Mode: LRNModeCrossChannel, N: 5, Alpha: 1e-4, Beta: 0.75, K: 2})
	require.NoError(t, err)
	defer cross.Close()
	require.NoError(t, e.h.LRNForward(cross, x, y, nil))
	assert.Equal(t, []string{"cudnnSetLRNDescriptor n=5 alpha=0.0001 beta=0.75 k=2", "cudnnLRNCrossChannelForward mode=0 alpha=1 beta=0"},
		filter(e.lines(), "cudnnSetLRN", "cudnnLRN"))
	within, err := NewLRNDescriptor(LRNParams{Mode: LRNModeWithinChannel, N: 3, Alpha: 1e-4, Beta: 0.75, K: 2})
	require.NoError(t, err)
	defer within.Close()
	assert.ErrorContains(t, e.h.LRNForward(within, x, y, nil), "rocm-go's kernels")
	assert.ErrorContains(t, e.h.LRNBackward(within, y, dy, x, dx, nil), "rocm-go's kernels")
	assert.Empty(t, filter(e.lines(), "cudnnSetLRN", "cudnnLRN"))

	// Batch norm: half data, float statistics.
	bn, err := DeriveBatchNormDescriptor(x.Desc, BatchNormModeSpatial)
	require.NoError(t, err)
	defer bn.Close()
	stat := func() *hip.Buffer { return e.tensorOf(bn).Data }
	require.NoError(t, e.h.BatchNormForwardInference(BatchNormParams{Mode: BatchNormModeSpatial, Desc: bn, Scale: stat(), Bias: stat(), Epsilon: 1e-5}, x, y, stat(), stat()))
	assert.Equal(t, []string{"cudnnBatchNormalizationForwardInference mode=1 bn=1,3,1,1 type=0 eps=1e-05"}, filter(e.lines(), "cudnnBatch"))

	// Tensor ops: float compute for half data, double for double.
	require.NoError(t, e.h.OpTensor(TensorOpMul, 1, x, 2, e.tensor(DataTypeHalf, 1, 3, 1, 1), 0, y))
	assert.Equal(t, []string{"cudnnSetOpTensorDescriptor op=1 comp=0 nan=1", "cudnnOpTensor a=2,3,6,6 b=1,3,1,1 c=2,3,6,6 alpha1=1 alpha2=2 beta=0"},
		filter(e.lines(), "cudnnSetOp", "cudnnOp"))
	xd, yd := e.tensor(DataTypeDouble, 2, 3), e.tensor(DataTypeDouble, 2, 3)
	require.NoError(t, e.h.OpTensor(TensorOpMin, 0.5, xd, 0.25, e.tensor(DataTypeDouble, 2, 1), 1, yd))
	assert.Equal(t, []string{"cudnnSetOpTensorDescriptor op=2 comp=1 nan=1", "cudnnOpTensor a=2,3,1,1 b=2,1,1,1 c=2,3,1,1 alpha1=0.5 alpha2=0.25 beta=1"},
		filter(e.lines(), "cudnnSetOp", "cudnnOp"), "scaling factors as doubles")
}

func TestNVIDIAHasNoMHA(t *testing.T) {
	e := useFake(t, hip.PlatformNVIDIA)
	q := e.desc(DataTypeHalf, 2, 4, 64, 32)
	_, err := NewMHAForward(q, q, q, q, MHAParams{Scale: 0.125})
	assert.ErrorIs(t, err, ErrNotImplemented)
	assert.ErrorContains(t, err, "no legacy-cuDNN equivalent")
	_, err = MHAScale(0.5)
	assert.ErrorIs(t, err, ErrNotImplemented, "the translation refuses MIOpen's MHA calls too")
}

func TestNVIDIAFreesWhatItCreates(t *testing.T) {
	e := useFake(t, hip.PlatformNVIDIA)
	e.lines()
	conv, x, w, y := convFixture(e, DataTypeHalf)
	require.NoError(t, e.h.ConvolutionForward(conv, x, w, y))
	h, err := NewHandle(e.stream)
	require.NoError(t, err)
	p, err := NewPoolingDescriptor(PoolingParams{Window: []int{2, 2}})
	require.NoError(t, err)
	a, err := NewActivationDescriptor(ActivationReLU, 0, 0, 0)
	require.NoError(t, err)
	l, err := NewLRNDescriptor(LRNParams{Mode: LRNModeCrossChannel, N: 3, Alpha: 1, Beta: 1, K: 1})
	require.NoError(t, err)
	for _, c := range []interface{ Close() error }{h, p, a, l, conv, x.Desc, w.Desc, y.Desc} {
		require.NoError(t, c.Close())
	}
	created, destroyed := map[string]int{}, map[string]int{}
	for _, line := range e.lines() {
		if kind, ok := strings.CutPrefix(line, "create "); ok {
			created[kind]++
		}
		if kind, ok := strings.CutPrefix(line, "destroy "); ok {
			destroyed[kind]++
		}
	}
	assert.Equal(t, map[string]int{"1": 1, "2": 3, "3": 2, "4": 1, "5": 1, "6": 1, "7": 1, "8": 1}, created,
		"kinds 1-8 of the fake: a handle with its scratch convolution, 2 filter and op-tensor descriptors; 3 tensors; activation, pooling, LRN")
	assert.Equal(t, created, destroyed)
}
