package cbc

/*
#include <coin/Clp_C_Interface.h>
*/
import "C"

import (
	"fmt"
	"math"
	"time"
	"unsafe"

	"hap/solve/milp"
)

// An LP solved under a time limit with milp.Options.DualBoundOnStop goes
// to Clp directly, not through CBC, which runs an LP to its end whatever
// the limit: the synthesizer's bound LP, killed at the deadline, proved
// nothing. Clp stops on its clock (Clp_setMaximumSeconds), and a stopped
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
//  1. Half the limit for Clp's initial solve (presolve, then its choice of
//     simplex), which is what CBC runs. Finished, that is the answer.
//     Stopped, its duals prove nothing useful (it often chose the primal
//     simplex, whose duals are not feasible: bounds of −4e6 measured).
//  2. The rest for the dual simplex on the model as loaded, no presolve,
//     whose duals at the stop are the original rows'.
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
	t0 := time.Now()
	sign := 1.0 // Clp minimises sign·objective; the duals are that minimisation's
	if m.Sense == milp.Maximize {
		sign = -1
	}
	mat, b := columnMajor(m), boundsOf(m, sign) // built once for both phases
	res, err := clpSolve(m, mat, b, sign, limit/2, false)
	if err == nil && res.StoppedBy == milp.LimitTime {
		res, err = clpSolve(m, mat, b, sign, max(limit-time.Since(t0), time.Millisecond), true)
	}
	if res != nil {
		res.Runtime = time.Since(t0)
	}
	return res, err
}

// clpSolve is one Clp solve of m (its matrix mat, its bounds b with the
// objective times sign) within limit: its initial solve, or with asLoaded
// its dual simplex without presolve.
func clpSolve(m *milp.Model, mat csc, b bounds, sign float64, limit time.Duration, asLoaded bool) (*milp.Result, error) {
	n, nr := len(m.Cols), len(m.Rows)
	model := C.Clp_newModel()
	if model == nil {
		return nil, fmt.Errorf("cbc: Clp_newModel failed")
	}
	defer C.Clp_deleteModel(model)
	C.Clp_loadProblem(model, C.int(n), C.int(nr), &mat.start[0], &mat.index[0], &mat.value[0],
		&b.colLo[0], &b.colUp[0], &b.obj[0], &b.rowLo[0], &b.rowUp[0])
	C.Clp_setLogLevel(model, 0)
	C.Clp_setPrimalTolerance(model, clpPrimalTolerance)
	C.Clp_setMaximumSeconds(model, C.double(limit.Seconds()))
	t0 := time.Now()
	if asLoaded {
		C.Clp_dual(model, 0)
	} else {
		C.Clp_initialSolve(model)
	}
	res := &milp.Result{Objective: math.NaN(), Gap: math.Inf(1), Runtime: time.Since(t0)}
	switch st := C.Clp_status(model); st {
	case clpOptimal:
		values := goFloats(C.Clp_getColSolution(model), n)
		res.Status, res.Values = milp.Optimal, values
		res.Objective = m.Objective(values)
		res.Bound, res.Gap = res.Objective, 0
	case clpPrimalInfeasible, clpDualInfeasible:
		// Dual infeasible can hide a primal infeasible one too: unbounded
		// only if a zero objective is solvable.
		res.Status = milp.Infeasible
		res.Bound = math.Inf(int(sign))
		if st == clpDualInfeasible && clpFeasible(model, n) {
			res.Status, res.Bound = milp.Unbounded, math.Inf(-int(sign))
		}
	case clpStopped:
		res.Status, res.StoppedBy, res.Bound = milp.NoSolution, milp.LimitTime, math.Inf(-int(sign))
		if asLoaded {
			res.Bound = m.DualBound(goFloats(C.Clp_dualRowSolution(model), nr))
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
