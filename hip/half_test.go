package hip

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHalfKnownValues(t *testing.T) {
	for f, h := range map[float32]Half{
		0: 0, 1: 0x3c00, -2: 0xc000, 0.5: 0x3800, 65504: 0x7bff, 65520: 0x7c00, // rounds up to Inf
		float32(math.Inf(1)): 0x7c00, float32(math.Inf(-1)): 0xfc00,
		6.103515625e-05:        0x0400,                        // smallest normal
		5.960464477539063e-08:  0x0001,                        // smallest subnormal
		2.9802322387695312e-08: 0,                             // half of it: ties to even (zero)
		1.0009765625:           0x3c01, 1.00048828125: 0x3c00, // tie to even
		1.00146484375: 0x3c02, // tie rounds to even upward
	} {
		assert.Equal(t, h, HalfFromFloat32(f), "%v", f)
	}
	assert.True(t, math.IsNaN(float64(HalfFromFloat32(float32(math.NaN())).Float32())))
}

func TestHalfRoundTripsEveryValue(t *testing.T) {
	for i := range 1 << 16 {
		h := Half(i)
		f := h.Float32()
		if math.IsNaN(float64(f)) {
			continue
		}
		if got := HalfFromFloat32(f); got != h && !(f == 0 && got&0x7fff == 0) {
			t.Fatalf("Half %#04x → %v → %#04x", i, f, got)
		}
	}
}

// A float32 between two halves rounds to the nearer one.
func TestHalfRoundsToNearest(t *testing.T) {
	for range 100000 {
		f := float32(rand.NormFloat64() * 100)
		h := HalfFromFloat32(f)
		err := math.Abs(float64(h.Float32()) - float64(f))
		for _, n := range []Half{h - 1, h + 1} {
			if d := math.Abs(float64(n.Float32()) - float64(f)); d < err {
				t.Fatalf("%v → %v, but %v is nearer", f, h.Float32(), n.Float32())
			}
		}
	}
}

func TestBFloat16(t *testing.T) {
	assert.Equal(t, BFloat16(0x3f80), BFloat16FromFloat32(1))
	assert.Equal(t, BFloat16(0xc000), BFloat16FromFloat32(-2))
	assert.Equal(t, float32(1), BFloat16(0x3f80).Float32())
	assert.Equal(t, BFloat16(0x3f80), BFloat16FromFloat32(math.Float32frombits(0x3f808000)), "tie to even (down)")
	assert.Equal(t, BFloat16(0x3f82), BFloat16FromFloat32(math.Float32frombits(0x3f818000)), "tie to even (up)")
	assert.True(t, math.IsNaN(float64(BFloat16FromFloat32(float32(math.NaN())).Float32())))
	for range 100000 {
		f := float32(rand.NormFloat64() * 1000)
		b := BFloat16FromFloat32(f)
		err := math.Abs(float64(b.Float32()) - float64(f))
		for _, n := range []BFloat16{b - 1, b + 1} {
			if d := math.Abs(float64(n.Float32()) - float64(f)); d < err {
				t.Fatalf("%v → %v, but %v is nearer", f, b.Float32(), n.Float32())
			}
		}
	}
}
