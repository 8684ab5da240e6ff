package cpu

// Scaled dot-product attention over any number of leading batch dims.
//
// Per batch slice b (q[S,D], k[T,D], v[T,Dv]):
//
//	P = softmax_rows(scale·q·kᵀ + mask),   y = P·v
//
// where the causal mask removes key j > query i. The score products go
// through gonum's BLAS; the softmax runs in float64 (row max subtracted).
// The backward recomputes P rather than storing it. Batch slices are
// processed in parallel, at most GOMAXPROCS at a time.

import (
	"fmt"
	"math"

	"hap/ir"
)

// attnGeom is the geometry of one attention op.
type attnGeom struct {
	batch, s, t, d, dv int
	scale              float64
	causal             bool
}

func newAttnGeom[F Float](op string, a *ir.Attrs, q, k, v *Tensor[F]) (attnGeom, error) {
	r := len(q.Shape)
	if r < 2 || len(k.Shape) != r || len(v.Shape) != r {
		return attnGeom{}, fmt.Errorf("%s: q %v, k %v, v %v need equal rank ≥ 2", op, q.Shape, k.Shape, v.Shape)
	}
	lead := q.Shape[:r-2]
	g := attnGeom{
		batch: lead.Numel(), s: q.Shape[r-2], t: k.Shape[r-2], d: q.Shape[r-1], dv: v.Shape[r-1],
		scale: a.Scale, causal: a.Causal,
	}
	kw := append(lead.Clone(), g.t, g.d)
	vw := append(lead.Clone(), g.t, g.dv)
	if !k.Shape.Equal(kw) || !v.Shape.Equal(vw) {
		return attnGeom{}, fmt.Errorf("%s: q %v, k %v, v %v: batch dims, head dims or key lengths differ", op, q.Shape, k.Shape, v.Shape)
	}
	for _, t := range []struct {
		n string
		x *Tensor[F]
	}{{"q", q}, {"k", k}, {"v", v}} {
		if err := checkTensor(op, t.n, t.x, t.x.Shape); err != nil {
			return attnGeom{}, err
		}
	}
	return g, nil
}

// yShape is the output shape [..., S, Dv].
func (g attnGeom) yShape(q ir.Shape) ir.Shape {
	y := q.Clone()
	y[len(y)-1] = g.dv
	return y
}

// attnProbs fills p[S·T] with softmax(scale·q·kᵀ + mask) for one batch slice.
func attnProbs[F Float](g attnGeom, qb, kb, p []F) {
	gemmScaled(false, true, g.s, g.t, g.d, g.scale, qb, kb, 0, p)
	for i := 0; i < g.s; i++ {
		row := p[i*g.t : (i+1)*g.t]
		n := g.t
		if g.causal {
			n = min(i+1, g.t)
		}
		m := math.Inf(-1)
		for _, x := range row[:n] {
			m = max(m, float64(x))
		}
		var sum float64
		for j, x := range row[:n] {
			e := math.Exp(float64(x) - m)
			sum += e
			row[j] = F(e)
		}
		inv := 1 / sum
		for j := range row[:n] {
			row[j] = F(float64(row[j]) * inv)
		}
		clear(row[n:])
	}
}

// attention computes y = softmax(scale·q·kᵀ + mask)·v per batch slice.
func attention[F Float](a *ir.Attrs, q, k, v, y *Tensor[F]) error {
	const op = "attention"
	g, err := newAttnGeom(op, a, q, k, v)
	if err != nil {
		return err
	}
	if err := checkTensor(op, "y", y, g.yShape(q.Shape)); err != nil {
		return err
	}
	if g.t == 0 {
		clear(y.Data)
		return nil
	}
	qn, kn, vn, yn := g.s*g.d, g.t*g.d, g.t*g.dv, g.s*g.dv
	kernParallel(g.batch, kernWorkers(g.batch), func(_, lo, hi int) {
		p := make([]F, g.s*g.t)
		for b := lo; b < hi; b++ {
			attnProbs(g, q.Data[b*qn:(b+1)*qn], k.Data[b*kn:(b+1)*kn], p)
			gemmScaled(false, false, g.s, g.dv, g.t, 1, p, v.Data[b*vn:(b+1)*vn], 0, y.Data[b*yn:(b+1)*yn])
		}
	})
	return nil
}

// attentionGrad is the exact gradient of attention. With P recomputed:
//
//	dV = Pᵀ·dY
//	dP = dY·Vᵀ
//	dS = P ⊙ (dP − rowsum(dP ⊙ P))    (masked entries have P = 0, so dS = 0)
//	dQ = scale·dS·K
//	dK = scale·dSᵀ·Q
func attentionGrad[F Float](a *ir.Attrs, q, k, v, dy, dq, dk, dv *Tensor[F]) error {
	const op = "attention_grad"
	g, err := newAttnGeom(op, a, q, k, v)
	if err != nil {
		return err
	}
	if err := checkTensor(op, "dy", dy, g.yShape(q.Shape)); err != nil {
		return err
	}
	for _, t := range []struct {
		n    string
		x, w *Tensor[F]
	}{{"dq", dq, q}, {"dk", dk, k}, {"dv", dv, v}} {
		if err := checkTensor(op, t.n, t.x, t.w.Shape); err != nil {
			return err
		}
	}
	if g.t == 0 {
		clear(dq.Data)
		return nil
	}
	qn, kn, vn, yn := g.s*g.d, g.t*g.d, g.t*g.dv, g.s*g.dv
	kernParallel(g.batch, kernWorkers(g.batch), func(_, lo, hi int) {
		p := make([]F, g.s*g.t)
		ds := make([]F, g.s*g.t)
		for b := lo; b < hi; b++ {
			qb, kb, vb := q.Data[b*qn:(b+1)*qn], k.Data[b*kn:(b+1)*kn], v.Data[b*vn:(b+1)*vn]
			dyb := dy.Data[b*yn : (b+1)*yn]
			attnProbs(g, qb, kb, p)
			gemmScaled(true, false, g.t, g.dv, g.s, 1, p, dyb, 0, dv.Data[b*vn:(b+1)*vn])
			gemmScaled(false, true, g.s, g.t, g.dv, 1, dyb, vb, 0, ds)
			for i := 0; i < g.s; i++ {
				pr, dr := p[i*g.t:(i+1)*g.t], ds[i*g.t:(i+1)*g.t]
				var r float64
				for j, pv := range pr {
					r += float64(pv) * float64(dr[j])
				}
				for j, pv := range pr {
					dr[j] = F(float64(pv) * (float64(dr[j]) - r))
				}
			}
			gemmScaled(false, false, g.s, g.d, g.t, g.scale, ds, kb, 0, dq.Data[b*qn:(b+1)*qn])
			gemmScaled(true, false, g.t, g.d, g.s, g.scale, ds, qb, 0, dk.Data[b*kn:(b+1)*kn])
		}
	})
	return nil
}
