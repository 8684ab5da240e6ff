package order

import (
	"context"
	"maps"
	"slices"

	"hap/cost"
	"hap/devprog"
	"hap/sim"
)

// tidy moves collectives that p's order issues early back toward their list places, one at a
// time, keeping each move after which the step is no longer (and accept takes it), pass after
// pass until none is kept, and returns the program and its simulation. A Z3 model orders pairs
// with slack either way; a plan should carry the reversals that shorten the step, not those that
// happened to come out of the model, so that its comm_order says what matters. best is p's
// simulation. ctx stops it early with what it has.
//
// Every trial is one global sequence of the collectives, each device issuing its own in that
// sequence's order, so members always agree. A collective moves later past those listed before
// it on a device they share (undoing those reversals) and stops at the first one listed after it,
// so a move never makes a new reversal.
func tidy(ctx context.Context, p *devprog.Program, m *cost.Model, best *sim.Result, accept func(*sim.Result) bool) (*devprog.Program, *sim.Result) {
	n := len(p.Devices)
	listPos := make([]map[int]int, n) // device → collective ID → place in the list order
	instr := make([]map[int]int, n)   // device → collective ID → instruction index
	group := map[int][]int{}
	for d := range p.Devices {
		dp := &p.Devices[d]
		listPos[d], instr[d] = map[int]int{}, map[int]int{}
		k := 0
		for i := range dp.Instrs {
			if c := dp.Instrs[i].Comm; c != nil {
				listPos[d][c.ID], instr[d][c.ID] = k, i
				group[c.ID] = c.Group
				k++
			}
		}
	}
	seq, ok := globalSequence(p, group)
	if !ok {
		return p, best
	}
	// listedBefore reports whether a and b share a device and, if so, whether a is listed first
	// there (members list their common collectives alike).
	listedBefore := func(a, b int) (shared, before bool) {
		for _, d := range group[a] {
			if pb, ok := listPos[d][b]; ok {
				return true, listPos[d][a] < pb
			}
		}
		return false, false
	}
	bestProg := p
	// Passes until none keeps a move: a move can free one tried before it. Every kept move undoes
	// reversals and makes none, so the passes end.
	for moved := true; moved; {
		moved = false
		for _, c := range slices.Clone(seq) {
			if ctx.Err() != nil {
				return bestProg, best
			}
			i := slices.Index(seq, c)
			last := -1 // the last collective past which c moves
			for j := i + 1; j < len(seq); j++ {
				shared, before := listedBefore(seq[j], c)
				if shared && !before {
					break
				}
				if shared {
					last = j
				}
			}
			if last < 0 {
				continue // c is issued after everything listed before it
			}
			trial := slices.Concat(seq[:i], seq[i+1:last+1], []int{c}, seq[last+1:])
			q := withSequence(p, trial, group, instr)
			r, err := sim.Run(q, m)
			if err != nil || r.StepSeconds > best.StepSeconds || (accept != nil && !accept(r)) {
				continue // a dependency deadlocks it, it costs time, or it does not fit
			}
			seq, bestProg, best, moved = trial, q, r, true
		}
	}
	return bestProg, best
}

// globalSequence is one sequence of all p's collectives that every device's communication stream
// follows (a topological order of the streams; smallest ID first among the ready), or false if the
// streams disagree.
func globalSequence(p *devprog.Program, group map[int][]int) ([]int, bool) {
	ids := slices.Sorted(maps.Keys(group))
	index := make(map[int]int, len(ids))
	for k, id := range ids {
		index[id] = k
	}
	succ := make([][]int, len(ids))
	for d := range p.Devices {
		dp := &p.Devices[d]
		q := dp.CommStream()
		for k := 1; k < len(q); k++ {
			a, b := index[dp.Instrs[q[k-1]].Comm.ID], index[dp.Instrs[q[k]].Comm.ID]
			succ[a] = append(succ[a], b)
		}
	}
	seq, ok := kahn(succ) // indices in ID order, so smallest ID first among the ready
	for k, i := range seq {
		seq[k] = ids[i]
	}
	return seq, ok
}

// withSequence is p with every device issuing its collectives in seq's order.
func withSequence(p *devprog.Program, seq []int, group map[int][]int, instr []map[int]int) *devprog.Program {
	q := &devprog.Program{Devices: slices.Clone(p.Devices)}
	orders := make([][]int, len(q.Devices))
	for _, id := range seq {
		for _, d := range group[id] {
			orders[d] = append(orders[d], instr[d][id])
		}
	}
	for d := range q.Devices {
		dp := &q.Devices[d]
		dp.CommOrder = nil
		if !slices.Equal(orders[d], dp.CommStream()) {
			dp.CommOrder = orders[d]
		}
	}
	return q
}
