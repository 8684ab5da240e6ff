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
// another (relabel.go), then a run of op classes from one split to
// another (chainMoves, chain.go), then two leaves' layouts at once
// (leafPairs). It takes each improving move as a sweep finds it,
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
	chains := newChainGraph(e)
	late := func() bool { return !deadline.IsZero() && time.Now().After(deadline) }
	stop := func() bool { return ctx.Err() != nil || late() }
	for sweep := 0; sweep < maxSweeps; sweep++ {
		if stop() {
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
		// 0.0850 s with it. A flag no collective reads (MethodApplies) is
		// not priced: its flip changes nothing.
		for ti := range e.Tensors {
			for qi := range e.Layouts(ti) {
				if !e.MethodApplies(cur, ti, qi) {
					continue
				}
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
		// makes. Tried only then, it leaves the search's path as it was
		// wherever the smaller moves suffice (tried in every sweep, it
		// gave the same plans on bert-base paper-8/16/32); so do the two
		// larger neighbourhoods after it, each tried only when the one
		// before finds nothing.
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
		// Then runs of op classes moved together (chain.go).
		if !improved && !stop() {
			improved = chainMoves(e, cur, chains, cost, try, keep, stop)
		}
		// Last, two leaves' layouts changed at once (leafPairs).
		if !improved && !stop() {
			improved = leafPairs(e, cur, cost, try, keep, stop)
		}
		if !improved {
			break
		}
	}
	return cur, cost
}

// chainMoves tries, for each op class and each of its other rules, the
// chain it starts (chain.go) at its cheapest prefix, and makes the first
// that keep accepts; it reports whether one was made. A chain's prefixes
// are priced in order until one costs more than chainSlack over cur. It
// gives up when stop says so.
func chainMoves(e *encode.Encoding, cur *encode.Choice, g *chainGraph, cost float64, try func(*encode.Choice) float64, keep, stop func() bool) bool {
	var undo chainUndo
	for ci := range e.Classes {
		if stop() {
			return false
		}
		for r := range e.Classes[ci].Rules {
			if r == cur.Rule[ci] {
				continue
			}
			steps := g.chain(e, cur, ci, r)
			found, best := false, chainMark{} // the cheapest prefix's end
			bestCost := cost * (1 - improveTolerance)
			for _, s := range steps {
				g.apply(e, cur, s, &undo)
				v := try(cur)
				if v >= 0 && v < bestCost {
					found, best, bestCost = true, undo.mark(), v
				}
				if v > cost*(1+chainSlack) {
					break // a run this much dearer is not paid back by its rest
				}
			}
			if found {
				undo.restoreTo(cur, best) // back to the cheapest prefix
				if keep() {
					return true
				}
			}
			undo.restore(cur)
		}
	}
	return false
}

// leafPairs tries, for two leaf classes at a time, a change of each one's
// layout, and makes the first pair that keep accepts; it reports whether
// one was made. Only changes that alone cost at most pairSlack more than
// cur are paired: a change far dearer alone is rarely paid back by one
// other (and all pairs would be tens of thousands of prices on BERT-MoE).
// It gives up when stop says so.
//
// Why pairs of leaves: the timeline's maxima make their changes interact.
// ViT on a100-8 (batch 32), measured before the chains, from the plan
// Polish reached without either (11.73 ms, every parameter sharded on
// the batch segment and gathered): sharding fc2's weight as well costs
// 0.57% alone, and
// replicating the attention's k, v or out bias gains nothing alone, but
// the two together gain 1.4%, and the four together 3.6% (11.30 ms);
// neither single moves nor the parameter-and-consumer pairs above reach
// it, and the joint MILP's ten nodes did not either. Tried last, it leaves
// the search's path as it was wherever the other moves suffice.
func leafPairs(e *encode.Encoding, cur *encode.Choice, cost float64, try func(*encode.Choice) float64, keep, stop func() bool) bool {
	type change struct{ ti, l int }
	var near []change // in leaf class, then layout order
	for ti := range e.Tensors {
		t := &e.Tensors[ti]
		if t.Producer >= 0 {
			continue
		}
		old := cur.Leaf[ti]
		for l := range t.LeafLayouts {
			if l == old {
				continue
			}
			cur.Leaf[ti] = l
			if v := try(cur); v >= 0 && v <= cost*(1+pairSlack) {
				near = append(near, change{ti, l})
			}
			cur.Leaf[ti] = old
		}
	}
	for i, a := range near {
		if stop() {
			return false
		}
		for _, b := range near[i+1:] {
			if a.ti == b.ti {
				continue
			}
			oldA, oldB := cur.Leaf[a.ti], cur.Leaf[b.ti]
			cur.Leaf[a.ti], cur.Leaf[b.ti] = a.l, b.l
			if keep() {
				return true
			}
			cur.Leaf[a.ti], cur.Leaf[b.ti] = oldA, oldB
		}
	}
	return false
}

// pairSlack is how much dearer than the current choice (relative) a leaf
// layout change alone may be and still be paired by leafPairs. The
// change that pays in ViT's pair costs 0.57% alone; 3% and 10% found
// nothing more on the cases measured (ViT and VGG19 on a100-8, ViT and
// BERT-Base on h100-16), and each pair is one more price.
const pairSlack = 0.01

// chainSlack is how much dearer than the current choice (relative) a
// chain's prefix may be before its longer prefixes are left unpriced. On
// ViT (a100-8) the prefixes before the paying one were 0.07–0.8% dearer,
// and those after it, into the layers, 52% to 4.7×; on bert-base-tiny
// (paper-8) the chain from the query projection's column-parallel rule
// rises to +14.7% before it ends 21% cheaper. At 25% the chains' time on
// bert-base paper-32 (batch 1024) went from 0.69 to 0.15 s and ViT
// a100-8's from 0.84 to 0.17 s, with the same plans (at 3% VGG19 on
// h100-16 lost its chain, and at 10% bert-base-tiny).
const chainSlack = 0.25

// maxSweeps bounds LocalSearch: every sweep improves by more than
// improveTolerance, so it ends anyway; the cap keeps its cost predictable.
const maxSweeps = 200
