package flashattn

import (
	"math"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/rocm-go/rocm/errs"
)

// HostTensor is a BSHD operand in host memory for Reference: Data holds
// Shape (batch, seq, heads, head dim) densely, in float64.
type HostTensor struct {
	Data  []float64
	Shape [4]int
}

// NewHostTensor is a zero tensor of shape (b, s, h, d).
func NewHostTensor(b, s, h, d int) HostTensor {
	return HostTensor{Data: make([]float64, b*s*h*d), Shape: [4]int{b, s, h, d}}
}

// Row is the head dim vector at (batch b, seq s, head h).
func (t HostTensor) Row(b, s, h int) []float64 {
	sh := t.Shape
	o := ((b*sh[1]+s)*sh[2] + h) * sh[3]
	return t.Data[o : o+sh[3]]
}

func (t HostTensor) check(op, name string) error {
	n := 1
	for i, d := range t.Shape {
		if d < 0 {
			return pkg.Errorf(op, errs.ErrShape, "%s has shape %v: dim %d is negative", name, t.Shape, i)
		}
		n *= d
	}
	if len(t.Data) != n {
		return pkg.Errorf(op, errs.ErrShape, "%s has %d elements for shape %v (%d)", name, len(t.Data), t.Shape, n)
	}
	return nil
}

// Reference is Forward computed in float64 on the host, one query row at a
// time (the scores of a row are the only intermediate): out like q, and
// the log-sum-exp (batch, h_q, s_q). Params.LSE and Params.Splits do not
// apply; everything else means what it means on the device.
func Reference(q, k, v HostTensor, p Params) (out HostTensor, lse []float64, err error) {
	const op = "Reference"
	if err := checkHost(op, q, k, v, p); err != nil {
		return HostTensor{}, nil, err
	}
	if q.Shape[0] != k.Shape[0] {
		return HostTensor{}, nil, pkg.Errorf(op, errs.ErrShape, "q has batch %d and k %d: they must be equal", q.Shape[0], k.Shape[0])
	}
	b, sq, hq, d := q.Shape[0], q.Shape[1], q.Shape[2], q.Shape[3]
	out = NewHostTensor(b, sq, hq, d)
	lse = make([]float64, b*hq*sq)
	eachRow(b*hq*sq, func(r int) {
		bi, h, i := r/(hq*sq), r/sq%hq, r%sq
		keys := func(j, hk int) ([]float64, []float64) { return k.Row(bi, j, hk), v.Row(bi, j, hk) }
		lse[r] = attendRow(q.Row(bi, i, h), out.Row(bi, i, h), h, hq/k.Shape[2], i, sq, k.Shape[1], keys, &p)
	})
	return out, lse, nil
}

// ReferenceVarlen is ForwardVarlen in float64 on the host: q and k packed
// along the seq dim of batch-1 tensors, sequence b's rows from cuQ[b] and
// cuK[b]. The log-sum-exp is (h_q, total q rows).
func ReferenceVarlen(q, k, v HostTensor, cuQ, cuK []int32, p Params) (out HostTensor, lse []float64, err error) {
	const op = "ReferenceVarlen"
	if err := checkHost(op, q, k, v, p); err != nil {
		return HostTensor{}, nil, err
	}
	if q.Shape[0] != 1 || k.Shape[0] != 1 {
		return HostTensor{}, nil, pkg.Errorf(op, errs.ErrShape, "q has batch %d and k %d: a variable-length batch is packed in tensors of batch 1", q.Shape[0], k.Shape[0])
	}
	// The device pointers are not read here: stand-ins pass the checks.
	if _, err := checkCumulative(op, "CuSeqlensQ", cuQ, 4, q.Shape[1], true); err != nil {
		return HostTensor{}, nil, err
	}
	if _, err := checkCumulative(op, "CuSeqlensK", cuK, 4, k.Shape[1], false); err != nil {
		return HostTensor{}, nil, err
	}
	if len(cuQ) != len(cuK) {
		return HostTensor{}, nil, pkg.Errorf(op, errs.ErrArgument, "cuQ has %d entries and cuK %d: both are batch+1", len(cuQ), len(cuK))
	}
	total, hq, d := q.Shape[1], q.Shape[2], q.Shape[3]
	out = NewHostTensor(1, total, hq, d)
	lse = make([]float64, hq*total)
	// Row r is query head r / rows of the packed rows that cuQ's sequences
	// cover (rows past the last sequence are nobody's: zeros, as Forward
	// leaves them).
	rows := int(cuQ[len(cuQ)-1])
	eachRow(hq*rows, func(r int) {
		h, t := r/rows, r%rows
		bi := sort.Search(len(cuQ)-1, func(x int) bool { return int(cuQ[x+1]) > t })
		q0, sq := int(cuQ[bi]), int(cuQ[bi+1]-cuQ[bi])
		k0, sk := int(cuK[bi]), int(cuK[bi+1]-cuK[bi])
		keys := func(j, hk int) ([]float64, []float64) { return k.Row(0, k0+j, hk), v.Row(0, k0+j, hk) }
		lse[h*total+t] = attendRow(q.Row(0, t, h), out.Row(0, t, h), h, hq/k.Shape[2], t-q0, sq, sk, keys, &p)
	})
	return out, lse, nil
}

// ReferencePaged is Decode in float64 on the host: kc and vc are the
// caches (pages, page size, h_kv, d), blockTable[b] the pages of entry b
// in order, seqLens[b] its cache length. The log-sum-exp is (batch, h_q,
// s_q).
func ReferencePaged(q, kc, vc HostTensor, blockTable [][]int32, seqLens []int32, p Params) (out HostTensor, lse []float64, err error) {
	const op = "ReferencePaged"
	if err := checkHost(op, q, kc, vc, p); err != nil {
		return HostTensor{}, nil, err
	}
	b, sq, hq, d := q.Shape[0], q.Shape[1], q.Shape[2], q.Shape[3]
	pages, pageSize := kc.Shape[0], kc.Shape[1]
	if len(seqLens) != b || len(blockTable) != b {
		return HostTensor{}, nil, pkg.Errorf(op, errs.ErrArgument, "%d cache lengths and %d block table rows for a batch of %d", len(seqLens), len(blockTable), b)
	}
	for bi, n := range seqLens {
		if n < 0 || pageSize == 0 || int(n) > len(blockTable[bi])*pageSize {
			return HostTensor{}, nil, pkg.Errorf(op, errs.ErrArgument, "seqLens[%d] is %d: want 0 to %d pages × %d rows", bi, n, len(blockTable[bi]), pageSize)
		}
		for j := 0; j*pageSize < int(n); j++ {
			if pg := blockTable[bi][j]; pg < 0 || int(pg) >= pages {
				return HostTensor{}, nil, pkg.Errorf(op, errs.ErrArgument, "blockTable[%d][%d] is %d: want a page of 0 to %d", bi, j, pg, pages-1)
			}
		}
	}
	out = NewHostTensor(b, sq, hq, d)
	lse = make([]float64, b*hq*sq)
	eachRow(b*hq*sq, func(r int) {
		bi, h, i := r/(hq*sq), r/sq%hq, r%sq
		bt := blockTable[bi]
		keys := func(j, hk int) ([]float64, []float64) {
			pg := int(bt[j/pageSize])
			return kc.Row(pg, j%pageSize, hk), vc.Row(pg, j%pageSize, hk)
		}
		lse[r] = attendRow(q.Row(bi, i, h), out.Row(bi, i, h), h, hq/kc.Shape[2], i, sq, int(seqLens[bi]), keys, &p)
	})
	return out, lse, nil
}

// eachRow calls f(r) for every r in [0, n) on the host's cores, in runs of
// rowChunk: the references' rows are independent (each writes its own
// output row and log-sum-exp), and the GPU tests' larger shapes took
// minutes on one core under the race detector.
func eachRow(n int, f func(r int)) {
	const rowChunk = 16
	workers := min(runtime.GOMAXPROCS(0), (n+rowChunk-1)/rowChunk)
	if workers <= 1 {
		for r := range n {
			f(r)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				r0 := int(next.Add(rowChunk)) - rowChunk
				if r0 >= n {
					return
				}
				for r := r0; r < min(r0+rowChunk, n); r++ {
					f(r)
				}
			}
		})
	}
	wg.Wait()
}

func checkHost(op string, q, k, v HostTensor, p Params) error {
	for _, x := range []struct {
		name string
		t    HostTensor
	}{{"q", q}, {"k", k}, {"v", v}} {
		if err := x.t.check(op, x.name); err != nil {
			return err
		}
	}
	if k.Shape != v.Shape {
		return pkg.Errorf(op, errs.ErrShape, "k has shape %v and v %v: they must be equal", k.Shape, v.Shape)
	}
	if q.Shape[3] == 0 || q.Shape[3] != k.Shape[3] {
		return pkg.Errorf(op, errs.ErrShape, "head dims: q %d, k %d: they must be equal and positive", q.Shape[3], k.Shape[3])
	}
	if q.Shape[2] == 0 || k.Shape[2] == 0 || q.Shape[2]%k.Shape[2] != 0 {
		return pkg.Errorf(op, errs.ErrShape, "%d query heads and %d KV heads: h_q must be a positive multiple of h_kv", q.Shape[2], k.Shape[2])
	}
	p.LSE = 0
	return checkParams(op, &p, q.Shape[2])
}

// attendRow writes query row i (of sq, head h) of a sequence with sk keys
// into o and returns its log-sum-exp; keys gives key j's k and v rows of a
// KV head, g query heads sharing each.
func attendRow(q, o []float64, h, g, i, sq, sk int, keys func(j, hk int) ([]float64, []float64), p *Params) float64 {
	scale := p.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(len(q)))
	}
	left, right := window(p)
	diag := i + sk - sq
	logits := make([]float64, sk)
	m := math.Inf(-1)
	for j := range sk {
		logits[j] = math.Inf(-1)
		if (left >= 0 && j < diag-left) || (right >= 0 && j > diag+right) {
			continue
		}
		kr, _ := keys(j, h/g)
		var s float64
		for c := range q {
			s += q[c] * kr[c]
		}
		s *= scale
		if p.SoftCap > 0 {
			s = p.SoftCap * math.Tanh(s/p.SoftCap)
		}
		if p.AlibiSlopes != nil {
			s -= float64(p.AlibiSlopes[h]) * math.Abs(float64(diag-j))
		}
		logits[j] = s
		m = math.Max(m, s)
	}
	for c := range o {
		o[c] = 0
	}
	if math.IsInf(m, -1) {
		return m
	}
	var sum float64
	for j, s := range logits {
		if math.IsInf(s, -1) {
			continue
		}
		w := math.Exp(s - m)
		sum += w
		_, vr := keys(j, h/g)
		for c := range o {
			o[c] += w * vr[c]
		}
	}
	for c := range o {
		o[c] /= sum
	}
	return m + math.Log(sum)
}
