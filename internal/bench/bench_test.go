package bench

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rocm-go/rocm/internal/testenv"
)

// Go benchmarks of the same measurements, for go test -bench on a GPU.

var env struct {
	once sync.Once
	e    *Env
	err  error
}

func open(b *testing.B) *Env {
	env.once.Do(func() { env.e, env.err = Open() })
	testenv.Need(b, 2, "a GPU", env.err)
	return env.e
}

func BenchmarkLaunchEmptyFromGo(b *testing.B) {
	e := open(b)
	for b.Loop() {
		if _, err := e.LaunchGo(1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLaunchEmptyFromC(b *testing.B) {
	e := open(b)
	for b.Loop() {
		if _, err := e.LaunchC(1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSmallAdd(b *testing.B) {
	e := open(b)
	s, err := e.NewSmallOps(1024)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for b.Loop() {
		if _, err := e.SmallAdd(s, 100); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDeviceToDevice1GiB(b *testing.B) {
	e := open(b)
	c, err := e.NewCopies(1 << 30)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.SetBytes(2 << 30)
	for b.Loop() {
		if _, err := e.DeviceToDevice(c); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBenchmarksRun runs each measurement once, so that tier 2 checks the
// benchmark code itself.
func TestBenchmarksRun(t *testing.T) {
	env.once.Do(func() { env.e, env.err = Open() })
	testenv.Need(t, 2, "a GPU", env.err)
	e := env.e
	for name, f := range map[string]func() error{
		"go launch": func() error { _, err := e.LaunchGo(10); return err },
		"c launch":  func() error { _, err := e.LaunchC(10); return err },
	} {
		if err := f(); err != nil {
			t.Fatal(name, err)
		}
	}
}

var convEnv struct {
	once sync.Once
	e    *ConvEnv
	err  error
}

func openConv(tb testing.TB) *ConvEnv {
	convEnv.once.Do(func() { convEnv.e, convEnv.err = OpenConv() })
	testenv.Need(tb, 2, "a GPU with MIOpen or cuDNN 9", convEnv.err)
	return convEnv.e
}

// BenchmarkConvUNet times the half-precision UNet convolutions, NCHW and
// NHWC, and reports TFLOP/s.
func BenchmarkConvUNet(b *testing.B) {
	e := openConv(b)
	for _, s := range UNetShapes {
		for _, nhwc := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/%s", s.Name, map[bool]string{false: "NCHW", true: "NHWC"}[nhwc]), func(b *testing.B) {
				cb, err := e.NewConvBench(s, nhwc)
				if err != nil {
					b.Fatal(err)
				}
				defer cb.Close()
				var total time.Duration
				for b.Loop() {
					d, err := cb.Time(10)
					if err != nil {
						b.Fatal(err)
					}
					total += d
				}
				b.ReportMetric(s.TFLOPs(total/time.Duration(b.N)), "TFLOP/s")
			})
		}
	}
}

// TestConvBenchRuns checks the benchmark itself in tier 2: each shape
// computes the right convolution, and times.
func TestConvBenchRuns(t *testing.T) {
	e := openConv(t)
	for _, s := range UNetShapes {
		for _, nhwc := range []bool{false, true} {
			cb, err := e.NewConvBench(s, nhwc)
			if err != nil {
				t.Fatal(s.Name, err)
			}
			worst, err := cb.Check(32)
			if err != nil || worst > 2e-2 {
				t.Fatalf("%s NHWC=%v: error %.3g relative to the output's RMS, %v", s.Name, nhwc, worst, err)
			}
			d, err := cb.Time(3)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s NHWC=%v: %s, %.0f TFLOP/s, Find %v, error %.2g", s.Name, nhwc, cb.Algo.Engine, s.TFLOPs(d), cb.FindTime, worst)
			if err := cb.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
