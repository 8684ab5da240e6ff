// Package cbc is hap's MILP backend over COIN-OR CBC 2.10 (Debian's coinor-libcbc-dev), through cgo
// and CBC's C interface (coin/Cbc_C_Interface.h, linked as CbcSolver via pkg-config cbc). It owns
// the translation of a milp.Model into a CBC model, the solve, and the reading of CBC's status,
// solution and bound back into a milp.Result.
//
// It imports nothing of hap except package milp (whose Solver interface it implements); callers
// should depend on milp.Solver, not on this package.
//
// # How CBC is driven
//
//   - Every solve builds a fresh CBC model, loads the whole matrix at once (Cbc_loadProblem), solves,
//     reads everything it needs, and deletes the model. Nothing CBC-side outlives a call.
//     Cbc_addCol/Cbc_addRow are not used, so their abort on a NULL name cannot happen; Cbc_addRow
//     would also abort on ranged rows, which Cbc_loadProblem takes as lower/upper pairs.
//   - CBC is not thread-safe (its solver keeps global state), so all solves in the process are
//     serialised by one package-level lock; Solve may be called from any number of goroutines. An
//     isolated solve (Solver.Isolated) runs in a child process with CBC to itself and takes no lock,
//     so it runs beside the in-process one.
//   - CBC's log is switched off (Cbc_setLogLevel 0 and the "log"/"slogLevel" parameters 0), so
//     nothing is printed on stdout; the tests check this. The one exception is an isolated solve's
//     worker searching from a whole start: it logs at level 1, to its stdout (the null device), for
//     its message callback to see the search end and answer without CBC's re-solve (searchend.go).
//   - Models without integer columns are solved by CBC as a plain LP (Clp's initial solve). CBC
//     applies time limits to branch and bound only, so such a solve is not time-limited. With
//     Options.DualBoundOnStop and a time limit an LP goes to Clp directly instead (lp.go), which
//     honours the limit and, stopped by it, reports its duals' Lagrangian bound. With
//     Options.Choices an LP is branched on them (branch.go, milp.BranchChoices) over a Clp
//     session that warm-starts each branch (lp.go).
//   - A MIP start goes by column index (Cbc_setMIPStartI), for CBC to complete; in a solve without
//     presolve, one that names every integer column is completed here instead, its continuous
//     columns at the optimum of the LP it leaves (Clp with its presolve), and handed to CBC whole
//     (Cbc_setInitialSolution): CBC would solve that LP without presolve, seconds slower on the
//     planner's large models (completeStart).
//   - Options.Threads > 1 runs CBC's parallel branch and bound in its repeatable mode.
//
// # Cancellation
//
// CBC's C interface has no way to abort a running solve in process. Solve honours ctx before starting
// and while waiting for the process-wide lock, and turns a ctx deadline into a time limit (the tighter
// of it and Options.TimeLimit), so a deadline stops the search and returns the incumbent. A
// cancellation without a deadline takes effect only once the running solve ends, except in an
// isolated solve, whose child process is killed when ctx ends.
//
// Time limits are on the wall clock: CBC's search gets "timeMode elapsed", and Clp's LPs a wall-clock
// limit through clpwall.cc (the C interface has only the CPU-time one; lp.go's first phase keeps a
// CPU-time half within it, so that a busy machine does not starve that phase). Both solvers
// otherwise count their process's CPU time, so that an isolated worker given part of a core ran far
// past its deadline and was killed with nothing, and an in-process solve beside busy threads stopped
// early (TestTimeLimitsAreWallClock). CBC's root LP still does not look at its clock.
package cbc

/*
#cgo pkg-config: cbc
#include <stdio.h>
#include <stdlib.h>
#include <coin/Cbc_C_Interface.h>
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"hap/milp"
)

// Version returns the version of the linked CBC library, for example "2.10.8".
func Version() string {
	return C.GoString(C.Cbc_getVersion())
}

// solveLock serialises every call into CBC in this process: CBC 2.10 is not thread-safe (CbcMain1
// and Clp use static state), so this one piece of package-level state is required for Solver to be
// safe for concurrent use. It is a channel so that waiting for it can be abandoned when ctx ends.
var solveLock = make(chan struct{}, 1)

// Solver is the CBC backend. The zero value is ready to use and safe for concurrent use.
type Solver struct {
	// Isolated runs each solve in a child process (see isolate.go), so that CBC aborting is an
	// error (wrapping ErrSolverProcess) rather than the end of the program.
	Isolated bool
}

var _ milp.Solver = Solver{}

// Solve solves m with CBC. See milp.Solver for the contract and the package documentation for how
// ctx is honoured.
func (s Solver) Solve(ctx context.Context, m *milp.Model, opt milp.Options) (*milp.Result, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if err := opt.Validate(m); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cbc: %w", err)
	}
	if len(m.Cols) == 0 {
		return solveEmpty(m), nil
	}
	if s.Isolated {
		// The child has CBC to itself, so it takes no lock: an isolated
		// solve runs beside an in-process one, or another isolated one
		// (the synthesizer's bound LP beside its joint MILP). Holding the
		// lock, the bound LP waited for the joint MILP to end, costing
		// its whole time after it, and under a time limit it waited past
		// the deadline and gave no bound at all.
		limit, err := timeLimit(ctx, opt)
		if err != nil {
			return nil, err
		}
		return solveIsolated(ctx, m, opt, limit)
	}
	select {
	case solveLock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("cbc: waiting for the solver: %w", ctx.Err())
	}
	defer func() { <-solveLock }()
	limit, err := timeLimit(ctx, opt) // after the wait for the lock
	if err != nil {
		return nil, err
	}
	// CBC runs on this thread for the whole solve; keep the goroutine there so that nothing else
	// is scheduled onto a thread that is deep in C (not required for correctness).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return solve(m, opt, limit)
}

// timeLimit is CBC's time limit for a solve starting now: opt's, or
// what is left of ctx's deadline if that is sooner (0: none).
func timeLimit(ctx context.Context, opt milp.Options) (time.Duration, error) {
	limit := opt.TimeLimit
	if dl, ok := ctx.Deadline(); ok {
		rem := time.Until(dl)
		if rem <= 0 {
			return 0, fmt.Errorf("cbc: %w", context.DeadlineExceeded)
		}
		if limit == 0 || rem < limit {
			limit = rem
		}
	}
	return limit, nil
}

// solveEmpty handles a model without columns, which CBC does not accept: every row's activity is 0.
func solveEmpty(m *milp.Model) *milp.Result {
	for _, r := range m.Rows {
		if r.Lower > 0 || r.Upper < 0 {
			b := math.Inf(1)
			if m.Sense == milp.Maximize {
				b = math.Inf(-1)
			}
			return &milp.Result{Status: milp.Infeasible, Objective: math.NaN(), Bound: b, Gap: math.Inf(1)}
		}
	}
	return &milp.Result{Status: milp.Optimal, Objective: m.ObjConst, Bound: m.ObjConst, Values: []float64{}}
}

// cbcInf maps ±Inf to CBC's infinity (COIN_DBL_MAX = DBL_MAX).
func cbcInf(f float64) C.double {
	switch {
	case math.IsInf(f, 1):
		return C.double(math.MaxFloat64)
	case math.IsInf(f, -1):
		return C.double(-math.MaxFloat64)
	}
	return C.double(f)
}

// cstrings holds C copies of Go strings until free.
type cstrings []*C.char

func (s *cstrings) add(v string) *C.char {
	c := C.CString(v)
	*s = append(*s, c)
	return c
}

func (s cstrings) free() {
	for _, c := range s {
		C.free(unsafe.Pointer(c))
	}
}

// csc is a model's matrix in column-major (compressed sparse column) form,
// as CBC and Clp load it.
type csc struct {
	start []C.CoinBigIndex // column j's entries are start[j] … start[j+1]−1
	index []C.int          // their rows
	value []C.double
}

// columnMajor is m's matrix in CSC form.
func columnMajor(m *milp.Model) csc {
	n := len(m.Cols)
	start := make([]C.CoinBigIndex, n+1)
	for _, r := range m.Rows {
		for _, e := range r.Coefs {
			start[e.Col+1]++
		}
	}
	for j := 0; j < n; j++ {
		start[j+1] += start[j]
	}
	nnz := int(start[n])
	index := make([]C.int, nnz+1) // +1: never pass a pointer to an empty slice
	value := make([]C.double, nnz+1)
	next := make([]C.CoinBigIndex, n)
	copy(next, start[:n])
	for i, r := range m.Rows {
		for _, e := range r.Coefs {
			k := next[e.Col]
			index[k], value[k] = C.int(i), C.double(e.Val)
			next[e.Col]++
		}
	}
	return csc{start, index, value}
}

// bounds are a model's column and row bounds and objective as CBC and Clp
// load them.
type bounds struct {
	colLo, colUp, obj, rowLo, rowUp []C.double
}

// boundsOf is m's bounds, with its objective times sign.
func boundsOf(m *milp.Model, sign float64) bounds {
	n, nr := len(m.Cols), len(m.Rows)
	b := bounds{make([]C.double, n), make([]C.double, n), make([]C.double, n), make([]C.double, nr+1), make([]C.double, nr+1)}
	for j, c := range m.Cols {
		b.colLo[j], b.colUp[j], b.obj[j] = cbcInf(c.Lower), cbcInf(c.Upper), C.double(sign*c.Obj)
	}
	for i, r := range m.Rows {
		b.rowLo[i], b.rowUp[i] = cbcInf(r.Lower), cbcInf(r.Upper)
	}
	return b
}

// solve runs one CBC solve (one Clp solve for an LP solved as loaded,
// lp.go). Called with solveLock held.
func solve(m *milp.Model, opt milp.Options, limit time.Duration) (*milp.Result, error) {
	return solveAnswering(m, opt, limit, nil)
}

// solveAnswering is solve in an isolated solve's worker: answer, when not
// nil, replies for CBC and exits the process where a search from a whole
// start ends at a limit with that start its incumbent (searchend.go).
func solveAnswering(m *milp.Model, opt milp.Options, limit time.Duration, answer func(*milp.Result)) (*milp.Result, error) {
	switch {
	case len(opt.Choices) > 0:
		return branchLP(m, opt, limit) // branch.go
	case opt.Cutoff != 0 && m.Sense == milp.Minimize && !m.HasIntegers():
		return solveLPBelow(m, opt.Cutoff, limit) // lp.go
	case opt.DualBoundOnStop && limit > 0 && !m.HasIntegers():
		return solveLP(m, limit) // lp.go
	}
	n, nr := len(m.Cols), len(m.Rows)
	var whole []float64 // the start completed, when it names every integer column
	if len(opt.Start) > 0 && m.HasIntegers() && opt.NoPresolve {
		whole = completeStart(m, opt.Start, limit)
	}
	mat := columnMajor(m)
	b := boundsOf(m, 1)
	colLo, colUp, obj, rowLo, rowUp := b.colLo, b.colUp, b.obj, b.rowLo, b.rowUp

	model := C.Cbc_newModel()
	if model == nil {
		return nil, fmt.Errorf("cbc: Cbc_newModel failed")
	}
	defer C.Cbc_deleteModel(model)
	var strs cstrings
	defer func() { strs.free() }()

	C.Cbc_loadProblem(model, C.int(n), C.int(nr), &mat.start[0], &mat.index[0], &mat.value[0],
		&colLo[0], &colUp[0], &obj[0], &rowLo[0], &rowUp[0])
	// No Cbc_setColName: in CBC 2.10.8, naming columns after
	// Cbc_loadProblem corrupts memory on some models (Cbc_solve then
	// segfaults; reproduced on a 149×155 planner MILP). MIP starts go by
	// index (Cbc_setMIPStartI), so names are not needed.
	for j, c := range m.Cols {
		if c.Integer {
			C.Cbc_setInteger(model, C.int(j))
		}
	}
	if m.Sense == milp.Maximize {
		C.Cbc_setObjSense(model, -1)
	}

	params := parameters(opt, limit)
	if answer != nil && whole != nil && m.Sense == milp.Minimize {
		// CBC prints the end of a partial search at log level 1 (to the
		// worker's stdout, the null device), and the handler sees only
		// what it prints.
		defer watchSearchEnd(model, &searchEnd{m: m, opt: opt, start: whole, startObj: m.Objective(whole) - m.ObjConst, began: time.Now(), answer: answer})()
		C.Cbc_setLogLevel(model, 1)
		params = append(params, [2]string{"log", "1"})
	} else {
		// Quiet: the model's log level, and the equivalent command-line parameters for CbcMain1.
		C.Cbc_setLogLevel(model, 0)
	}
	if limit > 0 {
		C.Cbc_setMaximumSeconds(model, C.double(limit.Seconds()))
	}
	if opt.NodeLimit > 0 {
		C.Cbc_setMaximumNodes(model, C.int(opt.NodeLimit))
	}
	if opt.RelGap > 0 {
		C.Cbc_setAllowableFractionGap(model, C.double(opt.RelGap))
	}
	for _, p := range params {
		C.Cbc_setParameter(model, strs.add(p[0]), strs.add(p[1]))
	}
	switch {
	case whole != nil:
		sol := make([]C.double, n)
		for j, v := range whole {
			sol[j] = C.double(v)
		}
		C.Cbc_setInitialSolution(model, &sol[0])
	case len(opt.Start) > 0:
		idx := make([]C.int, 0, len(opt.Start))
		vals := make([]C.double, 0, len(opt.Start))
		for j := 0; j < n; j++ { // column order: deterministic
			if v, ok := opt.Start[j]; ok {
				idx = append(idx, C.int(j))
				vals = append(vals, C.double(v))
			}
		}
		C.Cbc_setMIPStartI(model, C.int(len(idx)), &idx[0], &vals[0])
	}

	t0 := time.Now()
	C.Cbc_solve(model)
	res := &milp.Result{}
	err := read(model, m, !m.HasIntegers(), res)
	res.Runtime = time.Since(t0)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// completeStart is the whole solution a MIP start stands for: its
// integer columns at its values and the others at the optimum of the LP
// those leave, solved here by Clp with its presolve. Nil when the start
// leaves an integer column out or that LP has no optimum; the start then
// goes to CBC as it is (Cbc_setMIPStartI), to complete itself.
//
// Why: CBC completes a MIP start by solving that LP itself, under the
// solve's presolve setting, and the bare searches turn presolve off
// (jointOptions in package solve). There its primal simplex took 2–4 s of
// a 1-node solve's 6.4 s on GPT-2's joint MILP over modern-24 (16,238
// rows), where the presolved LP takes 0.1 s. Handed the whole solution
// (Cbc_setInitialSolution, which checks it against the model), CBC starts
// from the same incumbent: 1 node 6.4 → 3.3 s, 10 nodes 8.7 → 6.0 s, the
// same answer. With presolve on, CBC's own completion is as quick and the
// check is work on top (VGG19 on paper-16, whose lengths steps presolve:
// `hap plan` 3.7–4.1 → 4.1–4.2 s), so only solves without presolve
// (Options.NoPresolve) are completed here.
func completeStart(m *milp.Model, start map[int]float64, limit time.Duration) []float64 {
	lp := *m
	lp.Cols = slices.Clone(m.Cols)
	for j := range lp.Cols {
		c := &lp.Cols[j]
		if !c.Integer {
			continue
		}
		v, ok := start[j]
		if !ok {
			return nil
		}
		v = math.Round(v) // as CBC reads a start: integers are integral
		c.Lower, c.Upper, c.Integer = v, v, false
	}
	res, err := solve(&lp, milp.Options{Threads: 1}, limit)
	if err != nil || res.Status != milp.Optimal || len(res.Values) != len(m.Cols) {
		return nil
	}
	return res.Values
}

// parameters are the command-line parameters CbcMain1 gets for a solve
// under opt, limit the time left (0: none), in the order given.
func parameters(opt milp.Options, limit time.Duration) [][2]string {
	var ps [][2]string
	set := func(name, value string) { ps = append(ps, [2]string{name, value}) }
	set("log", "0")
	set("slogLevel", "0")
	if limit > 0 {
		set("timeMode", "elapsed")
		set("seconds", strconv.FormatFloat(limit.Seconds(), 'f', -1, 64))
	}
	if opt.NodeLimit > 0 {
		set("maxNodes", strconv.Itoa(opt.NodeLimit))
	}
	if opt.RelGap > 0 {
		set("ratioGap", strconv.FormatFloat(opt.RelGap, 'g', -1, 64))
	}
	if opt.Threads > 1 {
		// 100+n: n threads with a repeatable search (CBC's convention).
		set("threads", strconv.Itoa(100+opt.Threads))
	}
	// No integer preprocessing, ever. CBC 2.10.8's preprocessing
	// segfaults in Cbc_solve when a MIP start meets it on some models
	// (reproduced deterministically: the synthesizer's timeline MILP of
	// bert-base-tiny on paper-16), crashed on models with many pinned
	// columns, and once left the heap corrupt so that a later
	// Cbc_newModel threw std::bad_alloc (the exhaustive test, solving
	// pinned models without starts). Our models are small enough to
	// solve without it.
	set("preprocess", "off")
	// A primal feasibility tolerance of 1e-9, not CBC's 1e-7: the
	// planner's big-M rows (M up to twice the step, in 0.1 µs units) left
	// CBC proving "optimal" a plan 0.07% slower than one it had cut off
	// (two of the exhaustive oracle's 200 cases, once the backward
	// timeline gained its overlap rows); with 1e-9 all 200 match.
	set("primalTolerance", "1e-9")
	// Cut generation and the primal heuristics dominate the root of the
	// synthesizer's large models (seconds per pass, 6 s of 7 on
	// vgg19-tiny's); without them a node limit bounds the work.
	if opt.NoCuts {
		set("cuts", "off")
	}
	if opt.NoHeuristics {
		set("heur", "off")
	}
	if opt.NoStrongBranching {
		set("strongBranching", "0")
	}
	if opt.NoPresolve {
		// CbcMain1's LP presolve of the root; a pure LP is solved by
		// Clp's initialSolve, which these parameters do not reach.
		set("presolve", "off")
	}
	if opt.NoPerturbation {
		set("perturbation", "off")
	}
	if opt.PumpPasses > 0 {
		set("heur", "off")
		set("feas", "on")
		set("passF", strconv.Itoa(opt.PumpPasses))
	}
	return ps
}

// cbcHuge: CBC reports "no bound" as ±DBL_MAX (or other huge values); anything beyond this is
// treated as infinite.
const cbcHuge = 1e300

// read turns CBC's state after Cbc_solve into res. Called before the model is deleted (every
// pointer CBC returns points into the model). Which getters mean something depends on the path CBC
// took, so the status is decided first:
//
//   - No integer columns: Cbc_solve ran Clp's initialSolve only. Cbc_status is -1,
//     Cbc_getBestPossibleObjValue is meaningless, and Cbc_isProvenInfeasible is true for primal
//     infeasibility and for dual infeasibility (unboundedness) alike; lpFeasible tells them apart.
//   - With integers: CbcMain1 ran branch and bound. Cbc_bestSolution is NULL unless an integer
//     solution was found; unboundedness of the relaxation is Cbc_isContinuousUnbounded (secondary
//     status 7); a limit is status 1 (secondary 3 nodes, 4 time, 5 user event, 6 solutions).
func read(model unsafe.Pointer, m *milp.Model, lpOnly bool, res *milp.Result) error {
	n := len(m.Cols)
	sign := 1.0 // +1 minimising: bounds are lower bounds
	if m.Sense == milp.Maximize {
		sign = -1
	}
	var values []float64
	bound := math.NaN()
	switch {
	case lpOnly:
		switch {
		case C.Cbc_isProvenOptimal(model) != 0:
			res.Status = milp.Optimal
		case C.Cbc_isProvenInfeasible(model) != 0:
			if lpFeasible(model, n) {
				res.Status = milp.Unbounded
			} else {
				res.Status = milp.Infeasible
			}
		case C.Cbc_isAbandoned(model) != 0:
			return fmt.Errorf("cbc: LP solve abandoned (numerical difficulties)")
		default:
			res.Status = milp.NoSolution
		}
		if res.Status == milp.Optimal {
			p := C.Cbc_getColSolution(model)
			if p == nil {
				return fmt.Errorf("cbc: optimal LP without a solution vector")
			}
			values = goFloats(p, n)
		}
	default:
		best := C.Cbc_bestSolution(model)
		st := C.Cbc_status(model)
		switch {
		case C.Cbc_isProvenOptimal(model) != 0 && best != nil:
			res.Status = milp.Optimal
		case C.Cbc_isContinuousUnbounded(model) != 0 || C.Cbc_secondaryStatus(model) == 7:
			res.Status = milp.Unbounded
		case C.Cbc_isProvenInfeasible(model) != 0:
			res.Status = milp.Infeasible
		case st == 2 && best == nil:
			return fmt.Errorf("cbc: solve abandoned (numerical difficulties)")
		case best != nil:
			res.Status = milp.Feasible // stopped at a limit (or abandoned) with an incumbent
		default:
			res.Status = milp.NoSolution
		}
		if best != nil && res.Status.HasSolution() {
			values = goFloats(best, n)
		}
		if b := float64(C.Cbc_getBestPossibleObjValue(model)); math.Abs(b) < cbcHuge {
			bound = b + m.ObjConst
		}
		res.Nodes = int(C.Cbc_getNodeCount(model))
		switch {
		case res.Status == milp.Optimal || res.Status == milp.Infeasible || res.Status == milp.Unbounded:
		case C.Cbc_isNodeLimitReached(model) != 0:
			res.StoppedBy = milp.LimitNodes
		case C.Cbc_isSecondsLimitReached(model) != 0:
			res.StoppedBy = milp.LimitTime
		default:
			// Stopped at a limit CBC does not name through these getters
			// (a context deadline is passed as seconds): time.
			res.StoppedBy = milp.LimitTime
		}
	}

	switch res.Status {
	case milp.Infeasible:
		res.Objective, res.Bound, res.Gap = math.NaN(), math.Inf(int(sign)), math.Inf(1)
		return nil
	case milp.Unbounded:
		res.Objective, res.Bound, res.Gap = math.NaN(), math.Inf(-int(sign)), math.Inf(1)
		return nil
	case milp.NoSolution:
		if math.IsNaN(bound) {
			bound = math.Inf(-int(sign))
		}
		res.Objective, res.Bound, res.Gap = math.NaN(), bound, math.Inf(1)
		return nil
	}
	res.Values = roundIntegers(m, values)
	res.Objective = m.Objective(values)
	switch {
	case math.IsNaN(bound):
		if res.Status == milp.Optimal {
			bound = res.Objective
		} else {
			bound = math.Inf(-int(sign))
		}
	case sign*(bound-res.Objective) > 0:
		bound = res.Objective // a bound past the incumbent is rounding noise
	case res.Status == milp.Optimal && math.Abs(bound-res.Objective) <= summationNoise*math.Max(1, math.Abs(res.Objective)):
		bound = res.Objective // proven: the two sums differ only in their order
	}
	res.Bound = bound
	res.Gap = milp.Gap(res.Objective, res.Bound)
	return nil
}

// roundIntegers rounds x's integer columns of m to their integers, as CBC
// holds them within its integrality tolerance, and returns x.
func roundIntegers(m *milp.Model, x []float64) []float64 {
	for j, c := range m.Cols {
		if c.Integer {
			x[j] = math.Round(x[j])
		}
	}
	return x
}

// summationNoise is how far apart, relative to the objective, CBC's
// bound on a proven optimum and the objective recomputed here from its
// solution may lie for the two to be the same value summed in another
// order (CBC sums an initial solution's objective itself,
// Cbc_setInitialSolution): a few ulps of a sum of thousands of terms.
const summationNoise = 1e-12

// lpFeasible re-solves the LP in model with a zero objective: feasible means the original LP was
// unbounded rather than infeasible.
func lpFeasible(model unsafe.Pointer, n int) bool {
	for j := 0; j < n; j++ {
		C.Cbc_setObjCoeff(model, C.int(j), 0)
	}
	C.Cbc_solve(model)
	return C.Cbc_isProvenOptimal(model) != 0
}

func goFloats(p *C.double, n int) []float64 {
	out := make([]float64, n)
	for i, v := range unsafe.Slice(p, n) {
		out[i] = float64(v)
	}
	return out
}

// flushStdio flushes C's stdio buffers, so that a test capturing file descriptor 1 sees anything
// CBC printed.
func flushStdio() { C.fflush(nil) }
