package bench

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/hip"
)

// TensorOp is one op of the tensor benchmark: its inputs are made once,
// Run queues the op (returning its output, which the caller closes), and
// Bytes is what it must move through device memory at least (inputs read
// once, the output written once). Flops, when set, marks an op bound by
// arithmetic (a product), measured in FLOP/s rather than against the
// copy roofline.
type TensorOp struct {
	Name  string
	Bytes int64
	Flops int64
	// Target is the least ratio to PyTorch's speed an op with Flops must
	// reach; 0 means 0.97 (the products').
	Target float64
	// Fused marks the fused row ops (softmax, the norms, rope), which must
	// be as fast as PyTorch and reach 0.85 of a copy of the same bytes;
	// other memory-bound ops, either.
	Fused bool
	// Host marks the ops whose host time a call is reported (HostTime):
	// the convolutions, whose calls do the most on the host.
	Host  bool
	Run   func() (*candle.Tensor, error)
	close func()
}

// Close frees the op's inputs.
func (o *TensorOp) Close() {
	if o.close != nil {
		o.close()
	}
}

// Tensors is the tensor benchmark's device: candle's HIP device 0, with
// events on its stream.
type Tensors struct {
	Dev        *candle.HIPDevice
	start, end *hip.Event
	// busy is a copy queued ahead of each timed op (DeviceTime).
	busySrc, busyDst *hip.Buffer
}

// busyBytes is the size of the copy DeviceTime queues ahead of the start
// event: about 180 µs of an H100's time and 130 of an H200's, longer than
// the host takes to queue any op here, and more than their L2 caches. (64
// MiB, 32 µs on an H200, was shorter than some calls: PyTorch's bmm
// 32×128³ read 24.7 µs with it, 6.1 µs with this.)
const busyBytes = 256 << 20

// OpenTensors opens candle's HIP device 0.
func OpenTensors() (*Tensors, error) {
	d, err := candle.HIP(0)
	if err != nil {
		return nil, err
	}
	start, err := d.HIP().NewEvent(hip.EventDefault)
	if err != nil {
		return nil, err
	}
	end, err := d.HIP().NewEvent(hip.EventDefault)
	if err != nil {
		start.Close()
		return nil, err
	}
	t := &Tensors{Dev: d, start: start, end: end}
	if t.busySrc, err = d.HIP().Malloc(busyBytes); err == nil {
		t.busyDst, err = d.HIP().Malloc(busyBytes)
	}
	if err == nil {
		err = t.busySrc.Memset(1)
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Close frees the events and buffers.
func (b *Tensors) Close() {
	b.start.Close()
	b.end.Close()
	for _, x := range []*hip.Buffer{b.busySrc, b.busyDst} {
		if x != nil {
			x.Close()
		}
	}
}

// DeviceTime is the device time of one run of op, between two events on
// the device's stream; the output is closed after. A device copy queued
// ahead of the start event keeps the GPU busy while the host queues the
// op, so that the host's launch time stays out of the figure as it does
// when ops follow each other (torch_ref.py's queued_time does the same),
// and leaves the op's inputs out of the L2 cache.
func (b *Tensors) DeviceTime(op *TensorOp) (time.Duration, error) {
	var out *candle.Tensor
	d, err := b.queuedTime(func(*hip.Stream) (err error) {
		if out, err = op.Run(); err != nil {
			return fmt.Errorf("%s: %w", op.Name, err)
		}
		return nil
	})
	if out != nil {
		out.Close()
	}
	return d, err
}

// queuedTime is the device time of what queue queues on the device's
// stream between two events, with the busyBytes copy queued ahead.
func (b *Tensors) queuedTime(queue func(*hip.Stream) error) (time.Duration, error) {
	s := b.Dev.Stream()
	if err := b.busyDst.CopyFromAsync(b.busySrc, s); err != nil {
		return 0, err
	}
	if err := b.start.Record(s); err != nil {
		return 0, err
	}
	if err := queue(s); err != nil {
		return 0, err
	}
	if err := b.end.Record(s); err != nil {
		return 0, err
	}
	if err := b.end.Synchronize(); err != nil {
		return 0, err
	}
	return hip.ElapsedTime(b.start, b.end)
}

// HostTime is the host's time to queue one run of op (the call, until it
// returns), over n runs queued behind the busy copy, so that none waits
// for the device; outputs closed as they come.
func (b *Tensors) HostTime(op *TensorOp, n int) (time.Duration, error) {
	if err := b.busyDst.CopyFromAsync(b.busySrc, b.Dev.Stream()); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := runN(op, n); err != nil {
		return 0, err
	}
	d := time.Since(start) / time.Duration(n)
	return d, b.Dev.Synchronize()
}

// WallPerOp is the host's wall time per op of n runs of op, outputs closed
// as they come, with the wait for the device at the end: the cost of a
// small op end to end, allocation included.
func (b *Tensors) WallPerOp(op *TensorOp, n int) (time.Duration, error) {
	if err := b.Dev.Synchronize(); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := runN(op, n); err != nil {
		return 0, err
	}
	if err := b.Dev.Synchronize(); err != nil {
		return 0, err
	}
	return time.Since(start) / time.Duration(n), nil
}

// runN queues n runs of op, closing each output as it comes.
func runN(op *TensorOp, n int) error {
	for range n {
		out, err := op.Run()
		if err != nil {
			return err
		}
		out.Close()
	}
	return nil
}

// rand is a tensor of uniform numbers in [-1, 1), as torch.rand*2-1 draws.
func (b *Tensors) rand(dt candle.DType, shape ...int) (*candle.Tensor, error) {
	return candle.RandUniform(b.Dev, dt, -1, 1, shape...)
}

// Ops makes the benchmark's ops, each with its inputs: the sizes of the
// rbee plan's table. scale divides the big sizes (1 for the real run).
func (b *Tensors) Ops(scale int) ([]*TensorOp, error) {
	var ops []*TensorOp
	var inputs []*candle.Tensor
	fail := func(err error) ([]*TensorOp, error) {
		for _, t := range inputs {
			t.Close()
		}
		return nil, err
	}
	in := func(t *candle.Tensor, err error) *candle.Tensor {
		if err == nil {
			inputs = append(inputs, t)
		}
		return t
	}
	mk := func(name string, bytes int64, run func() (*candle.Tensor, error), ts ...*candle.Tensor) {
		ops = append(ops, &TensorOp{Name: name, Bytes: bytes, Run: run, close: func() {
			for _, t := range ts {
				t.Close()
			}
		}})
	}
	var err error
	check := func(t *candle.Tensor, e error) *candle.Tensor {
		if e != nil && err == nil {
			err = e
		}
		return in(t, e)
	}

	n := (256 << 20) / scale
	a, x := check(b.rand(candle.F32, n)), check(b.rand(candle.F32, n))
	if err != nil {
		return fail(err)
	}
	mk(fmt.Sprintf("add f32, %dM elements", n>>20), int64(n)*12, func() (*candle.Tensor, error) { return a.Add(x) }, a, x)

	rows, cols := 4096/scale, 32000
	logits := check(b.rand(candle.F32, rows, cols))
	if err != nil {
		return fail(err)
	}
	mk(fmt.Sprintf("sum over the last dim, %d×%d f32", rows, cols), int64(rows)*int64(cols)*4+int64(rows)*4,
		func() (*candle.Tensor, error) { return logits.Sum(false, -1) })
	// Bound by its passes, not by memory: compared by time alone (the
	// bytes are the input read and the indices written once).
	mk(fmt.Sprintf("argsort over the last dim, %d×%d f32", rows, cols), int64(rows)*int64(cols)*8,
		func() (*candle.Tensor, error) { return logits.ArgsortLastDim(true) })
	mk(fmt.Sprintf("argmax over the last dim, %d×%d f32", rows, cols), int64(rows)*int64(cols)*4+int64(rows)*4,
		func() (*candle.Tensor, error) { return logits.Argmax(false, -1) }, logits)

	side := 8192 / scale
	m := check(b.rand(candle.F32, side, side))
	if err != nil {
		return fail(err)
	}
	mt, err := m.T()
	if err != nil {
		return fail(err)
	}
	inputs = append(inputs, mt)
	mk(fmt.Sprintf("transpose-copy f32 %d²", side), int64(side)*int64(side)*8, mt.Contiguous, m, mt)

	l, r := check(b.rand(candle.F32, side, side/2)), check(b.rand(candle.F32, side, side/2))
	if err != nil {
		return fail(err)
	}
	mk(fmt.Sprintf("cat of two %d×%d f32 along dim 1", side, side/2), int64(side)*int64(side)*8,
		func() (*candle.Tensor, error) { return candle.Cat([]*candle.Tensor{l, r}, 1) }, l, r)

	vocab, hidden, nids := 32000, 4096, 16384/scale
	table := check(b.rand(candle.F32, vocab, hidden))
	rng := rand.New(rand.NewPCG(1, 2))
	hostIDs := make([]int64, nids)
	for i := range hostIDs {
		hostIDs[i] = rng.Int64N(int64(vocab))
	}
	ids := check(candle.FromSlice(b.Dev, hostIDs))
	if err != nil {
		return fail(err)
	}
	mk(fmt.Sprintf("index_select %d rows of a %d×%d f32 table", nids, vocab, hidden), int64(nids)*int64(hidden)*8+int64(nids)*8,
		func() (*candle.Tensor, error) { return table.IndexSelect(ids, 0) }, table, ids)

	wn := (64 << 20) / scale
	cond := check(b.rand(candle.F32, wn))
	t, f := check(b.rand(candle.F32, wn)), check(b.rand(candle.F32, wn))
	if err != nil {
		return fail(err)
	}
	zero := check(candle.Zeros(b.Dev, candle.F32, 1))
	mask := check(cond.Gt(zero))
	if err != nil {
		return fail(err)
	}
	cond.Close()
	mk(fmt.Sprintf("where, %dM f32 with a u8 mask", wn>>20), int64(wn)*13,
		func() (*candle.Tensor, error) { return candle.Where(mask, t, f) }, mask, t, f, zero)

	c := check(b.rand(candle.F32, n))
	if err != nil {
		return fail(err)
	}
	mk(fmt.Sprintf("cast f32→bf16, %dM elements", n>>20), int64(n)*6, func() (*candle.Tensor, error) { return c.ToDType(candle.BF16) }, c)

	h := check(b.rand(candle.F16, n))
	if err != nil {
		return fail(err)
	}
	mk(fmt.Sprintf("gelu (tanh) f16, %dM elements", n>>20), int64(n)*4, h.Gelu)
	mk(fmt.Sprintf("silu f16, %dM elements", n>>20), int64(n)*4, h.Silu, h)

	// The fused ops of networks, on f16 rows of 4096.
	nr, nc := 16384/scale, 4096
	act := check(b.rand(candle.F16, nr, nc))
	gain, bias := check(b.rand(candle.F16, nc)), check(b.rand(candle.F16, nc))
	if err != nil {
		return fail(err)
	}
	rowBytes := int64(nr) * int64(nc) * 4
	mk(fmt.Sprintf("softmax over the last dim, %d×%d f16", nr, nc), rowBytes, act.SoftmaxLastDim)
	ops[len(ops)-1].Fused = true
	mk(fmt.Sprintf("rms_norm %d×%d f16", nr, nc), rowBytes+int64(nc)*2, func() (*candle.Tensor, error) { return act.RMSNorm(gain, 1e-6) })
	ops[len(ops)-1].Fused = true
	mk(fmt.Sprintf("layer_norm %d×%d f16", nr, nc), rowBytes+int64(nc)*4,
		func() (*candle.Tensor, error) { return act.LayerNorm(gain, bias, 1e-5) }, act, gain, bias)
	ops[len(ops)-1].Fused = true
	// Stable Diffusion's group norm: 64 rows of 40960, past the registers.
	gn := check(b.rand(candle.F16, 2, 320, 64, 64))
	gnw, gnb := check(b.rand(candle.F16, 320)), check(b.rand(candle.F16, 320))
	if err != nil {
		return fail(err)
	}
	mk("group_norm (2, 320, 64, 64) f16, 32 groups", 2*2*320*64*64*2+320*4,
		func() (*candle.Tensor, error) { return gn.GroupNorm(32, gnw, gnb, 1e-5) })
	mk("group_norm + silu (2, 320, 64, 64) f16, 32 groups", 2*2*320*64*64*2+320*4,
		func() (*candle.Tensor, error) { return gn.GroupNormSiLU(32, gnw, gnb, 1e-5) }, gn, gnw, gnb)
	// The VAE decoder's last levels: 32 groups of 16 channels of side².
	vside := 512 / scale
	vn := check(b.rand(candle.F16, 1, 512, vside, vside))
	vnw, vnb := check(b.rand(candle.F16, 512)), check(b.rand(candle.F16, 512))
	if err != nil {
		return fail(err)
	}
	mk(fmt.Sprintf("group_norm + silu (1, 512, %d, %d) f16, 32 groups", vside, vside), int64(512*vside*vside)*4+512*4,
		func() (*candle.Tensor, error) { return vn.GroupNormSiLU(32, vnw, vnb, 1e-5) }, vn, vnw, vnb)
	// The UNet's feed-forward at its 64×64 level: (2, 4096, 2·1280) to (2, 4096, 1280).
	toks := 4096 / scale
	ff := check(b.rand(candle.F16, 2, toks, 2560))
	if err != nil {
		return fail(err)
	}
	mk(fmt.Sprintf("geglu (2, %d, 2560) f16", toks), int64(2*toks*2560)*3, ff.GEGLU, ff)
	heads, seq, hd := 32, 4096/scale, 128
	q := check(b.rand(candle.F16, 1, heads, seq, hd))
	cos, sin := check(b.rand(candle.F16, seq, hd/2)), check(b.rand(candle.F16, seq, hd/2))
	if err != nil {
		return fail(err)
	}
	mk(fmt.Sprintf("rope (1, %d, %d, %d) f16", heads, seq, hd), int64(heads*seq*hd)*4+int64(seq*hd)*2,
		func() (*candle.Tensor, error) { return q.RoPE(cos, sin) }, q, cos, sin)
	ops[len(ops)-1].Fused = true

	// Products: 8192³ in each float type, then a batch of small ones.
	mm := 8192 / scale
	for _, dt := range []candle.DType{candle.BF16, candle.F16, candle.F32} {
		x, y := check(b.rand(dt, mm, mm)), check(b.rand(dt, mm, mm))
		if err != nil {
			return fail(err)
		}
		mk(fmt.Sprintf("matmul %d³ %s", mm, dt), int64(3*mm*mm*dt.Size()), func() (*candle.Tensor, error) { return x.Matmul(y) }, x, y)
		ops[len(ops)-1].Flops = 2 * int64(mm) * int64(mm) * int64(mm)
	}
	bx, by := check(b.rand(candle.F16, 32, 128, 128)), check(b.rand(candle.F16, 32, 128, 128))
	if err != nil {
		return fail(err)
	}
	mk("bmm 32×128³ f16", 3*32*128*128*2, func() (*candle.Tensor, error) { return bx.Matmul(by) }, bx, by)
	ops[len(ops)-1].Flops = 2 * 32 * 128 * 128 * 128

	// Convolutions: convbench's UNet shapes through Tensor.Conv2d.
	for _, c := range TensorConvs(scale) {
		x, w := check(b.rand(candle.F16, c.inputDims()...)), check(b.rand(candle.F16, c.weightDims()...))
		if err != nil {
			return fail(err)
		}
		s, p := c.Shape, c.params()
		oh, ow := s.Out()
		mk(c.Name, 2*int64(s.N*s.C*s.H*s.W+s.K*s.C*s.R*s.S+s.N*s.K*oh*ow), func() (*candle.Tensor, error) { return x.Conv2d(w, nil, p) }, x, w)
		ops[len(ops)-1].Flops, ops[len(ops)-1].Target, ops[len(ops)-1].Host = int64(s.FLOPs()), 0.95, true
	}
	return ops, nil
}

// TensorConv is a conv2d row of the tensor benchmark: a half-precision
// convolution of UNetShapes (conv.go) in NCHW or NHWC, through
// Tensor.Conv2d (PyTorch: F.conv2d, channels_last for NHWC).
type TensorConv struct {
	Name  string
	Shape ConvShape
	NHWC  bool
}

// TensorConvs are the conv2d rows: each of UNetShapes in NCHW and in
// NHWC, the batch divided by scale (at least 1).
func TensorConvs(scale int) []TensorConv {
	var out []TensorConv
	for _, s := range UNetShapes {
		s.N = max(1, s.N/max(scale, 1))
		for _, nhwc := range []bool{false, true} {
			f := map[bool]string{false: "NCHW", true: "NHWC"}[nhwc]
			out = append(out, TensorConv{Shape: s, NHWC: nhwc,
				Name: fmt.Sprintf("conv2d %dx%d %dx%dx%dx%d, %d filters, f16 %s", s.R, s.S, s.N, s.C, s.H, s.W, s.K, f)})
		}
	}
	return out
}

// inputDims and weightDims are the tensors' shapes in the row's format.
func (c TensorConv) inputDims() []int {
	s := c.Shape
	if c.NHWC {
		return []int{s.N, s.H, s.W, s.C}
	}
	return []int{s.N, s.C, s.H, s.W}
}

func (c TensorConv) weightDims() []int {
	s := c.Shape
	if c.NHWC {
		return []int{s.K, s.R, s.S, s.C}
	}
	return []int{s.K, s.C, s.R, s.S}
}

func (c TensorConv) params() candle.Conv2dParams {
	p := candle.Conv2dParams{Stride: [2]int{c.Shape.Stride, c.Shape.Stride}, Padding: [2]int{c.Shape.Pad, c.Shape.Pad}}
	if c.NHWC {
		p.Format = candle.NHWC
	}
	return p
}

// TorchConvSpec is TensorConvs(scale) as torch_tensor.py's --convs
// argument: a JSON list of the rows' names, shapes and formats.
func TorchConvSpec(scale int) string {
	var js []map[string]any
	for _, c := range TensorConvs(scale) {
		s := c.Shape
		js = append(js, map[string]any{"name": c.Name, "n": s.N, "c": s.C, "h": s.H, "w": s.W, "k": s.K, "r": s.R, "s": s.S,
			"pad": s.Pad, "stride": s.Stride, "nhwc": c.NHWC})
	}
	b, _ := json.Marshal(js)
	return string(b)
}

// TinyAdd is the small op of the end-to-end measurement: a + b of n f32
// elements through Tensor.Add, the output allocated (from the pool) and
// closed each time.
func (b *Tensors) TinyAdd(n int) (*TensorOp, error) {
	x, err := b.rand(candle.F32, n)
	if err != nil {
		return nil, err
	}
	y, err := b.rand(candle.F32, n)
	if err != nil {
		x.Close()
		return nil, err
	}
	return &TensorOp{Name: fmt.Sprintf("Tensor.Add of %d f32, end to end", n), Run: func() (*candle.Tensor, error) { return x.Add(y) },
		close: func() { x.Close(); y.Close() }}, nil
}

// FirstUse measures a cold compile of the whole kernel set into a fresh
// cache folder and a warm start from it (a new cache on the same folder,
// as a new process has): the time to have every module loaded on the
// device, and when each module of the cold compile was ready.
func (b *Tensors) FirstUse() (cold, warm time.Duration, modules []candle.ModuleReady, err error) {
	dir, err := os.MkdirTemp("", "rocm-go-bench-kernels")
	if err != nil {
		return 0, 0, nil, err
	}
	defer os.RemoveAll(dir)
	for i := range 2 {
		kc, err := candle.NewKernelCache(dir)
		if err != nil {
			return 0, 0, nil, err
		}
		start := time.Now()
		err = kc.WarmEach(b.Dev, func(m candle.ModuleReady) {
			if i == 0 {
				modules = append(modules, m)
			}
		})
		d := time.Since(start)
		kc.Close()
		if err != nil {
			return 0, 0, nil, err
		}
		if i == 0 {
			cold = d
		} else {
			warm = d
		}
	}
	return cold, warm, modules, nil
}

// CopyRate is the device's device-to-device copy rate in GB/s (hipMemcpy
// on the device's stream), counting bytes read and written: the roofline of
// the memory-bound ops, measured in the same run.
func (b *Tensors) CopyRate(bytes int) (float64, error) {
	src, dst, err := b.copyPair(bytes)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	defer dst.Close()
	d, err := b.medianCopy(func(s *hip.Stream) error { return dst.CopyFromAsync(src, s) })
	if err != nil {
		return 0, err
	}
	return float64(2*bytes) / d.Seconds() / 1e9, nil
}

// CopyTime is the device time of a device-to-device copy that reads and
// writes bytes in all (bytes/2 each way), timed as DeviceTime times an op:
// the roofline of an op of those bytes, which a copy of a few tens of MiB
// reaches less of than CopyRate's 1 GiB (the device's ramp and drain).
// Median of reps.
func (b *Tensors) CopyTime(bytes int64, reps int) (time.Duration, error) {
	src, dst, err := b.copyPair(int(bytes/2+15) &^ 15)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	defer dst.Close()
	return Median(reps, func() (time.Duration, error) {
		return b.queuedTime(func(s *hip.Stream) error { return dst.CopyFromAsync(src, s) })
	})
}

// copyPair is a source of n bytes, set, and a destination of n bytes.
func (b *Tensors) copyPair(n int) (src, dst *hip.Buffer, err error) {
	if src, err = b.Dev.HIP().Malloc(n); err != nil {
		return nil, nil, err
	}
	if dst, err = b.Dev.HIP().Malloc(n); err == nil {
		if err = src.Memset(1); err == nil {
			return src, dst, nil
		}
		dst.Close()
	}
	src.Close()
	return nil, nil, err
}

// medianCopy is the median device time of 15 copies (after a warm-up)
// that queue on the device's stream, between events.
func (b *Tensors) medianCopy(queue func(*hip.Stream) error) (time.Duration, error) {
	s := b.Dev.Stream()
	return Median(15, func() (time.Duration, error) {
		if err := b.start.Record(s); err != nil {
			return 0, err
		}
		if err := queue(s); err != nil {
			return 0, err
		}
		if err := b.end.Record(s); err != nil {
			return 0, err
		}
		if err := b.end.Synchronize(); err != nil {
			return 0, err
		}
		return hip.ElapsedTime(b.start, b.end)
	})
}
