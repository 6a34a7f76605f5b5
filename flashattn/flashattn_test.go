package flashattn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/hip"
)

// Tier 0: the float64 reference against attention worked out by hand, the
// checks of every argument, and the launch bookkeeping.

func host(b, s, h, d int, vals ...float64) HostTensor {
	t := NewHostTensor(b, s, h, d)
	copy(t.Data, vals)
	return t
}

func randHost(r *rand.Rand, b, s, h, d int) HostTensor {
	t := NewHostTensor(b, s, h, d)
	for i := range t.Data {
		t.Data[i] = r.NormFloat64()
	}
	return t
}

func TestReferenceByHand(t *testing.T) {
	e := math.E
	// One query, two keys, scale 1: logits 1 and 0.
	q := host(1, 1, 1, 2, 1, 0)
	k := host(1, 2, 1, 2, 1, 0, 0, 1)
	v := host(1, 2, 1, 2, 1, 2, 3, 4)
	out, lse, err := Reference(q, k, v, Params{Scale: 1})
	require.NoError(t, err)
	assert.InDeltaSlice(t, []float64{(e*1 + 3) / (e + 1), (e*2 + 4) / (e + 1)}, out.Data, 1e-15)
	assert.InDelta(t, math.Log(e+1), lse[0], 1e-15)

	// The default scale is 1/√d.
	out, lse, err = Reference(q, k, v, Params{})
	require.NoError(t, err)
	w := math.Exp(1 / math.Sqrt2)
	assert.InDeltaSlice(t, []float64{(w + 3) / (w + 1), (2*w + 4) / (w + 1)}, out.Data, 1e-15)
	assert.InDelta(t, math.Log(w+1), lse[0], 1e-15)

	// Soft-capping: q·k = 100 capped at 10 is 10·tanh(10); the other
	// key's logit is 0.
	q = host(1, 1, 1, 1, 10)
	k = host(1, 2, 1, 1, 10, 0)
	v = host(1, 2, 1, 1, 1, 0)
	out, lse, err = Reference(q, k, v, Params{Scale: 1, SoftCap: 10})
	require.NoError(t, err)
	c := 10 * math.Tanh(10)
	assert.InDelta(t, math.Exp(c)/(math.Exp(c)+1), out.Data[0], 1e-15)
	assert.InDelta(t, c+math.Log1p(math.Exp(-c)), lse[0], 1e-12)

	// Large logits do not overflow: q·k = 1e4 and 0.
	q = host(1, 1, 1, 1, 100)
	k = host(1, 2, 1, 1, 100, 0)
	out, lse, err = Reference(q, k, v, Params{Scale: 1})
	require.NoError(t, err)
	assert.Equal(t, 1.0, out.Data[0])
	assert.Equal(t, 1e4, lse[0])
}

// uniform is attention with q = 0: every visible key weighs the same (or
// by ALiBi's distance), so the output is a (weighted) mean of v that the
// tests compute by hand.
func TestReferenceMasksByHand(t *testing.T) {
	const sk = 4
	k := NewHostTensor(1, sk, 1, 1)
	v := host(1, sk, 1, 1, 1, 10, 100, 1000)
	mean := func(js ...int) float64 {
		s := 0.0
		for _, j := range js {
			s += v.Data[j]
		}
		return s / float64(len(js))
	}
	for _, c := range []struct {
		name string
		sq   int
		p    Params
		want []float64 // per query row; NaN: no key visible
	}{
		{"full", 2, Params{}, []float64{mean(0, 1, 2, 3), mean(0, 1, 2, 3)}},
		// Bottom-right: query i of 2 sees keys up to i + 2.
		{"causal", 2, Params{Causal: true}, []float64{mean(0, 1, 2), mean(0, 1, 2, 3)}},
		// More queries than keys: the first ones see nothing.
		{"causal sq>sk", 6, Params{Causal: true}, []float64{math.NaN(), math.NaN(), mean(0), mean(0, 1), mean(0, 1, 2), mean(0, 1, 2, 3)}},
		{"window left 1", 2, Params{Window: &Window{Left: 1, Right: -1}}, []float64{mean(1, 2, 3), mean(2, 3)}},
		{"window right 0 left 0", 2, Params{Window: &Window{Left: 0, Right: 0}}, []float64{mean(2), mean(3)}},
		{"window both sides", 1, Params{Window: &Window{Left: 2, Right: 1}}, []float64{mean(1, 2, 3)}},
		{"causal folds the right side", 2, Params{Causal: true, Window: &Window{Left: 1, Right: 5}}, []float64{mean(1, 2), mean(2, 3)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := NewHostTensor(1, c.sq, 1, 1)
			out, lse, err := Reference(q, k, v, c.p)
			require.NoError(t, err)
			for i, w := range c.want {
				if math.IsNaN(w) {
					assert.Equal(t, 0.0, out.Data[i], "row %d sees no key: zero output", i)
					assert.True(t, math.IsInf(lse[i], -1), "row %d: lse -inf, got %v", i, lse[i])
					continue
				}
				assert.InDelta(t, w, out.Data[i], 1e-12, "row %d", i)
			}
		})
	}

	// ALiBi: logits -slope·|diag - j|, diag = 3 for the last query.
	q := NewHostTensor(1, 1, 1, 1)
	out, lse, err := Reference(q, k, v, Params{AlibiSlopes: []float32{0.5}})
	require.NoError(t, err)
	var num, den float64
	for j := range sk {
		w := math.Exp(-0.5 * float64(3-j))
		num += w * v.Data[j]
		den += w
	}
	assert.InDelta(t, num/den, out.Data[0], 1e-12)
	assert.InDelta(t, math.Log(den), lse[0], 1e-12)
}

// TestReferenceRowsInParallel: the references spread their rows over the
// host's cores (eachRow), each row once, with the results of one row at a
// time: a variable-length batch larger than a run of rows equals each
// sequence's own dense attention.
func TestReferenceRowsInParallel(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	seen := make([]atomic.Int32, 1000)
	eachRow(len(seen), func(r int) { seen[r].Add(1) })
	for r := range seen {
		require.Equal(t, int32(1), seen[r].Load(), "row %d", r)
	}
	eachRow(0, func(int) { t.Fatal("no rows") })

	r := rand.New(rand.NewPCG(3, 4))
	q, k, v := randHost(r, 1, 130, 4, 8), randHost(r, 1, 121, 2, 8), randHost(r, 1, 121, 2, 8)
	varlenEqualsDense(t, q, k, v, []int32{0, 40, 40, 97, 130}, []int32{0, 50, 55, 120, 121}, Params{Causal: true, SoftCap: 4})
}

// varlenEqualsDense checks that ReferenceVarlen of the packed q, k and v
// equals each sequence's own dense Reference, output and log-sum-exp.
func varlenEqualsDense(t *testing.T, q, k, v HostTensor, cuQ, cuK []int32, p Params) {
	t.Helper()
	out, lse, err := ReferenceVarlen(q, k, v, cuQ, cuK, p)
	require.NoError(t, err)
	total, hq, hkv, d := q.Shape[1], q.Shape[2], k.Shape[2], q.Shape[3]
	for b := range len(cuQ) - 1 {
		q0, sq, k0, sk := int(cuQ[b]), int(cuQ[b+1]-cuQ[b]), int(cuK[b]), int(cuK[b+1]-cuK[b])
		qb := HostTensor{Data: q.Data[q0*hq*d : (q0+sq)*hq*d], Shape: [4]int{1, sq, hq, d}}
		kb := HostTensor{Data: k.Data[k0*hkv*d : (k0+sk)*hkv*d], Shape: [4]int{1, sk, hkv, d}}
		vb := HostTensor{Data: v.Data[k0*hkv*d : (k0+sk)*hkv*d], Shape: [4]int{1, sk, hkv, d}}
		ob, lb, err := Reference(qb, kb, vb, p)
		require.NoError(t, err)
		assert.Equal(t, ob.Data, out.Data[q0*hq*d:(q0+sq)*hq*d], "sequence %d", b)
		for h := range hq {
			for i := range sq {
				assert.Equal(t, lb[h*sq+i], lse[h*total+q0+i], "sequence %d head %d row %d", b, h, i)
			}
		}
	}
}

func TestReferenceGQAVarlenPaged(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// GQA: query heads 0-1 share KV head 0, 2-3 KV head 1; each equals
	// attention of one head with its KV head.
	q, k, v := randHost(r, 2, 5, 4, 8), randHost(r, 2, 7, 2, 8), randHost(r, 2, 7, 2, 8)
	p := Params{Causal: true, AlibiSlopes: []float32{0.1, 0.2, 0.3, 0.4}, SoftCap: 5}
	out, lse, err := Reference(q, k, v, p)
	require.NoError(t, err)
	for h := range 4 {
		qh, kh, vh := NewHostTensor(2, 5, 1, 8), NewHostTensor(2, 7, 1, 8), NewHostTensor(2, 7, 1, 8)
		for b := range 2 {
			for i := range 5 {
				copy(qh.Row(b, i, 0), q.Row(b, i, h))
			}
			for j := range 7 {
				copy(kh.Row(b, j, 0), k.Row(b, j, h/2))
				copy(vh.Row(b, j, 0), v.Row(b, j, h/2))
			}
		}
		o1, l1, err := Reference(qh, kh, vh, Params{Causal: true, AlibiSlopes: []float32{p.AlibiSlopes[h]}, SoftCap: 5})
		require.NoError(t, err)
		for b := range 2 {
			for i := range 5 {
				assert.Equal(t, o1.Row(b, i, 0), out.Row(b, i, h))
				assert.Equal(t, l1[b*5+i], lse[(b*4+h)*5+i])
			}
		}
	}

	// Varlen: sequences of 3, 0 and 2 queries over 4, 2 and 0 keys are
	// each their own dense attention.
	q, k, v = randHost(r, 1, 5, 2, 8), randHost(r, 1, 6, 1, 8), randHost(r, 1, 6, 1, 8)
	varlenEqualsDense(t, q, k, v, []int32{0, 3, 3, 5}, []int32{0, 4, 6, 6}, Params{Causal: true})

	// Paged: a cache of 5 pages of 3 rows, shuffled, equals the dense
	// keys it holds.
	kd, vd := randHost(r, 2, 7, 1, 8), randHost(r, 2, 7, 1, 8)
	kc, vc := NewHostTensor(5, 3, 1, 8), NewHostTensor(5, 3, 1, 8)
	table := [][]int32{{4, 0, 2}, {1, 3}}
	lens := []int32{7, 5}
	for b, rows := range table {
		for j := range int(lens[b]) {
			pg := int(rows[j/3])
			copy(kc.Row(pg, j%3, 0), kd.Row(b, j, 0))
			copy(vc.Row(pg, j%3, 0), vd.Row(b, j, 0))
		}
	}
	q = randHost(r, 2, 2, 3, 8)
	out, _, err = ReferencePaged(q, kc, vc, table, lens, Params{Causal: true})
	require.NoError(t, err)
	for b := range 2 {
		n := int(lens[b])
		qb := HostTensor{Data: q.Data[b*48 : (b+1)*48], Shape: [4]int{1, 2, 3, 8}}
		kb := HostTensor{Data: kd.Data[b*56 : b*56+n*8], Shape: [4]int{1, n, 1, 8}}
		vb := HostTensor{Data: vd.Data[b*56 : b*56+n*8], Shape: [4]int{1, n, 1, 8}}
		ob, _, err := Reference(qb, kb, vb, Params{Causal: true})
		require.NoError(t, err)
		assert.Equal(t, ob.Data, out.Data[b*48:(b+1)*48], "entry %d", b)
	}
	_, _, err = ReferencePaged(q, kc, vc, [][]int32{{4, 0, 5}, {1, 3}}, lens, Params{})
	assert.ErrorIs(t, err, errs.ErrArgument)
	assert.ErrorContains(t, err, "blockTable[0][2] is 5")
}

// dev is a fake device address: the checks never dereference one.
const dev = hip.DevicePtr(1 << 20)

// handleOn is a handle on a new stream of dev, both closed when the test
// ends.
func handleOn(t *testing.T, dev *hip.Device) *Handle {
	t.Helper()
	s, err := dev.NewStream()
	require.NoError(t, err)
	h, err := NewHandle(s)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, h.Close())
		assert.NoError(t, s.Close())
	})
	return h
}

func operands(b, sq, sk, hq, hkv, d int) (q, k, v, out Tensor) {
	q = Contiguous(dev, F16, b, sq, hq, d)
	k = Contiguous(dev+1<<30, F16, b, sk, hkv, d)
	v = Contiguous(dev+2<<30, F16, b, sk, hkv, d)
	out = Contiguous(dev+3<<30, F16, b, sq, hq, d)
	return
}

func TestForwardChecks(t *testing.T) {
	const op = "Handle.Forward"
	for _, c := range []struct {
		name string
		edit func(q, k, v, out *Tensor, p *Params)
		kind error
		msg  string
	}{
		{"nil q", func(q, k, v, out *Tensor, p *Params) { q.Ptr = 0 }, errs.ErrArgument, "q has a nil pointer"},
		{"nil out", func(q, k, v, out *Tensor, p *Params) { out.Ptr = 0 }, errs.ErrArgument, "out has a nil pointer"},
		{"bad dtype", func(q, k, v, out *Tensor, p *Params) { q.DType = 9 }, errs.ErrDType, "q is DType(9)"},
		{"mixed dtypes", func(q, k, v, out *Tensor, p *Params) { v.DType = BF16 }, errs.ErrDType, "v is bf16 and q is f16"},
		{"head dim 12", func(q, k, v, out *Tensor, p *Params) {
			q.Shape[3], k.Shape[3], v.Shape[3], out.Shape[3] = 12, 12, 12, 12
		}, errs.ErrShape, "head dim 12"},
		{"head dim 264", func(q, k, v, out *Tensor, p *Params) {
			q.Shape[3], k.Shape[3], v.Shape[3], out.Shape[3] = 264, 264, 264, 264
		}, errs.ErrShape, "head dim 264"},
		{"k head dim", func(q, k, v, out *Tensor, p *Params) { k.Shape[3] = 32 }, errs.ErrShape, "k 32"},
		{"k v shapes", func(q, k, v, out *Tensor, p *Params) { v.Shape[1] = 3 }, errs.ErrShape, "k has shape"},
		{"out shape", func(q, k, v, out *Tensor, p *Params) { out.Shape[1] = 3 }, errs.ErrShape, "out has shape"},
		{"heads", func(q, k, v, out *Tensor, p *Params) { k.Shape[2], v.Shape[2] = 3, 3 }, errs.ErrShape, "multiple of h_kv"},
		{"batch", func(q, k, v, out *Tensor, p *Params) { k.Shape[0], v.Shape[0] = 3, 3 }, errs.ErrShape, "q has batch 2 and k 3"},
		{"strided head dim", func(q, k, v, out *Tensor, p *Params) { k.Stride = [4]int{1024, 64, 16, 2} }, errs.ErrShape, "the head dim must be contiguous"},
		{"negative stride", func(q, k, v, out *Tensor, p *Params) { q.Stride = [4]int{-5, 64, 16, 1} }, errs.ErrShape, "negative"},
		{"misaligned", func(q, k, v, out *Tensor, p *Params) { q.Ptr++ }, errs.ErrArgument, "not aligned"},
		{"out overlaps k", func(q, k, v, out *Tensor, p *Params) { out.Ptr = k.Ptr + 64 }, errs.ErrArgument, "out overlaps k"},
		{"NaN scale", func(q, k, v, out *Tensor, p *Params) { p.Scale = math.NaN() }, errs.ErrArgument, "Params.Scale"},
		{"negative soft cap", func(q, k, v, out *Tensor, p *Params) { p.SoftCap = -1 }, errs.ErrArgument, "Params.SoftCap"},
		{"alibi count", func(q, k, v, out *Tensor, p *Params) { p.AlibiSlopes = []float32{1} }, errs.ErrArgument, "1 slopes for 4 query heads"},
		{"alibi NaN", func(q, k, v, out *Tensor, p *Params) { p.AlibiSlopes = []float32{1, 2, float32(math.Inf(1)), 4} }, errs.ErrArgument, "AlibiSlopes[2]"},
		{"splits", func(q, k, v, out *Tensor, p *Params) { p.Splits = MaxSplits + 1 }, errs.ErrArgument, "Params.Splits"},
		{"lse misaligned", func(q, k, v, out *Tensor, p *Params) { p.LSE = dev + 2 }, errs.ErrArgument, "Params.LSE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, k, v, out := operands(2, 5, 7, 4, 2, 16)
			var p Params
			c.edit(&q, &k, &v, &out, &p)
			pr, err := forwardProblem(op, q, k, v, out)
			if err == nil {
				_, err = newPlan(op, &pr, &p, target{cus: 100})
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, c.kind)
			assert.ErrorContains(t, err, c.msg)
			assert.Contains(t, err.Error(), "flashattn: Handle.Forward: ")
			var e *Error
			assert.True(t, errors.As(err, &e))
		})
	}
}

func TestVarlenAndPagedChecks(t *testing.T) {
	q, k, v, out := operands(1, 5, 6, 2, 1, 16)
	good := Varlen{CuSeqlensQ: []int32{0, 3, 5}, CuSeqlensK: []int32{0, 4, 6}, DevCuSeqlensQ: dev, DevCuSeqlensK: dev + 64}
	_, err := varlenProblem("V", q, k, v, out, &good)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		edit func(*Varlen)
		msg  string
	}{
		{"short", func(vl *Varlen) { vl.CuSeqlensQ = []int32{0} }, "CuSeqlensQ has 1 entries"},
		{"start", func(vl *Varlen) { vl.CuSeqlensQ = []int32{1, 3, 5} }, "starts at 1"},
		{"decreasing", func(vl *Varlen) { vl.CuSeqlensK = []int32{0, 4, 3} }, "decreases at entry 2"},
		{"q end", func(vl *Varlen) { vl.CuSeqlensQ = []int32{0, 3, 4} }, "ends at 4 but the tensor has 5 rows"},
		{"k end", func(vl *Varlen) { vl.CuSeqlensK = []int32{0, 4, 7} }, "has only 6 rows"},
		{"lengths", func(vl *Varlen) { vl.CuSeqlensK = []int32{0, 6} }, "CuSeqlensQ has 3 entries and CuSeqlensK 2"},
		{"device", func(vl *Varlen) { vl.DevCuSeqlensK = 0 }, "DevCuSeqlensK"},
	} {
		vl := good
		c.edit(&vl)
		_, err := varlenProblem("V", q, k, v, out, &vl)
		assert.ErrorIs(t, err, errs.ErrArgument, c.name)
		assert.ErrorContains(t, err, c.msg, c.name)
	}
	q2, k2, v2, out2 := operands(2, 5, 6, 2, 1, 16)
	_, err = varlenProblem("V", q2, k2, v2, out2, &good)
	assert.ErrorIs(t, err, errs.ErrShape)

	kc := Contiguous(dev+1<<30, F16, 10, 16, 1, 16)
	vc := Contiguous(dev+2<<30, F16, 10, 16, 1, 16)
	q, _, _, out = operands(2, 1, 0, 2, 1, 16)
	kv := PagedKV{K: kc, V: vc, BlockTable: dev + 4096, BlockTableStride: 4, SeqLens: []int32{17, 64}, DevSeqLens: dev + 8192}
	pr, err := pagedProblem("D", q, &kv, out)
	require.NoError(t, err)
	assert.Equal(t, 64, pr.maxSK)
	for _, c := range []struct {
		name string
		edit func(*PagedKV)
		msg  string
	}{
		{"lens", func(kv *PagedKV) { kv.SeqLens = []int32{1} }, "1 entries for a batch of 2"},
		{"too long", func(kv *PagedKV) { kv.SeqLens = []int32{1, 65} }, "SeqLens[1] is 65"},
		{"negative", func(kv *PagedKV) { kv.SeqLens = []int32{-1, 1} }, "SeqLens[0] is -1"},
		{"table", func(kv *PagedKV) { kv.BlockTable = 0 }, "PagedKV.BlockTable"},
		{"stride", func(kv *PagedKV) { kv.BlockTableStride = 0 }, "BlockTableStride 0"},
		{"device lens", func(kv *PagedKV) { kv.DevSeqLens = 0 }, "DevSeqLens"},
	} {
		kv2 := kv
		c.edit(&kv2)
		_, err := pagedProblem("D", q, &kv2, out)
		assert.ErrorIs(t, err, errs.ErrArgument, c.name)
		assert.ErrorContains(t, err, c.msg, c.name)
	}
}

// Devices for the plans: an H100 (sm_90, 132 SMs; h100a: the kernels
// compiled for sm_90a, attn_wgmma among them), a device without
// matrix-core kernels (RDNA2, H100-sized), an MI300X (MFMA), and RDNA3
// and RDNA4 GPUs (WMMA).
var (
	h100  = newTarget("sm_90", 132)
	h100a = newTarget("sm_90a", 132)
	plain = newTarget("gfx1030", 132) // RDNA2: no matrix cores
	mi300 = newTarget("gfx942:sramecc+:xnack-", 304)
	rdna3 = newTarget("gfx1100", 48)
	rdna4 = newTarget("gfx1201", 32)
)

// TestPlanWgmma checks which calls attn_wgmma takes on sm_90a: F16 and
// BF16 prefill of head dim 128, and of 64 over 2048 keys or more;
// attn_mma keeps the others, attn_mmadec decode.
func TestPlanWgmma(t *testing.T) {
	assert.False(t, h100.wgmma, "sm_90 kernels have no attn_wgmma")
	assert.True(t, h100a.wgmma)
	assert.Equal(t, MatrixCore, h100a.mc)
	for _, arch := range []string{"gfx942:sramecc+:xnack-", "gfx1100", "sm_80", "sm_100"} {
		assert.Equal(t, arch, compileTarget(arch), "only sm_90 has an arch-specific target")
	}
	for _, c := range []struct {
		dt         DType
		sq, sk, d  int
		kernel     string
		bm, shared int
	}{
		{F16, 300, 500, 128, "attn_wgmma_f16_d128", 128, 1024 + 128*128*2 + 4*128*128*2},
		{BF16, 300, 40, 128, "attn_wgmma_bf16_d128", 128, 1024 + 128*128*2 + 4*128*128*2},
		{F16, 300, 2048, 64, "attn_wgmma_f16_d64", 128, 1024 + 128*64*2 + 4*128*64*2},
		{BF16, 33, 4096, 64, "attn_wgmma_bf16_d64", 128, 1024 + 128*64*2 + 4*128*64*2},
		{BF16, 300, 2047, 64, "attn_mma_bf16_d64", 128, 128*72*2 + 2*2*64*72*2},
		{F16, 300, 500, 120, "attn_mma_f16_d128_pad", 128, 128*136*2 + 2*2*32*136*2},
		{BF16, 300, 4096, 72, "attn_mma_bf16_d128_pad", 128, 128*136*2 + 2*2*32*136*2},
		{F16, 300, 500, 256, "attn_mma_f16_d256", 64, 2 * 32 * 264 * 2},
		{F16, 300, 500, 32, "attn_mma_f16_d32", 128, 128*40*2 + 2*2*64*40*2},
		{F16, 1, 500, 128, "attn_mmadec_f16_d128", 16, 2 * 2 * 64 * 136 * 2},
		{F32, 300, 500, 128, "attn_fwd_f32_d128", 32, 0},
	} {
		q, k, v, out := operands(2, c.sq, c.sk, 8, 2, c.d)
		for _, x := range []*Tensor{&q, &k, &v, &out} {
			x.DType = c.dt
		}
		pr, err := forwardProblem("F", q, k, v, out)
		require.NoError(t, err)
		pl, err := newPlan("F", &pr, &Params{Causal: true}, h100a)
		require.NoError(t, err)
		what := fmt.Sprintf("%v sq %d sk %d d %d", c.dt, c.sq, c.sk, c.d)
		assert.Equal(t, c.kernel, pl.kernel, what)
		assert.Equal(t, c.shared, pl.shared, what)
		assert.Equal(t, uint32((c.sq*4+c.bm-1)/c.bm), pl.grid.X, "%s: %d rows a block (4 query heads a KV head)", what, c.bm)
		assert.Contains(t, kernelNames("sm_90a"), pl.kernel, what)
		if strings.HasPrefix(c.kernel, "attn_wgmma_") {
			assert.Equal(t, 256, pl.threads, what)
			assert.NotContains(t, kernelNames("sm_90"), pl.kernel, what)
			pl, err = newPlan("F", &pr, &Params{Causal: true}, h100)
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(pl.kernel, "attn_mma_"), "%s: attn_mma on sm_90: %s", what, pl.kernel)
		}
	}
}

func TestPlan(t *testing.T) {
	// f16, d 128, no matrix cores: 8 threads a row, 32 rows a block, 64
	// keys a tile.
	q, k, v, out := operands(2, 100, 300, 8, 2, 128)
	pr, err := forwardProblem("F", q, k, v, out)
	require.NoError(t, err)
	pl, err := newPlan("F", &pr, &Params{Splits: 1, Causal: true}, plain)
	require.NoError(t, err)
	assert.Equal(t, Portable, pl.backend)
	assert.Equal(t, "attn_fwd_f16_d128", pl.kernel)
	assert.Equal(t, threads, pl.threads)
	assert.Equal(t, hip.Dim3{X: 13, Y: 2, Z: 2}, pl.grid, "400 rows (100 queries × 4 heads a KV head) in blocks of 32")
	assert.Equal(t, 1, pl.splits)
	assert.Zero(t, pl.workspace)
	kp := pl.kp
	assert.Equal(t, [3]int64{100 * 8 * 128, 8 * 128, 128}, kp.QS)
	assert.Equal(t, [3]int64{300 * 2 * 128, 2 * 128, 128}, kp.KS)
	assert.Equal(t, int32(-1), kp.WindowLeft)
	assert.Equal(t, int32(0), kp.WindowRight, "causal is a right side of 0")
	assert.Equal(t, float32(1/math.Sqrt(128)), kp.Scale)
	assert.Equal(t, int32(flagAligned), kp.Flags)
	assert.Equal(t, int32(300), kp.SK)

	// Automatic split-KV: 13·2·2 = 52 blocks on 132 compute units, 5 tiles.
	pl, err = newPlan("F", &pr, &Params{}, plain)
	require.NoError(t, err)
	assert.Equal(t, 2, pl.splits, "min(ceil(264/52), 5/2)")
	assert.Equal(t, uint32(4), pl.grid.Z)
	assert.Equal(t, "attn_combine_f16", pl.combine)
	n := 2 * 8 * 200
	assert.Equal(t, int(alignUp(int64(n*128*4), 256))+n*4, pl.workspace)
	assert.Equal(t, int(alignUp(int64(n*128*4), 256)), pl.lsePartOff, "the partial LSEs after the partial outputs")

	// The same on an H100: matrix cores, 128 rows (two m tiles a warp) and
	// 128 threads a block.
	pl, err = newPlan("F", &pr, &Params{Causal: true}, h100)
	require.NoError(t, err)
	assert.Equal(t, MatrixCore, pl.backend)
	assert.Equal(t, "attn_mma_f16_d128", pl.kernel)
	assert.Equal(t, 128, pl.threads)
	assert.Equal(t, 128*136*2+2*2*32*136*2, pl.shared, "q's 128 rows, two stages of K and V tiles of 32 keys, rows of 136 elements")
	assert.Equal(t, hip.Dim3{X: 4, Y: 2, Z: 2 * 5}, pl.grid, "400 rows in blocks of 128; 16 blocks split min(ceil(264/16), 10/2) = 5 ways")

	// On an MI300X: MFMA 32×32×8 at d 128, four waves of 64 lanes and 32
	// rows, 32 keys a tile; 400 rows are 4 blocks of 128, 16 blocks on
	// 304 compute units split min(ceil(608/16), 10/2) = 5 ways.
	pl, err = newPlan("F", &pr, &Params{Causal: true}, mi300)
	require.NoError(t, err)
	assert.Equal(t, MFMA, pl.backend)
	assert.Equal(t, "attn_mfma_f16_d128", pl.kernel)
	assert.Equal(t, 256, pl.threads)
	assert.Equal(t, hip.Dim3{X: 4, Y: 2, Z: 2 * 5}, pl.grid)
	// On RDNA3 and RDNA4: WMMA, four waves of 32 lanes and 16 rows; 7
	// blocks of 64 a (batch, KV head), 28 in all, split min(ceil(96/28),
	// 10/2) = 4 ways on 48 compute units, min(ceil(64/28), 5) = 3 on 32.
	for _, c := range []struct {
		dev    target
		splits uint32
	}{{rdna3, 4}, {rdna4, 3}} {
		pl, err = newPlan("F", &pr, &Params{Causal: true}, c.dev)
		require.NoError(t, err)
		assert.Equal(t, WMMA, pl.backend)
		assert.Equal(t, "attn_wmma_f16_d128", pl.kernel)
		assert.Equal(t, 128, pl.threads)
		assert.Equal(t, hip.Dim3{X: 7, Y: 2, Z: 2 * c.splits}, pl.grid)
	}

	// Decode's splits fill the device's block slots: the handle asks the
	// occupancy of the kernel (here as on an H100: four blocks of r1 an
	// SM, two of r4, three of attn_mmadec), else one block a CU. FlashDecoding
	// runs a decode step where MatrixCore does not (here: no matrix cores).
	h100dec := h100
	h100dec.mc = 0
	h100dec.slots = func(kernel string, nthreads, shared int) int {
		switch {
		case strings.HasSuffix(kernel, "_r1"):
			return 4 * 132
		case strings.HasPrefix(kernel, "attn_mmadec_"):
			assert.Equal(t, 128, nthreads, kernel)
			assert.Positive(t, shared, kernel)
			return 3 * 132
		}
		return 2 * 132
	}
	// GQA decode: b 8, h 32/8, one query, 4096 cached keys: 4 rows a KV
	// head, 8·8 blocks of flash-decoding on 264 slots: 4 splits fill 97%.
	q, k, v, out = operands(8, 1, 4096, 32, 8, 128)
	pr, err = forwardProblem("F", q, k, v, out)
	require.NoError(t, err)
	pl, err = newPlan("F", &pr, &Params{LSE: dev, AlibiSlopes: make([]float32, 32)}, h100dec)
	require.NoError(t, err)
	assert.Equal(t, FlashDecoding, pl.backend)
	assert.Equal(t, "attn_decode_f16_d128_r4", pl.kernel)
	assert.Equal(t, hip.Dim3{X: 1, Y: 8, Z: 8 * 4}, pl.grid)
	assert.Equal(t, int32(flagAligned|flagLSE|flagAlibi), pl.kp.Flags)
	noSlots := h100dec
	noSlots.slots = nil
	pl, err = newPlan("F", &pr, &Params{}, noSlots)
	require.NoError(t, err)
	assert.Equal(t, hip.Dim3{X: 1, Y: 8, Z: 8 * 2}, pl.grid, "a block a CU: 2 splits fill 128 of 132")
	// With matrix cores the same step runs attn_mmadec: four warps over
	// the 64-key tiles of 16 rows; 64 blocks on 396 slots: 4 splits take
	// 65% of them (mmaDecSplits).
	mmaDec := h100dec
	mmaDec.mc = MatrixCore
	pl, err = newPlan("F", &pr, &Params{}, mmaDec)
	require.NoError(t, err)
	assert.Equal(t, MatrixCore, pl.backend)
	assert.Equal(t, "attn_mmadec_f16_d128", pl.kernel)
	assert.Equal(t, 128, pl.threads)
	assert.Equal(t, 2*2*64*136*2, pl.shared, "K and V, two stages of 64 rows of 128 dims padded by 8")
	assert.Equal(t, hip.Dim3{X: 1, Y: 8, Z: 8 * 4}, pl.grid)
	assert.Equal(t, "attn_combine_f16", pl.combine)
	// 16 rows a KV head (two query positions of a group of 8) still fit
	// its one m tile; 17 go to attn_mma, head dims past 128 to
	// FlashDecoding.
	for _, c := range []struct {
		sq, hq, hkv, d int
		kernel         string
	}{{2, 32, 4, 128, "attn_mmadec_f16_d128"}, {1, 16, 1, 64, "attn_mmadec_f16_d64"}, {1, 8, 2, 40, "attn_mmadec_f16_d64_pad"},
		{17, 8, 8, 128, "attn_mma_f16_d128"}, {1, 16, 16, 256, "attn_decode_f16_d256_r1"}} {
		q, k, v, out := operands(2, c.sq, 300, c.hq, c.hkv, c.d)
		pr, err := forwardProblem("F", q, k, v, out)
		require.NoError(t, err)
		pl, err := newPlan("F", &pr, &Params{}, mmaDec)
		require.NoError(t, err)
		assert.Equal(t, c.kernel, pl.kernel, "%+v", c)
	}

	// MHA decode: one row a KV head, 256 blocks on 528 slots: 2 splits.
	q, k, v, out = operands(8, 1, 4096, 32, 32, 128)
	pr, err = forwardProblem("F", q, k, v, out)
	require.NoError(t, err)
	pl, err = newPlan("F", &pr, &Params{}, h100dec)
	require.NoError(t, err)
	assert.Equal(t, "attn_decode_f16_d128_r1", pl.kernel)
	assert.Equal(t, hip.Dim3{X: 1, Y: 32, Z: 8 * 2}, pl.grid)
	// Asked for more splits than groups of keys: one a group of 16.
	pl, err = newPlan("F", &pr, &Params{Splits: MaxSplits}, noSlots)
	require.NoError(t, err)
	assert.Equal(t, MaxSplits, pl.splits)
	q, k, v, out = operands(1, 1, 40, 2, 2, 128)
	pr, err = forwardProblem("F", q, k, v, out)
	require.NoError(t, err)
	pl, err = newPlan("F", &pr, &Params{Splits: MaxSplits}, noSlots)
	require.NoError(t, err)
	assert.Equal(t, 3, pl.splits, "40 keys are 3 groups of 16")
	// The grid's z (batch × splits) holds at most 65535.
	q, k, v, out = operands(1000, 1, 8192, 1, 1, 8)
	pr, err = forwardProblem("F", q, k, v, out)
	require.NoError(t, err)
	pl, err = newPlan("F", &pr, &Params{Splits: MaxSplits}, h100)
	require.NoError(t, err)
	assert.Equal(t, 65, pl.splits, "65535 / 1000")
	assert.Equal(t, uint32(65000), pl.grid.Z)
	q, k, v, out = operands(70000, 1, 16, 1, 1, 8)
	pr, err = forwardProblem("F", q, k, v, out)
	require.NoError(t, err)
	_, err = newPlan("F", &pr, &Params{Splits: 4}, h100)
	assert.ErrorIs(t, err, errs.ErrShape)
	assert.ErrorContains(t, err, "batch 70000")

	// Head-dim buckets and tiles by dtype.
	for _, c := range []struct {
		dt                        DType
		d                         int
		kernel, mma               string
		bm, bn, mmBM, mmBN, mmSHM int
	}{
		{F16, 8, "attn_fwd_f16_d32", "attn_mma_f16_d32_pad", 128, 64, 128, 64, 128*40*2 + 2*2*64*40*2},
		{BF16, 64, "attn_fwd_bf16_d64", "attn_mma_bf16_d64", 64, 64, 128, 64, 128*72*2 + 2*2*64*72*2},
		{F16, 72, "attn_fwd_f16_d128", "attn_mma_f16_d128_pad", 32, 64, 128, 32, 128*136*2 + 2*2*32*136*2},
		{F32, 128, "attn_fwd_f32_d128", "attn_fwd_f32_d128", 32, 32, 128, 32, 128*136*2 + 2*2*32*136*2},
		{BF16, 256, "attn_fwd_bf16_d256", "attn_mma_bf16_d256", 16, 32, 64, 32, 2 * 32 * 264 * 2},
		{F32, 200, "attn_fwd_f32_d256", "attn_fwd_f32_d256", 16, 16, 64, 32, 2 * 32 * 264 * 2},
	} {
		dmax := buckets[bucketIndex(c.d)]
		bm, bn := tiles(c.dt, dmax)
		assert.Equal(t, [2]int{c.bm, c.bn}, [2]int{bm, bn}, "%v d %d", c.dt, c.d)
		bm, bn, nt, shm := mmaTiles(dmax)
		assert.Equal(t, [4]int{c.mmBM, c.mmBN, 128, c.mmSHM}, [4]int{bm, bn, nt, shm}, "%v d %d", c.dt, c.d)
		q, k, v, out := operands(1, 33, 3, 1, 1, c.d)
		for _, x := range []*Tensor{&q, &k, &v, &out} {
			x.DType = c.dt
		}
		pr, err := forwardProblem("F", q, k, v, out)
		require.NoError(t, err)
		pl, err := newPlan("F", &pr, &Params{}, plain)
		require.NoError(t, err)
		assert.Equal(t, c.kernel, pl.kernel)
		assert.Contains(t, kernelNames("gfx1030"), pl.kernel)
		pl, err = newPlan("F", &pr, &Params{}, h100)
		require.NoError(t, err)
		assert.Equal(t, c.mma, pl.kernel)
		assert.Contains(t, kernelNames("sm_90"), pl.kernel)
		for _, x := range []struct {
			dev  target
			arch string
		}{{mi300, "gfx942"}, {rdna3, "gfx1100"}, {rdna4, "gfx1201"}} {
			pl, err = newPlan("F", &pr, &Params{}, x.dev)
			require.NoError(t, err)
			assert.Contains(t, kernelNames(x.arch), pl.kernel)
			if c.dt == F32 {
				assert.Equal(t, c.kernel, pl.kernel)
			} else {
				amd := strings.TrimSuffix(c.mma, "_pad") // one AMD kernel a bucket
				assert.Equal(t, strings.Replace(amd, "mma", map[Backend]string{MFMA: "mfma", WMMA: "wmma"}[x.dev.mc], 1), pl.kernel)
			}
		}
	}

	// attn_mfma's and attn_wmma's tiles: four waves of M rows (MFMA 32 up
	// to d 128, else 16), the most keys (64, 32, 16) whose K and Vᵀ
	// tiles fit in 32 KiB.
	for _, c := range []struct {
		b                    Backend
		dmax, bm, bn, thread int
	}{
		{MFMA, 32, 128, 64, 256}, {MFMA, 64, 128, 64, 256}, {MFMA, 128, 128, 32, 256}, {MFMA, 256, 64, 16, 256},
		{WMMA, 32, 64, 64, 128}, {WMMA, 64, 64, 64, 128}, {WMMA, 128, 64, 32, 128}, {WMMA, 256, 64, 16, 128},
	} {
		bm, bn, th := amdTiles(c.b, c.dmax)
		assert.Equal(t, [3]int{c.bm, c.bn, c.thread}, [3]int{bm, bn, th}, "%v d %d", c.b, c.dmax)
	}

	// Strided q (a slice of a fused qkv) that is not 16-byte aligned: no
	// vector loads, and no matrix cores.
	q, k, v, out = operands(1, 40, 4, 2, 2, 8)
	q.Stride = [4]int{40 * 3 * 2 * 8, 3 * 2 * 8, 12, 1}
	pr, err = forwardProblem("F", q, k, v, out)
	require.NoError(t, err)
	pl, err = newPlan("F", &pr, &Params{}, h100)
	require.NoError(t, err)
	assert.Zero(t, pl.kp.Flags&flagAligned)
	assert.Equal(t, Portable, pl.backend)
	assert.Equal(t, [3]int64{1920, 48, 12}, pl.kp.QS)

	// Windows wider than every sequence are unbounded.
	q, k, v, out = operands(1, 40, 30, 2, 2, 8)
	pr, err = forwardProblem("F", q, k, v, out)
	require.NoError(t, err)
	for _, c := range []struct {
		w           Window
		left, right int32
	}{
		{Window{Left: 29, Right: 38}, 29, 38},
		{Window{Left: 30, Right: 39}, -1, -1},
		{Window{Left: math.MaxInt32, Right: math.MaxInt32}, -1, -1},
	} {
		pl, err = newPlan("F", &pr, &Params{Window: &c.w}, h100)
		require.NoError(t, err)
		assert.Equal(t, [2]int32{c.left, c.right}, [2]int32{pl.kp.WindowLeft, pl.kp.WindowRight}, "%+v", c.w)
	}
	// One query a sequence (a decode step): the causal mask hides nothing.
	q, k, v, out = operands(3, 1, 30, 8, 2, 64)
	pr, err = forwardProblem("F", q, k, v, out)
	require.NoError(t, err)
	pl, err = newPlan("F", &pr, &Params{Causal: true}, h100)
	require.NoError(t, err)
	assert.Equal(t, [2]int32{-1, -1}, [2]int32{pl.kp.WindowLeft, pl.kp.WindowRight})

	// Nothing to do: an empty batch or no queries.
	q, k, v, out = operands(0, 4, 4, 2, 2, 8)
	pr, err = forwardProblem("F", q, k, v, out)
	require.NoError(t, err)
	pl, err = newPlan("F", &pr, &Params{}, plain)
	require.NoError(t, err)
	assert.True(t, pl.empty)
}

// TestDispatch checks the rule of Backend's godoc.
func TestDispatch(t *testing.T) {
	for arch, want := range map[string]Backend{
		"sm_75": 0, "sm_80": MatrixCore, "sm_86": MatrixCore, "sm_90": MatrixCore, "sm_90a": MatrixCore, "sm_120": MatrixCore,
		"gfx942": MFMA, "gfx942:sramecc+:xnack-": MFMA, "gfx90a:xnack+": MFMA, "gfx950": MFMA, "gfx908": 0, "gfx906": 0,
		"gfx1100": WMMA, "gfx1103": WMMA, "gfx1151": WMMA, "gfx1200": WMMA, "gfx1201:xnack-": WMMA,
		"gfx1030": 0, "gfx1010": 0, "gfx11-generic": 0, "gfx1300": 0, "gfx110": 0, "": 0, "sm_": 0,
	} {
		assert.Equal(t, want, matrixBackend(arch), arch)
		assert.Equal(t, want == MatrixCore, mmaArch(arch), arch)
		assert.Equal(t, want == MFMA, mfmaArch(arch), arch)
		assert.Equal(t, want == WMMA, wmmaArch(arch), arch)
	}
	assert.Equal(t, MatrixCore, h100.mc)
	assert.Equal(t, 132, h100.cus)
	assert.Zero(t, plain.mc)

	kc := Contiguous(dev+1<<30, F16, 10, 16, 2, 64)
	vc := Contiguous(dev+2<<30, F16, 10, 16, 2, 64)
	for _, c := range []struct {
		name    string
		dt      DType
		sq, hq  int
		paged   bool
		varlen  bool
		qStride int // q's head stride in elements; 0: contiguous
		dev     target
		want    Backend
	}{
		{"prefill f16", F16, 33, 4, false, false, 0, h100, MatrixCore},
		{"prefill bf16", BF16, 9, 2, false, false, 0, h100, MatrixCore},
		{"varlen", F16, 33, 4, false, true, 0, h100, MatrixCore},
		{"padded heads", F16, 33, 4, false, false, 72, h100, MatrixCore},
		{"f32", F32, 33, 4, false, false, 0, h100, Portable},
		{"unaligned heads", F16, 33, 4, false, false, 68, h100, Portable},
		{"paged prefill", F16, 33, 4, true, false, 0, h100, Portable},
		{"no matrix cores", F16, 33, 4, false, false, 0, plain, Portable},
		{"mi300 f16", F16, 33, 4, false, false, 0, mi300, MFMA},
		{"mi300 bf16 varlen", BF16, 33, 4, false, true, 0, mi300, MFMA},
		{"mi300 f32", F32, 33, 4, false, false, 0, mi300, Portable},
		{"mi300 paged", F16, 33, 4, true, false, 0, mi300, Portable},
		{"mi300 unaligned", BF16, 33, 4, false, false, 68, mi300, Portable},
		{"mi300 decode", F16, 1, 16, false, false, 0, mi300, FlashDecoding},
		{"rdna3 f16", F16, 33, 4, false, false, 0, rdna3, WMMA},
		{"rdna3 padded heads", BF16, 33, 4, false, false, 72, rdna3, WMMA},
		{"rdna4 bf16", BF16, 9, 2, false, false, 0, rdna4, WMMA},
		{"rdna4 varlen", F16, 33, 4, false, true, 0, rdna4, WMMA},
		{"rdna4 f32", F32, 33, 4, false, false, 0, rdna4, Portable},
		{"decode", F16, 1, 16, false, false, 0, h100, MatrixCore},
		{"decode rows 8", BF16, 4, 4, false, false, 0, h100, MatrixCore},
		{"decode rows 16", BF16, 8, 4, false, false, 0, h100, MatrixCore},
		{"varlen decode", F16, 1, 4, false, true, 0, h100, MatrixCore},
		{"decode without matrix cores", F16, 1, 16, false, false, 0, plain, FlashDecoding},
		{"paged decode", F16, 1, 2, true, false, 0, h100, FlashDecoding},
		{"f32 decode", F32, 2, 4, false, false, 0, plain, FlashDecoding},
		{"unaligned decode", F16, 1, 4, false, false, 68, h100, FlashDecoding},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, k, v, out := operands(2, c.sq, 16, c.hq, 2, 64)
			for _, x := range []*Tensor{&q, &k, &v, &out} {
				x.DType = c.dt
			}
			if c.qStride > 0 {
				q.Stride = [4]int{c.sq * c.hq * c.qStride, c.hq * c.qStride, c.qStride, 1}
			}
			var pr problem
			var err error
			switch {
			case c.paged:
				kc.DType, vc.DType = c.dt, c.dt
				kv := PagedKV{K: kc, V: vc, BlockTable: dev + 4096, BlockTableStride: 4, SeqLens: []int32{17, 64}, DevSeqLens: dev + 8192}
				pr, err = pagedProblem("D", q, &kv, out)
			case c.varlen:
				q.Shape[0], out.Shape[0], k.Shape[0], v.Shape[0] = 1, 1, 1, 1
				vl := Varlen{CuSeqlensQ: []int32{0, int32(c.sq)}, CuSeqlensK: []int32{0, 16}, DevCuSeqlensQ: dev, DevCuSeqlensK: dev}
				pr, err = varlenProblem("V", q, k, v, out, &vl)
			default:
				pr, err = forwardProblem("F", q, k, v, out)
			}
			require.NoError(t, err)
			pl, err := newPlan("F", &pr, &Params{}, c.dev)
			require.NoError(t, err)
			assert.Equal(t, c.want, pl.backend)
			arch := map[Backend]string{MatrixCore: "sm_90", MFMA: "gfx942", WMMA: "gfx1100", 0: "gfx1030"}[c.dev.mc]
			if c.dev.mc == WMMA && c.dev.cus == rdna4.cus {
				arch = "gfx1201"
			}
			assert.Contains(t, kernelNames(arch), pl.kernel)
		})
	}
}

func TestDecodeSplits(t *testing.T) {
	for _, c := range []struct{ blocks, slots, most, want int }{
		{256, 528, 32, 2},  // MHA b8 h32 on an H100, four blocks an SM: 97% in one wave
		{64, 264, 32, 4},   // GQA 32/8: 256 of 264
		{600, 528, 64, 4},  // 1, 2, 3 splits fill 57%, 76%, 85% of their last waves; 4, 91%
		{1056, 528, 8, 1},  // two full waves
		{256, 528, 1, 1},   // too few keys to split
		{7, 528, 8, 8},     // never 90%: the fullest
		{100, 0, 8, 1},     // slots unknown
		{0, 528, 8, 1},     // nothing to run
		{300, 528, 128, 5}, // 1500 blocks in 3 waves of 528: 95%
	} {
		assert.Equal(t, c.want, decodeSplits(c.blocks, c.slots, c.most), "%d blocks, %d slots, at most %d", c.blocks, c.slots, c.most)
	}
}

// TestMmaDecSplits: attn_mmadec takes the fewest splits that keep 60% of
// the slots busy, in one wave (the H200's cases that mmaDecSplits' doc
// cites: three blocks an SM at head dim 128).
func TestMmaDecSplits(t *testing.T) {
	for _, c := range []struct{ blocks, slots, most, want int }{
		{256, 396, 32, 1},  // MHA b8 h32: 65% unsplit; two splits would take two waves
		{64, 396, 32, 4},   // GQA b8 h32/8: 256 blocks
		{32, 396, 32, 8},   // MHA b1 h32
		{32, 396, 3, 3},    // too few keys for more
		{200, 396, 32, 1},  // two splits (400 blocks) spill into a second wave
		{150, 396, 32, 2},  // 300 blocks
		{1000, 396, 32, 1}, // more blocks than slots already
		{8, 528, 8, 8},     // b1 h32/8 d64 over 1024 keys: 16 tiles, two a split
		{100, 0, 8, 1},     // slots unknown
		{0, 396, 8, 1},     // nothing to run
	} {
		assert.Equal(t, c.want, mmaDecSplits(c.blocks, c.slots, c.most), "%d blocks, %d slots, at most %d", c.blocks, c.slots, c.most)
	}
}

// TestPlanFusable: which decode launches merge their own splits (given a
// handle's counters) instead of running attn_combine after them:
// attn_mmadec's whose merge a warp holds at once.
func TestPlanFusable(t *testing.T) {
	kc := Contiguous(dev+1<<30, F16, 256, 16, 8, 64)
	vc := Contiguous(dev+2<<30, F16, 256, 16, 8, 64)
	for _, c := range []struct {
		name        string
		sq, hq, hkv int
		d           int
		paged       bool
		splits      int
		dev         target
		kernel      string
		fusable     bool
		wantSplits  int // 0: more than one
	}{
		{"MHA decode", 1, 32, 32, 128, false, 0, h100, "attn_mmadec_f16_d128", true, 0},
		{"MHA, 8 splits", 1, 32, 32, 128, false, 8, h100, "attn_mmadec_f16_d128", true, 8},
		{"MHA, 9 splits", 1, 32, 32, 128, false, 9, h100, "attn_mmadec_f16_d128", false, 9},
		{"MHA unsplit", 1, 32, 32, 128, false, 1, h100, "attn_mmadec_f16_d128", false, 1},
		{"two rows of 64", 1, 16, 8, 64, false, 4, h100, "attn_mmadec_f16_d64", true, 4},
		{"four rows of 64", 1, 32, 8, 64, false, 4, h100, "attn_mmadec_f16_d64", false, 4},
		{"two query rows of 128", 2, 8, 8, 128, false, 4, h100, "attn_mmadec_f16_d128", false, 4},
		{"paged GQA", 1, 32, 8, 64, true, 0, h100, "attn_decode_f16_d64_paged", false, 0},
		{"paged MHA", 1, 8, 8, 64, true, 0, h100, "attn_decode_f16_d64_r1", false, 0},
		{"prefill", 64, 32, 8, 64, false, 0, h100, "attn_mma_f16_d64", false, 0},
		{"AMD", 1, 32, 32, 128, false, 4, mi300, "attn_decode_f16_d128_r1", false, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, k, v, out := operands(2, c.sq, 4000, c.hq, c.hkv, c.d)
			var pr problem
			var err error
			if c.paged {
				kv := PagedKV{K: kc, V: vc, BlockTable: dev + 4096, BlockTableStride: 256, DevSeqLens: dev + 8192, MaxSeqLen: 4000}
				pr, err = pagedProblem("D", q, &kv, out)
			} else {
				pr, err = forwardProblem("F", q, k, v, out)
			}
			require.NoError(t, err)
			pl, err := newPlan("F", &pr, &Params{Splits: c.splits}, c.dev)
			require.NoError(t, err)
			assert.Equal(t, c.kernel, pl.kernel)
			if c.wantSplits > 0 {
				assert.Equal(t, c.wantSplits, pl.splits)
			} else {
				assert.Greater(t, pl.splits, 1)
			}
			assert.Equal(t, c.fusable, pl.fusable)
			assert.Equal(t, pl.splits > 1, pl.combine != "", "attn_combine stays for a handle without counters")
		})
	}
}

// TestPlanPagedStep: which paged decode launches take attn_decode's
// kernel for an LLM's step, and which the general four-row kernel.
func TestPlanPagedStep(t *testing.T) {
	cache := func(dt DType, pageSize, hkv, d int) (k, v Tensor) {
		return Contiguous(dev+1<<30, dt, 256, pageSize, hkv, d), Contiguous(dev+2<<30, dt, 256, pageSize, hkv, d)
	}
	for _, c := range []struct {
		name     string
		dt       DType
		sq       int
		hq, hkv  int
		pageSize int
		d        int
		p        Params
		kernel   string
	}{
		{"a decode step", BF16, 1, 32, 8, 16, 64, Params{Causal: true}, "attn_decode_bf16_d64_paged"},
		{"f16, head dim 128, pages of 64", F16, 1, 32, 8, 64, 128, Params{}, "attn_decode_f16_d128_paged"},
		{"two queries, causal", BF16, 2, 32, 8, 16, 64, Params{Causal: true}, "attn_decode_bf16_d64_r4"},
		{"two queries, a right side of 1", BF16, 2, 32, 8, 16, 64, Params{Window: &Window{Left: -1, Right: 1}}, "attn_decode_bf16_d64_paged"},
		{"a left window", BF16, 1, 32, 8, 16, 64, Params{Causal: true, Window: &Window{Left: 100, Right: 0}}, "attn_decode_bf16_d64_r4"},
		{"ALiBi", BF16, 1, 32, 8, 16, 64, Params{AlibiSlopes: slopes(32)}, "attn_decode_bf16_d64_r4"},
		{"soft-capping", BF16, 1, 32, 8, 16, 64, Params{SoftCap: 30}, "attn_decode_bf16_d64_r4"},
		{"pages of 24", BF16, 1, 32, 8, 24, 64, Params{}, "attn_decode_bf16_d64_r4"},
		{"head dim 80", BF16, 1, 32, 8, 16, 80, Params{}, "attn_decode_bf16_d128_r4"},
		{"F32", F32, 1, 32, 8, 16, 64, Params{}, "attn_decode_f32_d64_r4"},
		// TestGPUDecodePaged's launches whose rows cross query positions.
		{"two queries, three heads a KV head", F16, 2, 6, 2, 32, 64, Params{}, "attn_decode_f16_d64_paged"},
		{"three queries, two heads a KV head", BF16, 3, 4, 2, 64, 128, Params{Splits: 3}, "attn_decode_bf16_d128_paged"},
	} {
		t.Run(c.name, func(t *testing.T) {
			kc, vc := cache(c.dt, c.pageSize, c.hkv, c.d)
			q, _, _, out := operands(2, c.sq, 1, c.hq, c.hkv, c.d)
			q.DType, out.DType = c.dt, c.dt
			kv := PagedKV{K: kc, V: vc, BlockTable: dev + 4096, BlockTableStride: 256, DevSeqLens: dev + 8192, MaxSeqLen: 4000}
			pr, err := pagedProblem("D", q, &kv, out)
			require.NoError(t, err)
			pl, err := newPlan("D", &pr, &c.p, h100)
			require.NoError(t, err)
			assert.Equal(t, FlashDecoding, pl.backend)
			assert.Equal(t, c.kernel, pl.kernel)
		})
	}
}

func TestWaveFill(t *testing.T) {
	assert.Equal(t, 1.0, waveFill(528, 528))
	assert.InDelta(t, 256.0/528, waveFill(256, 528), 1e-12)
	assert.InDelta(t, 768.0/1056, waveFill(768, 528), 1e-12) // two waves, the second half full
	assert.Zero(t, waveFill(0, 528))
	assert.Zero(t, waveFill(10, 0))
}

func TestKernelParamsLayout(t *testing.T) {
	var k kParams
	assert.Equal(t, uintptr(1360), unsafe.Sizeof(k))
	assert.Equal(t, uintptr(88), unsafe.Offsetof(k.QS), "eleven pointers first")
	assert.Equal(t, uintptr(184), unsafe.Offsetof(k.BTStride))
	assert.Equal(t, uintptr(192), unsafe.Offsetof(k.Batch))
	assert.Equal(t, uintptr(244), unsafe.Offsetof(k.Scale))
	assert.Equal(t, uintptr(252), unsafe.Offsetof(k.Alibi))
	assert.Equal(t, uintptr(1280), unsafe.Offsetof(k.Counters), "after the slopes")
	assert.Equal(t, uintptr(1288), unsafe.Offsetof(k.NewK), "then Rotary's")
	assert.Len(t, kernelNames("gfx1030"), 3*(4+8+1)+2*4, "portable, decode r1 and r4 per bucket, combine; per dtype; decode of paged steps for f16 and bf16")
	for arch, kind := range map[string]string{"sm_90": "mma", "gfx90a": "mfma", "gfx942:sramecc+:xnack-": "mfma", "gfx950": "mfma", "gfx1100": "wmma", "gfx1201": "wmma"} {
		names := kernelNames(arch)
		// attn_mma has its _pad kernels, and attn_mmadec with them up to d128.
		perDType := map[string]int{"mma": 2*4 + 2*3, "mfma": 4, "wmma": 4}[kind]
		assert.Len(t, names, 3*(4+8+1)+2*4+2*perDType, "%s: and attn_%s for f16 and bf16", arch, kind)
		assert.Contains(t, names, "attn_"+kind+"_bf16_d256", arch)
		assert.Contains(t, names, "attn_"+kind+"_f16_d32", arch)
	}
	sm90, sm90a := kernelNames("sm_90"), kernelNames("sm_90a")
	assert.Len(t, sm90a, len(sm90)+4, "sm_90a: and attn_wgmma for f16 and bf16, head dims 64 and 128")
	assert.Subset(t, sm90a, sm90)
	assert.Contains(t, sm90a, "attn_wgmma_bf16_d64")
	assert.Equal(t, kernelNames("gfx1030"), kernelNames("sm_75"))
	assert.Equal(t, kernelNames("gfx1030"), kernelNames("gfx908"))
}

func TestHandleChecks(t *testing.T) {
	_, err := NewHandle(nil)
	assert.ErrorIs(t, err, errs.ErrArgument)
	var h *Handle
	_, err = h.Forward(Tensor{}, Tensor{}, Tensor{}, Tensor{}, Params{})
	assert.ErrorIs(t, err, errs.ErrArgument)
	assert.ErrorContains(t, err, "nil handle")
	assert.NoError(t, h.Close())
	assert.Equal(t, "portable", Portable.String())
	assert.Equal(t, "matrix-core", MatrixCore.String())
	assert.Equal(t, "flash-decoding", FlashDecoding.String())
	assert.Equal(t, "mfma", MFMA.String())
	assert.Equal(t, "wmma", WMMA.String())
	assert.Equal(t, "Backend(9)", Backend(9).String())
	assert.Equal(t, "bf16", BF16.String())
	assert.Equal(t, 4, F32.Size())
}

// TestPlanRotary: Params.Rotary sets the kernel's rotary fields for a
// Decode that runs attn_decode_paged (q of the step's fused projection:
// strided rows) and is refused, with what to do, elsewhere.
func TestPlanRotary(t *testing.T) {
	const b, hq, hkv, d = 3, 32, 8, 64
	kc := Contiguous(dev+1<<30, F16, 256, 16, hkv, d)
	vc := Contiguous(dev+2<<30, F16, 256, 16, hkv, d)
	// A fused q·k·v projection's rows: (b, 1, hq+2·hkv, d).
	row := (hq + 2*hkv) * d
	view := func(head0, heads int) Tensor {
		return Tensor{Ptr: dev + 3<<30 + hip.DevicePtr(head0*d*2), DType: F16, Shape: [4]int{b, 1, heads, d}, Stride: [4]int{row, row, d, 1}}
	}
	rot := func() *Rotary {
		return &Rotary{NewK: view(hq, hkv), NewV: view(hq+hkv, hkv), Cos: dev + 4<<30, Sin: dev + 5<<30, CosStride: d / 2}
	}
	plan := func(sq int, edit func(*Params, *PagedKV)) (plan, error) {
		q := view(0, hq)
		q.Shape[1] = sq
		out := Contiguous(dev+6<<30, F16, b, sq, hq, d)
		kv := PagedKV{K: kc, V: vc, BlockTable: dev + 4096, BlockTableStride: 100, DevSeqLens: dev + 8192, MaxSeqLen: 1000}
		p := Params{Causal: true, Rotary: rot()}
		if edit != nil {
			edit(&p, &kv)
		}
		pr, err := pagedProblem("D", q, &kv, out)
		require.NoError(t, err)
		return newPlan("D", &pr, &p, h100)
	}
	pl, err := plan(1, nil)
	require.NoError(t, err)
	assert.Equal(t, "attn_decode_f16_d64_paged", pl.kernel)
	k := pl.kp
	assert.NotZero(t, k.Flags&flagRotary)
	assert.Equal(t, uint64(dev+3<<30+hip.DevicePtr(hq*d*2)), k.NewK)
	assert.Equal(t, uint64(dev+3<<30+hip.DevicePtr((hq+hkv)*d*2)), k.NewV)
	assert.Equal(t, [2]int64{int64(row), d}, k.NKS, "the batch and head strides")
	assert.Equal(t, [2]int64{int64(row), d}, k.NVS)
	assert.Equal(t, uint64(dev+4<<30), k.Cos)
	assert.Equal(t, uint64(dev+5<<30), k.Sin)
	assert.Equal(t, int64(d/2), k.CSStride)
	pl, err = plan(1, func(p *Params, _ *PagedKV) { p.Rotary = nil })
	require.NoError(t, err)
	assert.Zero(t, pl.kp.Flags&flagRotary)
	for _, c := range []struct {
		name string
		sq   int
		edit func(*Params, *PagedKV)
		kind error
		want string
	}{
		{"two queries a sequence", 2, nil, errs.ErrUnsupported, "one query a sequence"},
		{"soft-capping", 1, func(p *Params, _ *PagedKV) { p.SoftCap = 30 }, errs.ErrUnsupported, "attn_decode_paged"},
		{"a page of 12 rows", 1, func(_ *Params, kv *PagedKV) {
			kv.K = Contiguous(dev+1<<30, F16, 256, 12, hkv, d)
			kv.V = Contiguous(dev+2<<30, F16, 256, 12, hkv, d)
		}, errs.ErrUnsupported, "power-of-two pages"},
		{"NewK of another dtype", 1, func(p *Params, _ *PagedKV) { p.Rotary.NewK.DType = BF16 }, errs.ErrDType, "Rotary.NewK is bf16"},
		{"NewV of two tokens", 1, func(p *Params, _ *PagedKV) { p.Rotary.NewV.Shape[1] = 2 }, errs.ErrShape, "Rotary.NewV has shape"},
		{"unaligned NewK", 1, func(p *Params, _ *PagedKV) { p.Rotary.NewK.Ptr += 2 }, errs.ErrArgument, "16-byte aligned rows"},
		{"no Sin", 1, func(p *Params, _ *PagedKV) { p.Rotary.Sin = 0 }, errs.ErrArgument, "Rotary.Cos"},
		{"short angle rows", 1, func(p *Params, _ *PagedKV) { p.Rotary.CosStride = 8 }, errs.ErrArgument, "at least d/2 = 32"},
	} {
		_, err := plan(c.sq, c.edit)
		require.Error(t, err, c.name)
		assert.ErrorIs(t, err, c.kind, c.name)
		assert.Contains(t, err.Error(), c.want, c.name)
	}
}

// TestWrapKinds: the failures of the libraries below reach flashattn's
// callers with errs' kinds: a workspace that HIP cannot allocate is
// ErrOutOfMemory (the kind candle gives it), a closed buffer ErrClosed,
// any other failure ErrDevice; the HIP error stays the cause.
func TestWrapKinds(t *testing.T) {
	for _, c := range []struct {
		cause error
		kind  error
	}{
		{&hip.Error{Op: "hipMallocAsync", Status: hip.StatusOutOfMemory}, errs.ErrOutOfMemory},
		{&hip.Error{Op: "hipFreeAsync", Status: hip.StatusInvalidHandle, Err: hip.ErrClosed}, errs.ErrClosed},
		{&hip.Error{Op: "hipModuleLaunchKernel", Status: hip.StatusLaunchFailure}, errs.ErrDevice},
	} {
		err := pkg.Wrap("Handle.Forward", c.cause)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Same(t, c.kind, e.Kind, "%v", c.cause)
		assert.ErrorIs(t, err, c.cause)
		assert.True(t, strings.HasPrefix(err.Error(), "flashattn: Handle.Forward: "), err.Error())
	}
}
