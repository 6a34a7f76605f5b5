// Package waves chooses a launch's shape by how full it keeps a device's
// block slots (the blocks the device runs at once): flashattn's split-KV.
package waves

// Fill is the share of the slots that blocks keep busy over the whole
// waves they take: a last wave a fraction full costs as much as a full
// one. 0 for no blocks or no slots.
func Fill(blocks, slots int) float64 {
	if blocks <= 0 || slots <= 0 {
		return 0
	}
	return float64(blocks) / float64((blocks+slots-1)/slots*slots)
}

// Fewest is the index of the first of n candidate launches (in order of
// preference; candidate i has blocks(i) blocks) that fills at least 90%
// of the slots, else of the fullest (the first of equals).
func Fewest(n, slots int, blocks func(i int) int) int {
	best, bestFill := 0, -1.0
	for i := range n {
		f := Fill(blocks(i), slots)
		if f >= 0.9 {
			return i
		}
		if f > bestFill {
			best, bestFill = i, f
		}
	}
	return best
}
