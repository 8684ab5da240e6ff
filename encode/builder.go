package encode

import (
	"fmt"
	"math"

	"hap/milp"
	"hap/spmd"
)

// The MILP is built as a list of row families, in the manner of a
// compiler's pass list: each family adds the columns and rows of one idea
// (the lengths, the rule choices, a tensor's conversions, the timeline…),
// reading what the families before it made. The list below is the one
// place that says in which order they run and why; milpBuilder holds what
// they share. The order is also the order of the model's columns and rows,
// which TestMILPIsWhatItWas pins bit for bit: reordering two families that
// do not depend on each other changes no optimum, but it does change the
// solver's path, and so, under node limits, plans.

// rowFamily is one entry of the build: what it adds, which families it
// needs to have run before it, and why the model has it.
type rowFamily struct {
	name  string
	needs []string
	// adds says what columns and rows the family contributes.
	adds string
	// why says what the family buys: which plans it prices, or which
	// bound it lifts.
	why   string
	build func(*milpBuilder)
}

// milpFamilies is the build, in order. A family may need only families
// listed above it (TestMILPFamiliesAreOrdered).
func milpFamilies() []rowFamily {
	return []rowFamily{
		{name: "lengths", build: (*milpBuilder).lengths,
			adds: "per (segment, device group) its integer units L, their maximum, non-empty indicators, a group's first device's ⌈L/size⌉ and its non-empty pieces; Σ L = units",
			why:  "the uneven sharding ratios are the decision the paper adds to SPMD; pads and grouped collectives are priced from the maximum and the pieces"},
		{name: "rules", build: (*milpBuilder).ruleChoices,
			adds: "a binary per (op class, rule), one per class; the loss class only under rules that end Reduce",
			why:  "which sharding rule each op class runs is the program"},
		{name: "leaf layouts", build: (*milpBuilder).leafLayouts,
			adds: "a binary per (leaf tensor class, layout), one per class",
			why:  "leaves (parameters, inputs) have no producer whose rule fixes their layout"},
		{name: "compute", needs: []string{"lengths", "rules"}, build: (*milpBuilder).compute,
			adds: "each op class's forward, backward and parameter-gradient seconds per device group, as its share of the work (ζ = x·L, linearised) times its time, and the kernels' roofline extras",
			why:  "the timeline's compute terms, priced as Evaluate prices them"},
		{name: "tensors", needs: []string{"lengths", "rules", "leaf layouts"}, build: (*milpBuilder).tensors,
			adds: "per tensor class, the tensor families (tensorFamilies) in order",
			why:  "a tensor's memory, layout changes and their costs depend only on its producer's and readers' choices"},
		{name: "conservation", needs: []string{"compute", "tensors"}, build: (*milpBuilder).conservation,
			adds: "Σ_devices ζ = U·on for every choice whose share was linearised",
			why:  "holds at every integer point and lifts the LP bound from about 0 to the ideal compute time"},
		{name: "objective", build: (*milpBuilder).objective,
			adds: "the step T, the objective, bounded by the limit when one is given",
			why:  "the step is what the plan minimises; a known feasible step tightens every big M that follows"},
		{name: "spread", needs: []string{"tensors", "objective"}, build: (*milpBuilder).spread,
			adds: "where a leaf read in several blocks pays its layout change (spreadRows)",
			why:  "the timeline charges a change in one block; these rows say which"},
		{name: "timeline", needs: []string{"compute", "tensors", "spread", "objective"}, build: (*milpBuilder).timeline,
			adds: "T at least each of the timeline's terms per device group, and the streams' synchronisation binaries (timelineRows)",
			why:  "the objective is Evaluate's timeline, so that both price every choice the same"},
		{name: "memory", needs: []string{"tensors"}, build: (*milpBuilder).memory,
			adds: "each device's resident, held and transient bytes within its capacity (memoryRows), when memory may bind",
			why:  "a plan must fit; on models that fit whatever the choice the rows are left out"},
	}
}

// tensorFamily is one entry of the per-tensor-class build: run for each
// tensor class in turn, in the order of tensorFamilies, so that a class's
// columns and rows stay together.
type tensorFamily struct {
	name  string
	needs []string
	adds  string
	why   string
	build func(*milpBuilder, *tensorScope)
}

// tensorFamilies is the per-tensor-class build, in order
// (TestMILPFamiliesAreOrdered).
func tensorFamilies() []tensorFamily {
	return []tensorFamily{
		{name: "tensor memory", build: (*milpBuilder).tensorMemory,
			adds: "a leaf's share per group (resident bytes, its update's seconds), the held indicators of the layouts it may be held in, and a parameter's gradient all-reduce",
			why:  "memory and the update scale with the share a device holds"},
		{name: "needs", build: (*milpBuilder).needs,
			adds: "need(q) ≥ x for every reader rule reading layout q",
			why:  "conversions are charged from what is needed and what is had"},
		{name: "all-to-all pairs", needs: []string{"needs"}, build: (*milpBuilder).allToAllPairs,
			adds: "the binary a2a, when a Gather is needed across dimensions from a Gather that may be made",
			why:  "an all-to-all converts between Gathers without passing through Identity"},
		{name: "closure", needs: []string{"needs", "all-to-all pairs"}, build: (*milpBuilder).closure,
			adds: "need(I) ≥ need(q) + have(h) − 1 (− a2a) for Gathers q ≠ h",
			why:  "a Gather made from another Gather goes through Identity unless by all-to-all"},
		{name: "integer", needs: []string{"needs"}, build: (*milpBuilder).integer,
			adds: "a non-Identity integer tensor is read as it is made",
			why:  "integer tensors cross no collective"},
		{name: "identity not reduce", needs: []string{"needs"}, build: (*milpBuilder).identityNotReduce,
			adds: "need(R) + have(I) ≤ 1",
			why:  "Identity cannot become Reduce"},
		{name: "conversions", needs: []string{"needs"}, build: (*milpBuilder).conversions,
			adds: "a conversion column per costly (needed, had) pair, and each uneven collective's padded or grouped cost",
			why:  "the layout changes' seconds of the timeline's communication terms"},
		{name: "all-to-all conversions", needs: []string{"all-to-all pairs", "conversions"}, build: (*milpBuilder).allToAllConversions,
			adds: "the all-to-all conversions, their forward and adjoint times, and their least cost",
			why:  "an all-to-all's time follows the lengths it is made from, its adjoint's those it makes"},
		{name: "pads", needs: []string{"needs", "conversions"}, build: (*milpBuilder).pads,
			adds: "pads and slices of uneven pieces (padRows)",
			why:  "a Gather read as Reduce, or a gradient sliced, writes and reads memory"},
		{name: "sum tree", needs: []string{"needs"}, build: (*milpBuilder).sumTree,
			adds: "the adds of a gradient summed over several readers (sumTreeRows)",
			why:  "a tensor read by several ops accumulates its gradient"},
		{name: "transport", needs: []string{"conversions", "all-to-all conversions"}, build: (*milpBuilder).transport,
			adds: "the transport rows, in the forms that ask for them (transportRows)",
			why:  "they lift the proven bound's LP"},
		{name: "covers", needs: []string{"conversions", "all-to-all conversions"}, build: (*milpBuilder).covers,
			adds: "aggregated covers into Identity and into each Gather",
			why:  "summed over sources, a conversion is charged even at a fractional LP point"},
	}
}

// milpBuilder is one MILP under construction and what its families share.
type milpBuilder struct {
	e     *Encoding
	f     milpForm
	limit float64
	m     *milp.Model
	v     *MILPVars

	// groupOf is each device's group.
	groupOf []int
	// mx is per segment the column of its largest piece; pieces per
	// (segment, group) its non-empty pieces (lengths).
	mx     []int
	pieces [][]int

	// The linearised shares (shareTerm): the ζ counter, and per owner
	// and segment its columns over the devices and the choice they share.
	zeta      int
	zetaOf    map[zkey]lin
	zetaOn    map[zkey]lin
	zetaOrder []zkey

	// The timeline's terms (timeline.go), as expressions: forward and
	// backward seconds per (op class, group) and the backward's
	// parameter-gradient tail; per tensor class its layout changes' and
	// their adjoints' seconds, its gradient's all-reduce, its pads' and its
	// sum tree's seconds per group; per group its update's seconds.
	fwdC, bwdC, wC        [][]lin
	commT, adjT           []lin
	gradT                 []lin
	padF, padB, sumB      [][]lin
	update, resident      []lin
	leafShare             [][]lin
	heldShare             [][]lin
	heldCol               []map[spmd.Layout]int
	collCols              [][]int // per tensor class, its collective indicators
	commBound             []float64
	memoryBinds           bool
	a2aOf                 map[collKey]int
	methods               int // methodCost's counter, for column names
	bigM                  float64
	spreadComm, spreadAdj [][]int

	// rowsBy and colsBy count the rows and columns each family added
	// (familyRows).
	rowsBy, colsBy map[string]int
}

// zkey names one linearised share: its owner and segment.
type zkey struct {
	owner string
	s     int
}

// tensorScope is what the tensor families share about the class they build.
type tensorScope struct {
	ti       int
	t        *TensorClass
	layouts  []spmd.Layout
	produced map[spmd.Layout]bool
	need     map[spmd.Layout]int
	needI    int
	// a2aPairs are the (made in h, read in q) Gathers of different
	// dimensions an all-to-all can convert between.
	a2aPairs  [][2]spmd.Layout
	into      map[spmd.Layout][]int  // conv columns per layout they make
	convOf    map[[2]spmd.Layout]int // (made, from) → conv column
	a2aConvOf map[[2]spmd.Layout]int // (from, made) → all-to-all conv column
}

func newMILPBuilder(e *Encoding, limit float64, f milpForm) *milpBuilder {
	G, T := len(e.Groups), len(e.Tensors)
	b := &milpBuilder{e: e, f: f, limit: limit, m: &milp.Model{Sense: milp.Minimize}, v: &MILPVars{},
		zetaOf: map[zkey]lin{}, zetaOn: map[zkey]lin{}, a2aOf: map[collKey]int{}, rowsBy: map[string]int{}, colsBy: map[string]int{}}
	b.groupOf = make([]int, e.N)
	for g, devs := range e.Groups {
		for _, d := range devs {
			b.groupOf[d] = g
		}
	}
	b.commT, b.gradT, b.adjT = make([]lin, T), make([]lin, T), make([]lin, T)
	for ti := range b.commT {
		b.commT[ti], b.gradT[ti] = lin{}, lin{}
	}
	b.padF, b.padB, b.sumB = make([][]lin, T), make([][]lin, T), make([][]lin, T)
	b.update, b.resident = make([]lin, G), make([]lin, G)
	for d := range b.resident {
		b.update[d], b.resident[d] = lin{}, lin{}
	}
	b.leafShare, b.heldShare = make([][]lin, T), make([][]lin, T)
	b.heldCol = make([]map[spmd.Layout]int, T)
	b.collCols = make([][]int, T)
	b.commBound = make([]float64, T)
	b.memoryBinds = f.memory && e.MemoryMayBind()
	b.v.y = make([][]int, T)
	b.v.grouped = make([]map[int]int, T)
	b.v.a2a = make([]int, T)
	b.v.need = make([]map[spmd.Layout]int, T)
	return b
}

// build runs every family in order.
func (b *milpBuilder) build() {
	for _, fam := range milpFamilies() {
		rows, cols := len(b.m.Rows), len(b.m.Cols)
		fam.build(b)
		b.rowsBy[fam.name] += len(b.m.Rows) - rows
		b.colsBy[fam.name] += len(b.m.Cols) - cols
	}
}

// tensors runs the tensor families for each tensor class in turn.
func (b *milpBuilder) tensors() {
	fams := tensorFamilies()
	for ti := range b.e.Tensors {
		s := b.newTensorScope(ti)
		for _, fam := range fams {
			rows, cols := len(b.m.Rows), len(b.m.Cols)
			fam.build(b, s)
			b.rowsBy[fam.name] += len(b.m.Rows) - rows
			b.colsBy[fam.name] += len(b.m.Cols) - cols
		}
	}
}

func (b *milpBuilder) newTensorScope(ti int) *tensorScope {
	need := map[spmd.Layout]int{}
	b.v.need[ti] = need
	return &tensorScope{ti: ti, t: &b.e.Tensors[ti], layouts: b.e.Layouts(ti), produced: b.e.producible(ti), need: need,
		into: map[spmd.Layout][]int{}, convOf: map[[2]spmd.Layout]int{}, a2aConvOf: map[[2]spmd.Layout]int{}}
}

// col adds a column.
func (b *milpBuilder) col(name string, lo, hi float64, integer bool) int {
	return b.m.AddCol(milp.Col{Name: name, Lower: lo, Upper: hi, Integer: integer})
}

// row adds the row lo ≤ l ≤ hi.
func (b *milpBuilder) row(name string, lo, hi float64, l lin) { addLinRow(b.m, name, lo, hi, l) }

// size is the devices of group g.
func (b *milpBuilder) size(g int) float64 { return float64(len(b.e.Groups[g])) }

// have is the expression that is 1 when tensor class ti is produced in
// layout l: its producer's rules that make l, or its leaf layout.
func (b *milpBuilder) have(ti int, l spmd.Layout) lin {
	e, v := b.e, b.v
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

// objective adds the step T and its bound.
func (b *milpBuilder) objective() {
	v, m := b.v, b.m
	v.T = b.col("T", 0, math.Inf(1), false)
	m.Cols[v.T].Obj = 1
	b.bigM = milpTime * b.e.timeBound()
	if b.limit > 0 {
		m.Cols[v.T].Upper = milpTime * b.limit * (1 + limitSlack)
		b.bigM = 2 * m.Cols[v.T].Upper
	}
}

// spread places a spread leaf's layout change (timeline.go).
func (b *milpBuilder) spread() {
	b.spreadComm, b.spreadAdj = b.e.spreadRows(b.v, b.commT, b.adjT, b.commBound, b.f.spreadRow, b.col, b.row)
}

// timeline makes T at least the timeline's every term (timeline.go).
func (b *milpBuilder) timeline() { b.v.sync = b.e.timelineRows(b) }

// memory bounds each device's bytes (memory.go).
func (b *milpBuilder) memory() {
	if !b.memoryBinds {
		return
	}
	capped := b.f.lean && b.limit > 0
	transient := b.e.transientTerms(b.have, b.heldCol, b.v.need, capped, b.col, b.row)
	b.e.memoryRows(b.resident, b.leafShare, b.heldShare, transient, capped, b.col, b.row)
}

// familyRows is how many rows and columns each family adds to the MILP
// of form f: what a test needs to know that a case exercises a family.
func (e *Encoding) familyRows(limit float64, f milpForm) (rows, cols map[string]int) {
	b := newMILPBuilder(e, limit, f)
	b.build()
	return b.rowsBy, b.colsBy
}

// checkFamilies reports a family that needs one not listed before it, or
// is listed twice.
func checkFamilies() error {
	seen := map[string]bool{}
	check := func(list, name string, needs []string) error {
		if seen[name] {
			return fmt.Errorf("%s: family %q is listed twice", list, name)
		}
		for _, n := range needs {
			if !seen[n] {
				return fmt.Errorf("%s: family %q needs %q, which is not listed before it", list, name, n)
			}
		}
		seen[name] = true
		return nil
	}
	for _, f := range milpFamilies() {
		if err := check("milpFamilies", f.name, f.needs); err != nil {
			return err
		}
	}
	for _, f := range tensorFamilies() {
		if err := check("tensorFamilies", f.name, f.needs); err != nil {
			return err
		}
	}
	return nil
}
