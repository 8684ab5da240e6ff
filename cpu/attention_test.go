package cpu

import (
	"fmt"
	"math"
	"testing"

	"hap/ir"
)

type ktAttnCase struct {
	lead        []int
	s, t, d, dv int
	scale       float64
	causal      bool
}

func (c ktAttnCase) String() string {
	return fmt.Sprintf("lead%v_S%d_T%d_D%d_Dv%d_causal%v", c.lead, c.s, c.t, c.d, c.dv, c.causal)
}

func (c ktAttnCase) shape(a, b int) ir.Shape { return append(ir.Shape(c.lead).Clone(), a, b) }
func (c ktAttnCase) qs() ir.Shape            { return c.shape(c.s, c.d) }
func (c ktAttnCase) ks() ir.Shape            { return c.shape(c.t, c.d) }
func (c ktAttnCase) vs() ir.Shape            { return c.shape(c.t, c.dv) }
func (c ktAttnCase) ys() ir.Shape            { return c.shape(c.s, c.dv) }
func (c ktAttnCase) attrs() *ir.Attrs        { return &ir.Attrs{Scale: c.scale, Causal: c.causal} }

var ktAttnCases = []ktAttnCase{
	{[]int{2, 3}, 5, 7, 4, 3, 0.5, false}, // [B,H] batch, S ≠ T, Dv ≠ D
	{[]int{3}, 6, 6, 5, 5, 1 / math.Sqrt(5), true},
	{nil, 4, 9, 3, 2, 1.3, false}, // rank 2: no batch dims
	{[]int{2, 2}, 1, 1, 2, 2, 0.7, true},
	{[]int{2}, 7, 7, 4, 6, 0.5, true},
	{[]int{1, 2, 1}, 3, 1, 2, 3, 2, false}, // a single key
}

// ktAttnRef is attention by direct loops.
func ktAttnRef(c ktAttnCase, q, k, v *Tensor[float64]) *Tensor[float64] {
	y := ktZeros[float64](c.ys())
	nb := ir.Shape(c.lead).Numel()
	for b := 0; b < nb; b++ {
		for i := 0; i < c.s; i++ {
			sc := make([]float64, c.t)
			m := math.Inf(-1)
			for j := 0; j < c.t; j++ {
				if c.causal && j > i {
					sc[j] = math.Inf(-1)
					continue
				}
				var dot float64
				for d := 0; d < c.d; d++ {
					dot += q.Data[(b*c.s+i)*c.d+d] * k.Data[(b*c.t+j)*c.d+d]
				}
				sc[j] = c.scale * dot
				m = max(m, sc[j])
			}
			var z float64
			for j := range sc {
				sc[j] = math.Exp(sc[j] - m)
				z += sc[j]
			}
			for e := 0; e < c.dv; e++ {
				var s float64
				for j := 0; j < c.t; j++ {
					s += sc[j] / z * v.Data[(b*c.t+j)*c.dv+e]
				}
				y.Data[(b*c.s+i)*c.dv+e] = s
			}
		}
	}
	return y
}

func ktAttnRun[F Float](t *testing.T, c ktAttnCase, q64, k64, v64, r64 *Tensor[float64]) (y, dq, dk, dv *Tensor[F]) {
	t.Helper()
	q, k, v, r := ktConv[F](q64), ktConv[F](k64), ktConv[F](v64), ktConv[F](r64)
	y, dq, dk, dv = ktZeros[F](c.ys()), ktZeros[F](c.qs()), ktZeros[F](c.ks()), ktZeros[F](c.vs())
	if err := attention(c.attrs(), q, k, v, nil, y); err != nil {
		t.Fatal(err)
	}
	if err := attentionGrad(c.attrs(), q, k, v, r, nil, dq, dk, dv); err != nil {
		t.Fatal(err)
	}
	return y, dq, dk, dv
}

func TestAttention(t *testing.T) {
	for i, c := range ktAttnCases {
		t.Run(c.String(), func(t *testing.T) {
			rng := ktRNG(uint64(300 + i))
			// Inputs in [-2, 2) so the softmax is far from uniform.
			q, k, v, r := ktRand(rng, c.qs()...), ktRand(rng, c.ks()...), ktRand(rng, c.vs()...), ktRand(rng, c.ys()...)
			for _, x := range []*Tensor[float64]{q, k} {
				for j := range x.Data {
					x.Data[j] *= 2
				}
			}
			y, dq, dk, dv := ktAttnRun[float64](t, c, q, k, v, r)
			ktExpectClose(t, "attention vs direct loops", y.Data, ktAttnRef(c, q, k, v).Data, ktTolRef)

			ktGradCheck(t, "attention", []*Tensor[float64]{q, k, v}, r.Data, []*Tensor[float64]{dq, dk, dv},
				func(in []*Tensor[float64]) (*Tensor[float64], error) {
					y := ktZeros[float64](c.ys())
					return y, attention(c.attrs(), in[0], in[1], in[2], nil, y)
				})

			y32, dq32, dk32, dv32 := ktAttnRun[float32](t, c, q, k, v, r)
			ktExpectClose(t, "attention float32", y32.Float64s(), y.Data, ktTol32)
			ktExpectClose(t, "attention dq float32", dq32.Float64s(), dq.Data, ktTol32)
			ktExpectClose(t, "attention dk float32", dk32.Float64s(), dk.Data, ktTol32)
			ktExpectClose(t, "attention dv float32", dv32.Float64s(), dv.Data, ktTol32)
		})
	}
}

// Large scores must not overflow the softmax.
func TestAttentionStable(t *testing.T) {
	c := ktAttnCase{[]int{1}, 2, 3, 1, 1, 1, false}
	q := FromFloat64[float64](c.qs(), []float64{1000, -1000})
	k := FromFloat64[float64](c.ks(), []float64{1, 0.999, -1})
	v := FromFloat64[float64](c.vs(), []float64{1, 2, 3})
	for _, run := range []func() []float64{
		func() []float64 {
			y := ktZeros[float64](c.ys())
			if err := attention(c.attrs(), q, k, v, nil, y); err != nil {
				t.Fatal(err)
			}
			return y.Data
		},
		func() []float64 {
			y := ktZeros[float32](c.ys())
			if err := attention(c.attrs(), ktConv[float32](q), ktConv[float32](k), ktConv[float32](v), nil, y); err != nil {
				t.Fatal(err)
			}
			return y.Float64s()
		},
	} {
		got := run()
		// Row 0: scores 1000, 999, −1000 → weights ∝ 1, e⁻¹, 0.
		w1 := math.Exp(-1)
		want := []float64{(1 + 2*w1) / (1 + w1), 3}
		ktExpectClose(t, "softmax with huge scores", got, want, ktTol32)
	}
}

func TestAttentionShapeErrors(t *testing.T) {
	c := ktAttnCases[0]
	q, k, v := ktZeros[float64](c.qs()), ktZeros[float64](c.ks()), ktZeros[float64](c.vs())
	if err := attention(c.attrs(), q, k, v, nil, ktZeros[float64](c.qs())); err == nil {
		t.Error("attention accepted a wrongly shaped output")
	}
	if err := attention(c.attrs(), q, v, v, nil, ktZeros[float64](c.ys())); err == nil {
		t.Error("attention accepted mismatched head dims")
	}
	if err := attentionGrad(c.attrs(), q, k, v, ktZeros[float64](c.ys()), nil, q, k, ktZeros[float64](c.qs())); err == nil {
		t.Error("attention_grad accepted a wrongly shaped dv")
	}
}

// BenchmarkAttention: go test ./cpu -run '^$' -bench Attention
func BenchmarkAttention(b *testing.B) {
	for _, causal := range []bool{false, true} {
		c := ktAttnCase{[]int{2, 12}, 65, 65, 64, 64, 0.125, causal}
		rng := ktRNG(9)
		q, k, v := ktConv[float32](ktRand(rng, c.qs()...)), ktConv[float32](ktRand(rng, c.ks()...)), ktConv[float32](ktRand(rng, c.vs()...))
		dy := ktConv[float32](ktRand(rng, c.ys()...))
		y := ktZeros[float32](c.ys())
		dq, dk, dv := ktZeros[float32](c.qs()), ktZeros[float32](c.ks()), ktZeros[float32](c.vs())
		b.Run(fmt.Sprintf("fwd_causal%v", causal), func(b *testing.B) {
			for b.Loop() {
				if err := attention(c.attrs(), q, k, v, nil, y); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("grad_causal%v", causal), func(b *testing.B) {
			for b.Loop() {
				if err := attentionGrad(c.attrs(), q, k, v, dy, nil, dq, dk, dv); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
