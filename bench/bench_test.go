package bench

import (
	"sync"
	"testing"

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
