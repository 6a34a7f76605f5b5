package bench

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/nn"
	"github.com/rocm-go/rocm/flashattn"
)

// attnShape is an attention row's problem.
type attnShape struct {
	dt                candle.DType
	b, hq, hkv, sq, s int // s: the keys
	d                 int
	causal            bool
}

func (a attnShape) name() string {
	h := fmt.Sprintf("h%d", a.hq)
	if a.hkv != a.hq {
		h = fmt.Sprintf("h%d/%d (GQA)", a.hq, a.hkv)
	}
	if a.sq == 1 {
		return fmt.Sprintf("decode attention %s b%d %s kv%d d%d", a.dt, a.b, h, a.s, a.d)
	}
	c := ""
	if a.causal {
		c = " causal"
	}
	if a.sq != a.s {
		return fmt.Sprintf("attention %s b%d %s s%d×%d d%d%s", a.dt, a.b, h, a.sq, a.s, a.d, c)
	}
	return fmt.Sprintf("attention %s b%d %s s%d d%d%s", a.dt, a.b, h, a.s, a.d, c)
}

// AttentionShapes are the rows of issue 13's table, the sequence lengths
// divided by scale (at least 128): f16 b4 h32 s4096 d128 non-causal and
// causal, GQA bf16 32q/8kv causal, decode f16 b8 h32 over 4096 keys; then
// Stable Diffusion's UNet attention with guidance (batch 2): SD 1.5's
// self-attention at 512² (8 heads of 40 over 64×64 latents, 80 over
// 32×32, 160 over 16×16) and its cross-attention to 77 text tokens, and
// SDXL's at 1024² (heads of 64: 10 over 64×64, 20 over 32×32).
func attentionShapes(scale int) []attnShape {
	sc := max(scale, 1)
	s := max(4096/sc, 128)
	px := func(n int) int { return max(n/sc, 64) }
	return []attnShape{
		{candle.F16, 4, 32, 32, s, s, 128, false},
		{candle.F16, 4, 32, 32, s, s, 128, true},
		{candle.BF16, 4, 32, 8, s, s, 128, true},
		{candle.F16, 8, 32, 32, 1, s, 128, false},
		{candle.F16, 2, 8, 8, px(4096), px(4096), 40, false},
		{candle.F16, 2, 8, 8, px(4096), 77, 40, false},
		{candle.F16, 2, 8, 8, px(1024), px(1024), 80, false},
		{candle.F16, 2, 8, 8, px(256), px(256), 160, false},
		{candle.F16, 2, 10, 10, px(4096), px(4096), 64, false},
		{candle.F16, 2, 20, 20, px(1024), px(1024), 64, false},
	}
}

// TorchAttentionSpec is the attention rows as torch_tensor.py's
// --attention argument: a JSON list of names and shapes.
func TorchAttentionSpec(scale int) string {
	var js []map[string]any
	for _, a := range attentionShapes(scale) {
		js = append(js, map[string]any{"name": a.name(), "dtype": a.dt.String(), "b": a.b, "hq": a.hq, "hkv": a.hkv,
			"sq": a.sq, "s": a.s, "d": a.d, "causal": a.causal})
	}
	b, _ := json.Marshal(js)
	return string(b)
}

// bhsd is a (b, h, s, d) tensor of uniform numbers, and its BSHD view.
func (b *Tensors) bhsd(dt candle.DType, n, h, s, d int) (t, view *candle.Tensor, err error) {
	t, err = b.rand(dt, n, h, s, d)
	if err != nil {
		return nil, nil, err
	}
	view, err = t.Transpose(1, 2)
	if err != nil {
		t.Close()
		return nil, nil, err
	}
	return t, view, nil
}

// AttentionOps makes the attention rows with their inputs: package
// flashattn through candle/nn.ScaledDotProductAttention on (b, h, s, d)
// tensors seen as BSHD (PyTorch's scaled_dot_product_attention takes the
// same tensors). A prefill row's Flops count FlashAttention's convention,
// 4·b·h·s_q·s_kv·d, halved when causal, and its Target is issue 13's 0.5 of
// PyTorch; the decode row has Bytes (K and V, read once) instead, measured
// in GB/s, and a Target of 0.9 of PyTorch's bandwidth.
func (b *Tensors) AttentionOps(scale int) ([]*TensorOp, error) {
	var ops []*TensorOp
	for _, a := range attentionShapes(scale) {
		var ts []*candle.Tensor
		var err error
		mk := func(h, s int) *candle.Tensor {
			if err != nil {
				return nil
			}
			var t, v *candle.Tensor
			if t, v, err = b.bhsd(a.dt, a.b, h, s, a.d); err != nil {
				return nil
			}
			ts = append(ts, t, v)
			return v
		}
		q, k, v := mk(a.hq, a.sq), mk(a.hkv, a.s), mk(a.hkv, a.s)
		if err != nil {
			for _, t := range ts {
				t.Close()
			}
			for _, o := range ops {
				o.Close()
			}
			return nil, fmt.Errorf("%s: inputs: %w", a.name(), err)
		}
		p := flashattn.Params{Causal: a.causal}
		op := &TensorOp{Name: a.name(), Run: func() (*candle.Tensor, error) { return nn.ScaledDotProductAttention(q, k, v, p) },
			close: func() {
				for _, t := range ts {
					t.Close()
				}
			}}
		target := 0.5
		if a.sq == 1 {
			op.Bytes = 2 * int64(a.b*a.hkv*a.s*a.d*a.dt.Size())
			target = 0.9
		} else {
			op.Flops = 4 * int64(a.b*a.hq) * int64(a.sq) * int64(a.s) * int64(a.d)
			if a.causal {
				op.Flops /= 2
			}
		}
		op.Target = target
		ops = append(ops, op)
	}
	return ops, nil
}

// Unfused is attention written as candle's users write it without
// flashattn: scores = (q·scale)·kᵀ, softmax over the last dim, times v, on
// (b, h, s, d) tensors; against the same attention through flashattn on
// the same inputs, for time and device memory.
type Unfused struct {
	Name           string
	Flops          int64
	Unfused, Flash *TensorOp
	// Inputs is the bytes of q, k and v.
	Inputs int64
	peak   int64 // the most InUse seen during the last run, beyond what was in use before
	dev    *candle.HIPDevice
}

// UnfusedAttention makes the comparison at f16 b4 h32 s4096 d128 (s
// divided by scale, at least 128), non-causal.
func (b *Tensors) UnfusedAttention(scale int) (*Unfused, error) {
	a := attentionShapes(scale)[0]
	var ts []*candle.Tensor
	closeAll := func() {
		for _, t := range ts {
			t.Close()
		}
	}
	var views [3]*candle.Tensor
	for i := range views {
		t, v, err := b.bhsd(a.dt, a.b, a.hq, a.s, a.d)
		if err != nil {
			closeAll()
			return nil, err
		}
		ts = append(ts, t, v)
		views[i] = v
	}
	q, k, v := ts[0], ts[2], ts[4] // (b, h, s, d)
	kt, err := k.T()
	if err != nil {
		closeAll()
		return nil, err
	}
	ts = append(ts, kt)
	u := &Unfused{Name: fmt.Sprintf("attention %s b%d h%d s%d d%d: candle unfused (matmul, softmax, matmul) vs flashattn", a.dt, a.b, a.hq, a.s, a.d),
		Flops: 4 * int64(a.b*a.hq) * int64(a.s) * int64(a.s) * int64(a.d), Inputs: 3 * int64(a.b*a.hq*a.s*a.d*a.dt.Size()), dev: b.Dev}
	scale2 := 1 / math.Sqrt(float64(a.d))
	u.Unfused = &TensorOp{Name: "unfused", Flops: u.Flops, Run: func() (*candle.Tensor, error) {
		base := u.dev.MemoryStats().InUse
		u.peak = 0
		sample := func() { u.peak = max(u.peak, u.dev.MemoryStats().InUse-base) }
		qs, err := q.Affine(scale2, 0)
		if err != nil {
			return nil, err
		}
		sample()
		s, err := qs.Matmul(kt)
		sample()
		qs.Close()
		if err != nil {
			return nil, err
		}
		pr, err := s.SoftmaxLastDim()
		sample()
		s.Close()
		if err != nil {
			return nil, err
		}
		out, err := pr.Matmul(v)
		sample()
		pr.Close()
		return out, err
	}, close: closeAll}
	u.Flash = &TensorOp{Name: "flash", Flops: u.Flops, Run: func() (*candle.Tensor, error) {
		base := u.dev.MemoryStats().InUse
		out, err := nn.ScaledDotProductAttention(views[0], views[1], views[2], flashattn.Params{})
		u.peak = u.dev.MemoryStats().InUse - base
		return out, err
	}}
	return u, nil
}

// Peak is the most device memory (candle's MemoryStats: live storages)
// that op's last run held beyond its inputs, sampled after each of its
// steps.
func (u *Unfused) Peak() int64 { return u.peak }

// Close frees the inputs.
func (u *Unfused) Close() { u.Unfused.Close() }
