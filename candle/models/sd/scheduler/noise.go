package scheduler

import (
	"math"
	"math/rand/v2"
)

// Noise is standard normal noise from a seed: the first latents of a
// txt2img run and the fresh noise of ancestral steps. The values depend on
// the seed alone (a PCG generator, whose output Go specifies, and the
// Box–Muller transform written here), so a seed gives the same image on
// every run, machine and device: the noise is made on the host and
// uploaded.
type Noise struct {
	r     *rand.PCG
	spare float64
	has   bool
}

// NewNoise starts the noise of a seed.
func NewNoise(seed uint64) *Noise {
	return &Noise{r: rand.NewPCG(seed, 0x9e3779b97f4a7c15)}
}

// Float64 is the next value.
func (n *Noise) Float64() float64 {
	if n.has {
		n.has = false
		return n.spare
	}
	// Two uniforms in (0, 1] and [0, 1) from 53 bits each.
	u1 := float64(n.r.Uint64()>>11+1) / (1 << 53)
	u2 := float64(n.r.Uint64()>>11) / (1 << 53)
	r := math.Sqrt(-2 * math.Log(u1))
	s, c := math.Sincos(2 * math.Pi * u2)
	n.spare, n.has = r*s, true
	return r * c
}

// Fill writes the next len(dst) values into dst.
func (n *Noise) Fill(dst []float32) {
	for i := range dst {
		dst[i] = float32(n.Float64())
	}
}

// Float64s is the next count values.
func (n *Noise) Float64s(count int) []float64 {
	out := make([]float64, count)
	for i := range out {
		out[i] = n.Float64()
	}
	return out
}
