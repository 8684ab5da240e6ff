package encode

import (
	"fmt"
	"math"
	"slices"

	"hap/cost"
	"hap/ir"
	"hap/spmd"
)

// Gradient sums.
//
// A tensor several ops read has its gradients summed in backward
// (ir.Accumulation: one add per reader but the first that backward
// meets). In a distributed program the readers hold the tensor in the
// layouts their rules read, each made from the layout the tensor is
// produced in by Decode's conversions: a tree, rooted at that layout, whose
// nodes are the tensor as each device holds it in one layout. Backward
// sums per node: every reader's gradient and every child conversion's
// adjoint is one contribution to its node, and a node of k contributions
// costs k − 1 adds at its own size. Over the tree that is
//
//	Σ_readers a(q_j) + Σ_conversions (a(from) − a(made)) − a(h)
//
// with a(l) one add of the gradient as a device holds layout l (whole for
// Identity and Reduce, its share of the segment for a Gather) and h the
// layout the tensor is made in. OpClass.Acc prices the first sum, every
// reader at the layout it reads (the reader backward meets first included,
// AccumulationTime.TimeS); sumTreeSeconds is the rest. Priced per reader
// alone, a tensor read whole by three column-parallel matmuls and in
// pieces by a residual add was charged three whole adds where the program
// makes two whole and one in pieces (megatron BERT-Base on three L4s at
// batch 8: 2.4% over the simulator).
//
// The conversions Decode makes, and their terms:
//
//	Identity → Gather q (slice)        a(I) − a(q)
//	Reduce → Gather q (reduce-scatter) a(R) − a(q), the same through Identity
//	Reduce → Identity (all-reduce)     0
//	Gather h → Identity (all-gather)   a(h) − a(I), and Gather q through it: a(I) − a(q)
//	Gather h → Reduce (pad)            a(h) − a(R)
//	Gather h → Gather q (all-to-all)   a(h) − a(q)

// sumNegligible is the least one add of a tensor's gradient can take on
// any device (seconds) for its sum tree to be priced: 100 ns, far below a
// real model's adds (tens of microseconds: BERT-Base's 64 µs on a P100)
// and above the tiny zoo models' (10 ns, the kernel floor). Those keep
// the sums priced per reader, and their encodings as they were: with the
// tree's rows, coefficients of a thousandth of the MILP's unit, one of
// TestMILPPricesAPinnedChoiceAsEvaluate's pinned bert-moe-tiny solves sat
// at CBC's root for minutes, past its time limit.
const sumNegligible = 1e-7

// gradientSums lists the sums of the training step: per forward tensor
// whose gradients backward sums, the seconds on each of the n devices of
// one add of its whole gradient; and per forward op, the input slots whose
// gradient starts such a sum (ir.GradStart). A tensor whose adds are
// negligible everywhere is in neither.
func gradientSums(step *ir.Graph, m *cost.Model, n int) (sumAdd map[ir.TensorID][]float64, starts map[ir.OpID][]int) {
	sumAdd = map[ir.TensorID][]float64{}
	for _, a := range step.Train.Accumulations {
		t := step.Ops[a.Of].Inputs[a.Slot]
		if _, ok := sumAdd[t]; ok {
			continue
		}
		w, _ := step.Work(a.Add)
		secs := make([]float64, n)
		for d := range n {
			secs[d] = m.ComputeTime(d, w)
		}
		sumAdd[t] = secs
	}
	for t, secs := range sumAdd {
		if slices.Max(secs) < sumNegligible {
			delete(sumAdd, t)
		}
	}
	starts = map[ir.OpID][]int{}
	for _, s := range step.Train.GradStarts {
		if sumAdd[s.Tensor] != nil {
			starts[s.Of] = append(starts[s.Of], s.Slot)
		}
	}
	return sumAdd, starts
}

// evenShare is device d's group's share of segment s under ch, spread
// evenly over the group's devices (1 for s < 0): how the sum tree prices a
// Gather's add on every device of a group, where the first device holds
// ⌈L/size⌉ units and the others fewer (a difference of at most one unit's
// add, against the remainder's ceiling the MILP would need; see
// sumTreeRows).
func (e *Encoding) evenShare(ch *Choice, s, d int) float64 {
	if s < 0 {
		return 1
	}
	g := e.groupOfDevice[d]
	return float64(e.GroupTotal(ch.Lengths[s], g)) / float64(len(e.Groups[g])) / float64(e.Segs[s].Units)
}

// sumTreeSeconds is what one tensor of class ti's gradient sum costs on
// device d under ch beyond its readers' adds (OpClass.Acc, TimeS
// included), made in h and read in need: −a(h) and each conversion's
// a(from) − a(made). It can be negative.
func (e *Encoding) sumTreeSeconds(ch *Choice, ti, d int, h spmd.Layout, need spmd.LayoutSet) float64 {
	whole := e.Tensors[ti].SumAdd
	if whole == nil {
		return 0
	}
	a := func(l spmd.Layout) float64 { return whole[d] * e.evenShare(ch, layoutSeg(l), d) }
	sec := -a(h)
	byAllToAll := e.allToAll(ch, ti, h, need)
	gathered := false // a Gather other than h is made through Identity (or from Reduce)
	for _, q := range need {
		if q.Kind != spmd.Gather || q == h {
			continue
		}
		if byAllToAll {
			sec += a(h) - a(q)
			continue
		}
		sec += whole[d] - a(q)
		gathered = true
	}
	if h.Kind == spmd.Gather {
		if need.Has(spmd.I) || gathered {
			sec += a(h) - whole[d]
		}
		if need.Has(spmd.R) {
			sec += a(h) - whole[d]
		}
	}
	return sec
}

// sumTreeLeast bounds from below what sumTreeSeconds can be for tensor
// class ti on device d, negated: one add saved at the source, one per
// conversion made from a Gather (to Identity, to Reduce, to each other
// Gather by all-to-all) and none elsewhere — each at most a whole add.
func (e *Encoding) sumTreeLeast(ti, d int) float64 {
	whole := e.Tensors[ti].SumAdd
	if whole == nil {
		return 0
	}
	return whole[d] * float64(len(e.Layouts(ti))+3)
}

// sumTreeRows prices sumTreeSeconds for the MILP: per device group, the
// seconds of one tensor of class ti's sum tree go to sum[g], exact at every
// integer point. Each term is a share of one add, a(l), times an
// indicator; the indicators that come with a negative coefficient are
// bounded above by the binaries that make them (the solver, minimising,
// takes them to those bounds), those with a positive one below (it takes
// them down to those):
//
//	−a(h)·have(h)                      made in h
//	(a(I) − a(q))·m_q                  Gather q made from Identity or Reduce:
//	                                   m_q ≥ need(q) + have(h') − 1 [− a2a] for each other h'
//	(a(h) − a(q))·b_hq                 Gather q made from Gather h by all-to-all:
//	                                   b_hq = need(q) ∧ have(h) ∧ a2a, both ways
//	(a(h) − a(I))·b_hI                 Gather h gathered: b_hI ≤ have(h),
//	                                   b_hI ≤ Σ x(reads I) + Σ_{Gather q ≠ h} u_q, u_q ≤ Σ x(reads q) [, 1 − a2a]
//	(a(h) − a(R))·b_hR                 Gather h padded: b_hR ≤ have(h), b_hR ≤ Σ x(reads R)
//
// A device group's share of a Gather is its even share, L/size (add), as
// Evaluate prices the tree (sumTreeSeconds): not the group's first
// device's ⌈L/size⌉/U, whose ceiling a share priced negatively would
// need bounded from above by another integer row; and, equal on every
// device of the group, the tree's term keeps the group's first device its
// slowest in every block, as the MILP prices the group. The all-to-all
// flag is held to where it applies (allToAllPossible): 0 when a reader
// reads Identity, or, made in a Gather, another Gather of its dimension —
// choices that the flag, set, would not change.
func (e *Encoding) sumTreeRows(ti int, v *MILPVars, produced map[spmd.Layout]bool, have func(int, spmd.Layout) lin, sum []lin,
	col func(name string, lo, hi float64, integer bool) int, row func(name string, lo, hi float64, l lin)) {
	t := &e.Tensors[ti]
	if t.SumAdd == nil {
		return
	}
	inf := math.Inf(1)
	whole := func(g int) float64 { return milpTime * t.SumAdd[e.Groups[g][0]] }
	// reads[q]: the consumer rules that read the tensor in q, summed: at
	// every integer point at least 1 exactly when some reader reads q.
	reads := map[spmd.Layout]lin{}
	// byClass[c][q]: those of consumer class c.
	byClass := map[int]map[spmd.Layout]lin{}
	for _, cs := range t.Consumers {
		if byClass[cs[0]] == nil {
			byClass[cs[0]] = map[spmd.Layout]lin{}
		}
		for ri, r := range e.Classes[cs[0]].Rules {
			q := r.In[cs[1]]
			if reads[q] == nil {
				reads[q] = lin{}
			}
			if byClass[cs[0]][q] == nil {
				byClass[cs[0]][q] = lin{}
			}
			x := v.x[cs[0]][ri]
			reads[q][x] = 1
			byClass[cs[0]][q][x] = 1
		}
	}
	layouts := e.Layouts(ti)
	a2a := v.a2a[ti]
	name := func(f string, args ...any) string { return fmt.Sprintf("sum%d_", ti) + fmt.Sprintf(f, args...) }
	// add charges sign·a(l)·on to every group, on an indicator that the
	// solver takes to its upper bounds (sign < 0) or lower ones (sign > 0):
	// for a Gather, the group's even share of the add, a column z with
	// z ≥ L − U·(1 − on) (sign > 0) or z ≤ L, z ≤ U·on (sign < 0).
	add := func(sign float64, l spmd.Layout, on lin, owner string) {
		s := layoutSeg(l)
		for g := range e.Groups {
			if s < 0 {
				addScaled(sum[g], on, sign*whole(g))
				continue
			}
			U := float64(e.Segs[s].Units)
			n := name("z%s_%d", owner, g)
			z := col(n, 0, U, false)
			lz := lin{z: 1, v.L[s][g]: -1}
			if sign > 0 {
				addScaled(lz, on, -U)
				row(n, -U, inf, lz) // z ≥ L − U·(1 − on)
			} else {
				row(n, -inf, 0, lz) // z ≤ L
				lo := lin{z: 1}
				addScaled(lo, on, -U)
				row(n+"_on", -inf, 0, lo) // z ≤ U·on
			}
			sum[g].add(z, sign*whole(g)/U/float64(len(e.Groups[g])))
		}
	}
	upper := func(n string, c int, bound lin, slack float64) { // c ≤ bound + slack
		l := lin{c: 1}
		addScaled(l, bound, -1)
		row(n, -inf, slack, l)
	}
	for _, h := range layouts {
		if produced[h] {
			add(-1, h, have(ti, h), fmt.Sprintf("h%s", h))
		}
	}
	// differentDims: an all-to-all can make q from h.
	differentDims := func(h, q spmd.Layout) bool { return a2a >= 0 && h.Kind == spmd.Gather && h.Dim != q.Dim }
	for _, q := range layouts {
		if q.Kind != spmd.Gather || reads[q] == nil {
			continue
		}
		need := v.need[ti][q]
		m := col(name("m%s", q), 0, 1, false)
		for _, h := range layouts {
			if !produced[h] || h == q {
				continue
			}
			l := lin{m: 1, need: -1}
			addScaled(l, have(ti, h), -1)
			if differentDims(h, q) {
				l.add(a2a, 1)
			}
			row(name("m%s_%s", q, h), -1, inf, l) // m ≥ need(q) + have(h) − 1 [− a2a]
		}
		add(1, spmd.I, lin{m: 1}, fmt.Sprintf("m%s", q))
		add(-1, q, lin{m: 1}, fmt.Sprintf("m%s", q))
		for _, h := range layouts {
			if !produced[h] || h == q || !differentDims(h, q) {
				continue
			}
			b := col(name("a2a%s_%s", h, q), 0, 1, false)
			upper(name("a2a%s_%s_have", h, q), b, have(ti, h), 0)
			upper(name("a2a%s_%s_reads", h, q), b, reads[q], 0)
			upper(name("a2a%s_%s_flag", h, q), b, lin{a2a: 1}, 0)
			l := lin{b: 1, need: -1, a2a: -1}
			addScaled(l, have(ti, h), -1)
			row(name("a2a%s_%s_lo", h, q), -2, inf, l) // b ≥ need(q) + have(h) + a2a − 2
			owner := fmt.Sprintf("a%s_%s", h, q)
			add(1, h, lin{b: 1}, owner)
			add(-1, q, lin{b: 1}, owner)
		}
	}
	for _, h := range layouts {
		if !produced[h] || h.Kind != spmd.Gather {
			continue
		}
		gathers := lin{} // the readers that make h gathered
		addScaled(gathers, reads[spmd.I], 1)
		for _, q := range layouts {
			if q.Kind != spmd.Gather || q == h || reads[q] == nil {
				continue
			}
			u := col(name("u%s_%s", h, q), 0, 1, false)
			upper(name("u%s_%s", h, q), u, reads[q], 0)
			if differentDims(h, q) {
				upper(name("u%s_%s_flag", h, q), u, lin{a2a: -1}, 1) // u ≤ 1 − a2a
			}
			gathers.add(u, 1)
		}
		for _, via := range []struct {
			made    spmd.Layout
			readers lin
		}{{spmd.I, gathers}, {spmd.R, reads[spmd.R]}} {
			if len(via.readers) == 0 {
				continue
			}
			b := col(name("b%s_%s", h, via.made), 0, 1, false)
			upper(name("b%s_%s_have", h, via.made), b, have(ti, h), 0)
			upper(name("b%s_%s_reads", h, via.made), b, via.readers, 0)
			owner := fmt.Sprintf("b%s_%s", h, via.made)
			add(1, h, lin{b: 1}, owner)
			add(-1, via.made, lin{b: 1}, owner)
		}
	}
	if a2a < 0 {
		return
	}
	// The flag where it applies: a2a + Σ x(c reads I) ≤ 1 per consumer
	// class c, and, made in Gather h, a2a + have(h) + Σ x(c reads another
	// Gather of h's dimension) ≤ 2.
	for _, c := range sortedKeys(byClass) {
		if xs := byClass[c][spmd.I]; xs != nil {
			l := lin{a2a: 1}
			addScaled(l, xs, 1)
			row(name("flagI_%d", c), -inf, 1, l)
		}
		for _, h := range layouts {
			if !produced[h] || h.Kind != spmd.Gather {
				continue
			}
			same := lin{}
			for q, xs := range byClass[c] {
				if q.Kind == spmd.Gather && q != h && q.Dim == h.Dim {
					for x := range xs {
						same[x] = 1
					}
				}
			}
			if len(same) == 0 {
				continue
			}
			l := lin{a2a: 1}
			addScaled(l, have(ti, h), 1)
			addScaled(l, same, 1)
			row(name("flag%s_%d", h, c), -inf, 2, l)
		}
	}
}

// sumTree adds the adds of a gradient accumulated over several readers
// (gradsum.go).
func (b *milpBuilder) sumTree(s *tensorScope) {
	G := len(b.e.Groups)
	b.sumB[s.ti] = make([]lin, G)
	for g := range G {
		b.sumB[s.ti][g] = lin{}
	}
	b.e.sumTreeRows(s.ti, b.v, s.produced, b.have, b.sumB[s.ti], b.col, b.row)
}
