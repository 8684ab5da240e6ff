package cpu

// Convolution and pooling kernels (NCHW, row-major).
//
// conv2d lowers each image to a column matrix (im2col) and multiplies it by
// the weight matrix through gonum's BLAS; the two gradients are the same
// products transposed, with col2im (the adjoint of im2col) for the input
// gradient. Images are processed in parallel, at most GOMAXPROCS at a time.

import (
	"fmt"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"hap/ir"
)

// ---- shared helpers (also used by attention.go and moe.go) ----

// kernWorkers is how many goroutines to split n independent items over.
func kernWorkers(n int) int {
	return max(1, min(n, runtime.GOMAXPROCS(0)))
}

// kernParallel splits [0, n) into `workers` contiguous chunks and runs
// fn(worker, lo, hi) on each concurrently (inline when there is one). The
// partition depends only on n and workers, so per-worker partial results
// combined in worker order are deterministic.
func kernParallel(n, workers int, fn func(worker, lo, hi int)) {
	if n <= 0 {
		return
	}
	workers = max(1, min(workers, n))
	if workers == 1 {
		fn(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := w*n/workers, (w+1)*n/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(w, lo, hi)
		}()
	}
	wg.Wait()
}

// gemmScaled computes C = alpha·op(A)·op(B) + beta·C for contiguous
// row-major matrices: op(A) is m×k, op(B) is k×n, C is m×n.
func gemmScaled[F Float](transA, transB bool, m, n, k int, alpha float64, a, b []F, beta float64, c []F) {
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	gemmStrided(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, n)
}

// gemmStrided is gemmScaled with explicit row strides (leading dimensions)
// lda, ldb, ldc of the stored (untransposed) matrices.
func gemmStrided[F Float](transA, transB bool, m, n, k int, alpha float64, a []F, lda int, b []F, ldb int, beta float64, c []F, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		for i := 0; i < m; i++ {
			row := c[i*ldc : i*ldc+n]
			if beta == 0 {
				clear(row)
			} else if beta != 1 {
				for j := range row {
					row[j] = F(float64(row[j]) * beta)
				}
			}
		}
		return
	}
	ta, tb := blas.NoTrans, blas.NoTrans
	if transA {
		ta = blas.Trans
	}
	if transB {
		tb = blas.Trans
	}
	var impl gonum.Implementation
	switch av := any(a).(type) {
	case []float64:
		impl.Dgemm(ta, tb, m, n, k, alpha, av, lda, any(b).([]float64), ldb, beta, any(c).([]float64), ldc)
	case []float32:
		impl.Sgemm(ta, tb, m, n, k, float32(alpha), av, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc)
	}
}

// checkTensor reports a tensor whose shape or data length is not want.
func checkTensor[F Float](op, name string, t *Tensor[F], want ir.Shape) error {
	if !t.Shape.Equal(want) {
		return fmt.Errorf("%s: %s has shape %v, want %v", op, name, t.Shape, want)
	}
	if len(t.Data) != want.Numel() {
		return fmt.Errorf("%s: %s %v holds %d values, want %d", op, name, t.Shape, len(t.Data), want.Numel())
	}
	return nil
}

// ---- conv2d ----

// convGeom is the geometry of one conv2d: x[N,C,H,W] * w[O,C,KH,KW] →
// y[N,O,OH,OW] with stride S and zero padding P on every side.
type convGeom struct {
	n, c, h, w, o, kh, kw, oh, ow, s, p int
}

// k is the reduction length C·KH·KW; pix the output pixels per channel.
func (g convGeom) k() int   { return g.c * g.kh * g.kw }
func (g convGeom) pix() int { return g.oh * g.ow }

// pointwise reports a 1×1, stride-1, unpadded conv, whose column matrix is
// the image itself.
func (g convGeom) pointwise() bool {
	return g.kh == 1 && g.kw == 1 && g.s == 1 && g.p == 0
}

func (g convGeom) xShape() ir.Shape { return ir.Shape{g.n, g.c, g.h, g.w} }
func (g convGeom) wShape() ir.Shape { return ir.Shape{g.o, g.c, g.kh, g.kw} }
func (g convGeom) yShape() ir.Shape { return ir.Shape{g.n, g.o, g.oh, g.ow} }

// newConvGeom derives the geometry from x's and w's shapes.
func newConvGeom(op string, a *ir.Attrs, xs, ws ir.Shape) (convGeom, error) {
	if len(xs) != 4 || len(ws) != 4 || xs[1] != ws[1] {
		return convGeom{}, fmt.Errorf("%s: want x[N,C,H,W] and w[O,C,KH,KW], got %v and %v", op, xs, ws)
	}
	if a.Stride < 1 || a.Pad < 0 {
		return convGeom{}, fmt.Errorf("%s: stride %d must be ≥ 1 and pad %d ≥ 0", op, a.Stride, a.Pad)
	}
	g := convGeom{n: xs[0], c: xs[1], h: xs[2], w: xs[3], o: ws[0], kh: ws[2], kw: ws[3], s: a.Stride, p: a.Pad}
	if g.h+2*g.p < g.kh || g.w+2*g.p < g.kw {
		return convGeom{}, fmt.Errorf("%s: kernel %dx%d larger than padded input %v (pad %d)", op, g.kh, g.kw, xs, g.p)
	}
	g.oh = (g.h+2*g.p-g.kh)/g.s + 1
	g.ow = (g.w+2*g.p-g.kw)/g.s + 1
	return g, nil
}

// validOut returns the output positions [lo, hi) along one axis whose input
// position o·s − p + off lies inside [0, in).
func validOut(off, s, p, in, out int) (lo, hi int) {
	first := p - off // o·s must be ≥ first
	if first > 0 {
		lo = (first + s - 1) / s
	}
	last := in - 1 + p - off // o·s must be ≤ last
	if last < 0 {
		return 0, 0
	}
	hi = min(last/s+1, out)
	lo = min(lo, hi)
	return lo, hi
}

// convColBudget caps the elements of one worker's column buffer; larger
// images are lowered a band of output rows at a time (tests force banding
// through the *Banded variants).
const convColBudget = 1 << 22

// rowBand is how many output rows one im2col band covers when a column
// buffer holds at most budget elements.
func (g convGeom) rowBand(budget int) int {
	return max(1, min(g.oh, budget/max(1, g.k()*g.ow)))
}

// im2col writes output rows [oy0, oy1) of image x[C,H,W] as
// col[C·KH·KW, (oy1−oy0)·OW]: row (c,i,j), column (oy−oy0, ox) holds
// x[c, oy·S−P+i, ox·S−P+j], or 0 in the padding.
func im2col[F Float](g convGeom, x, col []F, oy0, oy1 int) {
	hw, np := g.h*g.w, (oy1-oy0)*g.ow
	for c := 0; c < g.c; c++ {
		xc := x[c*hw : (c+1)*hw]
		for i := 0; i < g.kh; i++ {
			ylo, yhi := validOut(i, g.s, g.p, g.h, g.oh)
			ylo, yhi = min(max(ylo, oy0), oy1), max(min(yhi, oy1), oy0)
			ylo = min(ylo, yhi)
			for j := 0; j < g.kw; j++ {
				row := col[((c*g.kh+i)*g.kw+j)*np:][:np]
				xlo, xhi := validOut(j, g.s, g.p, g.w, g.ow)
				clear(row[:(ylo-oy0)*g.ow])
				clear(row[(yhi-oy0)*g.ow:])
				for oy := ylo; oy < yhi; oy++ {
					dst := row[(oy-oy0)*g.ow : (oy-oy0+1)*g.ow]
					src := xc[(oy*g.s-g.p+i)*g.w:][:g.w]
					clear(dst[:xlo])
					clear(dst[xhi:])
					if g.s == 1 {
						copy(dst[xlo:xhi], src[xlo-g.p+j:])
					} else {
						for ox := xlo; ox < xhi; ox++ {
							dst[ox] = src[ox*g.s-g.p+j]
						}
					}
				}
			}
		}
	}
}

// col2im is im2col's adjoint: it adds each entry of the band col (output
// rows [oy0, oy1)) into the image position it was read from; padding
// entries are discarded.
func col2im[F Float](g convGeom, col, x []F, oy0, oy1 int) {
	hw, np := g.h*g.w, (oy1-oy0)*g.ow
	for c := 0; c < g.c; c++ {
		xc := x[c*hw : (c+1)*hw]
		for i := 0; i < g.kh; i++ {
			ylo, yhi := validOut(i, g.s, g.p, g.h, g.oh)
			ylo, yhi = max(ylo, oy0), min(yhi, oy1)
			for j := 0; j < g.kw; j++ {
				row := col[((c*g.kh+i)*g.kw+j)*np:][:np]
				xlo, xhi := validOut(j, g.s, g.p, g.w, g.ow)
				for oy := ylo; oy < yhi; oy++ {
					src := row[(oy-oy0)*g.ow : (oy-oy0+1)*g.ow]
					dst := xc[(oy*g.s-g.p+i)*g.w:][:g.w]
					for ox := xlo; ox < xhi; ox++ {
						dst[ox*g.s-g.p+j] += src[ox]
					}
				}
			}
		}
	}
}

// conv2d is PyTorch's conv2d without bias: y[n,o] = Σ_c x[n,c] ⋆ w[o,c],
// computed per image (and band of output rows) as
// y[n] (O×OH·OW) = W (O×C·KH·KW) · im2col(x[n]).
func conv2d[F Float](a *ir.Attrs, x, w, y *Tensor[F]) error {
	return conv2dBanded(a, x, w, y, convColBudget)
}

// conv2dBanded is conv2d with column buffers of at most budget elements.
func conv2dBanded[F Float](a *ir.Attrs, x, w, y *Tensor[F], budget int) error {
	const op = "conv2d"
	g, err := newConvGeom(op, a, x.Shape, w.Shape)
	if err != nil {
		return err
	}
	if err := checkConvTensors(op, g, x, w, y, "x", "w", "y"); err != nil {
		return err
	}
	K, P, xn, yn, band := g.k(), g.pix(), g.c*g.h*g.w, g.o*g.pix(), g.rowBand(budget)
	kernParallel(g.n, kernWorkers(g.n), func(_, lo, hi int) {
		var col []F
		if !g.pointwise() {
			col = make([]F, K*band*g.ow)
		}
		for n := lo; n < hi; n++ {
			xi, yi := x.Data[n*xn:(n+1)*xn], y.Data[n*yn:(n+1)*yn]
			if g.pointwise() {
				gemmScaled(false, false, g.o, P, K, 1, w.Data, xi, 0, yi)
				continue
			}
			for oy0 := 0; oy0 < g.oh; oy0 += band {
				oy1 := min(oy0+band, g.oh)
				np := (oy1 - oy0) * g.ow
				im2col(g, xi, col, oy0, oy1)
				gemmStrided(false, false, g.o, np, K, 1, w.Data, K, col, np, 0, yi[oy0*g.ow:], P)
			}
		}
	})
	return nil
}

// conv2dGradInput is conv2d's adjoint in x: per image (and band of output
// rows) dcol = Wᵀ·dy[n], then col2im adds dcol into dx[n]. a.Shape is x's
// shape.
func conv2dGradInput[F Float](a *ir.Attrs, dy, w, dx *Tensor[F]) error {
	return conv2dGradInputBanded(a, dy, w, dx, convColBudget)
}

// conv2dGradInputBanded is conv2dGradInput with column buffers of at most budget elements.
func conv2dGradInputBanded[F Float](a *ir.Attrs, dy, w, dx *Tensor[F], budget int) error {
	const op = "conv2d_grad_input"
	g, err := newConvGeom(op, a, ir.Shape(a.Shape), w.Shape)
	if err != nil {
		return err
	}
	if err := checkConvTensors(op, g, dx, w, dy, "dx", "w", "dy"); err != nil {
		return err
	}
	K, P, xn, yn, band := g.k(), g.pix(), g.c*g.h*g.w, g.o*g.pix(), g.rowBand(budget)
	kernParallel(g.n, kernWorkers(g.n), func(_, lo, hi int) {
		var col []F
		if !g.pointwise() {
			col = make([]F, K*band*g.ow)
		}
		for n := lo; n < hi; n++ {
			dxi, dyi := dx.Data[n*xn:(n+1)*xn], dy.Data[n*yn:(n+1)*yn]
			if g.pointwise() {
				gemmScaled(true, false, K, P, g.o, 1, w.Data, dyi, 0, dxi)
				continue
			}
			clear(dxi)
			for oy0 := 0; oy0 < g.oh; oy0 += band {
				oy1 := min(oy0+band, g.oh)
				np := (oy1 - oy0) * g.ow
				gemmStrided(true, false, K, np, g.o, 1, w.Data, K, dyi[oy0*g.ow:], P, 0, col, np)
				col2im(g, col, dxi, oy0, oy1)
			}
		}
	})
	return nil
}

// conv2dGradWeight is conv2d's derivative in w: dw = Σ_n dy[n]·im2col(x[n])ᵀ.
// Each worker sums a contiguous run of images into its own partial; the
// partials are added in worker order. a.Shape is w's shape.
func conv2dGradWeight[F Float](a *ir.Attrs, x, dy, dw *Tensor[F]) error {
	return conv2dGradWeightBanded(a, x, dy, dw, convColBudget)
}

// conv2dGradWeightBanded is conv2dGradWeight with column buffers of at most budget elements.
func conv2dGradWeightBanded[F Float](a *ir.Attrs, x, dy, dw *Tensor[F], budget int) error {
	const op = "conv2d_grad_weight"
	g, err := newConvGeom(op, a, x.Shape, ir.Shape(a.Shape))
	if err != nil {
		return err
	}
	if err := checkConvTensors(op, g, x, dw, dy, "x", "dw", "dy"); err != nil {
		return err
	}
	K, P, xn, yn, band := g.k(), g.pix(), g.c*g.h*g.w, g.o*g.pix(), g.rowBand(budget)
	workers := kernWorkers(g.n)
	partial := make([][]F, workers)
	clear(dw.Data)
	kernParallel(g.n, workers, func(wk, lo, hi int) {
		acc := dw.Data
		if wk > 0 {
			acc = make([]F, len(dw.Data))
		}
		partial[wk] = acc
		var col []F
		if !g.pointwise() {
			col = make([]F, K*band*g.ow)
		}
		for n := lo; n < hi; n++ {
			xi, dyi := x.Data[n*xn:(n+1)*xn], dy.Data[n*yn:(n+1)*yn]
			if g.pointwise() {
				gemmScaled(false, true, g.o, K, P, 1, dyi, xi, 1, acc)
				continue
			}
			for oy0 := 0; oy0 < g.oh; oy0 += band {
				oy1 := min(oy0+band, g.oh)
				np := (oy1 - oy0) * g.ow
				im2col(g, xi, col, oy0, oy1)
				gemmStrided(false, true, g.o, K, np, 1, dyi[oy0*g.ow:], P, col, np, 1, acc, K)
			}
		}
	})
	for _, p := range partial[1:] {
		for i, v := range p {
			dw.Data[i] += v
		}
	}
	return nil
}

func checkConvTensors[F Float](op string, g convGeom, x, w, y *Tensor[F], xn, wn, yn string) error {
	if err := checkTensor(op, xn, x, g.xShape()); err != nil {
		return err
	}
	if err := checkTensor(op, wn, w, g.wShape()); err != nil {
		return err
	}
	return checkTensor(op, yn, y, g.yShape())
}

// ---- max pooling ----

// poolGeom is an unpadded pooling window geometry over x[N,C,H,W].
type poolGeom struct {
	planes, h, w, oh, ow, k, s int
}

// newPoolGeom checks x, the pooled-shape tensor (y, or dy for the gradient)
// and, for the gradient, dx (nil otherwise).
func newPoolGeom[F Float](op string, a *ir.Attrs, x, pooled, dx *Tensor[F], pooledName string) (poolGeom, error) {
	xs := x.Shape
	if len(xs) != 4 {
		return poolGeom{}, fmt.Errorf("%s: want x[N,C,H,W], got %v", op, xs)
	}
	if a.Kernel < 1 || a.Stride < 1 || a.Kernel > xs[2] || a.Kernel > xs[3] {
		return poolGeom{}, fmt.Errorf("%s: kernel %d stride %d invalid for %v", op, a.Kernel, a.Stride, xs)
	}
	g := poolGeom{planes: xs[0] * xs[1], h: xs[2], w: xs[3], k: a.Kernel, s: a.Stride}
	g.oh, g.ow = (g.h-g.k)/g.s+1, (g.w-g.k)/g.s+1
	if len(x.Data) != xs.Numel() {
		return poolGeom{}, fmt.Errorf("%s: x %v holds %d values", op, xs, len(x.Data))
	}
	if err := checkTensor(op, pooledName, pooled, ir.Shape{xs[0], xs[1], g.oh, g.ow}); err != nil {
		return poolGeom{}, err
	}
	if dx != nil {
		if err := checkTensor(op, "dx", dx, xs); err != nil {
			return poolGeom{}, err
		}
	}
	return g, nil
}

// poolArgmax returns the flat in-plane index of the maximum of the window at
// (oy, ox): the first maximum in row-major window order (ties keep the
// earlier element); a NaN wins and propagates, as in PyTorch.
func poolArgmax[F Float](g poolGeom, xp []F, oy, ox int) int {
	y0, x0 := oy*g.s, ox*g.s
	best := y0*g.w + x0
	bv := xp[best]
	for i := 0; i < g.k; i++ {
		row := (y0+i)*g.w + x0
		for j := 0; j < g.k; j++ {
			v := xp[row+j]
			if v > bv || (v != v && bv == bv) {
				best, bv = row+j, v
			}
		}
	}
	return best
}

// maxPool2d takes the maximum over Kernel×Kernel windows every Stride pixels
// (no padding).
func maxPool2d[F Float](a *ir.Attrs, x, y *Tensor[F]) error {
	g, err := newPoolGeom("max_pool2d", a, x, y, nil, "y")
	if err != nil {
		return err
	}
	hw, ohw := g.h*g.w, g.oh*g.ow
	kernParallel(g.planes, kernWorkers(g.planes), func(_, lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			xp, yp := x.Data[pl*hw:(pl+1)*hw], y.Data[pl*ohw:(pl+1)*ohw]
			for oy := 0; oy < g.oh; oy++ {
				for ox := 0; ox < g.ow; ox++ {
					yp[oy*g.ow+ox] = xp[poolArgmax(g, xp, oy, ox)]
				}
			}
		}
	})
	return nil
}

// maxPool2dGrad routes each output gradient to its window's argmax (the same
// element the forward picked); overlapping windows accumulate.
func maxPool2dGrad[F Float](a *ir.Attrs, x, dy, dx *Tensor[F]) error {
	g, err := newPoolGeom("max_pool2d_grad", a, x, dy, dx, "dy")
	if err != nil {
		return err
	}
	hw, ohw := g.h*g.w, g.oh*g.ow
	kernParallel(g.planes, kernWorkers(g.planes), func(_, lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			xp, dyp, dxp := x.Data[pl*hw:(pl+1)*hw], dy.Data[pl*ohw:(pl+1)*ohw], dx.Data[pl*hw:(pl+1)*hw]
			clear(dxp)
			for oy := 0; oy < g.oh; oy++ {
				for ox := 0; ox < g.ow; ox++ {
					dxp[poolArgmax(g, xp, oy, ox)] += dyp[oy*g.ow+ox]
				}
			}
		}
	})
	return nil
}

// ---- adaptive average pooling ----

// adaptiveBins returns PyTorch's adaptive pooling bins for in → out:
// bin i covers [floor(i·in/out), ceil((i+1)·in/out)).
func adaptiveBins(in, out int) (start, end []int) {
	start, end = make([]int, out), make([]int, out)
	for i := 0; i < out; i++ {
		start[i] = i * in / out
		end[i] = ((i+1)*in + out - 1) / out
	}
	return start, end
}

func adaptiveCheck[F Float](op string, xs ir.Shape, outHW []int, x, y *Tensor[F], xn, yn string) error {
	if len(xs) != 4 || len(outHW) != 2 || outHW[0] < 1 || outHW[1] < 1 || xs[2] < 1 || xs[3] < 1 {
		return fmt.Errorf("%s: want x[N,C,H,W] (H, W ≥ 1) and output [OH,OW], got %v and %v", op, xs, outHW)
	}
	if err := checkTensor(op, xn, x, xs); err != nil {
		return err
	}
	return checkTensor(op, yn, y, ir.Shape{xs[0], xs[1], outHW[0], outHW[1]})
}

// adaptiveAvgPool2d averages x over PyTorch's adaptive bins to [OH,OW]
// (a.Shape); bins may overlap (downsampling by a non-divisor) or repeat
// pixels (upsampling).
func adaptiveAvgPool2d[F Float](a *ir.Attrs, x, y *Tensor[F]) error {
	if err := adaptiveCheck("adaptive_avg_pool2d", x.Shape, a.Shape, x, y, "x", "y"); err != nil {
		return err
	}
	h, w, oh, ow := x.Shape[2], x.Shape[3], a.Shape[0], a.Shape[1]
	rs, re := adaptiveBins(h, oh)
	cs, ce := adaptiveBins(w, ow)
	planes := x.Shape[0] * x.Shape[1]
	kernParallel(planes, kernWorkers(planes), func(_, lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			xp, yp := x.Data[pl*h*w:(pl+1)*h*w], y.Data[pl*oh*ow:(pl+1)*oh*ow]
			for i := 0; i < oh; i++ {
				for j := 0; j < ow; j++ {
					var s float64
					for r := rs[i]; r < re[i]; r++ {
						for _, v := range xp[r*w+cs[j] : r*w+ce[j]] {
							s += float64(v)
						}
					}
					yp[i*ow+j] = F(s / float64((re[i]-rs[i])*(ce[j]-cs[j])))
				}
			}
		}
	})
	return nil
}

// adaptiveAvgPool2dGrad spreads each dy[i,j] evenly over its bin; pixels in
// several bins accumulate. a.Shape is x's full shape [N,C,H,W].
func adaptiveAvgPool2dGrad[F Float](a *ir.Attrs, dy, dx *Tensor[F]) error {
	const op = "adaptive_avg_pool2d_grad"
	if len(dy.Shape) != 4 {
		return fmt.Errorf("%s: dy %v is not [N,C,OH,OW]", op, dy.Shape)
	}
	xs := ir.Shape(a.Shape)
	if err := adaptiveCheck(op, xs, dy.Shape[2:], dx, dy, "dx", "dy"); err != nil {
		return err
	}
	h, w, oh, ow := xs[2], xs[3], dy.Shape[2], dy.Shape[3]
	rs, re := adaptiveBins(h, oh)
	cs, ce := adaptiveBins(w, ow)
	planes := xs[0] * xs[1]
	kernParallel(planes, kernWorkers(planes), func(_, lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			dxp, dyp := dx.Data[pl*h*w:(pl+1)*h*w], dy.Data[pl*oh*ow:(pl+1)*oh*ow]
			clear(dxp)
			for i := 0; i < oh; i++ {
				for j := 0; j < ow; j++ {
					g := F(float64(dyp[i*ow+j]) / float64((re[i]-rs[i])*(ce[j]-cs[j])))
					for r := rs[i]; r < re[i]; r++ {
						row := dxp[r*w+cs[j] : r*w+ce[j]]
						for c := range row {
							row[c] += g
						}
					}
				}
			}
		}
	})
	return nil
}
