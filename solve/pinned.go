package solve

import (
	"context"
	"errors"
	"fmt"
	"math"

	"hap/encode"
	"hap/milp"
	"hap/milp/cbc"
)

// improveTolerance is the relative improvement a step must make for a
// search to go on (below it, steps only shuffle ties).
const improveTolerance = 1e-9

// programFor solves the MILP with every length pinned: the cheapest
// program for these lengths (far easier than the joint MILP, every share
// being a constant).
func programFor(ctx context.Context, e *encode.Encoding, base *milp.Model, vars *encode.MILPVars, lengths [][]int, seeds []*encode.Choice, opt milp.Options) (*encode.Choice, float64, error) {
	model := withOwnBounds(base)
	// The cheapest seed under these lengths is the fallback.
	var start *encode.Choice
	startCost := math.Inf(1)
	for _, sd := range seeds {
		if sd == nil {
			continue
		}
		ch := *sd
		ch.Lengths = copyLengths(lengths)
		if br, err := e.Evaluate(&ch); err == nil && br.Seconds < startCost {
			start, startCost = &ch, br.Seconds
		}
	}
	for s, cols := range vars.LengthColumns() {
		for g, c := range cols {
			pin(model, c, float64(e.GroupTotal(lengths[s], g)))
		}
	}
	// Isolated: with CBC's heuristics on, this solve has failed a Clp
	// assertion that aborts the process (bert-moe-tiny on paper-8 under a
	// 1 s time limit); in a child process that is an error, and the
	// cheapest seed stands.
	ch, err := solveChoice(ctx, e, model, vars, opt, cbc.Solver{Isolated: true})
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
// lengths free — and the collective methods, whose better choice follows
// the lengths. With settle, a node-limited solve that stops with a gap
// over lengthsGap is followed by moreLengthNodes.
func lengthsFor(ctx context.Context, e *encode.Encoding, base *milp.Model, vars *encode.MILPVars, ch *encode.Choice, opt milp.Options, settle bool) (*encode.Choice, float64, error) {
	model := lengthsModel(e, base, vars, ch)
	// ch's own lengths start the search, so that it ends no worse: with a
	// node limit and no heuristics, branching alone often found no
	// integer lengths at all (bert-base on paper-64 then kept zero3's plan,
	// 1.5% slower). The feasibility pump found them too, but it aborted
	// inside Clp on vgg19 paper-16 (a failed assertion in
	// ClpPrimalColumnSteepest).
	opt.Start = e.StartValues(vars, ch)
	// Isolated whenever CBC's heuristics run (a time limit): they fail the
	// same Clp assertion here (ClpPrimalColumnSteepest::pivotColumn, on
	// TestSynthesizeWithMeshBaseline's bert-base-tiny once the groups'
	// ceilings joined the model). Node-limited solves have them off and
	// stay in process.
	out, res, err := solveResult(ctx, e, model, vars, opt, cbc.Solver{Isolated: !opt.NoHeuristics})
	if err != nil {
		return nil, 0, err
	}
	sized, c, err := evaluate(e, out)
	if err == nil && settle && opt.NodeLimit > 0 && opt.NodeLimit < lengthsNodes && res.StoppedBy == milp.LimitNodes && res.Gap > lengthsGap {
		sized, c = moreLengthNodes(ctx, e, model, vars, opt, sized, c)
	}
	if errors.Is(err, encode.ErrInfeasibleChoice) && len(vars.CeilColumns()) > 0 {
		// Priced at its even share, a group's first device may hold one
		// unit more than the solve counted and so be over its memory
		// where memory binds (gpt2 at batch 64 on two RTX 4090s and two
		// A100s: 23.58 GB of 23.19 GB, which left the even split's
		// 1.006 s where lengths that fit give 0.772 s). The exact ceilings
		// then decide.
		for _, c := range vars.CeilColumns() {
			model.Cols[c].Integer = true
		}
		if out, err = solveChoice(ctx, e, model, vars, opt, cbc.Solver{Isolated: !opt.NoHeuristics}); err != nil {
			return nil, 0, err
		}
		return evaluate(e, out)
	}
	return sized, c, err
}

// lengthsModel is the lengths step's MILP: base with the program of ch
// pinned, its lengths and collective methods free.
func lengthsModel(e *encode.Encoding, base *milp.Model, vars *encode.MILPVars, ch *encode.Choice) *milp.Model {
	model := withOwnBounds(base)
	e.Fix(model, vars, ch)
	for s, cols := range vars.LengthColumns() {
		for _, c := range cols {
			model.Cols[c].Lower, model.Cols[c].Upper = 0, float64(e.Segs[s].Units)
		}
	}
	for _, c := range vars.MethodColumns() {
		model.Cols[c].Lower, model.Cols[c].Upper = 0, 1
	}
	// The groups' ceilings relaxed: this solve prices a group at its even
	// share, and Evaluate, which the caller compares by, prices the
	// remainder. Integer, the ceilings took the ten nodes' branching: on
	// vgg19 paper-29 Polish ended at a plan 6.5% slower (0.184 s against
	// 0.1727 s).
	for _, c := range vars.CeilColumns() {
		model.Cols[c].Integer = false
	}
	return model
}

// lengthsNodes is the node budget of the lengths step's second solve
// (moreLengthNodes), which Polish asks for on the first lengths step of
// each of its runs (the start's program, whose lengths are furthest from
// its best). Polish rests on that step finding the pinned program's best
// lengths, and with only lengths and methods free its MILP is small, but
// the search's ten nodes do not always settle it: from hap-paper's plan of
// VGG19 on paper-16 (batch 512) ten nodes left Polish at 0.1278 s where
// eleven took it to 0.1159 s, and the default search returned the slower
// plan. Still a count of nodes, so the plan stays the same on any machine.
const lengthsNodes = 50

// lengthsGap is the gap the lengths step's first solve must leave for the
// second to run: below it more nodes found nothing (bert-base on paper-8:
// 0.01% and 0.13% left, 1–2 s each for the same lengths, against 2.9%
// closed to a 2.9% cheaper plan, and VGG19's 9.7% and 5.8% to 9% and 5%).
const lengthsGap = 0.01

// moreLengthNodes solves the lengths step's MILP again, from the sized
// choice (worth c seconds) its first, node-limited solve found, with
// lengthsNodes nodes, and returns the better of the two. The solve runs in
// a child process: that many nodes reach the Clp assertion that aborts
// CBC (ClpPrimalColumnSteepest::pivotColumn, on VGG19's pinned models at
// paper-8), and in process that would kill the program; when the child
// dies, sized stands.
func moreLengthNodes(ctx context.Context, e *encode.Encoding, model *milp.Model, vars *encode.MILPVars, opt milp.Options, sized *encode.Choice, c float64) (*encode.Choice, float64) {
	opt.NodeLimit = lengthsNodes
	opt.Start = e.StartValues(vars, sized)
	out, _, err := solveResult(ctx, e, model, vars, opt, cbc.Solver{Isolated: true})
	if err != nil {
		return sized, c
	}
	if more, mc, err := evaluate(e, out); err == nil && mc < c {
		return more, mc
	}
	return sized, c
}

func solveChoice(ctx context.Context, e *encode.Encoding, model *milp.Model, vars *encode.MILPVars, opt milp.Options, solver cbc.Solver) (*encode.Choice, error) {
	ch, _, err := solveResult(ctx, e, model, vars, opt, solver)
	return ch, err
}

// solveResult is solveChoice with the solver's result (its status and what
// stopped it).
func solveResult(ctx context.Context, e *encode.Encoding, model *milp.Model, vars *encode.MILPVars, opt milp.Options, solver cbc.Solver) (*encode.Choice, *milp.Result, error) {
	// The caller keeps the seed when the solver finds nothing better.
	opt.Threads = 1
	res, err := solver.Solve(ctx, model, opt)
	if err != nil {
		return nil, nil, fmt.Errorf("solving %d×%d MILP: %w", len(model.Rows), len(model.Cols), err)
	}
	if !res.Status.HasSolution() {
		return nil, nil, fmt.Errorf("solver: %s (%d×%d MILP)", res.Status, len(model.Rows), len(model.Cols))
	}
	return e.ChoiceFrom(vars, res.Values), res, nil
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
