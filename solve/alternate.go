package solve

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"hap/encode"
	"hap/solve/milp"
	"hap/solve/milp/cbc"
)

// AlternateOptions configure Alternate.
type AlternateOptions struct {
	// Rounds caps the alternation (each round: program, then lengths).
	Rounds int
	// PerSolve bounds each MILP solve (0: none).
	PerSolve time.Duration
	// GlobalMethod restricts the program step to one collective method for
	// every uneven collective (all padded or all grouped, the better kept),
	// as the HAP paper does; otherwise each collective chooses its own.
	GlobalMethod bool
}

// errNoAlternate is returned when no round finds a program.
var errNoAlternate = errors.New("alternating search found no program")

// improveTolerance is the relative improvement a round must make for the
// alternation to go on (below it, rounds only shuffle ties).
const improveTolerance = 1e-9

// Alternate is the HAP paper's search, on this encoding: from the integer
// lengths given, alternate (a) with the lengths fixed, the cheapest program
// — a MILP over rules, leaf layouts and methods, far easier than the joint
// one since every share is a constant — and (b) with the program fixed, the
// cheapest lengths; until a round does not improve. It can stop at a local
// optimum (that is why the synthesizer's answer is the joint MILP's); as
// a primal heuristic it finds good programs quickly. seeds (programs as
// choices, any lengths) are tried under each round's lengths as the
// fallback when the solver finds nothing better in time.
func Alternate(ctx context.Context, e *encode.Encoding, lengths [][]int, seeds []*encode.Choice, opt AlternateOptions) (*encode.Choice, float64, error) {
	var best *encode.Choice
	bestCost := math.Inf(1)
	var lastErr error
	methods := []int{-1} // −1: each collective free
	if opt.GlobalMethod {
		methods = []int{0, 1}
	}
	// One model, built once (its rows are large: 0.4 s for bert-base on
	// 64 GPUs); each solve pins columns of its own copy of the bounds.
	base, vars := e.MILP()
	for round := 0; round < opt.Rounds; round++ {
		var prog *encode.Choice
		progCost := math.Inf(1)
		for _, method := range methods {
			ch, c, err := programFor(ctx, e, base, vars, lengths, method, seeds, milp.Options{TimeLimit: opt.PerSolve})
			if err != nil {
				lastErr = err
				continue
			}
			if c < progCost {
				prog, progCost = ch, c
			}
		}
		if prog == nil {
			break
		}
		if ch, c, err := lengthsFor(ctx, e, base, vars, prog, milp.Options{TimeLimit: opt.PerSolve}); err == nil && c < progCost {
			prog, progCost = ch, c
		}
		if progCost >= bestCost*(1-improveTolerance) {
			break
		}
		best, bestCost = prog, progCost
		lengths = prog.Lengths
	}
	if best == nil {
		return nil, 0, fmt.Errorf("%w: %v", errNoAlternate, lastErr)
	}
	return best, bestCost, nil
}

// programFor solves the MILP with every length pinned and, for method 0
// or 1, every method column pinned to it (1 = grouped).
func programFor(ctx context.Context, e *encode.Encoding, base *milp.Model, vars *encode.MILPVars, lengths [][]int, method int, seeds []*encode.Choice, opt milp.Options) (*encode.Choice, float64, error) {
	model := withOwnBounds(base)
	// The cheapest seed under these lengths (and method) is the fallback.
	var start *encode.Choice
	startCost := math.Inf(1)
	for _, sd := range seeds {
		if sd == nil {
			continue
		}
		ch := *sd
		ch.Lengths = copyLengths(lengths)
		if method >= 0 {
			ch.Grouped = make([][]bool, len(e.Tensors))
			for ti := range e.Tensors {
				ch.Grouped[ti] = make([]bool, len(e.Layouts(ti)))
				for qi := range ch.Grouped[ti] {
					ch.Grouped[ti][qi] = method == 1
				}
			}
		}
		if br, err := e.Evaluate(&ch); err == nil && br.Seconds < startCost {
			start, startCost = &ch, br.Seconds
		}
	}
	for s, cols := range vars.LengthColumns() {
		for g, c := range cols {
			total := 0
			for _, d := range e.Groups[g] {
				total += lengths[s][d]
			}
			pin(model, c, float64(total))
		}
	}
	if method >= 0 {
		for _, c := range vars.MethodColumns() {
			pin(model, c, float64(method))
		}
	}
	ch, err := solveChoice(ctx, e, model, vars, opt)
	if err == nil {
		ch.Lengths = copyLengths(lengths)
		var c float64
		if ch, c, err = evaluate(e, ch); err == nil && c < startCost {
			return ch, c, nil
		}
	}
	if start == nil {
		return nil, 0, err
	}
	return start, startCost, nil
}

// lengthsFor solves the MILP with the program of ch pinned and the
// lengths free.
func lengthsFor(ctx context.Context, e *encode.Encoding, base *milp.Model, vars *encode.MILPVars, ch *encode.Choice, opt milp.Options) (*encode.Choice, float64, error) {
	model := withOwnBounds(base)
	e.Fix(model, vars, ch)
	for s, cols := range vars.LengthColumns() {
		for _, c := range cols {
			model.Cols[c].Lower, model.Cols[c].Upper = 0, float64(e.Segs[s].Units)
		}
	}
	out, err := solveChoice(ctx, e, model, vars, opt)
	if err != nil {
		return nil, 0, err
	}
	return evaluate(e, out)
}

func solveChoice(ctx context.Context, e *encode.Encoding, model *milp.Model, vars *encode.MILPVars, opt milp.Options) (*encode.Choice, error) {
	// No MIP start: CBC crashed on starts of these pinned models; the
	// caller keeps the seed when the solver finds nothing better.
	opt.Threads = 1
	res, err := cbc.Solver{}.Solve(ctx, model, opt)
	if err != nil {
		return nil, fmt.Errorf("solving %d×%d MILP: %w", len(model.Rows), len(model.Cols), err)
	}
	if !res.Status.HasSolution() {
		return nil, fmt.Errorf("solver: %s (%d×%d MILP)", res.Status, len(model.Rows), len(model.Cols))
	}
	return e.ChoiceFrom(vars, res.Values), nil
}

func evaluate(e *encode.Encoding, ch *encode.Choice) (*encode.Choice, float64, error) {
	br, err := e.Evaluate(ch)
	if err != nil {
		return nil, 0, err
	}
	return ch, br.Seconds, nil
}

func pin(m *milp.Model, c int, v float64) { m.Cols[c].Lower, m.Cols[c].Upper = v, v }

// withOwnBounds is a copy of m sharing its rows but with columns of its
// own, so that pinning them leaves m as it was.
func withOwnBounds(m *milp.Model) *milp.Model {
	c := *m
	c.Cols = append([]milp.Col(nil), m.Cols...)
	return &c
}

func copyLengths(ls [][]int) [][]int {
	out := make([][]int, len(ls))
	for i := range ls {
		out[i] = append([]int(nil), ls[i]...)
	}
	return out
}
