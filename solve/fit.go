package solve

import (
	"context"
	"math"

	"hap/encode"
)

// maxFitSteps bounds FitMemory's moves: each frees memory, and a program
// has one rule per op class and one layout per leaf class to change.
const maxFitSteps = 1000

// FitMemory repairs choices that do not fit the devices' memory into one
// that does, for when no start fits: without a fitting start the joint
// MILP has no incumbent, Polish nothing to polish, and CBC's own
// heuristics must find a first plan in the full timeline model (bert-base
// on paper-16 at batch 2048, where every hand-written strategy the
// encoding can express is over the planner's 90% of capacity, ran them for
// over 17 minutes). From the start that is least over capacity (the
// bytes by which the devices' peaks exceed it, summed; ties to the faster),
// it takes the move that frees memory at the least cost in step time per
// byte freed — a move that frees memory and saves time first — among every
// op class's rules and every leaf class's layouts, under the start's
// lengths, until the choice fits. Sharding a parameter that dp replicates
// is the typical move: it frees its values, gradient and optimizer state
// at the price of gathering it where it is read.
//
// It returns the choice it reached and the bytes it is still over (0: it
// fits): over > 0 when the moves stop freeing memory first (the lengths
// are not moved; the joint MILP, which moves them too, is then left to
// find a plan, and the choice says how close a program came). It returns
// nil when no start is a valid program. Deterministic: moves are tried in
// a fixed order, ties to the first.
func FitMemory(ctx context.Context, e *encode.Encoding, starts []*encode.Choice) (*encode.Choice, float64) {
	ev := e.NewEvaluator()
	var cur *encode.Choice
	sec, over := math.Inf(1), math.Inf(1)
	for _, ch := range starts {
		if ch == nil {
			continue
		}
		s, o, err := ev.Overflow(ch)
		if err == nil && (o < over || (o == over && s < sec)) {
			cur, sec, over = ch, s, o
		}
	}
	if cur == nil {
		return nil, 0
	}
	cur = cur.Clone()
	for step := 0; over > 0 && step < maxFitSteps && ctx.Err() == nil; step++ {
		best := fitMove{price: math.Inf(1)}
		consider := func(m fitMove) {
			undo := m.swap(cur)
			s, o, err := ev.Overflow(cur)
			undo.swap(cur)
			if err != nil || o >= over {
				return
			}
			m.sec, m.over = s, o
			// Seconds added per byte freed; a move that saves time as
			// well is cheaper than any that costs time.
			m.price = (s - sec) / (over - o)
			if m.price < best.price {
				best = m
			}
		}
		for ci := range e.Classes {
			for r := range e.Classes[ci].Rules {
				if r != cur.Rule[ci] {
					consider(fitMove{class: ci, rule: r})
				}
			}
		}
		for ti := range e.Tensors {
			if e.Tensors[ti].Producer >= 0 {
				continue
			}
			for l := range e.Tensors[ti].LeafLayouts {
				if l != cur.Leaf[ti] {
					consider(fitMove{class: -1, leaf: ti, layout: l})
				}
			}
		}
		if math.IsInf(best.price, 1) {
			break // no single move frees memory
		}
		best.swap(cur)
		sec, over = best.sec, best.over
	}
	return cur, over
}

// fitMove is one of FitMemory's moves: op class class to rule rule, or
// (class −1) leaf class leaf to layout layout, and what it leads to.
type fitMove struct {
	class, rule  int
	leaf, layout int
	sec, over    float64
	price        float64
}

// swap makes move m on ch and returns the move that undoes it.
func (m fitMove) swap(ch *encode.Choice) fitMove {
	if m.class >= 0 {
		old := ch.Rule[m.class]
		ch.Rule[m.class] = m.rule
		return fitMove{class: m.class, rule: old}
	}
	old := ch.Leaf[m.leaf]
	ch.Leaf[m.leaf] = m.layout
	return fitMove{class: -1, leaf: m.leaf, layout: old}
}
