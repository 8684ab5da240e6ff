package cpu

import (
	"math"
	"testing"

	"hap/ir"
)

// swiglu and swiglu_grad against values worked out by hand from σ(0) = ½,
// σ(2) = 1/(1+e⁻²) and σ(−1) = 1/(1+e), in both float types.
func swigluCheck[F Float](t *testing.T, dt ir.DType, tol float64) {
	t.Helper()
	gate := FromFloat64[F](ir.Shape{3}, []float64{0, 2, -1})
	up := FromFloat64[F](ir.Shape{3}, []float64{5, 3, -4})
	dy := FromFloat64[F](ir.Shape{3}, []float64{1, 0.5, 2})
	s2, sm1 := 1/(1+math.Exp(-2)), 1/(1+math.E)
	wantY := []float64{0, 2 * s2 * 3, -1 * sm1 * -4}
	// dgate = dy·up·σ(1 + g(1 − σ)), dup = dy·g·σ.
	wantDg := []float64{1 * 5 * 0.5, 0.5 * 3 * s2 * (1 + 2*(1-s2)), 2 * -4 * sm1 * (1 - (1 - sm1))}
	wantDu := []float64{0, 0.5 * 2 * s2, 2 * -1 * sm1}
	y := NewTensor[F](ir.Shape{3}, dt)
	if err := Exec(nil, &ir.Op{Kind: ir.OpSwiGLU}, []*Tensor[F]{gate, up}, []*Tensor[F]{y}); err != nil {
		t.Fatal(err)
	}
	dg, du := NewTensor[F](ir.Shape{3}, dt), NewTensor[F](ir.Shape{3}, dt)
	if err := Exec(nil, &ir.Op{Kind: ir.OpSwiGLUGrad}, []*Tensor[F]{gate, up, dy}, []*Tensor[F]{dg, du}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		got  *Tensor[F]
		want []float64
	}{{"swiglu", y, wantY}, {"dgate", dg, wantDg}, {"dup", du, wantDu}} {
		for i, w := range c.want {
			if g := float64(c.got.Data[i]); math.Abs(g-w) > tol*(1+math.Abs(w)) {
				t.Errorf("%s %s[%d] = %.17g, want %.17g", dt, c.name, i, g, w)
			}
		}
	}
	// Operands of other lengths are an error, not a read past the end.
	short := NewTensor[F](ir.Shape{2}, dt)
	if err := Exec(nil, &ir.Op{Kind: ir.OpSwiGLUGrad}, []*Tensor[F]{gate, up, short}, []*Tensor[F]{dg, du}); err == nil {
		t.Errorf("%s swiglu_grad with a short dy: no error", dt)
	}
}

func TestSwiGLUValues(t *testing.T) {
	swigluCheck[float32](t, ir.Float32, 1e-6)
	swigluCheck[float64](t, ir.Float64, 1e-15)
}
