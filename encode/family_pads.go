package encode

import (
	"fmt"
	"math"

	"hap/spmd"
)

// pads adds the pads and slices of uneven pieces (padRows).
func (b *milpBuilder) pads(s *tensorScope) {
	b.e.padRows(s.ti, b.v, s.need, s.produced, b.have, b.f.lean, b.padF, b.padB, b.col, b.row)
}

// padRows prices tensor class ti's pads (padTimes) for the timeline: per
// group, padF[ti] the forward pads' seconds and padB[ti] the backward's.
// A pad makes Reduce from each Gather h the tensor is made in,
//
//	padR_h ≥ need(R) + have(h) − 1,
//
// and, with a gradient, is the adjoint of the slice cutting each Gather q
// read from an Identity copy (made Identity, gathered, or all-reduced):
//
//	slice_q ≥ need(q) + need(I) − 1 − have(q),   slice_q ≥ need(q) + have(I) − 1.
//
// Each is exact at every integer point, where the cost (positive) keeps
// the column at its bound. A pad costs the whole tensor written plus the
// piece read, the device's share of the layout's segment (price). A
// tensor with a gradient made Reduce goes through Identity only where a
// consumer reads Identity (tensorCommFor): need(I) ≤ Σ x(reads I) + 1 −
// have(R). A class whose pads are not priced (padNegligible) gets none
// of these, nor does the lean LP.
func (e *Encoding) padRows(ti int, v *MILPVars, need map[spmd.Layout]int, produced map[spmd.Layout]bool, have func(int, spmd.Layout) lin, lean bool, padF, padB [][]lin,
	col func(name string, lo, hi float64, integer bool) int, row func(name string, lo, hi float64, l lin)) {
	inf := math.Inf(1)
	t := &e.Tensors[ti]
	G := len(e.Groups)
	padF[ti], padB[ti] = make([]lin, G), make([]lin, G)
	for g := range G {
		padF[ti][g], padB[ti][g] = lin{}, lin{}
	}
	if !t.padsCost() || lean {
		// No columns or rows: the tiny models' encodings stay as they
		// were, and the bound's LP leaves the pads out (milpForm.lean).
		return
	}
	// price charges pad column on (at most 1, at its bound at every integer
	// point) to each group's expression: the whole tensor written, and the
	// group's first device's piece read, r ≥ w·units/U − w·(1 − on), its
	// units ⌈L/size⌉ (one big-M row rather than shareTerm's ζ, which took
	// bert-moe paper-8's joint MILP from 22k to 28k rows and its planning
	// from 27 to 46 s, both measured beside a benchmark run).
	price := func(dst []lin, on int, seg int, owner string) {
		U := float64(e.Segs[seg].Units)
		for g := range G {
			w := milpTime * t.PadWhole[e.Groups[g][0]]
			dst[g].add(on, w)
			name := fmt.Sprintf("%s_read_%d", owner, g)
			r := col(name, 0, inf, false)
			l := lin{r: 1, on: -w}
			if c := v.ceil[seg][g]; c >= 0 {
				l.add(c, -w/U)
			} else {
				l.add(v.L[seg][g], -w/U/float64(len(e.Groups[g])))
			}
			row(name, -w, inf, l)
			dst[g].add(r, 1)
		}
	}
	// withHave adds sign·have(ti, h) to l.
	withHave := func(l lin, h spmd.Layout, sign float64) lin {
		for hc, val := range have(ti, h) {
			l.add(hc, sign*val)
		}
		return l
	}
	layouts := e.Layouts(ti)
	if cR, ok := need[spmd.R]; ok {
		for _, h := range layouts {
			if !produced[h] || h.Kind != spmd.Gather {
				continue
			}
			name := fmt.Sprintf("padR_%d_%s", ti, h)
			p := col(name, 0, 1, false)
			row(name, -1, inf, withHave(lin{p: 1, cR: -1}, h, -1))
			price(padF[ti], p, h.Seg, name)
		}
	}
	if !t.ReqGrad {
		return
	}
	needI := need[spmd.I]
	for _, q := range layouts {
		cq, ok := need[q]
		if !ok || q.Kind != spmd.Gather {
			continue
		}
		name := fmt.Sprintf("slice_%d_%s", ti, q)
		sl := col(name, 0, 1, false)
		row(name+"_copy", -1, inf, withHave(lin{sl: 1, cq: -1, needI: -1}, q, 1))
		if produced[spmd.I] {
			row(name+"_made", -1, inf, withHave(lin{sl: 1, cq: -1}, spmd.I, -1))
		}
		price(padB[ti], sl, q.Seg, name)
	}
	if produced[spmd.R] {
		l := withHave(lin{needI: 1}, spmd.R, 1)
		for _, cs := range t.Consumers {
			for ri, r := range e.Classes[cs[0]].Rules {
				if r.In[cs[1]] == spmd.I {
					l.add(v.x[cs[0]][ri], -1)
				}
			}
		}
		row(fmt.Sprintf("viaI_%d", ti), -inf, 1, l)
	}
}
