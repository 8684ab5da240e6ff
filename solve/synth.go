package solve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"hap/cost"
	"hap/encode"
	"hap/ir"
	"hap/solve/milp"
	"hap/solve/milp/cbc"
)

// Options configure a synthesis.
type Options struct {
	Optimizer ir.Optimizer
	// TimeLimit stops the MILP search with the best plan found and its
	// proven bound; 0 means no limit.
	TimeLimit time.Duration
	// RelGap stops once the incumbent is proven within this fraction of
	// optimal; 0 means prove optimality.
	RelGap float64
	// NoTie turns off tying of identical layers; NoGroup gives every
	// device its own variables instead of sharing them among identical
	// devices (exact integer lengths per device, larger model).
	NoTie, NoGroup bool
	// Segments overrides the candidate segments (tests); nil derives them.
	Segments []encode.Segment
	// Starts are programs to start the search from (the hand-written
	// strategies'): the cheapest under the encoding becomes the MIP start,
	// so the result is never worse than any of them.
	Starts []*encode.Program
}

// Result is a synthesized program and how it was found.
type Result struct {
	Program  *encode.Program
	Encoding *encode.Encoding
	Choice   *encode.Choice
	Estimate *encode.Breakdown
	Status   string // optimal or feasible
	// Objective is the MILP's value of the plan (seconds), Bound its proven
	// lower bound.
	Objective float64
	Bound     float64
	Gap       float64
	Seconds   float64
	Vars      int
	Rows      int
}

// ErrNoPlan is returned when no program fits; the message says why.
var ErrNoPlan = errors.New("no plan fits")

// Synthesize finds the program and integer shard lengths minimising the
// encoding's step time, jointly, as one MILP.
func Synthesize(ctx context.Context, g *ir.Graph, m *cost.Model, opt Options) (*Result, error) {
	start := time.Now()
	segs := opt.Segments
	if segs == nil {
		segs = CandidateSegments(g)
	}
	e, err := encode.Encode(g, segs, m, encode.EncodeOptions{Optimizer: opt.Optimizer, NoTie: opt.NoTie, NoGroup: opt.NoGroup})
	if err != nil {
		return nil, err
	}
	// Three phases in one time budget. CBC's heuristics find good plans
	// slowly under the timeline's many max-terms, so two primal heuristics
	// run first: the paper's alternation (program with lengths fixed, then
	// lengths with the program fixed) from the best hand-written strategy,
	// and the serialised MILP (an upper bound of the timeline that CBC
	// searches faster) from the best plan so far. The cheapest plan found
	// starts the joint timeline MILP, whose optimum, bound and gap are the
	// result: the heuristics only give it a better place to start.
	var seeds []*encode.Choice
	for _, p := range opt.Starts {
		if ch, ok := e.ChoiceOf(p); ok {
			seeds = append(seeds, ch)
		}
	}
	seed := bestStart(e, seeds, timelineCost)
	altLimit := opt.TimeLimit * alternateShare / 100
	serialLimit := opt.TimeLimit * serialShare / 100
	limit := opt.TimeLimit - altLimit - serialLimit
	lengths := make([][]int, len(e.Segs))
	for s, seg := range e.Segs {
		lengths[s] = encode.RoundLengths(seg.Units, slices.Repeat([]float64{1}, e.N))
	}
	if seed != nil {
		lengths = seed.Lengths
		deadline := time.Now().Add(altLimit / 4)
		if opt.TimeLimit == 0 {
			deadline = time.Now().Add(time.Hour)
		}
		ls, _ := LocalSearch(ctx, e, seed, deadline)
		seed = cheaper(e, seed, ls)
		lengths = seed.Lengths
	}
	// The alternation from the seed's lengths, then (as the paper starts)
	// from lengths proportional to each device's FP32 peak.
	fp32 := make([]float64, e.N)
	for d := range fp32 {
		fp32[d] = m.Spec(d).FP32
	}
	byPeak := make([][]int, len(e.Segs))
	for s, seg := range e.Segs {
		byPeak[s] = encode.RoundLengths(seg.Units, fp32)
	}
	for _, ls := range [][][]int{lengths, byPeak} {
		if alt, _, err := Alternate(ctx, e, ls, append(seeds, seed), AlternateOptions{Rounds: alternateRounds, PerSolve: altLimit / (4 * alternateRounds)}); err == nil {
			seed = cheaper(e, seed, alt)
		}
	}
	smodel, svars := e.SerialMILP()
	so := milp.Options{TimeLimit: serialLimit, RelGap: opt.RelGap, Threads: 1}
	if st := bestStart(e, append(seeds, seed), serialCost); st != nil {
		so.Start = e.StartValues(svars, st)
	}
	sres, err := cbc.Solver{}.Solve(ctx, smodel, so)
	if err != nil {
		return nil, fmt.Errorf("solving the serialised %d×%d MILP: %w", len(smodel.Rows), len(smodel.Cols), err)
	}
	switch sres.Status {
	case milp.Optimal, milp.Feasible:
		seed = cheaper(e, seed, e.ChoiceFrom(svars, sres.Values))
	case milp.Infeasible:
		return nil, fmt.Errorf("%w: %s", ErrNoPlan, explainInfeasible(e))
	}
	model, vars := e.MILP()
	mo := milp.Options{TimeLimit: limit, RelGap: opt.RelGap, Threads: 1}
	if seed != nil {
		mo.Start = e.StartValues(vars, seed)
	}
	res, err := cbc.Solver{}.Solve(ctx, model, mo)
	if err != nil {
		return nil, fmt.Errorf("solving %d×%d MILP: %w", len(model.Rows), len(model.Cols), err)
	}
	switch res.Status {
	case milp.Optimal, milp.Feasible:
	case milp.Infeasible:
		return nil, fmt.Errorf("%w: %s", ErrNoPlan, explainInfeasible(e))
	default:
		return nil, fmt.Errorf("%w: the solver found no plan within the limits (%s)", ErrNoPlan, res.Status)
	}
	ch := e.ChoiceFrom(vars, res.Values)
	br, err := e.Evaluate(ch)
	if err != nil {
		return nil, fmt.Errorf("internal: the solver's choice does not evaluate: %w", err)
	}
	p, err := e.Decode(ch)
	if err != nil {
		return nil, fmt.Errorf("internal: the solver's choice does not decode: %w", err)
	}
	out := &Result{Program: p, Encoding: e, Choice: ch, Estimate: br, Status: res.Status.String(),
		Objective: res.Objective / encode.MILPTimeUnit, Bound: res.Bound / encode.MILPTimeUnit, Gap: res.Gap, Seconds: time.Since(start).Seconds(), Vars: len(model.Cols), Rows: len(model.Rows)}
	return out, nil
}

// explainInfeasible names the device that cannot hold even the most
// memory-frugal plan: every parameter and activation split evenly over
// all devices would still need more than it has — or, failing that, says
// the constraints conflict.
func explainInfeasible(e *encode.Encoding) string {
	var worst []string
	for d, c := range e.Capacity {
		need := e.MinimumMemory(d)
		if need > c {
			worst = append(worst, fmt.Sprintf("device %d (%s) needs at least %.3g GB for its share of parameters, optimizer state and activations but has %.3g GB usable",
				d, e.Model().Spec(d).Name, need/1e9, c/1e9))
		}
	}
	if len(worst) > 0 {
		return strings.Join(worst, "; ")
	}
	return "every device could hold its smallest share, but no single program fits all devices' memory at once"
}

// CandidateSegments derives the units the planner may split: the batch
// (dim 0 of the first input), attention heads, and the output width of
// every two-dimensional weight and the first dim of every expert weight.
func CandidateSegments(g *ir.Graph) []encode.Segment {
	var segs []encode.Segment
	seen := map[int]bool{}
	add := func(name string, units int) {
		if units < 2 || seen[units] {
			return
		}
		seen[units] = true
		segs = append(segs, encode.Segment{Name: name, Units: units})
	}
	for _, t := range g.TensorsOfKind(ir.Input) {
		if s := g.Tensors[t].Shape; len(s) > 0 {
			add("batch", s[0])
			break
		}
	}
	for i := range g.Ops {
		if op := &g.Ops[i]; op.Kind == ir.OpAttention {
			if q := g.Tensors[op.Inputs[0]].Shape; len(q) == 4 {
				add("heads", q[1])
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

// Shares of the time limit, in percent: the alternation, the serialised
// MILP, and (the rest) the joint timeline MILP, which needs time to
// improve on the heuristics' plans and prove its bound.
const (
	alternateShare  = 30
	serialShare     = 40
	alternateRounds = 3
)

// cheaper is whichever of a and b (either may be nil) Evaluate prices
// lower and accepts.
func cheaper(e *encode.Encoding, a, b *encode.Choice) *encode.Choice {
	return bestStart(e, []*encode.Choice{a, b}, timelineCost)
}

// timelineCost and serialCost price an evaluated choice under the
// timeline MILP's and the serialised MILP's objectives.
func timelineCost(br *encode.Breakdown) float64 { return br.Seconds }

func serialCost(br *encode.Breakdown) float64 { return slices.Max(br.Compute) + br.Comm }

// bestStart is the cheapest feasible start under the encoding and the
// given cost, or nil.
func bestStart(e *encode.Encoding, starts []*encode.Choice, cost func(*encode.Breakdown) float64) *encode.Choice {
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
	return best
}
