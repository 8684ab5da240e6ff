package cbc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"hap/milp"
)

// An isolated solve answers every known problem exactly as an in-process
// one does, status, bound and values included (infeasible and unbounded
// models too).
func TestIsolatedMatchesInProcess(t *testing.T) {
	for _, tc := range knownProblems() {
		t.Run(tc.name, func(t *testing.T) {
			in, err := Solver{}.Solve(context.Background(), tc.m, milp.Options{})
			if err != nil {
				t.Fatal(err)
			}
			out, err := Solver{Isolated: true}.Solve(context.Background(), tc.m, milp.Options{})
			if err != nil {
				t.Fatal(err)
			}
			in.Runtime, out.Runtime = 0, 0
			if !reflect.DeepEqual(in, out) && !(in.Status == out.Status && in.Values == nil && out.Values == nil) {
				t.Errorf("isolated %+v, in process %+v", out, in)
			}
		})
	}
}

// When CBC aborts in the solver process, an isolated solve returns an
// error naming the failure, and the program goes on: the next solve works.
func TestIsolatedSurvivesAbort(t *testing.T) {
	m := knapsack([]float64{3, 4, 5}, []float64{4, 5, 6}, 8)
	t.Setenv(workerAbortEnv, "1")
	_, err := Solver{Isolated: true}.Solve(context.Background(), m, milp.Options{})
	if !errors.Is(err, ErrSolverProcess) || !strings.Contains(err.Error(), "aborting as asked") {
		t.Fatalf("Solve with an aborting solver process: %v, want ErrSolverProcess with its message", err)
	}
	t.Setenv(workerAbortEnv, "")
	res, err := Solver{Isolated: true}.Solve(context.Background(), m, milp.Options{})
	if err != nil || res.Status != milp.Optimal || res.Objective != 10 {
		t.Fatalf("the next isolated solve: %+v, %v; want optimal 10", res, err)
	}
}

// Cancelling the context kills the solver process.
func TestIsolatedCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (Solver{Isolated: true}).Solve(ctx, knapsack([]float64{1}, []float64{1}, 1), milp.Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Solve after cancel: %v, want context.Canceled", err)
	}
}

// A worker whose parent dies exits: watchParent calls exit once the parent
// process ID changes (the worker handed to init), and not before.
func TestWatchParentExitsWhenOrphaned(t *testing.T) {
	var mu sync.Mutex
	parent, checks := 100, 0
	ppid := func() int {
		mu.Lock()
		defer mu.Unlock()
		checks++
		if checks == 3 {
			parent = 1 // the parent died: reparented to init
		}
		return parent
	}
	exited := make(chan int, 1)
	go watchParent(100, time.Millisecond, ppid, func() {
		mu.Lock()
		defer mu.Unlock()
		exited <- checks
	})
	select {
	case n := <-exited:
		if n != 3 {
			t.Errorf("exit after %d checks, want 3 (when the parent changed)", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watchParent did not exit when the parent changed")
	}
}

// An isolated solve does not wait for an in-process one: its child has
// CBC to itself. (It used to take the process-wide lock, so the
// synthesizer's bound LP waited for the joint MILP and, under a time
// limit, past its deadline.)
func TestIsolatedRunsBesideAnInProcessSolve(t *testing.T) {
	solveLock <- struct{}{} // an in-process solve under way
	defer func() { <-solveLock }()
	// The deadline is only how long the test waits for the answer: a
	// solve that waited for the lock would fail with it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Solver{Isolated: true}.Solve(ctx, knapsack([]float64{3, 4, 5}, []float64{4, 5, 6}, 8), milp.Options{})
	if err != nil || res.Status != milp.Optimal || res.Objective != 10 {
		t.Fatalf("isolated solve while the lock is held: %+v, %v; want optimal 10", res, err)
	}
}

// coverWithSlack is a covering problem (minimise the cost of items whose
// weights reach a demand, a continuous column making up the rest at a
// price) whose LP relaxation is fractional: a search of a node or two
// from its optimum as the start stops at the node limit with the start
// its incumbent and a bound below it.
func coverWithSlack() *milp.Model {
	m := &milp.Model{}
	row := milp.Row{Name: "demand", Lower: 97, Upper: inf}
	for i := range 24 {
		w := float64(7 + (i*37)%23)
		j := m.AddCol(milp.Col{Name: fmt.Sprintf("take%d", i), Upper: 1, Integer: true, Obj: w + float64((i*11)%7)})
		row.Coefs = append(row.Coefs, milp.Coef{Col: j, Val: w})
	}
	y := m.AddCol(milp.Col{Name: "rest", Upper: 5, Obj: 3})
	row.Coefs = append(row.Coefs, milp.Coef{Col: y, Val: 1})
	m.AddRow(row)
	return m
}

// TestSearchEndAnswersAsCBC checks the answer a worker gives where CBC's
// search from a whole start ends at its node limit with that start still
// the incumbent (searchend.go): in process, where the answer is recorded
// and CBC runs on to its end, the answer is CBC's own, status, objective,
// bound, nodes and integer values; and an isolated solve, which answers
// so and exits, gives what an in-process one does.
func TestSearchEndAnswersAsCBC(t *testing.T) {
	m := coverWithSlack()
	best, err := Solver{}.Solve(context.Background(), m, milp.Options{})
	if err != nil || best.Status != milp.Optimal {
		t.Fatalf("solving the cover: %+v, %v", best, err)
	}
	start := map[int]float64{}
	for j, c := range m.Cols {
		if c.Integer {
			start[j] = best.Values[j]
		}
	}
	opt := milp.Options{NodeLimit: 2, NoHeuristics: true, NoCuts: true, NoStrongBranching: true, NoPresolve: true, Start: start}
	var answered *milp.Result
	var res *milp.Result
	captureStdout(t, func() { // CBC logs at level 1 while watched
		solveLock <- struct{}{}
		defer func() { <-solveLock }()
		res, err = solveAnswering(m, opt, 0, func(r *milp.Result) { answered = r })
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != milp.Feasible || res.StoppedBy != milp.LimitNodes || !(res.Bound < res.Objective) {
		t.Fatalf("CBC from the optimum with 2 nodes: %+v; want stopped at the node limit with a bound below", res)
	}
	if answered == nil {
		t.Fatal("no answer at the end of the partial search")
	}
	same := func(a, b *milp.Result) bool {
		if a.Status != b.Status || a.StoppedBy != b.StoppedBy || a.Nodes != b.Nodes || a.Bound != b.Bound ||
			math.Abs(a.Objective-b.Objective) > 1e-9*math.Max(1, math.Abs(b.Objective)) {
			return false
		}
		for j, c := range m.Cols {
			if c.Integer && a.Values[j] != b.Values[j] {
				return false
			}
		}
		return true
	}
	if !same(answered, res) {
		t.Errorf("answered %+v, CBC %+v", answered, res)
	}
	iso, err := Solver{Isolated: true}.Solve(context.Background(), m, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !same(iso, res) {
		t.Errorf("isolated %+v, in process %+v", iso, res)
	}
}
