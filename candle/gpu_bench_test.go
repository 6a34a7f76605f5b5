package candle

import (
	"testing"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
)

// The cost of a small op, layer by layer: the whole Tensor.Add (checks,
// output from the pool, launch, close), the backend's launch into an
// existing storage, and the bare kernel launch. bench/cmd/tensorbench
// compares the first with PyTorch.

func benchDevice(b *testing.B) *HIPDevice {
	b.Helper()
	var d *HIPDevice
	n, err := hip.DeviceCount()
	if err == nil && n == 0 {
		err = errNoGPU
	}
	if err == nil {
		d, err = HIP(0)
	}
	testenv.Need(b, 2, "a GPU", err)
	return d
}

type benchError string

func (e benchError) Error() string { return string(e) }

const errNoGPU = benchError("no GPU")

func smallOperands(b *testing.B, d *HIPDevice) (x, y *Tensor) {
	b.Helper()
	data := make([]float32, 1024)
	for i := range data {
		data[i] = float32(i%13) + 0.5
	}
	x, err := FromSlice(d, data)
	if err != nil {
		b.Fatal(err)
	}
	y, err = FromSlice(d, data)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { x.Close(); y.Close() })
	return x, y
}

func syncAfter(b *testing.B, d *HIPDevice) {
	b.Helper()
	if err := d.Synchronize(); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkTinyAdd(b *testing.B) {
	d := benchDevice(b)
	x, y := smallOperands(b, d)
	for b.Loop() {
		z, err := x.Add(y)
		if err != nil {
			b.Fatal(err)
		}
		z.Close()
	}
	syncAfter(b, d)
}

func BenchmarkTinyAddBackend(b *testing.B) {
	d := benchDevice(b)
	x, y := smallOperands(b, d)
	out, err := newStorage("bench", d, F32, 1024)
	if err != nil {
		b.Fatal(err)
	}
	defer out.release()
	be := d.backend()
	vx, vy := view{x.st, x.layout}, view{y.st, y.layout}
	for b.Loop() {
		if err := be.binary(opAdd, vx, vy, out); err != nil {
			b.Fatal(err)
		}
	}
	syncAfter(b, d)
}

func BenchmarkTinyAddKernel(b *testing.B) {
	d := benchDevice(b)
	x, y := smallOperands(b, d)
	be := (*hipBackend)(d)
	fn, err := be.function(kernelNames.binary[opAdd][F32])
	if err != nil {
		b.Fatal(err)
	}
	var ix kIndex
	ix.Flags = 1
	var a hip.Args
	hip.ArgValue(&a, ix).Uint64(1024).Ptr(ptr(view{x.st, x.layout})).Ptr(ptr(view{y.st, y.layout})).Ptr(ptr(view{x.st, x.layout}))
	cfg := hip.LaunchConfig{Grid: hip.Dim3{X: 1}, Block: block1D, Stream: d.stream}
	for b.Loop() {
		if err := fn.Launch(cfg, &a); err != nil {
			b.Fatal(err)
		}
	}
	syncAfter(b, d)
}
