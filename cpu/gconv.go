package cpu

import (
	"fmt"

	"hap/ir"
)

// Grouped convolution (Attrs.Groups > 1; depthwise when every group holds
// one input channel): x[N,C,H,W] * w[O,C/G,KH,KW] → y[N,O,OH,OW], output
// channel o reading only the input channels of its group o/(O/G). The
// ungrouped path's im2col + GEMM would multiply by a block-diagonal weight
// mostly made of zeros, so these kernels loop directly: one output element
// (or input-gradient or weight-gradient element) at a time, summing in a
// fixed order, deterministic.

// gconvGeom is a grouped convolution's geometry.
type gconvGeom struct {
	convGeom       // c: all input channels; o: all output channels
	groups, cg, og int
}

func newGConvGeom(op string, a *ir.Attrs, xs, ws ir.Shape) (gconvGeom, error) {
	gr := ir.ConvGroups(a)
	if len(xs) != 4 || len(ws) != 4 {
		return gconvGeom{}, fmt.Errorf("%s: want x[N,C,H,W] and w[O,C/groups,KH,KW], got %v and %v", op, xs, ws)
	}
	// The ungrouped geometry over one group's channels, then widened.
	one := xs.Clone()
	one[1] = ws[1]
	g, err := newConvGeom(op, a, one, ws)
	if err != nil {
		return gconvGeom{}, err
	}
	if xs[1] != ws[1]*gr && !(xs[1] == 0 && ws[0] == 0) || ws[0]%gr != 0 {
		return gconvGeom{}, fmt.Errorf("%s: %d groups do not fit x %v and w %v", op, gr, xs, ws)
	}
	g.c = xs[1]
	return gconvGeom{convGeom: g, groups: gr, cg: ws[1], og: ws[0] / gr}, nil
}

func (g gconvGeom) wShape() ir.Shape { return ir.Shape{g.o, g.cg, g.kh, g.kw} }

func checkGConv[F Float](op string, g gconvGeom, x, w, y *Tensor[F], xn, wn, yn string) error {
	if err := checkTensor(op, xn, x, g.xShape()); err != nil {
		return err
	}
	if err := checkTensor(op, wn, w, g.wShape()); err != nil {
		return err
	}
	return checkTensor(op, yn, y, g.yShape())
}

// gconv2d: y[n,o,oy,ox] = Σ_{c,i,j} x[n, (o/og)·cg + c, oy·s−p+i, ox·s−p+j] · w[o,c,i,j].
func gconv2d[F Float](a *ir.Attrs, x, w, y *Tensor[F]) error {
	const op = "conv2d"
	g, err := newGConvGeom(op, a, x.Shape, w.Shape)
	if err != nil {
		return err
	}
	if err := checkGConv(op, g, x, w, y, "x", "w", "y"); err != nil {
		return err
	}
	kernParallel(g.n, kernWorkers(g.n), func(_, lo, hi int) {
		for n := lo; n < hi; n++ {
			for o := 0; o < g.o; o++ {
				c0 := o / g.og * g.cg
				for oy := 0; oy < g.oh; oy++ {
					for ox := 0; ox < g.ow; ox++ {
						var s float64
						for c := 0; c < g.cg; c++ {
							xp := x.Data[((n*g.c)+c0+c)*g.h*g.w:]
							wp := w.Data[((o*g.cg)+c)*g.kh*g.kw:]
							for i := 0; i < g.kh; i++ {
								iy := oy*g.s - g.p + i
								if iy < 0 || iy >= g.h {
									continue
								}
								for j := 0; j < g.kw; j++ {
									ix := ox*g.s - g.p + j
									if ix < 0 || ix >= g.w {
										continue
									}
									s += float64(xp[iy*g.w+ix]) * float64(wp[i*g.kw+j])
								}
							}
						}
						y.Data[((n*g.o+o)*g.oh+oy)*g.ow+ox] = F(s)
					}
				}
			}
		}
	})
	return nil
}

// gconv2dGradInput: dx[n,ch,iy,ix] sums dy[n,o,oy,ox]·w[o, ch mod cg, i, j]
// over its group's output channels o and the kernel taps (i, j) that read
// it. a.Shape is x's shape.
func gconv2dGradInput[F Float](a *ir.Attrs, dy, w, dx *Tensor[F]) error {
	const op = "conv2d_grad_input"
	g, err := newGConvGeom(op, a, ir.Shape(a.Shape), w.Shape)
	if err != nil {
		return err
	}
	if err := checkGConv(op, g, dx, w, dy, "dx", "w", "dy"); err != nil {
		return err
	}
	kernParallel(g.n, kernWorkers(g.n), func(_, lo, hi int) {
		for n := lo; n < hi; n++ {
			for ch := 0; ch < g.c; ch++ {
				o0, c := ch/g.cg*g.og, ch%g.cg
				for iy := 0; iy < g.h; iy++ {
					for ix := 0; ix < g.w; ix++ {
						var s float64
						for o := o0; o < o0+g.og; o++ {
							dyp := dy.Data[(n*g.o+o)*g.oh*g.ow:]
							wp := w.Data[((o*g.cg)+c)*g.kh*g.kw:]
							for i := 0; i < g.kh; i++ {
								ty := iy + g.p - i
								if ty < 0 || ty%g.s != 0 || ty/g.s >= g.oh {
									continue
								}
								for j := 0; j < g.kw; j++ {
									tx := ix + g.p - j
									if tx < 0 || tx%g.s != 0 || tx/g.s >= g.ow {
										continue
									}
									s += float64(dyp[(ty/g.s)*g.ow+tx/g.s]) * float64(wp[i*g.kw+j])
								}
							}
						}
						dx.Data[((n*g.c+ch)*g.h+iy)*g.w+ix] = F(s)
					}
				}
			}
		}
	})
	return nil
}

// gconv2dGradWeight: dw[o,c,i,j] = Σ_{n,oy,ox} dy[n,o,oy,ox] ·
// x[n, (o/og)·cg + c, oy·s−p+i, ox·s−p+j]. a.Shape is w's shape.
func gconv2dGradWeight[F Float](a *ir.Attrs, x, dy, dw *Tensor[F]) error {
	const op = "conv2d_grad_weight"
	g, err := newGConvGeom(op, a, x.Shape, ir.Shape(a.Shape))
	if err != nil {
		return err
	}
	if err := checkGConv(op, g, x, dw, dy, "x", "dw", "dy"); err != nil {
		return err
	}
	kernParallel(g.o, kernWorkers(g.o), func(_, lo, hi int) {
		for o := lo; o < hi; o++ {
			c0 := o / g.og * g.cg
			for c := 0; c < g.cg; c++ {
				for i := 0; i < g.kh; i++ {
					for j := 0; j < g.kw; j++ {
						var s float64
						for n := 0; n < g.n; n++ {
							xp := x.Data[(n*g.c+c0+c)*g.h*g.w:]
							dyp := dy.Data[(n*g.o+o)*g.oh*g.ow:]
							for oy := 0; oy < g.oh; oy++ {
								iy := oy*g.s - g.p + i
								if iy < 0 || iy >= g.h {
									continue
								}
								for ox := 0; ox < g.ow; ox++ {
									ix := ox*g.s - g.p + j
									if ix < 0 || ix >= g.w {
										continue
									}
									s += float64(dyp[oy*g.ow+ox]) * float64(xp[iy*g.w+ix])
								}
							}
						}
						dw.Data[((o*g.cg+c)*g.kh+i)*g.kw+j] = F(s)
					}
				}
			}
		}
	})
	return nil
}
