package solve

import (
	"context"
	"time"

	"hap/encode"
)

// LocalSearch improves a choice by single and paired moves under fixed
// lengths, priced by Evaluate (microseconds each, no solver): change one op
// class's rule; change one leaf class's layout; change a parameter's
// layout together with the rule of an op class reading it (sharding a
// weight pays only when its consumer runs split to match — neither move
// alone removes the gradient all-reduce). It takes the best improving move
// of each sweep until none improves or the deadline passes. A primal
// heuristic: it finds the plans the MILP's weak LP bound makes CBC slow
// to reach, and the joint MILP starts from them.
func LocalSearch(ctx context.Context, e *encode.Encoding, ch *encode.Choice, deadline time.Time) (*encode.Choice, float64) {
	cur := clone(ch)
	br, err := e.Evaluate(cur)
	if err != nil {
		return ch, 0
	}
	cost := br.Seconds
	try := func(c *encode.Choice) float64 {
		if br, err := e.Evaluate(c); err == nil {
			return br.Seconds
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
	for {
		if ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
		var best *encode.Choice
		bestCost := cost * (1 - improveTolerance)
		consider := func(c *encode.Choice) {
			if v := try(c); v >= 0 && v < bestCost {
				best, bestCost = clone(c), v
			}
		}
		for ci := range e.Classes {
			old := cur.Rule[ci]
			for r := range e.Classes[ci].Rules {
				if r != old {
					cur.Rule[ci] = r
					consider(cur)
				}
			}
			cur.Rule[ci] = old
		}
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
				consider(cur)
				for _, ci := range consumers[ti] {
					oldR := cur.Rule[ci]
					for r := range e.Classes[ci].Rules {
						if r != oldR {
							cur.Rule[ci] = r
							consider(cur)
						}
					}
					cur.Rule[ci] = oldR
				}
			}
			cur.Leaf[ti] = old
			if time.Now().After(deadline) {
				break
			}
		}
		if best == nil {
			break
		}
		cur, cost = best, bestCost
	}
	return cur, cost
}

func clone(ch *encode.Choice) *encode.Choice {
	out := &encode.Choice{Rule: append([]int(nil), ch.Rule...), Leaf: append([]int(nil), ch.Leaf...), Lengths: copyLengths(ch.Lengths)}
	if ch.Grouped != nil {
		out.Grouped = make([][]bool, len(ch.Grouped))
		for i := range ch.Grouped {
			out.Grouped[i] = append([]bool(nil), ch.Grouped[i]...)
		}
	}
	return out
}
