package cpu

import (
	"fmt"

	"hap/ir"
)

// execPool runs ir/pool.go's kinds; ok is false for any other kind.
func execPool[F Float](op *ir.Op, in, out []*Tensor[F]) (ok bool, err error) {
	switch op.Kind {
	case ir.OpAvgPool2D:
		return true, avgPool2d(&op.Attrs, in[0], out[0])
	case ir.OpAvgPool2DGrad:
		return true, avgPool2dGrad(&op.Attrs, in[0], out[0])
	}
	return false, nil
}

// avgGeom is avg_pool2d's geometry over planes = N·C images.
type avgGeom struct{ planes, h, w, oh, ow, k, s, p int }

func newAvgGeom[F Float](op string, a *ir.Attrs, xs ir.Shape, x, y *Tensor[F], xn, yn string) (avgGeom, error) {
	if len(xs) != 4 || a.Kernel < 1 || a.Stride < 1 || a.Pad < 0 {
		return avgGeom{}, fmt.Errorf("%s: want x[N,C,H,W], kernel and stride ≥ 1, pad ≥ 0; got %v, %d, %d, %d", op, xs, a.Kernel, a.Stride, a.Pad)
	}
	g := avgGeom{planes: xs[0] * xs[1], h: xs[2], w: xs[3], k: a.Kernel, s: a.Stride, p: a.Pad}
	g.oh, g.ow = (g.h+2*g.p-g.k)/g.s+1, (g.w+2*g.p-g.k)/g.s+1
	if err := checkTensor(op, xn, x, xs); err != nil {
		return avgGeom{}, err
	}
	return g, checkTensor(op, yn, y, ir.Shape{xs[0], xs[1], g.oh, g.ow})
}

// avgPool2d: each output is the window's sum over Kernel², the padding
// counting as zeros (PyTorch's count_include_pad).
func avgPool2d[F Float](a *ir.Attrs, x, y *Tensor[F]) error {
	g, err := newAvgGeom("avg_pool2d", a, x.Shape, x, y, "x", "y")
	if err != nil {
		return err
	}
	div := float64(g.k * g.k)
	kernParallel(g.planes, kernWorkers(g.planes), func(_, lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			xp, yp := x.Data[pl*g.h*g.w:], y.Data[pl*g.oh*g.ow:]
			for oy := 0; oy < g.oh; oy++ {
				for ox := 0; ox < g.ow; ox++ {
					var s float64
					for i := max(0, oy*g.s-g.p); i < min(g.h, oy*g.s-g.p+g.k); i++ {
						for j := max(0, ox*g.s-g.p); j < min(g.w, ox*g.s-g.p+g.k); j++ {
							s += float64(xp[i*g.w+j])
						}
					}
					yp[oy*g.ow+ox] = F(s / div)
				}
			}
		}
	})
	return nil
}

// avgPool2dGrad: each input element gathers dy/Kernel² from every window
// holding it (a gather, so the order of the sum is fixed). a.Shape is x's
// shape.
func avgPool2dGrad[F Float](a *ir.Attrs, dy, dx *Tensor[F]) error {
	g, err := newAvgGeom("avg_pool2d_grad", a, ir.Shape(a.Shape), dx, dy, "dx", "dy")
	if err != nil {
		return err
	}
	div := float64(g.k * g.k)
	kernParallel(g.planes, kernWorkers(g.planes), func(_, lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			dxp, dyp := dx.Data[pl*g.h*g.w:], dy.Data[pl*g.oh*g.ow:]
			for iy := 0; iy < g.h; iy++ {
				// Windows oy with oy·s − p ≤ iy < oy·s − p + k.
				oy0, oy1 := windows(iy, g.s, g.p, g.k, g.oh)
				for ix := 0; ix < g.w; ix++ {
					ox0, ox1 := windows(ix, g.s, g.p, g.k, g.ow)
					var s float64
					for oy := oy0; oy < oy1; oy++ {
						for ox := ox0; ox < ox1; ox++ {
							s += float64(dyp[oy*g.ow+ox])
						}
					}
					dxp[iy*g.w+ix] = F(s / div)
				}
			}
		}
	})
	return nil
}

// windows is the range [lo, hi) of window starts o (among out) whose
// window [o·s − p, o·s − p + k) holds position i.
func windows(i, s, p, k, out int) (lo, hi int) {
	// o·s ≥ i + p − k + 1 and o·s ≤ i + p.
	lo = max(0, (i+p-k+1+s-1)/s)
	if i+p-k+1 < 0 {
		lo = 0
	}
	hi = min(out, (i+p)/s+1)
	return lo, max(lo, hi)
}

// maxPool2dPadded is max_pool2d with Attrs.Pad > 0: PyTorch pads with −∞,
// so each window's maximum is over its elements inside the image (at
// least one, as pad ≤ kernel/2); the first maximum in row-major order wins
// and a NaN propagates, as maxPool2d.
func maxPool2dPadded[F Float](a *ir.Attrs, x, y *Tensor[F]) error {
	g, err := newAvgGeom("max_pool2d", a, x.Shape, x, y, "x", "y")
	if err != nil {
		return err
	}
	kernParallel(g.planes, kernWorkers(g.planes), func(_, lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			xp, yp := x.Data[pl*g.h*g.w:(pl+1)*g.h*g.w], y.Data[pl*g.oh*g.ow:]
			for oy := 0; oy < g.oh; oy++ {
				for ox := 0; ox < g.ow; ox++ {
					yp[oy*g.ow+ox] = xp[paddedArgmax(g, xp, oy, ox)]
				}
			}
		}
	})
	return nil
}

// maxPool2dPaddedGrad routes each output gradient to its window's argmax.
func maxPool2dPaddedGrad[F Float](a *ir.Attrs, x, dy, dx *Tensor[F]) error {
	g, err := newAvgGeom("max_pool2d_grad", a, x.Shape, x, dy, "x", "dy")
	if err != nil {
		return err
	}
	if err := checkTensor("max_pool2d_grad", "dx", dx, x.Shape); err != nil {
		return err
	}
	kernParallel(g.planes, kernWorkers(g.planes), func(_, lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			xp, dyp, dxp := x.Data[pl*g.h*g.w:(pl+1)*g.h*g.w], dy.Data[pl*g.oh*g.ow:], dx.Data[pl*g.h*g.w:(pl+1)*g.h*g.w]
			clear(dxp)
			for oy := 0; oy < g.oh; oy++ {
				for ox := 0; ox < g.ow; ox++ {
					dxp[paddedArgmax(g, xp, oy, ox)] += dyp[oy*g.ow+ox]
				}
			}
		}
	})
	return nil
}

// paddedArgmax is the in-plane index of the window (oy, ox)'s maximum over
// its elements inside the image.
func paddedArgmax[F Float](g avgGeom, xp []F, oy, ox int) int {
	i0, j0 := max(0, oy*g.s-g.p), max(0, ox*g.s-g.p)
	i1, j1 := min(g.h, oy*g.s-g.p+g.k), min(g.w, ox*g.s-g.p+g.k)
	best := i0*g.w + j0
	bv := xp[best]
	for i := i0; i < i1; i++ {
		for j := j0; j < j1; j++ {
			v := xp[i*g.w+j]
			if v > bv || (v != v && bv == bv) {
				best, bv = i*g.w+j, v
			}
		}
	}
	return best
}
