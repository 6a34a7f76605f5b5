package candle

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/miopen"
)

// The GPU's image ops: convolutions and pooling through MIOpen (cuDNN on
// NVIDIA) on the device's handle, upsampling as kernels of nn.hip.

// dnnPlans are a HIP device's MIOpen descriptors, made on a problem's
// first call and kept, so that later calls make no descriptor and run no
// Find. Descriptors are read-only once made and shared by the calls. The
// cache holds maxPlans problems of each kind; a problem past that gets
// descriptors of its own, closed after its call (nothing is evicted from
// under a running call).
type dnnPlans struct {
	mu    sync.Mutex
	convs map[convPlanKey]*convPlan
	pools map[poolPlanKey]*poolPlan
}

const maxPlans = 1024

type convPlanKey struct {
	dt DType
	s  convSpec
}

// convPlan is a convolution's descriptors and, after its first call, the
// algorithm the Find chose.
type convPlan struct {
	conv    *miopen.ConvolutionDescriptor
	x, w, y *miopen.TensorDescriptor
	algo    atomic.Pointer[miopen.ConvAlgoPerf]
}

func (p *convPlan) close() {
	p.conv.Close()
	for _, d := range []*miopen.TensorDescriptor{p.x, p.w, p.y} {
		d.Close()
	}
}

type poolPlanKey struct {
	dt DType
	s  poolSpec
}

type poolPlan struct {
	pool *miopen.PoolingDescriptor
	x, y *miopen.TensorDescriptor
}

func (p *poolPlan) close() {
	p.pool.Close()
	p.x.Close()
	p.y.Close()
}

// dnnType is a dtype's MIOpen data type.
func dnnType(dt DType) miopen.DataType {
	switch dt {
	case F16:
		return miopen.DataTypeHalf
	case BF16:
		return miopen.DataTypeBFloat16
	case F64:
		return miopen.DataTypeDouble
	}
	return miopen.DataTypeFloat
}

// dnnImage describes a contiguous image of dims n, c, h, w (N, C, H, W
// order) in a format.
func dnnImage(dt DType, f Format, n, c, h, w int) (*miopen.TensorDescriptor, error) {
	l := miopen.LayoutNCHW
	if f == NHWC {
		l = miopen.LayoutNHWC
	}
	return miopen.NewTensorLayout(dnnType(dt), l, []int{n, c, h, w})
}

// conv returns the plan of a convolution, and whether the cache keeps it
// (else the caller closes it).
func (ps *dnnPlans) conv(dt DType, s *convSpec) (*convPlan, bool, error) {
	return planFor(&ps.mu, &ps.convs, convPlanKey{dt, *s}, func() (*convPlan, error) {
		p := &convPlan{}
		var err error
		params := miopen.ConvolutionParams{Pad: s.pad[:], Stride: s.stride[:], Dilation: s.dil[:], Groups: s.groups, Transposed: s.transposed}
		wa, wb := s.cout, s.cin/s.groups
		if s.transposed {
			params.OutputPad = s.outPad[:]
			wa, wb = s.cin, s.cout/s.groups
		}
		if p.conv, err = miopen.NewConvolutionDescriptor(params); err == nil {
			if p.x, err = dnnImage(dt, s.format, s.n, s.cin, s.h, s.w); err == nil {
				if p.w, err = dnnImage(dt, s.format, wa, wb, s.kh, s.kw); err == nil {
					p.y, err = dnnImage(dt, s.format, s.n, s.cout, s.oh, s.ow)
				}
			}
		}
		return p, err
	})
}

// pool returns the plan of a pooling, as conv does.
func (ps *dnnPlans) pool(dt DType, s *poolSpec) (*poolPlan, bool, error) {
	return planFor(&ps.mu, &ps.pools, poolPlanKey{dt, *s}, func() (*poolPlan, error) {
		mode := miopen.PoolingModeMax
		switch {
		case !s.max && s.excludePad:
			mode = miopen.PoolingModeAverage
		case !s.max:
			mode = miopen.PoolingModeAverageInclusive
		}
		p := &poolPlan{}
		var err error
		if p.pool, err = miopen.NewPoolingDescriptor(miopen.PoolingParams{Mode: mode, Window: s.kernel[:], Pad: s.pad[:], Stride: s.stride[:]}); err == nil {
			if p.x, err = dnnImage(dt, s.format, s.n, s.c, s.h, s.w); err == nil {
				p.y, err = dnnImage(dt, s.format, s.n, s.c, s.oh, s.ow)
			}
		}
		return p, err
	})
}

// planFor returns the plan of key from m, made by build on its first
// call, and whether m keeps it (else the caller closes it): past maxPlans
// problems a plan is the call's own.
func planFor[K comparable, P interface{ close() }](mu *sync.Mutex, m *map[K]P, key K, build func() (P, error)) (P, bool, error) {
	mu.Lock()
	p, ok := (*m)[key]
	mu.Unlock()
	if ok {
		return p, true, nil
	}
	p, err := build()
	if err != nil {
		p.close()
		var zero P
		return zero, false, err
	}
	mu.Lock()
	defer mu.Unlock()
	if q, ok := (*m)[key]; ok { // made meanwhile by another call
		p.close()
		return q, true, nil
	}
	if len(*m) >= maxPlans {
		return p, false, nil
	}
	if *m == nil {
		*m = map[K]P{}
	}
	(*m)[key] = p
	return p, true, nil
}

// dnnTensor is a contiguous view's elements as MIOpen takes them.
func dnnTensor(d *miopen.TensorDescriptor, st *Storage, off, n int) (miopen.Tensor, error) {
	size := st.dtype.Size()
	buf, err := st.mem.(*block).buf.Slice(off*size, n*size)
	return miopen.Tensor{Desc: d, Data: buf}, err
}

// dnnError makes the library's refusal of an f64 problem ErrDType (MIOpen
// has few f64 algorithms; cuDNN has them); running out of memory stays
// what it is.
func dnnError(dt DType, what string, err error) error {
	if err == nil || dt != F64 {
		return err
	}
	var me *miopen.Error
	if errors.As(err, &me) && !errors.Is(err, ErrOutOfMemory) {
		return &Error{Pkg: string(pkg), Op: what, Kind: ErrDType, Err: err,
			Detail: "the GPU's library (MIOpen or cuDNN) has no f64 " + what + " here: run it on the CPU device, or convert to f32 with ToDType"}
	}
	return err
}

func (b *hipBackend) conv(x, w view, dst *Storage, s *convSpec) error {
	d := (*HIPDevice)(b)
	dt := dst.dtype
	if s.libraryCannot() {
		return pkg.Errorf("convolution", ErrArgument, "output padding %v not below the stride %v: MIOpen and cuDNN cannot express it; "+
			"run this transposed convolution on the CPU device", s.outPad, s.stride)
	}
	h, err := d.MIOpen()
	if err != nil {
		return err
	}
	p, cached, err := d.plans.conv(dt, s)
	if err != nil {
		return dnnError(dt, "convolution", err)
	}
	if !cached {
		defer p.close()
	}
	xt, err := dnnTensor(p.x, x.st, x.l.Offset, x.l.Shape.Elems())
	if err != nil {
		return err
	}
	wt, err := dnnTensor(p.w, w.st, w.l.Offset, w.l.Shape.Elems())
	if err != nil {
		return err
	}
	yt, err := dnnTensor(p.y, dst, 0, dst.n)
	if err != nil {
		return err
	}
	algo := p.algo.Load()
	if algo == nil {
		// The handle runs the Find once per problem (and caches it too);
		// it writes y, which the convolution below writes again.
		perfs, err := h.FindConvolutionForward(p.conv, xt, wt, yt)
		if err != nil {
			return dnnError(dt, "convolution", err)
		}
		algo = &perfs[0]
		p.algo.Store(algo)
	}
	opts := []miopen.ConvOption{miopen.WithAlgorithm(*algo)}
	if algo.Workspace > 0 {
		ws, err := b.pool.get(algo.Workspace)
		if err != nil {
			return err
		}
		// Given back once queued: the pool's next user of the block is
		// queued after the convolution on the same stream.
		defer ws.release()
		opts = append(opts, miopen.WithWorkspace(ws.buf))
	}
	return dnnError(dt, "convolution", h.ConvolutionForward(p.conv, xt, wt, yt, opts...))
}

func (b *hipBackend) pooling(x view, dst *Storage, s *poolSpec) error {
	d := (*HIPDevice)(b)
	dt := dst.dtype
	h, err := d.MIOpen()
	if err != nil {
		return err
	}
	p, cached, err := d.plans.pool(dt, s)
	if err != nil {
		return dnnError(dt, "pooling", err)
	}
	if !cached {
		defer p.close()
	}
	xt, err := dnnTensor(p.x, x.st, x.l.Offset, x.l.Shape.Elems())
	if err != nil {
		return err
	}
	yt, err := dnnTensor(p.y, dst, 0, dst.n)
	if err != nil {
		return err
	}
	// No workspace: inference keeps no positions of the maxima.
	return dnnError(dt, "pooling", h.PoolingForward(p.pool, xt, yt, nil))
}

func (b *hipBackend) upsample(x view, dst *Storage, s *upsampleSpec) error {
	in, out := ptr(x), storagePtr(dst)
	sh, sw := s.scales()
	return b.launch(kernelNames.upsample[b2i(s.bilinear)][dst.dtype], b.grid(dst.n, 1), block1D, func(a *hip.Args) {
		a.Uint64(uint64(dst.n)).Uint64(uint64(s.c)).Uint64(uint64(s.h)).Uint64(uint64(s.w)).Uint64(uint64(s.oh)).Uint64(uint64(s.ow))
		a.Int32(int32(b2i(s.format == NHWC))).Int32(int32(b2i(s.alignCorners))).Float32(sh).Float32(sw).Ptr(in).Ptr(out)
	})
}

// libraryCannot reports a transposed convolution whose output padding
// reaches its stride (PyTorch allows it below the dilation): the libraries
// run it as the data gradient of a forward convolution, whose output size
// such a padding does not give back.
func (s *convSpec) libraryCannot() bool {
	return s.transposed && (s.outPad[0] >= s.stride[0] || s.outPad[1] >= s.stride[1])
}
