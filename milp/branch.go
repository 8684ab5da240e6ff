package milp

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// Branching on choices over an LP relaxation.
//
// A model's LP relaxation bounds its integer points; branching raises that
// bound, since every integer point lies in one branch and the least of the
// branches' LP values still bounds them all. A MILP solver branches on one
// binary at a time (x = 0 or x = 1). Where the binaries come in choices —
// sets of columns of which exactly one is 1 at every integer point, such
// as the rules an op may run — one branch per member of a choice is far
// stronger: fixing x = 0 leaves the rest of the choice free to mix, and a
// fractional mix is what keeps an LP relaxation low.
//
// BranchChoices does that best-first: it expands the open branch with the
// least LP value, branching it on the choice that lifts it most among the
// first few its LP leaves fractional (in the caller's order: put the
// choices likeliest to matter first), trying each such choice's branches
// (strong branching). Every choice tried raises the branch's value to the
// least of its branches, whichever choice is kept, so no LP solved is
// wasted. Each LP is warm-started from the last one's basis (LPSession):
// a branch differs from the one before in a few bounds.

// LPSession is a model's LP relaxation loaded once and solved again as its
// column bounds change, each solve starting from the last one's basis.
type LPSession interface {
	// SetBounds changes column j's bounds for the solves that follow.
	SetBounds(j int, lower, upper float64)
	// Solve solves the LP as its bounds now are, within limit (0: none).
	// The result is Optimal with the objective and values, Infeasible, or
	// NoSolution stopped by LimitTime.
	Solve(limit time.Duration) (*Result, error)
}

// BranchOptions bound BranchChoices' search.
type BranchOptions struct {
	// MaxLPs bounds the LP solves after the root's (0: the root's alone).
	// It is what makes the search, and so its bound, the same on any
	// machine.
	MaxLPs int
	// Deadline, if not zero, stops the search: the branches left
	// unsolved keep their parent's value.
	Deadline time.Time
	// Candidates is how many fractional choices a branch tries before it
	// takes the best of them (0: DefaultBranchCandidates).
	Candidates int
}

// DefaultBranchCandidates is how many fractional choices BranchChoices
// tries at a branch by default: the one kept is the one whose least
// branch is highest, and every one tried raises the branch's value. Two,
// not more: on the synthesizer's bound LPs each branch costs about the
// root LP's time (BERT-MoE on paper-29: 2–4 s, warm-started or not), and
// its order of choices puts the one that matters first or second.
const DefaultBranchCandidates = 2

// branchIntegral is how close to 0 or 1 a choice's columns must be for
// the choice to count as made (the LP solver's primal tolerance is 1e-9;
// values within this of a vertex are that vertex).
const branchIntegral = 1e-6

// branchNode is a branch: the members fixed on the way to it (choice
// index → column), its LP value (minimisation's sign) and solution.
type branchNode struct {
	fixed  map[int]int
	value  float64
	values []float64
	order  int // creation order, for ties
}

// ValidateChoices checks that every choice is a non-empty set of distinct
// columns of m, each bounded within [0, 1] and continuous (branching, not
// the solver's integrality, makes them 0 or 1).
func ValidateChoices(m *Model, choices [][]int) error {
	for i, ch := range choices {
		if len(ch) == 0 {
			return invalid("choice %d is empty", i)
		}
		seen := map[int]bool{}
		for _, j := range ch {
			if j < 0 || j >= len(m.Cols) {
				return invalid("choice %d: unknown column index %d (model has %d columns)", i, j, len(m.Cols))
			}
			if seen[j] {
				return invalid("choice %d: %s twice", i, label("column", j, m.Cols[j].Name))
			}
			seen[j] = true
			if c := m.Cols[j]; c.Lower < 0 || c.Upper > 1 || c.Integer {
				return invalid("choice %d: %s must be continuous within [0, 1]", i, label("column", j, c.Name))
			}
		}
	}
	return nil
}

// BranchChoices searches m's LP relaxation (s: a session of m as given)
// best-first over choices: sets of columns of which exactly one is 1 at
// every point the result is to bound. It returns Optimal when the least
// open branch's LP makes every choice (its solution then is a point with
// them all made), Infeasible when no branch is feasible, and otherwise
// NoSolution — or Feasible, with the best point that made every choice —
// stopped by LimitNodes (opt.MaxLPs) or LimitTime (opt.Deadline), with
// Bound the least open branch's value: at least the root LP's, and a
// bound on every point that makes every choice. Nodes counts the LPs
// solved after the root's.
func BranchChoices(s LPSession, m *Model, choices [][]int, opt BranchOptions) (*Result, error) {
	if err := ValidateChoices(m, choices); err != nil {
		return nil, err
	}
	t0 := time.Now()
	sign := 1.0 // values below are sign·objective, minimised
	if m.Sense == Maximize {
		sign = -1
	}
	cands := opt.Candidates
	if cands <= 0 {
		cands = DefaultBranchCandidates
	}
	out := &Result{Objective: math.NaN(), Gap: math.Inf(1)}
	lps := 0
	finish := func() *Result {
		out.Runtime, out.Nodes = time.Since(t0), lps
		if out.Status.HasSolution() {
			out.Gap = Gap(out.Objective, out.Bound)
		}
		return out
	}
	// applied is the fixing the session's bounds now carry.
	applied := map[int]int{}
	setFixing := func(fixed map[int]int) {
		for ci := range applied {
			if _, ok := fixed[ci]; !ok {
				for _, j := range choices[ci] {
					s.SetBounds(j, m.Cols[j].Lower, m.Cols[j].Upper)
				}
			}
		}
		for ci, pick := range fixed {
			if p, ok := applied[ci]; ok && p == pick {
				continue
			}
			for _, j := range choices[ci] {
				if j == pick {
					s.SetBounds(j, 1, 1)
				} else {
					s.SetBounds(j, 0, 0)
				}
			}
		}
		applied = maps.Clone(fixed)
	}
	timeLeft := func() (time.Duration, bool) {
		if opt.Deadline.IsZero() {
			return 0, true
		}
		left := time.Until(opt.Deadline)
		return left, left > 0
	}
	// lp solves the branch fixed so: n is nil when it is infeasible or
	// the clock stopped it (stopped, with the bound the session proved).
	lp := func(fixed map[int]int) (n *branchNode, stopped bool, bound float64, err error) {
		left, more := timeLeft()
		if !more {
			return nil, true, math.Inf(-int(sign)), nil
		}
		setFixing(fixed)
		r, err := s.Solve(left)
		if err != nil {
			return nil, false, 0, err
		}
		switch r.Status {
		case Optimal:
			return &branchNode{fixed: fixed, value: sign * r.Objective, values: r.Values}, false, 0, nil
		case Infeasible:
			return nil, false, 0, nil
		case NoSolution:
			return nil, true, r.Bound, nil
		}
		return nil, false, 0, fmt.Errorf("milp: branch LP: %s", r.Status)
	}
	root, stopped, bound, err := lp(map[int]int{})
	if err != nil {
		return nil, err
	}
	switch {
	case stopped:
		// What the session proved of the root (an LP's duals' bound).
		out.StoppedBy, out.Bound = LimitTime, bound
		return finish(), nil
	case root == nil:
		out.Status, out.Bound = Infeasible, math.Inf(int(sign))
		return finish(), nil
	}
	open := []*branchNode{root}
	created := 1
	best := math.Inf(1) // the best point making every choice, sign·objective
	var bestValues []float64
	for {
		// The least open branch: the bound, and the one to expand.
		k := -1
		for i, n := range open {
			if k < 0 || n.value < open[k].value || n.value == open[k].value && n.order < open[k].order {
				k = i
			}
		}
		if k < 0 || open[k].value >= best {
			// Nothing open below the best point: it is optimal.
			if math.IsInf(best, 1) {
				out.Status, out.Bound = Infeasible, math.Inf(int(sign))
				return finish(), nil
			}
			out.Status, out.Objective, out.Values, out.Bound = Optimal, sign*best, bestValues, sign*best
			return finish(), nil
		}
		node := open[k]
		frac := unmade(node, choices)
		if len(frac) == 0 {
			// Every choice made: a point, and the least open branch.
			best, bestValues = node.value, node.values
			open = slices.Delete(open, k, k+1)
			continue
		}
		// Strong branching: the first few fractional choices, each's
		// branches solved; the best kept.
		var kept []*branchNode
		haveKept, keptLeast := false, math.Inf(-1)
		stop := LimitNone
		for _, ci := range frac[:min(cands, len(frac))] {
			var kids []*branchNode
			least := math.Inf(1)
			for _, j := range choices[ci] {
				if m.Cols[j].Upper < 1 {
					continue // no point has it 1
				}
				if lps >= opt.MaxLPs {
					stop = LimitNodes
					break
				}
				fixed := maps.Clone(node.fixed)
				fixed[ci] = j
				kid, stopped, _, err := lp(fixed)
				if err != nil {
					return nil, err
				}
				if stopped {
					stop = LimitTime
					break
				}
				lps++
				if kid != nil {
					kid.order = created
					created++
					kid.value = max(kid.value, node.value) // a branch is within its parent
					kids = append(kids, kid)
					least = min(least, kid.value)
				}
			}
			if stop != LimitNone {
				break
			}
			if !haveKept || least > keptLeast {
				kept, keptLeast, haveKept = kids, least, true
			}
		}
		if !haveKept {
			// Out of LPs or time before one choice's branches were all
			// solved: the branch stays open at its value.
			out.StoppedBy = stop
			break
		}
		open = slices.Delete(open, k, k+1)
		open = append(open, kept...)
		if stop != LimitNone {
			out.StoppedBy = stop
			break
		}
	}
	least := best
	for _, n := range open {
		least = min(least, n.value)
	}
	out.Bound = sign * least
	if !math.IsInf(best, 1) {
		out.Status, out.Objective, out.Values = Feasible, sign*best, bestValues
	}
	return finish(), nil
}

// unmade lists the choices n's LP leaves unmade, in the callers'
// order.
func unmade(n *branchNode, choices [][]int) []int {
	var out []int
	for ci, ch := range choices {
		if _, ok := n.fixed[ci]; ok {
			continue
		}
		for _, j := range ch {
			if v := n.values[j]; v > branchIntegral && v < 1-branchIntegral {
				out = append(out, ci)
				break
			}
		}
	}
	return out
}
