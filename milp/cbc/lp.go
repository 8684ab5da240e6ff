package cbc

/*
#include <coin/Clp_C_Interface.h>
#include "clpwall.h"
*/
import "C"

import (
	"fmt"
	"math"
	"time"
	"unsafe"

	"hap/milp"
)

// An LP solved under a time limit with milp.Options.DualBoundOnStop goes
// to Clp directly, not through CBC, which runs an LP to its end whatever
// the limit: the synthesizer's bound LP, killed at the deadline, proved
// nothing. Clp stops by the limit on the wall clock (clpwall.cc), and a stopped
// dual simplex still has row duals. Whatever they are, their Lagrangian
// bound (milp's DualBound) holds, and the dual simplex raises it as it
// goes: on bert-moe's bound LP on paper-8 (batch 32), stopped at 3 and 6 s
// of its 9, 0.170 and 0.286 s against the optimum's 0.550 s. The objective
// it had reached is no bound (its artificial bounds and perturbation); the
// duals' bound is, so that is what a stopped solve reports, with status
// NoSolution. It is finite only where every column a reduced cost pulls
// upward has a finite upper bound: give an LP whose bound matters bounds
// that cut off nothing it is solved for.
//
// Two phases, since neither algorithm is the faster on every LP:
//
//  1. Half the limit, in CPU time, for Clp's initial solve (presolve, then
//     its choice of simplex), which is what CBC runs. Finished, that is
//     the answer.
//     Stopped, its duals prove nothing useful (it often chose the primal
//     simplex, whose duals are not feasible: bounds of −4e6 measured).
//  2. The rest of the limit on the wall clock for the dual simplex on
//     the model as loaded, no presolve, whose duals at the stop are the
//     original rows'.
//
// Measured on the synthesizer's bound LPs (2 cores), initial solve
// against the dual simplex as loaded: bert-moe paper-8 at batch 32 26.7
// against 9.0 s; gpt2-tiny paper-8 2.4 against 16.9 s, bert-base-tiny
// 1.2 against 6–10 s; vit paper-16 1.2 against 1.5 s.

// clpStatus values (Clp_status).
const (
	clpOptimal          = 0
	clpPrimalInfeasible = 1
	clpDualInfeasible   = 2
	clpStopped          = 3 // on iterations or time
)

// clpPrimalTolerance is the primal feasibility tolerance of both phases:
// CBC's solves get 1e-9 (parameters), and with Clp's default of 1e-7 the
// dual simplex ended gpt2-tiny's bound LP 7e-5 of its value below the
// initial solve's optimum.
const clpPrimalTolerance = 1e-9

// solveLP solves m, which has no integer columns, within limit (> 0), by
// the two phases above. Called with solveLock held, or in a worker.
func solveLP(m *milp.Model, limit time.Duration) (*milp.Result, error) {
	s, err := newClpSession(m)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Solve(limit)
}

// solveLPBelow solves m, which has no integer columns and is minimised,
// until its duals prove the optimum no lower than cutoff
// (milp.Options.Cutoff), within limit (0: none). The dual simplex raises
// its objective towards the optimum as it goes, so Clp's dual objective
// limit stops it there, often long before the optimum: the device
// search's screen, asking whether a set of devices can beat a plan it
// has, stopped bert-base's LP on all of paper-64 at batch 32 after 0.3 s
// (6,000 iterations, half its rows) with 0.116 s proven against a plan of
// 0.032 s, where the optimum (0.714 s) took 5.1 s. Clp's own test is on
// its perturbed objective, so the duals' Lagrangian bound (milp's
// DualBound) decides.
//
// The dual simplex as loaded is not always the faster way to the optimum
// where it does not stop (the note above: gpt2-tiny's LP 16.9 against
// 2.4 s by the initial solve; bert-base-tiny's 35,000 iterations, 13 s),
// so it gets cutoffIterationsPerRow iterations a row: past them, or where
// Clp stopped short of what its duals prove, the LP is solved as solveLP
// would. On the full-size models measured it ended within them either way
// (gpt2's LPs on paper-16 ran to their optima in 0.4–0.55 iterations a
// row, 0.24–1.3 s). Two ends short of the cutoff are near enough to go on
// from, with the dual simplex where it stopped (cutoffContinuations):
//
//   - Clp's perturbed objective passed the limit but the duals prove less:
//     the limit is raised by the shortfall (doubled each time) and the
//     dual simplex goes on. BERT-MoE's LP on all of paper-8 against a
//     0.366 s plan stopped at 0.359 s proven; 578 iterations more proved
//     0.378 s, where solving it again took 30 s.
//   - The budget ran out with the duals' bound within cutoffNearShare of
//     the cutoff: one budget more. The any-order LP of the same set
//     (hap plan --search-order) had 0.320 s proven when its budget ran
//     out, and crossed the cutoff 2,400 iterations later (11 s in all, 45 s
//     with the initial solve after it); GPT-2's on 16 of modern-24 (at
//     batch 24) had 0.1608 s proven against 0.198 s, and the second budget
//     took it to its optimum, 0.1610 s, where the initial solve took 2.6 s.
//
// Either way the bound returned is what the duals prove, so only the time
// to it changes; where the optimum lies below the cutoff, the dual simplex
// goes on towards it, or the initial solve follows as before, at most
// cutoffContinuations budgets later (one, by the second case alone).
func solveLPBelow(m *milp.Model, cutoff float64, limit time.Duration) (*milp.Result, error) {
	res, _, err := solveLPBelowWithin(m, cutoff, limit, cutoffIterationsPerRow)
	return res, err
}

// solveLPBelowWithin is solveLPBelow with perRow dual simplex iterations a
// row per phase; continued counts the phases it went on with
// (cutoffContinuations), for the tests.
func solveLPBelowWithin(m *milp.Model, cutoff float64, limit time.Duration, perRow float64) (res *milp.Result, continued int, err error) {
	t0 := time.Now()
	s, err := newClpSession(m)
	if err != nil {
		return nil, 0, err
	}
	defer s.Close()
	s.cutoff = cutoff
	C.Clp_setMaximumIterations(s.model, C.int(perRow*float64(len(m.Rows))+1))
	left := func() (time.Duration, bool) {
		if limit == 0 {
			return 0, true
		}
		l := limit - time.Since(t0)
		return l, l > 0
	}
	res, err = s.phase(limit, clpAsLoaded)
	if err != nil {
		return nil, 0, err
	}
	budgetSpent := func() bool {
		return res.StoppedBy == milp.LimitTime && C.Clp_hitMaximumIterations(s.model) != 0
	}
	nearSpent := false // the one more budget near the cutoff is spent
	for continued < cutoffContinuations {
		short := res.StoppedBy == milp.LimitCutoff && res.Bound < cutoff
		near := !nearSpent && budgetSpent() && res.Bound >= cutoffNearShare*cutoff
		l, ok := left()
		if !short && !near || !ok {
			break
		}
		s.cutoff = cutoff
		if short {
			s.cutoff = cutoff + (cutoff-res.Bound)*float64(int(1)<<continued)
		} else {
			nearSpent = true
		}
		if res, err = s.phase(l, clpAsLoaded); err != nil {
			return nil, continued, err
		}
		continued++
	}
	s.cutoff = cutoff
	if !budgetSpent() && res.StoppedBy != milp.LimitCutoff {
		res.Runtime = time.Since(t0)
		return res, continued, nil // solved, or stopped by the clock
	}
	if res.Bound >= cutoff {
		// Past the cutoff, by Clp's limit or within the budget.
		res.StoppedBy, res.Runtime = milp.LimitCutoff, time.Since(t0)
		return res, continued, nil
	}
	// Its budget spent, or stopped by Clp's perturbed objective short of
	// what its duals prove: solved as solveLP would.
	s.cutoff = 0
	if err := s.load(); err != nil {
		return nil, continued, err
	}
	l, ok := left()
	if !ok {
		res.StoppedBy = milp.LimitTime
		return res, continued, nil
	}
	res, err = s.Solve(l)
	return res, continued, err
}

// cutoffIterationsPerRow bounds each of solveLPBelow's dual simplex
// phases, in iterations per row of the LP, before it turns to Clp's
// initial solve. Two: BERT-MoE's LP on all of paper-8 (batch 32, 22,293
// rows, against a 0.366 s plan on one V100) crosses the cutoff after
// 29,219 iterations (12.8 s), and with one a row it had proven only
// 0.228 s, too far below the cutoff for cutoffNearShare, and went on to
// the initial solve (35 s more, to the optimum 0.550 s): hap plan took
// 55 s there, 25 s with two. The other LPs measured (gpt2-tiny on paper-8,
// gpt2 and bert-base on paper-16) cross it or fall back as they did.
const cutoffIterationsPerRow = 2

// cutoffNearShare is how near the cutoff, as a share of it, the duals'
// bound must be when the dual simplex's budget runs out for solveLPBelow
// to give it one budget more rather than solve the LP again: the two LPs
// measured that went on to the cutoff or the optimum were at 0.81 and
// 0.87; one far from it, gpt2-tiny's on paper-8 at 0.42 of its optimum
// (its cutoff above that), was still short after a second budget and
// took 14.8 s in all, where one budget and then the initial solve took
// 9.1 s.
const cutoffNearShare = 0.75

// cutoffContinuations bounds how many times solveLPBelow goes on with the
// dual simplex where it stopped short of the cutoff.
const cutoffContinuations = 4

// clpSession is an LP loaded into Clp once and solved again as its column
// bounds change (milp.LPSession, for milp.BranchChoices). Its first solve
// is the root's: Clp's initial solve without a limit, the two phases above
// with one. Every later solve is the dual simplex from the basis the last
// one left, which a change of bounds keeps dual feasible. That is no
// shortcut where a branch changes much: fixing an op class's rule in
// BERT-MoE's bound LP on paper-29 took 2–4 s, about the root's time (20
// branches: 74 s warm, 90 s each presolved from scratch). Not safe for
// concurrent use; callers hold solveLock or run in a worker.
type clpSession struct {
	m      *milp.Model
	model  unsafe.Pointer // Clp_Simplex
	sign   float64        // Clp minimises sign·objective; the duals are that minimisation's
	mat    csc
	b      bounds     // the columns' as the session's solves see them
	cols   []milp.Col // the same, for the duals' bound
	dirty  bool       // b's columns differ from what Clp has
	solved bool       // the root was solved: later solves warm-start
	// cutoff, when not 0, is the dual objective limit of the dual simplex
	// phases (solveLPBelow).
	cutoff float64
}

var _ milp.LPSession = (*clpSession)(nil)

// newClpSession loads m, which has no integer columns, into Clp. Close it.
func newClpSession(m *milp.Model) (*clpSession, error) {
	sign := 1.0
	if m.Sense == milp.Maximize {
		sign = -1
	}
	s := &clpSession{m: m, sign: sign, mat: columnMajor(m), b: boundsOf(m, sign), cols: append([]milp.Col(nil), m.Cols...)}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// load (re)loads the LP into a fresh Clp model.
func (s *clpSession) load() error {
	s.Close()
	s.model = C.Clp_newModel()
	if s.model == nil {
		return fmt.Errorf("cbc: Clp_newModel failed")
	}
	C.Clp_loadProblem(s.model, C.int(len(s.m.Cols)), C.int(len(s.m.Rows)), &s.mat.start[0], &s.mat.index[0], &s.mat.value[0],
		&s.b.colLo[0], &s.b.colUp[0], &s.b.obj[0], &s.b.rowLo[0], &s.b.rowUp[0])
	C.Clp_setLogLevel(s.model, 0)
	C.Clp_setPrimalTolerance(s.model, clpPrimalTolerance)
	s.dirty = false
	return nil
}

// Close frees Clp's model.
func (s *clpSession) Close() {
	if s.model != nil {
		C.Clp_deleteModel(s.model)
		s.model = nil
	}
}

// SetBounds changes column j's bounds for the solves that follow.
func (s *clpSession) SetBounds(j int, lower, upper float64) {
	s.b.colLo[j], s.b.colUp[j] = cbcInf(lower), cbcInf(upper)
	s.cols[j].Lower, s.cols[j].Upper = lower, upper
	s.dirty = true
}

// Solve solves the LP as its bounds now are, within limit (0: none).
func (s *clpSession) Solve(limit time.Duration) (*milp.Result, error) {
	t0 := time.Now()
	var res *milp.Result
	var err error
	switch {
	case s.solved:
		res, err = s.phase(limit, clpWarm)
	case limit > 0:
		// The initial solve gets half the limit in CPU time and the dual
		// simplex what is left of it on the wall clock. Half on the wall
		// clock alone would starve the first on a busy machine: beside
		// six busy processes on two cores, bert-base's bound LP on
		// paper-16 (a 9.3 s limit) finished its initial solve by 8.9 s
		// of wall time on the CPU half, and on the wall's half stopped
		// it at 4.7 s, leaving the dual simplex as loaded 4.7 s that
		// proved nothing. Its process's CPU time is the clock Clp had
		// alone before (clpwall.cc), so an idle machine sees no change.
		deadline := t0.Add(limit)
		res, err = s.phaseWithin(limit/2, limit, clpInitial)
		if err == nil && res.StoppedBy == milp.LimitTime && time.Now().Before(deadline) {
			if err = s.load(); err == nil {
				// What is left once the model is loaded again.
				res, err = s.phase(max(time.Until(deadline), time.Millisecond), clpAsLoaded)
			}
		}
	default:
		res, err = s.phase(0, clpInitial)
	}
	if err != nil {
		return nil, err
	}
	s.solved = s.solved || res.Status == milp.Optimal
	res.Runtime = time.Since(t0)
	return res, nil
}

// clpRun is how a phase runs Clp.
type clpRun int8

const (
	clpInitial  clpRun = iota // Clp's initial solve: presolve, its choice of simplex
	clpAsLoaded               // the dual simplex on the model as loaded, no presolve
	clpWarm                   // the dual simplex from the last solve's basis
)

// phase is one Clp solve of the session's LP within limit (0: none) on
// the wall clock.
func (s *clpSession) phase(limit time.Duration, run clpRun) (*milp.Result, error) {
	return s.phaseWithin(0, limit, run)
}

// phaseWithin is phase within cpu of its process's CPU time as well (0:
// none), whichever comes first.
func (s *clpSession) phaseWithin(cpu, wall time.Duration, run clpRun) (*milp.Result, error) {
	model := s.model
	if s.dirty {
		C.Clp_chgColumnLower(model, &s.b.colLo[0])
		C.Clp_chgColumnUpper(model, &s.b.colUp[0])
		s.dirty = false
	}
	seconds := func(d time.Duration) C.double {
		if d > 0 {
			return C.double(d.Seconds())
		}
		return -1 // none
	}
	C.hapClpSetTimeLimits(unsafe.Pointer(model), seconds(cpu), seconds(wall))
	dualLimit := math.MaxFloat64 // Clp's default: none
	if s.cutoff != 0 && run != clpInitial {
		dualLimit = s.sign * s.cutoff
	}
	C.Clp_setDualObjectiveLimit(model, C.double(dualLimit))
	t0 := time.Now()
	if run == clpInitial {
		C.Clp_initialSolve(model)
	} else {
		C.Clp_dual(model, 0)
	}
	n, nr := len(s.m.Cols), len(s.m.Rows)
	res := &milp.Result{Objective: math.NaN(), Gap: math.Inf(1), Runtime: time.Since(t0)}
	switch st := C.Clp_status(model); st {
	case clpOptimal:
		values := goFloats(C.Clp_getColSolution(model), n)
		res.Status, res.Values = milp.Optimal, values
		res.Objective = s.m.Objective(values)
		res.Bound, res.Gap = res.Objective, 0
	case clpPrimalInfeasible, clpDualInfeasible:
		if st == clpPrimalInfeasible && s.cutoff != 0 && run != clpInitial && C.Clp_isDualObjectiveLimitReached(model) != 0 {
			// Not infeasible: the dual simplex passed the cutoff.
			c := *s.m
			c.Cols = s.cols
			res.Status, res.StoppedBy = milp.NoSolution, milp.LimitCutoff
			res.Bound = c.DualBound(goFloats(C.Clp_dualRowSolution(model), nr))
			break
		}
		// Dual infeasible can hide a primal infeasible one too: unbounded
		// only if a zero objective is solvable.
		res.Status = milp.Infeasible
		res.Bound = math.Inf(int(s.sign))
		if st == clpDualInfeasible && clpFeasible(model, n) {
			res.Status, res.Bound = milp.Unbounded, math.Inf(-int(s.sign))
		}
	case clpStopped:
		res.Status, res.StoppedBy, res.Bound = milp.NoSolution, milp.LimitTime, math.Inf(-int(s.sign))
		if run != clpInitial {
			// The bounds the duals are for: the session's, which a
			// branch may have changed.
			c := *s.m
			c.Cols = s.cols
			res.Bound = c.DualBound(goFloats(C.Clp_dualRowSolution(model), nr))
		}
	default:
		return nil, fmt.Errorf("cbc: Clp stopped with status %d (numerical difficulties)", int(st))
	}
	return res, nil
}

// clpFeasible re-solves the LP in model with a zero objective by the
// primal simplex: feasible means a dual-infeasible LP is unbounded.
func clpFeasible(model unsafe.Pointer, n int) bool {
	zero := make([]C.double, n+1)
	C.Clp_chgObjCoefficients(model, &zero[0])
	C.Clp_primal(model, 0)
	return C.Clp_status(model) == clpOptimal
}
