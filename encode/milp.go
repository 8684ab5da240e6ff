package encode

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"hap/ir"
	"hap/milp"
	"hap/spmd"
)

// Units inside the MILP. Step times are ~1e-5..1 s and memory ~1e9 B;
// CBC's default tolerances (~1e-6 absolute) would blur seconds, so the
// model counts tenths of a microsecond and megabytes. (In microseconds,
// CBC's cuts cut off an optimum 0.0018 µs below the plan it proved, on
// a 20 µs case of the exhaustive test with all-to-all.)
const (
	milpTime   = 1e7  // MILP time unit per second
	milpMemory = 1e-6 // MILP memory unit per byte
)

// MILPTimeUnit is how many MILP time units make a second.
const MILPTimeUnit = milpTime

// MILPVars remembers where each decision lives in the model's columns.
type MILPVars struct {
	x       [][]int       // op class, rule
	y       [][]int       // tensor class, leaf layout (leaves only)
	L       [][]int       // segment, device group: its units
	ceil    [][]int       // segment, device group: its first device's units, ⌈L/size⌉ (−1: a group of one)
	grouped []map[int]int // tensor class: layout index → method column (1 = grouped)
	a2a     []int         // tensor class: the all-to-all column (Choice.AllToAll), −1 for none
	need    []map[spmd.Layout]int
	nz      [][]int
	full    [][]int // segment, device group: 1 when every device of the group holds a unit (−1: a group of one)
	T       int
	sync    []syncVar
}

// lin is a sparse linear expression.
type lin map[int]float64

func (l lin) add(col int, v float64) {
	if v != 0 {
		l[col] += v
	}
}

// equal reports whether l and o have the same terms.
func (l lin) equal(o lin) bool {
	if len(l) != len(o) {
		return false
	}
	for c, v := range l {
		if w, ok := o[c]; !ok || w != v {
			return false
		}
	}
	return true
}

// MILP encodes the search for the cheapest Choice as one mixed-integer
// program. Decisions: a binary per (op class, rule), per (leaf class,
// layout) and per uneven collective's method; an integer length per
// (segment, device). Products of a binary choice and a length (a rule's
// share of a device's work) are linearised exactly: ζ ≥ L − U·(1 − x),
// ζ ≥ 0, ζ ≤ L and the conservation rows make it x·L at every integer
// point. The objective is Evaluate's timeline (timeline.go: T at least each
// of its terms, per device group), so both price every choice the same.
func (e *Encoding) MILP() (*milp.Model, *MILPVars) { return e.MILPBelow(0) }

// MILPBelow is MILP with the step bounded by limit seconds (0: none) — the
// cost of a choice known to be feasible, so that no better plan is cut
// off. The bound lets the synchronisation rows' big M be twice the limit
// rather than timeBound's worst case (every term of those rows is at most
// the step), which tightens their LP relaxation by orders of magnitude.
func (e *Encoding) MILPBelow(limit float64) (*milp.Model, *MILPVars) {
	return e.milpBelow(limit, milpForm{memory: true})
}

// milpForm selects milpBelow's variant: MILPBelow's by default.
type milpForm struct {
	// transport adds the transport rows (transport.go).
	transport bool
	// memory keeps the memory rows.
	memory bool
	// anyOrder relaxes the communication streams' order (syncRows).
	anyOrder bool
	// streamRow adds the stream row (syncRows), which lifts the LP
	// relaxation but, in the joint MILP, sent its ten nodes elsewhere:
	// vgg19 on paper-16 planned 0.1259 s with it, 0.1160 s without.
	streamRow bool
	// spreadRow adds the spread leaves' charge rows (spreadRows): a leaf
	// read in several blocks pays its layout change at one of its readers
	// at least. They lift the LP relaxation (GPT-2's tied embedding); the
	// joint MILP goes without them, as without the stream row, so that
	// its search, and every plan, is what it was: the bound a plan
	// reports is the transport LP's.
	spreadRow bool
	// lean, for an LP relaxation with the transport rows, leaves out the
	// rows whose work those do there (TransportLP): the per-source
	// conversion rows (conv ≥ need + have − 1), the closure rows and the
	// covers into Identity and into a Gather, which charge conversions
	// from the aggregates need and have where the transport rows charge
	// them per (made, read) pair. The model is then no longer MILPBelow's
	// at integer points: only its LP is used. It also leaves out the pads
	// (padRows) and the kernels' roofline extras (rooflineTerms): costs
	// that are never negative, so the LP still bounds every plan, and
	// with them it took twice as long for the same bound (bert-moe
	// paper-8 at 256: the whole plan 12.3 s without, 30.0 s with; bound
	// 1.0387333 s against 1.0387344 s).
	lean bool
}

// milpBelow is MILPBelow in the form f selects.
func (e *Encoding) milpBelow(limit float64, f milpForm) (*milp.Model, *MILPVars) {
	transport, memory := f.transport, f.memory
	m := &milp.Model{Sense: milp.Minimize}
	v := &MILPVars{}
	col := func(name string, lo, hi float64, integer bool) int {
		return m.AddCol(milp.Col{Name: name, Lower: lo, Upper: hi, Integer: integer})
	}
	row := func(name string, lo, hi float64, l lin) { addLinRow(m, name, lo, hi, l) }
	inf := math.Inf(1)
	// Lengths, their maximum, and which are non-empty.
	mx := make([]int, len(e.Segs))
	nz := make([][]int, len(e.Segs))
	// Filled below; rooflineTerms reads it before the model is done.
	v.nz = nz
	pieces := make([][]int, len(e.Segs)) // non-empty pieces per group: nz, or a column for a group of several
	// L[s][g] is the units of segment s held by device group g, shared
	// evenly by its devices (one device per group unless grouped).
	G := len(e.Groups)
	size := func(g int) float64 { return float64(len(e.Groups[g])) }
	groupOf := make([]int, e.N) // device → its group
	for g, devs := range e.Groups {
		for _, d := range devs {
			groupOf[d] = g
		}
	}
	// firstUnits is the units of segment s that group g's first device
	// holds: ⌈L/size⌉, or L for a group of one.
	firstUnits := func(s, g int) lin {
		if c := v.ceil[s][g]; c >= 0 {
			return lin{c: 1}
		}
		return lin{v.L[s][g]: 1}
	}
	for s, seg := range e.Segs {
		U := float64(seg.Units)
		sum := lin{}
		v.L = append(v.L, make([]int, G))
		v.ceil = append(v.ceil, make([]int, G))
		mx[s] = col(fmt.Sprintf("max_%s", seg.Name), 0, U, false)
		nz[s] = make([]int, G)
		pieces[s] = make([]int, G)
		v.full = append(v.full, make([]int, G))
		for g := 0; g < G; g++ {
			v.L[s][g] = col(fmt.Sprintf("L_%s_%d", seg.Name, g), 0, U, true)
			nz[s][g] = col(fmt.Sprintf("nz_%s_%d", seg.Name, g), 0, 1, true)
			sum.add(v.L[s][g], 1)
			// A group spreads its units evenly, the remainder to its
			// first devices (ChoiceFrom): the first holds ⌈L/size⌉, in
			// every segment, and so is the group's slowest and fullest.
			// The integer ceil_{s,g} ≥ L/size is that at the optimum (every
			// term it enters is a cost).
			v.ceil[s][g] = -1
			if size(g) > 1 {
				v.ceil[s][g] = col(fmt.Sprintf("ceil_%s_%d", seg.Name, g), 0, U, true)
				row(fmt.Sprintf("ceil_%s_%d", seg.Name, g), 0, inf, lin{v.ceil[s][g]: size(g), v.L[s][g]: -1})
			}
			// The largest piece is at least each group's largest.
			r := lin{mx[s]: 1}
			addScaled(r, firstUnits(s, g), -1)
			row(fmt.Sprintf("max_%s_%d", seg.Name, g), 0, inf, r)
			row(fmt.Sprintf("nzhi_%s_%d", seg.Name, g), 0, inf, lin{nz[s][g]: U, v.L[s][g]: -1})
			row(fmt.Sprintf("nzlo_%s_%d", seg.Name, g), 0, inf, lin{v.L[s][g]: 1, nz[s][g]: -1})
			// The group's non-empty pieces, min(L, size) spread evenly:
			// what a grouped collective pays a call for. (Counting size
			// whenever L > 0 priced 8 samples over paper-29's 21 P100s as
			// 21 calls: bert-base-tiny's tp +53% over Evaluate.) With the
			// binary full_{s,g} ≤ L/size, pieces ≥ L − U·full and
			// pieces ≥ size·full: the least is min(L, size).
			pieces[s][g] = nz[s][g]
			v.full[s][g] = -1
			if size(g) > 1 {
				pieces[s][g] = col(fmt.Sprintf("pieces_%s_%d", seg.Name, g), 0, math.Min(U, size(g)), false)
				if U < size(g) {
					// Never full: every unit is a piece.
					row(fmt.Sprintf("pieces_%s_%d", seg.Name, g), 0, inf, lin{pieces[s][g]: 1, v.L[s][g]: -1})
				} else {
					f := col(fmt.Sprintf("full_%s_%d", seg.Name, g), 0, 1, true)
					v.full[s][g] = f
					row(fmt.Sprintf("fullhi_%s_%d", seg.Name, g), 0, inf, lin{v.L[s][g]: 1, f: -size(g)})
					row(fmt.Sprintf("piecesL_%s_%d", seg.Name, g), 0, inf, lin{pieces[s][g]: 1, v.L[s][g]: -1, f: U})
					row(fmt.Sprintf("piecesN_%s_%d", seg.Name, g), 0, inf, lin{pieces[s][g]: 1, f: -size(g)})
					// Valid (min(L, size) ≥ L·size/U for L ≤ U), and the
					// relaxation the old count size·nz (nz ≥ L/U) had:
					// without it the pieces are nearly free at a
					// fractional full. It moves no bound we measured, but
					// the node-limited search's path: VGG19 on paper-29
					// 0.1727 s with it, 0.1831 s without.
					row(fmt.Sprintf("piecesLP_%s_%d", seg.Name, g), 0, inf, lin{pieces[s][g]: 1, v.L[s][g]: -size(g) / U})
				}
			}
		}
		row("sum_"+seg.Name, U, U, sum)
	}
	// Rule choices.
	lc := e.LossClass()
	for ci, c := range e.Classes {
		one := lin{}
		v.x = append(v.x, make([]int, len(c.Rules)))
		for ri, r := range c.Rules {
			hi := 1.0
			if ci == lc && r.Out[0] != spmd.R {
				hi = 0 // the loss must end as Reduce
			}
			v.x[ci][ri] = col(fmt.Sprintf("x_%d_%d", ci, ri), 0, hi, true)
			one.add(v.x[ci][ri], 1)
		}
		row(fmt.Sprintf("one_rule_%d", ci), 1, 1, one)
	}
	v.y = make([][]int, len(e.Tensors))
	v.grouped = make([]map[int]int, len(e.Tensors))
	v.a2a = make([]int, len(e.Tensors))
	for ti, t := range e.Tensors {
		if t.Producer >= 0 {
			continue
		}
		one := lin{}
		for li := range t.LeafLayouts {
			c := col(fmt.Sprintf("y_%d_%d", ti, li), 0, 1, true)
			v.y[ti] = append(v.y[ti], c)
			one.add(c, 1)
		}
		row(fmt.Sprintf("one_layout_%d", ti), 1, 1, one)
	}
	// have(t, l): the expression that is 1 when tensor class t is produced
	// in layout l.
	have := func(ti int, l spmd.Layout) lin {
		t := &e.Tensors[ti]
		h := lin{}
		if t.Producer < 0 {
			for li, ll := range t.LeafLayouts {
				if ll == l {
					h.add(v.y[ti][li], 1)
				}
			}
			return h
		}
		for ri, r := range e.Classes[t.Producer].Rules {
			if r.Out[t.OutIdx] == l {
				h.add(v.x[t.Producer][ri], 1)
			}
		}
		return h
	}
	// shareTerm adds coef·(share of device d under segment s when the
	// choice expression on is 1) to dst: ζ ≥ L − U(1 − on), cost coef/U·ζ.
	zeta := 0
	// zetaOf remembers, per (owner, segment), the ζ column of each device,
	// so that Σ_d ζ = U·on can be added: the shares of one choice over all
	// devices add up to the whole. It holds at every integer point and
	// lifts the LP bound from ~0 to the ideal compute time.
	type zkey struct {
		owner string
		s     int
	}
	zetaOf := map[zkey]lin{}
	zetaOn := map[zkey]lin{}
	var zetaOrder []zkey
	shareTerm := func(dst lin, coef float64, s, d int, on lin, owner string) {
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
		coef /= size(d) // d is a group: each device holds 1/size of its units
		z := col(fmt.Sprintf("zeta_%d", zeta), 0, U, false)
		zeta++
		l := lin{z: 1, v.L[s][d]: -1}
		for c, val := range on {
			l.add(c, -U*val)
		}
		row(fmt.Sprintf("zeta_%d", zeta), -U, inf, l) // z − L − U·on ≥ −U
		row(fmt.Sprintf("zetaup_%d", zeta), -inf, 0, lin{z: 1, v.L[s][d]: -1})
		if c := v.ceil[s][d]; c >= 0 {
			// The group's first device holds size·ceil − L units more
			// than the even share (at most size − 1): ξ ≥ that when on.
			k := size(d)
			xi := col(fmt.Sprintf("xi_%d", zeta), 0, k-1, false)
			l := lin{xi: 1, c: -k, v.L[s][d]: 1}
			for oc, val := range on {
				l.add(oc, -(k-1)*val)
			}
			row(fmt.Sprintf("xi_%d", zeta), -(k - 1), inf, l) // ξ − (k·ceil − L) − (k−1)·on ≥ −(k−1)
			dst.add(xi, coef/U)
		}
		k := zkey{owner, s}
		if zetaOf[k] == nil {
			zetaOf[k], zetaOn[k] = lin{}, on
			zetaOrder = append(zetaOrder, k)
		}
		zetaOf[k].add(z, 1)
		dst.add(z, coef/U)
	}
	// The timeline's per-instance terms (timeline.go), as expressions:
	// forward and backward seconds per (op class, group) and the backward's
	// parameter-gradient tail, forward layout change and gradient
	// all-reduce seconds per tensor class, update seconds per group.
	fwdC := make([][]lin, len(e.Classes))
	bwdC := make([][]lin, len(e.Classes))
	wC := make([][]lin, len(e.Classes))
	commT := make([]lin, len(e.Tensors))
	adjT := make([]lin, len(e.Tensors))
	gradT := make([]lin, len(e.Tensors))
	padF := make([][]lin, len(e.Tensors)) // per tensor class and group: its pads' seconds (padTimes)
	padB := make([][]lin, len(e.Tensors))
	sumB := make([][]lin, len(e.Tensors)) // per tensor class and group: its gradient's sum tree (sumTreeRows)
	for ti := range commT {
		commT[ti], gradT[ti] = lin{}, lin{}
	}
	update := make([]lin, G)
	resident := make([]lin, G)
	for d := range resident {
		update[d], resident[d] = lin{}, lin{}
	}
	leafShare := make([][]lin, len(e.Tensors))
	// commBound[ti] bounds commT[ti] (and adjT[ti]) at every integer point:
	// the big M of the rows that place a spread leaf's change (spreadRows).
	commBound := make([]float64, len(e.Tensors))
	memoryBinds := memory && e.MemoryMayBind()
	collCols := make([][]int, len(e.Tensors)) // per tensor class, its collective indicators
	heldShare := make([][]lin, len(e.Tensors))
	heldCol := make([]map[spmd.Layout]int, len(e.Tensors)) // per tensor class, its held_* columns
	for ci := range e.Classes {
		c := &e.Classes[ci]
		parts, on := e.workParts(v, ci)
		fwdC[ci], bwdC[ci], wC[ci] = make([]lin, G), make([]lin, G), make([]lin, G)
		inst := float64(len(c.Ops))
		for g := 0; g < G; g++ {
			d := e.Groups[g][0] // every device of a group prices the same
			fwdC[ci][g], bwdC[ci][g], wC[ci][g] = lin{}, lin{}, lin{}
			shares := make([]lin, len(parts)) // the group's share of each part, nil where it has no work
			for pi, p := range parts {
				f, b, w := p.times(c, d)
				if f == 0 && b == 0 {
					continue // no work: no share columns
				}
				// One owner per part: its shares over the devices add up
				// to the whole under its own rules (zetaOf).
				owner := fmt.Sprintf("c%d", ci)
				if !p.work || p.acc != "" {
					owner += fmt.Sprintf("p%d", pi)
				}
				sh := lin{} // the group's share of the part
				shareTerm(sh, 1, p.seg, g, on[pi], owner)
				shares[pi] = sh
				for col, val := range sh {
					fwdC[ci][g].add(col, milpTime*f/inst*val)
					bwdC[ci][g].add(col, milpTime*b/inst*val)
					if w > 0 {
						wC[ci][g].add(col, milpTime*w/inst*val)
					}
				}
			}
			if !f.lean { // milpForm.lean: the bound's LP leaves the extras out
				// A rule's share of its work, for its kernels' rows: its
				// work part's (shared by the rules of that part, each row
				// holding only while its own rule's x is 1).
				workShare := func(ri int) lin {
					for pi, p := range parts {
						if p.work && on[pi][v.x[ci][ri]] != 0 {
							return shares[pi]
						}
					}
					return nil
				}
				e.rooflineTerms(v, ci, g, fwdC[ci][g], bwdC[ci][g], wC[ci][g], workShare, col, row)
			}
		}
	}
	// a2aTime is a column at least the time of an all-to-all of a tensor
	// of class ti held in Gather layout l when conversion column c is 1
	// (0 otherwise). The time, α + max(max_r k_r·b_r, max_j k_j·Σ_{r on
	// j} b_r) with b_r = bytes·L_r/U (cost.AllToAllTerms; a device group's
	// units are its devices' evenly), is a column of its own per (tensor
	// class, layout), at least each term; each conversion then costs one
	// big-M row: the paper-8 BERT-MoE's 40k-row MILP would otherwise grow
	// by a row per term and conversion.
	a2aOf := map[collKey]int{}
	a2aTime := func(name string, c int, ti int, l spmd.Layout) int {
		key := collKey{ti, l}
		at, ok := a2aOf[key]
		t := &e.Tensors[ti]
		U := float64(e.Segs[l.Seg].Units)
		perUnit := milpTime * t.Bytes / U
		alpha := milpTime * e.a2a.Alpha
		// The big M must bound every term as the rows state it, not as
		// the program would pay it: a group's devices count ⌈L/size⌉
		// units each, and a node holding many of them can count more
		// than U (4 units over paper-29's eight V100s count 7 on its
		// 7-GPU node); with M from U alone, an all-to-all that the
		// program does not make still charged that excess (bert-base-tiny
		// on paper-29 priced 30% over Evaluate).
		ceilMost := func(r int) float64 { // the most units device r's group can count for it
			return math.Ceil(U / size(groupOf[r]))
		}
		most := 0.0 // the most any term can reach
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
		M := alpha + most
		if !ok {
			// What the all-to-all would cost, made or not: at a plan's
			// point it is at most M, which bounds it in the bound's LP
			// (TransportLP); the step's bound does not, since an
			// all-to-all the plan does not make may cost more than its step.
			hi := inf
			if f.lean && limit > 0 {
				hi = M
			}
			at = col(fmt.Sprintf("a2a_%d_%s", ti, l), 0, hi, false)
			a2aOf[key] = at
			term := func(suffix string, coef lin) {
				r := lin{at: 1}
				for lc, val := range coef {
					r.add(lc, -val)
				}
				row(fmt.Sprintf("a2a_%d_%s%s", ti, l, suffix), alpha, inf, r)
			}
			term("", lin{})
			for g, devs := range e.Groups {
				k := 0.0
				for _, d := range devs {
					k = max(k, e.a2a.PerRank[d])
				}
				if k > 0 {
					most := lin{}
					addScaled(most, firstUnits(l.Seg, g), k*perUnit)
					term(fmt.Sprintf("_g%d", g), most)
				}
			}
			for j, k := range e.a2a.PerNode {
				on := lin{}
				for _, r := range e.a2a.Nodes[j] {
					addScaled(on, firstUnits(l.Seg, groupOf[r]), k*perUnit)
				}
				term(fmt.Sprintf("_n%d", j), on)
			}
		}
		tc := col(name, 0, inf, false)
		row(name, -M, inf, lin{tc: 1, at: -1, c: -M}) // tc ≥ at − M(1 − c)
		return tc
	}
	group := 0
	for ti := range e.Tensors {
		t := &e.Tensors[ti]
		count := float64(len(t.Tensors))
		// Memory (memory.go): leafShare[ti][g] is group g's share of a leaf
		// (its resident bytes, its gradient and its update scale with it);
		// heldShare[ti][g] the group's share of one tensor instance summed
		// over the layouts it is held in (held_q is 1 when it is held in q).
		heldShare[ti] = make([]lin, G)
		for g := range heldShare[ti] {
			heldShare[ti][g] = lin{}
		}
		if t.Kind == ir.Param || (t.Producer < 0 && memoryBinds) {
			bySeg := map[int]lin{}
			for li, l := range t.LeafLayouts {
				s := layoutSeg(l)
				if bySeg[s] == nil {
					bySeg[s] = lin{}
				}
				bySeg[s].add(v.y[ti][li], 1)
			}
			leafShare[ti] = make([]lin, G)
			for g := 0; g < G; g++ {
				leafShare[ti][g] = lin{}
				for _, s := range sortedKeys(bySeg) {
					shareTerm(leafShare[ti][g], 1, s, g, bySeg[s], fmt.Sprintf("l%d", ti))
				}
				addScaled(resident[g], leafShare[ti][g], milpMemory*e.residentFactor(t)*t.Bytes*count)
			}
		}
		for _, h := range e.heldBounds(ti, have, v.x) {
			if !memoryBinds {
				break // no memory rows: the held columns would only burden the solver
			}
			c := col(fmt.Sprintf("held_%d_%s", ti, h.q), 0, 1, false)
			if heldCol[ti] == nil {
				heldCol[ti] = map[spmd.Layout]int{}
			}
			heldCol[ti][h.q] = c
			for _, lb := range h.lower {
				l := lin{c: 1}
				for lc, val := range lb {
					l.add(lc, -val)
				}
				row(fmt.Sprintf("held_%d", len(m.Rows)), 0, inf, l) // held ≥ lb
			}
			for g := 0; g < G; g++ {
				shareTerm(heldShare[ti][g], 1, layoutSeg(h.q), g, lin{c: 1}, fmt.Sprintf("h%d_%s", ti, h.q))
			}
		}
		if t.Kind == ir.Param {
			for g := 0; g < G; g++ {
				addScaled(update[g], leafShare[ti][g], milpTime*t.Update[e.Groups[g][0]])
			}
			for c, val := range have(ti, spmd.I) {
				gradT[ti].add(c, milpTime*e.collCoeffs(t, spmd.I).AllReduce*val)
			}
		}
		layouts := e.Layouts(ti)
		need := map[spmd.Layout]int{}
		if v.need == nil {
			v.need = make([]map[spmd.Layout]int, len(e.Tensors))
		}
		v.need[ti] = need
		needCol := func(q spmd.Layout) int {
			if c, ok := need[q]; ok {
				return c
			}
			// Binary: a fractional need(Identity) would weaken the
			// reduce-scatter's big-M rows below.
			c := col(fmt.Sprintf("need_%d_%s", ti, q), 0, 1, true)
			need[q] = c
			return c
		}
		for _, cs := range t.Consumers {
			for ri, r := range e.Classes[cs[0]].Rules {
				q := r.In[cs[1]]
				row(fmt.Sprintf("need_%d_%d_%d_%d", ti, cs[0], cs[1], ri), 0, inf, lin{needCol(q): 1, v.x[cs[0]][ri]: -1})
			}
		}
		produced := e.producible(ti)
		needI := needCol(spmd.I)
		// a2aPairs are the (made in h, read in q) Gathers of different
		// dimensions an all-to-all can convert between; a2a is 1 when the
		// choice converts them so (Choice.AllToAll).
		var a2aPairs [][2]spmd.Layout
		v.a2a[ti] = -1
		for _, q := range layouts {
			if _, needed := need[q]; !needed || q.Kind != spmd.Gather || e.opt.NoAllToAll || !t.allToAllCandidate() {
				continue
			}
			for _, h := range layouts {
				if produced[h] && h.Kind == spmd.Gather && h.Dim != q.Dim {
					a2aPairs = append(a2aPairs, [2]spmd.Layout{h, q})
				}
			}
		}
		if len(a2aPairs) > 0 {
			v.a2a[ti] = col(fmt.Sprintf("a2a_%d", ti), 0, 1, true)
		}
		// Gather needed from a different Gather goes through Identity —
		// unless, across dimensions, by all-to-all.
		for _, q := range layouts {
			c, needed := need[q]
			if !needed || q.Kind != spmd.Gather {
				continue
			}
			for _, h := range layouts {
				if produced[h] && h.Kind == spmd.Gather && h != q {
					l := lin{needI: 1, c: -1}
					for hc, val := range have(ti, h) {
						l.add(hc, -val)
					}
					if h.Dim != q.Dim && v.a2a[ti] >= 0 {
						l.add(v.a2a[ti], 1) // needI ≥ need(q) + have(h) − 1 − a2a
					}
					if !f.lean {
						row(fmt.Sprintf("closure_%d", len(m.Rows)), -1, inf, l)
					}
				}
			}
		}
		// An integer tensor crosses no collective: held in a layout other
		// than Identity, every consumer must read it as it is.
		if t.Integer {
			for _, h := range layouts {
				if !produced[h] || h.Kind == spmd.Identity {
					continue
				}
				for _, q := range layouts {
					c, needed := need[q]
					if !needed || q == h {
						continue
					}
					l := lin{c: 1}
					for hc, val := range have(ti, h) {
						l.add(hc, val)
					}
					row(fmt.Sprintf("integer_%d_%s_%s", ti, h, q), -inf, 1, l)
				}
			}
		}
		// Identity cannot become Reduce.
		if c, ok := need[spmd.R]; ok && produced[spmd.I] {
			l := lin{c: 1}
			for hc, val := range have(ti, spmd.I) {
				l.add(hc, val)
			}
			row(fmt.Sprintf("noIR_%d", ti), -inf, 1, l)
		}
		into := map[spmd.Layout][]int{}    // conv columns per layout they make
		convOf := map[[2]spmd.Layout]int{} // (made, from) → conv column
		// conv is 1 when need(q) ∧ have(h) [∧ ¬need(I)]: conv ≥ need + have − 1 − extra.
		conv := func(q, h spmd.Layout, minusNeedI bool) int {
			c := col(fmt.Sprintf("conv_%d_%s_%s", ti, h, q), 0, 1, false)
			collCols[ti] = append(collCols[ti], c)
			into[q] = append(into[q], c)
			convOf[[2]spmd.Layout{q, h}] = c
			l := lin{c: 1, need[q]: -1}
			for hc, val := range have(ti, h) {
				l.add(hc, -val)
			}
			if minusNeedI {
				l.add(needI, 1)
			}
			if !f.lean {
				row(fmt.Sprintf("conv_%d", len(m.Rows)), -1, inf, l)
			}
			return c
		}
		// methodCost adds the padded/grouped cost of an uneven collective on
		// conversion c over segment s (k: 0 all-gather, 1 reduce-scatter).
		// A method pruning fixed (prune.go) keeps its binary here, pinned
		// by Fix and started by StartValues at the kept method: without
		// the binary and the dominated method's row, CBC's node-limited
		// searches ran slower on the same plans.
		methodCost := func(c int, qi int, cf Coll, k, s int) {
			cf = cf.scaled(milpTime)
			// One method per (tensor, layout made), whichever layout it
			// is made from.
			if v.grouped[ti] == nil {
				v.grouped[ti] = map[int]int{}
			}
			g, ok := v.grouped[ti][qi]
			if !ok {
				g = col(fmt.Sprintf("grouped_%d_%d", ti, qi), 0, 1, true)
				v.grouped[ti][qi] = g
			}
			U := float64(e.Segs[s].Units)
			mPad := cf.PadA[k] + cf.PadB[k]*U
			mGrp := cf.GrpA[k]*float64(e.N) + cf.GrpB[k]*U
			tp := col(fmt.Sprintf("tpad_%d", group), 0, inf, false)
			tg := col(fmt.Sprintf("tgrp_%d", group), 0, inf, false)
			group++
			// tp ≥ PadA + PadB·max − M(1 − c) − M·g
			row(fmt.Sprintf("tpad_%d", group), cf.PadA[k]-mPad, inf, lin{tp: 1, mx[s]: -cf.PadB[k], c: -mPad, g: mPad})
			// tg ≥ GrpA·Σpieces + GrpB·U − M(1 − c) − M(1 − g)
			l := lin{tg: 1, c: -mGrp, g: -mGrp}
			for gr := 0; gr < G; gr++ {
				l.add(pieces[s][gr], -cf.GrpA[k])
			}
			row(fmt.Sprintf("tgrp_%d", group), cf.GrpB[k]*U-2*mGrp, inf, l)
			commT[ti].add(tp, 1)
			commT[ti].add(tg, 1)
			commBound[ti] += math.Max(mPad, mGrp)
			// Whatever the lengths and method, the conversion costs at
			// least its cheapest case: padded with the most even pieces, or
			// grouped with one non-empty piece.
			even := math.Ceil(U / float64(e.N))
			least := math.Min(cf.PadA[k]+cf.PadB[k]*even, cf.GrpA[k]+cf.GrpB[k]*U)
			row(fmt.Sprintf("least_%d", group), 0, inf, lin{tp: 1, tg: 1, c: -least})
		}
		for qi, q := range layouts {
			if _, ok := need[q]; !ok {
				continue
			}
			switch q.Kind {
			case spmd.Identity:
				if produced[spmd.R] {
					commT[ti].add(conv(spmd.I, spmd.R, false), milpTime*e.collCoeffs(t, spmd.I).AllReduce)
					commBound[ti] += milpTime * e.collCoeffs(t, spmd.I).AllReduce
				}
				for _, h := range layouts {
					if produced[h] && h.Kind == spmd.Gather {
						methodCost(conv(spmd.I, h, false), qi, e.collCoeffs(t, h), 0, h.Seg)
					}
				}
			case spmd.Gather:
				if produced[spmd.R] {
					methodCost(conv(q, spmd.R, true), qi, e.collCoeffs(t, q), 1, q.Seg)
				}
			}
		}
		// An all-to-all per pair the choice converts so: its time follows
		// the lengths of the layout it is made from, its adjoint's those
		// of the layout it makes (cost.AllToAllTerms: a maximum of linear
		// terms, each a row that holds when the conversion is made).
		// Until here every conversion's adjoint costs what it does.
		adjT[ti] = lin{}
		for c, val := range commT[ti] {
			adjT[ti].add(c, val)
		}
		least := milpTime * e.allToAllLeast(t)
		a2aConvOf := map[[2]spmd.Layout]int{} // (from, made) → all-to-all conv column
		fwdLeast, adjLeast := lin{}, lin{}
		for _, pr := range a2aPairs {
			h, q := pr[0], pr[1]
			c := col(fmt.Sprintf("conv_%d_%s_%s_a2a", ti, h, q), 0, 1, false)
			collCols[ti] = append(collCols[ti], c)
			into[q] = append(into[q], c)
			a2aConvOf[[2]spmd.Layout{h, q}] = c
			l := lin{c: 1, need[q]: -1, v.a2a[ti]: -1}
			for hc, val := range have(ti, h) {
				l.add(hc, -val)
			}
			if !f.lean {
				row(fmt.Sprintf("conv_%d", len(m.Rows)), -2, inf, l) // c ≥ need(q) + have(h) + a2a − 2
			}
			tf := a2aTime(fmt.Sprintf("a2a_%d_%s_%s", ti, h, q), c, ti, h)
			commT[ti].add(tf, 1)
			fwdLeast.add(tf, 1)
			fwdLeast.add(c, -least)
			if t.ReqGrad {
				tb := a2aTime(fmt.Sprintf("a2a_adj_%d_%s_%s", ti, h, q), c, ti, q)
				adjT[ti].add(tb, 1)
				adjLeast.add(tb, 1)
				adjLeast.add(c, -least)
			}
		}
		// Whatever the lengths, an all-to-all costs at least its least
		// time (the same either way: the whole tensor moves); without
		// these rows a fractional conversion makes it free (bert-base on
		// paper-64: root bound 0.36 s, with them 0.77 s as without
		// all-to-all). One row per tensor class, over the sum the
		// timeline charges, is as tight as one per conversion.
		if len(fwdLeast) > 0 {
			row(fmt.Sprintf("a2a_least_%d", ti), 0, inf, fwdLeast)
		}
		if len(adjLeast) > 0 {
			row(fmt.Sprintf("a2a_adj_least_%d", ti), 0, inf, adjLeast)
		}
		e.padRows(ti, v, need, produced, have, f.lean, padF, padB, col, row)
		sumB[ti] = make([]lin, G)
		for g := range G {
			sumB[ti][g] = lin{}
		}
		e.sumTreeRows(ti, v, produced, have, sumB[ti], col, row)
		if transport && !t.Integer { // an integer tensor is read as it is made
			e.transportRows(ti, have, v.x, produced, convs{made: convOf, allToAll: a2aConvOf}, col, row)
		}
		// Aggregated covers: a needed layout the tensor is not made in
		// must be converted into. The conv rows above charge each source
		// separately (conv ≥ need + have − 1), which a fractional LP point
		// satisfies at zero cost (need = have = ½); summed over the
		// sources, the charge is need − have(target). Valid at every
		// integer point (one source is had), they lift the LP bound:
		// mlp-tiny on v100-8 from 3.5 to 24.5 µs (optimum 126), bert-base
		// on paper-16 from 0.36 to 0.59 s (feasible 0.94).
		//
		// Into Identity: from Reduce by all-reduce, from each Gather by
		// all-gather, so Σ conv(I, ·) ≥ need(I) − have(I).
		if c, ok := need[spmd.I]; ok && !f.lean {
			l := lin{c: -1}
			for hc, val := range have(ti, spmd.I) {
				l.add(hc, val)
			}
			for _, cc := range into[spmd.I] {
				l.add(cc, 1)
			}
			row(fmt.Sprintf("intoI_%d", ti), 0, inf, l)
		}
		// Into a Gather q: free from q itself or from Identity; from
		// another Gather through Identity (the closure rows set need(I));
		// from Reduce by reduce-scatter or through Identity. So
		// conv(q, R) + need(I) ≥ need(q) − have(q) − have(I).
		for _, q := range layouts {
			c, ok := need[q]
			if !ok || q.Kind != spmd.Gather || f.lean {
				continue
			}
			l := lin{c: -1, needI: 1}
			for _, h := range []spmd.Layout{q, spmd.I} {
				for hc, val := range have(ti, h) {
					l.add(hc, val)
				}
			}
			for _, cc := range into[q] {
				l.add(cc, 1)
			}
			row(fmt.Sprintf("intoG_%d", len(m.Rows)), 0, inf, l)
		}
	}
	for _, k := range zetaOrder {
		l := lin{}
		for c, val := range zetaOf[k] {
			l.add(c, val)
		}
		U := float64(e.Segs[k.s].Units)
		for c, val := range zetaOn[k] {
			l.add(c, -U*val)
		}
		row(fmt.Sprintf("conserve_%s_%d", k.owner, k.s), 0, 0, l)
	}
	v.T = col("T", 0, inf, false)
	m.Cols[v.T].Obj = 1
	bigM := milpTime * e.timeBound()
	if limit > 0 {
		m.Cols[v.T].Upper = milpTime * limit * (1 + limitSlack)
		bigM = 2 * m.Cols[v.T].Upper
	}
	spreadComm, spreadAdj := e.spreadRows(v, commT, adjT, commBound, f.spreadRow, col, row)
	v.sync = e.timelineRows(v.T, fwdC, bwdC, wC, commT, adjT, gradT, update, padF, padB, sumB, spreadComm, spreadAdj, collCols, bigM, f, col, row)
	if memoryBinds {
		capped := f.lean && limit > 0
		transient := e.transientTerms(have, heldCol, v.need, capped, col, row)
		e.memoryRows(resident, leafShare, heldShare, transient, capped, col, row)
	}
	return m, v
}

// limitSlack widens MILPBelow's bound so that the choice whose cost it is
// stays feasible despite rounding in the solver.
const limitSlack = 1e-6

// scaled multiplies every time coefficient by f.
func (c Coll) scaled(f float64) Coll {
	for k := 0; k < 2; k++ {
		c.PadA[k] *= f
		c.PadB[k] *= f
		c.GrpA[k] *= f
		c.GrpB[k] *= f
	}
	c.AllReduce *= f
	return c
}

// ChoiceFrom reads a MILP solution back as a Choice.
func (e *Encoding) ChoiceFrom(v *MILPVars, x []float64) *Choice {
	ch := &Choice{Rule: make([]int, len(e.Classes)), Leaf: make([]int, len(e.Tensors)), Grouped: make([][]bool, len(e.Tensors))}
	argmax := func(cols []int) int {
		best := 0
		for i, c := range cols {
			if x[c] > x[cols[best]] {
				best = i
			}
		}
		return best
	}
	for ci := range e.Classes {
		ch.Rule[ci] = argmax(v.x[ci])
	}
	for ti := range e.Tensors {
		if v.y[ti] != nil {
			ch.Leaf[ti] = argmax(v.y[ti])
		}
		if c := v.a2a[ti]; c >= 0 && x[c] > 0.5 {
			if ch.AllToAll == nil {
				ch.AllToAll = make([]bool, len(e.Tensors))
			}
			ch.AllToAll[ti] = true
		}
		if v.grouped[ti] != nil {
			ch.Grouped[ti] = make([]bool, len(e.Layouts(ti)))
			for qi, c := range v.grouped[ti] {
				ch.Grouped[ti][qi] = x[c] > 0.5
			}
		}
	}
	for s := range e.Segs {
		ls := make([]int, e.N)
		for g := range e.Groups {
			e.spreadInGroup(ls, g, int(math.Round(x[v.L[s][g]])))
		}
		ch.Lengths = append(ch.Lengths, ls)
	}
	return ch
}

// GroupTotal is the units device group g holds of a segment split as
// lengths: what the MILP's L column for the group is.
func (e *Encoding) GroupTotal(lengths []int, g int) int {
	total := 0
	for _, d := range e.Groups[g] {
		total += lengths[d]
	}
	return total
}

// spreadInGroup gives group g's devices total units as the MILP prices
// them: evenly, the remainder one each to the group's first devices.
func (e *Encoding) spreadInGroup(lengths []int, g, total int) {
	for i, n := range spmd.EvenLengths(total, len(e.Groups[g])) {
		lengths[e.Groups[g][i]] = n
	}
}

// ShiftUnits returns one segment's lengths with k units moved from device
// group from to group to, each group's units spread over its devices as
// the MILP holds them (spreadInGroup).
func (e *Encoding) ShiftUnits(lengths []int, from, to, k int) []int {
	out := slices.Clone(lengths)
	e.spreadInGroup(out, from, e.GroupTotal(lengths, from)-k)
	e.spreadInGroup(out, to, e.GroupTotal(lengths, to)+k)
	return out
}

// SpreadInGroups rewrites ch's lengths as the MILP holds them: each
// device group's units spread evenly over its devices (spreadInGroup). A
// choice decoded from the MILP is already so; another (a start, a random
// choice) is then priced by Evaluate exactly as the MILP prices it.
func (e *Encoding) SpreadInGroups(ch *Choice) {
	for _, ls := range ch.Lengths {
		for g := range e.Groups {
			e.spreadInGroup(ls, g, e.GroupTotal(ls, g))
		}
	}
}

// sortedKeys is m's keys in increasing order: a deterministic MILP.
func sortedKeys[V any](m map[int]V) []int {
	return slices.Sorted(maps.Keys(m))
}

// addLinRow adds the row lo ≤ l ≤ hi to m, its coefficients in column
// order (so that the model's bytes do not depend on map order).
func addLinRow(m *milp.Model, name string, lo, hi float64, l lin) {
	r := milp.Row{Name: name, Lower: lo, Upper: hi}
	for c, val := range l {
		r.Coefs = append(r.Coefs, milp.Coef{Col: c, Val: val})
	}
	sortCoefs(r.Coefs)
	m.AddRow(r)
}

func sortCoefs(cs []milp.Coef) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].Col < cs[j-1].Col; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// Fix pins a model's decision columns to a choice (tests use it to price a
// given choice with the MILP).
func (e *Encoding) Fix(m *milp.Model, v *MILPVars, ch *Choice) {
	pin := func(c int, val float64) { m.Cols[c].Lower, m.Cols[c].Upper = val, val }
	for ci := range e.Classes {
		for ri, c := range v.x[ci] {
			pin(c, b2f(ri == ch.Rule[ci]))
		}
	}
	for ti := range e.Tensors {
		for li, c := range v.y[ti] {
			pin(c, b2f(li == ch.Leaf[ti]))
		}
		for qi, c := range v.grouped[ti] {
			pin(c, b2f(e.groupedAt(ch, ti, qi)))
		}
		if c := v.a2a[ti]; c >= 0 {
			pin(c, b2f(e.usesAllToAll(ch, ti)))
		}
	}
	for s := range e.Segs {
		for g, c := range v.L[s] {
			pin(c, float64(e.GroupTotal(ch.Lengths[s], g)))
		}
	}
	// The synchronisation binaries follow from the program alone.
	for _, sv := range v.sync {
		pin(sv.col, b2f(e.syncOn(ch, sv)))
	}
}

// syncOn is the value of synchronisation binary sv under ch: whether one
// of its tensor classes changes layout by a collective.
func (e *Encoding) syncOn(ch *Choice, sv syncVar) bool {
	for _, t := range sv.classes {
		if e.hasCollective(ch, t) {
			return true
		}
	}
	return false
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// StartValues gives the integer columns' values of a choice, as a MIP
// start: the solver completes the continuous columns and begins its search
// from this incumbent.
func (e *Encoding) StartValues(v *MILPVars, ch *Choice) map[int]float64 {
	st := map[int]float64{}
	for ci := range e.Classes {
		for ri, c := range v.x[ci] {
			st[c] = b2f(ri == ch.Rule[ci])
		}
	}
	for ti := range e.Tensors {
		for li, c := range v.y[ti] {
			st[c] = b2f(li == ch.Leaf[ti])
		}
		for qi, c := range v.grouped[ti] {
			st[c] = b2f(e.groupedAt(ch, ti, qi))
		}
		if c := v.a2a[ti]; c >= 0 {
			st[c] = b2f(e.usesAllToAll(ch, ti))
		}
		need := e.Needs(ch, ti)
		if _, via, err := e.tensorComm(ch, ti); err == nil && via {
			need = need.Add(spmd.I)
		}
		for q, c := range v.need[ti] {
			st[c] = b2f(need.Has(q))
		}
	}
	for s := range e.Segs {
		for g, c := range v.L[s] {
			total := e.GroupTotal(ch.Lengths[s], g)
			st[c] = float64(total)
			st[v.nz[s][g]] = b2f(total > 0)
			if f := v.full[s][g]; f >= 0 {
				st[f] = b2f(total >= len(e.Groups[g]))
			}
			if cc := v.ceil[s][g]; cc >= 0 {
				k := len(e.Groups[g])
				st[cc] = float64((total + k - 1) / k)
			}
		}
	}
	for _, sv := range v.sync {
		st[sv.col] = b2f(e.syncOn(ch, sv))
	}
	return st
}

// ChoiceOf expresses a program (a hand-written strategy's, say) as a
// choice of this encoding, matching segments by their units and keeping
// the methods of its all-gathers and reduce-scatters; ok is false
// when some op runs a rule the encoding does not offer, tied ops run
// different rules or tied tensors are made by different methods, and for
// mesh programs, which the encoding's 1-D layouts
// cannot express.
func (e *Encoding) ChoiceOf(p *spmd.Program) (ch *Choice, ok bool) {
	if p.Mesh != nil {
		return nil, false
	}
	segMap := map[int]int{}
	for ps, seg := range p.Segments {
		for es, eseg := range e.Segs {
			if eseg.Units == seg.Units {
				segMap[ps] = es
			}
		}
	}
	remap := func(l spmd.Layout) (spmd.Layout, bool) {
		if l.Kind != spmd.Gather {
			return l, true
		}
		s, ok := segMap[l.Seg]
		return spmd.G(l.Dim, s), ok
	}
	ch = &Choice{Rule: make([]int, len(e.Classes)), Leaf: make([]int, len(e.Tensors)), Grouped: make([][]bool, len(e.Tensors))}
	for i := range ch.Rule {
		ch.Rule[i] = -1
	}
	for _, in := range p.Instrs {
		if in.Kind != spmd.Compute {
			continue
		}
		ci := e.classOf[in.Op]
		want := spmd.Rule{In: make([]spmd.Layout, len(in.Rule.In)), Out: make([]spmd.Layout, len(in.Rule.Out))}
		for i, l := range in.Rule.In {
			if want.In[i], ok = remap(l); !ok {
				return nil, false
			}
		}
		for i, l := range in.Rule.Out {
			if want.Out[i], ok = remap(l); !ok {
				return nil, false
			}
		}
		found := -1
		for ri, r := range e.Classes[ci].Rules {
			if r.Equal(want) {
				found = ri
			}
		}
		if found < 0 || (ch.Rule[ci] >= 0 && ch.Rule[ci] != found) {
			return nil, false
		}
		ch.Rule[ci] = found
	}
	// The program's all-to-alls: the classes of the tensors they move make
	// their layouts so (where the encoding's canonical conversions allow,
	// which Evaluate decides).
	for _, in := range p.Instrs {
		if in.Kind == spmd.Comm && in.Collective == ir.OpAllToAll {
			if ch.AllToAll == nil {
				ch.AllToAll = make([]bool, len(e.Tensors))
			}
			ch.AllToAll[e.tclassOf[in.Tensor]] = true
		}
	}
	// The methods of its uneven collectives, per (tensor class, layout
	// made); tied tensors made by different methods are not a choice.
	method := map[[2]int]string{}
	for _, in := range p.Instrs {
		if in.Kind != spmd.Comm || (in.Collective != ir.OpAllGather && in.Collective != ir.OpReduceScatter) {
			continue
		}
		tc := e.tclassOf[in.Tensor]
		to, ok := remap(in.To)
		if !ok {
			return nil, false
		}
		qi := slices.Index(e.Layouts(tc), to)
		if qi < 0 {
			continue // no reader takes it: nothing to record (Evaluate prices what readers need)
		}
		m := in.Method
		if m != spmd.MethodGrouped {
			m = spmd.MethodPadded // "" and even: Decode writes padded, which runs even pieces evenly
		}
		if prev, seen := method[[2]int{tc, qi}]; seen && prev != m {
			return nil, false
		}
		method[[2]int{tc, qi}] = m
		if m == spmd.MethodGrouped {
			if ch.Grouped[tc] == nil {
				ch.Grouped[tc] = make([]bool, len(e.Layouts(tc)))
			}
			ch.Grouped[tc][qi] = true
		}
	}
	for _, lf := range p.Leaves {
		ti := e.tclassOf[lf.Tensor]
		l, ok := remap(lf.Layout)
		if !ok {
			return nil, false
		}
		found := -1
		for li, x := range e.Tensors[ti].LeafLayouts {
			if x == l {
				found = li
			}
		}
		if found < 0 {
			return nil, false
		}
		ch.Leaf[ti] = found
	}
	for es, seg := range e.Segs {
		ls := spmd.EvenLengths(seg.Units, e.N)
		for ps, x := range segMap {
			if x == es {
				ls = append([]int{}, p.Segments[ps].Lengths...)
			}
		}
		ch.Lengths = append(ch.Lengths, ls)
	}
	return ch, true
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
