package cpu

// Rotary position embeddings, half rotation (ir.OpRotary): for each row of
// x[..., S, d] at position i (its row index mod S), with h = d/2,
//
//	y[j]   = x[j]·cos[i,j]     − x[j+h]·sin[i,j]        j < h
//	y[j+h] = x[j+h]·cos[i,j+h] + x[j]·sin[i,j+h]
//
// and the adjoint (rotary_grad, dy in x's place)
//
//	dx[j]   = dy[j]·cos[i,j]     + dy[j+h]·sin[i,j+h]
//	dx[j+h] = dy[j+h]·cos[i,j+h] − dy[j]·sin[i,j]
//
// A table of width h serves both halves (column c of half two is column c).

import (
	"fmt"

	"hap/ir"
)

// optIn is in[i], or nil when the op has no input i (an optional one).
func optIn[F Float](in []*Tensor[F], i int) *Tensor[F] {
	if i < len(in) {
		return in[i]
	}
	return nil
}

// rotary computes y = rotary(x) (adjoint: dx = rotaryᵀ(dy), x holding dy).
func rotary[F Float](adjoint bool, x, cos, sin, y *Tensor[F]) error {
	op := "rotary"
	if adjoint {
		op = "rotary_grad"
	}
	g, err := ir.RotaryGeometry([]*ir.Tensor{{Name: "x", Shape: x.Shape, DType: ir.Float64},
		{Name: "cos", Shape: cos.Shape, DType: ir.Float64}, {Name: "sin", Shape: sin.Shape, DType: ir.Float64}})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	for _, t := range []struct {
		n string
		x *Tensor[F]
		w ir.Shape
	}{{"x", x, x.Shape}, {"cos", cos, cos.Shape}, {"sin", sin, sin.Shape}, {"y", y, x.Shape}} {
		if err := checkTensor(op, t.n, t.x, t.w); err != nil {
			return err
		}
	}
	h := g.D / 2
	// hi is the table column of the second half's element j+h.
	hi := h
	if g.W == h {
		hi = 0
	}
	kernParallel(g.Rows, kernWorkers(g.Rows/64+1), func(_, lo, up int) {
		for r := lo; r < up; r++ {
			i := r % g.S
			xr, yr := x.Data[r*g.D:(r+1)*g.D], y.Data[r*g.D:(r+1)*g.D]
			c, s := cos.Data[i*g.W:(i+1)*g.W], sin.Data[i*g.W:(i+1)*g.W]
			for j := 0; j < h; j++ {
				a, b := xr[j], xr[j+h]
				if adjoint {
					yr[j] = a*c[j] + b*s[j+hi]
					yr[j+h] = b*c[j+hi] - a*s[j]
				} else {
					yr[j] = a*c[j] - b*s[j]
					yr[j+h] = b*c[j+hi] + a*s[j+hi]
				}
			}
		}
	})
	return nil
}
