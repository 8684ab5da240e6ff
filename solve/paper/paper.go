package paper

import (
	"context"
	"fmt"

	"hap/cost"
	"hap/ir"
	"hap/milp"
	"hap/milp/cbc"
	"hap/spmd"
)

// DefaultRounds caps the alternation between the search and the ratio LP
// (each round: one search at the current ratios, one LP for the program
// it found).
const DefaultRounds = 8

// minImprovement is the relative improvement a round must bring for the
// alternation to go on.
const minImprovement = 1e-9

// Options configure Synthesize.
type Options struct {
	// Segments are the candidate segments (their Units); the shares cut
	// every one of them.
	Segments []spmd.Segment
	// Optimizer is the one autodiff derives the backward pass with (only
	// the backward ops' work matters here). Default Adam.
	Optimizer ir.Optimizer
	// Rounds caps the alternation (0: DefaultRounds).
	Rounds int
	// Solver solves the ratio LP (nil: CBC).
	Solver milp.Solver
	// SearchEvery runs the best-first search in every round of both
	// methods, even after one reached MaxExpansions (by default the rest
	// go straight to the beam search); slower, for comparison.
	SearchEvery bool
}

// Result is the paper's plan for one graph and cluster.
type Result struct {
	Program *spmd.Program
	// Method is the global choice for uneven all-gathers and
	// reduce-scatters that won.
	Method Method
	// Shares are the per-device ratios (before rounding to the
	// program's integer lengths) and Cost the paper's objective of the
	// program at them, in seconds.
	Shares []float64
	Cost   float64
	// Rounds is how many search ⇄ LP rounds the winning method ran, and
	// Expansions and States the searches' work over both methods.
	Rounds, Expansions, States int
	// Capped, when set, says which searches reached MaxExpansions and
	// took the beam search's program instead (so the result is not
	// proven the cheapest of the space at those shares).
	Capped     string
	Bandwidths Bandwidths
}

// Synthesize runs the paper's algorithm on forward graph g and the
// cluster priced by m: from shares proportional to each device's FP32
// peak, it alternates the best-first search for the cheapest program at
// fixed shares with the ratio LP for the program found, until a round
// does not improve the paper's cost (at most opt.Rounds rounds); it does
// so once with every uneven all-gather and reduce-scatter padded and once
// with all of them grouped (the paper's one global switch) and keeps the
// cheaper. Memory is not considered.
//
// The result depends only on the inputs: the searches are bounded by
// MaxExpansions, not by time. ctx is only a safety stop; when it ends
// first, the error says so.
func Synthesize(ctx context.Context, g *ir.Graph, m *cost.Model, opt Options) (*Result, error) {
	p, err := NewProblem(g, opt.Segments, m, opt.Optimizer)
	if err != nil {
		return nil, err
	}
	if opt.Rounds <= 0 {
		opt.Rounds = DefaultRounds
	}
	if opt.Solver == nil {
		opt.Solver = cbc.Solver{}
	}
	start := ProportionalShares(m)
	var best *Result
	expansions, states, capped := 0, 0, ""
	// Once one search has reached MaxExpansions, the others (the other
	// rounds' shares, the other method) go straight to the beam search,
	// unless SearchEvery: a search that caps is rarely followed by one
	// that does not, and each capped search costs its expansions for
	// nothing. GPT-2 at batch 16 on paper-16 capped all four, 8.6 s, and
	// takes 3.4 s so. Over the 60 zoo models and clusters measured (every
	// model on paper-8, -16, -64, h100-16 and modern-24 at the zoo's
	// batch), the six that cap end with the same program and shares
	// either way, two of them (bert-moe-tiny on paper-64, gpt2-tiny on
	// modern-24) with an uncapped search after a capped one
	// (plan.TestPaperBeamAfterACapKeepsThePlan); the grid took 36 s against 54 s.
	var beamOnly *bool
	if !opt.SearchEvery {
		beamOnly = new(bool)
	}
	for _, method := range []Method{Padded, Grouped} {
		r, err := p.alternate(ctx, start, method, opt.Rounds, opt.Solver, beamOnly)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		expansions += r.Expansions
		states += r.States
		if r.Capped != "" {
			if capped != "" {
				capped += ", "
			}
			capped += r.Capped
		}
		if best == nil || r.Cost < best.Cost {
			best = r
		}
	}
	best.Expansions, best.States = expansions, states
	best.Capped = capped
	return best, nil
}

// Alternate runs the alternation with one global method from per-device
// shares start (identical devices equal). Each round searches at the
// current shares, then solves the ratio LP for the program found; it
// stops when the search's program is no cheaper than the best pair so far
// or the LP does not improve on it.
func (p *Problem) Alternate(ctx context.Context, start []float64, method Method, rounds int, solver milp.Solver) (*Result, error) {
	return p.alternate(ctx, start, method, rounds, solver, nil)
}

// alternate is Alternate; with beamOnly non-nil, its searches are the
// beam search alone once *beamOnly is set, and it sets *beamOnly when a
// search reaches MaxExpansions.
func (p *Problem) alternate(ctx context.Context, start []float64, method Method, rounds int, solver milp.Solver, beamOnly *bool) (*Result, error) {
	res := &Result{Method: method, Bandwidths: p.BW}
	shares := start
	for round := 1; round <= rounds; round++ {
		pa, err := p.searchOrBeam(ctx, p.groupShares(shares), method, beamOnly != nil && *beamOnly)
		if pa != nil {
			res.Expansions += pa.Expansions
			res.States += pa.States
		}
		if err != nil {
			return nil, err
		}
		if pa.Capped && beamOnly != nil {
			*beamOnly = true
		}
		if pa.Capped {
			if res.Capped != "" {
				res.Capped += ", "
			}
			res.Capped += fmt.Sprintf("%s round %d", method, round)
		}
		if res.Program != nil && pa.Cost >= res.Cost*(1-minImprovement) {
			break
		}
		prog, err := p.Program(pa, shares, method)
		if err != nil {
			return nil, err
		}
		res.Program, res.Shares, res.Cost, res.Rounds = prog, shares, pa.Cost, round
		next, c, err := p.Ratios(ctx, prog, solver)
		if err != nil {
			return nil, err
		}
		if c >= res.Cost*(1-minImprovement) {
			break
		}
		if prog, err = p.Program(pa, next, method); err != nil {
			return nil, err
		}
		res.Program, res.Shares, res.Cost = prog, next, c
		shares = next
	}
	return res, nil
}
