package encode

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"hap/milp"
	"hap/spmd"
)

// TransportMILP is MILPBelow(limit) with transport rows: the same integer
// points and optimum, and a far tighter LP relaxation, at two to three
// times the work per branch-and-bound node. Without o.Memory it leaves the
// memory rows out, and with o.AnyOrder it relaxes the communication order:
// further relaxations, whose optimum may be below MILPBelow's, never above,
// so their LP still bounds every plan.
//
// Why they help. MILPBelow decides a tensor's conversions from two
// aggregates: need(q), at least every consumer rule that reads layout q,
// and have(h), the producer rules that make h. Its rows charge a
// conversion when both are 1, and its covers charge Σ conv into q at least
// need(q) − have(q). A fractional point satisfies them nearly free: every
// op split across a dozen rules in matching proportions, so that each
// needed layout is "had" about as much as it is needed, while the mass a
// producer makes in Reduce is read by no one and converted by nothing. The
// root LP of BERT-Base at batch 32 on paper-8 pays 0.025 s of
// communication for a step whose every plan pays over 0.6 s.
//
// The transport rows pair them per consumer slot: a column p(h, q) per
// (layout the tensor is made in, layout the slot's rules read it in), with
// Σ_q p(h, q) = have(h) and Σ_h p(h, q) = the slot's rules reading q —
// the pairwise marginals of producer and consumer, exact at every integer
// point (the one pair made and read is 1). Every pair that costs a
// collective must then be covered by a conversion that makes it:
//
//	made in   read in    covered by
//	Reduce    Identity   conv(I ← R)                         all-reduce
//	Reduce    Gather q   conv(I ← R) + conv(q ← R)           through Identity, or reduce-scatter
//	Gather h  Identity   conv(I ← h)                         all-gather
//	Gather h  Gather q   conv(I ← h) [+ all-to-all(h → q)]   through Identity, or all-to-all
//
// one row per costly pair, and one per made layout over all its costly
// pairs (each alone lifted bert-base's bound to about 0.33 s, together to
// 0.456 s). Identity read as Reduce is impossible (no column); every other
// pair is free (a slice or a pad). At an integer point the pair made and
// read is one, and MILPBelow's own rows already force the conversion named,
// so no program is cut off (TestTransportRowsKeepTheOptimum).
//
// Measured, root LP bound against the plan (node-limited joint MILPs):
// bert-base paper-8 at batch 256 0.484 → 0.753 s (plan 0.770 s), vit
// paper-16 0.291 → 0.5666 s (plan 0.5667 s), vgg19 paper-8 0.033 → 0.056 s
// (0.085 s), bert-moe paper-8 0.590 → 0.853 s (1.365 s). The node LPs got
// slower by as much (bert-moe's ten joint nodes 19 → 56 s), so the default
// search keeps MILPBelow and takes its bound from this model's LP, less
// the rows it makes redundant there (TransportLP, solve.Synthesize).
func (e *Encoding) TransportMILP(limit float64, o BoundOptions) (*milp.Model, *MILPVars) {
	return e.milpBelow(limit, milpForm{transport: true, memory: o.Memory, anyOrder: o.AnyOrder, streamRow: true, spreadRow: true})
}

// TransportLP is the LP solved for the proven bound: TransportMILP's LP
// relaxation less the rows that, with the transport rows there, only
// slow it (milpForm.lean): MILPBelow's per-source conversion rows, its
// closure rows and aggregated covers, which charge a conversion from need
// and have where the covers above charge it from each pair that costs
// one. Fewer rows, so its optimum is at most TransportMILP's
// relaxation's, and so still a bound; measured before issue 69's launch
// overheads, it was the same (TestTransportLPKeepsTheBound, the exhaustive
// cases, and 21 cases of the paper, modern and tiny models); since, the
// pads it leaves out cost a launch each, and with the covers they lift
// the relaxation in 5 of the 200 exhaustive cases, by up to 5.4% (the
// solve tests' leanLPSlack). It is up to 20× faster
// (docs/planner.md, "The lean LP"). Leaving out the timeline's per-class
// collective indicators (hascoll) as well was faster still (bert-moe
// paper-8, batch 256: 11.2 → 9.9 s) but lowered VGG19's bound by 1e-5 of
// it; need's rows, no faster; the conservation or least-cost rows, lower.
// Its columns are continuous.
//
// With limit > 0 every column is bounded, so that the duals of a solve the
// clock stopped prove a finite bound (milp.Model.DualBound: a reduced cost
// pulling a column towards an infinite bound makes it −∞). The columns
// without one of their own are times of work done within the step (the
// timeline's ends, a tensor's communication, a method's or a made
// all-to-all's cost), capped at T's bound, and the memory sweep's bytes,
// capped at their device's capacity (memoryRows). What an all-to-all
// would cost, made or not, has its own cap (a2aTime: not the step's,
// which an all-to-all the plan does not make may exceed: capped at it,
// bert-base's LP on paper-32 was infeasible). None cuts off a plan of
// step at most limit: at a plan's point (each column at the least its
// rows allow, as the MILP prices it) each is within its cap
// (TestTransportLPKeepsEveryStart checks that every start stays feasible).
func (e *Encoding) TransportLP(limit float64, o BoundOptions) (*milp.Model, *MILPVars) {
	m, v := e.milpBelow(limit, milpForm{transport: true, memory: o.Memory, anyOrder: o.AnyOrder, streamRow: true, spreadRow: true, lean: true})
	for i := range m.Cols {
		m.Cols[i].Integer = false
		if limit > 0 && math.IsInf(m.Cols[i].Upper, 1) {
			m.Cols[i].Upper = m.Cols[v.T].Upper
		}
	}
	return m, v
}

// BoundOptions select TransportMILP's and TransportLP's form.
type BoundOptions struct {
	// Memory keeps the memory rows; left out, the model is a further
	// relaxation.
	Memory bool
	// AnyOrder relaxes the order in which each device's communication
	// stream issues its collectives, which the timeline otherwise takes
	// to be the lowered program's list order (timeline.go): the model's
	// optimum is then at most the step of every plan under every issue
	// order, a bound for a plan whose order was searched (package
	// order). See syncRows.
	AnyOrder bool
}

// convs are a tensor class's conversion columns: made[{q, h}] makes layout
// q from h by its canonical collective, allToAll[{h, q}] by all-to-all.
type convs struct {
	made, allToAll map[[2]spmd.Layout]int
}

// transportRows adds tensor class ti's transport columns and rows
// (TransportMILP). have(ti, l) is 1 when ti is made in l, x the rule
// columns, produced the layouts ti can be made in.
func (e *Encoding) transportRows(ti int, have func(int, spmd.Layout) lin, x [][]int, produced map[spmd.Layout]bool, cv convs,
	col func(string, float64, float64, bool) int, row func(string, float64, float64, lin)) {
	t := &e.Tensors[ti]
	var made []spmd.Layout
	for _, h := range e.Layouts(ti) {
		if produced[h] {
			made = append(made, h)
		}
	}
	conv := func(q, h spmd.Layout) int {
		c, ok := cv.made[[2]spmd.Layout{q, h}]
		if !ok {
			panic(fmt.Sprintf("encode: tensor class %d has no conversion %s ← %s", ti, q, h))
		}
		return c
	}
	for _, cs := range t.Consumers {
		// The slot's rules, by the layout they read it in.
		reads := map[spmd.Layout]lin{}
		var read []spmd.Layout
		for ri, r := range e.Classes[cs[0]].Rules {
			q := r.In[cs[1]]
			if reads[q] == nil {
				reads[q] = lin{}
				read = append(read, q)
			}
			reads[q].add(x[cs[0]][ri], 1)
		}
		name := fmt.Sprintf("tr_%d_%d_%d", ti, cs[0], cs[1])
		// p[{h, q}] is the pair's expression: a column of its own, or,
		// when the tensor is made in one layout or the slot read in one,
		// the other side's expression (the marginals then fix it; a third
		// of the columns on BERT-Base, and a 2× faster LP).
		p := map[[2]spmd.Layout]lin{}
		switch {
		case len(read) == 1:
			for _, h := range made {
				if !(h.Kind == spmd.Identity && read[0].Kind == spmd.Reduce) {
					p[[2]spmd.Layout{h, read[0]}] = have(ti, h)
				}
			}
		case len(made) == 1:
			for _, q := range read {
				if !(made[0].Kind == spmd.Identity && q.Kind == spmd.Reduce) {
					p[[2]spmd.Layout{made[0], q}] = reads[q]
				}
			}
		default:
			for _, h := range made {
				for _, q := range read {
					if h.Kind == spmd.Identity && q.Kind == spmd.Reduce {
						continue // no instruction makes it
					}
					p[[2]spmd.Layout{h, q}] = lin{col(fmt.Sprintf("%s_%s_%s", name, h, q), 0, 1, false): 1}
				}
			}
			// Marginals: Σ_q p(h, q) = have(h), Σ_h p(h, q) = reads(q).
			for _, h := range made {
				l := lin{}
				addScaled(l, have(ti, h), -1)
				for _, q := range read {
					addScaled(l, p[[2]spmd.Layout{h, q}], 1)
				}
				row(fmt.Sprintf("%s_made_%s", name, h), 0, 0, l)
			}
			for _, q := range read {
				l := lin{}
				addScaled(l, reads[q], -1)
				for _, h := range made {
					addScaled(l, p[[2]spmd.Layout{h, q}], 1)
				}
				row(fmt.Sprintf("%s_read_%s", name, q), 0, 0, l)
			}
		}
		// Covers: a costly pair needs a conversion that makes it.
		for _, h := range made {
			all := lin{} // every conversion from h that a pair needs, less every costly pair
			for _, q := range read {
				pq, ok := p[[2]spmd.Layout{h, q}]
				if !ok || h == q {
					continue
				}
				by := lin{}
				switch {
				case h.Kind == spmd.Reduce && q.Kind == spmd.Identity:
					by.add(conv(spmd.I, spmd.R), 1)
				case h.Kind == spmd.Reduce && q.Kind == spmd.Gather:
					by.add(conv(spmd.I, spmd.R), 1)
					by.add(conv(q, spmd.R), 1)
				case h.Kind == spmd.Gather && q.Kind == spmd.Identity:
					by.add(conv(spmd.I, h), 1)
				case h.Kind == spmd.Gather && q.Kind == spmd.Gather:
					by.add(conv(spmd.I, h), 1)
					if c, ok := cv.allToAll[[2]spmd.Layout{h, q}]; ok {
						by.add(c, 1)
					}
				default:
					continue // Identity → Gather is a slice, Gather → Reduce a pad
				}
				for c := range by {
					all[c] = 1
				}
				addScaled(all, pq, -1)
				addScaled(by, pq, -1)
				row(fmt.Sprintf("%s_cover_%s_%s", name, h, q), 0, math.Inf(1), by)
			}
			if len(all) > 0 {
				row(fmt.Sprintf("%s_covers_%s", name, h), 0, math.Inf(1), all)
			}
		}
	}
}

// BoundChoices are the choices of TransportLP's model v that a branching
// search over its LP may branch on (milp.Options.Choices): each op
// class's rule, each leaf class's layout, where there is more than one —
// at every integer point exactly one column of each is 1. They come in
// the order of the communication the incumbent ch (nil: none) makes next
// to them, the most first: the relaxation mixes rules so that a layout
// change costs little or nothing, and where the incumbent communicates
// most, making the choice is likeliest to cost. On BERT-MoE on paper-29,
// the LP runs every class a third on the batch's lengths and two thirds
// on the experts', and the dispatch's and combine's all-to-alls, most of
// the plan's step, cost nothing; branching on the dispatch's rule lifts
// the bound by 29%, on the first classes in graph order by 2.5% in 60
// LPs. Ties keep class order, op classes before leaves.
func (e *Encoding) BoundChoices(v *MILPVars, ch *Choice) [][]int {
	// Each tensor class's communication under ch (all its tensors), and
	// each op class's: that of the tensors it makes or reads.
	comm := make([]float64, len(e.Tensors))
	near := make([]float64, len(e.Classes))
	if ch != nil {
		for ti := range e.Tensors {
			t := &e.Tensors[ti]
			sec, _, err := e.tensorComm(ch, ti)
			if err != nil {
				continue
			}
			comm[ti] = (sec.Forward + sec.Adjoint) * float64(len(t.Tensors))
			seen := map[int]bool{}
			if t.Producer >= 0 {
				seen[t.Producer] = true
			}
			for _, cs := range t.Consumers {
				seen[cs[0]] = true
			}
			for ci := range seen {
				near[ci] += comm[ti]
			}
		}
	}
	type choice struct {
		cols  []int
		score float64
	}
	var all []choice
	for ci, cols := range v.x {
		if len(cols) < 2 {
			continue
		}
		all = append(all, choice{slices.Clone(cols), near[ci]})
	}
	for ti, cols := range v.y {
		if len(cols) > 1 {
			all = append(all, choice{slices.Clone(cols), comm[ti]})
		}
	}
	slices.SortStableFunc(all, func(a, b choice) int { return cmp.Compare(b.score, a.score) })
	out := make([][]int, len(all))
	for i, c := range all {
		out[i] = c.cols
	}
	return out
}

// transport adds the transport rows in the forms that ask for them
// (transport.go); an integer tensor is read as it is made.
func (b *milpBuilder) transport(s *tensorScope) {
	if b.f.transport && !s.t.Integer {
		b.e.transportRows(s.ti, b.have, b.v.x, s.produced, convs{made: s.convOf, allToAll: s.a2aConvOf}, b.col, b.row)
	}
}
