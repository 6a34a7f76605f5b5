package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/flashattn"
)

func randTensor(t *testing.T, dev candle.Device, r *rand.Rand, shape ...int) *candle.Tensor {
	t.Helper()
	n := 1
	for _, d := range shape {
		n *= d
	}
	data := make([]float32, n)
	for i := range data {
		data[i] = float32(r.NormFloat64())
	}
	x, err := candle.FromSlice(dev, data, shape...)
	require.NoError(t, err)
	t.Cleanup(func() { x.Close() })
	return x
}

// must keeps the unfused computation below readable.
func must(t *testing.T) func(*candle.Tensor, error) *candle.Tensor {
	return func(x *candle.Tensor, err error) *candle.Tensor {
		t.Helper()
		require.NoError(t, err)
		t.Cleanup(func() { x.Close() })
		return x
	}
}

// TestAttentionAgainstUnfusedOps checks the CPU path against attention
// spelled out in candle's ops: matmul, scale, mask, softmax, matmul.
func TestAttentionAgainstUnfusedOps(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	dev := candle.CPU()
	const b, sq, sk, h, d = 2, 5, 7, 3, 16
	q, k, v := randTensor(t, dev, r, b, sq, h, d), randTensor(t, dev, r, b, sk, h, d), randTensor(t, dev, r, b, sk, h, d)
	m := must(t)
	for _, causal := range []bool{false, true} {
		scores := m(m(q.Permute(0, 2, 1, 3)).Matmul(m(k.Permute(0, 2, 3, 1))))
		scores = m(scores.Affine(1/math.Sqrt(d), 0))
		mask := make([]float32, sq*sk)
		for i := range sq {
			for j := range sk {
				if causal && j > i+sk-sq {
					mask[i*sk+j] = -1e30
				}
			}
		}
		scores = m(scores.Add(m(candle.FromSlice(dev, mask, 1, 1, sq, sk))))
		want := m(m(m(scores.SoftmaxLastDim()).Matmul(m(v.Permute(0, 2, 1, 3)))).Permute(0, 2, 1, 3))

		got, err := ScaledDotProductAttention(q, k, v, flashattn.Params{Causal: causal})
		require.NoError(t, err)
		defer got.Close()
		assert.Equal(t, candle.Shape{b, sq, h, d}, got.Shape())
		assert.InDeltaSlice(t, values(t, want), values(t, got), 1e-5, "causal %v", causal)
	}
}

func TestAttentionCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	dev := candle.CPU()
	// A (b, h, s, d) tensor transposed to BSHD, GQA 4/2, bf16.
	qb := randTensor(t, dev, r, 1, 4, 6, 8)
	kv := randTensor(t, dev, r, 1, 9, 2, 8)
	m := must(t)
	q := m(m(qb.Transpose(1, 2)).ToDType(candle.BF16))
	k := m(kv.ToDType(candle.BF16))
	p := flashattn.Params{Causal: true, AlibiSlopes: []float32{0.5, 0.25, 0.125, 0.0625}, SoftCap: 20}
	out, lse, err := AttentionWithLSE(q, k, k, p)
	require.NoError(t, err)
	defer out.Close()
	defer lse.Close()
	assert.Equal(t, candle.BF16, out.DType())
	assert.Equal(t, candle.Shape{1, 4, 6}, lse.Shape())

	// The same attention spelled out here, independently of flashattn's
	// reference: soft-capped scaled logits, minus the ALiBi distance to the
	// bottom-right-aligned diagonal, causal, over the shared KV head.
	const sq, sk, hq, hkv, d = 6, 9, 4, 2, 8
	qv, kvv := values(t, q), values(t, k) // (s, h, d), rows in order
	want, wantLSE := make([]float64, sq*hq*d), make([]float64, hq*sq)
	for h := range hq {
		g := h / (hq / hkv)
		for i := range sq {
			logits := make([]float64, 0, sk)
			for j := range sk {
				if j > i+sk-sq {
					break
				}
				dot := 0.0
				for c := range d {
					dot += float64(qv[(i*hq+h)*d+c]) * float64(kvv[(j*hkv+g)*d+c])
				}
				x := p.SoftCap * math.Tanh(dot/math.Sqrt(d)/p.SoftCap)
				logits = append(logits, x-float64(p.AlibiSlopes[h])*math.Abs(float64(i+sk-sq-j)))
			}
			mx := math.Inf(-1)
			for _, x := range logits {
				mx = math.Max(mx, x)
			}
			sum := 0.0
			for _, x := range logits {
				sum += math.Exp(x - mx)
			}
			wantLSE[h*sq+i] = mx + math.Log(sum)
			for j, x := range logits {
				w := math.Exp(x-mx) / sum
				for c := range d {
					want[(i*hq+h)*d+c] += w * float64(kvv[(j*hkv+g)*d+c])
				}
			}
		}
	}
	assert.InDeltaSlice(t, want, f64s(values(t, out)), 1e-2)
	assert.InDeltaSlice(t, wantLSE, f64s(values(t, lse)), 1e-5)

	// No keys: zero rows with a log-sum-exp of -inf.
	e := m(candle.Zeros(dev, candle.F32, 1, 0, 2, 8))
	out0, lse0, err := AttentionWithLSE(randTensor(t, dev, r, 1, 3, 4, 8), e, e, flashattn.Params{})
	require.NoError(t, err)
	defer out0.Close()
	defer lse0.Close()
	assert.Equal(t, make([]float32, 3*4*8), values(t, out0))
	for _, x := range values(t, lse0) {
		assert.True(t, math.IsInf(float64(x), -1))
	}
}

func f64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func TestAttentionErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	dev := candle.CPU()
	q := randTensor(t, dev, r, 1, 3, 2, 8)
	m := must(t)
	for _, c := range []struct {
		name    string
		q, k, v *candle.Tensor
		p       flashattn.Params
		kind    error
		msg     string
	}{
		{"nil", q, nil, q, flashattn.Params{}, candle.ErrArgument, "k is nil"},
		{"rank", m(q.Reshape(3, 2, 8)), q, q, flashattn.Params{}, candle.ErrShape, "want rank 4"},
		{"dtypes", q, m(q.ToDType(candle.F16)), q, flashattn.Params{}, candle.ErrDType, "k is f16 and q f32"},
		{"f64", m(q.ToDType(candle.F64)), m(q.ToDType(candle.F64)), m(q.ToDType(candle.F64)), flashattn.Params{}, candle.ErrDType, "f16, bf16 or f32"},
		{"lse", q, q, q, flashattn.Params{LSE: 64}, candle.ErrArgument, "AttentionWithLSE"},
		{"head dim", randTensor(t, dev, r, 1, 3, 2, 12), randTensor(t, dev, r, 1, 3, 2, 12), randTensor(t, dev, r, 1, 3, 2, 12), flashattn.Params{}, candle.ErrShape, "head dim 12"},
		{"heads", q, randTensor(t, dev, r, 1, 3, 3, 8), randTensor(t, dev, r, 1, 3, 3, 8), flashattn.Params{}, candle.ErrShape, "multiple of h_kv"},
		{"alibi", q, q, q, flashattn.Params{AlibiSlopes: []float32{1}}, candle.ErrArgument, "AlibiSlopes"},
	} {
		_, err := ScaledDotProductAttention(c.q, c.k, c.v, c.p)
		assert.ErrorIs(t, err, c.kind, c.name)
		assert.ErrorContains(t, err, c.msg, c.name)
		assert.ErrorContains(t, err, "nn: ScaledDotProductAttention: ", c.name)
	}
	_, err := ScaledDotProductAttention(q, q, q, flashattn.Params{AlibiSlopes: []float32{1}})
	var e *candle.Error
	require.ErrorAs(t, err, &e)
	assert.Same(t, candle.ErrArgument, e.Kind, "flashattn's kind, passed on as it is")
	assert.Equal(t, "nn", e.Pkg)
}

// TestGPUAttention runs the fused kernel on a HIP device against the CPU
// device: strided views read in place, GQA, every option, the LSE, and no
// keys at all.
func TestGPUAttention(t *testing.T) {
	gdev := hipDevice(t)
	r := rand.New(rand.NewPCG(9, 10))
	cpu := candle.CPU()
	for _, dt := range []candle.DType{candle.F16, candle.BF16, candle.F32} {
		for _, c := range []struct {
			name       string
			b, sq, sk  int
			hq, hkv, d int
			view       string
			p          flashattn.Params
		}{
			{"plain", 2, 33, 33, 4, 4, 64, "contiguous", flashattn.Params{}},
			{"causal gqa", 1, 129, 200, 8, 2, 128, "contiguous", flashattn.Params{Causal: true}},
			{"bhsd view", 2, 17, 40, 4, 1, 32, "bhsd", flashattn.Params{Causal: true, Window: &flashattn.Window{Left: 8, Right: -1}}},
			{"fused qkv", 1, 7, 7, 2, 2, 80, "fused", flashattn.Params{SoftCap: 15, AlibiSlopes: []float32{0.5, 0.125}}},
			{"decode split", 3, 1, 1000, 8, 2, 128, "contiguous", flashattn.Params{Splits: 8}},
			{"no keys", 1, 3, 0, 2, 1, 8, "contiguous", flashattn.Params{}},
		} {
			t.Run(dt.String()+" "+c.name, func(t *testing.T) {
				m := must(t)
				// The same data on both devices, as views of the same kind.
				var qs, ks, vs [2]*candle.Tensor
				switch c.view {
				case "bhsd":
					q, k, v := randTensor(t, cpu, r, c.b, c.hq, c.sq, c.d), randTensor(t, cpu, r, c.b, c.hkv, c.sk, c.d), randTensor(t, cpu, r, c.b, c.hkv, c.sk, c.d)
					for i, dev := range []candle.Device{cpu, gdev} {
						qs[i] = m(m(m(q.ToDevice(dev)).ToDType(dt)).Transpose(1, 2))
						ks[i] = m(m(m(k.ToDevice(dev)).ToDType(dt)).Transpose(1, 2))
						vs[i] = m(m(m(v.ToDevice(dev)).ToDType(dt)).Transpose(1, 2))
					}
				case "fused":
					qkv := randTensor(t, cpu, r, c.b, c.sq, 3*c.hq, c.d)
					for i, dev := range []candle.Device{cpu, gdev} {
						x := m(m(qkv.ToDevice(dev)).ToDType(dt))
						qs[i] = m(x.Narrow(2, 0, c.hq))
						ks[i] = m(x.Narrow(2, c.hq, c.hq))
						vs[i] = m(x.Narrow(2, 2*c.hq, c.hq))
					}
				default:
					q, k, v := randTensor(t, cpu, r, c.b, c.sq, c.hq, c.d), randTensor(t, cpu, r, c.b, c.sk, c.hkv, c.d), randTensor(t, cpu, r, c.b, c.sk, c.hkv, c.d)
					for i, dev := range []candle.Device{cpu, gdev} {
						qs[i] = m(m(q.ToDevice(dev)).ToDType(dt))
						ks[i] = m(m(k.ToDevice(dev)).ToDType(dt))
						vs[i] = m(m(v.ToDevice(dev)).ToDType(dt))
					}
				}
				var outs, lses [2][]float32
				for i := range 2 {
					out, lse, err := AttentionWithLSE(qs[i], ks[i], vs[i], c.p)
					require.NoError(t, err)
					assert.Equal(t, dt, out.DType())
					outs[i], lses[i] = values(t, out), values(t, lse)
					out.Close()
					lse.Close()
				}
				tol := map[candle.DType]float64{candle.F16: 4e-3, candle.BF16: 3e-2, candle.F32: 1e-4}[dt]
				for j := range outs[0] {
					assert.InDelta(t, outs[0][j], outs[1][j], tol, "out[%d]", j)
				}
				for j := range lses[0] {
					if math.IsInf(float64(lses[0][j]), -1) {
						assert.True(t, math.IsInf(float64(lses[1][j]), -1), "lse[%d] = %v, want -inf", j, lses[1][j])
						continue
					}
					assert.InDelta(t, lses[0][j], lses[1][j], 1e-3*(1+math.Abs(float64(lses[0][j]))), "lse[%d]", j)
				}
			})
		}
	}
}
