package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"hap/ir"
)

// Tolerances shared by conv_test.go, attention_test.go and moe_test.go.
const (
	// ktTolRef bounds the norm-wise relative difference between a float64
	// kernel and its naive direct-loop reference: only the summation order
	// differs, so they agree to a few ulps of the largest term.
	ktTolRef = 1e-12
	// ktStep is the central finite-difference step.
	ktStep = 1e-6
	// ktTolFD bounds the norm-wise relative difference between an analytic
	// gradient and central finite differences of the forward kernel. The
	// truncation error is O(h²) ≈ 1e-12 and the rounding error about
	// ε·|L|/h ≈ 1e-10·|L|, so 1e-6 leaves a wide margin.
	ktTolFD = 1e-6
	// ktTol32 bounds the norm-wise relative difference between float32 and
	// float64 runs of the same kernel on the same inputs: float32 rounding
	// (ε ≈ 6e-8) grown by sums of up to a few hundred terms.
	ktTol32 = 1e-4
)

// ---- shared test helpers ----

func ktRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// ktRand returns a float64 tensor with values uniform in [-1, 1).
func ktRand(rng *rand.Rand, shape ...int) *Tensor[float64] {
	t := NewTensor[float64](ir.Shape(shape), ir.Float64)
	for i := range t.Data {
		t.Data[i] = 2*rng.Float64() - 1
	}
	return t
}

// ktConv converts a float64 tensor to float type F.
func ktConv[F Float](t *Tensor[float64]) *Tensor[F] { return FromFloat64[F](t.Shape, t.Data) }

// ktZeros allocates a zeroed float tensor.
func ktZeros[F Float](shape ir.Shape) *Tensor[F] { return NewTensor[F](shape, ir.Float64) }

// ktRelErr is max|got−want| / max|want| (absolute when want is all zero).
func ktRelErr(got, want []float64) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var diff, scale float64
	for i := range got {
		d := math.Abs(got[i] - want[i])
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		diff = max(diff, d)
		scale = max(scale, math.Abs(want[i]))
	}
	if scale == 0 {
		return diff
	}
	return diff / scale
}

func ktExpectClose(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if e := ktRelErr(got, want); !(e <= tol) {
		t.Errorf("%s: relative error %.3g > %.0g", what, e, tol)
	}
}

// ktDot is Σ a⊙b.
func ktDot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// ktGradCheck compares analytic gradients of the loss L = Σ fwd(ins)⊙r with
// central finite differences. grads[i] is the analytic gradient of input i
// (nil to skip it); fwd must not modify its inputs.
func ktGradCheck(t *testing.T, name string, ins []*Tensor[float64], r []float64, grads []*Tensor[float64], fwd func(ins []*Tensor[float64]) (*Tensor[float64], error)) {
	t.Helper()
	loss := func() float64 {
		y, err := fwd(ins)
		if err != nil {
			t.Fatalf("%s: forward: %v", name, err)
		}
		return ktDot(y.Data, r)
	}
	for i, g := range grads {
		if g == nil {
			continue
		}
		fd := make([]float64, len(ins[i].Data))
		for j := range ins[i].Data {
			v := ins[i].Data[j]
			ins[i].Data[j] = v + ktStep
			lp := loss()
			ins[i].Data[j] = v - ktStep
			lm := loss()
			ins[i].Data[j] = v
			fd[j] = (lp - lm) / (2 * ktStep)
		}
		ktExpectClose(t, fmt.Sprintf("%s: d/d(input %d) vs finite differences", name, i), g.Data, fd, ktTolFD)
	}
}

// ---- conv2d ----

type ktConvCase struct {
	n, c, h, w, o, kh, kw, s, p int
}

func (c ktConvCase) String() string {
	return fmt.Sprintf("x%dx%dx%dx%d_w%dx%dx%dx%d_s%d_p%d", c.n, c.c, c.h, c.w, c.o, c.c, c.kh, c.kw, c.s, c.p)
}

func (c ktConvCase) attrs() *ir.Attrs { return &ir.Attrs{Stride: c.s, Pad: c.p} }
func (c ktConvCase) xs() ir.Shape     { return ir.Shape{c.n, c.c, c.h, c.w} }
func (c ktConvCase) ws() ir.Shape     { return ir.Shape{c.o, c.c, c.kh, c.kw} }
func (c ktConvCase) ys() ir.Shape {
	return ir.Shape{c.n, c.o, (c.h+2*c.p-c.kh)/c.s + 1, (c.w+2*c.p-c.kw)/c.s + 1}
}

var ktConvCases = []ktConvCase{
	{3, 2, 7, 6, 4, 3, 3, 1, 1}, // same-size 3×3, batch 3, non-square image
	{3, 3, 9, 8, 5, 3, 2, 2, 1}, // stride 2, padding 1, non-square kernel
	{2, 4, 5, 5, 3, 1, 1, 1, 0}, // pointwise (im2col skipped)
	{2, 3, 5, 6, 2, 1, 1, 2, 0}, // 1×1 with stride 2 (im2col path)
	{1, 2, 6, 7, 3, 5, 3, 3, 2}, // stride 3, wide padding
	{2, 1, 4, 5, 2, 2, 2, 2, 0}, // stride 2, border column dropped
	{1, 2, 3, 3, 2, 3, 3, 1, 2}, // padding wider than needed: windows fully in the pad
	{2, 2, 5, 5, 2, 5, 5, 1, 0}, // kernel as large as the image
	{1, 1, 2, 9, 1, 1, 4, 2, 1}, // 1-row kernel on a flat image
}

// ktConvRef is conv2d by direct loops.
func ktConvRef(c ktConvCase, x, w *Tensor[float64]) *Tensor[float64] {
	ys := c.ys()
	y := ktZeros[float64](ys)
	for n := 0; n < c.n; n++ {
		for o := 0; o < c.o; o++ {
			for oy := 0; oy < ys[2]; oy++ {
				for ox := 0; ox < ys[3]; ox++ {
					var s float64
					for ch := 0; ch < c.c; ch++ {
						for i := 0; i < c.kh; i++ {
							for j := 0; j < c.kw; j++ {
								iy, ix := oy*c.s-c.p+i, ox*c.s-c.p+j
								if iy < 0 || iy >= c.h || ix < 0 || ix >= c.w {
									continue
								}
								s += x.Data[((n*c.c+ch)*c.h+iy)*c.w+ix] * w.Data[((o*c.c+ch)*c.kh+i)*c.kw+j]
							}
						}
					}
					y.Data[((n*c.o+o)*ys[2]+oy)*ys[3]+ox] = s
				}
			}
		}
	}
	return y
}

// ktConvRun runs conv2d and both gradients (with dy = r) in type F.
func ktConvRun[F Float](t *testing.T, c ktConvCase, x64, w64, r64 *Tensor[float64]) (y, dx, dw *Tensor[F]) {
	t.Helper()
	return ktConvRunBanded[F](t, c, x64, w64, r64, convColBudget)
}

// ktConvRunBanded is ktConvRun with column buffers of at most budget elements.
func ktConvRunBanded[F Float](t *testing.T, c ktConvCase, x64, w64, r64 *Tensor[float64], budget int) (y, dx, dw *Tensor[F]) {
	t.Helper()
	x, w, r := ktConv[F](x64), ktConv[F](w64), ktConv[F](r64)
	y, dx, dw = ktZeros[F](c.ys()), ktZeros[F](c.xs()), ktZeros[F](c.ws())
	if err := conv2dBanded(c.attrs(), x, w, y, budget); err != nil {
		t.Fatal(err)
	}
	if err := conv2dGradInputBanded(&ir.Attrs{Stride: c.s, Pad: c.p, Shape: c.xs()}, r, w, dx, budget); err != nil {
		t.Fatal(err)
	}
	if err := conv2dGradWeightBanded(&ir.Attrs{Stride: c.s, Pad: c.p, Shape: c.ws()}, x, r, dw, budget); err != nil {
		t.Fatal(err)
	}
	return y, dx, dw
}

func TestConv2D(t *testing.T) {
	for i, c := range ktConvCases {
		t.Run(c.String(), func(t *testing.T) {
			rng := ktRNG(uint64(i + 1))
			x, w, r := ktRand(rng, c.xs()...), ktRand(rng, c.ws()...), ktRand(rng, c.ys()...)
			y, dx, dw := ktConvRun[float64](t, c, x, w, r)
			ktExpectClose(t, "conv2d vs direct loops", y.Data, ktConvRef(c, x, w).Data, ktTolRef)

			ktGradCheck(t, "conv2d", []*Tensor[float64]{x, w}, r.Data, []*Tensor[float64]{dx, dw},
				func(in []*Tensor[float64]) (*Tensor[float64], error) {
					y := ktZeros[float64](c.ys())
					return y, conv2d(c.attrs(), in[0], in[1], y)
				})

			y32, dx32, dw32 := ktConvRun[float32](t, c, x, w, r)
			ktExpectClose(t, "conv2d float32", y32.Float64s(), y.Data, ktTol32)
			ktExpectClose(t, "conv2d_grad_input float32", dx32.Float64s(), dx.Data, ktTol32)
			ktExpectClose(t, "conv2d_grad_weight float32", dw32.Float64s(), dw.Data, ktTol32)
		})
	}
}

// Lowering an image in bands of output rows gives the same results as
// lowering it whole.
func TestConv2DBanded(t *testing.T) {
	for i, c := range ktConvCases {
		rng := ktRNG(uint64(50 + i))
		x, w, r := ktRand(rng, c.xs()...), ktRand(rng, c.ws()...), ktRand(rng, c.ys()...)
		y0, dx0, dw0 := ktConvRun[float64](t, c, x, w, r)
		for _, rows := range []int{1, 2, 3} {
			budget := rows * c.c * c.kh * c.kw * c.ys()[3]
			y, dx, dw := ktConvRunBanded[float64](t, c, x, w, r, budget)
			what := fmt.Sprintf("%v, bands of %d rows", c, rows)
			ktExpectClose(t, what+": y", y.Data, y0.Data, ktTolRef)
			ktExpectClose(t, what+": dx", dx.Data, dx0.Data, ktTolRef)
			ktExpectClose(t, what+": dw", dw.Data, dw0.Data, ktTolRef)
		}
	}
}

// Outputs that arrive dirty are still overwritten, not accumulated into.
func TestConv2DOverwritesOutputs(t *testing.T) {
	c := ktConvCases[1]
	rng := ktRNG(99)
	x, w, r := ktRand(rng, c.xs()...), ktRand(rng, c.ws()...), ktRand(rng, c.ys()...)
	y0, dx0, dw0 := ktConvRun[float64](t, c, x, w, r)
	y, dx, dw := ktRand(rng, c.ys()...), ktRand(rng, c.xs()...), ktRand(rng, c.ws()...)
	if err := conv2d(c.attrs(), x, w, y); err != nil {
		t.Fatal(err)
	}
	if err := conv2dGradInput(&ir.Attrs{Stride: c.s, Pad: c.p, Shape: c.xs()}, r, w, dx); err != nil {
		t.Fatal(err)
	}
	if err := conv2dGradWeight(&ir.Attrs{Stride: c.s, Pad: c.p, Shape: c.ws()}, x, r, dw); err != nil {
		t.Fatal(err)
	}
	ktExpectClose(t, "y", y.Data, y0.Data, 0)
	ktExpectClose(t, "dx", dx.Data, dx0.Data, 0)
	ktExpectClose(t, "dw", dw.Data, dw0.Data, 0)
}

func TestConv2DShapeErrors(t *testing.T) {
	c := ktConvCases[0]
	x, w := ktZeros[float64](c.xs()), ktZeros[float64](c.ws())
	bad := ktZeros[float64](ir.Shape{c.n, c.o, 1, 1})
	if err := conv2d(c.attrs(), x, w, bad); err == nil {
		t.Error("conv2d accepted a wrongly shaped output")
	}
	if err := conv2d(c.attrs(), ktZeros[float64](ir.Shape{c.n, c.c + 1, c.h, c.w}), w, ktZeros[float64](c.ys())); err == nil {
		t.Error("conv2d accepted mismatched channels")
	}
	if err := conv2dGradInput(&ir.Attrs{Stride: 1, Pad: 1, Shape: []int{1, 2}}, ktZeros[float64](c.ys()), w, x); err == nil {
		t.Error("conv2d_grad_input accepted a bad a.Shape")
	}
	if err := conv2d(&ir.Attrs{Stride: 0}, x, w, ktZeros[float64](c.ys())); err == nil {
		t.Error("conv2d accepted stride 0")
	}
}

// ---- max pooling ----

type ktPoolCase struct{ n, c, h, w, k, s int }

func (c ktPoolCase) xs() ir.Shape { return ir.Shape{c.n, c.c, c.h, c.w} }
func (c ktPoolCase) ys() ir.Shape {
	return ir.Shape{c.n, c.c, (c.h-c.k)/c.s + 1, (c.w-c.k)/c.s + 1}
}

var ktPoolCases = []ktPoolCase{
	{3, 2, 6, 7, 2, 2}, // VGG-style 2×2/2, odd width drops a column
	{2, 3, 7, 5, 3, 2}, // overlapping windows
	{1, 2, 5, 5, 3, 1}, // stride 1, heavy overlap
	{2, 1, 4, 4, 4, 4}, // global
	{1, 1, 5, 9, 2, 3}, // stride larger than the kernel: pixels skipped
}

func ktMaxPoolRef(c ktPoolCase, x *Tensor[float64]) *Tensor[float64] {
	ys := c.ys()
	y := ktZeros[float64](ys)
	for pl := 0; pl < c.n*c.c; pl++ {
		for oy := 0; oy < ys[2]; oy++ {
			for ox := 0; ox < ys[3]; ox++ {
				m := math.Inf(-1)
				for i := 0; i < c.k; i++ {
					for j := 0; j < c.k; j++ {
						m = max(m, x.Data[(pl*c.h+oy*c.s+i)*c.w+ox*c.s+j])
					}
				}
				y.Data[(pl*ys[2]+oy)*ys[3]+ox] = m
			}
		}
	}
	return y
}

func ktPoolRun[F Float](t *testing.T, c ktPoolCase, x64, r64 *Tensor[float64]) (y, dx *Tensor[F]) {
	t.Helper()
	a := &ir.Attrs{Kernel: c.k, Stride: c.s}
	x, r := ktConv[F](x64), ktConv[F](r64)
	y, dx = ktZeros[F](c.ys()), ktZeros[F](c.xs())
	if err := maxPool2d(a, x, y); err != nil {
		t.Fatal(err)
	}
	if err := maxPool2dGrad(a, x, r, dx); err != nil {
		t.Fatal(err)
	}
	return y, dx
}

func TestMaxPool2D(t *testing.T) {
	for i, c := range ktPoolCases {
		t.Run(fmt.Sprintf("%v_k%d_s%d", c.xs(), c.k, c.s), func(t *testing.T) {
			rng := ktRNG(uint64(100 + i))
			x, r := ktRand(rng, c.xs()...), ktRand(rng, c.ys()...)
			y, dx := ktPoolRun[float64](t, c, x, r)
			ktExpectClose(t, "max_pool2d vs direct loops", y.Data, ktMaxPoolRef(c, x).Data, 0)
			a := &ir.Attrs{Kernel: c.k, Stride: c.s}
			ktGradCheck(t, "max_pool2d", []*Tensor[float64]{x}, r.Data, []*Tensor[float64]{dx},
				func(in []*Tensor[float64]) (*Tensor[float64], error) {
					y := ktZeros[float64](c.ys())
					return y, maxPool2d(a, in[0], y)
				})
			y32, dx32 := ktPoolRun[float32](t, c, x, r)
			ktExpectClose(t, "max_pool2d float32", y32.Float64s(), y.Data, ktTol32)
			ktExpectClose(t, "max_pool2d_grad float32", dx32.Float64s(), dx.Data, ktTol32)
		})
	}
}

// On ties the gradient goes to the first maximum in row-major window order.
func TestMaxPool2DTies(t *testing.T) {
	x := FromFloat64[float64](ir.Shape{1, 1, 3, 4}, []float64{
		1, 5, 5, 2,
		5, 0, 3, 3,
		3, 3, 3, 3,
	})
	a := &ir.Attrs{Kernel: 2, Stride: 1}
	y, dx := ktZeros[float64](ir.Shape{1, 1, 2, 3}), ktZeros[float64](x.Shape)
	if err := maxPool2d(a, x, y); err != nil {
		t.Fatal(err)
	}
	ktExpectClose(t, "y", y.Data, []float64{5, 5, 5, 5, 3, 3}, 0)
	dy := FromFloat64[float64](y.Shape, []float64{1, 10, 100, 1000, 10000, 100000})
	if err := maxPool2dGrad(a, x, dy, dx); err != nil {
		t.Fatal(err)
	}
	// Windows: (0,0)→x[0,1]; (0,1)→x[0,1]; (0,2)→x[0,2]; (1,0)→x[1,0];
	// (1,1)→x[1,2]; (1,2)→x[1,2].
	want := []float64{
		0, 11, 100, 0,
		1000, 0, 110000, 0,
		0, 0, 0, 0,
	}
	ktExpectClose(t, "dx", dx.Data, want, 0)
}

// ---- adaptive average pooling ----

type ktAdaptCase struct{ n, c, h, w, oh, ow int }

func (c ktAdaptCase) xs() ir.Shape { return ir.Shape{c.n, c.c, c.h, c.w} }
func (c ktAdaptCase) ys() ir.Shape { return ir.Shape{c.n, c.c, c.oh, c.ow} }

var ktAdaptCases = []ktAdaptCase{
	{2, 3, 1, 1, 7, 7}, // upsampling 1×1 → 7×7 (VGG19 on CIFAR)
	{2, 2, 7, 5, 3, 2}, // downsampling by non-divisors: overlapping bins
	{1, 2, 4, 6, 4, 6}, // identity
	{3, 1, 5, 3, 7, 4}, // upsampling by non-multiples
	{2, 2, 8, 8, 1, 1}, // global average
	{1, 1, 6, 2, 3, 5}, // down in rows, up in columns
}

// ktAdaptRef is adaptive average pooling with bins computed in floating
// point: [floor(i·H/OH), ceil((i+1)·H/OH)).
func ktAdaptRef(c ktAdaptCase, x *Tensor[float64]) *Tensor[float64] {
	y := ktZeros[float64](c.ys())
	bin := func(i, in, out int) (int, int) {
		return int(math.Floor(float64(i*in) / float64(out))), int(math.Ceil(float64((i+1)*in) / float64(out)))
	}
	for pl := 0; pl < c.n*c.c; pl++ {
		for i := 0; i < c.oh; i++ {
			r0, r1 := bin(i, c.h, c.oh)
			for j := 0; j < c.ow; j++ {
				c0, c1 := bin(j, c.w, c.ow)
				var s float64
				for r := r0; r < r1; r++ {
					for q := c0; q < c1; q++ {
						s += x.Data[(pl*c.h+r)*c.w+q]
					}
				}
				y.Data[(pl*c.oh+i)*c.ow+j] = s / float64((r1-r0)*(c1-c0))
			}
		}
	}
	return y
}

func ktAdaptRun[F Float](t *testing.T, c ktAdaptCase, x64, r64 *Tensor[float64]) (y, dx *Tensor[F]) {
	t.Helper()
	x, r := ktConv[F](x64), ktConv[F](r64)
	y, dx = ktZeros[F](c.ys()), ktZeros[F](c.xs())
	if err := adaptiveAvgPool2d(&ir.Attrs{Shape: []int{c.oh, c.ow}}, x, y); err != nil {
		t.Fatal(err)
	}
	if err := adaptiveAvgPool2dGrad(&ir.Attrs{Shape: c.xs()}, r, dx); err != nil {
		t.Fatal(err)
	}
	return y, dx
}

func TestAdaptiveBins(t *testing.T) {
	s, e := adaptiveBins(5, 3)
	ktExpectClose(t, "starts 5→3", []float64{float64(s[0]), float64(s[1]), float64(s[2])}, []float64{0, 1, 3}, 0)
	ktExpectClose(t, "ends 5→3", []float64{float64(e[0]), float64(e[1]), float64(e[2])}, []float64{2, 4, 5}, 0)
	s, e = adaptiveBins(2, 3) // upsampling: bins [0,1), [0,2), [1,2)
	ktExpectClose(t, "starts 2→3", []float64{float64(s[0]), float64(s[1]), float64(s[2])}, []float64{0, 0, 1}, 0)
	ktExpectClose(t, "ends 2→3", []float64{float64(e[0]), float64(e[1]), float64(e[2])}, []float64{1, 2, 2}, 0)
}

func TestAdaptiveAvgPool2D(t *testing.T) {
	for i, c := range ktAdaptCases {
		t.Run(fmt.Sprintf("%v_to_%dx%d", c.xs(), c.oh, c.ow), func(t *testing.T) {
			rng := ktRNG(uint64(200 + i))
			x, r := ktRand(rng, c.xs()...), ktRand(rng, c.ys()...)
			y, dx := ktAdaptRun[float64](t, c, x, r)
			ktExpectClose(t, "adaptive_avg_pool2d vs direct loops", y.Data, ktAdaptRef(c, x).Data, ktTolRef)
			ktGradCheck(t, "adaptive_avg_pool2d", []*Tensor[float64]{x}, r.Data, []*Tensor[float64]{dx},
				func(in []*Tensor[float64]) (*Tensor[float64], error) {
					y := ktZeros[float64](c.ys())
					return y, adaptiveAvgPool2d(&ir.Attrs{Shape: []int{c.oh, c.ow}}, in[0], y)
				})
			y32, dx32 := ktAdaptRun[float32](t, c, x, r)
			ktExpectClose(t, "adaptive_avg_pool2d float32", y32.Float64s(), y.Data, ktTol32)
			ktExpectClose(t, "adaptive_avg_pool2d_grad float32", dx32.Float64s(), dx.Data, ktTol32)
		})
	}
}

// ---- speed ----

// BenchmarkConv2D: go test ./cpu -run '^$' -bench Conv2D
func BenchmarkConv2D(b *testing.B) {
	c := ktConvCase{32, 64, 32, 32, 64, 3, 3, 1, 1}
	rng := ktRNG(7)
	x, w := ktConv[float32](ktRand(rng, c.xs()...)), ktConv[float32](ktRand(rng, c.ws()...))
	y := ktZeros[float32](c.ys())
	flops := 2 * float64(c.ys().Numel()) * float64(c.c*c.kh*c.kw)
	b.ResetTimer()
	for b.Loop() {
		if err := conv2d(c.attrs(), x, w, y); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkConv2DGrads(b *testing.B) {
	c := ktConvCase{32, 64, 32, 32, 64, 3, 3, 1, 1}
	rng := ktRNG(8)
	x, w := ktConv[float32](ktRand(rng, c.xs()...)), ktConv[float32](ktRand(rng, c.ws()...))
	dy := ktConv[float32](ktRand(rng, c.ys()...))
	dx, dw := ktZeros[float32](c.xs()), ktZeros[float32](c.ws())
	flops := 4 * float64(c.ys().Numel()) * float64(c.c*c.kh*c.kw)
	b.ResetTimer()
	for b.Loop() {
		if err := conv2dGradInput(&ir.Attrs{Stride: c.s, Pad: c.p, Shape: c.xs()}, dy, w, dx); err != nil {
			b.Fatal(err)
		}
		if err := conv2dGradWeight(&ir.Attrs{Stride: c.s, Pad: c.p, Shape: c.ws()}, x, dy, dw); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
