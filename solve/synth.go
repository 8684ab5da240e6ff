package solve

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"hap/cost"
	"hap/encode"
	"hap/ir"
	"hap/milp"
	"hap/milp/cbc"
	"hap/spmd"
)

// Options configure a synthesis.
type Options struct {
	Optimizer ir.Optimizer
	// Recompute lists the units of recomputation (encode.RecomputeUnits)
	// the encoding prices as recomputed (encode.EncodeOptions.Recompute).
	Recompute []int
	// NodeLimit bounds the branch-and-bound nodes of every MILP solve
	// (and turns CBC's cut generation off, whose root passes dominate
	// large models); the search then stops with the best plan found and
	// its proven bound. 0 means no limit: prove optimality. Unlike a time
	// limit it gives the same plan on any machine.
	NodeLimit int
	// TimeLimit caps the search's wall time (0: no cap). When it stops a
	// solve the plan depends on the machine's speed (Result.TimeLimited).
	TimeLimit time.Duration
	// RelGap stops once the incumbent is proven within this fraction of
	// optimal; 0 means prove optimality.
	RelGap float64
	// Thorough keeps CBC's root cuts and strong branching on in the joint
	// MILP under a node limit too (a time limit always has them): each
	// node costs more, and the proven bound rises. Ten bare nodes are the
	// fast default; a user who asks for more wants the proof: at 1000
	// nodes, mlp-tiny on paper-8 went from a gap of 81% in 2 s to
	// proven optimal in 23 s. Still the same plan on any machine.
	Thorough bool
	// NoTie turns off tying of identical layers; NoGroup gives every
	// device its own variables instead of sharing them among identical
	// devices (exact integer lengths per device, larger model).
	NoTie, NoGroup bool
	// NoAllToAll leaves all-to-all out of the search
	// (encode.EncodeOptions.NoAllToAll).
	NoAllToAll bool
	// MemoryFraction is the share of each device's memory the plan may
	// fill under the encoding's memory model; 0 means
	// encode.DefaultMemoryFraction.
	MemoryFraction float64
	// Segments overrides the candidate segments (tests); nil derives them.
	Segments []spmd.Segment
	// Starts are programs to start the search from (the hand-written
	// strategies'): the cheapest under the encoding becomes the MIP start,
	// so the result is never worse than any of them.
	Starts []*spmd.Program
	// JointSolver solves the joint MILP; nil means CBC, in a child process
	// while its heuristics run (they can abort inside Clp). Polish's
	// smaller solves always use CBC. Tests set it to see the model the
	// search hands over, or to make the solver fail.
	JointSolver milp.Solver
	// BoundSolver solves the transport relaxation whose value bounds the
	// step beside the joint MILP's own bound (bound.go); nil means CBC in
	// a child process.
	BoundSolver milp.Solver
	// AnyOrderBound asks for a bound over every plan under every issue
	// order of its collectives (encode.BoundOptions.AnyOrder), for a plan
	// whose order will be searched: the transport LP is then solved in
	// that form whatever the limits, and it alone is the bound, since the
	// joint MILP's holds over list-ordered plans only (bound.go).
	AnyOrderBound bool
	// BoundLPs, when positive, branches the bound's transport LP on the
	// op classes' rules for up to that many more LP solves (startBound):
	// a higher bound, at about the LP's time for each. It counts LPs, not
	// seconds, so the plan stays the same on any machine.
	BoundLPs int
	// Progress, when set, is told what the search is doing as it goes
	// (a line each, printf-style): hap plan's progress on a terminal. The
	// search is the same without it.
	Progress func(format string, args ...any)
	// Bound, when set, is the transport LP's bound already solved for this
	// graph and cluster under these options (TransportFor: the device
	// search's screen). Synthesize takes it rather than solve the same LP
	// again, unless it asks for another form: the memory rows (a start near
	// the memory), branching (BoundLPs), or the other order (AnyOrderBound).
	Bound *LPBound
	// remindEvery is how often Progress is reminded of a wait after
	// Polish (0: defaultRemindEvery); tests shorten it.
	remindEvery time.Duration
}

// Result is a synthesized program and how it was found.
type Result struct {
	Program  *spmd.Program
	Encoding *encode.Encoding
	Choice   *encode.Choice
	Estimate *encode.Breakdown
	Status   string // optimal or feasible
	// Objective is the plan's step time under the encoding (seconds): the
	// MILP's objective at its point, or Estimate's when tidying the
	// point's methods made the plan cheaper (planObjective). Bound is its
	// proven lower bound.
	Objective float64
	Bound     float64
	Gap       float64
	Seconds   float64
	Vars      int
	Rows      int
	// StoppedBy says what ended the joint MILP short of optimality;
	// TimeLimited whether the clock stopped any part of the search (the
	// plan may then differ on a faster or slower machine).
	StoppedBy   milp.Limit
	TimeLimited bool
	// JointOptions are the options the joint MILP was solved with, for
	// the plan's record of its search settings (milp.Options.Search).
	JointOptions milp.Options
	// BoundBy says which relaxation proved Bound (bound.go); AnyOrder
	// that it holds under every issue order of the collectives
	// (Options.AnyOrderBound).
	BoundBy  BoundSource
	AnyOrder bool
	// BoundLPs is Options.BoundLPs, for the plan's record.
	BoundLPs int
	// SolverFailure, when set, is why the joint MILP gave no answer (its
	// solver process died); the plan is then the polished start's, with
	// the transport LP's bound, or the work LP's when that failed too.
	SolverFailure string
	// Phases is where Seconds went.
	Phases Phases
	// Start is Polish's plan (the polished best start), nil without one.
	// The plan is no dearer under the encoding; the simulator may still
	// find the start faster where the encoding's timeline is off, so
	// callers that simulate should try it.
	Start *spmd.Program
}

// Phases is where a synthesis's wall time went, in seconds. The parts
// overlap: the joint search and the bound's LP run beside Polish, each in
// a child process, so they need not add up to Result.Seconds, which is
// Encode + Polish + AfterPolish. Wall time differs from run to run, so it
// is for people (hap plan's progress, and the plan with --record-time:
// plan.Phases), never an input to a choice. Where the time goes is the
// first question a slow plan asks: on bert-base paper-64 Polish is the
// plan's time, on bert-moe paper-8 the bound's LP.
type Phases struct {
	// Encode is the encoding, the starts' repair and the work LP, before
	// Polish.
	Encode float64
	// Polish is the primal heuristic's (Polish), 0 without a start.
	Polish float64
	// JointSearch is the joint MILP's search, from its start to its end
	// (or to its stop, where the LP proved Polish's plan optimal), beside
	// Polish (the default) or after it; 0 where it was not started
	// (Polish used the whole time limit).
	JointSearch float64
	// BoundLP is the transport LP's, from its start to its end, beside the
	// others; 0 where it was not solved here (not wanted, or solved
	// before the synthesis by the device search's screen).
	BoundLP float64
	// AfterPolish is from Polish's end to the synthesis's: waiting for the
	// joint search and the LP where they run beside it, the joint search
	// itself where it runs after it, then decoding.
	AfterPolish float64
}

// ErrNoPlan is returned when no program fits; the message says why.
var ErrNoPlan = errors.New("no plan fits")

// Synthesize finds the program and integer shard lengths minimising the
// encoding's step time, jointly, as one MILP.
func Synthesize(ctx context.Context, g *ir.Graph, m *cost.Model, opt Options) (*Result, error) {
	start := time.Now()
	e, err := opt.encode(g, m)
	if err != nil {
		return nil, err
	}
	// The work LP's bound, which holds for every plan in every order, takes
	// milliseconds: the floor of the bound whatever stops the other two.
	work := workBound(ctx, e)
	// Two phases. A deterministic primal heuristic (Polish: local search
	// over the program ⇄ exact lengths for it) improves the best start
	// (the starts include dp-cp, whose lengths follow each device's
	// speed, and the paper's search, which starts from its FP32 peak;
	// polishing from those lengths too found no better plan on the paper
	// suite and doubled the time). The joint timeline MILP searches
	// beside it from the best start (the default ten bare nodes) or after
	// it from its plan (a thorough or time-limited search); the cheaper
	// plan is the answer, with the MILP's bound and gap: the heuristic
	// finds what CBC's own heuristics find slowly under the timeline's
	// many max-terms, and gives a search that can prune a good start.
	// Work is bounded by node limits, so the result does not
	// depend on the machine's speed; a time limit, when set, caps it too.
	if e.MinimumTotalMemory() > usableMemory(e) {
		// No split can help, whatever the program: say so now, rather
		// than after a search (over 18 minutes of CBC's on bert-base
		// paper-16 at batch 3072).
		return nil, fmt.Errorf("%w: %s", ErrNoPlan, explainInfeasible(e, nil, 0))
	}
	var seeds []*encode.Choice
	for _, p := range opt.Starts {
		if ch, ok := e.ChoiceOf(p); ok {
			seeds = append(seeds, ch)
		}
	}
	var heurDeadline, deadline time.Time
	if opt.TimeLimit > 0 {
		// The solvers stop a grace before the limit and are killed at
		// it, so that the synthesis ends by the limit (graceFor).
		solving := opt.TimeLimit - graceFor(opt.TimeLimit)
		deadline = start.Add(solving)
		heurDeadline = start.Add(solving * heuristicShare / 100)
	}
	// No plan worse than the best start is wanted: bounding the step by its
	// cost tightens the MILP (MILPBelow).
	seed, limit := bestStart(e, seeds, timelineCost) // limit 0 without a seed: no bound
	var closest *encode.Choice                       // when no start fits: the least-over program FitMemory reached
	if over := fasterOverMemory(e, seeds, seed, limit); len(over) > 0 {
		// Starts over the memory, and faster than any that fits (all of
		// them when none fits): repair the least-over one into one that
		// fits (FitMemory), rather than leave CBC's heuristics to find a
		// first plan, or start from a slow one (bert-moe at batch 512 on
		// two RTX 4090s and two A100s: only ep fit the planner's 90% of
		// memory, at 2.03 s; dp-ev, 3 GB over, repaired by moving samples
		// to the A100s, is 1.1 s).
		fit, over := FitMemory(ctx, e, over)
		if fit != nil && over == 0 {
			seeds = append(seeds, fit)
			seed, limit = bestStart(e, seeds, timelineCost)
		}
		if seed == nil {
			closest = fit
		}
	}
	var stepCap float64 // the step bound when no start fits, 0: none
	if seed == nil {
		// With no program known to fit, MILPBelow(0) bounds the step by
		// its worst case, whose big M's left the root LP unsolved after
		// 15 minutes (bert-base on paper-16 at batch 2560, where no
		// program fits). Bounded by unfitStepFactor × the slowest start's
		// step, memory aside, CBC proves that in 10 s; a plan slower than
		// that is no plan anyone would run.
		stepCap = unfitStepFactor * slowestStart(e, seeds)
		limit = stepCap
	}
	model, vars := e.MILPBelow(limit)
	// The bound's LP, beside Polish and the joint MILP (on the core their
	// in-process solves leave), when there is a plan to bound the step by
	// and the search may stop short of proving it optimal. Started before
	// Polish, it bounds the step by the best start's cost rather than the
	// polished one's, as the joint MILP's model does.
	var bound *pendingBound
	if seed != nil && (opt.NodeLimit > 0 || opt.TimeLimit > 0) || opt.AnyOrderBound {
		memory := seed != nil && nearMemory(e, seed)
		if bound = opt.Bound.reuse(opt, memory); bound == nil {
			bctx, cancel := context.WithCancel(ctx)
			defer cancel() // on an early return, its child process goes too
			bound = startBound(bctx, e, limit, encode.BoundOptions{Memory: memory, AnyOrder: opt.AnyOrderBound}, opt.BoundLPs, seed, opt.BoundSolver,
				deadline, graceFor(opt.TimeLimit))
		}
	}
	// The bare search (the default: ten nodes, no cuts, heuristics or
	// strong branching) runs beside Polish, from the best start, rather
	// than after it from Polish's plan: on the 26 cases of the paper and
	// modern suites and 12 tiny ones, its ten nodes never returned a plan
	// cheaper than Polish's, and its bound was the transport LP's or
	// below, yet they took 0.3–28 s after Polish (bert-moe on paper-8:
	// 28 of 33 s). Beside it, on the core the LP leaves, the same search
	// costs little wall time; the better plan of the two is the answer.
	// A search asked to prove more (Thorough) or held to a clock keeps
	// Polish's plan as its start: there the start's cost prunes a real
	// search, and a time limit is shared out between the two.
	var beside *pendingJoint
	if seed != nil && opt.NodeLimit > 0 && !opt.Thorough && opt.TimeLimit == 0 {
		mo := jointOptions(opt, true, 0)
		mo.Start = e.StartValues(vars, seed)
		beside = startJoint(ctx, opt.jointSolver(true), model, mo)
	}
	var timed bool // whether the clock stopped any solve
	var phases Phases
	polishStart := time.Now()
	phases.Encode = polishStart.Sub(start).Seconds()
	if seed != nil {
		// The program step (escape) only when a time limit leaves room for
		// it: it costs 1–12 s a solve on the paper's models, and with
		// hap-paper's plan among the starts it found nothing better on the
		// paper suite (same plans on every VGG19 row and BERT-Base
		// paper-32, 2–10× faster without it). Polishing from lengths
		// proportional to FP32 peaks as well was better than from the
		// best start on 1 of the 20 paper cases, by 0.03%, at 0.3–1.7 s.
		lo := milp.Options{NodeLimit: opt.NodeLimit, NoCuts: opt.NodeLimit > 0, NoHeuristics: opt.NodeLimit > 0, TimeLimit: timeUntil(heurDeadline)}
		p, _ := Polish(ctx, e, model, vars, seed, heurDeadline, lo, opt.TimeLimit > 0)
		seeds = append(seeds, p)
		timed = !heurDeadline.IsZero() && time.Now().After(heurDeadline)
	}
	polishEnd := time.Now()
	phases.Polish = polishEnd.Sub(polishStart).Seconds()
	seed, seedCost := bestStart(e, seeds, timelineCost)
	if seed != nil {
		opt.say("polished the best start, %.4g s, to %.4g s in %.2fs", limit, seedCost, phases.Polish)
		if waiting := opt.waitingFor(beside, bound); beside != nil && waiting != "" {
			opt.say("waiting for %s, beside Polish since the start", waiting)
			defer opt.remindWhileWaiting(beside, bound, polishEnd)()
		}
	}
	var mo milp.Options
	var res *milp.Result
	// The search beside Polish can find a plan at most the gap between
	// Polish's plan and the transport LP's bound faster: within
	// OptimalGap it is stopped, and Polish's plan is the answer, proven
	// optimal. Always decided on the LP, never on which of the two ends
	// first, so the answer is the same on any machine.
	proven := beside != nil && bound != nil && !opt.AnyOrderBound && bound.proves(seedCost)
	switch {
	case proven:
		beside.stop()
		// The search proved nothing of its own: the LP's bound is lifted
		// in below, and named as the proof.
		mo, res = beside.opt, &milp.Result{Status: milp.Optimal, Objective: seedCost * encode.MILPTimeUnit, Gap: 1}
	case beside != nil:
		mo, res, err = beside.wait()
	case seed != nil && !deadline.IsZero() && time.Now().After(deadline):
		// Polish ran to the deadline (its last solve past it, within its
		// grace): no time is left for the joint MILP, and given a
		// millisecond and its grace it only loaded the model and was
		// killed in its root LP (bert-moe on paper-8 under --time-limit
		// 10s: a second for nothing in each of the three sets searched).
		// The polished start is the plan, with the bound LP's bound.
		mo = jointOptions(opt, true, time.Millisecond)
		res = &milp.Result{Status: milp.NoSolution, StoppedBy: milp.LimitTime}
	default:
		mo = jointOptions(opt, seed != nil, timeUntil(deadline))
		if seed != nil {
			mo.Start = e.StartValues(vars, seed)
		}
		// With its primal heuristics on, CBC can abort inside Clp (a
		// failed assertion, seen in Polish's program step): that solve
		// runs in a child process, and if it dies the polished start is
		// the plan, with no bound but the transport LP's (bound.go).
		solveCtx := ctx
		if mo.TimeLimit > 0 {
			// CBC checks its clock between nodes, not inside the root's
			// LP, which is where the time goes on large models: 1 ms
			// asked, 68 s taken without a start (bert-base on paper-16
			// at batch 2560); 120 s asked, over five minutes taken with
			// one (bert-moe on paper-8, layers untied). Past the limit,
			// with a grace, the solver's child process is killed: the
			// answer is then the start, stopped by the time limit, or
			// without one "no plan within the limits".
			var cancel context.CancelFunc
			solveCtx, cancel = context.WithTimeout(ctx, mo.TimeLimit+graceFor(mo.TimeLimit))
			defer cancel()
		}
		// A child process whenever CBC's heuristics run or the clock may
		// have to stop it (a solve on this thread cannot be interrupted).
		from := "from the polished plan"
		if seed == nil {
			from = "without a start (none fits)"
		}
		switch {
		case mo.TimeLimit > 0:
			opt.say("searching the joint MILP %s, for up to %.1fs", from, mo.TimeLimit.Seconds())
		case mo.NodeLimit > 0:
			opt.say("searching the joint MILP %s, up to %d nodes", from, mo.NodeLimit)
		default:
			opt.say("searching the joint MILP %s, to optimality", from)
		}
		searched := time.Now()
		res, err = opt.jointSolver(!mo.NoHeuristics || solveCtx != ctx).Solve(solveCtx, model, mo)
		phases.JointSearch = time.Since(searched).Seconds()
		if err != nil && solveCtx != ctx && solveCtx.Err() != nil && ctx.Err() == nil {
			res, err = &milp.Result{Status: milp.NoSolution, StoppedBy: milp.LimitTime}, nil
		}
	}
	var failure string
	switch {
	case errors.Is(err, cbc.ErrSolverProcess) && seed != nil:
		failure = err.Error()
	case err == nil && res.Status == milp.Infeasible && seed != nil:
		// The start satisfies every row (MILPBelow bounds the step by a
		// start's cost, no lower), so "infeasible" is the solver's
		// numerical trouble, not a fact about the plans.
		failure = "the solver reported the MILP infeasible, though its start is a solution"
	}
	if failure != "" {
		res = &milp.Result{Status: milp.Feasible, Objective: seedCost * encode.MILPTimeUnit, Gap: 1}
		err = nil
	}
	// CBC can lose a MIP start it accepted: its log says "MIPStart
	// provided solution with cost …", and a search stopped by its node
	// limit still answers "no solution" (coin-or/Cbc#282; bert-moe on
	// paper-8 with its dense and MoE layers untied, where the answer fell
	// back to hap-paper's 1.446 s plan, 5.5% slower than the start). The
	// start is a solution, and the bound the search proved holds for
	// every plan, the start's included.
	lostStart := err == nil && failure == "" && seed != nil && res.Status == milp.NoSolution
	if lostStart {
		obj, bound := seedCost*encode.MILPTimeUnit, res.Bound
		if !(bound >= 0 && bound <= obj) { // NaN or nonsense: nothing proven
			bound = 0
		}
		res = &milp.Result{Status: milp.Feasible, Objective: obj, Bound: bound, Gap: milp.Gap(obj, bound), StoppedBy: res.StoppedBy}
	}
	if err != nil {
		return nil, fmt.Errorf("solving %d×%d MILP: %w", len(model.Rows), len(model.Cols), err)
	}
	switch res.Status {
	case milp.Optimal, milp.Feasible:
	case milp.Infeasible:
		if !e.MemoryMayBind() {
			// Memory rows are left out when no choice can exceed a
			// device's capacity: the infeasibility is elsewhere.
			return nil, fmt.Errorf("%w: no program the encoding can express is valid for this graph, whatever the memory (%d op classes, segments %s): an encoding gap, please report it with the graph", ErrNoPlan, len(e.Classes), encode.SegmentNames(e.Segs))
		}
		return nil, fmt.Errorf("%w: %s", ErrNoPlan, explainInfeasible(e, closest, stepCap))
	default:
		if seed == nil && len(seeds) > 0 {
			why := fmt.Sprintf("no strategy it started from fits the memory, even repaired, and the solver found no plan within the limits (%s, stopped by %s; --time-limit lets it search longer)", res.Status, res.StoppedBy)
			if c := closestOver(e, closest); c != "" {
				why += ": " + c
			}
			return nil, fmt.Errorf("%w: %s", ErrNoPlan, why)
		}
		return nil, fmt.Errorf("%w: the solver found no plan within the limits (%s)", ErrNoPlan, res.Status)
	}
	var ch *encode.Choice
	switch {
	case failure != "" || lostStart || proven: // each only with a start
		ch = tidyMethods(e, seed)
	case beside != nil:
		// Its search started before Polish's plan was known.
		ch = cheaper(e, tidyMethods(e, e.ChoiceFrom(vars, res.Values)), tidyMethods(e, seed))
	default:
		ch = tidyMethods(e, e.ChoiceFrom(vars, res.Values))
	}
	br, err := e.Evaluate(ch)
	if err != nil {
		return nil, fmt.Errorf("internal: the solver's choice does not evaluate: %w", err)
	}
	p, err := e.Decode(ch)
	if err != nil {
		return nil, fmt.Errorf("internal: the solver's choice does not decode: %w", err)
	}
	var startProg *spmd.Program
	if seed != nil {
		startProg, _ = e.Decode(seed) // a start that does not decode is not offered
	}
	objective, lower, gap := planObjective(res, br)
	if beside != nil {
		phases.JointSearch = beside.elapsed()
	}
	out := &Result{Program: p, Start: startProg, Encoding: e, Choice: ch, Estimate: br, Status: res.Status.String(),
		Objective: objective, Bound: lower, Gap: gap, Vars: len(model.Cols), Rows: len(model.Rows),
		StoppedBy: res.StoppedBy, TimeLimited: timed || res.StoppedBy == milp.LimitTime, SolverFailure: failure, JointOptions: mo, BoundLPs: opt.BoundLPs}
	// done records the phases and the time once the LP has ended (the
	// last to).
	done := func() *Result {
		phases.BoundLP = bound.lpSeconds()
		end := time.Now()
		phases.AfterPolish = end.Sub(polishEnd).Seconds()
		out.Phases = phases
		// Counted to here, past the wait for the LP (the time-limited
		// search's plan waits for it after the search).
		out.Seconds = end.Sub(start).Seconds()
		return out
	}
	if opt.AnyOrderBound { // the bound LP always runs then
		lp, ok, _ := bound.wait()
		anyOrderBound(out, lp, ok, bound.source(), work)
		return done(), nil
	}
	if bound != nil {
		if lp, ok, _ := bound.wait(); ok {
			liftBound(out, lp, bound.source())
		}
	}
	liftBound(out, work, BoundWorkLP)
	return done(), nil
}

// planObjective is the objective, bound and gap (seconds) to report for
// the plan priced br that the MILP's answer res led to. The MILP's point
// is the plan before tidyMethods; at a node limit its methods can be far
// from their best (vgg19-tiny on a cluster of an A100, two T4s and three
// RTX 4090s, 1,000 nodes: tidying took the point's 4.516 ms to 4.072 ms),
// and reporting the point's value as the plan's objective overstated the
// gap beside a step the simulator put 10% lower. So the objective is the
// plan's own price where that is lower, by more than the MILP's
// tolerance, and the bound is kept at or below it.
func planObjective(res *milp.Result, br *encode.Breakdown) (objective, bound, gap float64) {
	objective, bound, gap = res.Objective/encode.MILPTimeUnit, res.Bound/encode.MILPTimeUnit, res.Gap
	if br.Seconds < objective*(1-objectiveTolerance) {
		objective = br.Seconds
		bound = min(bound, objective)
		gap = milp.Gap(objective, bound)
	}
	return objective, bound, gap
}

// objectiveTolerance is how far the plan's price may be below the MILP's
// objective and the MILP's value still stand: its primal tolerance is
// 1e-7 of values near 1 (encode.MILPTimeUnit), so a difference within
// this is the solver's rounding, not a cheaper plan.
const objectiveTolerance = 1e-6

// usableMemory is the devices' memory the planner may use, added up.
func usableMemory(e *encode.Encoding) float64 {
	usable := 0.0
	for _, c := range e.Capacity {
		usable += c
	}
	return usable
}

// explainInfeasible says why no plan fits. When the model's bytes, each
// held once somewhere, exceed every device's usable memory together, no
// split can help: it says so, listing the devices' capacities (alike
// devices in one clause: "devices 4–15 (P100-PCIE-16GB) 15.5 GB each",
// not twelve). Otherwise the devices conflict — the one that could take
// more cannot take what the others must shed — and it names the most-over
// device of closest, the program FitMemory got nearest to fitting.
//
// A stepCap > 0 is the step bound the search had (no start fitting, see
// Synthesize): the second case then holds for programs within it.
//
// It makes no claim about one device's least need: with uneven lengths a
// device may hold almost nothing, so a device's even share is not a
// bound on it (an earlier message said "device 16 needs at least …").
func explainInfeasible(e *encode.Encoding, closest *encode.Choice, stepCap float64) string {
	need, usable := e.MinimumTotalMemory(), usableMemory(e)
	unit, per := cost.ByteUnit(max(need, usable))
	if need > usable {
		type alike struct {
			name string
			have float64
		}
		type run struct {
			alike
			first, last int
		}
		var runs []run
		for d, c := range e.Capacity {
			a := alike{e.Model().Spec(d).Name, c}
			if k := len(runs) - 1; k >= 0 && runs[k].alike == a && runs[k].last == d-1 {
				runs[k].last = d
				continue
			}
			runs = append(runs, run{a, d, d})
		}
		var has []string
		for _, r := range runs {
			if r.last > r.first {
				has = append(has, fmt.Sprintf("devices %d–%d (%s) %.3g %s each", r.first, r.last, r.name, r.have*per, unit))
			} else {
				has = append(has, fmt.Sprintf("device %d (%s) %.3g %s", r.first, r.name, r.have*per, unit))
			}
		}
		return fmt.Sprintf("the model needs at least %.4g %s in all (parameters with their optimizer state, and the larger of the activations kept for backward and the gradients, each held once on some device) but the cluster has %.4g %s usable: %s",
			need*per, unit, usable*per, unit, strings.Join(has, ", "))
	}
	held := fmt.Sprintf("the cluster could hold the model once (at least %.4g %s of %.4g %s usable)", need*per, unit, usable*per, unit)
	why := held + ", but no program fits every device's memory at once"
	if stepCap > 0 {
		why = fmt.Sprintf("%s, but no program of at most %.4g s per step (%g× the slowest of the strategies it started from) fits every device's memory at once", held, stepCap, float64(unfitStepFactor))
	}
	if c := closestOver(e, closest); c != "" {
		why += ": " + c
	}
	return why
}

// closestOver names the most-over device of closest, the program
// FitMemory got nearest to fitting; "" without one.
func closestOver(e *encode.Encoding, closest *encode.Choice) string {
	if closest == nil {
		return ""
	}
	mem, err := e.PeakMemory(closest)
	if err != nil {
		return ""
	}
	d := 0
	for i := range mem {
		if mem[i]-e.Capacity[i] > mem[d]-e.Capacity[d] {
			d = i
		}
	}
	unit, per := cost.ByteUnit(max(mem[d], e.Capacity[d]))
	return fmt.Sprintf("the closest program found needs %.3g %s on device %d (%s), which has %.3g %s usable", mem[d]*per, unit, d, e.Model().Spec(d).Name, e.Capacity[d]*per, unit)
}

// CandidateSegments derives the units the planner may split: the batch
// (dim 0 of the first input), attention heads (and key/value heads of
// grouped-query attention), and the output width of
// every two-dimensional weight and the first dim of every expert weight.
func CandidateSegments(g *ir.Graph) []spmd.Segment {
	var segs []spmd.Segment
	seen := map[int]bool{}
	add := func(name string, units int) {
		if units < 2 || seen[units] {
			return
		}
		seen[units] = true
		segs = append(segs, spmd.Segment{Name: name, Units: units})
	}
	for _, t := range g.TensorsOfKind(ir.Input) {
		if s := g.Tensors[t].Shape; len(s) > 0 {
			if s[0] == 1 {
				// A batch of one sample is still a segment: the loss
				// must end as Reduce, and with no other way to a
				// partial loss, its one device computes it (the
				// others add zero), as the hand-written strategies do.
				segs = append(segs, spmd.Segment{Name: "batch", Units: 1})
				break
			}
			add("batch", s[0])
			break
		}
	}
	for i := range g.Ops {
		if op := &g.Ops[i]; op.Kind == ir.OpAttention {
			if q := g.Tensors[op.Inputs[0]].Shape; len(q) == 4 {
				add("heads", q[1])
			}
			if k := g.Tensors[op.Inputs[1]].Shape; len(k) == 4 && op.Attrs.KVGroup > 1 {
				// Grouped-query attention splits by whole groups: on
				// its key/value heads (a split of the query heads
				// alone fits no rule of it).
				add("kv-heads", k[1])
			}
		}
	}
	var widths []int
	for _, t := range g.TensorsOfKind(ir.Param) {
		s := g.Tensors[t].Shape
		switch len(s) {
		case 2:
			widths = append(widths, s[1])
		case 3:
			add("experts", s[0])
		}
	}
	sort.Ints(widths)
	for _, w := range widths {
		add(fmt.Sprintf("w%d", w), w)
	}
	return segs
}

// heuristicShare is the percentage of a time limit Polish may use; the
// rest is the joint timeline MILP's, which needs time to improve on the
// heuristic's plan and prove its bound.
const heuristicShare = 50

// jointOptions are the joint MILP's search settings under opt, with or
// without a start, within limit (0: none; a search without a start gets
// noStartTimeLimit then).
//
// Node-limited, the root does no cuts, and no heuristics when there is
// a start (they took 6 of 7 s of vgg19-tiny's root and found nothing
// Polish had not); without one, the feasibility pump alone, for
// noStartPumpPasses passes: all of CBC's heuristics ran for over 18
// minutes on bert-base paper-16 at batch 3072 (no program fits), which
// a node limit does not bound, as it bounds no heuristic.
// Strong branching too is off with a start: each trial re-solves the
// timeline LP, ~1 s a node on bert-base paper-64, and the ten nodes
// from Polish's plan found nothing it had not (the trials do pay off
// inside Polish's smaller pinned solves, which keep them).
// And the root LP is solved without CBC's LP presolve: with the rest
// off, that LP is most of the ten nodes' work (gpt2 on modern-24: 6.7
// of 7.8 s), and unpresolved it took a third less time, with the same
// plans and bounds on the paper and modern cases measured (joint MILP,
// 2 cores: gpt2 modern-24 7.7 → 5.7 s, bert-base paper-16 4.8 → 3.0 s,
// vit paper-16 4.6 → 2.8 s, bert-moe paper-8 19.9 → 11.6 s). Polish's
// pinned solves keep it: on gpt2 they got slower without it (0.7 →
// 0.9 s), and presolve is cheap where most columns are pinned.
func jointOptions(opt Options, haveStart bool, limit time.Duration) milp.Options {
	bare := opt.NodeLimit > 0 && !opt.Thorough
	bareFromStart := bare && haveStart
	mo := milp.Options{TimeLimit: limit, RelGap: opt.RelGap, Threads: 1, NodeLimit: opt.NodeLimit,
		NoCuts: bare, NoHeuristics: opt.NodeLimit > 0 && haveStart, NoStrongBranching: bareFromStart, NoPresolve: bareFromStart}
	if opt.NodeLimit > 0 && !haveStart {
		// With no start, the root alone can take minutes (below): no
		// cuts or strong branching, thorough or not.
		mo.NoCuts, mo.PumpPasses, mo.NoStrongBranching = true, noStartPumpPasses, true
		if mo.TimeLimit == 0 {
			// Even so the root's LP took from 9 s to 70 s on that case at
			// batch 2560, as the step bound moved by 0.02%: a clock
			// bounds the wait for an answer that may be "no plan".
			mo.TimeLimit = noStartTimeLimit
		}
	}
	return mo
}

// jointSolver is the joint MILP's solver: opt.JointSolver, or CBC, in a
// child process when isolated.
func (opt Options) jointSolver(isolated bool) milp.Solver {
	if opt.JointSolver != nil {
		return opt.JointSolver
	}
	return cbc.Solver{Isolated: isolated}
}

// OptimalGap is the relative gap within which a plan is reported
// optimal when the transport LP's bound, not the joint MILP's, proves
// it (Synthesize): the default relative MIP gap of Gurobi and CPLEX,
// 1e-4. ViT's plans on paper-16 are proven within 0.004–0.009% at 12 to
// 48 layers, where the search beside Polish ran on after Polish and the
// LP had ended, and found nothing (ViT-48: 53 s, stopped 21 s).
const OptimalGap = 1e-4

// say tells opt.Progress, if any.
func (opt Options) say(format string, args ...any) {
	if opt.Progress != nil {
		opt.Progress(format, args...)
	}
}

// waitingFor names what of the search beside Polish (the joint search,
// the bound's LP) has not ended, "" when nothing has: after Polish, what
// the plan waits for (on BERT-MoE over paper-8, the LP for 20 s).
func (opt Options) waitingFor(beside *pendingJoint, bound *pendingBound) string {
	var left []string
	if beside != nil && !isDone(beside.done) {
		left = append(left, fmt.Sprintf("the joint search (%d nodes)", beside.opt.NodeLimit))
	}
	if bound != nil && !isDone(bound.done) {
		left = append(left, "the bound's LP")
	}
	return strings.Join(left, " and ")
}

// defaultRemindEvery is how often a wait after Polish is told again on
// Progress: BERT-MoE on paper-64 waits half a minute for the joint
// search's ten nodes, and one line at its start left the terminal silent
// long enough to look hung.
const defaultRemindEvery = 10 * time.Second

// remindWhileWaiting tells opt.Progress, every opt.remindEvery, what of the
// search beside Polish (waitingFor) the plan still waits for and how long
// since Polish ended at polished, until nothing is left or the returned
// stop is called. Stop returns once the reminder has ended, so that no
// line follows the caller's own. Reminders change nothing in the search.
func (opt Options) remindWhileWaiting(beside *pendingJoint, bound *pendingBound, polished time.Time) (stop func()) {
	if opt.Progress == nil {
		return func() {}
	}
	every := opt.remindEvery
	if every <= 0 {
		every = defaultRemindEvery
	}
	quit, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				waiting := opt.waitingFor(beside, bound)
				if waiting == "" {
					return
				}
				opt.say("still waiting for %s, %.0fs after Polish", waiting, time.Since(polished).Seconds())
			}
		}
	}()
	return func() {
		close(quit)
		<-ended
	}
}

// isDone reports whether done is closed, without waiting.
func isDone(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// pendingJoint is the joint MILP's search under way beside Polish.
type pendingJoint struct {
	done  chan struct{}
	stop  context.CancelFunc // abandons the search; its child process is killed
	opt   milp.Options
	res   *milp.Result
	err   error
	began time.Time
	// seconds is the search's wall time, once done.
	seconds float64
}

// elapsed is the search's wall time: to its end, or until now where it
// was stopped (proven) and may not have ended yet.
func (j *pendingJoint) elapsed() float64 {
	if isDone(j.done) {
		return j.seconds
	}
	return time.Since(j.began).Seconds()
}

// startJoint starts solving model under mo. The solver must not hold
// CBC's in-process lock for the whole solve, or Polish's solves wait for
// it: give it CBC in a child process.
func startJoint(ctx context.Context, solver milp.Solver, model *milp.Model, mo milp.Options) *pendingJoint {
	ctx, stop := context.WithCancel(ctx)
	j := &pendingJoint{done: make(chan struct{}), stop: stop, opt: mo, began: time.Now()}
	go func() {
		defer close(j.done)
		defer stop()
		j.res, j.err = solver.Solve(ctx, model, mo)
		j.seconds = time.Since(j.began).Seconds()
	}()
	return j
}

// wait blocks until the search ends: its options, its result or error.
func (j *pendingJoint) wait() (milp.Options, *milp.Result, error) {
	<-j.done
	return j.opt, j.res, j.err
}

// cheaper is whichever of a and b (either may be nil) Evaluate prices
// lower and accepts.
func cheaper(e *encode.Encoding, a, b *encode.Choice) *encode.Choice {
	best, _ := bestStart(e, []*encode.Choice{a, b}, timelineCost)
	return best
}

// timelineCost prices an evaluated choice under the MILP's objective.
func timelineCost(br *encode.Breakdown) float64 { return br.Seconds }

// noStartPumpPasses bounds the feasibility pump, the one primal heuristic
// of a node-limited joint MILP without a start (see Synthesize).
const noStartPumpPasses = 30

// noStartTimeLimit bounds the joint MILP's wall time when no start fits
// and no --time-limit is given (see Synthesize): the one solve whose work
// a node limit does not bound.
const noStartTimeLimit = 2 * time.Minute

// timeLimitGrace is the longest grace (graceFor) a time limit gives.
const timeLimitGrace = time.Second

// minTimeLimitGrace is the shortest grace (graceFor) a time limit gives,
// unless it is under twice that: time for a child process that stopped
// on its clock to send its answer, on a busy machine.
const minTimeLimitGrace = 200 * time.Millisecond

// timeUntil is the time limit of a solve that starts now and must end by
// dl: 0 (none) when dl is zero, and at least a millisecond otherwise, since
// a limit of 0 would mean none.
func timeUntil(dl time.Time) time.Duration {
	if dl.IsZero() {
		return 0
	}
	return max(time.Until(dl), time.Millisecond)
}

// graceFor is the grace of a solve under a time limit: its solvers stop
// (on the wall clock: CBC's search between nodes, Clp's LPs between
// iterations) that long before the limit, and their child processes are
// killed at it, so that a synthesis given a limit ends by it. A
// twentieth of the limit, within [minTimeLimitGrace, timeLimitGrace], and
// at most half of it. CBC's root LP does not look at the clock: where it
// is still running at the limit, it is killed, with the start (if any)
// the answer. The grace used to come on top of the limit (a tenth, 1–5
// s), while the solvers counted their process's CPU time and a busy
// machine kept a child's clock from reaching the limit.
func graceFor(limit time.Duration) time.Duration {
	return min(timeLimitGrace, max(minTimeLimitGrace, limit/20), limit/2)
}

// unfitStepFactor bounds the step of the plans searched when no start
// fits the memory, as a multiple of the slowest start's step (memory
// aside); see Synthesize.
const unfitStepFactor = 2

// slowestStart is the largest step of the starts that are valid programs,
// their memory aside; 0 when none is.
func slowestStart(e *encode.Encoding, starts []*encode.Choice) float64 {
	ev := e.NewEvaluator()
	slowest := 0.0
	for _, ch := range starts {
		if ch == nil {
			continue
		}
		if s, _, err := ev.Overflow(ch); err == nil {
			slowest = max(slowest, s)
		}
	}
	return slowest
}

// fasterOverMemory is the starts that are valid programs over the devices'
// memory and cheaper than best, the cheapest start that fits (of cost
// limit; every start over the memory when best is nil).
func fasterOverMemory(e *encode.Encoding, starts []*encode.Choice, best *encode.Choice, limit float64) []*encode.Choice {
	ev := e.NewEvaluator()
	var out []*encode.Choice
	for _, ch := range starts {
		if ch == nil {
			continue
		}
		if s, over, err := ev.Overflow(ch); err == nil && over > 0 && (best == nil || s < limit) {
			out = append(out, ch)
		}
	}
	return out
}

// bestStart is the cheapest feasible start under the encoding and the
// given cost, and that cost; nil and 0 when none is feasible.
func bestStart(e *encode.Encoding, starts []*encode.Choice, cost func(*encode.Breakdown) float64) (*encode.Choice, float64) {
	var best *encode.Choice
	bestCost := 0.0
	for _, ch := range starts {
		if ch == nil {
			continue
		}
		br, err := e.Evaluate(ch)
		if err != nil {
			continue
		}
		if c := cost(br); best == nil || c < bestCost {
			best, bestCost = ch, c
		}
	}
	return best, bestCost
}
