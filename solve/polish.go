package solve

import (
	"context"
	"math"
	"slices"
	"time"

	"hap/encode"
	"hap/milp"
	"hap/spmd"
)

// polishRounds caps Polish's alternation; each round must improve by more
// than improveTolerance, and in practice two or three do.
const polishRounds = 8

// Polish is the synthesizer's primal heuristic: from ch, alternate (a)
// LocalSearch over the program with the lengths fixed and (b) the optimal
// integer lengths for that program — the MILP with every rule, layout and
// method pinned, small enough to solve exactly — until a round does not
// improve. When that stalls and escape is set, (c) the cheapest program
// for the current lengths — the MILP with the lengths pinned, searched by
// CBC — may move it to a program no single or paired move reaches (all of
// VGG19's convolutions changing layout together); the alternation goes on
// from there if it is better. It runs twice, from ch and from ch with its
// unused segments split evenly, and keeps the cheaper end. Every step is
// deterministic (bounded by
// opt.NodeLimit, never by the clock unless opt.TimeLimit is set), so the
// same inputs give the same plan on any machine. It returns ch itself when
// nothing improves on it (with cost +Inf when ch is not a valid choice).
func Polish(ctx context.Context, e *encode.Encoding, base *milp.Model, vars *encode.MILPVars, ch *encode.Choice, deadline time.Time, opt milp.Options, escape bool) (*encode.Choice, float64) {
	if !deadline.IsZero() {
		// Under a time limit alone the solves below run in child
		// processes (CBC's heuristics are on), and like the joint MILP's
		// they can run far past their clock inside a root LP: bert-moe on
		// paper-8, layers untied, polished for 124 s of its 42. Past the
		// deadline and a grace they are killed, and Polish keeps the best
		// it had. (With a node limit as well they run in process, bounded
		// by their nodes.)
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(graceFor(opt.TimeLimit)))
		defer cancel()
	}
	best, bestCost := polishFrom(ctx, e, base, vars, ch, deadline, opt, escape)
	// Again from ch with its unused segments split evenly (evenUnused):
	// each start reaches plans the other does not. Bert-base on paper-16:
	// 0.890 s from ch, 0.834 s from even; on paper-8, 0.7711 s from even
	// but 0.7704 s from ch, whose first round's worse plan (0.812 s) led
	// on to the better one, so the two runs stay apart to the end.
	if even := evenUnused(e, ch); even != ch {
		if c, k := polishFrom(ctx, e, base, vars, even, deadline, opt, escape); k < bestCost*(1-improveTolerance) {
			best, bestCost = c, k
		}
	}
	return best, bestCost
}

// polishFrom is Polish's alternation from one start.
func polishFrom(ctx context.Context, e *encode.Encoding, base *milp.Model, vars *encode.MILPVars, ch *encode.Choice, deadline time.Time, opt milp.Options, escape bool) (*encode.Choice, float64) {
	br, err := e.Evaluate(ch)
	if err != nil {
		return ch, math.Inf(1)
	}
	best, bestCost := ch, br.Seconds
	improves := func(c float64) bool { return c < bestCost*(1-improveTolerance) }
	past := func() bool { return ctx.Err() != nil || (!deadline.IsZero() && time.Now().After(deadline)) }
	for round := 0; round < polishRounds; round++ {
		if past() {
			break
		}
		cur, cost := LocalSearch(ctx, e, best, deadline)
		if (round == 0 || improves(cost)) && !past() {
			// New program (or the start's lengths): its optimal lengths.
			if sized, c, err := lengthsFor(ctx, e, base, vars, cur, lengthsOpt(timeLeft(opt, deadline)), round == 0); err == nil && c < cost {
				cur, cost = sized, c
			}
		}
		if !improves(cost) && escape && !past() {
			if prog, c, err := programFor(ctx, e, base, vars, best.Lengths, []*encode.Choice{best}, programOpt(timeLeft(opt, deadline))); err == nil && improves(c) {
				cur, cost = prog, c
			}
		}
		if !improves(cost) {
			break
		}
		best, bestCost = cur, cost
	}
	return best, bestCost
}

// timeLeft is opt for a solve that starts now, under deadline (zero:
// none): its time limit what is left, not the share Polish was given at
// its start. Each solve given the whole share, Polish's solves ran one
// after another past it: bert-moe on paper-8 under --time-limit 10s, the
// last set the device search weighed (a 0.42 s share) polished for 2.0 s.
func timeLeft(opt milp.Options, deadline time.Time) milp.Options {
	if !deadline.IsZero() {
		opt.TimeLimit = timeUntil(deadline)
	}
	return opt
}

// programOpt is opt for the program step: the MILP with the lengths
// pinned. CBC finds its good programs with the feasibility pump (with every
// other heuristic off it took 1–3 s per solve on vgg19 on paper-16, against
// 4–5 s with all of them; without the pump it found nothing better than
// the local search). No MIP start: CBC crashed on starts of pinned models.
// (Without a node limit — a time-limited search — every heuristic runs.)
func programOpt(opt milp.Options) milp.Options {
	if opt.NodeLimit > 0 {
		opt.NoHeuristics, opt.PumpPasses = false, programPumpPasses
	}
	return opt
}

// lengthsOpt is opt for the lengths step: the MILP with the program
// pinned. Clp's simplex runs unperturbed: with the program pinned most
// rows are fixed, and perturbed under CBC's tight primal tolerance the
// root LP can stall. BERT-MoE on paper-32 at 1024: its presolved root took
// 62 of the plan's 70 s, 0.7 s unperturbed (3.4 s at the looser default
// tolerance, which the big-M rows cannot have; BenchmarkLengthsStep).
// Elsewhere the same plans in about the same time (the paper suite's
// lengths solves: 149 → 65 s, 73 → 65 s less that one; modern and scaling
// within noise). And the search stops once its start is within
// lengthsRelGap of its bound.
func lengthsOpt(opt milp.Options) milp.Options {
	opt.NoPerturbation = true
	opt.RelGap = max(opt.RelGap, lengthsRelGap)
	return opt
}

// lengthsRelGap is the relative gap at which the lengths step's search
// stops: its incumbent (from the start, ch's own lengths) proven within
// this fraction of the best lengths for the pinned program. Most lengths
// steps after Polish's first find nothing: the local search's move already
// left the lengths near their best, and the solve's ten nodes then only
// chase what its objective, pricing each device group at its even share
// (lengthsFor), counts below what Evaluate charges for the same lengths.
// BERT-Base on paper-64 at 2048: three of its four lengths steps started
// 0.074% above their root's bound and spent 1.4–1.8 s each on nodes that
// reached a point the solve priced 0.073% lower and Evaluate no lower than
// the start; stopped at the root, Polish took 5.3–5.7 s rather than 6.3–8.7 s
// (the same plan bytes). Over the four suites two plans moved, by at most
// 0.014% (VGG19 on paper-16 and -64). It is a gap, not a clock, so the
// plan stays the same on any machine.
const lengthsRelGap = 1e-3

// programPumpPasses bounds the feasibility pump of the program step.
const programPumpPasses = 10

// evenUnused is ch with every segment it does not use split evenly (the
// remainder to the lowest devices), at the same cost; ch itself when they
// already are. The lengths solve
// leaves such a segment wherever the solver's vertex put it (bert-base
// on paper-16: the 768-wide weights' segment all on the P100s, no finer
// than the heads); split evenly, a move of a leaf onto it is priced at its
// finest pieces, the split a gather of it wants, and LocalSearch takes it.
func evenUnused(e *encode.Encoding, ch *encode.Choice) *encode.Choice {
	out := ch
	for s, u := range e.SegmentsUsed(ch) {
		even := spmd.EvenLengths(e.Segs[s].Units, e.N)
		if u || slices.Equal(ch.Lengths[s], even) {
			continue
		}
		if out == ch {
			out = ch.Clone()
		}
		out.Lengths[s] = even
	}
	return out
}
