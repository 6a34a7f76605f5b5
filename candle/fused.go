package candle

import (
	"math"

	"github.com/rocm-go/rocm/hip"
)

// The fused ops of neural networks: each reads its inputs once and writes
// its output once (kernels/nn.hip), for F32, F16 and BF16 with float32 math
// on the GPU (float64 on the CPU). Strided inputs are made contiguous
// first; outputs are contiguous.

// fusedOp is what a fused op's kernel sees: contiguous views of its (at
// most three) inputs, the fresh output, and the copies made, to release.
// Fixed arrays: no allocation but the op itself and its output.
type fusedOp struct {
	in  [3]view // a nil input's is the zero view
	tmp [3]*Tensor
	out *Tensor
}

func (f *fusedOp) release() {
	for _, t := range f.tmp {
		if t != nil {
			t.Close()
		}
	}
}

// fuse checks a fused op's operands (one device, one float dtype of
// f32/f16/bf16; the first is never nil, a later one may be) and allocates
// its output of shape.
func fuse(op string, shape Shape, ts ...*Tensor) (*fusedOp, error) {
	x := ts[0]
	dt := x.DType()
	for i, t := range ts {
		if t == nil {
			continue
		}
		if err := t.alive(op); err != nil {
			return nil, err
		}
		if err := sameDevice(op, x.st.dev, t); err != nil {
			return nil, err
		}
		switch {
		case i == 0 && dt != F32 && dt != F16 && dt != BF16:
			return nil, pkg.Errorf(op, ErrDType, "%s: the fused ops take f32, f16 or bf16 (convert with ToDType)", dt)
		case t.DType() != dt:
			return nil, pkg.Errorf(op, ErrDType, "%s and %s operands: convert one with ToDType", dt, t.DType())
		}
	}
	f := &fusedOp{}
	for i, t := range ts {
		if t == nil {
			continue
		}
		if !t.layout.IsContiguous() {
			c, err := t.Copy()
			if err != nil {
				f.release()
				return nil, pkg.Wrap(op, err)
			}
			f.tmp[i], t = c, c
		}
		f.in[i] = t.v()
	}
	out, err := newOutput(op, x.st.dev, dt, shape, ts...)
	if err != nil {
		f.release()
		return nil, err
	}
	f.out = out
	return f, nil
}

// run launches the op unless the output is empty, and releases the
// copies.
func (f *fusedOp) run(op string, launch func(b backend) error) (*Tensor, error) {
	defer f.release()
	if f.out.Elems() == 0 {
		return f.out, nil
	}
	if err := launch(f.out.st.dev.backend()); err != nil {
		f.out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return f.out, nil
}

// lastDimRows is a shape's rows and columns: all but the last dim, and the last.
func lastDimRows(s Shape) (rows, cols int) {
	if len(s) == 0 {
		return 1, 1
	}
	cols = s[len(s)-1]
	if cols == 0 {
		return 0, 0
	}
	return s.Elems() / cols, cols
}

// SoftmaxLastDim is exp(x - max) / Σ exp(x - max) over the last dim: no
// overflow for any finite input; a row with a NaN is all NaN.
func (t *Tensor) SoftmaxLastDim() (*Tensor, error) { return t.softmax("Tensor.SoftmaxLastDim", false) }

// LogSoftmaxLastDim is x - max - log Σ exp(x - max) over the last dim.
func (t *Tensor) LogSoftmaxLastDim() (*Tensor, error) {
	return t.softmax("Tensor.LogSoftmaxLastDim", true)
}

func (t *Tensor) softmax(op string, log bool) (*Tensor, error) {
	if err := t.alive(op); err != nil {
		return nil, err
	}
	f, err := fuse(op, t.layout.Shape, t)
	if err != nil {
		return nil, err
	}
	rows, cols := lastDimRows(t.layout.Shape)
	return f.run(op, func(b backend) error { return b.softmax(f.in[0], f.out.st, rows, cols, log) })
}

// RMSNorm is x / sqrt(mean(x²) + eps) · alpha over the last dim; alpha
// has the last dim's size.
func (t *Tensor) RMSNorm(alpha *Tensor, eps float64) (*Tensor, error) {
	return t.norm("Tensor.RMSNorm", alpha, nil, eps, false)
}

// LayerNorm is (x - mean) / sqrt(var + eps) · alpha + beta over the last
// dim (the variance of the row, not the sample's); alpha and beta have the
// last dim's size, and beta may be nil.
func (t *Tensor) LayerNorm(alpha, beta *Tensor, eps float64) (*Tensor, error) {
	return t.norm("Tensor.LayerNorm", alpha, beta, eps, true)
}

func (t *Tensor) norm(op string, alpha, beta *Tensor, eps float64, layer bool) (*Tensor, error) {
	if err := t.alive(op); err != nil {
		return nil, err
	}
	if alpha == nil {
		return nil, pkg.Errorf(op, ErrArgument, "alpha is nil")
	}
	if len(t.layout.Shape) == 0 {
		return nil, pkg.Errorf(op, ErrShape, "a scalar has no last dim to normalise")
	}
	rows, _ := lastDimRows(t.layout.Shape)
	cols := t.layout.Shape[len(t.layout.Shape)-1]
	if err := checkAffine(op, alpha, beta, cols, "the last dim of", t.layout.Shape, eps); err != nil {
		return nil, err
	}
	f, err := fuse(op, t.layout.Shape, t, alpha, beta)
	if err != nil {
		return nil, err
	}
	return f.run(op, func(b backend) error {
		return b.norm(f.in[0], f.in[1], f.in[2], f.out.st, rows, cols, eps, layer)
	})
}

// checkAffine checks a norm's scale and shift (n values each; beta may be
// nil) and its eps.
func checkAffine(op string, alpha, beta *Tensor, n int, what string, x Shape, eps float64) error {
	for _, p := range [2]struct {
		name string
		t    *Tensor
	}{{"alpha", alpha}, {"beta", beta}} {
		if p.t != nil && !p.t.layout.Shape.Equal(Shape{n}) {
			return pkg.Errorf(op, ErrShape, "%s is %v; want [%d], %s %v", p.name, p.t.layout.Shape, n, what, x)
		}
	}
	if eps < 0 || math.IsNaN(eps) || eps > math.MaxFloat32 {
		return pkg.Errorf(op, ErrArgument, "eps %v: want a non-negative float32", eps)
	}
	return nil
}

// GroupNorm is PyTorch's group_norm: x of shape (N, C, ...) (channels in
// dim 1, any spatial dims after) is normalised over each group of
// C/groups channels and their spatial elements, (x - mean) /
// sqrt(var + eps) with the group's variance (not the sample's), then
// scaled by alpha and shifted by beta per channel; alpha and beta are
// (C), and beta may be nil.
func (t *Tensor) GroupNorm(groups int, alpha, beta *Tensor, eps float64) (*Tensor, error) {
	return t.groupNorm("Tensor.GroupNorm", groups, alpha, beta, eps, false)
}

// GroupNormSiLU is GroupNorm followed by SiLU (x · sigmoid(x)) in one
// pass: the norm and activation of Stable Diffusion's resnet blocks.
func (t *Tensor) GroupNormSiLU(groups int, alpha, beta *Tensor, eps float64) (*Tensor, error) {
	return t.groupNorm("Tensor.GroupNormSiLU", groups, alpha, beta, eps, true)
}

func (t *Tensor) groupNorm(op string, groups int, alpha, beta *Tensor, eps float64, silu bool) (*Tensor, error) {
	if err := t.alive(op); err != nil {
		return nil, err
	}
	if alpha == nil {
		return nil, pkg.Errorf(op, ErrArgument, "alpha is nil")
	}
	s := t.layout.Shape
	if len(s) < 2 {
		return nil, pkg.Errorf(op, ErrShape, "x is %v: want rank 2 or more, (N, C, spatial...)", s)
	}
	c := s[1]
	if groups < 1 || c%groups != 0 {
		return nil, pkg.Errorf(op, ErrArgument, "%d groups of %d channels: want a number ≥ 1 that divides the channels", groups, c)
	}
	if err := checkAffine(op, alpha, beta, c, "the channels of", s, eps); err != nil {
		return nil, err
	}
	spatial := s[2:].Elems()
	cols := c / groups * spatial
	if cols >= math.MaxUint32 {
		return nil, pkg.Errorf(op, ErrShape, "x is %v: a group of %d elements; at most %d", s, cols, uint32(math.MaxUint32-1))
	}
	f, err := fuse(op, s, t, alpha, beta)
	if err != nil {
		return nil, err
	}
	rows := s[0] * groups
	return f.run(op, func(b backend) error {
		return b.groupNorm(f.in[0], f.in[1], f.in[2], f.out.st, rows, cols, groups, spatial, eps, silu)
	})
}

// RoPE rotates x (b, h, t, d) by rotary embeddings in the half-split
// layout: the pairs are (x[i], x[i + d/2]), rotated by cos and sin of
// shape (t, d/2), or (b, t, d/2) for angles per batch entry.
func (t *Tensor) RoPE(cos, sin *Tensor) (*Tensor, error) {
	return t.rope("Tensor.RoPE", cos, sin, false, false)
}

// RoPEInterleaved is RoPE with the pairs (x[2i], x[2i + 1]).
func (t *Tensor) RoPEInterleaved(cos, sin *Tensor) (*Tensor, error) {
	return t.rope("Tensor.RoPEInterleaved", cos, sin, true, false)
}

// RoPETHD is RoPE on x laid out (b, t, h, d).
func (t *Tensor) RoPETHD(cos, sin *Tensor) (*Tensor, error) {
	return t.rope("Tensor.RoPETHD", cos, sin, false, true)
}

func (t *Tensor) rope(op string, cos, sin *Tensor, interleaved, thd bool) (*Tensor, error) {
	if err := alive(op, t, cos, sin); err != nil {
		return nil, err
	}
	s := t.layout.Shape
	if len(s) != 4 {
		return nil, pkg.Errorf(op, ErrShape, "x is %v: want rank 4, (b, h, t, d)%s", s, map[bool]string{true: " laid out (b, t, h, d)"}[thd])
	}
	b, h, n, d := s[0], s[1], s[2], s[3]
	if thd {
		h, n = n, h
	}
	if d%2 != 0 {
		return nil, pkg.Errorf(op, ErrShape, "x is %v: the head dim %d is odd; rotary pairs need an even one", s, d)
	}
	csb := 0
	switch cs := cos.layout.Shape; {
	case cs.Equal(Shape{n, d / 2}):
	case cs.Equal(Shape{b, n, d / 2}):
		csb = n * d / 2
	default:
		return nil, pkg.Errorf(op, ErrShape, "cos is %v: want [%d %d] (t, d/2) or [%d %d %d] (b, t, d/2) for x %v", cs, n, d/2, b, n, d/2, s)
	}
	if !sin.layout.Shape.Equal(cos.layout.Shape) {
		return nil, pkg.Errorf(op, ErrShape, "sin is %v and cos %v: they have one shape", sin.layout.Shape, cos.layout.Shape)
	}
	f, err := fuse(op, s, t, cos, sin)
	if err != nil {
		return nil, err
	}
	return f.run(op, func(be backend) error {
		return be.rope(f.in[0], f.in[1], f.in[2], f.out.st, [4]int{b, h, n, d}, interleaved, thd, csb)
	})
}

// SiLUMul is silu(t) · o, the gate of a gated MLP, in one pass; t and o
// have one shape.
func (t *Tensor) SiLUMul(o *Tensor) (*Tensor, error) {
	const op = "Tensor.SiLUMul"
	if err := alive(op, t, o); err != nil {
		return nil, err
	}
	if !t.layout.Shape.Equal(o.layout.Shape) {
		return nil, pkg.Errorf(op, ErrShape, "%v and %v: the gate and the value have one shape", t.layout.Shape, o.layout.Shape)
	}
	f, err := fuse(op, t.layout.Shape, t, o)
	if err != nil {
		return nil, err
	}
	return f.run(op, func(b backend) error { return b.siluMul(f.in[0], f.in[1], f.out.st) })
}

// GEGLU is the gated GELU of diffusers' feed-forward blocks: x (…, 2n)
// is split in halves along the last dim, and the result (…, n) is the
// first half times gelu_erf of the second, x[…, :n] · GeluErf(x[…, n:]),
// in one pass.
func (t *Tensor) GEGLU() (*Tensor, error) {
	const op = "Tensor.GEGLU"
	if err := t.alive(op); err != nil {
		return nil, err
	}
	s := t.layout.Shape
	if len(s) == 0 || s[len(s)-1]%2 != 0 {
		return nil, pkg.Errorf(op, ErrShape, "x is %v: want a last dim of even size, the value and the gate", s)
	}
	out := s.Clone()
	out[len(out)-1] /= 2
	f, err := fuse(op, out, t)
	if err != nil {
		return nil, err
	}
	rows, n := lastDimRows(out)
	return f.run(op, func(b backend) error { return b.geglu(f.in[0], f.out.st, rows, n) })
}

// The CPU's fused ops: the references, in float64.

func (c *cpuBackend) softmax(x view, dst *Storage, rows, cols int, log bool) error {
	s, d := dataOf(x.st), dataOf(dst)
	for r := range rows {
		base := x.l.Offset + r*cols
		m := math.Inf(-1)
		for k := range cols {
			v := s.f(base + k)
			if v != v || m != m {
				m = math.NaN()
			} else {
				m = math.Max(m, v)
			}
		}
		sum := 0.0
		for k := range cols {
			sum += math.Exp(s.f(base+k) - m)
		}
		for k := range cols {
			v := s.f(base+k) - m
			if log {
				d.setF(r*cols+k, v-math.Log(sum))
			} else {
				d.setF(r*cols+k, math.Exp(v)/sum)
			}
		}
	}
	return nil
}

func (c *cpuBackend) norm(x, alpha, beta view, dst *Storage, rows, cols int, eps float64, layer bool) error {
	return cpuNorm(x, alpha, beta, dst, rows, cols, 1, 1, eps, layer, false)
}

func (c *cpuBackend) groupNorm(x, alpha, beta view, dst *Storage, rows, cols, groups, spatial int, eps float64, silu bool) error {
	return cpuNorm(x, alpha, beta, dst, rows, cols, groups, spatial, eps, true, silu)
}

// cpuNorm normalises rows; row r's column k takes the affine parameters
// of channel (r % groups) · cols / spatial + k / spatial (k for the
// last-dim norms: one group, spatial 1); silu applies SiLU to the result.
func cpuNorm(x, alpha, beta view, dst *Storage, rows, cols, groups, spatial int, eps float64, layer, silu bool) error {
	s, a, d := dataOf(x.st), dataOf(alpha.st), dataOf(dst)
	n := float64(cols)
	for r := range rows {
		c0 := r % groups * (cols / spatial)
		base := x.l.Offset + r*cols
		mean := 0.0
		if layer {
			for k := range cols {
				mean += s.f(base + k)
			}
			mean /= n
		}
		ss := 0.0
		for k := range cols {
			v := s.f(base+k) - mean
			ss += v * v
		}
		rs := 1 / math.Sqrt(ss/n+float64(float32(eps)))
		for k := range cols {
			ch := c0 + k/spatial
			v := (s.f(base+k) - mean) * rs * a.f(alpha.l.Offset+ch)
			if beta.st != nil {
				v += dataOf(beta.st).f(beta.l.Offset + ch)
			}
			if silu {
				v /= 1 + math.Exp(-v)
			}
			d.setF(r*cols+k, v)
		}
	}
	return nil
}

func (c *cpuBackend) rope(x, cos, sin view, dst *Storage, dims [4]int, interleaved, thd bool, csb int) error {
	s, co, si, d := dataOf(x.st), dataOf(cos.st), dataOf(sin.st), dataOf(dst)
	b, h, n, hd := dims[0], dims[1], dims[2], dims[3]
	half := hd / 2
	for r := range b * h * n {
		ti, bi := r%n, r/(h*n)
		if thd {
			ti = (r / h) % n
		}
		for i := range half {
			cIdx := bi*csb + ti*half + i
			cv, sv := co.f(cos.l.Offset+cIdx), si.f(sin.l.Offset+cIdx)
			i1, i2 := r*hd+i, r*hd+i+half
			if interleaved {
				i1, i2 = r*hd+2*i, r*hd+2*i+1
			}
			x1, x2 := s.f(x.l.Offset+i1), s.f(x.l.Offset+i2)
			d.setF(i1, x1*cv-x2*sv)
			d.setF(i2, x1*sv+x2*cv)
		}
	}
	return nil
}

func (c *cpuBackend) siluMul(a, b view, dst *Storage) error {
	sa, sb, d := dataOf(a.st), dataOf(b.st), dataOf(dst)
	for i := range dst.n {
		v := sa.f(a.l.Offset + i)
		d.setF(i, v/(1+math.Exp(-v))*sb.f(b.l.Offset+i))
	}
	return nil
}

func (c *cpuBackend) geglu(x view, dst *Storage, rows, n int) error {
	s, d := dataOf(x.st), dataOf(dst)
	gelu := unaryFloat(opGeluErf, [2]float64{})
	for r := range rows {
		base := x.l.Offset + r*2*n
		for i := range n {
			d.setF(r*n+i, s.f(base+i)*gelu(s.f(base+n+i)))
		}
	}
	return nil
}

// The GPU's fused ops: a block per row for the row ops, sized to the row.

// nnPer and nnBlock are nn.hip's NN_PER and NN_BLOCK (softmax, rms_norm,
// layer_norm), gnPer and gnBlock its GN_PER and GN_BLOCK (group_norm, whose
// rows are long and few), gsThreads and gsChunk its GS_THREADS and GS_CHUNK
// (group_stats and group_apply, for rows longer than a block of group_norm
// holds).
const (
	nnPer     = 32
	nnBlock   = 256
	gnPer     = 8
	gnBlock   = 1024
	gsThreads = 256
	gsChunk   = gsThreads * 16
)

// rowLaunch is a row kernel's grid and block: a block per row, per
// elements a thread, a multiple of 64 threads (whole wavefronts on AMD), at
// most maxBlock; longer rows loop.
func rowLaunch(rows, cols, per, maxBlock int) (grid, block hip.Dim3) {
	n := (cols + per - 1) / per
	n = (n + 63) / 64 * 64
	return hip.Dim3{X: uint32(min(rows, 1<<31-1))}, hip.Dim3{X: uint32(min(max(n, 64), maxBlock))}
}

func (b *hipBackend) softmax(x view, dst *Storage, rows, cols int, log bool) error {
	in, out := ptr(x), storagePtr(dst)
	grid, block := rowLaunch(rows, cols, nnPer, nnBlock)
	// Vector rows that fill the block's slots take softmax_full.
	if !log && cols == int(block.X)*nnPer && in%16 == 0 && out%16 == 0 {
		return b.launch(kernelNames.softmaxFull[dst.dtype], grid, block, func(a *hip.Args) {
			a.Uint64(uint64(rows)).Uint64(uint64(cols)).Ptr(in).Ptr(out)
		})
	}
	return b.launch(kernelNames.softmax[dst.dtype], grid, block, func(a *hip.Args) {
		a.Uint64(uint64(rows)).Uint64(uint64(cols)).Int32(int32(b2i(log))).Ptr(in).Ptr(out)
	})
}

func (b *hipBackend) norm(x, alpha, beta view, dst *Storage, rows, cols int, eps float64, layer bool) error {
	in, al, out := ptr(x), ptr(alpha), storagePtr(dst)
	grid, block := rowLaunch(rows, cols, nnPer, nnBlock)
	if !layer {
		return b.launch(kernelNames.rmsNorm[dst.dtype], grid, block, func(a *hip.Args) {
			a.Uint64(uint64(rows)).Uint64(uint64(cols)).Float32(float32(eps)).Ptr(in).Ptr(al).Ptr(out)
		})
	}
	var be hip.DevicePtr
	if beta.st != nil {
		be = ptr(beta)
	}
	return b.launch(kernelNames.layerNorm[dst.dtype], grid, block, func(a *hip.Args) {
		a.Uint64(uint64(rows)).Uint64(uint64(cols)).Float32(float32(eps)).Ptr(in).Ptr(al).Ptr(be).Ptr(out)
	})
}

func (b *hipBackend) groupNorm(x, alpha, beta view, dst *Storage, rows, cols, groups, spatial int, eps float64, silu bool) error {
	in, al, out := ptr(x), ptr(alpha), storagePtr(dst)
	var be hip.DevicePtr
	if beta.st != nil {
		be = ptr(beta)
	}
	act := int32(b2i(silu))
	if cols <= gnBlock*gnPer {
		// A block a row, held in registers: one read.
		grid, block := rowLaunch(rows, cols, gnPer, gnBlock)
		return b.launch(kernelNames.groupNorm[dst.dtype], grid, block, func(a *hip.Args) {
			a.Uint64(uint64(rows)).Uint64(uint64(cols)).Float32(float32(eps)).Uint64(uint64(groups)).Uint64(uint64(spatial))
			a.Int32(act).Ptr(in).Ptr(al).Ptr(be).Ptr(out)
		})
	}
	// Longer rows: a block a chunk of gsChunk elements, for the chunks'
	// statistics (two floats each), then for the output.
	splits := (cols + gsChunk - 1) / gsChunk
	part, err := b.pool.get(rows * splits * 2 * 4)
	if err != nil {
		return err
	}
	defer part.release()
	pp := part.buf.Ptr()
	grid := hip.Dim3{X: uint32(min(rows*splits, maxBlocks))}
	block := hip.Dim3{X: gsThreads}
	if err := b.launch(kernelNames.groupStats[dst.dtype], grid, block, func(a *hip.Args) {
		a.Uint64(uint64(rows)).Uint64(uint64(cols)).Uint64(uint64(splits)).Ptr(in).Ptr(pp)
	}); err != nil {
		return err
	}
	return b.launch(kernelNames.groupApply[dst.dtype], grid, block, func(a *hip.Args) {
		a.Uint64(uint64(rows)).Uint64(uint64(cols)).Uint64(uint64(splits)).Float32(float32(eps))
		a.Uint64(uint64(groups)).Uint64(uint64(spatial)).Int32(act).Ptr(pp).Ptr(in).Ptr(al).Ptr(be).Ptr(out)
	})
}

func (b *hipBackend) rope(x, cos, sin view, dst *Storage, dims [4]int, interleaved, thd bool, csb int) error {
	in, co, si, out := ptr(x), ptr(cos), ptr(sin), storagePtr(dst)
	pairs := dst.n / 2
	// A thread takes 16 bytes of x, G pairs (nn.hip's rope_all), once: a
	// grid that loops (b.grid's, two groups a thread) measured 3% slower on
	// an H100.
	per := 8 / dst.dtype.Size()
	if !interleaved {
		per = 16 / dst.dtype.Size()
	}
	grid := hip.Dim3{X: uint32(max(1, min((pairs/per+RGBlock-1)/RGBlock, maxBlocks)))}
	return b.launch(kernelNames.rope[dst.dtype], grid, block1D, func(a *hip.Args) {
		a.Uint64(uint64(dims[0])).Uint64(uint64(dims[1])).Uint64(uint64(dims[2])).Uint64(uint64(dims[3]))
		a.Int32(int32(b2i(interleaved))).Int32(int32(b2i(thd))).Uint64(uint64(csb)).Ptr(in).Ptr(co).Ptr(si).Ptr(out)
	})
}

func (b *hipBackend) siluMul(x, y view, dst *Storage) error {
	px, py, out := ptr(x), ptr(y), storagePtr(dst)
	return b.launch(kernelNames.siluMul[dst.dtype], b.grid(dst.n, 16/dst.dtype.Size()), block1D, func(a *hip.Args) {
		a.Uint64(uint64(dst.n)).Ptr(px).Ptr(py).Ptr(out)
	})
}

func (b *hipBackend) geglu(x view, dst *Storage, rows, n int) error {
	in, out := ptr(x), storagePtr(dst)
	return b.launch(kernelNames.geglu[dst.dtype], b.grid(dst.n, 16/dst.dtype.Size()), block1D, func(a *hip.Args) {
		a.Uint64(uint64(rows)).Uint64(uint64(n)).Ptr(in).Ptr(out)
	})
}
