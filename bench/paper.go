package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"hap/cost"
	"hap/encode"
	"hap/plan"
	"hap/solve"
	"hap/solve/milp"
	"hap/solve/milp/cbc"
	"hap/strategy"
)

// Knobs of the hap-paper re-implementation (see README.md).
const (
	// paperRounds caps the alternation between program and lengths.
	paperRounds = 5
	// paperNoMemory is a memory fraction so large that no memory row binds:
	// the paper's algorithm ignores memory.
	paperNoMemory = 1e6
	// paperSolvesPerRound is how many MILP solves one round makes (padded,
	// grouped, lengths); each gets this share of the time limit.
	paperSolvesPerRound = 3
	// improveTol is the relative improvement a round must make to continue.
	improveTol = 1e-9
)

// errPaperNoPlan is returned when the alternating search finds nothing.
var errPaperNoPlan = errors.New("hap-paper: no program found")

// PaperSearch is bench's approximation of the HAP paper's search: start
// from shard ratios proportional to each device's FP32 peak; then
// alternate (a) with the lengths fixed, find the cheapest program with one
// global collective method (all padded or all grouped, the better kept),
// ignoring memory, and (b) with the program fixed, find the integer lengths
// minimising the encoding's step time — until a round does not improve,
// at most paperRounds rounds. limit bounds each round's solves together.
func PaperSearch(ctx context.Context, in *plan.Inputs, limit time.Duration) (*encode.Program, error) {
	m, err := cost.New(in.Cluster, cost.Options{})
	if err != nil {
		return nil, fmt.Errorf("hap-paper: cost model: %w", err)
	}
	e, err := encode.Encode(in.Graph, solve.CandidateSegments(in.Graph), m,
		encode.EncodeOptions{Optimizer: in.Optimizer, NoGroup: true, MemoryFraction: paperNoMemory})
	if err != nil {
		return nil, fmt.Errorf("hap-paper: encoding: %w", err)
	}
	// Data-parallel programs seed each solve (CBC alone often finds no
	// feasible point of the pinned model in time).
	var seeds []*encode.Choice
	for _, name := range strategy.Names() {
		if p, err := strategy.Build(name, in.Graph, in.Cluster); err == nil {
			if ch, ok := e.ChoiceOf(p); ok {
				seeds = append(seeds, ch)
			}
		}
	}
	per := limit / paperSolvesPerRound
	fp32 := make([]float64, in.Cluster.NumDevices())
	for i, d := range in.Cluster.Devices() {
		fp32[i] = d.Spec.FP32
	}
	lengths := make([][]int, len(e.Segs))
	for s, seg := range e.Segs {
		lengths[s] = encode.RoundLengths(seg.Units, fp32)
	}
	var best *encode.Choice
	bestCost := math.Inf(1)
	var lastErr error
	for round := 0; round < paperRounds; round++ {
		// (a) lengths fixed: the program, under one global method.
		var prog *encode.Choice
		progCost := math.Inf(1)
		for _, grouped := range []bool{false, true} {
			ch, c, err := paperProgram(ctx, e, lengths, grouped, seeds, per)
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
		// (b) program fixed: the lengths.
		if ch, c, err := paperLengths(ctx, e, prog, per); err == nil && c < progCost {
			prog, progCost = ch, c
		}
		if progCost >= bestCost*(1-improveTol) {
			break
		}
		best, bestCost = prog, progCost
		lengths = prog.Lengths
	}
	if best == nil {
		return nil, fmt.Errorf("%w: %v", errPaperNoPlan, lastErr)
	}
	p, err := e.Decode(best)
	if err != nil {
		return nil, fmt.Errorf("hap-paper: decoding: %w", err)
	}
	return p, nil
}

// paperProgram solves the MILP with every length column pinned to lengths
// and every method column pinned to grouped.
func paperProgram(ctx context.Context, e *encode.Encoding, lengths [][]int, grouped bool, seeds []*encode.Choice, limit time.Duration) (*encode.Choice, float64, error) {
	model, vars := e.MILP()
	// The cheapest seed under these lengths and this method is the start.
	var start *encode.Choice
	startCost := math.Inf(1)
	for _, sd := range seeds {
		ch := *sd
		ch.Lengths = copyLengths(lengths)
		ch.Grouped = make([][]bool, len(e.Tensors))
		for ti := range e.Tensors {
			ch.Grouped[ti] = make([]bool, len(e.Layouts(ti)))
			for qi := range ch.Grouped[ti] {
				ch.Grouped[ti][qi] = grouped
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
	method := 0.0
	if grouped {
		method = 1
	}
	for _, c := range vars.MethodColumns() {
		pin(model, c, method)
	}
	ch, err := solveChoice(ctx, e, model, vars, limit)
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

// paperLengths solves the MILP with the program of ch pinned and the
// length columns free.
func paperLengths(ctx context.Context, e *encode.Encoding, ch *encode.Choice, limit time.Duration) (*encode.Choice, float64, error) {
	model, vars := e.MILP()
	e.Fix(model, vars, ch)
	for s, cols := range vars.LengthColumns() {
		for _, c := range cols {
			model.Cols[c].Lower, model.Cols[c].Upper = 0, float64(e.Segs[s].Units)
		}
	}
	out, err := solveChoice(ctx, e, model, vars, limit)
	if err != nil {
		return nil, 0, err
	}
	return evaluate(e, out)
}

func solveChoice(ctx context.Context, e *encode.Encoding, model *milp.Model, vars *encode.MILPVars, limit time.Duration) (*encode.Choice, error) {
	// No MIP start: CBC crashed on starts of these pinned models; the
	// caller keeps the seed when the solver finds nothing better.
	mo := milp.Options{TimeLimit: limit, Threads: 1}
	res, err := cbc.Solver{}.Solve(ctx, model, mo)
	if err != nil {
		return nil, fmt.Errorf("hap-paper: solving %d×%d MILP: %w", len(model.Rows), len(model.Cols), err)
	}
	if !res.Status.HasSolution() {
		return nil, fmt.Errorf("hap-paper: solver: %s (%d×%d MILP)", res.Status, len(model.Rows), len(model.Cols))
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

func copyLengths(ls [][]int) [][]int {
	out := make([][]int, len(ls))
	for i := range ls {
		out[i] = append([]int(nil), ls[i]...)
	}
	return out
}
