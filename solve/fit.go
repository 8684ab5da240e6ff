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
// op class's rules, every leaf class's layouts and shifts of a segment's
// units from one device group to another, until the choice fits.
// Sharding a parameter that dp replicates is the typical rule move: it
// frees its values, gradient and optimizer state at the price of gathering
// it where it is read. Shifting samples from a fast device with little
// memory to a slow one with much is the typical lengths move; without it,
// bert-base at batch 1024 on two RTX 4090s and two A100-80GBs, where every
// start overflows the 4090s, was repaired into a program 36× slower than
// dp-cp, and the joint MILP, left to find a plan itself, gave the 4090s
// nothing to do (3.10 s against dp with lengths that fit, ~1.7 s).
//
// It returns the choice it reached and the bytes it is still over (0: it
// fits): over > 0 when no move frees memory (the joint MILP is then left
// to find a plan, and the choice says how close a program came). It
// returns nil when no start is a valid program. Deterministic: moves are
// tried in a fixed order, ties to the first.
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
					consider(fitMove{class: moveLeaf, leaf: ti, layout: l})
				}
			}
		}
		for si, ls := range cur.Lengths {
			for from := range e.Groups {
				have := e.GroupTotal(ls, from)
				for to := range e.Groups {
					if to == from {
						continue
					}
					// Halving steps, largest first: a linear stretch of
					// prices then moves in one step what unit steps
					// would take hundreds of.
					for k := have; k > 0; k /= 2 {
						consider(fitMove{class: moveLengths, seg: si, lengths: e.ShiftUnits(ls, from, to, k)})
					}
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

// fitMove is one of FitMemory's moves, by class: op class class to rule
// rule; (class moveLeaf) leaf class leaf to layout layout; or (class
// moveLengths) segment seg to lengths. It records what it leads to.
type fitMove struct {
	class, rule  int
	leaf, layout int
	seg          int
	lengths      []int
	sec, over    float64
	price        float64
}

// The classes of fitMove that change no op class's rule.
const (
	moveLeaf    = -1
	moveLengths = -2
)

// swap makes move m on ch and returns the move that undoes it.
func (m fitMove) swap(ch *encode.Choice) fitMove {
	switch m.class {
	case moveLeaf:
		old := ch.Leaf[m.leaf]
		ch.Leaf[m.leaf] = m.layout
		return fitMove{class: moveLeaf, leaf: m.leaf, layout: old}
	case moveLengths:
		old := ch.Lengths[m.seg]
		ch.Lengths[m.seg] = m.lengths
		return fitMove{class: moveLengths, seg: m.seg, lengths: old}
	}
	old := ch.Rule[m.class]
	ch.Rule[m.class] = m.rule
	return fitMove{class: m.class, rule: old}
}
