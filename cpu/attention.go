package cpu

// Scaled dot-product attention over any number of leading batch dims.
//
// Per batch slice b (q[S,D], k[T,D], v[T,Dv]):
//
//	P = softmax_rows(scale·q·kᵀ + mask),   y = P·v
//
// where the causal mask removes key j > query i and the optional additive
// mask m[S,T] is the same for every batch slice. Grouped-query attention
// (kv_group g > 1) runs per key/value slice with the g query heads that
// read it as one block of g·S query rows (adjacent in q's layout), the
// row's position being its index mod S; the backward's dK and dV then sum
// over the group by the same products. The score products go
// through gonum's BLAS; the softmax runs in float64 (row max subtracted).
// The backward recomputes P rather than storing it. Batch slices are
// processed in parallel, at most GOMAXPROCS at a time.

import (
	"fmt"
	"math"

	"hap/ir"
)

// attnGeom is the geometry of one attention op, per key/value slice: kv
// slices of q's g·s rows (rows = g·s) against t keys.
type attnGeom struct {
	batch, rows, s, t, d, dv int
	scale                    float64
	causal                   bool
}

func newAttnGeom[F Float](op string, a *ir.Attrs, q, k, v, mask *Tensor[F]) (attnGeom, error) {
	ts := []*ir.Tensor{{Name: "q", Shape: q.Shape, DType: ir.Float64}, {Name: "k", Shape: k.Shape, DType: ir.Float64}, {Name: "v", Shape: v.Shape, DType: ir.Float64}}
	if mask != nil {
		ts = append(ts, &ir.Tensor{Name: "mask", Shape: mask.Shape, DType: ir.Float64})
	}
	ag, err := ir.AttentionGeometry(a, ts)
	if err != nil {
		return attnGeom{}, fmt.Errorf("%s: %w", op, err)
	}
	g := attnGeom{batch: ag.KVBatch, rows: ag.Group * ag.S, s: ag.S, t: ag.T, d: ag.D, dv: ag.Dv, scale: a.Scale, causal: a.Causal}
	for _, t := range []struct {
		n string
		x *Tensor[F]
	}{{"q", q}, {"k", k}, {"v", v}, {"mask", mask}} {
		if t.x == nil {
			continue
		}
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

// attnProbs fills p[rows·T] with softmax(scale·q·kᵀ + mask) for one
// key/value slice; mask is nil or the [S,T] additive mask.
func attnProbs[F Float](g attnGeom, qb, kb, mask, p []F) {
	gemmScaled(false, true, g.rows, g.t, g.d, g.scale, qb, kb, 0, p)
	for r := 0; r < g.rows; r++ {
		i := r % g.s
		row := p[r*g.t : (r+1)*g.t]
		if mask != nil {
			for j, m := range mask[i*g.t : (i+1)*g.t] {
				row[j] += m
			}
		}
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

func maskData[F Float](m *Tensor[F]) []F {
	if m == nil {
		return nil
	}
	return m.Data
}

// attention computes y = softmax(scale·q·kᵀ + mask)·v per batch slice;
// mask is nil when the op has none.
func attention[F Float](a *ir.Attrs, q, k, v, mask, y *Tensor[F]) error {
	const op = "attention"
	g, err := newAttnGeom(op, a, q, k, v, mask)
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
	qn, kn, vn, yn := g.rows*g.d, g.t*g.d, g.t*g.dv, g.rows*g.dv
	m := maskData(mask)
	kernParallel(g.batch, kernWorkers(g.batch), func(_, lo, hi int) {
		p := make([]F, g.rows*g.t)
		for b := lo; b < hi; b++ {
			attnProbs(g, q.Data[b*qn:(b+1)*qn], k.Data[b*kn:(b+1)*kn], m, p)
			gemmScaled(false, false, g.rows, g.dv, g.t, 1, p, v.Data[b*vn:(b+1)*vn], 0, y.Data[b*yn:(b+1)*yn])
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
//
// The additive mask is a constant and gets no gradient.
func attentionGrad[F Float](a *ir.Attrs, q, k, v, dy, mask, dq, dk, dv *Tensor[F]) error {
	const op = "attention_grad"
	g, err := newAttnGeom(op, a, q, k, v, mask)
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
	qn, kn, vn, yn := g.rows*g.d, g.t*g.d, g.t*g.dv, g.rows*g.dv
	m := maskData(mask)
	kernParallel(g.batch, kernWorkers(g.batch), func(_, lo, hi int) {
		p := make([]F, g.rows*g.t)
		ds := make([]F, g.rows*g.t)
		for b := lo; b < hi; b++ {
			qb, kb, vb := q.Data[b*qn:(b+1)*qn], k.Data[b*kn:(b+1)*kn], v.Data[b*vn:(b+1)*vn]
			dyb := dy.Data[b*yn : (b+1)*yn]
			attnProbs(g, qb, kb, m, p)
			gemmScaled(true, false, g.t, g.dv, g.rows, 1, p, dyb, 0, dv.Data[b*vn:(b+1)*vn])
			gemmScaled(false, true, g.rows, g.t, g.dv, 1, dyb, vb, 0, ds)
			for i := 0; i < g.rows; i++ {
				pr, dr := p[i*g.t:(i+1)*g.t], ds[i*g.t:(i+1)*g.t]
				var r float64
				for j, pv := range pr {
					r += float64(pv) * float64(dr[j])
				}
				for j, pv := range pr {
					dr[j] = F(float64(pv) * (float64(dr[j]) - r))
				}
			}
			gemmScaled(false, false, g.rows, g.d, g.t, g.scale, ds, kb, 0, dq.Data[b*qn:(b+1)*qn])
			gemmScaled(true, false, g.t, g.d, g.rows, g.scale, ds, qb, 0, dk.Data[b*kn:(b+1)*kn])
		}
	})
	return nil
}
