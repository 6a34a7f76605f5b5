package miopen

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
	"github.com/rocm-go/rocm/internal/testenv"
)

// Tier 1: ROCm's real MIOpen 6.4, without a GPU. Descriptors and their
// shape queries need no device; miopenCreate does, and so does a hip.Stream.

func useROCm(t *testing.T) {
	t.Helper()
	library.Reset()
	err := hip.Load(hip.WithPlatform(hip.PlatformAMD))
	if err == nil {
		t.Cleanup(func() { hip.Unload() })
		t.Cleanup(library.Reset)
		err = Load()
	}
	testenv.Need(t, 1, "ROCm's MIOpen (libMIOpen)", err)
}

func TestROCmLoadsMIOpen(t *testing.T) {
	useROCm(t)
	assert.Equal(t, hip.PlatformAMD, LoadedPlatform())
	assert.Contains(t, LibraryPaths()[0], "libMIOpen.so.1")
	v, err := Version()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, v.Major, 3, "MIOpen 3.4 is ROCm 6.4's")
	t.Logf("MIOpen %s from %s", v, LibraryPaths()[0])
	for _, s := range statusValues {
		name, err := StatusString(s)
		require.NoError(t, err)
		assert.Equal(t, s.String(), name, "MIOpen names its statuses as the header does")
	}
	if _, err := hip.GetDevice(0); err == nil {
		t.Skip("tier 1: this machine has a GPU; the no-device path needs none")
	}
	_, err = NewHandle(nil)
	assert.ErrorIs(t, err, ErrBadParm)
}

func TestROCmTensorDescriptorsRoundTrip(t *testing.T) {
	useROCm(t)
	check := func(d *TensorDescriptor, err error) {
		t.Helper()
		require.NoError(t, err)
		defer d.Close()
		dt, dims, strides, err := d.Query()
		require.NoError(t, err)
		assert.Equal(t, d.DataType(), dt, "%s", d)
		assert.Equal(t, d.Dims(), dims, "%s", d)
		assert.Equal(t, d.Strides(), strides, "%s", d)
		n, err := d.NumBytes()
		require.NoError(t, err)
		assert.Equal(t, d.Bytes(), n, "%s: MIOpen counts the bytes a tensor spans as rocm-go does", d)
	}
	for _, dt := range []DataType{DataTypeHalf, DataTypeBFloat16, DataTypeFloat, DataTypeDouble, DataTypeInt8, DataTypeInt32, DataTypeInt64} {
		check(NewTensor4D(dt, 2, 3, 5, 7))
		check(NewTensorLayout(dt, LayoutNHWC, []int{2, 3, 5, 7}))
		check(NewTensorLayout(dt, LayoutNHWC, []int{2, 3, 4, 5, 6}))
		check(NewTensorLayout(dt, LayoutNCHW, []int{2, 3, 4, 5, 6}))
		check(NewTensorDescriptor(dt, []int{7}, nil))
		check(NewTensorDescriptor(dt, []int{4, 6}, []int{10, 1}))
		check(NewTensorDescriptor(dt, []int{2, 3, 4}, []int{40, 12, 2}))
		check(NewTensorDescriptor(dt, []int{2, 3, 5, 7}, []int{256, 1, 48, 6}))
		check(NewTensorDescriptor(dt, []int{1, 2, 3, 4, 5, 6}, nil))
	}
	d, err := NewTensorLayout(DataTypeHalf, LayoutNHWC, []int{2, 3, 5, 7})
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, []int{105, 1, 21, 3}, d.Strides(), "MIOpen's NHWC: lengths in N, C, H, W order, channels last in memory")
	assert.True(t, d.IsChannelsLast())
}

func TestROCmDescriptorsRoundTrip(t *testing.T) {
	useROCm(t)
	for _, p := range []ConvolutionParams{
		{},
		{Pad: []int{1, 2}, Stride: []int{2, 3}, Dilation: []int{1, 2}, Groups: 4},
		{Pad: []int{0, 1, 2}, Stride: []int{1, 2, 2}, Dilation: []int{2, 1, 1}},
		{Pad: []int{1, 1}, Stride: []int{2, 2}, Transposed: true, OutputPad: []int{1, 0}, Groups: 2},
	} {
		c, err := NewConvolutionDescriptor(p)
		require.NoError(t, err)
		q, err := c.Query()
		require.NoError(t, err)
		assert.Equal(t, c.Params(), q, "%+v", p)
		require.NoError(t, c.Close())
	}
	for _, p := range []PoolingParams{
		{Mode: PoolingModeMax, Window: []int{3, 3}, Pad: []int{1, 1}, Stride: []int{2, 2}},
		{Mode: PoolingModeAverage, Window: []int{2, 3}},
		{Mode: PoolingModeAverageInclusive, Window: []int{2, 3, 3}, Pad: []int{0, 1, 1}, Stride: []int{2, 2, 1}},
	} {
		d, err := NewPoolingDescriptor(p)
		require.NoError(t, err)
		q, err := d.Query()
		require.NoError(t, err)
		assert.Equal(t, d.Params(), q)
		require.NoError(t, d.Close())
	}
	for mode := ActivationPassThrough; mode <= ActivationELU; mode++ {
		a, err := NewActivationDescriptor(mode, 0.5, 1.5, 2)
		require.NoError(t, err)
		m, al, be, ga, err := a.Query()
		require.NoError(t, err)
		assert.Equal(t, []any{mode, 0.5, 1.5, 2.0}, []any{m, al, be, ga})
		require.NoError(t, a.Close())
	}
	for _, p := range []LRNParams{{Mode: LRNModeCrossChannel, N: 5, Alpha: 1e-4, Beta: 0.75, K: 2}, {Mode: LRNModeWithinChannel, N: 3, Alpha: 1, Beta: 0.5, K: 1}} {
		l, err := NewLRNDescriptor(p)
		require.NoError(t, err)
		q, err := l.Query()
		require.NoError(t, err)
		assert.Equal(t, p, q)
		require.NoError(t, l.Close())
	}
	for _, dt := range []DataType{DataTypeHalf, DataTypeBFloat16, DataTypeFloat} {
		for _, dims := range [][]int{{2, 4, 5, 6}, {2, 4, 3, 5, 6}} {
			x, err := NewTensorDescriptor(dt, dims, nil)
			require.NoError(t, err)
			for _, mode := range []BatchNormMode{BatchNormModeSpatial, BatchNormModePerActivation} {
				bn, err := DeriveBatchNormDescriptor(x, mode)
				require.NoError(t, err)
				gdt, gdims, _, err := bn.Query()
				require.NoError(t, err)
				assert.Equal(t, bn.DataType(), gdt, "%v %v %v", dt, dims, mode)
				assert.Equal(t, bn.Dims(), gdims, "%v %v %v", dt, dims, mode)
				require.NoError(t, bn.Close())
			}
			require.NoError(t, x.Close())
		}
	}
	s, err := MHAScale(0.125)
	require.NoError(t, err)
	assert.Equal(t, float32(0.125), s)
}

// convOut is the output size of a convolution in one spatial dimension:
// the formula every framework uses, written out here apart from the code
// under test.
func convOut(in, k, pad, stride, dil, outPad int, transposed bool) int {
	if transposed {
		return stride*(in-1) + dil*(k-1) + 1 - 2*pad + outPad
	}
	return (in+2*pad-dil*(k-1)-1)/stride + 1
}

func TestROCmConvolutionOutputDims(t *testing.T) {
	useROCm(t)
	cases := 0
	for _, in := range []int{1, 5, 8, 17, 64} {
		for _, k := range []int{1, 2, 3, 5} {
			for _, pad := range []int{0, 1, 2} {
				for _, stride := range []int{1, 2, 3} {
					for _, dil := range []int{1, 2} {
						for _, c := range []struct{ groups, cin, cout int }{{1, 3, 8}, {2, 4, 6}, {4, 4, 4}} {
							for _, transposed := range []bool{false, true} {
								outPad := 0
								if transposed && stride > 1 {
									outPad = stride - 1
								}
								want := convOut(in, k, pad, stride, dil, outPad, transposed)
								if want <= 0 || !transposed && in+2*pad-dil*(k-1)-1 < 0 {
									continue // no output
								}
								p := ConvolutionParams{Pad: []int{pad, 0}, Stride: []int{stride, 1}, Dilation: []int{dil, 1}, Groups: c.groups,
									Transposed: transposed, OutputPad: []int{outPad, 0}}
								x := []int{2, c.cin, in, 7}
								w := []int{c.cout, c.cin / c.groups, k, 3}
								wantC := c.cout
								if transposed {
									w = []int{c.cin, c.cout / c.groups, k, 3}
									wantC = c.cout / c.groups * c.groups
								}
								wantW := convOut(7, 3, 0, 1, 1, 0, transposed)
								name := fmt.Sprintf("x %v w %v %+v", x, w, p)
								goDims, err := p.OutputDims(x, w)
								require.NoError(t, err, name)
								got := convShape(t, p, x, w)
								assert.Equal(t, []int{2, wantC, want, wantW}, got, "MIOpen: %s", name)
								assert.Equal(t, got, goDims, "rocm-go's check: %s", name)
								cases++
							}
						}
					}
				}
			}
		}
	}
	// 3-D.
	p := ConvolutionParams{Pad: []int{1, 2, 0}, Stride: []int{2, 1, 3}, Dilation: []int{2, 1, 1}, Groups: 2}
	assert.Equal(t, []int{3, 6, 4, 11, 4}, convShape(t, p, []int{3, 4, 9, 10, 11}, []int{6, 2, 3, 4, 2}))
	t.Logf("%d 2-D convolution shapes agree with the formula", cases)
}

func convShape(t *testing.T, p ConvolutionParams, x, w []int) []int {
	t.Helper()
	c, err := NewConvolutionDescriptor(p)
	require.NoError(t, err)
	defer c.Close()
	xd, err := NewTensorDescriptor(DataTypeFloat, x, nil)
	require.NoError(t, err)
	defer xd.Close()
	wd, err := NewTensorDescriptor(DataTypeFloat, w, nil)
	require.NoError(t, err)
	defer wd.Close()
	out, err := c.OutputShape(xd, wd)
	require.NoError(t, err)
	return out
}

func TestROCmPoolingOutputDims(t *testing.T) {
	useROCm(t)
	cases := 0
	for _, in := range []int{2, 5, 8, 13, 32} {
		for _, win := range []int{1, 2, 3, 5} {
			for _, pad := range []int{0, 1, 2} {
				for _, stride := range []int{1, 2, 3} {
					if pad >= win || in+2*pad < win {
						continue
					}
					for _, mode := range []PoolingMode{PoolingModeMax, PoolingModeAverage, PoolingModeAverageInclusive} {
						p := PoolingParams{Mode: mode, Window: []int{win, 2}, Pad: []int{pad, 0}, Stride: []int{stride, 2}}
						x, err := NewTensor4D(DataTypeFloat, 2, 3, in, 6)
						require.NoError(t, err)
						d, err := NewPoolingDescriptor(p)
						require.NoError(t, err)
						got, err := d.OutputShape(x)
						require.NoError(t, err)
						want := []int{2, 3, (in+2*pad-win)/stride + 1, 3}
						assert.Equal(t, want, got, "x %v %+v", x.Dims(), p)
						goDims, err := p.OutputDims(x.Dims())
						require.NoError(t, err)
						assert.Equal(t, got, goDims)
						n, err := d.WorkspaceSize(x)
						require.NoError(t, err)
						if mode != PoolingModeMax {
							assert.Zero(t, n, "average pooling needs no workspace")
						}
						require.NoError(t, d.Close())
						require.NoError(t, x.Close())
						cases++
					}
				}
			}
		}
	}
	p, err := NewPoolingDescriptor(PoolingParams{Mode: PoolingModeMax, Window: []int{2, 3, 3}, Pad: []int{0, 1, 1}, Stride: []int{2, 2, 1}})
	require.NoError(t, err)
	defer p.Close()
	x, err := NewTensorDescriptor(DataTypeFloat, []int{3, 4, 9, 10, 11}, nil)
	require.NoError(t, err)
	defer x.Close()
	got, err := p.OutputShape(x)
	require.NoError(t, err)
	assert.Equal(t, []int{3, 4, 4, 5, 11}, got)
	n, err := p.WorkspaceSize(x)
	require.NoError(t, err)
	assert.Positive(t, n, "3-D max pooling keeps the maxima's positions")
	t.Logf("%d 2-D pooling shapes agree with the formula", cases)
}

func TestROCmErrorPaths(t *testing.T) {
	useROCm(t)
	// What rocm-go checks never reaches MIOpen, which would accept it.
	_, err := NewLRNDescriptor(LRNParams{Mode: LRNModeCrossChannel, N: 4, Alpha: 1, Beta: 1, K: 1})
	assert.ErrorIs(t, err, ErrBadParm, "MIOpen 6.4 takes an even window")
	_, err = NewActivationDescriptor(ActivationMode(42), 0, 0, 0)
	assert.ErrorIs(t, err, ErrBadParm, "MIOpen 6.4 takes an unknown mode")
	c, err := NewConvolutionDescriptor(ConvolutionParams{})
	require.NoError(t, err)
	defer c.Close()
	x, err := NewTensor4D(DataTypeFloat, 1, 1, 2, 2)
	require.NoError(t, err)
	defer x.Close()
	w, err := NewTensor4D(DataTypeFloat, 1, 1, 5, 5)
	require.NoError(t, err)
	defer w.Close()
	_, err = c.OutputShape(x, w)
	assert.ErrorIs(t, err, ErrBadParm, "MIOpen 6.4 answers 1x1x1x1 for a kernel larger than the input")
	require.NoError(t, x.Close())
	_, err = c.OutputShape(x, w)
	assert.ErrorIs(t, err, ErrClosed)
	// A transposed convolution of mismatched channels: MIOpen says so too.
	tc, err := NewConvolutionDescriptor(ConvolutionParams{Transposed: true})
	require.NoError(t, err)
	defer tc.Close()
	x3, err := NewTensor4D(DataTypeFloat, 1, 3, 4, 4)
	require.NoError(t, err)
	defer x3.Close()
	w4, err := NewTensor4D(DataTypeFloat, 4, 2, 3, 3)
	require.NoError(t, err)
	defer w4.Close()
	_, err = tc.OutputShape(x3, w4)
	assert.ErrorIs(t, err, ErrBadParm)
}

// The kernels for what legacy cuDNN lacks compile with the real hipRTC for
// every target the SDK supports: one source for both platforms. Each code
// object holds exactly the kernels a launch can look up.
func TestROCmKernelsCompile(t *testing.T) {
	err := hiprtc.Load(hiprtc.WithPlatform(hip.PlatformAMD))
	testenv.Need(t, 1, "ROCm's hipRTC", err)
	defer hiprtc.Unload()
	compileKernels(t, "gfx90a", "gfx942", "gfx1100", "gfx1201")
}

// compileKernels compiles the module for each of archs with the loaded
// compiler, in a fresh cache, and checks its kernels.
func compileKernels(t *testing.T, archs ...string) {
	t.Helper()
	c, err := hiprtc.NewCache(t.TempDir())
	require.NoError(t, err)
	m := newModule(c)
	for _, arch := range archs {
		code, err := m.Compile(arch)
		require.NoError(t, err, arch)
		if strings.HasPrefix(arch, "gfx") {
			assert.True(t, bytes.Contains(code.Image, []byte("amdgcn-amd-amdhsa--"+arch)))
		}
		syms, err := hiprtc.KernelSymbols(code.Image)
		require.NoError(t, err)
		assert.ElementsMatch(t, kernelNames(), syms, arch)
	}
}
