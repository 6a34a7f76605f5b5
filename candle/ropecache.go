package candle

import "github.com/rocm-go/rocm/hip"

// RoPECache is a decoder layer's rotary embeddings and KV-cache writes in
// one op. t (T, hq+2·hkv, d) holds T tokens' heads as a fused q/k/v
// projection leaves them: hq query heads, then hkv key heads, then hkv
// value heads. The query and key heads are rotated as RoPETHD rotates them
// (half-split pairs; cos and sin (T, d/2), each token's angles); the
// rotated keys and the values are written into rows slots[t] (U32 or I64,
// T of them) of kc and vc, (rows, hkv, d) each, and the rotated queries
// are returned, (T, hq, d). On a HIP device, for contiguous operands and
// U32 slots, it is one kernel instead of a rope and two IndexAssigns; a
// slot out of range is an error on the CPU and writes nothing on a GPU,
// as with IndexAssign.
func (t *Tensor) RoPECache(cos, sin *Tensor, queryHeads int, slots, kc, vc *Tensor) (*Tensor, error) {
	const op = "Tensor.RoPECache"
	if err := alive(op, t, cos, sin, slots, kc, vc); err != nil {
		return nil, err
	}
	hkv, err := qkvHeads(op, t, cos, sin, queryHeads)
	if err != nil {
		return nil, err
	}
	n, d := t.layout.Shape[0], t.layout.Shape[2]
	if !slots.layout.Shape.Equal(Shape{n}) {
		return nil, pkg.Errorf(op, ErrShape, "slots are %v: want [%d], a row of the caches a token", slots.layout.Shape, n)
	}
	if !kc.layout.Shape.Equal(vc.layout.Shape) || kc.Rank() != 3 || kc.layout.Shape[1] != hkv || kc.layout.Shape[2] != d {
		return nil, pkg.Errorf(op, ErrShape, "the caches are %v and %v: want one shape (rows, %d, %d)", kc.layout.Shape, vc.layout.Shape, hkv, d)
	}
	for _, x := range []*Tensor{cos, sin, kc, vc} {
		if x.DType() != t.DType() {
			return nil, pkg.Errorf(op, ErrDType, "qkv is %s, an operand %s: convert it with ToDType", t.DType(), x.DType())
		}
		if err := sameDevice(op, t.st.dev, x); err != nil {
			return nil, err
		}
	}
	if err := sameDevice(op, t.st.dev, slots); err != nil {
		return nil, err
	}
	if be, ok := t.st.dev.backend().(ropeCacher); ok && slots.DType() == U32 && t.DType() != F64 &&
		allContiguous(t, cos, sin, slots, kc, vc) {
		q, err := Empty(t.st.dev, t.DType(), n, queryHeads, d)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return q, nil
		}
		if err := be.ropeCache(t.v(), cos.v(), sin.v(), slots.v(), kc.v(), vc.v(), q.st, queryHeads, hkv); err != nil {
			q.Close()
			return nil, pkg.Wrap(op, err)
		}
		return q, nil
	}
	q, k, v, err := t.RoPEQKV(cos, sin, queryHeads)
	if err != nil {
		return nil, err
	}
	defer k.Close()
	defer v.Close()
	if err := kc.IndexAssign(slots, k, 0); err != nil {
		q.Close()
		return nil, err
	}
	if err := vc.IndexAssign(slots, v, 0); err != nil {
		q.Close()
		return nil, err
	}
	return q, nil
}

// RoPEQKV splits a fused projection's heads and rotates the query and key
// heads: t (T, hq+2·hkv, d), cos and sin as RoPECache takes them. q (T,
// hq, d) comes back contiguous, k (T, hkv, d) (the rotated key heads) and
// v (T, hkv, d) as views; the caller closes all three. RoPECache is this
// and the two cache writes, in one kernel where it can.
func (t *Tensor) RoPEQKV(cos, sin *Tensor, queryHeads int) (q, k, v *Tensor, err error) {
	const op = "Tensor.RoPEQKV"
	if err := alive(op, t, cos, sin); err != nil {
		return nil, nil, nil, err
	}
	hkv, err := qkvHeads(op, t, cos, sin, queryHeads)
	if err != nil {
		return nil, nil, nil, err
	}
	hq := queryHeads
	sc := NewScope()
	defer sc.Close()
	x, err := sc.Adopt(t)
	if err != nil {
		return nil, nil, nil, err
	}
	qk, err := x.Narrow(1, 0, hq+hkv)
	if err == nil {
		qk, err = qk.Unsqueeze(0)
	}
	if err == nil {
		qk, err = qk.RoPETHD(cos, sin)
	}
	if err == nil {
		qk, err = qk.Squeeze(0)
	}
	if err == nil {
		q, err = qk.Narrow(1, 0, hq)
	}
	if err == nil {
		q, err = q.Contiguous()
	}
	if err == nil {
		k, err = qk.Narrow(1, hq, hkv)
	}
	if err == nil {
		v, err = x.Narrow(1, hq+hkv, hkv)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	return sc.Keep(q), sc.Keep(k), sc.Keep(v), nil
}

// qkvHeads checks a fused projection's heads t (T, hq+2·hkv, d, d even)
// and the angles cos and sin (T, d/2) for RoPECache and RoPEQKV, and
// returns hkv.
func qkvHeads(op string, t, cos, sin *Tensor, queryHeads int) (int, error) {
	s := t.layout.Shape
	if len(s) != 3 {
		return 0, pkg.Errorf(op, ErrShape, "qkv is %v: want (tokens, query heads + 2·kv heads, head dim)", s)
	}
	n, h, d := s[0], s[1], s[2]
	hkv := (h - queryHeads) / 2
	if queryHeads < 1 || hkv < 1 || queryHeads+2*hkv != h {
		return 0, pkg.Errorf(op, ErrArgument, "%d query heads of %d: the rest must be as many key heads as value heads, at least one each", queryHeads, h)
	}
	if d%2 != 0 {
		return 0, pkg.Errorf(op, ErrShape, "qkv is %v: the head dim %d is odd; rotary pairs need an even one", s, d)
	}
	for _, c := range []*Tensor{cos, sin} {
		if !c.layout.Shape.Equal(Shape{n, d / 2}) {
			return 0, pkg.Errorf(op, ErrShape, "cos and sin are %v and %v: want [%d %d] (tokens, d/2)", cos.layout.Shape, sin.layout.Shape, n, d/2)
		}
	}
	return hkv, nil
}

// allContiguous reports whether every tensor's layout is contiguous.
func allContiguous(ts ...*Tensor) bool {
	for _, x := range ts {
		if !x.layout.IsContiguous() {
			return false
		}
	}
	return true
}

// ropeCacher is a backend with RoPECache's kernel.
type ropeCacher interface {
	ropeCache(qkv, cos, sin, slots, kc, vc view, q *Storage, hq, hkv int) error
}

func (b *hipBackend) ropeCache(qkv, cos, sin, slots, kc, vc view, q *Storage, hq, hkv int) error {
	s := qkv.l.Shape
	n, h, d := s[0], s[1], s[2]
	pairs := n * h * d / 2
	return b.launch(kernelNames.ropeCache[q.dtype], b.grid(pairs, 1), block1D, func(a *hip.Args) {
		a.Uint64(uint64(n)).Uint64(uint64(hq)).Uint64(uint64(hkv)).Uint64(uint64(d)).Uint64(uint64(kc.l.Shape[0]))
		a.Ptr(ptr(qkv)).Ptr(ptr(cos)).Ptr(ptr(sin)).Ptr(ptr(slots)).Ptr(ptr(kc)).Ptr(ptr(vc)).Ptr(storagePtr(q))
	})
}
