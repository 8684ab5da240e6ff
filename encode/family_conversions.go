package encode

import (
	"fmt"
	"math"

	"hap/spmd"
)

// conv adds the column that is 1 when the tensor class is needed in q and
// had in h [and not needed in Identity]: conv ≥ need + have − 1 − extra.
// The lean LP keeps the column but not the row (its transport rows charge
// each (made, read) pair).
func (b *milpBuilder) conv(s *tensorScope, q, h spmd.Layout, minusNeedI bool) int {
	ti := s.ti
	c := b.col(fmt.Sprintf("conv_%d_%s_%s", ti, h, q), 0, 1, false)
	b.collCols[ti] = append(b.collCols[ti], c)
	s.into[q] = append(s.into[q], c)
	s.convOf[[2]spmd.Layout{q, h}] = c
	l := lin{c: 1, s.need[q]: -1}
	for hc, val := range b.have(ti, h) {
		l.add(hc, -val)
	}
	if minusNeedI {
		l.add(s.needI, 1)
	}
	if !b.f.lean {
		b.row(fmt.Sprintf("conv_%d", len(b.m.Rows)), -1, math.Inf(1), l)
	}
	return c
}

// conversions adds a conversion per costly (needed, had) pair: into
// Identity from Reduce (all-reduce) and from each Gather (all-gather), and
// into a Gather from Reduce (reduce-scatter) unless Identity is needed
// too (then it is sliced from there). Each uneven collective pays its
// padded or grouped cost (methodCost).
func (b *milpBuilder) conversions(s *tensorScope) {
	e, ti, t := b.e, s.ti, s.t
	for qi, q := range s.layouts {
		if _, ok := s.need[q]; !ok {
			continue
		}
		switch q.Kind {
		case spmd.Identity:
			if s.produced[spmd.R] {
				ar := milpTime * e.collCoeffs(t, spmd.I).AllReduce
				b.commT[ti].add(b.conv(s, spmd.I, spmd.R, false), ar)
				b.commBound[ti] += ar
			}
			for _, h := range s.layouts {
				if s.produced[h] && h.Kind == spmd.Gather {
					b.methodCost(s, b.conv(s, spmd.I, h, false), qi, e.collCoeffs(t, h), 0, h.Seg)
				}
			}
		case spmd.Gather:
			if s.produced[spmd.R] {
				b.methodCost(s, b.conv(s, q, spmd.R, true), qi, e.collCoeffs(t, q), 1, q.Seg)
			}
		}
	}
}

// methodCost adds the padded/grouped cost of an uneven collective on
// conversion c over segment seg (k: 0 all-gather, 1 reduce-scatter). One
// method per (tensor, layout made), whichever layout it is made from. A
// method pruning fixed (prune.go) keeps its binary here, pinned by Fix
// and started by StartValues at the kept method: without the binary and
// the dominated method's row, CBC's node-limited searches ran slower on
// the same plans.
func (b *milpBuilder) methodCost(s *tensorScope, c int, qi int, cf Coll, k, seg int) {
	e, v, ti := b.e, b.v, s.ti
	inf := math.Inf(1)
	cf = cf.scaled(milpTime)
	if v.grouped[ti] == nil {
		v.grouped[ti] = map[int]int{}
	}
	g, ok := v.grouped[ti][qi]
	if !ok {
		g = b.col(fmt.Sprintf("grouped_%d_%d", ti, qi), 0, 1, true)
		v.grouped[ti][qi] = g
	}
	U := float64(e.Segs[seg].Units)
	mPad := cf.PadA[k] + cf.PadB[k]*U
	mGrp := cf.GrpA[k]*float64(e.N) + cf.GrpB[k]*U
	tp := b.col(fmt.Sprintf("tpad_%d", b.methods), 0, inf, false)
	tg := b.col(fmt.Sprintf("tgrp_%d", b.methods), 0, inf, false)
	b.methods++
	// tp ≥ PadA + PadB·max − M(1 − c) − M·g
	b.row(fmt.Sprintf("tpad_%d", b.methods), cf.PadA[k]-mPad, inf, lin{tp: 1, b.mx[seg]: -cf.PadB[k], c: -mPad, g: mPad})
	// tg ≥ GrpA·Σpieces + GrpB·U − M(1 − c) − M(1 − g)
	l := lin{tg: 1, c: -mGrp, g: -mGrp}
	for gr := range e.Groups {
		l.add(b.pieces[seg][gr], -cf.GrpA[k])
	}
	b.row(fmt.Sprintf("tgrp_%d", b.methods), cf.GrpB[k]*U-2*mGrp, inf, l)
	b.commT[ti].add(tp, 1)
	b.commT[ti].add(tg, 1)
	b.commBound[ti] += math.Max(mPad, mGrp)
	// Whatever the lengths and method, the conversion costs at least its
	// cheapest case: padded with the most even pieces, or grouped with one
	// non-empty piece.
	even := math.Ceil(U / float64(e.N))
	least := math.Min(cf.PadA[k]+cf.PadB[k]*even, cf.GrpA[k]+cf.GrpB[k]*U)
	b.row(fmt.Sprintf("least_%d", b.methods), 0, inf, lin{tp: 1, tg: 1, c: -least})
}

// covers adds the aggregated covers: a needed layout the tensor is not
// made in must be converted into. The conv rows charge each source
// separately (conv ≥ need + have − 1), which a fractional LP point
// satisfies at zero cost (need = have = ½); summed over the sources, the
// charge is need − have(target). Valid at every integer point (one source
// is had), they lift the LP bound: mlp-tiny on v100-8 from 3.5 to 24.5 µs
// (optimum 126), bert-base on paper-16 from 0.36 to 0.59 s (feasible
// 0.94). The lean LP leaves them out.
//
// Into Identity: from Reduce by all-reduce, from each Gather by
// all-gather, so Σ conv(I, ·) ≥ need(I) − have(I). Into a Gather q: free
// from q itself or from Identity; from another Gather through Identity
// (the closure rows set need(I)); from Reduce by reduce-scatter or
// through Identity. So conv(q, R) + need(I) ≥ need(q) − have(q) − have(I).
func (b *milpBuilder) covers(s *tensorScope) {
	if b.f.lean {
		return
	}
	inf := math.Inf(1)
	ti := s.ti
	if c, ok := s.need[spmd.I]; ok {
		l := lin{c: -1}
		for hc, val := range b.have(ti, spmd.I) {
			l.add(hc, val)
		}
		for _, cc := range s.into[spmd.I] {
			l.add(cc, 1)
		}
		b.row(fmt.Sprintf("intoI_%d", ti), 0, inf, l)
	}
	for _, q := range s.layouts {
		c, ok := s.need[q]
		if !ok || q.Kind != spmd.Gather {
			continue
		}
		l := lin{c: -1, s.needI: 1}
		for _, h := range []spmd.Layout{q, spmd.I} {
			for hc, val := range b.have(ti, h) {
				l.add(hc, val)
			}
		}
		for _, cc := range s.into[q] {
			l.add(cc, 1)
		}
		b.row(fmt.Sprintf("intoG_%d", len(b.m.Rows)), 0, inf, l)
	}
}
