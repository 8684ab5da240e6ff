package cbc

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"hap/solve/milp"
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
