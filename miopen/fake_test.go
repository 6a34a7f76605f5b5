package miopen

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/internal/testenv"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
)

// The tests of this package's tier 0 run against fake libraries built
// with cc at test time: testdata/fakemiopen.c with package hip's fake HIP
// runtime on the AMD platform, testdata/fakecudnn.c with package hip's fake
// CUDA on the NVIDIA one. The fakes append what reached them to the file
// named by $ROCM_GO_FAKE_LOG, which the tests read.

var fakes struct {
	once sync.Once
	dir  string
	err  error
}

func buildFakes(t *testing.T) string {
	t.Helper()
	fakes.once.Do(func() {
		dir, err := os.MkdirTemp("", "rocm-go-fakemiopen")
		if err != nil {
			fakes.err = err
			return
		}
		for _, d := range []string{"amd", "nvidia"} {
			if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
				fakes.err = err
				return
			}
		}
		for _, b := range []struct {
			out  string
			srcs []string
		}{
			{"amd/libamdhip64.so.6", []string{"../hip/testdata/fakehip.c"}},
			{"amd/libMIOpen.so.1", []string{"testdata/fakemiopen.c"}},
			{"nvidia/libcudart.so.13", []string{"../hip/testdata/fakecuda.c", "testdata/fakecudastream.c"}},
			{"nvidia/libcudnn.so.9", []string{"testdata/fakecudnn.c", "testdata/fakecudnngraph.c"}},
		} {
			args := append([]string{"-shared", "-fPIC", "-O1", "-w", "-o", filepath.Join(dir, b.out)}, b.srcs...)
			if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
				fakes.err = errors.New(string(out))
				return
			}
		}
		fakes.err = os.Symlink("libcudart.so.13", filepath.Join(dir, "nvidia", "libcuda.so.1"))
		fakes.dir = dir
	})
	if fakes.err != nil {
		testenv.FakeBuildFailed(t, "the fake libraries", fakes.err)
	}
	return fakes.dir
}

// fakeEnv is a loaded fake platform: a device, a stream, a handle and the
// log of what reached the fake library.
type fakeEnv struct {
	t      *testing.T
	dev    *hip.Device
	stream *hip.Stream
	h      *Handle
	log    string
}

// useFake loads HIP and MIOpen (or cuDNN) from the fakes of a platform for
// the test, and unloads them afterwards. On NVIDIA it tests the legacy
// translation: cuDNN's graph API stays off.
func useFake(t *testing.T, p hip.Platform) *fakeEnv {
	t.Helper()
	return useFakeWith(t, p, false)
}

// useFakeGraph loads the fake NVIDIA platform with cuDNN's graph API on
// (and the fake cudart that times its plans).
func useFakeGraph(t *testing.T) *fakeEnv {
	t.Helper()
	return useFakeWith(t, hip.PlatformNVIDIA, true)
}

func useFakeWith(t *testing.T, p hip.Platform, graph bool) *fakeEnv {
	t.Helper()
	dir := filepath.Join(buildFakes(t), map[hip.Platform]string{hip.PlatformAMD: "amd", hip.PlatformNVIDIA: "nvidia"}[p])
	e := &fakeEnv{t: t, log: filepath.Join(t.TempDir(), "fake.log")}
	t.Setenv("ROCM_GO_FAKE_LOG", e.log)
	// Each test Finds afresh; the tests of the disk cache point it at a
	// folder of their own.
	t.Setenv(FindCacheEnv, "off")
	useCUBLAS, useGraphAPI = false, graph
	t.Cleanup(func() { useCUBLAS, useGraphAPI = true, true })
	library.Reset()
	require.NoError(t, hip.Load(hip.WithPlatform(p), hip.WithLibraryPaths(dir)))
	t.Cleanup(func() {
		library.Reset()
		require.NoError(t, hip.Unload())
	})
	require.Equal(t, p, hip.LoadedPlatform(), "package hip loaded the fake (no other HIP was loaded before)")
	// rocm-go's kernels compile with the compiler of the fake's platform,
	// which tier 1 has for both (hipRTC, and NVRTC): loaded here, so that
	// the cleanup unloads it for the tests after (a first use would leave
	// it loaded). Where it is missing the kernels' calls fail as they
	// would anyway: the fakes load no module.
	if hiprtc.Load(hiprtc.WithPlatform(p)) == nil {
		t.Cleanup(func() { require.NoError(t, hiprtc.Unload()) })
	}
	require.NoError(t, Load(WithLibraryPaths(dir)))
	var err error
	e.dev, err = hip.GetDevice(0)
	require.NoError(t, err)
	e.stream, err = e.dev.NewStream()
	require.NoError(t, err)
	e.h, err = NewHandle(e.stream)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, e.h.Close())
		require.NoError(t, e.stream.Close())
	})
	return e
}

// lines returns the log, one call a line, and empties it.
func (e *fakeEnv) lines() []string {
	b, err := os.ReadFile(e.log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(e.t, err)
	require.NoError(e.t, os.Truncate(e.log, 0))
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// grep returns the lines of the log that start with prefix, and empties
// the log.
func (e *fakeEnv) grep(prefix string) []string { return testenv.Logged(e.lines(), prefix) }

// desc makes a tensor descriptor for the test.
func (e *fakeEnv) desc(dt DataType, dims ...int) *TensorDescriptor {
	e.t.Helper()
	d, err := NewTensorDescriptor(dt, dims, nil)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { d.Close() })
	return d
}

// tensor makes a descriptor and a buffer that holds it.
func (e *fakeEnv) tensor(dt DataType, dims ...int) Tensor {
	e.t.Helper()
	return e.tensorOf(e.desc(dt, dims...))
}

func (e *fakeEnv) tensorOf(d *TensorDescriptor) Tensor {
	e.t.Helper()
	return Tensor{Desc: d, Data: e.buffer(d.Bytes())}
}

// buffer allocates n bytes of the fake device's memory for the test.
func (e *fakeEnv) buffer(n int) *hip.Buffer {
	e.t.Helper()
	b, err := e.dev.Malloc(n)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { b.Close() })
	return b
}

func (e *fakeEnv) conv(p ConvolutionParams) *ConvolutionDescriptor {
	e.t.Helper()
	c, err := NewConvolutionDescriptor(p)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { c.Close() })
	return c
}
