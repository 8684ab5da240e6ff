package solve

import (
	"context"
	"time"

	"hap/encode"
)

// LocalSearch improves a choice by single and paired moves under fixed
// lengths, priced by Evaluate (microseconds each, no solver): change one op
// class's rule; switch one tensor class between all-to-all and through
// Identity; switch one collective between padded and grouped; change one
// leaf class's layout; change a parameter's
// layout together with the rule of an op class reading it (sharding a
// weight pays only when its consumer runs split to match — neither move
// alone removes the gradient all-reduce); and, when none of those
// improves, move a connected set of rules and leaves from one segment to
// another (relabel.go). It takes each improving move as a sweep finds it,
// sweeping until none improves (at most maxSweeps sweeps) or the deadline
// passes (never, when it is zero). A primal
// heuristic: it finds the plans the MILP's weak LP bound makes CBC slow
// to reach, and the joint MILP starts from them.
func LocalSearch(ctx context.Context, e *encode.Encoding, ch *encode.Choice, deadline time.Time) (*encode.Choice, float64) {
	cur := ch.Clone()
	br, err := e.Evaluate(cur)
	if err != nil {
		return ch, 0
	}
	cost := br.Seconds
	ev := e.NewEvaluator()
	try := func(c *encode.Choice) float64 {
		if sec, err := ev.Seconds(c); err == nil {
			return sec
		}
		return -1
	}
	// consumers[ti]: the op classes reading leaf class ti.
	consumers := make([][]int, len(e.Tensors))
	for ti := range e.Tensors {
		if e.Tensors[ti].Producer >= 0 {
			continue
		}
		seen := map[int]bool{}
		for _, cs := range e.Tensors[ti].Consumers {
			if !seen[cs[0]] {
				seen[cs[0]] = true
				consumers[ti] = append(consumers[ti], cs[0])
			}
		}
	}
	// adjacent[ci]: the tensor classes op class ci reads or makes, whose
	// conversions a change of its rule may turn into all-to-alls.
	adjacent := make([][]int, len(e.Classes))
	for ti := range e.Tensors {
		t := &e.Tensors[ti]
		if t.Producer >= 0 {
			adjacent[t.Producer] = append(adjacent[t.Producer], ti)
		}
		for _, cs := range t.Consumers {
			if k := len(adjacent[cs[0]]); k == 0 || adjacent[cs[0]][k-1] != ti {
				adjacent[cs[0]] = append(adjacent[cs[0]], ti)
			}
		}
	}
	if cur.AllToAll == nil {
		cur.AllToAll = make([]bool, len(e.Tensors))
	}
	var flipped []int
	late := func() bool { return !deadline.IsZero() && time.Now().After(deadline) }
	for sweep := 0; sweep < maxSweeps; sweep++ {
		if ctx.Err() != nil || late() {
			break
		}
		improved := false
		// keep reports whether the move just made on cur improves it; the
		// caller undoes it when not (first improvement: a sweep takes
		// every improving move as it finds it, far fewer sweeps than the
		// steepest descent, to the same plans in our measurements).
		keep := func() bool {
			if v := try(cur); v >= 0 && v < cost*(1-improveTolerance) {
				cost, improved = v, true
				return true
			}
			return false
		}
		// withAllToAll retries the move just made with all-to-all for those
		// of the tensor classes that can use it and do not: a rule that reads
		// a tensor cut along another dimension pays only with it. The flags
		// are undone when the move still does not improve.
		withAllToAll := func(tcs []int) bool {
			flipped = flipped[:0]
			for _, ti := range tcs {
				if !cur.AllToAll[ti] && e.AllToAllApplies(cur, ti) {
					cur.AllToAll[ti] = true
					flipped = append(flipped, ti)
				}
			}
			if len(flipped) == 0 {
				return false
			}
			if keep() {
				return true
			}
			for _, ti := range flipped {
				cur.AllToAll[ti] = false
			}
			return false
		}
		for ci := range e.Classes {
			for r := range e.Classes[ci].Rules {
				if old := cur.Rule[ci]; r != old {
					if cur.Rule[ci] = r; keep() || withAllToAll(adjacent[ci]) {
						continue
					}
					cur.Rule[ci] = old
				}
			}
		}
		// Switch one tensor class's conversions between all-to-all and
		// through Identity.
		for ti := range e.Tensors {
			if e.AllToAllApplies(cur, ti) {
				cur.AllToAll[ti] = !cur.AllToAll[ti]
				if !keep() {
					cur.AllToAll[ti] = !cur.AllToAll[ti]
				}
			}
		}
		// Switch one collective between padded and grouped. Polish's exact
		// lengths keep the methods pinned, so without this move only the
		// joint MILP chose them: VGG19 on paper-8 went from 0.0888 to
		// 0.0850 s with it.
		for ti := range e.Tensors {
			for qi := range e.Layouts(ti) {
				if e.FlipMethod(cur, ti, qi); !keep() {
					e.FlipMethod(cur, ti, qi)
				}
			}
		}
		for ti := range e.Tensors {
			t := &e.Tensors[ti]
			if t.Producer >= 0 {
				continue
			}
			for l := range t.LeafLayouts {
				old := cur.Leaf[ti]
				if l == old {
					continue
				}
				if cur.Leaf[ti] = l; keep() {
					continue
				}
				paired := false
				for _, ci := range consumers[ti] {
					oldR := cur.Rule[ci]
					for r := range e.Classes[ci].Rules {
						if r == oldR {
							continue
						}
						if cur.Rule[ci] = r; keep() {
							paired = true
							break
						}
					}
					if paired {
						break
					}
					cur.Rule[ci] = oldR
				}
				if !paired {
					cur.Leaf[ti] = old
				}
			}
			if late() {
				break
			}
		}
		if improved {
			continue
		}
		// Only when no single or paired move improves (a variable
		// neighbourhood descent): move a whole component of a segment's
		// users to another segment (relabel.go), a joint move neither
		// makes. Tried last, it leaves the search's path as it was
		// wherever the smaller moves suffice (tried in every sweep, it
		// gave the same plans on bert-base paper-8/16/32).
		for s := range e.Segs {
			for _, u := range segmentComponents(e, cur, s) {
				for to := range e.Segs {
					if to == s {
						continue
					}
					if undo, ok := moveComponent(e, cur, u, s, to); ok {
						if keep() {
							break
						}
						undo()
					}
				}
			}
			if late() {
				break
			}
		}
		if !improved {
			break
		}
	}
	return cur, cost
}

// maxSweeps bounds LocalSearch: every sweep improves by more than
// improveTolerance, so it ends anyway; the cap keeps its cost predictable.
const maxSweeps = 200
