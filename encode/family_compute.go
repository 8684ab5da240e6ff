package encode

import (
	"fmt"
	"math"
)

// shareTerm adds coef·(the share of device group d under segment s when
// the choice expression on is 1) to dst: ζ ≥ L − U(1 − on), ζ ≤ L, cost
// coef/U·ζ; with s < 0 (no segment: every device does all of it) coef·on.
// A group of several devices also pays its first device's remainder ξ.
// The ζ columns of one owner and segment are remembered for the
// conservation family.
func (b *milpBuilder) shareTerm(dst lin, coef float64, s, d int, on lin, owner string) {
	e, v := b.e, b.v
	inf := math.Inf(1)
	if coef == 0 {
		return
	}
	if s < 0 {
		for c, val := range on {
			dst.add(c, coef*val)
		}
		return
	}
	U := float64(e.Segs[s].Units)
	coef /= b.size(d) // d is a group: each device holds 1/size of its units
	z := b.col(fmt.Sprintf("zeta_%d", b.zeta), 0, U, false)
	b.zeta++
	l := lin{z: 1, v.L[s][d]: -1}
	for c, val := range on {
		l.add(c, -U*val)
	}
	b.row(fmt.Sprintf("zeta_%d", b.zeta), -U, inf, l) // z − L − U·on ≥ −U
	b.row(fmt.Sprintf("zetaup_%d", b.zeta), -inf, 0, lin{z: 1, v.L[s][d]: -1})
	if c := v.ceil[s][d]; c >= 0 {
		// The group's first device holds size·ceil − L units more
		// than the even share (at most size − 1): ξ ≥ that when on.
		k := b.size(d)
		xi := b.col(fmt.Sprintf("xi_%d", b.zeta), 0, k-1, false)
		l := lin{xi: 1, c: -k, v.L[s][d]: 1}
		for oc, val := range on {
			l.add(oc, -(k-1)*val)
		}
		b.row(fmt.Sprintf("xi_%d", b.zeta), -(k - 1), inf, l) // ξ − (k·ceil − L) − (k−1)·on ≥ −(k−1)
		dst.add(xi, coef/U)
	}
	k := zkey{owner, s}
	if b.zetaOf[k] == nil {
		b.zetaOf[k], b.zetaOn[k] = lin{}, on
		b.zetaOrder = append(b.zetaOrder, k)
	}
	b.zetaOf[k].add(z, 1)
	dst.add(z, coef/U)
}

// conservation adds, per (owner, segment) of the linearised shares,
// Σ_d ζ = U·on: the shares of one choice over all devices add up to the
// whole. It holds at every integer point and lifts the LP bound from ~0
// to the ideal compute time.
func (b *milpBuilder) conservation() {
	for _, k := range b.zetaOrder {
		l := lin{}
		for c, val := range b.zetaOf[k] {
			l.add(c, val)
		}
		U := float64(b.e.Segs[k.s].Units)
		for c, val := range b.zetaOn[k] {
			l.add(c, -U*val)
		}
		b.row(fmt.Sprintf("conserve_%s_%d", k.owner, k.s), 0, 0, l)
	}
}

// compute adds each op class's forward and backward seconds, and the
// backward's parameter-gradient tail, per device group: the group's share
// of each part of the class's work (workParts) times its seconds, and,
// but in the lean LP, the kernels' roofline extras (rooflineTerms).
func (b *milpBuilder) compute() {
	e, v := b.e, b.v
	G := len(e.Groups)
	b.fwdC, b.bwdC, b.wC = make([][]lin, len(e.Classes)), make([][]lin, len(e.Classes)), make([][]lin, len(e.Classes))
	for ci := range e.Classes {
		c := &e.Classes[ci]
		parts, on := e.workParts(v, ci)
		b.fwdC[ci], b.bwdC[ci], b.wC[ci] = make([]lin, G), make([]lin, G), make([]lin, G)
		inst := float64(len(c.Ops))
		for g := 0; g < G; g++ {
			d := e.Groups[g][0] // every device of a group prices the same
			fwd, bwd, tail := lin{}, lin{}, lin{}
			b.fwdC[ci][g], b.bwdC[ci][g], b.wC[ci][g] = fwd, bwd, tail
			// The fixed seconds (OpClass.Fixed, and its accumulations') are
			// paid whole under every rule: one term on each rule's x, of
			// which exactly one is 1.
			fb, fw := c.FixedB[d], c.FixedW[d]
			for ai := range c.Acc {
				fb += c.Acc[ai].FixedB[d]
				fw += c.Acc[ai].FixedW[d]
			}
			if c.FixedF[d] > 0 || fb > 0 {
				for _, col := range v.x[ci] {
					fwd.add(col, milpTime*c.FixedF[d]/inst)
					bwd.add(col, milpTime*fb/inst)
					if fw > 0 {
						tail.add(col, milpTime*fw/inst)
					}
				}
			}
			shares := make([]lin, len(parts)) // the group's share of each part, nil where it has no work
			for pi, p := range parts {
				f, bw, w := p.times(c, d)
				if f == 0 && bw == 0 {
					continue // no work: no share columns
				}
				// One owner per part: its shares over the devices add up
				// to the whole under its own rules (zetaOf).
				owner := fmt.Sprintf("c%d", ci)
				if !p.work || p.acc != "" {
					owner += fmt.Sprintf("p%d", pi)
				}
				sh := lin{} // the group's share of the part
				b.shareTerm(sh, 1, p.seg, g, on[pi], owner)
				shares[pi] = sh
				for col, val := range sh {
					fwd.add(col, milpTime*f/inst*val)
					bwd.add(col, milpTime*bw/inst*val)
					if w > 0 {
						tail.add(col, milpTime*w/inst*val)
					}
				}
			}
			if b.f.lean { // milpForm.lean: the bound's LP leaves the extras out
				continue
			}
			// A rule's share of its work, for its kernels' rows: its work
			// part's (shared by the rules of that part, each row holding
			// only while its own rule's x is 1).
			workShare := func(ri int) lin {
				for pi, p := range parts {
					if p.work && on[pi][v.x[ci][ri]] != 0 {
						return shares[pi]
					}
				}
				return nil
			}
			e.rooflineTerms(v, ci, g, fwd, bwd, tail, workShare, b.col, b.row)
		}
	}
}
