package encode

import (
	"fmt"
	"math"

	"hap/spmd"
)

// needCol is the binary need(q) of the scope's tensor class: 1 when some
// reader reads it in layout q. Binary: a fractional need(Identity) would
// weaken the reduce-scatter's big-M rows (conversions).
func (b *milpBuilder) needCol(s *tensorScope, q spmd.Layout) int {
	if c, ok := s.need[q]; ok {
		return c
	}
	c := b.col(fmt.Sprintf("need_%d_%s", s.ti, q), 0, 1, true)
	s.need[q] = c
	return c
}

// needs adds need(q) ≥ x(reader rule) for every reader rule that reads
// the tensor class in q, and need(I), which the conversions through
// Identity charge.
func (b *milpBuilder) needs(s *tensorScope) {
	e, v := b.e, b.v
	for _, cs := range s.t.Consumers {
		for ri, r := range e.Classes[cs[0]].Rules {
			q := r.In[cs[1]]
			b.row(fmt.Sprintf("need_%d_%d_%d_%d", s.ti, cs[0], cs[1], ri), 0, math.Inf(1), lin{b.needCol(s, q): 1, v.x[cs[0]][ri]: -1})
		}
	}
	s.needI = b.needCol(s, spmd.I)
}

// allToAllPairs finds the (made in h, read in q) Gathers of different
// dimensions an all-to-all can convert between, and adds the binary a2a
// that is 1 when the choice converts them so (Choice.AllToAll).
func (b *milpBuilder) allToAllPairs(s *tensorScope) {
	e, v := b.e, b.v
	v.a2a[s.ti] = -1
	for _, q := range s.layouts {
		if _, needed := s.need[q]; !needed || q.Kind != spmd.Gather || e.opt.NoAllToAll || !s.t.allToAllCandidate() {
			continue
		}
		for _, h := range s.layouts {
			if s.produced[h] && h.Kind == spmd.Gather && h.Dim != q.Dim {
				s.a2aPairs = append(s.a2aPairs, [2]spmd.Layout{h, q})
			}
		}
	}
	if len(s.a2aPairs) > 0 {
		v.a2a[s.ti] = b.col(fmt.Sprintf("a2a_%d", s.ti), 0, 1, true)
	}
}

// closure adds need(I) ≥ need(q) + have(h) − 1 [− a2a] for a Gather q
// needed and a different Gather h made: a Gather needed from another
// goes through Identity — unless, across dimensions, by all-to-all. The
// lean LP leaves them out (its transport rows do their work).
func (b *milpBuilder) closure(s *tensorScope) {
	v := b.v
	for _, q := range s.layouts {
		c, needed := s.need[q]
		if !needed || q.Kind != spmd.Gather {
			continue
		}
		for _, h := range s.layouts {
			if !s.produced[h] || h.Kind != spmd.Gather || h == q {
				continue
			}
			l := lin{s.needI: 1, c: -1}
			for hc, val := range b.have(s.ti, h) {
				l.add(hc, -val)
			}
			if h.Dim != q.Dim && v.a2a[s.ti] >= 0 {
				l.add(v.a2a[s.ti], 1) // needI ≥ need(q) + have(h) − 1 − a2a
			}
			if !b.f.lean {
				b.row(fmt.Sprintf("closure_%d", len(b.m.Rows)), -1, math.Inf(1), l)
			}
		}
	}
}

// integer keeps an integer tensor off every collective: held in a layout
// other than Identity, every reader must read it as it is, so need(q) +
// have(h) ≤ 1 for q ≠ h.
func (b *milpBuilder) integer(s *tensorScope) {
	if !s.t.Integer {
		return
	}
	for _, h := range s.layouts {
		if !s.produced[h] || h.Kind == spmd.Identity {
			continue
		}
		for _, q := range s.layouts {
			c, needed := s.need[q]
			if !needed || q == h {
				continue
			}
			l := lin{c: 1}
			for hc, val := range b.have(s.ti, h) {
				l.add(hc, val)
			}
			b.row(fmt.Sprintf("integer_%d_%s_%s", s.ti, h, q), math.Inf(-1), 1, l)
		}
	}
}

// identityNotReduce adds need(R) + have(I) ≤ 1: no collective turns
// Identity into a partial sum.
func (b *milpBuilder) identityNotReduce(s *tensorScope) {
	c, ok := s.need[spmd.R]
	if !ok || !s.produced[spmd.I] {
		return
	}
	l := lin{c: 1}
	for hc, val := range b.have(s.ti, spmd.I) {
		l.add(hc, val)
	}
	b.row(fmt.Sprintf("noIR_%d", s.ti), math.Inf(-1), 1, l)
}
