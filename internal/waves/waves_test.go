package waves

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFill(t *testing.T) {
	assert.Equal(t, 1.0, Fill(528, 528))
	assert.InDelta(t, 256.0/528, Fill(256, 528), 1e-12)
	assert.InDelta(t, 768.0/1056, Fill(768, 528), 1e-12) // two waves, the second half full
	assert.Zero(t, Fill(0, 528))
	assert.Zero(t, Fill(10, 0))
}

func TestFewest(t *testing.T) {
	double := func(base int) func(int) int { return func(i int) int { return base << i } }
	assert.Equal(t, 1, Fewest(4, 528, double(256)), "512 blocks: 97%")
	assert.Equal(t, 2, Fewest(4, 528, double(384)), "384 and 768: 73%; 1536: 97%")
	assert.Equal(t, 0, Fewest(4, 528, double(2048)), "four waves, 97% full")
	assert.Equal(t, 1, Fewest(3, 100, func(i int) int { return []int{40, 70, 60}[i] }), "none reaches 90%: the fullest")
	assert.Equal(t, 0, Fewest(3, 100, func(int) int { return 50 }), "equals: the first")
	assert.Equal(t, 0, Fewest(0, 100, double(1)), "no candidates")
}
