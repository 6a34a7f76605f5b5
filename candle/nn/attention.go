package nn

import (
	"math"
	"sync"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/flashattn"
)

// ScaledDotProductAttention is softmax(q·kᵀ·scale + masks)·v over BSHD
// tensors: q (b, s_q, h_q, d), k and v (b, s_kv, h_kv, d), h_q a multiple
// of h_kv (GQA/MQA), d a multiple of 8 up to 256; the output is (b, s_q,
// h_q, d), contiguous. p gives the scale (0: 1/√d), the causal mask
// (bottom-right aligned when s_q ≠ s_kv), a sliding window, ALiBi slopes,
// soft-capping and split-KV (flashattn.Params); p.LSE must be zero
// (AttentionWithLSE returns the log-sum-exp).
//
// F16, BF16 and F32 tensors. On a HIP device it is one fused kernel of
// package flashattn, in float32 arithmetic, that never materialises the
// s_q × s_kv scores; inputs whose head dim is not contiguous are copied
// first, other strides are read in place (a q narrowed out of a fused
// projection, a (b, h, s, d) tensor transposed to BSHD). On the CPU it is
// flashattn.Reference: float64, one query row of scores at a time.
func ScaledDotProductAttention(q, k, v *candle.Tensor, p flashattn.Params) (*candle.Tensor, error) {
	out, _, err := attention("ScaledDotProductAttention", q, k, v, p, false)
	return out, err
}

// AttentionWithLSE is ScaledDotProductAttention that also returns the
// natural log-sum-exp of each row's logits, F32 (b, h_q, s_q): -inf for a
// row that sees no key (whose output is zero).
func AttentionWithLSE(q, k, v *candle.Tensor, p flashattn.Params) (out, lse *candle.Tensor, err error) {
	return attention("AttentionWithLSE", q, k, v, p, true)
}

var faDTypes = map[candle.DType]flashattn.DType{candle.F16: flashattn.F16, candle.BF16: flashattn.BF16, candle.F32: flashattn.F32}

func attention(op string, q, k, v *candle.Tensor, p flashattn.Params, wantLSE bool) (out, lse *candle.Tensor, err error) {
	for _, x := range []struct {
		name string
		t    *candle.Tensor
	}{{"q", q}, {"k", k}, {"v", v}} {
		if x.t == nil {
			return nil, nil, pkg.Errorf(op, candle.ErrArgument, "%s is nil", x.name)
		}
		if x.t.Rank() != 4 {
			return nil, nil, pkg.Errorf(op, candle.ErrShape, "%s is %v: want rank 4, (batch, seq, heads, head dim)", x.name, x.t.Shape())
		}
		if x.t.DType() != q.DType() {
			return nil, nil, pkg.Errorf(op, candle.ErrDType, "%s is %s and q %s: convert one with ToDType", x.name, x.t.DType(), q.DType())
		}
		if x.t.Device() != q.Device() {
			return nil, nil, pkg.Errorf(op, candle.ErrDevice, "%s is on %s and q on %s: move one with ToDevice", x.name, x.t.Device(), q.Device())
		}
	}
	dt, ok := faDTypes[q.DType()]
	if !ok {
		return nil, nil, pkg.Errorf(op, candle.ErrDType, "%s: attention takes f16, bf16 or f32 (convert with ToDType)", q.DType())
	}
	if p.LSE != 0 {
		return nil, nil, pkg.Errorf(op, candle.ErrArgument, "Params.LSE is set: on tensors, AttentionWithLSE returns the log-sum-exp")
	}
	if d, ok := q.Device().(*candle.HIPDevice); ok {
		return attentionHIP(op, d, dt, q, k, v, p, wantLSE)
	}
	return attentionCPU(op, q, k, v, p, wantLSE)
}

// handles are the flashattn handles of the HIP devices, on each device's
// stream.
var handles struct {
	mu sync.Mutex
	m  map[*candle.HIPDevice]*flashattn.Handle
}

func handle(d *candle.HIPDevice) (*flashattn.Handle, error) {
	handles.mu.Lock()
	defer handles.mu.Unlock()
	if h := handles.m[d]; h != nil {
		return h, nil
	}
	h, err := flashattn.NewHandle(d.Stream())
	if err != nil {
		return nil, err
	}
	if handles.m == nil {
		handles.m = map[*candle.HIPDevice]*flashattn.Handle{}
	}
	handles.m[d] = h
	return h, nil
}

// headContiguous is t's device address and layout with its last (head)
// dim contiguous: a copy, tmp, when it is not, which the caller closes
// after queuing the call that reads it.
func headContiguous(t *candle.Tensor) (ptr candle.DevicePtr, l candle.Layout, tmp *candle.Tensor, err error) {
	l = t.Layout()
	if last := t.Rank() - 1; t.Dim(last) > 1 && l.Stride[last] != 1 {
		if tmp, err = t.Copy(); err != nil {
			return 0, candle.Layout{}, nil, err
		}
		t, l = tmp, tmp.Layout()
	}
	if ptr, err = t.DevicePtr(); err != nil {
		if tmp != nil {
			tmp.Close()
		}
		return 0, candle.Layout{}, nil, err
	}
	return ptr, l, tmp, nil
}

// operand is a rank-4 tensor as flashattn takes it (headContiguous).
func operand(t *candle.Tensor, dt flashattn.DType) (flashattn.Tensor, *candle.Tensor, error) {
	ptr, l, tmp, err := headContiguous(t)
	if err != nil {
		return flashattn.Tensor{}, nil, err
	}
	s := l.Shape
	return flashattn.Tensor{Ptr: ptr, DType: dt, Shape: [4]int{s[0], s[1], s[2], s[3]},
		Stride: [4]int{l.Stride[0], l.Stride[1], l.Stride[2], 1}}, tmp, nil
}

func attentionHIP(op string, d *candle.HIPDevice, dt flashattn.DType, q, k, v *candle.Tensor, p flashattn.Params, wantLSE bool) (out, lse *candle.Tensor, err error) {
	qs := q.Shape()
	b, sq, hq := qs[0], qs[1], qs[2]
	if out, err = candle.Empty(d, q.DType(), qs...); err != nil {
		return nil, nil, err
	}
	if wantLSE {
		if lse, err = candle.Empty(d, candle.F32, b, hq, sq); err != nil {
			out.Close()
			return nil, nil, err
		}
	}
	fail := func(err error) (*candle.Tensor, *candle.Tensor, error) {
		out.Close()
		if lse != nil {
			lse.Close()
		}
		return nil, nil, err
	}
	if out.Elems() == 0 {
		return out, lse, nil
	}
	if k.Elems() == 0 {
		// No keys (s_kv 0): every row is zero, its log-sum-exp -inf;
		// flashattn checks the same shapes first.
		if err := checkEmptyKeys(op, q, k, v); err != nil {
			return fail(err)
		}
		z, err := candle.Zeros(d, q.DType(), qs...)
		if err != nil {
			return fail(err)
		}
		out.Close()
		out = z
		if lse != nil {
			l, err := candle.Full(d, candle.F32, math.Inf(-1), b, hq, sq)
			if err != nil {
				return fail(err)
			}
			lse.Close()
			lse = l
		}
		return out, lse, nil
	}
	h, err := handle(d)
	if err != nil {
		return fail(pkg.Wrap(op, err))
	}
	var ops [3]flashattn.Tensor
	for i, t := range []*candle.Tensor{q, k, v} {
		x, tmp, err := operand(t, dt)
		if err != nil {
			return fail(err)
		}
		if tmp != nil {
			// Closed after the call is queued: the device's memory
			// pool reuses it only for work queued later.
			defer tmp.Close()
		}
		ops[i] = x
	}
	o, _, err := operand(out, dt) // out is contiguous: never a copy
	if err != nil {
		return fail(err)
	}
	if lse != nil {
		if p.LSE, err = lse.DevicePtr(); err != nil {
			return fail(err)
		}
	}
	if _, err := h.Forward(ops[0], ops[1], ops[2], o, p); err != nil {
		return fail(pkg.Wrap(op, err))
	}
	return out, lse, nil
}

// checkEmptyKeys checks the shapes of a call without keys, as flashattn
// would.
func checkEmptyKeys(op string, q, k, v *candle.Tensor) error {
	qs, ks := q.Shape(), k.Shape()
	if !ks.Equal(v.Shape()) || ks[0] != qs[0] || ks[3] != qs[3] || ks[2] == 0 || qs[2]%ks[2] != 0 || qs[3]%8 != 0 || qs[3] > flashattn.MaxHeadDim {
		return pkg.Errorf(op, candle.ErrShape, "q %v, k %v, v %v: want q (b, s_q, h_q, d), k and v (b, s_kv, h_kv, d), h_q a multiple of h_kv, d a multiple of 8 up to %d", qs, ks, v.Shape(), flashattn.MaxHeadDim)
	}
	return nil
}

// hostTensor reads a rank-4 tensor into float64 on the host.
func hostTensor(t *candle.Tensor) (flashattn.HostTensor, error) {
	c, err := t.ToDType(candle.F64)
	if err != nil {
		return flashattn.HostTensor{}, err
	}
	defer c.Close()
	data, err := candle.ToSlice[float64](c)
	if err != nil {
		return flashattn.HostTensor{}, err
	}
	s := t.Shape()
	return flashattn.HostTensor{Data: data, Shape: [4]int{s[0], s[1], s[2], s[3]}}, nil
}

func attentionCPU(op string, q, k, v *candle.Tensor, p flashattn.Params, wantLSE bool) (out, lse *candle.Tensor, err error) {
	var hs [3]flashattn.HostTensor
	for i, t := range []*candle.Tensor{q, k, v} {
		if hs[i], err = hostTensor(t); err != nil {
			return nil, nil, err
		}
	}
	d := hs[0].Shape[3]
	if d%8 != 0 || d > flashattn.MaxHeadDim {
		// The same contract as on a GPU.
		return nil, nil, pkg.Errorf(op, candle.ErrShape, "q has head dim %d: want a multiple of 8 from 8 to %d", d, flashattn.MaxHeadDim)
	}
	o, l, err := flashattn.Reference(hs[0], hs[1], hs[2], p)
	if err != nil {
		return nil, nil, pkg.Wrap(op, err)
	}
	dev := q.Device()
	o64, err := candle.FromSlice(dev, o.Data, o.Shape[:]...)
	if err != nil {
		return nil, nil, err
	}
	defer o64.Close()
	if out, err = o64.ToDType(q.DType()); err != nil {
		return nil, nil, err
	}
	if wantLSE {
		l32 := make([]float32, len(l))
		for i, x := range l {
			l32[i] = float32(x)
		}
		s := hs[0].Shape
		if lse, err = candle.FromSlice(dev, l32, s[0], s[2], s[1]); err != nil {
			out.Close()
			return nil, nil, err
		}
	}
	return out, lse, nil
}
