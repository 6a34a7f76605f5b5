package llama

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/safetensors"
)

// refModel is a Llama-family forward pass in float64, written plainly from
// the config.json and the safetensors file, independent of the package:
// the oracle of the CPU tests.
type refModel struct {
	hidden, inter, layers, hq, hkv, hd, vocab int
	eps, theta                                float64
	scaling                                   map[string]any
	tied, qkvBias, oBias, mlpBias             bool
	window                                    int
	w                                         map[string][]float64
}

func loadRef(t *testing.T, dir string) *refModel {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	var c map[string]any
	require.NoError(t, json.Unmarshal(b, &c))
	num := func(k string, def float64) float64 {
		if v, ok := c[k].(float64); ok {
			return v
		}
		return def
	}
	flag := func(k string) bool { v, _ := c[k].(bool); return v }
	r := &refModel{hidden: int(num("hidden_size", 0)), inter: int(num("intermediate_size", 0)), layers: int(num("num_hidden_layers", 0)),
		hq: int(num("num_attention_heads", 0)), vocab: int(num("vocab_size", 0)), eps: num("rms_norm_eps", 1e-6), theta: num("rope_theta", 10000),
		tied: flag("tie_word_embeddings"), w: map[string][]float64{}}
	r.hkv = int(num("num_key_value_heads", float64(r.hq)))
	r.hd = int(num("head_dim", float64(r.hidden/r.hq)))
	r.scaling, _ = c["rope_scaling"].(map[string]any)
	switch c["model_type"] {
	case "llama":
		r.qkvBias, r.oBias, r.mlpBias = flag("attention_bias"), flag("attention_bias"), flag("mlp_bias")
	case "qwen2":
		r.qkvBias = true
		if flag("use_sliding_window") {
			r.window = int(num("sliding_window", 0))
		}
	case "mistral":
		r.window = int(num("sliding_window", 0))
	}
	f, err := safetensors.OpenFile(filepath.Join(dir, "model.safetensors"))
	require.NoError(t, err)
	defer f.Close()
	for _, name := range f.Names() {
		x, err := f.Load(name, candle.CPU())
		require.NoError(t, err)
		y, err := x.ToDType(candle.F64)
		x.Close()
		require.NoError(t, err)
		r.w[name], err = candle.ToSlice[float64](y)
		y.Close()
		require.NoError(t, err)
	}
	return r
}

// matvec is W (out, in) · x (+ b).
func matvec(w, x, b []float64, out int) []float64 {
	in := len(x)
	y := make([]float64, out)
	for o := range out {
		s := 0.0
		for i := range in {
			s += w[o*in+i] * x[i]
		}
		if b != nil {
			s += b[o]
		}
		y[o] = s
	}
	return y
}

func rmsnorm(x, w []float64, eps float64) []float64 {
	ss := 0.0
	for _, v := range x {
		ss += v * v
	}
	r := 1 / math.Sqrt(ss/float64(len(x))+eps)
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = v * r * w[i]
	}
	return y
}

// invFreq is RoPE's frequencies with the config's scaling, as
// transformers computes them.
func (r *refModel) invFreq() []float64 {
	f := make([]float64, r.hd/2)
	for i := range f {
		f[i] = math.Pow(r.theta, -float64(2*i)/float64(r.hd))
	}
	if r.scaling == nil {
		return f
	}
	factor := r.scaling["factor"].(float64)
	switch r.scaling["rope_type"] {
	case "linear":
		for i := range f {
			f[i] /= factor
		}
	case "llama3":
		lo, hi := r.scaling["low_freq_factor"].(float64), r.scaling["high_freq_factor"].(float64)
		old := r.scaling["original_max_position_embeddings"].(float64)
		for i, x := range f {
			wl := 2 * math.Pi / x
			if wl > old/lo {
				f[i] = x / factor
			} else if wl >= old/hi {
				s := (old/wl - lo) / (hi - lo)
				f[i] = (1-s)*x/factor + s*x
			}
		}
	}
	return f
}

func (r *refModel) bias(name string, on bool) []float64 {
	if !on {
		return nil
	}
	return r.w[name]
}

// logits is every position's logits of a sequence.
func (r *refModel) logits(tokens []int32) [][]float64 {
	n, H, hd := len(tokens), r.hidden, r.hd
	x := make([][]float64, n)
	for t, id := range tokens {
		x[t] = append([]float64(nil), r.w["model.embed_tokens.weight"][int(id)*H:(int(id)+1)*H]...)
	}
	freq := r.invFreq()
	rope := func(v []float64, pos int) {
		for h := 0; h < len(v)/hd; h++ {
			head := v[h*hd : (h+1)*hd]
			for i, f := range freq {
				s, c := math.Sincos(float64(pos) * f)
				a, b := head[i], head[i+hd/2]
				head[i], head[i+hd/2] = a*c-b*s, b*c+a*s
			}
		}
	}
	for l := range r.layers {
		p := "model.layers." + itoa(l) + "."
		qs, ks, vs := make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for t := range n {
			h := rmsnorm(x[t], r.w[p+"input_layernorm.weight"], r.eps)
			qs[t] = matvec(r.w[p+"self_attn.q_proj.weight"], h, r.bias(p+"self_attn.q_proj.bias", r.qkvBias), r.hq*hd)
			ks[t] = matvec(r.w[p+"self_attn.k_proj.weight"], h, r.bias(p+"self_attn.k_proj.bias", r.qkvBias), r.hkv*hd)
			vs[t] = matvec(r.w[p+"self_attn.v_proj.weight"], h, r.bias(p+"self_attn.v_proj.bias", r.qkvBias), r.hkv*hd)
			rope(qs[t], t)
			rope(ks[t], t)
		}
		for t := range n {
			att := make([]float64, r.hq*hd)
			for h := range r.hq {
				kh := h / (r.hq / r.hkv)
				q := qs[t][h*hd : (h+1)*hd]
				var w []float64
				m := math.Inf(-1)
				lo := 0
				if r.window > 0 {
					lo = max(0, t-r.window+1)
				}
				for j := lo; j <= t; j++ {
					s := 0.0
					for c := range hd {
						s += q[c] * ks[j][kh*hd+c]
					}
					s /= math.Sqrt(float64(hd))
					w = append(w, s)
					m = math.Max(m, s)
				}
				sum := 0.0
				for i := range w {
					w[i] = math.Exp(w[i] - m)
					sum += w[i]
				}
				for i, j := 0, lo; j <= t; i, j = i+1, j+1 {
					for c := range hd {
						att[h*hd+c] += w[i] / sum * vs[j][kh*hd+c]
					}
				}
			}
			o := matvec(r.w[p+"self_attn.o_proj.weight"], att, r.bias(p+"self_attn.o_proj.bias", r.oBias), H)
			for i := range x[t] {
				x[t][i] += o[i]
			}
			h := rmsnorm(x[t], r.w[p+"post_attention_layernorm.weight"], r.eps)
			g := matvec(r.w[p+"mlp.gate_proj.weight"], h, r.bias(p+"mlp.gate_proj.bias", r.mlpBias), r.inter)
			u := matvec(r.w[p+"mlp.up_proj.weight"], h, r.bias(p+"mlp.up_proj.bias", r.mlpBias), r.inter)
			for i := range g {
				g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
			}
			d := matvec(r.w[p+"mlp.down_proj.weight"], g, r.bias(p+"mlp.down_proj.bias", r.mlpBias), H)
			for i := range x[t] {
				x[t][i] += d[i]
			}
		}
	}
	head := r.w["lm_head.weight"]
	if r.tied {
		head = r.w["model.embed_tokens.weight"]
	}
	out := make([][]float64, n)
	for t := range n {
		out[t] = matvec(head, rmsnorm(x[t], r.w["model.norm.weight"], r.eps), nil, r.vocab)
	}
	return out
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
