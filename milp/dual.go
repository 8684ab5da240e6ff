package milp

import "math"

// DualBound is the Lagrangian bound of row multipliers y on the optimum of
// m's LP relaxation, and so on m's: a lower bound when m minimises, an
// upper bound when it maximises. It holds for every y (one entry per row),
// which is what makes it useful: the duals of a simplex stopped short of
// its optimum by a clock give a proven bound, where the objective it had
// reached is no bound at all.
//
// The multipliers are those of the minimisation of m's objective (of its
// negation when m maximises): y_i > 0 prices row i's lower bound, y_i < 0
// its upper. An entry pricing an infinite bound is dropped (taken as 0),
// which keeps the bound valid; a solver's duals carry such entries at its
// tolerances. With d = c − Aᵀy the reduced costs, the bound is
//
//	Σ_i y_i·(Lower_i if y_i > 0, Upper_i if y_i < 0) + Σ_j min_{x_j ∈ [Lower_j, Upper_j]} d_j·x_j
//
// (plus ObjConst): the minimum over the columns' box alone of the
// objective less y's combination of the rows, which every feasible x
// satisfies. It is −Inf (+Inf maximising) when some d_j pulls x_j towards
// an infinite bound; a model whose columns are all bounded always gets a
// finite bound. Integrality is ignored.
//
// The sums are in float64 and not directed-rounded: the bound can be
// above the true one by rounding, about 1e-16 of the largest term times
// the number of terms, far under any solver's tolerance.
func (m *Model) DualBound(y []float64) float64 {
	if len(y) != len(m.Rows) {
		panic("milp: DualBound: one multiplier per row")
	}
	sign := 1.0
	if m.Sense == Maximize {
		sign = -1
	}
	d := make([]float64, len(m.Cols))
	for j, c := range m.Cols {
		d[j] = sign * c.Obj
	}
	bound := 0.0
	for i, r := range m.Rows {
		yi := y[i]
		var rhs float64
		switch {
		case yi > 0 && !math.IsInf(r.Lower, -1):
			rhs = r.Lower
		case yi < 0 && !math.IsInf(r.Upper, 1):
			rhs = r.Upper
		default:
			continue // 0, or a multiplier pricing an infinite bound: dropped
		}
		bound += yi * rhs
		for _, e := range r.Coefs {
			d[e.Col] -= yi * e.Val
		}
	}
	for j, c := range m.Cols {
		switch {
		case d[j] > 0:
			bound += d[j] * c.Lower
		case d[j] < 0:
			bound += d[j] * c.Upper
		}
	}
	if math.IsNaN(bound) {
		// An infinite bound times a reduced cost of each sign: nothing
		// is known.
		bound = math.Inf(-1)
	}
	return sign*bound + m.ObjConst
}
