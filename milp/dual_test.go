package milp

import (
	"math"
	"testing"
)

// fractional is max x + y subject to x + 2y ≤ 4, 3x + y ≤ 6, x, y ≥ 0:
// optimum 14/5 at (8/5, 6/5), whose minimisation (of −x − y) has row duals
// −2/5 and −1/5.
func fractional(upper float64) *Model {
	m := &Model{Sense: Maximize}
	x := m.AddCol(Col{Name: "x", Upper: upper, Obj: 1})
	y := m.AddCol(Col{Name: "y", Upper: upper, Obj: 1})
	m.AddRow(Row{Name: "a", Lower: -inf, Upper: 4, Coefs: []Coef{{x, 1}, {y, 2}}})
	m.AddRow(Row{Name: "b", Lower: -inf, Upper: 6, Coefs: []Coef{{x, 3}, {y, 1}}})
	return m
}

func TestDualBound(t *testing.T) {
	const tol = 1e-12
	tests := []struct {
		name  string
		m     *Model
		y     []float64
		bound float64
	}{
		{"the optimal duals prove the optimum", fractional(inf), []float64{-0.4, -0.2}, 14.0 / 5},
		{"no multipliers: the box alone", fractional(10), []float64{0, 0}, 20},
		{"no multipliers, an unbounded box: nothing", fractional(inf), []float64{0, 0}, inf},
		// A positive multiplier prices a lower bound, which these rows
		// do not have: dropped, as if 0. Minimising −x − y: −0.2·6, and
		// reduced costs −1 + 0.2·3 and −1 + 0.2·1 at x = y = 10.
		{"a wrong-signed multiplier is dropped", fractional(10), []float64{0.5, -0.2}, 13.2},
		{"any multipliers bound the optimum", fractional(10), []float64{-1, -1}, 10},
	}
	for _, tc := range tests {
		got := tc.m.DualBound(tc.y)
		if !(math.Abs(got-tc.bound) <= tol) && got != tc.bound {
			t.Errorf("%s: DualBound(%v) = %v, want %v", tc.name, tc.y, got, tc.bound)
		}
	}
	// Minimising, with a constant and a ranged row: min x − y + 1 s.t.
	// 1 ≤ x + y ≤ 3, x − y ≥ −2, x, y ∈ [0, 5]: optimum −2 + 1 at (1/2, 5/2),
	// where x − y is at its lower bound (dual 1) and the ranged row at its
	// upper (dual 0).
	m := &Model{ObjConst: 1}
	x := m.AddCol(Col{Upper: 5, Obj: 1})
	y := m.AddCol(Col{Upper: 5, Obj: -1})
	m.AddRow(Row{Lower: 1, Upper: 3, Coefs: []Coef{{x, 1}, {y, 1}}})
	m.AddRow(Row{Lower: -2, Upper: inf, Coefs: []Coef{{x, 1}, {y, -1}}})
	if got := m.DualBound([]float64{0, 1}); math.Abs(got-(-1)) > tol {
		t.Errorf("ranged row: DualBound = %v, want −1", got)
	}
	// Other multipliers, the ranged row's upper bound priced: weaker.
	// −0.5·3 + 0.5·(−2), reduced costs 1 and 0, plus the constant.
	if got := m.DualBound([]float64{-0.5, 0.5}); math.Abs(got-(-1.5)) > tol {
		t.Errorf("ranged row: DualBound = %v, want −1.5", got)
	}
	if got := m.DualBound([]float64{0, 0}); got != -4 {
		t.Errorf("ranged row, no multipliers: DualBound = %v, want −4 (x = 0, y = 5)", got)
	}
}
