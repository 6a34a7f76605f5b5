package candle

import "fmt"

// Format is where an image tensor keeps its channels: the order of its
// dims, which is also their order in memory (candle's tensors are
// row-major; a format is not a stride trick).
type Format uint8

const (
	// NCHW puts the channels before the spatial dims: (N, C, H, W) in 2-D,
	// (N, C, L) in 1-D. It is PyTorch's default format, and the default
	// here.
	NCHW Format = iota
	// NHWC puts the channels last: (N, H, W, C) in 2-D, (N, L, C) in 1-D.
	// Its memory is that of a PyTorch channels_last tensor, the format the
	// tensor cores' convolutions read fastest.
	NHWC
)

func (f Format) String() string {
	switch f {
	case NCHW:
		return "NCHW"
	case NHWC:
		return "NHWC"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Conv2dParams are a 2-D convolution's parameters, as PyTorch's conv2d
// takes them; pairs are (height, width). The zero value is PyTorch's
// default: stride 1, no padding, dilation 1, one group, NCHW.
type Conv2dParams struct {
	Stride   [2]int // 0 means 1
	Padding  [2]int // zeros added on both sides
	Dilation [2]int // 0 means 1
	Groups   int    // 0 means 1; the channels are convolved in this many groups apart
	Format   Format // NCHW: x (N, C, H, W), w (K, C/Groups, R, S); NHWC: x (N, H, W, C), w (K, R, S, C/Groups)
}

// Conv1dParams are a 1-D convolution's parameters, as PyTorch's conv1d
// takes them. The zero value is PyTorch's default.
type Conv1dParams struct {
	Stride   int    // 0 means 1
	Padding  int    // zeros added on both sides
	Dilation int    // 0 means 1
	Groups   int    // 0 means 1
	Format   Format // NCHW: x (N, C, L), w (K, C/Groups, S); NHWC: x (N, L, C), w (K, S, C/Groups)
}

// ConvTranspose2dParams are a 2-D transposed convolution's parameters, as
// PyTorch's conv_transpose2d takes them; pairs are (height, width). The
// output is Stride·(in-1) - 2·Padding + Dilation·(k-1) + 1 + OutputPadding
// in each spatial dim.
type ConvTranspose2dParams struct {
	Stride        [2]int // 0 means 1
	Padding       [2]int // taken off both sides of the output
	OutputPadding [2]int // added to one side of the output; each less than its stride or its dilation
	Dilation      [2]int // 0 means 1
	Groups        int    // 0 means 1
	Format        Format // NCHW: x (N, C, H, W), w (C, K/Groups, R, S); NHWC: x (N, H, W, C), w (C, R, S, K/Groups)
}

// ConvTranspose1dParams are a 1-D transposed convolution's parameters, as
// PyTorch's conv_transpose1d takes them.
type ConvTranspose1dParams struct {
	Stride        int    // 0 means 1
	Padding       int    // taken off both sides of the output
	OutputPadding int    // added to one side of the output; less than the stride or the dilation
	Dilation      int    // 0 means 1
	Groups        int    // 0 means 1
	Format        Format // NCHW: x (N, C, L), w (C, K/Groups, S); NHWC: x (N, L, C), w (C, S, K/Groups)
}

// convSpec is a convolution as the backends see it: 2-D (a 1-D one has
// height 1), dims in N, C, H, W order whatever the format, parameters
// resolved. It is comparable: the HIP device keys its plans by it.
type convSpec struct {
	format     Format
	transposed bool
	n, cin     int // batch, input channels
	h, w       int // input height and width
	cout       int // output channels
	kh, kw     int // kernel height and width
	oh, ow     int // output height and width
	groups     int
	pad        [2]int
	stride     [2]int
	dil        [2]int
	outPad     [2]int
}

// Conv2d is the 2-D convolution (a cross-correlation, as in PyTorch) of x
// by the weights w, plus bias (K) when it is not nil: in NCHW, x is
// (N, C, H, W), w is (K, C/Groups, R, S) and the result (N, K, P, Q), with
// P = (H + 2·Padding - Dilation·(R-1) - 1)/Stride + 1 (rounded down), and Q
// likewise; in NHWC, x is (N, H, W, C), w (K, R, S, C/Groups) and the
// result (N, P, Q, K). F32, F16 and BF16 accumulate in F32 on a GPU; F64
// runs where the library has it (cuDNN; not MIOpen), else ErrDType. The CPU
// computes in float64.
//
// On a HIP device it is one MIOpen (cuDNN) convolution on the device's
// stream: the first call of a problem (dtype, shapes, parameters) runs
// the library's Find, later calls the fastest algorithm it found, with a
// workspace from the device's memory pool. The bias is added in place
// afterwards, one broadcast add. Inputs that are not contiguous are copied
// to contiguous tensors first.
func (t *Tensor) Conv2d(w, bias *Tensor, p Conv2dParams) (*Tensor, error) {
	s := convSpec{format: p.Format, groups: p.Groups, pad: p.Padding, stride: p.Stride, dil: p.Dilation}
	return t.conv("Tensor.Conv2d", w, bias, &s, false)
}

// Conv1d is the 1-D convolution of x by w, plus bias (K) when it is not
// nil: in NCHW, x is (N, C, L), w (K, C/Groups, S) and the result
// (N, K, Lout); in NHWC, x is (N, L, C), w (K, S, C/Groups) and the result
// (N, Lout, K). It runs as Conv2d of height 1.
func (t *Tensor) Conv1d(w, bias *Tensor, p Conv1dParams) (*Tensor, error) {
	s := convSpec{format: p.Format, groups: p.Groups, pad: [2]int{0, p.Padding}, stride: [2]int{1, p.Stride}, dil: [2]int{1, p.Dilation}}
	return t.conv("Tensor.Conv1d", w, bias, &s, true)
}

// ConvTranspose2d is the 2-D transposed convolution of x by w (the
// gradient of Conv2d with respect to its input, as PyTorch's
// conv_transpose2d), plus bias (K) when it is not nil: in NCHW, x is
// (N, C, H, W), w (C, K/Groups, R, S) and the result (N, K, P, Q), with
// P = Stride·(H-1) - 2·Padding + Dilation·(R-1) + 1 + OutputPadding; in
// NHWC, x is (N, H, W, C), w (C, R, S, K/Groups) and the result
// (N, P, Q, K). Dtypes, devices and strided inputs are as for Conv2d.
func (t *Tensor) ConvTranspose2d(w, bias *Tensor, p ConvTranspose2dParams) (*Tensor, error) {
	s := convSpec{format: p.Format, transposed: true, groups: p.Groups, pad: p.Padding, stride: p.Stride, dil: p.Dilation, outPad: p.OutputPadding}
	return t.conv("Tensor.ConvTranspose2d", w, bias, &s, false)
}

// ConvTranspose1d is the 1-D transposed convolution of x by w, plus bias
// (K) when it is not nil: in NCHW, x is (N, C, L), w (C, K/Groups, S) and
// the result (N, K, Lout); in NHWC, x is (N, L, C), w (C, S, K/Groups) and
// the result (N, Lout, K). It runs as ConvTranspose2d of height 1.
func (t *Tensor) ConvTranspose1d(w, bias *Tensor, p ConvTranspose1dParams) (*Tensor, error) {
	s := convSpec{format: p.Format, transposed: true, groups: p.Groups, pad: [2]int{0, p.Padding}, stride: [2]int{1, p.Stride},
		dil: [2]int{1, p.Dilation}, outPad: [2]int{0, p.OutputPadding}}
	return t.conv("Tensor.ConvTranspose1d", w, bias, &s, true)
}

// imageDims reads an image tensor's dims in N, C, H, W order (H = 1 for a
// 1-D one) from its format.
func imageDims(s Shape, f Format, oneD bool) (n, c, h, w int) {
	if oneD {
		if f == NHWC {
			return s[0], s[2], 1, s[1]
		}
		return s[0], s[1], 1, s[2]
	}
	if f == NHWC {
		return s[0], s[3], s[1], s[2]
	}
	return s[0], s[1], s[2], s[3]
}

// imageShape is the shape of an image of dims N, C, H, W in a format.
func imageShape(n, c, h, w int, f Format, oneD bool) Shape {
	switch {
	case oneD && f == NHWC:
		return Shape{n, w, c}
	case oneD:
		return Shape{n, c, w}
	case f == NHWC:
		return Shape{n, h, w, c}
	}
	return Shape{n, c, h, w}
}

// imageOperand checks an image op's input: alive, a float dtype, rank 3
// (1-D) or 4 (2-D), a known format.
func imageOperand(op string, x *Tensor, f Format, oneD bool, what string) error {
	if err := x.alive(op); err != nil {
		return err
	}
	if f != NCHW && f != NHWC {
		return pkg.Errorf(op, ErrArgument, "%v: the format is NCHW or NHWC", f)
	}
	if !x.DType().IsFloat() {
		return pkg.Errorf(op, ErrDType, "%s is %s: the image ops take f32, f16, bf16 or f64 (convert with ToDType)", what, x.DType())
	}
	rank, names := 4, map[Format]string{NCHW: "(N, C, H, W)", NHWC: "(N, H, W, C)"}
	if oneD {
		rank, names = 3, map[Format]string{NCHW: "(N, C, L)", NHWC: "(N, L, C)"}
	}
	if x.Rank() != rank && what == "w" {
		return pkg.Errorf(op, ErrShape, "w is %v: want rank %d, as x", x.layout.Shape, rank)
	}
	if x.Rank() != rank {
		return pkg.Errorf(op, ErrShape, "%s is %v: want rank %d, %s in %s (Unsqueeze or Reshape it)", what, x.layout.Shape, rank, names[f], f)
	}
	return nil
}

// orOne resolves the "0 means 1" of strides, dilations and groups.
func orOne(v int) int {
	if v == 0 {
		return 1
	}
	return v
}

// conv checks a convolution's operands, resolves s from them and runs it.
func (t *Tensor) conv(op string, w, bias *Tensor, s *convSpec, oneD bool) (*Tensor, error) {
	if err := imageOperand(op, t, s.format, oneD, "x"); err != nil {
		return nil, err
	}
	if err := imageOperand(op, w, s.format, oneD, "w"); err != nil {
		return nil, err
	}
	if bias != nil {
		if err := bias.alive(op); err != nil {
			return nil, err
		}
	}
	if err := sameDevice(op, t.st.dev, w); err != nil {
		return nil, err
	}
	dt := t.DType()
	if w.DType() != dt {
		return nil, pkg.Errorf(op, ErrDType, "%s input and %s weights: convert one with ToDType", dt, w.DType())
	}
	if bias != nil {
		if err := sameDevice(op, t.st.dev, bias); err != nil {
			return nil, err
		}
		if bias.DType() != dt {
			return nil, pkg.Errorf(op, ErrDType, "%s input and %s bias: convert one with ToDType", dt, bias.DType())
		}
	}
	if err := s.resolve(op, t.layout.Shape, w.layout.Shape, oneD); err != nil {
		return nil, err
	}
	if bias != nil && !bias.layout.Shape.Equal(Shape{s.cout}) {
		return nil, pkg.Errorf(op, ErrShape, "the bias is %v; want [%d], one value per output channel", bias.layout.Shape, s.cout)
	}
	out, err := t.imageOp(op, imageShape(s.n, s.cout, s.oh, s.ow, s.format, oneD), w, bias, func(b backend, x, w view, dst *Storage) error {
		return b.conv(x, w, dst, s)
	})
	if err != nil || bias == nil || out.Elems() == 0 {
		return out, err
	}
	if err := addChannels(t.st.dev.backend(), out, bias, s.format); err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return out, nil
}

// addChannels adds a per-channel vector to an image in place: each
// element is read and written by the same thread, so the output may be
// the input.
func addChannels(b backend, img, v *Tensor, f Format) error {
	shape := img.layout.Shape
	l := Layout{Shape: shape, Stride: make([]int, len(shape)), Offset: v.layout.Offset}
	c := 1
	if f == NHWC {
		c = len(shape) - 1
	}
	l.Stride[c] = v.layout.Stride[0]
	return b.binary(opAdd, img.v(), view{v.st, l}, img.st)
}

// resolve checks a convolution's shapes and parameters and fills in the
// dims of s.
func (s *convSpec) resolve(op string, xs, ws Shape, oneD bool) error {
	for i := range 2 {
		s.stride[i], s.dil[i] = orOne(s.stride[i]), orOne(s.dil[i])
		if s.stride[i] < 0 || s.dil[i] < 0 || s.pad[i] < 0 || s.outPad[i] < 0 {
			return pkg.Errorf(op, ErrArgument, "stride %v, padding %v, dilation %v, output padding %v: none may be negative", s.stride, s.pad, s.dil, s.outPad)
		}
		if s.transposed && s.outPad[i] >= max(s.stride[i], s.dil[i]) {
			return pkg.Errorf(op, ErrArgument, "output padding %v: each value is less than its stride %v or its dilation %v", s.outPad, s.stride, s.dil)
		}
	}
	s.groups = orOne(s.groups)
	if s.groups < 0 {
		return pkg.Errorf(op, ErrArgument, "%d groups: want at least 1", s.groups)
	}
	// The weights in N, C, H, W order: (K, C/g, R, S), or (C, K/g, R, S)
	// when transposed.
	wa, wb, kh, kw := imageDims(ws, s.format, oneD)
	s.n, s.cin, s.h, s.w = imageDims(xs, s.format, oneD)
	s.kh, s.kw = kh, kw
	g := s.groups
	switch {
	case s.cin == 0 || kh == 0 || kw == 0:
		return pkg.Errorf(op, ErrShape, "x %v, weights %v: a convolution has at least one input channel and a kernel of at least 1", xs, ws)
	case s.transposed && wa != s.cin:
		return pkg.Errorf(op, ErrShape, "x %v has %d channels; the weights %v are for %d (a transposed convolution's weights are (C_in, C_out/groups, ...) in %s)", xs, s.cin, ws, wa, s.format)
	case s.cin%g != 0:
		return pkg.Errorf(op, ErrArgument, "%d groups do not divide the %d input channels", g, s.cin)
	case !s.transposed && wb*g != s.cin:
		return pkg.Errorf(op, ErrShape, "x %v has %d channels; the weights %v take %d per group × %d groups = %d", xs, s.cin, ws, wb, g, wb*g)
	case !s.transposed && wa%g != 0:
		return pkg.Errorf(op, ErrArgument, "%d groups do not divide the %d output channels of the weights %v", g, wa, ws)
	}
	s.cout = wa
	if s.transposed {
		s.cout = wb * g
	}
	in, k := [2]int{s.h, s.w}, [2]int{kh, kw}
	var out [2]int
	for i := range 2 {
		span := s.dil[i]*(k[i]-1) + 1
		if s.transposed {
			out[i] = s.stride[i]*(in[i]-1) - 2*s.pad[i] + span + s.outPad[i]
		} else {
			out[i] = (in[i]+2*s.pad[i]-span)/s.stride[i] + 1
			if in[i]+2*s.pad[i] < span {
				out[i] = 0
			}
		}
		if out[i] <= 0 {
			dims := [2]string{"height", "width"}
			if oneD {
				dims[1] = "length"
			}
			return pkg.Errorf(op, ErrShape, "x %v, weights %v, stride %v, padding %v, dilation %v: the output %s would be %d; it must be at least 1 (the dilated kernel spans %d, the padded input %d)",
				xs, ws, s.stride, s.pad, s.dil, dims[i], out[i], span, in[i]+2*s.pad[i])
		}
	}
	s.oh, s.ow = out[0], out[1]
	return nil
}
