package solve

import (
	"context"
	"fmt"
	"math"

	"hap/encode"
	"hap/milp"
	"hap/milp/cbc"
)

// This file searches the program, the integer lengths and the issue order
// of the collectives together, exactly where it runs to the end.
//
// The joint MILP prices a choice in one order, the list order (lowering's,
// encode's timeline); a searched order can only shorten the step. Which
// choice is best under its own best order is therefore not the MILP's
// optimum, and searching the order of the MILP's answer afterwards would
// be one round of the alternation the design rules out. OverOrders closes
// the loop with a logic-based Benders decomposition:
//
//	        any-order MILP (TransportMILP, AnyOrder; capped at the incumbent)
//	        minus every choice already priced (ExcludeChoice)
//	          │ optimum C, value A(C) ≤ the step of C under any order
//	          ▼
//	  infeasible or A(C) ≥ incumbent? ──yes──► the incumbent is optimal over
//	          │ no                               every plan in every order
//	          ▼
//	  price C: its best order, searched (Z3, package order) and simulated
//	          │ T(C); a better T(C) is the new incumbent
//	          └──► cut C off and solve again
//
// The master is a relaxation of every choice's every order (the
// communication streams' order relaxed, encode.BoundOptions.AnyOrder), so
// its optimum over the choices not yet priced, with the incumbent's step
// over those priced, bounds the best plan in the best order; each round
// cuts one choice off, so on a finite space the loop ends with the two
// equal. On small encodings it ends in a few rounds (the exhaustive test);
// on large ones each master solve is a node-limited joint MILP, and the
// rounds run out first: the answer is then the best priced plan with the
// bound proven so far.

// PriceInOrder prices a choice: its step under the best issue order found
// for its collectives (seconds), and a lower bound on its step under any
// order, equal to the step when that order is proven the best. A choice
// that cannot run (its every order over memory, say) is priced +Inf. An
// error stops OverOrders.
type PriceInOrder func(ctx context.Context, ch *encode.Choice) (seconds, lowerBound float64, err error)

// DefaultOrderRounds is OverOrders' limit on master solves when
// OrderOptions.Rounds is 0: enough for the small cases to close
// (the exhaustive test's took at most a few dozen), few enough that a
// full-size model's node-limited rounds end in minutes.
const DefaultOrderRounds = 50

// orderBoundTolerance is the relative margin by which the master's bound
// may sit below the incumbent and still prove it optimal: the prices'
// own resolution, since the order search keeps an order only when it
// gains 1e-4 (order's minGain) and calls its answer optimal within that.
// A tighter margin would prove nothing more about the prices; mlp-tiny on
// paper-8 ended 2e-5 short of the bound under 1e-6.
const orderBoundTolerance = 1e-4

// OrderOptions steer OverOrders.
type OrderOptions struct {
	// Rounds bounds the master solves (0: DefaultOrderRounds).
	Rounds int
	// NodeLimit bounds each master solve's branch-and-bound nodes (0: to
	// optimality). With a limit, a round's bound is the solve's proven
	// bound, and the loop may stop short of a proof.
	NodeLimit int
	// Solver solves the masters (nil: CBC in process, without cuts or
	// heuristics, as the node-limited solves run).
	Solver milp.Solver
}

// OrderResult is OverOrders' answer.
type OrderResult struct {
	// Choice is the best choice priced, Seconds its step in its best
	// order (PriceInOrder's).
	Choice  *encode.Choice
	Seconds float64
	// Bound is a proven lower bound on the step of every plan in every
	// issue order: the last master's bound over the choices not priced,
	// or the least lower bound of those priced (their step, where their
	// order was proven the best), if lower.
	Bound float64
	// Optimal is whether Bound meets Seconds (within
	// orderBoundTolerance): no plan in any order is faster.
	Optimal bool
	// Rounds counts the master solves, Priced the choices priced (the
	// start among them).
	Rounds, Priced int
	// Ended says why the search stopped.
	Ended OrderEnd
}

// OrderEnd is why OverOrders stopped.
type OrderEnd string

// The ways OverOrders stops.
const (
	// OrderProven: the bound met the best plan priced.
	OrderProven OrderEnd = "optimal"
	// OrderNoProposal: a node-limited master found no plan under the
	// incumbent within its nodes, and its bound did not meet it.
	OrderNoProposal OrderEnd = "no plan under the incumbent within the node limit"
	// OrderRoundsOut: the rounds ran out.
	OrderRoundsOut OrderEnd = "rounds ran out"
)

// OverOrders finds the choice of e that is fastest under its own best
// issue order (see the comment above), starting from start, a choice
// priced startSeconds and startBound (price's two values; start may be
// nil, with both +Inf). Every choice it proposes is priced by price.
func OverOrders(ctx context.Context, e *encode.Encoding, start *encode.Choice, startSeconds, startBound float64, price PriceInOrder, opt OrderOptions) (*OrderResult, error) {
	rounds := opt.Rounds
	if rounds == 0 {
		rounds = DefaultOrderRounds
	}
	// Bare, in process, as the node-limited and the exhaustive tests'
	// solves run. The master has no start (the incumbent is cut off), and
	// on full-size models its ten bare nodes found no plan under the cap
	// (vgg19, bert-base paper-16, bert-moe paper-8); the feasibility pump,
	// tried as for a joint MILP without a start, found none on vgg19 and
	// ran over ten minutes on bert-moe's master.
	mo := milp.Options{Threads: 1, NodeLimit: opt.NodeLimit, NoCuts: true, NoHeuristics: true}
	solver := opt.Solver
	if solver == nil {
		solver = cbc.Solver{}
	}
	out := &OrderResult{Choice: start, Seconds: startSeconds}
	var priced []*encode.Choice
	pricedBound := startBound // the least lower bound over the priced choices
	if start != nil {
		priced = append(priced, start)
		out.Priced = 1
	}
	// settle sets the answer's bound from the master's, bound over the
	// choices not priced.
	settle := func(bound float64, ended OrderEnd) *OrderResult {
		out.Bound = math.Min(bound, pricedBound)
		out.Optimal = out.Choice != nil && out.Bound >= out.Seconds*(1-orderBoundTolerance)
		out.Ended = ended
		if out.Optimal {
			out.Ended = OrderProven
		}
		return out
	}
	lastBound := 0.0 // the last master's bound over the choices not priced
	for out.Rounds < rounds {
		limit := 0.0
		if !math.IsInf(out.Seconds, 1) {
			limit = out.Seconds
		}
		model, vars := e.TransportMILP(limit, encode.BoundOptions{Memory: true, AnyOrder: true})
		for _, ch := range priced {
			e.ExcludeChoice(model, vars, ch)
		}
		res, err := solver.Solve(ctx, model, mo)
		out.Rounds++
		if err != nil {
			return nil, fmt.Errorf("any-order MILP, round %d: %w", out.Rounds, err)
		}
		if res.Status == milp.Infeasible {
			// Nothing unpriced is left under the cap: no such plan is
			// faster in any order than the incumbent.
			return settle(out.Seconds, OrderProven), nil
		}
		bound := res.Bound / encode.MILPTimeUnit
		if res.Status == milp.Optimal {
			bound = res.Objective / encode.MILPTimeUnit
		}
		if bound >= out.Seconds*(1-orderBoundTolerance) || !res.Status.HasSolution() {
			return settle(bound, OrderNoProposal), nil
		}
		ch := e.ChoiceFrom(vars, res.Values)
		sec, lb, err := price(ctx, ch)
		if err != nil {
			return nil, err
		}
		priced = append(priced, ch)
		out.Priced++
		pricedBound = math.Min(pricedBound, lb)
		if sec < out.Seconds {
			out.Choice, out.Seconds = ch, sec
		}
		lastBound = bound
	}
	return settle(lastBound, OrderRoundsOut), nil
}
