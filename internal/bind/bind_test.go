package bind

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/internal/dl"
)

func TestFormatError(t *testing.T) {
	assert.Equal(t, "x: f: S_BAD (it went bad): arg 2: cause",
		FormatError("x", "f", "S_BAD", "it went bad", "arg 2", errors.New("cause")))
	assert.Equal(t, "x: f: S_BAD", FormatError("x", "f", "S_BAD", "S_BAD", "", nil), "a description that is the name is left out")
}

func TestLifetimeEndsOnce(t *testing.T) {
	var l Lifetime
	frees := 0
	free := func() error { frees++; return errors.New("freed") }
	assert.False(t, l.Closed())
	assert.EqualError(t, l.Close(free), "freed")
	assert.NoError(t, l.Close(free), "the second Close does nothing")
	assert.True(t, l.Closed())
	assert.Equal(t, 1, frees)
	assert.False(t, l.End())

	var c Lifetime
	var ended atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c.End() {
				ended.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), ended.Load(), "exactly one caller closes")
}

func TestLifetimeBackstop(t *testing.T) {
	freed := make(chan int, 3)
	func() {
		type handle struct {
			life Lifetime
			_    [64]byte
		}
		h := &handle{}
		Backstop(&h.life, h, func(id int) { freed <- id }, 1)
		closed := &handle{}
		Backstop(&closed.life, closed, func(id int) { freed <- id }, 2)
		closed.life.End()
		marked := &handle{} // closed, its C object still in use by others
		Backstop(&marked.life, marked, func(id int) { freed <- id }, 3)
		assert.True(t, marked.life.Mark())
		assert.False(t, marked.life.Mark(), "only the first Mark closes")
		assert.True(t, marked.life.Closed())
	}()
	var got []int
	for range 20 {
		runtime.GC()
		select {
		case id := <-freed:
			got = append(got, id)
		case <-time.After(20 * time.Millisecond):
		}
		if len(got) == 2 {
			break
		}
	}
	select {
	case id := <-freed:
		got = append(got, id)
	case <-time.After(50 * time.Millisecond):
	}
	assert.ElementsMatch(t, []int{1, 3}, got, "the handles dropped unclosed, and the one only marked, are freed; the ended one is not")
}

// fakeTables records what a Library asks of its package.
type fakeTables struct {
	opens, unbinds int
	setDevice      []unsafe.Pointer
	platform       int // what Open reports for PlatformNone
	fail           error
	got            Options
}

func (f *fakeTables) Open(o Options) ([]*dl.Library, int, error) {
	f.opens++
	f.got = o
	if f.fail != nil {
		return nil, PlatformNone, f.fail
	}
	p := o.Platform
	if p == PlatformNone {
		p = f.platform
	}
	return nil, p, nil
}
func (f *fakeTables) Unbind()                     { f.unbinds++ }
func (f *fakeTables) SetDevice(fn unsafe.Pointer) { f.setDevice = append(f.setDevice, fn) }

func publishForTest(t *testing.T, p int) {
	var x int
	Publish(p, unsafe.Pointer(&x), func() error { return errors.New("no device 7") })
	t.Cleanup(func() { Publish(PlatformNone, nil, nil) })
}

func TestLeaderLoadsAndCounts(t *testing.T) {
	tb := &fakeTables{platform: PlatformAMD}
	l := &Library{Pkg: "lead", Name: "HIP", NVIDIA: "CUDA", Tables: tb}
	require.NoError(t, l.Ensure())
	assert.Equal(t, PlatformAMD, l.Platform())
	require.NoError(t, l.Load(Options{Platform: PlatformAMD}), "options that agree")
	assert.ErrorContains(t, l.Load(Options{Platform: PlatformNVIDIA}), "lead: Load: the amd platform is loaded already; Unload it before loading nvidia")
	assert.Equal(t, 1, tb.opens)
	require.NoError(t, l.Unload())
	assert.Equal(t, 0, tb.unbinds, "a library loaded on first use stays")
	assert.ErrorContains(t, l.Unload(), "lead: Unload without a matching Load")
	l.Reset()
	assert.Equal(t, 1, tb.unbinds)
	assert.Equal(t, []unsafe.Pointer{nil, nil}, tb.setDevice, "installed at open (nothing published), removed at unbind")
	assert.Equal(t, PlatformNone, l.Platform())
}

func TestFollowerTakesHIPsPlatform(t *testing.T) {
	publishForTest(t, PlatformNVIDIA)
	follows := 0
	tb := &fakeTables{}
	l := &Library{Pkg: "f", Name: "rocBLAS", NVIDIA: "cuBLAS", Follow: func() error { follows++; return nil }, Tables: tb}
	require.NoError(t, l.Ensure())
	assert.Positive(t, follows)
	assert.Equal(t, PlatformNVIDIA, tb.got.Platform, "Open is given HIP's platform")
	assert.Equal(t, []unsafe.Pointer{SetDeviceFunc()}, tb.setDevice, "HIP's set-device function is installed")

	assert.ErrorContains(t, l.Load(Options{Platform: PlatformAMD}), "the nvidia platform is loaded already")
	l.Reset()
	err := l.Load(Options{Platform: PlatformAMD})
	assert.ErrorContains(t, err, "f: the amd platform was asked for, but package hip loaded nvidia: rocBLAS runs on HIP's devices and streams")

	// HIP switches platform: a first-use load follows it.
	l.Reset()
	require.NoError(t, l.Ensure())
	before := tb.unbinds
	Publish(PlatformAMD, SetDeviceFunc(), nil)
	require.NoError(t, l.Ensure())
	assert.Equal(t, PlatformAMD, l.Platform())
	assert.Equal(t, before+1, tb.unbinds, "the first load was undone")
	l.Reset()
}

func TestGenerationCountsHIPsLoads(t *testing.T) {
	g := Generation()
	publishForTest(t, PlatformAMD)
	assert.Equal(t, g+1, Generation())
	Publish(PlatformNone, nil, nil)
	assert.Equal(t, g+2, Generation(), "an unload is a new generation too")
}

func TestFollowerWithoutHIP(t *testing.T) {
	l := &Library{Pkg: "f", Name: "MIOpen", NVIDIA: "cuDNN", Follow: func() error { return errors.New("no HIP") }, Tables: &fakeTables{}}
	err := l.Ensure()
	assert.EqualError(t, err, "f: MIOpen follows the HIP platform, which did not load: no HIP")
	assert.Same(t, err, l.Ensure(), "a failed first use is remembered")
}

func TestStandaloneNeedsNoHIPForANamedPlatform(t *testing.T) {
	tb := &fakeTables{}
	l := &Library{Pkg: "rtc", Name: "hipRTC", NVIDIA: "NVRTC", Follow: func() error { return errors.New("no HIP") }, Standalone: true, Tables: tb}
	require.NoError(t, l.Load(Options{Platform: PlatformNVIDIA, Paths: []string{"/x"}}))
	assert.Equal(t, Options{Platform: PlatformNVIDIA, Paths: []string{"/x"}}, tb.got)
	require.NoError(t, l.Unload())
	assert.ErrorContains(t, l.Ensure(), "no HIP", "the default still follows HIP")
	l.Reset()
}

func TestSharedErrorRules(t *testing.T) {
	publishForTest(t, PlatformAMD)
	amd := &Library{Pkg: "b", Name: "rocBLAS", NVIDIA: "cuBLAS", Follow: func() error { return nil }, Tables: &fakeTables{}}
	require.NoError(t, amd.Ensure())
	defer amd.Reset()
	err := amd.MissingSymbol("rocblas_new")
	assert.ErrorIs(t, err, dl.ErrSymbolNotFound)
	assert.EqualError(t, err, "rocBLAS (not loaded) has no symbol rocblas_new: the loaded rocBLAS does not export it (an older rocBLAS?)")
	assert.ErrorContains(t, amd.MissingCUDA("x"), "the cuBLAS libraries lack the function it is translated to")
	_, err = amd.Symbol("rocblas_other")
	assert.ErrorIs(t, err, dl.ErrSymbolNotFound)
	assert.EqualError(t, DeviceError(), "no device 7", "the cause package hip published")

	Publish(PlatformNVIDIA, nil, nil)
	amd.Reset()
	require.NoError(t, amd.Ensure())
	assert.ErrorContains(t, amd.MissingSymbol("rocblas_new"), "cuBLAS (not loaded) has no symbol rocblas_new: rocm-go does not translate it to cuBLAS")
	Publish(PlatformNone, nil, nil)
	assert.EqualError(t, DeviceError(), "the HIP runtime is not loaded")
	assert.Equal(t, "none", PlatformName(PlatformNone))
	assert.Equal(t, PlatformNone, Platform())
	assert.Nil(t, SetDeviceFunc())
}
