package candle

import (
	"math"
)

// newFilled allocates a tensor of shape on dev and fills it with f.
func newFilled(op string, dev Device, dt DType, shape []int, f func(be backend, st *Storage) error) (*Tensor, error) {
	if dev == nil {
		return nil, pkg.Errorf(op, ErrDevice, "nil device")
	}
	if !dt.valid() {
		return nil, pkg.Errorf(op, ErrDType, "%v is not a dtype", dt)
	}
	out, err := newOutput(op, dev, dt, Shape(shape))
	if err != nil || out.Elems() == 0 {
		return out, err
	}
	if err := f(dev.backend(), out.st); err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return out, nil
}

// Full is a tensor of shape on dev with every element value (converted to
// dt as ToDType does).
func Full(dev Device, dt DType, value float64, shape ...int) (*Tensor, error) {
	return newFilled("Full", dev, dt, shape, func(be backend, st *Storage) error {
		return be.fill(view{st, ContiguousLayout(Shape(shape))}, scalarOf(dt, value))
	})
}

// Zeros is a tensor of zeros.
func Zeros(dev Device, dt DType, shape ...int) (*Tensor, error) { return Full(dev, dt, 0, shape...) }

// Ones is a tensor of ones.
func Ones(dev Device, dt DType, shape ...int) (*Tensor, error) { return Full(dev, dt, 1, shape...) }

// Arange is the 1-D tensor start, start+step, ... up to end (excluded).
func Arange(dev Device, dt DType, start, end, step float64) (*Tensor, error) {
	const op = "Arange"
	if step == 0 || math.IsNaN(start+end+step) || math.IsInf(start+end+step, 0) {
		return nil, pkg.Errorf(op, ErrArgument, "start %v, end %v, step %v: want finite numbers and a step other than 0", start, end, step)
	}
	count := math.Max(0, math.Ceil((end-start)/step))
	if count > math.MaxInt32*float64(math.MaxInt32) {
		return nil, pkg.Errorf(op, ErrArgument, "start %v, end %v, step %v: %.3g elements", start, end, step, count)
	}
	n := int(count)
	return newFilled(op, dev, dt, []int{n}, func(be backend, st *Storage) error { return be.arange(st, start, step) })
}

// RandUniform is a tensor of random numbers uniform in [lo, hi), from the
// device's counter-based generator (Philox4x32-10): the same seed
// (Device.SetSeed) and the same sequence of random ops give the same
// numbers on every device.
func RandUniform(dev Device, dt DType, lo, hi float64, shape ...int) (*Tensor, error) {
	if !(lo < hi) || math.IsInf(hi-lo, 0) {
		return nil, pkg.Errorf("RandUniform", ErrArgument, "[%v, %v) is not a finite range", lo, hi)
	}
	return random("RandUniform", dev, dt, uniform, lo, hi, shape)
}

// RandNormal is a tensor of normally distributed random numbers, from the
// generator RandUniform uses (Box-Muller, computed in float64).
func RandNormal(dev Device, dt DType, mean, std float64, shape ...int) (*Tensor, error) {
	if !(std >= 0) || math.IsInf(mean+std, 0) {
		return nil, pkg.Errorf("RandNormal", ErrArgument, "mean %v, standard deviation %v: want finite numbers, a deviation ≥ 0", mean, std)
	}
	return random("RandNormal", dev, dt, normal, mean, std, shape)
}

func random(op string, dev Device, dt DType, dist distribution, a, b float64, shape []int) (*Tensor, error) {
	if !dt.IsFloat() {
		return nil, pkg.Errorf(op, ErrDType, "random numbers are of a float dtype, not %s", dt)
	}
	return newFilled(op, dev, dt, shape, func(be backend, st *Storage) error {
		seed, offset := deviceRNG(dev).take(st.n)
		return be.random(st, dist, a, b, seed, offset)
	})
}

func deviceRNG(dev Device) *rngState {
	switch d := dev.(type) {
	case *CPUDevice:
		return &d.rng
	case *cpuRank: // a CPU group's rank draws from the CPU's generator
		return &d.rng
	case *HIPDevice:
		return &d.rng
	}
	panic("candle: unknown device type")
}
