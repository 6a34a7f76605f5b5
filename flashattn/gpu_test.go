package flashattn

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
)

// Tier 2: the kernels on a GPU against Reference (float64), on random
// inputs rounded to the dtype first (so that the reference sees what the
// kernel reads), with the outputs and the LSE poisoned (NaN) before each
// call, over head dims, odd lengths, s_q ≠ s_kv, every feature and their
// combinations, strided layouts, varlen batches with empty sequences, and
// paged caches with shuffled block tables.

type gpuEnv struct {
	t   *testing.T
	dev *hip.Device
	s   *hip.Stream
	h   *Handle
	mc  Backend // the device's matrix-core kernels (MatrixCore, MFMA, WMMA), 0 if none
	ck  bool    // the CK shim is loaded (AMD): it may run what it covers
}

// checkBackend checks that a call ran on want, or on CK where the shim is
// loaded (which cases it takes depends on how it was built).
func (g *gpuEnv) checkBackend(t *testing.T, want, got Backend, what string) {
	t.Helper()
	if g.ck && got == CK {
		return
	}
	assert.Equal(t, want, got, what)
}

// expect is the backend that a call with rows query rows per KV head and
// head dim d runs on this device, every operand 16-byte aligned (as every
// layout of these tests is): Backend's rule.
func (g *gpuEnv) expect(dt DType, rows, d int, paged bool) Backend {
	switch {
	case g.mc == MatrixCore && dt != F32 && !paged && rows <= mmaDecRows && d <= mmaDecMaxD:
		return MatrixCore
	case rows <= 8:
		return FlashDecoding
	case g.mc != 0 && dt != F32 && !paged:
		return g.mc
	}
	return Portable
}

func gpu(t *testing.T) *gpuEnv {
	t.Helper()
	var dev *hip.Device
	n, err := hip.DeviceCount()
	if err == nil && n == 0 {
		err = fmt.Errorf("no GPU")
	}
	if err == nil {
		dev, err = hip.GetDevice(0)
	}
	testenv.Need(t, 2, "a GPU", err)
	h := handleOn(t, dev)
	props, err := dev.Properties()
	require.NoError(t, err)
	mc := matrixBackend(props.ArchName)
	ck := loadedCK() != nil
	t.Logf("%s (%s): matrix-core kernels %v (attn_wgmma %v), CK shim %v", props.Name, props.ArchName, mc, h.target.wgmma, ck)
	return &gpuEnv{t: t, dev: dev, s: h.Stream(), h: h, mc: mc, ck: ck}
}

// buffer allocates n bytes filled with 0xFF (NaN in every float dtype).
func (g *gpuEnv) buffer(n int) *hip.Buffer {
	g.t.Helper()
	b, err := g.dev.Malloc(max(n, 1))
	require.NoError(g.t, err)
	g.t.Cleanup(func() { b.Close() })
	require.NoError(g.t, b.Memset(0xFF))
	return b
}

func (g *gpuEnv) int32s(v []int32) hip.DevicePtr {
	b := g.buffer(4 * len(v))
	if len(v) > 0 {
		require.NoError(g.t, b.CopyFromHost(hip.AsBytes(v)))
	}
	return b.Ptr()
}

// round rounds a value to a dtype, as an upload does.
func round(dt DType, x float64) float64 {
	switch dt {
	case F16:
		return float64(hip.HalfFromFloat32(float32(x)).Float32())
	case BF16:
		return float64(hip.BFloat16FromFloat32(float32(x)).Float32())
	}
	return float64(float32(x))
}

func encode(dt DType, x float64) []byte {
	var b [4]byte
	switch dt {
	case F16:
		binary.LittleEndian.PutUint16(b[:], uint16(hip.HalfFromFloat32(float32(x))))
		return b[:2]
	case BF16:
		binary.LittleEndian.PutUint16(b[:], uint16(hip.BFloat16FromFloat32(float32(x))))
		return b[:2]
	}
	binary.LittleEndian.PutUint32(b[:], math.Float32bits(float32(x)))
	return b[:]
}

func decode(dt DType, b []byte) float64 {
	switch dt {
	case F16:
		return float64(hip.Half(binary.LittleEndian.Uint16(b)).Float32())
	case BF16:
		return float64(hip.BFloat16(binary.LittleEndian.Uint16(b)).Float32())
	}
	return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
}

// layout names how an operand sits in memory: "contiguous"; "padded"
// (every head and every row with room to spare, as q sliced out of a
// fused qkv); "bhsd" (a (b, h, s, d) tensor seen as BSHD).
func strides(layout string, s [4]int) [4]int {
	n, h, d := s[1], s[2], s[3]
	switch layout {
	case "padded":
		return [4]int{(n + 1) * (h + 1) * (d + 8), (h + 1) * (d + 8), d + 8, 1}
	case "bhsd":
		return [4]int{h * n * d, d, n * d, 1}
	}
	return [4]int{n * h * d, h * d, d, 1}
}

// bufSize is the size of a buffer for an operand of shape s, strides st:
// its span, at least one element.
func bufSize(dt DType, s, st [4]int) int {
	return max(Tensor{DType: dt, Shape: s, Stride: st}.span(), dt.Size())
}

// upload rounds t to dt in place and copies it to the device in layout.
func (g *gpuEnv) upload(t *HostTensor, dt DType, layout string) Tensor {
	x, _ := g.uploadBuffer(t, dt, layout)
	return x
}

// uploadBuffer is upload, and the buffer it copied t to.
func (g *gpuEnv) uploadBuffer(t *HostTensor, dt DType, layout string) (Tensor, *hip.Buffer) {
	st := strides(layout, t.Shape)
	buf := make([]byte, bufSize(dt, t.Shape, st))
	for i := range buf {
		buf[i] = 0xFF
	}
	s := t.Shape
	for b := range s[0] {
		for j := range s[1] {
			for h := range s[2] {
				row := t.Row(b, j, h)
				for c := range row {
					row[c] = round(dt, row[c])
					o := b*st[0] + j*st[1] + h*st[2] + c
					copy(buf[o*dt.Size():], encode(dt, row[c]))
				}
			}
		}
	}
	dbuf := g.buffer(len(buf))
	require.NoError(g.t, dbuf.CopyFromHost(buf))
	return Tensor{Ptr: dbuf.Ptr(), DType: dt, Shape: s, Stride: st}, dbuf
}

// output allocates a poisoned operand of shape s in layout, and returns
// a function that reads it back.
func (g *gpuEnv) output(dt DType, s [4]int, layout string) (Tensor, func() HostTensor) {
	st := strides(layout, s)
	n := bufSize(dt, s, st)
	buf := g.buffer(n)
	return Tensor{Ptr: buf.Ptr(), DType: dt, Shape: s, Stride: st}, func() HostTensor {
		require.NoError(g.t, g.s.Synchronize())
		raw := make([]byte, n)
		require.NoError(g.t, buf.CopyToHost(raw))
		out := NewHostTensor(s[0], s[1], s[2], s[3])
		for b := range s[0] {
			for j := range s[1] {
				for h := range s[2] {
					row := out.Row(b, j, h)
					for c := range row {
						o := b*st[0] + j*st[1] + h*st[2] + c
						row[c] = decode(dt, raw[o*dt.Size():])
					}
				}
			}
		}
		return out
	}
}

func (g *gpuEnv) lse(n int) (hip.DevicePtr, func() []float64) {
	buf := g.buffer(4 * n)
	return buf.Ptr(), func() []float64 {
		require.NoError(g.t, g.s.Synchronize())
		raw := make([]float32, n)
		if n > 0 {
			require.NoError(g.t, buf.CopyToHost(hip.AsBytes(raw)))
		}
		out := make([]float64, n)
		for i, v := range raw {
			out[i] = float64(v)
		}
		return out
	}
}

// tol is the tolerance of an output element: the kernel computes in
// float32 and rounds once to the dtype.
func tol(dt DType) float64 {
	switch dt {
	case F16:
		return 2e-3
	case BF16:
		return 1.6e-2
	}
	return 3e-5
}

func compare(t *testing.T, dt DType, want, got HostTensor, wantLSE, gotLSE []float64, what string) {
	t.Helper()
	bad := 0
	for i, w := range want.Data {
		gv := got.Data[i]
		if math.IsNaN(gv) || math.Abs(gv-w) > tol(dt)*(1+math.Abs(w)) {
			if bad < 5 {
				t.Errorf("%s: out[%d] (b,s,h,d %v) = %v, want %v", what, i, unflat(want.Shape, i), gv, w)
			}
			bad++
		}
	}
	for i, w := range wantLSE {
		gv := gotLSE[i]
		ok := (math.IsInf(w, -1) && math.IsInf(gv, -1)) || math.Abs(gv-w) <= 1e-3*(1+math.Abs(w))
		if !ok {
			if bad < 5 {
				t.Errorf("%s: lse[%d] = %v, want %v", what, i, gv, w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values wrong", what, bad, len(want.Data)+len(wantLSE))
	}
}

func unflat(s [4]int, i int) [4]int {
	return [4]int{i / (s[1] * s[2] * s[3]), i / (s[2] * s[3]) % s[1], i / s[3] % s[2], i % s[3]}
}

// fwdCase is one Forward call.
type fwdCase struct {
	dt         DType
	b, sq, sk  int
	hq, hkv, d int
	layout     string
	p          Params
	qScale     float64 // q's magnitude (large logits); 0 means 1
	noLSE      bool    // ask for no log-sum-exp
}

func (c fwdCase) String() string {
	f := ""
	if c.p.Causal {
		f += " causal"
	}
	if w := c.p.Window; w != nil {
		f += fmt.Sprintf(" window(%d,%d)", w.Left, w.Right)
	}
	if c.p.AlibiSlopes != nil {
		f += " alibi"
	}
	if c.p.SoftCap > 0 {
		f += fmt.Sprintf(" softcap %g", c.p.SoftCap)
	}
	if c.p.Splits > 0 {
		f += fmt.Sprintf(" splits %d", c.p.Splits)
	}
	if c.qScale > 1 {
		f += fmt.Sprintf(" q×%g", c.qScale)
	}
	return fmt.Sprintf("%v b%d sq%d sk%d h%d/%d d%d %s%s", c.dt, c.b, c.sq, c.sk, c.hq, c.hkv, c.d, c.layout, f)
}

// forward runs c against Reference, and returns the backend that ran it.
func (g *gpuEnv) forward(t *testing.T, c fwdCase) Backend {
	r := rand.New(rand.NewPCG(uint64(c.sq*1000+c.sk), uint64(c.d)))
	q, k, v := randHost(r, c.b, c.sq, c.hq, c.d), randHost(r, c.b, c.sk, c.hkv, c.d), randHost(r, c.b, c.sk, c.hkv, c.d)
	if c.qScale > 0 {
		for i := range q.Data {
			q.Data[i] *= c.qScale
		}
	}
	if c.layout == "" {
		c.layout = "contiguous"
	}
	gq, gk, gv := g.upload(&q, c.dt, c.layout), g.upload(&k, c.dt, c.layout), g.upload(&v, c.dt, c.layout)
	out, read := g.output(c.dt, q.Shape, c.layout)
	p := c.p
	lsePtr, readLSE := g.lse(c.b * c.hq * c.sq)
	if c.noLSE {
		readLSE = func() []float64 { return nil }
	} else {
		p.LSE = lsePtr
	}
	be, err := g.h.Forward(gq, gk, gv, out, p)
	require.NoError(t, err, c.String())
	g.checkBackend(t, g.expect(c.dt, c.sq*c.hq/c.hkv, c.d, false), be, c.String())
	want, wantLSE, err := Reference(q, k, v, c.p)
	require.NoError(t, err)
	if c.noLSE {
		wantLSE = nil
	}
	compare(t, c.dt, want, read(), wantLSE, readLSE(), c.String())
	return be
}

func slopes(n int) []float32 {
	s := make([]float32, n)
	for h := range s {
		s[h] = float32(math.Pow(2, -8*float64(h+1)/float64(n)))
	}
	return s
}

func TestGPUForwardHeadDims(t *testing.T) {
	g := gpu(t)
	for _, dt := range []DType{F16, BF16, F32} {
		for _, d := range []int{8, 16, 40, 64, 72, 96, 128, 136, 200, 256} {
			// 258 rows a KV head: five blocks of 64 (matrix cores) over
			// keys that end past a tile; causal with s_q < s_kv masks a
			// diagonal that crosses tiles.
			c := fwdCase{dt: dt, b: 2, sq: 129, sk: 200, hq: 4, hkv: 2, d: d, p: Params{Causal: true}}
			t.Run(c.String(), func(t *testing.T) { g.forward(t, c) })
		}
	}
}

func TestGPUForwardLengths(t *testing.T) {
	g := gpu(t)
	lens := []int{1, 7, 129, 1000}
	for _, dt := range []DType{F16, BF16} {
		d := map[DType]int{F16: 64, BF16: 128}[dt]
		for _, sq := range lens {
			for _, sk := range lens {
				for _, causal := range []bool{false, true} {
					c := fwdCase{dt: dt, b: 1, sq: sq, sk: sk, hq: 2, hkv: 1, d: d, p: Params{Causal: causal}}
					t.Run(c.String(), func(t *testing.T) { g.forward(t, c) })
				}
			}
		}
	}
}

// features are the options that each kernel must honour, alone and
// combined.
var features = []Params{
	{},
	{Causal: true},
	{Window: &Window{Left: 16, Right: 8}},
	{Window: &Window{Left: -1, Right: 0}},
	{Window: &Window{Left: 32, Right: -1}},
	{Window: &Window{Left: 0, Right: 0}},
	{Causal: true, Window: &Window{Left: 20, Right: -1}},
	{AlibiSlopes: slopes(8)},
	{Causal: true, AlibiSlopes: slopes(8)},
	{SoftCap: 3},
	{Scale: 0.3, SoftCap: 30},
	{Causal: true, Window: &Window{Left: 40, Right: 3}, AlibiSlopes: slopes(8), SoftCap: 20, Scale: 0.2},
	{Splits: 3},
	{Causal: true, Splits: 7, AlibiSlopes: slopes(8)},
	{Scale: -0.1},
}

// TestGPUForwardFeatures runs every feature with each dtype on each
// head-dim bucket of the kernels (24 and 120 leave a half chunk of 8 dims
// padded; 256 has the smaller key tiles; on sm_90a 128 and 64 over 2048
// keys or more are attn_wgmma's), the shapes taking turns: s_q <
// s_kv with GQA, s_q > s_kv with MHA (causal rows that see nothing), MQA.
func TestGPUForwardFeatures(t *testing.T) {
	g := gpu(t)
	shapes := [][3]int{{77, 200, 2}, {200, 77, 8}, {33, 33, 1}} // sq, sk, h_kv (8 query heads)
	// Head dim 64 over 2048 keys and more: attn_wgmma's on sm_90a.
	long := [][3]int{{77, 2100, 2}, {200, 2048, 8}, {33, 2049, 1}}
	for _, dt := range []DType{F16, BF16} {
		for di, d := range []int{24, 64, 64, 120, 128, 256} {
			for fi, p := range features {
				shape := shapes[(fi+di)%len(shapes)]
				if di == 2 {
					shape = long[fi%len(long)]
				}
				c := fwdCase{dt: dt, b: 2, sq: shape[0], sk: shape[1], hq: 8, hkv: shape[2], d: d, p: p}
				t.Run(c.String(), func(t *testing.T) { g.forward(t, c) })
			}
		}
	}
}

// TestGPUForwardLayouts runs strided layouts: heads and rows with room to
// spare (q sliced out of a fused qkv), and (b, h, s, d) tensors.
func TestGPUForwardLayouts(t *testing.T) {
	g := gpu(t)
	for _, dt := range []DType{F16, BF16} {
		for _, layout := range []string{"padded", "bhsd"} {
			for _, shape := range [][3]int{{77, 200, 2}, {200, 77, 8}, {33, 33, 1}} {
				for _, p := range []Params{{}, {Causal: true, Splits: 2}} {
					c := fwdCase{dt: dt, b: 2, sq: shape[0], sk: shape[1], hq: 8, hkv: shape[2], d: 64, layout: layout, p: p}
					t.Run(c.String(), func(t *testing.T) { g.forward(t, c) })
				}
			}
		}
	}
}

// TestGPUForwardDecodeFeatures runs every feature through the decode
// kernels on dense K and V (attn_mmadec on NVIDIA up to head dim 128,
// flash-decoding for F32, head dim 256 and elsewhere): one query row a KV
// head (MHA), and 8 (GQA 4 × s_q 2; flash-decoding's two blocks of 4).
func TestGPUForwardDecodeFeatures(t *testing.T) {
	g := gpu(t)
	for _, dt := range []DType{F16, BF16, F32} {
		for fi, p := range features {
			c := fwdCase{dt: dt, b: 2, sq: 1, sk: 333, hq: 8, hkv: 8, d: []int{32, 64, 128, 256}[fi%4], p: p}
			if fi%2 == 1 {
				c.sq, c.hkv = 2, 2
			}
			t.Run(c.String(), func(t *testing.T) { g.forward(t, c) })
		}
	}
}

// TestGPUForwardDecodeFused runs MHA decode steps whose splits
// attn_mmadec merges itself on NVIDIA (a row of head dim 128 or less, at
// most 8 splits: fuseSplits): every feature, splits forced from 2 to 8,
// over key counts that leave some splits without keys (1 and 7) or all of
// them some. Run twice on one handle: a merge leaves its counters at zero.
func TestGPUForwardDecodeFused(t *testing.T) {
	g := gpu(t)
	for _, dt := range []DType{F16, BF16} {
		for fi, p := range features {
			p.Splits = 2 + fi%7
			c := fwdCase{dt: dt, b: 3, sq: 1, sk: []int{333, 1000, 7, 1}[fi%4], hq: 8, hkv: 8, d: []int{128, 64, 40}[fi%3], p: p}
			t.Run(c.String(), func(t *testing.T) {
				if g.mc == MatrixCore {
					// The launch is one that merges its own splits (or has
					// one split: a tile of keys), not attn_combine's.
					require.NotNil(t, g.h.counters, "the handle's counters")
					q, k, v, out := operands(c.b, c.sq, c.sk, c.hq, c.hkv, c.d)
					for _, x := range []*Tensor{&q, &k, &v, &out} {
						x.DType = c.dt
					}
					pr, err := forwardProblem("F", q, k, v, out)
					require.NoError(t, err)
					pl, err := newPlan("F", &pr, &c.p, g.h.target)
					require.NoError(t, err)
					assert.Equal(t, c.sk > 16, pl.splits > 1, "splits %d", pl.splits)
					assert.Equal(t, pl.splits > 1, pl.fusable, "splits %d", pl.splits)
				}
				g.forward(t, c)
				g.forward(t, c)
			})
		}
	}
}

// TestGPUForwardMma runs attn_mma on the head dims that attn_wgmma takes
// where the device has it (64 and 128, sm_90a), so that both are checked
// there: every feature, both dtypes, the shapes of TestGPUForwardFeatures.
func TestGPUForwardMma(t *testing.T) {
	g := gpu(t)
	if !g.h.target.wgmma {
		t.Skip("no attn_wgmma on this device: attn_mma runs head dims 64 and 128 in the other tests")
	}
	h, err := NewHandle(g.s)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, h.Close()) })
	h.target.wgmma = false
	m := *g
	m.h = h
	shapes := [][3]int{{77, 200, 2}, {200, 77, 8}, {33, 33, 1}}
	for _, dt := range []DType{F16, BF16} {
		for di, d := range []int{64, 128} {
			for fi, p := range features {
				shape := shapes[(fi+di)%len(shapes)]
				c := fwdCase{dt: dt, b: 2, sq: shape[0], sk: shape[1], hq: 8, hkv: shape[2], d: d, p: p}
				t.Run(c.String(), func(t *testing.T) { m.forward(t, c) })
			}
		}
	}
}

func TestGPUForwardLargeLogits(t *testing.T) {
	g := gpu(t)
	for _, dt := range []DType{F16, BF16, F32} {
		for _, p := range []Params{{Scale: 1}, {Scale: 1, Causal: true}, {Scale: 1, SoftCap: 50}, {Scale: 1, Splits: 4}} {
			for _, sq := range []int{1, 65} { // flash-decoding, and the others
				c := fwdCase{dt: dt, b: 1, sq: sq, sk: 300, hq: 2, hkv: 2, d: 64, p: p, qScale: 30}
				t.Run(c.String(), func(t *testing.T) { g.forward(t, c) })
			}
		}
	}
}

func TestGPUForwardSplitKV(t *testing.T) {
	g := gpu(t)
	for _, splits := range []int{0, 1, 2, 5, 16, MaxSplits} {
		for _, sq := range []int{1, 4, 129} {
			c := fwdCase{dt: F16, b: 3, sq: sq, sk: 1000, hq: 8, hkv: 2, d: 128, p: Params{Causal: true, Splits: splits}}
			t.Run(c.String(), func(t *testing.T) { g.forward(t, c) })
		}
	}
}

func TestGPUForwardEmpty(t *testing.T) {
	g := gpu(t)
	// No keys: every row is zero with a log-sum-exp of -inf.
	c := fwdCase{dt: F16, b: 2, sq: 3, sk: 0, hq: 2, hkv: 1, d: 32}
	g.forward(t, c) // flash-decoding
	c.sq = 50
	g.forward(t, c)
	// No queries, no batch: nothing to do, nothing launched.
	q, k, v, out := Contiguous(16, F16, 0, 5, 2, 32), Contiguous(16, F16, 0, 5, 2, 32), Contiguous(16, F16, 0, 5, 2, 32), Contiguous(16, F16, 0, 5, 2, 32)
	be, err := g.h.Forward(q, k, v, out, Params{})
	require.NoError(t, err)
	assert.Equal(t, g.expect(F16, 5, 32, false), be, "5 query rows a KV head")
}

func TestGPUForwardVarlen(t *testing.T) {
	g := gpu(t)
	for _, c := range []struct {
		lq, lk []int32
		p      Params
	}{
		{[]int32{3, 0, 129, 1, 7}, []int32{5, 4, 129, 1000, 0}, Params{Causal: true}},
		{[]int32{3, 0, 129, 1, 7}, []int32{5, 4, 129, 1000, 0}, Params{}},
		{[]int32{1000, 7}, []int32{7, 1000}, Params{Causal: true, Window: &Window{Left: 50, Right: -1}, AlibiSlopes: slopes(4)}},
		{[]int32{1, 1, 1, 1}, []int32{300, 0, 17, 1000}, Params{Splits: 6, SoftCap: 10}},
		{[]int32{0, 0}, []int32{3, 0}, Params{}},
	} {
		for _, dt := range []DType{F16, BF16} {
			name := fmt.Sprintf("%v q%v k%v %+v", dt, c.lq, c.lk, c.p)
			t.Run(name, func(t *testing.T) {
				be := g.varlen(t, dt, c.lq, c.lk, 64, c.p, name)
				maxQ := 0
				for _, n := range c.lq {
					maxQ = max(maxQ, int(n))
				}
				if maxQ > 0 {
					g.checkBackend(t, g.expect(dt, maxQ*2, 64, false), be, name)
				}
			})
		}
	}
}

// varlen runs ForwardVarlen on random sequences of lq queries and lk keys
// (4 query heads on 2 KV heads of head dim d, q's rows padded), checks the
// output and the LSE against ReferenceVarlen, and returns the backend that
// ran.
func (g *gpuEnv) varlen(t *testing.T, dt DType, lq, lk []int32, d int, p Params, name string) Backend {
	t.Helper()
	cu := func(l []int32) []int32 {
		out := []int32{0}
		for _, n := range l {
			out = append(out, out[len(out)-1]+n)
		}
		return out
	}
	cuQ, cuK := cu(lq), cu(lk)
	tq, tk := int(cuQ[len(cuQ)-1]), int(cuK[len(cuK)-1])
	r := rand.New(rand.NewPCG(uint64(tq), uint64(tk)))
	q, k, v := randHost(r, 1, tq, 4, d), randHost(r, 1, tk+3, 2, d), randHost(r, 1, tk+3, 2, d)
	gq, gk, gv := g.upload(&q, dt, "padded"), g.upload(&k, dt, "contiguous"), g.upload(&v, dt, "contiguous")
	out, read := g.output(dt, q.Shape, "contiguous")
	ref := p
	lsePtr, readLSE := g.lse(4 * tq)
	p.LSE = lsePtr
	vl := Varlen{CuSeqlensQ: cuQ, CuSeqlensK: cuK, DevCuSeqlensQ: g.int32s(cuQ), DevCuSeqlensK: g.int32s(cuK)}
	be, err := g.h.ForwardVarlen(gq, gk, gv, out, vl, p)
	require.NoError(t, err)
	want, wantLSE, err := ReferenceVarlen(q, k, v, cuQ, cuK, ref)
	require.NoError(t, err)
	compare(t, dt, want, read(), wantLSE, readLSE(), name)
	return be
}

// shuffledPages hands out the pages of caches of lens keys (pageSize keys
// a page), spare pages more than they need, in an order r shuffles: each
// entry's pages (table), and the block table (flat, stride entries a row,
// one more than the longest entry needs, -1 past each entry's pages: never
// read).
func shuffledPages(r *rand.Rand, lens []int32, pageSize, spare int) (table [][]int32, flat []int32, stride, pages int) {
	need := 0
	for _, n := range lens {
		np := (int(n) + pageSize - 1) / pageSize
		stride = max(stride, np)
		need += np
	}
	stride++
	pages = need + spare
	perm := r.Perm(pages)
	table = make([][]int32, len(lens))
	flat = make([]int32, len(lens)*stride)
	for i := range flat {
		flat[i] = -1
	}
	next := 0
	for bi, n := range lens {
		for j := 0; j*pageSize < int(n); j++ {
			table[bi] = append(table[bi], int32(perm[next]))
			flat[bi*stride+j] = int32(perm[next])
			next++
		}
	}
	return table, flat, stride, pages
}

func TestGPUDecodePaged(t *testing.T) {
	g := gpu(t)
	for _, c := range []struct {
		dt       DType
		pageSize int
		lens     []int32
		sq       int
		hq, hkv  int
		d        int
		p        Params
	}{
		{F16, 16, []int32{1, 7, 129, 1000, 0}, 1, 32, 8, 128, Params{}},
		{BF16, 16, []int32{1, 7, 129, 1000}, 1, 32, 8, 128, Params{Splits: 1}},
		{F16, 7, []int32{300, 5, 64}, 4, 8, 1, 64, Params{Causal: true}},
		{BF16, 64, []int32{1000, 999}, 3, 16, 4, 256, Params{Causal: true, AlibiSlopes: slopes(16), SoftCap: 30, Splits: 9}},
		{F16, 1, []int32{17, 3}, 1, 4, 4, 8, Params{Window: &Window{Left: 5, Right: -1}}},
		{F32, 32, []int32{513, 1}, 2, 8, 2, 96, Params{Causal: true}},
		{F16, 16, []int32{4096, 1000, 1}, 1, 8, 8, 128, Params{}},
		{BF16, 32, []int32{2000, 77}, 1, 4, 4, 64, Params{Causal: true, AlibiSlopes: slopes(4), SoftCap: 20}},
		{F16, 8, []int32{700, 0, 33}, 2, 8, 2, 32, Params{Window: &Window{Left: 100, Right: 0}}},
		// A block's four rows cross query positions (three heads a KV
		// head), in the kernel for an LLM's step (power-of-two pages, d
		// a bucket, nothing masked: TestPlanPagedStep has these two).
		{F16, 32, []int32{300, 45}, 2, 6, 2, 64, Params{}},
		{BF16, 64, []int32{77, 512}, 3, 4, 2, 128, Params{Splits: 3}},
	} {
		name := fmt.Sprintf("%v page %d lens %v sq %d h %d/%d d %d %+v", c.dt, c.pageSize, c.lens, c.sq, c.hq, c.hkv, c.d, c.p)
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.pageSize), uint64(c.d)))
			b := len(c.lens)
			table, flat, stride, pages := shuffledPages(r, c.lens, c.pageSize, 5)
			kc, vc := randHost(r, pages, c.pageSize, c.hkv, c.d), randHost(r, pages, c.pageSize, c.hkv, c.d)
			q := randHost(r, b, c.sq, c.hq, c.d)
			gq := g.upload(&q, c.dt, "contiguous")
			gk, gv := g.upload(&kc, c.dt, "contiguous"), g.upload(&vc, c.dt, "padded")
			out, read := g.output(c.dt, q.Shape, "contiguous")
			p := c.p
			lsePtr, readLSE := g.lse(b * c.hq * c.sq)
			p.LSE = lsePtr
			kv := PagedKV{K: gk, V: gv, BlockTable: g.int32s(flat), BlockTableStride: stride, SeqLens: c.lens, DevSeqLens: g.int32s(c.lens)}
			be, err := g.h.Decode(gq, kv, out, p)
			require.NoError(t, err)
			assert.Equal(t, g.expect(c.dt, c.sq*c.hq/c.hkv, c.d, true), be)
			want, wantLSE, err := ReferencePaged(q, kc, vc, table, c.lens, c.p)
			require.NoError(t, err)
			compare(t, c.dt, want, read(), wantLSE, readLSE(), name)
			// Again, into fresh buffers: the launch leaves nothing behind
			// that changes the next one's result.
			out2, read2 := g.output(c.dt, q.Shape, "contiguous")
			p.LSE, readLSE = g.lse(b * c.hq * c.sq)
			_, err = g.h.Decode(gq, kv, out2, p)
			require.NoError(t, err)
			compare(t, c.dt, want, read2(), wantLSE, readLSE(), name+", again")
		})
	}

	t.Run("a page outside the cache is NaN", func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 6))
		kc, vc := randHost(r, 4, 8, 1, 32), randHost(r, 4, 8, 1, 32)
		q := randHost(r, 2, 1, 2, 32)
		gq, gk, gv := g.upload(&q, F16, "contiguous"), g.upload(&kc, F16, "contiguous"), g.upload(&vc, F16, "contiguous")
		out, read := g.output(F16, q.Shape, "contiguous")
		flat := []int32{0, 9, 2, 3} // entry 0 reads page 9 of 4
		lens := []int32{16, 16}
		kv := PagedKV{K: gk, V: gv, BlockTable: g.int32s(flat), BlockTableStride: 2, SeqLens: lens, DevSeqLens: g.int32s(lens)}
		_, err := g.h.Decode(gq, kv, out, Params{Splits: 1})
		require.NoError(t, err)
		got := read()
		for _, x := range got.Row(0, 0, 0) {
			assert.True(t, math.IsNaN(x), "entry 0 reads a page outside the cache: NaN, got %v", x)
		}
		want, _, err := ReferencePaged(HostTensor{Data: q.Data[64:], Shape: [4]int{1, 1, 2, 32}}, kc, vc, [][]int32{{2, 3}}, lens[1:], Params{})
		require.NoError(t, err)
		compare(t, F16, want, HostTensor{Data: got.Data[64:], Shape: want.Shape}, nil, nil, "entry 1")
	})
}

// TestGPUDecodeRotary: decode steps with Params.Rotary (attn_decode_paged
// turning q and each entry's new key, and writing the new key and value
// into the pages) against the float64 reference over a cache into which
// the host wrote the rotated new keys; and the pages' new rows themselves.
// q, the new keys and values are views of one fused projection, as an
// LLM's step has them.
func TestGPUDecodeRotary(t *testing.T) {
	g := gpu(t)
	for _, c := range []struct {
		dt        DType
		pageSize  int
		lens      []int32
		hq, hkv   int
		d, splits int
	}{
		{BF16, 16, []int32{1, 17, 300, 1000}, 32, 8, 64, 0},
		{F16, 32, []int32{45, 64}, 8, 2, 128, 3},
		{BF16, 64, []int32{513, 2}, 8, 2, 256, 0},
		{F16, 8, []int32{9, 3, 70}, 16, 2, 32, 1}, // eight query heads a KV head: two row blocks, one writes
	} {
		name := fmt.Sprintf("%v page %d lens %v h %d/%d d %d splits %d", c.dt, c.pageSize, c.lens, c.hq, c.hkv, c.d, c.splits)
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.pageSize), uint64(c.d)+1))
			b, half, ps := len(c.lens), c.d/2, c.pageSize
			table, flat, stride, pages := shuffledPages(r, c.lens, ps, 3)
			kc, vc := randHost(r, pages, ps, c.hkv, c.d), randHost(r, pages, ps, c.hkv, c.d)
			qkv := randHost(r, b, 1, c.hq+2*c.hkv, c.d)
			angles := make([]float64, 2*b*half) // cos rows, then sin rows
			for i := range b * half {
				a := r.Float64() * 2 * math.Pi
				angles[i], angles[b*half+i] = round(c.dt, math.Cos(a)), round(c.dt, math.Sin(a))
			}
			raw := make([]byte, 0, len(angles)*c.dt.Size())
			for _, x := range angles {
				raw = append(raw, encode(c.dt, x)...)
			}
			ab := g.buffer(len(raw))
			require.NoError(t, ab.CopyFromHost(raw))
			gqkv := g.upload(&qkv, c.dt, "contiguous") // rounds qkv
			gk, kbuf := g.uploadBuffer(&kc, c.dt, "contiguous")
			gv, vbuf := g.uploadBuffer(&vc, c.dt, "contiguous")
			// What the kernel must do, on the host: q and the new keys
			// turned (a key rounded to the dtype, as the pages hold it),
			// the new rows written.
			turn := func(x []float64, bi int) []float64 {
				y := make([]float64, len(x))
				for i := range half {
					cs, sn := angles[bi*half+i], angles[b*half+bi*half+i]
					y[i], y[i+half] = x[i]*cs-x[i+half]*sn, x[i+half]*cs+x[i]*sn
				}
				return y
			}
			q := NewHostTensor(b, 1, c.hq, c.d)
			for bi := range b {
				for h := range c.hq {
					copy(q.Row(bi, 0, h), turn(qkv.Row(bi, 0, h), bi))
				}
				n := int(c.lens[bi])
				for h := range c.hkv {
					k := turn(qkv.Row(bi, 0, c.hq+h), bi)
					for i := range k {
						k[i] = round(c.dt, k[i])
					}
					pg := int(table[bi][(n-1)/ps])
					copy(kc.Row(pg, (n-1)%ps, h), k)
					copy(vc.Row(pg, (n-1)%ps, h), qkv.Row(bi, 0, c.hq+c.hkv+h))
				}
			}
			row := (c.hq + 2*c.hkv) * c.d
			view := func(h0, heads int) Tensor {
				return Tensor{Ptr: gqkv.Ptr.Add(h0 * c.d * c.dt.Size()), DType: c.dt, Shape: [4]int{b, 1, heads, c.d}, Stride: [4]int{row, row, c.d, 1}}
			}
			out, read := g.output(c.dt, q.Shape, "contiguous")
			kv := PagedKV{K: gk, V: gv, BlockTable: g.int32s(flat), BlockTableStride: stride, SeqLens: c.lens, DevSeqLens: g.int32s(c.lens)}
			rot := &Rotary{NewK: view(c.hq, c.hkv), NewV: view(c.hq+c.hkv, c.hkv), Cos: ab.Ptr(), Sin: ab.Ptr().Add(b * half * c.dt.Size()), CosStride: half}
			_, err := g.h.Decode(view(0, c.hq), kv, out, Params{Causal: true, Splits: c.splits, Rotary: rot})
			require.NoError(t, err)
			want, _, err := ReferencePaged(q, kc, vc, table, c.lens, Params{Causal: true})
			require.NoError(t, err)
			compare(t, c.dt, want, read(), nil, nil, name)
			// The pages' new rows: the value as given, the key within one
			// rounding of the host's (float32 against float64 turns).
			for _, x := range []struct {
				name string
				buf  *hip.Buffer
				host HostTensor
			}{{"key", kbuf, kc}, {"value", vbuf, vc}} {
				got := make([]byte, pages*ps*c.hkv*c.d*c.dt.Size())
				require.NoError(t, x.buf.CopyToHost(got))
				for bi, n := range c.lens {
					pg, j := int(table[bi][(int(n)-1)/ps]), (int(n)-1)%ps
					for h := range c.hkv {
						for i, w := range x.host.Row(pg, j, h) {
							o := ((pg*ps+j)*c.hkv+h)*c.d + i
							v := decode(c.dt, got[o*c.dt.Size():])
							assert.InDelta(t, w, v, tol(c.dt)*max(1, math.Abs(w)), "entry %d's new %s, head %d, dim %d", bi, x.name, h, i)
						}
					}
				}
			}
		})
	}
}

// TestGPUWorkspaceOutOfMemory runs a split-KV forward whose partials
// (512 sequences × 128 splits × 4096 heads × 257 floats: 276 GB) cannot be
// allocated on any GPU: the error is errs.ErrOutOfMemory, the kind candle
// gives it too, with HIP's status as its cause, and nothing is launched.
// The operands are real (q and out 1 GiB, k and v one MQA head of 2 GiB),
// so that nothing would run out of bounds if something were.
func TestGPUWorkspaceOutOfMemory(t *testing.T) {
	g := gpu(t)
	q := Contiguous(g.buffer(1<<30).Ptr(), F16, 512, 1, 4096, 256)
	kv := Contiguous(g.buffer(2<<30).Ptr(), F16, 512, 8192, 1, 256)
	_, err := g.h.Forward(q, kv, kv, q, Params{Splits: MaxSplits})
	require.Error(t, err)
	assert.ErrorIs(t, err, errs.ErrOutOfMemory)
	assert.ErrorIs(t, err, hip.ErrOutOfMemory, "HIP's status is the cause")
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "Handle.Forward", e.Op)
	assert.Same(t, errs.ErrOutOfMemory, e.Kind)
	require.NoError(t, g.s.Synchronize(), "the stream is fine after it")
}
