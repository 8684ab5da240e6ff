package encode

import (
	"fmt"
	"math"

	"hap/spmd"
)

// allToAllConversions adds an all-to-all per pair the choice converts so:
// its time follows the lengths of the layout it is made from, its
// adjoint's those of the layout it makes (cost.AllToAllTerms: a maximum
// of linear terms, each a row that holds when the conversion is made).
// Until here every conversion's adjoint costs what it does, so adjT
// starts as commT.
func (b *milpBuilder) allToAllConversions(s *tensorScope) {
	e, v, ti, t := b.e, b.v, s.ti, s.t
	inf := math.Inf(1)
	b.adjT[ti] = lin{}
	for c, val := range b.commT[ti] {
		b.adjT[ti].add(c, val)
	}
	least := milpTime * e.allToAllLeast(t)
	fwdLeast, adjLeast := lin{}, lin{}
	for _, pr := range s.a2aPairs {
		h, q := pr[0], pr[1]
		c := b.col(fmt.Sprintf("conv_%d_%s_%s_a2a", ti, h, q), 0, 1, false)
		b.collCols[ti] = append(b.collCols[ti], c)
		s.into[q] = append(s.into[q], c)
		s.a2aConvOf[[2]spmd.Layout{h, q}] = c
		l := lin{c: 1, s.need[q]: -1, v.a2a[ti]: -1}
		for hc, val := range b.have(ti, h) {
			l.add(hc, -val)
		}
		if !b.f.lean {
			b.row(fmt.Sprintf("conv_%d", len(b.m.Rows)), -2, inf, l) // c ≥ need(q) + have(h) + a2a − 2
		}
		tf := b.a2aTime(fmt.Sprintf("a2a_%d_%s_%s", ti, h, q), c, ti, h)
		b.commT[ti].add(tf, 1)
		fwdLeast.add(tf, 1)
		fwdLeast.add(c, -least)
		if t.ReqGrad {
			tb := b.a2aTime(fmt.Sprintf("a2a_adj_%d_%s_%s", ti, h, q), c, ti, q)
			b.adjT[ti].add(tb, 1)
			adjLeast.add(tb, 1)
			adjLeast.add(c, -least)
		}
	}
	// Whatever the lengths, an all-to-all costs at least its least time
	// (the same either way: the whole tensor moves); without these rows a
	// fractional conversion makes it free (bert-base on paper-64: root
	// bound 0.36 s, with them 0.77 s as without all-to-all). One row per
	// tensor class, over the sum the timeline charges, is as tight as one
	// per conversion.
	if len(fwdLeast) > 0 {
		b.row(fmt.Sprintf("a2a_least_%d", ti), 0, inf, fwdLeast)
	}
	if len(adjLeast) > 0 {
		b.row(fmt.Sprintf("a2a_adj_least_%d", ti), 0, inf, adjLeast)
	}
}

// a2aTime is a column at least the time of an all-to-all of a tensor of
// class ti held in Gather layout l when conversion column c is 1 (0
// otherwise). The time, α + max(max_r k_r·b_r, max_j k_j·Σ_{r on j} b_r)
// with b_r = bytes·L_r/U (cost.AllToAllTerms; a device group's units are
// its devices' evenly), is a column of its own per (tensor class,
// layout), at least each term; each conversion then costs one big-M row:
// the paper-8 BERT-MoE's 40k-row MILP would otherwise grow by a row per
// term and conversion.
func (b *milpBuilder) a2aTime(name string, c int, ti int, l spmd.Layout) int {
	e := b.e
	inf := math.Inf(1)
	key := collKey{ti, l}
	at, ok := b.a2aOf[key]
	t := &e.Tensors[ti]
	U := float64(e.Segs[l.Seg].Units)
	perUnit := milpTime * t.Bytes / U
	alpha := milpTime * e.a2a.Alpha
	M := alpha + b.a2aMost(U, perUnit)
	if !ok {
		// What the all-to-all would cost, made or not: at a plan's point
		// it is at most M, which bounds it in the bound's LP
		// (TransportLP); the step's bound does not, since an all-to-all
		// the plan does not make may cost more than its step.
		hi := inf
		if b.f.lean && b.limit > 0 {
			hi = M
		}
		at = b.col(fmt.Sprintf("a2a_%d_%s", ti, l), 0, hi, false)
		b.a2aOf[key] = at
		term := func(suffix string, coef lin) {
			r := lin{at: 1}
			for lc, val := range coef {
				r.add(lc, -val)
			}
			b.row(fmt.Sprintf("a2a_%d_%s%s", ti, l, suffix), alpha, inf, r)
		}
		term("", lin{})
		for g, devs := range e.Groups {
			k := 0.0
			for _, d := range devs {
				k = max(k, e.a2a.PerRank[d])
			}
			if k > 0 {
				most := lin{}
				addScaled(most, b.firstUnits(l.Seg, g), k*perUnit)
				term(fmt.Sprintf("_g%d", g), most)
			}
		}
		for j, k := range e.a2a.PerNode {
			on := lin{}
			for _, r := range e.a2a.Nodes[j] {
				addScaled(on, b.firstUnits(l.Seg, b.groupOf[r]), k*perUnit)
			}
			term(fmt.Sprintf("_n%d", j), on)
		}
	}
	tc := b.col(name, 0, inf, false)
	b.row(name, -M, inf, lin{tc: 1, at: -1, c: -M}) // tc ≥ at − M(1 − c)
	return tc
}

// a2aMost is the most any term of an all-to-all over a segment of U units
// can reach, at perUnit seconds a unit. The big M must bound every term as
// the rows state it, not as the program would pay it: a group's devices
// count ⌈L/size⌉ units each, and a node holding many of them can count
// more than U (4 units over paper-29's eight V100s count 7 on its 7-GPU
// node); with M from U alone, an all-to-all that the program does not
// make still charged that excess (bert-base-tiny on paper-29 priced 30%
// over Evaluate).
func (b *milpBuilder) a2aMost(U, perUnit float64) float64 {
	e := b.e
	ceilMost := func(r int) float64 { // the most units device r's group can count for it
		return math.Ceil(U / b.size(b.groupOf[r]))
	}
	most := 0.0
	for r, k := range e.a2a.PerRank {
		most = max(most, k*perUnit*ceilMost(r))
	}
	for j, k := range e.a2a.PerNode {
		units := 0.0
		for _, r := range e.a2a.Nodes[j] {
			units += ceilMost(r)
		}
		most = max(most, k*perUnit*units)
	}
	return most
}
