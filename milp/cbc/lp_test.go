package cbc

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"hap/milp"
)

// TestKnownLPsThroughClp: the LPs of knownProblems solved by Clp (lp.go),
// in either phase, give CBC's answers, statuses included.
func TestKnownLPsThroughClp(t *testing.T) {
	for _, tc := range knownProblems() {
		if tc.m.HasIntegers() {
			continue
		}
		for _, asLoaded := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, as loaded %v", tc.name, asLoaded), func(t *testing.T) {
				if len(tc.m.Cols) == 0 {
					t.Skip("Solve answers a model without columns itself")
				}
				res, err := clpSolveModel(tc.m, time.Minute, asLoaded)
				if err != nil {
					t.Fatal(err)
				}
				if res.Status != tc.status {
					t.Fatalf("status %v, want %v", res.Status, tc.status)
				}
				if !res.Status.HasSolution() {
					if res.Values != nil || !math.IsNaN(res.Objective) {
						t.Errorf("no-solution result carries a solution: %+v", res)
					}
					return
				}
				if math.Abs(res.Objective-tc.obj) > lpTol || res.Bound != res.Objective || res.Gap != 0 {
					t.Errorf("objective %v bound %v gap %v, want %v proven", res.Objective, res.Bound, res.Gap, tc.obj)
				}
				if err := tc.m.Check(res.Values, feasTol); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// transportation is a random n×n transportation LP (min Σ c·x, each
// source's supply ≥ what it ships, each sink's demand met), with every
// column bounded so that any duals give a finite bound: big enough that
// the dual simplex takes a while.
func transportation(n int, seed int64) *milp.Model {
	rng := rand.New(rand.NewSource(seed))
	m := &milp.Model{}
	supply := make([]milp.Row, n)
	demand := make([]milp.Row, n)
	for i := range supply {
		supply[i] = milp.Row{Lower: -inf, Upper: 10 + 10*rng.Float64()}
		demand[i] = milp.Row{Lower: 5 + 5*rng.Float64(), Upper: inf}
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			c := m.AddCol(milp.Col{Upper: 20, Obj: 1 + 100*rng.Float64()})
			supply[i].Coefs = append(supply[i].Coefs, milp.Coef{Col: c, Val: 1})
			demand[j].Coefs = append(demand[j].Coefs, milp.Coef{Col: c, Val: 1})
		}
	}
	m.Rows = append(supply, demand...)
	return m
}

// covering is a random sparse covering LP: min Σ c·x subject to rows
// Σ a·x ≥ b with positive coefficients, x ∈ [0, 10] (feasible: every row has a column of its own), n rows and columns
// with k entries per column.
func covering(n, k int, seed int64) *milp.Model {
	rng := rand.New(rand.NewSource(seed))
	m := &milp.Model{}
	rows := make([]milp.Row, n)
	for i := range rows {
		rows[i] = milp.Row{Lower: 1 + rng.Float64(), Upper: inf}
	}
	for j := 0; j < n; j++ {
		c := m.AddCol(milp.Col{Upper: 10, Obj: 1 + rng.Float64()})
		seen := map[int]bool{j: true} // every row covered
		rows[j].Coefs = append(rows[j].Coefs, milp.Coef{Col: c, Val: 0.5 + rng.Float64()})
		for len(seen) < k {
			i := rng.Intn(n)
			if !seen[i] {
				seen[i] = true
				rows[i].Coefs = append(rows[i].Coefs, milp.Coef{Col: c, Val: 0.5 + rng.Float64()})
			}
		}
	}
	m.Rows = rows
	return m
}

// TestStoppedLPReportsItsDualBound: an LP the dual simplex solves as
// loaded and its time limit stops reports no solution, stopped by time,
// with a bound below the optimum that its duals prove; through Solve, with
// both phases stopped, the same.
func TestStoppedLPReportsItsDualBound(t *testing.T) {
	m := covering(3000, 4, 1)
	full, err := clpSolveModel(m, time.Hour, true)
	if err != nil || full.Status != milp.Optimal {
		t.Fatalf("unlimited solve: %v %v", full, err)
	}
	cbcRes, err := Solver{}.Solve(context.Background(), m, milp.Options{})
	if err != nil || math.Abs(cbcRes.Objective-full.Objective) > 1e-6*math.Abs(full.Objective) {
		t.Fatalf("CBC's optimum %v, as loaded %v (%v)", cbcRes.Objective, full.Objective, err)
	}
	t.Logf("optimum %.6f in %v", full.Objective, full.Runtime)
	limit := full.Runtime / 10
	start := time.Now()
	res, err := clpSolveModel(m, limit, true)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > limit+limitSlack {
		t.Errorf("took %v with limit %v", time.Since(start), limit)
	}
	if res.Status != milp.NoSolution || res.StoppedBy != milp.LimitTime || res.Values != nil {
		t.Fatalf("status %v stopped by %v after %v (limit %v): want no solution, stopped by time (instance too easy?)", res.Status, res.StoppedBy, res.Runtime, limit)
	}
	t.Logf("stopped at %v: bound %.6f", res.Runtime, res.Bound)
	if math.IsInf(res.Bound, 0) || res.Bound > full.Objective*(1+1e-9) {
		t.Errorf("stopped solve's bound %v, optimum %v: want a finite bound below it", res.Bound, full.Objective)
	}
	// The box alone (every column at its cheapest bound, 0) bounds the
	// optimum by 0: the duals do better.
	if !(res.Bound > 0) {
		t.Errorf("stopped solve's bound %v: no better than the columns' bounds alone", res.Bound)
	}
	// Through Solve: the initial solve has half the limit in CPU time,
	// the dual simplex the rest on the wall clock, which on a busy
	// machine may be nothing: the limit doubles until the dual simplex
	// has proved something, and every bound given must hold.
	for l := 2 * limit; ; l *= 2 {
		res, err = Solver{}.Solve(context.Background(), m, milp.Options{DualBoundOnStop: true, TimeLimit: l})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("through Solve, limit %v, stopped at %v: %v, bound %.6f", l, res.Runtime, res.Status, res.Bound)
		if res.Status == milp.Optimal {
			t.Skip("the initial solve finished within half the limit")
		}
		if res.Status != milp.NoSolution || res.StoppedBy != milp.LimitTime || res.Bound > full.Objective*(1+1e-9) {
			t.Fatalf("through Solve: %v stopped by %v, bound %v: want stopped with a bound at most %v", res.Status, res.StoppedBy, res.Bound, full.Objective)
		}
		if res.Bound > 0 {
			break
		}
		if l > full.Runtime {
			t.Fatalf("through Solve: no bound above 0 within %v, the unlimited solve's time", l)
		}
	}
	// Without DualBoundOnStop, CBC runs an LP to its end.
	if res, err := (Solver{}).Solve(context.Background(), m, milp.Options{TimeLimit: limit}); err != nil || res.Status != milp.Optimal {
		t.Errorf("without DualBoundOnStop: %v %v, want the LP solved", res, err)
	}
}

// TestDualBoundNeverExceedsTheOptimum: random multipliers, of random sign
// and size, on random bounded LPs, never bound the optimum from the wrong
// side; scaled down towards 0 they tend to the box's bound.
func TestDualBoundNeverExceedsTheOptimum(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 50; trial++ {
		m := transportation(3+rng.Intn(4), int64(trial))
		if trial%2 == 1 {
			m.Sense = milp.Maximize // the supplies cap it; the demands stay
		}
		res, err := Solver{}.Solve(context.Background(), m, milp.Options{})
		if err != nil || res.Status != milp.Optimal {
			t.Fatalf("trial %d: %v %v", trial, res, err)
		}
		sign := 1.0
		if m.Sense == milp.Maximize {
			sign = -1
		}
		for k := 0; k < 20; k++ {
			y := make([]float64, len(m.Rows))
			for i := range y {
				y[i] = 200 * (rng.Float64() - 0.5)
			}
			if b := m.DualBound(y); sign*(b-res.Objective) > 1e-9*math.Abs(res.Objective) {
				t.Fatalf("trial %d (%v): DualBound %v past the optimum %v", trial, m.Sense, b, res.Objective)
			}
		}
	}
}

// clpSolveModel is one phase of solveLP on m, a minimisation or not.
func clpSolveModel(m *milp.Model, limit time.Duration, asLoaded bool) (*milp.Result, error) {
	s, err := newClpSession(m)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	run := clpInitial
	if asLoaded {
		run = clpAsLoaded
	}
	return s.phase(limit, run)
}

// TestCutoffStopsAtWhatTheDualsProve: an LP solved with a cutoff below its
// optimum stops with a bound the duals prove, between the cutoff and the
// optimum, or runs to the optimum; with the cutoff above it, to the
// optimum. In-process and in a child process alike; a maximised LP ignores
// the cutoff.
func TestCutoffStopsAtWhatTheDualsProve(t *testing.T) {
	stopped := 0
	for trial := 0; trial < 30; trial++ {
		m := transportation(20+trial, int64(trial))
		want, err := Solver{}.Solve(context.Background(), m, milp.Options{})
		if err != nil || want.Status != milp.Optimal {
			t.Fatalf("trial %d: %v %v", trial, want, err)
		}
		for _, frac := range []float64{0.5, 0.9, 1.1} {
			cutoff := frac * want.Objective
			for _, s := range []Solver{{}, {Isolated: trial%10 == 0}} {
				res, err := s.Solve(context.Background(), m, milp.Options{Cutoff: cutoff})
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case res.Status == milp.Optimal:
					if math.Abs(res.Objective-want.Objective) > lpTol*math.Max(1, math.Abs(want.Objective)) {
						t.Errorf("trial %d, cutoff %g: optimum %v, want %v", trial, cutoff, res.Objective, want.Objective)
					}
				case res.Status == milp.NoSolution && res.StoppedBy == milp.LimitCutoff:
					stopped++
					if frac > 1 || res.Bound < cutoff || res.Bound > want.Objective*(1+lpTol) {
						t.Errorf("trial %d, cutoff %g: stopped with bound %v; want it between the cutoff and the optimum %v", trial, cutoff, res.Bound, want.Objective)
					}
				default:
					t.Errorf("trial %d, cutoff %g: %+v", trial, cutoff, res)
				}
			}
		}
	}
	if stopped == 0 {
		t.Error("no cutoff stopped an LP short of its optimum")
	}
	m := transportation(10, 1)
	m.Sense = milp.Maximize
	want, _ := Solver{}.Solve(context.Background(), m, milp.Options{})
	if res, err := (Solver{}).Solve(context.Background(), m, milp.Options{Cutoff: 2 * want.Objective}); err != nil || res.Status != milp.Optimal || math.Abs(res.Objective-want.Objective) > lpTol*math.Abs(want.Objective) {
		t.Errorf("maximised with a cutoff: %+v %v; want its optimum %v", res, err, want.Objective)
	}
}

// TestCutoffGoesOnWhereItStopped: with a budget too small for the dual
// simplex to reach the cutoff, solveLPBelow goes on from where it stopped
// when its duals are near the cutoff (cutoffNearShare), and what it
// returns is still the optimum, or a bound its duals prove between the
// cutoff and the optimum. On these covering LPs the budgets, half an
// iteration a row and one, run out with the duals at about 0.67 and 0.88
// of the optimum, so that both the cutoffs below the optimum and the one
// above it are near enough to go on.
func TestCutoffGoesOnWhereItStopped(t *testing.T) {
	continued := 0
	for trial := 0; trial < 6; trial++ {
		m := covering(800, 5, int64(trial))
		want, err := Solver{}.Solve(context.Background(), m, milp.Options{})
		if err != nil || want.Status != milp.Optimal {
			t.Fatalf("trial %d: %v %v", trial, want, err)
		}
		for _, frac := range []float64{0.8, 0.95, 1.1} {
			cutoff := frac * want.Objective
			for _, perRow := range []float64{0.5, 1} {
				solveLock <- struct{}{} // as Solve holds it
				res, n, err := solveLPBelowWithin(m, cutoff, 0, perRow)
				<-solveLock
				if err != nil {
					t.Fatal(err)
				}
				if n > cutoffContinuations {
					t.Errorf("trial %d, cutoff %g, %g a row: went on %d times, more than %d", trial, cutoff, perRow, n, cutoffContinuations)
				}
				continued += n
				switch {
				case res.Status == milp.Optimal:
					if math.Abs(res.Objective-want.Objective) > lpTol*math.Max(1, math.Abs(want.Objective)) {
						t.Errorf("trial %d, cutoff %g, %g a row: optimum %v, want %v", trial, cutoff, perRow, res.Objective, want.Objective)
					}
				case res.Status == milp.NoSolution && res.StoppedBy == milp.LimitCutoff:
					if frac > 1 || res.Bound < cutoff || res.Bound > want.Objective*(1+lpTol) {
						t.Errorf("trial %d, cutoff %g, %g a row: stopped with bound %v; want it between the cutoff and the optimum %v", trial, cutoff, perRow, res.Bound, want.Objective)
					}
				default:
					t.Errorf("trial %d, cutoff %g, %g a row: %+v", trial, cutoff, perRow, res)
				}
			}
		}
	}
	if continued == 0 {
		t.Error("no solve went on where its budget ran out near the cutoff")
	}
}
