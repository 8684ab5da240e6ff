package cbc

import (
	"context"
	"errors"
	"math"
	"math/rand"
	"testing"

	"hap/milp"
)

// pairing is a random model of choices whose LP relaxation mixes them, as
// the synthesizer's does: groups of binaries with Σ = 1 each (an op's
// rules), a cost per member, and for random pairs of members of two
// groups a charge y ≥ x_a + x_b − 1 (both chosen: a layout change), which
// a fractional point makes vanish; and a makespan T ≥ Σ over a few
// members' times (a device's work). It returns the model (choices
// continuous), the choices, and the same model with them integer.
func pairing(seed int64) (lp *milp.Model, choices [][]int, mip *milp.Model) {
	rng := rand.New(rand.NewSource(seed))
	lp = &milp.Model{Sense: milp.Minimize}
	groups := 2 + rng.Intn(4)
	for g := 0; g < groups; g++ {
		var ch []int
		row := milp.Row{Lower: 1, Upper: 1}
		for i := 0; i < 2+rng.Intn(3); i++ {
			j := lp.AddCol(milp.Col{Upper: 1, Obj: rng.Float64()})
			ch = append(ch, j)
			row.Coefs = append(row.Coefs, milp.Coef{Col: j, Val: 1})
		}
		lp.AddRow(row)
		choices = append(choices, ch)
	}
	for k := 0; k < 3+rng.Intn(6); k++ {
		g, h := rng.Intn(groups), rng.Intn(groups)
		if g == h {
			continue
		}
		a, b := choices[g][rng.Intn(len(choices[g]))], choices[h][rng.Intn(len(choices[h]))]
		y := lp.AddCol(milp.Col{Upper: 1, Obj: 1 + 3*rng.Float64()})
		lp.AddRow(milp.Row{Lower: -1, Upper: math.Inf(1), Coefs: []milp.Coef{{Col: y, Val: 1}, {Col: a, Val: -1}, {Col: b, Val: -1}}})
	}
	T := lp.AddCol(milp.Col{Upper: 100, Obj: 1})
	for d := 0; d < 2; d++ {
		row := milp.Row{Lower: 0, Upper: math.Inf(1), Coefs: []milp.Coef{{Col: T, Val: 1}}}
		for _, ch := range choices {
			row.Coefs = append(row.Coefs, milp.Coef{Col: ch[rng.Intn(len(ch))], Val: -rng.Float64()})
		}
		lp.AddRow(row)
	}
	mip = &milp.Model{Sense: lp.Sense, Cols: append([]milp.Col(nil), lp.Cols...), Rows: lp.Rows}
	for _, ch := range choices {
		for _, j := range ch {
			mip.Cols[j].Integer = true
		}
	}
	return lp, choices, mip
}

// TestBranchingOnChoicesBoundsTheMIP: on random models of choices, the
// branched LP's bound lies between the LP's optimum and the MIP's at every
// budget, rises with the budget, and, unlimited, the search ends Optimal at
// the MIP's optimum with a point that makes every choice.
func TestBranchingOnChoicesBoundsTheMIP(t *testing.T) {
	const tol = 1e-7
	ctx := context.Background()
	lifted := 0
	for seed := int64(0); seed < 60; seed++ {
		lp, choices, mip := pairing(seed)
		want, err := Solver{}.Solve(ctx, mip, milp.Options{})
		if err != nil || want.Status != milp.Optimal {
			t.Fatalf("seed %d: the MIP: %v %v", seed, want, err)
		}
		root, err := Solver{}.Solve(ctx, lp, milp.Options{})
		if err != nil || root.Status != milp.Optimal {
			t.Fatalf("seed %d: the LP: %v %v", seed, root, err)
		}
		prev := root.Objective
		for _, budget := range []int{1, 3, 10, 1000} {
			res, err := Solver{}.Solve(ctx, lp, milp.Options{Choices: choices, NodeLimit: budget})
			if err != nil {
				t.Fatalf("seed %d, budget %d: %v", seed, budget, err)
			}
			if res.Bound < prev-tol || res.Bound > want.Objective+tol {
				t.Fatalf("seed %d, budget %d: bound %v, not within [%v (the last), %v (the MIP's)]", seed, budget, res.Bound, prev, want.Objective)
			}
			if res.Nodes > budget {
				t.Errorf("seed %d: %d LPs for a budget of %d", seed, res.Nodes, budget)
			}
			prev = res.Bound
			if budget < 1000 {
				if res.Status != milp.Optimal && res.StoppedBy != milp.LimitNodes {
					t.Errorf("seed %d, budget %d: %v stopped by %v", seed, budget, res.Status, res.StoppedBy)
				}
				continue
			}
			if res.Status != milp.Optimal || math.Abs(res.Objective-want.Objective) > tol {
				t.Fatalf("seed %d: unlimited branching ended %v at %v, the MIP's optimum is %v", seed, res.Status, res.Objective, want.Objective)
			}
			if err := mip.Check(res.Values, 1e-6); err != nil {
				t.Fatalf("seed %d: the optimal point: %v", seed, err)
			}
		}
		if want.Objective > root.Objective+tol {
			lifted++
		}
	}
	// The cases must exercise the search: most LPs are below their MIP.
	if lifted < 20 {
		t.Errorf("only %d of 60 random models have an LP below the MIP", lifted)
	}
}

// TestBranchingOnChoicesRefusesBadChoices: a choice naming an unknown
// column, a column twice, an integer column or one not within [0, 1] is
// an invalid request, not a wrong bound.
func TestBranchingOnChoicesRefusesBadChoices(t *testing.T) {
	lp, choices, mip := pairing(1)
	wide := &milp.Model{Sense: lp.Sense, Cols: append([]milp.Col(nil), lp.Cols...), Rows: lp.Rows}
	wide.Cols[choices[0][0]].Upper = 2
	for _, tc := range []struct {
		name    string
		m       *milp.Model
		choices [][]int
	}{
		{"unknown column", lp, [][]int{{0, len(lp.Cols)}}},
		{"a column twice", lp, [][]int{{0, 0}}},
		{"empty", lp, [][]int{{}}},
		{"integer columns", mip, choices},
		{"a column above 1", wide, choices},
	} {
		_, err := Solver{}.Solve(context.Background(), tc.m, milp.Options{Choices: tc.choices, NodeLimit: 5})
		if !errors.Is(err, milp.ErrInvalid) {
			t.Errorf("%s: error %v, want one wrapping milp.ErrInvalid", tc.name, err)
		}
	}
}

// TestBranchingOnChoicesIsolated: the child-process solver branches too
// (the options travel with the model), and gives the same bound.
func TestBranchingOnChoicesIsolated(t *testing.T) {
	lp, choices, _ := pairing(7)
	opt := milp.Options{Choices: choices, NodeLimit: 4}
	in, err := Solver{}.Solve(context.Background(), lp, opt)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Solver{Isolated: true}.Solve(context.Background(), lp, opt)
	if err != nil {
		t.Fatal(err)
	}
	if in.Bound != out.Bound || in.Nodes != out.Nodes || in.Status != out.Status {
		t.Errorf("isolated: %v bound %v after %d LPs; in process: %v bound %v after %d", out.Status, out.Bound, out.Nodes, in.Status, in.Bound, in.Nodes)
	}
}
