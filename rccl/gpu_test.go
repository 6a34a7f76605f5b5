package rccl

import (
	"errors"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
)

// The tests in this file run in tier 2: on GPUs, AMD (RCCL) or NVIDIA
// (NCCL through the translation), with one rank per GPU the machine has,
// one included. ROCM_GO_RCCL_TIER2_ON_FAKE=amd or nvidia runs them against
// the fake libraries instead: a check of the tests themselves on a machine
// without a GPU.

// TestMain keeps NVLink multicast (NVLS) off unless the environment says
// otherwise, before the first NCCL call: on shared machines it can take
// GPUs out of service.
func TestMain(m *testing.M) {
	if _, ok := os.LookupEnv("NCCL_NVLS_ENABLE"); !ok {
		os.Setenv("NCCL_NVLS_ENABLE", "0")
	}
	os.Exit(m.Run())
}

// gpus opens every GPU, or the fake's devices.
func gpus(t *testing.T) []*hip.Device {
	t.Helper()
	if fake := os.Getenv("ROCM_GO_RCCL_TIER2_ON_FAKE"); fake != "" {
		p, err := hip.ParsePlatform(fake)
		require.NoError(t, err)
		loadFake(t, p)
	}
	n, err := hip.DeviceCount()
	if err == nil && n == 0 {
		err = errors.New("no GPU")
	}
	testenv.Need(t, 2, "a GPU", err)
	devs, err := hip.Devices()
	require.NoError(t, err)
	testenv.Need(t, 2, "RCCL (NCCL on NVIDIA)", LoadError())
	return devs
}

// gpuEnv makes a communicator over every GPU with CommInitAll, a stream
// each, and fresh random inputs (the seed is logged).
func gpuEnv(t *testing.T) *env {
	t.Helper()
	devs := gpus(t)
	seed := rand.Uint64()
	t.Logf("%d GPU(s), random seed %#x", len(devs), seed)
	e := &env{devs: devs, rng: rand.New(rand.NewPCG(seed, 1))}
	for _, d := range devs {
		s, err := d.NewStream(hip.WithStreamFlags(hip.StreamNonBlocking))
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, s.Close()) })
		e.streams = append(e.streams, s)
	}
	var err error
	e.comms, err = CommInitAll(devs...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, CloseAll(e.comms...)) })
	return e
}

func TestGPULibrary(t *testing.T) {
	gpus(t)
	assert.Equal(t, hip.LoadedPlatform(), LoadedPlatform())
	assert.Empty(t, untranslated(), "every bound function is callable")
	v, err := Version()
	require.NoError(t, err)
	t.Logf("NCCL API %s from %s on the %s platform", v, LibraryPaths()[0], LoadedPlatform())
	for _, s := range statusValues {
		text, err := StatusString(s)
		require.NoError(t, err)
		assert.NotEmpty(t, text, s)
	}
}

// TestGPUSuite runs every collective and Send/Recv on every data type and
// op, and Split, with values checked on every rank.
func TestGPUSuite(t *testing.T) { runSuite(t, gpuEnv(t)) }

// TestGPUCommInitRank: one goroutine per GPU joins with the unique ID's
// bytes and runs its collectives outside any group, as processes would.
func TestGPUCommInitRank(t *testing.T) { runCommInitRank(t, gpus(t)) }

// TestGPUGraphCapture captures an all-reduce of every rank into a HIP
// graph per GPU and replays it on new inputs.
func TestGPUGraphCapture(t *testing.T) {
	e := gpuEnv(t)
	n := e.n()
	const count = 4096
	send := make([]*hip.Buffer, n)
	recv := make([]*hip.Buffer, n)
	for r := range n {
		send[r] = e.poisoned(t, r, count*4)
		recv[r] = e.poisoned(t, r, count*4)
	}
	allReduce := func() error {
		return Group(func() error {
			for r, c := range e.comms {
				if err := c.AllReduce(send[r], recv[r], count, DataTypeFloat32, OpSum, e.streams[r]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	// One run first: NCCL connects its ranks on first use, which a capture
	// cannot record.
	require.NoError(t, allReduce())
	for _, s := range e.streams {
		require.NoError(t, s.Synchronize())
	}
	for _, s := range e.streams {
		err := s.BeginCapture(hip.StreamCaptureModeRelaxed)
		if errors.Is(err, hip.ErrSymbolNotFound) {
			t.Skip("tier 2: the fake HIP has no graphs")
		}
		require.NoError(t, err)
	}
	require.NoError(t, allReduce())
	execs := make([]*hip.GraphExec, n)
	for r, s := range e.streams {
		g, err := s.EndCapture()
		require.NoError(t, err)
		nodes, err := g.NodeCount()
		require.NoError(t, err)
		assert.Positive(t, nodes, "rank %d's graph holds the all-reduce", r)
		execs[r], err = g.Instantiate()
		require.NoError(t, err)
		require.NoError(t, g.Close())
		t.Cleanup(func() { assert.NoError(t, execs[r].Close()) })
	}
	for replay := range 3 {
		ops := make([][]float64, n)
		for r := range n {
			ops[r] = e.values(DataTypeFloat32, OpSum, r, count)
			require.NoError(t, recv[r].Memset(0xA5))
			require.NoError(t, send[r].CopyFromHost(encode(DataTypeFloat32, ops[r])))
		}
		for r, x := range execs {
			require.NoError(t, x.Launch(e.streams[r]))
		}
		want := reduce(DataTypeFloat32, OpSum, ops)
		for r := range n {
			near(t, want, decode(DataTypeFloat32, e.read(t, recv[r])), 0, "replay %d, rank %d", replay, r)
		}
	}
	for _, c := range e.comms {
		assert.NoError(t, c.AsyncError())
	}
}
