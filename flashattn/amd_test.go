package flashattn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tier 0: the lane arithmetic of attn_mfma and attn_wmma (kernels/amd.hip),
// which no AMD GPU has run. Each matrix instruction is modelled from its
// documented operand layout (AMD's matrix instruction calculator: the
// lane and element that hold A[i][k], B[k][j] and C[i][j]); the kernel's
// index formulas (kofs, crow, pfrag, and the loops of attn_amd) are
// mirrored here formula for formula and run through the model. The
// fragments they load must give q·kᵀ and p·v, and a whole launch, online
// softmax, masks and GQA included, must give Reference's attention.

// matrixInst is a matrix instruction's documented operand layout:
// A[mn][k] (and B[k][mn]) is element abElem(k) of lane abLane(mn, k, x)
// for each copy x < copies (gfx11 wants two); C[i][j] is element cElem(i)
// of lane cLane(i, j).
type matrixInst struct {
	name           string
	lanes, m, k    int
	na, nc, copies int
	abLane         func(mn, k, x int) int
	abElem         func(k int) int
	cLane          func(i, j int) int
	cElem          func(i int) int
	ab             [][][2]int // (lane, element) of each copy of A[mn][k] at mn·k + k: built on first use
}

var (
	instMfma16 = &matrixInst{name: "v_mfma_f32_16x16x16", lanes: 64, m: 16, k: 16, na: 4, nc: 4, copies: 1,
		abLane: func(mn, k, _ int) int { return mn + 16*(k/4) }, abElem: func(k int) int { return k % 4 },
		cLane: func(i, j int) int { return j + 16*(i/4) }, cElem: func(i int) int { return i % 4 }}
	instMfma32 = &matrixInst{name: "v_mfma_f32_32x32x8", lanes: 64, m: 32, k: 8, na: 4, nc: 16, copies: 1,
		abLane: func(mn, k, _ int) int { return mn + 32*(k/4) }, abElem: func(k int) int { return k % 4 },
		cLane: func(i, j int) int { return j + 32*((i/4)%2) }, cElem: func(i int) int { return 4*(i/8) + i%4 }}
	instWmma11 = &matrixInst{name: "v_wmma_f32_16x16x16 (gfx11)", lanes: 32, m: 16, k: 16, na: 16, nc: 8, copies: 2,
		abLane: func(mn, _, x int) int { return mn + 16*x }, abElem: func(k int) int { return k },
		cLane: func(i, j int) int { return j + 16*(i%2) }, cElem: func(i int) int { return i / 2 }}
	instWmma12 = &matrixInst{name: "v_wmma_f32_16x16x16 (gfx12)", lanes: 32, m: 16, k: 16, na: 8, nc: 8, copies: 1,
		abLane: func(mn, k, _ int) int { return mn + 16*((k/4)%2) }, abElem: func(k int) int { return 4*(k/8) + k%4 },
		cLane: func(i, j int) int { return j + 16*(i/8) }, cElem: func(i int) int { return i % 8 }}
)

// mma is the instruction on a wave's registers ([lane][element]): c +=
// a·b, failing where the copies of an element that the instruction wants
// in several lanes differ.
func (in *matrixInst) mma(t *testing.T, c, a, b [][]float64) {
	if in.ab == nil {
		in.ab = make([][][2]int, in.m*in.k)
		for mn := range in.m {
			for k := range in.k {
				for x := range in.copies {
					in.ab[mn*in.k+k] = append(in.ab[mn*in.k+k], [2]int{in.abLane(mn, k, x), in.abElem(k)})
				}
			}
		}
	}
	elem := func(r [][]float64, mn, k int) float64 {
		at := in.ab[mn*in.k+k]
		x := r[at[0][0]][at[0][1]]
		for _, y := range at[1:] {
			if z := r[y[0]][y[1]]; z != x {
				t.Fatalf("%s: lanes %d and %d hold %v and %v for [%d][%d]: they must be copies", in.name, at[0][0], y[0], x, z, mn, k)
			}
		}
		return x
	}
	am, bm := make([]float64, in.m*in.k), make([]float64, in.m*in.k)
	for mn := range in.m {
		for k := range in.k {
			am[mn*in.k+k], bm[mn*in.k+k] = elem(a, mn, k), elem(b, mn, k)
		}
	}
	for i := range in.m {
		for j := range in.m {
			var s float64
			for k := range in.k {
				s += am[i*in.k+k] * bm[j*in.k+k]
			}
			c[in.cLane(i, j)][in.cElem(i)] += s
		}
	}
}

// amdFrag mirrors a fragment traits struct of kernels/amd.hip (Mfma16,
// Mfma32, Wmma11, Wmma12) on its instruction.
type amdFrag struct {
	name    string
	inst    *matrixInst
	kofs    func(lane int) int
	crow    func(lane, r int) int
	shuffle bool // pfrag takes half of a lane's P from lane ^ 16 (Wmma11)
}

var (
	fragMfma16 = amdFrag{"Mfma16", instMfma16, func(l int) int { return 4 * (l >> 4) }, func(l, r int) int { return 4*(l>>4) + r }, false}
	fragMfma32 = amdFrag{"Mfma32", instMfma32, func(l int) int { return 4 * (l >> 5) }, func(l, r int) int { return 8*(r>>2) + 4*(l>>5) + r&3 }, false}
	fragWmma11 = amdFrag{"Wmma11", instWmma11, func(int) int { return 0 }, func(l, r int) int { return 2*r + l>>4 }, true}
	fragWmma12 = amdFrag{"Wmma12", instWmma12, func(l int) int { return 8 * (l >> 4) }, func(l, r int) int { return 8*(l>>4) + r }, false}
	amdFrags   = []amdFrag{fragMfma16, fragMfma32, fragWmma11, fragWmma12}
)

// pfrag is the kernel's pfrag: lane's B fragment of Pᵀ for the keys of
// chunk c, from the wave's score fragments s ([lane][jn·NC + r]).
func (f amdFrag) pfrag(s [][]float64, c, lane int) []float64 {
	na, nc := f.inst.na, f.inst.nc
	b := make([]float64, na)
	if !f.shuffle {
		for e := range na {
			b[e] = s[lane][c*na+e]
		}
		return b
	}
	hi := lane>>4 != 0
	for r := range nc {
		own, oth := s[lane][c*nc+r], s[lane^16][c*nc+r]
		if hi {
			b[2*r], b[2*r+1] = oth, own
		} else {
			b[2*r], b[2*r+1] = own, oth
		}
	}
	return b
}

// regs is a wave's registers of n fragments: [fragment][lane][element].
func regs(n, lanes, elems int) [][][]float64 {
	r := make([][][]float64, n)
	for i := range r {
		r[i] = make([][]float64, lanes)
		for l := range r[i] {
			r[i][l] = make([]float64, elems)
		}
	}
	return r
}

// TestAMDInstructionLayouts checks the transcription of each documented
// layout (every register slot holds one matrix element, gfx11's A and B
// twice) and that the kernel's crow is its C layout read backwards.
func TestAMDInstructionLayouts(t *testing.T) {
	for _, f := range amdFrags {
		in := f.inst
		ab := map[[2]int]int{}
		for mn := range in.m {
			for k := range in.k {
				for x := range in.copies {
					ab[[2]int{in.abLane(mn, k, x), in.abElem(k)}]++
				}
			}
		}
		assert.Len(t, ab, in.lanes*in.na, "%s: A/B fills every slot", in.name)
		for s, n := range ab {
			assert.Equal(t, 1, n, "%s: A/B slot %v", in.name, s)
			assert.True(t, s[0] < in.lanes && s[1] < in.na, "%s: A/B slot %v", in.name, s)
		}
		c := map[[2]int]bool{}
		for i := range in.m {
			for j := range in.m {
				c[[2]int{in.cLane(i, j), in.cElem(i)}] = true
			}
		}
		assert.Len(t, c, in.lanes*in.nc, "%s: C fills every slot once", in.name)
		for l := range in.lanes {
			assert.Zero(t, f.kofs(l)%4, "%s: kofs(%d) starts 8-byte reads", f.name, l)
			for r := range in.nc {
				i := f.crow(l, r)
				assert.Equal(t, l, in.cLane(i, l%in.m), "%s: crow(%d, %d) = %d", f.name, l, r, i)
				assert.Equal(t, r, in.cElem(i), "%s: crow(%d, %d) = %d", f.name, l, r, i)
			}
		}
	}
}

// TestAMDTileProducts runs one wave's q·kᵀ and p·v of a tile the way
// attn_amd loads them, on random data: Sᵀ's C fragments must hold
// q·k of (the lane's row, key jn·M + crow), and Oᵀ's p·v of (row, dim
// dn·M + crow), P being any function of S that the lanes compute in place.
func TestAMDTileProducts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, f := range amdFrags {
		in := f.inst
		const dmax = 64
		bn := 2 * in.m
		M, K, NA, NC, W := in.m, in.k, in.na, in.nc, in.lanes
		q, k, v := make([][]float64, M), make([][]float64, bn), make([][]float64, bn)
		for _, x := range [][][]float64{q, k, v} {
			for i := range x {
				x[i] = make([]float64, dmax)
				for c := range x[i] {
					x[i][c] = r.NormFloat64()
				}
			}
		}
		// Sᵀ = K·qᵀ.
		s := regs(bn/M, W, NC)
		for kc := range dmax / K {
			qb := regs(1, W, NA)[0]
			for l := range W {
				for e := range NA {
					qb[l][e] = q[l%M][kc*K+f.kofs(l)+e]
				}
			}
			for jn := range bn / M {
				a := regs(1, W, NA)[0]
				for l := range W {
					for e := range NA {
						a[l][e] = k[jn*M+l%M][kc*K+f.kofs(l)+e]
					}
				}
				in.mma(t, s[jn], a, qb)
			}
		}
		// P = exp(S/8) in place, flat as the kernel indexes it.
		p := make([][]float64, W)
		want := func(row, key int) float64 {
			var x float64
			for c := range dmax {
				x += q[row][c] * k[key][c]
			}
			return x
		}
		for l := range W {
			p[l] = make([]float64, bn/M*NC)
			for jn := range bn / M {
				for e := range NC {
					key := jn*M + f.crow(l, e)
					require.InDelta(t, want(l%M, key), s[jn][l][e], 1e-9, "%s: S lane %d fragment %d element %d (key %d)", f.name, l, jn, e, key)
					p[l][jn*NC+e] = math.Exp(s[jn][l][e] / 8)
				}
			}
		}
		// Oᵀ = Vᵀ·Pᵀ over chunks of K keys.
		o := regs(dmax/M, W, NC)
		for c := range bn / K {
			pb := regs(1, W, NA)[0]
			for l := range W {
				pb[l] = f.pfrag(p, c, l)
			}
			for dn := range dmax / M {
				a := regs(1, W, NA)[0]
				for l := range W {
					for e := range NA {
						a[l][e] = v[c*K+f.kofs(l)+e][dn*M+l%M]
					}
				}
				in.mma(t, o[dn], a, pb)
			}
		}
		for l := range W {
			for dn := range dmax / M {
				for e := range NC {
					dim := dn*M + f.crow(l, e)
					var x float64
					for key := range bn {
						x += math.Exp(want(l%M, key)/8) * v[key][dim]
					}
					require.InDelta(t, x, o[dn][l][e], 1e-9, "%s: O lane %d fragment %d element %d (dim %d)", f.name, l, dn, e, dim)
				}
			}
		}
	}
}

// amdFragFor is the traits attn_amd picks (Frag): MFMA 32×32×8 up to head
// dim 128, 16×16×16 at 256; gfx11's or gfx12's WMMA.
func amdFragFor(b Backend, gfx12 bool, dmax int) amdFrag {
	switch {
	case b == MFMA && dmax <= 128:
		return fragMfma32
	case b == MFMA:
		return fragMfma16
	case gfx12:
		return fragWmma12
	}
	return fragWmma11
}

// emulateAMD runs attn_amd, loop for loop, for a dense batch (one split),
// with f's lanes on its instruction model, in float64: out like q and the
// LSE as Reference gives them. Outputs never written stay NaN.
func emulateAMD(t *testing.T, b Backend, gfx12 bool, q, k, v HostTensor, p Params) (HostTensor, []float64) {
	batch, sq, hq, d := q.Shape[0], q.Shape[1], q.Shape[2], q.Shape[3]
	sk, hkv := k.Shape[1], k.Shape[2]
	dmax := buckets[bucketIndex(d)]
	f := amdFragFor(b, gfx12, dmax)
	in := f.inst
	M, K, NA, NC, W := in.m, in.k, in.na, in.nc, in.lanes
	BM, BN, threads := amdTiles(b, dmax)
	require.Equal(t, amdWaves*M, BM)
	require.Equal(t, amdWaves*W, threads)
	NKC, NS, NPC, NO := dmax/K, BN/M, BN/K, dmax/M
	G := hq / hkv
	left, right := window(&p)
	if left >= sk {
		left = -1
	}
	if right >= sq {
		right = -1
	}
	scale := p.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(d))
	}
	const log2e = math.Log2E
	out := NewHostTensor(batch, sq, hq, d)
	for i := range out.Data {
		out.Data[i] = math.NaN()
	}
	lse := make([]float64, batch*hq*sq)
	for i := range lse {
		lse[i] = math.NaN()
	}
	at := func(x HostTensor, bi, i, h, c int) float64 {
		return x.Data[((bi*x.Shape[1]+i)*x.Shape[2]+h)*x.Shape[3]+c]
	}
	for bi := range batch {
		for hk := range hkv {
			for m0 := 0; m0 < sq*G; m0 += BM {
				off := sk - sq
				ilo, ihi := m0/G, min((m0+BM-1)/G, sq-1)
				lo, hi := 0, sk
				if left >= 0 {
					lo = max(0, ilo+off-left)
				}
				if right >= 0 {
					hi = min(sk, ihi+off+right+1)
				}
				t0, t1 := lo/BN, lo/BN
				if hi > lo {
					t1 = (hi + BN - 1) / BN
				}
				for wave := range amdWaves {
					// Per lane: its row, the keys it sees, q's fragments.
					ri, rh, rlo, rhi := make([]int, W), make([]int, W), make([]int, W), make([]int, W)
					rv := make([]bool, W)
					slope := make([]float64, W)
					qf := regs(NKC, W, NA)
					for l := range W {
						r := m0 + wave*M + l%M
						ri[l], rh[l] = r/G, hk*G+r%G
						rv[l] = ri[l] < sq
						rlo[l], rhi[l] = 0, sk-1
						if left >= 0 {
							rlo[l] = ri[l] + off - left
						}
						if right >= 0 {
							rhi[l] = min(sk-1, ri[l]+off+right)
						}
						if p.AlibiSlopes != nil {
							slope[l] = float64(p.AlibiSlopes[rh[l]])
						}
						for kc := range NKC {
							for e := range NA {
								if c := kc*K + f.kofs(l) + e; rv[l] && c < d {
									qf[kc][l][e] = at(q, bi, ri[l], rh[l], c)
								}
							}
						}
					}
					o := regs(NO, W, NC)
					mrow, lrow := make([]float64, W), make([]float64, W)
					for l := range mrow {
						mrow[l] = math.Inf(-1)
					}
					for tile := t0; tile < t1; tile++ {
						n0 := tile * BN
						// The shared tiles: K (keys × dims), Vᵀ (dims × keys).
						kt, vt := make([][]float64, BN), make([][]float64, dmax)
						for j := range BN {
							kt[j] = make([]float64, dmax)
						}
						for c := range dmax {
							vt[c] = make([]float64, BN)
						}
						for j := range BN {
							for c := range d {
								if n0+j < sk {
									kt[j][c], vt[c][j] = at(k, bi, n0+j, hk, c), at(v, bi, n0+j, hk, c)
								}
							}
						}
						sacc := regs(NS, W, NC)
						for kc := range NKC {
							if kc*K >= d {
								continue
							}
							for jn := range NS {
								a := regs(1, W, NA)[0]
								for l := range W {
									for e := range NA {
										a[l][e] = kt[jn*M+l%M][kc*K+f.kofs(l)+e]
									}
								}
								in.mma(t, sacc[jn], a, qf[kc])
							}
						}
						masked := n0+BN > sk || (right >= 0 && n0+BN-1 > ilo+off+right) || (left >= 0 && n0 < ihi+off-left)
						mx := make([]float64, W)
						for l := range W {
							mx[l] = math.Inf(-1)
							for jn := range NS {
								for e := range NC {
									j := n0 + jn*M + f.crow(l, e)
									x := sacc[jn][l][e] * scale
									if p.SoftCap > 0 {
										x = p.SoftCap * math.Tanh(x/p.SoftCap)
									}
									x = (x - slope[l]*math.Abs(float64(ri[l]+off-j))) * log2e
									if masked && (j < rlo[l] || j > rhi[l]) {
										x = math.Inf(-1)
									}
									sacc[jn][l][e] = x
									mx[l] = math.Max(mx[l], x)
								}
							}
						}
						// The xor shuffles by M, 2M, ... below W.
						for x := M; x < W; x <<= 1 {
							nx := make([]float64, W)
							for l := range W {
								nx[l] = math.Max(mx[l], mx[l^x])
							}
							mx = nx
						}
						p2 := make([][]float64, W)
						for l := range W {
							mn := math.Max(mrow[l], mx[l])
							ms := mn
							if math.IsInf(mn, -1) {
								ms = 0
							}
							alpha := math.Exp2(mrow[l] - ms)
							mrow[l] = mn
							var sum float64
							p2[l] = make([]float64, NS*NC)
							for jn := range NS {
								for e := range NC {
									p2[l][jn*NC+e] = math.Exp2(sacc[jn][l][e] - ms)
									sum += p2[l][jn*NC+e]
								}
							}
							lrow[l] = lrow[l]*alpha + sum
							for dn := range NO {
								for e := range NC {
									o[dn][l][e] *= alpha
								}
							}
						}
						for c := range NPC {
							pb := regs(1, W, NA)[0]
							for l := range W {
								pb[l] = f.pfrag(p2, c, l)
							}
							for dn := range NO {
								if dn*M >= d {
									continue
								}
								a := regs(1, W, NA)[0]
								for l := range W {
									for e := range NA {
										a[l][e] = vt[dn*M+l%M][c*K+f.kofs(l)+e]
									}
								}
								in.mma(t, o[dn], a, pb)
							}
						}
					}
					for x := M; x < W; x <<= 1 {
						nl := make([]float64, W)
						for l := range W {
							nl[l] = lrow[l] + lrow[l^x]
						}
						lrow = nl
					}
					for l := range W {
						if !rv[l] {
							continue
						}
						inv, ls := 0.0, math.Inf(-1)
						if lrow[l] > 0 {
							inv, ls = 1/lrow[l], (mrow[l]+math.Log2(lrow[l]))*math.Ln2
						}
						for dn := range NO {
							for e := range NC {
								if c := dn*M + f.crow(l, e); c < d {
									out.Data[((bi*sq+ri[l])*hq+rh[l])*d+c] = o[dn][l][e] * inv
								}
							}
						}
						if l < M {
							lse[(bi*hq+rh[l])*sq+ri[l]] = ls
						}
					}
				}
			}
		}
	}
	return out, lse
}

// TestAMDKernelEmulation runs attn_mfma and attn_wmma as emulateAMD
// mirrors them, for each fragment kind and head-dim bucket, with GQA,
// s_q ≠ s_kv, partial tiles and every masking feature, against Reference.
func TestAMDKernelEmulation(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	w := &Window{Left: 9, Right: 3}
	for _, c := range []struct {
		b     Backend
		gfx12 bool
		d     int
	}{
		{MFMA, false, 64}, {MFMA, false, 120}, {MFMA, false, 248},
		{WMMA, false, 24}, {WMMA, false, 120}, {WMMA, false, 256},
		{WMMA, true, 40}, {WMMA, true, 128}, {WMMA, true, 248},
	} {
		for _, p := range []Params{
			{},
			{Causal: true},
			{Window: w, SoftCap: 2, AlibiSlopes: []float32{0.5, 0.25, 0.125, 0.0625}, Scale: 0.3},
			{Causal: true, Window: &Window{Left: 5, Right: -1}},
		} {
			name := fmt.Sprintf("%v gfx12 %v d %d %+v", c.b, c.gfx12, c.d, p)
			// 2 entries, 4 query heads on 2 KV heads, 23 queries on 41
			// keys: partial blocks and tiles, a diagonal off the corner.
			q, k, v := randHost(r, 2, 23, 4, c.d), randHost(r, 2, 41, 2, c.d), randHost(r, 2, 41, 2, c.d)
			want, wantLSE, err := Reference(q, k, v, p)
			require.NoError(t, err)
			got, gotLSE := emulateAMD(t, c.b, c.gfx12, q, k, v, p)
			for i := range want.Data {
				require.InDelta(t, want.Data[i], got.Data[i], 1e-9, "%s: out[%d]", name, i)
			}
			for i := range wantLSE {
				if math.IsInf(wantLSE[i], -1) {
					require.True(t, math.IsInf(gotLSE[i], -1), "%s: lse[%d] %v", name, i, gotLSE[i])
					continue
				}
				require.InDelta(t, wantLSE[i], gotLSE[i], 1e-9, "%s: lse[%d]", name, i)
			}
		}
	}
}
