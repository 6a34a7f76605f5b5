package miopen

import (
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/hip"
)

// Tier 0: package miopen's Go side against the fake MIOpen.

func TestFakeLoadAndVersion(t *testing.T) {
	e := useFake(t, hip.PlatformAMD)
	assert.Equal(t, hip.PlatformAMD, LoadedPlatform())
	assert.Contains(t, LibraryPaths()[0], "libMIOpen.so.1")
	v, err := Version()
	require.NoError(t, err)
	assert.Equal(t, hip.Version{Major: 3, Minor: 4}, v)
	s, err := StatusString(StatusBadParm)
	require.NoError(t, err)
	assert.Equal(t, "miopenStatusBadParm", s)
	assert.Same(t, e.stream, e.h.Stream())
	assert.Equal(t, 0, e.h.Device().Ordinal())
	assert.Contains(t, e.h.String(), "amd platform, device 0")
	assert.Equal(t, []string{"miopenCreateWithStream"}, e.lines())
	assert.Error(t, Load(WithPlatform(hip.PlatformNVIDIA)), "another platform than the loaded one")
}

func TestFakeDescriptorsRoundTrip(t *testing.T) {
	useFake(t, hip.PlatformAMD)
	for _, c := range []struct {
		dt      DataType
		layout  Layout
		dims    []int
		strides []int
	}{
		{DataTypeHalf, LayoutNHWC, []int{2, 3, 5, 7}, []int{105, 1, 21, 3}},
		{DataTypeFloat, LayoutNHWC, []int{2, 3, 4, 5, 6}, []int{360, 1, 90, 18, 3}},
		{DataTypeBFloat16, LayoutNCHW, []int{2, 3, 5, 7}, []int{105, 35, 7, 1}},
	} {
		d, err := NewTensorLayout(c.dt, c.layout, c.dims)
		require.NoError(t, err)
		assert.Equal(t, c.strides, d.Strides())
		dt, dims, strides, err := d.Query()
		require.NoError(t, err)
		assert.Equal(t, []any{c.dt, c.dims, c.strides}, []any{dt, dims, strides})
		n, err := d.NumBytes()
		require.NoError(t, err)
		assert.Equal(t, d.Bytes(), n)
		assert.Equal(t, c.layout == LayoutNHWC, d.IsChannelsLast())
		require.NoError(t, d.Close())
	}
	d, err := NewTensorDescriptor(DataTypeDouble, []int{3, 4}, []int{10, 2})
	require.NoError(t, err)
	assert.Equal(t, (2*10+3*2+1)*8, d.Bytes(), "the span of a strided tensor")
	assert.Equal(t, "miopen.TensorDescriptor(miopenDouble 3x4 strides 10,2)", d.String())
	require.NoError(t, d.Close())

	conv, err := NewConvolutionDescriptor(ConvolutionParams{Pad: []int{1, 2}, Stride: []int{2, 1}, Dilation: []int{1, 3}, Groups: 4})
	require.NoError(t, err)
	q, err := conv.Query()
	require.NoError(t, err)
	assert.Equal(t, conv.Params(), q)
	assert.Equal(t, []int{0, 0}, q.OutputPad)
	require.NoError(t, conv.Close())

	pool, err := NewPoolingDescriptor(PoolingParams{Mode: PoolingModeAverage, Window: []int{3, 2}})
	require.NoError(t, err)
	pq, err := pool.Query()
	require.NoError(t, err)
	assert.Equal(t, PoolingParams{Mode: PoolingModeAverage, Window: []int{3, 2}, Pad: []int{0, 0}, Stride: []int{3, 2}}, pq, "the stride defaults to the window")
	require.NoError(t, pool.Close())

	a, err := NewActivationDescriptor(ActivationLeakyReLU, 0.1, 2, 3)
	require.NoError(t, err)
	m, al, be, ga, err := a.Query()
	require.NoError(t, err)
	assert.Equal(t, []any{ActivationLeakyReLU, 0.1, 2.0, 3.0}, []any{m, al, be, ga})
	require.NoError(t, a.Close())

	l, err := NewLRNDescriptor(LRNParams{Mode: LRNModeWithinChannel, N: 3, Alpha: 1e-4, Beta: 0.75, K: 2})
	require.NoError(t, err)
	lq, err := l.Query()
	require.NoError(t, err)
	assert.Equal(t, l.Params(), lq)
	require.NoError(t, l.Close())

	x, err := NewTensor4D(DataTypeHalf, 2, 4, 5, 6)
	require.NoError(t, err)
	defer x.Close()
	for mode, want := range map[BatchNormMode][]int{BatchNormModeSpatial: {1, 4, 1, 1}, BatchNormModePerActivation: {1, 4, 5, 6}} {
		bn, err := DeriveBatchNormDescriptor(x, mode)
		require.NoError(t, err)
		assert.Equal(t, want, bn.Dims())
		assert.Equal(t, DataTypeFloat, bn.DataType(), "half data has float statistics")
		_, dims, _, err := bn.Query()
		require.NoError(t, err)
		assert.Equal(t, want, dims)
		require.NoError(t, bn.Close())
	}
}

func TestFakeLifetime(t *testing.T) {
	e := useFake(t, hip.PlatformAMD)
	x := e.tensor(DataTypeFloat, 2, 3, 4, 4)
	y := e.tensor(DataTypeFloat, 2, 3, 4, 4)
	a, err := NewActivationDescriptor(ActivationReLU, 0, 0, 0)
	require.NoError(t, err)
	require.NoError(t, e.h.ActivationForward(a, x, y))
	require.NoError(t, a.Close())
	require.NoError(t, a.Close(), "closing twice does nothing")
	assert.ErrorIs(t, e.h.ActivationForward(a, x, y), ErrClosed)
	_, _, _, _, err = a.Query()
	assert.ErrorIs(t, err, ErrClosed)

	a, err = NewActivationDescriptor(ActivationReLU, 0, 0, 0)
	require.NoError(t, err)
	defer a.Close()
	d := e.desc(DataTypeFloat, 2, 3, 4, 4)
	require.NoError(t, d.Close())
	assert.ErrorIs(t, e.h.ActivationForward(a, Tensor{Desc: d, Data: x.Data}, y), ErrClosed, "a closed descriptor")
	_, _, _, err = d.Query()
	assert.ErrorIs(t, err, ErrClosed)

	b, err := e.dev.Malloc(x.Desc.Bytes())
	require.NoError(t, err)
	require.NoError(t, b.Close())
	assert.ErrorIs(t, e.h.ActivationForward(a, Tensor{Desc: x.Desc, Data: b}, y), hip.ErrClosed, "a closed buffer")
	assert.ErrorIs(t, e.h.ActivationForward(a, Tensor{Desc: x.Desc}, y), ErrBadParm, "no buffer")
	small, err := e.dev.Malloc(x.Desc.Bytes() - 1)
	require.NoError(t, err)
	defer small.Close()
	err = e.h.ActivationForward(a, Tensor{Desc: x.Desc, Data: small}, y)
	assert.ErrorIs(t, err, ErrBadParm)
	assert.ErrorContains(t, err, "needs 384 bytes, the buffer has 383")
	dev1, err := hip.GetDevice(1)
	require.NoError(t, err)
	other, err := dev1.Malloc(x.Desc.Bytes())
	require.NoError(t, err)
	defer other.Close()
	assert.ErrorContains(t, e.h.ActivationForward(a, Tensor{Desc: x.Desc, Data: other}, y), "on device 1, the handle's device is 0")

	h2, err := NewHandle(e.stream)
	require.NoError(t, err)
	require.NoError(t, h2.Close())
	require.NoError(t, h2.Close())
	assert.ErrorIs(t, h2.ActivationForward(a, x, y), ErrClosed)
	_, err = h2.FindConvolutionForward(e.conv(ConvolutionParams{}), x, x, x)
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, h2.Raw(func(unsafe.Pointer, int) error { return nil }), ErrClosed)
}

// convFixture is a 3x3 convolution of 2 x 4 x 8 x 8 by 8 x 4 x 3 x 3.
func convFixture(e *fakeEnv, dt DataType) (conv *ConvolutionDescriptor, x, w, y Tensor) {
	conv = e.conv(ConvolutionParams{Pad: []int{1, 1}})
	return conv, e.tensor(dt, 2, 4, 8, 8), e.tensor(dt, 8, 4, 3, 3), e.tensor(dt, 2, 8, 8, 8)
}

func TestFakeFindAndItsCache(t *testing.T) {
	e := useFake(t, hip.PlatformAMD)
	conv, x, w, y := convFixture(e, DataTypeFloat)
	e.lines()

	n, err := e.h.ConvolutionForwardWorkspace(conv, x, w, y)
	require.NoError(t, err)
	assert.Equal(t, 4096, n)
	perfs, err := e.h.FindConvolutionForward(conv, x, w, y)
	require.NoError(t, err)
	require.Len(t, perfs, 2)
	assert.Equal(t, ConvAlgoImplicitGEMM, perfs[0].Algorithm)
	assert.Equal(t, 250*time.Microsecond, perfs[0].Time)
	assert.Equal(t, 1024, perfs[0].Workspace)
	assert.Equal(t, "miopenConvolutionFwdAlgoImplicitGEMM", perfs[0].Engine)
	assert.Equal(t, ConvForward, perfs[0].Direction)
	assert.Equal(t, ConvAlgoGEMM, perfs[1].Algorithm)
	assert.Equal(t, []string{"miopenFindConvolutionForwardAlgorithm a=2,4 b=8,4 out=2,8 ws=4096 exhaustive=0"}, e.grep("miopenFind"))

	// The same problem again: from the cache, as is the convolution's.
	again, err := e.h.FindConvolutionForward(conv, x, w, y)
	require.NoError(t, err)
	assert.Equal(t, perfs, again)
	require.NoError(t, e.h.ConvolutionForward(conv, x, w, y))
	assert.Equal(t, []string{"miopenConvolutionForward algo=5 alpha=1 beta=0 ws=1024"}, e.lines(), "no second Find; the fastest algorithm with the handle's workspace")
	assert.Equal(t, CacheStats{Entries: 1, Hits: 2, Misses: 1}, e.h.FindCacheStats())
	assert.Equal(t, 1024, e.h.WorkspaceSize())

	// What defines the problem: options, shapes, strides, the convolution.
	_, err = e.h.FindConvolutionForward(conv, x, w, y, Exhaustive())
	require.NoError(t, err)
	assert.Len(t, e.grep("miopenFindConvolutionForwardAlgorithm a=2,4 b=8,4 out=2,8 ws=4096 exhaustive=1"), 1)
	xs := e.tensorOf(mustTensor(t, DataTypeFloat, []int{2, 4, 8, 8}, []int{512, 64, 8, 1}))
	_, err = e.h.FindConvolutionForward(conv, xs, w, y)
	require.NoError(t, err)
	assert.Len(t, e.grep("miopenFind"), 1, "other strides are another problem")
	dil := e.conv(ConvolutionParams{Pad: []int{2, 2}, Dilation: []int{2, 2}})
	_, err = e.h.FindConvolutionForward(dil, x, w, y)
	require.NoError(t, err)
	assert.Len(t, e.grep("miopenFind"), 1, "another convolution is another problem")
	_, err = e.h.FindConvolutionForward(conv, x, w, y, NoCache())
	require.NoError(t, err)
	assert.Len(t, e.grep("miopenFind"), 1, "NoCache runs the Find")
	_, err = e.h.FindConvolutionForward(conv, x, w, y, WorkspaceLimit(100))
	require.NoError(t, err)
	assert.Equal(t, []string{"miopenFindConvolutionForwardAlgorithm a=2,4 b=8,4 out=2,8 ws=100 exhaustive=0"}, e.grep("miopenFind"))

	// Concurrent Finds of a new problem run once.
	e.h.ClearFindCache()
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := e.h.FindConvolutionForward(conv, x, w, y)
			assert.NoError(t, err)
			assert.Len(t, p, 2)
		}()
	}
	wg.Wait()
	assert.Len(t, e.grep("miopenFind"), 1)

	// Explicit algorithms and workspaces.
	require.NoError(t, e.h.ConvolutionForward(conv, x, w, y, WithAlgorithm(perfs[1])))
	assert.Equal(t, []string{"miopenConvolutionForward algo=0 alpha=1 beta=0 ws=0"}, e.lines(), "an algorithm that needs no workspace gets none")
	ws, err := e.dev.Malloc(512)
	require.NoError(t, err)
	defer ws.Close()
	assert.ErrorIs(t, e.h.ConvolutionForward(conv, x, w, y, WithWorkspace(ws)), ErrBadParm, "smaller than the algorithm's")
	require.NoError(t, e.h.ConvolutionForward(conv, x, w, y, WithWorkspace(ws), WithAlgorithm(perfs[1])))
	assert.Equal(t, []string{"miopenConvolutionForward algo=0 alpha=1 beta=0 ws=512"}, e.lines())
	assert.ErrorIs(t, e.h.ConvolutionBackwardData(conv, y, w, x, WithAlgorithm(perfs[0])), ErrBadParm, "a forward algorithm for backward data")
	assert.ErrorIs(t, e.h.ConvolutionForward(conv, x, w, y, WithAlgorithm(ConvAlgoPerf{Direction: ConvForward})), ErrBadParm, "not from a Find")

	// The backward passes, in the library's argument order.
	_, err = e.h.FindConvolutionBackwardData(conv, y, w, x)
	require.NoError(t, err)
	assert.Len(t, e.grep("miopenFindConvolutionBackwardDataAlgorithm a=2,8 b=8,4 out=2,4"), 1)
	require.NoError(t, e.h.ConvolutionBackwardData(conv, y, w, x))
	assert.Equal(t, []string{"miopenConvolutionBackwardData algo=5 alpha=1 beta=0 ws=1024"}, e.lines())
	bw, err := e.h.FindConvolutionBackwardWeights(conv, y, x, w)
	require.NoError(t, err)
	assert.Equal(t, "miopenConvolutionBwdWeightsAlgoImplicitGEMM", bw[0].Engine)
	assert.Len(t, e.grep("miopenFindConvolutionBackwardWeightsAlgorithm a=2,8 b=2,4 out=8,4"), 1)
	require.NoError(t, e.h.ConvolutionBackwardWeights(conv, y, x, w))
	assert.Equal(t, []string{"miopenConvolutionBackwardWeights algo=5 alpha=1 beta=0 ws=1024"}, e.lines())
}

func mustTensor(t *testing.T, dt DataType, dims, strides []int) *TensorDescriptor {
	d, err := NewTensorDescriptor(dt, dims, strides)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func TestFakeConvolutionShapesAndErrors(t *testing.T) {
	e := useFake(t, hip.PlatformAMD)
	conv, x, w, y := convFixture(e, DataTypeFloat)
	out, err := conv.OutputShape(x.Desc, w.Desc)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 8, 8, 8}, out)

	wrong := e.tensor(DataTypeFloat, 2, 8, 7, 8)
	err = e.h.ConvolutionForward(conv, x, w, wrong)
	assert.ErrorIs(t, err, ErrBadParm)
	assert.ErrorContains(t, err, "y is [2 8 7 8]; the convolution of x [2 4 8 8] by w [8 4 3 3] gives [2 8 8 8]")
	assert.ErrorIs(t, e.h.ConvolutionForward(conv, x, e.tensor(DataTypeHalf, 8, 4, 3, 3), y), ErrBadParm, "mixed types")
	_, err = conv.OutputShape(x.Desc, e.desc(DataTypeFloat, 8, 3, 3, 3))
	assert.ErrorIs(t, err, ErrBadParm, "channels do not match")

	// Library errors: a status per sentinel, and not cached.
	g7 := e.conv(ConvolutionParams{Groups: 7, Pad: []int{1, 1}})
	x7, w7, y7 := e.tensor(DataTypeFloat, 1, 7, 4, 4), e.tensor(DataTypeFloat, 7, 1, 3, 3), e.tensor(DataTypeFloat, 1, 7, 4, 4)
	for range 2 {
		_, err = e.h.FindConvolutionForward(g7, x7, w7, y7)
		assert.ErrorIs(t, err, ErrNotImplemented)
		assert.ErrorContains(t, err, "miopen: miopenFindConvolutionForwardAlgorithm: miopenStatusNotImplemented")
	}
	assert.Equal(t, 0, e.h.FindCacheStats().Entries, "failed Finds are not remembered")
	x13, y13 := e.tensor(DataTypeFloat, 13, 4, 8, 8), e.tensor(DataTypeFloat, 13, 8, 8, 8)
	err = e.h.ConvolutionForward(conv, x13, w, y13)
	assert.ErrorIs(t, err, ErrAllocFailed)
	assert.ErrorIs(t, err, errs.ErrOutOfMemory)

	// A function the library lacks.
	b := e.tensor(DataTypeFloat, 1, 8, 1, 1)
	e.lines()
	err = e.h.ConvolutionBackwardBias(y, b)
	assert.ErrorIs(t, err, ErrSymbolNotFound)
	assert.ErrorContains(t, err, "does not export it")
	require.NoError(t, e.h.ConvolutionForwardBias(b, y))
	assert.Equal(t, []string{"miopenConvolutionForwardBias alpha=1 beta=0"}, e.lines())
	assert.ErrorIs(t, e.h.ConvolutionForwardBias(e.tensor(DataTypeFloat, 1, 8, 2, 1), y), ErrBadParm, "not a per-channel bias")
}

func TestFakePrimitives(t *testing.T) {
	e := useFake(t, hip.PlatformAMD)
	x, y := e.tensor(DataTypeFloat, 2, 3, 6, 6), e.tensor(DataTypeFloat, 2, 3, 6, 6)
	dx, dy := e.tensor(DataTypeFloat, 2, 3, 6, 6), e.tensor(DataTypeFloat, 2, 3, 6, 6)
	e.lines()

	a, err := NewActivationDescriptor(ActivationELU, 0.5, 0, 0)
	require.NoError(t, err)
	defer a.Close()
	require.NoError(t, e.h.ActivationForward(a, x, y))
	require.NoError(t, e.h.ActivationBackward(a, y, dy, x, dx))
	assert.Equal(t, []string{"miopenActivationForward mode=9 alpha=1 beta=0", "miopenActivationBackward mode=9"}, e.lines())
	assert.ErrorIs(t, e.h.ActivationForward(a, x, e.tensor(DataTypeFloat, 2, 3, 6, 5)), ErrBadParm)
	// MIOpen's power gradient leaves dy out: rocm-go's kernel computes it,
	// which needs hipRTC (absent here) and a real device.
	pow, err := NewActivationDescriptor(ActivationPower, 1, 2, 3)
	require.NoError(t, err)
	defer pow.Close()
	require.NoError(t, e.h.ActivationForward(pow, x, y))
	err = e.h.ActivationBackward(pow, y, dy, x, dx)
	assert.ErrorContains(t, err, "rocm-go's kernels")
	assert.Equal(t, []string{"miopenActivationForward mode=6 alpha=1 beta=0"}, e.lines())

	require.NoError(t, e.h.SoftmaxForward(SoftmaxAlgorithmLog, SoftmaxModeChannel, x, y))
	assert.Equal(t, []string{"miopenSoftmaxForward_V2 algo=2 mode=1"}, e.lines())
	assert.ErrorIs(t, e.h.SoftmaxForward(SoftmaxAlgorithm(3), SoftmaxModeChannel, x, y), ErrBadParm)

	pool, err := NewPoolingDescriptor(PoolingParams{Mode: PoolingModeMax, Window: []int{2, 2}})
	require.NoError(t, err)
	defer pool.Close()
	py, pdy := e.tensor(DataTypeFloat, 2, 3, 3, 3), e.tensor(DataTypeFloat, 2, 3, 3, 3)
	n, err := pool.WorkspaceSize(py.Desc)
	require.NoError(t, err)
	ws, err := e.dev.Malloc(n)
	require.NoError(t, err)
	defer ws.Close()
	require.NoError(t, e.h.PoolingForward(pool, x, py, nil))
	require.NoError(t, e.h.PoolingForward(pool, x, py, ws))
	assert.ErrorIs(t, e.h.PoolingBackward(pool, py, pdy, x, dx, nil), ErrBadParm, "max pooling needs the forward pass's workspace")
	require.NoError(t, e.h.PoolingBackward(pool, py, pdy, x, dx, ws))
	assert.Equal(t, []string{"miopenSetPoolingWorkSpaceIndexMode index=0 mode=0", "miopenPoolingForward do_backward=0 ws=0",
		"miopenPoolingForward do_backward=1 ws=64", "miopenPoolingBackward ws=1"}, e.lines(), "2-D max pooling keeps 8-bit indices in its window")
	assert.ErrorIs(t, e.h.PoolingForward(pool, x, x, nil), ErrBadParm, "output of the wrong shape")
	pool3, err := NewPoolingDescriptor(PoolingParams{Mode: PoolingModeMax, Window: []int{2, 2, 2}})
	require.NoError(t, err)
	defer pool3.Close()
	assert.Equal(t, []string{"miopenSetPoolingWorkSpaceIndexMode index=2 mode=1"}, e.lines(), "3-D max pooling keeps 32-bit image indices")

	l, err := NewLRNDescriptor(LRNParams{Mode: LRNModeCrossChannel, N: 3, Alpha: 1, Beta: 0.75, K: 1})
	require.NoError(t, err)
	defer l.Close()
	assert.ErrorIs(t, e.h.LRNBackward(l, y, dy, x, dx, nil), ErrBadParm, "the workspace of the forward pass is needed")
	assert.ErrorIs(t, e.h.LRNForward(l, x, y, ws), ErrBadParm, "a workspace smaller than needed")

	bnDesc, err := DeriveBatchNormDescriptor(x.Desc, BatchNormModeSpatial)
	require.NoError(t, err)
	defer bnDesc.Close()
	stat := func() *hip.Buffer { return e.tensorOf(bnDesc).Data }
	p := BatchNormParams{Mode: BatchNormModeSpatial, Desc: bnDesc, Scale: stat(), Bias: stat(), Epsilon: 1e-5}
	require.NoError(t, e.h.BatchNormForwardInference(p, x, y, stat(), stat()))
	assert.Equal(t, []string{"miopenBatchNormalizationForwardInference mode=1 eps=1e-05"}, e.lines())
	assert.ErrorIs(t, e.h.BatchNormForwardInference(p, x, y, nil, stat()), ErrBadParm)
	p.Epsilon = 0
	assert.ErrorIs(t, e.h.BatchNormForwardInference(p, x, y, stat(), stat()), ErrBadParm)
	perAct := p
	perAct.Mode, perAct.Epsilon = BatchNormModePerActivation, 1e-5
	assert.ErrorContains(t, e.h.BatchNormForwardInference(perAct, x, y, stat(), stat()), "DeriveBatchNormDescriptor", "the descriptor of another mode")

	b := e.tensor(DataTypeFloat, 1, 3, 1, 6)
	require.NoError(t, e.h.OpTensor(TensorOpMax, 2, x, 0.5, b, 1, y))
	assert.Equal(t, []string{"miopenOpTensor op=3 alpha1=2 alpha2=0.5 beta=1"}, e.lines())
	err = e.h.OpTensor(TensorOpAdd, 1, x, 1, e.tensor(DataTypeFloat, 1, 3, 2, 6), 0, y)
	assert.ErrorIs(t, err, ErrBadParm)
	assert.ErrorContains(t, err, "each dimension of b is c's or 1")
}

func TestFakeMHA(t *testing.T) {
	e := useFake(t, hip.PlatformAMD)
	q, k := e.desc(DataTypeHalf, 2, 4, 64, 32), e.desc(DataTypeHalf, 2, 4, 80, 32)
	m, err := NewMHAForward(q, k, k, q, MHAParams{Scale: 0.125, Causal: true})
	require.NoError(t, err)
	s, err := MHAScale(0.125)
	require.NoError(t, err)
	assert.Equal(t, float32(0.125), s)
	_, err = m.Find(e.h)
	assert.ErrorIs(t, err, ErrNotImplemented, "no solution without a CDNA GPU")
	assert.ErrorContains(t, err, "CDNA")
	assert.Equal(t, []string{"miopenFindSolutions tensors=17"}, e.grep("miopenFindSolutions"), "every tensor of the forward problem is described")
	_, _, err = m.Stats()
	assert.ErrorIs(t, err, ErrBadParm)
	require.NoError(t, m.Close())
	require.NoError(t, m.Close())
	_, err = m.Find(e.h)
	assert.ErrorIs(t, err, ErrClosed)

	_, err = NewMHAForward(q, k, q, q, MHAParams{Scale: 1})
	assert.ErrorIs(t, err, ErrBadParm, "V must match K")
	_, err = NewMHAForward(q, k, k, q, MHAParams{})
	assert.ErrorIs(t, err, ErrBadParm, "a zero scale")
	assert.True(t, strings.Contains(q.String(), "2x4x64x32"))
}
