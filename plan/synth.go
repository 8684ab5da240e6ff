package plan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"time"

	"hap/cost"
	"hap/encode"
	"hap/ir"
	"hap/milp"
	"hap/milp/cbc"
	"hap/sim"
	"hap/solve"
	"hap/spmd"
	"hap/strategy"
)

// SynthOptions configure Synthesize.
type SynthOptions struct {
	// NodeLimit bounds every MILP solve of the search (see
	// solve.Options.NodeLimit); 0 means DefaultNodeLimit, unless a
	// TimeLimit is set, which then alone bounds the search.
	NodeLimit int
	// TimeLimit bounds the search's wall time (0: none). The plan then
	// depends on the machine's speed; without it the same inputs give the
	// same plan bytes anywhere.
	TimeLimit time.Duration
	// Progress, when set, receives one line per phase.
	Progress io.Writer
	// WallTime records the solver's wall time in the plan; off, the plan's
	// bytes depend only on its inputs.
	WallTime bool
	// Paper, when set, is the program of the paper's search (PaperSearch)
	// already run on these inputs (bench runs it as a system of its own);
	// otherwise Synthesize runs it, with PaperShare of the time limit as
	// its safety stop.
	Paper *spmd.Program
	// Simulated holds results already simulated for named strategies on
	// these inputs (bench's baseline rows); Synthesize reuses them.
	Simulated map[string]*sim.Result
	// MemoryFraction is the share of each device's memory the planner's
	// memory model may fill (0: encode.DefaultMemoryFraction); the rest
	// is left for what it does not count (the CUDA context, workspace,
	// the allocator's fragmentation). The plan's simulated peak must fit
	// the whole memory, as any start's must.
	MemoryFraction float64
	// Untie lifts the joint MILP's ties (docs/planner.md, Untying), so
	// that its bound and "optimal" hold over more plans than tied ones.
	// The tied MILP is solved first and its plan starts the untied one,
	// so untying never returns a slower plan; it costs a larger MILP.
	Untie Untie
	// AnyOrderBound makes the plan's bound hold over every plan under
	// every issue order of its collectives, not over list-ordered plans
	// only (solve.Options.AnyOrderBound): set it when the plan's order
	// will be searched (SearchOrder), so that the bound and gap are the
	// pair's.
	AnyOrderBound bool
	// BoundLPs, when positive, branches the bound's transport LP on the op
	// classes' rules for up to that many more LP solves
	// (solve.Options.BoundLPs): a higher proven bound where the LP mixes
	// rules, at about the LP's time for each. The plan records it.
	BoundLPs int
	// Recompute says which layers recompute their activations in
	// backward (RecomputeMode): "" or "none" plans in.Recompute as it is.
	Recompute RecomputeMode
	// bound is the transport LP's bound the device search's screen solved
	// for these inputs (solve.Options.Bound), which the tied search then
	// need not solve again.
	bound *solve.LPBound
	// screensInTurn has the device search screen each set only when it
	// reaches it, never beside the search or screen before (screenAhead);
	// aheadTaken, when set, counts the screens it took from beside
	// another set's search or screen. For the tests, which compare the two.
	screensInTurn bool
	aheadTaken    *aheadCounts
}

// aheadCounts counts the screens the device search took that ran beside a
// set's search, and those that ran beside screens alone
// (SynthOptions.aheadTaken).
type aheadCounts struct {
	besideSearch, besideScreen int
}

// add counts a, a screen taken; c may be nil.
func (c *aheadCounts) add(a *screenedAhead) {
	switch {
	case c == nil:
	case a.besideSearch:
		c.besideSearch++
	default:
		c.besideScreen++
	}
}

// Untie says which of the joint MILP's ties SynthOptions lifts.
type Untie struct {
	// Layers gives every forward op its own rule (encode's NoTie), not
	// one per op class of repeated layers.
	Layers bool
	// Devices gives every device its own lengths (encode's NoGroup), not
	// even shares within a group of identical devices.
	Devices bool
}

// Any reports whether u lifts a tie.
func (u Untie) Any() bool { return u.Layers || u.Devices }

// String is u as UntieOption records it and hap plan --untie takes it:
// "layers", "devices" or "layers,devices"; "" for none.
func (u Untie) String() string {
	var out []string
	if u.Layers {
		out = append(out, "layers")
	}
	if u.Devices {
		out = append(out, "devices")
	}
	return strings.Join(out, ",")
}

// ParseUntie is the Untie of a comma-separated list of "layers",
// "devices" and "all".
func ParseUntie(s string) (Untie, error) {
	var u Untie
	for _, f := range strings.Split(s, ",") {
		switch strings.TrimSpace(f) {
		case "layers":
			u.Layers = true
		case "devices":
			u.Devices = true
		case "all":
			u.Layers, u.Devices = true, true
		default:
			return Untie{}, fmt.Errorf("untie %q: want layers, devices or all (comma-separated)", f)
		}
	}
	return u, nil
}

// untieShare is the percentage of the solver's time limit the tied solve
// gets when Untie is set; the untied solve, larger and the one whose bound
// is reported, gets the rest.
const untieShare = 30

// PaperShare is the percentage of the time limit Synthesize allows the
// paper's search when it runs it itself — a safety stop: the search is
// bounded by state counts and usually takes a fraction of it; the joint
// MILP gets the rest of the limit.
const PaperShare = 30

// Synthesize plans in.Graph on in.Cluster with the synthesizer and
// returns the plan document.
func Synthesize(ctx context.Context, in *Inputs, opt SynthOptions) (*Plan, error) {
	return recomputeModes(in, opt, func(in *Inputs, opt SynthOptions) (*Plan, error) { return synthesize(ctx, in, opt) })
}

// synthesize is Synthesize with in.Recompute as it is.
func synthesize(ctx context.Context, in *Inputs, opt SynthOptions) (*Plan, error) {
	m, err := in.CostModel()
	if err != nil {
		return nil, err
	}
	if opt.MemoryFraction == 0 {
		opt.MemoryFraction = encode.DefaultMemoryFraction
	}
	say := func(format string, args ...any) {
		if opt.Progress != nil {
			fmt.Fprintf(opt.Progress, "hap plan: "+format+"\n", args...)
		}
	}
	devices := fmt.Sprintf("%d devices", in.Cluster.NumDevices())
	if in.Cluster.NumDevices() == 1 {
		devices = "1 device"
	}
	say("encoding %s (%d ops) for %s", in.Graph.Name, len(in.Graph.Ops), devices)
	// The hand-written strategies seed the search and stay in the running:
	// the plan returned is the one the simulator finds fastest.
	baselines, starts := handWritten(in)
	limit, nodes := opt.TimeLimit, opt.NodeLimit
	if limit == 0 && nodes == 0 {
		nodes = DefaultNodeLimit
	}
	// The paper's search is a candidate too (it ignores memory, so its
	// plan only competes when it fits), and a start when the encoding can
	// express it: the synthesizer is never slower than the algorithm it
	// improves on. (Not on one device, where it has nothing to decide:
	// paperSearches.)
	// The baselines the planner cannot price are simulated whatever the
	// solver finds: simulate them meanwhile, on the core the paper's
	// search (single-threaded) leaves, then beside the solver (2 s of 10
	// on bert-base paper-64; GPT-2 on modern-24, 0.7 s beside a paper
	// search of 2–3 s). The paper's program joins them once found.
	simulated := maps.Clone(opt.Simulated)
	if simulated == nil {
		simulated = map[string]*sim.Result{}
	}
	pre := make(chan map[string]*sim.Result, 1)
	paperFound := make(chan *spmd.Program, 1)
	hand := maps.Clone(baselines) // baselines gains the paper's below
	go func() { pre <- simulateUnpriced(ctx, in, m, opt.MemoryFraction, hand, paperFound, simulated) }()
	solveLimit := limit
	if opt.Paper == nil && paperSearches(in) {
		say("running the paper's search")
		start := time.Now()
		paperLimit := PaperSafetyLimit // its work bounds stop it well before
		if limit > 0 {
			paperLimit = limitShare(limit, PaperShare)
		}
		if p, err := PaperSearch(ctx, in, paperLimit); err == nil {
			opt.Paper = p
		}
		if limit > 0 {
			solveLimit = atLeastANanosecond(max(limit-time.Since(start), limit/2))
		}
	}
	if opt.Paper != nil {
		opt.Paper = in.withRecompute(opt.Paper)
		baselines["hap-paper"] = opt.Paper
		starts = append(starts, opt.Paper)
	}
	paperFound <- opt.Paper
	solveAt := func(fraction float64, limit time.Duration) (*solve.Result, error) {
		so := solve.Options{Optimizer: in.Optimizer, Recompute: in.Recompute, TimeLimit: limit, NodeLimit: nodes, Starts: starts, MemoryFraction: fraction,
			Thorough: nodes > DefaultNodeLimit, AnyOrderBound: opt.AnyOrderBound, BoundLPs: opt.BoundLPs}
		if opt.Progress != nil {
			so.Progress = say
		}
		if fraction == opt.MemoryFraction {
			// Solved again under a smaller share, the encoding differs.
			so.Bound = opt.bound
		}
		if !opt.Untie.Any() {
			return solve.Synthesize(ctx, in.Graph, m, so)
		}
		return untied(ctx, in, m, so, opt.Untie, say)
	}
	solveStart := time.Now()
	res, err := solveAt(opt.MemoryFraction, solveLimit)
	maps.Copy(simulated, <-pre)
	opt.Simulated = simulated
	if errors.Is(err, solve.ErrNoPlan) {
		// The encoding's memory model can misjudge a start (it does not
		// follow which transients are alive together), and a limited search may end without
		// a plan: a start that the simulator finds fitting is still a plan.
		if p := fasterStart(ctx, in, baselines, opt.Simulated, nil, Solver{Status: "heuristic"}, nil); p != nil {
			say("the solver found no plan (%v); the fastest fitting start is %s", err, p.Solver.Chosen)
			return p, nil
		}
	}
	if err != nil {
		return nil, err
	}
	fraction := opt.MemoryFraction
	var best *Plan
	var sol Solver
	spent := 0.0 // the solves' seconds, retries included
	for retry := 0; ; retry++ {
		phases := phasesOf(res.Phases)
		say("solved %d×%d MILP: %s in %.2fs (%s)", res.Rows, res.Vars, res.Status, res.Seconds, phases)
		spent += res.Seconds
		sol = solverRecord(res, nodes, limit, in.Optimizer.Kind, opt.MemoryFraction, fraction)
		// None lifted is recorded as nothing, so that a plan planned
		// without --untie has the bytes it had before the option.
		sol.Options.Untie = opt.Untie
		if opt.WallTime {
			sol.Seconds, sol.Phases = spent, phases
		}
		if sol.StoppedBy == "solver failure" {
			say("the joint MILP's solver failed (%s); the plan is the polished start", res.SolverFailure)
		}
		delete(baselines, PolishedStart) // a solve before this one's
		if res.Start != nil && !reflect.DeepEqual(res.Start, res.Program) {
			// The MILP's start competes too: where the timeline misjudges a
			// program, the simulator may find it faster than the MILP's plan.
			// Not where the MILP's plan is its start (on every full-size
			// case traced), simulated once as the plan: the same step
			// cannot beat itself, and simulating it again cost
			// bert-base on paper-64 a third of a second after its search.
			baselines[PolishedStart] = res.Start
		}
		say("simulating the plan and the %d baselines", len(baselines))
		if best, err = BuildContext(ctx, in, res.Program, "hap", sol); err != nil {
			return nil, err
		}
		if fits(best.Cost.PerDevice) || retry == fitRetries {
			break
		}
		// The encoding's memory model matches the simulator's to a few
		// percent on realistic plans (TestPlannerCostMatchesSimulator)
		// and the share of memory it leaves free absorbs that, but it
		// does not follow which transients are alive together
		// (TestPlannerMemoryOnRandomPrograms),
		// and a user may leave it no room (--memory-fraction 1). A plan
		// that does not fit is solved again with the fraction scaled by
		// what the simulator found over the estimate; only when that
		// fails do the starts answer.
		next, ok := tighterFraction(fraction, res.Estimate, best.Cost.PerDevice)
		left := time.Duration(0)
		if limit > 0 {
			if left = solveLimit - time.Since(solveStart); left <= 0 {
				break
			}
		}
		if !ok {
			break
		}
		say("the solver's plan does not fit in memory when simulated (%s); solving again with memory fraction %.3g", sim.OverMemory(best.Cost.PerDevice), next)
		again, err := solveAt(next, left)
		if err != nil {
			say("solving again found no plan (%v)", err)
			break
		}
		res, fraction = again, next
	}
	screen := func(p *spmd.Program, best float64) bool { return screenedOut(res.Encoding, p, best) }
	if !fits(best.Cost.PerDevice) {
		say("the solver's plan does not fit in memory when simulated; trying the starts")
		if alt := fasterStart(ctx, in, baselines, opt.Simulated, nil, sol, nil); alt != nil {
			return alt, nil
		}
		return nil, fmt.Errorf("%w: the solver's plan does not fit when simulated: %s", solve.ErrNoPlan, sim.OverMemory(best.Cost.PerDevice))
	}
	return fasterStart(ctx, in, baselines, opt.Simulated, best, sol, screen), nil
}

// handWritten builds every hand-written strategy that applies to in, by
// name and in strategy.Names' order: the search's starts.
func handWritten(in *Inputs) (byName map[string]*spmd.Program, starts []*spmd.Program) {
	byName = map[string]*spmd.Program{}
	for _, name := range strategy.Names() {
		if p, err := strategy.Build(name, in.Graph, in.Cluster); err == nil {
			p = in.withRecompute(p)
			byName[name] = p
			starts = append(starts, p)
		}
	}
	return byName, starts
}

// untied solves the joint MILP with its ties and then without those u
// lifts, started from the tied plan (SynthOptions.Untie): the tied MILP is
// a fraction of the size and finds in seconds the plan the untied one
// would need many nodes to reach, so the untied answer is never slower
// than the tied; its bound holds over the plans the lifted ties excluded
// too. The result's Seconds cover both solves. Under a time limit the tied
// solve gets untieShare of it, and only the untied solve branches its bound
// LP (so.BoundLPs). When the tied solve finds no plan the
// untied one runs alone, from so's starts; when the untied one fails, or
// stops with neither a better plan nor a bound, the tied answer stands
// (its recorded ties say so).
func untied(ctx context.Context, in *Inputs, m *cost.Model, so solve.Options, u Untie, say func(string, ...any)) (*solve.Result, error) {
	limit := so.TimeLimit
	began := time.Now()
	tiedOpt := so
	// The tied solve's bound is reported only when the untied one fails
	// or proves nothing; branching its LP as well would double the
	// branching's time (an LP's time each) for a bound the untied one
	// supersedes, so only the untied solve branches (its LP bounds the
	// tied plans too).
	tiedOpt.BoundLPs = 0
	if limit > 0 {
		tiedOpt.TimeLimit = limitShare(limit, untieShare)
	}
	tied, err := solve.Synthesize(ctx, in.Graph, m, tiedOpt)
	switch {
	case err == nil:
		say("solved the tied %d×%d MILP: %s in %.2fs; untying %s", tied.Rows, tied.Vars, tied.Status, tied.Seconds, u)
		so.Starts = append(slices.Clone(so.Starts), tied.Program)
	case errors.Is(err, solve.ErrNoPlan) && ctx.Err() == nil:
		say("the tied MILP found no plan (%v); solving the untied one from the starts", err)
	default:
		return nil, err
	}
	if limit > 0 {
		so.TimeLimit = max(limit-time.Since(began), time.Millisecond)
	}
	so.NoTie, so.NoGroup = u.Layers, u.Devices
	res, err := solve.Synthesize(ctx, in.Graph, m, so)
	switch {
	case err != nil && tied != nil && ctx.Err() == nil:
		say("the untied MILP gave no plan (%v); the tied plan stands", err)
		res, err = tied, nil
	case err == nil && tied != nil && res.Bound <= 0 && res.Objective >= tied.Objective:
		// Stopped before it proved anything or found a better plan (a
		// time limit inside its root LP): the tied answer is the same
		// plan with a bound, over tied plans, which its ties record.
		say("the untied MILP proved no bound and found no faster plan; the tied plan and bound stand")
		res = tied
	}
	if err != nil {
		return nil, err
	}
	res.Seconds = time.Since(began).Seconds()
	return res, nil
}

// fitRetries is how many times Synthesize solves again, each time with a
// smaller memory fraction, when the simulator finds that the solver's plan
// does not fit. One is usually enough (the new fraction is scaled by the
// overshoot measured); a second covers a plan whose transients differ.
const fitRetries = 2

// fitRetryMargin is taken off the scaled fraction so that the next plan,
// whose ratio of simulated to estimated memory is not exactly the last
// one's, is not over again by a rounding.
const fitRetryMargin = 0.01

// minRetryFraction is the smallest memory fraction a retry asks for: below
// it, the estimate and the simulator disagree by more than a fraction
// can correct, and the starts answer instead.
const minRetryFraction = 0.2

// tighterFraction is the memory fraction to solve again with after the
// plan estimated as est was simulated as devs and did not fit: for every
// device over its capacity, the fraction under which est's estimate scaled
// by the simulator's overshoot (peak/estimate) would fit, less
// fitRetryMargin. It is always below fraction (an overflowing device's
// estimate was within fraction of its capacity); false when it would fall
// under minRetryFraction or the estimate is missing.
func tighterFraction(fraction float64, est *encode.Breakdown, devs []sim.DeviceStats) (float64, bool) {
	if est == nil || len(est.Memory) != len(devs) {
		return 0, false
	}
	next := fraction
	for d, st := range devs {
		if st.Fits() {
			continue
		}
		next = min(next, est.Memory[d]/float64(st.PeakMemory))
	}
	next *= 1 - fitRetryMargin
	return next, next >= minRetryFraction
}

// solverRecord is the plan's account of the joint solve res: its status,
// objective, bound and gap, what stopped it, and the options that shaped
// it. fraction is the memory fraction asked for and solvedAt the one res
// was solved under (smaller after a plan that did not fit). Seconds is
// left 0: the caller records wall time only when asked.
func solverRecord(res *solve.Result, nodes int, limit time.Duration, optimizer string, fraction, solvedAt float64) Solver {
	padded, grouped := res.Encoding.FixedMethods()
	search := JointSearchOf(&res.JointOptions)
	sol := Solver{
		Status: res.Status, Objective: res.Objective, Bound: res.Bound, Gap: res.Gap,
		Model: fmt.Sprintf("milp %d rows × %d columns, %d op classes, %d collective methods fixed by dominance", res.Rows, res.Vars, len(res.Encoding.Classes), padded+grouped),
		// What made the plan: the encoding's formulation, the MILP solver
		// and the toolchain. Z3 takes no part in synthesis
		// (docs/planner.md, known limits).
		Versions: []Software{{"hap", HapVersion()}, {"hap-encoding", "2"}, {"cbc", cbc.Version()}, {"go", runtime.Version()}},
		Options: SolverOptions{NodeLimit: &nodes, TimeLimit: &limit, Threads: 1, Optimizer: optimizer, MemoryFraction: fraction, Search: &search,
			BoundLPs: res.BoundLPs},
	}
	bound := BoundSource{By: BoundByMILP}
	switch {
	case res.BoundBy == solve.BoundWorkLP:
		bound.By = BoundByWork
	case res.AnyOrder:
		bound.By = BoundByLPAnyOrder
	case res.BoundBy == solve.BoundTransportLP || res.BoundBy == solve.BoundTransportLPStopped || res.BoundBy == solve.BoundTransportLPBranched:
		bound.By = BoundByLP
	}
	bound.Stopped = res.BoundBy == solve.BoundTransportLPStopped
	bound.Branched = res.BoundBy == solve.BoundTransportLPBranched
	sol.Options.Bound = bound
	e := res.Encoding
	forward := 0
	for i := range e.G.Ops {
		if e.G.Ops[i].Phase == ir.Forward {
			forward++
		}
	}
	sol.Options.Ties = Ties{OpClasses: len(e.Classes), ForwardOps: forward, DeviceGroups: len(e.Groups), Devices: e.N}
	if solvedAt != fraction {
		sol.Options.RetriedFraction = RecordedFraction(solvedAt)
	}
	switch {
	case res.SolverFailure != "":
		// The plan is the polished start; the joint MILP proved no bound
		// (the transport LP may have).
		sol.StoppedBy = "solver failure"
	case res.TimeLimited:
		sol.StoppedBy = "time limit"
	case res.StoppedBy != milp.LimitNone:
		sol.StoppedBy = res.StoppedBy.String()
	}
	return sol
}

// fasterStart is the plan of the fastest start (hand-written strategy or
// hap-paper, in a fixed order) whose simulated peak memory fits every
// device and that is faster than best — any, when best is nil — recorded
// with sol and the start's name as Chosen; best when none is. Starts in
// simulated are not simulated again; screen, when set, rules a start out
// by the planner's estimate against the best step so far without
// simulating it.
func fasterStart(ctx context.Context, in *Inputs, baselines map[string]*spmd.Program, simulated map[string]*sim.Result, best *Plan, sol Solver, screen func(p *spmd.Program, best float64) bool) *Plan {
	for _, name := range append(strategy.Names(), "hap-paper", PolishedStart) {
		p, ok := baselines[name]
		if !ok {
			continue
		}
		r, ok := simulated[name]
		if !ok {
			if best != nil && screen != nil && screen(p, best.Cost.StepSeconds) {
				continue
			}
			var err error
			if r, err = SimulateContext(ctx, in, p); err != nil {
				continue
			}
		}
		if (best != nil && r.StepSeconds >= best.Cost.StepSeconds) || !fits(r.Devices) {
			continue // a start that runs out of memory is no plan
		}
		alt, err := withProgram(in, p, "hap", sol, r)
		if err != nil {
			continue
		}
		alt.Solver.Chosen = name
		best = alt
	}
	return best
}

// PolishedStart names, in a plan's solver.chosen, the joint MILP's start
// (the best hand-written or paper start, polished by local search and the
// lengths MILP) when the simulator finds it faster than the MILP's plan.
const PolishedStart = "polished-start"

// PaperSafetyLimit stops the paper's search in wall time when no time
// limit is given; its expansion bound ends it long before on every zoo
// model.
const PaperSafetyLimit = 30 * time.Second

// DefaultNodeLimit bounds each MILP solve when neither a node nor a time
// limit is given: small cases are solved to optimality well within it;
// on large ones the search stops with the best plan found, its proven
// bound and gap, after the same work on any machine. These ten nodes are
// bare (no cuts, no strong branching, no root presolve): a node limit
// above it asks for the proof and gets them (solve.Options.Thorough).
const DefaultNodeLimit = 10

// fits reports whether every device's simulated peak memory fits it.
func fits(devs []sim.DeviceStats) bool {
	for _, d := range devs {
		if !d.Fits() {
			return false
		}
	}
	return true
}

// screenMargin: a 1-D program whose planner estimate exceeds the best
// simulated step by more than this fraction cannot win, since estimates of
// hand-written strategies are within 1% of the simulator
// (TestPlannerCostMatchesSimulator); it is not simulated (lowering and
// simulating bert-base on 64 devices takes about a third of a second).
const screenMargin = 0.03

// screenedOut reports whether p is priced by the encoding at more than
// screenMargin above best. Programs the encoding cannot price are never
// screened.
func screenedOut(e *encode.Encoding, p *spmd.Program, best float64) bool {
	t, ok := priced(e, p)
	return ok && t > best*(1+screenMargin)
}

// priced is the encoding's step time for p, if it can price it: not 2-D
// meshes, segments it does not offer, or memory it judges short.
func priced(e *encode.Encoding, p *spmd.Program) (float64, bool) {
	if p.Mesh != nil {
		return 0, false
	}
	ch, ok := e.ChoiceOf(p)
	if !ok {
		return 0, false
	}
	br, err := e.Evaluate(ch)
	if err != nil {
		return 0, false
	}
	return br.Seconds, true
}

// simulateUnpriced simulates the baselines not in done that the encoding
// cannot price (so that fasterStart will simulate them whatever the
// solver's plan): the hand-written ones, then, received from paper, the
// paper search's program (nil for none) as "hap-paper". A baseline that
// fails to simulate is left out: fasterStart tries it again and passes
// over it.
func simulateUnpriced(ctx context.Context, in *Inputs, m *cost.Model, memoryFraction float64, hand map[string]*spmd.Program, paper <-chan *spmd.Program, done map[string]*sim.Result) map[string]*sim.Result {
	out := map[string]*sim.Result{}
	e, err := encode.Encode(in.Graph, solve.CandidateSegments(in.Graph), m, encode.EncodeOptions{Optimizer: in.Optimizer, MemoryFraction: memoryFraction, Recompute: in.Recompute})
	if err != nil {
		return out
	}
	simulate := func(name string, p *spmd.Program) {
		if _, ok := done[name]; ok {
			return
		}
		if _, ok := priced(e, p); ok {
			return
		}
		if r, err := SimulateContext(ctx, in, p); err == nil {
			out[name] = r
		}
	}
	for _, name := range slices.Sorted(maps.Keys(hand)) {
		simulate(name, hand[name])
	}
	if p := <-paper; p != nil {
		simulate("hap-paper", p)
	}
	return out
}

// phasesOf is the plan's record of where a synthesis's time went.
func phasesOf(p solve.Phases) *Phases {
	return &Phases{Encode: p.Encode, Polish: p.Polish, JointSearch: p.JointSearch, BoundLP: p.BoundLP, AfterPolish: p.AfterPolish}
}

// limitShare is pct percent of a positive time limit, never less than a
// nanosecond: a share that rounded to 0 would read as "no limit" below
// (--time-limit 1ns once searched to optimality for minutes).
func limitShare(limit time.Duration, pct int64) time.Duration {
	return atLeastANanosecond(limit * time.Duration(pct) / 100)
}

// atLeastANanosecond keeps a limit derived from a positive one positive:
// 0 means none to every solver, and a deadline already passed must still
// stop the work at once rather than lift the limit.
func atLeastANanosecond(d time.Duration) time.Duration { return max(d, time.Nanosecond) }
