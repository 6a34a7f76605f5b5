package flashattn

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tier 2 of the CK backend: on an AMD GPU with the shim loaded (built by
// scripts/build-ck-shim.sh without CK_FMHA_FILTER, for the GPU's target),
// every case below must run on CK and match Reference. Elsewhere (NVIDIA,
// no shim) they skip: the other GPU tests cover the other backends, and
// accept CK where the shim takes a call.

func ckGPU(t *testing.T) *gpuEnv {
	t.Helper()
	g := gpu(t)
	if !g.ck {
		t.Skip("tier 2: needs an AMD GPU and the Composable Kernel shim (librocm_go_fmha.so, scripts/build-ck-shim.sh)")
	}
	info, err := CKInfo()
	require.NoError(t, err)
	t.Logf("CK shim: %s", info)
	return g
}

// ckFeatures are what the shim takes, with the LSE.
var ckFeatures = []Params{
	{},
	{Causal: true},
	{Window: &Window{Left: 16, Right: 8}},
	{Window: &Window{Left: 32, Right: -1}},
	{Window: &Window{Left: -1, Right: 3}},
	{Window: &Window{Left: 0, Right: 0}},
	{Causal: true, Window: &Window{Left: 20, Right: -1}},
	{AlibiSlopes: slopes(8)},
	{Window: &Window{Left: 40, Right: 3}, AlibiSlopes: slopes(8), Scale: 0.2},
	{Scale: -0.1},
}

func TestGPUCKForward(t *testing.T) {
	g := ckGPU(t)
	shapes := [][3]int{{77, 200, 2}, {200, 77, 8}, {33, 33, 1}, {129, 1000, 4}} // sq, sk, h_kv (8 query heads)
	for _, dt := range []DType{F16, BF16} {
		for di, d := range []int{64, 96, 128, 256, 40} {
			for fi, p := range ckFeatures {
				shape := shapes[(fi+di)%len(shapes)]
				c := fwdCase{dt: dt, b: 2, sq: shape[0], sk: shape[1], hq: 8, hkv: shape[2], d: d, p: p}
				t.Run(c.String(), func(t *testing.T) { assert.Equal(t, CK, g.forward(t, c)) })
			}
		}
		for _, c := range []fwdCase{
			// Causal ALiBi: CK takes it for equal lengths without the LSE.
			{dt: dt, b: 3, sq: 100, sk: 100, hq: 8, hkv: 8, d: 128, p: Params{Causal: true, AlibiSlopes: slopes(8)}, noLSE: true},
			{dt: dt, b: 1, sq: 64, sk: 300, hq: 4, hkv: 1, d: 64, qScale: 30, p: Params{Causal: true}},
			{dt: dt, b: 2, sq: 40, sk: 40, hq: 8, hkv: 2, d: 128, layout: "padded", p: Params{Causal: true}},
			{dt: dt, b: 2, sq: 40, sk: 96, hq: 8, hkv: 2, d: 64, layout: "bhsd", p: Params{Window: &Window{Left: 8, Right: 8}}},
		} {
			t.Run(c.String(), func(t *testing.T) { assert.Equal(t, CK, g.forward(t, c)) })
		}
	}
}

func TestGPUCKVarlen(t *testing.T) {
	g := ckGPU(t)
	for _, c := range []struct {
		lq, lk []int32
		p      Params
	}{
		{[]int32{3, 0, 129, 1, 7}, []int32{5, 4, 129, 1000, 0}, Params{Causal: true}},
		{[]int32{129, 1000, 0, 7}, []int32{129, 1000, 3, 20}, Params{}},
		{[]int32{1000, 9}, []int32{7, 1000}, Params{Window: &Window{Left: 50, Right: 0}, AlibiSlopes: slopes(4)}},
	} {
		for _, dt := range []DType{F16, BF16} {
			name := fmt.Sprintf("%v q%v k%v %+v", dt, c.lq, c.lk, c.p)
			t.Run(name, func(t *testing.T) {
				assert.Equal(t, CK, g.varlen(t, dt, c.lq, c.lk, 128, c.p, name))
			})
		}
	}
}
