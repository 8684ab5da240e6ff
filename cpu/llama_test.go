package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"hap/ir"
)

func randTensor(rng *rand.Rand, shape ...int) *Tensor[float64] {
	v := make([]float64, ir.Shape(shape).Numel())
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return FromFloat64[float64](ir.Shape(shape), v)
}

// repeatHeads is PyTorch's repeat_interleave(x, g, dim=1) of x[B,H,T,D].
func repeatHeads(x *Tensor[float64], g int) *Tensor[float64] {
	s := x.Shape
	out := ktZeros[float64](ir.Shape{s[0], s[1] * g, s[2], s[3]})
	blk := s[2] * s[3]
	for b := 0; b < s[0]; b++ {
		for h := 0; h < s[1]*g; h++ {
			copy(out.Data[(b*s[1]*g+h)*blk:][:blk], x.Data[(b*s[1]+h/g)*blk:][:blk])
		}
	}
	return out
}

func maxDiff(a, b []float64) float64 {
	var m float64
	for i := range a {
		m = max(m, math.Abs(a[i]-b[i]))
	}
	return m
}

// Grouped-query attention equals plain attention on k and v repeated
// per query head (repeat_interleave), forward and backward, with and
// without a mask; a mask of −1e9 above the diagonal equals the causal flag.
func TestGroupedQueryAttentionIsRepeatedKV(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	const B, H, G, S, D, Dv = 2, 6, 3, 5, 4, 3
	q, k, v := randTensor(rng, B, H, S, D), randTensor(rng, B, H/G, S, D), randTensor(rng, B, H/G, S, Dv)
	dy, m := randTensor(rng, B, H, S, Dv), randTensor(rng, S, S)
	for _, causal := range []bool{false, true} {
		for _, mask := range []*Tensor[float64]{nil, m} {
			a := &ir.Attrs{Scale: 0.4, Causal: causal, KVGroup: G}
			y := ktZeros[float64](ir.Shape{B, H, S, Dv})
			dq, dk, dv := ktZeros[float64](q.Shape), ktZeros[float64](k.Shape), ktZeros[float64](v.Shape)
			if err := attention(a, q, k, v, mask, y); err != nil {
				t.Fatal(err)
			}
			if err := attentionGrad(a, q, k, v, dy, mask, dq, dk, dv); err != nil {
				t.Fatal(err)
			}
			kr, vr := repeatHeads(k, G), repeatHeads(v, G)
			p := &ir.Attrs{Scale: 0.4, Causal: causal}
			yr := ktZeros[float64](y.Shape)
			dqr, dkr, dvr := ktZeros[float64](q.Shape), ktZeros[float64](kr.Shape), ktZeros[float64](vr.Shape)
			if err := attention(p, q, kr, vr, mask, yr); err != nil {
				t.Fatal(err)
			}
			if err := attentionGrad(p, q, kr, vr, dy, mask, dqr, dkr, dvr); err != nil {
				t.Fatal(err)
			}
			// The repeated k's gradient summed over each group is k's.
			sum := func(x *Tensor[float64], d int) []float64 {
				out := make([]float64, B*(H/G)*S*d)
				blk := S * d
				for b := 0; b < B; b++ {
					for h := 0; h < H; h++ {
						for i := 0; i < blk; i++ {
							out[(b*(H/G)+h/G)*blk+i] += x.Data[(b*H+h)*blk+i]
						}
					}
				}
				return out
			}
			for _, c := range []struct {
				n    string
				a, b []float64
			}{{"y", y.Data, yr.Data}, {"dq", dq.Data, dqr.Data}, {"dk", dk.Data, sum(dkr, D)}, {"dv", dv.Data, sum(dvr, Dv)}} {
				if d := maxDiff(c.a, c.b); d > 1e-12 {
					t.Errorf("causal=%v mask=%v: %s differs from repeated k/v by %g", causal, mask != nil, c.n, d)
				}
			}
		}
	}
	// A −1e9 mask above the diagonal is the causal flag.
	cm := ktZeros[float64](ir.Shape{S, S})
	for i := 0; i < S; i++ {
		for j := i + 1; j < S; j++ {
			cm.Data[i*S+j] = -1e9
		}
	}
	y1, y2 := ktZeros[float64](ir.Shape{B, H, S, Dv}), ktZeros[float64](ir.Shape{B, H, S, Dv})
	if err := attention(&ir.Attrs{Scale: 0.4, KVGroup: G}, q, k, v, cm, y1); err != nil {
		t.Fatal(err)
	}
	if err := attention(&ir.Attrs{Scale: 0.4, KVGroup: G, Causal: true}, q, k, v, nil, y2); err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(y1.Data, y2.Data); d > 1e-12 {
		t.Errorf("upper-triangular mask differs from causal by %g", d)
	}
	if err := attention(&ir.Attrs{Scale: 0.4, KVGroup: 4}, q, k, v, nil, y1); err == nil {
		t.Error("kv_group 4 with 6 query and 2 key/value heads: no error")
	}
	if err := attention(&ir.Attrs{Scale: 0.4, KVGroup: G}, q, k, v, ktZeros[float64](ir.Shape{S, S + 1}), y1); err == nil {
		t.Error("mask of the wrong shape: no error")
	}
}

// Rotary is x·cos + rotate_half(x)·sin (HF's apply_rotary_pos_emb), in
// float64 and float32, with full and half-width tables; its adjoint is
// the transpose (⟨rotary(x), y⟩ = ⟨x, rotary_grad(y)⟩).
func TestRotaryIsRotateHalf(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 7))
	const S, D = 5, 6
	x, y := randTensor(rng, 2, 3, S, D), randTensor(rng, 2, 3, S, D)
	half := func() *Tensor[float64] { return randTensor(rng, S, D/2) }
	ch, sh := half(), half()
	full := func(h *Tensor[float64]) *Tensor[float64] { return Concat(1, []*Tensor[float64]{h, h}) }
	cf, sf := randTensor(rng, S, D), randTensor(rng, S, D)
	for _, tab := range []struct {
		n        string
		c, s     *Tensor[float64]
		ref1, r2 *Tensor[float64]
	}{{"half", ch, sh, full(ch), full(sh)}, {"full", cf, sf, cf, sf}} {
		want := make([]float64, len(x.Data))
		for r := 0; r < len(x.Data)/D; r++ {
			i := r % S
			for j := 0; j < D; j++ {
				var rot float64
				if j < D/2 {
					rot = -x.Data[r*D+j+D/2]
				} else {
					rot = x.Data[r*D+j-D/2]
				}
				want[r*D+j] = x.Data[r*D+j]*tab.ref1.Data[i*D+j] + rot*tab.r2.Data[i*D+j]
			}
		}
		got := ktZeros[float64](x.Shape)
		if err := rotary(false, x, tab.c, tab.s, got); err != nil {
			t.Fatal(err)
		}
		if d := maxDiff(got.Data, want); d > 1e-14 {
			t.Errorf("%s table: rotary differs from rotate_half by %g", tab.n, d)
		}
		got32 := NewTensor[float32](x.Shape, ir.Float32)
		if err := rotary(false, ktConv[float32](x), ktConv[float32](tab.c), ktConv[float32](tab.s), got32); err != nil {
			t.Fatal(err)
		}
		if d := maxDiff(got32.Float64s(), want); d > 1e-5 {
			t.Errorf("%s table: float32 rotary differs by %g", tab.n, d)
		}
		adj := ktZeros[float64](x.Shape)
		if err := rotary(true, y, tab.c, tab.s, adj); err != nil {
			t.Fatal(err)
		}
		var l, r float64
		for i := range x.Data {
			l += got.Data[i] * y.Data[i]
			r += x.Data[i] * adj.Data[i]
		}
		if math.Abs(l-r) > 1e-12 {
			t.Errorf("%s table: ⟨rotary(x), y⟩ = %g, ⟨x, rotary_grad(y)⟩ = %g", tab.n, l, r)
		}
	}
	if err := rotary(false, x, randTensor(rng, S, 4), randTensor(rng, S, 4), ktZeros[float64](x.Shape)); err == nil {
		t.Error("table of width 4 for d = 6: no error")
	}
}
