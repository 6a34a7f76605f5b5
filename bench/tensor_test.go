package bench

import (
	"testing"

	"github.com/rocm-go/rocm/internal/testenv"
)

// TestTensorBenchmarksRun runs each tensor measurement once at a 64th of
// the sizes, so that tier 2 checks the benchmark code itself.
func TestTensorBenchmarksRun(t *testing.T) {
	b, err := OpenTensors()
	testenv.Need(t, 2, "a GPU", err)
	defer b.Close()
	ops, err := b.Ops(64)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		d, err := b.DeviceTime(op)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %v, %d bytes", op.Name, d, op.Bytes)
		op.Close()
	}
	tiny, err := b.TinyAdd(1024)
	if err != nil {
		t.Fatal(err)
	}
	defer tiny.Close()
	if _, err := b.WallPerOp(tiny, 10); err != nil {
		t.Fatal(err)
	}
	cold, warm, err := b.FirstUse()
	if err != nil {
		t.Fatal(err)
	}
	rate, err := b.CopyRate(1 << 24)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first use %v cold, %v warm; copies at %.0f GB/s", cold, warm, rate)
}
