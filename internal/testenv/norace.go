//go:build !race

package testenv

// Race reports whether the race detector is on: the tests whose cost is
// single-threaded arithmetic on the CPU (ten times slower under it) skip
// there and run in tier 1, which runs without it.
const Race = false
