package candle

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
	"github.com/rocm-go/rocm/rccl"
)

// Tier 2: the collectives over every GPU of the machine (one included),
// through RCCL (NCCL on NVIDIA), against the float64 references of the
// CPU suite (collective_test.go).

// hipGroup is a group over every GPU, closed when the test ends.
func hipGroup(t *testing.T) *Group {
	t.Helper()
	// NVLink multicast stays off unless the environment says otherwise:
	// on shared machines it can take GPUs out of service. NCCL reads it
	// once, at its first communicator.
	if _, ok := os.LookupEnv("NCCL_NVLS_ENABLE"); !ok {
		t.Setenv("NCCL_NVLS_ENABLE", "0")
	}
	n, err := hip.DeviceCount()
	if err == nil && n == 0 {
		err = fmt.Errorf("no GPU")
	}
	testenv.Need(t, 2, "a GPU", err)
	testenv.Need(t, 2, "RCCL (NCCL on NVIDIA)", rccl.LoadError())
	poisonAllocs.Store(true)
	t.Cleanup(func() { poisonAllocs.Store(false) })
	devs := make([]*HIPDevice, n)
	for i := range devs {
		devs[i], err = HIP(i)
		require.NoError(t, err)
	}
	g, err := NewHIPGroup(devs...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, g.Close()) })
	t.Logf("a group of %d GPU(s)", n)
	return g
}

// TestGPUCollectives runs the collectives' suite on the GPUs: every op
// and dtype, dims first, inner and last, strided and empty inputs, and
// one goroutine per GPU with its Member.
func TestGPUCollectives(t *testing.T) {
	g := hipGroup(t)
	seed := rand.Uint64()
	t.Logf("random seed %#x", seed)
	runGroupSuite(t, g, rand.New(rand.NewPCG(seed, 5)))
}

// TestGPUCollectivesOrdered: a collective is queued on each device's
// stream, between the device's ops, with no synchronization in between.
func TestGPUCollectivesOrdered(t *testing.T) {
	g := hipGroup(t)
	devs := g.Devices()
	n := len(devs)
	ts := make([]*Tensor, n)
	for r, d := range devs {
		x := tensorOf(t, d, F32, collectiveValues(rand.New(rand.NewPCG(uint64(r), 1)), F32, ReduceSum, r, 4096), 64, 64)
		y, err := x.Affine(2, 1) // queued before the all-reduce
		require.NoError(t, err)
		t.Cleanup(func() { y.Close() })
		ts[r] = y
	}
	sums, err := g.AllReduce(ts, ReduceSum)
	require.NoError(t, err)
	want := make([][]float64, n)
	for r := range n {
		want[r] = values(t, ts[r])
	}
	ref := reduceValues(F32, ReduceSum, want)
	for r, s := range sums {
		z, err := s.Affine(0.5, 0) // queued after it
		require.NoError(t, err)
		got := values(t, z)
		for i := range ref {
			require.Equal(t, ref[i]*0.5, got[i], "rank %d element %d", r, i)
		}
		z.Close()
		s.Close()
	}
}
