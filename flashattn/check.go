package flashattn

import (
	"math"

	"github.com/rocm-go/rocm/hip"

	"github.com/rocm-go/rocm/errs"
)

// check of one operand: pointer, dtype, shape, strides.
func checkTensor(op, name string, t Tensor, dt DType) error {
	if t.Ptr == 0 {
		return pkg.Errorf(op, errs.ErrArgument, "%s has a nil pointer", name)
	}
	if t.DType.Size() == 0 {
		return pkg.Errorf(op, errs.ErrDType, "%s is %v: want F16, BF16 or F32", name, t.DType)
	}
	if t.DType != dt {
		return pkg.Errorf(op, errs.ErrDType, "%s is %v and q is %v: convert one so that every operand has q's dtype", name, t.DType, dt)
	}
	for i, d := range t.Shape {
		if d < 0 || d > math.MaxInt32 {
			return pkg.Errorf(op, errs.ErrShape, "%s has shape %v: dim %d is out of range", name, t.Shape, i)
		}
	}
	if t.Stride != [4]int{} {
		if t.Stride[3] != 1 {
			return pkg.Errorf(op, errs.ErrShape, "%s has strides %v: the head dim must be contiguous (stride 1); copy it first", name, t.Stride)
		}
		for i, s := range t.Stride[:3] {
			if s < 0 {
				return pkg.Errorf(op, errs.ErrShape, "%s has strides %v: dim %d's stride is negative", name, t.Stride, i)
			}
		}
	}
	if t.Ptr%hip.DevicePtr(t.DType.Size()) != 0 {
		return pkg.Errorf(op, errs.ErrArgument, "%s at %#x is not aligned to its %v elements", name, uint64(t.Ptr), t.DType)
	}
	return nil
}

// checkParams checks what Params says, for h_q query heads.
func checkParams(op string, p *Params, hq int) error {
	if math.IsNaN(p.Scale) || math.IsInf(p.Scale, 0) || math.Abs(p.Scale) > math.MaxFloat32 {
		return pkg.Errorf(op, errs.ErrArgument, "Params.Scale %v: want a finite float32, or 0 for 1/√d", p.Scale)
	}
	if math.IsNaN(p.SoftCap) || p.SoftCap < 0 || p.SoftCap > math.MaxFloat32 {
		return pkg.Errorf(op, errs.ErrArgument, "Params.SoftCap %v: want a positive finite float32, or 0 for none", p.SoftCap)
	}
	if w := p.Window; w != nil && (w.Left > math.MaxInt32 || w.Right > math.MaxInt32) {
		return pkg.Errorf(op, errs.ErrArgument, "Params.Window %+v: a side is larger than an int32 counts", *w)
	}
	if p.AlibiSlopes != nil {
		if len(p.AlibiSlopes) != hq {
			return pkg.Errorf(op, errs.ErrArgument, "Params.AlibiSlopes has %d slopes for %d query heads: give one per query head", len(p.AlibiSlopes), hq)
		}
		if hq > MaxAlibiHeads {
			return pkg.Errorf(op, errs.ErrArgument, "Params.AlibiSlopes: %d query heads; ALiBi takes at most %d", hq, MaxAlibiHeads)
		}
		for h, s := range p.AlibiSlopes {
			if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
				return pkg.Errorf(op, errs.ErrArgument, "Params.AlibiSlopes[%d] is %v: want a finite slope", h, s)
			}
		}
	}
	if p.Splits < 0 || p.Splits > MaxSplits {
		return pkg.Errorf(op, errs.ErrArgument, "Params.Splits %d: want 0 (automatic), 1 (none) up to %d", p.Splits, MaxSplits)
	}
	if p.LSE%4 != 0 {
		return pkg.Errorf(op, errs.ErrArgument, "Params.LSE at %#x is not aligned to float32", uint64(p.LSE))
	}
	return nil
}

// overlaps reports whether two operands' byte ranges meet.
func overlaps(a, b Tensor) bool {
	if a.span() == 0 || b.span() == 0 {
		return false
	}
	return a.Ptr < b.Ptr+hip.DevicePtr(b.span()) && b.Ptr < a.Ptr+hip.DevicePtr(a.span())
}

// checkRotary checks Params.Rotary for a plan whose kernel is (paged) or
// is not attn_decode_paged.
func checkRotary(op string, pr *problem, r *Rotary, paged bool) error {
	if !paged || pr.maxSQ != 1 { // paged: pagedStep's launch, a paged cache's
		return pkg.Errorf(op, errs.ErrUnsupported, "Params.Rotary: only a Decode of one query a sequence that runs attn_decode_paged takes it (F16 or BF16, a paged cache of power-of-two pages, aligned rows, head dim 32, 64, 128 or 256, no window, soft-capping or ALiBi); rotate q and k before the call")
	}
	dt, d := pr.q.DType, pr.d
	for _, x := range []struct {
		name string
		t    Tensor
	}{{"Rotary.NewK", r.NewK}, {"Rotary.NewV", r.NewV}} {
		if err := checkTensor(op, x.name, x.t, dt); err != nil {
			return err
		}
		if want := [4]int{pr.batch, 1, pr.hkv, d}; x.t.Shape != want {
			return pkg.Errorf(op, errs.ErrShape, "%s has shape %v: want %v (batch, 1, h_kv, d)", x.name, x.t.Shape, want)
		}
		st := x.t.strides()
		if x.t.Ptr%16 != 0 || st[0]*dt.Size()%16 != 0 || st[2]*dt.Size()%16 != 0 {
			return pkg.Errorf(op, errs.ErrArgument, "%s at %#x with strides %v: want 16-byte aligned rows", x.name, uint64(x.t.Ptr), st)
		}
	}
	if r.Cos == 0 || r.Sin == 0 || r.Cos%16 != 0 || r.Sin%16 != 0 || r.CosStride < d/2 || r.CosStride*dt.Size()%16 != 0 {
		return pkg.Errorf(op, errs.ErrArgument, "Rotary.Cos %#x, Sin %#x, CosStride %d: want 16-byte aligned rows of at least d/2 = %d angles", uint64(r.Cos), uint64(r.Sin), r.CosStride, d/2)
	}
	return nil
}

// checkQKV checks the operands that every entry point shares: dtypes,
// head dims, heads, and out against q.
func checkQKV(op string, q, k, v, out Tensor) error {
	dt := q.DType
	if err := checkTensor(op, "q", q, dt); err != nil {
		return err
	}
	for _, x := range []struct {
		name string
		t    Tensor
	}{{"k", k}, {"v", v}, {"out", out}} {
		if err := checkTensor(op, x.name, x.t, dt); err != nil {
			return err
		}
	}
	d := q.Shape[3]
	if d < 8 || d > MaxHeadDim || d%8 != 0 {
		return pkg.Errorf(op, errs.ErrShape, "q has head dim %d: want a multiple of 8 from 8 to %d", d, MaxHeadDim)
	}
	if k.Shape[3] != d || v.Shape[3] != d {
		return pkg.Errorf(op, errs.ErrShape, "head dims: q %d, k %d, v %d: they must be equal", d, k.Shape[3], v.Shape[3])
	}
	if k.Shape != v.Shape {
		return pkg.Errorf(op, errs.ErrShape, "k has shape %v and v %v: they must be equal", k.Shape, v.Shape)
	}
	if out.Shape != q.Shape {
		return pkg.Errorf(op, errs.ErrShape, "out has shape %v: it must be q's, %v", out.Shape, q.Shape)
	}
	hq, hkv := q.Shape[2], k.Shape[2]
	if hq == 0 || hkv == 0 || hq%hkv != 0 {
		return pkg.Errorf(op, errs.ErrShape, "%d query heads and %d KV heads: h_q must be a positive multiple of h_kv (GQA/MQA)", hq, hkv)
	}
	for _, x := range []struct {
		name string
		t    Tensor
	}{{"k", k}, {"v", v}} {
		if overlaps(out, x.t) {
			return pkg.Errorf(op, errs.ErrArgument, "out overlaps %s: the output must not share memory with k or v", x.name)
		}
	}
	return nil
}

// forwardProblem checks Forward's operands.
func forwardProblem(op string, q, k, v, out Tensor) (problem, error) {
	if err := checkQKV(op, q, k, v, out); err != nil {
		return problem{}, err
	}
	if k.Shape[0] != q.Shape[0] {
		return problem{}, pkg.Errorf(op, errs.ErrShape, "q has batch %d and k %d: they must be equal", q.Shape[0], k.Shape[0])
	}
	return problem{q: q, k: k, v: v, out: out, batch: q.Shape[0], sq: q.Shape[1], maxSQ: q.Shape[1],
		hq: q.Shape[2], hkv: k.Shape[2], d: q.Shape[3], maxSK: k.Shape[1]}, nil
}

// checkCumulative checks cumulative lengths: batch+1 entries from 0,
// never decreasing, the last at most (or, exact, equal to) total.
func checkCumulative(op, name string, cu []int32, dev hip.DevicePtr, total int, exact bool) (maxLen int, err error) {
	if len(cu) < 2 {
		return 0, pkg.Errorf(op, errs.ErrArgument, "Varlen.%s has %d entries: want batch+1 (at least 2), from 0", name, len(cu))
	}
	if dev == 0 || dev%4 != 0 {
		return 0, pkg.Errorf(op, errs.ErrArgument, "Varlen.Dev%s at %#x: want the int32 copy of %s on the device", name, uint64(dev), name)
	}
	if cu[0] != 0 {
		return 0, pkg.Errorf(op, errs.ErrArgument, "Varlen.%s starts at %d: it must start at 0", name, cu[0])
	}
	for b := 1; b < len(cu); b++ {
		if cu[b] < cu[b-1] {
			return 0, pkg.Errorf(op, errs.ErrArgument, "Varlen.%s decreases at entry %d (%d after %d): lengths cannot be negative", name, b, cu[b], cu[b-1])
		}
		maxLen = max(maxLen, int(cu[b]-cu[b-1]))
	}
	last := int(cu[len(cu)-1])
	if exact && last != total {
		return 0, pkg.Errorf(op, errs.ErrArgument, "Varlen.%s ends at %d but the tensor has %d rows: they must be equal, so that every output row is written", name, last, total)
	}
	if last > total {
		return 0, pkg.Errorf(op, errs.ErrArgument, "Varlen.%s ends at %d but the tensor has only %d rows", name, last, total)
	}
	return maxLen, nil
}

// varlenProblem checks ForwardVarlen's operands.
func varlenProblem(op string, q, k, v, out Tensor, vl *Varlen) (problem, error) {
	if err := checkQKV(op, q, k, v, out); err != nil {
		return problem{}, err
	}
	if q.Shape[0] != 1 || k.Shape[0] != 1 {
		return problem{}, pkg.Errorf(op, errs.ErrShape, "q has batch %d and k %d: a variable-length batch is packed along the seq dim of tensors of batch 1", q.Shape[0], k.Shape[0])
	}
	maxQ, err := checkCumulative(op, "CuSeqlensQ", vl.CuSeqlensQ, vl.DevCuSeqlensQ, q.Shape[1], true)
	if err != nil {
		return problem{}, err
	}
	maxK, err := checkCumulative(op, "CuSeqlensK", vl.CuSeqlensK, vl.DevCuSeqlensK, k.Shape[1], false)
	if err != nil {
		return problem{}, err
	}
	if len(vl.CuSeqlensK) != len(vl.CuSeqlensQ) {
		return problem{}, pkg.Errorf(op, errs.ErrArgument, "Varlen.CuSeqlensQ has %d entries and CuSeqlensK %d: both are batch+1", len(vl.CuSeqlensQ), len(vl.CuSeqlensK))
	}
	return problem{q: q, k: k, v: v, out: out, batch: len(vl.CuSeqlensQ) - 1, sq: q.Shape[1], maxSQ: maxQ,
		hq: q.Shape[2], hkv: k.Shape[2], d: q.Shape[3], maxSK: maxK, varlen: vl}, nil
}

// pagedProblem checks Decode's operands.
func pagedProblem(op string, q Tensor, kv *PagedKV, out Tensor) (problem, error) {
	if err := checkQKV(op, q, kv.K, kv.V, out); err != nil {
		return problem{}, err
	}
	b := q.Shape[0]
	pages, pageSize := kv.K.Shape[0], kv.K.Shape[1]
	if pages == 0 || pageSize == 0 {
		return problem{}, pkg.Errorf(op, errs.ErrShape, "the cache has shape %v: want (pages, page size, h_kv, d) with at least one page of one row", kv.K.Shape)
	}
	if kv.DevSeqLens == 0 || kv.DevSeqLens%4 != 0 {
		return problem{}, pkg.Errorf(op, errs.ErrArgument, "PagedKV.DevSeqLens at %#x: want the int32 copy of SeqLens on the device", uint64(kv.DevSeqLens))
	}
	if kv.BlockTable == 0 || kv.BlockTable%4 != 0 {
		return problem{}, pkg.Errorf(op, errs.ErrArgument, "PagedKV.BlockTable at %#x: want the int32 (batch, BlockTableStride) table on the device", uint64(kv.BlockTable))
	}
	if kv.BlockTableStride <= 0 || kv.BlockTableStride > math.MaxInt32 {
		return problem{}, pkg.Errorf(op, errs.ErrArgument, "PagedKV.BlockTableStride %d: want the entries per row of the block table", kv.BlockTableStride)
	}
	room := int64(kv.BlockTableStride) * int64(pageSize)
	if kv.MaxSeqLen < 0 || int64(kv.MaxSeqLen) > room || kv.MaxSeqLen > math.MaxInt32 {
		return problem{}, pkg.Errorf(op, errs.ErrArgument, "PagedKV.MaxSeqLen %d: want 0 (the launch sized for SeqLens) or up to %d (BlockTableStride %d × page size %d)", kv.MaxSeqLen, room, kv.BlockTableStride, pageSize)
	}
	if kv.MaxSeqLen > 0 {
		room = int64(kv.MaxSeqLen)
	}
	if len(kv.SeqLens) != b && !(kv.MaxSeqLen > 0 && kv.SeqLens == nil) {
		return problem{}, pkg.Errorf(op, errs.ErrArgument, "PagedKV.SeqLens has %d entries for a batch of %d: give each entry's cache length (or nil with MaxSeqLen)", len(kv.SeqLens), b)
	}
	maxK := kv.MaxSeqLen
	for i, n := range kv.SeqLens {
		if n < 0 || int64(n) > room {
			if kv.MaxSeqLen > 0 {
				return problem{}, pkg.Errorf(op, errs.ErrArgument, "PagedKV.SeqLens[%d] is %d: want 0 to MaxSeqLen %d", i, n, kv.MaxSeqLen)
			}
			return problem{}, pkg.Errorf(op, errs.ErrArgument, "PagedKV.SeqLens[%d] is %d: want 0 to %d (BlockTableStride %d × page size %d)", i, n, room, kv.BlockTableStride, pageSize)
		}
		if kv.MaxSeqLen == 0 {
			maxK = max(maxK, int(n))
		}
	}
	return problem{q: q, k: kv.K, v: kv.V, out: out, batch: b, sq: q.Shape[1], maxSQ: q.Shape[1],
		hq: q.Shape[2], hkv: kv.K.Shape[2], d: q.Shape[3], maxSK: maxK, paged: kv}, nil
}
