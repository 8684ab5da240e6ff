package cpu

import (
	"fmt"
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

// The point of the fused op: a stack of feed-forwards under a wide output
// layer, LLaMA's shape in small, trained with swiglu holds one [tokens,
// ffn] activation a layer less at its peak than with silu then mul, whose
// backward keeps silu(gate) until mul's gradient reads it. The peak is the
// output layer's backward, before any feed-forward's, as in LLaMA-7B
// (whose step at batch 1 in float32 peaked at 68.5 GB by PeakBytes with
// silu then mul, and at 62.7 GB when the zoo's llama-7b took swiglu: 32
// layers × 4096 tokens × 11008 × 4 bytes less).
func TestSwiGLUStepHoldsOneActivationLessALayer(t *testing.T) {
	const tokens, d, ffn, vocab, layers = 64, 2, 10, 40, 4
	peak := func(fused bool) int64 {
		b := ir.NewBuilder("ffn", ir.Float64)
		x := b.Input("x", ir.Float64, tokens, d)
		for l := range layers {
			restore := b.Scope(fmt.Sprintf("layer%d", l))
			gate := b.MatMul(x, b.Param("w1", d, ffn))
			up := b.MatMul(x, b.Param("w3", d, ffn))
			var h ir.TensorID
			if fused {
				h = b.SwiGLU(gate, up)
			} else {
				h = b.Mul(b.SiLU(gate), up)
			}
			x = b.Add(x, b.MatMul(h, b.Param("w2", ffn, d)))
			restore()
		}
		g, err := b.Finish(b.ReduceSum(b.MatMul(x, b.Param("head", d, vocab)), 0, 1))
		if err != nil {
			t.Fatal(err)
		}
		step, err := ir.BuildTrainStep(g, ir.SGD(0.1))
		if err != nil {
			t.Fatal(err)
		}
		return PeakBytes(step, 8)
	}
	fused, unfused := peak(true), peak(false)
	if want := int64(layers * tokens * ffn * 8); unfused-fused != want {
		t.Errorf("peak %d bytes fused, %d as silu then mul: %d apart; want %d (%d [%d, %d] float64 tensors)",
			fused, unfused, unfused-fused, want, layers, tokens, ffn)
	}
}
