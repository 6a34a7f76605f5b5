package candle

import (
	"math"
	"runtime"
	"sync"
)

// The CPU's image ops: the references, in float64, rounded once. Direct
// loops (no im2col): simple to check, and fast enough for the sizes a CPU
// runs and the tests compare.

// imageStrides are the element strides of a contiguous image of c
// channels and h × w pixels in a format, in N, C, H, W order.
func imageStrides(c, h, w int, f Format) [4]int {
	if f == NHWC {
		return [4]int{h * w * c, 1, w * c, c}
	}
	return [4]int{c * h * w, h * w, w, 1}
}

// parallel runs f(i) for i < n on the CPU's cores.
func parallel(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	var wg sync.WaitGroup
	for k := range workers {
		wg.Go(func() {
			for i := k; i < n; i += workers {
				f(i)
			}
		})
	}
	wg.Wait()
}

func (c *cpuBackend) conv(x, w view, dst *Storage, s *convSpec) error {
	xv, wv, d := gatherF(x), gatherF(w), dataOf(dst)
	g := s.groups
	cinG, coutG := s.cin/g, s.cout/g
	xs, ys := imageStrides(s.cin, s.h, s.w, s.format), imageStrides(s.cout, s.oh, s.ow, s.format)
	// The weights as an image: (K, C/g, R, S), or (C, K/g, R, S) when
	// transposed, in N, C, H, W order.
	ws := imageStrides(cinG, s.kh, s.kw, s.format)
	if s.transposed {
		ws = imageStrides(coutG, s.kh, s.kw, s.format)
	}
	parallel(s.n*s.cout, func(plane int) {
		n, co := plane/s.cout, plane%s.cout
		grp, col := co/coutG, co%coutG
		xb := n * xs[0]
		for oy := range s.oh {
			for ox := range s.ow {
				acc := 0.0
				for j := range cinG {
					ci := grp*cinG + j
					for r := range s.kh {
						iy, ok := convSource(oy, r, s, 0)
						if !ok {
							continue
						}
						for q := range s.kw {
							ix, ok := convSource(ox, q, s, 1)
							if !ok {
								continue
							}
							wi := co*ws[0] + j*ws[1]
							if s.transposed {
								wi = ci*ws[0] + col*ws[1]
							}
							acc += xv[xb+ci*xs[1]+iy*xs[2]+ix*xs[3]] * wv[wi+r*ws[2]+q*ws[3]]
						}
					}
				}
				d.setF(n*ys[0]+co*ys[1]+oy*ys[2]+ox*ys[3], acc)
			}
		}
	})
	return nil
}

// convSource is the input index that kernel tap k of output index o reads
// in spatial dim i, and whether there is one (not in the padding; for a
// transposed convolution, on the stride's grid).
func convSource(o, k int, s *convSpec, i int) (int, bool) {
	in := s.h
	if i == 1 {
		in = s.w
	}
	if !s.transposed {
		v := o*s.stride[i] - s.pad[i] + k*s.dil[i]
		return v, v >= 0 && v < in
	}
	t := o + s.pad[i] - k*s.dil[i]
	if t < 0 || t%s.stride[i] != 0 {
		return 0, false
	}
	v := t / s.stride[i]
	return v, v < in
}

func (c *cpuBackend) pooling(x view, dst *Storage, s *poolSpec) error {
	xv, d := gatherF(x), dataOf(dst)
	xs, ys := imageStrides(s.c, s.h, s.w, s.format), imageStrides(s.c, s.oh, s.ow, s.format)
	parallel(s.n*s.c, func(plane int) {
		n, ch := plane/s.c, plane%s.c
		base := n*xs[0] + ch*xs[1]
		for oy := range s.oh {
			y0 := oy*s.stride[0] - s.pad[0]
			for ox := range s.ow {
				x0 := ox*s.stride[1] - s.pad[1]
				acc, count := 0.0, 0
				if s.max {
					acc = math.Inf(-1)
				}
				for iy := max(y0, 0); iy < min(y0+s.kernel[0], s.h); iy++ {
					for ix := max(x0, 0); ix < min(x0+s.kernel[1], s.w); ix++ {
						v := xv[base+iy*xs[2]+ix*xs[3]]
						switch {
						case !s.max:
							acc += v
						case v > acc || v != v: // a NaN wins and stays, as in PyTorch
							if acc == acc {
								acc = v
							}
						}
						count++
					}
				}
				if !s.max {
					if s.excludePad {
						acc /= float64(count)
					} else {
						acc /= float64(s.kernel[0] * s.kernel[1])
					}
				}
				d.setF(n*ys[0]+ch*ys[1]+oy*ys[2]+ox*ys[3], acc)
			}
		}
	})
	return nil
}

func (c *cpuBackend) upsample(x view, dst *Storage, s *upsampleSpec) error {
	xv, d := gatherF(x), dataOf(dst)
	xs, ys := imageStrides(s.c, s.h, s.w, s.format), imageStrides(s.c, s.oh, s.ow, s.format)
	sh, sw := s.scales()
	parallel(s.n*s.c, func(plane int) {
		n, ch := plane/s.c, plane%s.c
		base := n*xs[0] + ch*xs[1]
		at := func(iy, ix int) float64 { return xv[base+iy*xs[2]+ix*xs[3]] }
		for oy := range s.oh {
			for ox := range s.ow {
				var v float64
				if s.bilinear {
					y0, dy, fy := bilinearSource(oy, sh, s.h, s.alignCorners)
					x0, dx, fx := bilinearSource(ox, sw, s.w, s.alignCorners)
					ly1, lx1 := float64(fy), float64(fx)
					ly0, lx0 := 1-ly1, 1-lx1
					v = ly0*(lx0*at(y0, x0)+lx1*at(y0, x0+dx)) + ly1*(lx0*at(y0+dy, x0)+lx1*at(y0+dy, x0+dx))
				} else {
					v = at(nearestSource(oy, sh, s.h), nearestSource(ox, sw, s.w))
				}
				d.setF(n*ys[0]+ch*ys[1]+oy*ys[2]+ox*ys[3], v)
			}
		}
	})
	return nil
}
