package solve

import (
	"context"
	"math"
	"time"

	"hap/cost"
	"hap/encode"
	"hap/ir"
	"hap/milp"
	"hap/milp/cbc"
)

// A lower bound on the step from the LP relaxation of the transport
// formulation (encode.TransportLP), solved beside the joint MILP.
//
// The joint MILP's own bound is its root LP's, lifted little by ten nodes:
// 40–85% under the plan on the paper's models, since its formulation lets
// a fractional mix of rules make a tensor's communication nearly free. The
// transport rows close most of that (bert-base on paper-8 at batch 256:
// 0.484 → 0.753 s for a 0.770 s plan; vit on paper-16: within 0.01%), but
// they made the joint MILP's nodes two to three times slower (bert-moe on
// paper-8: 22 → 59 s to plan), and on the paper and modern suites its ten
// nodes never improved on Polish's plan with or without them. So the
// search keeps the lighter model and this LP runs beside it, in a child
// process (an in-process CBC solve is under way). Both bounds hold for
// every plan; the result keeps the higher.

// boundMemoryShare is how full the start must make some device, as a share
// of its usable memory, for the bound LP to keep the memory rows. They
// doubled its time (vit on paper-16: 1.7 → 3.4 s) and moved no bound
// measured (vit paper-16, bert-base paper-8, bert-moe paper-8, gpt2
// modern-24, whose plans fill 3–20% of memory); left out, the LP is a
// further relaxation, still a bound. Where a plan comes near the memory,
// the rows may be what keeps the LP from a faster split that does not fit.
const boundMemoryShare = 0.5

// pendingBound is a bound LP under way.
type pendingBound struct {
	done     chan struct{}
	value    float64 // seconds
	ok       bool
	stopped  bool // the clock stopped the LP: value is its duals' bound
	cut      bool // the cutoff stopped the LP: value is its duals' bound, at least the cutoff
	branches int  // LPs solved after the root's, branching on op classes' rules
	// seconds is the LP's wall time, once done; 0 for a bound solved
	// before (reuse).
	seconds float64
}

// startBound starts solving the transport relaxation of e's MILP in the
// form o selects, with the step bounded by limit seconds (the cost of a
// known plan: every better plan stays feasible; 0 for none), until stop
// (zero: to its end). solver nil means CBC in a child process. With lps > 0
// the LP is then branched on the op classes' rules and the leaves' layouts
// (encode.BoundChoices, those next to incumbent's costliest communication
// first; milp.BranchChoices), for up to lps more LP solves:
// the least open branch's value bounds every plan, and rises above the
// LP's where the LP mixes rules (BERT-MoE on paper-29: 2.64 → 3.43 s in 30
// LPs, for a plan of 4.77 s), at about the root's time per LP.
//
// Under a time limit the LP stops at stop with what its duals prove
// (milp.Options.DualBoundOnStop; TransportLP bounds every column, so that
// is finite) where CBC's LP, which does not watch the clock, was killed
// with nothing. Clp's clock is the wall clock (cbc's clpwall.cc), but it
// starts in the child, after the process has started and read the model,
// so the process is killed only grace after stop.
func startBound(ctx context.Context, e *encode.Encoding, limit float64, o encode.BoundOptions, lps int, incumbent *encode.Choice, solver milp.Solver, stop time.Time, grace time.Duration) *pendingBound {
	return startBoundBelow(ctx, e, limit, 0, o, lps, incumbent, solver, stop, grace)
}

// startBoundBelow is startBound with a cutoff (seconds; 0: none): the LP
// stops once its duals prove the step no shorter (milp.Options.Cutoff),
// with that bound, stopped short of its optimum.
func startBoundBelow(ctx context.Context, e *encode.Encoding, limit, cutoff float64, o encode.BoundOptions, lps int, incumbent *encode.Choice, solver milp.Solver, stop time.Time, grace time.Duration) *pendingBound {
	if solver == nil {
		solver = cbc.Solver{Isolated: true}
	}
	opt := milp.Options{Threads: 1, DualBoundOnStop: true, Cutoff: cutoff * encode.MILPTimeUnit}
	cancel := context.CancelFunc(func() {})
	if !stop.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, stop.Add(grace))
	}
	b := &pendingBound{done: make(chan struct{})}
	began := time.Now()
	go func() {
		defer close(b.done)
		defer cancel()
		defer func() { b.seconds = time.Since(began).Seconds() }()
		model, vars := e.TransportLP(limit, o)
		if lps > 0 {
			opt.Choices, opt.NodeLimit = e.BoundChoices(vars, incumbent), lps
		}
		if !stop.IsZero() {
			// Counted once the model is built, so that the LP stops at
			// stop rather than the model's encoding later.
			opt.TimeLimit = timeUntil(stop)
		}
		res, err := solver.Solve(ctx, model, opt)
		switch {
		case err != nil:
		case res.Status == milp.Optimal && res.Objective >= 0:
			// The LP's optimum, or the branching's, which ended.
			b.value, b.ok, b.branches = res.Objective/encode.MILPTimeUnit, true, res.Nodes
		case res.Nodes > 0 && res.Bound > 0 && !math.IsInf(res.Bound, 0):
			// Branched until its LPs or the clock ran out: the least
			// open branch's value.
			b.value, b.ok, b.branches = res.Bound/encode.MILPTimeUnit, true, res.Nodes
		case res.Status == milp.NoSolution && res.StoppedBy == milp.LimitTime && res.Bound > 0 && !math.IsInf(res.Bound, 0):
			b.value, b.ok, b.stopped = res.Bound/encode.MILPTimeUnit, true, true
		case res.Status == milp.NoSolution && res.StoppedBy == milp.LimitCutoff && res.Bound > 0:
			// Past the cutoff (an infeasible LP's bound is +Inf: no plan
			// at all beats it).
			b.value, b.ok, b.cut = res.Bound/encode.MILPTimeUnit, true, true
		}
	}()
	return b
}

// wait blocks until the LP is solved, stopped or abandoned (its context
// ended, the solver failed; ok is false then). stopped says that the clock
// stopped it, and seconds is the bound its duals prove.
func (b *pendingBound) wait() (seconds float64, ok, stopped bool) {
	<-b.done
	return b.value, b.ok, b.stopped
}

// lpSeconds waits for the LP and returns its wall time: 0 for none (b
// nil) or one solved before this synthesis (reuse).
func (b *pendingBound) lpSeconds() float64 {
	if b == nil {
		return 0
	}
	<-b.done
	return b.seconds
}

// proves waits for the LP and reports whether its bound proves a plan of
// step seconds optimal within OptimalGap.
func (b *pendingBound) proves(step float64) bool {
	lp, ok, _ := b.wait()
	return ok && milp.Gap(step, lp) <= OptimalGap
}

// source is the relaxation that proved the bound wait returns.
func (b *pendingBound) source() BoundSource {
	switch {
	case b.stopped:
		return BoundTransportLPStopped
	case b.branches > 0:
		return BoundTransportLPBranched
	}
	return BoundTransportLP
}

// nearMemory reports whether ch fills some device beyond boundMemoryShare
// of its usable memory (e.Capacity), by the encoding's estimate.
func nearMemory(e *encode.Encoding, ch *encode.Choice) bool {
	br, err := e.Evaluate(ch)
	if err != nil {
		return true
	}
	for d, m := range br.Memory {
		if m > boundMemoryShare*e.Capacity[d] {
			return true
		}
	}
	return false
}

// anyOrderBound makes the higher of lp seconds (ok: the LP was solved, or
// stopped with a bound) and work seconds (the work LP's, 0 if it failed)
// out's bound over every plan under every issue order, no higher than the objective. The joint MILP's
// own bound, over list-ordered plans, cannot stand in for them: without
// either nothing is proven (bound 0). A status "optimal" is the MILP's,
// over list-ordered plans; over every order it is only feasible, unless
// the bound meets the objective.
func anyOrderBound(out *Result, lp float64, ok bool, by BoundSource, work float64) {
	out.Bound, out.BoundBy, out.AnyOrder = 0, BoundJointMILP, true
	if ok {
		liftBound(out, lp, by)
	}
	liftBound(out, work, BoundWorkLP)
	out.Gap = milp.Gap(out.Objective, out.Bound)
	if out.Status == milp.Optimal.String() && out.Gap > anyOrderOptimalGap {
		out.Status = milp.Feasible.String()
	}
}

// anyOrderOptimalGap is the gap under which a plan the joint MILP proved
// optimal over list-ordered plans stays "optimal" over every order: the
// LP's bound then meets its objective but for the two solves' rounding
// (their primal tolerances are 1e-7 of values near 1).
const anyOrderOptimalGap = 1e-6

// liftBound raises out's bound to lp seconds, proven by the relaxation by,
// when that is higher, and no higher than the objective (the LP bounds the
// plan's own cost too; above it only by the solvers' tolerances),
// recomputing the gap.
func liftBound(out *Result, lp float64, by BoundSource) {
	if !(lp > out.Bound) || math.IsInf(lp, 0) {
		return
	}
	out.Bound = min(lp, out.Objective)
	out.Gap = milp.Gap(out.Objective, out.Bound)
	out.BoundBy = by
}

// BoundSource names the relaxation that proved a Result's bound.
type BoundSource int8

// The relaxations a bound comes from. Where all three are solved the
// transport LP is the highest on the paper's models; the work LP, which
// ignores communication, is the highest only where compute is the step or
// the clock stopped the other two, which it never does (Synthesize solves
// it first, in milliseconds).
const (
	// BoundJointMILP is the joint MILP's own bound (0 when it proved
	// nothing).
	BoundJointMILP BoundSource = iota
	// BoundTransportLP is the transport relaxation's LP (startBound).
	BoundTransportLP
	// BoundWorkLP is the work relaxation's (workBound): the ideal compute
	// time, communication free.
	BoundWorkLP
	// BoundTransportLPStopped is what the transport relaxation's duals
	// proved when the time limit stopped its LP (startBound): lower than
	// its optimum, and rising as the LP runs.
	BoundTransportLPStopped
	// BoundTransportLPBranched is the least open branch's value of the
	// transport LP branched on the op classes' rules (Options.BoundLPs):
	// at least the LP's optimum.
	BoundTransportLPBranched
)

func (b BoundSource) String() string {
	switch b {
	case BoundTransportLP:
		return "transport LP"
	case BoundWorkLP:
		return "work LP"
	case BoundTransportLPStopped:
		return "transport LP, stopped by the time limit"
	case BoundTransportLPBranched:
		return "transport LP, branched on the op classes' rules"
	}
	return "joint MILP"
}

// workBound is the optimum of e's work LP (encode.Encoding.WorkLP), in
// seconds: a bound on every plan's step under every issue order; 0 if the
// solve failed. It takes milliseconds (bert-moe on paper-8: 147 columns,
// 3 ms), so it runs in-process, before the search.
func workBound(ctx context.Context, e *encode.Encoding) float64 {
	res, err := cbc.Solver{}.Solve(ctx, e.WorkLP(), milp.Options{Threads: 1})
	if err != nil || res.Status != milp.Optimal || !(res.Objective >= 0) {
		return 0
	}
	return res.Objective / encode.MILPTimeUnit
}

// LPBound is a transport LP's bound solved ahead of a synthesis
// (TransportFor), for plan's device search, which screens sets of devices
// by it: Options.Bound hands it to Synthesize, which then does not solve
// the same LP again.
type LPBound struct {
	// Seconds bounds the step of every plan the encoding can express
	// (in every issue order of its collectives when AnyOrder).
	Seconds float64
	// Stopped says the clock stopped the LP: Seconds is what its duals
	// prove, below its optimum.
	Stopped bool
	// Cut says the cutoff stopped the LP (TransportFor's): Seconds is
	// what its duals prove, at least the cutoff and at most the optimum.
	Cut      bool
	AnyOrder bool
}

// TransportFor encodes g for m's cluster and solves its transport LP with
// the memory rows left out (the form Synthesize solves unless a start
// comes near the memory): a bound on every plan's step that counts the
// communication a plan must do, where the work bound (IdealFor) counts
// only compute. Solved to its end it takes seconds on full-size models, a
// fifth to a third of a Synthesize (bert-base on paper-64: 3.8 s of
// 17.7 s; on one of its machines 0.55 s of 1.9 s).
//
// step, when positive, is the step of a plan the encoding can express (a
// hand-written start's): every column is capped by it, which cuts off no
// plan as fast, so that the LP's duals prove a finite bound wherever it
// stops. cutoff, when positive (it needs step), stops the LP once its
// duals prove the step no shorter than cutoff (Cut): the caller has a
// plan that fast elsewhere, and a bound is all it wants. bert-base's LP
// on all of paper-64 at batch 32, against the 0.032 s of one V100
// machine's plan: 0.116 s proven in 0.3 s, where the optimum (0.714 s)
// takes 5.1 s.
//
// Only opt's Optimizer, MemoryFraction, Segments, NoTie, NoGroup,
// NoAllToAll, AnyOrderBound and BoundSolver matter, and TimeLimit, which
// stops the LP with what its duals prove. ok is false when the LP proved
// nothing (its solver failed, or the clock stopped it with no finite
// bound).
func TransportFor(ctx context.Context, g *ir.Graph, m *cost.Model, opt Options, step, cutoff float64) (b LPBound, ok bool, err error) {
	e, err := opt.encode(g, m)
	if err != nil {
		return LPBound{}, false, err
	}
	var stop time.Time
	grace := graceFor(opt.TimeLimit)
	if opt.TimeLimit > 0 {
		stop = time.Now().Add(opt.TimeLimit - grace) // killed at the limit
	}
	if step <= 0 {
		cutoff = 0 // with a column uncapped the duals prove nothing
	}
	p := startBoundBelow(ctx, e, max(step, 0), max(cutoff, 0), encode.BoundOptions{AnyOrder: opt.AnyOrderBound}, 0, nil, opt.BoundSolver, stop, grace)
	seconds, ok, stopped := p.wait()
	return LPBound{Seconds: seconds, Stopped: stopped, Cut: p.cut, AnyOrder: opt.AnyOrderBound}, ok, nil
}

// reuse is b as the bound Synthesize would start under opt (memory: with
// the memory rows), already solved; nil when there is none, or when opt
// asks for another form of the LP than b's, or b was stopped short (a
// Synthesize given longer may prove more; one past a cutoff, no less than
// the plan it was cut off by, holds no more than that).
func (b *LPBound) reuse(opt Options, memory bool) *pendingBound {
	if b == nil || b.Stopped || b.Cut || memory || opt.BoundLPs > 0 || b.AnyOrder != opt.AnyOrderBound {
		return nil
	}
	done := make(chan struct{})
	close(done)
	return &pendingBound{done: done, value: b.Seconds, ok: true}
}
