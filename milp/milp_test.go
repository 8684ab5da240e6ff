package milp

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

var inf = math.Inf(1)

func small() *Model {
	m := &Model{Sense: Maximize, ObjConst: 1}
	x := m.AddCol(Col{Name: "x", Upper: 4, Integer: true, Obj: 2})
	y := m.AddCol(Col{Name: "y", Lower: -inf, Upper: inf, Obj: 1})
	m.AddRow(Row{Name: "cap", Lower: -inf, Upper: 5, Coefs: []Coef{{x, 1}, {y, 1}}})
	m.AddRow(Row{Name: "floor", Lower: 0, Upper: inf, Coefs: []Coef{{y, 1}}})
	return m
}

func TestValidate(t *testing.T) {
	if err := small().Validate(); err != nil {
		t.Fatalf("valid model: %v", err)
	}
	tests := []struct {
		name string
		edit func(m *Model)
		msg  string // expected in the message
	}{
		{"NaN coefficient", func(m *Model) { m.Rows[0].Coefs[0].Val = math.NaN() }, `row 0 ("cap"): coefficient NaN`},
		{"column lb > ub", func(m *Model) { m.Cols[0].Lower = 5 }, `column 0 ("x"): lower bound 5 > upper bound 4`},
		{"row lb > ub", func(m *Model) { m.Rows[1].Lower = 1; m.Rows[1].Upper = 0 }, `row 1 ("floor")`},
		{"NaN bound", func(m *Model) { m.Cols[1].Upper = math.NaN() }, "NaN bound"},
		{"upper -Inf", func(m *Model) { m.Rows[0].Upper = math.Inf(-1) }, "upper bound is -Inf"},
		{"unknown column", func(m *Model) { m.Rows[1].Coefs[0].Col = 2 }, "unknown column index 2"},
		{"repeated column", func(m *Model) { m.Rows[0].Coefs[1].Col = 0 }, "appears twice"},
		{"infinite objective", func(m *Model) { m.Cols[1].Obj = inf }, "objective coefficient"},
		{"infinite constant", func(m *Model) { m.ObjConst = inf }, "objective constant"},
		{"sense", func(m *Model) { m.Sense = -1 }, "unknown sense"},
	}
	for _, tc := range tests {
		m := small()
		tc.edit(m)
		err := m.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v; want ErrInvalid mentioning %q", tc.name, err, tc.msg)
		}
	}
	// A column may appear in several rows, and the same row twice across rows is fine.
	m := small()
	m.AddRow(Row{Lower: -inf, Upper: 9, Coefs: []Coef{{0, 1}, {1, 3}}})
	if err := m.Validate(); err != nil {
		t.Errorf("column in several rows: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	m := small()
	for _, o := range []Options{
		{TimeLimit: -time.Second}, {RelGap: -1}, {RelGap: inf}, {Threads: -2},
		{Start: map[int]float64{2: 0}}, {Start: map[int]float64{0: inf}},
	} {
		if err := o.Validate(m); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", o, err)
		}
	}
	if err := (&Options{TimeLimit: time.Second, RelGap: 0.01, Start: map[int]float64{0: 1}, Threads: 4}).Validate(m); err != nil {
		t.Error(err)
	}
}

func TestCheckAndObjective(t *testing.T) {
	m := small()
	tests := []struct {
		x   []float64
		bad string
	}{
		{[]float64{4, 1}, ""},
		{[]float64{4.5, 0}, "x"},
		{[]float64{2.5, 0}, "integer"},
		{[]float64{4, 2}, "cap"},
		{[]float64{1, -1}, "floor"},
		{[]float64{1}, "values"},
	}
	for _, tc := range tests {
		err := m.Check(tc.x, 1e-9)
		if (err == nil) != (tc.bad == "") || err != nil && !strings.Contains(err.Error(), tc.bad) {
			t.Errorf("Check(%v) = %v, want error mentioning %q", tc.x, err, tc.bad)
		}
	}
	if got := m.Objective([]float64{4, 1}); got != 10 {
		t.Errorf("Objective = %v, want 10", got)
	}
}

func TestGapAndStatus(t *testing.T) {
	for _, tc := range []struct{ obj, bound, want float64 }{
		{100, 90, 0.1}, {-100, -110, 0.1}, {0, 0, 0}, {5, inf, inf}, {math.NaN(), 1, inf},
	} {
		if got := Gap(tc.obj, tc.bound); math.Abs(got-tc.want) > 1e-12 && got != tc.want {
			t.Errorf("Gap(%v, %v) = %v, want %v", tc.obj, tc.bound, got, tc.want)
		}
	}
	for st, want := range map[Status]error{Optimal: nil, Feasible: nil, Infeasible: ErrInfeasible, Unbounded: ErrUnbounded, NoSolution: ErrNoSolution} {
		if got := (&Result{Status: st}).Err(); got != want {
			t.Errorf("%v: Err() = %v, want %v", st, got, want)
		}
		if st.String() == "" || strings.HasPrefix(st.String(), "Status(") {
			t.Errorf("%d has no name", st)
		}
	}
	var r Result
	if r.Status != NoSolution || r.Status.HasSolution() {
		t.Error("zero Result must be NoSolution")
	}
}

func TestOptionsSearch(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{}, "cuts, heuristics, strong branching"},
		{Options{NoCuts: true, NoHeuristics: true, NoStrongBranching: true}, "no cuts, no heuristics, no strong branching"},
		{Options{NoCuts: true, NoHeuristics: true, PumpPasses: 30, NoStrongBranching: true}, "no cuts, feasibility pump (30 passes), no strong branching"},
		{Options{PumpPasses: 5}, "cuts, feasibility pump (5 passes), strong branching"}, // the pump replaces the heuristics
		{Options{NoCuts: true, NoHeuristics: true, NoStrongBranching: true, NoPresolve: true}, "no cuts, no heuristics, no strong branching, no presolve"},
		{Options{NoCuts: true, NoHeuristics: true, NoPerturbation: true}, "no cuts, no heuristics, strong branching, no perturbation"},
	} {
		if got := c.o.Search(); got != c.want {
			t.Errorf("%+v: Search = %q, want %q", c.o, got, c.want)
		}
	}
}
