package rccl

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
)

// The tests in this file run in tier 0 against fake libraries built from
// testdata/fakerccl.c with the C compiler: with package hip's fake HIP
// runtime (two devices) it is librccl.so.1 and libamdhip64 in one file;
// built with -DFAKE_NVIDIA, with package hip's fake CUDA (one device), it
// is libnccl.so.2, libcudart.so.13 and libcuda.so.1. Device memory is host
// memory and the collectives compute real results, so the suite of
// suite_test.go runs against both. The fakes log every call to
// $ROCM_GO_FAKE_LOG.

var fakes struct {
	once sync.Once
	dir  string
	err  error
}

func buildFakes(t *testing.T) string {
	t.Helper()
	fakes.once.Do(func() {
		dir, err := os.MkdirTemp("", "rocm-go-fakerccl")
		if err != nil {
			fakes.err = err
			return
		}
		for _, b := range []struct{ out, def string }{
			{"amd/librccl.so.1", "-DFAKE_AMD"},
			{"amd2/librccl.so.1", "-DFAKE_AMD"},
			{"nvidia/libnccl.so.2", "-DFAKE_NVIDIA"},
		} {
			out := filepath.Join(dir, b.out)
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				fakes.err = err
				return
			}
			if msg, err := exec.Command("cc", "-shared", "-fPIC", "-O1", "-w", b.def, "-o", out, "testdata/fakerccl.c", "-lpthread").CombinedOutput(); err != nil {
				fakes.err = errors.New(string(msg))
				return
			}
		}
		// One fake file stands in for NCCL, the CUDA runtime and the driver.
		for _, link := range []string{"libcudart.so.13", "libcuda.so.1"} {
			if err := os.Symlink("libnccl.so.2", filepath.Join(dir, "nvidia", link)); err != nil {
				fakes.err = err
				return
			}
		}
		fakes.dir = dir
	})
	if fakes.err != nil {
		testenv.FakeBuildFailed(t, "the fake libraries", fakes.err)
	}
	return fakes.dir
}

// loadFake loads HIP and RCCL (or NCCL) from the fake of a platform for
// the test, and unloads them when it ends; it returns the fake's folder.
func loadFake(t *testing.T, p hip.Platform) string {
	t.Helper()
	dir := filepath.Join(buildFakes(t), map[hip.Platform]string{hip.PlatformAMD: "amd", hip.PlatformNVIDIA: "nvidia"}[p])
	hipPath := dir
	if p == hip.PlatformAMD {
		hipPath = filepath.Join(dir, "librccl.so.1") // the fake HIP runtime is in the same file
	}
	library.Reset()
	if lp := hip.LoadedPlatform(); lp != hip.PlatformNone {
		t.Skipf("tier 0: HIP is loaded already (%s, %v): the fakes need a process where it is not", lp, hip.LibraryPaths())
	}
	require.NoError(t, hip.Load(hip.WithPlatform(p), hip.WithLibraryPaths(hipPath)))
	t.Cleanup(func() {
		// Unload, not Reset: HIP and RCCL are one fake file.
		if err := Unload(); err != nil {
			library.Reset()
		}
		assert.NoError(t, hip.Unload())
	})
	require.NoError(t, Load(WithPlatform(p), WithLibraryPaths(dir)))
	return dir
}

// fakeLog makes the fakes log their calls for the test and returns a
// function that reads the lines logged since its last call.
func fakeLog(t *testing.T) func() []string { return testenv.FakeLog(t, "ROCM_GO_FAKE_LOG") }

// useFake loads a fake platform and makes a communicator over all its
// devices with CommInitAll, closed when the test ends.
func useFake(t *testing.T, p hip.Platform) *env {
	t.Helper()
	loadFake(t, p)
	devs, err := hip.Devices()
	require.NoError(t, err)
	e := &env{devs: devs, rng: rand.New(rand.NewPCG(3, 4))}
	for _, d := range devs {
		s, err := d.NewStream()
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, s.Close()) })
		e.streams = append(e.streams, s)
	}
	e.comms, err = CommInitAll(devs...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, CloseAll(e.comms...)) })
	return e
}

func TestFakeSuiteAMD(t *testing.T) {
	e := useFake(t, hip.PlatformAMD)
	require.Equal(t, 2, e.n(), "the fake HIP has two devices")
	runSuite(t, e)
}

func TestFakeSuiteNVIDIA(t *testing.T) { runSuite(t, useFake(t, hip.PlatformNVIDIA)) }

func TestFakeLibraryAMD(t *testing.T) {
	loadFake(t, hip.PlatformAMD)
	assert.Equal(t, hip.PlatformAMD, LoadedPlatform())
	assert.Contains(t, LibraryPaths()[0], "librccl.so.1")
	assert.Empty(t, untranslated(), "the fake exports every bound function")
	v, err := Version()
	require.NoError(t, err)
	assert.Equal(t, hip.Version{Major: 2, Minor: 27, Patch: 7, Raw: 22707}, v)
	for _, s := range statusValues {
		text, err := StatusString(s)
		require.NoError(t, err)
		assert.NotEmpty(t, text, s)
	}
	text, err := StatusString(StatusRemoteError)
	require.NoError(t, err)
	assert.Equal(t, "remote process exited or there was a network error", text)
	p, err := Symbol("ncclAllReduce")
	require.NoError(t, err)
	assert.NotNil(t, p)
	_, err = Symbol("ncclNoSuchFunction")
	assert.ErrorIs(t, err, ErrSymbolNotFound)
}

func TestFakeLibraryNVIDIA(t *testing.T) {
	dir := loadFake(t, hip.PlatformNVIDIA)
	assert.Equal(t, hip.PlatformNVIDIA, LoadedPlatform())
	assert.Contains(t, LibraryPaths()[0], dir, "one fake file is NCCL, the CUDA runtime and the driver")
	assert.Empty(t, untranslated(), "every bound function has an NCCL translation")
	v, err := Version()
	require.NoError(t, err)
	assert.Equal(t, hip.Version{Major: 2, Minor: 28, Patch: 7, Raw: 22807}, v)
	text, err := StatusString(StatusInvalidUsage)
	require.NoError(t, err)
	assert.Equal(t, "invalid usage (run with NCCL_DEBUG=WARN for details)", text)
	_, err = Symbol("ncclNoSuchFunction")
	assert.ErrorIs(t, err, ErrSymbolNotFound)
	assert.ErrorContains(t, err, "does not translate it to NCCL")
}

// TestNVIDIAStatusTranslation: NCCL's statuses by name; one it adds later
// is an internal error.
func TestNVIDIAStatusTranslation(t *testing.T) {
	for nccl, want := range map[int]Status{
		0: StatusSuccess, 1: StatusUnhandledCudaError, 2: StatusSystemError, 3: StatusInternalError,
		4: StatusInvalidArgument, 5: StatusInvalidUsage, 6: StatusRemoteError, 7: StatusInProgress,
		8: StatusInternalError, 12345: StatusInternalError,
	} {
		assert.Equal(t, want, nvidiaStatus(nccl), "NCCL status %d", nccl)
	}
}

// TestFakeOtherHIP: an RCCL that links another HIP runtime than package
// hip's is refused at load, with both files named.
func TestFakeOtherHIP(t *testing.T) {
	loadFake(t, hip.PlatformAMD)
	require.NoError(t, Unload())
	other := filepath.Join(fakes.dir, "amd2", "librccl.so.1")
	err := Load(WithPlatform(hip.PlatformAMD), WithLibraryPaths(other))
	require.Error(t, err)
	assert.ErrorContains(t, err, "runs on the HIP runtime "+other+", but package hip loaded "+filepath.Join(fakes.dir, "amd", "librccl.so.1"))
	library.Reset()
	require.NoError(t, Load(WithPlatform(hip.PlatformAMD), WithLibraryPaths(filepath.Join(fakes.dir, "amd"))))
}

func TestFakeUniqueID(t *testing.T) {
	loadFake(t, hip.PlatformAMD)
	a, err := GetUniqueID()
	require.NoError(t, err)
	b, err := GetUniqueID()
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
	assert.True(t, strings.HasPrefix(string(a[:]), "fake-nccl-id-"))
	assert.Equal(t, byte(0xa5), a[127], "all 128 bytes come back")
	t.Setenv("ROCM_GO_FAKE_NODEVICE", "1")
	_, err = GetUniqueID()
	assert.ErrorIs(t, err, ErrUnhandledCudaError)
}

// TestFakeCommInitRank: one goroutine per rank, each joining with the
// unique ID and then running its collectives outside any group; then one
// goroutine for both ranks, inside a group.
func TestFakeCommInitRank(t *testing.T) {
	loadFake(t, hip.PlatformAMD)
	log := fakeLog(t)
	devs, err := hip.Devices()
	require.NoError(t, err)
	runCommInitRank(t, devs)
	assert.Len(t, testenv.Logged(log(), "ncclCommInitRank"), 2)

	// One goroutine joining two ranks outside a group would hang NCCL (the
	// fake gives up after a second); inside a group it works.
	id, err := GetUniqueID()
	require.NoError(t, err)
	const n = 2
	comms := make([]*Comm, n)
	require.NoError(t, Group(func() error {
		for r := range n {
			var err error
			if comms[r], err = CommInitRank(devs[r], n, id, r); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, CloseAll(comms...))
}

// TestFakeGroupKeepsItsThread: NCCL's group is per OS thread; GroupStart
// keeps the goroutine on its thread until GroupEnd, however much it
// yields meanwhile.
func TestFakeGroupKeepsItsThread(t *testing.T) {
	e := useFake(t, hip.PlatformAMD)
	for range 20 {
		require.NoError(t, GroupStart())
		for range 50 {
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() { runtime.Gosched() })
			}
			wg.Wait()
			runtime.Gosched()
			time.Sleep(10 * time.Microsecond)
		}
		require.NoError(t, GroupEnd(), "the group ended on the thread that started it")
	}
	// Nested groups.
	require.NoError(t, Group(func() error { return Group(func() error { return nil }) }))
	// Without a group, one goroutine cannot drive two ranks: the first
	// rank's call waits for the second (the fake gives up after a second).
	send := e.upload(t, 0, make([]byte, 16))
	err := e.comms[0].AllReduce(send, send, 4, DataTypeFloat32, OpSum, e.streams[0])
	assert.ErrorIs(t, err, ErrInvalidUsage)
	assert.Contains(t, e.comms[0].LastError(), "NCCL would hang")
}

// TestFakeDevices: every call that runs on a device makes it current in
// the same C call (the fake refuses a call whose device is not current).
func TestFakeDevices(t *testing.T) {
	e := useFake(t, hip.PlatformAMD)
	bufs := []*hip.Buffer{e.upload(t, 0, make([]byte, 8)), e.upload(t, 1, make([]byte, 8))}
	for range 10 {
		// Device 1 current on this thread, then calls on device 0's comm.
		_, err := e.devs[1].Malloc(1)
		require.NoError(t, err)
		e.each(t, func(r int, c *Comm, s *hip.Stream) error {
			return c.AllReduce(bufs[r], bufs[r], 2, DataTypeFloat32, OpMax, s)
		})
	}
}

func TestFakeArgumentChecks(t *testing.T) {
	e := useFake(t, hip.PlatformAMD)
	log := fakeLog(t)
	c := e.comms[0]
	s := e.streams[0]
	ok := e.upload(t, 0, make([]byte, 64))
	small := e.upload(t, 0, make([]byte, 8))
	other := e.upload(t, 1, make([]byte, 64))
	closed, err := e.devs[0].Malloc(64)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	closedStream, err := e.devs[0].NewStream()
	require.NoError(t, err)
	require.NoError(t, closedStream.Close())
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"nil send", c.AllReduce(nil, ok, 4, DataTypeFloat32, OpSum, s), "the send buffer is nil"},
		{"nil receive", c.AllGather(ok, nil, 4, DataTypeFloat32, s), "the receive buffer is nil"},
		{"closed", c.AllReduce(closed, ok, 4, DataTypeFloat32, OpSum, s), "the send buffer is closed"},
		{"other device", c.AllReduce(other, ok, 4, DataTypeFloat32, OpSum, s), "the send buffer is on device 1, the communicator on device 0"},
		{"too small", c.AllReduce(ok, small, 4, DataTypeFloat32, OpSum, s), "the receive buffer holds 8 bytes; 4 elements of ncclFloat32 need 16"},
		{"gather size", c.AllGather(ok, ok, 9, DataTypeFloat32, s), "the receive buffer holds 64 bytes; 18 elements of ncclFloat32 need 72"},
		{"scatter size", c.ReduceScatter(ok, ok, 9, DataTypeFloat32, OpSum, s), "the send buffer holds 64 bytes; 18 elements of ncclFloat32 need 72"},
		{"negative", c.AllReduce(ok, ok, -1, DataTypeFloat32, OpSum, s), "count -1 is negative"},
		{"overflow", c.AllGather(ok, ok, math.MaxInt/8+1, DataTypeFloat64, s), "overflows"},
		{"overflow times ranks", c.ReduceScatter(ok, ok, math.MaxInt/16+1, DataTypeFloat64, OpSum, s), "overflows"},
		{"data type", c.AllReduce(ok, ok, 4, DataType(12), OpSum, s), "data type 12 is not one of NCCL's"},
		{"op", c.AllReduce(ok, ok, 4, DataTypeFloat32, Op(5), s), "op 5 is not one of NCCL's reductions"},
		{"root", c.Broadcast(ok, ok, 4, DataTypeFloat32, 2, s), "root 2: the communicator's ranks are 0 to 1"},
		{"negative root", c.Reduce(ok, ok, 4, DataTypeFloat32, OpSum, -1, s), "root -1"},
		{"root's send", c.Broadcast(nil, ok, 4, DataTypeFloat32, 0, s), "the send buffer is nil"},
		{"root's receive", c.Reduce(ok, nil, 4, DataTypeFloat32, OpSum, 0, s), "the receive buffer is nil"},
		{"peer", c.Send(ok, 4, DataTypeFloat32, 5, s), "peer 5"},
		{"recv peer", c.Recv(ok, 4, DataTypeFloat32, -1, s), "peer -1"},
		{"stream device", c.AllReduce(ok, ok, 4, DataTypeFloat32, OpSum, e.streams[1]), "the stream is on device 1, the communicator on device 0"},
		{"closed stream", c.AllReduce(ok, ok, 4, DataTypeFloat32, OpSum, closedStream), "the stream is closed"},
	} {
		require.Error(t, tc.err, tc.name)
		assert.ErrorIs(t, tc.err, ErrInvalidArgument, tc.name)
		assert.ErrorContains(t, tc.err, tc.want, tc.name)
	}
	assert.ErrorIs(t, c.AllReduce(closed, ok, 4, DataTypeFloat32, OpSum, s), hip.ErrClosed)
	assert.Empty(t, log(), "no refused call reached the library")

	// Zero elements need no buffers.
	e.each(t, func(r int, c *Comm, s *hip.Stream) error { return c.AllReduce(nil, nil, 0, DataTypeFloat32, OpSum, s) })
	assert.Len(t, testenv.Logged(log(), "ncclAllReduce count=0"), 2)

	_, err = CommInitAll()
	assert.ErrorContains(t, err, "no devices")
	_, err = CommInitAll(e.devs[0], e.devs[1], e.devs[0])
	assert.ErrorContains(t, err, "device 0 is devs[0] and devs[2]: NCCL takes one rank per GPU")
	_, err = CommInitAll(e.devs[0], nil)
	assert.ErrorContains(t, err, "devs[1] is nil")
	var id UniqueID
	_, err = CommInitRank(e.devs[0], 0, id, 0)
	assert.ErrorContains(t, err, "0 ranks")
	_, err = CommInitRank(e.devs[0], 2, id, 2)
	assert.ErrorContains(t, err, "rank 2 of 2")
	_, err = CommInitRank(nil, 2, id, 0)
	assert.ErrorContains(t, err, "nil device")
	_, err = c.Split(-2, 0)
	assert.ErrorContains(t, err, "color -2")
	_, err = c.Split(0, math.MaxInt32+1)
	assert.ErrorContains(t, err, "does not fit in 32 bits")
	assert.Empty(t, log(), "no refused call reached the library")
}

func TestFakeClose(t *testing.T) {
	loadFake(t, hip.PlatformAMD)
	log := fakeLog(t)
	devs, err := hip.Devices()
	require.NoError(t, err)
	comms, err := CommInitAll(devs...)
	require.NoError(t, err)
	log()
	require.NoError(t, CloseAll(comms...))
	assert.Equal(t, []string{
		"ncclGroupStart depth=1",
		"ncclCommFinalize rank=0 ingroup=1",
		"ncclCommFinalize rank=1 ingroup=1",
		"ncclGroupEnd depth=0",
		"ncclCommDestroy rank=0 finalized=1",
		"ncclCommDestroy rank=1 finalized=1",
	}, log(), "finalized together in a group, then destroyed")
	require.NoError(t, CloseAll(comms...), "closing twice does nothing")
	require.NoError(t, comms[0].Close())
	assert.Empty(t, log())
	_, err = comms[0].Count()
	assert.ErrorIs(t, err, ErrClosed)
	err = comms[1].AllReduce(nil, nil, 0, DataTypeFloat32, OpSum, nil)
	assert.ErrorIs(t, err, ErrClosed)
	assert.EqualError(t, err, "rccl: Comm.AllReduce: ncclInvalidUsage (Invalid usage): use of a closed handle")

	comms, err = CommInitAll(devs...)
	require.NoError(t, err)
	log()
	require.NoError(t, comms[0].Abort())
	require.NoError(t, comms[0].Close(), "Close after Abort does nothing")
	require.NoError(t, comms[1].Close())
	assert.Equal(t, []string{"ncclCommAbort rank=0", "ncclCommDestroy rank=1 finalized=0"}, log())
}

func TestFakeAsyncError(t *testing.T) {
	e := useFake(t, hip.PlatformNVIDIA)
	assert.NoError(t, e.comms[0].AsyncError())
	t.Setenv("ROCM_GO_FAKE_ASYNC", "6")
	err := e.comms[0].AsyncError()
	assert.ErrorIs(t, err, ErrRemoteError)
	assert.ErrorContains(t, err, "the communicator failed while its work ran")
	t.Setenv("ROCM_GO_FAKE_ASYNC", "9")
	assert.ErrorIs(t, e.comms[0].AsyncError(), ErrInternalError, "a status NCCL adds later")
}
