package encode

import (
	"fmt"
	"math"

	"hap/milp"
)

// ExcludeChoice adds to m, a model built by MILPBelow or TransportMILP
// with columns v, a no-good cut: every solution must differ from ch in
// what ch decides. That is a rule, a leaf layout, an all-to-all flag that
// applies under ch (AllToAllApplies), the method of a collective ch makes
// (MethodApplies), or a device group's units of a segment ch uses
// (SegmentsUsed). Decisions ch leaves idle are not in the cut: another
// value of theirs is the same plan, and a cut on them would let the
// solver return it again.
//
// It is what makes the search over issue orders exact (solve's
// OverOrders): a choice whose best order has been priced is cut off, and
// the any-order MILP's optimum over the rest bounds every plan not yet
// priced.
//
// The binaries enter as |b − b̂|, linear since b̂ is fixed. An integer
// length L with value ℓ̂ enters through two binaries of its own, up (L ≥
// ℓ̂+1) and down (L ≤ ℓ̂−1), each forced off unless its side holds.
func (e *Encoding) ExcludeChoice(m *milp.Model, v *MILPVars, ch *Choice) {
	inf := math.Inf(1)
	addRow := func(name string, lo, hi float64, l lin) { addLinRow(m, name, lo, hi, l) }
	cut := lin{}
	rhs := 1.0 // Σ |b − b̂| ≥ 1, with the b̂ = 1 terms' constants moved right
	binary := func(c int, was bool) {
		if was {
			cut.add(c, -1)
			rhs--
		} else {
			cut.add(c, 1)
		}
	}
	for ci := range e.Classes {
		for ri, c := range v.x[ci] {
			binary(c, ri == ch.Rule[ci])
		}
	}
	for ti := range e.Tensors {
		for li, c := range v.y[ti] {
			binary(c, li == ch.Leaf[ti])
		}
		if c := v.a2a[ti]; c >= 0 && e.AllToAllApplies(ch, ti) {
			binary(c, e.usesAllToAll(ch, ti))
		}
		for qi, c := range v.grouped[ti] {
			if e.MethodApplies(ch, ti, qi) {
				binary(c, ch.Grouped != nil && ch.Grouped[ti] != nil && ch.Grouped[ti][qi])
			}
		}
	}
	cutNo := len(m.Rows)
	used := e.SegmentsUsed(ch)
	for s := range e.Segs {
		if !used[s] {
			continue
		}
		units := float64(e.Segs[s].Units)
		bigM := units + 1
		for g, c := range v.L[s] {
			was := float64(e.GroupTotal(ch.Lengths[s], g))
			if was < units {
				// up = 1 only if L ≥ ℓ̂+1: L − M·up ≥ ℓ̂ + 1 − M.
				up := m.AddCol(milp.Col{Name: fmt.Sprintf("nogood%d_up_%d_%d", cutNo, s, g), Upper: 1, Integer: true})
				addRow(fmt.Sprintf("nogood%d_up_%d_%d", cutNo, s, g), was+1-bigM, inf, lin{c: 1, up: -bigM})
				cut.add(up, 1)
			}
			if was > 0 {
				// down = 1 only if L ≤ ℓ̂−1: L + M·down ≤ ℓ̂ − 1 + M.
				down := m.AddCol(milp.Col{Name: fmt.Sprintf("nogood%d_down_%d_%d", cutNo, s, g), Upper: 1, Integer: true})
				addRow(fmt.Sprintf("nogood%d_down_%d_%d", cutNo, s, g), -inf, was-1+bigM, lin{c: 1, down: bigM})
				cut.add(down, 1)
			}
		}
	}
	addRow(fmt.Sprintf("nogood%d", cutNo), rhs, inf, cut)
}
