package cpu

import (
	"testing"

	"hap/ir"
)

// pos is x² + ½: a positive operand for log, sqrt, rsqrt, reciprocal and
// fractional powers, whatever the parameter's sign.
func pos(b *ir.Builder, x ir.TensorID) ir.TensorID { return b.AddScalar(b.Mul(x, x), 0.5) }

// mask01 is a constant mask with zeros and non-zeros: relu of a random
// input.
func mask01(b *ir.Builder, shape ...int) ir.TensorID {
	return b.ReLU(b.Input("m", ir.Float64, shape...))
}

// arithGradCases covers arith.go's differentiable operators; the finite-
// difference test runs them with gradCases.
var arithGradCases = []gradCase{
	{"add/broadcast-row", func(b *ir.Builder) ir.TensorID { return b.Add(p(b, "a", 3, 4), p(b, "b", 4)) }},
	{"add/broadcast-both", func(b *ir.Builder) ir.TensorID { return b.Add(p(b, "a", 3, 1), p(b, "b", 2, 1, 4)) }},
	{"mul/broadcast", func(b *ir.Builder) ir.TensorID { return b.Mul(p(b, "a", 2, 3, 4), p(b, "b", 3, 1)) }},
	{"sub", func(b *ir.Builder) ir.TensorID { return b.Sub(p(b, "a", 3, 4), p(b, "b", 3, 4)) }},
	{"sub/broadcast", func(b *ir.Builder) ir.TensorID { return b.Sub(p(b, "a", 3, 1), p(b, "b", 3, 4)) }},
	{"div", func(b *ir.Builder) ir.TensorID { return b.Div(p(b, "a", 3, 4), pos(b, p(b, "b", 3, 4))) }},
	{"div/broadcast", func(b *ir.Builder) ir.TensorID { return b.Div(p(b, "a", 2, 3, 4), pos(b, p(b, "b", 4))) }},
	{"neg", func(b *ir.Builder) ir.TensorID { return b.Neg(p(b, "x", 3, 4)) }},
	{"exp", func(b *ir.Builder) ir.TensorID { return b.Exp(p(b, "x", 3, 4)) }},
	{"log", func(b *ir.Builder) ir.TensorID { return b.Log(pos(b, p(b, "x", 3, 4))) }},
	{"sqrt", func(b *ir.Builder) ir.TensorID { return b.Sqrt(pos(b, p(b, "x", 3, 4))) }},
	{"rsqrt", func(b *ir.Builder) ir.TensorID { return b.Rsqrt(pos(b, p(b, "x", 3, 4))) }},
	{"reciprocal", func(b *ir.Builder) ir.TensorID { return b.Reciprocal(pos(b, p(b, "x", 3, 4))) }},
	{"pow_scalar/square", func(b *ir.Builder) ir.TensorID { return b.PowScalar(p(b, "x", 3, 4), 2) }},
	{"pow_scalar/cube", func(b *ir.Builder) ir.TensorID { return b.PowScalar(p(b, "x", 3, 4), 3) }},
	{"pow_scalar/fraction", func(b *ir.Builder) ir.TensorID { return b.PowScalar(pos(b, p(b, "x", 3, 4)), -1.5) }},
	{"pow_scalar/zero", func(b *ir.Builder) ir.TensorID {
		x := p(b, "x", 3, 4)
		return b.Add(b.PowScalar(x, 0), x)
	}},
	{"add_scalar", func(b *ir.Builder) ir.TensorID { return b.AddScalar(p(b, "x", 3, 4), 0.25) }},
	{"mul_scalar", func(b *ir.Builder) ir.TensorID { return b.MulScalar(p(b, "x", 3, 4), -1.75) }},
	{"masked_fill", func(b *ir.Builder) ir.TensorID { return b.MaskedFill(p(b, "x", 3, 4), mask01(b, 3, 4), -2) }},
	{"masked_fill/broadcast", func(b *ir.Builder) ir.TensorID { return b.MaskedFill(p(b, "x", 2, 3, 4), mask01(b, 3, 1), 0.5) }},
	{"mean", func(b *ir.Builder) ir.TensorID { return b.Mean(p(b, "x", 2, 3, 4), false, 0, 2) }},
	{"mean/keep", func(b *ir.Builder) ir.TensorID { return b.Mean(p(b, "x", 2, 3, 4), true, 2) }},
	{"var", func(b *ir.Builder) ir.TensorID { return b.Var(p(b, "x", 2, 3, 4), 1, false, 1) }},
	{"var/population-keep", func(b *ir.Builder) ir.TensorID { return b.Var(p(b, "x", 2, 3, 4), 0, true, 0, 2) }},
	{"amax", func(b *ir.Builder) ir.TensorID { return b.Amax(p(b, "x", 2, 3, 4), false, 1) }},
	{"amax/keep-two", func(b *ir.Builder) ir.TensorID { return b.Amax(p(b, "x", 2, 3, 4), true, 0, 2) }},
	{"rms_norm", func(b *ir.Builder) ir.TensorID { return b.RMSNorm(p(b, "x", 2, 3, 6), p(b, "w", 6), 1e-6) }},
	{"layer_norm_bare", func(b *ir.Builder) ir.TensorID { return b.LayerNormBare(p(b, "x", 2, 3, 6), 1e-5) }},
	// RMSNorm written out as LLaMA's module does, the pattern the importer
	// fuses: x · rsqrt(mean(x², -1, keepdim) + eps) · w.
	{"rms_norm/unfused", func(b *ir.Builder) ir.TensorID {
		x := p(b, "x", 2, 3, 6)
		r := b.Rsqrt(b.AddScalar(b.Mean(b.PowScalar(x, 2), true, 2), 1e-6))
		return b.Mul(b.Mul(x, r), p(b, "w", 6))
	}},
}

// The broadcasting kernels agree with the same-shape ones on operands
// expanded by hand, in both element types.
func TestBroadcastMatchesExpanded(t *testing.T) {
	a := FromFloat64[float32](ir.Shape{3, 1}, []float64{1, 2, 3})
	b := FromFloat64[float32](ir.Shape{2, 1, 4}, []float64{1, 2, 3, 4, 5, 6, 7, 8})
	z := NewTensor[float32](ir.Shape{2, 3, 4}, ir.Float32)
	op := &ir.Op{Kind: ir.OpSub}
	if err := Exec(nil, op, []*Tensor[float32]{a, b}, []*Tensor[float32]{z}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		for j := 0; j < 3; j++ {
			for k := 0; k < 4; k++ {
				want := float32(j+1) - float32(i*4+k+1)
				if got := z.Data[i*12+j*4+k]; got != want {
					t.Errorf("[%d,%d,%d] = %v, want %v", i, j, k, got, want)
				}
			}
		}
	}
}

// Reductions on a small hand-checked tensor: mean over a reduced dim of a
// device's shard divides by the unsharded count, var honours its
// correction, amax shares its gradient between tied maxima.
func TestKeepReductions(t *testing.T) {
	x := FromFloat64[float64](ir.Shape{2, 3}, []float64{1, 5, 3, 4, 4, 1})
	run := func(kind ir.OpKind, a ir.Attrs, outShape ir.Shape, ins ...*Tensor[float64]) []float64 {
		t.Helper()
		y := NewTensor[float64](outShape, ir.Float64)
		if err := Exec(nil, &ir.Op{Kind: kind, Attrs: a}, ins, []*Tensor[float64]{y}); err != nil {
			t.Fatal(err)
		}
		return y.Data
	}
	eq := func(what string, got, want []float64) {
		t.Helper()
		for i := range want {
			if d := got[i] - want[i]; d > 1e-12 || d < -1e-12 {
				t.Errorf("%s = %v, want %v", what, got, want)
				return
			}
		}
	}
	eq("mean", run(ir.OpMean, ir.Attrs{Axes: []int{1}}, ir.Shape{2}, x), []float64{3, 3})
	eq("mean of a shard", run(ir.OpMean, ir.Attrs{Axes: []int{1}, Shape: []int{2, 6}}, ir.Shape{2}, x), []float64{1.5, 1.5})
	eq("var", run(ir.OpVar, ir.Attrs{Axes: []int{1}, Correction: 1}, ir.Shape{2}, x), []float64{4, 3})
	eq("var population", run(ir.OpVar, ir.Attrs{Axes: []int{1}}, ir.Shape{2}, x), []float64{8.0 / 3, 2})
	y := run(ir.OpAmax, ir.Attrs{Axes: []int{1}, KeepDims: true}, ir.Shape{2, 1}, x)
	eq("amax", y, []float64{5, 4})
	dy := FromFloat64[float64](ir.Shape{2, 1}, []float64{1, 1})
	eq("amax_grad", run(ir.OpAmaxGrad, ir.Attrs{Axes: []int{1}, KeepDims: true}, ir.Shape{2, 3}, x, FromFloat64[float64](ir.Shape{2, 1}, y), dy),
		[]float64{0, 1, 0, 0.5, 0.5, 0})
}
