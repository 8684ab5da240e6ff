package encode

import (
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

// milpBelow is MILPBelow in the form f selects: the row families of
// milpFamilies, in order (builder.go).
func (e *Encoding) milpBelow(limit float64, f milpForm) (*milp.Model, *MILPVars) {
	b := newMILPBuilder(e, limit, f)
	b.build()
	return b.m, b.v
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
