package plan

import (
	"context"
	"fmt"

	"hap/devprog"
	"hap/encode"
	"hap/order"
	"hap/sim"
	"hap/solve"
	"hap/spmd"
)

// fullWindowCollectives is the longest communication stream whose order is
// searched whole when a choice is priced in its best order: up to it the
// window is widened to the stream, so that Z3's "optimal" holds over every
// order, not only over those within the window. Small programs settle at
// once; longer streams keep the caller's window and their price is an
// upper bound, with the order bound below it.
const fullWindowCollectives = 16

// OrderPricer prices a choice of e by its step under the best issue order
// Z3 finds for its collectives (package order), as solve.OverOrders asks.
// The order found must fit every device's memory in simulation, as
// SearchOrder's must. The price is proven the best over every order when
// the search ends at the order bound, or optimal with a window that covers
// the whole stream (fullWindowCollectives); otherwise the lower bound
// returned is the order bound.
func OrderPricer(in *Inputs, e *encode.Encoding, opt order.Options) solve.PriceInOrder {
	return func(ctx context.Context, ch *encode.Choice) (float64, float64, error) {
		p, err := e.Decode(ch)
		if err != nil {
			return 0, 0, fmt.Errorf("pricing a choice in its best order: %w", err)
		}
		prog, m, err := Lower(in, p)
		if err != nil {
			return 0, 0, fmt.Errorf("pricing a choice in its best order: %w", err)
		}
		o := opt
		longest := longestCommStream(prog)
		if longest <= fullWindowCollectives && o.Window < longest {
			o.Window = longest
		}
		o.Accept = func(r *sim.Result) bool {
			return sim.OverMemory(r.Devices) == "" && (opt.Accept == nil || opt.Accept(r))
		}
		r, err := order.Search(ctx, prog, m, o)
		if err != nil {
			return 0, 0, fmt.Errorf("pricing a choice in its best order: %w", err)
		}
		if r.AtBound() || (r.Status == order.Optimal && r.Window >= longest) {
			return r.After, r.After, nil
		}
		return r.After, r.Bound, nil
	}
}

// longestCommStream is the most collectives one device of prog issues.
func longestCommStream(prog *devprog.Program) int {
	most := 0
	for _, d := range prog.Devices {
		n := 0
		for _, in := range d.Instrs {
			if in.Comm != nil {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// JointOrderOptions steer SearchJointly.
type JointOrderOptions struct {
	// Order steers each choice's order search (window, budget).
	Order order.Options
	// Rounds and NodeLimit bound the search (solve.OrderOptions).
	Rounds, NodeLimit int
	// MemoryFraction is the planner's memory fraction (0: the default;
	// a plan solved again at a smaller one, RetriedFraction, uses that).
	MemoryFraction float64
	// Untie is the synthesis' Untie, so that the plan is a choice of the
	// encoding searched.
	Untie Untie
}

// SearchJointly goes on from a plan whose order SearchOrder searched: it
// searches programs, lengths and orders together (solve.OverOrders) from
// the plan's choice, priced at its searched step (bounded below by its
// order bound, unless it meets it), with each proposal's
// order searched with opt.Order. A faster choice becomes the plan, in the
// order found for it (SearchOrder again). The plan's bound is raised to
// the search's where that is higher and holds over every order, and its
// status is "optimal" when the search proves it. It returns the plan
// (pl, or a new one), its program and the search's result.
func SearchJointly(ctx context.Context, pl *Plan, in *Inputs, p *spmd.Program, opt JointOrderOptions) (*Plan, *spmd.Program, *solve.OrderResult, error) {
	m, err := in.CostModel()
	if err != nil {
		return nil, nil, nil, err
	}
	if pl.CommOrder == nil {
		return nil, nil, nil, fmt.Errorf("the joint search over orders goes on from a plan whose order was searched (SearchOrder)")
	}
	frac := opt.MemoryFraction
	if frac == 0 {
		frac = encode.DefaultMemoryFraction
	}
	if f := pl.Solver.Options.RetriedFraction; f > 0 {
		frac = f
	}
	e, err := encode.Encode(in.Graph, solve.CandidateSegments(in.Graph), m, encode.EncodeOptions{Optimizer: in.Optimizer, MemoryFraction: frac, Recompute: in.Recompute,
		NoTie: opt.Untie.Layers, NoGroup: opt.Untie.Devices})
	if err != nil {
		return nil, nil, nil, err
	}
	listed := *p
	listed.CommSwaps, listed.CommDigest = nil, ""
	start, ok := e.ChoiceOf(&listed)
	if !ok {
		return nil, nil, nil, fmt.Errorf("the joint search over orders starts from the plan's program, and this one is not a choice of the synthesizer's encoding (strategy %q)", pl.Options.Strategy)
	}
	price := OrderPricer(in, e, opt.Order)
	// The start is priced by the order search already run (SearchOrder):
	// searching again cost bert-moe on paper-8 minutes. Its order bound is
	// below every order's step, so it bounds the start unless the step
	// meets it.
	sec, lb := pl.Cost.StepSeconds, pl.Cost.StepSeconds
	if !order.MeetsBound(sec, pl.CommOrder.Bound) {
		lb = pl.CommOrder.Bound
	}
	res, err := solve.OverOrders(ctx, e, start, sec, lb, price, solve.OrderOptions{Rounds: opt.Rounds, NodeLimit: opt.NodeLimit})
	if err != nil {
		return nil, nil, nil, err
	}
	if res.Choice != start {
		np, err := e.Decode(res.Choice)
		if err != nil {
			return nil, nil, nil, err
		}
		npl, err := Build(in, np, pl.Options.Strategy, pl.Solver)
		if err != nil {
			return nil, nil, nil, err
		}
		if _, err := SearchOrder(ctx, npl, in, np, opt.Order); err != nil {
			return nil, nil, nil, err
		}
		pl, p = npl, np
	}
	s := &pl.Solver
	if s.Options.Bound.OverAnyOrder() && res.Bound > s.Bound {
		s.Bound = res.Bound
		if s.Objective > 0 {
			s.Gap = max(0, (s.Objective-s.Bound)/s.Objective)
		}
	}
	if res.Optimal {
		s.Status = "optimal"
	}
	s.Options.JointOrder = JointOrder{Rounds: res.Rounds, Priced: res.Priced, Ended: res.Ended}
	return pl, p, res, nil
}
