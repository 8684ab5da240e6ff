// Package milp owns hap's solver-neutral mixed-integer linear programming interface: a sparse model
// (columns with bounds, integrality and objective coefficients; rows with bounds and sparse
// coefficients), its validation and evaluation, solve options, results with a clear status, and the
// small Solver interface that backends implement; and BranchChoices, a best-first search over
// choices (sets of columns of which one is 1) on an LP relaxation, over any backend's LPSession
// (branch.go). The CBC backend lives in package milp/cbc; a HiGHS
// backend can be added beside it without touching callers.
//
// milp is pure Go and imports nothing of hap; backends import milp, never the reverse.
//
// # Conventions
//
// Infinite bounds are math.Inf(±1). A row i means Rows[i].Lower <= Σ Coef.Val·x[Coef.Col] <=
// Rows[i].Upper; an equality has Lower == Upper. The objective is Σ Cols[j].Obj·x[j] + ObjConst,
// minimised or maximised according to Sense. Names are for people (error messages, dumps); backends
// do not rely on them.
//
// The relative gap of a solution with objective value obj and a proven bound on the optimum is
// |obj − bound| / max(|obj|, 1e-10) (Gap), as in CBC and Gurobi.
package milp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Sense is the optimisation direction.
type Sense int8

// Optimisation directions.
const (
	Minimize Sense = iota
	Maximize
)

func (s Sense) String() string {
	switch s {
	case Minimize:
		return "minimize"
	case Maximize:
		return "maximize"
	}
	return fmt.Sprintf("Sense(%d)", int8(s))
}

// Col is a column (variable).
type Col struct {
	Name         string
	Lower, Upper float64 // bounds, math.Inf(±1) for none
	Integer      bool
	Obj          float64 // objective coefficient
}

// Coef is one non-zero coefficient of a row.
type Coef struct {
	Col int // column index
	Val float64
}

// Row is a linear constraint Lower <= Σ Coefs <= Upper.
type Row struct {
	Name         string
	Lower, Upper float64 // bounds, math.Inf(±1) for none
	Coefs        []Coef  // at most one entry per column
}

// Model is a sparse mixed-integer linear program. The zero value is an empty minimisation.
type Model struct {
	Sense    Sense
	Cols     []Col
	Rows     []Row
	ObjConst float64 // constant added to the objective
}

// AddCol appends a column and returns its index.
func (m *Model) AddCol(c Col) int {
	m.Cols = append(m.Cols, c)
	return len(m.Cols) - 1
}

// AddRow appends a row and returns its index.
func (m *Model) AddRow(r Row) int {
	m.Rows = append(m.Rows, r)
	return len(m.Rows) - 1
}

// HasIntegers reports whether some column is integer.
func (m *Model) HasIntegers() bool {
	for _, c := range m.Cols {
		if c.Integer {
			return true
		}
	}
	return false
}

// ErrInvalid is wrapped by every validation error of a Model or Options.
var ErrInvalid = errors.New("invalid MILP")

func invalid(format string, args ...any) error {
	return fmt.Errorf("milp: %w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

func label(kind string, i int, name string) string {
	if name == "" {
		return fmt.Sprintf("%s %d", kind, i)
	}
	return fmt.Sprintf("%s %d (%q)", kind, i, name)
}

func checkBounds(what string, lo, hi float64) error {
	switch {
	case math.IsNaN(lo) || math.IsNaN(hi):
		return invalid("%s: NaN bound [%v, %v]", what, lo, hi)
	case math.IsInf(lo, 1):
		return invalid("%s: lower bound is +Inf", what)
	case math.IsInf(hi, -1):
		return invalid("%s: upper bound is -Inf", what)
	case lo > hi:
		return invalid("%s: lower bound %v > upper bound %v", what, lo, hi)
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// Validate checks m: a known sense; finite objective and matrix coefficients; bounds that are not
// NaN, not lower=+Inf or upper=-Inf, with lower <= upper; column indices in range and not repeated
// within a row. Errors wrap ErrInvalid and name the offending column or row.
func (m *Model) Validate() error {
	if m.Sense != Minimize && m.Sense != Maximize {
		return invalid("unknown sense %d", m.Sense)
	}
	if !finite(m.ObjConst) {
		return invalid("objective constant %v", m.ObjConst)
	}
	for j, c := range m.Cols {
		what := label("column", j, c.Name)
		if err := checkBounds(what, c.Lower, c.Upper); err != nil {
			return err
		}
		if !finite(c.Obj) {
			return invalid("%s: objective coefficient %v", what, c.Obj)
		}
	}
	seen := make(map[int]int) // column -> row+1 that last used it
	for i, r := range m.Rows {
		what := label("row", i, r.Name)
		if err := checkBounds(what, r.Lower, r.Upper); err != nil {
			return err
		}
		for _, e := range r.Coefs {
			if e.Col < 0 || e.Col >= len(m.Cols) {
				return invalid("%s: unknown column index %d (model has %d columns)", what, e.Col, len(m.Cols))
			}
			if !finite(e.Val) {
				return invalid("%s: coefficient %v for %s", what, e.Val, label("column", e.Col, m.Cols[e.Col].Name))
			}
			if seen[e.Col] == i+1 {
				return invalid("%s: %s appears twice", what, label("column", e.Col, m.Cols[e.Col].Name))
			}
			seen[e.Col] = i + 1
		}
	}
	return nil
}

// Objective returns the objective value of x (ObjConst included).
func (m *Model) Objective(x []float64) float64 {
	v := m.ObjConst
	for j, c := range m.Cols {
		v += c.Obj * x[j]
	}
	return v
}

// Check verifies that x satisfies the bounds, integrality and rows of m within the absolute
// tolerance tol, and returns an error naming the first violation.
func (m *Model) Check(x []float64, tol float64) error {
	if len(x) != len(m.Cols) {
		return fmt.Errorf("milp: %d values for %d columns", len(x), len(m.Cols))
	}
	for j, c := range m.Cols {
		if x[j] < c.Lower-tol || x[j] > c.Upper+tol || math.IsNaN(x[j]) {
			return fmt.Errorf("milp: %s = %v outside [%v, %v]", label("column", j, c.Name), x[j], c.Lower, c.Upper)
		}
		if c.Integer && math.Abs(x[j]-math.Round(x[j])) > tol {
			return fmt.Errorf("milp: integer %s = %v", label("column", j, c.Name), x[j])
		}
	}
	for i, r := range m.Rows {
		var a float64
		for _, e := range r.Coefs {
			a += e.Val * x[e.Col]
		}
		if a < r.Lower-tol || a > r.Upper+tol {
			return fmt.Errorf("milp: %s: activity %v outside [%v, %v]", label("row", i, r.Name), a, r.Lower, r.Upper)
		}
	}
	return nil
}

// Options control a solve. The zero value means: no time limit, the backend's default gap (prove
// optimality), no MIP start, one thread.
type Options struct {
	// TimeLimit bounds the solve's wall time (0: none). A context deadline also bounds it.
	TimeLimit time.Duration
	// RelGap stops the search once the relative gap (see Gap) is at most RelGap (0: backend
	// default, CBC proves optimality). The result is then Optimal.
	RelGap float64
	// Start is a MIP start: values for some or all columns (by index), typically a previous
	// solution; the backend completes and checks it, and ignores it if infeasible.
	Start map[int]float64
	// Threads is the number of solver threads (0 means 1). Results are deterministic with 1.
	Threads int
	// NodeLimit bounds the branch-and-bound nodes (0: none). Unlike a time limit it is
	// deterministic: the same model, start and limit give the same result on any machine.
	NodeLimit int
	// NoCuts turns off cutting-plane generation and NoHeuristics the backend's primal
	// heuristics: a weaker bound and (without heuristics) no help finding solutions — give a
	// Start — but far less work at the root of large models, so that a node limit bounds the
	// whole solve.
	NoCuts, NoHeuristics bool
	// PumpPasses, when positive, keeps one primal heuristic, the feasibility pump, with that
	// many passes: what finds solutions of the synthesizer's pinned models, at a fraction of the
	// cost of all of them.
	PumpPasses int
	// NoStrongBranching chooses branching variables by pseudo-costs alone, without trial
	// solves of candidate branches: far cheaper nodes on large models, where a node limit
	// leaves no room for the trials to pay off.
	NoStrongBranching bool
	// NoPresolve solves the root LP of a model with integer columns as loaded, without first
	// presolving it (the backend's LP presolve; integer preprocessing is a separate matter).
	// On the synthesizer's timeline MILPs with a start and few nodes, the root LP is most of
	// the work and presolving it costs more than it saves. A model without integer columns is
	// solved as it always is.
	NoPresolve bool
	// NoPerturbation runs the backend's simplex without perturbing the problem's costs and
	// bounds (the guard against stalling on degenerate LPs, on by default). On some of the
	// synthesizer's pinned models, whose rows are mostly fixed, perturbed and held to the tight
	// primal tolerance the big-M rows need, the root LP stalls: 62 s where it takes 0.7 s
	// without (see solve.lengthsFor).
	NoPerturbation bool
	// DualBoundOnStop asks, of a model without integer columns solved under a time limit,
	// for a proven bound should the limit stop it: the result is then NoSolution, stopped by
	// LimitTime, with the bound the solver's duals prove (Model.DualBound). Without it a
	// backend may run an LP to its end whatever the limit (CBC does).
	DualBoundOnStop bool
	// Cutoff, for a minimised model without integer columns, stops the solve once the
	// solver's duals prove its optimum no lower than Cutoff (in the objective's units; 0:
	// none): the caller holds a point that good, and asks only whether the LP can beat it.
	// Stopped so, the result is NoSolution, stopped by LimitCutoff, with the bound the duals
	// prove (Model.DualBound, at least Cutoff). Give every column a finite upper bound that
	// cuts off nothing the LP is solved for, or the duals prove nothing finite and the LP
	// runs to its end.
	Cutoff float64
	// Choices, for a model without integer columns, are sets of columns of which exactly one
	// is 1 at every point the result is to bound (the rules an op may run, one binary each, in
	// an LP relaxation): the LP is then branched on them best-first (BranchChoices), up to
	// NodeLimit LP solves after the root's, and Result.Bound is the least open branch's value,
	// at least the LP's optimum. Put the choices likeliest to matter first: a branch tries the
	// first few its LP leaves fractional.
	Choices [][]int
}

// Search says which of the search's parts o leaves on, in a fixed form for
// the records: "cuts, heuristics, strong branching", each part that is off
// named so ("no cuts"), and the feasibility pump's passes in place of the
// heuristics when it is the only one. An LP presolve left out adds ", no
// presolve" (it is on in every other search, and older plans do not
// mention it), as the simplex's perturbation left out adds ", no
// perturbation".
func (o *Options) Search() string {
	part := func(off bool, name string) string {
		if off {
			return "no " + name
		}
		return name
	}
	heur := part(o.NoHeuristics, "heuristics")
	if o.PumpPasses > 0 {
		heur = fmt.Sprintf("feasibility pump (%d passes)", o.PumpPasses)
	}
	s := part(o.NoCuts, "cuts") + ", " + heur + ", " + part(o.NoStrongBranching, "strong branching")
	if o.NoPresolve {
		s += ", no presolve"
	}
	if o.NoPerturbation {
		s += ", no perturbation"
	}
	return s
}

// Validate checks o against m. Errors wrap ErrInvalid.
func (o *Options) Validate(m *Model) error {
	if o.TimeLimit < 0 {
		return invalid("negative time limit %v", o.TimeLimit)
	}
	if !finite(o.RelGap) || o.RelGap < 0 {
		return invalid("relative gap %v", o.RelGap)
	}
	if o.Threads < 0 {
		return invalid("negative thread count %d", o.Threads)
	}
	if o.NodeLimit < 0 || o.PumpPasses < 0 {
		return invalid("negative node limit %d or pump passes %d", o.NodeLimit, o.PumpPasses)
	}
	if len(o.Choices) > 0 {
		if m.HasIntegers() {
			return invalid("choices are for a model without integer columns")
		}
		if err := ValidateChoices(m, o.Choices); err != nil {
			return err
		}
	}
	for j, v := range o.Start {
		if j < 0 || j >= len(m.Cols) {
			return invalid("MIP start: unknown column index %d (model has %d columns)", j, len(m.Cols))
		}
		if !finite(v) {
			return invalid("MIP start: %s = %v", label("column", j, m.Cols[j].Name), v)
		}
	}
	return nil
}

// Status is the outcome of a solve. The zero value is NoSolution.
type Status int8

// Solve outcomes.
const (
	// NoSolution: the solve stopped at a limit (time, deadline) before finding any feasible
	// solution and without proving infeasibility.
	NoSolution Status = iota
	// Optimal: the solution is proven optimal (within Options.RelGap, if set).
	Optimal
	// Feasible: the solve stopped at a limit with a feasible solution (the incumbent) and a proven
	// bound that may not meet it.
	Feasible
	// Infeasible: the model is proven to have no feasible solution.
	Infeasible
	// Unbounded: the objective is unbounded in the optimisation direction (for a MIP: its LP
	// relaxation is, and the backend found no reason to call it infeasible).
	Unbounded
)

func (s Status) String() string {
	switch s {
	case NoSolution:
		return "no solution"
	case Optimal:
		return "optimal"
	case Feasible:
		return "feasible"
	case Infeasible:
		return "infeasible"
	case Unbounded:
		return "unbounded"
	}
	return fmt.Sprintf("Status(%d)", int8(s))
}

// HasSolution reports whether s comes with a feasible solution (Optimal or Feasible).
func (s Status) HasSolution() bool { return s == Optimal || s == Feasible }

// Sentinel errors for callers that prefer errors to a Status; see Result.Err.
var (
	ErrInfeasible = errors.New("milp: model is infeasible")
	ErrUnbounded  = errors.New("milp: model is unbounded")
	ErrNoSolution = errors.New("milp: no solution found within the limits")
)

// Result is the outcome of a solve.
type Result struct {
	Status Status
	// Objective is the objective value of Values (ObjConst included); NaN without a solution.
	Objective float64
	// Bound is the best proven bound on the optimum: <= Objective when minimising, >= when
	// maximising; equal to Objective when proven optimal with no gap; −Inf (minimising) or +Inf
	// (maximising) if nothing is known. By the usual convention on the optimum's value, an
	// Infeasible model has Bound +Inf when minimising (−Inf maximising), an Unbounded one the
	// reverse.
	Bound float64
	// Gap is the relative gap between Objective and Bound (see Gap): 0 at optimum, +Inf without a
	// solution.
	Gap float64
	// Values has one value per column, integer columns rounded to integers; nil without a
	// solution.
	Values []float64
	// Runtime is the wall time of the backend's solve.
	Runtime time.Duration
	// Nodes is the number of branch-and-bound nodes the search explored.
	Nodes int
	// StoppedBy names the limit that ended a search short of proving its result: LimitTime,
	// LimitNodes, or LimitNone when the search ran to its end (or had no integers).
	StoppedBy Limit
}

// Limit is what stopped a search.
type Limit int8

// Limits that can stop a search.
const (
	LimitNone   Limit = iota // the search finished
	LimitTime                // the time limit or the context's deadline
	LimitNodes               // Options.NodeLimit
	LimitCutoff              // Options.Cutoff: the optimum proven no lower
)

func (l Limit) String() string {
	switch l {
	case LimitNone:
		return "none"
	case LimitTime:
		return "time limit"
	case LimitNodes:
		return "node limit"
	case LimitCutoff:
		return "cutoff"
	}
	return fmt.Sprintf("Limit(%d)", int8(l))
}

// Err returns nil when r has a solution, else ErrInfeasible, ErrUnbounded or ErrNoSolution.
func (r *Result) Err() error {
	switch r.Status {
	case Optimal, Feasible:
		return nil
	case Infeasible:
		return ErrInfeasible
	case Unbounded:
		return ErrUnbounded
	}
	return ErrNoSolution
}

// Gap returns the relative gap |obj − bound| / max(|obj|, 1e-10); +Inf if either is not finite.
func Gap(obj, bound float64) float64 {
	if !finite(obj) || !finite(bound) {
		return math.Inf(1)
	}
	return math.Abs(obj-bound) / math.Max(math.Abs(obj), 1e-10)
}

// Solver solves models. Implementations validate the model and options (returning errors that wrap
// ErrInvalid), respect ctx as far as the backend allows (at least before starting, and a deadline
// as a time limit), and report infeasibility, unboundedness and limits through Result.Status
// rather than as errors; an error means the solve itself failed. Implementations are safe for
// concurrent use.
type Solver interface {
	Solve(ctx context.Context, m *Model, opt Options) (*Result, error)
}
