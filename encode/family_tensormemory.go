package encode

import (
	"fmt"
	"math"

	"hap/ir"
	"hap/spmd"
)

// tensorMemory adds what scales with the share of a tensor class a device
// group holds (memory.go): leafShare[ti][g], a leaf's share (its resident
// bytes, its gradient and its update scale with it), and heldShare[ti][g],
// the share of one instance summed over the layouts it is held in (held_q
// is 1 when it is held in q); a parameter's update seconds per group and
// its gradient's all-reduce when it is made Identity.
func (b *milpBuilder) tensorMemory(s *tensorScope) {
	e, v, ti, t := b.e, b.v, s.ti, s.t
	G := len(e.Groups)
	count := float64(len(t.Tensors))
	b.heldShare[ti] = make([]lin, G)
	for g := range b.heldShare[ti] {
		b.heldShare[ti][g] = lin{}
	}
	if t.Kind == ir.Param || (t.Producer < 0 && b.memoryBinds) {
		bySeg := map[int]lin{}
		for li, l := range t.LeafLayouts {
			s := layoutSeg(l)
			if bySeg[s] == nil {
				bySeg[s] = lin{}
			}
			bySeg[s].add(v.y[ti][li], 1)
		}
		b.leafShare[ti] = make([]lin, G)
		for g := 0; g < G; g++ {
			b.leafShare[ti][g] = lin{}
			for _, s := range sortedKeys(bySeg) {
				b.shareTerm(b.leafShare[ti][g], 1, s, g, bySeg[s], fmt.Sprintf("l%d", ti))
			}
			addScaled(b.resident[g], b.leafShare[ti][g], milpMemory*e.residentFactor(t)*t.Bytes*count)
		}
	}
	if b.memoryBinds { // no memory rows: the held columns would only burden the solver
		for _, h := range e.heldBounds(ti, b.have, v.x) {
			c := b.col(fmt.Sprintf("held_%d_%s", ti, h.q), 0, 1, false)
			if b.heldCol[ti] == nil {
				b.heldCol[ti] = map[spmd.Layout]int{}
			}
			b.heldCol[ti][h.q] = c
			for _, lb := range h.lower {
				l := lin{c: 1}
				for lc, val := range lb {
					l.add(lc, -val)
				}
				b.row(fmt.Sprintf("held_%d", len(b.m.Rows)), 0, math.Inf(1), l) // held ≥ lb
			}
			for g := 0; g < G; g++ {
				b.shareTerm(b.heldShare[ti][g], 1, layoutSeg(h.q), g, lin{c: 1}, fmt.Sprintf("h%d_%s", ti, h.q))
			}
		}
	}
	if t.Kind == ir.Param {
		for g := 0; g < G; g++ {
			d := e.Groups[g][0]
			addScaled(b.update[g], b.leafShare[ti][g], milpTime*(t.Update[d]-t.UpdateFixed[d]))
			// The launches are paid whole: one term on each leaf layout's
			// y, of which exactly one is 1.
			for _, c := range b.v.y[ti] {
				b.update[g].add(c, milpTime*t.UpdateFixed[d])
			}
		}
		for c, val := range b.have(ti, spmd.I) {
			b.gradT[ti].add(c, milpTime*e.collCoeffs(t, spmd.I).AllReduce*val)
		}
	}
}
