package candle

// Pool2dParams are a 2-D pooling's parameters, as PyTorch's max_pool2d and
// avg_pool2d take them; pairs are (height, width). The output is
// (H + 2·Padding - Kernel)/Stride + 1, rounded down (PyTorch's
// ceil_mode=False), in each spatial dim.
type Pool2dParams struct {
	Kernel  [2]int // the window, at least 1
	Stride  [2]int // 0 means the window's size, PyTorch's default
	Padding [2]int // on both sides, at most half the window
	// ExcludePadding makes AvgPool2d divide each window's sum by the
	// number of its elements inside the input (PyTorch's
	// count_include_pad=False). By default the padding counts, as zeros,
	// and every sum is divided by the window's size (PyTorch's default).
	ExcludePadding bool
	Format         Format // NCHW: x (N, C, H, W); NHWC: x (N, H, W, C); the output in the same format
}

// poolSpec is a pooling as the backends see it: dims in N, C, H, W order,
// parameters resolved. It is comparable, for the HIP device's plans.
type poolSpec struct {
	format     Format
	max        bool // else average
	excludePad bool
	n, c, h, w int
	oh, ow     int
	kernel     [2]int
	stride     [2]int
	pad        [2]int
}

// MaxPool2d is the largest element of each window. On a HIP device it is
// MIOpen's (cuDNN's) max pooling on the device's stream; padding never
// wins (it is -∞, as in PyTorch). F32, F16, BF16, and F64 where the
// library has it (cuDNN; else ErrDType); a strided x is copied to a
// contiguous tensor first.
func (t *Tensor) MaxPool2d(p Pool2dParams) (*Tensor, error) {
	return t.pool("Tensor.MaxPool2d", p, true)
}

// AvgPool2d is the mean of each window: its sum divided by the window's
// size (the padding counts, as zeros) or, with ExcludePadding, by its
// elements inside the input. On a HIP device it is MIOpen's (cuDNN's)
// average pooling; dtypes and strided inputs as MaxPool2d.
func (t *Tensor) AvgPool2d(p Pool2dParams) (*Tensor, error) {
	return t.pool("Tensor.AvgPool2d", p, false)
}

func (t *Tensor) pool(op string, p Pool2dParams, isMax bool) (*Tensor, error) {
	if err := imageOperand(op, t, p.Format, false, "x"); err != nil {
		return nil, err
	}
	s := poolSpec{format: p.Format, max: isMax, excludePad: p.ExcludePadding, kernel: p.Kernel, pad: p.Padding}
	s.n, s.c, s.h, s.w = imageDims(t.layout.Shape, p.Format, false)
	in := [2]int{s.h, s.w}
	var out [2]int
	for i := range 2 {
		s.stride[i] = p.Stride[i]
		if s.stride[i] == 0 {
			s.stride[i] = s.kernel[i]
		}
		if s.kernel[i] < 1 || s.stride[i] < 1 || s.pad[i] < 0 {
			return nil, pkg.Errorf(op, ErrArgument, "kernel %v, stride %v, padding %v: the window and the stride are at least 1, the padding at least 0", p.Kernel, p.Stride, p.Padding)
		}
		if 2*s.pad[i] > s.kernel[i] {
			return nil, pkg.Errorf(op, ErrArgument, "padding %v for a kernel of %v: the padding is at most half the window (as in PyTorch)", p.Padding, p.Kernel)
		}
		if in[i]+2*s.pad[i] < s.kernel[i] {
			return nil, pkg.Errorf(op, ErrShape, "x %v in %s: the window %v is larger than the padded input (%d) in dim %d; the output would be empty",
				t.layout.Shape, p.Format, p.Kernel, in[i]+2*s.pad[i], i)
		}
		out[i] = (in[i]+2*s.pad[i]-s.kernel[i])/s.stride[i] + 1
	}
	s.oh, s.ow = out[0], out[1]
	return t.imageOp(op, imageShape(s.n, s.c, s.oh, s.ow, s.format, false), nil, nil, func(b backend, x, _ view, dst *Storage) error {
		return b.pooling(x, dst, &s)
	})
}

// imageOp allocates an image op's output (in the scope of the first
// scoped of t, w and bias) and runs it on contiguous views of t and of w
// (a convolution's weights; nil for the other ops): only a strided
// operand is copied.
func (t *Tensor) imageOp(op string, shape Shape, w, bias *Tensor, run func(b backend, x, w view, dst *Storage) error) (*Tensor, error) {
	out, err := newOutput(op, t.st.dev, t.DType(), shape, t, w, bias)
	if err != nil || out.Elems() == 0 {
		return out, err
	}
	var views [2]view
	for i, in := range [2]*Tensor{t, w} {
		switch {
		case in == nil:
		case in.layout.IsContiguous():
			views[i] = in.v()
		default:
			c, err := in.Copy()
			if err != nil {
				out.Close()
				return nil, pkg.Wrap(op, err)
			}
			defer c.Close()
			views[i] = c.v()
		}
	}
	if err := run(t.st.dev.backend(), views[0], views[1], out.st); err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return out, nil
}

// upsampleSpec is an upsampling as the backends see it.
type upsampleSpec struct {
	format                 Format
	bilinear, alignCorners bool
	n, c, h, w             int
	oh, ow                 int
}

// UpsampleNearest2d resizes images to outH × outW by nearest neighbour,
// as PyTorch's interpolate(size=(outH, outW), mode="nearest"): output row
// y reads input row min(⌊y·(H/outH)⌋, H-1), the product and the scale in
// float32 (so that the rows chosen are PyTorch's), and columns likewise.
// x is (N, C, H, W) in NCHW or (N, H, W, C) in NHWC; f32, f16, bf16 or
// f64. On a HIP device it is one kernel; a strided x is copied first.
func (t *Tensor) UpsampleNearest2d(outH, outW int, f Format) (*Tensor, error) {
	return t.upsample("Tensor.UpsampleNearest2d", outH, outW, false, false, f)
}

// UpsampleBilinear2d resizes images to outH × outW by bilinear
// interpolation, as PyTorch's interpolate(size=(outH, outW),
// mode="bilinear", align_corners=alignCorners). With alignCorners the
// corner pixels of input and output align: output row y samples input row
// y·(H-1)/(outH-1); without, pixel centres do: (y + ½)·H/outH - ½, clamped
// at 0. The source coordinates are computed in float32, as PyTorch's
// kernels compute them; the interpolation in float32 on a GPU (float64 for
// f64 and on the CPU). Formats, dtypes and devices as UpsampleNearest2d.
func (t *Tensor) UpsampleBilinear2d(outH, outW int, alignCorners bool, f Format) (*Tensor, error) {
	return t.upsample("Tensor.UpsampleBilinear2d", outH, outW, true, alignCorners, f)
}

func (t *Tensor) upsample(op string, outH, outW int, bilinear, align bool, f Format) (*Tensor, error) {
	if err := imageOperand(op, t, f, false, "x"); err != nil {
		return nil, err
	}
	s := upsampleSpec{format: f, bilinear: bilinear, alignCorners: align, oh: outH, ow: outW}
	s.n, s.c, s.h, s.w = imageDims(t.layout.Shape, f, false)
	if outH < 1 || outW < 1 || outH > 1<<24 || outW > 1<<24 {
		return nil, pkg.Errorf(op, ErrArgument, "output size %d × %d: each side is 1 to 2²⁴", outH, outW)
	}
	if s.h < 1 || s.w < 1 || s.h > 1<<24 || s.w > 1<<24 {
		return nil, pkg.Errorf(op, ErrShape, "x %v in %s: the input's height and width are 1 to 2²⁴", t.layout.Shape, f)
	}
	return t.imageOp(op, imageShape(s.n, s.c, outH, outW, f, false), nil, nil, func(b backend, x, _ view, dst *Storage) error {
		return b.upsample(x, dst, &s)
	})
}

// scales are the factors from output to input coordinates, in float32 as
// PyTorch computes them: in/out, or (in-1)/(out-1) when the corners align
// (0 for an output of one pixel).
func (s *upsampleSpec) scales() (sh, sw float32) {
	scale := func(in, out int) float32 {
		if s.bilinear && s.alignCorners {
			if out > 1 {
				return float32(in-1) / float32(out-1)
			}
			return 0
		}
		return float32(in) / float32(out)
	}
	return scale(s.h, s.oh), scale(s.w, s.ow)
}

// nearestSource is the input index nearest neighbour reads for output
// index o: ⌊o·scale⌋ in float32, at most in-1.
func nearestSource(o int, scale float32, in int) int {
	return min(int(float32(float32(o)*scale)), in-1) // the conversion of a non-negative float truncates: the floor
}

// bilinearSource is the input coordinate bilinear interpolation samples
// for output index o, in float32 as PyTorch computes it: the index below
// it, the step to the next one (0 at the last), and the weight of the next.
func bilinearSource(o int, scale float32, in int, align bool) (i0, step int, frac float32) {
	var r float32
	if align {
		r = float32(scale * float32(o))
	} else {
		r = float32(float32(scale*float32(float32(o)+0.5)) - 0.5)
		r = max(r, 0)
	}
	i0 = int(r)
	if i0 < in-1 {
		step = 1
	}
	return i0, step, r - float32(i0)
}
