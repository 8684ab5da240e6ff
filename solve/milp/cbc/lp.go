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

// An LP solved as loaded (milp.Options.NoPresolve on a model without
// integer columns) goes to Clp directly, by its dual simplex, not through
// CBC. Two things come of it.
//
// Speed, on some LPs: the synthesizer's bound LP (encode.TransportLP) of
// bert-moe on paper-8 at batch 32 took 26.7 s through CBC (Clp's initial
// solve, with presolve) and 9.0 s so; at batch 256, 11.1 s and 6.3 s. On
// others it is slower (bert-base-tiny on paper-8: 2.2 → 6.0 s), so it is
// the caller's choice.
//
// A bound when the clock stops it. CBC does not time-limit an LP; Clp's
// dual simplex does (Clp_setMaximumSeconds), and, stopped, it still has
// row duals. Whatever they are, their Lagrangian bound (milp's DualBound)
// holds, and the dual simplex raises it as it goes: on that bert-moe LP,
// stopped at 3 and 6 s of its 9, 0.170 and 0.286 s against the optimum's
// 0.550 s. The objective it had reached is no bound (its fake bounds and
// perturbation); the duals' bound is, so that is what a stopped solve
// reports, with status NoSolution. It is finite only where every column a
// reduced cost pulls upward has a finite upper bound: give an LP whose
// bound matters bounds that cut off nothing it is solved for.

// clpStatus values (Clp_status).
const (
	clpOptimal          = 0
	clpPrimalInfeasible = 1
	clpDualInfeasible   = 2
	clpStopped          = 3 // on iterations or time
)

// solveLP solves m, which has no integer columns, with Clp's dual simplex
// and no presolve, within limit (0: none). Called with solveLock held, or
// in a worker.
func solveLP(m *milp.Model, limit time.Duration) (*milp.Result, error) {
	n, nr := len(m.Cols), len(m.Rows)
	mat := columnMajor(m)
	sign := 1.0 // Clp minimises sign·objective; the duals are that minimisation's
	if m.Sense == milp.Maximize {
		sign = -1
	}
	colLo, colUp, obj := make([]C.double, n), make([]C.double, n), make([]C.double, n)
	for j, c := range m.Cols {
		colLo[j], colUp[j], obj[j] = cbcInf(c.Lower), cbcInf(c.Upper), C.double(sign*c.Obj)
	}
	rowLo, rowUp := make([]C.double, nr+1), make([]C.double, nr+1)
	for i, r := range m.Rows {
		rowLo[i], rowUp[i] = cbcInf(r.Lower), cbcInf(r.Upper)
	}
	model := C.Clp_newModel()
	if model == nil {
		return nil, fmt.Errorf("cbc: Clp_newModel failed")
	}
	defer C.Clp_deleteModel(model)
	C.Clp_loadProblem(model, C.int(n), C.int(nr), &mat.start[0], &mat.index[0], &mat.value[0],
		&colLo[0], &colUp[0], &obj[0], &rowLo[0], &rowUp[0])
	C.Clp_setLogLevel(model, 0)
	if limit > 0 {
		C.Clp_setMaximumSeconds(model, C.double(limit.Seconds()))
	}

	t0 := time.Now()
	C.Clp_dual(model, 0)
	res := &milp.Result{Objective: math.NaN(), Gap: math.Inf(1)}
	switch st := C.Clp_status(model); st {
	case clpOptimal:
		values := goFloats(C.Clp_getColSolution(model), n)
		res.Status, res.Values = milp.Optimal, values
		res.Objective = m.Objective(values)
		res.Bound, res.Gap = res.Objective, 0
	case clpPrimalInfeasible, clpDualInfeasible:
		// The dual simplex can call a problem dual infeasible whose primal
		// is infeasible too: unbounded only if a zero objective is solvable.
		res.Status = milp.Infeasible
		if st == clpDualInfeasible && clpFeasible(model, n) {
			res.Status = milp.Unbounded
		}
		res.Bound = math.Inf(int(sign))
		if res.Status == milp.Unbounded {
			res.Bound = math.Inf(-int(sign))
		}
	case clpStopped:
		res.Status, res.StoppedBy = milp.NoSolution, milp.LimitTime
		res.Bound = m.DualBound(goFloats(C.Clp_dualRowSolution(model), nr))
	default:
		return nil, fmt.Errorf("cbc: Clp's dual simplex stopped with status %d (numerical difficulties)", int(st))
	}
	res.Runtime = time.Since(t0)
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
